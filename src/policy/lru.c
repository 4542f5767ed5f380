/* lru: least recently used.
 *
 * One queue, newest at the head.  A hit moves the block to the head; the
 * victim is the oldest block that may be evicted now (a dirty or busy block
 * is passed over, not moved, so the order stays exact).  Demoting a block
 * moves it to the tail.  LRU is the reference the replayer's tests check
 * exactly against an independent implementation, so it has no tricks.
 */
#include "policy.h"

#define Q 0
#define SKIP_LIMIT 4096 /* blocks passed over before giving up */

static int
lru_init (struct hc_policy *p)
{
  (void) p;
  return 0;
}

static void
lru_fini (struct hc_policy *p)
{
  (void) p;
}

static void
lru_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  (void) a;
  hc_policy_enqueue (p->map, c, Q, false);
}

static void
lru_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_map *m = p->map;
  (void) a;
  if (m->queue[Q].head == c)
    return;
  hc_list_remove (m, &m->queue[Q], c);
  hc_list_push_head (m, &m->queue[Q], c);
}

static uint32_t
lru_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct hc_map *m = p->map;
  unsigned skipped = 0;

  for (uint32_t c = m->queue[Q].tail; c != HC_NIL; c = m->blk[c].prev) {
    if (ok (arg, c)) {
      hc_list_remove (m, &m->queue[Q], c);
      hc_map_prefetch_tail (m, &m->queue[Q]);
      return c;
    }
    if (++skipped == SKIP_LIMIT)
      break;
  }
  return HC_NIL;
}

static void
lru_remove (struct hc_policy *p, uint32_t c)
{
  hc_list_remove (p->map, &p->map->queue[Q], c);
}

static void
lru_demote (struct hc_policy *p, uint32_t c)
{
  struct hc_map *m = p->map;
  hc_list_remove (m, &m->queue[Q], c);
  hc_list_push_tail (m, &m->queue[Q], c);
  m->blk[c].meta |= HC_M_DEMOTED;
}

const struct hc_policy_ops hc_policy_lru = {
  .name = "lru",
  .title = "least recently used",
  .init = lru_init,
  .fini = lru_fini,
  .insert = lru_insert,
  .hit = lru_hit,
  .victim = lru_victim,
  .remove = lru_remove,
  .demote = lru_demote,
};
