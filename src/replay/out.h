/* The report's output: a growable buffer with sticky errors, escaping for
 * HTML, and numbers formatted without the locale (out.c). */
#ifndef HC_REPLAY_OUT_H
#define HC_REPLAY_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Errors are sticky: a failed append marks the buffer and later appends do
 * nothing, so the writers check once, at the end. */
struct hc_out {
  char *p;
  size_t len, cap;
  bool failed;
};

/* Appends n bytes, or a NUL-terminated string, verbatim (trusted markup). */
void hc_out_n (struct hc_out *o, const char *s, size_t n);
void hc_out_s (struct hc_out *o, const char *s);

/* Appends formatted text; only for markup and integers (printf's %f follows
 * the locale). */
void hc_out_fmt (struct hc_out *o, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Appends at most n bytes of s (stopping at a NUL), or all of s, escaped
 * for HTML text and attribute values alike. */
void hc_out_esc_n (struct hc_out *o, const char *s, size_t n);
void hc_out_esc (struct hc_out *o, const char *s);

/* Appends v with `dec` decimals; a pixel coordinate (a tenth of a pixel);
 * a count with thousands separators. */
void hc_out_fixed (struct hc_out *o, double v, int dec);
void hc_out_px (struct hc_out *o, double v);
void hc_out_count (struct hc_out *o, uint64_t v);

/* Locale-free formatting into buf: v with `dec` decimals (0 … 6; "–" if not
 * finite), the same with trailing zeros dropped, a count with an SI suffix
 * ("1.5M"), a latency in µs with its unit ("1.5 ms"), a byte count in
 * decimal units ("1.25 GB"; trailing zeros dropped if trim). */
void hc_fmt_fixed (char *buf, size_t len, double v, int dec);
void hc_fmt_trim (char *buf, size_t len, double v, int dec);
void hc_fmt_si (char *buf, size_t len, double v);
void hc_fmt_us (char *buf, size_t len, double us);
void hc_fmt_bytes (char *buf, size_t len, double v, bool trim);

#endif
