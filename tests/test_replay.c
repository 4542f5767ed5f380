/* The replayer against independent references.
 *
 *   - LRU miss counts equal a reference LRU written here (its own CSV
 *     parser on zlib, its own hash table and list) exactly, on synthetic
 *     traces with discards, flushes, zero-length and unaligned requests, and
 *     on both shared development traces at three sizes;
 *   - the oracle (Belady with bypass) equals the true optimum found by
 *     exhaustive search on small traces, and no row ever beats it; belady
 *     (MIN) is never beaten by a row that admitted every miss;
 *   - cache sizes parse as blocks, bytes and percentages of the footprint;
 *   - strategies cannot read fields their granularity cannot see, and
 *     rules classify with class and advice resolved independently;
 *   - a replay is deterministic, and the binary form (whose recorded totals
 *     spare the first pass) replays exactly as the CSV it came from.
 * (SIEVE, 2Q and W-TinyLFU have references of their own: test_policies.c.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include "hintcache/replay.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t
next_rand (void)
{
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* ---------------------------------------------------------------------------
 * The reference: a request list parsed from CSV here, and an LRU of its own.
 */

struct ref_req {
  char op;
  uint64_t off, len;
};

struct ref_trace {
  struct ref_req *q;
  size_t n, cap;
  uint64_t footprint;
};

/* The reference's own parse of the labeled CSV: only op, offset, length. */
static int
ref_load (const char *path, struct ref_trace *t)
{
  gzFile f = gzopen (path, "rb");
  char line[4096];
  bool header = true;

  if (!f)
    return -errno;
  while (gzgets (f, line, sizeof line)) {
    if (header) {
      header = false;
      if (strncmp (line, "ts_ns,", 6) == 0)
        continue;
    }
    char *p = strchr (line, ',');
    if (!p)
      continue;
    struct ref_req r = { .op = p[1] };
    char *end;
    r.off = strtoull (p + 3, &end, 10);
    r.len = strtoull (end + 1, NULL, 10);
    if (t->n == t->cap) {
      t->cap = t->cap ? 2 * t->cap : 4096;
      t->q = realloc (t->q, t->cap * sizeof *t->q);
    }
    t->q[t->n++] = r;
  }
  gzclose (f);
  return 0;
}

/* An LRU over block numbers: open-addressing hash to list nodes. */
struct ref_lru {
  uint64_t cap, used;
  uint64_t *key;                  /* node → block */
  uint32_t *prev, *next;          /* node links; 0 is the list head */
  uint32_t *slot;                 /* hash slot → node (0 empty) */
  uint64_t nslots;
  uint32_t free_head;
};

static uint64_t
mix (uint64_t x)
{
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  return x;
}

static void
lru_init (struct ref_lru *l, uint64_t cap)
{
  memset (l, 0, sizeof *l);
  l->cap = cap;
  l->key = calloc (cap + 1, sizeof *l->key);
  l->prev = calloc (cap + 1, sizeof *l->prev);
  l->next = calloc (cap + 1, sizeof *l->next);
  for (l->nslots = 16; l->nslots < 4 * cap; l->nslots *= 2)
    ;
  l->slot = calloc (l->nslots, sizeof *l->slot);
  for (uint32_t i = 1; i <= cap; i++)
    l->next[i] = i < cap ? i + 1 : 0; /* the free chain */
  l->free_head = 1;
}

static void
lru_free (struct ref_lru *l)
{
  free (l->key), free (l->prev), free (l->next), free (l->slot);
}

/* Linear probing with backward-shift deletion. */
static uint64_t
lru_find_slot (struct ref_lru *l, uint64_t blk)
{
  uint64_t s = mix (blk) & (l->nslots - 1);
  while (l->slot[s] && l->key[l->slot[s]] != blk)
    s = (s + 1) & (l->nslots - 1);
  return s;
}

static void
lru_slot_delete (struct ref_lru *l, uint64_t s)
{
  uint64_t m = l->nslots - 1;
  l->slot[s] = 0;
  for (uint64_t j = (s + 1) & m; l->slot[j]; j = (j + 1) & m) {
    uint64_t home = mix (l->key[l->slot[j]]) & m;
    if (((j - home) & m) >= ((j - s) & m)) {
      l->slot[s] = l->slot[j];
      l->slot[j] = 0;
      s = j;
    }
  }
}

static void
unlink_node (struct ref_lru *l, uint32_t n)
{
  l->next[l->prev[n]] = l->next[n];
  l->prev[l->next[n]] = l->prev[n];
}

static void
push_front (struct ref_lru *l, uint32_t n)
{
  l->prev[n] = 0;
  l->next[n] = l->next[0];
  l->prev[l->next[0]] = n;
  l->next[0] = n;
}

/* Removes a block if cached. */
static void
lru_remove (struct ref_lru *l, uint64_t blk)
{
  uint64_t s = lru_find_slot (l, blk);
  uint32_t n = l->slot[s];
  if (!n)
    return;
  unlink_node (l, n);
  lru_slot_delete (l, s);
  l->next[n] = l->free_head;
  l->free_head = n;
  l->used--;
}

/* One access; returns true on a hit. */
static bool
lru_access (struct ref_lru *l, uint64_t blk)
{
  uint64_t s = lru_find_slot (l, blk);
  uint32_t n = l->slot[s];
  if (n) {
    unlink_node (l, n);
    push_front (l, n);
    return true;
  }
  if (l->used == l->cap)
    lru_remove (l, l->key[l->prev[0]]);
  n = l->free_head;
  l->free_head = l->next[n];
  l->key[n] = blk;
  push_front (l, n);
  l->slot[lru_find_slot (l, blk)] = n;
  l->used++;
  return false;
}

struct ref_result {
  uint64_t accesses, misses, read_accesses, read_misses;
};

static struct ref_result
ref_replay (const struct ref_trace *t, uint64_t cap, uint32_t bs)
{
  struct ref_lru l;
  struct ref_result r = { 0 };

  lru_init (&l, cap);
  for (size_t i = 0; i < t->n; i++) {
    const struct ref_req *q = &t->q[i];
    if (!q->len || (q->op != 'R' && q->op != 'W' && q->op != 'D'))
      continue;
    for (uint64_t b = q->off / bs; b <= (q->off + q->len - 1) / bs; b++) {
      if (q->op == 'D') {
        lru_remove (&l, b);
        continue;
      }
      bool hit = lru_access (&l, b);
      r.accesses++;
      r.misses += !hit;
      if (q->op == 'R') {
        r.read_accesses++;
        r.read_misses += !hit;
      }
    }
  }
  lru_free (&l);
  return r;
}

static int
cmp_u64 (const void *x, const void *y)
{
  uint64_t u = *(const uint64_t *) x, w = *(const uint64_t *) y;
  return u < w ? -1 : u > w;
}

/* Footprint: distinct blocks read or written (sort and count). */
static uint64_t
ref_footprint (const struct ref_trace *t, uint32_t bs)
{
  uint64_t *all = NULL, n = 0, cap = 0, fp = 0;
  for (size_t i = 0; i < t->n; i++) {
    const struct ref_req *q = &t->q[i];
    if (!q->len || (q->op != 'R' && q->op != 'W'))
      continue;
    for (uint64_t b = q->off / bs; b <= (q->off + q->len - 1) / bs; b++) {
      if (n == cap) {
        cap = cap ? 2 * cap : 4096;
        all = realloc (all, cap * sizeof *all);
      }
      all[n++] = b;
    }
  }
  qsort (all, n, sizeof *all, cmp_u64);
  for (uint64_t i = 0; i < n; i++)
    fp += i == 0 || all[i] != all[i - 1];
  free (all);
  return fp;
}

/* ---------------------------------------------------------------------------
 * Helpers around hc_replay_run.
 */

static int
replay (const char *path, const char *const *sizes, size_t nsizes, const enum hc_strategy *st,
        size_t nst, const char *const *pols, size_t npols, uint32_t bs, struct hc_replay_row **rows,
        size_t *n, struct hc_replay_summary *sum)
{
  struct hc_replay_config cfg = {
    .block_size = bs, .sizes = sizes, .nsizes = nsizes, .strategies = st, .nstrategies = nst,
    .policies = pols, .npolicies = npols,
  };
  struct hc_trace_opts o = { 0 };
  char why[256];
  int rc = hc_replay_run (path, &o, &cfg, rows, n, sum, why, sizeof why);
  if (rc < 0)
    fprintf (stderr, "replay %s: %s (%d)\n", path, why, rc);
  return rc;
}

static const struct hc_replay_row *
find_row (const struct hc_replay_row *rows, size_t n, enum hc_strategy s, const char *pol,
          uint64_t blocks)
{
  for (size_t i = 0; i < n; i++)
    if (rows[i].strategy == s && strcmp (rows[i].policy, pol) == 0 && rows[i].cache_blocks == blocks)
      return &rows[i];
  return NULL;
}

/* Checks that LRU under strategy none matches the reference at each size
 * (percentages of the footprint). */
static void
check_lru_exact (const char *path, const unsigned *pct, size_t npct, uint32_t bs)
{
  struct ref_trace t = { 0 };
  struct hc_replay_row *rows = NULL;
  struct hc_replay_summary sum;
  size_t n = 0;
  char bufs[8][16];
  const char *sizes[8];
  const enum hc_strategy none = HC_STRATEGY_NONE;
  const char *lru = "lru";

  CHECK (ref_load (path, &t) == 0, "%s loads", path);
  uint64_t fp = ref_footprint (&t, bs);
  for (size_t i = 0; i < npct; i++) {
    snprintf (bufs[i], sizeof bufs[i], "%u%%", pct[i]);
    sizes[i] = bufs[i];
  }
  if (replay (path, sizes, npct, &none, 1, &lru, 1, bs, &rows, &n, &sum) < 0) {
    CHECK (0, "%s replays", path);
    free (t.q);
    return;
  }
  CHECK_EQ (sum.footprint_blocks, fp, "%s footprint %" PRIu64 " vs %" PRIu64, path,
            sum.footprint_blocks, fp);
  CHECK_EQ (n, npct, "%s: one row per size", path);
  for (size_t i = 0; i < npct && i < n; i++) {
    uint64_t cap = fp * pct[i] / 100;
    const struct hc_replay_row *r = find_row (rows, n, HC_STRATEGY_NONE, "lru", cap);
    CHECK (r, "%s: a row at %u%% = %" PRIu64 " blocks", path, pct[i], cap);
    if (!r || cap == 0)
      continue;
    struct ref_result e = ref_replay (&t, cap, bs);
    CHECK_EQ (r->accesses, e.accesses, "%s @%" PRIu64 ": accesses %" PRIu64 " vs %" PRIu64, path,
              cap, r->accesses, e.accesses);
    CHECK_EQ (r->misses, e.misses, "%s @%" PRIu64 ": lru misses %" PRIu64 " vs reference %" PRIu64,
              path, cap, r->misses, e.misses);
    CHECK_EQ (r->read_accesses, e.read_accesses, "%s: read accesses", path);
    CHECK_EQ (r->read_misses, e.read_misses, "%s @%" PRIu64 ": read misses %" PRIu64 " vs %" PRIu64,
              path, cap, r->read_misses, e.read_misses);
    CHECK_EQ (r->bypasses, 0, "%s: lru admits every miss", path);
    printf ("  %s @ %u%% (%" PRIu64 " blocks): %" PRIu64 " accesses, %" PRIu64
            " lru misses = reference\n", path, pct[i], cap, r->accesses, r->misses);
  }
  free (rows);
  free (t.q);
}

/* Writes a random labeled CSV trace: reads and writes over a skewed span,
 * multi-block and unaligned requests, discards, flushes, zero lengths, a
 * sequential scan, and a few labels and comms for the strategies. */
static void
write_synthetic (const char *path, unsigned nreq, uint64_t span_blocks)
{
  static const char *const labels[] = { "table", "index", "wal", "fs_metadata", "temp",
                                        "journal", "other_file" };
  static const char *const comms[] = { "postgres", "jbd2/loop0-8", "kworker/u4:1", "tar" };
  FILE *f = fopen (path, "w");
  uint64_t scan = 0;

  fprintf (f, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,"
              "comm,pid,label,object\n");
  for (unsigned i = 0; i < nreq; i++) {
    uint64_t r = next_rand ();
    unsigned kind = r % 100;
    const char *op = kind < 60 ? "R" : kind < 90 ? "W" : kind < 94 ? "D" : kind < 97 ? "F" : "R";
    uint64_t blk = (r >> 8) % 5 < 4 ? (r >> 16) % (span_blocks / 8) : (r >> 16) % span_blocks;
    uint64_t off = blk * 4096 + ((r >> 40) % 4 == 0 ? (r >> 44) % 4096 : 0);
    uint64_t len = ((r >> 50) % 4 + 1) * 4096 - ((r >> 54) % 3 == 0 ? 512 : 0);
    if (kind >= 97) { /* a sequential scan at idle priority */
      off = (span_blocks + scan) * 4096;
      scan = (scan + 32) % span_blocks;
      len = 128 * 1024;
    }
    if (op[0] == 'F' || (r >> 58) % 32 == 0)
      len = 0;
    unsigned lab = (unsigned) ((r >> 20) % 7), comm = (unsigned) ((r >> 24) % 4);
    fprintf (f, "%u,%s,%" PRIu64 ",%" PRIu64 ",%s%s,%s,0,%u,%s,%u,%s,/db/%s\n", i * 1000, op, off,
             len, op[0] == 'F' ? "F" : op, op[0] == 'F' ? "F" : (r >> 30) % 3 == 0 ? "SM" : "S",
             kind >= 97 ? "idle" : "be", kind >= 97 ? 7 : 4,
             comms[comm], 100 + comm, labels[lab], labels[lab]);
  }
  fclose (f);
}

/* ---------------------------------------------------------------------------
 * The optimum by exhaustive search, for tiny read-only traces.
 */

/* Minimum misses over every admission and eviction choice: dp over cache
 * contents (subsets of at most `cap` of the ≤ 12 distinct blocks). */
static unsigned
brute_optimum (const unsigned *trace, unsigned n, unsigned nblocks, unsigned cap)
{
  unsigned nstates = 1u << nblocks, *dp = malloc (nstates * sizeof *dp),
           *nx = malloc (nstates * sizeof *nx);
  const unsigned INFM = ~0u;

  for (unsigned s = 0; s < nstates; s++)
    dp[s] = s == 0 ? 0 : INFM;
  for (unsigned i = 0; i < n; i++) {
    unsigned bit = 1u << trace[i];
    for (unsigned s = 0; s < nstates; s++)
      nx[s] = INFM;
    for (unsigned s = 0; s < nstates; s++) {
      if (dp[s] == INFM)
        continue;
      if (s & bit) {
        nx[s] = dp[s] < nx[s] ? dp[s] : nx[s];
        continue;
      }
      unsigned m = dp[s] + 1;
      if (m < nx[s]) /* bypass */
        nx[s] = m;
      if ((unsigned) __builtin_popcount (s) < cap) {
        if (m < nx[s | bit])
          nx[s | bit] = m;
      } else {
        for (unsigned v = s; v; v &= v - 1) {
          unsigned t = (s & ~(v & -v)) | bit;
          if (m < nx[t])
            nx[t] = m;
        }
      }
    }
    memcpy (dp, nx, nstates * sizeof *dp);
  }
  unsigned best = INFM;
  for (unsigned s = 0; s < nstates; s++)
    if (dp[s] < best)
      best = dp[s];
  free (dp);
  free (nx);
  return best;
}

static void
check_oracle_is_optimal (const char *dir)
{
  char path[512];
  snprintf (path, sizeof path, "%s/tiny.csv", dir);
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_ORACLE };
  const char *pols[] = { "lru", "belady" };
  unsigned worst_gap = 0;

  for (unsigned round = 0; round < 300; round++) {
    unsigned nblocks = 3 + (unsigned) (next_rand () % 6), n = 6 + (unsigned) (next_rand () % 14);
    unsigned cap = 1 + (unsigned) (next_rand () % (nblocks - 1)), trace[32];
    FILE *f = fopen (path, "w");
    fprintf (f, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,"
                "comm,pid,label,object\n");
    for (unsigned i = 0; i < n; i++) {
      trace[i] = (unsigned) (next_rand () % nblocks);
      fprintf (f, "%u,R,%u,4096,R,be,0,4,t,1,table,x\n", i, trace[i] * 4096);
    }
    fclose (f);
    char capbuf[16];
    snprintf (capbuf, sizeof capbuf, "%u", cap);
    const char *sizes[] = { capbuf };
    struct hc_replay_row *rows = NULL;
    size_t nr = 0;
    struct hc_replay_summary sum;
    if (replay (path, sizes, 1, st, 2, pols, 2, 4096, &rows, &nr, &sum) < 0) {
      CHECK (0, "tiny replay");
      return;
    }
    const struct hc_replay_row *o = find_row (rows, nr, HC_STRATEGY_ORACLE, "belady", cap);
    const struct hc_replay_row *b = find_row (rows, nr, HC_STRATEGY_NONE, "belady", cap);
    const struct hc_replay_row *l = find_row (rows, nr, HC_STRATEGY_NONE, "lru", cap);
    unsigned opt = brute_optimum (trace, n, nblocks, cap);
    CHECK (o && o->misses == opt, "round %u: oracle %" PRIu64 " misses, optimum %u", round,
           o ? o->misses : 0, opt);
    CHECK (b && l && b->misses <= l->misses && b->misses >= opt, "round %u: belady between", round);
    if (b && b->misses - opt > worst_gap)
      worst_gap = (unsigned) (b->misses - opt);
    free (rows);
  }
  printf ("  oracle = exhaustive optimum on 300 tiny traces (belady without bypass up to %u "
          "misses worse)\n", worst_gap);
  unlink (path);
}

/* No row beats the oracle; belady beats every row that admitted all misses. */
static void
check_bounds (const char *path, const char *const *sizes, size_t nsizes)
{
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_PROCESS, HC_STRATEGY_FILE,
                                  HC_STRATEGY_IO, HC_STRATEGY_ORACLE };
  const char *pols[] = { "hintaware", "lru", "s3fifo", "fifo", "arc", "sieve", "2q", "wtinylfu",
                         "belady" };
  const size_t npols = sizeof pols / sizeof pols[0];
  struct hc_replay_row *rows = NULL;
  size_t n = 0;
  struct hc_replay_summary sum;
  unsigned checked = 0;

  if (replay (path, sizes, nsizes, st, 5, pols, npols, 4096, &rows, &n, &sum) < 0) {
    CHECK (0, "%s replays with every strategy and policy", path);
    return;
  }
  CHECK_EQ (n, nsizes * (4 * (npols - 1) + 2), "%s: rows for the whole grid", path);
  for (size_t i = 0; i < n; i++) {
    const struct hc_replay_row *r = &rows[i];
    const struct hc_replay_row *o = find_row (rows, n, HC_STRATEGY_ORACLE, "belady", r->cache_blocks);
    const struct hc_replay_row *b = find_row (rows, n, HC_STRATEGY_NONE, "belady", r->cache_blocks);
    CHECK (o && b, "bound rows exist");
    if (!o || !b)
      continue;
    CHECK (o->misses <= r->misses, "%s: %s/%s at %" PRIu64 " blocks: %" PRIu64
           " misses beats the oracle's %" PRIu64, path, hc_strategy_name (r->strategy), r->policy,
           r->cache_blocks, r->misses, o->misses);
    if (r->bypasses == 0)
      CHECK (b->misses <= r->misses, "%s: %s/%s at %" PRIu64 " blocks admits every miss yet "
             "beats belady: %" PRIu64 " < %" PRIu64, path, hc_strategy_name (r->strategy),
             r->policy, r->cache_blocks, r->misses, b->misses);
    CHECK_EQ (r->accesses, sum.block_accesses, "every row sees every access");
    CHECK (r->read_misses <= r->read_accesses && r->misses == r->read_misses + r->write_misses,
           "miss accounting");
    CHECK_EQ (r->admissions + r->bypasses, r->misses, "each miss admitted or bypassed");
    checked++;
  }
  printf ("  %s: %u rows within the oracle and belady bounds\n", path, checked);
  free (rows);
}

/* ---------------------------------------------------------------------------
 * Sizes, rules, determinism.
 */

static void
check_sizes (const char *path)
{
  const enum hc_strategy none = HC_STRATEGY_NONE;
  const char *lru = "lru";
  struct hc_replay_row *rows = NULL;
  size_t n = 0;
  struct hc_replay_summary sum;
  const char *good[] = { "64M", "100", "1%", "50%" };

  if (replay (path, good, 4, &none, 1, &lru, 1, 4096, &rows, &n, &sum) == 0) {
    CHECK (n == 4 && rows[0].cache_blocks == 16384, "64M is 16384 blocks");
    CHECK (n == 4 && rows[1].cache_blocks == 100, "100 is blocks");
    CHECK (n == 4 && rows[2].cache_blocks == sum.footprint_blocks / 100, "1%% rounds down");
    CHECK (n == 4 && rows[3].cache_blocks == sum.footprint_blocks / 2, "50%%");
    free (rows);
  } else
    CHECK (0, "good sizes accepted");
  const char *bad[] = { "0", "abc", "101%", "5%%", "-3", "1.5", "64Q", "" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct hc_replay_config cfg = { .sizes = &bad[i], .nsizes = 1, .strategies = &none,
                                    .nstrategies = 1, .policies = &lru, .npolicies = 1 };
    struct hc_trace_opts o = { 0 };
    char why[256] = "";
    rows = NULL;
    int rc = hc_replay_run (path, &o, &cfg, &rows, &n, NULL, why, sizeof why);
    CHECK (rc == -EINVAL && why[0], "size '%s' refused (%d: %s)", bad[i], rc, why);
    free (rows);
  }
  const char *nopol = "clairvoyant";
  struct hc_replay_config cfg = { .sizes = good, .nsizes = 1, .strategies = &none, .nstrategies = 1,
                                  .policies = &nopol, .npolicies = 1 };
  struct hc_trace_opts o = { 0 };
  char why[256] = "";
  CHECK (hc_replay_run (path, &o, &cfg, &rows, &n, NULL, why, sizeof why) == -EINVAL
         && strstr (why, "clairvoyant"), "unknown policy named: %s", why);
}

/* Requests the replayer cannot simulate exactly: a length of 4 GiB or more
 * is a damaged line (skipped, or an error under strict), not billions of
 * block accesses; blocks beyond the map's 40-bit block numbers refuse the
 * replay with the reason, under every policy and Belady, instead of
 * aliasing other blocks (or, before, never finishing). */
static void
check_out_of_range (const char *dir)
{
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_ORACLE };
  const char *pols[] = { "lru", "s3fifo", "hintaware", "fifo", "arc", "sieve", "2q", "wtinylfu" },
             *size = "10", *all = "30";
  char path[512], why[256];
  struct hc_replay_row *rows = NULL;
  size_t n = 0;
  struct hc_replay_summary sum;
  FILE *f;

  snprintf (path, sizeof path, "%s/range.csv", dir);
  f = fopen (path, "w");
  fprintf (f, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,"
              "comm,pid,label,object\n");
  for (int i = 0; i < 40; i++)
    fprintf (f, "%d,R,%d,4096,R,be,0,4,a,1,table,x\n", i, (i % 25) * 4096);
  fprintf (f, "50,R,0,4294967296,R,be,0,4,a,1,table,x\n"); /* 1 M blocks over */
  fprintf (f, "51,W,8192,4294967295,W,be,0,4,a,1,table,x\n"); /* the longest allowed */
  fclose (f);
  if (replay (path, &size, 1, st, 1, pols, 1, 4096, &rows, &n, &sum) == 0) {
    CHECK (sum.skipped_lines == 1 && sum.first_bad_line == 42 && sum.requests == 41
               && sum.block_accesses == 40 + 1048576,
           "a 4 GiB request is a skipped line: %llu skipped (line %llu), %llu requests, "
           "%llu accesses", (unsigned long long) sum.skipped_lines,
           (unsigned long long) sum.first_bad_line, (unsigned long long) sum.requests,
           (unsigned long long) sum.block_accesses);
    free (rows);
  } else
    CHECK (0, "a 4 GiB request does not stop a replay");
  struct hc_trace_opts strict = { .strict = true };
  struct hc_replay_config cfg = { .sizes = &size, .nsizes = 1, .strategies = st, .nstrategies = 1,
                                  .policies = pols, .npolicies = 1 };
  rows = NULL;
  CHECK (hc_replay_run (path, &strict, &cfg, &rows, &n, NULL, why, sizeof why) == -EINVAL
             && strstr (why, "line 42") && strstr (why, "4 GiB"),
         "strict: the 4 GiB line is the error: %s", why);
  free (rows);

  /* The last block the map can hold, then one past it (2^40 blocks of 4 KiB),
   * in a cache that holds every block. */
  static const unsigned long long ends[] = { (1ULL << 52) - 4096, 1ULL << 52 };
  for (int k = 0; k < 2; k++) {
    f = fopen (path, "w");
    fprintf (f, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,"
                "comm,pid,label,object\n");
    for (int i = 0; i < 40; i++)
      fprintf (f, "%d,R,%llu,4096,R,be,0,4,a,1,table,x\n", i, ends[k] - (i % 25) * 4096ULL);
    fclose (f);
    cfg = (struct hc_replay_config) { .sizes = &all, .nsizes = 1, .strategies = st,
                                      .nstrategies = 2, .policies = pols,
                                      .npolicies = sizeof pols / sizeof pols[0] };
    struct hc_trace_opts o = { 0 };
    rows = NULL;
    why[0] = '\0';
    int rc = hc_replay_run (path, &o, &cfg, &rows, &n, NULL, why, sizeof why);
    if (k == 0) {
      CHECK (rc == 0 && n == sizeof pols / sizeof pols[0] + 1,
             "the last addressable block replays: %d %s", rc, why);
      for (size_t i = 0; rc == 0 && i < n; i++)
        CHECK (rows[i].misses == 25 && rows[i].accesses == 40, "%s: %llu misses of %llu",
               rows[i].policy, (unsigned long long) rows[i].misses,
               (unsigned long long) rows[i].accesses);
    } else
      CHECK (rc == -ERANGE && strstr (why, "2^40 blocks"), "beyond it is refused: %d %s", rc, why);
    free (rows);
  }
  unlink (path);
}

static void
check_rules (const char *path)
{
  struct hc_parse_error err;
  hc_rules *r = NULL;
  static const struct {
    enum hc_strategy s;
    const char *text;
    int rc;
    unsigned line;
  } cases[] = {
    { HC_STRATEGY_PROCESS, "comm~^kworker -> background\nioprio_class=idle -> dontneed\n", 0, 0 },
    { HC_STRATEGY_PROCESS, "# ok\ncomm=tar -> background\nlabel=wal -> journal\n", -EINVAL, 3 },
    { HC_STRATEGY_PROCESS, "object~^/backup -> dontneed\n", -EINVAL, 1 },
    { HC_STRATEGY_PROCESS, "meta -> metadata\n", -EINVAL, 1 },
    { HC_STRATEGY_PROCESS, "rfc2014=dontneed && pid>100 -> dontneed\n", 0, 0 },
    { HC_STRATEGY_FILE, "label=wal -> class=journal\nobject~^/backup/ -> advice=dontneed\n", 0, 0 },
    { HC_STRATEGY_FILE, "label=wal -> journal\n\ncomm~^jbd2 -> journal\n", -EINVAL, 3 },
    { HC_STRATEGY_FILE, "ioprio_class=idle -> background\n", -EINVAL, 1 },
    { HC_STRATEGY_FILE, "label=wal && sync -> journal\n", -EINVAL, 1 },
    { HC_STRATEGY_FILE, "op=W -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "meta && op=R -> metadata\nlength>=1048576 -> streaming\ncomm~^jbd2 -> journal\n"
                      "label=temp -> dontneed\n", 0, 0 },
    { HC_STRATEGY_IO, "colour=blue -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "label=wal journal\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "label=wal -> jurnal\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "comm~( -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "comm~^(jbd2|kworker)[[:digit:]]{1,3}.*$ -> data\n", 0, 0 },
    { HC_STRATEGY_IO, "pid>1 -> data\ncomm~((((((((((((((((((((((((a+)+)+)+)+)+)+)+)+)+)+"
                      ")+)+)+)+)+)+)+)+)+)+)+)+)+)+ -> data\n", -EINVAL, 2 },
    { HC_STRATEGY_IO, "object~(a?){1000} -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "object~(()+){255} -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "length~4096 -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "comm<5 -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "label= -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_IO, "&& meta -> data\n", -EINVAL, 1 },
    { HC_STRATEGY_NONE, "label=wal -> journal\n", -EINVAL, 1 },
    { HC_STRATEGY_NONE, "# nothing\n", 0, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memset (&err, 0, sizeof err);
    r = NULL;
    int rc = hc_rules_new (cases[i].s, cases[i].text, &r, &err);
    CHECK_EQ (rc, cases[i].rc, "rules case %zu (%s): rc %d, %s", i, hc_strategy_name (cases[i].s),
              rc, err.msg);
    if (rc < 0)
      CHECK (err.line == cases[i].line && err.msg[0], "case %zu: line %u (expected %u): %s", i,
             err.line, cases[i].line, err.msg);
    hc_rules_free (r);
  }
  for (unsigned s = HC_STRATEGY_PROCESS; s <= HC_STRATEGY_IO; s++) {
    r = NULL;
    CHECK (hc_rules_new ((enum hc_strategy) s, NULL, &r, &err) == 0, "built-in %s rules compile",
           hc_strategy_name (s));
    hc_rules_free (r);
  }

  /* Classification on a real reader: class and advice come independently. */
  hc_trace *t;
  struct hc_trace_opts o = { 0 };
  char why[128];
  struct hc_trace_req q;
  CHECK (hc_trace_open (path, &o, &t, why, sizeof why) == 0, "open %s", path);
  CHECK (hc_rules_new (HC_STRATEGY_IO,
                       "label=wal -> journal\n"
                       "comm=tar -> background\n"
                       "ioprio_class=idle -> dontneed\n"
                       "meta -> metadata+willneed\n", &r, &err) == 0, "io rules");
  unsigned seen = 0;
  while (hc_trace_next (t, &q) == 1) {
    struct hc_hint h = hc_rules_classify (r, &q, t);
    const char *comm = hc_trace_string (t, q.comm);
    bool wal = q.label == HC_LABEL_WAL, tar = strcmp (comm, "tar") == 0,
         idle = q.ioprio_class == 3, meta = q.rwbs & HC_RWBS_META;
    unsigned want_cls = wal ? HC_CLASS_JOURNAL : tar ? HC_CLASS_BACKGROUND
                        : meta ? HC_CLASS_METADATA : 0;
    unsigned want_adv = idle ? HC_ADVICE_DONTNEED : meta ? HC_ADVICE_WILLNEED : 0;
    CHECK (h.cls == want_cls && h.advice == want_adv, "request %u: class %u advice %u, want %u %u",
           seen, h.cls, h.advice, want_cls, want_adv);
    if (++seen == 2000)
      break;
  }
  hc_rules_free (r);
  hc_trace_close (t);
}

/* Mutants of every strategy's rules text (the built-in ones and a richer
 * one): each compiles, or fails with a line and a reason — never a crash
 * (the sanitizer build checks memory) — and compiled rules classify real
 * requests into valid hints only. */
static void
check_rules_mutants (const char *path)
{
  static const char rich[] = "meta && op=R -> metadata+willneed\nlength>=1048576 -> streaming\n"
                             "comm~^(jbd2|kworker) -> journal\nlabel=temp -> dontneed\n"
                             "ioprio_class=idle && pid>100 -> background+dontneed\n"
                             "rfc2014=dontneed -> dontneed\nobject~^/backup/ -> advice=dontneed\n";
  struct hc_trace_req reqs[256];
  size_t nreq = 0;
  unsigned compiled = 0, refused = 0;
  hc_trace *t;
  struct hc_trace_opts o = { 0 };
  char why[128];

  CHECK (hc_trace_open (path, &o, &t, why, sizeof why) == 0, "open %s", path);
  while (nreq < 256 && hc_trace_next (t, &reqs[nreq]) == 1)
    nreq++;
  for (unsigned s = HC_STRATEGY_PROCESS; s <= HC_STRATEGY_IO; s++)
    for (int which = 0; which < 2; which++) {
      const char *seed = which ? rich : hc_rules_default_text ((enum hc_strategy) s);
      size_t len = strlen (seed), cap = 2 * len + 64;
      unsigned char *buf = malloc (cap + 1);
      for (unsigned m = 0; m < 300 && buf; m++) {
        memcpy (buf, seed, len);
        size_t n = test_mutate (buf, len, cap);
        buf[n] = '\0';
        struct hc_parse_error err = { 0 };
        hc_rules *r = NULL;
        int rc = hc_rules_new ((enum hc_strategy) s, (const char *) buf, &r, &err);
        if (rc < 0) {
          refused++;
          CHECK (rc == -EINVAL && err.line > 0 && err.msg[0] && !r,
                 "%s mutant %u: rc %d without line or reason", hc_strategy_name (s), m, rc);
          continue;
        }
        compiled++;
        for (size_t i = 0; i < nreq; i++) {
          struct hc_hint h = hc_rules_classify (r, &reqs[i], t);
          if (hc_hint_check (h) < 0) {
            CHECK (0, "%s mutant %u: request %zu got an invalid hint (%u, %u, %#x)",
                   hc_strategy_name (s), m, i, h.cls, h.advice, h.flags);
            break;
          }
        }
        hc_rules_free (r);
      }
      free (buf);
    }
  hc_trace_close (t);
  CHECK (compiled > 0 && refused > 0, "rules mutants: %u compiled, %u refused", compiled, refused);
  printf ("  rules mutants: %u compiled, %u refused with a line and a reason\n", compiled, refused);
}

static void
check_deterministic (const char *path)
{
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_IO, HC_STRATEGY_ORACLE };
  const char *pols[] = { "hintaware", "s3fifo", "arc" };
  const char *sizes[] = { "3%", "20%" };
  struct hc_replay_row *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  struct hc_replay_summary sa, sb;

  CHECK (replay (path, sizes, 2, st, 3, pols, 3, 4096, &a, &na, &sa) == 0, "first run");
  CHECK (replay (path, sizes, 2, st, 3, pols, 3, 4096, &b, &nb, &sb) == 0, "second run");
  CHECK (na == nb && na && memcmp (a, b, na * sizeof *a) == 0, "two runs agree row for row");
  free (a);
  free (b);
}

/* A discard larger than the cache is applied by a walk over the cache, a
 * smaller one block by block: the same trace with each discard cut into
 * one-block discards must replay to the same rows, for every policy,
 * Belady and the oracle, and at sizes both below and above the discards. */
static void
check_discard_walk (const char *dir)
{
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_IO, HC_STRATEGY_ORACLE };
  const char *pols[] = { "lru", "s3fifo", "hintaware", "fifo", "arc", "sieve", "2q", "wtinylfu",
                         "belady" };
  const size_t npols = sizeof pols / sizeof pols[0];
  const char *sizes[] = { "1%", "10%", "60%" };
  char whole[512], cut[512];
  struct hc_replay_row *a = NULL, *b = NULL;
  size_t na = 0, nb = 0, big = 0;
  struct hc_replay_summary sa, sb;
  const uint64_t span = 3000;

  snprintf (whole, sizeof whole, "%s/discards.csv", dir);
  snprintf (cut, sizeof cut, "%s/discards_cut.csv", dir);
  FILE *f = fopen (whole, "w"), *g = fopen (cut, "w");
  const char *head = "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,"
                     "ioprio_level,comm,pid,label,object\n";
  fputs (head, f);
  fputs (head, g);
  for (unsigned i = 0; i < 20000; i++) {
    uint64_t r = next_rand (), blk = (r >> 8) % 5 < 4 ? (r >> 16) % (span / 10) : (r >> 16) % span;
    if (i % 40 == 39) { /* a discard, up to the whole span, not always aligned */
      uint64_t off = blk * 4096 + ((r >> 40) % 2 ? 512 : 0), len = ((r >> 44) % span + 1) * 4096;
      big += len / 4096 > span / 100;
      fprintf (f, "%u,D,%" PRIu64 ",%" PRIu64 ",D,be,0,4,fstrim,7,,\n", i, off, len);
      for (uint64_t k = off / 4096; k <= (off + len - 1) / 4096; k++)
        fprintf (g, "%u,D,%" PRIu64 ",4096,D,be,0,4,fstrim,7,,\n", i, k * 4096);
      continue;
    }
    const char *op = (r >> 60) % 3 ? "R" : "W", *lab = (r >> 58) % 2 ? "table" : "wal";
    uint64_t len = ((r >> 50) % 3 + 1) * 4096;
    fprintf (f, "%u,%s,%" PRIu64 ",%" PRIu64 ",%sS,be,0,4,postgres,9,%s,/db/%s\n", i, op,
             blk * 4096, len, op, lab, lab);
    fprintf (g, "%u,%s,%" PRIu64 ",%" PRIu64 ",%sS,be,0,4,postgres,9,%s,/db/%s\n", i, op,
             blk * 4096, len, op, lab, lab);
  }
  fclose (f);
  fclose (g);
  CHECK (replay (whole, sizes, 3, st, 3, pols, npols, 4096, &a, &na, &sa) == 0, "whole discards");
  CHECK (replay (cut, sizes, 3, st, 3, pols, npols, 4096, &b, &nb, &sb) == 0, "cut discards");
  CHECK (big > 100 && sa.discards < sb.discards, "the trace has discards larger than the cache");
  CHECK (na == nb && na && memcmp (a, b, na * sizeof *a) == 0,
         "whole and cut discards agree row for row");
  printf ("  %zu discards larger than the 1%% cache: %zu rows as with one-block discards\n", big,
          na);
  free (a);
  free (b);
  unlink (whole);
  unlink (cut);
}

/* Replaying the binary form, whose totals spare the first pass, gives the
 * rows and summary of replaying the CSV it came from (at the block size of
 * its totals and at another, where the first pass runs); totals that
 * disagree with the records are an error, not a silently different
 * replay. */
static void
check_bin_totals (const char *csv, const char *dir)
{
  const enum hc_strategy st[] = { HC_STRATEGY_NONE, HC_STRATEGY_IO };
  const char *pols[] = { "lru", "hintaware" };
  const char *sizes[] = { "3%", "20%" };
  char bin[512], why[256];
  hc_trace *t = NULL;
  hc_trace_writer *w = NULL;
  struct hc_trace_req q;
  struct hc_trace_opts o = { 0 };

  snprintf (bin, sizeof bin, "%s/synthetic.bin", dir);
  CHECK (hc_trace_open (csv, &o, &t, why, sizeof why) == 0
         && hc_trace_writer_open (bin, HC_TRACE_BIN, 4096, &w, why, sizeof why) == 0, "%s", why);
  while (t && w && hc_trace_next (t, &q) == 1)
    hc_trace_write (w, &q, t);
  CHECK (hc_trace_writer_close (w) == 0, "bin written");
  hc_trace_close (t);

  for (uint32_t bs = 512; bs <= 4096; bs *= 8) {
    struct hc_replay_row *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    struct hc_replay_summary sa, sb;
    CHECK (replay (csv, sizes, 2, st, 2, pols, 2, bs, &a, &na, &sa) == 0, "csv replay");
    CHECK (replay (bin, sizes, 2, st, 2, pols, 2, bs, &b, &nb, &sb) == 0, "bin replay");
    CHECK (na == nb && na && memcmp (a, b, na * sizeof *a) == 0,
           "block size %u: bin rows equal csv rows", bs);
    CHECK (sa.requests == sb.requests && sa.block_accesses == sb.block_accesses
           && sa.footprint_blocks == sb.footprint_blocks && sa.reads == sb.reads
           && sa.writes == sb.writes && sa.discards == sb.discards && sa.flushes == sb.flushes,
           "block size %u: same summary", bs);
    free (a);
    free (b);
  }

  /* Totals with a correct checksum but one block access too many. */
  FILE *f = fopen (bin, "r+b");
  unsigned char rec[80];
  CHECK (f && fseek (f, -96, SEEK_END) == 0 && fread (rec, 1, 80, f) == 80 && rec[0] == 4,
         "totals record found");
  if (f) {
    uint64_t acc, sum;
    memcpy (&acc, rec + 48, 8);
    acc++;
    memcpy (rec + 48, &acc, 8);
    sum = XXH3_64bits (rec, 72);
    memcpy (rec + 72, &sum, 8);
    CHECK (fseek (f, -96, SEEK_END) == 0 && fwrite (rec, 1, 80, f) == 80, "totals rewritten");
    fclose (f);
  }
  struct hc_replay_config cfg = { .block_size = 4096, .sizes = sizes, .nsizes = 2,
                                  .strategies = st, .nstrategies = 1, .policies = pols,
                                  .npolicies = 1 };
  struct hc_replay_row *rows = NULL;
  size_t n = 0;
  int rc = hc_replay_run (bin, &o, &cfg, &rows, &n, NULL, why, sizeof why);
  CHECK (rc == -EIO && strstr (why, "totals"), "lying totals: %d (%s)", rc, why);
  free (rows);
  unlink (bin);
}

int
main (int argc, char **argv)
{
  char dir[256], path[512];
  const char *shared = argc > 1 ? argv[1] : NULL; /* the shared development traces */

  snprintf (dir, sizeof dir, "%s/hc-replay-XXXXXX", test_tmp ());
  if (!mkdtemp (dir))
    return 99;
  snprintf (path, sizeof path, "%s/synthetic.csv", dir);

  /* Synthetic traces: exact LRU, at block sizes 4096 and 512. */
  write_synthetic (path, 20000, 6000);
  static const unsigned pct[] = { 2, 10, 35 };
  check_lru_exact (path, pct, 3, 4096);
  check_lru_exact (path, pct, 3, 512);
  check_oracle_is_optimal (dir);
  const char *sizes[] = { "1%", "7%", "30%" };
  check_bounds (path, sizes, 3);
  check_sizes (path);
  check_rules (path);
  check_rules_mutants (path);
  check_deterministic (path);
  check_bin_totals (path, dir);
  check_out_of_range (dir);
  check_discard_walk (dir);
  /* Caches whose maps are larger than a core's L2 cache (several MB), for
   * which the replayer loads what is coming in three steps: loading ahead
   * must not change a count. */
  write_synthetic (path, 300000, 1500000);
  static const unsigned big[] = { 60, 90 };
  check_lru_exact (path, big, 2, 4096);
  unlink (path);
  rmdir (dir);

  /* The shared development traces, when they are beside the project. */
  if (shared && *shared) {
    static const unsigned spct[] = { 1, 5, 10 };
    char p[1024];
    snprintf (p, sizeof p, "%s/build.csv.gz", shared);
    if (access (p, R_OK) == 0) {
      check_lru_exact (p, spct, 3, 4096);
      const char *bsizes[] = { "5%", "10%" };
      check_bounds (p, bsizes, 2);
      snprintf (p, sizeof p, "%s/kv.csv.gz", shared);
      check_lru_exact (p, spct, 3, 4096);
    } else {
      printf ("  shared traces not found under %s: only synthetic traces checked\n", shared);
    }
  }
  return test_exit ("test_replay");
}
