/* report: a replay's results as one self-contained HTML page.
 *
 * The page is meant to be mailed around or attached to a ticket, so it
 * depends on nothing: no scripts, no fonts, no images, only inline CSS and
 * the three inline SVG plots of plot.c, above the table of every row.
 *
 * Every string that reaches the page — title, policy names, strategy names —
 * is escaped, and the policy field is read with its length bound because it
 * is a fixed array that may fill up.  Numbers are formatted without printf's
 * %f/%g (out.c).  Output depends only on the input (no dates), so two
 * reports of one replay compare equal.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

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
fact (struct hc_out *o, const char *term)
{
  hc_out_s (o, "<dt>");
  hc_out_esc (o, term);
  hc_out_s (o, "</dt><dd>");
}

/* The header: title and what the trace held. */
static void
write_header (struct hc_out *o, const struct hc_replay_summary *sm, const char *title)
{
  hc_out_s (o, "<h1>");
  hc_out_esc (o, title);
  hc_out_s (o, "</h1>\n");
  if (!sm) {
    hc_out_s (o, "<p class=\"cap\">No trace summary was given.</p>\n");
    return;
  }
  hc_out_s (o, "<dl class=\"facts\">\n");
  fact (o, "Requests");
  hc_out_count (o, sm->requests);
  hc_out_s (o, " (reads ");
  hc_out_count (o, sm->reads);
  hc_out_s (o, ", writes ");
  hc_out_count (o, sm->writes);
  hc_out_s (o, ", discards ");
  hc_out_count (o, sm->discards);
  hc_out_s (o, ", flushes ");
  hc_out_count (o, sm->flushes);
  hc_out_s (o, ")</dd>\n");
  fact (o, "Block accesses");
  hc_out_count (o, sm->block_accesses);
  hc_out_s (o, "</dd>\n");
  fact (o, "Footprint");
  hc_out_count (o, sm->footprint_blocks);
  hc_out_s (o, " blocks (");
  hc_out_fixed (o, (double) sm->footprint_blocks * 4096.0 / 1073741824.0, 2);
  hc_out_s (o, " GiB at 4 KiB)</dd>\n");
  fact (o, "Skipped lines");
  hc_out_count (o, sm->skipped_lines);
  if (sm->skipped_lines && sm->first_bad_line) {
    hc_out_s (o, " (the first is line ");
    hc_out_count (o, sm->first_bad_line);
    hc_out_s (o, ")");
  }
  hc_out_s (o, "</dd>\n</dl>\n");
}

/* Appends a table cell holding a ratio or latency, "–" when undefined. */
static void
cell_fixed (struct hc_out *o, double v, int dec)
{
  hc_out_s (o, "<td class=\"n\">");
  hc_out_fixed (o, v, dec);
  hc_out_s (o, "</td>");
}

/* Appends a table cell holding a count. */
static void
cell_count (struct hc_out *o, uint64_t v)
{
  hc_out_s (o, "<td class=\"n\">");
  hc_out_count (o, v);
  hc_out_s (o, "</td>");
}

/* The results table, one row per replay row in the order given. */
static void
write_table (struct hc_out *o, const struct hc_replay_row *rows, size_t nrows)
{
  hc_out_s (o, "<h2>Results</h2>\n");
  if (!nrows) {
    hc_out_s (o, "<p class=\"cap\">No results: the replay produced no rows.</p>\n");
    return;
  }
  hc_out_s (o, "<p class=\"cap\">Latencies are of read requests under the hybrid-drive timing "
         "model; flash MB are 10<sup>6</sup> bytes (admissions and write hits); slow-tier "
         "ops count requests to the slow tier, reads and writes.</p>\n"
         "<table>\n<thead><tr><th class=\"t\">Strategy</th><th class=\"t\">Policy</th>"
         "<th>Cache blocks</th>"
         "<th>Accesses</th><th>Miss ratio</th><th>Read miss ratio</th>"
         "<th>Mean read \xc2\xb5s</th><th>p99 read \xc2\xb5s</th><th>Flash MB written</th>"
         "<th>Slow-tier ops</th></tr></thead>\n<tbody>\n");
  for (size_t i = 0; i < nrows; i++) {
    const struct hc_replay_row *r = &rows[i];

    hc_out_fmt (o, "<tr><td><i class=\"sw\" style=\"background:%s\"></i>",
         hc_series_color (hc_series_of (r)));
    hc_out_strategy (o, r);
    hc_out_s (o, "</td><td>");
    hc_out_esc_n (o, r->policy, sizeof r->policy);
    hc_out_s (o, "</td>");
    cell_count (o, r->cache_blocks);
    cell_count (o, r->accesses);
    cell_fixed (o, hc_ratio (r->misses, r->accesses), 4);
    cell_fixed (o, hc_ratio (r->read_misses, r->read_accesses), 4);
    cell_fixed (o, r->read_requests ? r->mean_read_latency_us : NAN, 1);
    cell_fixed (o, r->read_requests ? r->p99_read_latency_us : NAN, 1);
    cell_fixed (o, (double) r->flash_bytes_written / 1e6, 1);
    hc_out_fmt (o, "<td class=\"n\" title=\"%llu reads, %llu writes\">",
         (unsigned long long) r->slow_reads, (unsigned long long) r->slow_writes);
    hc_out_count (o, r->slow_reads + r->slow_writes);
    hc_out_s (o, "</td></tr>\n");
  }
  hc_out_s (o, "</tbody>\n</table>\n");
}

/* The three figures, each with a heading and a caption that says which
 * rows it shows. */
static int
write_plots (struct hc_out *o, const struct hc_view *v)
{
  char buf[64];
  int rc;

  hc_out_s (o, "<h2>Miss ratio against cache size</h2>\n<p class=\"cap\">");
  if (v->policy[0]) {
    hc_out_s (o, "Strategies under the <b>");
    hc_out_esc (o, v->policy);
    hc_out_s (o, "</b> policy");
  } else {
    hc_out_s (o, "No strategy rows under an engine policy");
  }
  hc_out_s (o, "; <i>oracle</i> is Belady's optimal replacement with bypass (the bound for every "
         "policy), <i>belady</i> is MIN admitting every miss.</p>\n<figure>\n");
  if ((rc = hc_plot_miss (o, v)) < 0)
    return rc;
  hc_out_s (o, "</figure>\n");

  hc_out_s (o, "<h2>Read latency at the largest cache size</h2>\n<p class=\"cap\">");
  if (v->nrows) {
    hc_out_s (o, "Cumulative fraction of read requests at ");
    hc_out_count (o, v->max_blocks);
    hc_out_s (o, " blocks, one line per strategy as in the plot above; buckets are 1/8 octave "
           "wide, joined by straight lines.");
    if (hc_view_overflowed (v)) {
      hc_fmt_us (buf, sizeof buf, hc_lat_bucket_us (HC_LAT_BUCKETS - 1));
      hc_out_s (o, " The last bucket also counts every read slower than ");
      hc_out_esc (o, buf);
      hc_out_s (o, ", so curves reach 1 there.");
    }
  } else {
    hc_out_s (o, "No rows.");
  }
  hc_out_s (o, "</p>\n<figure>\n");
  if ((rc = hc_plot_cdf (o, v)) < 0)
    return rc;
  hc_out_s (o, "</figure>\n");

  hc_out_s (o, "<h2>Flash bytes written at the largest cache size</h2>\n<p class=\"cap\">");
  if (v->nrows) {
    hc_out_s (o, "Every row at ");
    hc_out_count (o, v->max_blocks);
    hc_out_s (o, " blocks, all policies: bytes written to flash by admissions and write "
           "hits — the wear a strategy costs.");
  } else {
    hc_out_s (o, "No rows.");
  }
  hc_out_s (o, "</p>\n<figure>\n");
  if ((rc = hc_plot_flash (o, v)) < 0)
    return rc;
  hc_out_s (o, "</figure>\n");
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
  struct hc_out o = { 0 };
  struct hc_view v;
  int rc;

  if (!html || (!rows && nrows))
    return -EINVAL;
  if (!title || !title[0])
    title = "hintcache replay report";
  hc_view_init (&v, rows, nrows);

  hc_out_s (&o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<meta name=\"generator\" content=\"hintcache\">\n<title>");
  hc_out_esc (&o, title);
  hc_out_s (&o, "</title>\n<style>\n");
  hc_out_s (&o, style_sheet);
  hc_out_s (&o, "</style>\n</head>\n<body>\n");
  write_header (&o, summary, title);
  /* Plots first: a grid of strategies × policies × sizes makes a long
   * table, and the plots are what a reader comes for. */
  rc = write_plots (&o, &v);
  write_table (&o, rows, nrows);
  hc_out_s (&o, "</body>\n</html>\n");
  if (rc < 0 || o.failed) {
    free (o.p);
    return rc < 0 ? rc : -ENOMEM;
  }
  *html = o.p;
  if (len)
    *len = o.len;
  return 0;
}
