/* The write decision: what a write does with one block, as a pure function
 * of what is known about the block (see plan.c). */
#ifndef HC_ENGINE_PLAN_H
#define HC_ENGINE_PLAN_H

#include <stdbool.h>

#include "hintcache/stats.h"
#include "hintcache/volume.h"

/* What the write path knows about one block of a write, under the volume
 * lock.  hit, dirty and in_place_ok come from the directory; around from
 * the request (a fast-tier write of it failed, or the fast tier is
 * degraded); unmap_pending from the set of unmappings not yet durable. */
struct hc_write_facts {
  enum hc_mode mode;
  bool hit;           /* the block is cached */
  bool dirty;         /* its copy is dirty (with hit) */
  bool recorded_dirty; /* ... or its records say so (dirty, or clean but unrecorded) */
  bool full;          /* the write covers the whole block */
  bool around;        /* the write goes around the fast tier */
  bool in_place_ok;   /* the copy may be rewritten where it is: no checksums, the write's class,
                       * its last write not FUA, no reader has it pinned */
  bool unmap_pending; /* an unmapping of the block is not durable yet */
};

/* Where the data goes. */
enum hc_write_route {
  HC_WRITE_IN_PLACE, /* over the copy, where it is (a copy recorded dirty) */
  HC_WRITE_COPY,     /* to a new cache block, if the policy admits a miss and a block is free */
  HC_WRITE_SLOW,     /* to the slow tier alone */
};

/* What becomes of the block's old copy. */
enum hc_write_old {
  HC_OLD_NONE,       /* none (a miss), or rewritten in place */
  HC_OLD_REPLACED,   /* the mapping moves to the new copy */
  HC_OLD_DROP_FIRST, /* clean: dropped, durably, before the slow tier changes */
  HC_OLD_DROP_AFTER, /* dirty: dropped once the slow tier has the whole block */
};

/* The plan for one block, carried out in this order: build the block image
 * (merging the old copy's other bytes if merge_old), write it (route),
 * record the new mapping (dirty), commit if commit_first, write the slow
 * tier if to_slow (the whole image if whole_to_slow), then drop the old
 * copy (DROP_AFTER) or mark the new one clean. */
struct hc_write_plan {
  enum hc_write_route route;
  enum hc_write_old old;
  bool merge_old;     /* a partial write of a cached block: its other bytes come from the copy */
  bool to_slow;       /* the slow tier takes the write */
  bool whole_to_slow; /* ... the whole block image: the old copy's bytes were never written back */
  bool commit_first;  /* a commit before the slow tier changes */
};

/* Where a write should go, before any block is taken.  HC_WRITE_SLOW comes
 * with *why, the bypass reason to count, or HC_BYPASS_COUNT when the write
 * was counted already (pass-through counts every write at its start). */
enum hc_write_route hc_write_route (const struct hc_write_facts *f, enum hc_bypass *why);

/* The whole plan, once the route is final: HC_WRITE_COPY falls back to
 * HC_WRITE_SLOW when the policy declines a miss or no block is free.
 * f->unmap_pending is read for routes that reach the slow tier. */
struct hc_write_plan hc_write_plan (const struct hc_write_facts *f, enum hc_write_route route);

#endif
