/* Trace commands of the hintcache tool:
 *
 *   replay TRACE    what each hint granularity buys, per policy and cache size
 *   trace stats IN  what a trace holds
 *   trace convert IN OUT   to hintcache's binary form (or oracleGeneral)
 *   demo            the built-in database-server workload, replayed
 *
 * The replay prints a table (or JSON), can write an HTML report, and shows
 * a progress bar on stderr when stderr is a terminal.
 */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "hintcache/replay.h"
#include "hintcache/trace.h"
#include "cli.h"
#include "commands.h"
#include "json.h"
#include "util.h"

/* Splits "a,b,c" into at most max pieces (the string is modified). */
static size_t
split (char *s, const char **out, size_t max)
{
  size_t n = 0;
  for (char *tok = strtok (s, ","); tok && n < max; tok = strtok (NULL, ","))
    out[n++] = tok;
  return n;
}

static void
progress (void *arg, double f)
{
  const char *what = arg;
  int width = 40, done = (int) (f * width + 0.5);
  fprintf (stderr, "\r%s [%.*s%*s] %3.0f%%", what, done, "########################################",
           width - done, "", f * 100);
  if (f >= 1)
    fputs ("\r\033[K", stderr);
  fflush (stderr);
}

static double
ratio (uint64_t a, uint64_t b)
{
  return b ? (double) a / b : 0;
}

static const struct hc_replay_row *
find_row (const struct hc_replay_row *rows, size_t n, enum hc_strategy s, const char *policy,
          uint64_t blocks)
{
  for (size_t i = 0; i < n; i++)
    if (rows[i].strategy == s && strcmp (rows[i].policy, policy) == 0
        && rows[i].cache_blocks == blocks)
      return &rows[i];
  return NULL;
}

/* How a hinted row (process, file, io) compares with the unhinted row of
 * the same policy and size: *worse when it has more read misses, and
 * *gap the share of the distance from that row's read misses to the
 * oracle's that it closes (negative: it made them worse).  Returns false
 * for rows that are not hinted or have no unhinted row to compare with;
 * *gap is NaN when the oracle is not replayed or is no better. */
static bool
versus_none (const struct hc_replay_row *rows, size_t n, const struct hc_replay_row *r,
             double *gap, bool *worse)
{
  if (r->strategy == HC_STRATEGY_NONE || r->strategy == HC_STRATEGY_ORACLE)
    return false;
  const struct hc_replay_row *none = find_row (rows, n, HC_STRATEGY_NONE, r->policy,
                                               r->cache_blocks);
  const struct hc_replay_row *best = find_row (rows, n, HC_STRATEGY_ORACLE, HC_REPLAY_BELADY,
                                               r->cache_blocks);
  if (!none)
    return false;
  *worse = r->read_misses > none->read_misses;
  *gap = NAN;
  if (best && none->read_misses > best->read_misses)
    *gap = ((double) none->read_misses - (double) r->read_misses)
           / ((double) none->read_misses - (double) best->read_misses);
  return true;
}

/* The table, then which hinted rows did worse than no hints. */
static void
print_table (FILE *f, const struct hc_replay_row *rows, size_t n)
{
  size_t hinted = 0, worse_n = 0;

  fprintf (f, "%-8s %-10s %10s %11s %8s %8s %9s %9s %10s %9s %8s\n", "strategy", "policy",
           "cache blks", "accesses", "miss %", "rd miss%", "rd mean", "rd p99", "flash MB",
           "slow ops", "gap %");
  for (size_t i = 0; i < n; i++) {
    const struct hc_replay_row *r = &rows[i];
    double gap;
    bool worse, vs = versus_none (rows, n, r, &gap, &worse);
    char g[16] = "-";
    if (vs && !isnan (gap))
      snprintf (g, sizeof g, "%+.1f", 100 * gap);
    hinted += vs;
    worse_n += vs && worse;
    fprintf (f, "%-8s %-10s %10" PRIu64 " %11" PRIu64 " %8.2f %8.2f %7.0fus %7.0fus %10.1f %9" PRIu64
             " %8s\n", hc_strategy_name (r->strategy), r->policy, r->cache_blocks, r->accesses,
             100 * ratio (r->misses, r->accesses), 100 * ratio (r->read_misses, r->read_accesses),
             r->mean_read_latency_us, r->p99_read_latency_us, r->flash_bytes_written / 1e6,
             r->slow_reads + r->slow_writes, g);
  }
  if (!hinted)
    return;
  fprintf (f, "gap %%: the share of the distance from the unhinted row (same policy and size) to "
           "the oracle's read misses that a hinted row closes.\n");
  if (!worse_n) {
    fprintf (f, "No hinted row has more read misses than its unhinted row (%zu compared).\n",
             hinted);
    return;
  }
  fprintf (f, "Worse than no hints (more read misses than the unhinted row): %zu of %zu:", worse_n,
           hinted);
  for (size_t i = 0; i < n; i++) {
    double gap;
    bool worse;
    if (versus_none (rows, n, &rows[i], &gap, &worse) && worse)
      fprintf (f, " %s/%s at %" PRIu64, hc_strategy_name (rows[i].strategy), rows[i].policy,
               rows[i].cache_blocks);
  }
  fprintf (f, ".\n");
}

static void
print_json (const struct hc_replay_row *rows, size_t n)
{
  struct json j;
  json_init (&j, stdout);
  json_array_begin (&j);
  for (size_t i = 0; i < n; i++) {
    const struct hc_replay_row *r = &rows[i];
    json_object_begin (&j);
    json_kv_string (&j, "strategy", hc_strategy_name (r->strategy));
    json_kv_string (&j, "policy", r->policy);
    json_kv_uint (&j, "cache_blocks", r->cache_blocks);
    json_kv_uint (&j, "accesses", r->accesses);
    json_kv_uint (&j, "misses", r->misses);
    json_kv_uint (&j, "read_accesses", r->read_accesses);
    json_kv_uint (&j, "read_misses", r->read_misses);
    json_kv_uint (&j, "write_accesses", r->write_accesses);
    json_kv_uint (&j, "write_misses", r->write_misses);
    json_kv_uint (&j, "admissions", r->admissions);
    json_kv_uint (&j, "bypasses", r->bypasses);
    json_kv_uint (&j, "evictions", r->evictions);
    json_kv_uint (&j, "dirty_evictions", r->dirty_evictions);
    json_kv_uint (&j, "slow_reads", r->slow_reads);
    json_kv_uint (&j, "slow_writes", r->slow_writes);
    json_kv_uint (&j, "flash_bytes_written", r->flash_bytes_written);
    json_kv_uint (&j, "read_requests", r->read_requests);
    if (r->strategy != HC_STRATEGY_ORACLE) {
      json_kv_bits (&j, "hint_effects", r->hint_effects, hc_effect_name);
      json_kv_uint (&j, "effect_changes", r->effect_changes);
    }
    json_key (&j, "mean_read_latency_us");
    json_double (&j, r->mean_read_latency_us);
    json_key (&j, "p99_read_latency_us");
    json_double (&j, r->p99_read_latency_us);
    json_key (&j, "read_hit_ratio");
    json_double (&j, 1 - ratio (r->read_misses, r->read_accesses));
    json_key (&j, "hit_ratio");
    json_double (&j, 1 - ratio (r->misses, r->accesses));
    double gap;
    bool worse;
    if (versus_none (rows, n, r, &gap, &worse)) {
      json_kv_bool (&j, "worse_than_none", worse);
      if (!isnan (gap)) {
        json_key (&j, "gap_closed");
        json_double (&j, gap);
      }
    }
    json_object_end (&j);
  }
  json_array_end (&j);
}

static int
write_report (const char *cmd, const char *path, const struct hc_replay_row *rows, size_t n,
              const struct hc_replay_summary *sum, const char *title)
{
  char *html;
  size_t len;
  FILE *f;

  if (hc_replay_report_html (rows, n, sum, title, &html, &len) < 0)
    return cli_fail (cmd, "out of memory writing the report");
  if (!(f = fopen (path, "w")) || fwrite (html, 1, len, f) != len || fclose (f) != 0) {
    free (html);
    return cli_fail (cmd, "%s: %s", path, strerror (errno));
  }
  free (html);
  return 0;
}

enum { O_CACHE = 400, O_STRATEGY, O_POLICY, O_FORMAT, O_STRICT, O_BLOCK, O_RULES, O_HTML,
       O_CONFIG, O_SHOW_RULES, O_SCALE, O_SEED, O_QUIET, O_SAVE, O_TO, O_PROMOTION, O_BUDGET,
       O_LAST };

/* The options each command takes, as bits (1 << (O_x - O_CACHE), and
 * OPT_JSON for -j/--json); --help is everyone's.  An option of the shared
 * table that a command does not take is refused, not ignored. */
#define OPT(x) (1u << ((x) - O_CACHE))
#define OPT_JSON (1u << 31)
#define REPLAY_OPTS                                                                            \
  (OPT_JSON | OPT (O_CACHE) | OPT (O_STRATEGY) | OPT (O_POLICY) | OPT (O_FORMAT) | OPT (O_STRICT)       \
   | OPT (O_BLOCK) | OPT (O_RULES) | OPT (O_HTML) | OPT (O_CONFIG) | OPT (O_SHOW_RULES)      \
   | OPT (O_QUIET) | OPT (O_PROMOTION) | OPT (O_BUDGET))
#define DEMO_OPTS (OPT_JSON | OPT (O_CACHE) | OPT (O_HTML) | OPT (O_SCALE) | OPT (O_SEED) | OPT (O_QUIET) \
                   | OPT (O_SAVE))
#define STATS_OPTS (OPT_JSON | OPT (O_FORMAT) | OPT (O_STRICT))
#define CONVERT_OPTS (OPT (O_FORMAT) | OPT (O_STRICT) | OPT (O_BLOCK) | OPT (O_TO))

static const struct option replay_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "json", no_argument, NULL, 'j' },
  { "cache", required_argument, NULL, O_CACHE },
  { "strategy", required_argument, NULL, O_STRATEGY },
  { "policy", required_argument, NULL, O_POLICY },
  { "format", required_argument, NULL, O_FORMAT },
  { "strict", no_argument, NULL, O_STRICT },
  { "block-size", required_argument, NULL, O_BLOCK },
  { "rules", required_argument, NULL, O_RULES },
  { "html", required_argument, NULL, O_HTML },
  { "config", required_argument, NULL, O_CONFIG },
  { "show-rules", required_argument, NULL, O_SHOW_RULES },
  { "scale", required_argument, NULL, O_SCALE },
  { "seed", required_argument, NULL, O_SEED },
  { "quiet", no_argument, NULL, O_QUIET },
  { "save", required_argument, NULL, O_SAVE },
  { "to", required_argument, NULL, O_TO },
  { "promotion", required_argument, NULL, O_PROMOTION },
  { "flash-budget", required_argument, NULL, O_BUDGET },
  { NULL, 0, NULL, 0 },
};

static const char replay_usage[] =
  "Usage: hintcache replay TRACE [--cache SIZES] [--strategy LIST] [--policy LIST]\n"
  "                      [--format F] [--strict] [--block-size N] [--rules S=FILE]...\n"
  "                      [--config FILE] [--promotion P] [--flash-budget SIZE]\n"
  "                      [--json] [--html FILE] [--show-rules S]\n"
  "\n"
  "Replays a block trace through hintcache's cache for every strategy × policy × size and\n"
  "prints misses, modeled read latency (disk behind flash) and flash bytes written.\n"
  "Each hinted row is set against the unhinted row of its policy and size: 'gap %' is the\n"
  "share of the distance to the oracle's read misses it closes (JSON: gap_closed), and\n"
  "the rows with more read misses than no hints are named (worse_than_none).\n"
  "  --cache SIZES      comma-separated: blocks (10000), bytes (64M) or a share of the\n"
  "                     footprint (5%); default 5%,10%\n"
  "  --strategy LIST    @STRATEGIES@; default all\n"
  "                     (oracle: Belady with bypass)\n"
  "  --policy LIST      @REPLAY_POLICIES@;\n"
  "                     default @REPLAY_POLICIES:default@\n"
  "  --format F         @FORMATS:given@ (default: detected)\n"
  "  --strict           a malformed line is an error (default: skipped and counted)\n"
  "  --block-size N     cache block size (default 4096)\n"
  "  --rules S=FILE     rules for strategy S (lines 'CONDITION && … -> HINT')\n"
  "  --show-rules S     print strategy S's built-in rules and exit\n"
  "  --config FILE      class attributes (as for hintcache hint classes --config)\n"
  "  --promotion P      always (default) or second-touch: a read miss is admitted\n"
  "                     only when read again soon (hintaware only; fewer flash writes)\n"
  "  --flash-budget SIZE flash bytes per day of the trace's time: while the cache\n"
  "                     writes faster, second touch and write misses around the\n"
  "                     cache (hintaware only)\n"
  "  --html FILE        write a report with plots\n"
  "  --json             one JSON array, one object per row\n";

struct replay_args {
  char *sizes, *strategies, *policies, *html, *save;
  const char *rules_file[HC_STRATEGY_COUNT];
  const char *config;
  struct hc_trace_opts topts;
  uint32_t block_size;
  bool json, quiet, second_touch;
  uint64_t flash_budget;
  double scale;
  uint64_t seed;
  enum hc_trace_format to; /* trace convert's */
};

/* The strategies that take rules, by strategy (NULL for the others: none
 * classifies nothing, the oracle knows the future). */
static const char *
rules_strategy_name (unsigned s)
{
  return s == HC_STRATEGY_NONE || s == HC_STRATEGY_ORACLE ? NULL : hc_strategy_name (s);
}

/* Parses the shared options, those in `takes` (OPT bits) allowed; returns
 * -1 to go on or an exit status. */
static int
parse_replay (const char *cmd, const char *usage, unsigned takes, int argc, char **argv,
              struct replay_args *a)
{
  int ch, index;

  optind = 1;
  while ((ch = getopt_long (argc, argv, "hj", replay_opts, &index)) != -1) {
    bool other = ch == 'j' ? !(takes & OPT_JSON)
                           : ch >= O_CACHE && ch < O_LAST && !(takes & OPT (ch));
    if (other)
      return cli_usage (cmd, "--%s does not apply here (see 'hintcache %s --help')",
                        ch == 'j' ? "json" : replay_opts[index].name, cmd);
    switch (ch) {
    case 'h': cli_help (stdout, usage); return 0;
    case 'j': a->json = true; break;
    case O_CACHE: a->sizes = optarg; break;
    case O_STRATEGY: a->strategies = optarg; break;
    case O_POLICY: a->policies = optarg; break;
    case O_HTML: a->html = optarg; break;
    case O_CONFIG: a->config = optarg; break;
    case O_STRICT: a->topts.strict = true; break;
    case O_QUIET: a->quiet = true; break;
    case O_SAVE: a->save = optarg; break;
    case O_FORMAT:
      if (hc_trace_format_parse (optarg, &a->topts.format) < 0) {
        char names[128];
        return cli_usage (cmd, "--format: '%s' is not one of %s", optarg,
                          hc_names (hc_trace_format_name, names, sizeof names));
      }
      break;
    case O_BLOCK: {
      uint64_t v;
      if (hc_parse_size (optarg, &v, NULL) < 0 || v < 512 || v > (1u << 20) || (v & (v - 1)))
        return cli_usage (cmd, "--block-size: '%s' is not a power of two from 512 to 1M", optarg);
      a->block_size = (uint32_t) v;
      break;
    }
    case O_TO:
      if (hc_trace_format_parse (optarg, &a->to) < 0
          || (a->to != HC_TRACE_BIN && a->to != HC_TRACE_CSV && a->to != HC_TRACE_ORACLE))
        return cli_usage (cmd, "--to: '%s' is not bin, csv or oracle", optarg);
      break;
    case O_RULES: {
      char *eq = strchr (optarg, '=');
      enum hc_strategy s;
      if (!eq)
        return cli_usage (cmd, "--rules: expected STRATEGY=FILE, got '%s'", optarg);
      *eq = '\0';
      if (hc_strategy_parse (optarg, &s) < 0 || !rules_strategy_name (s)) {
        char names[128];
        return cli_usage (cmd, "--rules: '%s' is not a strategy that takes rules (%s)", optarg,
                          hc_names (rules_strategy_name, names, sizeof names));
      }
      a->rules_file[s] = eq + 1;
      break;
    }
    case O_SHOW_RULES: {
      enum hc_strategy s;
      if (hc_strategy_parse (optarg, &s) < 0)
        return cli_usage (cmd, "--show-rules: '%s' is not a strategy", optarg);
      fputs (hc_rules_default_text (s), stdout);
      return 0;
    }
    case O_SCALE: {
      char *end;
      a->scale = strtod (optarg, &end);
      if (end == optarg || *end || !(a->scale > 0 && a->scale <= 100))
        return cli_usage (cmd, "--scale: '%s' is not a number above 0, at most 100", optarg);
      break;
    }
    case O_PROMOTION:
      if (strcmp (optarg, "always") && strcmp (optarg, "second-touch"))
        return cli_usage (cmd, "--promotion: '%s' is not always or second-touch", optarg);
      a->second_touch = optarg[0] == 's';
      break;
    case O_BUDGET:
      if (hc_parse_size (optarg, &a->flash_budget, NULL) < 0 || !a->flash_budget)
        return cli_usage (cmd, "--flash-budget: '%s' is not a size above 0 (bytes per day, "
                          "e.g. 500G)", optarg);
      break;
    case O_SEED:
      if (hc_parse_size (optarg, &a->seed, NULL) < 0)
        return cli_usage (cmd, "--seed: '%s' is not a number (decimal or 0x hex)", optarg);
      break;
    default: return cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
    }
  }
  return -1;
}

/* Runs a replay with parsed arguments and prints it. */
static int
run_replay (const char *cmd, const char *trace, struct replay_args *a, const char *title,
            struct hc_replay_row **rows_out, size_t *nrows_out, struct hc_replay_summary *sum_out)
{
  const char *sizes[16], *pols[16], *strat_names[HC_STRATEGY_COUNT];
  enum hc_strategy strats[HC_STRATEGY_COUNT];
  char sizes_buf[256], pol_buf[256], strat_buf[256];
  struct hc_replay_config cfg = { .block_size = a->block_size, .second_touch = a->second_touch,
                                   .flash_budget = a->flash_budget };
  hc_classes *classes = NULL;
  struct hc_replay_row *rows = NULL;
  size_t nrows = 0;
  struct hc_replay_summary sum;
  char why[256];
  int rc, status = 0;

  snprintf (sizes_buf, sizeof sizes_buf, "%s", a->sizes ? a->sizes : "5%,10%");
  /* Defaults: the default policy, every strategy. */
  snprintf (pol_buf, sizeof pol_buf, "%s", a->policies ? a->policies : hc_policy_name (0));
  snprintf (strat_buf, sizeof strat_buf, "%s", a->strategies ? a->strategies : "");
  for (unsigned s = 0; !a->strategies && s < HC_STRATEGY_COUNT; s++)
    snprintf (strat_buf + strlen (strat_buf), sizeof strat_buf - strlen (strat_buf), "%s%s",
              s ? "," : "", hc_strategy_name (s));
  cfg.nsizes = split (sizes_buf, sizes, 16);
  cfg.sizes = sizes;
  cfg.npolicies = split (pol_buf, pols, 16);
  cfg.policies = pols;
  size_t ns = split (strat_buf, strat_names, HC_STRATEGY_COUNT);
  for (size_t i = 0; i < ns; i++)
    if (hc_strategy_parse (strat_names[i], &strats[i]) < 0) {
      char names[128];
      return cli_usage (cmd, "'%s' is not a strategy (%s)", strat_names[i],
                        hc_names (hc_strategy_name, names, sizeof names));
    }
  cfg.strategies = strats;
  cfg.nstrategies = ns;
  if (!cfg.nsizes || !cfg.npolicies || !ns)
    return cli_usage (cmd, "empty --cache, --policy or --strategy list");
  for (unsigned s = 0; s < HC_STRATEGY_COUNT; s++) {
    if (!a->rules_file[s])
      continue;
    FILE *f = fopen (a->rules_file[s], "r");
    char text[1 << 16];
    size_t len;
    struct hc_parse_error err;
    if (!f) {
      status = cli_fail (cmd, "%s: %s", a->rules_file[s], strerror (errno));
      goto out;
    }
    len = fread (text, 1, sizeof text - 1, f);
    fclose (f);
    text[len] = '\0';
    if ((rc = hc_rules_new ((enum hc_strategy) s, text, &cfg.rules[s], &err)) < 0) {
      status = cli_usage (cmd, "%s:%u: %s", a->rules_file[s], err.line, err.msg);
      goto out;
    }
  }
  if (a->config) {
    struct hc_parse_error err;
    hc_classes_new (&classes);
    if ((rc = hc_classes_load_file (classes, a->config, &err)) < 0) {
      status = rc == -EINVAL ? cli_usage (cmd, "%s:%u: %s", a->config, err.line, err.msg)
                             : cli_fail (cmd, "%s: %s", a->config, strerror (-rc));
      goto out;
    }
    cfg.classes = classes;
  }
  if (!a->quiet && isatty (2)) {
    cfg.progress = progress;
    cfg.progress_arg = (void *) "replaying";
  }
  rc = hc_replay_run (trace, &a->topts, &cfg, &rows, &nrows, &sum, why, sizeof why);
  if (rc < 0) {
    status = rc == -EINVAL ? cli_usage (cmd, "%s: %s", trace, why) : cli_fail (cmd, "%s: %s", trace, why);
    goto out;
  }
  if (sum.skipped_lines)
    fprintf (stderr, "hintcache %s: %s: skipped %" PRIu64 " malformed line%s (the first is line %"
             PRIu64 ")\n", cmd, trace, sum.skipped_lines, sum.skipped_lines == 1 ? "" : "s",
             sum.first_bad_line);
  if (a->json)
    print_json (rows, nrows);
  else if (!rows_out) {
    printf ("%s: %" PRIu64 " requests, %" PRIu64 " block accesses, footprint %" PRIu64 " blocks\n",
            trace, sum.requests, sum.block_accesses, sum.footprint_blocks);
    print_table (stdout, rows, nrows);
  }
  if (a->html && (status = write_report (cmd, a->html, rows, nrows, &sum, title)) != 0)
    goto out;
  if (rows_out) {
    *rows_out = rows;
    *nrows_out = nrows;
    *sum_out = sum;
    rows = NULL;
  }
out:
  free (rows);
  hc_classes_free (classes);
  for (unsigned s = 0; s < HC_STRATEGY_COUNT; s++)
    hc_rules_free (cfg.rules[s]);
  return status;
}

int
cmd_replay (int argc, char **argv)
{
  struct replay_args a = { 0 };
  int rc;

  if ((rc = parse_replay ("replay", replay_usage, REPLAY_OPTS, argc, argv, &a)) >= 0)
    return rc;
  if (argc - optind != 1)
    return cli_usage ("replay", "expected one TRACE (see --help)");
  return run_replay ("replay", argv[optind], &a, argv[optind], NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------------
 * demo
 */
static const char demo_usage[] =
  "Usage: hintcache demo [--html FILE] [--json] [--scale X] [--seed N] [--cache SIZES]\n"
  "                      [--save TRACE]\n"
  "\n"
  "Generates a seeded synthetic trace of a database server (table and index random I/O\n"
  "with skew, WAL appends and fsyncs, filesystem metadata and journal, a nightly backup\n"
  "reading everything once at idle priority, a log stream), replays it with every hint\n"
  "strategy at three cache sizes against the best unhinted policies and the offline\n"
  "optimum, prints a summary, writes report.html (or --html FILE) with every row, and\n"
  "says what the numbers mean.\n"
  "  --scale X      length of the workload (default 0.5: about 2.6 M block accesses)\n"
  "  --seed N       the workload's seed (default 42)\n"
  "  --cache SIZES  default 2%,5%,10% of the footprint\n"
  "  --save TRACE   keep the generated trace (hintcache's binary form) for 'replay'\n"
  "  --json         every row as JSON instead of the summary\n";

/* The rows the summary shows, in order. */
static const struct {
  enum hc_strategy strategy;
  const char *policy;
} demo_rows[] = {
  { HC_STRATEGY_NONE, "lru" },        { HC_STRATEGY_NONE, "s3fifo" },
  { HC_STRATEGY_NONE, "hintaware" },  { HC_STRATEGY_PROCESS, "hintaware" },
  { HC_STRATEGY_FILE, "hintaware" },  { HC_STRATEGY_IO, "hintaware" },
  { HC_STRATEGY_ORACLE, HC_REPLAY_BELADY },
};
#define DEMO_ROWS (sizeof demo_rows / sizeof demo_rows[0])

/* The summary: read miss ratio, mean read latency and flash writes per
 * shown row and size. */
static void
demo_table (const struct hc_replay_row *rows, size_t n, const uint64_t *sizes, size_t nsizes)
{
  static const char *const what[] = { "read miss %", "mean read latency, ms", "flash written, GB" };
  for (unsigned w = 0; w < 3; w++) {
    printf ("\n%-22s", what[w]);
    for (size_t z = 0; z < nsizes; z++)
      printf (" %9" PRIu64, sizes[z]);
    printf ("   (cache blocks)\n");
    for (size_t k = 0; k < DEMO_ROWS; k++) {
      char label[32];
      snprintf (label, sizeof label, "%s / %s", hc_strategy_name (demo_rows[k].strategy),
                demo_rows[k].policy);
      printf ("  %-20s", label);
      for (size_t z = 0; z < nsizes; z++) {
        const struct hc_replay_row *r = find_row (rows, n, demo_rows[k].strategy,
                                                  demo_rows[k].policy, sizes[z]);
        if (!r) {
          printf (" %9s", "-");
          continue;
        }
        printf (" %9.2f", w == 0 ? 100 * ratio (r->read_misses, r->read_accesses)
                          : w == 1 ? r->mean_read_latency_us / 1000 : r->flash_bytes_written / 1e9);
      }
      printf ("\n");
    }
  }
}

/* The two sentences, from the numbers at the middle size: what the best
 * hinted strategy buys over the best unhinted policy, against the oracle;
 * and what per-process hints buy, in misses and in flash writes. */
static void
demo_meaning (const struct hc_replay_row *rows, size_t n, uint64_t size, double pct)
{
  const struct hc_replay_row *base = NULL, *best = NULL, *proc, *oracle;
  for (size_t k = 0; k < 3; k++) {
    const struct hc_replay_row *r = find_row (rows, n, HC_STRATEGY_NONE, demo_rows[k].policy, size);
    if (r && (!base || r->read_misses < base->read_misses))
      base = r;
  }
  for (unsigned s = HC_STRATEGY_PROCESS; s <= HC_STRATEGY_IO; s++) {
    const struct hc_replay_row *r = find_row (rows, n, (enum hc_strategy) s, "hintaware", size);
    if (r && (!best || r->read_misses < best->read_misses))
      best = r;
  }
  proc = find_row (rows, n, HC_STRATEGY_PROCESS, "hintaware", size);
  oracle = find_row (rows, n, HC_STRATEGY_ORACLE, HC_REPLAY_BELADY, size);
  if (!base || !best || !proc || !oracle)
    return;
  double gap = (double) base->read_misses - (double) oracle->read_misses;
  double closed = gap > 0 ? ((double) base->read_misses - (double) best->read_misses) / gap : 0;
  double cut = 1 - ratio (best->read_misses, base->read_misses);
  double flash = 1 - ratio (best->flash_bytes_written, base->flash_bytes_written);
  printf ("\nWhat it means: with a cache of %.0f%% of the footprint, %s hints (the best granularity "
          "here) cut read misses by %.1f%% against the best unhinted policy (%s) — %.0f%% of the "
          "way to the offline optimum — and write %.0f%% %s bytes to flash.\n",
          pct, hc_strategy_name (best->strategy), 100 * cut, base->policy, 100 * closed,
          100 * fabs (flash), flash >= 0 ? "fewer" : "more");
  /* Per-process hints against no hints with the same policy: their own
   * effect, and the share of that policy's gap to the optimum it closes. */
  const struct hc_replay_row *none = find_row (rows, n, HC_STRATEGY_NONE, "hintaware", size);
  double pgap;
  bool pworse;
  if (!none || !versus_none (rows, n, proc, &pgap, &pworse))
    return;
  /* ratio − 1, not −(1 − ratio): no change prints +0, never −0. */
  double pmiss = ratio (proc->read_misses, none->read_misses) - 1;
  double pflash = ratio (proc->flash_bytes_written, none->flash_bytes_written) - 1;
  printf ("Per-process hints alone (what ionice-style bits can carry) change read misses by "
          "%+.1f%% and flash writes by %+.0f%% against no hints with the same policy",
          100 * pmiss, 100 * pflash);
  if (!isnan (pgap))
    printf (" (gap to the offline optimum closed: %+.0f%%)", 100 * pgap);
  printf ("%s.\n", pworse ? ": worse than no hints" : "");
}

int
cmd_demo (int argc, char **argv)
{
  struct replay_args a = { .scale = 0.5, .seed = 42 };
  char tmp[] = "/tmp/hintcache-demo-XXXXXX", why[256];
  const char *path = tmp;
  struct hc_replay_row *rows = NULL;
  struct hc_replay_summary sum;
  size_t n = 0;
  int rc, fd;

  if ((rc = parse_replay ("demo", demo_usage, DEMO_OPTS, argc, argv, &a)) >= 0)
    return rc;
  if (optind != argc)
    return cli_usage ("demo", "takes no operands (see --help)");
  if (!a.html)
    a.html = "report.html";
  if (!a.sizes)
    a.sizes = "2%,5%,10%";
  a.policies = "hintaware,lru,s3fifo"; /* and every strategy, the default */
  if (a.save)
    path = a.save;
  else if ((fd = mkstemp (tmp)) < 0)
    return cli_fail ("demo", "temporary file: %s", strerror (errno));
  else
    close (fd);
  if (!a.quiet && !a.json)
    fprintf (stderr, "generating the database-server workload (seed %" PRIu64 ", scale %g)...\n",
             a.seed, a.scale);
  if ((rc = hc_replay_synth_db (path, a.seed, a.scale, why, sizeof why)) < 0) {
    if (!a.save)
      unlink (path);
    return cli_fail ("demo", "%s", why);
  }
  rc = run_replay ("demo", path, &a, "hintcache demo: a database server with a nightly backup",
                   &rows, &n, &sum);
  if (!a.save)
    unlink (path);
  if (rc != 0 || a.json) {
    free (rows);
    return rc;
  }
  /* The sizes in blocks, in the order given (the oracle has one row each). */
  uint64_t sizes[16];
  size_t nsizes = 0;
  for (size_t i = 0; i < n && nsizes < 16; i++)
    if (rows[i].strategy == HC_STRATEGY_ORACLE)
      sizes[nsizes++] = rows[i].cache_blocks;
  printf ("A database server, synthetic (seed %" PRIu64 "): %" PRIu64 " requests, %" PRIu64
          " block accesses, footprint %" PRIu64 " blocks of 4 KiB (%.1f GiB).\n"
          "Each strategy classifies the same requests by what its granularity can see; "
          "oracle is the offline optimum.\n", a.seed, sum.requests, sum.block_accesses,
          sum.footprint_blocks, sum.footprint_blocks * 4096.0 / (1 << 30));
  demo_table (rows, n, sizes, nsizes);
  if (nsizes)
    demo_meaning (rows, n, sizes[nsizes / 2],
                  100.0 * sizes[nsizes / 2] / (sum.footprint_blocks ? sum.footprint_blocks : 1));
  printf ("\nEvery row, with plots: %s   The workload: --save FILE, then 'hintcache replay FILE'.\n",
          a.html);
  free (rows);
  return 0;
}

/* ---------------------------------------------------------------------------
 * trace stats / trace convert
 */
static const char stats_usage[] =
  "Usage: hintcache trace stats IN [--format F] [--strict] [--json]\n"
  "\n"
  "Requests, bytes, footprint in blocks, and shares by label, comm and op.\n"
  "  --format F    @FORMATS:given@ (default: detected)\n"
  "  --strict      a malformed line is an error (default: skipped and counted)\n"
  "  --json        one JSON object\n";

static const char convert_usage[] =
  "Usage: hintcache trace convert IN OUT [--format F] [--strict] [--to bin|csv|oracle]\n"
  "                               [--block-size N]\n"
  "\n"
  "Converts to hintcache's compact binary form (bin, the default: replays fastest), to the\n"
  "labeled CSV of the shared traces, or to libCacheSim's oracleGeneral (one record per\n"
  "block access, with next-access times).  An OUT ending in .gz is written gzip-compressed.\n"
  "  --format F      IN's format: @FORMATS:given@ (default: detected)\n"
  "  --strict        a malformed line is an error (default: skipped and counted)\n"
  "  --block-size N  oracle's block size (default 4096)\n";

static int
trace_stats (struct replay_args *a, const char *in)
{
  const char *cmd = "trace stats";
  hc_trace *t;
  struct hc_trace_req q;
  char why[256];
  uint64_t n = 0, bytes[4] = { 0 }, ops[4] = { 0 }, by_label[HC_LABEL_COUNT] = { 0 };
  struct hc_blockset blocks = { 0 };
  int rc;

  if ((rc = hc_trace_open (in, &a->topts, &t, why, sizeof why)) < 0)
    return rc == -EINVAL ? cli_usage (cmd, "%s: %s", in, why) : cli_fail (cmd, "%s: %s", in, why);
  /* Footprint and comm shares need sets; counts per comm id grow as seen. */
  uint64_t *comm_count = NULL, cap = 0;
  while ((rc = hc_trace_next (t, &q)) == 1) {
    n++;
    if (q.op < 4) {
      ops[q.op]++;
      bytes[q.op] += q.length;
    }
    if (q.label < HC_LABEL_COUNT)
      by_label[q.label]++;
    if (q.comm >= cap) {
      uint64_t ncap = (q.comm + 1) * 2;
      uint64_t *nc = realloc (comm_count, ncap * sizeof *nc);
      if (!nc) {
        rc = -ENOMEM;
        break;
      }
      memset (nc + cap, 0, (ncap - cap) * sizeof *nc);
      comm_count = nc;
      cap = ncap;
    }
    comm_count[q.comm]++;
    if ((q.op == HC_TOP_READ || q.op == HC_TOP_WRITE) && q.length)
      for (uint64_t b = q.offset / 4096; b <= (q.offset + q.length - 1) / 4096 && rc > 0; b++)
        if (hc_blockset_add (&blocks, b) < 0)
          rc = -ENOMEM;
    if (rc < 0)
      break;
  }
  uint64_t footprint = blocks.n;
  hc_blockset_free (&blocks);
  if (rc < 0) {
    free (comm_count);
    int st = cli_fail (cmd, "%s: %s", in, rc == -ENOMEM ? "out of memory" : hc_trace_error (t));
    hc_trace_close (t);
    return st;
  }
  uint64_t first_bad, skipped = hc_trace_skipped (t, &first_bad);
  if (a->json) {
    struct json j;
    json_init (&j, stdout);
    json_object_begin (&j);
    json_kv_string (&j, "format", hc_trace_format_name (hc_trace_get_format (t)));
    json_kv_uint (&j, "requests", n);
    json_key (&j, "ops");
    json_object_begin (&j);
    for (unsigned o = 0; o < 4; o++) {
      json_key (&j, hc_trace_op_name (o));
      json_object_begin (&j);
      json_kv_uint (&j, "requests", ops[o]);
      json_kv_uint (&j, "bytes", bytes[o]);
      json_object_end (&j);
    }
    json_object_end (&j);
    json_kv_uint (&j, "footprint_blocks", footprint);
    json_key (&j, "labels");
    json_object_begin (&j);
    for (unsigned l = 0; l < HC_LABEL_COUNT; l++)
      if (by_label[l])
        json_kv_uint (&j, l ? hc_trace_label_name (l) : "none", by_label[l]);
    json_object_end (&j);
    json_key (&j, "comms");
    json_object_begin (&j);
    for (uint64_t c = 0; c < cap; c++)
      if (comm_count[c])
        json_kv_uint (&j, c ? hc_trace_string (t, (uint32_t) c) : "(none)", comm_count[c]);
    json_object_end (&j);
    json_kv_uint (&j, "skipped_lines", skipped);
    json_object_end (&j);
  } else {
    printf ("%s (%s): %" PRIu64 " requests\n", in, hc_trace_format_name (hc_trace_get_format (t)), n);
    for (unsigned o = 0; o < 4; o++)
      printf ("  %s %12" PRIu64 " requests %14" PRIu64 " bytes\n", hc_trace_op_name (o), ops[o],
              bytes[o]);
    printf ("footprint: %" PRIu64 " blocks of 4 KiB (%.2f GiB)\n", footprint,
            footprint * 4096.0 / (1 << 30));
    printf ("by label:\n");
    for (unsigned l = 0; l < HC_LABEL_COUNT; l++)
      if (by_label[l])
        printf ("  %-12s %10" PRIu64 " %6.2f%%\n", l ? hc_trace_label_name (l) : "(none)",
                by_label[l], 100.0 * by_label[l] / n);
    printf ("by comm (top 10):\n");
    for (int k = 0; k < 10; k++) {
      uint64_t bestc = 0, bestn = 0;
      for (uint64_t c = 0; c < cap; c++)
        if (comm_count[c] > bestn)
          bestn = comm_count[c], bestc = c;
      if (!bestn)
        break;
      printf ("  %-16s %10" PRIu64 " %6.2f%%\n", bestc ? hc_trace_string (t, (uint32_t) bestc) : "(none)",
              bestn, 100.0 * bestn / n);
      comm_count[bestc] = 0;
    }
    if (skipped)
      printf ("skipped %" PRIu64 " malformed lines (the first is line %" PRIu64 ")\n", skipped,
              first_bad);
  }
  free (comm_count);
  hc_trace_close (t);
  return 0;
}

static int
trace_convert (struct replay_args *a, const char *in, const char *out, enum hc_trace_format to)
{
  const char *cmd = "trace convert";
  hc_trace *t;
  hc_trace_writer *w;
  struct hc_trace_req q;
  char why[256];
  uint64_t n = 0;
  int rc;

  if ((rc = hc_trace_open (in, &a->topts, &t, why, sizeof why)) < 0)
    return rc == -EINVAL ? cli_usage (cmd, "%s: %s", in, why) : cli_fail (cmd, "%s: %s", in, why);
  if ((rc = hc_trace_writer_open (out, to, a->block_size ? a->block_size : 4096, &w, why,
                                  sizeof why)) < 0) {
    hc_trace_close (t);
    return cli_fail (cmd, "%s: %s", out, why);
  }
  while ((rc = hc_trace_next (t, &q)) == 1 && (rc = hc_trace_write (w, &q, t)) == 0)
    n++;
  if (rc < 0) {
    hc_trace_writer_close (w);
    unlink (out);
    int st = cli_fail (cmd, "%s: %s", in, hc_trace_error (t)[0] ? hc_trace_error (t) : strerror (-rc));
    hc_trace_close (t);
    return st;
  }
  if ((rc = hc_trace_writer_close (w)) < 0) {
    hc_trace_close (t);
    unlink (out);
    return cli_fail (cmd, "%s: %s", out, strerror (-rc));
  }
  uint64_t first_bad, skipped = hc_trace_skipped (t, &first_bad);
  printf ("%s: %" PRIu64 " requests written to %s (%s)", in, n, out, hc_trace_format_name (to));
  if (skipped)
    printf ("; skipped %" PRIu64 " malformed lines (the first is line %" PRIu64 ")", skipped,
            first_bad);
  printf ("\n");
  hc_trace_close (t);
  return 0;
}

static int
cmd_trace_stats (int argc, char **argv)
{
  struct replay_args a = { 0 };
  int rc;

  if ((rc = parse_replay ("trace stats", stats_usage, STATS_OPTS, argc, argv, &a)) >= 0)
    return rc;
  if (argc - optind != 1)
    return cli_usage ("trace stats", "expected one trace IN (see --help)");
  return trace_stats (&a, argv[optind]);
}

static int
cmd_trace_convert (int argc, char **argv)
{
  struct replay_args a = { .to = HC_TRACE_BIN };
  int rc;

  if ((rc = parse_replay ("trace convert", convert_usage, CONVERT_OPTS, argc, argv, &a)) >= 0)
    return rc;
  if (argc - optind != 2)
    return cli_usage ("trace convert", "expected IN and OUT (see --help)");
  return trace_convert (&a, argv[optind], argv[optind + 1], a.to);
}

int
cmd_trace (int argc, char **argv)
{
  static const struct cli_command cmds[] = {
    { "stats", cmd_trace_stats, "requests, bytes, footprint and shares by label, comm and op" },
    { "convert", cmd_trace_convert, "to hintcache's binary form, the labeled CSV or oracleGeneral" },
    { "record", cmd_trace_record, "a labeled trace of a block device while a command runs" },
  };

  return cli_dispatch ("trace", cmds, sizeof cmds / sizeof cmds[0], argc, argv);
}
