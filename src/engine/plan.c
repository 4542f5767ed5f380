/* The write decision.
 *
 * Four modes, a hit or a miss, a dirty or a clean copy, a whole block or
 * part of one, a fast tier that works or has just failed: the write path
 * (write.c) would interleave all of these with its I/O if it decided as it
 * went.  As Open CAS resolves an engine per (mode, request) from one
 * table, the decision is made here, apart from the I/O, as a pure function
 * of the facts the write path gathers under the volume lock; the write path
 * carries out the plan.  tests/test_plan.c checks every combination of
 * facts against the rules below.
 *
 * The decision has two steps because between them the write path may have
 * to ask the policy (a miss is admitted or not) and take a free block
 * (which can evict and commit): hc_write_route says where the data should
 * go, the write path tries, and hc_write_plan says the rest for the route
 * that held.
 *
 * The rules (the consistency contract is at the top of write.c):
 *   - Pass-through sends every write to the slow tier; a cached copy is
 *     dropped.  Write-around sends misses there; its hits are copied like
 *     write-through's, so that the cache never serves around them.
 *   - A whole-block write over a copy that may be rewritten in place is,
 *     if the copy's records say dirty: in write-back if it is dirty, in
 *     write-through and write-around (whose hits are written through) if
 *     it is dirty or clean but recorded dirty.  Every other write that
 *     keeps the data on the fast tier goes to a new block (copy-on-write)
 *     and the mapping moves.
 *   - A miss is cached only whole, only in write-back and write-through,
 *     only if the policy admits it and a block is free.
 *   - A write that goes around the fast tier (it failed) never touches it.
 *   - A new copy is dirty until the slow tier has the data: write-back
 *     leaves that to the cleaner; write-through (and a write-around hit)
 *     writes the slow tier at once and marks the copy clean.
 *   - The slow tier never changes under a clean mapping that may still be
 *     the durable one: a commit comes first when the old copy is replaced
 *     or dropped and its records say clean, or any unmapping of the block
 *     is not durable yet.
 *   - A dirty copy holds the only current data: it is dropped only after
 *     the slow tier has the whole block (its other bytes too).
 */
#include "plan.h"

enum hc_write_route
hc_write_route (const struct hc_write_facts *f, enum hc_bypass *why)
{
  if (f->mode == HC_MODE_PASSTHROUGH) {
    *why = HC_BYPASS_COUNT;
    return HC_WRITE_SLOW;
  }
  if (f->hit) {
    if (f->full && !f->around && f->in_place_ok
        && (f->mode == HC_MODE_WRITEBACK ? f->dirty : f->recorded_dirty))
      return HC_WRITE_IN_PLACE;
    if (f->around) {
      *why = HC_BYPASS_ERROR;
      return HC_WRITE_SLOW;
    }
    return HC_WRITE_COPY;
  }
  if (f->mode == HC_MODE_WRITEAROUND) {
    *why = HC_BYPASS_MODE;
    return HC_WRITE_SLOW;
  }
  if (!f->full) {
    *why = HC_BYPASS_PARTIAL;
    return HC_WRITE_SLOW;
  }
  if (f->around) {
    *why = HC_BYPASS_ERROR;
    return HC_WRITE_SLOW;
  }
  return HC_WRITE_COPY;
}

struct hc_write_plan
hc_write_plan (const struct hc_write_facts *f, enum hc_write_route route)
{
  struct hc_write_plan p = { .route = route, .old = HC_OLD_NONE };

  switch (route) {
  case HC_WRITE_IN_PLACE:
    p.to_slow = f->mode != HC_MODE_WRITEBACK;
    break;
  case HC_WRITE_COPY:
    p.to_slow = f->hit ? f->mode != HC_MODE_WRITEBACK : f->mode == HC_MODE_WRITETHROUGH;
    break;
  case HC_WRITE_SLOW:
    p.to_slow = true;
    break;
  }
  if (f->hit) {
    p.merge_old = !f->full;
    p.old = route == HC_WRITE_IN_PLACE ? HC_OLD_NONE
            : route == HC_WRITE_COPY   ? HC_OLD_REPLACED
            : f->dirty                 ? HC_OLD_DROP_AFTER
                                       : HC_OLD_DROP_FIRST;
  }
  p.whole_to_slow = p.to_slow && f->hit && f->dirty;
  p.commit_first = p.to_slow && ((f->hit && !f->recorded_dirty) || f->unmap_pending);
  return p;
}
