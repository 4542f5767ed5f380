/* The request machinery shared by the engine's paths (io.h).
 *
 * A request is cut into cache blocks; each block is handled under its
 * stripe lock (shared for reads, exclusive for writes) in three steps:
 * decide under the volume lock (resolve the hint, look up, admit, take a
 * free block, pin what will be read), do the data I/O unlocked, then record
 * the outcome under the lock (install, relocate, journal records).  The
 * read path is read.c, the write path write.c (its consistency rules are
 * at its top), advice advise.c; write-back and prefetch of single blocks
 * are the cleaner's (cleaner.c).  This file holds what they share: block
 * checksums, taking a free block (evicting a batch and committing when the
 * free list runs dry), the request's bounce buffer, runs of stripes, and
 * the volume's partial last block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "io.h"

/* Data checksums (HC_FEAT_SUMS; format.h).  The word of block c changes
 * only when new data is written into c, which is free or exclusively its
 * writer's then; readers of c have it pinned, so it cannot change under
 * them, but it is read and written atomically all the same. */

/* The checksum word of data for origin `blk` in cache block c. */
static uint64_t
block_sum (hc_volume *v, uint32_t c, uint64_t blk, uint32_t gen, const uint8_t *data)
{
  uint64_t seed = v->seed ^ blk * UINT64_C (0x9e3779b97f4a7c15) ^ (uint64_t) c << 40 ^ gen;
  uint32_t sum = (uint32_t) XXH3_64bits_withSeed (data, v->bs, seed);
  return (uint64_t) gen << 32 | (sum ? sum : 1); /* 0 means none */
}

/* Block c now holds `data` for origin blk: a new generation, its checksum,
 * and the record of it (caller holds lock; nothing without checksums). */
void
hc_vol_set_sum (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data)
{
  if (!v->sum)
    return;
  __atomic_store_n (&v->sum[c], block_sum (v, c, blk, ++v->sum_gen, data), __ATOMIC_RELAXED);
  hc_meta_record_sum (v, c);
}

/* Whether `data`, read from block c (pinned, mapping blk), is what was
 * written there; with `count`, counts a mismatch (takes the lock). */
bool
hc_vol_sum_ok (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data, bool count)
{
  uint64_t w = v->sum ? __atomic_load_n (&v->sum[c], __ATOMIC_RELAXED) : 0;

  if (w == 0 || block_sum (v, c, blk, (uint32_t) (w >> 32), data) == w)
    return true;
  if (!count)
    return false;
  hc_lock (&v->lock);
  v->dir.stats.errors_checksum++;
  pthread_mutex_unlock (&v->lock);
  return false;
}

bool
hc_vol_evictable (void *arg, uint32_t c)
{
  hc_volume *v = arg;
  return !(v->dir.map.blk[c].meta & HC_M_DIRTY) && !hc_vol_busy (v, c);
}

struct hc_hint
hc_vol_resolve (hc_volume *v, uint64_t blk, const struct hc_ioctx *ctx)
{
  struct hc_hint layer[HC_LAYER_COUNT] = { { 0 } };

  /* Most I/O says nothing of itself: the device's hint is the answer. */
  if (!v->ranges.n
      && (!ctx || (hc_hint_empty (ctx->hint) && hc_hint_empty (ctx->process)
                   && (!ctx->stream || hc_hint_empty (ctx->stream->hint)))))
    return v->device_hint;
  if (ctx) {
    layer[HC_LAYER_IO] = ctx->hint;
    layer[HC_LAYER_PROCESS] = ctx->process;
    if (ctx->stream)
      layer[HC_LAYER_STREAM] = ctx->stream->hint;
  }
  if (v->ranges.n)
    layer[HC_LAYER_RANGE] = hc_ranges_get (&v->ranges, blk << (v->bshift - 9));
  layer[HC_LAYER_DEVICE] = v->device_hint;
  return hc_hint_resolve (layer, NULL);
}

/* The fast tier failed a data write with rc (caller holds lock): the
 * volume is degraded, and tries the fast tier again in a second. */
void
hc_vol_fast_failed (hc_volume *v, int rc)
{
  v->dir.stats.errors_fast++;
  if (atomic_exchange (&v->degraded, -rc) == 0)
    v->degraded_events++;
  v->degraded_retry_ns = hc_now_ns () + 1000000000ull;
}

/* Maps free block c to a->origin unless the origin is mapped already
 * (caller holds lock); in that case c goes back to the free list.  Read
 * misses fill under the stripe held shared, so two readers of one block
 * can both fill it: the second must not map it twice.  Returns whether c
 * was installed. */
bool
hc_vol_install (hc_volume *v, uint32_t c, const struct hc_access *a)
{
  if (hc_dir_find (&v->dir, a->origin) != HC_NIL) {
    untake (v, c);
    return false;
  }
  hc_dir_install (&v->dir, c, a, false);
  if (v->mode == HC_MODE_WRITETHROUGH || v->mode == HC_MODE_WRITEAROUND)
    hc_vol_clean_unrecorded (v, c);
  return true;
}

/* Evicts up to `want` clean, idle blocks to the pending list, recording
 * each (caller holds lock).  Returns how many. */
static uint32_t
evict_batch (hc_volume *v, uint32_t want)
{
  uint32_t n = 0;
  while (n < want) {
    uint32_t c = hc_dir_evict (&v->dir, HC_CLASS_COUNT, hc_vol_evictable, v);
    if (c == HC_NIL)
      break;
    hc_meta_record_block (v, c);
    n++;
  }
  return n;
}

/* Blocks evicted at once when the free list runs dry: one commit then
 * serves many admissions. */
static uint32_t
reclaim_batch (const hc_volume *v)
{
  uint32_t n = v->dir.map.n / 64;
  return n < 16 ? 16 : n > 4096 ? 4096 : n;
}

/* Takes a free block for `a` (caller holds lock; it may be dropped and
 * retaken).  A class at its maximum share gives up one of its own blocks
 * first.  When the free list is empty, a batch of clean blocks is evicted
 * and a commit makes them reusable; when nothing is clean, the cleaner is
 * asked and waited for briefly — unless !may_wait (a caller holding several
 * stripes, which would keep the cleaner from the blocks in them).  Returns
 * the block, or HC_NIL with *why. */
uint32_t
hc_vol_take_block (hc_volume *v, const struct hc_access *a, enum hc_bypass *why, bool may_wait)
{
  if (hc_dir_at_share (&v->dir, a->hint.cls)) {
    uint32_t e = hc_dir_evict (&v->dir, a->hint.cls, hc_vol_evictable, v);
    if (e == HC_NIL) {
      *why = HC_BYPASS_SHARE;
      return HC_NIL;
    }
    hc_meta_record_block (v, e);
  }
  /* Waiting for the cleaner gives up only after ~10 s without a single
   * write-back: then the slow tier takes the write (counted as "full"). */
  for (int attempt = 0, idle = 0; idle < 200; attempt++) {
    uint32_t c = hc_dir_take_free (&v->dir);
    if (c != HC_NIL)
      return c;
    if (evict_batch (v, reclaim_batch (v)) == 0 && v->dir.map.pending.count == 0
        && v->committing.count == 0) {
      /* Everything is dirty or busy: wait for the cleaner. */
      if (!v->cleaner_started || v->failed || !may_wait)
        break;
      uint64_t before = v->cleaned;
      v->space_waiters++;
      pthread_cond_signal (&v->wake);
      hc_timedwait (&v->space, &v->lock, 50 * 1000000ull);
      v->space_waiters--;
      idle = v->cleaned == before ? idle + 1 : 0;
      continue;
    }
    (void) attempt;
    pthread_mutex_unlock (&v->lock);
    int rc = hc_meta_commit (v, false);
    hc_lock (&v->lock);
    if (rc < 0) {
      *why = HC_BYPASS_ERROR;
      return HC_NIL;
    }
  }
  *why = HC_BYPASS_FULL;
  return HC_NIL;
}

/* Asks for a commit if the journal buffer has grown (caller holds lock). */
void
hc_vol_commit_soon (hc_volume *v, bool *commit_now)
{
  if (v->jrec >= 4096) {
    if (v->cleaner_started)
      pthread_cond_signal (&v->wake);
    else
      *commit_now = true;
  }
}

/* Per-request bookkeeping, done under the first block's lock. */
void
hc_vol_req_start (hc_volume *v, struct req *r)
{
  if (r->started)
    return;
  /* A stream's own run, and the volume's runs, which see every request: a
   * client may spread one reader over several streams (an NBD client's
   * connections, in turn). */
  r->seq_own = r->ctx && r->ctx->stream
               && hc_seq_update (&v->seq, &r->ctx->stream->seq, r->off, r->len, v->opts.seq_cutoff);
  r->seq = hc_seq_update (&v->seq, NULL, r->off, r->len, v->opts.seq_cutoff) || r->seq_own;
  /* To the millisecond (the cleaner's idle test counts 200): a word every
   * request rewrote would pass from CPU to CPU with each. */
  uint64_t t = hc_now_ns ();
  if (t - v->last_io_ns >= 1000000)
    v->last_io_ns = t;
  if (v->budget.per_day) {
    uint64_t flash = atomic_load_explicit (&v->meta_flash, memory_order_relaxed);
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
      flash += v->dir.stats.cls[c].flash_bytes_written;
    hc_dir_follow_budget (&v->dir, &v->budget, v->last_io_ns, flash);
  }
  r->started = true;
}

/* The request's bounce buffer: the volume's spare one if no other request
 * holds it, else a new one. */
uint8_t *
hc_vol_bounce (hc_volume *v, struct req *r)
{
  if (!r->bounce && !(r->bounce = atomic_exchange (&v->spare_bounce, NULL)))
    r->bounce = aligned_alloc (4096, v->bs);
  return r->bounce;
}

/* Ends the request's use of its bounce buffer: it becomes the volume's
 * spare, unless the volume has one already.  A request costs no allocation
 * while requests needing one do not overlap. */
void
hc_vol_bounce_done (hc_volume *v, struct req *r)
{
  uint8_t *none = NULL;

  if (r->bounce && !atomic_compare_exchange_strong (&v->spare_bounce, &none, r->bounce))
    free (r->bounce);
  r->bounce = NULL;
}

/* Takes the stripe of block blk, waiting for it, then those of blk+1 …
 * blk+n−1 (n ≤ v->nstripes, so no stripe twice) while each is free at
 * once, shared or exclusive.  A run never waits while it holds a stripe,
 * so it cannot close a cycle with a thread that holds one and waits: for
 * the cleaner (which skips the blocks whose stripes are held, and may need
 * exactly those to make room), or for a range operation taking every
 * stripe in order.  Returns how many blocks' stripes it took (≥ 1). */
unsigned
hc_vol_lock_run (hc_volume *v, uint64_t blk, unsigned n, bool excl)
{
  unsigned k = 1;

  excl ? stripe_wrlock (v, blk) : hc_rdlock (stripe (v, blk));
  while (k < n && (excl ? stripe_trywrlock (v, blk + k)
                        : hc_tryrdlock (stripe (v, blk + k))) == 0)
    k++;
  return k;
}

void
hc_vol_unlock_run (hc_volume *v, uint64_t blk, unsigned n)
{
  for (unsigned i = n; i-- > 0;)
    pthread_rwlock_unlock (stripe (v, blk + i));
}

_Static_assert (HC_VOL_MAX_INSIDE + 1 <= UINT8_MAX, "pins are 8 bits: the threads inside and the cleaner");

unsigned
hc_vol_enter (hc_volume *v)
{
  static _Atomic unsigned dealt;
  static _Thread_local unsigned mine; /* this thread's door + 1, once dealt */

  if (!mine)
    mine = atomic_fetch_add_explicit (&dealt, 1, memory_order_relaxed) % HC_VOL_DOORS + 1;
  for (unsigned tries = 0;; tries++) {
    unsigned d = (mine - 1 + tries) % HC_VOL_DOORS;
    if (atomic_fetch_add_explicit (&v->door[d].inside, 1, memory_order_acquire)
        < HC_VOL_MAX_INSIDE / HC_VOL_DOORS)
      return d;
    atomic_fetch_sub_explicit (&v->door[d].inside, 1, memory_order_relaxed);
    if (tries % HC_VOL_DOORS == HC_VOL_DOORS - 1) /* every door full: wait a little */
      nanosleep (&(struct timespec) { .tv_nsec = 100 * 1000 }, NULL);
  }
}

int
hc_vol_check_range (hc_volume *v, uint64_t off, uint64_t len)
{
  uint64_t size = v->sb.volume_size;
  return off > size || len > size - off ? -EINVAL : 0;
}

/* The volume is the whole slow tier, whose size need not be a multiple of
 * the block size: the last, partial block is not cached, and the part of
 * a request that reaches it goes straight to the slow tier, under that
 * block's stripe (exclusive for writes, which read-modify-write whole
 * sectors).  A write sets slow_dirty, so that the next flush makes it
 * durable; FUA makes it so at once.  A read passes dst, a write src.
 * Returns how many bytes of [off, off+len) precede that part, after doing
 * it; or a negative errno. */
int64_t
hc_vol_tail_io (hc_volume *v, uint8_t *dst, const uint8_t *src, uint64_t len, uint64_t off,
         unsigned flags)
{
  uint64_t end = v->nslow << v->bshift, t0 = off > end ? off : end, t1 = off + len;
  uint64_t a0 = t0 / HC_SECTOR_SIZE * HC_SECTOR_SIZE;
  uint64_t a1 = (t1 + HC_SECTOR_SIZE - 1) / HC_SECTOR_SIZE * HC_SECTOR_SIZE;
  uint8_t *b;
  int rc = 0;

  if (t1 <= end)
    return (int64_t) len;
  if (src && (v->failed || v->opts.read_only))
    return v->opts.read_only ? -EROFS : -EIO;
  if (!(b = malloc (a1 - a0)))
    return -ENOMEM;
  src ? stripe_wrlock (v, v->nslow) : hc_rdlock (stripe (v, v->nslow));
  if (!src || t0 != a0 || t1 != a1)
    rc = hc_tier_read (v->slow, b, a1 - a0, a0);
  if (rc == 0 && dst)
    memcpy (dst + (t0 - off), b + (t0 - a0), t1 - t0);
  if (rc == 0 && src) {
    memcpy (b + (t0 - a0), src + (t0 - off), t1 - t0);
    rc = hc_tier_write (v->slow, b, a1 - a0, a0, (flags & HC_VOL_FUA) ? HC_TIER_FUA : 0);
    hc_lock (&v->lock);
    slow_changed (v);
    pthread_mutex_unlock (&v->lock);
  }
  pthread_rwlock_unlock (stripe (v, v->nslow));
  free (b);
  return rc < 0 ? rc : (int64_t) (t0 - off);
}


void
hc_vol_lock_stripes (hc_volume *v)
{
  for (unsigned i = 0; i < v->nstripes; i++)
    stripe_wrlock (v, i);
}

void
hc_vol_unlock_stripes (hc_volume *v)
{
  for (unsigned i = v->nstripes; i-- > 0;)
    pthread_rwlock_unlock (&v->stripes[i]);
}

void
hc_vol_each_cached (hc_volume *v, uint64_t b0, uint64_t b1,
                    void (*fn) (hc_volume *v, uint32_t c, void *arg), void *arg)
{
  struct hc_map *m = &v->dir.map;

  if (b1 - b0 <= m->n) {
    uint32_t c = HC_NIL;
    for (uint64_t b = b0; b < b1; b++)
      if ((c = hc_dir_find_next (&v->dir, b, c)) != HC_NIL) /* a run sits side by side */
        fn (v, c, arg);
    return;
  }
  for (uint32_t c = 0; c < m->n; c++) {
    uint64_t w = m->blk[c].meta;
    if ((w & HC_M_VALID) && hc_meta_origin (w) >= b0 && hc_meta_origin (w) < b1)
      fn (v, c, arg);
  }
}
