/* hintaware: the default policy — S3-FIFO that listens to hints.
 *
 * With no hints every block is "unclassified" and this is exactly S3-FIFO
 * (s3fifo.c), plus a per-stream sequential cutoff.  Hints change four
 * things, each read from the class attribute table rather than from class
 * names, so an administrator's table steers it:
 *
 *   where a block starts   a class of priority ≥ 12 (metadata, transaction
 *                          by default) or willneed advice starts in the main
 *                          FIFO with one hit of credit: it is protected, and
 *                          counts as "hinted" for the hint-efficacy figure.
 *                          Others start in the small FIFO as usual.
 *   how it ages            a class of priority < 4 (journal, streaming,
 *                          background) needs two hits to leave the small
 *                          FIFO, loses two credits per pass in main, and is
 *                          not remembered in the ghost when evicted — one
 *                          re-read of a backup block does not make it hot.
 *   what goes first        dontneed advice on a hit demotes the block to the
 *                          eviction end of the small FIFO.
 *   what is admitted       a miss on a stream past the sequential cutoff is
 *                          not admitted, unless protected as above (a hint
 *                          that the data is valuable outweighs the guess
 *                          that a stream is not), and unless the cutoff is
 *                          found to cost more than it saves (below); the
 *                          cache directory already refused what the
 *                          class's admission rules, the advice and the
 *                          class's maximum share forbid.
 *
 * Journal blocks are not kept once written back: the directory demotes a
 * cleaned block whose class does not admit reads.
 *
 * A sequential cutoff that checks itself.  bcache's cutoff assumes that
 * what is read or written in a long run will not be wanted again soon.
 * Often true (backups, scans: the cutoff spares the flash their writes and
 * keeps them from crowding the cache), sometimes badly wrong (a build
 * writes each object file in one run and the linker reads it back a moment
 * later).  Without hints the policy cannot know which, so it measures, with
 * two miniature simulations (Waldspurger et al., "Cache Modeling and
 * Optimization using Miniature Simulations", USENIX ATC 2017): a spatially
 * hashed sample of the blocks (rate R = 1/256, or more for caches under
 * 256 K blocks, so that neither has fewer than 1,024 blocks) drives two
 * S3-FIFO caches of R times the cache's size, one that applies the cutoff
 * and one that does not.  Each is a whole cache, so each pays for its own
 * pollution as the real one would, which a tally of "streamed blocks
 * reused later" could not see.  A saturating counter follows which of the
 * two misses less, and the cutoff applies only while the one with it is
 * ahead: with no evidence, none, because a wrong cutoff costs misses that
 * later evidence cannot give back.  The cost: the two small caches, under
 * a fifth of a byte of RAM per cached block, and a hash per access.
 */
#include "s3fifo.h"

#define MINI_RATE_SHIFT 8     /* sample about 1 block in 256 … */
#define MINI_MIN_BLOCKS 1024  /* … but let no miniature cache be smaller */
#define MINI_LIMIT 4096       /* the counter saturates at ±this */

/* A miniature cache: plain S3-FIFO on a map of its own. */
struct mini {
  struct hc_map map;
  struct hc_policy policy;
};

/* The policy's state: the S3-FIFO core, then the two miniature caches. */
struct ha {
  struct hc_s3 s3;        /* first: the core's functions use it */
  struct mini sim[2];     /* [0] applies the cutoff, [1] does not */
  uint64_t sample_below;  /* an origin is sampled if its hash is below this */
  int32_t lead;           /* > 0: the one without the cutoff misses less */
};

#define PROTECT_PRIORITY 12
#define LOW_PRIORITY 4

static unsigned
block_priority (const struct hc_policy *p, uint64_t w)
{
  return hc_policy_priority (p, hc_meta_class (w));
}

static unsigned
ha_promote (const struct hc_policy *p, uint64_t w)
{
  return block_priority (p, w) < LOW_PRIORITY ? 2 : 1;
}

static unsigned
ha_age (const struct hc_policy *p, uint64_t w)
{
  return block_priority (p, w) < LOW_PRIORITY ? 2 : 1;
}

static bool
ha_remember (const struct hc_policy *p, uint64_t w)
{
  return block_priority (p, w) >= LOW_PRIORITY;
}

static const struct hc_s3_rules rules = { ha_promote, ha_age, ha_remember };

static int
ha_init (struct hc_policy *p)
{
  int rc = hc_s3_init (p, 0.10, sizeof (struct ha));
  uint32_t n = p->map->n, size = n >> MINI_RATE_SHIFT;
  struct ha *h;

  if (rc < 0)
    return rc;
  h = p->state;
  if (size < MINI_MIN_BLOCKS)
    size = n < MINI_MIN_BLOCKS ? n : MINI_MIN_BLOCKS;
  /* Sample the share of blocks that the miniature caches are of the cache. */
  h->sample_below = size >= n ? UINT64_MAX : (uint64_t) ((double) size / n * 0x1p64);
  for (unsigned i = 0; i < 2; i++) {
    struct mini *m = &h->sim[i];
    if (hc_map_init (&m->map, size) < 0
        || hc_policy_init (&m->policy, HC_POLICY_S3FIFO, &m->map, NULL) < 0) {
      hc_map_fini (&m->map); /* fini of a zeroed or half-made map and policy is safe */
      while (i--) {
        hc_policy_fini (&h->sim[i].policy);
        hc_map_fini (&h->sim[i].map);
      }
      hc_s3_fini (p);
      return -ENOMEM;
    }
  }
  return 0;
}

static void
ha_fini (struct hc_policy *p)
{
  struct ha *h = p->state;

  for (unsigned i = 0; h && i < 2; i++) {
    hc_policy_fini (&h->sim[i].policy);
    hc_map_fini (&h->sim[i].map);
  }
  hc_s3_fini (p);
}

static size_t
ha_bytes (const struct hc_policy *p)
{
  const struct ha *h = p->state;
  size_t b = hc_s3_bytes (p) + sizeof *h - sizeof h->s3;

  for (unsigned i = 0; i < 2; i++)
    b += hc_map_bytes (&h->sim[i].map) + hc_policy_bytes (&h->sim[i].policy);
  return b;
}

static bool
any_block (void *arg, uint32_t c)
{
  (void) arg, (void) c;
  return true;
}

/* Runs one access through a miniature cache; returns true on a miss.  A
 * miss is admitted unless `bypass`. */
static bool
mini_access (struct mini *m, const struct hc_access *a, bool bypass)
{
  uint32_t c = hc_map_lookup (&m->map, a->origin);

  if (c != HC_NIL) {
    hc_policy_hit (&m->policy, c, a);
    return false;
  }
  if (bypass)
    return true;
  if (m->map.free.count)
    c = hc_list_pop_tail (&m->map, &m->map.free);
  else if ((c = hc_policy_victim (&m->policy, any_block, NULL)) != HC_NIL)
    hc_map_remove (&m->map, c);
  if (c != HC_NIL) {
    hc_map_insert (&m->map, c, a->origin, 0, false);
    hc_policy_insert (&m->policy, c, a);
  }
  return true;
}

static bool is_protected (const struct hc_policy *p, const struct hc_access *a);

/* Feeds a sampled access to both miniature caches (the one with the cutoff
 * bypasses what the real one would) and moves the counter towards the one
 * that missed when the other did not. */
static void
simulate (struct hc_policy *p, const struct hc_access *a)
{
  struct ha *h = p->state;

  if (hc_map_hash (a->origin ^ UINT64_C (0x5bd1e995)) >= h->sample_below)
    return;
  bool miss_cut = mini_access (&h->sim[0], a, a->seq && !is_protected (p, a));
  bool miss_all = mini_access (&h->sim[1], a, false);
  if (miss_cut && !miss_all && h->lead < MINI_LIMIT)
    h->lead++;
  else if (miss_all && !miss_cut && h->lead > -MINI_LIMIT)
    h->lead--;
}

static bool
ha_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  struct ha *h = p->state;

  simulate (p, a);
  if (a->seq && !is_protected (p, a) && h->lead < 0) {
    *why = HC_BYPASS_SEQUENTIAL;
    return false;
  }
  return true;
}

/* Is this access protected by its hint? */
static bool
is_protected (const struct hc_policy *p, const struct hc_access *a)
{
  return a->hint.advice == HC_ADVICE_WILLNEED
         || (a->hint.cls != HC_CLASS_UNCLASSIFIED
             && hc_policy_priority (p, a->hint.cls) >= PROTECT_PRIORITY);
}

static void
ha_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_s3 *s = p->state;
  struct hc_map *m = p->map;

  if (is_protected (p, a)) {
    hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, 1);
    m->blk[c].meta |= HC_M_HINTED;
    hc_policy_enqueue (m, c, HC_S3_MAIN, false);
  } else if (hc_ghost_contains (&s->ghost, a->origin)
             && hc_policy_priority (p, a->hint.cls) >= LOW_PRIORITY) {
    hc_policy_enqueue (m, c, HC_S3_MAIN, false);
  } else {
    hc_policy_enqueue (m, c, HC_S3_SMALL, false);
  }
}

static void
ha_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_map *m = p->map;

  simulate (p, a);
  if (a->hint.advice == HC_ADVICE_DONTNEED) {
    hc_s3_demote (p, c);
    return;
  }
  hc_s3_hit (p, c);
  if (is_protected (p, a))
    m->blk[c].meta |= HC_M_HINTED;
}

static uint32_t
ha_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{
  return hc_s3_victim (p, &rules, ok, arg);
}

const struct hc_policy_ops hc_policy_hintaware = {
  .name = "hintaware",
  .title = "S3-FIFO steered by class priority and advice (default)",
  .reads_seq = true,
  .init = ha_init,
  .fini = ha_fini,
  .admit = ha_admit,
  .insert = ha_insert,
  .hit = ha_hit,
  .victim = ha_victim,
  .remove = hc_s3_remove,
  .demote = hc_s3_demote,
  .bytes = ha_bytes,
};
