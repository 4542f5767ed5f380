/* The I/O paths of a volume: read, write, discard, zero, advise, flush.
 *
 * A request is cut into cache blocks; each block is handled under its
 * stripe lock (shared for reads, exclusive for writes) in three steps:
 * decide under the volume lock (resolve the hint, look up, admit, take a
 * free block, pin what will be read), do the data I/O unlocked, then record
 * the outcome under the lock (install, relocate, journal records).
 *
 * Two rules carry the consistency contract (see format.h for the journal):
 *
 *   Copy-on-write.  Data never overwrites a cache block a mapping points to:
 *   a write to a cached block goes to a free block and the mapping moves, so
 *   a crash leaves the old block intact under the old, durable mapping.
 *   One exception: in write-back, a whole-block write to a dirty block of
 *   the same class is written in place.  Its slow copy is stale already and
 *   no mapping changes, so nothing is recorded; a crash during it leaves
 *   each sector old or new, which is all an unflushed write promises (a
 *   flush or FUA commits, which makes the fast tier durable first).  A
 *   block whose last write was FUA is still copied, so that its FUA data
 *   stays whole until the next write to it completes.  Readers of a cached
 *   block do not take its stripe (copy-on-write made that safe), so the
 *   rewrite happens only when no reader holds the block pinned, and marks
 *   it (HC_M_WRITING) so that new readers wait for the stripe.  This
 *   is what keeps a hot, dirty working set at the speed of its fast tier:
 *   no new block, no record, no commit to recycle the old one.
 *
 *   Commit before the slow tier changes under a cached copy.  If the slow
 *   tier is written for a block that has a durable clean mapping (a
 *   write-through or write-around hit, a pass-through write, a write-back
 *   write that found no room, a discard), a crash could leave the slow tier
 *   new and the cached copy old and still "clean" — and a later eviction
 *   would make the data change by itself.  So the cached copy is replaced (by
 *   a dirty one) or dropped, and that is committed, before the slow write.
 *   A write-through hit therefore costs a commit; misses do not.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "vol.h"

static inline pthread_rwlock_t *
stripe (hc_volume *v, uint64_t blk)
{
  return &v->stripes[blk & (v->nstripes - 1)];
}

static inline uint64_t
fast_off (hc_volume *v, uint32_t c)
{
  return v->sb.data_off + (uint64_t) c * v->bs;
}

static inline void
pin (hc_volume *v, uint32_t c)
{
  atomic_fetch_add_explicit (&v->pins[c], 1, memory_order_acq_rel);
}

static inline void
unpin (hc_volume *v, uint32_t c)
{
  atomic_fetch_sub_explicit (&v->pins[c], 1, memory_order_acq_rel);
}

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
static void
set_sum (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data)
{
  if (!v->sum)
    return;
  __atomic_store_n (&v->sum[c], block_sum (v, c, blk, ++v->sum_gen, data), __ATOMIC_RELAXED);
  hc_meta_record_sum (v, c);
}

/* Whether `data`, read from block c (pinned, mapping blk), is what was
 * written there; with `count`, counts a mismatch (takes the lock). */
static bool
sum_ok (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data, bool count)
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

/* Frees a block taken for an admission that did not happen (caller holds
 * lock).  It never held a durable mapping, so it is reusable now. */
static void
untake (hc_volume *v, uint32_t c)
{
  hc_list_push_head (&v->dir.map, &v->dir.map.free, c);
}

/* The fast tier failed a data write with rc (caller holds lock): the
 * volume is degraded, and tries the fast tier again in a second. */
static void
fast_failed (hc_volume *v, int rc)
{
  v->dir.stats.errors_fast++;
  if (atomic_exchange (&v->degraded, -rc) == 0)
    v->degraded_events++;
  v->degraded_retry_ns = hc_now_ns () + 1000000000ull;
}

/* The fast tier took a data write (caller holds lock). */
static inline void
fast_ok (hc_volume *v)
{
  if (atomic_load_explicit (&v->degraded, memory_order_relaxed))
    atomic_store (&v->degraded, 0);
}

/* The slow tier's data was written, or a write to it was tried (caller
 * holds lock, and the stripes of what was written): the next commit
 * flushes it first, and readahead windows filled before are stale. */
static inline void
slow_changed (hc_volume *v)
{
  v->slow_dirty = true;
  v->slow_gen++;
}

/* Maps free block c to a->origin unless the origin is mapped already
 * (caller holds lock); in that case c goes back to the free list.  Read
 * misses fill under the stripe held shared, so two readers of one block
 * can both fill it: the second must not map it twice.  Returns whether c
 * was installed. */
static bool
install (hc_volume *v, uint32_t c, const struct hc_access *a)
{
  if (hc_dir_find (&v->dir, a->origin) != HC_NIL) {
    untake (v, c);
    return false;
  }
  hc_dir_install (&v->dir, c, a, false);
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
static uint32_t
take_block (hc_volume *v, const struct hc_access *a, enum hc_bypass *why, bool may_wait)
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
static void
maybe_commit_soon (hc_volume *v, bool *commit_now)
{
  if (v->jrec >= 4096) {
    if (v->cleaner_started)
      pthread_cond_signal (&v->wake);
    else
      *commit_now = true;
  }
}

/* Reads the sectors covering [boff, boff+blen) of a block at `base` on tier
 * t into buf (bs bytes, block-relative). */
static int
read_span (hc_volume *v, hc_tier *t, uint64_t base, uint32_t boff, uint32_t blen, uint8_t *buf)
{
  uint32_t s0 = boff & ~(HC_SECTOR_SIZE - 1);
  uint32_t s1 = (boff + blen + HC_SECTOR_SIZE - 1) & ~(HC_SECTOR_SIZE - 1);
  (void) v;
  return hc_tier_read (t, buf + s0, s1 - s0, base + s0);
}

/* ---------------------------------------------------------------------------
 * Read.
 */

/* A request being cut into blocks. */
struct req {
  const struct hc_ioctx *ctx;
  uint64_t off, len; /* the whole request */
  bool seq;          /* past the sequential cutoff */
  bool started;      /* sequential detection done */
  bool around;       /* the fast tier failed a write of this request: go around it */
  uint8_t *bounce;   /* one block, taken on first need (bounce_buf) */
};

/* Should this access go around the fast tier (caller holds lock)? */
static inline bool
around (hc_volume *v, const struct req *r)
{
  return r->around
         || (atomic_load_explicit (&v->degraded, memory_order_relaxed)
             && hc_now_ns () < v->degraded_retry_ns);
}

/* Per-request bookkeeping, done under the first block's lock. */
static void
req_start (hc_volume *v, struct req *r)
{
  if (r->started)
    return;
  r->seq = hc_seq_update (&v->seq, r->ctx && r->ctx->stream ? &r->ctx->stream->seq : NULL, r->off,
                          r->len, v->opts.seq_cutoff);
  v->last_io_ns = hc_now_ns ();
  r->started = true;
}

/* The request's bounce buffer: the volume's spare one if no other request
 * holds it, else a new one. */
static uint8_t *
bounce_buf (hc_volume *v, struct req *r)
{
  if (!r->bounce && !(r->bounce = atomic_exchange (&v->spare_bounce, NULL)))
    r->bounce = aligned_alloc (4096, v->bs);
  return r->bounce;
}

/* Ends the request's use of its bounce buffer: it becomes the volume's
 * spare, unless the volume has one already.  A request costs no allocation
 * while requests needing one do not overlap. */
static void
bounce_done (hc_volume *v, struct req *r)
{
  uint8_t *none = NULL;

  if (r->bounce && !atomic_compare_exchange_strong (&v->spare_bounce, &none, r->bounce))
    free (r->bounce);
  r->bounce = NULL;
}

/* Reads [boff, boff+blen) of cached block c, which the caller pinned (and
 * unpins here).  Returns 0, the error of a dirty block's only copy, or 1 if
 * a clean copy failed: the caller then gives up its stripe, if it holds it,
 * and calls read_around. */
static int
read_cached (hc_volume *v, uint64_t blk, uint32_t c, bool dirty, uint32_t boff, uint32_t blen,
             uint8_t *dst, struct req *r)
{
  int rc;

  if (v->sum) { /* the whole block, to verify it (into dst when it is one) */
    uint8_t *b = blen == v->bs ? dst : bounce_buf (v, r) ? r->bounce : NULL;
    if (!b)
      rc = -ENOMEM;
    else if ((rc = hc_tier_read (v->fast, b, v->bs, fast_off (v, c))) == 0
             && !sum_ok (v, c, blk, b, true)) {
      unpin (v, c);
      return dirty ? -EIO : 1; /* a clean copy: the slow tier has the data */
    } else if (rc == 0 && b != dst)
      memcpy (dst, b + boff, blen);
  } else if (!((boff | blen) & (HC_SECTOR_SIZE - 1)))
    rc = hc_tier_read (v->fast, dst, blen, fast_off (v, c) + boff);
  else if (!bounce_buf (v, r))
    rc = -ENOMEM;
  else if ((rc = read_span (v, v->fast, fast_off (v, c), boff, blen, r->bounce)) == 0)
    memcpy (dst, r->bounce + boff, blen);
  unpin (v, c);
  if (rc == 0 || rc == -ENOMEM)
    return rc;
  hc_lock (&v->lock);
  v->dir.stats.errors_fast++;
  pthread_mutex_unlock (&v->lock);
  return dirty ? rc : 1;
}

/* Reads [boff, boff+blen) of block blk from the slow tier (caller holds
 * its stripe, or needs no consistency with concurrent writes). */
static int
read_slow (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, uint8_t *dst, struct req *r)
{
  int rc;

  if (!((boff | blen) & (HC_SECTOR_SIZE - 1)))
    rc = hc_tier_read (v->slow, dst, blen, (blk << v->bshift) + boff);
  else if (!bounce_buf (v, r))
    rc = -ENOMEM;
  else if ((rc = read_span (v, v->slow, blk << v->bshift, boff, blen, r->bounce)) == 0)
    memcpy (dst, r->bounce + boff, blen);
  return rc;
}

/* The clean cached copy c of blk could not be read: drop it and read the
 * slow tier instead.  The drop takes blk's stripe exclusively, as any
 * change of a mapping does: a writer holding the stripe may have c pinned
 * and be about to move it (caller holds no stripe). */
static int
read_around (hc_volume *v, uint64_t blk, uint32_t c, uint32_t boff, uint32_t blen, uint8_t *dst,
             struct req *r)
{
  hc_wrlock (stripe (v, blk));
  hc_lock (&v->lock);
  if (hc_dir_find (&v->dir, blk) == c && !(v->dir.map.blk[c].meta & HC_M_DIRTY)) {
    hc_dir_invalidate (&v->dir, c);
    hc_meta_record_block (v, c);
  }
  pthread_mutex_unlock (&v->lock);
  int rc = read_slow (v, blk, boff, blen, dst, r);
  pthread_rwlock_unlock (stripe (v, blk));
  return rc;
}

/* Reads part of one block.  A hit needs no stripe: the block is pinned, and
 * a concurrent write goes elsewhere (copy-on-write).  A miss takes the
 * stripe, so that a fill cannot install data older than a concurrent
 * write, and looks again. */
static int
read_block (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, uint8_t *dst,
            struct req *r)
{
  const uint64_t slow_base = blk << v->bshift;
  struct hc_access a;
  enum hc_bypass why = HC_BYPASS_MODE;
  uint32_t c, newc = HC_NIL;
  bool striped = false;
  int rc;

  hc_lock (&v->lock);
  req_start (v, r);
  a = (struct hc_access) { .origin = blk, .hint = hc_vol_resolve (v, blk, r->ctx), .seq = r->seq };
  v->dir.stats.cls[a.hint.cls].bytes[HC_STAT_READ] += blen;
  if (v->mode == HC_MODE_PASSTHROUGH) {
    /* Never around dirty data: a dirty copy is the only one. */
    c = hc_dir_find (&v->dir, blk);
    if (c == HC_NIL || !(v->dir.map.blk[c].meta & HC_M_DIRTY)) {
      v->dir.stats.cls[a.hint.cls].misses[0]++;
      hc_dir_bypass (&v->dir, &a, HC_BYPASS_MODE);
      pthread_mutex_unlock (&v->lock);
      /* The stripe, shared: a write under way there must not be seen half done. */
      hc_rdlock (stripe (v, blk));
      striped = true;
      goto from_slow;
    }
  } else
    c = hc_dir_access (&v->dir, &a);
  /* A miss, or a block being rewritten in place: wait for the stripe. */
  if (c == HC_NIL || (v->dir.map.blk[c].meta & HC_M_WRITING)) {
    pthread_mutex_unlock (&v->lock);
    hc_rdlock (stripe (v, blk));
    striped = true;
    hc_lock (&v->lock);
    c = hc_dir_find (&v->dir, blk); /* filled while we waited? */
  }
  if (c != HC_NIL) {
    bool dirty = (v->dir.map.blk[c].meta & HC_M_DIRTY) != 0;
    pin (v, c);
    pthread_mutex_unlock (&v->lock);
    rc = read_cached (v, blk, c, dirty, boff, blen, dst, r);
    if (striped)
      pthread_rwlock_unlock (stripe (v, blk));
    return rc <= 0 ? rc : read_around (v, blk, c, boff, blen, dst, r);
  }
  if (around (v, r))
    why = HC_BYPASS_ERROR;
  else if (hc_dir_admit (&v->dir, &a, &why) && !v->opts.read_only && bounce_buf (v, r))
    newc = take_block (v, &a, &why, true);
  if (newc == HC_NIL)
    hc_dir_bypass (&v->dir, &a, why);
  pthread_mutex_unlock (&v->lock);

  if (newc != HC_NIL) {
    /* Fill: the whole block from the slow tier, then to the fast tier. */
    uint8_t *b = r->bounce;
    if ((rc = hc_tier_read (v->slow, b, v->bs, slow_base)) < 0) {
      hc_lock (&v->lock);
      untake (v, newc);
      pthread_mutex_unlock (&v->lock);
      pthread_rwlock_unlock (stripe (v, blk));
      return rc;
    }
    memcpy (dst, b + boff, blen);
    rc = hc_tier_write (v->fast, b, v->bs, fast_off (v, newc), 0);
    hc_lock (&v->lock);
    if (rc < 0) {
      untake (v, newc);
      fast_failed (v, rc);
      hc_dir_bypass (&v->dir, &a, HC_BYPASS_ERROR);
    } else if (fast_ok (v), !install (v, newc, &a)) {
      /* Another reader of this block filled it meanwhile (both held the
       * stripe shared): keep theirs, give ours back. */
    } else {
      hc_meta_record_block (v, newc);
      set_sum (v, newc, blk, b);
      v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
    }
    bool commit_now = false;
    maybe_commit_soon (v, &commit_now);
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    return commit_now ? hc_meta_commit (v, false) : 0;
  }

from_slow:
  rc = read_slow (v, blk, boff, blen, dst, r);
  if (striped)
    pthread_rwlock_unlock (stripe (v, blk));
  return rc;
}

/* Reads whole blocks blk … blk+n−1 (n ≤ READ_BATCH) while they are
 * plain hits, in one trip through the volume lock, and each run of them
 * that sits in consecutive cache blocks as one read of the fast tier (a
 * range written in one request usually does: write batches take
 * consecutive free blocks).  Stops at the first block that is not a hit,
 * or is being rewritten in place: read_block takes that one.  Returns the
 * blocks read, or a negative errno. */
#define READ_BATCH 256 /* 1 MiB of 4 KiB blocks */

bool
hc_vol_verify (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data)
{
  return sum_ok (v, c, blk, data, false);
}

/* Whether blocks [i, j) of a run read into dst (block x of the request at
 * dst + x·bs, mapping blk + x) pass their checksums (uncounted: a failed
 * run is read again block by block, which counts). */
static bool
run_sums_ok (hc_volume *v, uint64_t blk, const uint32_t *cs, const uint8_t *dst, unsigned i,
             unsigned j)
{
  for (unsigned x = i; x < j && v->sum; x++)
    if (!sum_ok (v, cs[x], blk + x, dst + ((size_t) x << v->bshift), false))
      return false;
  return true;
}

static long
read_hits (hc_volume *v, uint64_t blk, unsigned n, uint8_t *dst, struct req *r)
{
  uint32_t cs[READ_BATCH];
  bool dirty[READ_BATCH];
  unsigned k = 0;

  /* A large cache's map is out of the CPU's caches: keep the buckets of
   * the next AHEAD blocks loading while looking up one, rather than taking
   * one miss at a time under the lock (the CPU tracks only so many misses
   * at once: prefetching all of them up front measured no better). */
  enum { AHEAD = 16 };
  for (unsigned i = 0; i < n && i < AHEAD; i++)
    hc_map_prefetch (&v->dir.map, blk + i);
  hc_lock (&v->lock);
  req_start (v, r);
  for (; k < n && v->mode != HC_MODE_PASSTHROUGH; k++) {
    if (k + AHEAD < n)
      hc_map_prefetch (&v->dir.map, blk + k + AHEAD);
    uint32_t c = hc_dir_find (&v->dir, blk + k);
    if (c == HC_NIL || (v->dir.map.blk[c].meta & HC_M_WRITING))
      break;
    struct hc_access a = { .origin = blk + k, .hint = hc_vol_resolve (v, blk + k, r->ctx),
                           .seq = r->seq };
    v->dir.stats.cls[a.hint.cls].bytes[HC_STAT_READ] += v->bs;
    hc_dir_hit (&v->dir, c, &a);
    dirty[k] = (v->dir.map.blk[c].meta & HC_M_DIRTY) != 0;
    pin (v, c);
    cs[k] = c;
  }
  pthread_mutex_unlock (&v->lock);

  int rc = 0;
  for (unsigned i = 0, j; i < k; i = j) {
    for (j = i + 1; j < k && cs[j] == cs[j - 1] + 1; j++)
      ;
    if (rc == 0
        && hc_tier_read (v->fast, dst + ((size_t) i << v->bshift), (size_t) (j - i) << v->bshift,
                         fast_off (v, cs[i])) == 0
        && run_sums_ok (v, blk, cs, dst, i, j)) {
      for (unsigned x = i; x < j; x++)
        unpin (v, cs[x]);
      continue;
    }
    /* A failed run (or one after a failure): block by block, as read_block
     * would, so that a clean block's error falls back to the slow tier. */
    for (unsigned x = i; x < j; x++) {
      uint8_t *d = dst + ((size_t) x << v->bshift);
      int e = rc ? (unpin (v, cs[x]), 0)
                 : read_cached (v, blk + x, cs[x], dirty[x], 0, v->bs, d, r);
      if (e == 1)
        e = read_around (v, blk + x, cs[x], 0, v->bs, d, r);
      if (e < 0 && rc == 0)
        rc = e;
    }
  }
  return rc < 0 ? rc : (long) k;
}

/* Takes the stripe of block blk, waiting for it, then those of blk+1 …
 * blk+n−1 (n ≤ v->nstripes, so no stripe twice) while each is free at
 * once, shared or exclusive.  A run never waits while it holds a stripe,
 * so it cannot close a cycle with a thread that holds one and waits: for
 * the cleaner (which skips the blocks whose stripes are held, and may need
 * exactly those to make room), or for a range operation taking every
 * stripe in order.  Returns how many blocks' stripes it took (≥ 1). */
static unsigned
lock_run (hc_volume *v, uint64_t blk, unsigned n, bool excl)
{
  unsigned k = 1;

  excl ? hc_wrlock (stripe (v, blk)) : hc_rdlock (stripe (v, blk));
  while (k < n && (excl ? hc_trywrlock (stripe (v, blk + k))
                        : hc_tryrdlock (stripe (v, blk + k))) == 0)
    k++;
  return k;
}

static void
unlock_run (hc_volume *v, uint64_t blk, unsigned n)
{
  for (unsigned i = n; i-- > 0;)
    pthread_rwlock_unlock (stripe (v, blk + i));
}

/* Readahead for a sequential stream's misses.  A sequential reader (a
 * stream past the sequential cutoff's length, whether the cache then takes
 * its blocks or not) would otherwise cost one slow-tier request per client
 * request; on a disk, or a remote store, a request's cost is mostly its
 * latency, and other readers' misses queue in front of each one.  So, as
 * the kernel's page cache does for files, the stream reads a window ahead
 * of it — 4 requests' worth at first, doubling while the stream keeps to
 * it, up to HC_RA_MAX — and its next misses are read from the window (and
 * filled from there, when admitted).
 *
 * The window is the slow tier's data when it was read, so it is served only
 * while the slow tier has not been written since (v->slow_gen: every slow
 * write, discard and write-back counts, under the lock and the stripes of
 * what it wrote), and only for blocks the cache does not hold (read_misses
 * stops at a cached block before this is called — a dirty copy is newer
 * than the slow tier).  The caller holds the stripes of blocks [blk,
 * blk+k), so no write to them is under way, and the count is read after
 * taking them: a window older than a write to any of them is not served.
 * Reads blocks [blk, blk+k) into dst; returns 0 or a negative errno. */
static int
read_ahead (hc_volume *v, struct req *r, uint64_t blk, unsigned k, uint8_t *dst)
{
  struct hc_readahead *ra = &r->ctx->stream->ra;
  const size_t len = (size_t) k << v->bshift;
  const uint32_t max = HC_RA_MAX >> v->bshift;
  int rc;

  hc_lock (&ra->lock);
  if (!ra->n && !r->seq) { /* not a sequential stream: the request alone */
    pthread_mutex_unlock (&ra->lock);
    return hc_tier_read (v->slow, dst, len, blk << v->bshift);
  }
  hc_lock (&v->lock);
  uint64_t gen = v->slow_gen;
  pthread_mutex_unlock (&v->lock);
  if (ra->n && ra->gen == gen && blk >= ra->blk && blk + k <= ra->blk + ra->n) {
    memcpy (dst, ra->buf + ((blk - ra->blk) << v->bshift), len);
    pthread_mutex_unlock (&ra->lock);
    return 0;
  }
  bool goes_on = ra->n && blk == ra->blk + ra->n;
  if ((!r->seq && !goes_on) || k >= max
      || (!ra->buf && !(ra->buf = aligned_alloc (4096, HC_RA_MAX)))) {
    pthread_mutex_unlock (&ra->lock);
    return hc_tier_read (v->slow, dst, len, blk << v->bshift);
  }
  ra->size = goes_on ? (ra->size < max / 2 ? 2 * ra->size : max) : (4 * k < max ? 4 * k : max);
  uint64_t n = ra->size > k ? ra->size : k;
  if (n > v->nslow - blk)
    n = v->nslow - blk;
  ra->n = 0;
  rc = hc_tier_read (v->slow, ra->buf, (size_t) n << v->bshift, blk << v->bshift);
  if (rc == 0) {
    ra->blk = blk;
    ra->n = (uint32_t) n;
    ra->gen = gen;
    memcpy (dst, ra->buf, len);
  }
  pthread_mutex_unlock (&ra->lock);
  /* The window failed (perhaps past what was asked): the request alone. */
  return rc == 0 ? 0 : hc_tier_read (v->slow, dst, len, blk << v->bshift);
}

/* Reads whole blocks blk … blk+n−1 (n ≤ MISS_BATCH) while they are misses:
 * the run is one read of the slow tier, straight into the caller's buffer,
 * and the blocks the policy admits are written to the fast tier from there,
 * each run of them that got consecutive cache blocks as one write, and
 * installed in one trip through the volume lock.  A miss of many blocks
 * therefore costs one slow-tier round trip, admitted or declined, rather
 * than one per block.  The run's stripes are held shared throughout, as
 * read_block holds one: no write can land between the slow read and the
 * install.  Blocks are taken without waiting for the cleaner (it skips
 * blocks whose stripes are held, and this holds many): with no clean room,
 * a block is declined as full.  Stops before the first block that is
 * cached (or dirty in pass-through): read_hits or read_block takes it.
 * Returns the blocks read (0: the first was cached after all), or a
 * negative errno. */
#define MISS_BATCH 256 /* at most v->nstripes */

static long
read_misses (hc_volume *v, uint64_t blk, unsigned n, uint8_t *dst, struct req *r)
{
  uint32_t newc[MISS_BATCH];
  struct hc_access a[MISS_BATCH];
  unsigned k, admitted = 0;
  int rc;

  enum { AHEAD = 16 }; /* the map's buckets loading ahead, as in read_hits */
  for (unsigned i = 0; i < n && i < AHEAD; i++)
    hc_map_prefetch (&v->dir.map, blk + i);
  n = lock_run (v, blk, n, false);
  hc_lock (&v->lock);
  req_start (v, r);
  bool pass = v->mode == HC_MODE_PASSTHROUGH;
  for (k = 0; k < n; k++) {
    if (k + AHEAD < n)
      hc_map_prefetch (&v->dir.map, blk + k + AHEAD);
    if (hc_dir_find (&v->dir, blk + k) != HC_NIL)
      break;
    a[k] = (struct hc_access) { .origin = blk + k, .hint = hc_vol_resolve (v, blk + k, r->ctx),
                                .seq = r->seq };
    v->dir.stats.cls[a[k].hint.cls].bytes[HC_STAT_READ] += v->bs;
    enum hc_bypass why = HC_BYPASS_MODE;
    newc[k] = HC_NIL;
    if (pass) {
      v->dir.stats.cls[a[k].hint.cls].misses[0]++;
    } else {
      hc_dir_miss (&v->dir, &a[k]);
      if (around (v, r))
        why = HC_BYPASS_ERROR;
      else if (hc_dir_admit (&v->dir, &a[k], &why) && !v->opts.read_only)
        newc[k] = take_block (v, &a[k], &why, false);
    }
    if (newc[k] == HC_NIL)
      hc_dir_bypass (&v->dir, &a[k], why);
    else
      admitted++;
  }
  pthread_mutex_unlock (&v->lock);

  if (k < n)
    for (unsigned i = n; i-- > k;)
      pthread_rwlock_unlock (stripe (v, blk + i));
  if (k == 0)
    return 0;
  rc = r->ctx && r->ctx->stream
           ? read_ahead (v, r, blk, k, dst)
           : hc_tier_read (v->slow, dst, (size_t) k << v->bshift, blk << v->bshift);
  if (rc < 0 || admitted == 0) {
    if (rc < 0 && admitted) {
      hc_lock (&v->lock);
      for (unsigned i = 0; i < k; i++)
        if (newc[i] != HC_NIL)
          untake (v, newc[i]);
      pthread_mutex_unlock (&v->lock);
    }
    unlock_run (v, blk, k);
    return rc < 0 ? rc : (long) k;
  }

  /* Fill: each run of admitted blocks in consecutive cache blocks is one
   * write, and its blocks are installed (or given back) under one lock. */
  bool commit_now = false;
  for (unsigned i = 0, j; i < k; i = j) {
    if (newc[i] == HC_NIL) {
      j = i + 1;
      continue;
    }
    for (j = i + 1; j < k && newc[j] != HC_NIL && newc[j] == newc[j - 1] + 1; j++)
      ;
    const uint8_t *src = dst + ((size_t) i << v->bshift);
    int w = around (v, r) ? -EIO
                          : hc_tier_write (v->fast, src, (size_t) (j - i) << v->bshift,
                                           fast_off (v, newc[i]), 0);
    hc_lock (&v->lock);
    if (w < 0 && !r->around)
      fast_failed (v, w);
    else if (w == 0)
      fast_ok (v);
    for (unsigned x = i; x < j; x++) {
      if (w < 0) {
        untake (v, newc[x]);
        hc_dir_bypass (&v->dir, &a[x], HC_BYPASS_ERROR);
      } else if (install (v, newc[x], &a[x])) {
        hc_meta_record_block (v, newc[x]);
        set_sum (v, newc[x], blk + x, dst + ((size_t) x << v->bshift));
        v->dir.stats.cls[a[x].hint.cls].flash_bytes_written += v->bs;
      }
    }
    maybe_commit_soon (v, &commit_now);
    pthread_mutex_unlock (&v->lock);
    if (w < 0)
      r->around = true; /* the rest of the request goes around */
  }
  unlock_run (v, blk, k);
  rc = commit_now ? hc_meta_commit (v, false) : 0;
  return rc < 0 ? rc : (long) k;
}

/* ---------------------------------------------------------------------------
 * Write.
 */

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
  struct batch held = { .n = 0, .hold = true };

  r->around = true;
  int rc = write_block (v, blk, boff, blen, src, flags, r, commit_after, bt ? bt : &held);
  unlock_stripe (v, blk, bt);
  return rc;
}

/* Writes one block's part [boff, boff+blen).  With bt (a whole block in a
 * batch, its stripe held by the caller), a plain copy-on-write is left in
 * bt for flush_batch to finish. */
static int
write_block (hc_volume *v, uint64_t blk, uint32_t boff, uint32_t blen, const uint8_t *src,
             unsigned flags, struct req *r, bool *commit_after, struct batch *bt)
{
  const bool full = boff == 0 && blen == v->bs;
  const bool sector_aligned = !((boff | blen) & (HC_SECTOR_SIZE - 1));
  struct hc_access a;
  enum hc_bypass why = HC_BYPASS_MODE;
  uint32_t c, newc = HC_NIL;
  bool to_slow, dirty_new = false, commit_first = false, old_dirty = false;
  bool drop_after_slow = false;
  const uint8_t *image = NULL; /* the whole new block, when built */
  int rc = 0;

  uint8_t *bounce = full ? NULL : bounce_buf (v, r); /* partial writes merge */

  if (!full && !bounce)
    return -ENOMEM;
  if (!bt)
    hc_wrlock (stripe (v, blk));
  hc_lock (&v->lock);
  if (v->failed || v->opts.read_only) {
    pthread_mutex_unlock (&v->lock);
    unlock_stripe (v, blk, bt);
    return v->opts.read_only ? -EROFS : -EIO;
  }
  req_start (v, r);
  a = (struct hc_access) { .origin = blk, .hint = hc_vol_resolve (v, blk, r->ctx), .write = true,
                           .seq = r->seq };
  v->dir.stats.cls[a.hint.cls].bytes[HC_STAT_WRITE] += blen;
  enum hc_mode mode = v->mode;
  if (mode == HC_MODE_PASSTHROUGH) {
    c = hc_dir_find (&v->dir, blk);
    v->dir.stats.cls[a.hint.cls].misses[1]++;
    hc_dir_bypass (&v->dir, &a, HC_BYPASS_MODE);
  } else {
    c = hc_dir_access (&v->dir, &a);
  }

  if (c != HC_NIL) {
    old_dirty = (v->dir.map.blk[c].meta & HC_M_DIRTY) != 0;
    /* Pinned, c can be neither evicted nor reused while we work; our
     * stripe keeps it mapped to blk. */
    pin (v, c);
    const bool go_around = around (v, r);
    if (old_dirty && full && mode == HC_MODE_WRITEBACK && !go_around && !v->sum
        && hc_meta_class (v->dir.map.blk[c].meta) == a.hint.cls
        && !(v->dir.map.blk[c].meta & HC_M_FUA)
        && atomic_load_explicit (&v->pins[c], memory_order_acquire) == 1) {
      /* Rewritten in place (see the top of this file): nothing to record.
       * No reader has it pinned, and new ones wait for our stripe. */
      v->dir.map.blk[c].meta |= HC_M_WRITING;
      pthread_mutex_unlock (&v->lock);
      if (bt && !bt->hold) {
        bt->e[bt->n++] = (struct deferred) { .c = c, .newc = c, .src = src, .a = a };
        goto out;
      }
      rc = hc_tier_write (v->fast, src, v->bs, fast_off (v, c), 0);
      hc_lock (&v->lock);
      v->dir.map.blk[c].meta &= ~HC_M_WRITING;
      unpin (v, c);
      if (rc < 0)
        fast_failed (v, rc);
      else {
        fast_ok (v);
        v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
        v->fast_dirty = true;
        note_fua (v, c, flags);
      }
      pthread_mutex_unlock (&v->lock);
      if (rc < 0) /* the copy is half rewritten: the slow tier takes the block, the copy goes */
        return write_around (v, blk, boff, blen, src, flags, r, commit_after, bt);
      goto out;
    }
    if (go_around)
      why = HC_BYPASS_ERROR;
    else if (mode != HC_MODE_PASSTHROUGH)
      newc = take_block (v, &a, &why, !bt);
    if (newc == HC_NIL) {
      if (mode != HC_MODE_PASSTHROUGH)
        hc_dir_bypass (&v->dir, &a, why);
      /* No room to copy on write: the block leaves the cache.  Its data is
       * needed first if this write is partial. */
      if (!full) {
        pthread_mutex_unlock (&v->lock);
        rc = hc_tier_read (v->fast, bounce, v->bs, fast_off (v, c));
        if (rc == 0 && !sum_ok (v, c, blk, bounce, true))
          rc = -EIO;
        hc_lock (&v->lock);
        if (rc < 0 && old_dirty) {
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
      to_slow = true;
      /* A clean copy must be gone (durably) before the slow tier changes;
       * a dirty one must stay until the slow tier has the new data, and its
       * mapping must be durable first (an older clean copy may be the
       * durable one otherwise). */
      commit_first = true;
      if (old_dirty) {
        drop_after_slow = true;
      } else {
        hc_dir_invalidate (&v->dir, c);
        hc_meta_record_block (v, c);
        unpin (v, c);
      }
    } else {
      dirty_new = true; /* clean only once the slow tier has it, if ever */
      to_slow = mode != HC_MODE_WRITEBACK;
      commit_first = to_slow;
    }
  } else if (mode == HC_MODE_WRITEAROUND || mode == HC_MODE_PASSTHROUGH) {
    if (mode == HC_MODE_WRITEAROUND)
      hc_dir_bypass (&v->dir, &a, HC_BYPASS_MODE);
    to_slow = true;
  } else {
    if (!full)
      why = HC_BYPASS_PARTIAL;
    else if (around (v, r))
      why = HC_BYPASS_ERROR;
    else if (hc_dir_admit (&v->dir, &a, &why))
      newc = take_block (v, &a, &why, !bt);
    if (newc == HC_NIL) {
      hc_dir_bypass (&v->dir, &a, why);
      to_slow = true;
    } else {
      dirty_new = true;
      to_slow = mode == HC_MODE_WRITETHROUGH;
    }
  }
  /* The slow tier must not change under a clean copy whose unmapping is
   * not durable yet (an eviction or invalidation since the last commit). */
  if (to_slow && hc_vol_unmap_pending (v, blk))
    commit_first = true;
  pthread_mutex_unlock (&v->lock);

  /* A plain copy-on-write of a whole block: the batch finishes it. */
  if (bt && !bt->hold && newc != HC_NIL && full) {
    bt->e[bt->n++] = (struct deferred) { .c = c, .newc = newc, .src = src, .a = a,
                                         .to_slow = to_slow, .commit_first = commit_first };
    goto out;
  }
  /* A whole block for the slow tier alone (declined, written around, passed
   * through): the batch writes it with its neighbours. */
  if (bt && !bt->hold && c == HC_NIL && to_slow && full) {
    bt->e[bt->n++] = (struct deferred) { .c = HC_NIL, .newc = HC_NIL, .src = src, .a = a,
                                         .to_slow = true, .commit_first = commit_first,
                                         .slow_pending = true };
    goto out;
  }

  /* Build the new block image where a whole block is needed. */
  if (newc != HC_NIL) {
    if (full) {
      image = src;
    } else {
      rc = hc_tier_read (v->fast, bounce, v->bs, fast_off (v, c));
      if (rc == 0 && !sum_ok (v, c, blk, bounce, true))
        rc = -EIO;
      if (rc < 0 && !old_dirty)
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
        fast_failed (v, rc);
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
    hc_lock (&v->lock);
    fast_ok (v);
    if (c != HC_NIL) {
      hc_dir_relocate (&v->dir, c, newc);
      hc_meta_record_block (v, c);
      unpin (v, c);
    } else {
      hc_dir_install (&v->dir, newc, &a, false);
    }
    if (dirty_new)
      hc_dir_set_dirty (&v->dir, newc, a.hint.cls);
    hc_meta_record_block (v, newc);
    set_sum (v, newc, blk, image);
    v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
    note_fua (v, newc, flags);
    pthread_mutex_unlock (&v->lock);
  }

  if (to_slow) {
    if (commit_first && (rc = hc_meta_commit (v, false)) < 0)
      goto out;
    if (image && old_dirty)
      /* The dirty block's other bytes too: they are not on the slow tier,
       * and the block is about to be clean (written through) or gone. */
      rc = write_slow_span (v, blk, 0, v->bs, image, flags);
    else if (image)
      rc = write_slow_span (v, blk, boff, blen, image, flags);
    else if (sector_aligned)
      rc = hc_tier_write (v->slow, src, blen, (blk << v->bshift) + boff,
                          (flags & HC_VOL_FUA) ? HC_TIER_FUA : 0);
    else if ((rc = read_span (v, v->slow, blk << v->bshift, boff, blen, bounce)) == 0) {
      memcpy (bounce + boff, src, blen);
      rc = write_slow_span (v, blk, boff, blen, bounce, flags);
    }
    if (drop_after_slow) {
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
    if (rc == 0 && newc != HC_NIL && hc_dir_find (&v->dir, blk) == newc) {
      hc_dir_set_clean (&v->dir, newc);
      hc_meta_record_block (v, newc);
    }
    pthread_mutex_unlock (&v->lock);
  }
out:
  hc_lock (&v->lock);
  maybe_commit_soon (v, commit_after);
  if (flags & HC_VOL_FUA)
    *commit_after = true;
  pthread_mutex_unlock (&v->lock);
  unlock_stripe (v, blk, bt);
  return rc;
}

/* The slow tier's part of a batch, once its new copies are on the fast
 * tier and recorded (dirty): one commit if any block needs it, then each
 * run of blocks consecutive in the volume and in the request as one
 * slow-tier write, then the write-through copies clean again.  A failed
 * slow write leaves its copies dirty (the cleaner writes them back) and
 * fails the request, as write_block does.  Returns 0 or the first error. */
static int
flush_slow (hc_volume *v, struct batch *bt)
{
  bool any = false, commit = false;
  int rc = 0;

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
      if (bt->e[k].newc != HC_NIL && hc_dir_find (&v->dir, bt->e[k].a.origin) == bt->e[k].newc) {
        hc_dir_set_clean (&v->dir, bt->e[k].newc);
        hc_meta_record_block (v, bt->e[k].newc);
      }
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
flush_batch (hc_volume *v, struct batch *bt, struct req *r, bool *commit_after)
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
    hc_lock (&v->lock);
    if (w < 0)
      fast_failed (v, w);
    else if (!skip)
      fast_ok (v);
    for (unsigned k = i; k < j; k++) {
      struct deferred *d = &bt->e[k];
      if (d->c == d->newc) { /* rewritten in place */
        v->dir.map.blk[d->c].meta &= ~HC_M_WRITING;
        unpin (v, d->c);
        if (!failed) {
          v->dir.stats.cls[d->a.hint.cls].flash_bytes_written += v->bs;
          v->fast_dirty = true;
          note_fua (v, d->c, bt->flags);
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
        set_sum (v, d->newc, d->a.origin, d->src);
        v->dir.stats.cls[d->a.hint.cls].flash_bytes_written += v->bs;
        note_fua (v, d->newc, bt->flags);
        d->slow_pending = d->to_slow;
      }
    }
    pthread_mutex_unlock (&v->lock);
    if (failed) {
      /* Each block again, around the fast tier (a copy rewritten in place
       * halfway is dropped after the slow tier has the block). */
      struct batch held = { .n = 0, .hold = true };
      r->around = true;
      for (unsigned k = i; k < j; k++) {
        int e = write_block (v, bt->e[k].a.origin, 0, v->bs, bt->e[k].src, bt->flags, r,
                             commit_after, &held);
        if (e < 0 && rc == 0)
          rc = e;
      }
    }
  }
  int e = flush_slow (v, bt);
  bt->n = 0;
  return rc < 0 ? rc : e;
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
  *np = n = lock_run (v, blk, n, true);
  for (unsigned i = 0; i < n && rc == 0; i++)
    rc = write_block (v, blk + i, 0, v->bs, src + (size_t) i * v->bs, flags, r, commit_after, bt);
  int frc = flush_batch (v, bt, r, commit_after);
  unlock_run (v, blk, n);
  free (bt);
  return rc < 0 ? rc : frc;
}

/* ---------------------------------------------------------------------------
 * Requests.
 */

static int
check_range (hc_volume *v, uint64_t off, uint64_t len)
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
static int64_t
tail_io (hc_volume *v, uint8_t *dst, const uint8_t *src, uint64_t len, uint64_t off,
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
  src ? hc_wrlock (stripe (v, v->nslow)) : hc_rdlock (stripe (v, v->nslow));
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

int
hc_volume_read (hc_volume *v, void *buf, size_t len, uint64_t off, const struct hc_ioctx *ctx)
{
  struct req r = { .ctx = ctx, .off = off, .len = len };
  uint8_t *dst = buf;
  int rc = check_range (v, off, len);
  int64_t head = rc < 0 ? rc : tail_io (v, dst, NULL, len, off, 0);
  const unsigned miss_max = v->nstripes < MISS_BATCH ? v->nstripes : MISS_BATCH;

  if (head < 0)
    return (int) head;
  len = (uint64_t) head;
  while (rc == 0 && len) {
    uint64_t blk = off >> v->bshift;
    uint32_t boff = (uint32_t) (off & (v->bs - 1));
    uint32_t blen = v->bs - boff < len ? v->bs - boff : (uint32_t) len;
    uint64_t whole = boff ? 0 : len >> v->bshift;
    long got = 0;
    if (whole >= 2
        && ((got = read_hits (v, blk, whole < READ_BATCH ? (unsigned) whole : READ_BATCH, dst, &r))
            || (got = read_misses (v, blk, whole < miss_max ? (unsigned) whole : miss_max, dst,
                                   &r)))) {
      rc = got < 0 ? (int) got : 0;
      blen = got < 0 ? 0 : (uint32_t) got << v->bshift;
    } else
      rc = read_block (v, blk, boff, blen, dst, &r);
    dst += blen;
    off += blen;
    len -= blen;
  }
  bounce_done (v, &r);
  return rc;
}

int
hc_volume_write (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags,
                 const struct hc_ioctx *ctx)
{
  struct req r = { .ctx = ctx, .off = off, .len = len };
  const uint8_t *src = buf;
  bool commit = false;
  int rc = check_range (v, off, len);

  if (rc < 0)
    return rc;
  if (flags & ~(unsigned) HC_VOL_FUA)
    return -EINVAL;
  if (len == 0)
    return (flags & HC_VOL_FUA) ? hc_volume_flush (v) : 0;
  int64_t head = tail_io (v, NULL, src, len, off, flags);
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
  bounce_done (v, &r);
  if (rc == 0 && commit)
    rc = hc_meta_commit (v, false);
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

void
hc_vol_lock_stripes (hc_volume *v)
{
  for (unsigned i = 0; i < v->nstripes; i++)
    hc_wrlock (&v->stripes[i]);
}

void
hc_vol_unlock_stripes (hc_volume *v)
{
  for (unsigned i = v->nstripes; i-- > 0;)
    pthread_rwlock_unlock (&v->stripes[i]);
}

/* Drops the cached blocks of volume blocks [b0, b1) that are dirty (or
 * clean, as `dirty` says) (caller holds lock and all stripes).  Returns how
 * many were dropped. */
static uint64_t
drop_range (hc_volume *v, uint64_t b0, uint64_t b1, bool dirty)
{
  struct hc_directory *d = &v->dir;
  uint64_t n = 0;

  for (uint64_t b = b0, c = 0; b1 - b0 <= d->map.n ? b < b1 : c < d->map.n; b++, c++) {
    uint32_t k = b1 - b0 <= d->map.n ? hc_dir_find (d, b) : (uint32_t) c;
    uint64_t w = k == HC_NIL ? 0 : d->map.blk[k].meta;
    if (!(w & HC_M_VALID) || hc_meta_origin (w) < b0 || hc_meta_origin (w) >= b1
        || ((w & HC_M_DIRTY) != 0) != dirty)
      continue;
    hc_dir_invalidate (d, k);
    hc_meta_record_block (v, k);
    n++;
  }
  return n;
}

/* Discard (zero = false) or zero a range: whole blocks leave the cache and
 * the slow tier discards or zeroes them; partial edge blocks are written
 * with zeros through the write path. */
static int
range_op (hc_volume *v, uint64_t off, uint64_t len, unsigned flags, const struct hc_ioctx *ctx,
          bool zero)
{
  uint64_t b0 = (off + v->bs - 1) >> v->bshift, b1 = (off + len) >> v->bshift;
  int rc = check_range (v, off, len);
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
      rc = hc_volume_write (v, zeros, head_end - off, off, 0, ctx);
    uint64_t tail_start = b1 << v->bshift;
    if (rc == 0 && b0 <= b1 && tail_start < off + len)
      rc = hc_volume_write (v, zeros, off + len - tail_start, tail_start, 0, ctx);
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
  return range_op (v, off, len, 0, ctx, false);
}

int
hc_volume_zero (hc_volume *v, uint64_t off, uint64_t len, unsigned flags,
                const struct hc_ioctx *ctx)
{
  if (flags & ~(unsigned) HC_VOL_FUA)
    return -EINVAL;
  return range_op (v, off, len, flags, ctx, true);
}

/* ---------------------------------------------------------------------------
 * Advice, prefetch and write-back of single blocks.
 */

/* Brings block blk into the cache for willneed advice.  A prefetch never
 * waits for room: it runs on the cleaner thread (which would wait for
 * itself) and competes with requests, so when no block is free or clean
 * it gives up.  Returns 1 (cached now or already), 0 (no room), or an
 * error. */
int
hc_vol_prefetch_block (hc_volume *v, uint64_t blk, struct hc_hint hint)
{
  struct hc_access a = { .origin = blk, .hint = hint };
  enum hc_bypass why;
  uint32_t c;
  uint8_t *buf;
  int rc;

  a.hint.advice = HC_ADVICE_WILLNEED;
  hc_wrlock (stripe (v, blk));
  hc_lock (&v->lock);
  if ((c = hc_dir_find (&v->dir, blk)) != HC_NIL) {
    hc_dir_protect (&v->dir, c);
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    return 1;
  }
  if (v->mode == HC_MODE_PASSTHROUGH || v->failed || !hc_dir_admit (&v->dir, &a, &why)) {
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    return 1; /* not admitted: as good as done */
  }
  if ((c = take_block (v, &a, &why, false)) == HC_NIL) {
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    return 0;
  }
  pthread_mutex_unlock (&v->lock);
  if (!(buf = aligned_alloc (4096, v->bs)))
    rc = -ENOMEM;
  else if ((rc = hc_tier_read (v->slow, buf, v->bs, blk << v->bshift)) == 0)
    rc = hc_tier_write (v->fast, buf, v->bs, fast_off (v, c), 0);
  hc_lock (&v->lock);
  if (rc < 0) {
    untake (v, c);
  } else if (install (v, c, &a)) {
    v->dir.map.blk[c].meta |= HC_M_HINTED;
    hc_meta_record_block (v, c);
    set_sum (v, c, blk, buf);
    v->dir.stats.prefetched++;
    v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
  }
  pthread_mutex_unlock (&v->lock);
  pthread_rwlock_unlock (stripe (v, blk));
  free (buf);
  return rc < 0 ? rc : 1;
}

/* Writes back dirty block c.  The slow tier must not change while an
 * older clean copy of the block may still be the durable mapping (see the
 * top of this file): a copy-on-write leaves the old copy's unmapping in
 * the set of unmappings not yet durable until a commit, so a block whose
 * origin is in that set waits for a commit first.  With `try`, a block
 * whose stripe is busy is skipped rather than waited for (the cleaner must
 * not wait on a writer that waits on the cleaner). */
int
hc_vol_writeback (hc_volume *v, uint32_t c, bool try)
{
  uint64_t blk;
  uint8_t *buf;
  int rc;

  hc_lock (&v->lock);
  uint64_t w = v->dir.map.blk[c].meta;
  pthread_mutex_unlock (&v->lock);
  if (!(w & HC_M_VALID) || !(w & HC_M_DIRTY))
    return 0;
  blk = hc_meta_origin (w);
  for (int attempt = 0;; attempt++) {
    if (try) {
      if (hc_trywrlock (stripe (v, blk)) != 0)
        return 0;
    } else {
      hc_wrlock (stripe (v, blk));
    }
    hc_lock (&v->lock);
    if (hc_dir_find (&v->dir, blk) != c || !(v->dir.map.blk[c].meta & HC_M_DIRTY)) {
      pthread_mutex_unlock (&v->lock);
      pthread_rwlock_unlock (stripe (v, blk));
      return 0; /* it moved or was cleaned meanwhile */
    }
    if (!hc_vol_unmap_pending (v, blk))
      break;
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    /* Each commit makes durable what was unmapped before it; only a new
     * write to this very block can add it again. */
    if (attempt == 3)
      return 0;
    if ((rc = hc_meta_commit (v, false)) < 0)
      return rc;
  }
  pin (v, c);
  pthread_mutex_unlock (&v->lock);
  if (!(buf = aligned_alloc (4096, v->bs)))
    rc = -ENOMEM;
  else if ((rc = hc_tier_read (v->fast, buf, v->bs, fast_off (v, c))) == 0)
    rc = sum_ok (v, c, blk, buf, true) ? hc_tier_write (v->slow, buf, v->bs, blk << v->bshift, 0)
                                       : -EIO; /* never spread a corrupt copy */
  free (buf);
  hc_lock (&v->lock);
  unpin (v, c);
  slow_changed (v);
  if (rc == 0) {
    v->cleaned++;
    hc_dir_set_clean (&v->dir, c);
    hc_meta_record_block (v, c);
  } else {
    v->dir.stats.errors_fast++;
  }
  pthread_mutex_unlock (&v->lock);
  pthread_rwlock_unlock (stripe (v, blk));
  return rc < 0 ? rc : 1;
}

/* A class hint for blocks [b0, b1) applies to what is already cached there
 * too (caller holds lock): each cached block takes the class, recorded in
 * the journal with its entry.  Walks the range or, when it is larger than
 * the cache, the cache. */
static void
reclass_range (hc_volume *v, uint64_t b0, uint64_t b1, unsigned cls)
{
  struct hc_map *m = &v->dir.map;

  if (b1 - b0 <= m->n) {
    for (uint64_t b = b0; b < b1; b++) {
      uint32_t c = hc_dir_find (&v->dir, b);
      if (c != HC_NIL && hc_meta_class (m->blk[c].meta) != cls) {
        hc_dir_reclass (&v->dir, c, cls);
        hc_meta_record_block (v, c);
      }
    }
    return;
  }
  for (uint32_t c = 0; c < m->n; c++) {
    uint64_t w = m->blk[c].meta;
    if ((w & HC_M_VALID) && hc_meta_origin (w) >= b0 && hc_meta_origin (w) < b1
        && hc_meta_class (w) != cls) {
      hc_dir_reclass (&v->dir, c, cls);
      hc_meta_record_block (v, c);
    }
  }
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

int
hc_volume_unadvise (hc_volume *v, uint64_t off, uint64_t len)
{
  return hc_volume_unadvise_from (v, off, len, HC_SOURCE_ADMIN);
}

int
hc_volume_unadvise_from (hc_volume *v, uint64_t off, uint64_t len, unsigned source)
{
  uint64_t s0, s1;
  int rc = check_range (v, off, len);

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

int
hc_volume_advise_from (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint,
                       unsigned source)
{
  uint64_t s0, s1, b0, b1;
  unsigned cls = HC_RANGE_KEEP, advice = HC_RANGE_KEEP;
  int rc = check_range (v, off, len);

  if (rc < 0 || hc_hint_check (hint) < 0 || source >= HC_SOURCE_COUNT)
    return -EINVAL;
  if (len == 0)
    return 0;
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
  if (hint.advice == HC_ADVICE_DONTNEED || hint.advice == HC_ADVICE_WILLNEED)
    advice = hint.advice;
  else if (hint.advice == HC_ADVICE_NORMAL)
    advice = 0;

  hc_lock (&v->lock);
  if (cls != HC_RANGE_KEEP || advice != HC_RANGE_KEEP) {
    if (v->opts.read_only) {
      pthread_mutex_unlock (&v->lock);
      return -EROFS;
    }
    if ((rc = hc_ranges_set (&v->ranges, s0, s1, cls, advice, source)) < 0) {
      pthread_mutex_unlock (&v->lock);
      return rc;
    }
    hc_meta_record_range (v, s0, s1, false, source, cls, advice);
    if (cls != HC_RANGE_KEEP)
      reclass_range (v, b0, b1, cls);
  }
  if (hint.advice == HC_ADVICE_DONTNEED) {
    /* The range's blocks or the cache's, whichever are fewer. */
    if (b1 - b0 <= v->dir.map.n) {
      for (uint64_t b = b0; b < b1; b++) {
        uint32_t c = hc_dir_find (&v->dir, b);
        if (c != HC_NIL)
          hc_dir_demote (&v->dir, c);
      }
    } else {
      for (uint32_t c = 0; c < v->dir.map.n; c++) {
        uint64_t w = v->dir.map.blk[c].meta;
        if ((w & HC_M_VALID) && hc_meta_origin (w) >= b0 && hc_meta_origin (w) < b1)
          hc_dir_demote (&v->dir, c);
      }
    }
  } else if (hint.advice == HC_ADVICE_WILLNEED && b0 < b1) {
    queue_prefetch (v, b0, b1, hint);
    pthread_cond_signal (&v->wake);
  }
  pthread_mutex_unlock (&v->lock);

  if (hint.advice == HC_ADVICE_EVICT) {
    /* Write back what is dirty, then drop the range now. */
    rc = hc_meta_commit (v, false);
    for (uint64_t b = b0; b < b1 && rc >= 0; b++) {
      hc_lock (&v->lock);
      uint32_t c = hc_dir_find (&v->dir, b);
      pthread_mutex_unlock (&v->lock);
      if (c != HC_NIL)
        rc = hc_vol_writeback (v, c, false);
      if (rc >= 0 && c != HC_NIL) {
        hc_wrlock (stripe (v, b));
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
    if (rc >= 0)
      rc = hc_meta_commit (v, false);
  } else if (hint.advice == HC_ADVICE_WILLNEED && !v->cleaner_started) {
    /* No background thread: prefetch now. */
    rc = hc_vol_run_prefetch (v, UINT64_MAX);
  }
  return rc < 0 ? rc : 0;
}

int
hc_vol_run_prefetch (hc_volume *v, uint64_t budget)
{
  int rc = 0;

  hc_lock (&v->lock);
  while (v->nprefetch && budget-- && !v->stop) {
    struct hc_prefetch *p = &v->prefetch[0];
    uint64_t blk = p->blk++;
    struct hc_hint hint = p->hint;
    v->prefetch_blocks--;
    if (--p->n == 0)
      memmove (v->prefetch, v->prefetch + 1, --v->nprefetch * sizeof *v->prefetch);
    pthread_mutex_unlock (&v->lock);
    int r = hc_vol_prefetch_block (v, blk, hint);
    hc_lock (&v->lock);
    if (r <= 0) {
      v->nprefetch = 0;
      v->prefetch_blocks = 0;
      rc = r;
      break;
    }
  }
  pthread_mutex_unlock (&v->lock);
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

uint32_t
hc_vol_reclaim (hc_volume *v, uint32_t want)
{
  uint32_t evicted = 0, free_now;

  hc_lock (&v->lock);
  while (v->dir.map.free.count + v->dir.map.pending.count + evicted < want) {
    uint32_t c = hc_dir_evict (&v->dir, HC_CLASS_COUNT, hc_vol_evictable, v);
    if (c == HC_NIL)
      break;
    hc_meta_record_block (v, c);
    evicted++;
  }
  bool need = v->dir.map.pending.count > 0;
  pthread_mutex_unlock (&v->lock);
  /* The commit frees what was pending when it began; blocks freed since
   * wait for the next one (their release is not durable yet). */
  if (need)
    hc_meta_commit (v, false);
  hc_lock (&v->lock);
  free_now = v->dir.map.free.count;
  pthread_mutex_unlock (&v->lock);
  return free_now;
}
