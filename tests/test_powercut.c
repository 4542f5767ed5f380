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
 * Usage: test_powercut [--points N] [--seed S] [--verbose]
 * It prints the number of cut points and of violations, and fails if any.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define BS 4096u
#define SECT 512u
#define VOL_BLOCKS 256u
#define WORK_BLOCKS 96u /* the random workloads' blocks: fewer, so that they collide */
#define SLOW_SIZE (VOL_BLOCKS * BS)
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

static void
model_reset (void)
{
  for (unsigned b = 0; b < VOL_BLOCKS; b++) {
    free (model[b].v);
    model[b].v = calloc (1, BS);
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

/* ---- Running. ---- */

struct rig {
  hc_tier *fmem, *smem, *fast, *slow;
  hc_power *pw;
  hc_volume *v;
};

static int
rig_up (struct rig *r, unsigned mode, uint64_t seed, unsigned cache_blocks)
{
  struct hc_format_opts fo = { .mode = mode, .max_ranges = 64, .checksums = (seed >> 3) & 1 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];

  memset (r, 0, sizeof *r);
  if (hc_tier_new_memory (FAST_SIZE (cache_blocks), &r->fmem) || hc_tier_new_memory (SLOW_SIZE, &r->smem)
      || hc_power_new (seed, &r->pw) || hc_tier_new_faulty (r->fmem, r->pw, seed, &r->fast)
      || hc_tier_new_faulty (r->smem, r->pw, seed + 1, &r->slow))
    return -ENOMEM;
  if (hc_volume_format (r->fast, r->slow, &fo, why, sizeof why) < 0
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
      rc = hc_volume_write (r->v, buf, o->len, o->off, o->fua ? HC_VOL_FUA : 0, &ctx);
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
      rc = hc_volume_read (r->v, buf, o->len, o->off, &ctx);
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
      rc = o->kind == OP_ZERO ? hc_volume_zero (r->v, o->off, o->len, o->fua ? HC_VOL_FUA : 0, &ctx)
                              : hc_volume_discard (r->v, o->off, o->len, &ctx);
      if (rc == 0 && o->fua)
        for (unsigned b = 0; b < VOL_BLOCKS; b++)
          model_durable (b); /* a FUA zero flushes the whole volume */
      break;
    case OP_ADVISE:
      rc = hc_volume_advise (r->v, o->off, o->len, o->hint);
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
  int rc = hc_volume_read (v, out, VOL_BLOCKS * BS, 0, NULL);
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
  if (hc_volume_read (v, got, sizeof got, 0, NULL) < 0) {
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
  /* No clean cached block may differ from the slow tier. */
  pthread_mutex_lock (&v->lock);
  for (uint32_t c = 0; c < v->dir.map.n; c++) {
    uint64_t w = v->dir.map.blk[c].meta;
    if ((w & HC_M_VALID) && !(w & HC_M_DIRTY)) {
      uint8_t a[BS], s[BS];
      hc_tier_read (r->fmem, a, BS, v->sb.data_off + (uint64_t) c * BS);
      hc_tier_read (r->smem, s, BS, hc_meta_origin (w) * BS);
      if (memcmp (a, s, BS) != 0) {
        bad++;
        if (verbose)
          fprintf (stderr, "%s: cached block %u (volume block %llu) is marked clean but "
                   "differs from the slow tier\n", what, c, (unsigned long long) hc_meta_origin (w));
      }
    }
  }
  pthread_mutex_unlock (&v->lock);
  /* Write everything back, drop everything, read again: nothing changes. */
  if (hc_volume_clean (v) < 0
      || hc_volume_advise (v, 0, VOL_BLOCKS * BS, (struct hc_hint) { .advice = HC_ADVICE_EVICT }) < 0
      || hc_volume_read (v, again, sizeof again, 0, NULL) < 0 || memcmp (got, again, sizeof got)) {
    bad++;
    if (verbose)
      fprintf (stderr, "%s: data changed after clean and evict\n", what);
  }
  hc_volume_close (v);
  return bad;
}

int
main (int argc, char **argv)
{
  unsigned points_wanted = 1200, total_points = 0, total_bad = 0, verbose = 0, recovery_cuts = 0;
  static uint8_t before[VOL_BLOCKS * BS], after[VOL_BLOCKS * BS];
  uint64_t seed0 = 1;
  static struct op ops[NOPS];

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--points") == 0 && i + 1 < argc)
      points_wanted = (unsigned) strtoul (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--seed") == 0 && i + 1 < argc)
      seed0 = strtoull (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--verbose") == 0)
      verbose = 1;
  }

  const unsigned configs = HC_MODE_COUNT * 3;
  unsigned per_config = points_wanted / configs + 1;
  for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++)
    for (unsigned mix = 0; mix < 3; mix++) {
      unsigned points = 0, bad = 0;
      for (uint64_t wseed = seed0; points < per_config; wseed++) {
        struct rig r;
        make_workload (wseed * 10 + mix, mix, ops);
        /* Dry run: how many writes does this workload make? */
        model_reset ();
        if (rig_up (&r, mode, wseed, 24) < 0) {
          CHECK (0, "rig");
          return test_exit ("test_powercut");
        }
        uint64_t base = hc_power_writes (r.pw);
        unsigned end = run (&r, ops, NOPS, true);
        CHECK (end == NOPS, "dry run of workload %llu stopped at op %u", (unsigned long long) wseed, end);
        uint64_t writes = hc_power_writes (r.pw) - base; /* the close's included */
        rig_down (&r);
        /* Cut at every write if they fit the budget, else at a spread. */
        uint64_t budget = per_config - points, step = writes > budget ? writes / budget + 1 : 1;
        for (uint64_t k = 1 + (wseed % step); k <= writes + 1 && points < per_config; k += step) {
          char what[96];
          snprintf (what, sizeof what, "%s/mix%u/workload %llu/cut %llu", hc_mode_name (mode), mix,
                    (unsigned long long) wseed, (unsigned long long) k);
          model_reset ();
          rig_up (&r, mode, wseed * 1000 + k, 24);
          hc_power_arm (r.pw, k);
          run (&r, ops, NOPS, true);
          if (!hc_power_is_cut (r.pw))
            hc_power_arm (r.pw, 1); /* the end of the workload is a cut point too */
          hc_power_cut_apply (r.pw);
          /* What the crash left, then the same after a recovery that is
           * itself cut short at one of its writes: recovery changes no
           * data, so the volume must read exactly the same. */
          unsigned b = 0;
          if (!view (&r, before, verbose, what))
            b++;
          else {
            cut_recovery (&r, 1 + (wseed + k) % 24);
            recovery_cuts++;
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
      printf ("%-12s hints %u: %u cut points, %u violations\n", hc_mode_name (mode), mix, points, bad);
      total_points += points;
      total_bad += bad;
    }
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
    model_reset ();
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
      model_reset ();
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

  printf ("power-cut sweep: %u cut points (%u of them followed by a recovery cut short), "
          "%u violations\n", total_points, recovery_cuts, total_bad);
  for (unsigned b = 0; b < VOL_BLOCKS; b++)
    free (model[b].v);
  return test_exit ("test_powercut");
}
