/* arc: Adaptive Replacement Cache (Megiddo and Modha, FAST 2003).
 *
 * Two queues of cached blocks — T1, seen once recently, and T2, seen at
 * least twice — and two ghost lists of recently evicted origins, B1 (from
 * T1) and B2 (from T2).  A miss that finds its origin in B1 says T1 was too
 * small and moves the target size p of T1 up; one found in B2 moves p down.
 * Evictions take T1's oldest block when T1 is above p, else T2's.
 *
 *         T1 (recency)  │  T2 (frequency)
 *    B1 ◀── evicted ────┼──── evicted ──▶ B2      ghost hits move p
 *
 * The directory calls admit() with the missed origin before it asks for a
 * victim, so that is where a miss is classified (ghost hit or new) and the
 * ghost lists are trimmed as the algorithm says; victim() then performs
 * REPLACE.  ARC keeps its ghosts as exact origins (a node per ghost: origin,
 * links and a hash slot), so it needs more RAM than the FIFO-family
 * policies; it is here for comparison.  Queues: 0 = T1, 1 = T2.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define T1 0
#define T2 1
#define SKIP_LIMIT 4096

enum { NEW = 0, IN_B1 = 1, IN_B2 = 2 };

/* A ghost list: nodes with origins, in LRU order, indexed by origin. */
struct gnode {
  uint64_t origin;
  uint32_t prev, next;
  uint8_t list; /* 1 = B1, 2 = B2, 0 = free */
};

struct arc {
  uint32_t c;            /* cache size */
  double p;              /* target size of T1 */
  struct gnode *node;    /* 2c + 1 nodes */
  uint32_t nnodes, free_head;
  uint32_t head[3], tail[3], count[3]; /* per ghost list (1, 2) */
  uint32_t *slot;        /* hash: node + 1 */
  uint32_t nslots;
  int pending;           /* classification of the last admitted miss */
  bool drop_t1;          /* case 4a: evict T1's oldest without a ghost */
};

static inline uint32_t
ghash (const struct arc *s, uint64_t o)
{
  o ^= o >> 31;
  o *= UINT64_C (0x7fb5d329728ea185);
  o ^= o >> 27;
  return (uint32_t) (((o >> 32) * (uint64_t) s->nslots) >> 32);
}

static uint32_t
gfind (const struct arc *s, uint64_t o)
{
  for (uint32_t i = ghash (s, o);; i = i + 1 == s->nslots ? 0 : i + 1) {
    uint32_t v = s->slot[i];
    if (!v)
      return HC_NIL;
    if (s->node[v - 1].origin == o)
      return v - 1;
  }
}

/* Removes node k from the hash (backward-shift deletion). */
static void
gunhash (struct arc *s, uint32_t k)
{
  uint32_t i = ghash (s, s->node[k].origin);
  while (s->slot[i] != k + 1)
    i = i + 1 == s->nslots ? 0 : i + 1;
  for (uint32_t j = i;;) {
    s->slot[i] = 0;
    for (;;) {
      j = j + 1 == s->nslots ? 0 : j + 1;
      if (!s->slot[j])
        return;
      uint32_t h = ghash (s, s->node[s->slot[j] - 1].origin);
      if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
        break;
    }
    s->slot[i] = s->slot[j];
    i = j;
  }
}

/* Unlinks node k from its list and frees it. */
static void
gdrop (struct arc *s, uint32_t k)
{
  struct gnode *g = &s->node[k];
  unsigned l = g->list;
  if (g->prev != HC_NIL) s->node[g->prev].next = g->next; else s->head[l] = g->next;
  if (g->next != HC_NIL) s->node[g->next].prev = g->prev; else s->tail[l] = g->prev;
  s->count[l]--;
  gunhash (s, k);
  g->list = 0;
  g->next = s->free_head;
  s->free_head = k;
}

/* Adds origin o at the head (MRU) of ghost list l. */
static void
gpush (struct arc *s, unsigned l, uint64_t o)
{
  if (s->free_head == HC_NIL) /* cannot happen: |B1| + |B2| <= c */
    gdrop (s, s->tail[2] != HC_NIL ? s->tail[2] : s->tail[1]);
  uint32_t k = s->free_head;
  struct gnode *g = &s->node[k];
  s->free_head = g->next;
  *g = (struct gnode) { o, HC_NIL, s->head[l], (uint8_t) l };
  if (s->head[l] != HC_NIL) s->node[s->head[l]].prev = k; else s->tail[l] = k;
  s->head[l] = k;
  s->count[l]++;
  uint32_t i = ghash (s, o);
  while (s->slot[i])
    i = i + 1 == s->nslots ? 0 : i + 1;
  s->slot[i] = k + 1;
}

static int
arc_init (struct hc_policy *p)
{
  struct arc *s = calloc (1, sizeof *s);
  uint32_t n = p->map->n;

  if (!s)
    return -ENOMEM;
  s->c = n;
  s->nnodes = n + 2;
  s->nslots = (uint32_t) ((uint64_t) s->nnodes * 4 / 3 + 1);
  s->node = calloc (s->nnodes, sizeof *s->node);
  s->slot = calloc (s->nslots, sizeof *s->slot);
  if (!s->node || !s->slot) {
    free (s->node);
    free (s->slot);
    free (s);
    return -ENOMEM;
  }
  for (uint32_t k = 0; k < s->nnodes; k++)
    s->node[k].next = k + 1 < s->nnodes ? k + 1 : HC_NIL;
  for (unsigned l = 0; l < 3; l++)
    s->head[l] = s->tail[l] = HC_NIL;
  p->state = s;
  return 0;
}

static void
arc_fini (struct hc_policy *p)
{
  struct arc *s = p->state;
  if (s) {
    free (s->node);
    free (s->slot);
  }
  free (s);
  p->state = NULL;
}

static size_t
arc_bytes (const struct hc_policy *p)
{
  const struct arc *s = p->state;
  return sizeof *s + s->nnodes * sizeof *s->node + s->nslots * sizeof *s->slot;
}

/* Classifies a miss and trims the ghosts (ARC's cases II–IV, before REPLACE). */
static bool
arc_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  struct arc *s = p->state;
  struct hc_map *m = p->map;
  uint32_t k = gfind (s, a->origin);
  uint32_t t1 = m->queue[T1].count, t2 = m->queue[T2].count;
  (void) why;

  s->drop_t1 = false;
  if (k != HC_NIL && s->node[k].list == 1) {
    double d = s->count[1] ? (double) s->count[2] / s->count[1] : 1;
    s->p = s->p + (d > 1 ? d : 1) > s->c ? s->c : s->p + (d > 1 ? d : 1);
    s->pending = IN_B1;
    gdrop (s, k);
  } else if (k != HC_NIL) {
    double d = s->count[2] ? (double) s->count[1] / s->count[2] : 1;
    s->p = s->p - (d > 1 ? d : 1) < 0 ? 0 : s->p - (d > 1 ? d : 1);
    s->pending = IN_B2;
    gdrop (s, k);
  } else {
    s->pending = NEW;
    if (t1 + s->count[1] >= s->c) {
      if (t1 < s->c) {
        if (s->count[1])
          gdrop (s, s->tail[1]);
      } else {
        s->drop_t1 = true;
      }
    } else if (t1 + t2 + s->count[1] + s->count[2] >= 2 * s->c && s->count[2]) {
      gdrop (s, s->tail[2]);
    }
  }
  return true;
}

static void
arc_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct arc *s = p->state;
  (void) a;
  hc_policy_enqueue (p->map, c, s->pending == NEW ? T1 : T2, false);
  s->pending = NEW;
}

static void
arc_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  (void) a;
  hc_policy_dequeue (p->map, c);
  hc_policy_enqueue (p->map, c, T2, false);
}

/* The oldest evictable block of queue q, taken off it; HC_NIL if none. */
static uint32_t
oldest (struct hc_map *m, unsigned q, hc_evictable_fn ok, void *arg)
{
  unsigned skipped = 0;
  for (uint32_t c = m->queue[q].tail; c != HC_NIL && skipped < SKIP_LIMIT; c = m->blk[c].prev, skipped++)
    if (ok (arg, c)) {
      hc_list_remove (m, &m->queue[q], c);
      return c;
    }
  return HC_NIL;
}

/* REPLACE. */
static uint32_t
arc_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  struct arc *s = p->state;
  struct hc_map *m = p->map;
  uint32_t t1 = m->queue[T1].count, c;

  if (s->drop_t1) {
    s->drop_t1 = false;
    if ((c = oldest (m, T1, ok, arg)) != HC_NIL)
      return c;
  }
  bool from_t1 = t1 >= 1 && (t1 > s->p || (s->pending == IN_B2 && t1 == (uint32_t) s->p));
  if ((c = oldest (m, from_t1 ? T1 : T2, ok, arg)) == HC_NIL) {
    from_t1 = !from_t1;
    c = oldest (m, from_t1 ? T1 : T2, ok, arg);
  }
  if (c != HC_NIL)
    gpush (s, from_t1 ? 1 : 2, hc_meta_origin (m->blk[c].meta));
  return c;
}

static void
arc_remove (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
}

static void
arc_demote (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
  hc_policy_enqueue (p->map, c, T1, true);
  p->map->blk[c].meta |= HC_M_DEMOTED;
}

const struct hc_policy_ops hc_policy_arc = {
  .name = "arc",
  .title = "Adaptive Replacement Cache (recency and frequency, ghost-steered)",
  .init = arc_init,
  .fini = arc_fini,
  .admit = arc_admit,
  .insert = arc_insert,
  .hit = arc_hit,
  .victim = arc_victim,
  .remove = arc_remove,
  .demote = arc_demote,
  .bytes = arc_bytes,
};
