/* The power-cut sweep: the consistency contract, checked at thousands of
 * crash points.
 *
 * For every cache mode and several hint mixes, a seeded workload of mixed
 * reads, writes (whole and partial blocks, some FUA), flushes, discards,
 * zeroes, cleans and advice runs on a volume whose two tiers share one power
 * domain.  A dry run counts the tier writes W; then for each cut point k
 * (every one of 1 … W for short workloads, a sample for long ones) the
 * workload is replayed from a fresh format with the power cut at the k-th
 * write: that write and everything after it fails, and every write since
 * each tier's last flush is kept, lost or torn per sector at random.  The
 * volume is then reopened and checked against a model:
 *
 *   - every sector holds the content it had at the last completed flush (or
 *     the block's last acknowledged FUA write), or the content of a later
 *     write — never older, never anything else;
 *   - a block whose last acknowledged write was FUA holds that write whole;
 *   - every cached block marked clean equals the slow tier (no stale clean
 *     copy that could later resurface);
 *   - after cleaning and evicting everything, every block reads the same as
 *     before (the data does not change by itself).
 *
 * Two geometries.  The tiny one formats afresh for every cut point: a
 * 24-block cache in front of a 256-block volume, so that the workload's
 * blocks collide and every path (admission, eviction, reclaim of a full
 * cache) runs within a few dozen operations.  The large one starts every
 * cut point from one prepared state per mode: a cache of over 100,000
 * blocks filled to capacity (some of them dirty in write-back) in front of a
 * 1 GiB volume, whose table and checkpoints span hundreds of sectors; the
 * workload runs in a 256-block window of it, so its admissions evict blocks
 * the preparation placed anywhere in the cache.  The prepared state is kept
 * in memory files and each run maps them copy-on-write, paying only for
 * the pages it changes.  Outside the window nothing may change: every
 * mapping there is one the preparation made, and a cache block the run
 * wrote that is still mapped to a block outside the window must still hold
 * that block's data (no reused cache block is served under its old name).
 *
 * Usage: test_powercut [--points N] [--large N] [--seed S] [--verbose]
 *   --points N  cut points of the tiny geometry (default 1200)
 *   --large N   cut points of the large geometry (default N / 10)
 * It prints the number of cut points and of violations, and fails if any.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "test.h"
#include "tier/tier.h"

#define BS 4096u
#define SECT 512u
#define VOL_BLOCKS 256u /* the window the workload runs in (the tiny volume's size) */
#define WORK_BLOCKS 96u /* the random workloads' blocks: fewer, so that they collide */
#define SLOW_SIZE (VOL_BLOCKS * BS)
/* The large geometry: a 1 GiB volume, a 420 MiB fast tier (about 106,000
 * cache blocks). */
#define LARGE_SLOW ((uint64_t) 1 << 30)
#define LARGE_FAST ((uint64_t) 420 << 20)
/* Superblocks, two checkpoint copies (table, range hints, statistics: 4 KiB
 * each while the cache has under 63 × 8 blocks), the journal, the data. */
#define FAST_SIZE(blocks) (8192 + 2 * 3 * 4096 + (256u << 10) + (blocks) * BS)
#define NOPS 70

/* ---- The workload. ---- */

enum op_kind { OP_WRITE, OP_READ, OP_FLUSH, OP_DISCARD, OP_ZERO, OP_ADVISE, OP_CLEAN, OP_CHECKPOINT };

struct op {
  enum op_kind kind;
  uint64_t off, len;
  bool fua;
  struct hc_hint hint; /* per-I/O hint, or the advice for OP_ADVISE */
};

static uint64_t rs;
static uint64_t
rnd (void)
{
  rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
  return rs;
}

static const uint8_t classes[] = {
  HC_CLASS_METADATA, HC_CLASS_JOURNAL, HC_CLASS_DATA, HC_CLASS_STREAMING, HC_CLASS_BACKGROUND,
  HC_CLASS_TRANSACTION,
};

/* A seeded workload; mix 0: no hints, 1: classes, 2: classes and advice. */
static void
make_workload (uint64_t seed, unsigned mix, struct op *ops)
{
  const uint64_t size = WORK_BLOCKS * BS;
  rs = seed * 0x9e3779b97f4a7c15ull + 1;
  for (unsigned i = 0; i < NOPS; i++) {
    struct op *o = &ops[i];
    unsigned r = rnd () % 100;
    memset (o, 0, sizeof *o);
    if (r < 45) {
      o->kind = OP_WRITE;
      if (rnd () % 2) { /* whole blocks */
        o->len = (1 + rnd () % 3) * BS;
        o->off = (rnd () % (WORK_BLOCKS - 3)) * BS;
      } else {
        o->len = 1 + rnd () % 6000;
        o->off = rnd () % (size - o->len);
      }
      o->fua = rnd () % 8 == 0;
    } else if (r < 65) {
      o->kind = OP_READ;
      o->len = 1 + rnd () % (3 * BS);
      o->off = rnd () % (size - o->len);
    } else if (r < 75) {
      o->kind = OP_FLUSH;
    } else if (r < 80) {
      o->kind = rnd () % 2 ? OP_DISCARD : OP_ZERO;
      o->len = 1 + rnd () % (4 * BS);
      o->off = rnd () % (size - o->len);
      o->fua = o->kind == OP_ZERO && rnd () % 3 == 0;
    } else if (r < 92 && mix == 2) {
      static const uint8_t adv[] = { HC_ADVICE_WILLNEED, HC_ADVICE_DONTNEED, HC_ADVICE_EVICT,
                                     HC_ADVICE_NORMAL };
      o->kind = OP_ADVISE;
      o->len = 1 + rnd () % (8 * BS);
      o->off = rnd () % (size - o->len);
      o->hint.advice = adv[rnd () % 4];
      if (rnd () % 2)
        o->hint.cls = classes[rnd () % sizeof classes];
    } else if (r < 96) {
      o->kind = OP_CLEAN;
    } else {
      o->kind = OP_CHECKPOINT; /* what a full journal forces: a commit into the other copy */
    }
    if (mix >= 1 && o->kind != OP_ADVISE && rnd () % 3)
      o->hint.cls = classes[rnd () % sizeof classes];
  }
}

/* The bytes an op writes (deterministic, different for every op). */
static uint8_t
payload (unsigned opi, uint64_t byte)
{
  return (uint8_t) ((opi * 131u + byte * 7u + (byte >> 9) * 13u) ^ 0x5a);
}

/* ---- The model: per block, the versions a crash may leave. ---- */

struct versions {
  unsigned n;
  uint8_t (*v)[BS]; /* v[0] is the durable floor */
  bool fua_whole;   /* the last acknowledged write was FUA */
};

static struct versions model[VOL_BLOCKS];

/* Starts every block of the window at `init` (VOL_BLOCKS blocks), or at
 * zeros if NULL. */
static void
model_reset (const uint8_t *init)
{
  for (unsigned b = 0; b < VOL_BLOCKS; b++) {
    free (model[b].v);
    model[b].v = calloc (1, BS);
    if (init)
      memcpy (model[b].v, init + (size_t) b * BS, BS);
    model[b].n = 1;
    model[b].fua_whole = false;
  }
}

/* Appends the block's content after applying bytes [boff, boff+len). */
static void
model_write (uint64_t b, uint32_t boff, uint32_t len, const uint8_t *src, bool zero)
{
  struct versions *m = &model[b];
  m->v = realloc (m->v, (m->n + 1) * sizeof *m->v);
  memcpy (m->v[m->n], m->v[m->n - 1], BS);
  if (zero)
    memset (m->v[m->n] + boff, 0, len);
  else
    memcpy (m->v[m->n] + boff, src, len);
  m->n++;
}

/* Makes the newest version of block b the floor. */
static void
model_durable (uint64_t b)
{
  struct versions *m = &model[b];
  memmove (m->v[0], m->v[m->n - 1], BS);
  m->n = 1;
}

/* Applies a write-like op to the model. */
static void
model_apply (unsigned opi, const struct op *o, bool zero)
{
  uint8_t buf[BS];
  for (uint64_t off = o->off; off < o->off + o->len;) {
    uint64_t b = off / BS;
    uint32_t boff = off % BS, n = BS - boff;
    if (n > o->off + o->len - off)
      n = (uint32_t) (o->off + o->len - off);
    for (uint32_t i = 0; i < n; i++)
      buf[i] = payload (opi, off + i);
    model_write (b, boff, n, buf, zero);
    off += n;
  }
}

/* ---- The recorder: which pages of the fast tier a run wrote. ---- */

/* A tier that passes everything to the one below and notes, per 4 KiB page,
 * whether a write, zero or discard reached it (below the power domain: what
 * landed, not what was asked). */
struct recorder {
  hc_tier base;
  hc_tier *lower;
  uint8_t *bits;
};

static void
rec_mark (hc_tier *t, uint64_t off, uint64_t len)
{
  struct recorder *r = (struct recorder *) t;
  for (uint64_t p = off / BS; p <= (off + len - 1) / BS; p++)
    r->bits[p / 8] |= (uint8_t) (1u << (p % 8));
}

static bool
rec_written (hc_tier *t, uint64_t page)
{
  return ((struct recorder *) t)->bits[page / 8] & (1u << (page % 8));
}

static int
rec_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  return hc_tier_read (((struct recorder *) t)->lower, buf, len, off);
}

static int
rec_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  rec_mark (t, off, len);
  return hc_tier_write (((struct recorder *) t)->lower, buf, len, off, flags);
}

static int
rec_flush (hc_tier *t)
{
  return hc_tier_flush (((struct recorder *) t)->lower);
}

static int
rec_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  rec_mark (t, off, len);
  return hc_tier_discard (((struct recorder *) t)->lower, off, len);
}

static int
rec_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  rec_mark (t, off, len);
  return hc_tier_zero (((struct recorder *) t)->lower, off, len);
}

static void
rec_close (hc_tier *t)
{
  free (((struct recorder *) t)->bits);
  free (t);
}

static const struct hc_tier_ops recorder_ops = {
  .kind = "recorder", .read = rec_read, .write = rec_write, .flush = rec_flush,
  .discard = rec_discard, .zero = rec_zero, .close = rec_close,
};

static hc_tier *
recorder_new (hc_tier *lower)
{
  struct recorder *r = calloc (1, sizeof *r);
  if (!r || !(r->bits = calloc (lower->size / BS / 8 + 1, 1))) {
    free (r);
    return NULL;
  }
  r->lower = lower;
  hc_tier_init (&r->base, &recorder_ops, lower->size, lower->caps, "recorder");
  return &r->base;
}

/* ---- The large geometry's prepared state, one per mode. ---- */

struct prepared {
  int ffd, sfd;         /* memory files holding the fast and slow tiers' images */
  const uint8_t *fimg;  /* the fast image, mapped read-only */
  uint32_t nblocks;     /* cache blocks */
  uint64_t data_off;    /* where cache block 0 lies on the fast tier */
  uint64_t *origin;     /* per cache block: the volume block it holds, or UINT64_MAX */
  unsigned cached, dirty;
};

static struct prepared prep; /* the current mode's, while the large geometry runs */
static uint64_t wbase;       /* the window's first byte on the volume (0: tiny) */

/* The content the preparation gives volume block b (`gen` 0: its first
 * write, 1: the rewrite left dirty). */
static void
warm_fill (uint8_t *buf, uint64_t b, unsigned gen)
{
  for (unsigned i = 0; i < BS; i++)
    buf[i] = (uint8_t) ((b * 37u + i * 11u + (b >> 8) + gen * 101u) ^ 0xc3);
}

/* A memory file holding the tier's contents (zero stretches left as holes). */
static int
image_of (hc_tier *t)
{
  static uint8_t chunk[1 << 20], zero[1 << 20];
  int fd = memfd_create ("powercut-image", MFD_CLOEXEC);
  if (fd < 0 || ftruncate (fd, (off_t) t->size) < 0)
    return -1;
  for (uint64_t off = 0; off < t->size; off += sizeof chunk) {
    size_t n = t->size - off < sizeof chunk ? (size_t) (t->size - off) : sizeof chunk;
    if (hc_tier_read (t, chunk, n, off) < 0)
      return -1;
    if (memcmp (chunk, zero, n) != 0 && pwrite (fd, chunk, n, (off_t) off) != (ssize_t) n)
      return -1;
  }
  return fd;
}

/* Prepares the large state for `mode`: formats, writes 1/16 more blocks
 * than the cache holds (every other volume block, so that no request is
 * sequential), reads them back in a scattered order (which fills the cache
 * in the modes that admit on reads only), marks a few ranges with hints and,
 * in write-back, rewrites 512 scattered blocks that stay dirty; closes and
 * keeps both tiers' images.  Returns 0 or -1. */
static int
prepare (unsigned mode, bool checksums)
{
  struct hc_format_opts fo = { .mode = mode, .max_ranges = 64, .checksums = checksums };
  struct hc_open_opts oo = { .no_cleaner = true };
  hc_tier *fast, *slow;
  hc_volume *v;
  char why[200];
  uint8_t buf[BS];

  memset (&prep, 0, sizeof prep);
  if (hc_tier_new_memory (LARGE_FAST, &fast) || hc_tier_new_memory (LARGE_SLOW, &slow))
    return -1;
  if (hc_volume_format (fast, slow, &fo, why, sizeof why) < 0
      || hc_volume_open (fast, slow, &oo, &v, why, sizeof why) < 0) {
    fprintf (stderr, "prepare: %s\n", why);
    return -1;
  }
  uint64_t n = v->dir.map.n + v->dir.map.n / 16, i = 0; /* blocks 0, 2, 4 … 2n - 2 */
  for (; i < n; i++) {
    warm_fill (buf, 2 * i, 0);
    if (hc_volume_write (v, buf, BS, 2 * i * BS, 0, NULL) < 0)
      return -1;
  }
  for (uint64_t k = 0, j = 0; k < n; k++, j = (j + 7919) % n)
    if (hc_volume_read (v, buf, BS, 2 * j * BS, NULL) < 0)
      return -1;
  for (unsigned k = 0; k < 16; k++)
    if (hc_volume_advise (v, (uint64_t) k * (64u << 20), 1u << 20,
                          (struct hc_hint) { .cls = classes[k % sizeof classes] }) < 0)
      return -1;
  if (mode == HC_MODE_WRITEBACK) {
    if (hc_volume_clean (v) < 0)
      return -1;
    for (uint64_t k = 0, j = 0; k < 512; k++, j = (j + 104729) % n) {
      warm_fill (buf, 2 * j, 1);
      if (hc_volume_write (v, buf, BS, 2 * j * BS, 0, NULL) < 0)
        return -1;
    }
  }
  /* Evictions free blocks in batches: reads of blocks never written (clean
   * admissions) until none is free, so that the workload's first admission
   * evicts. */
  for (; v->dir.map.free.count + v->dir.map.pending.count > 0 && 2 * i < LARGE_SLOW / BS; i++)
    if (hc_volume_read (v, buf, BS, 2 * i * BS, NULL) < 0)
      return -1;
  if (hc_volume_close (v) < 0)
    return -1;
  /* What the preparation left mapped, block by block. */
  oo.read_only = true;
  if (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) < 0)
    return -1;
  prep.nblocks = v->dir.map.n;
  prep.data_off = v->sb.data_off;
  prep.origin = malloc (prep.nblocks * sizeof *prep.origin);
  for (uint32_t c = 0; c < prep.nblocks; c++) {
    uint64_t w = v->dir.map.blk[c].meta;
    prep.origin[c] = (w & HC_M_VALID) ? hc_meta_origin (w) : UINT64_MAX;
    prep.cached += (w & HC_M_VALID) != 0;
    prep.dirty += (w & HC_M_VALID) && (w & HC_M_DIRTY);
  }
  hc_volume_close (v);
  prep.ffd = image_of (fast);
  prep.sfd = image_of (slow);
  hc_tier_close (fast);
  hc_tier_close (slow);
  if (prep.ffd < 0 || prep.sfd < 0)
    return -1;
  prep.fimg = mmap (NULL, LARGE_FAST, PROT_READ, MAP_SHARED, prep.ffd, 0);
  return prep.fimg == MAP_FAILED ? -1 : 0;
}

static void
prepared_free (void)
{
  munmap ((void *) prep.fimg, LARGE_FAST);
  close (prep.ffd);
  close (prep.sfd);
  free (prep.origin);
  memset (&prep, 0, sizeof prep);
}

/* ---- Running. ---- */

struct rig {
  hc_tier *fmem, *smem, *rec, *fast, *slow;
  hc_power *pw;
  hc_volume *v;
};

/* Sets up the tiers and opens the volume: the tiny geometry formatted
 * afresh (a cache of `cache_blocks`), or, while a large state is prepared,
 * the prepared images mapped copy-on-write. */
static int
rig_up (struct rig *r, unsigned mode, uint64_t seed, unsigned cache_blocks)
{
  struct hc_format_opts fo = { .mode = mode, .max_ranges = 64, .checksums = (seed >> 3) & 1 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];

  memset (r, 0, sizeof *r);
  if (prep.fimg) {
    if (hc_tier_new_memory_image (prep.ffd, LARGE_FAST, &r->fmem)
        || hc_tier_new_memory_image (prep.sfd, LARGE_SLOW, &r->smem) || !(r->rec = recorder_new (r->fmem)))
      return -ENOMEM;
  } else if (hc_tier_new_memory (FAST_SIZE (cache_blocks), &r->fmem)
             || hc_tier_new_memory (SLOW_SIZE, &r->smem))
    return -ENOMEM;
  if (hc_power_new (seed, &r->pw) || hc_tier_new_faulty (r->rec ? r->rec : r->fmem, r->pw, seed, &r->fast)
      || hc_tier_new_faulty (r->smem, r->pw, seed + 1, &r->slow))
    return -ENOMEM;
  if ((!prep.fimg && hc_volume_format (r->fast, r->slow, &fo, why, sizeof why) < 0)
      || hc_volume_open (r->fast, r->slow, &oo, &r->v, why, sizeof why) < 0) {
    fprintf (stderr, "rig: %s\n", why);
    return -EIO;
  }
  return 0;
}

static void
rig_down (struct rig *r)
{
  if (r->v)
    hc_volume_close (r->v);
  hc_tier_close (r->fast);
  hc_tier_close (r->slow);
  hc_power_free (r->pw);
  if (r->rec)
    hc_tier_close (r->rec);
  hc_tier_close (r->fmem);
  hc_tier_close (r->smem);
}

/* Runs n ops, then (if asked) closes, until the end or the first failure;
 * keeps the model in step.  Returns the index of the op that failed (n - 1
 * if the close did, n if none). */
static unsigned
run (struct rig *r, const struct op *ops, unsigned n, bool and_close)
{
  static uint8_t buf[24 * BS]; /* the largest op: the checkpoint sweep's 24-block writes */
  for (unsigned i = 0; i < n; i++) {
    const struct op *o = &ops[i];
    struct hc_ioctx ctx = { .hint = o->hint };
    int rc = 0;
    switch (o->kind) {
    case OP_WRITE:
      for (uint64_t k = 0; k < o->len; k++)
        buf[k] = payload (i, o->off + k);
      /* Count the write as possibly landed before knowing the outcome: an
       * interrupted write's data is a "later write" too. */
      model_apply (i, o, false);
      rc = hc_volume_write (r->v, buf, o->len, wbase + o->off, o->fua ? HC_VOL_FUA : 0, &ctx);
      if (rc == 0 && o->fua)
        for (uint64_t b = o->off / BS; b <= (o->off + o->len - 1) / BS; b++) {
          model_durable (b);
          model[b].fua_whole = true;
        }
      else
        for (uint64_t b = o->off / BS; b <= (o->off + o->len - 1) / BS; b++)
          model[b].fua_whole = false;
      break;
    case OP_READ:
      rc = hc_volume_read (r->v, buf, o->len, wbase + o->off, &ctx);
      break;
    case OP_FLUSH:
      rc = hc_volume_flush (r->v);
      if (rc == 0)
        for (unsigned b = 0; b < VOL_BLOCKS; b++)
          model_durable (b);
      break;
    case OP_DISCARD:
    case OP_ZERO:
      model_apply (i, o, true);
      for (uint64_t b = o->off / BS; b <= (o->off + o->len - 1) / BS; b++)
        model[b].fua_whole = false;
      rc = o->kind == OP_ZERO ? hc_volume_zero (r->v, wbase + o->off, o->len, o->fua ? HC_VOL_FUA : 0, &ctx)
                              : hc_volume_discard (r->v, wbase + o->off, o->len, &ctx);
      if (rc == 0 && o->fua)
        for (unsigned b = 0; b < VOL_BLOCKS; b++)
          model_durable (b); /* a FUA zero flushes the whole volume */
      break;
    case OP_ADVISE:
      rc = hc_volume_advise (r->v, wbase + o->off, o->len, o->hint);
      break;
    case OP_CLEAN:
      rc = hc_volume_clean (r->v);
      break;
    case OP_CHECKPOINT:
      rc = hc_meta_commit (r->v, true);
      if (rc == 0)
        for (unsigned b = 0; b < VOL_BLOCKS; b++)
          model_durable (b);
      break;
    }
    if (rc < 0) {
      hc_volume_close (r->v); /* the power is off: this writes nothing */
      r->v = NULL;
      return i;
    }
  }
  if (!and_close)
    return n;
  /* Closing commits and checkpoints (twice): a flush, if it completes. */
  int rc = hc_volume_close (r->v);
  r->v = NULL;
  if (rc == 0)
    for (unsigned b = 0; b < VOL_BLOCKS; b++)
      model_durable (b);
  return rc == 0 ? n : n - 1;
}

/* What the volume reads back, opened read-only on the raw tiers (so that
 * the open writes nothing).  Returns false if it does not open. */
static bool
view (struct rig *r, uint8_t *out, bool verbose, const char *what)
{
  struct hc_open_opts oo = { .no_cleaner = true, .read_only = true };
  char why[200];
  hc_volume *v;

  if (hc_volume_open (r->fmem, r->smem, &oo, &v, why, sizeof why) < 0) {
    if (verbose)
      fprintf (stderr, "%s: read-only open failed: %s\n", what, why);
    return false;
  }
  int rc = hc_volume_read (v, out, VOL_BLOCKS * BS, wbase, NULL);
  hc_volume_close (v);
  return rc == 0;
}

/* Recovery cut short: opens the recovered volume through the power domain
 * with a cut armed at its k-th write (inside the replay's checkpoint, or
 * later in the close's), then lets the power come back. */
static void
cut_recovery (struct rig *r, uint64_t k)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  hc_volume *v;

  hc_power_arm (r->pw, k);
  if (hc_volume_open (r->fast, r->slow, &oo, &v, why, sizeof why) == 0)
    hc_volume_close (v);
  if (!hc_power_is_cut (r->pw))
    hc_power_arm (r->pw, 1);
  hc_power_cut_apply (r->pw);
}

/* Checks the recovered volume; returns the number of violations. */
static unsigned
verify (struct rig *r, bool verbose, const char *what)
{
  static uint8_t got[VOL_BLOCKS * BS], again[VOL_BLOCKS * BS];
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  unsigned bad = 0;
  hc_volume *v;

  if (hc_volume_open (r->fmem, r->smem, &oo, &v, why, sizeof why) < 0) {
    if (verbose)
      fprintf (stderr, "%s: reopen failed: %s\n", what, why);
    return 1;
  }
  if (hc_volume_read (v, got, sizeof got, wbase, NULL) < 0) {
    hc_volume_close (v);
    return 1;
  }
  for (unsigned b = 0; b < VOL_BLOCKS; b++) {
    const struct versions *m = &model[b];
    bool whole = false;
    for (unsigned k = 0; k < m->n && !whole; k++)
      whole = memcmp (got + b * BS, m->v[k], BS) == 0;
    if (m->fua_whole && !whole) {
      bad++;
      if (verbose)
        fprintf (stderr, "%s: block %u: FUA write not whole\n", what, b);
      continue;
    }
    for (unsigned s = 0; s < BS / SECT && !whole; s++) {
      bool ok = false;
      for (unsigned k = 0; k < m->n && !ok; k++)
        ok = memcmp (got + b * BS + s * SECT, m->v[k] + s * SECT, SECT) == 0;
      if (!ok) {
        bad++;
        if (verbose)
          fprintf (stderr, "%s: block %u sector %u holds data never written there or older "
                   "than the last flush (%u versions)\n", what, b, s, m->n);
        break;
      }
    }
  }
  /* No clean cached block may differ from the slow tier.  In the large
   * geometry, a mapping outside the window must be one the preparation
   * made, and if the run wrote its cache block (reused it for the window),
   * the recovered table must not name the old block there any more. */
  pthread_mutex_lock (&v->lock);
  for (uint32_t c = 0; c < v->dir.map.n; c++) {
    uint64_t w = v->dir.map.blk[c].meta, origin = hc_meta_origin (w);
    uint64_t at = v->sb.data_off + (uint64_t) c * BS;
    uint8_t a[BS], s[BS];
    if (!(w & HC_M_VALID))
      continue;
    if (prep.fimg && (origin * BS < wbase || origin * BS >= wbase + VOL_BLOCKS * BS)) {
      if (c >= prep.nblocks || prep.origin[c] != origin) {
        bad++;
        if (verbose)
          fprintf (stderr, "%s: cached block %u maps volume block %llu, outside the window, "
                   "which the preparation did not put there\n", what, c, (unsigned long long) origin);
        continue;
      }
      if (!rec_written (r->rec, at / BS))
        continue;
      hc_tier_read (r->fmem, a, BS, at);
      if (memcmp (a, prep.fimg + at, BS) != 0) {
        bad++;
        if (verbose)
          fprintf (stderr, "%s: cached block %u was rewritten but still maps volume block %llu\n",
                   what, c, (unsigned long long) origin);
        continue;
      }
    }
    if (!(w & HC_M_DIRTY)) {
      hc_tier_read (r->fmem, a, BS, at);
      hc_tier_read (r->smem, s, BS, origin * BS);
      if (memcmp (a, s, BS) != 0) {
        bad++;
        if (verbose)
          fprintf (stderr, "%s: cached block %u (volume block %llu) is marked clean but "
                   "differs from the slow tier\n", what, c, (unsigned long long) origin);
      }
    }
  }
  pthread_mutex_unlock (&v->lock);
  /* Write everything back, drop everything, read again: nothing changes. */
  if (hc_volume_clean (v) < 0
      || hc_volume_advise (v, wbase, VOL_BLOCKS * BS, (struct hc_hint) { .advice = HC_ADVICE_EVICT }) < 0
      || hc_volume_read (v, again, sizeof again, wbase, NULL) < 0 || memcmp (got, again, sizeof got)) {
    bad++;
    if (verbose)
      fprintf (stderr, "%s: data changed after clean and evict\n", what);
  }
  hc_volume_close (v);
  return bad;
}

/* Sweeps `want` cut points of workloads with hint mix `mix` in `mode`,
 * workload seeds from seed0: each workload's writes counted by a dry run,
 * then cut at each of them (or at a spread when they exceed the budget).
 * The large geometry when a state is prepared, else the tiny one.  Adds to
 * *points, *recovery_cuts; returns the violations. */
static unsigned
sweep (unsigned mode, unsigned mix, uint64_t seed0, unsigned want, bool verbose,
       unsigned *points_out, unsigned *recovery_cuts)
{
  static uint8_t before[VOL_BLOCKS * BS], after[VOL_BLOCKS * BS], init[VOL_BLOCKS * BS];
  static struct op ops[NOPS];
  unsigned points = 0, bad = 0;

  for (uint64_t wseed = seed0; points < want; wseed++) {
    struct rig r;
    make_workload (wseed * 10 + mix, mix, ops);
    /* The large geometry's window: anywhere in the volume, the prepared
     * blocks (every other one, in the first 85 %) and the rest. */
    wbase = prep.fimg ? (wseed * 2654435761u) % (LARGE_SLOW / BS - VOL_BLOCKS) * BS : 0;
    /* Dry run: how many writes does this workload make? */
    if (rig_up (&r, mode, wseed, 24) < 0) {
      CHECK (0, "rig");
      return 1;
    }
    if (prep.fimg && !view (&r, init, verbose, "the prepared state")) {
      CHECK (0, "the prepared state does not read");
      return 1;
    }
    model_reset (prep.fimg ? init : NULL);
    uint64_t base = hc_power_writes (r.pw);
    unsigned end = run (&r, ops, NOPS, true);
    CHECK (end == NOPS, "dry run of workload %llu stopped at op %u", (unsigned long long) wseed, end);
    uint64_t writes = hc_power_writes (r.pw) - base; /* the close's included */
    if (verbose)
      fprintf (stderr, "workload %llu: %llu writes\n", (unsigned long long) wseed, (unsigned long long) writes);
    rig_down (&r);
    /* Cut at every write if they fit the budget, else at a spread. */
    uint64_t budget = want - points, step = writes > budget ? writes / budget + 1 : 1;
    for (uint64_t k = 1 + (wseed % step); k <= writes + 1 && points < want; k += step) {
      char what[112];
      snprintf (what, sizeof what, "%s/%s/mix%u/workload %llu/cut %llu", hc_mode_name (mode),
                prep.fimg ? "large" : "tiny", mix, (unsigned long long) wseed,
                (unsigned long long) k);
      model_reset (prep.fimg ? init : NULL);
      rig_up (&r, mode, wseed * 1000 + k, 24);
      hc_power_arm (r.pw, k);
      run (&r, ops, NOPS, true);
      if (!hc_power_is_cut (r.pw))
        hc_power_arm (r.pw, 1); /* the end of the workload is a cut point too */
      hc_power_cut_apply (r.pw);
      /* What the crash left, then the same after a recovery that is
       * itself cut short at one of its writes: recovery changes no data,
       * so the volume must read exactly the same. */
      unsigned b = 0;
      if (!view (&r, before, verbose, what))
        b++;
      else {
        cut_recovery (&r, 1 + (wseed + k) % 24);
        (*recovery_cuts)++;
        if (!view (&r, after, verbose, what) || memcmp (before, after, sizeof before) != 0) {
          b++;
          if (verbose)
            fprintf (stderr, "%s: a recovery cut short changed what the volume reads\n", what);
        }
      }
      b += verify (&r, verbose, what);
      bad += b;
      CHECK (b == 0, "%s: %u violations", what, b);
      rig_down (&r);
      points++;
    }
  }
  *points_out += points;
  return bad;
}

/* A process that dies with writes its flush never made durable (here: the
 * slow tier fails the flush, so the close fails) leaves them in the
 * devices' volatile caches.  The next open reads them and serves them; a
 * power cut after that must not take back what the reopened volume has
 * served — the open makes what it found durable first.  For each mode and
 * eight draws of which unflushed sectors a cut keeps, blocks written (not
 * flushed) before the failed close read the same before and after a cut
 * that follows the reopen.  Returns the violations. */
static unsigned
open_after_failed_close (unsigned mode)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  unsigned bad = 0;
  char why[200];

  for (uint64_t seed = 1; seed <= 8; seed++) {
    static uint8_t buf[8 * BS], seen[8 * BS], after[8 * BS];
    struct hc_fault_rule fail_flush = { .ops = HC_FAULT_FLUSH, .fraction = 1.0, .err = EIO };
    struct hc_fault_rule none = { 0 };
    struct rig r;

    if (rig_up (&r, mode, 2000 + seed, 24) < 0) {
      bad++;
      break;
    }
    for (unsigned i = 0; i < sizeof buf; i++)
      buf[i] = (uint8_t) (i * 7 + 1);
    int rc = hc_volume_write (r.v, buf, sizeof buf, 16 * BS, 0, NULL);
    rc = rc ? rc : hc_volume_flush (r.v);
    for (unsigned i = 0; i < sizeof buf; i++)
      buf[i] = (uint8_t) (i * 13 + seed);
    rc = rc ? rc : hc_volume_write (r.v, buf, sizeof buf, 16 * BS, 0, NULL);
    CHECK (rc == 0, "%s: writes: %d", hc_mode_name (mode), rc);
    hc_tier_faulty_set (r.slow, &fail_flush);
    hc_tier_faulty_set (r.fast, &fail_flush);
    rc = hc_volume_close (r.v);
    r.v = NULL;
    CHECK (rc < 0, "%s: the close succeeded without a flush", hc_mode_name (mode));
    hc_tier_faulty_set (r.slow, &none);
    hc_tier_faulty_set (r.fast, &none);
    if (hc_volume_open (r.fast, r.slow, &oo, &r.v, why, sizeof why) < 0
        || hc_volume_read (r.v, seen, sizeof seen, 16 * BS, NULL) < 0) {
      CHECK (0, "%s: reopen: %s", hc_mode_name (mode), why);
      bad++;
      rig_down (&r);
      continue;
    }
    hc_power_arm (r.pw, 1); /* the power goes at the close's first write */
    hc_volume_close (r.v);
    r.v = NULL;
    hc_power_cut_apply (r.pw);
    if (hc_volume_open (r.fast, r.slow, &oo, &r.v, why, sizeof why) < 0
        || hc_volume_read (r.v, after, sizeof after, 16 * BS, NULL) < 0) {
      CHECK (0, "%s: open after the cut: %s", hc_mode_name (mode), why);
      bad++;
    } else if (memcmp (seen, after, sizeof seen) != 0) {
      CHECK (0, "%s, draw %llu: a power cut took back data the reopened volume had served",
             hc_mode_name (mode), (unsigned long long) seed);
      bad++;
    }
    rig_down (&r);
  }
  return bad;
}

int
main (int argc, char **argv)
{
  unsigned points_wanted = 1200, large_wanted = UINT32_MAX, total_points = 0, total_bad = 0;
  unsigned verbose = 0, recovery_cuts = 0;
  uint64_t seed0 = 1;

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--points") == 0 && i + 1 < argc)
      points_wanted = (unsigned) strtoul (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--large") == 0 && i + 1 < argc)
      large_wanted = (unsigned) strtoul (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--seed") == 0 && i + 1 < argc)
      seed0 = strtoull (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--verbose") == 0)
      verbose = 1;
    else {
      fprintf (stderr, "usage: test_powercut [--points N] [--large N] [--seed S] [--verbose]\n");
      return 2;
    }
  }
  if (large_wanted == UINT32_MAX)
    large_wanted = points_wanted / 10;

  const unsigned configs = HC_MODE_COUNT * 3;
  for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++)
    for (unsigned mix = 0; mix < 3; mix++) {
      unsigned points = 0;
      unsigned bad = sweep (mode, mix, seed0, points_wanted / configs + 1, verbose, &points,
                            &recovery_cuts);
      printf ("%-12s tiny,  hints %u: %u cut points, %u violations\n", hc_mode_name (mode), mix,
              points, bad);
      total_points += points;
      total_bad += bad;
    }
  /* The large geometry: one prepared state per mode that caches (with data
   * checksums on every other seed), the three hint mixes from it. */
  for (unsigned mode = 0; mode < HC_MODE_COUNT && large_wanted; mode++) {
    if (mode == HC_MODE_PASSTHROUGH)
      continue; /* it caches nothing: there is no large state to prepare */
    double t0 = test_now ();
    if (prepare (mode, (seed0 + mode) & 1) < 0) {
      CHECK (0, "preparing the large state in %s", hc_mode_name (mode));
      break;
    }
    printf ("%-12s large: %u cache blocks, %u of them mapped, %u dirty%s (prepared in %.1f s)\n",
            hc_mode_name (mode), prep.nblocks, prep.cached, prep.dirty,
            (seed0 + mode) & 1 ? ", data checksums" : "", test_now () - t0);
    for (unsigned mix = 0; mix < 3; mix++) {
      unsigned points = 0;
      unsigned bad = sweep (mode, mix, seed0, large_wanted / (configs - 3) + 1, verbose, &points,
                            &recovery_cuts);
      printf ("%-12s large, hints %u: %u cut points, %u violations\n", hc_mode_name (mode), mix,
              points, bad);
      total_points += points;
      total_bad += bad;
    }
    prepared_free ();
  }
  wbase = 0;
  /* Every cut point inside a close's checkpoints, after flushed writes of
   * many blocks and an unflushed partial write (the close is the commit
   * that makes the partial write durable). */
  unsigned ckpt_points = 0;
  for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++) {
    struct op seq[12] = { { 0 } };
    for (unsigned i = 0; i < 10; i++)
      seq[i] = (struct op) { .kind = OP_WRITE, .off = i * 24 * BS, .len = 24 * BS };
    seq[10] = (struct op) { .kind = OP_FLUSH };
    seq[11] = (struct op) { .kind = OP_WRITE, .off = 3 * BS + 700, .len = 1000 };
    struct rig r;
    uint64_t w0, w1;
    model_reset (NULL);
    rig_up (&r, mode, 7, 250);
    uint64_t base = hc_power_writes (r.pw);
    run (&r, seq, 12, false);
    w0 = hc_power_writes (r.pw) - base;
    hc_volume_close (r.v);
    r.v = NULL;
    w1 = hc_power_writes (r.pw) - base;
    rig_down (&r);
    unsigned bad = 0;
    /* Each cut point with several seeds: which sectors of the torn writes
     * survive is the power domain's draw. */
    for (uint64_t kk = 0; kk < 16 * (w1 + 1 - w0); kk++) {
      uint64_t k = w0 + 1 + kk % (w1 + 1 - w0);
      char what[96];
      snprintf (what, sizeof what, "%s/checkpoint sweep/cut %llu seed %llu", hc_mode_name (mode),
                (unsigned long long) k, (unsigned long long) kk);
      model_reset (NULL);
      rig_up (&r, mode, 1000 + kk, 250);
      hc_power_arm (r.pw, k);
      run (&r, seq, 12, true);
      if (!hc_power_is_cut (r.pw))
        hc_power_arm (r.pw, 1);
      hc_power_cut_apply (r.pw);
      unsigned b = verify (&r, verbose, what);
      CHECK (b == 0, "%s: %u violations", what, b);
      bad += b;
      rig_down (&r);
      ckpt_points++;
    }
    printf ("%-12s close after a flush: %llu cut points inside its checkpoints × 16 draws, "
            "%u violations\n", hc_mode_name (mode), (unsigned long long) (w1 + 1 - w0), bad);
    total_bad += bad;
  }
  total_points += ckpt_points;
  for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++) {
    unsigned bad = open_after_failed_close (mode);
    printf ("%-12s reopen after a failed close, then a cut: 8 draws, %u violations\n",
            hc_mode_name (mode), bad);
    total_bad += bad;
  }

  printf ("power-cut sweep: %u cut points (%u of them followed by a recovery cut short), "
          "%u violations\n", total_points, recovery_cuts, total_bad);
  for (unsigned b = 0; b < VOL_BLOCKS; b++)
    free (model[b].v);
  return test_exit ("test_powercut");
}
