/* The request machinery shared by the read path (read.c), the write path
 * (write.c), advice (advise.c) and the cleaner's work on single blocks
 * (cleaner.c): a request being cut into blocks, stripes and pins, block
 * checksums, taking a free block, and the volume's partial last block.
 * The small helpers are inline here; the rest is in io.c. */
#ifndef HC_ENGINE_IO_H
#define HC_ENGINE_IO_H

#include "vol.h"

static inline pthread_rwlock_t *
stripe (hc_volume *v, uint64_t blk)
{
  return &v->stripes[blk & (v->nstripes - 1)];
}

/* Takes blk's stripe exclusively.  Every exclusive hold of a stripe counts
 * in its generation (stripe_gen): a background fill installs a block only
 * if its stripe's count has not moved since the block was read (fill.c). */
static inline void
stripe_wrlock (hc_volume *v, uint64_t blk)
{
  hc_wrlock (stripe (v, blk));
  v->stripe_gen[blk & (v->nstripes - 1)]++;
}

/* The same, if the stripe is free at once; returns 0 or EBUSY. */
static inline int
stripe_trywrlock (hc_volume *v, uint64_t blk)
{
  int rc = hc_trywrlock (stripe (v, blk));
  if (rc == 0)
    v->stripe_gen[blk & (v->nstripes - 1)]++;
  return rc;
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

/* Pins (add) or unpins cache blocks c … c+n−1, one atomic add per eight of
 * them where they share an aligned 64-bit word: the counts are bytes, and
 * adding 1 to each byte of a word is adding 0x0101…01 to the word.  No byte
 * carries into its neighbour or borrows from it: a count never passes 255
 * (vol.h), and a thread unpins only what it pinned.  A 1 MiB hit of 4 KiB
 * blocks took 512 locked instructions, one per block each way, and they
 * were three fifths of read_hits' own time. */
static inline void
pin_run (hc_volume *v, uint32_t c, unsigned n, bool add)
{
  const uint64_t ones = UINT64_C (0x0101010101010101);
  const uint32_t end = c + n;

  for (; c < end && ((c & 7) || end - c < 8); c++)
    add ? pin (v, c) : unpin (v, c);
  for (; end - c >= 8; c += 8) {
    _Atomic uint64_t *w = (_Atomic uint64_t *) (void *) (v->pins + c); /* calloc: aligned */
    if (add)
      atomic_fetch_add_explicit (w, ones, memory_order_acq_rel);
    else
      atomic_fetch_sub_explicit (w, ones, memory_order_acq_rel);
  }
  for (; c < end; c++)
    add ? pin (v, c) : unpin (v, c);
}

/* The door of every call that may pin a block (reads, writes, discards and
 * zeroes, advice, cleaning): at most HC_VOL_MAX_INSIDE threads pass it at
 * once, so that an 8-bit pin count, with the cleaner's thread, never
 * overflows (a thread pins a block once at most).  Those over the limit
 * wait here, pinning nothing, until one leaves.
 *
 * The door is HC_VOL_DOORS counters, each on a cache line of its own and
 * each letting HC_VOL_MAX_INSIDE / HC_VOL_DOORS threads in; a thread tries
 * its own first (threads are dealt doors in turn), then the others.  One
 * counter that every request of every thread changed twice passed from
 * CPU to CPU with each: two threads reading hits spent about a twentieth
 * of their time waiting for it.  hc_vol_enter returns the door taken, to
 * be given to the hc_vol_leave that pairs with it. */
#define HC_VOL_MAX_INSIDE (HC_VOL_DOORS * 15)

unsigned hc_vol_enter (hc_volume *v);

static inline void
hc_vol_leave (hc_volume *v, unsigned door)
{
  atomic_fetch_sub_explicit (&v->door[door].inside, 1, memory_order_release);
}

/* Frees a block taken for an admission that did not happen (caller holds
 * lock).  It never held a durable mapping, so it is reusable now. */
static inline void
untake (hc_volume *v, uint32_t c)
{
  hc_list_push_head (&v->dir.map, &v->dir.map.free, c);
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

/* The slow tier's data changed by a write that its writer flushes itself
 * before recording anything that depends on it (the cleaner's write-back,
 * cleaner.c): readahead windows are stale, but a commit need not flush
 * the slow tier for it (caller holds lock). */
static inline void
slow_written (hc_volume *v)
{
  v->slow_gen++;
}

/* Reads the sectors covering [boff, boff+blen) of a block at `base` on tier
 * t into buf (bs bytes, block-relative). */
static inline int
read_span (hc_volume *v, hc_tier *t, uint64_t base, uint32_t boff, uint32_t blen, uint8_t *buf)
{
  uint32_t s0 = boff & ~(HC_SECTOR_SIZE - 1);
  uint32_t s1 = (boff + blen + HC_SECTOR_SIZE - 1) & ~(HC_SECTOR_SIZE - 1);
  (void) v;
  return hc_tier_read (t, buf + s0, s1 - s0, base + s0);
}

/* A request being cut into blocks. */
struct req {
  const struct hc_ioctx *ctx;
  uint64_t off, len; /* the whole request */
  bool seq;          /* past the sequential cutoff: a run of its stream's or of the volume's */
  bool seq_own;      /* … of its stream's own */
  bool started;      /* sequential detection done */
  bool around;       /* the fast tier failed a write of this request: go around it */
  uint8_t *bounce;   /* one block, taken on first need (hc_vol_bounce) */
};

/* Does block blk continue the request's previous block (struct hc_access's
 * cont)? */
static inline bool
req_cont (const hc_volume *v, const struct req *r, uint64_t blk)
{
  return blk > r->off >> v->bshift;
}

/* Should this access go around the fast tier (caller holds lock)? */
static inline bool
around (hc_volume *v, const struct req *r)
{
  return r->around
         || (atomic_load_explicit (&v->degraded, memory_order_relaxed)
             && hc_now_ns () < v->degraded_retry_ns);
}

/* Data checksums (io.c): block c now holds `data` for origin blk (records a
 * new generation; caller holds lock), and whether data read from c is what
 * was written there (with `count`, a mismatch is counted). */
void hc_vol_set_sum (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data);
bool hc_vol_sum_ok (hc_volume *v, uint32_t c, uint64_t blk, const uint8_t *data, bool count);

/* The fast tier failed a data write with rc (caller holds lock): the
 * volume is degraded for a second. */
void hc_vol_fast_failed (hc_volume *v, int rc);

/* Marks copy c clean, the slow tier having its data, but recorded dirty
 * until settled (HC_M_UNRECORDED; see the top of write.c) (caller holds
 * lock). */
static inline void
hc_vol_clean_unrecorded (hc_volume *v, uint32_t c)
{
  hc_dir_set_clean (&v->dir, c);
  v->dir.map.blk[c].meta |= HC_M_UNRECORDED;
  v->unsettled = true;
}

/* Maps free block c to a->origin, clean, unless the origin is mapped
 * already, in which case c goes back to the free list (caller holds lock).
 * In write-through and write-around the copy is recorded dirty (see
 * hc_vol_clean_unrecorded).  Returns whether c was installed. */
bool hc_vol_install (hc_volume *v, uint32_t c, const struct hc_access *a);

/* Takes a free block for `a`, evicting and committing as needed, waiting
 * for the cleaner only if may_wait (caller holds lock, which may be
 * dropped and retaken).  Returns the block, or HC_NIL with *why. */
uint32_t hc_vol_take_block (hc_volume *v, const struct hc_access *a, enum hc_bypass *why,
                            bool may_wait);

/* Asks for a commit if the journal buffer has grown: from the cleaner, or
 * by setting *commit_now where there is none (caller holds lock). */
void hc_vol_commit_soon (hc_volume *v, bool *commit_now);

/* Per-request bookkeeping (sequential detection), once, under the first
 * block's lock. */
void hc_vol_req_start (hc_volume *v, struct req *r);

/* The request's bounce buffer (one block; NULL if out of memory), and the
 * end of its use. */
uint8_t *hc_vol_bounce (hc_volume *v, struct req *r);
void hc_vol_bounce_done (hc_volume *v, struct req *r);

/* The most blocks a read-miss fill holds (a run of misses, read.c). */
#define HC_FILL_MAX 256

/* Writes the blocks of a missed run blk … blk+k−1 (k ≤ HC_FILL_MAX) that
 * were given cache blocks (newc[i], or HC_NIL) to the fast tier from data,
 * one write per run of consecutive cache blocks, and installs them, or
 * gives them back if the write failed (the rest of request r then goes
 * around the fast tier).  With gen NULL the caller holds the run's stripes
 * shared; otherwise gen[i] is block i's stripe generation when its data
 * was read, and a block whose stripe is busy or has been held exclusively
 * since is given back (fill.c).  Returns whether a commit is due now (the
 * caller commits, after releasing its stripes). */
bool hc_fill_run (hc_volume *v, uint64_t blk, unsigned k, const uint32_t *newc,
                  const struct hc_access *a, const uint8_t *data, const uint32_t *gen,
                  struct req *r);

/* Hands the fill of a run just read (as for hc_fill_run; the caller holds
 * the run's stripes shared, and some block was given a cache block) to the
 * filler thread, with a copy of its data.  Returns false if the volume has
 * no filler (the caller fills); true if the filler owns the run's cache
 * blocks now — or if the queue was full and they were given back. */
bool hc_fill_defer (hc_volume *v, uint64_t blk, unsigned k, const uint32_t *newc,
                    const struct hc_access *a, const uint8_t *data);

/* Takes the stripes of blocks blk … blk+n−1, waiting only for the first,
 * shared or exclusive (excl); returns how many it took (≥ 1).  Unlock
 * releases n of them. */
unsigned hc_vol_lock_run (hc_volume *v, uint64_t blk, unsigned n, bool excl);
void hc_vol_unlock_run (hc_volume *v, uint64_t blk, unsigned n);

/* -EINVAL unless [off, off+len) lies within the volume. */
int hc_vol_check_range (hc_volume *v, uint64_t off, uint64_t len);

/* Does the part of a request on the volume's partial last block (a read
 * into dst, or a write of src), and returns how many bytes precede it, or
 * a negative errno. */
int64_t hc_vol_tail_io (hc_volume *v, uint8_t *dst, const uint8_t *src, uint64_t len, uint64_t off,
                        unsigned flags);

/* Calls fn for each cached block whose origin is in [b0, b1) (caller holds
 * lock), walking the range or the cache, whichever is smaller; fn may drop
 * the block it is given, and only that one. */
void hc_vol_each_cached (hc_volume *v, uint64_t b0, uint64_t b1,
                         void (*fn) (hc_volume *v, uint32_t c, void *arg), void *arg);

#endif
