/* The read path: hits, misses, runs of each, and readahead.
 *
 * A hit needs no stripe: its block is pinned, and a concurrent write goes
 * elsewhere (copy-on-write, write.c).  A miss takes its stripe shared, so
 * that a fill cannot install data older than a concurrent write.  Whole
 * blocks, one or many, go by runs: a run of hits is read with as few fast
 * tier reads as its cache blocks allow (read_hits), a run of misses is one
 * slow-tier read, filled to the fast tier in runs, in the background where
 * the volume has a filler thread (read_misses, fill.c), and a
 * sequential stream's misses are served from a readahead window
 * (read_ahead).  Part of a block, and a block being rewritten in place,
 * go alone (read_block).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

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
    uint8_t *b = blen == v->bs ? dst : hc_vol_bounce (v, r) ? r->bounce : NULL;
    if (!b)
      rc = -ENOMEM;
    else if ((rc = hc_tier_read (v->fast, b, v->bs, fast_off (v, c))) == 0
             && !hc_vol_sum_ok (v, c, blk, b, true)) {
      unpin (v, c);
      return dirty ? -EIO : 1; /* a clean copy: the slow tier has the data */
    } else if (rc == 0 && b != dst)
      memcpy (dst, b + boff, blen);
  } else if (!((boff | blen) & (HC_SECTOR_SIZE - 1)))
    rc = hc_tier_read (v->fast, dst, blen, fast_off (v, c) + boff);
  else if (!hc_vol_bounce (v, r))
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
  else if (!hc_vol_bounce (v, r))
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
  stripe_wrlock (v, blk);
  hc_lock (&v->lock);
  if (hc_dir_holds (&v->dir, c, blk) && !(v->dir.map.blk[c].meta & HC_M_DIRTY)) {
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
  hc_vol_req_start (v, r);
  a = (struct hc_access) { .origin = blk, .hint = hc_vol_resolve (v, blk, r->ctx), .seq = r->seq,
                           .cont = req_cont (v, r, blk) };
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
  else if (hc_dir_admit (&v->dir, &a, &why) && !v->opts.read_only && hc_vol_bounce (v, r))
    newc = hc_vol_take_block (v, &a, &why, true);
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
      hc_vol_fast_failed (v, rc);
      hc_dir_bypass (&v->dir, &a, HC_BYPASS_ERROR);
    } else if (fast_ok (v), !hc_vol_install (v, newc, &a)) {
      /* Another reader of this block filled it meanwhile (both held the
       * stripe shared): keep theirs, give ours back. */
    } else {
      hc_meta_record_block (v, newc);
      hc_vol_set_sum (v, newc, blk, b);
      v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
    }
    bool commit_now = false;
    hc_vol_commit_soon (v, &commit_now);
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
  return hc_vol_sum_ok (v, c, blk, data, false);
}

/* Whether blocks [i, j) of a run read into dst (block x of the request at
 * dst + x·bs, mapping blk + x) pass their checksums (uncounted: a failed
 * run is read again block by block, which counts). */
static bool
run_sums_ok (hc_volume *v, uint64_t blk, const uint32_t *cs, const uint8_t *dst, unsigned i,
             unsigned j)
{
  for (unsigned x = i; x < j && v->sum; x++)
    if (!hc_vol_sum_ok (v, cs[x], blk + x, dst + ((size_t) x << v->bshift), false))
      return false;
  return true;
}

/* The end of the run of consecutive cache blocks cs[i] … that starts at i
 * (of k). */
static unsigned
run_end (const uint32_t *cs, unsigned i, unsigned k)
{
  unsigned j = i + 1;
  while (j < k && cs[j] == cs[j - 1] + 1)
    j++;
  return j;
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
  hc_vol_req_start (v, r);
  for (uint32_t c = HC_NIL; k < n && v->mode != HC_MODE_PASSTHROUGH; k++) {
    if (k + AHEAD < n)
      hc_map_prefetch (&v->dir.map, blk + k + AHEAD);
    c = hc_dir_find_next (&v->dir, blk + k, c);
    if (c == HC_NIL || (v->dir.map.blk[c].meta & HC_M_WRITING))
      break;
    struct hc_access a = { .origin = blk + k, .hint = hc_vol_resolve (v, blk + k, r->ctx),
                           .seq = r->seq, .cont = req_cont (v, r, blk + k) };
    v->dir.stats.cls[a.hint.cls].bytes[HC_STAT_READ] += v->bs;
    hc_dir_hit (&v->dir, c, &a);
    dirty[k] = (v->dir.map.blk[c].meta & HC_M_DIRTY) != 0;
    cs[k] = c;
  }
  /* Pinned before the lock goes, by runs of consecutive cache blocks. */
  for (unsigned i = 0, j; i < k; i = j) {
    j = run_end (cs, i, k);
    pin_run (v, cs[i], j - i, true);
  }
  pthread_mutex_unlock (&v->lock);

  int rc = 0;
  for (unsigned i = 0, j; i < k; i = j) {
    j = run_end (cs, i, k);
    if (rc == 0
        && hc_tier_read (v->fast, dst + ((size_t) i << v->bshift), (size_t) (j - i) << v->bshift,
                         fast_off (v, cs[i])) == 0
        && run_sums_ok (v, blk, cs, dst, i, j)) {
      pin_run (v, cs[i], j - i, false);
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


/* Window i's range as decided (a shared window), for pick_window. */
static void
publish (hc_volume *v, int i, uint64_t blk, uint64_t n)
{
  if (i < 0)
    return;
  hc_lock (&v->ra.lock);
  v->ra.pub[i].blk = blk;
  v->ra.pub[i].end = blk + n;
  pthread_mutex_unlock (&v->ra.lock);
}

/* The shared window for blocks [blk, blk+k) of I/O without a stream: the
 * one that holds them or that they continue, and of several the one that
 * starts nearest below them (a reader's window grown long may reach into
 * another reader's run, and even end where that run's next request starts:
 * the run's own window started nearer); else, for a sequential run, the
 * least recently used one; else none (-1). */
static int
pick_window (hc_volume *v, uint64_t blk, unsigned k, bool seq)
{
  struct hc_ra_shared *s = &v->ra;
  int pick = -1;

  hc_lock (&s->lock);
  for (int i = 0; i < HC_RA_SHARED; i++)
    if (s->pub[i].end > s->pub[i].blk
        && ((blk >= s->pub[i].blk && blk + k <= s->pub[i].end) || blk == s->pub[i].end)
        && (pick < 0 || s->pub[i].blk > s->pub[pick].blk))
      pick = i;
  if (pick < 0 && seq) {
    pick = 0;
    for (int i = 1; i < HC_RA_SHARED; i++)
      if (s->pub[i].used < s->pub[pick].used)
        pick = i;
  }
  if (pick >= 0)
    s->pub[pick].used = ++s->tick;
  pthread_mutex_unlock (&s->lock);
  return pick;
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
 * The window's other blocks are read under their stripes too (those free
 * at once): a slow-tier read never overlaps a write of the same bytes.
 *
 * A slow tier that reads ahead into a cache of its own (HC_CAP_PREFETCH: a
 * file, through the page cache) is told to read the window instead, and
 * every request is read from the tier directly: a window copied into the
 * stream's buffer would copy every byte twice, once into the window and
 * once out of it, where the tier's cache costs one copy.  The window's
 * bounds and growth are the same; no data is kept, so nothing can be
 * stale.
 *
 * A stream (a file, a process, an NBD connection) has a window of its own
 * for its own run.  Other runs share a few (v->ra): those of I/O without a
 * stream, and those only the volume's run detection sees — an NBD client
 * with several connections may send one reader's requests over all of
 * them in turn (nbdfuse does), and no connection's own run then grows.
 * Such requests are matched to a window by where they fall, as the run
 * detection matches them (seq.h).  Reads blocks [blk, blk+k) into dst;
 * returns 0 or a negative errno. */
static int
read_ahead (hc_volume *v, struct req *r, uint64_t blk, unsigned k, uint8_t *dst)
{
  /* The stream's window serves its own run (and its requests outside any
   * run, which it may hold); a run only the volume's detection sees goes
   * to a shared window. */
  const bool own = r->ctx && r->ctx->stream && (r->seq_own || !r->seq);
  const bool seq = own ? r->seq_own : r->seq;
  const int shared = own ? -1 : pick_window (v, blk, k, seq);
  if (!own && shared < 0)
    return hc_tier_read (v->slow, dst, (size_t) k << v->bshift, blk << v->bshift);
  struct hc_readahead *ra = own ? &r->ctx->stream->ra : &v->ra.w[shared];
  const size_t len = (size_t) k << v->bshift;
  const uint32_t max = HC_RA_MAX >> v->bshift;
  const bool tier_cache = hc_tier_caps (v->slow) & HC_CAP_PREFETCH;
  int rc;

  hc_lock (&ra->lock);
  if (!ra->n && !seq) { /* not a sequential stream: the request alone */
    pthread_mutex_unlock (&ra->lock);
    return hc_tier_read (v->slow, dst, len, blk << v->bshift);
  }
  uint64_t gen = 0;
  if (!tier_cache) { /* a window kept here is stale once the slow tier is written */
    hc_lock (&v->lock);
    gen = v->slow_gen;
    pthread_mutex_unlock (&v->lock);
  }
  if (ra->n && (tier_cache || ra->gen == gen) && blk >= ra->blk && blk + k <= ra->blk + ra->n) {
    if (tier_cache) {
      pthread_mutex_unlock (&ra->lock);
      return hc_tier_read (v->slow, dst, len, blk << v->bshift);
    }
    memcpy (dst, ra->buf + ((blk - ra->blk) << v->bshift), len);
    pthread_mutex_unlock (&ra->lock);
    return 0;
  }
  bool goes_on = ra->n && blk == ra->blk + ra->n;
  if ((!seq && !goes_on) || k >= max
      || (!tier_cache && !ra->buf && !(ra->buf = aligned_alloc (4096, HC_RA_MAX)))) {
    pthread_mutex_unlock (&ra->lock);
    return hc_tier_read (v->slow, dst, len, blk << v->bshift);
  }
  ra->size = goes_on ? (ra->size < max / 2 ? 2 * ra->size : max) : (4 * k < max ? 4 * k : max);
  uint64_t n = ra->size > k ? ra->size : k;
  if (n > v->nslow - blk)
    n = v->nslow - blk;
  if (tier_cache) {
    /* The window is announced, not kept: the tier reads what lies past the
     * request while the request is read. */
    ra->blk = blk;
    ra->n = (uint32_t) n;
    publish (v, shared, blk, n);
    if (n > k)
      hc_tier_prefetch (v->slow, (blk + k) << v->bshift, (n - k) << v->bshift);
    pthread_mutex_unlock (&ra->lock);
    return hc_tier_read (v->slow, dst, len, blk << v->bshift);
  }
  /* The window's blocks past the request are read under their stripes
   * too, shared, each taken only if free at once (never waiting while
   * holding some): the window ends before the first a writer holds. */
  if (n > v->nstripes)
    n = v->nstripes > k ? v->nstripes : k;
  uint64_t held = k;
  while (held < n && hc_tryrdlock (stripe (v, blk + held)) == 0)
    held++;
  n = held;
  ra->n = 0;
  publish (v, shared, blk, n); /* a request for it now waits for our lock */
  rc = hc_tier_read (v->slow, ra->buf, (size_t) n << v->bshift, blk << v->bshift);
  hc_vol_unlock_run (v, blk + k, (unsigned) (n - k));
  if (rc == 0) {
    ra->blk = blk;
    ra->n = (uint32_t) n;
    ra->gen = gen;
    memcpy (dst, ra->buf, len);
  } else
    publish (v, shared, blk, 0);
  pthread_mutex_unlock (&ra->lock);
  /* The window failed (perhaps past what was asked): the request alone. */
  return rc == 0 ? 0 : hc_tier_read (v->slow, dst, len, blk << v->bshift);
}

/* Reads whole blocks blk … blk+n−1 (n ≤ MISS_BATCH) while they are misses:
 * the run is one read of the slow tier, straight into the caller's buffer,
 * and the blocks the policy admits are filled from there (fill.c): on the
 * filler thread, after the caller has its data, where the volume has one;
 * else here, each run of them that got consecutive cache blocks as one
 * write, installed in one trip through the volume lock.  A miss of many
 * blocks therefore costs one slow-tier round trip, admitted or declined,
 * rather than one per block.  The run's stripes are held shared from the
 * read to a fill made here, as read_block holds one: no write can land
 * between the slow read and the install (the filler checks the stripes'
 * generations instead).  Blocks are taken without waiting for the cleaner
 * (it skips blocks whose stripes are held, and this holds many): with no
 * clean room, a block is declined as full.  Stops before the first block that is
 * cached (or dirty in pass-through): read_hits or read_block takes it.
 * Returns the blocks read (0: the first was cached after all), or a
 * negative errno. */
#define MISS_BATCH HC_FILL_MAX /* at most v->nstripes */

static long
read_misses (hc_volume *v, uint64_t blk, unsigned n, uint8_t *dst, struct req *r)
{
  uint32_t newc[MISS_BATCH];
  struct hc_access a[MISS_BATCH];
  unsigned k, admitted = 0;
  bool defer = false;
  int trial = -1, rc;

  enum { AHEAD = 16 }; /* the map's buckets loading ahead, as in read_hits */
  for (unsigned i = 0; i < n && i < AHEAD; i++)
    hc_map_prefetch (&v->dir.map, blk + i);
  n = hc_vol_lock_run (v, blk, n, false);
  hc_lock (&v->lock);
  hc_vol_req_start (v, r);
  bool pass = v->mode == HC_MODE_PASSTHROUGH;
  for (k = 0; k < n; k++) {
    if (k + AHEAD < n)
      hc_map_prefetch (&v->dir.map, blk + k + AHEAD);
    if (hc_dir_find (&v->dir, blk + k) != HC_NIL)
      break;
    a[k] = (struct hc_access) { .origin = blk + k, .hint = hc_vol_resolve (v, blk + k, r->ctx),
                                .seq = r->seq, .cont = req_cont (v, r, blk + k) };
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
        newc[k] = hc_vol_take_block (v, &a[k], &why, false);
    }
    if (newc[k] == HC_NIL)
      hc_dir_bypass (&v->dir, &a[k], why);
    else
      admitted++;
  }
  if (admitted)
    trial = hc_fill_way (v, k, &defer);
  pthread_mutex_unlock (&v->lock);
  /* A trial times what its way changes: the slow read and the fill, or the
   * slow read and the hand-off. */
  const uint64_t t0 = trial >= 0 ? hc_now_precise_ns () : 0;

  if (k < n)
    for (unsigned i = n; i-- > k;)
      pthread_rwlock_unlock (stripe (v, blk + i));
  if (k == 0)
    return 0;
  rc = read_ahead (v, r, blk, k, dst);
  if (rc < 0 || admitted == 0) {
    if (rc < 0 && admitted) {
      hc_lock (&v->lock);
      for (unsigned i = 0; i < k; i++)
        if (newc[i] != HC_NIL)
          untake (v, newc[i]);
      pthread_mutex_unlock (&v->lock);
    }
    hc_vol_unlock_run (v, blk, k);
    return rc < 0 ? rc : (long) k;
  }

  /* Fill: on the filler thread, with a copy of the data, when that is the
   * way (fill.c); else here, each run of blocks in consecutive cache blocks
   * as one write. */
  bool commit_now = !(defer && hc_fill_defer (v, blk, k, newc, a, dst))
                    && hc_fill_run (v, blk, k, newc, a, dst, NULL, r);
  hc_vol_unlock_run (v, blk, k);
  rc = commit_now ? hc_meta_commit (v, false) : 0;
  if (trial >= 0)
    hc_trial_report (v, hc_fill_trial (v, k), trial, hc_now_precise_ns () - t0, k);
  return rc < 0 ? rc : (long) k;
}


static int
read_request (hc_volume *v, void *buf, size_t len, uint64_t off, const struct hc_ioctx *ctx)
{
  struct req r = { .ctx = ctx, .off = off, .len = len };
  uint8_t *dst = buf;
  int rc = hc_vol_check_range (v, off, len);
  int64_t head = rc < 0 ? rc : hc_vol_tail_io (v, dst, NULL, len, off, 0);
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
    if (whole
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
  hc_vol_bounce_done (v, &r);
  return rc;
}

int
hc_volume_read (hc_volume *v, void *buf, size_t len, uint64_t off, const struct hc_ioctx *ctx)
{
  /* The first block's buckets load while the door lets us in. */
  hc_map_prefetch (&v->dir.map, off >> v->bshift);
  unsigned door = hc_vol_enter (v);
  int rc = read_request (v, buf, len, off, ctx);
  hc_vol_leave (v, door);
  return rc;
}
