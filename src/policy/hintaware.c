/* hintaware: the default policy — S3-FIFO that weighs hints.
 *
 * With no hints every block is "unclassified" and this is S3-FIFO
 * (s3fifo.c), plus a per-stream sequential cutoff.  Hints can change four
 * things, each read from the class attribute table rather than from class
 * names, so an administrator's table steers it:
 *
 *   where a block starts   a class of priority ≥ 12 (metadata, transaction
 *                          by default) or willneed advice starts in the main
 *                          FIFO with one hit of credit: it is protected, and
 *                          counts as "hinted" for the hint-efficacy figure.
 *                          Others start in the small FIFO as usual.
 *                          Willneed advice (an insert or a hit) gives the
 *                          most credit a block can hold, three passes of the
 *                          main FIFO: advice is a request, and it must hold
 *                          when the evidence turns probation off and a flood
 *                          of new blocks goes straight into the main FIFO,
 *                          where one credit would last a single pass.
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
 *                          that a stream is not); with second-touch
 *                          promotion, which only an administrator turns on
 *                          (HC_FX_TOUCH, as Open CAS's nhit promotion with
 *                          N = 2, or LARC: Huang et al., "Improving Flash-
 *                          Based Disk Cache with Lazy Adaptive Replacement",
 *                          ACM TOS 2016), a read miss of a block the ghost
 *                          does not know is not admitted but remembered, so
 *                          that flash is written for blocks read twice
 *                          within the ghost's reach (about the main FIFO's
 *                          size), not for every block read once; the cache
 *                          directory
 *                          already refused what the class's admission
 *                          rules, the advice and the class's maximum share
 *                          forbid.
 *   what earns flash       thrift (HC_FX_THRIFT): a hint naming a class that
 *                          asks for no speed (below the protected priority,
 *                          not latency-sensitive: data, streaming,
 *                          background by default) and no willneed advice
 *                          makes the block earn its flash by reuse: a write
 *                          miss goes around the cache (to the slow tier
 *                          alone), a read miss is admitted on its second
 *                          touch, as above.  Metadata, transactions, paging
 *                          and journal writes are admitted as they come,
 *                          and so is every unhinted access: no hint says
 *                          nothing about the data.
 *
 * None of these is a verdict.  Each belongs to a family of effects
 * (enum hc_effect: the cutoff, placement and ageing by priority, demotion,
 * thrift, and — unhinted — whether new blocks start on probation at all,
 * and whether a block hit in the main FIFO goes round again), and the
 * directory applies a family only while its miniature simulations show
 * that it saves misses on the running workload (src/cache/evidence.c); this
 * file only reads which are in force.  Advice is a request, not a guess:
 * willneed always protects and dontneed always demotes.  A priority an
 * administrator chose applies regardless (hc_policy_placing_priority).
 *
 * Journal blocks are not kept once written back: the directory demotes a
 * cleaned block whose class does not admit reads (a demotion effect).
 */
#include "s3fifo.h"

#define PROTECT_PRIORITY 12
#define LOW_PRIORITY 4
#define ADVICE_CREDIT 3 /* the most a block's two frequency bits hold */

static unsigned
block_priority (const struct hc_policy *p, uint64_t w)
{
  return hc_policy_placing_priority (p, hc_meta_class (w));
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
  return hc_s3_init (p, 0.10, 0);
}

static bool is_protected (const struct hc_policy *p, const struct hc_access *a);
static bool is_thrifty (const struct hc_policy *p, const struct hc_access *a);

static bool
ha_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  struct hc_s3 *s = p->state;

  if (a->seq && (p->effects & HC_FX_SEQ_CUTOFF) && !is_protected (p, a)) {
    *why = HC_BYPASS_SEQUENTIAL;
    return false;
  }
  bool thrifty = is_thrifty (p, a);

  if (thrifty && a->write) {
    *why = HC_BYPASS_POLICY;
    return false;
  }
  /* Second touch: a read of a block the ghost does not know is served
   * from the slow tier and remembered; read again while the ghost still
   * knows it, it is admitted (and, being in the ghost, enters main). */
  if ((thrifty || ((p->effects & HC_FX_TOUCH) && !is_protected (p, a))) && !a->write
      && !hc_ghost_contains (&s->ghost, a->origin)) {
    hc_ghost_insert (&s->ghost, a->origin);
    *why = HC_BYPASS_POLICY;
    return false;
  }
  return true;
}

/* Is this access one that thrift (HC_FX_THRIFT) keeps off the flash until
 * it is reused?  Its hint names a class — no hint says nothing, so an
 * unhinted access never is — that asks for no speed: below the protected
 * priority, not latency-sensitive, and no willneed advice. */
static bool
is_thrifty (const struct hc_policy *p, const struct hc_access *a)
{
  struct hc_class_attrs at;

  if (!(p->effects & HC_FX_THRIFT) || a->hint.cls == HC_CLASS_UNCLASSIFIED
      || a->hint.advice == HC_ADVICE_WILLNEED)
    return false;
  hc_policy_attrs (p, a->hint.cls, &at);
  return at.priority < PROTECT_PRIORITY && !at.latency_sensitive;
}

/* Is this access protected by its hint? */
static bool
is_protected (const struct hc_policy *p, const struct hc_access *a)
{
  return a->hint.advice == HC_ADVICE_WILLNEED
         || (a->hint.cls != HC_CLASS_UNCLASSIFIED
             && hc_policy_placing_priority (p, a->hint.cls) >= PROTECT_PRIORITY);
}

static void
ha_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_s3 *s = p->state;
  struct hc_map *m = p->map;

  if (is_protected (p, a)) {
    hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT,
                      a->hint.advice == HC_ADVICE_WILLNEED ? ADVICE_CREDIT : 1);
    m->blk[c].meta |= HC_M_HINTED;
    hc_policy_enqueue (m, c, HC_S3_MAIN, false);
  } else if (!(p->effects & HC_FX_FILTER)
             || (hc_ghost_contains (&s->ghost, a->origin)
                 && hc_policy_placing_priority (p, a->hint.cls) >= LOW_PRIORITY)) {
    hc_policy_enqueue (m, c, HC_S3_MAIN, false);
  } else {
    hc_policy_enqueue (m, c, HC_S3_SMALL, false);
  }
}

static void
ha_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{
  struct hc_map *m = p->map;

  if (a->hint.advice == HC_ADVICE_DONTNEED) {
    hc_s3_demote (p, c);
    return;
  }
  hc_s3_hit (p, c);
  if (a->hint.advice == HC_ADVICE_WILLNEED)
    hc_map_set_field (m, c, HC_M_FREQ_MASK, HC_M_FREQ_SHIFT, ADVICE_CREDIT);
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
  .title = "S3-FIFO that weighs class priority and advice by evidence (default)",
  .reads_seq = true,
  .weighs_evidence = true,
  .second_touch = true,
  .init = ha_init,
  .fini = hc_s3_fini,
  .admit = ha_admit,
  .insert = ha_insert,
  .hit = ha_hit,
  .victim = ha_victim,
  .remove = hc_s3_remove,
  .demote = hc_s3_demote,
  .bytes = hc_s3_bytes,
  .copy = hc_s3_copy,
};
