/* The checks every trace reader's output must pass, shared by the trace
 * fuzz targets (trace_check.c has the details). */
#ifndef HC_FUZZ_TRACE_CHECK_H
#define HC_FUZZ_TRACE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "hintcache/trace.h"

/* Reads data[size] as a trace in `format` (HC_TRACE_AUTO: detected) through
 * hc_trace_open on a memory file, and checks what it gives. */
void fuzz_trace_check (const uint8_t *data, size_t size, enum hc_trace_format format);

/* The gzip side of the door: data[0] picks raw bytes, a gzip of the rest
 * compared with the plain rest, or such a gzip cut short. */
void fuzz_trace_gzip (const uint8_t *data, size_t size);

#endif /* HC_FUZZ_TRACE_CHECK_H */
