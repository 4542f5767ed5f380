/* The replayer: a trace through the volume's own cache directory, for a grid
 * of strategies × policies × sizes, priced by the hybrid-drive timing model.
 *
 * Two passes over the trace:
 *
 *   1. count: requests, block accesses, the footprint (distinct blocks read
 *      or written, which sizes given in % refer to), the largest offset (the
 *      disk model's capacity) and — only when belady or oracle is asked
 *      for — every access's block, from which each access's next use is
 *      computed backwards (8 bytes per access: the one part of a replay that
 *      grows with the trace);
 *   2. replay: every request is classified once per strategy and fed to every
 *      simulator of the grid.
 *
 * A simulator of an engine policy is a struct hc_directory — the volume's
 * map, policy, admission rules and class shares — driven the way the volume
 * drives it, minus the I/O.  Belady (MIN) and the oracle (MIN with bypass)
 * keep the cached blocks in a max-heap on next use.
 *
 * Timing: a read request costs, run by run of its blocks, a flash read for
 * each run of hits and a disk read (seek by distance from the last read,
 * rotation, transfer) for each run of misses.  Fills and write-back go to
 * flash off the read path, and writes that reach the disk (bypassed
 * writes, dirty evictions) are counted as slow-tier operations but taken to
 * be absorbed by the disk's write cache and destaged when it is idle: they
 * neither delay reads nor move the head between them.  No queueing is
 * modeled: latencies are service times.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hintcache/replay.h"
#include "hintcache/tier.h"
#include "hintcache/volume.h" /* hc_policy_name */
#include "../cache/budget.h"
#include "../cache/dir.h"
#include "../cache/seq.h"
#include "util.h"

#define FINE_PER_OCTAVE 64 /* the histogram p99 is computed from */
#define FINE_BUCKETS (20 * FINE_PER_OCTAVE) /* 1 µs … 1 s, as the row's HC_LAT_BUCKETS */
_Static_assert (FINE_BUCKETS % HC_LAT_BUCKETS == 0, "a row bucket is whole fine buckets");
#define LAT_BATCH 64 /* latencies binned together */
#define INF UINT64_MAX
#define SEQ_CUTOFF (UINT64_C (4) << 20) /* the volume's default sequential cutoff */

/* ---------------------------------------------------------------------------
 * Belady: MIN, with or without bypass.
 */

struct heap_ent {
  uint64_t next, blk;
};

struct belady {
  uint64_t cap;
  bool bypass;
  struct hc_u64map in;   /* block → next use (bit 63: dirty) */
  struct heap_ent *heap; /* max-heap on next; stale entries skipped lazily */
  size_t nheap, capheap;
};

#define DIRTY_BIT (UINT64_C (1) << 63)
#define NEXT_MASK (~DIRTY_BIT)

static int
heap_push (struct belady *b, uint64_t next, uint64_t blk)
{
  if (b->nheap == b->capheap) {
    size_t ncap = b->capheap ? b->capheap * 2 : 1024;
    struct heap_ent *nh = realloc (b->heap, ncap * sizeof *nh);
    if (!nh)
      return -ENOMEM;
    b->heap = nh;
    b->capheap = ncap;
  }
  size_t i = b->nheap++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (b->heap[p].next >= next)
      break;
    b->heap[i] = b->heap[p];
    i = p;
  }
  b->heap[i] = (struct heap_ent) { next, blk };
  return 0;
}

static void
heap_pop (struct belady *b)
{
  struct heap_ent last = b->heap[--b->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    uint64_t mv = last.next;
    if (l < b->nheap && b->heap[l].next > mv)
      m = l, mv = b->heap[l].next;
    if (r < b->nheap && b->heap[r].next > mv)
      m = r;
    if (m == i)
      break;
    b->heap[i] = b->heap[m];
    i = m;
  }
  if (b->nheap)
    b->heap[i] = last;
}

/* The cached block used farthest in the future (stale entries dropped). */
static const struct heap_ent *
heap_top (struct belady *b)
{
  while (b->nheap) {
    const struct heap_ent *t = &b->heap[0];
    uint64_t *v = hc_u64map_get (&b->in, t->blk);
    if (v && (*v & NEXT_MASK) == (t->next & NEXT_MASK))
      return t;
    heap_pop (b);
  }
  return NULL;
}

/* Rebuilds the heap from the map when stale entries pile up. */
static void
heap_compact (struct belady *b)
{
  b->nheap = 0;
  for (size_t i = 0; i < b->in.cap; i++)
    if (b->in.key[i])
      heap_push (b, b->in.val[i] & NEXT_MASK, b->in.key[i] - 1);
}

/* ---------------------------------------------------------------------------
 * Simulators.
 */

struct sim {
  struct hc_replay_row row;
  unsigned strategy_index; /* into the classified hints of a request */
  bool is_belady;
  struct hc_directory dir;
  struct hc_budget budget; /* hc_replay_config.flash_budget, in the trace's time */
  struct belady bel;
  hc_timing_model *hdd, *nand;
  uint64_t fine[FINE_BUCKETS];
  double lat_sum;
  double pending[LAT_BATCH]; /* read latencies not yet in the histograms */
  unsigned npending;
};

static bool always (void *arg, uint32_t c) { (void) arg, (void) c; return true; }

enum outcome { HIT, MISS_ADMITTED, MISS_BYPASSED };

/* One block access through an engine policy (forced inline: the compiler
 * left a call per access, whose register saving cost more than the body). */
static inline __attribute__ ((always_inline)) enum outcome
dir_access (struct sim *s, uint64_t blk, struct hc_hint h, bool write, bool seq, bool cont,
            uint32_t bs, uint64_t *dirty_evicted)
{
  struct hc_directory *d = &s->dir;
  struct hc_access a = { .origin = blk, .hint = h, .write = write, .seq = seq, .cont = cont };
  enum hc_bypass why;
  uint32_t c = hc_dir_access (d, &a), ev;

  *dirty_evicted = INF;
  if (c != HC_NIL) {
    if (write) {
      hc_dir_set_dirty (d, c, h.cls);
      s->row.flash_bytes_written += bs;
    }
    return HIT;
  }
  if (!hc_dir_admit (d, &a, &why) || !hc_dir_make_room (d, &a, always, NULL, &why, &ev)) {
    hc_dir_bypass (d, &a, why);
    return MISS_BYPASSED;
  }
  if (ev != HC_NIL) {
    s->row.evictions++;
    if (d->map.blk[ev].meta & HC_M_DIRTY)
      *dirty_evicted = hc_meta_origin (d->map.blk[ev].meta);
  }
  c = hc_dir_take_free (d);
  hc_dir_install (d, c, &a, write);
  s->row.flash_bytes_written += bs;
  return MISS_ADMITTED;
}

/* One block access through Belady; next = the access's next use. */
static enum outcome
bel_access (struct sim *s, uint64_t blk, uint64_t next, bool write, uint32_t bs,
            uint64_t *dirty_evicted)
{
  struct belady *b = &s->bel;
  uint64_t *v = hc_u64map_get (&b->in, blk);

  *dirty_evicted = INF;
  if (v) {
    *v = (next & NEXT_MASK) | (*v & DIRTY_BIT) | (write ? DIRTY_BIT : 0);
    heap_push (b, next & NEXT_MASK, blk);
    if (write)
      s->row.flash_bytes_written += bs;
    if (b->nheap > 4 * b->cap + 1024)
      heap_compact (b);
    return HIT;
  }
  if (b->in.n >= b->cap) {
    const struct heap_ent *top = heap_top (b);
    if (!top || (b->bypass && (next & NEXT_MASK) >= top->next))
      return MISS_BYPASSED; /* the incoming block is used last of all */
    uint64_t victim = top->blk, *vv = hc_u64map_get (&b->in, victim);
    if (*vv & DIRTY_BIT)
      *dirty_evicted = victim;
    hc_u64map_del (&b->in, victim);
    heap_pop (b);
    s->row.evictions++;
  }
  hc_u64map_put (&b->in, blk, (next & NEXT_MASK) | (write ? DIRTY_BIT : 0));
  heap_push (b, next & NEXT_MASK, blk);
  s->row.flash_bytes_written += bs;
  return MISS_ADMITTED;
}

/* 2^(k/64) for k = 0 … 64, the fine buckets' bounds within an octave, and
 * for each 1/256 of the mantissa the bucket its lower edge falls in (a
 * 1/256 step is narrower than a bucket, so it holds at most one bound).
 * Computed once. */
static double fine_bound[FINE_PER_OCTAVE + 1];
static uint8_t fine_guess[256];
static pthread_once_t fine_once = PTHREAD_ONCE_INIT;

static void
init_fine_bounds (void)
{
  unsigned k = 0;

  for (unsigned i = 0; i <= FINE_PER_OCTAVE; i++)
    fine_bound[i] = exp2 ((double) i / FINE_PER_OCTAVE);
  for (unsigned j = 0; j < 256; j++) {
    while (k + 1 < FINE_PER_OCTAVE && 1 + j / 256.0 >= fine_bound[k + 1])
      k++;
    fine_guess[j] = (uint8_t) k;
  }
}

/* ⌊64·log2 us⌋ (0 below 1 µs) without a logarithm: the octave is the
 * double's exponent, the step within it comes from the top 8 bits of its
 * mantissa through the table, and one compare.  Branch-free: `us` ends a
 * long chain of dependent arithmetic, and a mispredicted branch on it would
 * hold up everything the replayer does after it. */
static unsigned
fine_index (double us)
{
  uint64_t u;
  double m;
  unsigned k;

  us = us >= 1 ? us : 1;
  memcpy (&u, &us, sizeof u);
  k = fine_guess[(u >> 44) & 0xff];
  u = (u & ((UINT64_C (1) << 52) - 1)) | UINT64_C (1023) << 52; /* the mantissa, in [1, 2) */
  memcpy (&m, &u, sizeof m);
  k += m >= fine_bound[k + 1]; /* fine_bound[64] = 2: never for k = 63 */
  memcpy (&u, &us, sizeof u);
  return (unsigned) ((u >> 52) - 1023) * FINE_PER_OCTAVE + k;
}

/* Bins the pending latencies.  Done in batches, apart from the simulation:
 * a histogram store whose address comes at the end of a long chain of
 * floating-point work, made once per request, would hold up the loads of
 * the requests after it. */
static void
bin_latencies (struct sim *s)
{
  for (unsigned i = 0; i < s->npending; i++) {
    double us = s->pending[i];
    unsigned fine = fine_index (us);
    s->fine[fine < FINE_BUCKETS ? fine : FINE_BUCKETS - 1]++;
    s->lat_sum += us;
  }
  s->row.read_requests += s->npending;
  s->npending = 0;
}

/* Records a read request's modeled latency. */
static void
note_latency (struct sim *s, double us)
{
  s->pending[s->npending++] = us;
  if (s->npending == LAT_BATCH)
    bin_latencies (s);
}

/* One block access through the simulator, counted (accesses, misses,
 * bypasses, dirty evictions and the disk writes they cost); next: the
 * access's next use (Belady only). */
static inline enum outcome
count_access (struct sim *s, uint64_t b, uint64_t next, struct hc_hint h, bool write, bool seq,
              bool cont, uint32_t bs)
{
  struct hc_replay_row *row = &s->row;
  uint64_t dirty_evicted;
  enum outcome o = s->is_belady ? bel_access (s, b, next, write, bs, &dirty_evicted)
                                : dir_access (s, b, h, write, seq, cont, bs, &dirty_evicted);

  /* (all accesses, misses and admissions are sums, made at the end) */
  if (write) {
    row->write_accesses++;
    row->write_misses += o != HIT;
  } else {
    row->read_accesses++;
    row->read_misses += o != HIT;
  }
  row->bypasses += o == MISS_BYPASSED;
  if (dirty_evicted != INF) {
    row->dirty_evictions++;
    row->slow_writes++;
  }
  return o;
}

/* The modeled time of reading a run of len blocks from start, from flash
 * (hits) or from the disk (misses, counted as a slow read). */
static inline double
price_run (struct sim *s, bool miss, uint64_t start, uint64_t len, unsigned bs_shift)
{
  s->row.slow_reads += miss;
  return hc_timing_model_io (miss ? s->hdd : s->nand, false, start << bs_shift, len << bs_shift);
}

/* Drops blocks b0 … b1 from a simulator's cache: block by block, or, when
 * the range is larger than the cache, by one walk over the cache (a trace
 * that discards a whole device, as mkfs does, would otherwise cost a lookup
 * per block of the device, per simulator). */
static void
sim_discard (struct sim *s, uint64_t b0, uint64_t b1)
{
  const uint64_t span = b1 - b0; /* blocks − 1 */

  if (s->is_belady) {
    struct hc_u64map *m = &s->bel.in;
    if (span < m->cap) {
      for (uint64_t b = b0; b <= b1; b++)
        hc_u64map_del (m, b);
      return;
    }
    /* A delete pulls later members of a probe run back into its hole, so
     * the slot is looked at again; members only move backwards, so none is
     * missed. */
    for (size_t i = 0; i < m->cap; i++)
      while (m->key[i] && m->key[i] - 1 >= b0 && m->key[i] - 1 <= b1)
        hc_u64map_del (m, m->key[i] - 1);
    return;
  }
  struct hc_directory *d = &s->dir;
  if (span < d->map.n) {
    for (uint64_t b = b0; b <= b1; b++) {
      uint32_t c = hc_dir_find (d, b);
      if (c != HC_NIL)
        hc_dir_invalidate (d, c);
    }
    return;
  }
  for (uint32_t c = 0; c < d->map.n; c++) {
    const uint64_t w = d->map.blk[c].meta;
    if ((w & HC_M_VALID) && hc_meta_origin (w) >= b0 && hc_meta_origin (w) <= b1)
      hc_dir_invalidate (d, c);
  }
}

/* Feeds one request to a simulator.  next: the next use of each of its
 * block accesses (NULL unless Belady). */
static void
sim_request (struct sim *s, const struct hc_trace_req *q, struct hc_hint h, const uint64_t *next,
             unsigned bs_shift, bool seq)
{
  struct hc_replay_row *row = &s->row;
  const uint32_t bs = UINT32_C (1) << bs_shift;
  uint64_t b0 = q->offset >> bs_shift, b1 = (q->offset + q->length - 1) >> bs_shift;

  if (q->op == HC_TOP_DISCARD) {
    if (q->length)
      sim_discard (s, b0, b1);
    return;
  }
  if (q->length == 0 || (q->op != HC_TOP_READ && q->op != HC_TOP_WRITE))
    return;

  const bool write = q->op == HC_TOP_WRITE;
  if (s->budget.per_day)
    hc_dir_follow_budget (&s->dir, &s->budget, q->ts_ns, row->flash_bytes_written);
  if (b0 == b1) {
    /* One block (most requests of most traces): no runs to join. */
    enum outcome o = count_access (s, b0, next ? next[0] : 0, h, write, seq, false, bs);
    if (write)
      row->slow_writes += o == MISS_BYPASSED; /* a bypassed write goes to the disk */
    else
      note_latency (s, price_run (s, o != HIT, b0, 1, bs_shift));
    return;
  }
  double us = 0;
  int run_kind = -1; /* 0 hit run, 1 miss run */
  uint64_t run_start = 0, run_len = 0, bypassed_run_start = 0, bypassed_run_len = 0;

  for (uint64_t b = b0, i = 0; b <= b1; b++, i++) {
    enum outcome o = count_access (s, b, next ? next[i] : 0, h, write, seq, i > 0, bs);
    if (write) {
      /* A bypassed write goes to the disk; consecutive ones as one I/O. */
      if (o == MISS_BYPASSED) {
        if (bypassed_run_len && bypassed_run_start + bypassed_run_len == b)
          bypassed_run_len++;
        else {
          row->slow_writes += bypassed_run_len != 0;
          bypassed_run_start = b;
          bypassed_run_len = 1;
        }
      }
      continue;
    }
    /* Reads: runs of hits read flash, runs of misses read the disk. */
    int kind = o == HIT ? 0 : 1;
    if (kind == run_kind) {
      run_len++;
      continue;
    }
    if (run_kind >= 0)
      us += price_run (s, run_kind, run_start, run_len, bs_shift);
    run_kind = kind;
    run_start = b;
    run_len = 1;
  }
  row->slow_writes += bypassed_run_len != 0;
  if (!write)
    note_latency (s, us + price_run (s, run_kind, run_start, run_len, bs_shift));
}

static void
sim_finish (struct sim *s)
{
  struct hc_replay_row *row = &s->row;

  bin_latencies (s);
  /* The row's histogram, 8 buckets per octave, from the fine one. */
  for (unsigned i = 0; i < FINE_BUCKETS; i++)
    row->latency_hist[i / (FINE_BUCKETS / HC_LAT_BUCKETS)] += s->fine[i];
  row->accesses = row->read_accesses + row->write_accesses;
  row->misses = row->read_misses + row->write_misses;
  row->admissions = row->misses - row->bypasses;
  if (!s->is_belady) {
    row->hint_effects = hc_dir_effects (&s->dir);
    row->effect_changes = hc_dir_effect_changes (&s->dir);
  }
  uint64_t target = row->read_requests - row->read_requests / 100, seen = 0;

  row->mean_read_latency_us = row->read_requests ? s->lat_sum / row->read_requests : 0;
  row->p99_read_latency_us = 0;
  for (unsigned i = 0; i < FINE_BUCKETS && row->read_requests; i++) {
    seen += s->fine[i];
    if (seen >= target && seen) {
      row->p99_read_latency_us = exp2 ((double) (i + 1) / FINE_PER_OCTAVE);
      break;
    }
  }
}

static void
sim_free (struct sim *s)
{
  if (s->is_belady) {
    hc_u64map_free (&s->bel.in);
    free (s->bel.heap);
  } else {
    hc_dir_fini (&s->dir);
  }
  hc_timing_model_free (s->hdd);
  hc_timing_model_free (s->nand);
}

/* ---------------------------------------------------------------------------
 * The driver.
 */

/* Parses a size: "5%" of the footprint (fractions allowed), "64M" bytes (a
 * size with a unit, as hc_parse_size reads it), "10000" blocks. */
static int
parse_size (const char *spec, uint64_t footprint, uint32_t bs, uint64_t *blocks)
{
  size_t n = strlen (spec);
  bool unit;
  int rc;

  if (n && spec[n - 1] == '%') {
    char *end;
    double v = strtod (spec, &end);
    if (end == spec || end != spec + n - 1 || !(v >= 0 && v <= 100))
      return -EINVAL;
    *blocks = (uint64_t) (footprint * v / 100.0 + 1e-9);
    return 0;
  }
  if ((rc = hc_parse_size (spec, blocks, &unit)) < 0)
    return rc;
  if (unit)
    *blocks /= bs;
  return 0;
}

/* A worker of pass 2: reads the trace on its own handle and feeds its
 * simulators.  Each has its own rules (classification memoises) and its own
 * sequential detection, computed only when one of its policies reads it;
 * the next-use array is shared, read-only. */
#define MAX_WORKERS 16

struct worker {
  const char *path;
  const struct hc_trace_opts *topts;
  hc_trace *t; /* worker 0: the driver's, rewound; others open their own */
  struct sim **sims;
  size_t nsims;
  bool need_seq;
  hc_rules *rules[HC_STRATEGY_COUNT], *own_rules[HC_STRATEGY_COUNT];
  const uint64_t *next_uses;
  unsigned bs_shift;
  uint64_t requests;
  struct hc_trace_totals seen; /* what this worker read (footprint aside) */
  const struct hc_replay_config *cfg; /* worker 0: reports progress */
  pthread_t tid;
  int rc;
  char why[256];
};

/* Does one of the worker's simulators read sequential detection? */
static bool
worker_needs_seq (const struct worker *w)
{
  for (size_t j = 0; j < w->nsims; j++)
    if (!w->sims[j]->is_belady && w->sims[j]->dir.policy.ops->reads_seq)
      return true;
  return false;
}

/* Loading ahead.  An access to a large map waits for memory three times
 * over: for its buckets, then for the entry they name, then — a hit moves
 * the block to the head of its queue — for the entries of its neighbours on
 * the queue, which it writes.  The worker keeps at least LOOKAHEAD requests
 * read beyond the one it simulates (reading BATCH at a time), and starts
 * those loads in the same order, each once the one before has had time to
 * arrive: the buckets LOOKAHEAD requests before a request's turn, the entry
 * they name ENTRY_AHEAD before, the neighbours' entries LINKS_AHEAD before.
 * A request in between can change what is there; a load started for
 * nothing costs only the load.
 *
 * The second and third steps cost instructions (a hash and a bucket scan
 * per map), a loss where the maps are mostly in the core's own cache: they
 * are taken only where some map is more than twice the size of its L2.
 * Measured with lru on a Zipf trace, one core's L2 being 512 KiB: 28 %
 * slower with a map of 215 KB, 19 % slower at 640 KB, even at 1 MB, 16 %
 * faster at 2.1 MB. */
#define LOOKAHEAD 8
#define ENTRY_AHEAD 4
#define LINKS_AHEAD 2
#define BATCH 64 /* requests read at a time (hc_trace_read) */

struct ahead {
  struct hc_map **maps; /* the engine simulators' maps */
  size_t nmaps;
  bool deep;            /* some map is over twice L2: take steps 2 and 3 */
  uint32_t *guess;      /* nmaps × LOOKAHEAD: the block step 2 found, per map and slot */
};

/* (Not inlined either, for the same reason as ahead_step.) */
static __attribute__ ((noinline)) int
ahead_init (struct ahead *a, struct sim **sims, size_t nsims)
{
  const long l2 = sysconf (_SC_LEVEL2_CACHE_SIZE);
  const size_t deep_above = 2 * (size_t) (l2 > 0 ? l2 : 512 << 10);

  memset (a, 0, sizeof *a);
  if (!(a->maps = calloc (nsims ? nsims : 1, sizeof *a->maps))
      || !(a->guess = malloc ((nsims ? nsims : 1) * LOOKAHEAD * sizeof *a->guess)))
    return -ENOMEM;
  for (size_t i = 0; i < nsims; i++)
    if (!sims[i]->is_belady) {
      a->maps[a->nmaps++] = &sims[i]->dir.map;
      a->deep |= hc_map_bytes (&sims[i]->dir.map) > deep_above;
    }
  for (size_t i = 0; i < a->nmaps * LOOKAHEAD; i++)
    a->guess[i] = HC_NIL;
  return 0;
}

static void
ahead_fini (struct ahead *a)
{
  free (a->maps);
  free (a->guess);
}

static bool
has_blocks (const struct hc_trace_req *q)
{
  return (q->op == HC_TOP_READ || q->op == HC_TOP_WRITE) && q->length;
}

/* Step 1, for the request LOOKAHEAD ahead (the caller keeps the maps in
 * registers: they are read for every request). */
static void
ahead_read (struct hc_map *const *maps, size_t nmaps, const struct hc_trace_req *q, unsigned sh)
{
  if (has_blocks (q))
    for (size_t i = 0; i < nmaps; i++)
      hc_map_prefetch (maps[i], q->offset >> sh);
}

/* Steps 2 and 3, before simulating request number `serial`, q[0] (q[1] …
 * q[queued − 1] come after it); only if a->deep.  Not inlined: in the
 * worker's loop it would crowd out what the compiler inlines there for
 * every replay. */
static __attribute__ ((noinline)) void
ahead_step (struct ahead *a, const struct hc_trace_req *q, size_t queued, uint64_t serial,
            unsigned sh)
{
  const unsigned e = (serial + ENTRY_AHEAD) % LOOKAHEAD, l = (serial + LINKS_AHEAD) % LOOKAHEAD;
  const bool step2 = queued > ENTRY_AHEAD && has_blocks (&q[ENTRY_AHEAD]);

  for (size_t i = 0; i < a->nmaps; i++) {
    const struct hc_map *m = a->maps[i];
    uint32_t *g = a->guess + i * LOOKAHEAD, c = g[l];
    if (c != HC_NIL) {
      if (m->blk[c].prev != HC_NIL)
        hc_prefetch (&m->blk[m->blk[c].prev]);
      if (m->blk[c].next != HC_NIL)
        hc_prefetch (&m->blk[m->blk[c].next]);
    }
    g[e] = c = step2 ? hc_map_guess (m, q[ENTRY_AHEAD].offset >> sh) : HC_NIL;
    if (c != HC_NIL)
      hc_prefetch (&m->blk[c]);
  }
}

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  hc_trace *t = w->t;
  struct hc_trace_req reqs[BATCH + LOOKAHEAD]; /* [i, n): read, not yet simulated */
  size_t i = 0, n = 0;
  long got = 1; /* the last read's result: 0 at the end, < 0 on an error */
  struct hc_seq seq = { 0 }; /* sequential runs: the same for every simulator */
  uint64_t access_index = 0, until_progress = w->requests / 200 + 1;
  const unsigned sh = w->bs_shift;
  unsigned nactive = 0;
  enum hc_strategy active[HC_STRATEGY_COUNT]; /* the strategies with rules to classify by */
  struct ahead ahead;
  int rc;

  if (ahead_init (&ahead, w->sims, w->nsims) < 0) {
    ahead_fini (&ahead);
    w->rc = -ENOMEM;
    snprintf (w->why, sizeof w->why, "out of memory");
    return NULL;
  }
  if (!t && (rc = hc_trace_open (w->path, w->topts, &t, w->why, sizeof w->why)) < 0) {
    w->rc = rc;
    ahead_fini (&ahead);
    return NULL;
  }
  for (unsigned st = HC_STRATEGY_PROCESS; st < HC_STRATEGY_COUNT; st++)
    if (w->rules[st])
      active[nactive++] = st;
  struct hc_map *const *maps = ahead.maps;
  const size_t nmaps = ahead.nmaps;
  const bool deep = ahead.deep;
  struct sim *const *sims = w->sims; /* (locals: the simulators' stores cannot change them) */
  const size_t nsims = w->nsims;
  uint64_t requests = 0, max_end = 0;
  for (;;) {
    /* Keeps LOOKAHEAD requests read beyond the one simulated. */
    if (n - i <= LOOKAHEAD && got > 0) {
      memmove (reqs, reqs + i, (n - i) * sizeof *reqs);
      n -= i;
      i = 0;
      if ((got = hc_trace_read (t, reqs + n, BATCH + LOOKAHEAD - n)) > 0)
        n += (size_t) got;
    }
    if (i == n)
      break;
    const struct hc_trace_req *q = &reqs[i];
    struct hc_hint h[HC_STRATEGY_COUNT] = { { 0 } };
    const uint64_t *next = NULL;
    const bool accesses = has_blocks (q);
    const bool is_seq = accesses && w->need_seq
                        && hc_seq_update (&seq, NULL, q->offset, q->length, SEQ_CUTOFF);

    if (i + LOOKAHEAD < n)
      ahead_read (maps, nmaps, &reqs[i + LOOKAHEAD], sh);
    if (deep)
      ahead_step (&ahead, q, n - i, requests, sh);
    for (unsigned k = 0; k < nactive; k++)
      h[active[k]] = hc_rules_classify (w->rules[active[k]], q, t);
    if (w->next_uses && accesses)
      next = w->next_uses + access_index;
    for (size_t k = 0; k < nsims; k++)
      sim_request (sims[k], q, h[sims[k]->strategy_index], next, sh, is_seq);
    requests++;
    if (accesses) {
      access_index += ((q->offset + q->length - 1) >> sh) - (q->offset >> sh) + 1;
      if (q->offset + q->length > max_end)
        max_end = q->offset + q->length;
    }
    i++;
    if (--until_progress == 0) {
      until_progress = w->requests / 200 + 1;
      if (w->cfg && w->cfg->progress)
        w->cfg->progress (w->cfg->progress_arg, (double) requests / w->requests);
    }
  }
  w->seen.requests = requests;
  w->seen.block_accesses = access_index;
  w->seen.max_end = max_end;
  if (got < 0) {
    w->rc = (int) got;
    snprintf (w->why, sizeof w->why, "%s", hc_trace_error (t));
  } else if (w->cfg && w->cfg->progress)
    w->cfg->progress (w->cfg->progress_arg, 1.0);
  if (t != w->t)
    hc_trace_close (t);
  ahead_fini (&ahead);
  return NULL;
}

/* Pass 1. */
struct counts {
  struct hc_replay_summary sum;
  uint64_t max_end;
  uint64_t *blocks; /* every access's block, when next uses are needed */
  size_t nblocks, capblocks;
};

static int
count_pass (hc_trace *t, unsigned bs_shift, bool want_blocks, struct counts *k, char *why, size_t whylen)
{
  struct hc_blockset seen = { 0 };
  struct hc_trace_req q;
  int rc;

  while ((rc = hc_trace_next (t, &q)) == 1) {
    k->sum.requests++;
    switch (q.op) {
    case HC_TOP_READ: k->sum.reads++; break;
    case HC_TOP_WRITE: k->sum.writes++; break;
    case HC_TOP_DISCARD: k->sum.discards++; break;
    default: k->sum.flushes++; break;
    }
    if ((q.op != HC_TOP_READ && q.op != HC_TOP_WRITE) || q.length == 0)
      continue;
    if (q.offset + q.length > k->max_end)
      k->max_end = q.offset + q.length;
    for (uint64_t b = q.offset >> bs_shift, b1 = (q.offset + q.length - 1) >> bs_shift; b <= b1;
         b++) {
      k->sum.block_accesses++;
      if (hc_blockset_add (&seen, b) < 0)
        goto nomem;
      if (want_blocks) {
        if (k->nblocks == k->capblocks) {
          size_t ncap = k->capblocks ? k->capblocks * 2 : 1 << 16;
          uint64_t *nb = realloc (k->blocks, ncap * sizeof *nb);
          if (!nb)
            goto nomem;
          k->blocks = nb;
          k->capblocks = ncap;
        }
        k->blocks[k->nblocks++] = b;
      }
    }
  }
  k->sum.footprint_blocks = seen.n;
  hc_blockset_free (&seen);
  if (rc < 0)
    snprintf (why, whylen, "%s", hc_trace_error (t));
  return rc;
nomem:
  hc_blockset_free (&seen);
  snprintf (why, whylen, "out of memory counting the trace");
  return -ENOMEM;
}

/* Replaces each access's block by the index of its next use (or INF),
 * walking backwards. */
static int
next_uses (uint64_t *blocks, size_t n)
{
  struct hc_u64map last = { 0 };
  for (size_t i = n; i-- > 0;) {
    uint64_t b = blocks[i], *v = hc_u64map_get (&last, b);
    uint64_t nxt = v ? *v : INF;
    if (hc_u64map_put (&last, b, i) < 0) {
      hc_u64map_free (&last);
      return -ENOMEM;
    }
    blocks[i] = nxt;
  }
  hc_u64map_free (&last);
  return 0;
}

/* ---------------------------------------------------------------------------
 * The run: configuration, pass 1, the grid, pass 2 over workers, the rows.
 */

/* One hc_replay_run: what its steps share. */
struct run {
  const char *path;
  const struct hc_trace_opts *topts;
  const struct hc_replay_config *cfg;
  uint32_t bs;
  unsigned bs_shift;
  char *why;
  size_t whylen;
  /* The configuration resolved. */
  int policy_ids[16];
  size_t npol;
  bool want_belady, want_oracle;
  hc_rules *rules[HC_STRATEGY_COUNT];     /* per strategy: the caller's, or own_rules' */
  hc_rules *own_rules[HC_STRATEGY_COUNT]; /* built-in rules made here */
  /* Pass 1. */
  hc_trace *t;
  struct counts k;
  bool from_totals; /* k came from the trace's recorded totals, tot */
  struct hc_trace_totals tot;
  /* The grid. */
  struct sim *sims, **order;
  size_t nsims;
};

/* Resolves the policies by name and each strategy's rules. */
static int
resolve_config (struct run *R)
{
  const struct hc_replay_config *cfg = R->cfg;
  int rc;

  for (size_t i = 0; i < cfg->npolicies; i++) {
    if (strcmp (cfg->policies[i], HC_REPLAY_BELADY) == 0) {
      R->want_belady = true;
      continue;
    }
    int id = hc_policy_find (cfg->policies[i]);
    if (id < 0 || R->npol == 16) {
      char names[256];
      snprintf (R->why, R->whylen, "unknown policy '%s' (policies: %s, %s)", cfg->policies[i],
                hc_names (hc_policy_name, names, sizeof names), HC_REPLAY_BELADY);
      return -EINVAL;
    }
    R->policy_ids[R->npol++] = id;
  }
  for (size_t i = 0; i < cfg->nstrategies; i++) {
    enum hc_strategy s = cfg->strategies[i];
    if ((unsigned) s >= HC_STRATEGY_COUNT)
      return -EINVAL;
    if (s == HC_STRATEGY_ORACLE) {
      R->want_oracle = true;
      continue;
    }
    if (!(R->rules[s] = cfg->rules[s])) {
      struct hc_parse_error err;
      if ((rc = hc_rules_new (s, NULL, &R->own_rules[s], &err)) < 0) {
        snprintf (R->why, R->whylen, "built-in %s rules, line %u: %s", hc_strategy_name (s),
                  err.line, err.msg);
        return rc;
      }
      R->rules[s] = R->own_rules[s];
    }
  }
  return 0;
}

/* Pass 1: the trace's totals and footprint (and, for Belady and the
 * oracle, every block access and its next use), unless the trace records
 * its totals at this block size and no Belady needs next uses (they are
 * checked against pass 2 then). */
static int
first_pass (struct run *R)
{
  struct counts *k = &R->k;
  int rc;

  R->from_totals = !R->want_belady && !R->want_oracle && hc_trace_totals (R->t, &R->tot) == 0
                   && R->tot.block_size == R->bs;
  if (R->from_totals) {
    k->sum.requests = R->tot.requests;
    k->sum.reads = R->tot.reads;
    k->sum.writes = R->tot.writes;
    k->sum.discards = R->tot.discards;
    k->sum.flushes = R->tot.flushes;
    k->sum.block_accesses = R->tot.block_accesses;
    k->sum.footprint_blocks = R->tot.footprint_blocks;
    k->max_end = R->tot.max_end;
  } else if ((rc = count_pass (R->t, R->bs_shift, R->want_belady || R->want_oracle, k, R->why,
                               R->whylen)) < 0)
    return rc;
  k->sum.format = hc_trace_get_format (R->t);
  /* The cache directory's map holds block numbers of HC_ORIGIN_BITS bits
   * (4 PiB of 4 KiB blocks): a block beyond would alias another. */
  if (k->max_end && (k->max_end - 1) >> R->bs_shift > HC_ORIGIN_MAX) {
    snprintf (R->why, R->whylen, "the trace's reads and writes reach byte %llu, beyond the 2^%d "
              "blocks of %u bytes the replayer addresses", (unsigned long long) k->max_end,
              HC_ORIGIN_BITS, R->bs);
    return -ERANGE;
  }
  if (k->blocks && (rc = next_uses (k->blocks, k->nblocks)) < 0) {
    snprintf (R->why, R->whylen, "out of memory computing next uses");
    return rc;
  }
  return 0;
}

/* The grid: per cache size, each non-oracle strategy × engine policy, then
 * Belady, then the oracle — a simulator each. */
static int
build_grid (struct run *R)
{
  const struct hc_replay_config *cfg = R->cfg;
  int rc;

  size_t nstrat = 0;
  for (size_t i = 0; i < cfg->nstrategies; i++)
    nstrat += cfg->strategies[i] != HC_STRATEGY_ORACLE;
  size_t max = cfg->nsizes * (nstrat * R->npol + 2);
  if (!(R->sims = calloc (max ? max : 1, sizeof *R->sims)))
    return -ENOMEM;
  struct hc_timing_params hp, np;
  hc_timing_defaults (&hp, true);
  hc_timing_defaults (&np, false);
  for (size_t z = 0; z < cfg->nsizes; z++) {
    uint64_t blocks;
    if (parse_size (cfg->sizes[z], R->k.sum.footprint_blocks, R->bs, &blocks) < 0) {
      snprintf (R->why, R->whylen, "'%s' is not a cache size (blocks, bytes like 64M, or a "
                "percentage of the footprint like 5%%)", cfg->sizes[z]);
      return -EINVAL;
    }
    if (blocks == 0 || blocks >= (1u << 31)) {
      snprintf (R->why, R->whylen, "cache size '%s' is %llu blocks: it must be 1 … 2^31",
                cfg->sizes[z], (unsigned long long) blocks);
      return -EINVAL;
    }
    for (size_t g = 0; g < cfg->nstrategies + 2; g++) {
      /* g < nstrategies: each non-oracle strategy × engine policy; then
       * belady; then oracle. */
      bool is_bel = g >= cfg->nstrategies;
      if (g < cfg->nstrategies && cfg->strategies[g] == HC_STRATEGY_ORACLE)
        continue;
      if ((g == cfg->nstrategies && !R->want_belady)
          || (g == cfg->nstrategies + 1 && !R->want_oracle))
        continue;
      size_t np2 = is_bel ? 1 : R->npol;
      for (size_t p = 0; p < np2; p++) {
        struct sim *s = &R->sims[R->nsims++];
        s->is_belady = is_bel;
        s->row.cache_blocks = blocks;
        if (is_bel) {
          bool oracle = g == cfg->nstrategies + 1;
          s->row.strategy = oracle ? HC_STRATEGY_ORACLE : HC_STRATEGY_NONE;
          snprintf (s->row.policy, sizeof s->row.policy, "%s", HC_REPLAY_BELADY);
          s->bel.cap = blocks;
          s->bel.bypass = oracle;
        } else {
          s->row.strategy = cfg->strategies[g];
          snprintf (s->row.policy, sizeof s->row.policy, "%s",
                    hc_policy_name_of (R->policy_ids[p]));
          if ((rc = hc_dir_init (&s->dir, (uint32_t) blocks, (unsigned) R->policy_ids[p],
                                 cfg->classes, false)) < 0) {
            R->nsims--;
            snprintf (R->why, R->whylen, "no memory for a %llu-block cache",
                      (unsigned long long) blocks);
            return rc;
          }
          hc_dir_set_request_cost (&s->dir, (uint32_t) lround (hc_timing_request_blocks (&hp, R->bs)));
          hc_budget_init (&s->budget, cfg->flash_budget);
          if ((cfg->second_touch || cfg->flash_budget)
              && (rc = hc_dir_set_second_touch (&s->dir, cfg->second_touch)) < 0) {
            snprintf (R->why, R->whylen, "policy %s has no second-touch promotion (hintaware has)",
                      s->row.policy);
            return rc;
          }
        }
        s->strategy_index = s->row.strategy;
        if ((rc = hc_timing_model_new (&hp, R->k.max_end ? R->k.max_end : 1, &s->hdd)) < 0
            || (rc = hc_timing_model_new (&np, (uint64_t) blocks * R->bs, &s->nand)) < 0)
          return rc;
      }
    }
  }
  return 0;
}

/* Pass 2: the simulators shared out over workers, each reading the trace
 * on its own (worker 0 on this thread, with the trace already open). */
static int
second_pass (struct run *R)
{
  const struct hc_replay_config *cfg = R->cfg;
  int rc = 0;

  if ((rc = hc_trace_rewind (R->t)) < 0) {
    snprintf (R->why, R->whylen, "rewinding the trace: %s", hc_trace_error (R->t));
    return rc;
  }
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  size_t nw = cfg->threads ? cfg->threads : cpus > 0 ? (size_t) cpus : 1;
  if (nw > R->nsims)
    nw = R->nsims ? R->nsims : 1;
  if (nw > MAX_WORKERS)
    nw = MAX_WORKERS;
  if (strcmp (R->path, "-") == 0)
    nw = 1; /* standard input is read once */
  struct worker w[MAX_WORKERS];
  memset (w, 0, sizeof w);
  /* Simulator i belongs to worker i mod nw.  Their pointers are laid out
   * worker 1's, …, worker nw − 1's, then worker 0's, so that worker 0 can
   * take over the slices of any workers that fail to start by widening
   * its own to the left. */
  if (!(R->order = malloc ((R->nsims ? R->nsims : 1) * sizeof *R->order)))
    return -ENOMEM;
  size_t begin[MAX_WORKERS + 1], pos = 0;
  for (size_t j = 1; j <= nw; j++) {
    size_t owner = j % nw;
    begin[owner] = pos;
    for (size_t i = owner; i < R->nsims; i += nw)
      R->order[pos++] = &R->sims[i];
  }
  for (size_t i = 0; i < nw; i++) {
    size_t end = i == 0 ? R->nsims : i + 1 < nw ? begin[i + 1] : begin[0];
    w[i] = (struct worker) { .path = R->path, .topts = R->topts, .t = i == 0 ? R->t : NULL,
                             .sims = R->order + begin[i], .nsims = end - begin[i],
                             .next_uses = R->k.blocks, .bs_shift = R->bs_shift,
                             .requests = R->k.sum.requests, .cfg = i == 0 ? cfg : NULL };
    for (unsigned st = 0; st < HC_STRATEGY_COUNT && rc == 0; st++)
      if (R->rules[st]) {
        if (i == 0)
          w[i].rules[st] = R->rules[st];
        else if ((rc = hc_rules_copy (R->rules[st], &w[i].own_rules[st])) == 0)
          w[i].rules[st] = w[i].own_rules[st];
      }
  }
  /* Everything a worker reads is set before it starts. */
  for (size_t i = 0; i < nw; i++)
    w[i].need_seq = worker_needs_seq (&w[i]);
  size_t started = 1;
  for (; rc == 0 && started < nw; started++)
    if (pthread_create (&w[started].tid, NULL, worker_main, &w[started]) != 0)
      break; /* fewer workers: worker 0 takes this one's simulators and the rest */
  if (rc == 0 && started < nw) {
    w[0].sims = R->order + begin[started];
    w[0].nsims = R->nsims - begin[started];
    w[0].need_seq = worker_needs_seq (&w[0]);
  }
  if (rc == 0)
    worker_main (&w[0]);
  for (size_t i = 1; i < started; i++)
    pthread_join (w[i].tid, NULL);
  R->k.sum.skipped_lines = hc_trace_skipped (R->t, &R->k.sum.first_bad_line);
  if (rc == 0 && w[0].rc == 0 && R->from_totals
      && (w[0].seen.requests != R->tot.requests
          || w[0].seen.block_accesses != R->tot.block_accesses
          || w[0].seen.max_end != R->tot.max_end || R->k.sum.skipped_lines)) {
    rc = -EIO;
    snprintf (R->why, R->whylen, "corrupt bin trace: its totals say %llu requests and %llu block "
              "accesses, its records hold %llu and %llu", (unsigned long long) R->tot.requests,
              (unsigned long long) R->tot.block_accesses, (unsigned long long) w[0].seen.requests,
              (unsigned long long) w[0].seen.block_accesses);
  }
  for (size_t i = 0; i < nw; i++) {
    if (rc == 0 && w[i].rc < 0) {
      rc = w[i].rc;
      snprintf (R->why, R->whylen, "%s", w[i].why);
    }
    for (unsigned st = 0; st < HC_STRATEGY_COUNT; st++)
      hc_rules_free (w[i].own_rules[st]);
  }
  return rc;
}

/* The rows, one per simulator, in grid order. */
static int
collect (struct run *R, struct hc_replay_row **rows_out, size_t *nrows_out,
         struct hc_replay_summary *summary)
{
  struct hc_replay_row *rows = calloc (R->nsims ? R->nsims : 1, sizeof *rows);

  if (!rows)
    return -ENOMEM;
  for (size_t i = 0; i < R->nsims; i++) {
    sim_finish (&R->sims[i]);
    rows[i] = R->sims[i].row;
  }
  *rows_out = rows;
  *nrows_out = R->nsims;
  if (summary)
    *summary = R->k.sum;
  return 0;
}

int
hc_replay_run (const char *path, const struct hc_trace_opts *topts,
               const struct hc_replay_config *cfg, struct hc_replay_row **rows_out,
               size_t *nrows_out, struct hc_replay_summary *summary, char *why, size_t whylen)
{
  struct run R = { .path = path, .topts = topts, .cfg = cfg,
                   .bs = cfg->block_size ? cfg->block_size : 4096 };
  char dummy[8];
  int rc;

  why = hc_why (why, &whylen, dummy, sizeof dummy);
  R.why = why;
  R.whylen = whylen;
  if (R.bs < 512 || (R.bs & (R.bs - 1))) {
    snprintf (why, whylen, "block size %u: a power of two, at least 512", R.bs);
    return -EINVAL;
  }
  R.bs_shift = (unsigned) __builtin_ctz (R.bs);
  pthread_once (&fine_once, init_fine_bounds);
  if ((rc = resolve_config (&R)) == 0 && (rc = hc_trace_open (path, topts, &R.t, why, whylen)) == 0
      && (rc = first_pass (&R)) == 0 && (rc = build_grid (&R)) == 0
      && (rc = second_pass (&R)) == 0)
    rc = collect (&R, rows_out, nrows_out, summary);
  for (size_t i = 0; i < R.nsims; i++)
    sim_free (&R.sims[i]);
  free (R.sims);
  free (R.order);
  free (R.k.blocks);
  hc_trace_close (R.t);
  for (unsigned s = 0; s < HC_STRATEGY_COUNT; s++)
    hc_rules_free (R.own_rules[s]);
  return rc;
}
