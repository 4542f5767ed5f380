/* hintcache — trace replay: what each granularity of hint buys.
 *
 * A replay runs a block trace through the cache directory of the volume
 * (the same map, policies, admission rules and statistics — never a copy)
 * for a grid of hint strategies × replacement policies × cache sizes, and
 * prices each run with the hybrid-drive timing model.
 *
 * Semantics (exact, so that results can be checked): a request covers
 * blocks ⌊off/bs⌋ … ⌊(off+len−1)/bs⌋, each one access, in order.  Reads and
 * writes are accesses; a miss admits the block unless the policy or the
 * hint declines; writes allocate (write-back).  Discards remove their blocks
 * and are not accesses; flushes and zero-length requests are not accesses.
 *
 * Strategies are classifiers restricted to what a granularity of hint can
 * see:
 *   none     no hints
 *   process  comm, pid, ioprio (class, level, hint, and the 2014 RFC's
 *            advice bits in it): what a per-process interface could use
 *   file     label and object: what a filesystem or per-file fadvise knows
 *   io       everything, including the request's rwbs flags
 *   oracle   Belady's optimal replacement with bypass: a miss is not
 *            admitted when its next use is the farthest — the miss-minimal
 *            bound for every policy under these rules
 * Policies: the engine's (hintaware, lru, s3fifo, fifo, arc, sieve, 2q,
 * wtinylfu) and belady (Belady's MIN, admitting every miss).
 *
 * Rules (one per line, '#' comments):  CONDITION [&& CONDITION…] -> HINT
 *   CONDITION: FIELD=VALUE, FIELD!=VALUE, FIELD~REGEX, FIELD!~REGEX,
 *              FIELD<N, FIELD>N, FIELD<=N, FIELD>=N, or a flag name alone
 *   HINT:      a class and/or an advice (hc_hint_parse), e.g. journal,
 *              background+dontneed; or class=C advice=A
 * Class and advice resolve independently: each comes from the first rule
 * that matches and gives one, like the layers of hc_hint_resolve.  A rule
 * that reads a field its strategy may not see is an error.
 *
 * Functions return 0 or a negative errno; they never print.
 */
#ifndef HINTCACHE_REPLAY_H
#define HINTCACHE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "classes.h"
#include "hint.h"
#include "trace.h"

#ifdef __cplusplus
extern "C" {
#endif

enum hc_strategy {
  HC_STRATEGY_NONE = 0,
  HC_STRATEGY_PROCESS,
  HC_STRATEGY_FILE,
  HC_STRATEGY_IO,
  HC_STRATEGY_ORACLE,
};
#define HC_STRATEGY_COUNT 5

/* Names: "none", "process", "file", "io", "oracle". */
const char *hc_strategy_name (unsigned strategy);
int hc_strategy_parse (const char *name, enum hc_strategy *strategy);

/* ---- Rules. ---- */

typedef struct hc_rules hc_rules;

/* Compiles rules for a strategy from text (NULL: the built-in defaults).
 * Returns 0, -EINVAL with `err` (line and reason: a syntax error, an unknown
 * field or hint, a field the strategy may not see, a bad regex), or
 * -ENOMEM. */
int hc_rules_new (enum hc_strategy strategy, const char *text, hc_rules **out,
                  struct hc_parse_error *err);

void hc_rules_free (hc_rules *r);

/* A separate copy of compiled rules (for another thread: classification
 * memoises, so one compiled set serves one thread).  Returns 0 or
 * -ENOMEM. */
int hc_rules_copy (const hc_rules *r, hc_rules **out);

/* The built-in default rules of a strategy, as text. */
const char *hc_rules_default_text (enum hc_strategy strategy);

/* Classifies a request; `t` resolves its strings.  Not thread-safe (it
 * memoises regex results per string). */
struct hc_hint hc_rules_classify (hc_rules *r, const struct hc_trace_req *q, const hc_trace *t);

/* ---- Replay. ---- */

#define HC_LAT_BUCKETS 160 /* read latency histogram: 8 buckets per octave from 1 µs to 1 s */

/* Upper bound in µs of latency histogram bucket i. */
double hc_lat_bucket_us (unsigned i);

/* The replay's own policy, Belady's MIN (admitting every miss), named in
 * hc_replay_config.policies beside the engine's (hc_policy_name) and in the
 * rows it gives. */
#define HC_REPLAY_BELADY "belady"

struct hc_replay_config {
  uint32_t block_size;              /* default 4096 */
  const char *const *sizes;         /* "5%", "64M", "10000" (blocks) */
  size_t nsizes;
  const enum hc_strategy *strategies;
  size_t nstrategies;
  const char *const *policies;      /* engine policy names and HC_REPLAY_BELADY */
  size_t npolicies;
  hc_rules *rules[HC_STRATEGY_COUNT]; /* NULL: built-in defaults */
  hc_classes *classes;              /* NULL: built-in attributes */
  unsigned threads;                 /* simulators are shared out over this many
                                       threads (0: one per online CPU) */
  /* Called now and then with the fraction done (may be NULL). */
  void (*progress) (void *arg, double fraction);
  void *progress_arg;
  bool second_touch;                /* second-touch promotion (hc_open_opts);
                                       -ENOTSUP for a policy without it */
  uint64_t flash_budget;            /* flash bytes per day of the trace's time
                                       (hc_open_opts); 0: none */
};

/* One strategy × policy × size. */
struct hc_replay_row {
  enum hc_strategy strategy;
  char policy[16];
  uint64_t cache_blocks;
  uint64_t accesses, misses;               /* block accesses (reads and writes) */
  uint64_t read_accesses, read_misses;
  uint64_t write_accesses, write_misses;
  uint64_t admissions, bypasses, evictions;
  uint64_t dirty_evictions;                /* written back on eviction */
  uint64_t slow_reads, slow_writes;        /* slow-tier operations (requests) */
  uint64_t flash_bytes_written;            /* admissions and write hits */
  uint64_t read_requests;
  double mean_read_latency_us, p99_read_latency_us;
  uint64_t latency_hist[HC_LAT_BUCKETS];   /* read requests by latency */
  unsigned hint_effects;                   /* enum hc_effect bits in force at the end */
  uint64_t effect_changes;                 /* times the evidence changed them */
};

/* What the trace held. */
struct hc_replay_summary {
  uint64_t requests, reads, writes, discards, flushes;
  uint64_t block_accesses;
  uint64_t footprint_blocks;   /* distinct blocks read or written */
  uint64_t skipped_lines, first_bad_line;
  enum hc_trace_format format;
};

/* Replays the trace at `path` for every combination of the configuration:
 * rows for each strategy other than oracle × each policy other than belady ×
 * each size, then one belady row (strategy none) and one oracle row per
 * size if asked for.  *rows is malloc'd.  Returns 0, -EINVAL (a bad size or
 * name: `why`), or the trace's error. */
int hc_replay_run (const char *path, const struct hc_trace_opts *topts,
                   const struct hc_replay_config *cfg, struct hc_replay_row **rows, size_t *nrows,
                   struct hc_replay_summary *summary, char *why, size_t whylen);

/* Writes a self-contained HTML page (inline SVG plots: miss ratio against
 * cache size per strategy, read-latency CDFs, flash bytes written) into a
 * malloc'd string.  Returns 0 or -ENOMEM. */
int hc_replay_report_html (const struct hc_replay_row *rows, size_t nrows,
                           const struct hc_replay_summary *summary, const char *title,
                           char **html, size_t *len);

/* Writes a seeded synthetic trace of a database server to `path` in
 * hintcache's binary form: table and index random I/O with Zipf skew, WAL
 * appends with fsyncs, filesystem metadata and journal, a nightly backup
 * reading everything once at idle priority, and a log stream.  `scale`
 * multiplies its length (1 = about 1.5 M block accesses). */
int hc_replay_synth_db (const char *path, uint64_t seed, double scale, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_REPLAY_H */
