/* Fuzzes gzip-compressed traces through the same door as plain ones
 * (every format can be read compressed: the reader passes plain input
 * through and inflates gzip with zlib).  The first byte picks what the
 * rest is: bytes as they are (a damaged gzip, say), a gzip the target
 * makes of them, or that gzip cut short.
 *
 * Beyond not crashing: a gzip reads exactly as the bytes it holds (same
 * format detected, requests, strings, skipped lines and end); a gzip cut
 * short gives a prefix of those requests and ends with -EIO, never a
 * silently short trace; and the checks of every reader (trace_check.c).
 */
#include "trace_check.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fuzz_trace_gzip (data, size);
  return 0;
}
