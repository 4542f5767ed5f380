/* Advice: range hints, and what each advice does to what is cached now.
 *
 * hc_volume_advise records a class and advice for a byte range (ranges.c
 * keeps them, the journal makes them durable), gives the class to what is
 * cached there already, and then does what the advice asks of the blocks
 * cached now — one entry per advice in advice_ops:
 *
 *   normal    clears earlier advice of the range;
 *   dontneed  kept for the range (later misses are not admitted) and
 *             demotes what is cached: first to go, not dropped;
 *   willneed  kept for the range (hits are protected) and queued for
 *             prefetch, which the cleaner runs (at once without one);
 *   evict     not kept: what is cached is written back and dropped now.
 *
 * Walks over what is cached in a range (hc_vol_each_cached) visit the
 * range's blocks or the cache's, whichever are fewer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

/* Gives cached block c the class `*arg` (caller holds lock), recorded in
 * the journal with its entry. */
static void
reclass (hc_volume *v, uint32_t c, void *arg)
{
  unsigned cls = *(const unsigned *) arg;

  if (hc_meta_class (v->dir.map.blk[c].meta) != cls) {
    hc_dir_reclass (&v->dir, c, cls);
    hc_meta_record_block (v, c);
  }
}

static void
demote (hc_volume *v, uint32_t c, void *arg)
{
  (void) arg;
  hc_dir_demote (&v->dir, c);
}

/* Willneed prefetches are bounded: at most a cache's worth of blocks wait
 * in the queue (a range is cut to that, and the oldest ranges give way to
 * new ones), the cleaner runs them a slice at a time between its other
 * work, a prefetch that finds no room ends the whole queue (the cache is
 * full of dirty or busy data: the advice cannot be followed now), and
 * closing stops them at the next block. */

/* Queues [b0, b1) (caller holds lock). */
static void
queue_prefetch (hc_volume *v, uint64_t b0, uint64_t b1, struct hc_hint hint)
{
  uint64_t n = b1 - b0, max = v->dir.map.n;

  if (n > max)
    n = max;
  while (v->nprefetch && v->prefetch_blocks + n > max) {
    v->prefetch_blocks -= v->prefetch[0].n;
    memmove (v->prefetch, v->prefetch + 1, --v->nprefetch * sizeof *v->prefetch);
  }
  if (v->nprefetch == v->capprefetch) {
    size_t ncap = v->capprefetch ? v->capprefetch * 2 : 16;
    struct hc_prefetch *np = realloc (v->prefetch, ncap * sizeof *np);
    if (!np)
      return; /* advice is advisory */
    v->prefetch = np;
    v->capprefetch = ncap;
  }
  v->prefetch[v->nprefetch++] = (struct hc_prefetch) { b0, n, hint };
  v->prefetch_blocks += n;
}

/* What an advice does to the blocks of [b0, b1): `locked` under the volume
 * lock, `unlocked` after it; `range` is what the range hints keep
 * (HC_RANGE_KEEP: nothing new). */
struct advice_op {
  unsigned range;
  void (*locked) (hc_volume *v, uint64_t b0, uint64_t b1, struct hc_hint hint);
  int (*unlocked) (hc_volume *v, uint64_t b0, uint64_t b1);
};

static void
dontneed_locked (hc_volume *v, uint64_t b0, uint64_t b1, struct hc_hint hint)
{
  (void) hint;
  hc_vol_each_cached (v, b0, b1, demote, NULL);
}

static void
willneed_locked (hc_volume *v, uint64_t b0, uint64_t b1, struct hc_hint hint)
{
  if (b0 < b1) {
    queue_prefetch (v, b0, b1, hint);
    pthread_cond_signal (&v->wake);
  }
}

/* No background thread: prefetch now. */
static int
willneed_unlocked (hc_volume *v, uint64_t b0, uint64_t b1)
{
  (void) b0, (void) b1;
  return v->cleaner_started ? 0 : hc_vol_run_prefetch (v, UINT64_MAX);
}

/* Writes back what is dirty, then drops the range now. */
static int
evict_unlocked (hc_volume *v, uint64_t b0, uint64_t b1)
{
  int rc = hc_meta_commit (v, false);

  for (uint64_t b = b0; b < b1 && rc >= 0; b++) {
    hc_lock (&v->lock);
    uint32_t c = hc_dir_find (&v->dir, b);
    pthread_mutex_unlock (&v->lock);
    if (c != HC_NIL)
      rc = hc_vol_writeback (v, c, false);
    if (rc >= 0 && c != HC_NIL) {
      stripe_wrlock (v, b);
      hc_lock (&v->lock);
      c = hc_dir_find (&v->dir, b);
      if (c != HC_NIL && !(v->dir.map.blk[c].meta & HC_M_DIRTY) && !hc_vol_busy (v, c)) {
        v->dir.stats.cls[hc_meta_class (v->dir.map.blk[c].meta)].evictions++;
        hc_dir_invalidate (&v->dir, c);
        hc_meta_record_block (v, c);
      }
      pthread_mutex_unlock (&v->lock);
      pthread_rwlock_unlock (stripe (v, b));
    }
  }
  return rc < 0 ? rc : hc_meta_commit (v, false);
}

/* Reserved advice values (4 … 6) never get here: hc_hint_check refuses them. */
static const struct advice_op advice_ops[HC_ADVICE_LIMIT] = {
  [HC_ADVICE_NONE] = { .range = HC_RANGE_KEEP },
  [HC_ADVICE_EVICT] = { .range = HC_RANGE_KEEP, .unlocked = evict_unlocked },
  [HC_ADVICE_DONTNEED] = { .range = HC_ADVICE_DONTNEED, .locked = dontneed_locked },
  [HC_ADVICE_NORMAL] = { .range = 0 },
  [HC_ADVICE_WILLNEED] = { .range = HC_ADVICE_WILLNEED, .locked = willneed_locked,
                           .unlocked = willneed_unlocked },
};

int
hc_volume_unadvise (hc_volume *v, uint64_t off, uint64_t len)
{
  return hc_volume_unadvise_from (v, off, len, HC_SOURCE_ADMIN);
}

int
hc_volume_unadvise_from (hc_volume *v, uint64_t off, uint64_t len, unsigned source)
{
  uint64_t s0, s1;
  int rc = hc_vol_check_range (v, off, len);

  if (rc < 0 || source >= HC_SOURCE_COUNT)
    return -EINVAL;
  if (len == 0)
    return 0;
  s0 = off / HC_SECTOR_SIZE;
  s1 = (off + len + HC_SECTOR_SIZE - 1) / HC_SECTOR_SIZE;
  hc_lock (&v->lock);
  if (v->opts.read_only)
    rc = -EROFS;
  else if ((rc = hc_ranges_withdraw (&v->ranges, s0, s1, source)) == 0)
    hc_meta_record_range (v, s0, s1, true, source, 0, 0);
  pthread_mutex_unlock (&v->lock);
  return rc;
}

int
hc_volume_advise (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint)
{
  return hc_volume_advise_from (v, off, len, hint, HC_SOURCE_ADMIN);
}

static int
advise (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint, unsigned source)
{
  uint64_t s0, s1, b0, b1;
  unsigned cls = HC_RANGE_KEEP;
  int rc = hc_vol_check_range (v, off, len);

  if (rc < 0 || hc_hint_check (hint) < 0 || source >= HC_SOURCE_COUNT)
    return -EINVAL;
  if (len == 0)
    return 0;
  const struct advice_op *op = &advice_ops[hint.advice];
  s0 = off / HC_SECTOR_SIZE;
  s1 = (off + len + HC_SECTOR_SIZE - 1) / HC_SECTOR_SIZE;
  b0 = off >> v->bshift;
  b1 = (off + len + v->bs - 1) >> v->bshift;
  if (b1 > v->nslow) /* the partial last block is not cached */
    b1 = v->nslow;
  if (b0 > b1)
    b0 = b1;
  if (hint.cls != HC_CLASS_UNCLASSIFIED)
    cls = hint.cls;

  hc_lock (&v->lock);
  if (cls != HC_RANGE_KEEP || op->range != HC_RANGE_KEEP) {
    if (v->opts.read_only) {
      pthread_mutex_unlock (&v->lock);
      return -EROFS;
    }
    if ((rc = hc_ranges_set (&v->ranges, s0, s1, cls, op->range, source)) < 0) {
      pthread_mutex_unlock (&v->lock);
      return rc;
    }
    hc_meta_record_range (v, s0, s1, false, source, cls, op->range);
    if (cls != HC_RANGE_KEEP)
      hc_vol_each_cached (v, b0, b1, reclass, &cls);
  }
  if (op->locked)
    op->locked (v, b0, b1, hint);
  pthread_mutex_unlock (&v->lock);
  if (op->unlocked)
    rc = op->unlocked (v, b0, b1);
  return rc < 0 ? rc : 0;
}

int
hc_volume_advise_from (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint,
                       unsigned source)
{
  unsigned door = hc_vol_enter (v);
  int rc = advise (v, off, len, hint, source);
  hc_vol_leave (v, door);
  return rc;
}

struct hc_hint
hc_volume_range_hint (hc_volume *v, uint64_t off)
{
  hc_lock (&v->lock);
  struct hc_hint h = hc_ranges_get (&v->ranges, off / HC_SECTOR_SIZE);
  pthread_mutex_unlock (&v->lock);
  return h;
}

