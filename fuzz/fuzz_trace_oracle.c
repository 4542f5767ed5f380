/* Fuzzes the oracle trace reader: the input is read as libCacheSim's
 * oracleGeneral binary records (24 bytes each, no header), with the format
 * given (HC_TRACE_ORACLE), through the public door (hc_trace_open on a
 * memory file, hc_trace_next, hc_trace_read).
 *
 * Beyond not crashing (trace_check.c has the details): requests have their
 * fields in range; one at a time and in batches give the same requests,
 * end and errors; strict mode gives a prefix of the lenient requests; and
 * the requests written in the bin form read back the same.
 */
#include "trace_check.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_trace_check (data, size, HC_TRACE_ORACLE);
  return 0;
}
