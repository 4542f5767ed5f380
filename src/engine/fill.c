/* Read-miss fills: writing the data of a run of missed blocks to the fast
 * tier and installing it — on the reading thread, or, on a volume with
 * background threads, on the filler thread once the client has its data.
 *
 * Why a thread.  A miss the policy admits costs two I/Os of the same bytes:
 * the slow read the client waits for, and the fast write (and its records)
 * that only later requests profit from.  Done in turn on the client's time,
 * the second halves a miss's speed when the tiers are alike, and adds a
 * flash write's latency to every miss when they are not.  So read_misses
 * may copy what it read into a fill, queue it and return; the filler writes
 * and installs it (one write per run of consecutive cache blocks, one trip
 * through the lock per run, as the reading thread did) — when trials show
 * that this is faster (below: it is not always).  A single block's miss
 * goes this way too, with trials of its own: a hand-off weighs more
 * against one block's write than against a run's, so the answer may
 * differ.
 *
 * Why it stays correct.  A fill must never install data older than a write
 * that landed after the slow read.  On the reading thread that is kept by
 * holding the run's stripes shared from the read to the install; the
 * filler cannot hold them, as the reader returns.  Instead every stripe
 * counts its exclusive holds (stripe_gen, io.h: every writer, write-back,
 * prefetch, discard, mode switch and drop of a block takes its stripe
 * exclusively, rule 1 of the locking rules).  The reader notes its blocks'
 * counts while it still holds their stripes shared, after the slow read;
 * the filler takes each stripe shared again, trying only (it must never
 * wait for a stripe: a writer holding one may be waiting for room), and
 * installs a block only if its count has not moved — nothing can have
 * changed the block since its data was read — and the block is still not
 * cached (hc_vol_install).  Any doubt gives the block back: a fill is only
 * ever an optimisation, and an uninstalled block was never recorded, so a
 * crash merely forgets it.
 *
 * Bounds.  The data of the fills waiting or being written lives in one ring
 * of 16 MiB (for blocks over 32 KiB, room for two of the largest fills),
 * taken once per volume.  A fill that does not fit is dropped, its blocks counted as bypassed for
 * want of room (HC_BYPASS_FULL), never waited for: as in bcache, a cache
 * that cannot keep up admits less rather than slowing reads.  Closing the
 * volume stops the filler and drops what waits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

/* The fills' data lives in one ring, allocated once (16 MiB, or two of the
 * largest fills for large blocks), in queue order: no allocation, and no
 * page fault once the ring has been round, per fill. */
#define FILL_RING_MIN (16u << 20)

struct hc_fill {
  struct hc_fill *next;
  uint64_t blk;        /* the first block */
  unsigned n;          /* blocks */
  bool ready;          /* its data is in the ring (the reader has copied it) */
  size_t off;          /* its data: n blocks at fill_ring + off */
  size_t charged;      /* ring bytes it holds: its data, and the end it skipped */
  struct hc_access *a; /* [n], in this allocation */
  uint32_t *newc;      /* [n] the cache block taken for each, or HC_NIL */
  uint32_t *gen;       /* [n] its stripe's generation after the slow read */
};

bool
hc_fill_run (hc_volume *v, uint64_t blk, unsigned k, const uint32_t *newc,
             const struct hc_access *a, const uint8_t *data, const uint32_t *gen, struct req *r)
{
  bool commit_now = false;
  bool held[HC_FILL_MAX];

  for (unsigned i = 0, j; i < k; i = j) {
    if (newc[i] == HC_NIL) {
      j = i + 1;
      continue;
    }
    for (j = i + 1; j < k && newc[j] != HC_NIL && newc[j] == newc[j - 1] + 1; j++)
      ;
    int w = around (v, r) ? -EIO
                          : hc_tier_write (v->fast, data + ((size_t) i << v->bshift),
                                           (size_t) (j - i) << v->bshift, fast_off (v, newc[i]), 0);
    /* Installing looks each block up again, and the write has just pushed
     * the map's buckets out of the CPU's caches: load them AHEAD at a
     * time, as read_hits does, rather than one miss at a time under the
     * lock. */
    enum { AHEAD = 16 };
    for (unsigned x = i; x < j && x < i + AHEAD; x++)
      hc_map_prefetch (&v->dir.map, a[x].origin);
    if (gen)
      for (unsigned x = i; x < j; x++)
        held[x] = hc_tryrdlock (stripe (v, blk + x)) == 0;
    hc_lock (&v->lock);
    if (w < 0 && !r->around)
      hc_vol_fast_failed (v, w);
    else if (w == 0)
      fast_ok (v);
    for (unsigned x = i; x < j; x++) {
      if (x + AHEAD < j)
        hc_map_prefetch (&v->dir.map, a[x + AHEAD].origin);
      bool stale = gen && (!held[x] || v->stripe_gen[(blk + x) & (v->nstripes - 1)] != gen[x]);
      if (w < 0) {
        untake (v, newc[x]);
        hc_dir_bypass (&v->dir, &a[x], HC_BYPASS_ERROR);
      } else if (stale) {
        untake (v, newc[x]);
      } else if (hc_vol_install (v, newc[x], &a[x])) {
        hc_meta_record_block (v, newc[x]);
        hc_vol_set_sum (v, newc[x], blk + x, data + ((size_t) x << v->bshift));
        v->dir.stats.cls[a[x].hint.cls].flash_bytes_written += v->bs;
      }
    }
    hc_vol_commit_soon (v, &commit_now);
    pthread_mutex_unlock (&v->lock);
    if (gen)
      for (unsigned x = j; x-- > i;)
        if (held[x])
          pthread_rwlock_unlock (stripe (v, blk + x));
    if (w < 0)
      r->around = true; /* the rest goes around */
  }
  return commit_now;
}

/* Gives back the n blocks taken for a fill that will not be made, counting
 * them as bypassed for want of room (caller holds lock). */
static void
drop (hc_volume *v, unsigned n, const uint32_t *newc, const struct hc_access *a)
{
  for (unsigned x = 0; x < n; x++)
    if (newc[x] != HC_NIL) {
      untake (v, newc[x]);
      hc_dir_bypass (&v->dir, &a[x], HC_BYPASS_FULL);
    }
}

/* Takes `bytes` of the ring for fill f, after the newest fill's data, or at
 * the start if the end is too short (the end is then skipped, and charged
 * to f); returns whether there was room (caller holds lock).  Fills leave
 * the ring in the order they took it (queue order), so the ring in use is
 * one stretch from fill_rd to fill_wr, perhaps wrapping. */
static bool
ring_take (hc_volume *v, struct hc_fill *f, size_t bytes)
{
  size_t wr = v->fill_wr, rd = v->fill_rd;

  if (v->fill_bytes == 0)
    wr = rd = 0;
  if (v->fill_bytes == 0 || wr > rd) { /* free: [wr, cap) and [0, rd) */
    if (bytes <= v->fill_cap - wr)
      f->off = wr, f->charged = bytes;
    else if (bytes <= rd)
      f->off = 0, f->charged = v->fill_cap - wr + bytes;
    else
      return false;
  } else if (bytes <= rd - wr) {      /* free: [wr, rd) */
    f->off = wr, f->charged = bytes;
  } else {
    return false;
  }
  v->fill_rd = rd;
  v->fill_wr = f->off + bytes;
  v->fill_bytes += f->charged;
  return true;
}

bool
hc_fill_defer (hc_volume *v, uint64_t blk, unsigned k, const uint32_t *newc,
               const struct hc_access *a, const uint8_t *data)
{
  unsigned i0 = 0, i1 = k;

  while (i0 < k && newc[i0] == HC_NIL)
    i0++;
  while (i1 > i0 && newc[i1 - 1] == HC_NIL)
    i1--;
  const unsigned n = i1 - i0;
  const size_t bytes = (size_t) n << v->bshift;
  if (!v->filler_started || !n || bytes > v->fill_cap)
    return false;

  struct hc_fill *f = malloc (sizeof *f + n * (sizeof *f->a + 2 * sizeof (uint32_t)));
  hc_lock (&v->lock);
  if (!f || v->fill_stop || !ring_take (v, f, bytes)) {
    drop (v, n, newc + i0, a + i0);
    hc_fill_trial (v, k)->spoiled = true;
    pthread_mutex_unlock (&v->lock);
    free (f);
    return true;
  }
  /* Queued now, in ring order, but not ready until its data is in. */
  f->next = NULL;
  f->ready = false;
  *(v->fill_tail ? &v->fill_tail->next : &v->fill_head) = f;
  v->fill_tail = f;
  pthread_mutex_unlock (&v->lock);

  f->blk = blk + i0;
  f->n = n;
  f->a = (struct hc_access *) (f + 1);
  f->newc = (uint32_t *) (f->a + n);
  f->gen = f->newc + n;
  memcpy (f->a, a + i0, n * sizeof *a);
  memcpy (f->newc, newc + i0, n * sizeof *newc);
  for (unsigned x = 0; x < n; x++) /* the caller holds these stripes */
    f->gen[x] = v->stripe_gen[(f->blk + x) & (v->nstripes - 1)];
  memcpy (v->fill_ring + f->off, data + ((size_t) i0 << v->bshift), bytes);

  hc_lock (&v->lock);
  f->ready = true;
  pthread_cond_signal (&v->fill_wake);
  pthread_mutex_unlock (&v->lock);
  return true;
}

/* ---- Which way: trials (trial.c). ----
 *
 * Deferring a fill does not always pay.  When the slow tier's reads wait on
 * a device, the reader is spared the fast write's wait, and the filler's
 * work overlaps the next read.  When both tiers are served from memory (a
 * page cache, tmpfs) every step is a copy on a CPU: the deferred fill adds
 * a copy into the ring, and the filler's writes compete with the reader
 * for the CPUs, the memory bus and the page cache's locks.  On a machine
 * of two CPUs with both tiers in tmpfs, 1 MiB misses read at about 2,000
 * MB/s filled on the reader's thread and at 650–700 MB/s deferred (the
 * reader alone, its fills dropped: about 3,000).  So trials decide, each
 * run of misses that admits a block a run, timed from entering read_misses
 * to leaving it, per block; a deferred trial that dropped a fill for want
 * of room is spoiled (deferral then costs admissions).  Single blocks and
 * runs of several are tried apart (hc_fill_trial).
 */
int
hc_fill_way (hc_volume *v, unsigned k, bool *defer)
{
  *defer = false;
  if (!v->filler_started)
    return -1;
  return hc_trial_way (hc_fill_trial (v, k), defer);
}

/* Takes the oldest fill off the queue and gives its ring back (caller
 * holds lock). */
static void
dequeue (hc_volume *v, struct hc_fill *f)
{
  if (!(v->fill_head = f->next))
    v->fill_tail = NULL;
  v->fill_rd = f->off + ((size_t) f->n << v->bshift);
  v->fill_bytes -= f->charged;
  free (f);
}

static void *
filler_main (void *arg)
{
  hc_volume *v = arg;
  struct req none = { 0 };

  hc_lock (&v->lock);
  while (!v->fill_stop) {
    struct hc_fill *f = v->fill_head;
    if (!f || !f->ready) {
      hc_timedwait (&v->fill_wake, &v->lock, 100 * 1000000ull);
      continue;
    }
    pthread_mutex_unlock (&v->lock);
    none.around = false;
    hc_fill_run (v, f->blk, f->n, f->newc, f->a, v->fill_ring + f->off, f->gen, &none);
    hc_lock (&v->lock);
    dequeue (v, f);
  }
  pthread_mutex_unlock (&v->lock);
  return NULL;
}

int
hc_fill_start (hc_volume *v)
{
  size_t largest = (size_t) HC_FILL_MAX << v->bshift;
  v->fill_cap = 2 * largest > FILL_RING_MIN ? 2 * largest : FILL_RING_MIN;
  if (!(v->fill_ring = aligned_alloc (4096, v->fill_cap)))
    return -ENOMEM;
  /* Touched now, not by the first fills: a first round's page faults
   * would be charged to deferral's first trial (trial.c), and could make
   * it lose to the reader for a reason that does not last. */
  memset (v->fill_ring, 0, v->fill_cap);
  int rc = hc_spawn (&v->filler, filler_main, v);
  if (rc)
    return -rc;
  v->filler_started = true;
  return 0;
}

void
hc_fill_stop (hc_volume *v)
{
  if (!v->filler_started)
    return;
  hc_lock (&v->lock);
  v->fill_stop = true;
  pthread_cond_broadcast (&v->fill_wake);
  pthread_mutex_unlock (&v->lock);
  hc_join (v->filler);
  v->filler_started = false;
  /* No request is in flight: every fill that waits is ready. */
  hc_lock (&v->lock);
  while (v->fill_head) {
    drop (v, v->fill_head->n, v->fill_head->newc, v->fill_head->a);
    dequeue (v, v->fill_head);
  }
  pthread_mutex_unlock (&v->lock);
}

uint64_t
hc_fill_pending (hc_volume *v)
{
  hc_lock (&v->lock);
  uint64_t b = v->fill_bytes;
  pthread_mutex_unlock (&v->lock);
  return b;
}
