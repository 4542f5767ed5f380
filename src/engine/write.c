/* The write path: single blocks, batches of whole blocks, flush, discard
 * and zero.
 *
 * Each block's write gathers the facts under the volume lock, lets the
 * plan decide (plan.c: where the data goes, what becomes of the old copy,
 * whether a commit comes first), and carries the plan out: the data I/O
 * unlocked, then the outcome recorded under the lock.
 *
 * Two rules carry the consistency contract (see format.h for the journal):
 *
 *   Copy-on-write.  Data never overwrites a cache block a mapping points to:
 *   a write to a cached block goes to a free block and the mapping moves, so
 *   a crash leaves the old block intact under the old, durable mapping.
 *   One exception: a whole-block write to a block of the same class whose
 *   records say dirty (in write-back, a dirty block; written through, also
 *   a clean one recorded dirty, below) is written in place.  No mapping
 *   changes, so nothing is recorded.  A crash during it leaves each sector
 *   of the copy old or new, which is all an unflushed write promises (a
 *   flush or FUA commits, which makes the fast tier durable first), and
 *   the slow copy does not matter: recovery finds the copy dirty, and the
 *   cleaner writes it over the slow tier.  Written through, the copy is
 *   dirty in RAM too until the slow tier has the block.  A
 *   block whose last write was FUA is still copied, so that its FUA data
 *   stays whole until the next write to it completes.  Readers of a cached
 *   block do not take its stripe (copy-on-write made that safe), so the
 *   rewrite happens only when no reader holds the block pinned, and marks
 *   it (HC_M_WRITING) so that new readers wait for the stripe.  This
 *   is what keeps a hot, dirty working set at the speed of its fast tier,
 *   and a hot working set written through at the speed of its two tiers:
 *   no new block, no record, no commit to recycle the old one.
 *
 *   Commit before the slow tier changes under a cached copy.  If the slow
 *   tier is written for a block that has a durable clean mapping (a
 *   write-through or write-around hit, a pass-through write, a write-back
 *   write that found no room, a discard), a crash could leave the slow tier
 *   new and the cached copy old and still "clean" — and a later eviction
 *   would make the data change by itself.  So the cached copy is replaced (by
 *   a dirty one) or dropped, and that is committed, before the slow write.
 *   A copy that is recorded dirty needs no such commit: a crash brings it
 *   back dirty, the cleaner writes it over the slow tier, and the data is
 *   that copy's (older, and never flushed since) for good.
 *
 *   Clean, but recorded dirty.  That is why a write-through copy, once the
 *   slow tier has it, is marked clean in RAM but not in the records
 *   (HC_M_UNRECORDED: every record and checkpoint of it says dirty): the
 *   next write through it needs no commit, and a hot working set is
 *   written through at the speed of its tiers, not of the journal.  A
 *   read miss's copy in write-through or write-around is recorded dirty
 *   too (hc_vol_install), for the same reason.  The cost is a crash's:
 *   such copies come back dirty and are written back once more.  The
 *   cleaner settles them (records them clean) now and then (cleaner.c),
 *   and hc_volume_clean and close settle them all (hc_vol_settle); a write
 *   to a settled copy commits first again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "plan.h"

/* Writes the sectors of `data` (a whole block image) covering [boff,
 * boff+blen) to the slow tier. */
static int
write_slow_span (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, const uint8_t *data,
                 unsigned flags)
{
  uint32_t s0 = boff & ~(HC_SECTOR_SIZE - 1);
  uint32_t s1 = (boff + blen + HC_SECTOR_SIZE - 1) & ~(HC_SECTOR_SIZE - 1);
  return hc_tier_write (v->slow, data + s0, s1 - s0, (blk << v->bshift) + s0,
                        (flags & HC_VOL_FUA) ? HC_TIER_FUA : 0);
}

/* Whole-block writes are batched: a request's blocks are decided one by
 * one as always, but the copies-on-write are deferred, so that blocks taken
 * one after the other go out as one write and are recorded in one trip
 * through the volume lock (write_batch).  The slow tier's part is deferred
 * too — a write-through copy's, and a block's that goes to the slow tier
 * alone (declined, written around, passed through): after every new copy
 * is on the fast tier and recorded, one commit (if any block replaced a
 * clean copy, or the slow tier must not change before an unmapping is
 * durable), then each run of consecutive blocks is one slow-tier write,
 * then the write-through copies are marked clean — the order write_block
 * keeps for one block, kept for the run, so a request costs one commit and
 * one slow write per run, not per block.  Up to BATCH_BLOCKS at a time; the
 * caller holds all their stripes. */
#define BATCH_BLOCKS 256 /* 1 MiB of 4 KiB blocks; at most v->nstripes */

struct deferred {
  uint32_t c, newc;     /* the copy being replaced (HC_NIL on a miss), the new block
                         * (c itself: rewritten in place; HC_NIL: the slow tier alone) */
  const uint8_t *src;   /* the block's new data */
  struct hc_access a;
  bool to_slow;         /* write-through: the slow tier takes it after the commit */
  bool commit_first;    /* and that commit is needed */
  bool slow_pending;    /* on the fast tier and mapped: its slow write is due */
};

struct batch {
  struct deferred e[BATCH_BLOCKS];
  unsigned n;
  unsigned flags; /* the request's */
  bool hold;      /* only says that the caller holds the stripe: nothing is deferred */
  uint32_t last;  /* the cache block that held the block before (HC_NIL: none), where
                   * write_block looks for the next one first (hc_dir_find_next) */
  struct hc_slow_job job; /* its slow writes, when the slow writer takes them (writer.c) */
};

/* Notes whether block c's last write was FUA (caller holds lock).  Such a
 * block is rewritten by copy, not in place, so that the FUA data stays
 * whole until a later write to it has completed. */
static void
note_fua (hc_volume *v, uint32_t c, unsigned flags)
{
  if (flags & HC_VOL_FUA)
    v->dir.map.blk[c].meta |= HC_M_FUA;
  else
    v->dir.map.blk[c].meta &= ~HC_M_FUA;
}

/* Releases blk's stripe, unless a batch holds it for the caller. */
static inline void
unlock_stripe (hc_volume *v, uint64_t blk, const struct batch *bt)
{
  if (!bt)
    pthread_rwlock_unlock (stripe (v, blk));
}

static int write_block (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen,
                        const uint8_t *src, unsigned flags, struct req *r, bool *commit_after,
                        struct batch *bt);

/* The fast tier failed this block's write: the block is written again
 * around it — the slow tier takes the data, and a cached copy is dropped
 * in the order the slow-tier rule asks — with the stripe still held (by
 * the caller, or by a batch); then the stripe is released unless a batch
 * holds it.  The rest of the request goes around too. */
static int
write_around (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, const uint8_t *src,
              unsigned flags, struct req *r, bool *commit_after, struct batch *bt)
{
  struct batch held = { .n = 0, .hold = true, .last = HC_NIL };

  r->around = true;
  int rc = write_block (v, blk, boff, blen, src, flags, r, commit_after, bt ? bt : &held);
  unlock_stripe (v, blk, bt);
  return rc;
}

/* Writes one block's part [boff, boff+blen): gathers the facts, lets the
 * plan decide (plan.c) and carries the plan out.  With bt (a whole block
 * in a batch, its stripe held by the caller), a plain copy-on-write or a
 * whole block for the slow tier alone is left in bt for flush_batch. */
static int
write_block (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, const uint8_t *src,
             unsigned flags, struct req *r, bool *commit_after, struct batch *bt)
{
  const bool full = boff == 0 && blen == v->bs;
  const bool sector_aligned = !((boff | blen) & (HC_SECTOR_SIZE - 1));
  struct hc_write_facts f = { .full = full };
  struct hc_write_plan p;
  struct hc_access a;
  enum hc_bypass why = HC_BYPASS_COUNT;
  uint32_t c, newc = HC_NIL;
  const uint8_t *image = NULL; /* the whole new block, when built */
  int rc = 0;

  uint8_t *bounce = full ? NULL : hc_vol_bounce (v, r); /* partial writes merge */

  if (!full && !bounce)
    return -ENOMEM;
  if (!bt)
    stripe_wrlock (v, blk);
  hc_lock (&v->lock);
  if (v->failed || v->opts.read_only) {
    pthread_mutex_unlock (&v->lock);
    unlock_stripe (v, blk, bt);
    return v->opts.read_only ? -EROFS : -EIO;
  }
  hc_vol_req_start (v, r);
  a = (struct hc_access) { .origin = blk, .hint = hc_vol_resolve (v, blk, r->ctx), .write = true,
                           .seq = r->seq, .cont = req_cont (v, r, blk) };
  v->dir.stats.cls[a.hint.cls].bytes[HC_STAT_WRITE] += blen;

  /* Decide. */
  f.mode = v->mode;
  if (f.mode == HC_MODE_PASSTHROUGH) {
    c = hc_dir_find (&v->dir, blk);
    v->dir.stats.cls[a.hint.cls].misses[1]++;
    hc_dir_bypass (&v->dir, &a, HC_BYPASS_MODE);
  } else if (bt) { /* a batch's blocks are a run: the next one is usually next to the last */
    if ((c = hc_dir_find_next (&v->dir, blk, bt->last)) == HC_NIL)
      hc_dir_miss (&v->dir, &a);
    else
      hc_dir_hit (&v->dir, c, &a);
  } else {
    c = hc_dir_access (&v->dir, &a);
  }
  if (bt)
    bt->last = c;
  if (c != HC_NIL) {
    uint64_t w = v->dir.map.blk[c].meta;
    /* Pinned, c can be neither evicted nor reused while we work; our
     * stripe keeps it mapped to blk. */
    pin (v, c);
    f.hit = true;
    f.dirty = (w & HC_M_DIRTY) != 0;
    f.recorded_dirty = (w & (HC_M_DIRTY | HC_M_UNRECORDED)) != 0;
    f.in_place_ok = !v->sum && hc_meta_class (w) == a.hint.cls && !(w & HC_M_FUA)
                    && atomic_load_explicit (&v->pins[c], memory_order_acquire) == 1;
  }
  f.around = around (v, r);
  enum hc_write_route route = hc_write_route (&f, &why);
  if (route == HC_WRITE_COPY
      && ((!f.hit && !hc_dir_admit (&v->dir, &a, &why))
          || (newc = hc_vol_take_block (v, &a, &why, !bt)) == HC_NIL))
    route = HC_WRITE_SLOW;
  if (route == HC_WRITE_SLOW && why != HC_BYPASS_COUNT)
    hc_dir_bypass (&v->dir, &a, why);
  f.unmap_pending = hc_vol_unmap_pending (v, blk);
  p = hc_write_plan (&f, route);

  if (p.route == HC_WRITE_IN_PLACE) {
    /* Rewritten in place (see the top of this file): nothing to record.
     * No reader has it pinned, and new ones wait for our stripe.  Written
     * through, it is dirty (its records say so already) until the slow
     * tier has it: neither evicted nor settled meanwhile. */
    v->dir.map.blk[c].meta = (v->dir.map.blk[c].meta | HC_M_WRITING) & ~HC_M_WB;
    if (p.to_slow)
      hc_dir_set_dirty (&v->dir, c, a.hint.cls);
    if (bt && !bt->hold) {
      bt->e[bt->n++] = (struct deferred) { .c = c, .newc = c, .src = src, .a = a,
                                           .to_slow = p.to_slow, .commit_first = p.commit_first };
      goto out_locked;
    }
    pthread_mutex_unlock (&v->lock);
    rc = hc_tier_write (v->fast, src, v->bs, fast_off (v, c), 0);
    hc_lock (&v->lock);
    v->dir.map.blk[c].meta &= ~HC_M_WRITING;
    unpin (v, c);
    if (rc < 0)
      hc_vol_fast_failed (v, rc);
    else {
      fast_ok (v);
      v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
      v->fast_dirty = true;
      note_fua (v, c, flags);
    }
    pthread_mutex_unlock (&v->lock);
    if (rc < 0) /* the copy is half rewritten: the slow tier takes the block, the copy goes */
      return write_around (v, blk, boff, blen, src, flags, r, commit_after, bt);
    if (!p.to_slow)
      goto out;
    newc = c;
    goto slow;
  }

  if (p.route == HC_WRITE_SLOW && f.hit) {
    /* The block leaves the cache.  Its data is needed first if this write
     * is partial. */
    if (p.merge_old) {
      pthread_mutex_unlock (&v->lock);
      rc = hc_tier_read (v->fast, bounce, v->bs, fast_off (v, c));
      if (rc == 0 && !hc_vol_sum_ok (v, c, blk, bounce, true))
        rc = -EIO;
      hc_lock (&v->lock);
      if (rc < 0 && f.dirty) {
        v->dir.stats.errors_fast++;
        unpin (v, c);
        pthread_mutex_unlock (&v->lock);
        unlock_stripe (v, blk, bt);
        return rc;
      }
      if (rc < 0) /* clean: the slow tier has the same data */
        rc = 0;
      else {
        memcpy (bounce + boff, src, blen);
        image = bounce;
      }
    }
    if (p.old == HC_OLD_DROP_FIRST) {
      hc_dir_invalidate (&v->dir, c);
      hc_meta_record_block (v, c);
      unpin (v, c);
    }
  }

  /* A plain copy-on-write of a whole block: the batch finishes it. */
  if (bt && !bt->hold && p.route == HC_WRITE_COPY && full) {
    bt->e[bt->n++] = (struct deferred) { .c = c, .newc = newc, .src = src, .a = a,
                                         .to_slow = p.to_slow, .commit_first = p.commit_first };
    goto out_locked;
  }
  /* A whole block for the slow tier alone (declined, written around, passed
   * through): the batch writes it with its neighbours. */
  if (bt && !bt->hold && p.route == HC_WRITE_SLOW && !f.hit && full) {
    bt->e[bt->n++] = (struct deferred) { .c = HC_NIL, .newc = HC_NIL, .src = src, .a = a,
                                         .to_slow = true, .commit_first = p.commit_first,
                                         .slow_pending = true };
    goto out_locked;
  }
  pthread_mutex_unlock (&v->lock);

  /* Move: the new copy. */
  if (p.route == HC_WRITE_COPY) {
    if (!p.merge_old) {
      image = src;
    } else {
      rc = hc_tier_read (v->fast, bounce, v->bs, fast_off (v, c));
      if (rc == 0 && !hc_vol_sum_ok (v, c, blk, bounce, true))
        rc = -EIO;
      if (rc < 0 && !f.dirty)
        rc = hc_tier_read (v->slow, bounce, v->bs, blk << v->bshift);
      if (rc == 0) {
        memcpy (bounce + boff, src, blen);
        image = bounce;
      }
    }
    bool write_failed = false;
    if (rc == 0)
      write_failed = (rc = hc_tier_write (v->fast, image, v->bs, fast_off (v, newc), 0)) < 0;
    if (rc < 0) {
      hc_lock (&v->lock);
      untake (v, newc);
      if (write_failed)
        hc_vol_fast_failed (v, rc);
      else
        v->dir.stats.errors_fast++;
      if (c != HC_NIL)
        unpin (v, c);
      pthread_mutex_unlock (&v->lock);
      if (write_failed)
        return write_around (v, blk, boff, blen, src, flags, r, commit_after, bt);
      unlock_stripe (v, blk, bt);
      return rc;
    }
    /* Record it: new copies are dirty until the slow tier has them. */
    hc_lock (&v->lock);
    fast_ok (v);
    if (p.old == HC_OLD_REPLACED) {
      hc_dir_relocate (&v->dir, c, newc);
      hc_meta_record_block (v, c);
      unpin (v, c);
    } else {
      hc_dir_install (&v->dir, newc, &a, false);
    }
    hc_dir_set_dirty (&v->dir, newc, a.hint.cls);
    hc_meta_record_block (v, newc);
    hc_vol_set_sum (v, newc, blk, image);
    v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
    note_fua (v, newc, flags);
    pthread_mutex_unlock (&v->lock);
  }

  /* Move: the slow tier's part, and record what it settles. */
slow:
  if (p.to_slow) {
    if (p.commit_first && (rc = hc_meta_commit (v, false)) < 0)
      goto out;
    if (p.whole_to_slow)
      /* The dirty block's other bytes too: they are not on the slow tier,
       * and the block is about to be clean (written through) or gone.  No
       * image means a whole block: src is it. */
      rc = write_slow_span (v, blk, 0, v->bs, image ? image : src, flags);
    else if (image)
      rc = write_slow_span (v, blk, boff, blen, image, flags);
    else if (sector_aligned)
      rc = hc_tier_write (v->slow, src, blen, (blk << v->bshift) + boff,
                          (flags & HC_VOL_FUA) ? HC_TIER_FUA : 0);
    else if ((rc = read_span (v, v->slow, blk << v->bshift, boff, blen, bounce)) == 0) {
      memcpy (bounce + boff, src, blen);
      rc = write_slow_span (v, blk, boff, blen, bounce, flags);
    }
    if (p.old == HC_OLD_DROP_AFTER) {
      hc_lock (&v->lock);
      unpin (v, c);
      if (rc == 0) {
        slow_changed (v);
        hc_dir_invalidate (&v->dir, c);
        hc_meta_record_block (v, c);
      }
      pthread_mutex_unlock (&v->lock);
      if (rc == 0)
        rc = hc_meta_commit (v, false);
    }
    hc_lock (&v->lock);
    slow_changed (v);
    /* A block cached dirty and now written through is clean again. */
    if (rc == 0 && newc != HC_NIL && hc_dir_holds (&v->dir, newc, blk))
      hc_vol_clean_unrecorded (v, newc);
    pthread_mutex_unlock (&v->lock);
  }
out:
  hc_lock (&v->lock);
out_locked: /* a block left to the batch ends in the trip through the lock that decided it */
  hc_vol_commit_soon (v, commit_after);
  if (flags & HC_VOL_FUA)
    *commit_after = true;
  pthread_mutex_unlock (&v->lock);
  unlock_stripe (v, blk, bt);
  return rc;
}

/* The slow tier's part of a batch, once its new copies are on the fast
 * tier and recorded (dirty): one commit if any block needs it, then each
 * run of blocks consecutive in the volume and in the request as one
 * slow-tier write (or, with a job, the slow writer's writes of the same
 * runs, waited for), then the write-through copies clean again.  A failed
 * slow write leaves its copies dirty (the cleaner writes them back) and
 * fails the request, as write_block does.  Returns 0 or the first error. */
static int
flush_slow (hc_volume *v, struct batch *bt, struct hc_slow_job *job)
{
  bool any = false, commit = false;
  int rc = 0;

  if (job) { /* written beside the fast writes, all in one (its first error fails them all) */
    int w = hc_writer_wait (v, job);
    hc_lock (&v->lock);
    slow_changed (v);
    for (unsigned k = 0; k < bt->n && w == 0; k++)
      if (bt->e[k].slow_pending && bt->e[k].newc != HC_NIL
          && hc_dir_holds (&v->dir, bt->e[k].newc, bt->e[k].a.origin))
        hc_vol_clean_unrecorded (v, bt->e[k].newc);
    pthread_mutex_unlock (&v->lock);
    return w;
  }
  for (unsigned i = 0; i < bt->n; i++) {
    any |= bt->e[i].slow_pending;
    commit |= bt->e[i].slow_pending && bt->e[i].commit_first;
  }
  if (!any || (commit && (rc = hc_meta_commit (v, false)) < 0))
    return rc;
  for (unsigned i = 0, j; i < bt->n; i = j) {
    if (!bt->e[i].slow_pending) {
      j = i + 1;
      continue;
    }
    for (j = i + 1; j < bt->n && bt->e[j].slow_pending
                    && bt->e[j].a.origin == bt->e[j - 1].a.origin + 1
                    && bt->e[j].src == bt->e[j - 1].src + v->bs; j++)
      ;
    int w = hc_tier_write (v->slow, bt->e[i].src, (size_t) (j - i) << v->bshift,
                           bt->e[i].a.origin << v->bshift,
                           (bt->flags & HC_VOL_FUA) ? HC_TIER_FUA : 0);
    hc_lock (&v->lock);
    slow_changed (v);
    for (unsigned k = i; k < j && w == 0; k++)
      if (bt->e[k].newc != HC_NIL && hc_dir_holds (&v->dir, bt->e[k].newc, bt->e[k].a.origin))
        hc_vol_clean_unrecorded (v, bt->e[k].newc);
    pthread_mutex_unlock (&v->lock);
    if (w < 0 && rc == 0)
      rc = w;
  }
  return rc;
}

/* Finishes a batch's deferred copies-on-write: each run of new blocks that
 * follow one another on the fast tier and in the request is one write, and
 * the mappings are installed (or moved from the old copies) and recorded as
 * write_block would have.  A failed write gives its blocks back and leaves
 * the old copies in place.  Returns 0 or the first error. */
static int
flush_batch (hc_volume *v, struct batch *bt, struct req *r, bool *commit_after,
             struct hc_slow_job *job)
{
  int rc = 0;

  for (unsigned i = 0, j; i < bt->n; i = j) {
    if (bt->e[i].newc == HC_NIL) { /* for the slow tier alone */
      j = i + 1;
      continue;
    }
    for (j = i + 1; j < bt->n && bt->e[j].newc != HC_NIL && bt->e[j].newc == bt->e[j - 1].newc + 1
                    && bt->e[j].src == bt->e[j - 1].src + v->bs; j++)
      ;
    /* After a failed run, the rest of the request goes around the fast
     * tier without trying it again. */
    bool skip = r->around;
    int w = skip ? 0
                 : hc_tier_write (v->fast, bt->e[i].src, (size_t) (j - i) * v->bs,
                                  fast_off (v, bt->e[i].newc), 0);
    bool failed = skip || w < 0;
    /* The write has pushed the map's buckets out of the CPU's caches, and
     * installing (or moving) each mapping needs its origin's: load them
     * AHEAD at a time (as fill.c does), not one miss at a time under the
     * lock. */
    enum { AHEAD = 16 };
    for (unsigned k = i; k < j && k < i + AHEAD; k++)
      hc_map_prefetch (&v->dir.map, bt->e[k].a.origin);
    hc_lock (&v->lock);
    if (w < 0)
      hc_vol_fast_failed (v, w);
    else if (!skip)
      fast_ok (v);
    for (unsigned k = i; k < j; k++) {
      struct deferred *d = &bt->e[k];
      if (k + AHEAD < j)
        hc_map_prefetch (&v->dir.map, bt->e[k + AHEAD].a.origin);
      if (d->c == d->newc) { /* rewritten in place */
        v->dir.map.blk[d->c].meta &= ~HC_M_WRITING;
        unpin (v, d->c);
        if (!failed) {
          v->dir.stats.cls[d->a.hint.cls].flash_bytes_written += v->bs;
          v->fast_dirty = true;
          note_fua (v, d->c, bt->flags);
          d->slow_pending = d->to_slow;
        }
        continue;
      }
      if (failed) {
        untake (v, d->newc);
      } else if (d->c != HC_NIL) {
        hc_dir_relocate (&v->dir, d->c, d->newc);
        hc_meta_record_block (v, d->c);
      } else {
        hc_dir_install (&v->dir, d->newc, &d->a, false);
      }
      if (d->c != HC_NIL)
        unpin (v, d->c);
      if (!failed) {
        hc_dir_set_dirty (&v->dir, d->newc, d->a.hint.cls);
        hc_meta_record_block (v, d->newc);
        hc_vol_set_sum (v, d->newc, d->a.origin, d->src);
        v->dir.stats.cls[d->a.hint.cls].flash_bytes_written += v->bs;
        note_fua (v, d->newc, bt->flags);
        d->slow_pending = d->to_slow;
      }
    }
    pthread_mutex_unlock (&v->lock);
    if (failed) {
      /* Each block again, around the fast tier (a copy rewritten in place
       * halfway is dropped after the slow tier has the block); the slow
       * writer's writes first, so that no two writes of a block meet. */
      if (job)
        hc_writer_wait (v, job);
      struct batch held = { .n = 0, .hold = true, .last = HC_NIL };
      r->around = true;
      for (unsigned k = i; k < j; k++) {
        int e = write_block (v, bt->e[k].a.origin, 0, v->bs, bt->e[k].src, bt->flags, r,
                             commit_after, &held);
        if (e < 0 && rc == 0)
          rc = e;
      }
    }
  }
  int e = flush_slow (v, bt, job);
  bt->n = 0;
  return rc < 0 ? rc : e;
}

/* Hands a batch's slow writes to the slow writer, to run beside its fast
 * writes (writer.c), if that may be and is the way (trial.c): every block
 * goes to the slow tier, none of them after a commit, some to the fast
 * tier too.  Returns the job handed over, or NULL; *trial and *t0 say
 * which trial the batch is part of (-1: none) and when it began. */
static struct hc_slow_job *
beside (hc_volume *v, struct batch *bt, const struct req *r, int *trial, uint64_t *t0)
{
  struct hc_slow_job *j = &bt->job;
  bool fast = false, alt;

  *trial = -1;
  if (!v->writer_started || r->around)
    return NULL;
  for (unsigned i = 0; i < bt->n; i++) {
    if (!bt->e[i].to_slow || bt->e[i].commit_first)
      return NULL;
    fast |= bt->e[i].newc != HC_NIL;
  }
  if (!fast)
    return NULL;
  hc_lock (&v->lock);
  *trial = hc_trial_way (&v->write_way, &alt);
  pthread_mutex_unlock (&v->lock);
  if (*trial >= 0)
    *t0 = hc_now_precise_ns ();
  if (!alt)
    return NULL;
  j->n = 0;
  j->flags = (bt->flags & HC_VOL_FUA) ? HC_TIER_FUA : 0;
  for (unsigned i = 0, k; i < bt->n; i = k) {
    for (k = i + 1; k < bt->n && bt->e[k].a.origin == bt->e[k - 1].a.origin + 1
                    && bt->e[k].src == bt->e[k - 1].src + v->bs; k++)
      ;
    j->run[j->n].buf = bt->e[i].src;
    j->run[j->n].len = (size_t) (k - i) << v->bshift;
    j->run[j->n].off = bt->e[i].a.origin << v->bshift;
    j->n++;
  }
  return hc_writer_submit (v, j) ? j : NULL;
}

/* Writes up to *np (≤ BATCH_BLOCKS) whole blocks from blk on, holding the
 * stripes lock_run could take (*np becomes how many: the blocks written). */
static int
write_batch (hc_volume *v, uint64_t blk, unsigned *np, const uint8_t *src, unsigned flags,
             struct req *r, bool *commit_after)
{
  struct batch *bt = malloc (sizeof *bt);
  unsigned n = *np;
  int rc = 0;

  if (!bt)
    return -ENOMEM;
  bt->n = 0;
  bt->flags = flags;
  bt->hold = false;
  bt->last = HC_NIL;
  /* A batch must not wait for free blocks holding its stripes (the cleaner
   * skips blocks whose stripe is busy): without room for twice the batch,
   * its blocks go one by one. */
  hc_lock (&v->lock);
  bool room = v->mode == HC_MODE_PASSTHROUGH || v->dir.map.free.count >= 2 * n;
  pthread_mutex_unlock (&v->lock);
  if (!room) {
    for (unsigned i = 0; i < n && rc == 0; i++)
      rc = write_block (v, blk + i, 0, v->bs, src + (size_t) i * v->bs, flags, r, commit_after,
                        NULL);
    free (bt);
    return rc;
  }
  /* The index is bigger than the CPU's caches and the data streaming
   * through them pushes it out: start loading every block's buckets now,
   * rather than one cache miss at a time under the lock. */
  for (unsigned i = 0; i < n; i++)
    hc_map_prefetch (&v->dir.map, blk + i);
  *np = n = hc_vol_lock_run (v, blk, n, true);
  for (unsigned i = 0; i < n && rc == 0; i++)
    rc = write_block (v, blk + i, 0, v->bs, src + (size_t) i * v->bs, flags, r, commit_after, bt);
  int trial = -1;
  uint64_t t0 = 0;
  const unsigned deferred = bt->n;
  struct hc_slow_job *job = rc == 0 ? beside (v, bt, r, &trial, &t0) : NULL;
  int frc = flush_batch (v, bt, r, commit_after, job);
  if (trial >= 0)
    hc_trial_report (v, &v->write_way, trial, hc_now_precise_ns () - t0, deferred);
  hc_vol_unlock_run (v, blk, n);
  free (bt);
  return rc < 0 ? rc : frc;
}


/* A write, past the door (hc_volume_write, and range_op's partial blocks). */
static int
write_request (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags,
               const struct hc_ioctx *ctx)
{
  struct req r = { .ctx = ctx, .off = off, .len = len };
  const uint8_t *src = buf;
  bool commit = false;
  int rc = hc_vol_check_range (v, off, len);

  if (rc < 0)
    return rc;
  if (flags & ~(unsigned) HC_VOL_FUA)
    return -EINVAL;
  if (len == 0)
    return (flags & HC_VOL_FUA) ? hc_volume_flush (v) : 0;
  int64_t head = hc_vol_tail_io (v, NULL, src, len, off, flags);
  if (head < 0)
    return (int) head;
  len = (uint64_t) head;
  while (len && rc == 0) {
    uint64_t blk = off >> v->bshift;
    uint32_t boff = (uint32_t) (off & (v->bs - 1));
    uint32_t blen = v->bs - boff < len ? v->bs - boff : (uint32_t) len;
    uint64_t whole = boff ? 0 : len >> v->bshift;
    if (whole >= 2) {
      unsigned max = v->nstripes < BATCH_BLOCKS ? v->nstripes : BATCH_BLOCKS;
      unsigned n = whole < max ? (unsigned) whole : max;
      rc = write_batch (v, blk, &n, src, flags, &r, &commit);
      blen = n * v->bs;
    } else {
      rc = write_block (v, blk, boff, blen, src, flags, &r, &commit, NULL);
    }
    src += blen;
    off += blen;
    len -= blen;
  }
  hc_vol_bounce_done (v, &r);
  if (rc == 0 && commit)
    rc = hc_meta_commit (v, false);
  return rc;
}

int
hc_volume_write (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags,
                 const struct hc_ioctx *ctx)
{
  unsigned door = hc_vol_enter (v);
  int rc = write_request (v, buf, len, off, flags, ctx);
  hc_vol_leave (v, door);
  return rc;
}

int
hc_volume_flush (hc_volume *v)
{
  hc_lock (&v->lock);
  v->dir.stats.flushes++;
  pthread_mutex_unlock (&v->lock);
  return hc_meta_commit (v, false);
}


/* Drops cached block c if it is dirty (or clean) as arg->dirty says,
 * counting it (caller holds lock and all stripes). */
struct drop {
  bool dirty;
  uint64_t n;
};

static void
drop_if (hc_volume *v, uint32_t c, void *arg)
{
  struct drop *d = arg;

  if (((v->dir.map.blk[c].meta & HC_M_DIRTY) != 0) != d->dirty)
    return;
  hc_dir_invalidate (&v->dir, c);
  hc_meta_record_block (v, c);
  d->n++;
}

/* Drops the cached blocks of volume blocks [b0, b1) that are dirty (or
 * clean, as `dirty` says) (caller holds lock and all stripes).  Returns how
 * many were dropped. */
static uint64_t
drop_range (hc_volume *v, uint64_t b0, uint64_t b1, bool dirty)
{
  struct drop d = { .dirty = dirty };

  hc_vol_each_cached (v, b0, b1, drop_if, &d);
  return d.n;
}

/* Discard (zero = false) or zero a range: whole blocks leave the cache and
 * the slow tier discards or zeroes them; partial edge blocks are written
 * with zeros through the write path. */
static int
range_op (hc_volume *v, uint64_t off, uint64_t len, unsigned flags, const struct hc_ioctx *ctx,
          bool zero)
{
  uint64_t b0 = (off + v->bs - 1) >> v->bshift, b1 = (off + len) >> v->bshift;
  int rc = hc_vol_check_range (v, off, len);
  uint8_t *zeros = NULL;

  if (rc < 0 || len == 0)
    return rc;
  if (v->opts.read_only)
    return -EROFS;
  /* Edges: the partial blocks at either end. */
  if (b0 > b1 || (off & (v->bs - 1)) || ((off + len) & (v->bs - 1))) {
    if (!(zeros = calloc (1, v->bs)))
      return -ENOMEM;
    uint64_t head_end = b0 > b1 ? off + len : b0 << v->bshift;
    if (off < head_end)
      rc = write_request (v, zeros, head_end - off, off, 0, ctx);
    uint64_t tail_start = b1 << v->bshift;
    if (rc == 0 && b0 <= b1 && tail_start < off + len)
      rc = write_request (v, zeros, off + len - tail_start, tail_start, 0, ctx);
    free (zeros);
  }
  if (rc == 0 && b0 < b1) {
    /* Clean copies go (durably) before the slow tier changes; dirty ones
     * after it has the zeros — the same order as a single write (top of
     * this file), applied to a range.  The first commit also makes the
     * dirty blocks' mappings durable. */
    hc_vol_lock_stripes (v);
    hc_lock (&v->lock);
    drop_range (v, b0, b1, false);
    pthread_mutex_unlock (&v->lock);
    rc = hc_meta_commit (v, false);
    if (rc == 0) {
      uint64_t o = b0 << v->bshift, l = (b1 - b0) << v->bshift;
      rc = zero ? hc_tier_zero (v->slow, o, l) : hc_tier_discard (v->slow, o, l);
      hc_lock (&v->lock);
      slow_changed (v); /* even a failed one may have changed some */
      pthread_mutex_unlock (&v->lock);
    }
    if (rc == 0) {
      hc_lock (&v->lock);
      uint64_t dirty = drop_range (v, b0, b1, true);
      pthread_mutex_unlock (&v->lock);
      if (dirty)
        rc = hc_meta_commit (v, false);
    }
    hc_vol_unlock_stripes (v);
  }
  if (rc == 0 && (flags & HC_VOL_FUA))
    rc = hc_volume_flush (v);
  return rc;
}

int
hc_volume_discard (hc_volume *v, uint64_t off, uint64_t len, const struct hc_ioctx *ctx)
{
  unsigned door = hc_vol_enter (v);
  int rc = range_op (v, off, len, 0, ctx, false);
  hc_vol_leave (v, door);
  return rc;
}

int
hc_volume_zero (hc_volume *v, uint64_t off, uint64_t len, unsigned flags,
                const struct hc_ioctx *ctx)
{
  if (flags & ~(unsigned) HC_VOL_FUA)
    return -EINVAL;
  unsigned door = hc_vol_enter (v);
  int rc = range_op (v, off, len, flags, ctx, true);
  hc_vol_leave (v, door);
  return rc;
}

