/* The cache directory: the decisions of a hybrid cache, without the I/O.
 *
 * The directory owns the map (which block holds what), the replacement
 * policy, the per-class accounting (occupancy, dirty blocks, maximum
 * shares) and the statistics.  It answers "is this block cached?", "should
 * this miss be admitted?", "which block makes room?" — and the volume
 * (src/engine) does the I/O those answers call for, while the trace replayer
 * (src/replay) only counts them.  One directory, two users: the replayer
 * measures exactly the code the volume runs.
 *
 * Admission rules, in order (hc_dir_admit):
 *   1. advice dontneed or evict: not admitted (willneed always is): advice
 *      is a request, obeyed whatever the evidence says;
 *   2. the class's attribute admit_read / admit_write;
 *   3. a class whose maximum share is 0 %;
 *   4. the policy's own admission (the hint-aware policy's sequential
 *      cutoff).
 * Room (hc_dir_make_room): a class at its maximum share evicts one of its
 * own blocks or is not admitted; otherwise an empty free list evicts the
 * policy's victim.  Victims must pass the caller's `ok` test (the volume:
 * clean and not busy).
 *
 * Effects in force (hc_policy.effects, enum hc_effect).  Rules 2 and 3
 * and the shares are the admission effects, the demotions of
 * hc_dir_set_clean and hc_dir_reclass the demotion effects, its protection
 * a placement effect.  For a policy that weighs evidence (the default) the
 * directory turns each family on and off by miniature simulations
 * (evidence.c), fed every access by hc_dir_access and hc_dir_hit; for the
 * others all are in force.  A class attribute an administrator chose
 * (hc_classes_chosen) applies regardless.
 *
 * With defer_free (the volume), blocks that are evicted or invalidated go to
 * the map's pending list, and only a metadata commit that made their release
 * durable makes them reusable (the volume's commit moves them itself;
 * hc_dir_release_pending does it for callers that commit otherwise).
 *
 * Not thread-safe: callers serialise (the volume holds its lock).
 */
#ifndef HC_CACHE_DIR_H
#define HC_CACHE_DIR_H

#include <assert.h>
#include <stdbool.h>

#include "hintcache/classes.h"
#include "hintcache/stats.h"
#include "map.h"
#include "../policy/policy.h"

struct hc_evidence;

struct hc_directory {
  struct hc_map map;
  struct hc_policy policy;   /* policy.effects: the effects in force */
  struct hc_evidence *evidence; /* NULL: the effects are fixed */
  const hc_classes *classes; /* attributes; NULL = built-in defaults */
  bool defer_free;
  bool budget_spent;         /* a flash budget is spent: write misses are not admitted */
  bool budget_touch;         /* second touch is on because the budget is spent */
  uint32_t occupancy[HC_CLASS_COUNT];
  uint32_t ndirty[HC_CLASS_COUNT];
  struct hc_stats stats;     /* counters; gauges filled by hc_dir_stats */
};

/* Creates a directory of n blocks with policy `policy_id`.  Returns 0,
 * -EINVAL or -ENOMEM. */
int hc_dir_init (struct hc_directory *d, uint32_t n, unsigned policy_id, const hc_classes *classes,
                 bool defer_free);

/* Creates a directory whose effects are fixed (no evidence is gathered):
 * `effects` is a set of enum hc_effect bits.  Returns as hc_dir_init. */
int hc_dir_init_fixed (struct hc_directory *d, uint32_t n, unsigned policy_id,
                       const hc_classes *classes, unsigned effects);

/* Makes dst, a directory without evidence of the same size and policy as
 * src, a copy of src's map, policy state and counts (not its effects).
 * Only a policy that weighs evidence can be copied (hc_policy_ops.copy). */
void hc_dir_copy (struct hc_directory *dst, const struct hc_directory *src);

/* Prices the hint families' evidence by the slow tier's timing: a read
 * miss that needs a seek costs `blocks` block transfers beyond
 * its own (hc_timing_request_blocks; 1 until set).  No effect on a
 * directory without evidence. */
void hc_dir_set_request_cost (struct hc_directory *d, uint32_t blocks);

/* Fixes the effects in force from now on and stops gathering evidence
 * (second touch stays as it was). */
void hc_dir_set_effects (struct hc_directory *d, unsigned effects);

/* Turns second-touch promotion (HC_FX_TOUCH) on or off: a read miss is
 * admitted only if the policy's ghost remembers an earlier miss of the
 * block, which trades misses for fewer flash writes.  The miniatures run
 * it too, so the evidence weighs the other effects for the cache as it
 * runs.  Returns 0, or -ENOTSUP for a policy without it (all but
 * hintaware). */
int hc_dir_set_second_touch (struct hc_directory *d, bool on);

/* Feeds a flash write budget (budget.h) the time and the flash bytes
 * written so far, and while it says the budget is spent, turns second
 * touch on and sends write misses around the cache (hc_dir_admit declines
 * them, reason HC_BYPASS_POLICY; willneed advice still admits); off again
 * when it says so (second touch stays on if it was on before the budget
 * was spent: an administrator's choice).  The policy must have second
 * touch (hc_dir_set_second_touch succeeded). */
struct hc_budget;
void hc_dir_follow_budget (struct hc_directory *d, struct hc_budget *b, uint64_t now_ns,
                           uint64_t flash_bytes);

/* The effects in force, and how many times evidence changed them. */
static inline unsigned
hc_dir_effects (const struct hc_directory *d)
{
  return d->policy.effects;
}
uint64_t hc_dir_effect_changes (const struct hc_directory *d);

void hc_dir_fini (struct hc_directory *d);

/* Bytes of RAM for mapping and policy state. */
size_t hc_dir_bytes (const struct hc_directory *d);

/* The block holding origin, or HC_NIL; no statistics, no policy update. */
static inline uint32_t
hc_dir_find (const struct hc_directory *d, uint64_t origin)
{
  return hc_map_lookup (&d->map, origin);
}

/* Whether cache block c (< n) holds origin: hc_dir_find (d, origin) == c,
 * read from c's entry alone.  A valid entry naming an origin is the only
 * one (hc_map_insert), so the entry says so without the hash probe, whose
 * buckets lie far apart and which a large request's data has long pushed
 * out of the CPU's caches by the time it checks its blocks again. */
static inline bool
hc_dir_holds (const struct hc_directory *d, uint32_t c, uint64_t origin)
{
  const uint64_t w = d->map.blk[c].meta;
  const bool holds = (w & HC_M_VALID) && hc_meta_origin (w) == origin;

  assert (holds == (hc_map_lookup (&d->map, origin) == c));
  return holds;
}

/* The block holding origin, where prev holds origin − 1 (or is HC_NIL):
 * prev + 1 when that holds it (a run of blocks admitted together sits in
 * consecutive cache blocks), else the lookup.  Saves a run's hash
 * probes. */
static inline uint32_t
hc_dir_find_next (const struct hc_directory *d, uint64_t origin, uint32_t prev)
{
  const uint32_t c = prev + 1; /* for HC_NIL, block 0: a guess as good as any */

  return c < d->map.n && hc_dir_holds (d, c, origin) ? c : hc_map_lookup (&d->map, origin);
}

/* An access: returns the block holding a->origin (a hit: counted, and the
 * policy told) or HC_NIL (a miss: counted). */
uint32_t hc_dir_access (struct hc_directory *d, const struct hc_access *a);

/* A miss of a->origin, which hc_dir_find found absent: counted — what
 * hc_dir_access does on a miss, without looking it up again. */
void hc_dir_miss (struct hc_directory *d, const struct hc_access *a);

/* A hit on block c, which holds a->origin (found with hc_dir_find): counted,
 * and the policy told — what hc_dir_access does on a hit. */
void hc_dir_hit (struct hc_directory *d, uint32_t c, const struct hc_access *a);

/* Should a missed block be admitted?  Returns true, or false with *why. */
bool hc_dir_admit (struct hc_directory *d, const struct hc_access *a, enum hc_bypass *why);

/* Counts a bypass of a missed block. */
void hc_dir_bypass (struct hc_directory *d, const struct hc_access *a, enum hc_bypass why);

/* Evicts as needed so that a block for `a` can be taken: a class at its
 * maximum share evicts one of its own blocks; otherwise, with the free list
 * empty, the policy's victim goes.  *evicted (may be NULL) gets the evicted
 * block or HC_NIL.  Returns true, or false with *why (HC_BYPASS_SHARE,
 * HC_BYPASS_FULL). */
bool hc_dir_make_room (struct hc_directory *d, const struct hc_access *a, hc_evictable_fn ok,
                       void *arg, enum hc_bypass *why, uint32_t *evicted);

/* Does class cls hold its maximum share (so an admission must evict one of
 * its own blocks)? */
bool hc_dir_at_share (const struct hc_directory *d, unsigned cls);

/* Maps block c (on the free list) to origin at load time: no statistics,
 * no admission counted. */
void hc_dir_restore (struct hc_directory *d, uint32_t c, uint64_t origin, unsigned cls, bool dirty);

/* Evicts the policy's victim (or, with cls < HC_CLASS_COUNT, the oldest
 * evictable block of class cls); returns it (already unmapped, on the
 * pending or free list) or HC_NIL. */
uint32_t hc_dir_evict (struct hc_directory *d, unsigned cls, hc_evictable_fn ok, void *arg);

/* Takes a block off the free list, or HC_NIL. */
uint32_t hc_dir_take_free (struct hc_directory *d);

/* Maps taken block c to a->origin and hands it to the policy: an admission
 * (counted).  dirty: it holds data newer than the slow tier. */
void hc_dir_install (struct hc_directory *d, uint32_t c, const struct hc_access *a, bool dirty);

/* Unmaps c (discard, a write that bypassed the cache, an error); c goes to
 * the pending or free list. */
void hc_dir_invalidate (struct hc_directory *d, uint32_t c);

/* Copy-on-write: the mapping of `from` moves to taken block `to`, with its
 * policy position; `from` goes to the pending or free list. */
void hc_dir_relocate (struct hc_directory *d, uint32_t from, uint32_t to);

/* Marks c dirty with data of class cls (a write hit or a write-back write). */
void hc_dir_set_dirty (struct hc_directory *d, uint32_t c, unsigned cls);

/* Marks c clean after its data reached the slow tier (counted as a
 * writeback); a class that does not admit reads (journal) is demoted, as
 * it will not be read again. */
void hc_dir_set_clean (struct hc_directory *d, uint32_t c);

/* A class hint has arrived for data already cached in c (a range hint set
 * after the data was admitted): c takes class cls — its counts move — and
 * is protected if the class's priority is high (≥ 12), demoted if the class
 * does not admit reads or its priority is low (< 4), as if it had been
 * admitted with the hint. */
void hc_dir_reclass (struct hc_directory *d, uint32_t c, unsigned cls);

/* Advice on a cached block: dontneed demotes; willneed protects. */
void hc_dir_demote (struct hc_directory *d, uint32_t c);
void hc_dir_protect (struct hc_directory *d, uint32_t c);

/* Moves pending blocks that `busy` does not reject to the free list (busy
 * may be NULL).  Returns how many moved. */
uint32_t hc_dir_release_pending (struct hc_directory *d, bool (*busy) (void *arg, uint32_t c),
                                 void *arg);

/* Copies the statistics with gauges filled in. */
void hc_dir_stats (const struct hc_directory *d, struct hc_stats *out);

/* Reads attributes of class cls (defaults when there is no table). */
void hc_dir_attrs (const struct hc_directory *d, unsigned cls, struct hc_class_attrs *a);

/* ---- evidence.c: the miniature simulations behind the effects ---- */

/* Creates the miniature directories for a cache of n blocks, starting with
 * `effects` in force.  Returns 0 or -ENOMEM. */
int hc_evidence_new (uint32_t n, unsigned policy_id, const hc_classes *classes, unsigned effects,
                     struct hc_evidence **out);

/* Frees them (NULL is allowed). */
void hc_evidence_free (struct hc_evidence *e);

/* Turns effect bits that no family weighs (HC_FX_TOUCH) on or off in the
 * effects in force and in every miniature. */
void hc_evidence_force (struct hc_evidence *e, unsigned bits, bool on);

/* Bytes of RAM they use. */
size_t hc_evidence_bytes (const struct hc_evidence *e);

/* Feeds one access (sampled: most return at once) and returns the effects
 * to keep in force. */
unsigned hc_evidence_observe (struct hc_evidence *e, const struct hc_access *a);

/* How many times the effects changed. */
uint64_t hc_evidence_changes (const struct hc_evidence *e);

/* Sets what a read miss that needs a seek costs the hint families beyond
 * its block, in block transfers (1 … 65,536; 1 until set). */
void hc_evidence_set_request_cost (struct hc_evidence *e, uint32_t blocks);

#endif /* HC_CACHE_DIR_H */
