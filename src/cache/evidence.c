/* Evidence: which hint effects pay on the running workload, measured.
 *
 * A hint is a guess by someone who knows more than the device, and a guess
 * can be wrong: a backup at idle priority whose data a compiler reads a
 * moment later, an index larger than the cache marked "keep", a scan
 * labelled metadata.  A static rule ("background data is not admitted")
 * is right on the machine it was chosen on and wrong on the next.  So the
 * directory of a policy that weighs evidence applies each family of effects
 * (enum hc_effect) only while it measurably saves misses here and now.
 *
 * How: miniature simulations (Waldspurger et al., "Cache Modeling and
 * Optimization using Miniature Simulations", USENIX ATC 2017).  A spatially
 * hashed sample of the blocks — rate R = 1/512, or more for caches under
 * 512 K blocks, so that no miniature holds fewer than 1,024 blocks; sampled
 * by aligned regions of 16 blocks, so that a request's blocks within a
 * region reach the miniatures together and a miniature can tell one
 * slow-tier read from many — drives
 * small but complete directories of R times the cache's size, with the same
 * policy and class table as the real one.  Each is a whole cache, so each
 * pays for its own pollution, its own refusals and its own protected blocks
 * as the real one would; a tally of "bypassed blocks read again" could not
 * see what an admitted block pushed out.
 *
 * Two kinds of family, two baselines.  The unhinted families (the cutoff,
 * probation, reinsertion) are the default's own behaviour; the hint
 * families (admission, placement with demotion, thrift) act on classes.
 * The unhinted ones are chosen as
 * they would be with no hints at all: by a miniature that runs the
 * unhinted effects in force on the accesses stripped of their hints (the
 * plain one), and one per unhinted family with that family flipped.  The
 * hint families are weighed against a miniature that runs every effect in
 * force on the accesses as they come (the hinted one), and one per hint
 * family with it flipped.  So a cache given hints makes every unhinted
 * choice exactly when the same cache without them would, and departs from
 * it only through a hint family that has earned it (before this split, a
 * hint family taken and dropped again left the unhinted choices on another
 * course, and hinted runs ended up to 1.7 % above unhinted ones in read
 * misses for no hint's sake).
 *
 * Each family keeps scores: what the miniature of its baseline paid beyond
 * the one with that family flipped, over the sampled accesses, saturating
 * at ±EV_LIMIT so that a long-settled verdict can still be overturned when
 * the workload changes.  An unhinted family's cost: a miss costs 1, and a
 * read miss that starts a slow-tier read of its own 1 more (both the hit
 * ratio and the latency a reader waits for count, and a disk charges a seek
 * per request, not per block): one neither in a sequential stream nor
 * continuing a missed block of the same request.  It flips when that score
 * leads by EV_MARGIN.  A hint family is held to "never worse than no
 * hints", a promise about readers, in the time they wait: its cost counts
 * read misses only, each the transfer of its block (1), and one that needs
 * a seek also the wait before the data moves, in block transfers (the
 * request cost, which the owner sets from the timing model: about 568 for
 * 4 KiB blocks on a 7,200 rpm disk); read misses and seeks are also scored
 * alone.  A seek is counted where the timing model charges one: a read
 * miss where the miniature's disk head is not (the block after its last
 * read miss), unless a sequential stream enters the sampled region there
 * (what the stream missed outside the sample, the miniature cannot know).
 * So a block hit inside a run of misses costs the seek that resumes the
 * run.  (With the unhinted families' count, which takes every miss of a
 * sequential stream to be free, thrift was taken on sqlite-docs at 10 %
 * for 2.6 % fewer read misses, while it split re-read streams into runs:
 * 5 % more seeks, +4.6 % mean read latency.  The unhinted families keep
 * their count, the one their choices were measured with: on git-import at
 * 10 % the seek count chose worse, +3 % read misses.)  Its limit and
 * margin scale with the request cost, so that it must save 64 seeks' worth
 * of time.  It is turned on only when its cost leads by that margin and it
 * added neither read misses nor seeks meanwhile, and turned off as soon as
 * turning it off leads by the margin on any of the three.  (Counting write
 * misses too, a hint family was taken for the writes it saved while its
 * reads stayed even, and cost 2 % more read misses afterwards on a held-out
 * trace, git-import at 10 %.  Pricing a slow read at one block more, a
 * family was taken for the blocks it saved at a few more slow reads than
 * the margin could see: on the scorecard, mean read latency above no
 * hints' in 6 hinted cells of 81, up to +0.76 %, against 2, up to
 * +0.19 %, priced as the disk prices it.)  On a flip the two miniatures swap roles (the
 * leader's state is the state the new effects would have built), every
 * alternative compared with the changed baseline is made a copy of it and
 * flips its own family relative to the new effects, and their scores
 * restart.  The copies matter: an alternative that kept a past built under
 * other effects would score that past, not its flip (without them, on a
 * trace with no hints at all, families that change nothing were taken on
 * such noise).
 *
 * Start: the hint effects off (a wrong hint costs misses that later
 * evidence cannot give back) and S3-FIFO's probation and reinsertion on
 * (the default's unhinted behaviour).  So a hinted cache begins as the
 * unhinted one and departs from it only on evidence; with no hints at all
 * the hint families behave alike in every miniature and stay off, and the
 * unhinted families are chosen by the same means: probation, or blocks
 * straight into the main FIFO (recency-leaning, better where reuse
 * distances exceed the probation queue, as in OLTP); and reinsertion (a
 * block hit in the main FIFO goes round again: CLOCK, a little frequency),
 * or none (FIFO: better where a block's hits come in a burst and say
 * nothing of its next use, as a database's pages read, then written).  The
 * four combinations are S3-FIFO, S3-FIFO with a FIFO main queue, CLOCK and
 * FIFO.
 *
 * Cost: eight miniature directories (six families, two baselines) — 0.37
 * bytes of RAM per cached block at 1 M blocks (22.77 in all with the map
 * and S3-FIFO, and with the volume's pin count 23.77, within the 24-byte
 * budget), a fixed ~200 KiB under 512 K blocks — and, for the sampled
 * accesses, an access to each.  Demotion is weighed with placement rather
 * than alone to stay within that budget: on the scorecard's traces no
 * evidence ever took demotion alone.
 *
 * Constants.  The floor is the paper's.  The rate was 1/256 until a fifth
 * family needed room in the budget: every cache the scorecard replays is
 * under 256 K blocks, where the floor sets the miniatures' size at either
 * rate, so halving it changed none of its figures.  The margin (1/16 of
 * the floor) and the limit (the floor) were set before any trace was
 * measured and are the same for every workload.  The region (16 blocks,
 * 64 KiB of 4 KiB blocks) was set before it was measured: it holds most
 * random requests whole, and the smallest miniature still holds 64 of
 * them.  Starting with every effect off was checked against starting with
 * the built-in ones on
 * (before alternatives restarted as copies): on the development traces
 * (the two shared ones and the demo's) starting on looked better (1 or 2
 * hinted cells of 27 with read misses over 0.5 % above no hints, against
 * 5), on the six held-out traces of the recorded corpus it was worse (7 or
 * 8 of 54, against 3): a start that encodes the traces at hand
 * does not travel, so the start stays what the argument above says.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>

#include "dir.h"

#define EV_RATE_SHIFT 9     /* sample about 1 block in 512 … */
#define EV_REGION_SHIFT 4   /* … by aligned regions of 16 blocks … */
#define EV_MIN_BLOCKS 1024  /* … but let no miniature be smaller */
#define EV_LIMIT 1024       /* scores saturate at ±this (cost units) */
#define EV_MARGIN 64        /* an alternative leads by this much to be taken */
#define EV_REQUEST_MAX 65536 /* the most a slow-tier read may cost (blocks) */

/* The families, each a set of enum hc_effect bits weighed together.
 * Demotion (a written-back journal block, a reclass to a low priority:
 * evicted next) is placement's other face, and is weighed with it. */
static const unsigned family[] = {
  HC_FX_SEQ_CUTOFF, HC_FX_FILTER, HC_FX_REINSERT, HC_FX_ADMIT, HC_FX_PLACE | HC_FX_DEMOTE,
  HC_FX_THRIFT,
};
#define EV_FAMILIES (sizeof family / sizeof family[0])

/* Miniatures: one per family, plus the two that run the effects in force,
 * with the hints (EV_HINTED) and without (EV_PLAIN). */
enum { EV_HINTED = EV_FAMILIES, EV_PLAIN, EV_MINIS };

struct hc_evidence {
  struct hc_directory mini[EV_MINIS];
  /* role[k] for a family k: the miniature running the effects in force
   * with k flipped (for an unhinted family, without the hints and without
   * the hint families); role[EV_HINTED], role[EV_PLAIN]: see above. */
  unsigned role[EV_MINIS];
  /* What flipping family k saved so far (> 0: it paid), in cost (a miss
   * 1, and one that starts a slow-tier read 1 more; for a hint family a
   * read miss 1, and one that needs a seek the request cost more), in read
   * misses and in slow-tier reads (a hint family's: seeks). */
  int32_t score[EV_FAMILIES], reads[EV_FAMILIES], slow[EV_FAMILIES];
  uint64_t sample_below; /* a region is sampled if its hash is below this */
  uint64_t next_origin;  /* the block that would continue the last sampled access */
  uint8_t last[EV_MINIS]; /* what that access cost each miniature (by index, not role) */
  /* Where each miniature's disk head is (by index, not role): the block
   * after its last read miss, as in the timing model. */
  uint64_t head[EV_MINIS];
  unsigned effects;
  uint64_t changes;
  /* A hint family's cost of a read miss that needs a seek, beyond
   * its block's 1 (hc_evidence_set_request_cost). */
  int32_t request;
};

static bool
any_block (void *arg, uint32_t c)
{
  (void) arg, (void) c;
  return true;
}

static bool
is_hint_family (unsigned k)
{
  return family[k] & HC_FX_HINTS;
}

/* The miniature family k is compared with. */
static unsigned
base_of (unsigned k)
{
  return is_hint_family (k) ? EV_HINTED : EV_PLAIN;
}

/* Tells every miniature which effects it runs. */
static void
assign (struct hc_evidence *e)
{
  unsigned plain = e->effects & ~HC_FX_HINTS;

  e->mini[e->role[EV_HINTED]].policy.effects = e->effects;
  e->mini[e->role[EV_PLAIN]].policy.effects = plain;
  for (unsigned k = 0; k < EV_FAMILIES; k++)
    e->mini[e->role[k]].policy.effects = (is_hint_family (k) ? e->effects : plain) ^ family[k];
}

/* After the effects changed: every alternative of the families `which`
 * (HC_FX_HINTS or all) starts again from the state of the miniature it is
 * compared with, so that what it scores from now on is what its flip does,
 * not what a different past left in it. */
static void
restart (struct hc_evidence *e, unsigned which)
{
  for (unsigned k = 0; k < EV_FAMILIES; k++)
    if (family[k] & which) {
      e->score[k] = e->reads[k] = e->slow[k] = 0;
      hc_dir_copy (&e->mini[e->role[k]], &e->mini[e->role[base_of (k)]]);
      e->last[e->role[k]] = e->last[e->role[base_of (k)]];
      e->head[e->role[k]] = e->head[e->role[base_of (k)]];
    }
  assign (e);
}

int
hc_evidence_new (uint32_t n, unsigned policy_id, const hc_classes *classes, unsigned effects,
                 struct hc_evidence **out)
{
  struct hc_evidence *e = calloc (1, sizeof *e);
  uint32_t size = n >> EV_RATE_SHIFT;
  int rc = 0;

  if (!e)
    return -ENOMEM;
  if (size < EV_MIN_BLOCKS)
    size = n < EV_MIN_BLOCKS ? n : EV_MIN_BLOCKS;
  e->sample_below = size >= n ? UINT64_MAX : (uint64_t) ((double) size / n * 0x1p64);
  e->effects = effects;
  e->request = 1;
  for (unsigned i = 0; i < EV_MINIS; i++) {
    e->role[i] = i;
    if (rc == 0)
      rc = hc_dir_init_fixed (&e->mini[i], size, policy_id, classes, HC_FX_ALL);
  }
  if (rc < 0) {
    hc_evidence_free (e);
    return rc;
  }
  assign (e);
  *out = e;
  return 0;
}

void
hc_evidence_free (struct hc_evidence *e)
{
  if (!e)
    return;
  for (unsigned i = 0; i < EV_MINIS; i++)
    if (e->mini[i].policy.ops)
      hc_dir_fini (&e->mini[i]);
  free (e);
}

size_t
hc_evidence_bytes (const struct hc_evidence *e)
{
  size_t b = sizeof *e;

  for (unsigned i = 0; i < EV_MINIS; i++)
    b += hc_dir_bytes (&e->mini[i]);
  return b;
}

/* What one access cost a miniature: nothing on a hit, else a miss, which
 * may also be a read miss; a read miss may start a slow-tier read of its
 * own as the unhinted families count it (EV_SLOW: neither in a sequential
 * stream nor continuing a read miss of the same request — a run of missed
 * blocks is one request) and need a seek as the hint families count it
 * (EV_SEEK: not where the miniature's disk head is, unless a sequential
 * stream enters the sampled region there). */
enum { EV_MISS = 1, EV_READ = 2, EV_SLOW = 4, EV_SEEK = 8 };

/* One access through miniature i, as the replayer runs one through a real
 * directory; returns its cost, a set of EV_ bits.  cont: the access
 * continues the request's previous access, which the miniature saw;
 * entering: it does not continue the last access the miniature saw. */
static unsigned
mini_access (struct hc_evidence *e, unsigned i, const struct hc_access *a, bool cont, bool entering)
{
  struct hc_directory *m = &e->mini[i];
  enum hc_bypass why;
  uint32_t c = hc_dir_access (m, a);
  unsigned cost;

  if (c != HC_NIL) {
    if (a->write)
      hc_dir_set_dirty (m, c, a->hint.cls);
    cost = 0;
  } else {
    if (hc_dir_admit (m, a, &why) && hc_dir_make_room (m, a, any_block, NULL, &why, NULL))
      hc_dir_install (m, hc_dir_take_free (m), a, a->write);
    cost = a->write ? EV_MISS
           : a->seq || (cont && (e->last[i] & EV_READ)) ? EV_MISS | EV_READ
                                                        : EV_MISS | EV_READ | EV_SLOW;
    if (!a->write) {
      if (a->origin != e->head[i] && !(a->seq && entering))
        cost |= EV_SEEK;
      e->head[i] = a->origin + 1;
    }
  }
  e->last[i] = (uint8_t) cost;
  return cost;
}

/* Adds to a score what the alternative saved on one metric (bit), at
 * `weight` per access, saturating at ±limit. */
static void
tally (int32_t *score, unsigned base, unsigned alt, unsigned bit, int32_t weight, int32_t limit)
{
  int32_t s = *score + weight * ((int32_t) !!(base & bit) - (int32_t) !!(alt & bit));

  *score = s > limit ? limit : s < -limit ? -limit : s;
}

/* May family k be flipped on the scores so far?  Its cost must lead by
 * the margin; a hint family's must also add neither read misses nor
 * seeks to be turned on, and leading by the margin on either of them
 * turns it off (it cost readers while on), whatever the cost says. */
static bool
may_flip (const struct hc_evidence *e, unsigned k)
{
  const int32_t margin = EV_MARGIN * e->request;

  if (!is_hint_family (k))
    return e->score[k] >= EV_MARGIN;
  if (!(e->effects & family[k]))
    return e->score[k] >= margin && e->reads[k] >= 0 && e->slow[k] >= 0;
  return e->score[k] >= margin || e->reads[k] >= EV_MARGIN || e->slow[k] >= EV_MARGIN;
}

unsigned
hc_evidence_observe (struct hc_evidence *e, const struct hc_access *a)
{
  if (hc_map_hash ((a->origin >> EV_REGION_SHIFT) ^ UINT64_C (0x5bd1e995)) >= e->sample_below)
    return e->effects;

  /* The unhinted families are chosen as they would be with no hints at
   * all: from the access without its hint, by miniatures that run no hint
   * family.  So hints can change the unhinted behaviour of the cache only
   * through the hint families they have earned. */
  struct hc_access plain_access = { .origin = a->origin, .write = a->write, .seq = a->seq };
  unsigned cost[EV_MINIS - EV_FAMILIES];
  unsigned best = EV_FAMILIES;
  int32_t best_score = INT32_MIN;
  /* A request's blocks within a sampled region reach every miniature one
   * after another. */
  bool cont = a->cont && a->origin == e->next_origin, entering = a->origin != e->next_origin;

  e->next_origin = a->origin + 1;
  cost[EV_HINTED - EV_FAMILIES] = mini_access (e, e->role[EV_HINTED], a, cont, entering);
  cost[EV_PLAIN - EV_FAMILIES] = mini_access (e, e->role[EV_PLAIN], &plain_access, cont, entering);
  for (unsigned k = 0; k < EV_FAMILIES; k++) {
    unsigned base = cost[base_of (k) - EV_FAMILIES];
    unsigned alt
        = mini_access (e, e->role[k], is_hint_family (k) ? a : &plain_access, cont, entering);

    if (is_hint_family (k)) {
      tally (&e->score[k], base, alt, EV_READ, 1, EV_LIMIT * e->request);
      tally (&e->score[k], base, alt, EV_SEEK, e->request, EV_LIMIT * e->request);
      tally (&e->slow[k], base, alt, EV_SEEK, 1, EV_LIMIT);
    } else {
      tally (&e->score[k], base, alt, EV_MISS, 1, EV_LIMIT);
      tally (&e->score[k], base, alt, EV_SLOW, 1, EV_LIMIT);
      tally (&e->slow[k], base, alt, EV_SLOW, 1, EV_LIMIT);
    }
    tally (&e->reads[k], base, alt, EV_READ, 1, EV_LIMIT);
    if (may_flip (e, k) && e->score[k] > best_score) {
      best = k;
      best_score = e->score[k];
    }
  }
  if (best < EV_FAMILIES) {
    unsigned b = base_of (best), t = e->role[b];
    e->role[b] = e->role[best];
    e->role[best] = t;
    e->effects ^= family[best];
    e->changes++;
    /* A change of an unhinted family changes what every miniature runs;
     * a hint family's changes only the hinted ones. */
    restart (e, is_hint_family (best) ? HC_FX_HINTS : HC_FX_ALL);
  }
  return e->effects;
}

void
hc_evidence_force (struct hc_evidence *e, unsigned bits, bool on)
{
  e->effects = on ? e->effects | bits : e->effects & ~bits;
  assign (e);
}

void
hc_evidence_set_request_cost (struct hc_evidence *e, uint32_t blocks)
{
  e->request = blocks < 1 ? 1 : blocks > EV_REQUEST_MAX ? EV_REQUEST_MAX : (int32_t) blocks;
}

uint64_t
hc_evidence_changes (const struct hc_evidence *e)
{
  return e->changes;
}
