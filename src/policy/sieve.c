/* sieve: SIEVE (Zhang, Yang, Yue, Vigfusson and Rashmi, "SIEVE is Simpler
 * than LRU: an Efficient Turn-Key Eviction Algorithm for Web Caches",
 * NSDI 2024).
 *
 * One FIFO queue of cached blocks, newest at the head, a visited bit per
 * block, and a hand.  A new block enters at the head, unvisited; a hit only
 * sets the block's visited bit (nothing moves, so a hit is one bit).  To
 * evict, the hand walks from where it stopped last towards the head: a
 * visited block has its bit cleared and is passed, the first unvisited one
 * is evicted, and the hand stays at its newer neighbour.  Past the head the
 * hand starts again at the tail.  Unlike CLOCK, which puts a new block in
 * the evicted one's place, SIEVE keeps new blocks at the head, apart from
 * the old ones that survived a sweep: a block used once is evicted by the
 * first sweep that reaches it, soon after it entered, while a block that
 * keeps being used stays, without moving ("lazy promotion, quick
 * demotion", in the paper's words).  The algorithm has no parameter.
 *
 * The hand without a pointer.  A block number held as the hand would break
 * the contract that the map can move a block's mapping to another block
 * (copy-on-write relocation) without telling the policy.  So the queue is
 * kept as two lists whose concatenation is SIEVE's queue:
 *
 *     head (newest) [ unexamined: from the head to the hand ] [ examined ] tail
 *                                                   hand ──┘
 *
 * The hand is the tail of the unexamined list.  A passed block moves from
 * that tail to the head of the examined list — the same place in SIEVE's
 * order; new blocks enter at the head of the unexamined list.  When the
 * hand passes the head, the unexamined list is empty and the lists swap
 * roles: the whole queue is unexamined again and the hand is at its tail.
 * Which of queues 0 and 1 is the unexamined one is the policy's only state
 * (one number), so relocation moves nothing the policy owns.  The
 * unexamined list is empty only when both are: every change that empties
 * it swaps at once (the directory's class-share eviction, which takes
 * blocks behind the policy's back, is caught up with at the next call).
 * When both are empty, queue 0 becomes the unexamined one, so that which
 * queue is which depends on what they hold, not on the order in which
 * blocks left them (a discard applied by a walk over the cache and the
 * same discard block by block must leave the same state: the class-share
 * eviction looks at queue 0's tail first).
 *
 * The visited bit is the meta word's freq field (0 or 1).  Demoting a block
 * puts it at the hand, unvisited: the next eviction takes it.  A block that
 * may not be evicted now (dirty, busy) is passed like a visited one, without
 * losing its place in the order; a search gives up after SKIP_LIMIT such
 * blocks or two whole sweeps (after one sweep every bit is clear, so a
 * second finds any evictable block).  Eviction costs O(1) amortised: each
 * pass over a visited block pays for the hit that set it.  Extra RAM: none
 * beyond the map.
 */
#include <errno.h>
#include <stdlib.h>

#include "policy.h"

#define SKIP_LIMIT 4096 /* blocks that may not be evicted, passed before giving up */

struct sieve {
  unsigned unexamined; /* the queue (0 or 1) from the head to the hand */
};

static int
sieve_init (struct hc_policy *p)
{
  struct sieve *s = calloc (1, sizeof *s);

  if (!s)
    return -ENOMEM;
  p->state = s;
  return 0;
}

static void
sieve_fini (struct hc_policy *p)
{
  free (p->state);
  p->state = NULL;
}

static size_t
sieve_bytes (const struct hc_policy *p)
{
  (void) p;
  return sizeof (struct sieve);
}

/* Swaps the lists' roles when the hand has passed the head (the unexamined
 * list is empty and the examined one is not); with both empty, queue 0 is
 * the unexamined one. */
static inline void
settle (struct sieve *s, const struct hc_map *m)
{
  if (m->queue[s->unexamined].count == 0)
    s->unexamined = m->queue[s->unexamined ^ 1].count != 0 ? s->unexamined ^ 1 : 0;
}

static void
sieve_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct sieve *s = p->state;
  (void) a;

  settle (s, p->map);
  hc_map_set_field (p->map, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, 0);
  hc_policy_enqueue (p->map, c, s->unexamined, false);
}

static void
sieve_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_map *m = p->map;
  (void) a;

  const uint64_t w = m->blk[c].meta;
  const uint64_t v = (w & ~(HC_M_FREQ_MASK | HC_M_DEMOTED)) | (UINT64_C (1) << HC_M_FREQ_SHIFT);
  if (v != w) /* a block already visited is not written again */
    m->blk[c].meta = v;
}

static uint32_t
sieve_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct sieve *s = p->state;
  struct hc_map *m = p->map;
  unsigned skipped = 0;
  uint64_t steps = 0;

  settle (s, m);
  const uint64_t sweeps = 2 * ((uint64_t) m->queue[0].count + m->queue[1].count);
  while (steps++ < sweeps) {
    struct hc_list *un = &m->queue[s->unexamined];
    uint32_t c = un->tail;
    uint64_t w = m->blk[c].meta;

    if (hc_meta_freq (w) == 0 && ok (arg, c)) {
      hc_list_remove (m, un, c);
      settle (s, m);
      hc_map_prefetch_tail (m, &m->queue[s->unexamined]);
      return c;
    }
    /* Passed: visited (its bit cleared) or not evictable now. */
    if (hc_meta_freq (w) == 0 && ++skipped == SKIP_LIMIT)
      return HC_NIL;
    m->blk[c].meta = w & ~HC_M_FREQ_MASK;
    hc_list_remove (m, un, c);
    hc_policy_enqueue (m, c, s->unexamined ^ 1, false);
    settle (s, m);
  }
  return HC_NIL;
}

static void
sieve_remove (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
  settle (p->state, p->map);
}

static void
sieve_demote (struct hc_policy *p, uint32_t c)
{
  struct sieve *s = p->state;
  struct hc_map *m = p->map;

  hc_policy_dequeue (m, c);
  settle (s, m);
  m->blk[c].meta = (m->blk[c].meta & ~HC_M_FREQ_MASK) | HC_M_DEMOTED;
  hc_policy_enqueue (m, c, s->unexamined, true);
}

const struct hc_policy_ops hc_policy_sieve = {
  .name = "sieve",
  .title = "SIEVE: FIFO with visited bits and a hand that sifts out unvisited blocks",
  .init = sieve_init,
  .fini = sieve_fini,
  .insert = sieve_insert,
  .hit = sieve_hit,
  .victim = sieve_victim,
  .remove = sieve_remove,
  .demote = sieve_demote,
  .bytes = sieve_bytes,
};
