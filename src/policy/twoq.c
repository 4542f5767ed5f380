/* twoq: 2Q (Johnson and Shasha, "2Q: A Low Overhead High Performance Buffer
 * Management Replacement Algorithm", VLDB 1994), the paper's full version.
 *
 * LRU keeps a block that was used once as long as one used a hundred
 * times, so one scan flushes the cache.  2Q makes a block earn its place:
 *
 *   A1in   a FIFO of blocks seen once recently (hits do not move them);
 *   A1out  the origins of blocks recently evicted from A1in (no data);
 *   Am     an LRU of blocks seen again after they left A1in.
 *
 * A miss whose origin is in A1out goes to the head of Am (it was re-used
 * within the A1out window: a hot block); any other miss goes to the head of
 * A1in.  To make room, A1in's oldest block goes if A1in holds more than Kin
 * blocks — its origin then enters A1out, which forgets its oldest origin
 * beyond Kout — and otherwise Am's least recently used block goes (not
 * remembered).  A hit in Am moves the block to Am's head; a hit in A1in
 * changes nothing.
 *
 *     miss ──▶ [ A1in FIFO ]──evicted──▶ ( A1out: origins )
 *                                              │ miss on one of them
 *              [ Am LRU ]◀─────────────────────┘
 *
 * Parameters, as the paper recommends: Kin = 25 % of the cache, Kout = 50 %
 * of the cache's blocks (both rounded down).  A1out gives up an origin when
 * the origin misses (it moves to Am), as libCacheSim's 2Q does; the paper's
 * pseudocode does not say, and keeping it would only waste an A1out place
 * on a block that is cached.
 *
 * A1out is exact: a FIFO of origins, not a Bloom-filter ghost (ghost.c).
 * ghost.c's generations remember between ½ and 1 × their capacity, with
 * about 2 % false positives, so its A1out would not be the paper's and the
 * policy could not be checked exactly against an independent 2Q
 * (tests/test_policies.c, and libCacheSim).  The FIFO is a ring of origins
 * (40 bits: a 32-bit and an 8-bit array) with a live bit per place and an
 * open-addressing index (linear probing, load ≤ 0.75, backward-shift
 * deletion): 32-bit slots holding a ring place + 1 and, in the bits above
 * it, a tag from the origin's hash, so that a probe reads the ring only
 * where the tag matches.  An origin taken out of the middle leaves a hole,
 * skipped when the tail reaches it; the ring has a quarter more places than
 * Kout, and when it fills with holes it is compacted (moving each live
 * origin back and updating its slot), which happens at most once per
 * Kout/4 removals: O(1) amortised.  Cost: 1.25 × 5⅛ bytes of ring and
 * 1.33 × 4 bytes of index per origin, about 5.9 bytes per cached block
 * (Kout is half the cache), which takes 2Q over the project's 24 bytes per
 * block with the map.  (Slots of 64 bits, with the whole hash, would spare
 * the deletions their reads of the ring and replay about 15 % faster, for
 * 2.7 bytes more per block.)
 *
 * The directory classifies a miss (admit) before it asks for a victim, and
 * admit takes the origin out of A1out then, before the eviction can push
 * another origin in and the oldest out.  The origins so found wait in a
 * small table until their insert (in the volume, other misses can come
 * between a miss's admit and its insert).  A demoted block goes to A1in's
 * tail, and a demoted block there is the next to go, whatever A1in's size,
 * without entering A1out.  A block invalidated (a discard) or taken by the
 * directory's class-share eviction leaves its queue without entering A1out
 * (it was not evicted by 2Q's rule).  Blocks that may not be evicted now
 * are passed over (SKIP_LIMIT per queue); when one queue has none to give,
 * the other gives its oldest.  Queues: 0 = A1in, 1 = Am.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy.h"

#define A1IN 0
#define AM 1
#define SKIP_LIMIT 4096
#define PENDING 8 /* misses found in A1out, waiting for their insert */

struct twoq {
  uint32_t kin, kout;
  /* A1out: ring places tail … tail + span − 1 (mod cap), count of them live. */
  uint32_t *lo;      /* origin bits 0–31 */
  uint8_t *hi;       /* origin bits 32–39 */
  uint64_t *live;    /* a bit per place */
  uint32_t cap, tail, span, count;
  uint32_t *slot;    /* index: tag bits | ring place + 1; 0 = empty */
  uint32_t nslots;
  uint32_t pos_mask; /* the slot bits that hold a ring place + 1 */
  uint64_t pending[PENDING]; /* origin + 1, 0 = empty */
  unsigned next_pending;
};

/* The origin at ring place pos. */
static inline uint64_t
at (const struct twoq *s, uint32_t pos)
{
  return (uint64_t) s->hi[pos] << 32 | s->lo[pos];
}

/* Is ring place pos in A1out (not a hole)? */
static inline bool
is_live (const struct twoq *s, uint32_t pos)
{
  return s->live[pos / 64] >> (pos % 64) & 1;
}

static inline void
set_live (struct twoq *s, uint32_t pos)
{
  s->live[pos / 64] |= UINT64_C (1) << (pos % 64);
}

static inline void
clear_live (struct twoq *s, uint32_t pos)
{
  s->live[pos / 64] &= ~(UINT64_C (1) << (pos % 64));
}

/* The ring place after pos. */
static inline uint32_t
ring_next (const struct twoq *s, uint32_t pos)
{
  return pos + 1 == s->cap ? 0 : pos + 1;
}

/* An origin's index hash: the high half picks the slot where its probe
 * starts, the low half gives its tag. */
static inline uint64_t ohash (uint64_t origin) { return hc_map_hash (origin); }

static inline uint32_t
home_of (const struct twoq *s, uint64_t h)
{
  return (uint32_t) (((h >> 32) * s->nslots) >> 32);
}

static inline uint32_t tag_of (const struct twoq *s, uint64_t h) { return (uint32_t) h & ~s->pos_mask; }

/* The ring place a (non-empty) slot names. */
static inline uint32_t place (const struct twoq *s, uint32_t v) { return (v & s->pos_mask) - 1; }

static inline uint32_t slot_next (const struct twoq *s, uint32_t i) { return i + 1 == s->nslots ? 0 : i + 1; }

/* The index slot of origin, or HC_NIL. */
static uint32_t
find (const struct twoq *s, uint64_t origin)
{
  const uint64_t h = ohash (origin);
  const uint32_t tag = tag_of (s, h);

  for (uint32_t i = home_of (s, h);; i = slot_next (s, i)) {
    uint32_t v = s->slot[i];
    if (!v)
      return HC_NIL;
    if ((v & ~s->pos_mask) == tag && at (s, place (s, v)) == origin)
      return i;
  }
}

/* Empties index slot i (backward-shift deletion: no tombstones). */
static void
unindex (struct twoq *s, uint32_t i)
{
  for (uint32_t j = i;;) {
    s->slot[i] = 0;
    for (;;) {
      j = slot_next (s, j);
      if (!s->slot[j])
        return;
      uint32_t h = home_of (s, ohash (at (s, place (s, s->slot[j]))));
      /* The entry at j may fill i unless its home lies cyclically in (i, j]. */
      if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
        break;
    }
    s->slot[i] = s->slot[j];
    i = j;
  }
}

/* Takes origin out of A1out; returns whether it was there. */
static bool
a1out_take (struct twoq *s, uint64_t origin)
{
  uint32_t i;

  if (!s->count || (i = find (s, origin)) == HC_NIL)
    return false;
  clear_live (s, place (s, s->slot[i]));
  unindex (s, i);
  s->count--;
  return true;
}

/* Forgets A1out's oldest origin. */
static void
a1out_pop (struct twoq *s)
{
  while (!is_live (s, s->tail)) {
    s->tail = ring_next (s, s->tail);
    s->span--;
  }
  unindex (s, find (s, at (s, s->tail)));
  clear_live (s, s->tail);
  s->tail = ring_next (s, s->tail);
  s->span--;
  s->count--;
}

/* Moves the live origins together at the tail, closing the holes. */
static void
a1out_compact (struct twoq *s)
{
  uint32_t w = 0;

  for (uint32_t k = 0, p = s->tail; k < s->span; k++, p = ring_next (s, p)) {
    if (!is_live (s, p))
      continue;
    uint32_t q = s->tail + w < s->cap ? s->tail + w : s->tail + w - s->cap;
    w++;
    if (q == p)
      continue;
    /* Every slot names its origin's current place, so the lookup is sound
     * while places move. */
    uint32_t i = find (s, at (s, p));
    s->lo[q] = s->lo[p];
    s->hi[q] = s->hi[p];
    set_live (s, q);
    clear_live (s, p);
    s->slot[i] = (s->slot[i] & ~s->pos_mask) | (q + 1);
  }
  s->span = w;
}

/* Adds origin at A1out's head, forgetting the oldest beyond Kout. */
static void
a1out_push (struct twoq *s, uint64_t origin)
{
  if (!s->kout)
    return;
  if (s->count == s->kout)
    a1out_pop (s);
  if (s->span == s->cap)
    a1out_compact (s);
  uint32_t pos = s->tail + s->span < s->cap ? s->tail + s->span : s->tail + s->span - s->cap;
  s->lo[pos] = (uint32_t) origin;
  s->hi[pos] = (uint8_t) (origin >> 32);
  set_live (s, pos);
  s->span++;
  s->count++;
  /* The insertion's probe passes where origin would be: were it there
   * already (a block inserted without a miss admitted first), its old
   * place gives way, so that A1out never holds an origin twice. */
  const uint64_t h = ohash (origin);
  const uint32_t tag = tag_of (s, h);
  uint32_t i = home_of (s, h), v;
  for (; (v = s->slot[i]) != 0; i = slot_next (s, i))
    if ((v & ~s->pos_mask) == tag && at (s, place (s, v)) == origin) {
      clear_live (s, place (s, v));
      s->count--;
      break;
    }
  s->slot[i] = tag | (pos + 1);
}

static void
twoq_fini (struct hc_policy *p)
{
  struct twoq *s = p->state;
  if (s) {
    free (s->lo);
    free (s->hi);
    free (s->live);
    free (s->slot);
  }
  free (s);
  p->state = NULL;
}

static int
twoq_init (struct hc_policy *p)
{
  struct twoq *s = calloc (1, sizeof *s);
  uint32_t n = p->map->n;

  if (!s)
    return -ENOMEM;
  p->state = s;
  s->kin = n / 4;
  s->kout = n / 2;
  if (s->kout) {
    s->cap = s->kout + s->kout / 4 + 8;
    s->nslots = s->kout + s->kout / 3 + 1;
    s->pos_mask = UINT32_MAX >> __builtin_clz (s->cap); /* cap < 2^31: a tag bit at least */
    s->lo = malloc (s->cap * sizeof *s->lo);
    s->hi = malloc (s->cap * sizeof *s->hi);
    s->live = calloc ((s->cap + 63) / 64, sizeof *s->live);
    s->slot = calloc (s->nslots, sizeof *s->slot);
    if (!s->lo || !s->hi || !s->live || !s->slot) {
      twoq_fini (p);
      return -ENOMEM;
    }
  }
  return 0;
}

static size_t
twoq_bytes (const struct hc_policy *p)
{
  const struct twoq *s = p->state;
  return sizeof *s + (size_t) s->cap * (sizeof *s->lo + sizeof *s->hi)
         + (s->cap + 63) / 64 * sizeof *s->live + (size_t) s->nslots * sizeof *s->slot;
}

/* A miss: if its origin is in A1out, take it out and remember that it was. */
static bool
twoq_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  struct twoq *s = p->state;
  (void) why;

  if (a1out_take (s, a->origin)) {
    s->pending[s->next_pending] = a->origin + 1;
    s->next_pending = (s->next_pending + 1) % PENDING;
  }
  return true;
}

static void
twoq_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct twoq *s = p->state;
  unsigned q = A1IN;

  for (unsigned i = 0; i < PENDING; i++)
    if (s->pending[i] == a->origin + 1) {
      s->pending[i] = 0;
      q = AM;
      break;
    }
  hc_policy_enqueue (p->map, c, q, false);
}

static void
twoq_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_map *m = p->map;
  (void) a;

  m->blk[c].meta &= ~HC_M_DEMOTED;
  if (hc_meta_queue (m->blk[c].meta) == AM && m->queue[AM].head != c) {
    hc_list_remove (m, &m->queue[AM], c);
    hc_list_push_head (m, &m->queue[AM], c);
  }
}

/* The oldest block of queue q that `ok` accepts, taken off it; HC_NIL if
 * none within SKIP_LIMIT. */
static uint32_t
oldest (struct hc_map *m, unsigned q, hc_evictable_fn ok, void *arg)
{
  unsigned skipped = 0;

  for (uint32_t c = m->queue[q].tail; c != HC_NIL && skipped < SKIP_LIMIT;
       c = m->blk[c].prev, skipped++)
    if (ok (arg, c)) {
      hc_list_remove (m, &m->queue[q], c);
      hc_map_prefetch_tail (m, &m->queue[q]);
      return c;
    }
  return HC_NIL;
}

static uint32_t
twoq_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct twoq *s = p->state;
  struct hc_map *m = p->map;
  uint32_t c = m->queue[A1IN].tail;

  if (c != HC_NIL && (m->blk[c].meta & HC_M_DEMOTED) && ok (arg, c)) {
    hc_list_remove (m, &m->queue[A1IN], c);
    return c;
  }
  bool from_in = m->queue[A1IN].count > s->kin || m->queue[AM].count == 0;
  if ((c = oldest (m, from_in ? A1IN : AM, ok, arg)) == HC_NIL) {
    from_in = !from_in;
    c = oldest (m, from_in ? A1IN : AM, ok, arg);
  }
  if (c != HC_NIL && from_in && !(m->blk[c].meta & HC_M_DEMOTED))
    a1out_push (s, hc_meta_origin (m->blk[c].meta));
  return c;
}

static void
twoq_remove (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
}

static void
twoq_demote (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
  p->map->blk[c].meta |= HC_M_DEMOTED;
  hc_policy_enqueue (p->map, c, A1IN, true);
}

const struct hc_policy_ops hc_policy_twoq = {
  .name = "2q",
  .title = "2Q: FIFO for blocks seen once, LRU for blocks seen again, a ghost FIFO between",
  .init = twoq_init,
  .fini = twoq_fini,
  .admit = twoq_admit,
  .insert = twoq_insert,
  .hit = twoq_hit,
  .victim = twoq_victim,
  .remove = twoq_remove,
  .demote = twoq_demote,
  .bytes = twoq_bytes,
};
