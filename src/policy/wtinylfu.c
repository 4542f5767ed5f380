/* wtinylfu: W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly
 * Efficient Cache Admission Policy", ACM Transactions on Storage 13(4),
 * 2017), laid out as Caffeine builds it.
 *
 * TinyLFU is an admission filter: a block enters the main cache only if it
 * has been used more often lately than the block it would replace.  How
 * often is estimated, for every block ever seen, by a small frequency
 * sketch that forgets with age.  Alone, that filter turns away every new
 * block until it has a history, so bursts of re-use (a block read a few
 * times in quick succession) would never hit: W-TinyLFU puts a small LRU
 * window in front, which admits everything, and applies the filter to the
 * blocks leaving the window.
 *
 *    miss ──▶ [ window LRU, 1 % ]──its LRU block is the candidate──┐
 *                                                                   ▼
 *    [ protected LRU, 80 % of main ] ◀─hit─ [ probation LRU ]  candidate vs
 *          └──overflow (its LRU block)──▶ probation's head    probation's LRU
 *                                                              block: the one
 *                                                              used more stays
 *
 *   - a new block enters the window's head;
 *   - when the window would grow beyond its size, its LRU block (the
 *     candidate) competes with the main cache's victim, the LRU block of
 *     probation: the candidate is admitted to probation's head, and the
 *     victim evicted, if the sketch estimates the candidate's frequency
 *     above the victim's; otherwise the candidate is evicted (a tie keeps
 *     the incumbent, as in the paper).  While the cache has free blocks the
 *     candidate moves to probation without a contest;
 *   - the main cache is a segmented LRU (Karedla et al. 1994): a hit in
 *     probation moves the block to protected's head, and protected's LRU
 *     block, if protected is over its size, back to probation's head; a hit
 *     in the window or in protected moves the block to its queue's head.
 *
 * Sizes, Caffeine's defaults: window = n − ⌊0.99 n⌋ blocks (1 %, at least
 * one), protected = ⌊0.8 (n − window)⌋.  Caffeine also moves the window's
 * size by hill climbing and admits a losing candidate of frequency > 5 at
 * random 1 time in 128 (against hash flooding); neither is here (the
 * window is fixed, the policy deterministic, and block numbers are not an
 * adversary's keys).
 *
 * The sketch: a count-min sketch of 4 rows of n 4-bit counters (n: the
 * cache's blocks), 2 bytes per cached block.  An origin's hash h is
 * splitmix64's finaliser of origin + 0x9e3779b97f4a7c15; with a = h's low
 * 32 bits and b = its high 32 bits | 1, row r's counter is number
 * ⌊((a + r·b) mod 2³²) · n / 2³²⌋ of the row.  Recording an access adds 1
 * to each of the 4 counters below 15 (Caffeine's rule; the paper's
 * "conservative update", only the smallest, missed up to 3.4 % more on the
 * shared traces at 10 % cache sizes); the estimate is the smallest of the
 * 4.  Every access is recorded: a hit when it happens, a miss in admit,
 * before the eviction it causes (as Caffeine counts a new entry before its
 * maintenance evicts).  After W = 10 × n recorded accesses (the paper's
 * sample size, Caffeine's too) every counter is halved, and so is the count
 * of accesses ("reset"): old popularity fades.  The halving is a pass over
 * the 2n bytes every 5n accesses.  The paper's doorkeeper, a Bloom filter
 * that takes first accesses before the counters do, is left out, as
 * Caffeine leaves it out: it lets the counters be fewer, but 4 rows of
 * half-byte counters already fit the project's RAM per block (map and
 * sketch, about 23.5 bytes), and it would be one more structure to reset.
 * Rows of n counters rather than Caffeine's 4 × the power of two above n
 * keep that figure; on the shared traces wider rows changed misses by under
 * 1.5 %, either way.
 *
 * Queues: 0 = probation, 1 = protected, 2 = window (the directory's
 * class-share eviction searches queues 0 and 1: the main cache).  The
 * window's test counts the free blocks that insertions will fill: when the
 * volume evicts a batch of blocks before inserting, each eviction but the
 * first finds the window below its size, yet the blocks about to enter
 * will push as many out of it, so each eviction is still a contest.  A
 * demoted block goes to probation's tail and loses any contest.  Blocks
 * that may not be evicted now are passed over (SKIP_LIMIT in all): the
 * victim is then probation's oldest evictable block (or protected's); a
 * losing candidate that may not be evicted leaves the window for
 * probation anyway, and the victim goes instead.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy.h"

#define PROBATION 0
#define PROTECTED 1
#define WINDOW 2
#define ROWS 4
#define COUNTER_MAX 15
#define SAMPLE_FACTOR 10 /* the sketch halves after 10 × the cache's blocks accesses */
#define SKIP_LIMIT 4096

struct wtlfu {
  uint32_t window;      /* the window's target size */
  uint32_t protect;     /* the protected segment's maximum */
  uint32_t width;       /* counters per row */
  uint64_t samples, period;
  uint64_t *cm;         /* ROWS × width 4-bit counters, 16 per word */
  size_t words;
};

/* The sketch's hash of an origin (splitmix64's finaliser of origin + the
 * golden-ratio increment). */
static inline uint64_t
sketch_hash (uint64_t x)
{
  x += UINT64_C (0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C (0x94d049bb133111eb);
  return x ^ (x >> 31);
}

/* Counter index of row r for hash h. */
static inline uint64_t
cell (const struct wtlfu *s, uint64_t h, unsigned r)
{
  uint32_t a = (uint32_t) h, b = (uint32_t) (h >> 32) | 1;
  return (uint64_t) r * s->width + (((uint64_t) (uint32_t) (a + r * b) * s->width) >> 32);
}

static inline unsigned
get (const struct wtlfu *s, uint64_t i)
{
  return (unsigned) (s->cm[i / 16] >> (i % 16 * 4)) & 15;
}

static inline void
bump (struct wtlfu *s, uint64_t i)
{
  s->cm[i / 16] += UINT64_C (1) << (i % 16 * 4);
}

/* The estimated recent accesses to origin (0 … 15). */
static unsigned
estimate (const struct wtlfu *s, uint64_t origin)
{
  uint64_t h = sketch_hash (origin);
  unsigned f = COUNTER_MAX;

  for (unsigned r = 0; r < ROWS; r++) {
    unsigned v = get (s, cell (s, h, r));
    f = v < f ? v : f;
  }
  return f;
}

/* Counts an access to origin; halves the sketch every `period` of them. */
static void
record (struct wtlfu *s, uint64_t origin)
{
  uint64_t h = sketch_hash (origin);

  for (unsigned r = 0; r < ROWS; r++) {
    uint64_t i = cell (s, h, r);
    if (get (s, i) < COUNTER_MAX)
      bump (s, i);
  }
  if (++s->samples == s->period) {
    for (size_t w = 0; w < s->words; w++)
      s->cm[w] = (s->cm[w] >> 1) & UINT64_C (0x7777777777777777);
    s->samples /= 2;
  }
}

static int
wt_init (struct hc_policy *p)
{
  struct wtlfu *s = calloc (1, sizeof *s);
  uint32_t n = p->map->n;

  if (!s)
    return -ENOMEM;
  s->window = n - (uint32_t) ((uint64_t) n * 99 / 100);
  s->protect = (uint32_t) ((uint64_t) (n - s->window) * 4 / 5);
  s->width = n;
  s->period = (uint64_t) SAMPLE_FACTOR * n;
  s->words = ((size_t) ROWS * s->width + 15) / 16;
  if (!(s->cm = calloc (s->words, sizeof *s->cm))) {
    free (s);
    return -ENOMEM;
  }
  p->state = s;
  return 0;
}

static void
wt_fini (struct hc_policy *p)
{
  struct wtlfu *s = p->state;
  if (s)
    free (s->cm);
  free (s);
  p->state = NULL;
}

static size_t
wt_bytes (const struct hc_policy *p)
{
  const struct wtlfu *s = p->state;
  return sizeof *s + s->words * sizeof *s->cm;
}

static bool
wt_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  (void) why;
  record (p->state, a->origin);
  return true;
}

static void
wt_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct wtlfu *s = p->state;
  struct hc_map *m = p->map;
  (void) a;

  hc_policy_enqueue (m, c, WINDOW, false);
  if (m->queue[WINDOW].count > s->window) {
    uint32_t t = m->queue[WINDOW].tail;
    hc_list_remove (m, &m->queue[WINDOW], t);
    hc_policy_enqueue (m, t, PROBATION, false);
  }
}

static void
wt_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct wtlfu *s = p->state;
  struct hc_map *m = p->map;
  unsigned q = hc_meta_queue (m->blk[c].meta);
  (void) a;

  record (s, hc_meta_origin (m->blk[c].meta));
  m->blk[c].meta &= ~HC_M_DEMOTED;
  if (q == PROBATION) {
    hc_list_remove (m, &m->queue[PROBATION], c);
    hc_policy_enqueue (m, c, PROTECTED, false);
    if (m->queue[PROTECTED].count > s->protect) {
      uint32_t t = m->queue[PROTECTED].tail;
      hc_list_remove (m, &m->queue[PROTECTED], t);
      hc_policy_enqueue (m, t, PROBATION, false);
    }
  } else if (m->queue[q].head != c) {
    hc_list_remove (m, &m->queue[q], c);
    hc_list_push_head (m, &m->queue[q], c);
  }
}

/* The oldest block of queue q that `ok` accepts (not taken off); HC_NIL if
 * none within *budget blocks, which it spends. */
static uint32_t
oldest (const struct hc_map *m, unsigned q, hc_evictable_fn ok, void *arg, unsigned *budget)
{
  for (uint32_t c = m->queue[q].tail; c != HC_NIL && *budget; c = m->blk[c].prev, --*budget)
    if (ok (arg, c))
      return c;
  return HC_NIL;
}

/* Takes c off its queue and returns it. */
static uint32_t
take (struct hc_map *m, uint32_t c)
{
  struct hc_list *l = &m->queue[hc_meta_queue (m->blk[c].meta)];
  hc_list_remove (m, l, c);
  hc_map_prefetch_tail (m, l);
  return c;
}

static uint32_t
wt_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct wtlfu *s = p->state;
  struct hc_map *m = p->map;
  struct hc_list *win = &m->queue[WINDOW];
  unsigned budget = SKIP_LIMIT;
  uint32_t v = oldest (m, PROBATION, ok, arg, &budget);

  if (v == HC_NIL)
    v = oldest (m, PROTECTED, ok, arg, &budget);
  if (win->count && (uint64_t) win->count + (m->n - m->mapped) >= s->window) {
    uint32_t cand = win->tail;
    uint64_t cw = m->blk[cand].meta;
    if (v != HC_NIL
        && ((m->blk[v].meta & HC_M_DEMOTED)
            || estimate (s, hc_meta_origin (cw)) > estimate (s, hc_meta_origin (m->blk[v].meta)))) {
      hc_list_remove (m, win, cand);
      hc_policy_enqueue (m, cand, PROBATION, false);
      return take (m, v);
    }
    if (ok (arg, cand))
      return take (m, cand);
    hc_list_remove (m, win, cand);
    hc_policy_enqueue (m, cand, PROBATION, false);
  }
  if (v != HC_NIL)
    return take (m, v);
  budget = SKIP_LIMIT;
  v = oldest (m, WINDOW, ok, arg, &budget);
  return v != HC_NIL ? take (m, v) : HC_NIL;
}

static void
wt_remove (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
}

static void
wt_demote (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
  p->map->blk[c].meta |= HC_M_DEMOTED;
  hc_policy_enqueue (p->map, c, PROBATION, true);
}

const struct hc_policy_ops hc_policy_wtinylfu = {
  .name = "wtinylfu",
  .title = "W-TinyLFU: window LRU, segmented main LRU, frequency-sketch admission",
  .init = wt_init,
  .fini = wt_fini,
  .admit = wt_admit,
  .insert = wt_insert,
  .hit = wt_hit,
  .victim = wt_victim,
  .remove = wt_remove,
  .demote = wt_demote,
  .bytes = wt_bytes,
};
