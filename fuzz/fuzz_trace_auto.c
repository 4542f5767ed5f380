/* Fuzzes trace format detection: the input is read with HC_TRACE_AUTO
 * through the public door (hc_trace_open on a memory file), which probes
 * every format's reader on the first lines or records and picks the surest.
 *
 * Beyond not crashing: the checks of every reader (trace_check.c) on the
 * format chosen, and the same input opened with that format given
 * explicitly reads exactly as detected.
 */
#include "trace_check.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_trace_check (data, size, HC_TRACE_AUTO);
  return 0;
}
