/* The report's output: a growable buffer with sticky errors, escaping for
 * HTML, and numbers formatted by integer arithmetic, so that the decimal
 * point is always '.' whatever the caller's locale (a comma would break SVG
 * coordinates).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"


/* Makes room for n more bytes and a NUL.  Returns false once out of memory. */
static bool
out_reserve (struct hc_out *o, size_t n)
{
  size_t cap;
  char *p;

  if (o->failed)
    return false;
  if (o->cap > o->len && n < o->cap - o->len)
    return true;
  cap = o->cap ? o->cap : 16384;
  while (cap - o->len <= n) {
    if (cap > SIZE_MAX / 2) {
      o->failed = true;
      return false;
    }
    cap *= 2;
  }
  p = realloc (o->p, cap);
  if (!p) {
    o->failed = true;
    return false;
  }
  o->p = p;
  o->cap = cap;
  return true;
}

/* Appends n bytes verbatim. */
void
hc_out_n (struct hc_out *o, const char *s, size_t n)
{
  if (!out_reserve (o, n))
    return;
  memcpy (o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = '\0';
}

/* Appends trusted markup verbatim. */
void
hc_out_s (struct hc_out *o, const char *s)
{
  hc_out_n (o, s, strlen (s));
}

/* Appends formatted text; only for markup and integers (see the top). */
void
hc_out_fmt (struct hc_out *o, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (o->failed)
    return;
  va_start (ap, fmt);
  n = vsnprintf (o->p ? o->p + o->len : NULL, o->p ? o->cap - o->len : 0, fmt, ap);
  va_end (ap);
  if (n < 0) {
    o->failed = true;
    return;
  }
  if (o->p && (size_t) n < o->cap - o->len) {
    o->len += (size_t) n;
    return;
  }
  if (!out_reserve (o, (size_t) n))
    return;
  va_start (ap, fmt);
  vsnprintf (o->p + o->len, o->cap - o->len, fmt, ap);
  va_end (ap);
  o->len += (size_t) n;
}

/* Appends at most n bytes of s (stopping at a NUL) escaped for text and
 * attribute values alike.  Control characters other than tab and newline
 * are not allowed in HTML, so they become U+FFFD rather than vanish. */
void
hc_out_esc_n (struct hc_out *o, const char *s, size_t n)
{
  for (size_t i = 0; i < n && s[i]; i++) {
    unsigned char c = (unsigned char) s[i];

    switch (c) {
    case '&': hc_out_s (o, "&amp;"); break;
    case '<': hc_out_s (o, "&lt;"); break;
    case '>': hc_out_s (o, "&gt;"); break;
    case '"': hc_out_s (o, "&quot;"); break;
    case '\'': hc_out_s (o, "&#39;"); break;
    default:
      if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
        hc_out_s (o, "\xef\xbf\xbd");
      else
        hc_out_n (o, (const char *) &c, 1);
    }
  }
}

/* Appends a NUL-terminated string escaped. */
void
hc_out_esc (struct hc_out *o, const char *s)
{
  hc_out_esc_n (o, s, SIZE_MAX);
}

/* ---- Numbers, locale-free. ---- */

/* Formats v with `dec` decimals (0 … 6) into buf by integer arithmetic, so
 * the decimal point is always '.'; non-finite values give "–". */
void
hc_fmt_fixed (char *buf, size_t len, double v, int dec)
{
  static const long long pow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000 };
  long long n, s;
  bool neg;

  if (!isfinite (v)) {
    snprintf (buf, len, "\xe2\x80\x93");
    return;
  }
  if (dec < 0)
    dec = 0;
  if (dec > 6)
    dec = 6;
  /* Beyond 2^62 the integer route would overflow; such values have no
   * meaningful fraction anyway, and %.0f prints no decimal point. */
  if (fabs (v) * (double) pow10[dec] >= 4.6e18) {
    snprintf (buf, len, "%.0f", v);
    return;
  }
  s = pow10[dec];
  n = llround (v * (double) s);
  neg = n < 0;
  if (neg)
    n = -n;
  if (dec == 0)
    snprintf (buf, len, "%s%lld", neg ? "-" : "", n);
  else
    snprintf (buf, len, "%s%lld.%0*lld", neg ? "-" : "", n / s, dec, n % s);
}

/* Like hc_fmt_fixed, with trailing zeros of the fraction removed ("2.50" →
 * "2.5", "3.00" → "3"): tick labels read better short. */
void
hc_fmt_trim (char *buf, size_t len, double v, int dec)
{
  char *dot, *end;

  hc_fmt_fixed (buf, len, v, dec);
  dot = strchr (buf, '.');
  if (!dot)
    return;
  end = buf + strlen (buf);
  while (end > dot + 1 && end[-1] == '0')
    *--end = '\0';
  if (end == dot + 1)
    *dot = '\0';
}

/* Appends v with `dec` decimals. */
void
hc_out_fixed (struct hc_out *o, double v, int dec)
{
  char buf[64];

  hc_fmt_fixed (buf, sizeof buf, v, dec);
  hc_out_s (o, buf);
}

/* Appends a pixel coordinate: a tenth of a pixel is finer than any screen
 * needs and keeps the page small. */
void
hc_out_px (struct hc_out *o, double v)
{
  char buf[64];

  hc_fmt_trim (buf, sizeof buf, isfinite (v) ? v : 0, 1);
  hc_out_s (o, buf);
}

/* Appends a count with thousands separators: seven-digit counts are read
 * far more easily as 1,234,567. */
void
hc_out_count (struct hc_out *o, uint64_t v)
{
  char digits[32], buf[48];
  int n = snprintf (digits, sizeof digits, "%llu", (unsigned long long) v), j = 0;

  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0)
      buf[j++] = ',';
    buf[j++] = digits[i];
  }
  buf[j] = '\0';
  hc_out_s (o, buf);
}

/* Formats a count compactly with an SI suffix ("500", "20k", "1.5M") for
 * tick labels, where width matters more than the last digit. */
void
hc_fmt_si (char *buf, size_t len, double v)
{
  static const char *const suffix[] = { "", "k", "M", "G", "T", "P" };
  unsigned k = 0;
  char num[48];

  while (fabs (v) >= 1000 && k < 5) {
    v /= 1000;
    k++;
  }
  hc_fmt_trim (num, sizeof num, v, 2);
  snprintf (buf, len, "%s%s", num, suffix[k]);
}

/* Formats a latency in µs with the unit a reader would pick ("250 µs",
 * "1.5 ms", "2 s"). */
void
hc_fmt_us (char *buf, size_t len, double us)
{
  const char *unit = "\xc2\xb5s";
  char num[48];

  if (us >= 1e6)
    us /= 1e6, unit = "s";
  else if (us >= 1e3)
    us /= 1e3, unit = "ms";
  hc_fmt_trim (num, sizeof num, us, 2);
  snprintf (buf, len, "%s %s", num, unit);
}

/* Formats a byte count in decimal units ("0 B", "750 MB", "1.25 GB"), the
 * units flash endurance is quoted in; three significant digits, trailing
 * zeros dropped if `trim` (tick labels) and kept otherwise (values side by
 * side: "2.30 GB" next to "2.54 GB"). */
void
hc_fmt_bytes (char *buf, size_t len, double v, bool trim)
{
  static const char *const unit[] = { "B", "kB", "MB", "GB", "TB", "PB", "EB" };
  unsigned k = 0;
  char num[48];

  while (v >= 1000 && k < 6) {
    v /= 1000;
    k++;
  }
  (trim ? hc_fmt_trim : hc_fmt_fixed) (num, sizeof num, v,
                                       k == 0 ? 0 : v < 10 ? 2 : v < 100 ? 1 : 0);
  snprintf (buf, len, "%s %s", num, unit[k]);
}
