/* Range hints: a class and an advice stored for byte ranges of the volume,
 * so that later unhinted I/O there resolves to them (the "per-range" layer).
 *
 * Kept as a sorted array of disjoint pieces in 512-byte sectors; pieces that
 * say nothing are dropped and equal neighbours merged, so the array is as
 * small as the hints.  A set is O(pieces) — range hints change rarely (a
 * file's extents, an advise command); lookups are a binary search.
 *
 * Each piece remembers the source that set it (hc_volume_advise_from), so
 * that a source withdraws its own hints and no one else's: the last set
 * over a piece makes its setter the owner.
 *
 * Not thread-safe: the volume holds its lock.
 */
#ifndef HC_ENGINE_RANGES_H
#define HC_ENGINE_RANGES_H

#include <stdint.h>

#include "hintcache/hint.h"

#define HC_RANGE_KEEP 0xffu /* in hc_ranges_set: leave this part as it is */

struct hc_range {
  uint64_t start, end; /* sectors, [start, end) */
  uint8_t cls, advice;
  uint8_t src; /* enum hc_hint_source of whoever set it */
};

struct hc_ranges {
  struct hc_range *r;
  uint32_t n, cap;
  uint32_t max; /* most pieces allowed */
};

/* Starts an empty table allowing `max` pieces. */
void hc_ranges_init (struct hc_ranges *rs, uint32_t max);
void hc_ranges_fini (struct hc_ranges *rs);

/* Over sectors [start, end): sets the class to cls and the advice to advice,
 * either of which may be HC_RANGE_KEEP; 0 clears; the pieces there are
 * src's now.  Returns 0, -EINVAL (empty range, bad values), -ENOSPC (more
 * than max pieces; nothing changes) or -ENOMEM. */
int hc_ranges_set (struct hc_ranges *rs, uint64_t start, uint64_t end, unsigned cls,
                   unsigned advice, unsigned src);

/* Over sectors [start, end): clears the pieces that src set (every piece
 * when src is HC_SOURCE_ADMIN).  Returns as hc_ranges_set. */
int hc_ranges_withdraw (struct hc_ranges *rs, uint64_t start, uint64_t end, unsigned src);

/* The hint stored for one sector (zero if none). */
struct hc_hint hc_ranges_get (const struct hc_ranges *rs, uint64_t sector);

#endif /* HC_ENGINE_RANGES_H */
