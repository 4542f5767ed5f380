/* s3fifo: S3-FIFO (Yang et al., SOSP 2023).
 *
 * Most blocks of a block trace are used once.  S3-FIFO sends every new block
 * through a small probationary FIFO (10 % of the cache); a block that was hit
 * while there moves on to the main FIFO, the others leave quickly and are
 * remembered in a ghost set.  A block that comes back while still in the
 * ghost goes straight to the main FIFO.  The main FIFO evicts from its tail
 * but reinserts a block that was hit (decrementing its 2-bit counter): a
 * CLOCK with a small frequency.
 *
 *      new ──▶ [ small FIFO ]──hit once──▶ [ main FIFO ]◀─┐ hit: reinsert
 *                   │                          │          │ freq − 1
 *                   ▼ not hit                  └──────────┘
 *               ( ghost ) ── seen again ──▶ main
 *
 * Queues: 0 = small, 1 = main.  The ghost (ghost.c) costs ~1.1 bytes per
 * block.  The hint-aware policy may turn the small FIFO off (new blocks go
 * straight to main; what the small one holds then drains first) and the
 * reinsertion (main is then a plain FIFO, but for blocks a hint protects):
 * its evidence weighs both (src/cache/evidence.c).  Blocks that may not be
 * evicted yet (dirty, busy) are rotated to the head of their queue, at
 * most SKIP_LIMIT of them per victim search; once a whole queue has been
 * passed over, the search goes on in the other (a small queue full of
 * freshly written dirty blocks must not hide a main queue of clean ones).
 * This file also provides the S3-FIFO machinery the hint-aware policy
 * builds on (hintaware.c).
 */
#include <stdlib.h>

#include "s3fifo.h"

#define SKIP_LIMIT 4096

int
hc_s3_init (struct hc_policy *p, double small_ratio, size_t size)
{
  struct hc_s3 *s = calloc (1, size > sizeof *s ? size : sizeof *s);
  uint32_t n = p->map->n;

  if (!s)
    return -ENOMEM;
  s->small_target = (uint32_t) (n * small_ratio);
  if (s->small_target == 0)
    s->small_target = 1;
  if (hc_ghost_init (&s->ghost, n - s->small_target + 1) < 0) {
    free (s);
    return -ENOMEM;
  }
  p->state = s;
  return 0;
}

void
hc_s3_fini (struct hc_policy *p)
{
  struct hc_s3 *s = p->state;
  if (s)
    hc_ghost_fini (&s->ghost);
  free (s);
  p->state = NULL;
}

size_t
hc_s3_bytes (const struct hc_policy *p)
{
  const struct hc_s3 *s = p->state;
  return sizeof *s + hc_ghost_bytes (&s->ghost);
}

/* Moves c to the head of queue q (from whichever queue it is on). */
static inline void
requeue (struct hc_map *m, uint32_t c, unsigned q)
{
  hc_policy_dequeue (m, c);
  hc_policy_enqueue (m, c, q, false);
}

uint32_t
hc_s3_victim (struct hc_policy *p, const struct hc_s3_rules *r, hc_evictable_fn ok, void *arg)
{
  struct hc_s3 *s = p->state;
  struct hc_map *m = p->map;
  unsigned skipped = 0, passed_small = 0, passed_main = 0;
  /* Probation off (hintaware's evidence, HC_FX_FILTER), nothing new enters
   * the small FIFO: what it holds drains first, so that no block stays
   * there for good, out of every queue's turn. */
  const uint32_t small_target = p->effects & HC_FX_FILTER ? s->small_target : 0;

  for (;;) {
    struct hc_list *small = &m->queue[HC_S3_SMALL], *main = &m->queue[HC_S3_MAIN];
    const bool small_open = small->count > passed_small, main_open = main->count > passed_main;
    uint32_t c;
    uint64_t w;

    if (!small_open && !main_open)
      return HC_NIL;
    if (small_open && (small->count > small_target || !main_open)) {
      c = small->tail;
      w = m->blk[c].meta;
      if (hc_meta_freq (w) >= r->promote_freq (p, w)) {
        hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, 0);
        requeue (m, c, HC_S3_MAIN);
        continue;
      }
      if (!ok (arg, c)) {
        requeue (m, c, HC_S3_SMALL);
        passed_small++;
      } else {
        hc_list_remove (m, small, c);
        hc_map_prefetch_tail (m, small);
        if (!(w & HC_M_DEMOTED) && r->remember (p, w))
          hc_ghost_insert (&s->ghost, hc_meta_origin (w));
        return c;
      }
    } else {
      c = main->tail;
      w = m->blk[c].meta;
      if (hc_meta_freq (w) > 0 && !(w & HC_M_DEMOTED)
          && ((p->effects & HC_FX_REINSERT) || (w & HC_M_HINTED))) {
        unsigned f = hc_meta_freq (w), step = r->age_step (p, w);
        hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, f > step ? f - step : 0);
        requeue (m, c, HC_S3_MAIN);
        continue;
      }
      if (!ok (arg, c)) {
        requeue (m, c, HC_S3_MAIN);
        passed_main++;
      } else {
        hc_list_remove (m, main, c);
        hc_map_prefetch_tail (m, main);
        return c;
      }
    }
    if (++skipped == SKIP_LIMIT)
      return HC_NIL;
  }
}

void
hc_s3_hit (struct hc_policy *p, uint32_t c)
{
  struct hc_map *m = p->map;
  unsigned f = hc_meta_freq (m->blk[c].meta);

  if (f < 3)
    hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, f + 1);
  m->blk[c].meta &= ~HC_M_DEMOTED;
}

void
hc_s3_copy (struct hc_policy *dst, const struct hc_policy *src)
{
  struct hc_s3 *d = dst->state;
  const struct hc_s3 *s = src->state;

  d->small_target = s->small_target;
  hc_ghost_copy (&d->ghost, &s->ghost);
}

void
hc_s3_remove (struct hc_policy *p, uint32_t c)
{
  hc_policy_dequeue (p->map, c);
}

void
hc_s3_demote (struct hc_policy *p, uint32_t c)
{
  struct hc_map *m = p->map;

  hc_policy_dequeue (m, c);
  hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, 0);
  m->blk[c].meta |= HC_M_DEMOTED;
  hc_policy_enqueue (m, c, HC_S3_SMALL, true);
}

/* ---- Plain S3-FIFO: every block is alike. ---- */

static unsigned plain_promote (const struct hc_policy *p, uint64_t w) { (void) p, (void) w; return 1; }
static unsigned plain_age (const struct hc_policy *p, uint64_t w) { (void) p, (void) w; return 1; }
static bool plain_remember (const struct hc_policy *p, uint64_t w) { (void) p, (void) w; return true; }

static const struct hc_s3_rules plain_rules = { plain_promote, plain_age, plain_remember };

static int
s3_init (struct hc_policy *p)
{
  return hc_s3_init (p, 0.10, 0);
}

static void
s3_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_s3 *s = p->state;
  hc_policy_enqueue (p->map, c, hc_ghost_contains (&s->ghost, a->origin) ? HC_S3_MAIN : HC_S3_SMALL,
                     false);
}

static void
s3_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  (void) a;
  hc_s3_hit (p, c);
}

static uint32_t
s3_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  return hc_s3_victim (p, &plain_rules, ok, arg);
}

const struct hc_policy_ops hc_policy_s3fifo = {
  .name = "s3fifo",
  .title = "S3-FIFO: small probationary FIFO, main FIFO, ghost admission",
  .init = s3_init,
  .fini = hc_s3_fini,
  .insert = s3_insert,
  .hit = s3_hit,
  .victim = s3_victim,
  .remove = hc_s3_remove,
  .demote = hc_s3_demote,
  .bytes = hc_s3_bytes,
};
