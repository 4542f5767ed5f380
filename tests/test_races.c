/* Races and failures at chosen moments: each case drives the engine into
 * an interleaving that once broke it, by holding one thread inside a tier
 * call (tests/hook.h) until another has done what the case needs, or by
 * failing or cutting the power at one chosen I/O.  Each case failed on the
 * engine before its fix:
 *
 *   double_fill     two reads of different sectors of one uncached block,
 *                   both in the fill at once, mapped it twice: every later
 *                   open failed ("volume block N is mapped twice").
 *   read_error      a fast-tier read error on a clean block dropped it
 *                   without its stripe while a writer had it pinned; the
 *                   writer then spun forever in the map.
 *   mode_switch     leaving write-back for pass-through set the mode before
 *                   cleaning: with the slow tier failing, the volume stayed
 *                   in pass-through and served stale data around dirty data.
 *   evict_durable   evict wrote back a copy whose mapping was not durable
 *                   while the durable mapping was an older clean copy: after
 *                   a power cut, that clean copy differed from the slow tier.
 *   fast_full       a fast tier that cannot take writes (ENOSPC: a sparse file
 *                   on a full filesystem) failed the clients' writes; now the
 *                   volume goes around it, says so, and comes back.
 *   prefetch_stall  willneed on a cache full of dirty data that cannot be
 *                   written back: the prefetch, on the cleaner thread, waited
 *                   for the cleaner (itself) about 10 s a block, and close
 *                   waited for it.
 *   settle_race     the cleaner settling a write-through copy (recording it
 *                   clean) while a write through it, which skipped the
 *                   commit because the copy was recorded dirty, is on its
 *                   way to the slow tier: a crash then could leave a stale
 *                   clean copy.  Settling takes the block's stripe.  (Written
 *                   with the feature; it fails if settling does not.)
 *   fill_stale      a background fill (fill.c) of a missed run, held inside
 *                   its fast-tier write while a write-around write, then a
 *                   zero, changes one of its blocks on the slow tier: the
 *                   fill must give that block back, not install the data
 *                   read before.  The client's read must not wait for the
 *                   fill.  (Written with the feature; with the filler's
 *                   generation check removed it fails, and so does the
 *                   simulator, at seed 1.)  The same for a single block's
 *                   miss, deferred as a run's is.
 *   fill_pressure   the filler held: reads of 24 MiB of misses all return,
 *                   16 MiB of fills wait, the rest are dropped and counted
 *                   as bypassed (full), and once released exactly the 16
 *                   MiB are installed.  (Written with the feature.)
 *   beside          a write-through batch's slow writes on the slow writer
 *                   (writer.c): the two tiers' writes are in flight at
 *                   once, for misses and for hits; a failed slow write fails
 *                   the request and leaves the copies dirty, for the
 *                   cleaner to write back; a failed fast write sends the
 *                   blocks around the cache.  (Written with the feature;
 *                   with the slow writes after the fast ones, the first
 *                   check fails.)
 *
 * A case that hangs is a failure too: a watchdog ends the test. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/io.h"
#include "hintcache/hintcache.h"
#include "hook.h"
#include "test.h"

#define BS 4096u
#define FAST_SIZE (2u << 20)
#define SLOW_SIZE (4u << 20)

/* ---- A rendezvous with a deadline, and flags threads wait for. ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* Waits until *flag reaches `want` or ms pass; returns whether it did. */
static bool
wait_for (volatile int *flag, int want, unsigned ms)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long) (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock (&mu);
  while (*flag < want && pthread_cond_timedwait (&cv, &mu, &ts) == 0)
    ;
  bool ok = *flag >= want;
  pthread_mutex_unlock (&mu);
  return ok;
}

static void
bump (volatile int *flag)
{
  pthread_mutex_lock (&mu);
  (*flag)++;
  pthread_cond_broadcast (&cv);
  pthread_mutex_unlock (&mu);
}

static const char *current = "";

static void
watchdog (int sig)
{
  (void) sig;
  static const char msg[] = "test_races: this case hung (watchdog): ";
  if (write (2, msg, sizeof msg - 1) < 0 || write (2, current, strlen (current)) < 0
      || write (2, "\n", 1) < 0)
    _exit (1);
  _exit (1);
}

/* ---- The rig: memory tiers behind hooks, optionally in a power domain. ---- */

struct rig {
  hc_tier *fmem, *smem, *ffault, *sfault, *fast, *slow;
  hc_power *pw;
  hc_volume *v;
};

static int fast_hook (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc);
static int slow_hook (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc);

/* The rig's sizes, and whether the volume runs its threads (the cleaner
 * and the filler); scenario() resets them. */
static struct {
  uint64_t fast_size, slow_size;
  bool threads;
} rig_opts;

static void
rig_up (struct rig *r, enum hc_mode mode, bool power)
{
  struct hc_format_opts fo = { .mode = mode, .max_ranges = 64 };
  struct hc_open_opts oo = { .no_cleaner = !rig_opts.threads };
  char why[200];

  memset (r, 0, sizeof *r);
  hc_tier_new_memory (rig_opts.fast_size, &r->fmem);
  hc_tier_new_memory (rig_opts.slow_size, &r->smem);
  hc_power_new (1, &r->pw);
  hc_tier_new_faulty (r->fmem, power ? r->pw : NULL, 1, &r->ffault);
  hc_tier_new_faulty (r->smem, power ? r->pw : NULL, 2, &r->sfault);
  hook_new (r->ffault, fast_hook, r, &r->fast);
  hook_new (r->sfault, slow_hook, r, &r->slow);
  CHECK (hc_volume_format (r->fast, r->slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (r->fast, r->slow, &oo, &r->v, why, sizeof why) == 0, "open: %s", why);
}

/* Closes (if open), reopens on the raw tiers and checks; returns whether
 * the volume opens and checks clean. */
static bool
rig_reopens (struct rig *r, char *why, size_t whylen)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  hc_volume *v;

  if (r->v)
    hc_volume_close (r->v);
  r->v = NULL;
  if (hc_volume_open (r->fmem, r->smem, &oo, &v, why, whylen) < 0)
    return false;
  hc_volume_close (v);
  return hc_volume_check (r->fmem, r->smem, why, whylen) == 0;
}

static void
rig_down (struct rig *r)
{
  if (r->v)
    hc_volume_close (r->v);
  hc_tier_close (r->fast);
  hc_tier_close (r->slow);
  hc_tier_close (r->ffault);
  hc_tier_close (r->sfault);
  hc_power_free (r->pw);
  hc_tier_close (r->fmem);
  hc_tier_close (r->smem);
}

/* What the hooks do: set by each case.  The hooks are atomic: a case sets
 * or clears them while the volume's threads (the cleaner's commits, the
 * filler) may be calling them. */
typedef int (*hook_case) (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after,
                          int rc);
static struct {
  _Atomic hook_case fast, slow;
  volatile int a, b, c;
  uint64_t off;
} sc;

static int
fast_hook (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  hook_case f = sc.fast;
  return f ? f (arg, op, off, len, after, rc) : 0;
}

static int
slow_hook (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  hook_case f = sc.slow;
  return f ? f (arg, op, off, len, after, rc) : 0;
}

static void
scenario (const char *name)
{
  memset (&sc, 0, sizeof sc);
  rig_opts.fast_size = FAST_SIZE;
  rig_opts.slow_size = SLOW_SIZE;
  rig_opts.threads = false;
  current = name;
  alarm (30);
}

/* ---- double_fill ---- */

/* Both readers' slow reads of the block meet before either returns. */
static int
fill_meet (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) r, (void) rc;
  if (op == HOOK_READ && !after && off == sc.off && len == BS) {
    bump (&sc.a);
    wait_for (&sc.a, 2, 2000); /* an engine that serialises fills just waits */
  }
  return 0;
}

struct reader {
  hc_volume *v;
  uint64_t off;
  uint8_t buf[512];
  int rc;
};

static void *
reader_main (void *arg)
{
  struct reader *x = arg;
  x->rc = hc_volume_read (x->v, x->buf, sizeof x->buf, x->off, NULL);
  return NULL;
}

static void
double_fill (enum hc_mode mode)
{
  struct rig r;
  char why[200];
  pthread_t t[2];
  struct reader rd[2];
  static uint8_t data[BS];

  scenario ("double_fill");
  rig_up (&r, mode, false);
  for (unsigned i = 0; i < BS; i++)
    data[i] = (uint8_t) (i * 13 + 1);
  hc_tier_write (r.smem, data, BS, 5 * BS, 0); /* the block's data, on the slow tier only */
  sc.off = 5 * BS;
  sc.slow = fill_meet;
  for (unsigned i = 0; i < 2; i++) {
    rd[i] = (struct reader) { .v = r.v, .off = 5 * BS + i * 2048 };
    pthread_create (&t[i], NULL, reader_main, &rd[i]);
  }
  for (unsigned i = 0; i < 2; i++)
    pthread_join (t[i], NULL);
  sc.slow = NULL;
  for (unsigned i = 0; i < 2; i++)
    CHECK (rd[i].rc == 0 && memcmp (rd[i].buf, data + i * 2048, 512) == 0, "%s: reader %u",
           hc_mode_name (mode), i);
  CHECK (r.v->dir.map.mapped <= 1, "%s: block mapped %u times", hc_mode_name (mode),
         (unsigned) r.v->dir.map.mapped);
  CHECK (rig_reopens (&r, why, sizeof why), "%s: reopen: %s", hc_mode_name (mode), why);
  rig_down (&r);
}

/* ---- read_error ---- */

/* The writer's read of the clean copy (the first) waits until the reader's
 * (the second) has failed. */
static int
read_error_fast (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) r, (void) len, (void) rc;
  if (op != HOOK_READ || after || off != sc.off)
    return 0;
  pthread_mutex_lock (&mu);
  int n = ++sc.a;
  pthread_cond_broadcast (&cv);
  pthread_mutex_unlock (&mu);
  if (n == 1) {
    wait_for (&sc.b, 1, 2000);
    return 0;
  }
  if (n == 2) {
    bump (&sc.b);
    return -EIO;
  }
  return 0;
}

struct writer {
  hc_volume *v;
  uint64_t off;
  size_t len;
  const uint8_t *buf;
  int rc;
};

static void *
writer_main (void *arg)
{
  struct writer *x = arg;
  x->rc = hc_volume_write (x->v, x->buf, x->len, x->off, 0, NULL);
  return NULL;
}

static void
read_error (void)
{
  struct rig r;
  char why[200];
  pthread_t t;
  static uint8_t data[BS], got[BS], patch[100];

  scenario ("read_error");
  rig_up (&r, HC_MODE_WRITEBACK, false);
  for (unsigned i = 0; i < BS; i++)
    data[i] = (uint8_t) (i * 7 + 3);
  memset (patch, 0xee, sizeof patch);
  CHECK (hc_volume_write (r.v, data, BS, 7 * BS, 0, NULL) == 0, "write");
  CHECK (hc_volume_clean (r.v) == 0, "clean");
  uint32_t c = hc_dir_find (&r.v->dir, 7);
  CHECK (c != HC_NIL && !(r.v->dir.map.blk[c].meta & HC_M_DIRTY), "cached clean");
  sc.off = r.v->sb.data_off + (uint64_t) c * BS;
  sc.fast = read_error_fast;
  struct writer w = { .v = r.v, .off = 7 * BS + 100, .len = sizeof patch, .buf = patch };
  pthread_create (&t, NULL, writer_main, &w);
  CHECK (wait_for (&sc.a, 1, 2000), "the writer reads the clean copy");
  int rc = hc_volume_read (r.v, got, BS, 7 * BS, NULL);
  pthread_join (t, NULL);
  sc.fast = NULL;
  CHECK (rc == 0, "the read falls back to the slow tier: %d", rc);
  CHECK (w.rc == 0, "the write: %d", w.rc);
  memcpy (data + 100, patch, sizeof patch);
  CHECK (hc_volume_read (r.v, got, BS, 7 * BS, NULL) == 0 && memcmp (got, data, BS) == 0,
         "the write's data");
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

/* ---- mode_switch ---- */

static void
mode_switch (void)
{
  struct rig r;
  char why[200];
  static uint8_t data[BS], got[BS];
  struct hc_fault_rule fail = { .ops = HC_FAULT_WRITE, .fraction = 1, .err = EIO };
  struct hc_fault_rule none = { 0 };

  scenario ("mode_switch");
  rig_up (&r, HC_MODE_WRITEBACK, false);
  for (unsigned i = 0; i < BS; i++)
    data[i] = (uint8_t) (i * 5 + 9);
  CHECK (hc_volume_write (r.v, data, BS, 3 * BS, 0, NULL) == 0, "write");
  hc_tier_faulty_set (r.sfault, &fail);
  CHECK (hc_volume_set_mode (r.v, HC_MODE_PASSTHROUGH) < 0, "cannot leave write-back");
  CHECK (hc_volume_mode (r.v) == HC_MODE_WRITEBACK, "still write-back: %s",
         hc_mode_name (hc_volume_mode (r.v)));
  CHECK (hc_volume_read (r.v, got, BS, 3 * BS, NULL) == 0 && memcmp (got, data, BS) == 0,
         "the dirty data is served");
  hc_tier_faulty_set (r.sfault, &none);
  CHECK (hc_volume_set_mode (r.v, HC_MODE_PASSTHROUGH) == 0, "switch once the slow tier works");
  CHECK (hc_volume_read (r.v, got, BS, 3 * BS, NULL) == 0 && memcmp (got, data, BS) == 0,
         "the data, now from the slow tier");
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

/* ---- evict_durable ---- */

static uint8_t d1[BS];

/* At the evict's commit, a write replaces the clean copy (its mapping not
 * durable yet); once the slow tier gets the block's data, the power goes
 * at the next write. */
static int
evict_fast (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) off, (void) len, (void) rc;
  if (op == HOOK_FLUSH && !after && sc.a == 0) {
    sc.a = 1;
    CHECK (hc_volume_write (r->v, d1, BS, 9 * BS, 0, NULL) == 0, "the racing write");
  }
  return 0;
}

static int
evict_slow (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) len;
  if (op == HOOK_WRITE && after && rc == 0 && off == 9 * BS && sc.b == 0) {
    sc.b = 1;
    hc_power_arm (r->pw, 1);
  }
  return 0;
}

static void
evict_durable (void)
{
  struct rig r;
  static uint8_t d0[BS], a[BS], s[BS];
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  hc_volume *v;

  scenario ("evict_durable");
  rig_up (&r, HC_MODE_WRITEBACK, true);
  memset (d0, 0x11, BS);
  memset (d1, 0x22, BS);
  CHECK (hc_volume_write (r.v, d0, BS, 9 * BS, 0, NULL) == 0, "write");
  CHECK (hc_volume_clean (r.v) == 0, "clean");
  sc.fast = evict_fast;
  sc.slow = evict_slow;
  hc_volume_advise (r.v, 9 * BS, BS,
                    (struct hc_hint) { .cls = HC_CLASS_DATA, .advice = HC_ADVICE_EVICT });
  sc.fast = sc.slow = NULL;
  if (!hc_power_is_cut (r.pw))
    hc_power_arm (r.pw, 1);
  hc_volume_close (r.v);
  r.v = NULL;
  hc_power_cut_apply (r.pw);
  CHECK (hc_volume_open (r.fmem, r.smem, &oo, &v, why, sizeof why) == 0, "reopen: %s", why);
  unsigned stale = 0;
  for (uint32_t c = 0; c < v->dir.map.n; c++) {
    uint64_t w = v->dir.map.blk[c].meta;
    if ((w & HC_M_VALID) && !(w & HC_M_DIRTY)) {
      hc_tier_read (r.fmem, a, BS, v->sb.data_off + (uint64_t) c * BS);
      hc_tier_read (r.smem, s, BS, hc_meta_origin (w) * BS);
      stale += memcmp (a, s, BS) != 0;
    }
  }
  CHECK (stale == 0, "%u clean cached blocks differ from the slow tier", stale);
  hc_volume_close (v);
  rig_down (&r);
}

/* ---- fast_full ---- */

/* A sparse fast tier on a full filesystem: writes into the data area (not
 * yet allocated) fail, the metadata (written at format) still takes them. */
static int
fast_full_hook (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) len, (void) rc;
  return op == HOOK_WRITE && !after && sc.a && off >= r->v->sb.data_off ? -ENOSPC : 0;
}

static void
fast_full (enum hc_mode mode)
{
  struct rig r;
  char why[200];
  static uint8_t data[16 * BS], got[16 * BS];

  scenario ("fast_full");
  rig_up (&r, mode, false);
  for (unsigned i = 0; i < sizeof data; i++)
    data[i] = (uint8_t) (i * 31 + 7);
  /* Dirty and clean copies first, then the fast tier fills up. */
  CHECK (hc_volume_write (r.v, data, 8 * BS, 0, 0, NULL) == 0, "write");
  CHECK (hc_volume_read (r.v, got, 8 * BS, 40 * BS, NULL) == 0, "fill");
  sc.fast = fast_full_hook;
  sc.a = 1;
  for (unsigned i = 0; i < sizeof data; i++)
    data[i] ^= 0x5a;
  /* Whole blocks (batched in write-back), a partial block over a cached
   * copy, a new block, and a read miss: all succeed, around the fast tier. */
  CHECK (hc_volume_write (r.v, data, 8 * BS, 0, 0, NULL) == 0, "%s: whole blocks, fast tier full",
         hc_mode_name (mode));
  CHECK (hc_volume_write (r.v, data + 100, 300, 40 * BS + 100, 0, NULL) == 0, "partial write");
  CHECK (hc_volume_write (r.v, data, BS, 60 * BS, HC_VOL_FUA, NULL) == 0, "FUA write");
  CHECK (hc_volume_read (r.v, got, 4 * BS, 80 * BS, NULL) == 0, "read miss");
  CHECK_EQ (hc_volume_degraded (r.v), ENOSPC, "degraded, and why");
  CHECK (hc_volume_read (r.v, got, 8 * BS, 0, NULL) == 0 && memcmp (got, data, 8 * BS) == 0,
         "%s: the new data", hc_mode_name (mode));
  CHECK (hc_volume_read (r.v, got, BS, 40 * BS, NULL) == 0
         && memcmp (got + 100, data + 100, 300) == 0, "the partial write");
  /* Space comes back: within a second the fast tier is tried again. */
  sc.a = 0;
  usleep (1100 * 1000);
  CHECK (hc_volume_write (r.v, data, 2 * BS, 100 * BS, 0, NULL) == 0, "write after");
  CHECK_EQ (hc_volume_degraded (r.v), 0, "back in service");
  CHECK (hc_volume_read (r.v, got, 8 * BS, 0, NULL) == 0 && memcmp (got, data, 8 * BS) == 0,
         "still the new data");
  sc.fast = NULL;
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

/* ---- prefetch_stall ---- */

struct closer {
  struct rig *r;
  volatile int done;
};

static void *
advise_and_close (void *arg)
{
  struct closer *x = arg;
  hc_volume_advise (x->r->v, 1000 * BS, 3 * BS, (struct hc_hint) { .advice = HC_ADVICE_WILLNEED });
  usleep (300 * 1000); /* the cleaner takes the prefetch */
  hc_volume_close (x->r->v);
  x->r->v = NULL;
  bump (&x->done);
  return NULL;
}

static void
prefetch_stall (void)
{
  struct rig r;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .max_ranges = 64,
                              .over = HC_FORMAT_DISCARD };
  struct hc_open_opts oo = { .dirty_high = 100, .dirty_low = 99 };
  struct hc_fault_rule fail = { .ops = HC_FAULT_WRITE, .fraction = 1, .err = EIO };
  static uint8_t data[BS];
  char why[200];
  pthread_t t;

  scenario ("prefetch_stall");
  rig_up (&r, HC_MODE_WRITEBACK, false);
  hc_volume_close (r.v);
  CHECK (hc_volume_format (r.fast, r.slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (r.fast, r.slow, &oo, &r.v, why, sizeof why) == 0, "open: %s", why);
  /* Every cache block dirty (one write each, while the free list lasts),
   * and nothing can be written back. */
  uint32_t n = r.v->dir.map.n;
  CHECK (n + 3 < 1000, "the prefetched blocks are not among the written ones");
  hc_tier_faulty_set (r.sfault, &fail);
  memset (data, 0x5a, BS);
  for (uint32_t b = 0; b < n; b++)
    hc_volume_write (r.v, data, BS, (uint64_t) b * BS, 0, NULL);
  struct closer x = { .r = &r };
  pthread_create (&t, NULL, advise_and_close, &x);
  CHECK (wait_for (&x.done, 1, 5000), "willneed and close within 5 s on a cache that cannot clean");
  pthread_join (t, NULL);
  rig_down (&r);
}

/* ---- settle_race ---- */

/* The writer's write of its new copy waits until the test has tried to
 * settle. */
static int
settle_hold (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) len, (void) rc;
  if (op == HOOK_WRITE && !after && off >= r->v->sb.data_off && sc.a == 0) {
    bump (&sc.a);
    wait_for (&sc.b, 1, 2000);
  }
  return 0;
}

/* A writer is held inside its fast-tier write to block 9, whose copy is
 * clean but recorded dirty; settling must leave the block alone.  A whole
 * block rewrites the copy in place (dirty until the slow tier has it); a
 * part of one goes to a new copy, and the old one must not be settled. */
static void
settle_race_one (uint32_t len)
{
  struct rig r;
  char why[200];
  pthread_t t;
  static uint8_t one[BS], two[BS], got[BS];

  rig_up (&r, HC_MODE_WRITETHROUGH, false);
  memset (one, 1, BS);
  memset (two, 2, BS);
  CHECK (hc_volume_write (r.v, one, BS, 9 * BS, 0, NULL) == 0, "write");
  uint32_t c = hc_dir_find (&r.v->dir, 9);
  CHECK (c != HC_NIL && (r.v->dir.map.blk[c].meta & HC_M_UNRECORDED), "clean, recorded dirty");
  sc.a = sc.b = 0;
  sc.fast = settle_hold;
  struct writer w = { .v = r.v, .off = 9 * BS, .len = len, .buf = two };
  pthread_create (&t, NULL, writer_main, &w);
  CHECK (wait_for (&sc.a, 1, 2000), "the writer writes its copy (%u bytes)", len);
  long n = hc_vol_settle (r.v, true);
  pthread_mutex_lock (&r.v->lock);
  uint64_t meta = r.v->dir.map.blk[c].meta;
  pthread_mutex_unlock (&r.v->lock);
  if (len == BS)
    CHECK (n == 0 && (meta & HC_M_DIRTY) && hc_dir_find (&r.v->dir, 9) == c,
           "settling skips the copy a writer rewrites in place (settled %ld), dirty meanwhile", n);
  else
    CHECK (n == 0 && (meta & HC_M_UNRECORDED),
           "settling skips the copy a writer is replacing (settled %ld)", n);
  bump (&sc.b);
  pthread_join (t, NULL);
  sc.fast = NULL;
  CHECK (w.rc == 0, "the write: %d", w.rc);
  CHECK (hc_vol_settle (r.v, true) == 1, "settled afterwards");
  memcpy (one, two, len);
  CHECK (hc_volume_read (r.v, got, BS, 9 * BS, NULL) == 0 && memcmp (got, one, BS) == 0,
         "the write's data");
  CHECK (hc_tier_read (r.slow, got, BS, 9 * BS) == 0 && memcmp (got, one, BS) == 0,
         "on the slow tier too");
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

static void
settle_race (void)
{
  scenario ("settle_race");
  settle_race_one (BS);
  settle_race_one (512);
}

/* ---- pin_limit ---- */

/* Each reader of the cached block (its first 512 bytes) waits inside its
 * fast-tier read until the test lets them all go. */
static int
pin_hold (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) r, (void) len, (void) rc;
  if (op == HOOK_READ && !after && off == sc.off) {
    bump (&sc.a);
    wait_for (&sc.b, 1, 20000);
  }
  return 0;
}

/* More readers of one cached block than an 8-bit pin count could hold:
 * the door lets HC_VOL_MAX_INSIDE in, the rest wait there, and every read
 * returns the block.  Without the door the count would pass 255 and wrap,
 * and the block would look free while hundreds of readers use it. */
static void
pin_limit (void)
{
  enum { READERS = 300 };
  struct rig r;
  static uint8_t data[BS];
  static struct reader rd[READERS];
  pthread_t t[READERS];
  unsigned ok = 0, started = 0;

  scenario ("pin_limit");
  rig_up (&r, HC_MODE_WRITEBACK, false);
  memset (data, 0x3c, BS);
  CHECK (hc_volume_write (r.v, data, BS, 9 * BS, 0, NULL) == 0, "write");
  uint32_t c = hc_dir_find (&r.v->dir, 9);
  CHECK (c != HC_NIL, "cached");
  sc.off = r.v->sb.data_off + (uint64_t) c * BS;
  sc.fast = pin_hold;
  for (unsigned i = 0; i < READERS; i++) {
    rd[i] = (struct reader) { .v = r.v, .off = 9 * BS };
    started += pthread_create (&t[i], NULL, reader_main, &rd[i]) == 0;
  }
  CHECK (started == READERS, "%u of %u readers started", started, READERS);
  CHECK (wait_for (&sc.a, HC_VOL_MAX_INSIDE, 10000), "%d readers inside", sc.a);
  usleep (200 * 1000); /* the rest, had the door let them in */
  unsigned pins = atomic_load (&r.v->pins[c]);
  CHECK (sc.a == HC_VOL_MAX_INSIDE && pins == HC_VOL_MAX_INSIDE,
         "the door holds readers back: %d reading, block pinned %u times (want %d)", sc.a, pins,
         HC_VOL_MAX_INSIDE);
  bump (&sc.b);
  for (unsigned i = 0; i < started; i++) {
    pthread_join (t[i], NULL);
    ok += rd[i].rc == 0 && memcmp (rd[i].buf, data, sizeof rd[i].buf) == 0;
  }
  sc.fast = NULL;
  CHECK (ok == READERS, "%u of %u reads returned the block", ok, READERS);
  unsigned inside = 0;
  for (unsigned d = 0; d < HC_VOL_DOORS; d++)
    inside += atomic_load (&r.v->door[d].inside);
  CHECK (atomic_load (&r.v->pins[c]) == 0 && inside == 0, "nothing pinned, nobody inside afterwards");
  rig_down (&r);
}

/* ---- fill_stale and fill_pressure ---- */

/* The filler's write of a run of sc.off blocks waits until the test lets
 * it go; sc.c says the wait ran out (nobody did: the caller was waiting
 * for the write). */
static int
fill_hold (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) rc;
  if (op == HOOK_WRITE && !after && len == sc.off * BS && off >= r->v->sb.data_off && sc.a == 0) {
    bump (&sc.a);
    if (!wait_for (&sc.b, 1, 10000))
      sc.c = 1;
  }
  return 0;
}

/* Waits until no fill is queued or being written; returns whether it
 * happened within a few seconds. */
static bool
fills_done (hc_volume *v)
{
  for (int i = 0; i < 5000; i++) {
    if (hc_fill_pending (v) == 0)
      return true;
    usleep (1000);
  }
  return false;
}

/* n = 8: blocks 16 … 23 read as one run; n = 1: block 19 alone. */
static void
fill_stale (bool zero, unsigned n)
{
  struct rig r;
  char why[200];
  static uint8_t a[8 * BS], b[BS], got[8 * BS];
  const uint64_t first = n == 1 ? 19 : 16;
  const char *what = zero ? (n == 1 ? "zero, one block" : "zero")
                          : (n == 1 ? "write, one block" : "write");

  scenario ("fill_stale");
  rig_opts.threads = true;
  rig_up (&r, HC_MODE_WRITEAROUND, false);
  r.v->fill_way[0].force = r.v->fill_way[1].force = 2; /* deferred, whatever the trials would say */
  memset (a, 0xa1, sizeof a);
  memset (b, zero ? 0 : 0xb2, sizeof b);
  hc_tier_write (r.smem, a, sizeof a, 16 * BS, 0); /* blocks 16 … 23, on the slow tier only */
  sc.off = n;
  sc.fast = fill_hold;
  CHECK (hc_volume_read (r.v, got, n * BS, first * BS, NULL) == 0 && memcmp (got, a, n * BS) == 0,
         "%s: the missed run's data", what);
  CHECK (wait_for (&sc.a, 1, 5000) && sc.c == 0,
         "%s: the read returned while its fill waits in the fast tier's write", what);
  /* Block 19 changes on the slow tier (write-around: nothing is cached). */
  CHECK ((zero ? hc_volume_zero (r.v, 19 * BS, BS, 0, NULL)
               : hc_volume_write (r.v, b, BS, 19 * BS, 0, NULL)) == 0, "%s of block 19", what);
  bump (&sc.b);
  CHECK (fills_done (r.v), "the fill ends");
  sc.fast = NULL;
  /* A write takes one stripe; a zero may take them all (then every block
   * of the fill is given back). */
  CHECK (hc_dir_find (&r.v->dir, 19) == HC_NIL
             && (zero ? r.v->dir.map.mapped <= n - 1 : r.v->dir.map.mapped == n - 1),
         "%s: the changed block is given back, the others installed (%u mapped)", what,
         (unsigned) r.v->dir.map.mapped);
  memcpy (a + (19 - first) * BS, b, BS);
  CHECK (hc_volume_read (r.v, got, n * BS, first * BS, NULL) == 0 && memcmp (got, a, n * BS) == 0,
         "%s: the run reads the new block 19", what);
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

static uint64_t
bypassed_full (hc_volume *v)
{
  uint64_t n = 0;
  pthread_mutex_lock (&v->lock);
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    n += v->dir.stats.cls[c].bypass[0][HC_BYPASS_FULL];
  pthread_mutex_unlock (&v->lock);
  return n;
}

static void
fill_pressure (void)
{
  enum { MB = 1 << 20, READS = 24, QUEUED = 16 }; /* fill.c's queue: 16 MiB */
  struct rig r;
  char why[200];
  static uint8_t got[MB];

  scenario ("fill_pressure");
  rig_opts.fast_size = 64u * MB;
  rig_opts.slow_size = 64u * MB;
  rig_opts.threads = true;
  rig_up (&r, HC_MODE_WRITEBACK, false);
  r.v->fill_way[0].force = r.v->fill_way[1].force = 2;
  sc.off = MB / BS; /* each read's run: one fill of 256 blocks */
  sc.fast = fill_hold;
  unsigned ok = 0;
  for (unsigned i = 0; i < READS; i++)
    ok += hc_volume_read (r.v, got, MB, (uint64_t) i * MB, NULL) == 0;
  CHECK (ok == READS && sc.c == 0, "%u of %u reads returned while the filler was held", ok, READS);
  uint64_t dropped = bypassed_full (r.v);
  CHECK (dropped == (READS - QUEUED) * (MB / BS), "%llu blocks dropped for want of room (want %u)",
         (unsigned long long) dropped, (READS - QUEUED) * (MB / BS));
  bump (&sc.b);
  CHECK (fills_done (r.v), "the fills end");
  sc.fast = NULL;
  CHECK (r.v->dir.map.mapped == QUEUED * (MB / BS), "%u blocks installed (want %u)",
         (unsigned) r.v->dir.map.mapped, QUEUED * (MB / BS));
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

/* ---- beside ---- */

enum { BESIDE = 8 }; /* blocks in the case's write */

/* Each tier's write of the batch waits (up to 2 s) for the other's to
 * begin; sc.c counts the writes that saw the other one in flight.  With
 * sc.off set, that tier's write fails instead (1: fast, 2: slow). */
static int
beside_hook (bool slow, enum hook_op op, uint64_t len, bool after)
{
  if (op != HOOK_WRITE || after || len != BESIDE * BS)
    return 0;
  if (sc.off == (slow ? 2u : 1u))
    return -EIO;
  bump (slow ? &sc.b : &sc.a);
  if (wait_for (slow ? &sc.a : &sc.b, 1, 2000))
    bump (&sc.c);
  return 0;
}

static int
beside_fast (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) r, (void) off, (void) rc;
  return beside_hook (false, op, len, after);
}

static int
beside_slow (struct rig *r, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) r, (void) off, (void) rc;
  return beside_hook (true, op, len, after);
}

/* How many of blocks [b, b + n) are cached, and how many of them dirty. */
static void
cached (hc_volume *v, uint64_t b, unsigned n, unsigned *in, unsigned *dirty)
{
  *in = *dirty = 0;
  pthread_mutex_lock (&v->lock);
  for (unsigned i = 0; i < n; i++) {
    uint32_t c = hc_dir_find (&v->dir, b + i);
    if (c != HC_NIL) {
      (*in)++;
      *dirty += (v->dir.map.blk[c].meta & HC_M_DIRTY) != 0;
    }
  }
  pthread_mutex_unlock (&v->lock);
}

static void
beside (void)
{
  struct rig r;
  char why[200];
  static uint8_t data[BESIDE * BS], got[BESIDE * BS];
  unsigned in, dirty;

  scenario ("beside");
  rig_opts.threads = true;
  rig_up (&r, HC_MODE_WRITETHROUGH, false);
  r.v->write_way.force = 2; /* beside, whatever the trials would say */
  sc.fast = beside_fast;
  sc.slow = beside_slow;
  for (int pass = 0; pass < 2; pass++) { /* misses, then hits (rewritten in place) */
    sc.a = sc.b = sc.c = 0;
    memset (data, 0x31 + pass, sizeof data);
    CHECK (hc_volume_write (r.v, data, sizeof data, 8 * BS, 0, NULL) == 0, "pass %d: write", pass);
    CHECK (sc.c == 2, "pass %d: the tiers' writes were in flight at once (%d of 2 saw the other)",
           pass, sc.c);
    CHECK (hc_tier_read (r.smem, got, sizeof got, 8 * BS) == 0 && memcmp (got, data, sizeof got) == 0,
           "pass %d: the slow tier has the data", pass);
    cached (r.v, 8, BESIDE, &in, &dirty);
    CHECK (in == BESIDE && dirty == 0, "pass %d: %u cached, %u dirty (want %u, 0)", pass, in,
           dirty, (unsigned) BESIDE);
  }
  /* The slow write fails: so does the request, and the copies stay dirty
   * until the cleaner has written them back. */
  sc.off = 2;
  memset (data, 0x41, sizeof data);
  CHECK (hc_volume_write (r.v, data, sizeof data, 8 * BS, 0, NULL) == -EIO,
         "a failed slow write fails the request");
  cached (r.v, 8, BESIDE, &in, &dirty);
  CHECK (in == BESIDE && dirty == BESIDE, "after a failed slow write: %u cached, %u dirty (want %u)",
         in, dirty, (unsigned) BESIDE);
  sc.off = 0;
  sc.fast = sc.slow = NULL;
  CHECK (hc_volume_clean (r.v) == 0, "clean");
  CHECK (hc_tier_read (r.smem, got, sizeof got, 8 * BS) == 0 && memcmp (got, data, sizeof got) == 0,
         "the cleaner wrote the copies back");
  /* The fast write fails: the blocks go around the cache. */
  sc.fast = beside_fast;
  sc.slow = beside_slow;
  sc.off = 1;
  memset (data, 0x51, sizeof data);
  CHECK (hc_volume_write (r.v, data, sizeof data, 24 * BS, 0, NULL) == 0,
         "a failed fast write goes around");
  sc.fast = sc.slow = NULL;
  cached (r.v, 24, BESIDE, &in, &dirty);
  CHECK (in == 0, "after a failed fast write: %u cached (want 0)", in);
  CHECK (hc_tier_read (r.smem, got, sizeof got, 24 * BS) == 0 && memcmp (got, data, sizeof got) == 0
             && hc_volume_read (r.v, got, sizeof got, 24 * BS, NULL) == 0
             && memcmp (got, data, sizeof got) == 0,
         "after a failed fast write: the data is on the slow tier and reads back");
  CHECK (rig_reopens (&r, why, sizeof why), "reopen: %s", why);
  rig_down (&r);
}

int
main (void)
{
  signal (SIGALRM, watchdog);
  double_fill (HC_MODE_WRITEBACK);
  double_fill (HC_MODE_WRITETHROUGH);
  read_error ();
  mode_switch ();
  evict_durable ();
  fast_full (HC_MODE_WRITEBACK);
  fast_full (HC_MODE_WRITETHROUGH);
  prefetch_stall ();
  settle_race ();
  pin_limit ();
  fill_stale (false, 8);
  fill_stale (true, 8);
  fill_stale (false, 1);
  fill_stale (true, 1);
  fill_pressure ();
  beside ();
  alarm (0);
  return test_exit ("test_races");
}
