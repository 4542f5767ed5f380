/* The cleaner: the volume's background thread.
 *
 * Each round it does whatever is due, then sleeps until woken or 100 ms
 * pass:
 *
 *   prefetch   willneed ranges queued by hc_volume_advise, PREFETCH_SLICE
 *              blocks a round, never waiting for room (prefetch_block, below);
 *   write-back dirty blocks: from dirty_high % of the cache dirty down to
 *              dirty_low %, paced while requests arrive (see Pacing), flat
 *              out when the volume is idle or once dirty data has passed
 *              halfway from dirty_high to 100 %; below dirty_high, a batch
 *              at a time when the volume is idle (so dirty data does not
 *              linger) or writers wait for a clean block;
 *   free space keeps a reserve of free blocks (1/64 of the cache), evicting
 *              clean blocks and committing, so that admissions rarely wait
 *              for a commit and writes never fall back to the slow tier for
 *              want of a clean block;
 *   commit     at least once a second while records are waiting, like
 *              dm-cache, so an application that never flushes still gets
 *              its data made durable; data rewritten in place with no
 *              record waiting (fast_dirty: hits rewritten in write-back,
 *              and in write-through over copies recorded dirty) at least
 *              every fast_sync_ns, 30 s, instead (FAST_SYNC_NS below);
 *   settle     write-through copies recorded dirty (hc_vol_settle; see the
 *              top of write.c): once the volume is idle, if a minute has
 *              passed since the last time, and every ten minutes in any
 *              case.  A settled copy's next write through costs a commit;
 *              an unsettled one's crash costs a write-back of data the slow
 *              tier has: settling once a minute keeps the first rare and
 *              bounds the second by about a minute's writes and fills
 *              (when the volume rests now and then).
 *
 * Write-back is flushed by the cleaner, not by the clients.  A block's
 * record may say "clean" (or the block may be evicted) only once the slow
 * tier's copy is durable, so it used to be that every commit after a
 * write-back flushed the slow tier first, a client's too: in write-back,
 * each fsync of an application then waited for the disk's cache flush
 * behind the cleaner's writes, whenever the cleaner was busy (SQLite's
 * commit rate fell from 867 to 42 a second with a backlog to write back,
 * on a disk of 4 ms per request).  Now a block written back by the
 * cleaner stays dirty, marked HC_M_WB, until the cleaner has written a
 * group of runs (WB_GROUP) and flushed the slow tier once; only then does
 * it mark those blocks clean and record them (wb_settle), if no write
 * came meanwhile (a write clears HC_M_WB; a copy-on-write moves the
 * block).  Nothing a client commits depends on an unflushed write-back,
 * so a client's commit flushes the fast tier alone.  A crash before the
 * flush finds the blocks dirty and writes them back again.  Single blocks
 * written back for advice (evict) keep the old way: their caller commits
 * at once, flushing the slow tier.
 *
 * Write-back order: the least valuable class first (lowest priority in the
 * class table, so background and streaming data go before metadata), and
 * within a batch in slow-tier order, so a disk sees ascending offsets; a
 * run of consecutive origins goes as one write (up to RUN_MAX blocks,
 * writeback_run), since a disk's or a remote store's request costs mostly
 * its latency: a file system's writes that the page cache would have
 * merged must not reach the disk as 4 KiB requests just because a cache
 * took them first.  A
 * block keeps the class it was written with, so a journal block is written
 * back as journal — and then demoted, since journals are not read again.
 *
 * Pacing.  Write-back reads each block from flash and writes it to the
 * disk: on a busy volume it competes with the requests for the same
 * devices and CPUs.  Crossing dirty_high is not an emergency — there is
 * still room for half of what remains — so while requests arrive the
 * cleaner writes back at a rate proportional to its distance from
 * dirty_low (that distance every PACE_S seconds: a proportional controller,
 * as bcache's write-back rate is), once a second: each write-back batch
 * commits before and after, and a commit flushes both tiers, so frequent
 * small batches would cost the requests more than the write-back itself
 * (with a file as the fast tier, a flush writes its dirty pages out).  A
 * volume whose writes keep outrunning that rate reaches the halfway mark,
 * where cleaning takes priority until dirty_low; one whose writers find no
 * clean block makes them wait for the cleaner, which then runs flat out
 * too.
 */
#include <errno.h>
#include <stdlib.h>

#include "io.h"

#define BATCH 16384
#define RUN_MAX 256 /* blocks of consecutive origins written back as one slow write */
#define PREFETCH_SLICE 256 /* blocks prefetched per round */
#define PACE_S 10     /* paced write-back closes its gap in about this long */
#define PACE_EVERY_NS 1000000000ull /* paced write-back runs at most this often */
/* Runs written back between two flushes of the slow tier: on a disk, a
 * flush then costs about one write in 16, and what was written back
 * becomes clean (evictable) within 16 writes, ~0.1 s. */
#define WB_GROUP 16
/* How long data rewritten in place may wait for a commit (a flush of the
 * fast tier) when no record waits: v->fast_sync_ns, set to this when the
 * cleaner starts (the simulator then shortens it to fit its virtual
 * seconds).  Nothing any client was promised
 * depends on it: a flush, FUA or close makes every acknowledged write
 * durable at once, and the records already say where the data is.  It
 * bounds what a crash takes from an application that never flushes, and
 * 30 s is the bound the kernel's page cache sets for its own dirty pages
 * (vm.dirty_expire_centisecs), as `nbdkit file` or the cache filter leave
 * it.  It was one second, with the records: a file as the fast tier then
 * had its hot pages written out every second, however often they were
 * rewritten.  64 KiB write-through hits over NBD (bench_matrix, QD1 and
 * QD16, the builds taking turns, three rounds each) ran at 0.81-0.97x the
 * cache filter's rate with the one-second commit, 0.84-1.04x with this. */
#define FAST_SYNC_NS (30 * 1000000000ull)

struct cand {
  uint64_t origin;
  uint32_t c;
};

static int
by_origin (const void *a, const void *b)
{
  const struct cand *x = a, *y = b;
  return x->origin < y->origin ? -1 : x->origin > y->origin;
}

/* Collects up to BATCH (and max) dirty blocks of the least valuable class
 * that has any (caller holds lock).  Returns how many. */
static size_t
collect (hc_volume *v, struct cand *out, uint64_t max)
{
  int best = -1;
  unsigned best_prio = ~0u;
  size_t n = 0;

  for (unsigned cls = 0; cls < HC_CLASS_COUNT; cls++) {
    struct hc_class_attrs a;
    hc_dir_attrs (&v->dir, cls, &a);
    if (v->dir.ndirty[cls] && a.priority < best_prio) {
      best = (int) cls;
      best_prio = a.priority;
    }
  }
  if (best < 0)
    return 0;
  if (max > BATCH)
    max = BATCH;
  for (uint32_t c = 0; c < v->dir.map.n && n < max; c++) {
    uint64_t w = v->dir.map.blk[c].meta;
    if ((w & HC_M_VALID) && (w & HC_M_DIRTY) && hc_meta_class (w) == (unsigned) best)
      out[n++] = (struct cand) { hc_meta_origin (w), c };
  }
  return n;
}

/* Blocks written back whose slow-tier flush is to come (see the top). */
struct wb_pending {
  struct cand *b;
  size_t n;
};

static long writeback_run (hc_volume *v, const struct cand *cand, size_t n, bool try,
                           long *wrote, struct wb_pending *pend);
static int writeback_one (hc_volume *v, uint32_t c, bool try, struct wb_pending *pend);
static void written_back (hc_volume *v, uint32_t c, uint64_t blk, struct wb_pending *pend);

/* Flushes the slow tier, then marks clean and records the pending blocks
 * that no write touched since they were written back.  Each is marked
 * under its stripe, as it was written back: a writer between its decision
 * and its outcome (which may write the slow tier, trusting the block's
 * dirty records) holds it, and then the block stays dirty, to be written
 * back again.  Returns how many were marked, or a negative errno (they
 * all stay dirty). */
static long
wb_settle (hc_volume *v, struct wb_pending *pend)
{
  long marked = 0;

  if (pend->n == 0)
    return 0;
  int rc = hc_tier_flush (v->slow);
  for (size_t i = 0; i < pend->n; i++) {
    const uint32_t c = pend->b[i].c;
    const uint64_t origin = pend->b[i].origin;
    const bool held = rc == 0 && stripe_trywrlock (v, origin) == 0;
    hc_lock (&v->lock);
    if (hc_dir_holds (&v->dir, c, origin) && (v->dir.map.blk[c].meta & HC_M_WB)) {
      v->dir.map.blk[c].meta &= ~HC_M_WB;
      if (held) {
        v->cleaned++;
        hc_dir_set_clean (&v->dir, c);
        hc_meta_record_block (v, c);
        marked++;
      }
    } /* else written, moved or dropped since */
    pthread_mutex_unlock (&v->lock);
    if (held)
      pthread_rwlock_unlock (stripe (v, origin));
  }
  if (marked) {
    hc_lock (&v->lock);
    pthread_cond_broadcast (&v->space);
    pthread_mutex_unlock (&v->lock);
  }
  pend->n = 0;
  return rc < 0 ? rc : marked;
}

/* Writes back dirty blocks until at most target are dirty or `limit` were
 * written back.  try: skip blocks whose stripe is busy (the cleaner
 * thread). */
static long
clean_to (hc_volume *v, uint64_t target, uint64_t limit, bool try)
{
  struct cand *cand = malloc (BATCH * sizeof *cand);
  struct wb_pending pend = { malloc (BATCH * sizeof *pend.b), 0 };
  long done = 0;
  int rc = 0;

  if (!cand || !pend.b) {
    free (cand);
    free (pend.b);
    return -ENOMEM;
  }
  for (;;) {
    hc_lock (&v->lock);
    uint64_t dirty = hc_vol_dirty (v), want = dirty > target ? dirty - target : 0;
    if (want > limit - (uint64_t) done)
      want = limit - (uint64_t) done;
    size_t n = want && !v->failed ? collect (v, cand, want) : 0;
    pthread_mutex_unlock (&v->lock);
    if (n == 0)
      break;
    /* Make these blocks' mappings durable before the slow tier changes
     * under them (an older clean copy may still be the durable one). */
    if ((rc = hc_meta_commit (v, false)) < 0)
      break;
    qsort (cand, n, sizeof *cand, by_origin);
    long batch = 0;
    unsigned runs = 0;
    for (size_t i = 0, j; i < n && rc >= 0; i = j) {
      /* Consecutive origins go to the slow tier as one write. */
      for (j = i + 1; j < n && j - i < RUN_MAX && j - i < v->nstripes
                      && cand[j].origin == cand[j - 1].origin + 1; j++)
        ;
      long wrote = 0;
      if (j - i == 1) {
        rc = writeback_one (v, cand[i].c, try, &pend);
        wrote = rc > 0;
      } else {
        long took = writeback_run (v, cand + i, j - i, try, &wrote, &pend);
        rc = took < 0 ? (int) took : 0;
        j = i + (took > 0 ? (size_t) took : 1);
      }
      if (wrote && ++runs % WB_GROUP == 0) {
        long marked = wb_settle (v, &pend);
        rc = marked < 0 ? (int) marked : rc;
        batch += marked > 0 ? marked : 0;
      }
    }
    long marked = wb_settle (v, &pend);
    if (rc >= 0 && marked < 0)
      rc = (int) marked;
    batch += marked > 0 ? marked : 0;
    if (rc >= 0)
      rc = hc_meta_commit (v, false);
    done += batch;
    if (rc < 0 || batch == 0)
      break;
    hc_lock (&v->lock);
    pthread_cond_broadcast (&v->space);
    bool stop = v->stop && target > 0;
    pthread_mutex_unlock (&v->lock);
    if (stop)
      break;
  }
  free (cand);
  free (pend.b);
  return rc < 0 ? rc : done;
}

long
hc_clean_to (hc_volume *v, uint64_t target)
{
  return clean_to (v, target, UINT64_MAX, false);
}

/* Settling walks the map a slice at a time, so that the lock is never held
 * for long, and takes each copy's stripe, as a writer would, so that no
 * write is between finding the copy recorded dirty (and skipping the
 * commit) and the slow tier's write. */
#define SETTLE_SLICE 65536

long
hc_vol_settle (hc_volume *v, bool try)
{
  struct cand *cand = NULL;
  long settled = 0;

  hc_lock (&v->lock);
  bool due = v->unsettled && !v->failed;
  if (due && (cand = malloc (SETTLE_SLICE * sizeof *cand)))
    v->unsettled = false; /* (set again by a copy made unrecorded from now on, or one skipped) */
  pthread_mutex_unlock (&v->lock);
  if (due && !cand)
    return -ENOMEM;
  for (uint64_t start = 0; due && start < v->dir.map.n; start += SETTLE_SLICE) {
    size_t n = 0;
    hc_lock (&v->lock);
    for (uint64_t c = start; c < v->dir.map.n && c < start + SETTLE_SLICE; c++)
      if (v->dir.map.blk[c].meta & HC_M_UNRECORDED)
        cand[n++] = (struct cand) { hc_meta_origin (v->dir.map.blk[c].meta), (uint32_t) c };
    pthread_mutex_unlock (&v->lock);
    for (size_t i = 0; i < n; i++) {
      pthread_rwlock_t *s = stripe (v, cand[i].origin);
      if (try && stripe_trywrlock (v, cand[i].origin) != 0) {
        hc_lock (&v->lock);
        v->unsettled = true;
        pthread_mutex_unlock (&v->lock);
        continue;
      }
      if (!try)
        stripe_wrlock (v, cand[i].origin);
      hc_lock (&v->lock);
      uint64_t *w = &v->dir.map.blk[cand[i].c].meta;
      if ((*w & HC_M_UNRECORDED) && hc_meta_origin (*w) == cand[i].origin) {
        *w &= ~HC_M_UNRECORDED;
        hc_meta_record_block (v, cand[i].c);
        settled++;
      }
      pthread_mutex_unlock (&v->lock);
      pthread_rwlock_unlock (s);
    }
  }
  free (cand);
  if (settled == 0)
    return 0;
  int rc = hc_meta_commit (v, false);
  return rc < 0 ? rc : settled;
}

static void *
cleaner_main (void *arg)
{
  hc_volume *v = arg;
  bool eager = false, urgent = false;
  uint64_t last_commit = hc_now_ns (), last_round = last_commit, last_paced = last_commit;
  uint64_t last_settle = last_commit;
  double credit = 0; /* blocks paced write-back may write back now */
  const uint64_t n = v->dir.map.n;
  const uint32_t reserve = n / 64 < 16 ? 16 : (uint32_t) (n / 64);

  hc_lock (&v->lock);
  while (!v->stop) {
    uint64_t now = hc_now_ns (), dirty = hc_vol_dirty (v);
    if (dirty * 100 >= (uint64_t) v->opts.dirty_high * n)
      eager = true;
    else if (dirty * 100 <= (uint64_t) v->opts.dirty_low * n)
      eager = urgent = false;
    if (dirty * 200 >= (uint64_t) (v->opts.dirty_high + 100) * n)
      urgent = true;
    bool idle = now - v->last_io_ns > 200 * 1000000ull;
    bool waiters = v->space_waiters > 0;
    bool prefetch = v->nprefetch > 0;
    const uint32_t free_before = v->dir.map.free.count;
    bool reserve_low = v->dir.map.free.count + v->dir.map.pending.count < reserve
                       && v->dir.map.mapped > 0;
    bool records_due = v->jrec && (v->jrec >= 4096 || now - last_commit > 1000000000ull);
    bool fast_due = v->fast_dirty && now - last_commit > v->fast_sync_ns;
    bool commit_due = records_due || fast_due, synced = false;
    bool failed = v->failed;
    bool settle = v->unsettled && now - last_settle > (idle ? v->settle_idle_ns : v->settle_busy_ns);
    pthread_mutex_unlock (&v->lock);

    bool worked = false;
    if (!failed) {
      if (prefetch) {
        /* A slice at a time: write-back, free space and commits go on. */
        hc_vol_run_prefetch (v, PREFETCH_SLICE);
        worked = true;
      }
      const uint64_t low = (uint64_t) v->opts.dirty_low * n / 100;
      if (dirty && (urgent || waiters || idle)) {
        uint64_t target = eager || urgent ? low : (dirty > BATCH ? dirty - BATCH : 0);
        worked |= clean_to (v, target, UINT64_MAX, true) > 0;
        credit = 0;
      } else if (eager) {
        /* Paced: the gap to dirty_low, every PACE_S seconds. */
        credit += (double) (dirty > low ? dirty - low : 0) * (double) (now - last_round)
                  / (PACE_S * 1e9);
        if (credit > BATCH)
          credit = BATCH;
        if (credit >= 1 && now - last_paced >= PACE_EVERY_NS) {
          long done = clean_to (v, low, (uint64_t) credit, true);
          credit = done > 0 ? credit - (double) done : 0;
          last_paced = last_commit = hc_now_ns (); /* (clean_to committed) */
        }
      }
      last_round = now;
      if (reserve_low) {
        worked |= hc_vol_reclaim (v, reserve) > free_before;
        last_commit = hc_now_ns ();
      }
      if (settle && hc_vol_settle (v, true) > 0)
        last_settle = last_commit = hc_now_ns (); /* (it committed) */
      else if (commit_due) {
        /* Counted when rewritten data alone made it due (tests/sim.c). */
        synced = hc_meta_commit (v, false) == 0 && !records_due;
        last_commit = hc_now_ns ();
      }
    }
    hc_lock (&v->lock);
    v->fast_syncs += synced;
    pthread_cond_broadcast (&v->space);
    if (!worked && !v->stop)
      hc_timedwait (&v->wake, &v->lock, 100 * 1000000ull);
  }
  pthread_mutex_unlock (&v->lock);
  return NULL;
}

int
hc_cleaner_start (hc_volume *v)
{
  v->fast_sync_ns = FAST_SYNC_NS;
  int rc = hc_spawn (&v->cleaner, cleaner_main, v);
  if (rc)
    return -rc;
  v->cleaner_started = true;
  return 0;
}

void
hc_cleaner_stop (hc_volume *v)
{
  if (!v->cleaner_started)
    return;
  hc_lock (&v->lock);
  v->stop = true;
  pthread_cond_broadcast (&v->wake);
  pthread_mutex_unlock (&v->lock);
  hc_join (v->cleaner);
  v->cleaner_started = false;
}

/* ---------------------------------------------------------------------------
 * Prefetch, write-back and reclaim of single blocks: the cleaner's work, also
 * called by advice (evict) and by close.
 */

/* Brings block blk into the cache for willneed advice, through buf (a
 * block, aligned).  A prefetch never waits for room: it runs on the
 * cleaner thread (which would wait for itself) and competes with requests,
 * so when no block is free or clean it gives up.  Returns 1 (cached now or
 * already), 0 (no room), or an error. */
static int
prefetch_block (hc_volume *v, uint64_t blk, struct hc_hint hint, uint8_t *buf)
{
  struct hc_access a = { .origin = blk, .hint = hint };
  enum hc_bypass why;
  uint32_t c;
  int rc;

  a.hint.advice = HC_ADVICE_WILLNEED;
  stripe_wrlock (v, blk);
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
  if ((c = hc_vol_take_block (v, &a, &why, false)) == HC_NIL) {
    pthread_mutex_unlock (&v->lock);
    pthread_rwlock_unlock (stripe (v, blk));
    return 0;
  }
  pthread_mutex_unlock (&v->lock);
  if ((rc = hc_tier_read (v->slow, buf, v->bs, blk << v->bshift)) == 0)
    rc = hc_tier_write (v->fast, buf, v->bs, fast_off (v, c), 0);
  hc_lock (&v->lock);
  if (rc < 0) {
    untake (v, c);
  } else if (hc_vol_install (v, c, &a)) {
    v->dir.map.blk[c].meta |= HC_M_HINTED;
    hc_meta_record_block (v, c);
    hc_vol_set_sum (v, c, blk, buf);
    v->dir.stats.prefetched++;
    v->dir.stats.cls[a.hint.cls].flash_bytes_written += v->bs;
  }
  pthread_mutex_unlock (&v->lock);
  pthread_rwlock_unlock (stripe (v, blk));
  return rc < 0 ? rc : 1;
}

/* Writes back dirty blocks of consecutive origins cand[0 … n) (n ≥ 2) as
 * one slow-tier write: on a disk, or a remote store, a request costs
 * mostly its latency, and single blocks would cost a write each.  Each
 * block is taken as hc_vol_writeback takes one (its stripe exclusively,
 * found still mapped and dirty, no unmapping of it pending), the first
 * with `try` as given and the others only if free at once (never waiting
 * while holding some); the run ends before the first that is not, and a
 * first that is not goes by hc_vol_writeback.  A block the fast tier
 * fails to give (or whose checksum fails) sends the whole run that way
 * too, which deals with each error as it does.  With pend, the blocks
 * stay dirty and join it (see the top).  Returns how many candidates were
 * dealt with (≥ 1), the blocks written back in *wrote, or a negative
 * errno. */
static long
writeback_run (hc_volume *v, const struct cand *cand, size_t n, bool try, long *wrote,
               struct wb_pending *pend)
{
  size_t k = 1, m = 0;
  int rc;

  *wrote = 0;
  if (!try)
    stripe_wrlock (v, cand[0].origin);
  else if (stripe_trywrlock (v, cand[0].origin) != 0)
    return 1; /* busy: skipped, as hc_vol_writeback skips it */
  while (k < n && stripe_trywrlock (v, cand[k].origin) == 0)
    k++;
  hc_lock (&v->lock);
  for (; m < k; m++) {
    uint32_t c = cand[m].c;
    if (!hc_dir_holds (&v->dir, c, cand[m].origin) || !(v->dir.map.blk[c].meta & HC_M_DIRTY)
        || hc_vol_unmap_pending (v, cand[m].origin))
      break;
  }
  for (size_t i = 0; i < m; i++)
    pin (v, cand[i].c);
  pthread_mutex_unlock (&v->lock);
  for (size_t i = k; i-- > m;)
    pthread_rwlock_unlock (stripe (v, cand[i].origin));
  if (m == 0) {
    rc = writeback_one (v, cand[0].c, try, pend);
    *wrote = rc > 0;
    return rc < 0 ? rc : 1;
  }

  uint8_t *buf = aligned_alloc (4096, m << v->bshift);
  bool read_ok = buf != NULL;
  for (size_t i = 0; i < m && read_ok; i++) {
    uint8_t *b = buf + (i << v->bshift);
    read_ok = hc_tier_read (v->fast, b, v->bs, fast_off (v, cand[i].c)) == 0
              && hc_vol_sum_ok (v, cand[i].c, cand[i].origin, b, false); /* counted below */
  }
  rc = read_ok ? hc_tier_write (v->slow, buf, m << v->bshift, cand[0].origin << v->bshift, 0) : 0;
  free (buf);
  hc_lock (&v->lock);
  for (size_t i = 0; i < m; i++)
    unpin (v, cand[i].c);
  if (read_ok && pend)
    slow_written (v);
  else if (read_ok)
    slow_changed (v);
  for (size_t i = 0; i < m && read_ok; i++) {
    if (rc == 0)
      written_back (v, cand[i].c, cand[i].origin, pend);
    else
      v->dir.stats.errors_fast++;
  }
  pthread_mutex_unlock (&v->lock);
  for (size_t i = m; i-- > 0;)
    pthread_rwlock_unlock (stripe (v, cand[i].origin));
  if (!read_ok) { /* block by block: each error dealt with as one block's is */
    for (size_t i = 0; i < m; i++) {
      if ((rc = writeback_one (v, cand[i].c, try, pend)) < 0)
        return rc;
      *wrote += rc > 0;
    }
    return (long) m;
  }
  if (rc < 0)
    return rc;
  *wrote = (long) m;
  return (long) m;
}

/* Writes back dirty block c.  The slow tier must not change while an
 * older clean copy of the block may still be the durable mapping (see the
 * top of write.c): a copy-on-write leaves the old copy's unmapping in
 * the set of unmappings not yet durable until a commit, so a block whose
 * origin is in that set waits for a commit first.  With `try`, a block
 * whose stripe is busy is skipped rather than waited for (the cleaner must
 * not wait on a writer that waits on the cleaner). */
int
hc_vol_writeback (hc_volume *v, uint32_t c, bool try)
{
  return writeback_one (v, c, try, NULL);
}

/* Block c (origin blk), its stripe held, is on the slow tier now (caller
 * holds lock): clean, or with pend, dirty and pending (see the top). */
static void
written_back (hc_volume *v, uint32_t c, uint64_t blk, struct wb_pending *pend)
{
  if (pend) {
    v->dir.map.blk[c].meta |= HC_M_WB;
    pend->b[pend->n++] = (struct cand) { blk, c };
    return;
  }
  v->cleaned++;
  hc_dir_set_clean (&v->dir, c);
  hc_meta_record_block (v, c);
}

/* hc_vol_writeback, or with pend, the cleaner's deferred kind. */
static int
writeback_one (hc_volume *v, uint32_t c, bool try, struct wb_pending *pend)
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
      if (stripe_trywrlock (v, blk) != 0)
        return 0;
    } else {
      stripe_wrlock (v, blk);
    }
    hc_lock (&v->lock);
    if (!hc_dir_holds (&v->dir, c, blk) || !(v->dir.map.blk[c].meta & HC_M_DIRTY)) {
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
    rc = hc_vol_sum_ok (v, c, blk, buf, true) ? hc_tier_write (v->slow, buf, v->bs, blk << v->bshift, 0)
                                       : -EIO; /* never spread a corrupt copy */
  free (buf);
  hc_lock (&v->lock);
  unpin (v, c);
  if (pend)
    slow_written (v);
  else
    slow_changed (v);
  if (rc == 0)
    written_back (v, c, blk, pend);
  else
    v->dir.stats.errors_fast++;
  pthread_mutex_unlock (&v->lock);
  pthread_rwlock_unlock (stripe (v, blk));
  return rc < 0 ? rc : 1;
}


int
hc_vol_run_prefetch (hc_volume *v, uint64_t budget)
{
  uint8_t *buf = NULL; /* one block's buffer for the whole run */
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
    if (!buf)
      buf = aligned_alloc (4096, v->bs);
    int r = buf ? prefetch_block (v, blk, hint, buf) : -ENOMEM;
    hc_lock (&v->lock);
    if (r <= 0) {
      v->nprefetch = 0;
      v->prefetch_blocks = 0;
      rc = r;
      break;
    }
  }
  pthread_mutex_unlock (&v->lock);
  free (buf);
  return rc;
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

