/* The policy registry, and helpers every policy shares.
 *
 * Policies are listed in one const table indexed by enum hc_policy_id;
 * lookup by name walks it.  The helpers keep the contract that a mapped
 * block is on the queue its meta bits name.
 */
#include <errno.h>
#include <string.h>

#include "policy.h"

static const struct hc_policy_ops *const registry[HC_POLICY_COUNT] = {
  [HC_POLICY_LRU] = &hc_policy_lru,
  [HC_POLICY_S3FIFO] = &hc_policy_s3fifo,
  [HC_POLICY_HINTAWARE] = &hc_policy_hintaware,
  [HC_POLICY_FIFO] = &hc_policy_fifo,
  [HC_POLICY_ARC] = &hc_policy_arc,
  [HC_POLICY_SIEVE] = &hc_policy_sieve,
  [HC_POLICY_TWOQ] = &hc_policy_twoq,
  [HC_POLICY_WTINYLFU] = &hc_policy_wtinylfu,
};

int
hc_policy_find (const char *name)
{
  for (unsigned i = 0; i < HC_POLICY_COUNT; i++)
    if (strcmp (registry[i]->name, name) == 0)
      return (int) i;
  return -EINVAL;
}

const char *
hc_policy_name_of (unsigned id)
{
  return id < HC_POLICY_COUNT ? registry[id]->name : NULL;
}

int
hc_policy_init (struct hc_policy *p, unsigned id, struct hc_map *m, const hc_classes *classes)
{
  if (id >= HC_POLICY_COUNT)
    return -EINVAL;
  p->ops = registry[id];
  p->map = m;
  p->classes = classes;
  p->effects = HC_FX_ALL;
  p->state = NULL;
  return p->ops->init (p);
}

void
hc_policy_fini (struct hc_policy *p)
{
  if (p->ops)
    p->ops->fini (p);
  p->ops = NULL;
}

void
hc_policy_enqueue (struct hc_map *m, uint32_t c, unsigned q, bool at_tail)
{
  hc_map_set_field (m, c, HC_M_QUEUE_MASK, HC_M_QUEUE_SHIFT, q);
  if (at_tail)
    hc_list_push_tail (m, &m->queue[q], c);
  else
    hc_list_push_head (m, &m->queue[q], c);
}

void
hc_policy_dequeue (struct hc_map *m, uint32_t c)
{
  hc_list_remove (m, &m->queue[hc_meta_queue (m->blk[c].meta)], c);
}

void
hc_policy_attrs (const struct hc_policy *p, unsigned cls, struct hc_class_attrs *a)
{
  if (!p->classes || hc_classes_get (p->classes, cls, a) < 0)
    hc_class_defaults (cls, a);
}

unsigned
hc_policy_priority (const struct hc_policy *p, unsigned cls)
{
  struct hc_class_attrs a;

  hc_policy_attrs (p, cls, &a);
  return a.priority;
}

unsigned
hc_policy_placing_priority (const struct hc_policy *p, unsigned cls)
{
  if ((p->effects & HC_FX_PLACE) || hc_classes_chosen (p->classes, cls, HC_ATTR_PRIORITY))
    return hc_policy_priority (p, cls);
  return hc_policy_priority (p, HC_CLASS_UNCLASSIFIED);
}

uint32_t
hc_policy_victim_of_class (struct hc_policy *p, unsigned cls, int q0, int q1, unsigned limit,
                           hc_evictable_fn ok, void *arg)
{
  struct hc_map *m = p->map;
  int qs[2] = { q0, q1 };

  for (unsigned i = 0; i < 2; i++) {
    if (qs[i] < 0)
      continue;
    unsigned seen = 0;
    for (uint32_t c = m->queue[qs[i]].tail; c != HC_NIL && seen < limit; c = m->blk[c].prev, seen++)
      if (hc_meta_class (m->blk[c].meta) == cls && ok (arg, c)) {
        hc_list_remove (m, &m->queue[qs[i]], c);
        return c;
      }
  }
  return HC_NIL;
}
