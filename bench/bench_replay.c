/* Replay benchmark: block accesses per second of a whole replay (both
 * passes, from hintcache's binary trace form), for every engine policy and
 * Belady, one policy × one size per run, each in its own process so its
 * peak RSS is its own.
 *
 * The trace: 10 M single-block reads, Zipf (α 0.9) over 1 M blocks mapped
 * through a random permutation — the workload libCacheSim's simulator
 * speeds are usually quoted on.  Two references are measured in the same
 * run: the cost of reading the trace alone (every request, read in batches
 * as the replayer reads them), the floor any replay pays; and a textbook
 * LRU simulator, built as the simulators whose speeds are usually quoted
 * are (a hash table of chained per-block nodes and a recency list), reading
 * the trace through the same reader and doing nothing else: no timing
 * model, no classes, no statistics.  Its miss counts must equal lru's, which checks both.
 *
 * Goals: lru ≥ 10 M accesses/s, hintaware ≥ 5 M accesses/s on one core.
 * The machines this runs on are shared: the trace is locked in memory (the
 * page cache would otherwise drop it, and a replay would wait for the disk)
 * and each figure is the best of five runs, taken in five rounds over
 * every configuration.
 * Usage: bench_replay [--quick] (1 M accesses)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/replay.h"

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t
rnd (void)
{
  rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
  return rs;
}

/* Writes n Zipf(alpha) reads over `blocks` blocks to path (bin form). */
static int
make_trace (const char *path, uint64_t n, uint64_t blocks, double alpha)
{
  hc_trace_writer *w;
  char why[256];
  uint64_t *perm = malloc (blocks * sizeof *perm);
  double *cdf = malloc (blocks * sizeof *cdf), sum = 0;

  if (!perm || !cdf || hc_trace_writer_open (path, HC_TRACE_BIN, 4096, &w, why, sizeof why) < 0) {
    fprintf (stderr, "bench_replay: %s\n", why);
    return -1;
  }
  for (uint64_t i = 0; i < blocks; i++) {
    perm[i] = i;
    sum += pow ((double) (i + 1), -alpha);
    cdf[i] = sum;
  }
  for (uint64_t i = blocks - 1; i > 0; i--) {
    uint64_t j = rnd () % (i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (uint64_t i = 0; i < n; i++) {
    double u = (double) (rnd () >> 11) / 9007199254740992.0 * sum;
    uint64_t lo = 0, hi = blocks - 1;
    while (lo < hi) {
      uint64_t mid = (lo + hi) / 2;
      if (cdf[mid] < u)
        lo = mid + 1;
      else
        hi = mid;
    }
    struct hc_trace_req q = { .ts_ns = i * 1000, .offset = perm[lo] * 4096, .length = 4096,
                              .op = HC_TOP_READ, .ioprio_class = 2, .ioprio_level = 4 };
    if (hc_trace_write_strings (w, &q, "bench", NULL) < 0)
      return -1;
  }
  free (perm);
  free (cdf);
  return hc_trace_writer_close (w);
}

/* Reads the whole trace; returns the seconds it took. */
static double
read_only (const char *path, uint64_t *requests)
{
  hc_trace *t;
  struct hc_trace_opts o = { 0 };
  struct hc_trace_req q[64];
  char why[256];
  double t0 = now ();
  long got;

  *requests = 0;
  if (hc_trace_open (path, &o, &t, why, sizeof why) < 0)
    return -1;
  while ((got = hc_trace_read (t, q, 64)) > 0)
    *requests += (uint64_t) got;
  hc_trace_close (t);
  return now () - t0;
}

/* The textbook LRU simulator's cached block. */
struct ref_node {
  uint64_t blk;
  struct ref_node *chain, *prev, *next; /* hash chain; recency list, newest first */
};

/* Replays the trace through the textbook LRU simulator with a cache of
 * `pct` % of the footprint (rounded down, as the replayer does).  Returns 0
 * and sets *accesses and *misses, or -1. */
static int
reference_lru (const char *path, unsigned pct, uint64_t *accesses, uint64_t *misses)
{
  struct hc_trace_opts o = { 0 };
  struct hc_trace_totals tot;
  struct hc_trace_req qs[64];
  hc_trace *t;
  long got;
  char why[256];

  *accesses = *misses = 0;
  if (hc_trace_open (path, &o, &t, why, sizeof why) < 0)
    return -1;
  if (hc_trace_totals (t, &tot) < 0) {
    hc_trace_close (t);
    return -1;
  }
  const uint64_t cap = tot.footprint_blocks * pct / 100;
  const unsigned shift = __builtin_ctz (tot.block_size);
  unsigned bits = 1;
  while ((UINT64_C (1) << bits) < cap)
    bits++;
  struct ref_node **table = calloc (UINT64_C (1) << bits, sizeof *table);
  struct ref_node *pool = malloc ((cap ? cap : 1) * sizeof *pool), *head = NULL, *tail = NULL;
  uint64_t used = 0;
  if (!table || !pool || cap == 0) {
    free (table);
    free (pool);
    hc_trace_close (t);
    return -1;
  }
  while ((got = hc_trace_read (t, qs, 64)) > 0) {
    for (long i = 0; i < got; i++) {
      const struct hc_trace_req q = qs[i];
      if ((q.op != HC_TOP_READ && q.op != HC_TOP_WRITE) || q.length == 0)
        continue;
      for (uint64_t b = q.offset >> shift; b <= (q.offset + q.length - 1) >> shift; b++) {
        struct ref_node **slot = &table[(b * UINT64_C (0x9e3779b97f4a7c15)) >> (64 - bits)], *n;
        (*accesses)++;
        for (n = *slot; n && n->blk != b; n = n->chain)
          ;
        if (n) { /* a hit: to the front */
          if (n == head)
            continue;
          n->prev->next = n->next;
          if (n->next)
            n->next->prev = n->prev;
          else
            tail = n->prev;
        } else { /* a miss: take a free node or the least recent one */
          (*misses)++;
          if (used < cap)
            n = &pool[used++];
          else {
            n = tail;
            tail = n->prev;
            if (tail)
              tail->next = NULL;
            else
              head = NULL;
            struct ref_node **p = &table[(n->blk * UINT64_C (0x9e3779b97f4a7c15)) >> (64 - bits)];
            while (*p != n)
              p = &(*p)->chain;
            *p = n->chain;
          }
          n->blk = b;
          n->chain = *slot;
          *slot = n;
        }
        n->prev = NULL;
        n->next = head;
        if (head)
          head->prev = n;
        else
          tail = n;
        head = n;
      }
    }
  }
  hc_trace_close (t);
  free (table);
  free (pool);
  return 0;
}

struct result {
  double seconds, miss_ratio;
  uint64_t accesses, misses;
  long rss_kb;
  int ok;
};

/* One replay in a child process (policy NULL: the textbook LRU); the
 * result comes back through a pipe. */
static struct result
run_once (const char *path, const char *policy, const char *size, enum hc_strategy strategy)
{
  struct result r = { 0 };
  int fd[2];

  if (pipe (fd) < 0)
    return r;
  pid_t pid = fork ();
  if (pid == 0) {
    const char *sizes[] = { size }, *pols[] = { policy };
    struct hc_replay_config cfg = { .sizes = sizes, .nsizes = 1, .strategies = &strategy,
                                    .nstrategies = 1, .policies = pols, .npolicies = 1 };
    struct hc_trace_opts o = { 0 };
    struct hc_replay_row *rows;
    size_t n;
    char why[256];
    double t0 = now ();
    int rc;
    if (policy) {
      rc = hc_replay_run (path, &o, &cfg, &rows, &n, NULL, why, sizeof why);
      if (rc == 0 && n == 1) {
        r.accesses = rows[0].accesses;
        r.misses = rows[0].misses;
      } else
        rc = -1;
    } else if ((rc = reference_lru (path, (unsigned) atoi (size), &r.accesses, &r.misses)) < 0)
      snprintf (why, sizeof why, "the textbook LRU failed");
    r.seconds = now () - t0;
    if (rc == 0) {
      struct rusage ru;
      getrusage (RUSAGE_SELF, &ru);
      r.rss_kb = ru.ru_maxrss;
      r.miss_ratio = (double) r.misses / r.accesses;
      r.ok = 1;
    } else
      fprintf (stderr, "bench_replay: %s\n", why);
    if (write (fd[1], &r, sizeof r) != sizeof r)
      _exit (1);
    _exit (0);
  }
  close (fd[1]);
  if (read (fd[0], &r, sizeof r) != sizeof r)
    r.ok = 0;
  close (fd[0]);
  waitpid (pid, NULL, 0);
  return r;
}

/* Rounds: every configuration runs once per round, in turn, and keeps its
 * best; on a shared machine whose speed drifts over minutes, that spreads
 * each one's runs over the whole benchmark instead of one stretch of it. */
#define RUNS 5

int
main (int argc, char **argv)
{
  const bool quick = argc > 1 && strcmp (argv[1], "--quick") == 0;
  const uint64_t n = quick ? 1000000 : 10000000, blocks = quick ? 100000 : 1000000;
  char path[] = "/tmp/hc-bench-replay-XXXXXX";
  int fd = mkstemp (path);

  if (fd < 0)
    return 1;
  close (fd);
  printf ("replay benchmark: %llu single-block reads, Zipf 0.9 over %llu blocks, bin form\n",
          (unsigned long long) n, (unsigned long long) blocks);
  if (make_trace (path, n, blocks, 0.9) < 0) {
    unlink (path);
    return 1;
  }
  /* Keep the trace in memory while measuring. */
  struct stat st;
  void *pin = MAP_FAILED;
  if ((fd = open (path, O_RDONLY)) >= 0 && fstat (fd, &st) == 0)
    pin = mmap (NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (pin == MAP_FAILED || mlock (pin, (size_t) st.st_size) < 0)
    printf ("(could not lock the trace in memory: figures may include disk reads)\n");
  /* The configurations; NULL: the textbook LRU. */
  static const struct {
    const char *policy, *size;
    double goal;
  } runs[] = {
    { NULL, "1%", 0 },        { NULL, "10%", 0 },       { "lru", "1%", 10 },
    { "lru", "10%", 10 },     { "s3fifo", "1%", 0 },    { "s3fifo", "10%", 0 },
    { "hintaware", "1%", 5 }, { "hintaware", "10%", 5 }, { "fifo", "1%", 0 },
    { "fifo", "10%", 0 },     { "arc", "1%", 0 },       { "arc", "10%", 0 },
    { "sieve", "1%", 0 },     { "sieve", "10%", 0 },    { "2q", "1%", 0 },
    { "2q", "10%", 0 },       { "wtinylfu", "1%", 0 },  { "wtinylfu", "10%", 0 },
    { "belady", "10%", 0 },
  };
  enum { NRUNS = sizeof runs / sizeof runs[0] };
  struct result best[NRUNS] = { { 0 } };
  uint64_t reqs = 0;
  double tr = -1;
  for (int round = 0; round < RUNS; round++) {
    double t = read_only (path, &reqs);
    tr = tr < 0 || (t >= 0 && t < tr) ? t : tr;
    for (size_t i = 0; i < NRUNS; i++) {
      struct result r = run_once (path, runs[i].policy, runs[i].size, HC_STRATEGY_NONE);
      if (r.ok && (!best[i].ok || r.seconds < best[i].seconds))
        best[i] = r;
    }
  }
  if (tr <= 0 || !best[0].ok || !best[1].ok) {
    printf ("reading the trace or the textbook LRU failed\n");
    return 1;
  }
  const double read_rate = reqs / tr / 1e6;
  printf ("reading the trace alone: %.1f M requests/s (the floor of any replay)\n", read_rate);
  printf ("textbook LRU simulator (hash chains + list, nothing else):");
  for (size_t i = 0; i < 2; i++)
    printf ("  %s %.2f M access/s (%.0f MB)", runs[i].size,
            best[i].accesses / best[i].seconds / 1e6, best[i].rss_kb / 1024.0);
  printf ("\n\n%-10s %5s %12s %11s %11s %9s %10s\n", "policy", "cache", "M access/s", "vs reading",
          "vs textbook", "miss %", "peak RSS");
  int rc = 0;
  for (size_t i = 2; i < NRUNS; i++) {
    const struct result *r = &best[i], *ref = &best[strcmp (runs[i].size, "1%") == 0 ? 0 : 1];
    if (!r->ok) {
      printf ("%-10s %5s failed\n", runs[i].policy, runs[i].size);
      rc = 1;
      continue;
    }
    double rate = r->accesses / r->seconds / 1e6;
    printf ("%-10s %5s %12.2f %10.2fx %10.2fx %9.2f %7.0f MB", runs[i].policy, runs[i].size, rate,
            rate / read_rate, rate / (ref->accesses / ref->seconds / 1e6), 100 * r->miss_ratio,
            r->rss_kb / 1024.0);
    if (runs[i].goal)
      printf ("   (goal >= %.0f M/s)", runs[i].goal);
    else if (strcmp (runs[i].policy, "belady") == 0)
      printf ("   (needs every access's next use)");
    printf ("\n");
    if (strcmp (runs[i].policy, "lru") == 0 && r->misses != ref->misses) {
      printf ("lru missed %llu times, the textbook LRU %llu: they must agree\n",
              (unsigned long long) r->misses, (unsigned long long) ref->misses);
      rc = 1;
    }
  }
  if (pin != MAP_FAILED)
    munmap (pin, (size_t) st.st_size);
  if (fd >= 0)
    close (fd);
  if (getenv ("HC_BENCH_KEEP"))
    printf ("trace kept in %s\n", path);
  else
    unlink (path);
  return rc;
}
