/* The report's plots (plot.c): the series a row belongs to, the view of a
 * grid the plots draw, and the three SVG figures. */
#ifndef HC_REPLAY_PLOT_H
#define HC_REPLAY_PLOT_H

#include "hintcache/replay.h"
#include "out.h"

/* Strategies other than the oracle are series 0 … 3 in enum order; the
 * oracle and Belady's MIN are bounds and get their own. */
enum {
  S_ORACLE = HC_STRATEGY_ORACLE,
  S_BELADY,
  S_OTHER,
  NSERIES
};

/* What the plots show of a grid with several policies. */
struct hc_view {
  const struct hc_replay_row *rows;
  size_t nrows;
  char policy[sizeof ((struct hc_replay_row *) 0)->policy + 1]; /* "" if none */
  uint64_t max_blocks;
};

/* The series of a row, and its colour. */
unsigned hc_series_of (const struct hc_replay_row *r);
const char *hc_series_color (unsigned s);

/* Appends a row's strategy name, escaped (an unknown value as a number). */
void hc_out_strategy (struct hc_out *o, const struct hc_replay_row *r);

/* A ratio, or NaN when there is nothing to divide. */
double hc_ratio (uint64_t a, uint64_t b);

/* Picks the policy the line plots use (hintaware if the grid has it, else
 * the first) and the largest cache size; whether a row is drawn in the
 * line plots; the row of series s at the largest size (NULL if none); and
 * whether a plotted row there has reads in the last latency bucket. */
void hc_view_init (struct hc_view *v, const struct hc_replay_row *rows, size_t nrows);
bool hc_view_plotted (const struct hc_view *v, const struct hc_replay_row *r);
const struct hc_replay_row *hc_row_at_max (const struct hc_view *v, unsigned s);
bool hc_view_overflowed (const struct hc_view *v);

/* The figures: miss ratio against cache size, read-latency CDFs and flash
 * bytes written at the largest size.  Return 0 or -ENOMEM. */
int hc_plot_miss (struct hc_out *o, const struct hc_view *v);
int hc_plot_cdf (struct hc_out *o, const struct hc_view *v);
int hc_plot_flash (struct hc_out *o, const struct hc_view *v);

#endif
