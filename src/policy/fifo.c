/* fifo: first in, first out.
 *
 * One queue in admission order; hits change nothing.  The simplest
 * baseline there is, kept for comparison in replays (every cache paper's
 * first column).  Blocks that may not be evicted yet are passed over.
 */
#include "policy.h"

#define Q 0
#define SKIP_LIMIT 4096

static int fifo_init (struct hc_policy *p) { (void) p; return 0; }
static void fifo_fini (struct hc_policy *p) { (void) p; }

static void
fifo_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  (void) a;
  hc_policy_enqueue (p->map, c, Q, false);
}

static void
fifo_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  (void) p, (void) c, (void) a;
}

static uint32_t
fifo_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct hc_map *m = p->map;
  unsigned skipped = 0;

  for (uint32_t c = m->queue[Q].tail; c != HC_NIL && skipped < SKIP_LIMIT; c = m->blk[c].prev, skipped++)
    if (ok (arg, c)) {
      hc_list_remove (m, &m->queue[Q], c);
      hc_map_prefetch_tail (m, &m->queue[Q]);
      return c;
    }
  return HC_NIL;
}

static void
fifo_remove (struct hc_policy *p, uint32_t c)
{
  hc_list_remove (p->map, &p->map->queue[Q], c);
}

static void
fifo_demote (struct hc_policy *p, uint32_t c)
{
  struct hc_map *m = p->map;
  hc_list_remove (m, &m->queue[Q], c);
  hc_list_push_tail (m, &m->queue[Q], c);
  m->blk[c].meta |= HC_M_DEMOTED;
}

const struct hc_policy_ops hc_policy_fifo = {
  .name = "fifo",
  .title = "first in, first out",
  .init = fifo_init,
  .fini = fifo_fini,
  .insert = fifo_insert,
  .hit = fifo_hit,
  .victim = fifo_victim,
  .remove = fifo_remove,
  .demote = fifo_demote,
};
