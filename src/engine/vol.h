/* Internal state of a volume, shared by the engine's files:
 *
 *   volume.c   open, close, format, mode, stats, info, streams
 *   meta.c     the on-disk format's codecs: sector checksums, superblock, slow tier
 *              identity (format.h describes the format; meta.h is shared by these four)
 *   format.c   format: a new volume's layout and empty metadata
 *   load.c     open: table, range hints, statistics, journal replay; salvaging
 *   commit.c   records, commit and checkpoint
 *   io.c       what the request paths share (io.h): checksums, taking a free block,
 *              bounce buffers, runs of stripes, the partial last block
 *   read.c     read: hits, misses, runs of each, readahead
 *   write.c    write, flush, discard, zero; plan.c decides each block's write
 *   advise.c   range hints and what each advice does to the cached blocks
 *   cleaner.c  the background thread: write-back, free space, prefetch; and
 *              write-back, prefetch and reclaim of single blocks
 *   fill.c     read-miss fills, and the filler thread that makes them after
 *              the client has its data
 *   writer.c   the slow writer: a write-through batch's slow writes beside its
 *              fast writes
 *   trial.c    which of two ways is faster here (fills, slow writes), measured
 *
 * Locking rules (also in docs/ARCHITECTURE.md), outermost first:
 *
 *   1. stripe locks (rwlock per origin block, by origin % nstripes): a
 *      block's data I/O happens under its stripe — shared for reads, exclusive
 *      for writes, write-back and prefetch — so a read-miss fill can never
 *      install data older than a concurrent write, and the cleaner never
 *      marks clean a block that changed under it.  One stripe at a time,
 *      except that range operations take all of them in ascending order, and
 *      a batch of whole blocks (write_batch, exclusive; read_misses, shared;
 *      up to 256 and never more than nstripes) waits for its first stripe
 *      and takes the next ones only while each is free at once (lock_run):
 *      a batch never waits — for a stripe or the cleaner — holding stripes
 *      (only for the slow writer's job, and the slow writer takes no stripe).
 *      Every exclusive hold counts in the stripe's generation (stripe_gen,
 *      stripe_wrlock in io.h); the filler takes stripes shared only if free
 *      at once, and installs a block only if its generation has not moved
 *      since the block was read (fill.c).
 *   1a. a stream's readahead lock (hc_readahead.lock), after the request's
 *      stripes, held across the window's slow-tier read.
 *   2. commit_lock: one commit or checkpoint at a time.
 *   3. lock: the directory, the journal buffer, the lists, the range hints,
 *      the statistics.  Never held across I/O, except that a read-only open
 *      does its replay under it.
 *
 *   pins (one atomic 8-bit count per cache block: one per thread using the
 *   block) are taken under `lock` and dropped without it: a pinned block is
 *   neither evicted nor reused, so data I/O on it can run unlocked.  A
 *   thread pins a block once at most, and the calls that pin are entered
 *   through hc_vol_enter (io.h), which lets HC_VOL_MAX_INSIDE threads in at once;
 *   with the cleaner's thread, no count can pass 255.
 */
#ifndef HC_ENGINE_VOL_H
#define HC_ENGINE_VOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "hintcache/volume.h"
#include "../cache/budget.h"
#include "../cache/dir.h"
#include "../cache/seq.h"
#include "format.h"
#include "ranges.h"
#include "sched.h"
#include "../util.h"

#define HC_VOL_DOORS 16 /* counters of threads inside (io.h: hc_vol_enter) */

/* Stripe locks: this many, or for a volume of fewer blocks the power of
 * two that covers them (at least HC_STRIPES_MIN, a write-back batch's
 * blocks): each block then has its own, as in a larger volume of fewer
 * blocks than stripes, without the locks no block uses. */
#define HC_STRIPES 1024
#define HC_STRIPES_MIN 64

/* A readahead window (read.c): slow-tier data past what a bypassed
 * sequential reader asked for, served to its next requests while the slow
 * tier has not changed since (gen). */
struct hc_readahead {
  pthread_mutex_t lock;  /* the window; taken after the request's stripes, before v->lock */
  uint8_t *buf;          /* HC_RA_MAX bytes, taken on first need */
  uint64_t blk;          /* the first block held */
  uint32_t n;            /* blocks held */
  uint32_t size;         /* the next fill's size, in blocks (grows as the stream goes on) */
  uint64_t gen;          /* v->slow_gen when filled */
};

/* Readahead windows for I/O without a stream (read.c), which one client's
 * sequential reader may send over several connections at once: a few
 * windows, each going to the run that continues it or, for a new run, the
 * least recently used.  pub[i] is window i's range as last decided, which
 * a request picks its window by (a guess: the window's own lock guards
 * the data and its range). */
#define HC_RA_SHARED 4

struct hc_ra_shared {
  pthread_mutex_t lock; /* pub, tick; a leaf, taken alone or under one window's lock */
  struct {
    uint64_t blk, end;  /* blocks [blk, end) */
    uint64_t used;      /* tick of the last request that picked it */
  } pub[HC_RA_SHARED];
  uint64_t tick;
  struct hc_readahead w[HC_RA_SHARED];
};

#define HC_RA_MAX (4u << 20) /* the largest window, bytes */

struct hc_stream {
  hc_volume *v;
  struct hc_hint hint;
  struct hc_seqslot seq; /* under v->lock */
  struct hc_readahead ra;
};

struct hc_fill; /* fill.c */

/* Trials of two ways of doing the same work (trial.c). */
#define HC_TRIAL_RUNS 64
struct hc_trial {
  uint64_t pos;              /* runs into this cycle */
  uint64_t cycle;            /* this cycle's length, in trial lengths */
  uint64_t ns[2], units[2];  /* the current trials: way 0, way 1 */
  bool spoiled;              /* way 1's trial lost something way 0 would not have */
  bool alt;                  /* what the last trials chose: way 1 */
  uint8_t force;             /* tests: 0 trials decide, 1 always way 0, 2 always way 1 */
};

/* A job for the slow writer (writer.c): up to HC_SLOW_RUNS writes to the
 * slow tier, in order; the first that fails ends it. */
#define HC_SLOW_RUNS 256
struct hc_slow_job {
  struct {
    const uint8_t *buf;
    size_t len;
    uint64_t off;
  } run[HC_SLOW_RUNS];
  unsigned n;
  unsigned flags;            /* hc_tier_write's, for every run */
  int rc;                    /* the first error, once done */
  bool taken, done;          /* under lock */
};

struct hc_prefetch {
  uint64_t blk, n;     /* blocks [blk, blk + n) still to prefetch */
  struct hc_hint hint;
};

struct hc_volume {
  hc_tier *fast, *slow;
  struct hc_super sb;
  uint32_t bs, bshift;
  uint64_t nslow;              /* blocks in the volume */
  struct hc_open_opts opts;
  uint64_t seed;               /* checksum seed, from the cache UUID */
  uint64_t *sum;               /* HC_FEAT_SUMS: each cache block's checksum word (format.h);
                                * else NULL */
  _Atomic uint8_t *pins;       /* threads using each block (one each; see the lock order) */
  enum hc_mode mode;

  /* Above, what every request reads and hardly anything writes; below, the
   * words every request writes, each group on cache lines of its own.  A
   * word written by one CPU takes its line from every other CPU's cache:
   * shared with the fields above, it made each thread's next read of them
   * wait for the line (two threads reading hits from files in memory:
   * 1.57–1.62 M reads/s with the lock beside the fields above, 1.69–1.80 M
   * with it apart). */
  struct {
    _Alignas (64) _Atomic unsigned inside; /* threads in calls that may pin (hc_vol_enter) */
  } door[HC_VOL_DOORS];
  _Alignas (64) pthread_mutex_t lock;
  uint32_t sum_gen;            /* the last generation given to a block write */
  struct hc_directory dir;
  struct hc_budget budget;     /* opts.flash_budget's bucket (under the lock) */
  struct hc_ranges ranges;
  struct hc_hint device_hint;
  struct hc_seq seq;
  struct hc_ra_shared ra;      /* readahead for I/O without a stream */

  /* Journal buffer: records not yet committed (16 bytes each). */
  uint8_t *jbuf;
  size_t jrec, jcap;
  struct hc_list committing;   /* freed by the commit under way */
  /* Origins unmapped by records not yet durable (since the last swap, and in
   * the commit under way): the slow tier must not change under them until
   * a commit has made the unmapping durable (write.c). */
  struct hc_u64set unmapped, unmapped_committing;
  uint8_t *table_dirty;        /* bitmap of table sectors changed since the checkpoint */
  uint8_t *table_prev;         /* … and in the interval before it (the other copy lacks both) */
  bool ranges_dirty, ranges_prev;
  bool slow_dirty;             /* the slow tier was written since the last commit */
  uint64_t slow_gen;           /* counts writes to the slow tier's data (readahead) */
  bool fast_dirty;             /* data was rewritten in place since the last commit */
  uint64_t fast_sync_ns;       /* … which the cleaner commits within this (cleaner.c) */
  bool unsettled;              /* some copy may be clean but unrecorded (write.c) */
  uint64_t settle_idle_ns, settle_busy_ns; /* the cleaner settles that often (cleaner.c) */
  uint64_t next_seq, next_pos; /* the next journal sector */
  /* Group commit: commits are numbered as they take the records; the
   * number of the last one that is durable.  A caller whose records were
   * taken by a commit that has landed since it asked needs no commit of its
   * own (hc_meta_commit). */
  uint64_t commits_taken, commits_durable;

  pthread_mutex_t commit_lock;
  pthread_rwlock_t *stripes;   /* [nstripes] */
  uint32_t *stripe_gen;        /* [nstripes] exclusive holds so far (io.h, fill.c); each
                                * changed only by its stripe's exclusive holder */
  unsigned nstripes;           /* a power of two, HC_STRIPES_MIN … HC_STRIPES */

  /* The cleaner. */
  pthread_t cleaner;
  bool cleaner_started, stop;
  pthread_cond_t wake;         /* wakes the cleaner */
  pthread_cond_t space;        /* writers waiting for a clean block */
  uint64_t last_io_ns;         /* for idle detection */
  unsigned space_waiters;      /* writers waiting for a clean block */
  uint64_t cleaned;            /* write-backs so far (progress for waiters) */
  struct hc_prefetch *prefetch;
  size_t nprefetch, capprefetch;
  uint64_t prefetch_blocks;    /* queued in all */

  /* The filler (fill.c): read-miss fills queued for it, under lock. */
  pthread_t filler;
  bool filler_started, fill_stop;
  pthread_cond_t fill_wake;
  struct hc_fill *fill_head, *fill_tail; /* in ring order */
  uint8_t *fill_ring;          /* fill_cap bytes: the fills' data, in queue order */
  size_t fill_cap;
  size_t fill_wr, fill_rd;     /* where the next fill's data goes; where the oldest's is */
  size_t fill_bytes;           /* ring bytes in use (data waiting or being written, and
                                * an end skipped to wrap) */
  struct hc_trial fill_way[2]; /* on the reader's thread (0) or deferred (1) (fill.c):
                                * [0] single blocks, [1] runs of several */

  /* The slow writer (writer.c): a write-through batch's slow-tier writes,
   * beside its fast ones.  Under lock. */
  pthread_t writer;
  bool writer_started, writer_stop;
  pthread_cond_t writer_wake, writer_done;
  struct hc_slow_job *writer_job; /* the job waiting or being written, or NULL */
  uint64_t writer_jobs;        /* jobs written so far (tests) */
  uint64_t fast_syncs;         /* the cleaner's commits for rewritten data alone (tests) */
  struct hc_trial write_way;   /* on the writer's thread (0) or beside (1) (write.c) */

  uint64_t replayed;
  bool was_clean;
  bool any_slow;               /* read-only look without the slow tier's identity check */
  struct hc_repair_report *salvage; /* a lenient load for hc_volume_repair, or NULL */
  bool slow_fp_checked;        /* the open compared the slow tier's fingerprint */
  bool slow_fp_valid;          /* sb.slow_fp is the slow tier's as it is now (clean close) */
  bool tail_damaged;           /* replay ended at a damaged sector (a commit cut short) */
  unsigned sb_damaged;         /* superblock copies found damaged at open (bit 0: A, 1: B) */
  bool failed;                 /* a commit failed: refuse further writes */
  /* Degraded: the fast tier failed a data write (ENOSPC on a full sparse
   * file, EIO).  Writes and fills then go around it, to the slow tier,
   * and are retried on the fast tier once a second; the first success
   * ends it.  The errno is read without the lock (hc_volume_degraded). */
  _Atomic int degraded;
  uint64_t degraded_retry_ns;  /* under lock */
  /* A block-sized bounce buffer kept from a finished request for the next
   * one that needs one (NULL while a request holds it, or before any). */
  _Atomic (uint8_t *) spare_bounce;
  uint64_t degraded_events;    /* times the volume became degraded */
  /* stats.meta_flash_bytes, live: metadata writes happen under the commit
   * lock, not the volume lock (hc_meta_flash_write). */
  _Atomic uint64_t meta_flash;
};

/* ---- meta.c, format.c, load.c, commit.c ---- */

/* Checksum of a 512-byte sector whose 4-byte checksum field is at csum_off
 * (taken as zero), seeded with the volume seed and the sector's position. */
uint32_t hc_meta_csum (const uint8_t *sector, unsigned csum_off, uint64_t seed, uint64_t lba);

/* Encodes / decodes a superblock sector.  decode returns 0, -EINVAL (not a
 * superblock: bad magic), -EUCLEAN (bad checksum) or -EPROTONOSUPPORT. */
void hc_sb_encode (const struct hc_super *sb, uint8_t sector[HC_FMT_SECTOR]);
int hc_sb_decode (const uint8_t sector[HC_FMT_SECTOR], struct hc_super *sb);

/* Reads both superblocks and returns the newest valid one in *sb.  Both
 * are written with the same content, so one valid copy is enough: *damaged
 * (may be NULL) gets a bit per copy that could not be used (bit 0: A).
 * Returns 0; -EINVAL when neither holds a superblock's magic number (not a
 * volume: the only case in which formatting over it is harmless);
 * -EPROTONOSUPPORT for another format version; -EUCLEAN or -EIO when both
 * are damaged or they disagree. */
int hc_meta_read_sb (hc_tier *fast, struct hc_super *sb, unsigned *damaged, char *why,
                     size_t whylen);

/* Whether `data` read from cache block c, mapping blk, passes its checksum
 * (true without checksums, or when c has none). */
bool hc_vol_verify (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data);

/* Notes volume block `origin` as possibly having lost data. */
void hc_repair_lost (struct hc_repair_report *rep, uint64_t origin);

/* The slow tier's fingerprint for superblock `sb` (format.h): reads its
 * sampled sectors.  Returns 0 or the read's error. */
int hc_meta_slow_fingerprint (hc_tier *slow, const struct hc_super *sb, uint64_t *fp);

/* Lays out and writes a new volume (dry: only checks the options and
 * that the tiers are large enough, writing nothing). */
int hc_meta_format (hc_tier *fast, hc_tier *slow, const struct hc_format_opts *o, bool dry,
                    char *why, size_t whylen);

/* Loads the current checkpoint copy (table, range hints, statistics) and
 * replays the journal into v (v->sb and the directory must be set up).
 * Returns 0 or an error with `why`. */
int hc_meta_load (hc_volume *v, char *why, size_t whylen);

/* Marks for rewriting at the next checkpoint every damaged sector of the
 * checkpoint copy that is not current (after a clean open, which otherwise
 * trusts it to equal the current one). */
void hc_meta_check_other (hc_volume *v);

/* Appends a record that block c's table entry is now what its meta word
 * says (caller holds lock).  An unmapped block's former origin joins the
 * set of origins whose unmapping is not durable yet.  The record functions
 * cannot fail: without memory for a record, the volume fails instead
 * (v->failed), as after a failed commit. */
void hc_meta_record_block (hc_volume *v, uint32_t c);

/* Marks the table sectors that hold block c's entry (and checksum word) as
 * changed since the last checkpoint (caller holds lock). */
void hc_meta_mark_table (hc_volume *v, uint32_t c);

/* Appends a record that block c's data now has checksum word v->sum[c]
 * (caller holds lock; HC_FEAT_SUMS only). */
void hc_meta_record_sum (hc_volume *v, uint32_t c);

/* Appends a record of what a range-hint change did (caller holds lock):
 * hc_ranges_set by src (withdraw false) or hc_ranges_withdraw by src (then
 * cls and advice are 0). */
void hc_meta_record_range (hc_volume *v, uint64_t start, uint64_t end, bool withdraw,
                           unsigned src, unsigned cls, unsigned advice);

/* Commits the journal buffer (and checkpoints if asked or needed); see
 * format.h.  Takes commit_lock and lock itself. */
int hc_meta_commit (hc_volume *v, bool checkpoint);

/* Writes metadata (len bytes of buf at off) to the fast tier, as
 * hc_tier_write does, and on success counts the whole 4 KiB flash pages it
 * touches in meta_flash (any thread; commit.c's writes hold commit_lock). */
int hc_meta_flash_write (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags);

/* Writes the superblock (next generation, other slot) with the current mode
 * and replay position, FUA.  Caller holds commit_lock. */
int hc_meta_write_sb (hc_volume *v, bool clean);

/* Is the unmapping of volume block blk not durable yet (caller holds
 * lock)?  Then a commit must come before the slow tier changes there. */
static inline bool
hc_vol_unmap_pending (const hc_volume *v, uint64_t blk)
{
  return hc_u64set_has (&v->unmapped, blk) || hc_u64set_has (&v->unmapped_committing, blk);
}

/* ---- io.c ---- */

/* Is cache block c pinned (busy)? */
static inline bool
hc_vol_busy (hc_volume *v, uint32_t c)
{
  return atomic_load_explicit (&v->pins[c], memory_order_acquire) != 0;
}

/* Dirty blocks in the cache (caller holds lock). */
static inline uint64_t
hc_vol_dirty (const hc_volume *v)
{
  uint64_t n = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    n += v->dir.ndirty[c];
  return n;
}

/* Takes every stripe exclusively, in order (range operations, mode
 * switches); and gives them back. */
void hc_vol_lock_stripes (hc_volume *v);
void hc_vol_unlock_stripes (hc_volume *v);

/* Victim filter: clean and not pinned (caller holds lock). */
bool hc_vol_evictable (void *arg, uint32_t c);

/* Resolves the hint of block blk for an I/O with context ctx (caller holds
 * lock). */
struct hc_hint hc_vol_resolve (hc_volume *v, uint64_t blk, const struct hc_ioctx *ctx);

/* ---- fill.c ---- */

/* Starts and stops the filler thread; stopping drops the fills that wait
 * (their blocks go back to the free list). */
int hc_fill_start (hc_volume *v);
void hc_fill_stop (hc_volume *v);

/* Bytes of fill data queued or being written (tests wait for 0). */
uint64_t hc_fill_pending (hc_volume *v);

/* Which way the fill of a run of k misses goes (caller holds lock): sets
 * *defer, and returns the trial the run belongs to (0: on the reader's
 * thread, 1: deferred), or -1.  A run of a trial reports how long it took
 * the reader, through hc_trial_report on hc_fill_trial (v, k). */
int hc_fill_way (hc_volume *v, unsigned k, bool *defer);

/* The trials that decide the fill of a run of k misses: a single block's
 * and a run's are timed apart (a hand-off's cost weighs differently on
 * one block's write than on many). */
static inline struct hc_trial *
hc_fill_trial (hc_volume *v, unsigned k)
{
  return &v->fill_way[k > 1];
}

/* ---- trial.c ---- */

/* Which way the next run goes (caller holds lock): sets *alt (way 1), and
 * returns the trial the run belongs to (0 or 1), or -1 for none. */
int hc_trial_way (struct hc_trial *t, bool *alt);

/* Reports a run of trial `trial` (-1: none, nothing is done): it took the
 * caller ns for `units` of work (caller does not hold lock). */
void hc_trial_report (hc_volume *v, struct hc_trial *t, int trial, uint64_t ns,
                      unsigned units);

/* ---- writer.c ---- */

/* Starts and stops the slow writer (no job may be waiting at the stop). */
int hc_writer_start (hc_volume *v);
void hc_writer_stop (hc_volume *v);

/* Hands job j (its runs and flags set) to the slow writer.  Returns false,
 * doing nothing, when there is none or it is busy: the caller writes the
 * runs itself.  A job handed over must be waited for (hc_writer_wait)
 * before its buffers go. */
bool hc_writer_submit (hc_volume *v, struct hc_slow_job *j);

/* Waits until job j is written (again: at once).  Returns its rc. */
int hc_writer_wait (hc_volume *v, struct hc_slow_job *j);

/* ---- cleaner.c ---- */

/* Runs up to `budget` blocks of the queued willneed prefetches (caller
 * holds no lock); one that finds no room or fails ends the queue.
 * Returns 0 or the error. */
int hc_vol_run_prefetch (hc_volume *v, uint64_t budget);

/* Writes back one dirty block; returns 1 if it did, 0 if there was nothing
 * to do (it changed meanwhile), or an error. */
int hc_vol_writeback (hc_volume *v, uint32_t c, bool try);

int hc_cleaner_start (hc_volume *v);
void hc_cleaner_stop (hc_volume *v);

/* Writes back dirty blocks, least valuable class first, in slow-tier order,
 * until at most `target` remain dirty or nothing more can be done.  Returns
 * the number written back, or an error. */
long hc_clean_to (hc_volume *v, uint64_t target);

/* Settles the copies that are clean but recorded dirty (write.c): records
 * them clean and commits.  try: skip the blocks whose stripe is busy (and
 * settle them another time).  Returns how many it settled, or an error. */
long hc_vol_settle (hc_volume *v, bool try);

/* Makes free blocks available: evicts clean blocks to pending, commits.
 * Returns the number of free blocks afterwards. */
uint32_t hc_vol_reclaim (hc_volume *v, uint32_t want);

#endif /* HC_ENGINE_VOL_H */
