/* report: a replay's results as one self-contained HTML page.
 *
 * The page is meant to be mailed around or attached to a ticket, so it
 * depends on nothing: no scripts, no fonts, no images, only inline CSS and
 * three inline SVG plots drawn here — miss ratio against cache size (one
 * line per strategy, for the hint-aware policy when the grid has it, plus
 * the oracle and Belady bounds), read-latency CDFs at the largest cache
 * size, and flash bytes written at the largest cache size as bars.  A
 * strategy keeps its colour and marker in every plot and in the table, and
 * the palette is Okabe and Ito's, which stays distinct for the colour-blind;
 * markers differ too, so a grey print still separates the lines.
 *
 * Every string that reaches the page — title, policy names, strategy names —
 * is escaped, and the policy field is read with its length bound because it
 * is a fixed array that may fill up.  Numbers are formatted without printf's
 * %f/%g, whose decimal point follows the caller's locale: a comma would
 * break SVG coordinates.  Output depends only on the input (no dates), so
 * two reports of one replay compare equal.  Degenerate input — no rows, one
 * cache size, no accesses, NaN latencies — gives empty plots with a note
 * instead of an error.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hintcache/replay.h"

/* ---- A growable output buffer. ---- */

/* Errors are sticky: a failed append marks the buffer and later appends do
 * nothing, so the writers check once, at the end. */
struct out {
  char *p;
  size_t len, cap;
  bool failed;
};

/* Makes room for n more bytes and a NUL.  Returns false once out of memory. */
static bool
out_reserve (struct out *o, size_t n)
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
static void
put_n (struct out *o, const char *s, size_t n)
{
  if (!out_reserve (o, n))
    return;
  memcpy (o->p + o->len, s, n);
  o->len += n;
  o->p[o->len] = '\0';
}

/* Appends trusted markup verbatim. */
static void
put_s (struct out *o, const char *s)
{
  put_n (o, s, strlen (s));
}

/* Appends formatted text; only for markup and integers (see the top). */
static void __attribute__ ((format (printf, 2, 3)))
put (struct out *o, const char *fmt, ...)
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
static void
put_esc_n (struct out *o, const char *s, size_t n)
{
  for (size_t i = 0; i < n && s[i]; i++) {
    unsigned char c = (unsigned char) s[i];

    switch (c) {
    case '&': put_s (o, "&amp;"); break;
    case '<': put_s (o, "&lt;"); break;
    case '>': put_s (o, "&gt;"); break;
    case '"': put_s (o, "&quot;"); break;
    case '\'': put_s (o, "&#39;"); break;
    default:
      if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
        put_s (o, "\xef\xbf\xbd");
      else
        put_n (o, (const char *) &c, 1);
    }
  }
}

/* Appends a NUL-terminated string escaped. */
static void
put_esc (struct out *o, const char *s)
{
  put_esc_n (o, s, SIZE_MAX);
}

/* ---- Numbers, locale-free. ---- */

/* Formats v with `dec` decimals (0 … 6) into buf by integer arithmetic, so
 * the decimal point is always '.'; non-finite values give "–". */
static void
fmt_fixed (char *buf, size_t len, double v, int dec)
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

/* Like fmt_fixed, with trailing zeros of the fraction removed ("2.50" →
 * "2.5", "3.00" → "3"): tick labels read better short. */
static void
fmt_trim (char *buf, size_t len, double v, int dec)
{
  char *dot, *end;

  fmt_fixed (buf, len, v, dec);
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
static void
put_fixed (struct out *o, double v, int dec)
{
  char buf[64];

  fmt_fixed (buf, sizeof buf, v, dec);
  put_s (o, buf);
}

/* Appends a pixel coordinate: a tenth of a pixel is finer than any screen
 * needs and keeps the page small. */
static void
put_px (struct out *o, double v)
{
  char buf[64];

  fmt_trim (buf, sizeof buf, isfinite (v) ? v : 0, 1);
  put_s (o, buf);
}

/* Appends a count with thousands separators: seven-digit counts are read
 * far more easily as 1,234,567. */
static void
put_count (struct out *o, uint64_t v)
{
  char digits[32], buf[48];
  int n = snprintf (digits, sizeof digits, "%llu", (unsigned long long) v), j = 0;

  for (int i = 0; i < n; i++) {
    if (i && (n - i) % 3 == 0)
      buf[j++] = ',';
    buf[j++] = digits[i];
  }
  buf[j] = '\0';
  put_s (o, buf);
}

/* Formats a count compactly with an SI suffix ("500", "20k", "1.5M") for
 * tick labels, where width matters more than the last digit. */
static void
fmt_si (char *buf, size_t len, double v)
{
  static const char *const suffix[] = { "", "k", "M", "G", "T", "P" };
  unsigned k = 0;
  char num[48];

  while (fabs (v) >= 1000 && k < 5) {
    v /= 1000;
    k++;
  }
  fmt_trim (num, sizeof num, v, 2);
  snprintf (buf, len, "%s%s", num, suffix[k]);
}

/* Formats a latency in µs with the unit a reader would pick ("250 µs",
 * "1.5 ms", "2 s"). */
static void
fmt_us (char *buf, size_t len, double us)
{
  const char *unit = "\xc2\xb5s";
  char num[48];

  if (us >= 1e6)
    us /= 1e6, unit = "s";
  else if (us >= 1e3)
    us /= 1e3, unit = "ms";
  fmt_trim (num, sizeof num, us, 2);
  snprintf (buf, len, "%s %s", num, unit);
}

/* Formats a byte count in decimal units ("0 B", "750 MB", "1.25 GB"), the
 * units flash endurance is quoted in; three significant digits, trailing
 * zeros dropped if `trim` (tick labels) and kept otherwise (values side by
 * side: "2.30 GB" next to "2.54 GB"). */
static void
fmt_bytes (char *buf, size_t len, double v, bool trim)
{
  static const char *const unit[] = { "B", "kB", "MB", "GB", "TB", "PB", "EB" };
  unsigned k = 0;
  char num[48];

  while (v >= 1000 && k < 6) {
    v /= 1000;
    k++;
  }
  (trim ? fmt_trim : fmt_fixed) (num, sizeof num, v, k == 0 ? 0 : v < 10 ? 2 : v < 100 ? 1 : 0);
  snprintf (buf, len, "%s %s", num, unit[k]);
}

/* ---- The histogram's buckets. ---- */

/* Read latencies are binned 8 buckets per octave starting at 1 µs: a
 * latency of l µs goes to bucket ⌊8·log2 l⌋, so bucket i holds
 * [2^(i/8), 2^((i+1)/8)) and its upper bound is 2^((i+1)/8) µs — each bound
 * 9 % above the one before, fine enough for a percentile to within a few
 * percent, coarse enough for a small fixed array.  Bucket 0 also holds
 * everything under 1 µs, and the last, HC_LAT_BUCKETS−1 (nominally up to
 * 2^(HC_LAT_BUCKETS/8) µs), everything slower.  Out-of-range i gives +∞. */
double
hc_lat_bucket_us (unsigned i)
{
  if (i >= HC_LAT_BUCKETS)
    return INFINITY;
  return exp2 ((double) (i + 1) / 8.0);
}

/* The lower edge of bucket i in µs (bucket 0 is drawn from 1 µs). */
static double
bucket_lo_us (unsigned i)
{
  return exp2 ((double) i / 8.0);
}

/* ---- Series: what a line in a plot stands for. ---- */

/* Strategies other than the oracle are series 0 … 3 in enum order; the
 * oracle and Belady's MIN are bounds and get their own. */
enum {
  S_ORACLE = HC_STRATEGY_ORACLE,
  S_BELADY,
  S_OTHER,
  NSERIES
};

enum marker { M_CIRCLE, M_SQUARE, M_TRIANGLE, M_DIAMOND, M_CROSS, M_DOWN };

/* Grey for the unhinted baseline; the bounds are dashed so they read as
 * limits rather than contenders. */
static const struct {
  const char *color;
  const char *dash; /* NULL: solid */
  enum marker marker;
} series_style[NSERIES] = {
  [HC_STRATEGY_NONE] = { "#7a7a7a", NULL, M_CIRCLE },
  [HC_STRATEGY_PROCESS] = { "#0072b2", NULL, M_SQUARE },
  [HC_STRATEGY_FILE] = { "#e69f00", NULL, M_TRIANGLE },
  [HC_STRATEGY_IO] = { "#009e73", NULL, M_DIAMOND },
  [S_ORACLE] = { "#1a1a1a", "7 4", M_CROSS },
  [S_BELADY] = { "#cc79a7", "3 3", M_DOWN },
  [S_OTHER] = { "#d55e00", NULL, M_CIRCLE },
};

/* True if the row's policy (a fixed array, maybe unterminated) is `name`. */
static bool
policy_is (const struct hc_replay_row *r, const char *name)
{
  size_t n = strnlen (r->policy, sizeof r->policy);

  return n == strlen (name) && memcmp (r->policy, name, n) == 0;
}

/* The series a row belongs to. */
static unsigned
series_of (const struct hc_replay_row *r)
{
  if (r->strategy == HC_STRATEGY_ORACLE)
    return S_ORACLE;
  if (policy_is (r, "belady"))
    return S_BELADY;
  if ((unsigned) r->strategy < HC_STRATEGY_ORACLE)
    return (unsigned) r->strategy;
  return S_OTHER;
}

/* Appends a row's strategy name, escaped (an unknown value as a number). */
static void
put_strategy (struct out *o, const struct hc_replay_row *r)
{
  const char *name = hc_strategy_name ((unsigned) r->strategy);

  if (name)
    put_esc (o, name);
  else
    put (o, "strategy %u", (unsigned) r->strategy);
}

/* Appends the label of a series in a legend. */
static void
put_series_label (struct out *o, unsigned s, const struct hc_replay_row *r)
{
  if (s == S_BELADY)
    put_s (o, "belady (MIN)");
  else if (s == S_ORACLE)
    put_s (o, "oracle (bound)");
  else
    put_strategy (o, r);
}

/* What the plots show of a grid with several policies. */
struct view {
  const struct hc_replay_row *rows;
  size_t nrows;
  char policy[sizeof ((struct hc_replay_row *) 0)->policy + 1]; /* "" if none */
  uint64_t max_blocks;
};

/* True if a row is drawn in the line plots: the bounds always, the
 * strategies only under the chosen policy, so that each strategy is one
 * line. */
static bool
plotted (const struct view *v, const struct hc_replay_row *r)
{
  unsigned s = series_of (r);

  if (s == S_ORACLE || s == S_BELADY)
    return true;
  return s != S_OTHER && v->policy[0] && policy_is (r, v->policy);
}

/* Picks the policy the line plots use — hintaware, which hints were made
 * for, if the grid has it, else the first — and the largest cache size. */
static void
view_init (struct view *v, const struct hc_replay_row *rows, size_t nrows)
{
  const struct hc_replay_row *first = NULL;

  memset (v, 0, sizeof *v);
  v->rows = rows;
  v->nrows = nrows;
  for (size_t i = 0; i < nrows; i++) {
    if (rows[i].cache_blocks > v->max_blocks)
      v->max_blocks = rows[i].cache_blocks;
    if (series_of (&rows[i]) >= S_ORACLE)
      continue;
    if (!first || (!policy_is (first, "hintaware") && policy_is (&rows[i], "hintaware")))
      first = &rows[i];
  }
  if (first)
    memcpy (v->policy, first->policy, strnlen (first->policy, sizeof first->policy));
}

/* A ratio, or NaN when there is nothing to divide. */
static double
ratio (uint64_t a, uint64_t b)
{
  return b ? (double) a / (double) b : NAN;
}

/* ---- SVG plotting. ---- */

enum label_kind { L_PLAIN, L_SI, L_US, L_BYTES };

/* One axis: a data range mapped onto a pixel range. */
struct axis {
  double lo, hi; /* data range, lo < hi (and lo > 0 on a log axis) */
  double p0, p1; /* pixels for lo and hi */
  bool log;
  enum label_kind kind;
};

/* The pixel for data value v. */
static double
axis_map (const struct axis *a, double v)
{
  double t;

  if (a->log)
    t = (log10 (v) - log10 (a->lo)) / (log10 (a->hi) - log10 (a->lo));
  else
    t = (v - a->lo) / (a->hi - a->lo);
  return a->p0 + t * (a->p1 - a->p0);
}

/* The smallest of 1, 2 and 5 × 10^k at least v (v > 0): steps that make
 * tick labels easy to read. */
static double
nice_step (double v)
{
  double e = pow (10, floor (log10 (v))), m = v / e;

  return (m <= 1.000001 ? 1 : m <= 2.000001 ? 2 : m <= 5.000001 ? 5 : 10) * e;
}

/* v rounded up to a multiple of a nice step a fifth of its size, for the
 * top of an axis: 0.21 becomes 0.25, not 0.5. */
static double
nice_ceil (double v)
{
  double st = nice_step (v / 5);

  return ceil (v / st - 1e-9) * st;
}

/* Formats a tick label; `step` sets the decimals of plain labels. */
static void
fmt_tick (char *buf, size_t len, const struct axis *a, double v, double step)
{
  switch (a->kind) {
  case L_SI: fmt_si (buf, len, v); break;
  case L_US: fmt_us (buf, len, v); break;
  case L_BYTES: fmt_bytes (buf, len, v, true); break;
  default: fmt_trim (buf, len, v, step >= 1 ? 0 : (int) ceil (-log10 (step) - 1e-9)); break;
  }
}

/* Collects up to `max` tick values of an axis; `labelled[i]` says whether
 * tick i gets a label.  A log axis labels every 1 … 9 × 10^k when it spans
 * less than a decade, 1, 2 and 5 up to two and a half, only the powers of
 * ten beyond (the rest are light grid lines), so labels never crowd.  Returns the count and the
 * step of a linear axis in *step. */
static unsigned
axis_ticks (const struct axis *a, double *v, bool *labelled, unsigned max, double *step)
{
  unsigned n = 0;

  *step = 1;
  if (a->log) {
    double span = log10 (a->hi) - log10 (a->lo);
    int k0 = (int) floor (log10 (a->lo)), k1 = (int) ceil (log10 (a->hi));

    for (int k = k0; k <= k1; k++)
      for (int m = 1; m <= 9; m++) {
        double t = m * pow (10, k);
        bool major = m == 1 || span <= 0.8 || (span <= 2.5 && (m == 2 || m == 5));

        if (t < a->lo * 0.999999 || t > a->hi * 1.000001 || n >= max)
          continue;
        if (!major && span > 6)
          continue;
        v[n] = t;
        labelled[n++] = major;
      }
    return n;
  }
  *step = nice_step ((a->hi - a->lo) / 5);
  double first = ceil (a->lo / *step - 1e-9) * *step;
  for (unsigned i = 0; n < max; i++) {
    double t = first + i * *step;

    if (t > a->hi + *step * 1e-9)
      break;
    v[n] = fabs (t) < *step * 1e-9 ? 0 : t;
    labelled[n++] = true;
  }
  return n;
}

/* Opens an SVG element of the given size with an accessible title. */
static void
svg_open (struct out *o, unsigned w, unsigned h, const char *title)
{
  put (o, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %u %u\" width=\"%u\" "
       "height=\"%u\" role=\"img\"><title>", w, h, w, h);
  put_esc (o, title);
  put_s (o, "</title>\n");
}

/* Appends a text element; `anchor` is start, middle or end. */
static void
svg_text (struct out *o, double x, double y, const char *anchor, const char *cls, const char *text)
{
  put_s (o, "<text x=\"");
  put_px (o, x);
  put_s (o, "\" y=\"");
  put_px (o, y);
  put (o, "\" text-anchor=\"%s\"%s%s%s>", anchor, cls ? " class=\"" : "", cls ? cls : "",
       cls ? "\"" : "");
  put_esc (o, text);
  put_s (o, "</text>\n");
}

/* Appends a line from (x1, y1) to (x2, y2) styled by a CSS class. */
static void
svg_line (struct out *o, const char *cls, double x1, double y1, double x2, double y2)
{
  put (o, "<line class=\"%s\" x1=\"", cls);
  put_px (o, x1);
  put_s (o, "\" y1=\"");
  put_px (o, y1);
  put_s (o, "\" x2=\"");
  put_px (o, x2);
  put_s (o, "\" y2=\"");
  put_px (o, y2);
  put_s (o, "\"/>\n");
}

/* Draws the frame, grid lines, ticks and their labels, and the axis titles
 * of a plot area spanned by x and y (y.p0 is the bottom). */
static void
draw_axes (struct out *o, const struct axis *x, const struct axis *y, const char *xtitle,
           const char *ytitle)
{
  double tv[64], step;
  bool lab[64];
  char buf[64];
  unsigned n;

  /* Grid first, so that lines and markers are drawn over it. */
  n = axis_ticks (x, tv, lab, 64, &step);
  for (unsigned i = 0; i < n; i++) {
    double px = axis_map (x, tv[i]);

    svg_line (o, lab[i] ? "grid" : "minor", px, y->p0, px, y->p1);
    if (!lab[i])
      continue;
    svg_line (o, "axis", px, y->p0, px, y->p0 + 5);
    fmt_tick (buf, sizeof buf, x, tv[i], step);
    svg_text (o, px, y->p0 + 20, "middle", "tick", buf);
  }
  n = axis_ticks (y, tv, lab, 64, &step);
  for (unsigned i = 0; i < n; i++) {
    double py = axis_map (y, tv[i]);

    svg_line (o, lab[i] ? "grid" : "minor", x->p0, py, x->p1, py);
    if (!lab[i])
      continue;
    svg_line (o, "axis", x->p0 - 5, py, x->p0, py);
    fmt_tick (buf, sizeof buf, y, tv[i], step);
    svg_text (o, x->p0 - 9, py + 4.5, "end", "tick", buf);
  }
  put_s (o, "<rect class=\"frame\" x=\"");
  put_px (o, x->p0);
  put_s (o, "\" y=\"");
  put_px (o, y->p1);
  put_s (o, "\" width=\"");
  put_px (o, x->p1 - x->p0);
  put_s (o, "\" height=\"");
  put_px (o, y->p0 - y->p1);
  put_s (o, "\"/>\n");
  if (xtitle)
    svg_text (o, (x->p0 + x->p1) / 2, y->p0 + 44, "middle", "label", xtitle);
  if (ytitle) {
    double cx = x->p0 - 56, cy = (y->p0 + y->p1) / 2;

    put_s (o, "<text class=\"label\" text-anchor=\"middle\" transform=\"translate(");
    put_px (o, cx);
    put_s (o, " ");
    put_px (o, cy);
    put_s (o, ") rotate(-90)\">");
    put_esc (o, ytitle);
    put_s (o, "</text>\n");
  }
}

/* Draws a marker of a series centred at (x, y). */
static void
draw_marker (struct out *o, unsigned s, double x, double y)
{
  const char *c = series_style[s].color;

  switch (series_style[s].marker) {
  case M_SQUARE:
    put_s (o, "<rect x=\"");
    put_px (o, x - 4);
    put_s (o, "\" y=\"");
    put_px (o, y - 4);
    put (o, "\" width=\"8\" height=\"8\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  case M_TRIANGLE:
  case M_DOWN: {
    double d = series_style[s].marker == M_TRIANGLE ? 1 : -1;

    put_s (o, "<path d=\"M");
    put_px (o, x);
    put_s (o, " ");
    put_px (o, y - 5.5 * d);
    put_s (o, "L");
    put_px (o, x + 5);
    put_s (o, " ");
    put_px (o, y + 3.5 * d);
    put_s (o, "L");
    put_px (o, x - 5);
    put_s (o, " ");
    put_px (o, y + 3.5 * d);
    put (o, "Z\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  }
  case M_DIAMOND:
    put_s (o, "<path d=\"M");
    put_px (o, x);
    put_s (o, " ");
    put_px (o, y - 5.5);
    put_s (o, "l5.5 5.5l-5.5 5.5l-5.5 -5.5Z\"");
    put (o, " fill=\"%s\" class=\"mk\"/>", c);
    break;
  case M_CROSS:
    put_s (o, "<path d=\"M");
    put_px (o, x - 4.5);
    put_s (o, " ");
    put_px (o, y - 4.5);
    put_s (o, "l9 9m0 -9l-9 9\"");
    put (o, " stroke=\"%s\" stroke-width=\"2.5\" fill=\"none\"/>", c);
    break;
  default:
    put_s (o, "<circle cx=\"");
    put_px (o, x);
    put_s (o, "\" cy=\"");
    put_px (o, y);
    put (o, "\" r=\"4.5\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  }
  put_s (o, "\n");
}

/* Opens a polyline of a series; the caller appends points and closes it. */
static void
polyline_open (struct out *o, unsigned s)
{
  put (o, "<polyline class=\"series\" stroke=\"%s\"", series_style[s].color);
  if (series_style[s].dash)
    put (o, " stroke-dasharray=\"%s\"", series_style[s].dash);
  put_s (o, " points=\"");
}

/* Appends one point of a polyline. */
static void
polyline_point (struct out *o, double x, double y)
{
  put_px (o, x);
  put_s (o, ",");
  put_px (o, y);
  put_s (o, " ");
}

/* Draws one legend entry at (x, y): a line sample with the marker, and the
 * label of series s for row r (r may be NULL for a bound). */
static void
legend_entry (struct out *o, double x, double y, unsigned s, const struct hc_replay_row *r,
              const char *suffix)
{
  polyline_open (o, s);
  polyline_point (o, x, y);
  polyline_point (o, x + 30, y);
  put_s (o, "\"/>\n");
  draw_marker (o, s, x + 15, y);
  put_s (o, "<text class=\"legend\" x=\"");
  put_px (o, x + 40);
  put_s (o, "\" y=\"");
  put_px (o, y + 4.5);
  put_s (o, "\">");
  put_series_label (o, s, r);
  if (suffix)
    put_esc (o, suffix);
  put_s (o, "</text>\n");
}

/* Draws an empty plot area with a note saying why it is empty. */
static void
draw_empty (struct out *o, unsigned w, unsigned h, const char *title, const char *note)
{
  svg_open (o, w, h, title);
  put (o, "<rect class=\"frame\" x=\"70\" y=\"20\" width=\"%u\" height=\"%u\"/>\n", w - 90,
       h - 60);
  svg_text (o, w / 2.0, h / 2.0, "middle", "note", note);
  put_s (o, "</svg>\n");
}

#define PLOT_W 960u
#define PLOT_H 440u
#define PLOT_L 80.0   /* left margin: tick labels and the y title */
#define PLOT_R 720.0  /* right edge of the plot area; the legend is beyond */
#define PLOT_T 20.0
#define PLOT_B 370.0  /* bottom edge; tick labels and the x title below */

/* A point of a line plot. */
struct pt {
  double x, y;
};

/* Orders points by x, for drawing lines left to right. */
static int
pt_cmp (const void *a, const void *b)
{
  const struct pt *p = a, *q = b;

  return (p->x > q->x) - (p->x < q->x);
}

/* Collects the points (cache blocks, miss ratio) of series s, sorted by
 * size; rows without accesses have no miss ratio and are left out. */
static size_t
miss_points (const struct view *v, unsigned s, struct pt *p, const struct hc_replay_row **label)
{
  size_t n = 0;

  *label = NULL;
  for (size_t i = 0; i < v->nrows; i++) {
    const struct hc_replay_row *r = &v->rows[i];
    double y = ratio (r->misses, r->accesses);

    if (series_of (r) != s || !plotted (v, r))
      continue;
    if (!*label)
      *label = r;
    if (!isfinite (y) || r->cache_blocks == 0)
      continue;
    p[n++] = (struct pt) { (double) r->cache_blocks, y };
  }
  qsort (p, n, sizeof *p, pt_cmp);
  return n;
}

/* Plot (a): miss ratio against cache size, one line per series.  A log x
 * axis when the sizes span more than a factor of four, since grids are
 * usually geometric (1 %, 5 %, 25 % …). */
static int
plot_miss (struct out *o, const struct view *v)
{
  struct pt *p = malloc ((v->nrows ? v->nrows : 1) * sizeof *p);
  const struct hc_replay_row *label;
  double xmin = INFINITY, xmax = 0, ymax = 0;
  size_t total = 0;

  if (!p)
    return -ENOMEM;
  for (unsigned s = 0; s < NSERIES; s++) {
    size_t n = miss_points (v, s, p, &label);

    for (size_t i = 0; i < n; i++) {
      xmin = fmin (xmin, p[i].x);
      xmax = fmax (xmax, p[i].x);
      ymax = fmax (ymax, p[i].y);
    }
    total += n;
  }
  if (!total) {
    free (p);
    draw_empty (o, PLOT_W, PLOT_H, "Miss ratio against cache size",
                "No data: no row has block accesses.");
    return 0;
  }

  struct axis x = { .p0 = PLOT_L, .p1 = PLOT_R, .kind = L_SI };
  struct axis y = { .p0 = PLOT_B, .p1 = PLOT_T, .lo = 0, .kind = L_PLAIN };

  if (xmin == xmax) {
    x.log = true, x.lo = xmin / 2, x.hi = xmax * 2;
  } else if (xmax / xmin > 4) {
    double pad = pow (xmax / xmin, 0.06);

    x.log = true, x.lo = xmin / pad, x.hi = xmax * pad;
  } else {
    double pad = (xmax - xmin) * 0.08;

    x.lo = fmax (0, xmin - pad), x.hi = xmax + pad;
  }
  y.hi = ymax > 0 ? fmin (1, nice_ceil (ymax * 1.08)) : 1;

  svg_open (o, PLOT_W, PLOT_H, "Miss ratio against cache size");
  draw_axes (o, &x, &y, x.log ? "cache size (blocks, log scale)" : "cache size (blocks)",
             "miss ratio");

  double ly = PLOT_T + 12;
  for (unsigned s = 0; s < NSERIES; s++) {
    size_t n = miss_points (v, s, p, &label);

    if (!label)
      continue;
    if (n > 1) {
      polyline_open (o, s);
      for (size_t i = 0; i < n; i++)
        polyline_point (o, axis_map (&x, p[i].x), axis_map (&y, p[i].y));
      put_s (o, "\"/>\n");
    }
    for (size_t i = 0; i < n; i++) {
      char buf[64];

      put_s (o, "<g>");
      draw_marker (o, s, axis_map (&x, p[i].x), axis_map (&y, p[i].y));
      put_s (o, "<title>");
      put_series_label (o, s, label);
      put_s (o, ": ");
      put_count (o, (uint64_t) p[i].x);
      put_s (o, " blocks, miss ratio ");
      fmt_fixed (buf, sizeof buf, p[i].y, 4);
      put_s (o, buf);
      put_s (o, "</title></g>\n");
    }
    legend_entry (o, PLOT_R + 24, ly, s, label, n ? NULL : " (no accesses)");
    ly += 24;
  }
  put_s (o, "</svg>\n");
  free (p);
  return 0;
}

/* The row of series s the CDF and bar plots show: the first plotted row of
 * that series at the largest cache size. */
static const struct hc_replay_row *
row_at_max (const struct view *v, unsigned s)
{
  for (size_t i = 0; i < v->nrows; i++) {
    const struct hc_replay_row *r = &v->rows[i];

    if (r->cache_blocks == v->max_blocks && series_of (r) == s && plotted (v, r))
      return r;
  }
  return NULL;
}

/* The first and last non-empty buckets of a row; false if it has none. */
static bool
hist_span (const struct hc_replay_row *r, unsigned *first, unsigned *last)
{
  bool any = false;

  for (unsigned i = 0; i < HC_LAT_BUCKETS; i++)
    if (r->latency_hist[i]) {
      if (!any)
        *first = i;
      *last = i;
      any = true;
    }
  return any;
}

/* Plot (b): cumulative fraction of reads against latency at the largest
 * cache size.  Points sit at bucket bounds and are joined by straight lines
 * (on the log axis), the usual reading of a histogram with no detail inside
 * a bucket. */
static int
plot_cdf (struct out *o, const struct view *v)
{
  unsigned lo_b = HC_LAT_BUCKETS, hi_b = 0;

  for (unsigned s = 0; s < NSERIES; s++) {
    const struct hc_replay_row *r = row_at_max (v, s);
    unsigned f = 0, l = 0;

    if (r && hist_span (r, &f, &l)) {
      lo_b = f < lo_b ? f : lo_b;
      hi_b = l > hi_b ? l : hi_b;
    }
  }
  if (lo_b == HC_LAT_BUCKETS) {
    draw_empty (o, PLOT_W, PLOT_H, "Read latency CDF",
                "No data: no reads at the largest cache size.");
    return 0;
  }

  struct axis x = { .p0 = PLOT_L, .p1 = PLOT_R, .log = true, .kind = L_US };
  struct axis y = { .p0 = PLOT_B, .p1 = PLOT_T, .lo = 0, .hi = 1, .kind = L_PLAIN };

  /* Whole decades: the eye finds 10 µs, 100 µs, 1 ms at once. */
  x.lo = pow (10, floor (log10 (bucket_lo_us (lo_b)) + 1e-9));
  x.hi = pow (10, ceil (log10 (hc_lat_bucket_us (hi_b)) - 1e-9));
  if (x.hi <= x.lo)
    x.hi = x.lo * 10;

  svg_open (o, PLOT_W, PLOT_H, "Read latency CDF");
  draw_axes (o, &x, &y, "read latency (log scale)", "fraction of reads");

  double ly = PLOT_T + 12;
  for (unsigned s = 0; s < NSERIES; s++) {
    const struct hc_replay_row *r = row_at_max (v, s);
    uint64_t total = 0, cum = 0;
    unsigned f = 0, l = 0;

    if (!r)
      continue;
    for (unsigned i = 0; i < HC_LAT_BUCKETS; i++)
      total += r->latency_hist[i];
    if (!total || !hist_span (r, &f, &l)) {
      legend_entry (o, PLOT_R + 24, ly, s, r, " (no reads)");
      ly += 24;
      continue;
    }
    polyline_open (o, s);
    polyline_point (o, axis_map (&x, bucket_lo_us (f)), axis_map (&y, 0));
    for (unsigned i = f; i <= l; i++) {
      cum += r->latency_hist[i];
      polyline_point (o, axis_map (&x, hc_lat_bucket_us (i)),
                      axis_map (&y, (double) cum / (double) total));
    }
    polyline_point (o, axis_map (&x, x.hi), axis_map (&y, 1));
    put_s (o, "\"/>\n");
    legend_entry (o, PLOT_R + 24, ly, s, r, NULL);
    ly += 24;
  }
  put_s (o, "</svg>\n");
  return 0;
}

/* Plot (c): flash bytes written by each row at the largest cache size, as
 * horizontal bars labelled with strategy and policy. */
static int
plot_flash (struct out *o, const struct view *v)
{
  const double left = 230, right = PLOT_W - 110.0, top = 14, bar = 20, gap = 10;
  uint64_t max = 0;
  size_t n = 0;
  char buf[64];

  for (size_t i = 0; i < v->nrows; i++)
    if (v->rows[i].cache_blocks == v->max_blocks) {
      n++;
      if (v->rows[i].flash_bytes_written > max)
        max = v->rows[i].flash_bytes_written;
    }
  if (!n) {
    draw_empty (o, PLOT_W, 200, "Flash bytes written", "No data: no rows.");
    return 0;
  }

  double bottom = top + (double) n * (bar + gap);
  unsigned h = (unsigned) (bottom + 66);
  struct axis x = { .p0 = left, .p1 = right, .lo = 0, .kind = L_BYTES };
  double tv[64], step;
  bool lab[64];
  unsigned nt;

  x.hi = max ? nice_ceil ((double) max * 1.02) : 1e6;
  svg_open (o, PLOT_W, h, "Flash bytes written");
  /* Only vertical grid lines: horizontal ones would cut through the bars. */
  nt = axis_ticks (&x, tv, lab, 64, &step);
  for (unsigned i = 0; i < nt; i++) {
    double px = axis_map (&x, tv[i]);

    svg_line (o, "grid", px, top, px, bottom + 5);
    fmt_tick (buf, sizeof buf, &x, tv[i], step);
    svg_text (o, px, bottom + 20, "middle", "tick", buf);
  }
  svg_line (o, "axis", left, top, left, bottom);
  svg_line (o, "axis", left, bottom, right, bottom);
  svg_text (o, (left + right) / 2, bottom + 44, "middle", "label",
            "flash bytes written (decimal units)");

  double by = top + gap / 2;
  for (size_t i = 0; i < v->nrows; i++) {
    const struct hc_replay_row *r = &v->rows[i];
    unsigned s = series_of (r);
    double w = axis_map (&x, (double) r->flash_bytes_written) - left;

    if (r->cache_blocks != v->max_blocks)
      continue;
    put_s (o, "<g><title>");
    put_strategy (o, r);
    put_s (o, " / ");
    put_esc_n (o, r->policy, sizeof r->policy);
    put_s (o, ": ");
    put_count (o, r->flash_bytes_written);
    put_s (o, " bytes</title>\n<rect x=\"");
    put_px (o, left);
    put_s (o, "\" y=\"");
    put_px (o, by);
    put_s (o, "\" width=\"");
    put_px (o, w > 0 ? w : 0);
    put_s (o, "\" height=\"");
    put_px (o, bar);
    put (o, "\" fill=\"%s\"", series_style[s].color);
    if (series_style[s].dash)
      put_s (o, " fill-opacity=\"0.75\"");
    put_s (o, "/>\n<text class=\"tick\" text-anchor=\"end\" x=\"");
    put_px (o, left - 10);
    put_s (o, "\" y=\"");
    put_px (o, by + bar / 2 + 4.5);
    put_s (o, "\">");
    put_strategy (o, r);
    put_s (o, " \xc2\xb7 ");
    put_esc_n (o, r->policy, sizeof r->policy);
    put_s (o, "</text>\n<text class=\"value\" x=\"");
    put_px (o, left + (w > 0 ? w : 0) + 8);
    put_s (o, "\" y=\"");
    put_px (o, by + bar / 2 + 4.5);
    put_s (o, "\">");
    fmt_bytes (buf, sizeof buf, (double) r->flash_bytes_written, false);
    put_esc (o, buf);
    put_s (o, "</text></g>\n");
    by += bar + gap;
  }
  put_s (o, "</svg>\n");
  return 0;
}

/* ---- The page. ---- */

static const char style_sheet[] =
  "body{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,\"DejaVu Sans\",sans-serif;"
  "color:#1d1d1f;background:#fff;max-width:1000px;margin:24px auto;padding:0 16px;"
  "line-height:1.45}\n"
  "h1{font-size:1.6em;margin:0 0 .3em}h2{font-size:1.2em;margin:1.8em 0 .3em}\n"
  "p.cap{margin:.2em 0 .6em;color:#444;font-size:.92em}\n"
  "dl.facts{display:grid;grid-template-columns:max-content auto;gap:.15em 1.2em;margin:.8em 0}\n"
  "dl.facts dt{color:#555}dl.facts dd{margin:0;font-variant-numeric:tabular-nums}\n"
  "table{border-collapse:collapse;font-size:.88em;font-variant-numeric:tabular-nums}\n"
  "th,td{padding:.25em .5em;border-bottom:1px solid #e3e3e3;white-space:nowrap}\n"
  "th{background:#f4f4f6;text-align:right;font-weight:600;border-bottom:2px solid #c9c9cf;"
  "white-space:normal;vertical-align:bottom}\n"
  "th.t{text-align:left}\n"
  "td.n{text-align:right}tbody tr:nth-child(even){background:#fafafb}\n"
  "i.sw{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.45em;"
  "vertical-align:-.05em}\n"
  "figure{margin:0}svg{max-width:100%;height:auto;display:block}\n"
  "svg text{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,\"DejaVu Sans\","
  "sans-serif;fill:#1d1d1f}\n"
  "svg .tick{font-size:12px;fill:#333}svg .label{font-size:13px;font-weight:600}\n"
  "svg .legend{font-size:13px}svg .value{font-size:12px;fill:#333}\n"
  "svg .note{font-size:15px;fill:#666}\n"
  "svg .grid{stroke:#e2e2e6;stroke-width:1}svg .minor{stroke:#f1f1f4;stroke-width:1}\n"
  "svg .axis{stroke:#555;stroke-width:1}svg .frame{fill:none;stroke:#888;stroke-width:1}\n"
  "svg .series{fill:none;stroke-width:2.2;stroke-linejoin:round;stroke-linecap:round}\n"
  "svg .mk{stroke:#fff;stroke-width:1}\n";

/* Appends one "term: value" pair of the trace summary. */
static void
fact (struct out *o, const char *term)
{
  put_s (o, "<dt>");
  put_esc (o, term);
  put_s (o, "</dt><dd>");
}

/* The header: title and what the trace held. */
static void
write_header (struct out *o, const struct hc_replay_summary *sm, const char *title)
{
  put_s (o, "<h1>");
  put_esc (o, title);
  put_s (o, "</h1>\n");
  if (!sm) {
    put_s (o, "<p class=\"cap\">No trace summary was given.</p>\n");
    return;
  }
  put_s (o, "<dl class=\"facts\">\n");
  fact (o, "Requests");
  put_count (o, sm->requests);
  put_s (o, " (reads ");
  put_count (o, sm->reads);
  put_s (o, ", writes ");
  put_count (o, sm->writes);
  put_s (o, ", discards ");
  put_count (o, sm->discards);
  put_s (o, ", flushes ");
  put_count (o, sm->flushes);
  put_s (o, ")</dd>\n");
  fact (o, "Block accesses");
  put_count (o, sm->block_accesses);
  put_s (o, "</dd>\n");
  fact (o, "Footprint");
  put_count (o, sm->footprint_blocks);
  put_s (o, " blocks (");
  put_fixed (o, (double) sm->footprint_blocks * 4096.0 / 1073741824.0, 2);
  put_s (o, " GiB at 4 KiB)</dd>\n");
  fact (o, "Skipped lines");
  put_count (o, sm->skipped_lines);
  if (sm->skipped_lines && sm->first_bad_line) {
    put_s (o, " (the first is line ");
    put_count (o, sm->first_bad_line);
    put_s (o, ")");
  }
  put_s (o, "</dd>\n</dl>\n");
}

/* Appends a table cell holding a ratio or latency, "–" when undefined. */
static void
cell_fixed (struct out *o, double v, int dec)
{
  put_s (o, "<td class=\"n\">");
  put_fixed (o, v, dec);
  put_s (o, "</td>");
}

/* Appends a table cell holding a count. */
static void
cell_count (struct out *o, uint64_t v)
{
  put_s (o, "<td class=\"n\">");
  put_count (o, v);
  put_s (o, "</td>");
}

/* The results table, one row per replay row in the order given. */
static void
write_table (struct out *o, const struct hc_replay_row *rows, size_t nrows)
{
  put_s (o, "<h2>Results</h2>\n");
  if (!nrows) {
    put_s (o, "<p class=\"cap\">No results: the replay produced no rows.</p>\n");
    return;
  }
  put_s (o, "<p class=\"cap\">Latencies are of read requests under the hybrid-drive timing "
         "model; flash MB are 10<sup>6</sup> bytes (admissions and write hits); slow-tier "
         "ops count requests to the slow tier, reads and writes.</p>\n"
         "<table>\n<thead><tr><th class=\"t\">Strategy</th><th class=\"t\">Policy</th>"
         "<th>Cache blocks</th>"
         "<th>Accesses</th><th>Miss ratio</th><th>Read miss ratio</th>"
         "<th>Mean read \xc2\xb5s</th><th>p99 read \xc2\xb5s</th><th>Flash MB written</th>"
         "<th>Slow-tier ops</th></tr></thead>\n<tbody>\n");
  for (size_t i = 0; i < nrows; i++) {
    const struct hc_replay_row *r = &rows[i];

    put (o, "<tr><td><i class=\"sw\" style=\"background:%s\"></i>",
         series_style[series_of (r)].color);
    put_strategy (o, r);
    put_s (o, "</td><td>");
    put_esc_n (o, r->policy, sizeof r->policy);
    put_s (o, "</td>");
    cell_count (o, r->cache_blocks);
    cell_count (o, r->accesses);
    cell_fixed (o, ratio (r->misses, r->accesses), 4);
    cell_fixed (o, ratio (r->read_misses, r->read_accesses), 4);
    cell_fixed (o, r->read_requests ? r->mean_read_latency_us : NAN, 1);
    cell_fixed (o, r->read_requests ? r->p99_read_latency_us : NAN, 1);
    cell_fixed (o, (double) r->flash_bytes_written / 1e6, 1);
    put (o, "<td class=\"n\" title=\"%llu reads, %llu writes\">",
         (unsigned long long) r->slow_reads, (unsigned long long) r->slow_writes);
    put_count (o, r->slow_reads + r->slow_writes);
    put_s (o, "</td></tr>\n");
  }
  put_s (o, "</tbody>\n</table>\n");
}

/* True if a plotted row at the largest size has reads in the last bucket,
 * which also holds everything slower than its nominal bound. */
static bool
overflowed (const struct view *v)
{
  for (unsigned s = 0; s < NSERIES; s++) {
    const struct hc_replay_row *r = row_at_max (v, s);

    if (r && r->latency_hist[HC_LAT_BUCKETS - 1])
      return true;
  }
  return false;
}

/* The three figures, each with a heading and a caption that says which
 * rows it shows. */
static int
write_plots (struct out *o, const struct view *v)
{
  char buf[64];
  int rc;

  put_s (o, "<h2>Miss ratio against cache size</h2>\n<p class=\"cap\">");
  if (v->policy[0]) {
    put_s (o, "Strategies under the <b>");
    put_esc (o, v->policy);
    put_s (o, "</b> policy");
  } else {
    put_s (o, "No strategy rows under an engine policy");
  }
  put_s (o, "; <i>oracle</i> is Belady's optimal replacement with bypass (the bound for every "
         "policy), <i>belady</i> is MIN admitting every miss.</p>\n<figure>\n");
  if ((rc = plot_miss (o, v)) < 0)
    return rc;
  put_s (o, "</figure>\n");

  put_s (o, "<h2>Read latency at the largest cache size</h2>\n<p class=\"cap\">");
  if (v->nrows) {
    put_s (o, "Cumulative fraction of read requests at ");
    put_count (o, v->max_blocks);
    put_s (o, " blocks, one line per strategy as in the plot above; buckets are 1/8 octave "
           "wide, joined by straight lines.");
    if (overflowed (v)) {
      fmt_us (buf, sizeof buf, hc_lat_bucket_us (HC_LAT_BUCKETS - 1));
      put_s (o, " The last bucket also counts every read slower than ");
      put_esc (o, buf);
      put_s (o, ", so curves reach 1 there.");
    }
  } else {
    put_s (o, "No rows.");
  }
  put_s (o, "</p>\n<figure>\n");
  if ((rc = plot_cdf (o, v)) < 0)
    return rc;
  put_s (o, "</figure>\n");

  put_s (o, "<h2>Flash bytes written at the largest cache size</h2>\n<p class=\"cap\">");
  if (v->nrows) {
    put_s (o, "Every row at ");
    put_count (o, v->max_blocks);
    put_s (o, " blocks, all policies: bytes written to flash by admissions and write "
           "hits — the wear a strategy costs.");
  } else {
    put_s (o, "No rows.");
  }
  put_s (o, "</p>\n<figure>\n");
  if ((rc = plot_flash (o, v)) < 0)
    return rc;
  put_s (o, "</figure>\n");
  return 0;
}

/* Writes the page.  rows may be NULL only when nrows is 0; summary and
 * title may be NULL.  Returns 0, -EINVAL for missing pointers, or -ENOMEM
 * (*html untouched). */
int
hc_replay_report_html (const struct hc_replay_row *rows, size_t nrows,
                       const struct hc_replay_summary *summary, const char *title, char **html,
                       size_t *len)
{
  struct out o = { 0 };
  struct view v;
  int rc;

  if (!html || (!rows && nrows))
    return -EINVAL;
  if (!title || !title[0])
    title = "hintcache replay report";
  view_init (&v, rows, nrows);

  put_s (&o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"hintcache\">\n<title>");
  put_esc (&o, title);
  put_s (&o, "</title>\n<style>\n");
  put_s (&o, style_sheet);
  put_s (&o, "</style>\n</head>\n<body>\n");
  write_header (&o, summary, title);
  /* Plots first: a grid of strategies × policies × sizes makes a long
   * table, and the plots are what a reader comes for. */
  rc = write_plots (&o, &v);
  write_table (&o, rows, nrows);
  put_s (&o, "</body>\n</html>\n");
  if (rc < 0 || o.failed) {
    free (o.p);
    return rc < 0 ? rc : -ENOMEM;
  }
  *html = o.p;
  if (len)
    *len = o.len;
  return 0;
}
