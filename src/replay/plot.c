/* The report's plots: three inline SVG figures — miss ratio against cache
 * size (one line per strategy, for the hint-aware policy when the grid has
 * it, plus the oracle and Belady bounds), read-latency CDFs at the largest
 * cache size, and flash bytes written at the largest cache size as bars.
 * A strategy keeps its colour and marker in every plot and in the table,
 * and the palette is Okabe and Ito's, which stays distinct for the
 * colour-blind; markers differ too, so a grey print still separates the
 * lines.  Degenerate input (no rows, one cache size, no accesses, NaN
 * latencies) gives an empty plot with a note.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

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

const char *
hc_series_color (unsigned s)
{
  return series_style[s < NSERIES ? s : S_OTHER].color;
}

/* True if the row's policy (a fixed array, maybe unterminated) is `name`. */
static bool
policy_is (const struct hc_replay_row *r, const char *name)
{
  size_t n = strnlen (r->policy, sizeof r->policy);

  return n == strlen (name) && memcmp (r->policy, name, n) == 0;
}

/* The series a row belongs to. */
unsigned
hc_series_of (const struct hc_replay_row *r)
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
void
hc_out_strategy (struct hc_out *o, const struct hc_replay_row *r)
{
  const char *name = hc_strategy_name ((unsigned) r->strategy);

  if (name)
    hc_out_esc (o, name);
  else
    hc_out_fmt (o, "strategy %u", (unsigned) r->strategy);
}

/* Appends the label of a series in a legend. */
static void
put_series_label (struct hc_out *o, unsigned s, const struct hc_replay_row *r)
{
  if (s == S_BELADY)
    hc_out_s (o, "belady (MIN)");
  else if (s == S_ORACLE)
    hc_out_s (o, "oracle (bound)");
  else
    hc_out_strategy (o, r);
}


/* True if a row is drawn in the line plots: the bounds always, the
 * strategies only under the chosen policy, so that each strategy is one
 * line. */
bool
hc_view_plotted (const struct hc_view *v, const struct hc_replay_row *r)
{
  unsigned s = hc_series_of (r);

  if (s == S_ORACLE || s == S_BELADY)
    return true;
  return s != S_OTHER && v->policy[0] && policy_is (r, v->policy);
}

/* Picks the policy the line plots use — hintaware, which hints were made
 * for, if the grid has it, else the first — and the largest cache size. */
void
hc_view_init (struct hc_view *v, const struct hc_replay_row *rows, size_t nrows)
{
  const struct hc_replay_row *first = NULL;

  memset (v, 0, sizeof *v);
  v->rows = rows;
  v->nrows = nrows;
  for (size_t i = 0; i < nrows; i++) {
    if (rows[i].cache_blocks > v->max_blocks)
      v->max_blocks = rows[i].cache_blocks;
    if (hc_series_of (&rows[i]) >= S_ORACLE)
      continue;
    if (!first || (!policy_is (first, "hintaware") && policy_is (&rows[i], "hintaware")))
      first = &rows[i];
  }
  if (first)
    memcpy (v->policy, first->policy, strnlen (first->policy, sizeof first->policy));
}

/* A ratio, or NaN when there is nothing to divide. */
double
hc_ratio (uint64_t a, uint64_t b)
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
  case L_SI: hc_fmt_si (buf, len, v); break;
  case L_US: hc_fmt_us (buf, len, v); break;
  case L_BYTES: hc_fmt_bytes (buf, len, v, true); break;
  default: hc_fmt_trim (buf, len, v, step >= 1 ? 0 : (int) ceil (-log10 (step) - 1e-9)); break;
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
svg_open (struct hc_out *o, unsigned w, unsigned h, const char *title)
{
  hc_out_fmt (o, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %u %u\" width=\"%u\" "
       "height=\"%u\" role=\"img\"><title>", w, h, w, h);
  hc_out_esc (o, title);
  hc_out_s (o, "</title>\n");
}

/* Appends a text element; `anchor` is start, middle or end. */
static void
svg_text (struct hc_out *o, double x, double y, const char *anchor, const char *cls,
          const char *text)
{
  hc_out_s (o, "<text x=\"");
  hc_out_px (o, x);
  hc_out_s (o, "\" y=\"");
  hc_out_px (o, y);
  hc_out_fmt (o, "\" text-anchor=\"%s\"%s%s%s>", anchor, cls ? " class=\"" : "", cls ? cls : "",
       cls ? "\"" : "");
  hc_out_esc (o, text);
  hc_out_s (o, "</text>\n");
}

/* Appends a line from (x1, y1) to (x2, y2) styled by a CSS class. */
static void
svg_line (struct hc_out *o, const char *cls, double x1, double y1, double x2, double y2)
{
  hc_out_fmt (o, "<line class=\"%s\" x1=\"", cls);
  hc_out_px (o, x1);
  hc_out_s (o, "\" y1=\"");
  hc_out_px (o, y1);
  hc_out_s (o, "\" x2=\"");
  hc_out_px (o, x2);
  hc_out_s (o, "\" y2=\"");
  hc_out_px (o, y2);
  hc_out_s (o, "\"/>\n");
}

/* Draws the frame, grid lines, ticks and their labels, and the axis titles
 * of a plot area spanned by x and y (y.p0 is the bottom). */
static void
draw_axes (struct hc_out *o, const struct axis *x, const struct axis *y, const char *xtitle,
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
  hc_out_s (o, "<rect class=\"frame\" x=\"");
  hc_out_px (o, x->p0);
  hc_out_s (o, "\" y=\"");
  hc_out_px (o, y->p1);
  hc_out_s (o, "\" width=\"");
  hc_out_px (o, x->p1 - x->p0);
  hc_out_s (o, "\" height=\"");
  hc_out_px (o, y->p0 - y->p1);
  hc_out_s (o, "\"/>\n");
  if (xtitle)
    svg_text (o, (x->p0 + x->p1) / 2, y->p0 + 44, "middle", "label", xtitle);
  if (ytitle) {
    double cx = x->p0 - 56, cy = (y->p0 + y->p1) / 2;

    hc_out_s (o, "<text class=\"label\" text-anchor=\"middle\" transform=\"translate(");
    hc_out_px (o, cx);
    hc_out_s (o, " ");
    hc_out_px (o, cy);
    hc_out_s (o, ") rotate(-90)\">");
    hc_out_esc (o, ytitle);
    hc_out_s (o, "</text>\n");
  }
}

/* Draws a marker of a series centred at (x, y). */
static void
draw_marker (struct hc_out *o, unsigned s, double x, double y)
{
  const char *c = series_style[s].color;

  switch (series_style[s].marker) {
  case M_SQUARE:
    hc_out_s (o, "<rect x=\"");
    hc_out_px (o, x - 4);
    hc_out_s (o, "\" y=\"");
    hc_out_px (o, y - 4);
    hc_out_fmt (o, "\" width=\"8\" height=\"8\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  case M_TRIANGLE:
  case M_DOWN: {
    double d = series_style[s].marker == M_TRIANGLE ? 1 : -1;

    hc_out_s (o, "<path d=\"M");
    hc_out_px (o, x);
    hc_out_s (o, " ");
    hc_out_px (o, y - 5.5 * d);
    hc_out_s (o, "L");
    hc_out_px (o, x + 5);
    hc_out_s (o, " ");
    hc_out_px (o, y + 3.5 * d);
    hc_out_s (o, "L");
    hc_out_px (o, x - 5);
    hc_out_s (o, " ");
    hc_out_px (o, y + 3.5 * d);
    hc_out_fmt (o, "Z\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  }
  case M_DIAMOND:
    hc_out_s (o, "<path d=\"M");
    hc_out_px (o, x);
    hc_out_s (o, " ");
    hc_out_px (o, y - 5.5);
    hc_out_s (o, "l5.5 5.5l-5.5 5.5l-5.5 -5.5Z\"");
    hc_out_fmt (o, " fill=\"%s\" class=\"mk\"/>", c);
    break;
  case M_CROSS:
    hc_out_s (o, "<path d=\"M");
    hc_out_px (o, x - 4.5);
    hc_out_s (o, " ");
    hc_out_px (o, y - 4.5);
    hc_out_s (o, "l9 9m0 -9l-9 9\"");
    hc_out_fmt (o, " stroke=\"%s\" stroke-width=\"2.5\" fill=\"none\"/>", c);
    break;
  default:
    hc_out_s (o, "<circle cx=\"");
    hc_out_px (o, x);
    hc_out_s (o, "\" cy=\"");
    hc_out_px (o, y);
    hc_out_fmt (o, "\" r=\"4.5\" fill=\"%s\" class=\"mk\"/>", c);
    break;
  }
  hc_out_s (o, "\n");
}

/* Opens a polyline of a series; the caller appends points and closes it. */
static void
polyline_open (struct hc_out *o, unsigned s)
{
  hc_out_fmt (o, "<polyline class=\"series\" stroke=\"%s\"", series_style[s].color);
  if (series_style[s].dash)
    hc_out_fmt (o, " stroke-dasharray=\"%s\"", series_style[s].dash);
  hc_out_s (o, " points=\"");
}

/* Appends one point of a polyline. */
static void
polyline_point (struct hc_out *o, double x, double y)
{
  hc_out_px (o, x);
  hc_out_s (o, ",");
  hc_out_px (o, y);
  hc_out_s (o, " ");
}

/* Draws one legend entry at (x, y): a line sample with the marker, and the
 * label of series s for row r (r may be NULL for a bound). */
static void
legend_entry (struct hc_out *o, double x, double y, unsigned s, const struct hc_replay_row *r,
              const char *suffix)
{
  polyline_open (o, s);
  polyline_point (o, x, y);
  polyline_point (o, x + 30, y);
  hc_out_s (o, "\"/>\n");
  draw_marker (o, s, x + 15, y);
  hc_out_s (o, "<text class=\"legend\" x=\"");
  hc_out_px (o, x + 40);
  hc_out_s (o, "\" y=\"");
  hc_out_px (o, y + 4.5);
  hc_out_s (o, "\">");
  put_series_label (o, s, r);
  if (suffix)
    hc_out_esc (o, suffix);
  hc_out_s (o, "</text>\n");
}

/* Draws an empty plot area with a note saying why it is empty. */
static void
draw_empty (struct hc_out *o, unsigned w, unsigned h, const char *title, const char *note)
{
  svg_open (o, w, h, title);
  hc_out_fmt (o, "<rect class=\"frame\" x=\"70\" y=\"20\" width=\"%u\" height=\"%u\"/>\n", w - 90,
       h - 60);
  svg_text (o, w / 2.0, h / 2.0, "middle", "note", note);
  hc_out_s (o, "</svg>\n");
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
miss_points (const struct hc_view *v, unsigned s, struct pt *p, const struct hc_replay_row **label)
{
  size_t n = 0;

  *label = NULL;
  for (size_t i = 0; i < v->nrows; i++) {
    const struct hc_replay_row *r = &v->rows[i];
    double y = hc_ratio (r->misses, r->accesses);

    if (hc_series_of (r) != s || !hc_view_plotted (v, r))
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
int
hc_plot_miss (struct hc_out *o, const struct hc_view *v)
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
      hc_out_s (o, "\"/>\n");
    }
    for (size_t i = 0; i < n; i++) {
      char buf[64];

      hc_out_s (o, "<g>");
      draw_marker (o, s, axis_map (&x, p[i].x), axis_map (&y, p[i].y));
      hc_out_s (o, "<title>");
      put_series_label (o, s, label);
      hc_out_s (o, ": ");
      hc_out_count (o, (uint64_t) p[i].x);
      hc_out_s (o, " blocks, miss ratio ");
      hc_fmt_fixed (buf, sizeof buf, p[i].y, 4);
      hc_out_s (o, buf);
      hc_out_s (o, "</title></g>\n");
    }
    legend_entry (o, PLOT_R + 24, ly, s, label, n ? NULL : " (no accesses)");
    ly += 24;
  }
  hc_out_s (o, "</svg>\n");
  free (p);
  return 0;
}

/* The row of series s the CDF and bar plots show: the first plotted row of
 * that series at the largest cache size. */
const struct hc_replay_row *
hc_row_at_max (const struct hc_view *v, unsigned s)
{
  for (size_t i = 0; i < v->nrows; i++) {
    const struct hc_replay_row *r = &v->rows[i];

    if (r->cache_blocks == v->max_blocks && hc_series_of (r) == s && hc_view_plotted (v, r))
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
int
hc_plot_cdf (struct hc_out *o, const struct hc_view *v)
{
  unsigned lo_b = HC_LAT_BUCKETS, hi_b = 0;

  for (unsigned s = 0; s < NSERIES; s++) {
    const struct hc_replay_row *r = hc_row_at_max (v, s);
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
    const struct hc_replay_row *r = hc_row_at_max (v, s);
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
    hc_out_s (o, "\"/>\n");
    legend_entry (o, PLOT_R + 24, ly, s, r, NULL);
    ly += 24;
  }
  hc_out_s (o, "</svg>\n");
  return 0;
}

/* Plot (c): flash bytes written by each row at the largest cache size, as
 * horizontal bars labelled with strategy and policy. */
int
hc_plot_flash (struct hc_out *o, const struct hc_view *v)
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
    unsigned s = hc_series_of (r);
    double w = axis_map (&x, (double) r->flash_bytes_written) - left;

    if (r->cache_blocks != v->max_blocks)
      continue;
    hc_out_s (o, "<g><title>");
    hc_out_strategy (o, r);
    hc_out_s (o, " / ");
    hc_out_esc_n (o, r->policy, sizeof r->policy);
    hc_out_s (o, ": ");
    hc_out_count (o, r->flash_bytes_written);
    hc_out_s (o, " bytes</title>\n<rect x=\"");
    hc_out_px (o, left);
    hc_out_s (o, "\" y=\"");
    hc_out_px (o, by);
    hc_out_s (o, "\" width=\"");
    hc_out_px (o, w > 0 ? w : 0);
    hc_out_s (o, "\" height=\"");
    hc_out_px (o, bar);
    hc_out_fmt (o, "\" fill=\"%s\"", series_style[s].color);
    if (series_style[s].dash)
      hc_out_s (o, " fill-opacity=\"0.75\"");
    hc_out_s (o, "/>\n<text class=\"tick\" text-anchor=\"end\" x=\"");
    hc_out_px (o, left - 10);
    hc_out_s (o, "\" y=\"");
    hc_out_px (o, by + bar / 2 + 4.5);
    hc_out_s (o, "\">");
    hc_out_strategy (o, r);
    hc_out_s (o, " \xc2\xb7 ");
    hc_out_esc_n (o, r->policy, sizeof r->policy);
    hc_out_s (o, "</text>\n<text class=\"value\" x=\"");
    hc_out_px (o, left + (w > 0 ? w : 0) + 8);
    hc_out_s (o, "\" y=\"");
    hc_out_px (o, by + bar / 2 + 4.5);
    hc_out_s (o, "\">");
    hc_fmt_bytes (buf, sizeof buf, (double) r->flash_bytes_written, false);
    hc_out_esc (o, buf);
    hc_out_s (o, "</text></g>\n");
    by += bar + gap;
  }
  hc_out_s (o, "</svg>\n");
  return 0;
}

/* True if a plotted row at the largest size has reads in the last bucket,
 * which also holds everything slower than its nominal bound. */
bool
hc_view_overflowed (const struct hc_view *v)
{
  for (unsigned s = 0; s < NSERIES; s++) {
    const struct hc_replay_row *r = hc_row_at_max (v, s);

    if (r && r->latency_hist[HC_LAT_BUCKETS - 1])
      return true;
  }
  return false;
}

