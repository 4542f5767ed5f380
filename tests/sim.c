/* The deterministic simulator: the whole engine, many clients, faults and
 * power cuts, one seed — in the spirit of FoundationDB's simulation and
 * TigerBeetle's VOPR.
 *
 * Scheduling.  The engine's threads (the clients below, and the volume's
 * cleaner, filler and slow writer) are real threads, but only one runs at a
 * time: they pass a baton.
 * The engine reaches the simulator at every scheduling point of
 * src/engine/sched.h — each lock (tried, and yielded on while busy), each
 * condition wait (unlock, yield, relock), the clock (virtual: it moves only
 * by the waits' timeouts and 20 µs per tier I/O), the cleaner's start and
 * join, the UUIDs' randomness — and at every tier I/O (a decorator that
 * yields before each call).  At each point the seeded generator chooses
 * which thread goes on.  So a seed is one interleaving, and a failure
 * replays exactly with `sim --seed S`.
 *
 * Workload.  Each phase, K clients (threads) issue a seeded mix: reads of
 * any range (whole blocks, partial, unaligned), writes to the blocks each
 * client owns (whole or partial, some FUA), flushes, discards and zeroes of
 * their own blocks, advice of every kind on any range (willneed prefetches
 * run on the cleaner), mode switches, cleans.  A phase may run with device
 * faults on either tier (EIO or ENOSPC on reads, writes, flushes, discards,
 * at a random rate, sometimes persistent), and on volumes with data
 * checksums with silent corruption of the fast tier's data (a write that
 * reports success but is lost, or lands on another cache block), and may
 * end with a power cut at
 * a random write, inside whatever was running: a commit, a checkpoint, a
 * write-back, a mode switch.  Between phases the volume is closed and
 * reopened, or, after a cut, recovered — sometimes with the recovery itself
 * cut short and recovered again.
 *
 * The reference model keeps, per block, every version written (each with
 * the logical times of its call and acknowledgement) and, per block, the
 * newest version a completed flush (begun after its acknowledgement) or an
 * acknowledged FUA made durable.  It checks:
 *   - every read, sector by sector: the content is a version of that block
 *     no older than the newest acknowledged before the read began, and
 *     issued before it returned (a write whose call failed may or may not
 *     have landed: it stays possible until a later acknowledged one);
 *   - with no faults, every call succeeds; after silent corruption, a read
 *     may fail with EIO, but only when the volume counts a checksum error
 *     (a corrupted dirty block): never does it return the corrupted data;
 *   - after every cut: the volume opens read-only and `check` passes, every
 *     sector holds its durable version or a later one, a recovery cut
 *     short at any of its writes changes nothing that is read, and every
 *     copy the recovered volume holds clean equals the slow tier;
 *   - after every close: it reopens and `check` passes.
 *
 * fuzz/fuzz_sim.c builds this file as a libFuzzer target (SIM_FUZZ), its
 * input steering the draws (the tape, below).
 *
 * Usage: sim [--seeds N] [--seed S] [--first S] [--seconds T] [--phases P]
 *            [--clients K] [--verbose]
 * Prints seeds, operations, cut points and faults injected; exits 1 on the
 * first violation, naming the seed.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "hook.h"
#include "test.h"

#define BS 4096u
#define SECT 512u
#define MAX_CLIENTS 6
#define MAX_THREADS (MAX_CLIENTS + 5) /* and the main thread, the cleaner, the filler, the slow writer, one spare */
#define REGION 24u                       /* blocks each client owns */
#define MAX_STEPS 20000000ull            /* yields in one phase before calling it a hang */

/* ---- The generator. ---- */

/* The tape: bytes that steer the draws (fuzz/fuzz_sim.c, where libFuzzer
 * writes it; empty here).  Every draw of every generator, in the one order
 * the baton makes deterministic, has the next byte XORed into its low
 * byte; the generators' states never see it, so a changed byte changes one
 * choice (a thread to run, an operation, a cut point) and the draws after
 * it stay as they were. */
static const uint8_t *tape;
static size_t tape_n;

static uint64_t
next (uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  z ^= z >> 31;
  if (tape_n) {
    z ^= *tape++;
    tape_n--;
  }
  return z;
}

static uint64_t
below (uint64_t *s, uint64_t n)
{
  return n ? next (s) % n : 0;
}

/* ---- The scheduler: a baton among threads. ---- */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv[MAX_THREADS]; /* each thread waits on its own */
  int current, n;
  bool live[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  uint64_t rng, uuid_rng;
  uint64_t clock_ns, steps, phase_steps;
} S = { .mu = PTHREAD_MUTEX_INITIALIZER };

static __thread int me = -1;
static uint64_t current_seed;

static void fail_now (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));

/* Passes the baton to a live thread chosen by the generator (maybe this
 * one) and waits until it comes back.  Caller holds S.mu. */
static void
pass_locked (void)
{
  int live[MAX_THREADS], n = 0;

  for (int i = 0; i < S.n; i++)
    if (S.live[i])
      live[n++] = i;
  S.current = live[below (&S.rng, (uint64_t) n)];
  if (S.current == me)
    return;
  pthread_cond_signal (&S.cv[S.current]);
  while (S.current != me)
    pthread_cond_wait (&S.cv[me], &S.mu);
}

static void
yield (void)
{
  if (me < 0)
    return; /* not a simulated thread (cannot happen while installed) */
  pthread_mutex_lock (&S.mu);
  S.steps++;
  if (++S.phase_steps > MAX_STEPS) {
    pthread_mutex_unlock (&S.mu);
    fail_now ("no progress after %llu scheduling steps (deadlock or livelock)",
              (unsigned long long) MAX_STEPS);
  }
  pass_locked ();
  pthread_mutex_unlock (&S.mu);
}

static void
sim_lock (pthread_mutex_t *m)
{
  yield ();
  while (pthread_mutex_trylock (m) != 0)
    yield ();
}

static void
sim_rdlock (pthread_rwlock_t *l)
{
  yield ();
  while (pthread_rwlock_tryrdlock (l) != 0)
    yield ();
}

static void
sim_wrlock (pthread_rwlock_t *l)
{
  yield ();
  while (pthread_rwlock_trywrlock (l) != 0)
    yield ();
}

static int
sim_trywrlock (pthread_rwlock_t *l)
{
  yield ();
  return pthread_rwlock_trywrlock (l);
}

static int
sim_tryrdlock (pthread_rwlock_t *l)
{
  yield ();
  return pthread_rwlock_tryrdlock (l);
}

static void
sim_timedwait (pthread_cond_t *c, pthread_mutex_t *m, uint64_t ns)
{
  (void) c;
  pthread_mutex_unlock (m);
  S.clock_ns += ns; /* as if it timed out: the others ran meanwhile */
  yield ();
  sim_lock (m);
}

static uint64_t
sim_now (void)
{
  return S.clock_ns;
}

struct start {
  int slot;
  void *(*fn) (void *);
  void *arg;
};

static void *
thread_main (void *p)
{
  struct start st = *(struct start *) p;
  free (p);
  me = st.slot;
  pthread_mutex_lock (&S.mu);
  while (S.current != me)
    pthread_cond_wait (&S.cv[me], &S.mu);
  pthread_mutex_unlock (&S.mu);
  void *r = st.fn (st.arg);
  pthread_mutex_lock (&S.mu);
  S.live[me] = false;
  int live[MAX_THREADS], n = 0;
  for (int i = 0; i < S.n; i++)
    if (S.live[i])
      live[n++] = i;
  S.current = live[below (&S.rng, (uint64_t) n)];
  pthread_cond_signal (&S.cv[S.current]);
  pthread_mutex_unlock (&S.mu);
  return r;
}

static int
sim_spawn (pthread_t *t, void *(*fn) (void *), void *arg)
{
  struct start *st = malloc (sizeof *st);
  int slot = -1;

  pthread_mutex_lock (&S.mu);
  for (int i = 1; i < MAX_THREADS && slot < 0; i++)
    if (!S.live[i] && (i >= S.n || S.tid[i] == 0))
      slot = i;
  if (slot < 0 || !st) {
    pthread_mutex_unlock (&S.mu);
    free (st);
    return EAGAIN;
  }
  *st = (struct start) { slot, fn, arg };
  S.live[slot] = true;
  if (slot >= S.n)
    S.n = slot + 1;
  int rc = pthread_create (&S.tid[slot], NULL, thread_main, st);
  if (rc) {
    S.live[slot] = false;
    free (st);
  } else {
    *t = S.tid[slot];
  }
  pthread_mutex_unlock (&S.mu);
  return rc;
}

static void
sim_join (pthread_t t)
{
  int slot = -1;
  for (int i = 1; i < S.n; i++)
    if (S.tid[i] == t)
      slot = i;
  while (slot >= 0 && S.live[slot])
    yield ();
  pthread_join (t, NULL);
  if (slot >= 0)
    S.tid[slot] = 0;
}

static void
sim_random (void *buf, size_t len)
{
  uint8_t *p = buf;
  for (size_t i = 0; i < len; i++)
    p[i] = (uint8_t) next (&S.uuid_rng);
}

static const struct hc_sched_ops sim_ops = {
  .lock = sim_lock, .rdlock = sim_rdlock, .wrlock = sim_wrlock, .trywrlock = sim_trywrlock,
  .tryrdlock = sim_tryrdlock,
  .timedwait = sim_timedwait, .now_ns = sim_now, .spawn = sim_spawn, .join = sim_join,
  .random = sim_random,
};

static void watch_slow (enum hook_op op, uint64_t off, uint64_t len, int rc);

static void corrupt_before (enum hook_op op, uint64_t off, uint64_t len);
static void corrupt_after (int rc);

/* Every tier I/O is a scheduling point and costs 20 µs of virtual time. */
static int
io_point (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  if (after && arg)
    watch_slow (op, off, len, rc);
  if (!after && hc_sched) {
    S.clock_ns += 20000;
    yield ();
  }
  /* Nothing runs between the hook and the call (the tiers below have no
   * scheduling points), so the fast tier's content saved here is what the
   * write replaces. */
  if (!arg && !after)
    corrupt_before (op, off, len);
  else if (!arg)
    corrupt_after (rc);
  return 0;
}

/* ---- The model. ---- */

struct version {
  uint8_t *img;
  uint64_t issued, acked; /* logical times; acked = UINT64_MAX: never */
};

struct block {
  struct version *v;
  unsigned n, cap;
  unsigned durable; /* index of the newest version known durable */
  bool uncertain;   /* the newest version's write failed, and reading it back failed too */
  bool unreadable;  /* failed its checksum after a cut: unknown once reset */
  bool unknown;     /* a write went on top of an uncertain version: no longer checked */
};

static struct {
  unsigned nblocks, clients;
  struct block *b;
  uint64_t t; /* logical time */
  uint64_t ops, reads_checked, cuts, recovery_cuts, faults, reopens, phases;
  uint64_t corruptions, corrupt_reads; /* silent corruptions injected; reads failed for them */
  uint64_t beside; /* write-through batches whose slow writes ran on the slow writer */
  uint64_t fast_syncs; /* the cleaner's commits for data rewritten in place alone */
  uint64_t touch_seeds; /* seeds whose volume promotes on the second touch */
  uint64_t budget_seeds; /* seeds whose volume has a flash budget */
  uint64_t budget_engaged; /* times a budget turned second touch on */
  uint64_t all_fx_seeds; /* seeds whose volume has every effect in force */
  uint64_t around; /* write misses a policy sent around the cache */
  bool corrupted; /* this seed's fast tier has had silent corruption */
} M;

static uint64_t
tick (void)
{
  return ++M.t;
}

/* Appends a version of block b: its current newest with [boff, boff+len)
 * replaced by src (zeros if NULL).  Returns its index. */
static unsigned
model_write (unsigned b, uint32_t boff, uint32_t len, const uint8_t *src, uint64_t t)
{
  struct block *k = &M.b[b];
  /* A partial write on top of a version that may or may not have landed
   * makes two possible images, and so on: the model stops there. */
  k->unknown |= k->uncertain;
  k->uncertain = false;
  if (k->n == k->cap) {
    k->cap = k->cap ? 2 * k->cap : 8;
    k->v = realloc (k->v, k->cap * sizeof *k->v);
  }
  struct version *v = &k->v[k->n];
  v->img = malloc (BS);
  memcpy (v->img, k->v[k->n - 1].img, BS);
  if (src)
    memcpy (v->img + boff, src, len);
  else
    memset (v->img + boff, 0, len);
  v->issued = t;
  v->acked = UINT64_MAX;
  return k->n++;
}

/* Makes block b's versions [0, keep) go, keeping `keep` as version 0. */
static void
model_reset_block (unsigned b, const uint8_t *content)
{
  struct block *k = &M.b[b];
  for (unsigned i = 0; i < k->n; i++)
    free (k->v[i].img);
  k->n = 1;
  if (!k->cap) {
    k->cap = 8;
    k->v = malloc (k->cap * sizeof *k->v);
  }
  k->v[0].img = malloc (BS);
  if (content)
    memcpy (k->v[0].img, content, BS);
  else
    memset (k->v[0].img, 0, BS);
  k->v[0].issued = k->v[0].acked = 0;
  k->durable = 0;
  k->uncertain = false;
  k->unknown = k->unreadable;
  k->unreadable = false;
}

/* A flush that began at logical time t0 completed: every version
 * acknowledged before t0 is durable. */
static void
model_flushed (uint64_t t0)
{
  for (unsigned b = 0; b < M.nblocks; b++) {
    struct block *k = &M.b[b];
    for (unsigned i = k->n; i-- > k->durable;)
      if (k->v[i].acked < t0) {
        k->durable = i;
        break;
      }
  }
}

/* Is sector s of block b's content `got` a version allowed for a read in
 * [t0, t1]?  With `floor`, versions from durable on (a crash) instead. */
static bool
allowed (unsigned b, unsigned s, const uint8_t *got, uint64_t t0, uint64_t t1, bool floor)
{
  struct block *k = &M.b[b];
  unsigned lo = 0;
  if (k->unknown)
    return true;
  if (floor)
    lo = k->durable;
  else
    for (unsigned i = k->n; i-- > 0;)
      if (k->v[i].acked < t0) {
        lo = i;
        break;
      }
  for (unsigned i = lo; i < k->n; i++)
    if (k->v[i].issued < t1 && memcmp (k->v[i].img + s * SECT, got + s * SECT, SECT) == 0)
      return true;
  return false;
}

/* ---- The rig. ---- */

static struct {
  hc_tier *fmem, *smem, *ffault, *sfault, *fast, *slow;
  hc_power *pw;
  hc_volume *v;
  bool faults;    /* this phase injects faults */
  unsigned corrupt; /* this phase corrupts that many fast-tier data writes in 1,000 */
  uint64_t crng;    /* the corruption's choices */
  uint64_t data_lo, data_hi; /* the fast tier's data region */
  bool all_fx;      /* this seed's volume has every effect in force */
  bool verbose;
} R;


static char fail_what[512];
static bool tracing; /* SIM_TRACE set: every operation on stderr */

#define TRACE(...) (tracing ? (void) fprintf (stderr, __VA_ARGS__) : (void) 0)

/* ---- Silent corruption of the fast tier's data. ---- */

static struct {
  enum { C_NONE, C_LOST, C_MISDIRECTED } kind;
  uint64_t off, len;
  uint8_t *old; /* what the write replaced */
} C;

/* Before a fast-tier write inside the data region: decides whether it will
 * be lost or misdirected, and if so saves what it overwrites. */
static void
corrupt_before (enum hook_op op, uint64_t off, uint64_t len)
{
  C.kind = C_NONE;
  if (op != HOOK_WRITE || !R.corrupt || off < R.data_lo || off + len > R.data_hi
      || below (&R.crng, 1000) >= R.corrupt)
    return;
  C.kind = below (&R.crng, 2) ? C_LOST : C_MISDIRECTED;
  C.off = off;
  C.len = len;
  C.old = realloc (C.old, len);
  hc_tier_read (R.fmem, C.old, len, off);
}

/* After it, if it succeeded: puts the old content back (lost), and for a
 * misdirected write puts the new content on another cache block, past the
 * power domain (the device thinks it wrote it where asked). */
static void
corrupt_after (int rc)
{
  if (C.kind == C_NONE || rc != 0)
    return;
  uint8_t *now = malloc (C.len);
  hc_tier_read (R.fmem, now, C.len, C.off);
  hc_tier_write (R.fmem, C.old, C.len, C.off, 0);
  if (C.kind == C_MISDIRECTED) {
    uint64_t blocks = (R.data_hi - R.data_lo - C.len) / BS + 1;
    uint64_t to = R.data_lo + below (&R.crng, blocks) * BS;
    hc_tier_write (R.fmem, now, C.len, to, 0);
  }
  free (now);
  TRACE ("corruption: fast write %" PRIu64 "+%" PRIu64 " %s\n", C.off, C.len,
         C.kind == C_LOST ? "lost" : "misdirected");
  M.corruptions++;
  M.corrupted = true;
  C.kind = C_NONE;
}

static void
fail_now (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (fail_what, sizeof fail_what, fmt, ap);
  va_end (ap);
  fprintf (stderr, "sim: seed %" PRIu64 ": VIOLATION: %s\n", current_seed, fail_what);
#ifdef SIM_FUZZ
  fprintf (stderr, "  replay: fuzz_sim INPUT (the input libFuzzer saves for this crash)\n");
  fflush (stderr);
  abort (); /* a crash libFuzzer keeps the input of (an exit would lose it) */
#else
  fprintf (stderr, "  replay: sim --seed %" PRIu64 "\n", current_seed);
  fflush (stderr);
  _exit (1);
#endif
}

static void
rig_open (const struct hc_open_opts *oo)
{
  char why[256];
  int rc = hc_volume_open (R.fast, R.slow, oo, &R.v, why, sizeof why);
  if (rc < 0)
    fail_now ("open: %s", why);
  R.data_lo = R.v->sb.data_off;
  R.data_hi = R.v->sb.data_off + (uint64_t) R.v->dir.map.n * BS;
  /* The cleaner settles write-through copies within a phase's virtual
   * seconds, not once a minute, so that it races the writers. */
  pthread_mutex_lock (&R.v->lock);
  R.v->settle_idle_ns = (current_seed % 4) * 100000000ull;
  R.v->settle_busy_ns = (current_seed % 3) * 5000000ull;
  /* … and commits data rewritten in place with no record waiting within
   * a phase too, not after 30 s. */
  R.v->fast_sync_ns = (current_seed / 108 % 4) * 250000000ull;
  /* Fills of runs of misses: by trials, always on the reader's thread, or
   * always deferred to the filler (fill.c). */
  R.v->fill_way[0].force = R.v->fill_way[1].force = (uint8_t) (current_seed / 3 % 3);
  /* Write-through batches' slow writes: by trials, always after the fast
   * writes, or always beside them on the slow writer (writer.c). */
  R.v->write_way.force = (uint8_t) (current_seed / 9 % 3);
  /* Every effect in force — class rules, placement, demotion and thrift
   * (data, streaming and background writes around the cache, their reads
   * admitted on a second touch) — for one hintaware volume in four: the
   * evidence seldom takes them on the simulator's short phases. */
  if (R.all_fx)
    hc_dir_set_effects (&R.v->dir, HC_FX_ALL);
  pthread_mutex_unlock (&R.v->lock);
}

/* No stale clean copy: every cached block the volume holds clean has the
 * slow tier's data, or an eviction would later change what the block reads
 * (the model would see it only then, if ever).  Not after silent
 * corruption, which may have changed a copy under its checksum. */
static void
check_clean_copies (const char *when)
{
  static uint8_t x[BS], y[BS];

  for (uint32_t c = 0; c < R.v->dir.map.n; c++) {
    uint64_t w = R.v->dir.map.blk[c].meta;
    if (!(w & HC_M_VALID) || (w & HC_M_DIRTY))
      continue;
    uint64_t b = hc_meta_origin (w);
    hc_tier_read (R.fmem, x, BS, R.v->sb.data_off + (uint64_t) c * BS);
    hc_tier_read (R.smem, y, BS, b * BS);
    if (memcmp (x, y, BS) != 0)
      fail_now ("%s: block %" PRIu64 " has a clean copy (cache block %u) that differs from the "
                "slow tier", when, b, c);
  }
}

/* SIM_WATCH=B (debugging): every slow-tier write over block B, with the
 * first bytes of each of its sectors after it. */
static void
watch_slow (enum hook_op op, uint64_t off, uint64_t len, int rc)
{
  static long watch = -2;
  if (watch == -2)
    watch = getenv ("SIM_WATCH") ? atol (getenv ("SIM_WATCH")) : -1;
  if (watch >= 0 && R.v && getenv ("SIM_WATCH_ALL")) {
    uint32_t c = hc_dir_find (&R.v->dir, (uint64_t) watch);
    fprintf (stderr, "  [t%" PRIu64 " slow op %d %" PRIu64 "+%" PRIu64 "; block in %d meta %#" PRIx64 "]\n",
             M.t, op, off, len, c == HC_NIL ? -1 : (int) c, c == HC_NIL ? 0 : R.v->dir.map.blk[c].meta);
  }
  if (watch >= 0 && op != HOOK_READ && off < (uint64_t) (watch + 1) * BS
      && off + len > (uint64_t) watch * BS) {
    uint8_t sl[BS];
    hc_tier_read (R.smem, sl, BS, (uint64_t) watch * BS);
    fprintf (stderr, "  [t%" PRIu64 " slow op %d %" PRIu64 "+%" PRIu64 " rc %d: now", M.t, op, off,
             len, rc);
    for (unsigned s = 0; s < BS / SECT; s++)
      fprintf (stderr, " %02x%02x", sl[s * SECT], sl[s * SECT + 1]);
    fprintf (stderr, "]\n");
  }
}

/* ---- Clients. ---- */

struct client {
  unsigned id, nops;
  uint64_t rng;
  hc_stream *stream;
};

static const uint8_t classes[] = { HC_CLASS_UNCLASSIFIED, HC_CLASS_METADATA, HC_CLASS_JOURNAL,
                                   HC_CLASS_DATA, HC_CLASS_STREAMING, HC_CLASS_BACKGROUND,
                                   HC_CLASS_TRANSACTION, HC_CLASS_PAGING };

static bool
errors_expected (void)
{
  return R.faults || M.corrupted || hc_power_is_cut (R.pw) || R.v->failed;
}

static void
expect_ok (int rc, const char *what)
{
  if (rc < 0 && !errors_expected ())
    fail_now ("%s failed with %s, no fault injected", what, strerror (-rc));
}

/* Reads [off, off+len) and checks every sector against the model. */
static void
do_read (struct client *c, uint64_t off, uint64_t len, struct hc_ioctx *ctx)
{
  uint64_t b0 = off / BS, b1 = (off + len - 1) / BS;
  uint8_t *buf = malloc ((b1 - b0 + 1) * BS);
  uint64_t t0 = tick (), ck0 = R.v->dir.stats.errors_checksum;
  int rc = hc_volume_read (R.v, buf + (off - b0 * BS), len, off, ctx);
  uint64_t t1 = tick ();
  TRACE ("t%" PRIu64 " c%u read %" PRIu64 "+%" PRIu64 " -> %d (t%" PRIu64 ")\n", t0, c->id, off,
         len, rc, t1);
  (void) c;
  if (rc < 0 && M.corrupted && !R.faults && !hc_power_is_cut (R.pw) && !R.v->failed) {
    /* Only a checksum that caught a corrupted dirty block excuses it. */
    if (rc != -EIO || R.v->dir.stats.errors_checksum == ck0)
      fail_now ("a read failed with %s after silent corruption, but no checksum error was "
                "counted", strerror (-rc));
    M.corrupt_reads++;
  } else
    expect_ok (rc, "read");
  if (rc == 0) {
    for (uint64_t b = b0; b <= b1; b++)
      for (unsigned s = 0; s < BS / SECT; s++) {
        uint64_t so = b * BS + s * SECT;
        if (so + SECT <= off || so >= off + len)
          continue;
        /* A partly read sector: compare the part read, padded from the
         * newest version (any allowed version that matches the part would
         * do; the sector as a whole is checked where it is read whole). */
        if (so < off || so + SECT > off + len)
          continue;
        if (!allowed ((unsigned) b, s, buf + (b - b0) * BS, t0, t1, false)) {
          if (tracing) {
            fprintf (stderr, "got %02x%02x%02x%02x; versions:", buf[(b - b0) * BS + s * SECT],
                     buf[(b - b0) * BS + s * SECT + 1], buf[(b - b0) * BS + s * SECT + 2],
                     buf[(b - b0) * BS + s * SECT + 3]);
            for (unsigned i = 0; i < M.b[b].n; i++) {
              const uint8_t *x = M.b[b].v[i].img + s * SECT, *g = buf + (b - b0) * BS + s * SECT;
              unsigned same = 0, first_diff = SECT;
              for (unsigned j = 0; j < SECT; j++) {
                same += x[j] == g[j];
                if (x[j] != g[j] && first_diff == SECT)
                  first_diff = j;
              }
              fprintf (stderr, " [%u %02x%02x%02x%02x i%" PRIu64 " a%" PRId64 " same %u from %u]", i,
                       x[0], x[1], x[2], x[3], M.b[b].v[i].issued, (int64_t) M.b[b].v[i].acked,
                       same, first_diff);
            }
            fputc ('\n', stderr);
            for (unsigned ob = 0; ob < M.nblocks; ob++)
              for (unsigned i = 0; i < M.b[ob].n; i++)
                for (unsigned os = 0; os < BS / SECT; os++)
                  if (memcmp (M.b[ob].v[i].img + os * SECT, buf + (b - b0) * BS + s * SECT, SECT) == 0)
                    fprintf (stderr, "  = block %u version %u sector %u\n", ob, i, os);
            {
              uint8_t sl[SECT], fa[SECT];
              hc_tier_read (R.smem, sl, SECT, b * BS + s * SECT);
              uint32_t cc = hc_dir_find (&R.v->dir, b);
              if (cc != HC_NIL)
                hc_tier_read (R.fmem, fa, SECT, R.v->sb.data_off + (uint64_t) cc * BS + s * SECT);
              fprintf (stderr, "  slow %02x%02x%02x%02x fast %02x%02x%02x%02x mode %s\n", sl[0],
                       sl[1], sl[2], sl[3], fa[0], fa[1], fa[2], fa[3], hc_mode_name (R.v->mode));
            }
            uint32_t cb = hc_dir_find (&R.v->dir, b);
            fprintf (stderr, "  block %" PRIu64 " is cached in %d (meta %#" PRIx64 ")\n", b,
                     cb == HC_NIL ? -1 : (int) cb, cb == HC_NIL ? 0 : R.v->dir.map.blk[cb].meta);
          }
          fail_now ("read of block %" PRIu64 " sector %u at t=%" PRIu64 "..%" PRIu64
                    ": data never written there, or older than the last acknowledged write "
                    "(%u versions)", b, s, t0, t1, M.b[b].n);
        }
      }
    M.reads_checked++;
  }
  free (buf);
}

static void
do_write (struct client *c, uint64_t off, uint64_t len, bool fua, bool zero, bool discard,
          struct hc_ioctx *ctx)
{
  uint8_t *buf = malloc (len);
  uint64_t t0 = tick ();
  unsigned first[64], nb = 0;

  for (uint64_t i = 0; i < len; i++)
    buf[i] = (uint8_t) (next (&c->rng) | 1); /* never all zeros: zeros are the discard's */
  for (uint64_t o = off; o < off + len;) {
    uint64_t b = o / BS;
    uint32_t boff = (uint32_t) (o % BS), n = BS - boff;
    if (n > off + len - o)
      n = (uint32_t) (off + len - o);
    first[nb++] = model_write ((unsigned) b, boff, n, (zero || discard) ? NULL : buf + (o - off),
                               t0);
    o += n;
  }
  int rc = discard ? hc_volume_discard (R.v, off, len, ctx)
           : zero  ? hc_volume_zero (R.v, off, len, fua ? HC_VOL_FUA : 0, ctx)
                   : hc_volume_write (R.v, buf, len, off, fua ? HC_VOL_FUA : 0, ctx);
  uint64_t t1 = tick ();
  TRACE ("t%" PRIu64 " c%u %s %" PRIu64 "+%" PRIu64 "%s -> %d (t%" PRIu64 ")\n", t0, c->id,
         discard ? "discard" : zero ? "zero" : "write", off, len, fua ? " fua" : "", rc, t1);
  expect_ok (rc, discard ? "discard" : zero ? "zero" : "write");
  if (rc == 0)
    for (unsigned i = 0; i < nb; i++) {
      struct block *k = &M.b[off / BS + i];
      k->v[first[i]].acked = t1;
      if (fua && !discard)
        k->durable = first[i];
    }
  else
    /* The write may have landed in some blocks and not others: read each
     * back (no one else writes them) and make what is there the newest
     * version. */
    for (unsigned i = 0; i < nb; i++) {
      uint64_t b = off / BS + i;
      uint8_t img[BS];
      uint64_t r0 = tick ();
      if (!hc_power_is_cut (R.pw) && hc_volume_read (R.v, img, BS, b * BS, NULL) == 0) {
        unsigned x = model_write ((unsigned) b, 0, BS, img, r0);
        M.b[b].v[x].acked = tick ();
      } else {
        M.b[b].uncertain = true;
      }
    }
  free (buf);
}

static void *
client_main (void *arg)
{
  struct client *c = arg;
  const uint64_t vol = (uint64_t) M.nblocks * BS;
  const uint64_t own0 = (uint64_t) c->id * REGION * BS, own = REGION * BS;

  /* A client in four is mostly a sequential reader this phase: whole
   * blocks on from its last read, round the volume, past the sequential
   * cutoff and into readahead, beside the others' writes. */
  const bool seq_reader = below (&c->rng, 4) == 0;
  uint64_t next_read = below (&c->rng, M.nblocks) * BS;

  for (unsigned i = 0; i < c->nops && !hc_power_is_cut (R.pw) && !R.v->failed; i++) {
    struct hc_ioctx ctx = { .stream = c->stream };
    if (below (&c->rng, 3) == 0)
      ctx.hint.cls = classes[below (&c->rng, sizeof classes)];
    unsigned r = (unsigned) below (&c->rng, 100);
    uint64_t off, len;
    M.ops++;
    if (seq_reader && r < 80) {
      len = (2 + below (&c->rng, 8)) * BS;
      off = next_read + len <= vol ? next_read : 0;
      len = off + len <= vol ? len : vol - off;
      next_read = off + len;
      do_read (c, off, len, &ctx);
    } else if (r < 38) { /* write: whole blocks, sectors, or bytes */
      unsigned shape = (unsigned) below (&c->rng, 3);
      len = shape == 0 ? (1 + below (&c->rng, 4)) * BS
            : shape == 1 ? (1 + below (&c->rng, 16)) * SECT : 1 + below (&c->rng, 6000);
      off = shape == 0 ? below (&c->rng, REGION - len / BS + 1) * BS
            : shape == 1 ? below (&c->rng, (own - len) / SECT + 1) * SECT
                         : below (&c->rng, own - len + 1);
      do_write (c, own0 + off, len, below (&c->rng, 8) == 0, false, false, &ctx);
    } else if (r < 68) { /* read anything */
      /* Whole blocks, now and then many (a run of misses or hits, past a
       * batch's size and around the stripes), or anything. */
      len = below (&c->rng, 2) ? (1 + below (&c->rng, below (&c->rng, 8) ? 4 : 80)) * BS
                               : 1 + below (&c->rng, 3 * BS);
      len = len < vol ? len : vol;
      off = (len % BS == 0 && below (&c->rng, 2)) ? below (&c->rng, vol / BS - len / BS + 1) * BS
                                                  : below (&c->rng, vol - len + 1);
      do_read (c, off, len, &ctx);
    } else if (r < 75) {
      uint64_t t0 = tick ();
      int rc = hc_volume_flush (R.v);
      TRACE ("t%" PRIu64 " c%u flush -> %d (t%" PRIu64 ")\n", t0, c->id, rc, tick ());
      expect_ok (rc, "flush");
      if (rc == 0)
        model_flushed (t0);
    } else if (r < 80) { /* discard or zero some of its own blocks */
      len = 1 + below (&c->rng, 3 * BS);
      off = below (&c->rng, own - len + 1);
      bool zero = below (&c->rng, 2);
      do_write (c, own0 + off, len, zero && below (&c->rng, 3) == 0, zero, !zero, &ctx);
    } else if (r < 91) { /* advice of every kind, anywhere */
      static const uint8_t adv[] = { HC_ADVICE_NONE, HC_ADVICE_WILLNEED, HC_ADVICE_DONTNEED,
                                     HC_ADVICE_EVICT, HC_ADVICE_NORMAL };
      struct hc_hint h = { .advice = adv[below (&c->rng, sizeof adv)] };
      if (below (&c->rng, 2))
        h.cls = classes[1 + below (&c->rng, sizeof classes - 1)];
      len = 1 + below (&c->rng, 16 * BS);
      off = below (&c->rng, vol - len + 1);
      if (h.cls == 0 && h.advice == 0)
        h.advice = HC_ADVICE_NORMAL;
      /* Range hints of every source, and withdrawals of one source's. */
      unsigned src = (unsigned) below (&c->rng, HC_SOURCE_COUNT);
      bool withdraw = below (&c->rng, 4) == 0;
      int rc = withdraw ? hc_volume_unadvise_from (R.v, off, len, src)
                        : hc_volume_advise_from (R.v, off, len, h, src);
      TRACE ("t%" PRIu64 " c%u %s %" PRIu64 "+%" PRIu64 " cls %u advice %u from %u -> %d\n",
             tick (), c->id, withdraw ? "unadvise" : "advise", off, len, h.cls, h.advice, src, rc);
      expect_ok (rc, withdraw ? "unadvise" : "advise");
    } else if (r < 95) {
      int rc = hc_volume_clean (R.v);
      TRACE ("t%" PRIu64 " c%u clean -> %d\n", tick (), c->id, rc);
      expect_ok (rc, "clean");
    } else if (r < 97) {
      enum hc_mode mode = (enum hc_mode) below (&c->rng, HC_MODE_COUNT);
      int rc = hc_volume_set_mode (R.v, mode);
      TRACE ("t%" PRIu64 " c%u mode %s -> %d\n", tick (), c->id, hc_mode_name (mode), rc);
      if (rc != -EBUSY)
        expect_ok (rc, "mode switch");
    } else {
      int rc = hc_meta_commit (R.v, true);
      TRACE ("t%" PRIu64 " c%u checkpoint -> %d\n", tick (), c->id, rc);
      expect_ok (rc, "checkpoint");
    }
  }
  return NULL;
}

/* ---- Phases. ---- */

/* Reads the whole volume read-only from the raw tiers into out; checks it
 * opens, `check` passes, and (with floor) every sector is durable or later. */
static void
verify_after_cut (uint8_t *out, const char *when)
{
  struct hc_open_opts oo = { .read_only = true, .no_cleaner = true };
  char why[256];
  hc_volume *v;

  if (hc_volume_check (R.fmem, R.smem, why, sizeof why) < 0)
    fail_now ("%s: check fails: %s", when, why);
  if (hc_volume_open (R.fmem, R.smem, &oo, &v, why, sizeof why) < 0)
    fail_now ("%s: the volume does not open: %s", when, why);
  /* After silent corruption, a block may fail its checksum: it is then
   * left out (marked so for the comparison after a recovery, and no longer
   * checked by the model), but only a counted checksum error excuses it. */
  for (unsigned b = 0; b < M.nblocks; b++) {
    uint64_t ck0 = v->dir.stats.errors_checksum;
    int rc = hc_volume_read (v, out + (size_t) b * BS, BS, (uint64_t) b * BS, NULL);
    if (rc < 0 && (!M.corrupted || rc != -EIO || v->dir.stats.errors_checksum == ck0))
      fail_now ("%s: reading block %u of the volume fails: %s", when, b, strerror (-rc));
    if (rc < 0) {
      memset (out + (size_t) b * BS, 0xee, BS);
      M.b[b].unknown = M.b[b].unreadable = true;
      M.corrupt_reads++;
    }
  }
  if (getenv ("SIM_WATCH")) {
    uint64_t wb = (uint64_t) atol (getenv ("SIM_WATCH"));
    uint32_t c = hc_dir_find (&v->dir, wb);
    fprintf (stderr, "  [%s, read-only: block in %d meta %#" PRIx64 " replayed %" PRIu64
             " tail %d copy %u]\n", when, c == HC_NIL ? -1 : (int) c,
             c == HC_NIL ? 0 : v->dir.map.blk[c].meta, v->replayed, v->tail_damaged, v->sb.copy);
  }
  hc_volume_close (v);
  for (unsigned b = 0; b < M.nblocks; b++)
    for (unsigned s = 0; s < BS / SECT; s++)
      if (!allowed (b, s, out + (size_t) b * BS, 0, UINT64_MAX, true)) {
        if (getenv ("SIM_WATCH")) {
          const uint8_t *g = out + (size_t) b * BS;
          fprintf (stderr, "  [got:");
          for (unsigned x = 0; x < BS / SECT; x++)
            fprintf (stderr, " %02x%02x", g[x * SECT], g[x * SECT + 1]);
          for (unsigned i = 0; i < M.b[b].n; i++) {
            fprintf (stderr, "]\n  [v%u:", i);
            for (unsigned x = 0; x < BS / SECT; x++)
              fprintf (stderr, " %02x%02x", M.b[b].v[i].img[x * SECT], M.b[b].v[i].img[x * SECT + 1]);
          }
          fprintf (stderr, "]\n");
        }
        fail_now ("%s: block %u sector %u holds data never written there, or older than its "
                  "last durable write (version %u of %u)", when, b, s, M.b[b].durable, M.b[b].n);
      }
}

static void
set_faults (uint64_t *rng)
{
  static const unsigned opsets[] = { HC_FAULT_READ, HC_FAULT_WRITE, HC_FAULT_FLUSH,
                                     HC_FAULT_DISCARD, HC_FAULT_READ | HC_FAULT_WRITE };
  for (unsigned k = 0; k < 2; k++) {
    struct hc_fault_rule rule = { 0 };
    if (below (rng, 2)) {
      rule.ops = opsets[below (rng, sizeof opsets / sizeof opsets[0])];
      rule.fraction = (double) (1 + below (rng, 20)) / 1000.0;
      rule.err = below (rng, 3) ? EIO : ENOSPC;
      rule.persistent = below (rng, 8) == 0;
    }
    hc_tier_faulty_set (k ? R.sfault : R.ffault, &rule);
  }
}

static void
clear_faults (void)
{
  struct hc_fault_rule none = { 0 };
  M.faults += hc_tier_faulty_injected (R.ffault) + hc_tier_faulty_injected (R.sfault);
  hc_tier_faulty_set (R.ffault, &none);
  hc_tier_faulty_set (R.sfault, &none);
}

static void
run_seed (uint64_t seed, unsigned phases, unsigned nclients)
{
  uint64_t rng = seed * 0x2545f4914f6cdd1dull + 7;
  static uint8_t *before, *after;
  const unsigned cache_blocks = 16 + (unsigned) below (&rng, 3) * 40; /* tiny to a few dozen */
  char why[256];

  current_seed = seed;
  M.corrupted = false;
  R.crng = seed ^ 0xc0ffee; /* its own generator: the other choices stay as they were */
  M.clients = nclients;
  M.nblocks = nclients * REGION;
  M.b = calloc (M.nblocks, sizeof *M.b);
  for (unsigned b = 0; b < M.nblocks; b++)
    model_reset_block (b, NULL);
  free (before);
  free (after);
  before = malloc ((size_t) M.nblocks * BS);
  after = malloc ((size_t) M.nblocks * BS);

  S.rng = seed ^ 0x5eed;
  S.uuid_rng = seed;
  S.clock_ns = 1000000000ull;
  S.n = 1;
  memset (S.live, 0, sizeof S.live);
  memset (S.tid, 0, sizeof S.tid);
  S.live[0] = true;
  S.current = 0;
  me = 0;
  hc_sched = &sim_ops;

  hc_tier_new_memory (8192 + 6 * 4096 + (256u << 10) + (uint64_t) cache_blocks * BS, &R.fmem);
  hc_tier_new_memory ((uint64_t) M.nblocks * BS, &R.smem);
  hc_power_new (seed, &R.pw);
  hc_tier_new_faulty (R.fmem, R.pw, seed + 1, &R.ffault);
  hc_tier_new_faulty (R.smem, R.pw, seed + 2, &R.sfault);
  hook_new (R.ffault, io_point, NULL, &R.fast);
  hook_new (R.sfault, io_point, (void *) 1, &R.slow);
  struct hc_format_opts fo = { .mode = (enum hc_mode) below (&rng, HC_MODE_COUNT),
                               .max_ranges = 64,
                               .policy = below (&rng, 2) ? "hintaware" : "lru",
                               .checksums = below (&rng, 2) };
  if (hc_volume_format (R.fast, R.slow, &fo, why, sizeof why) < 0)
    fail_now ("format: %s", why);
  /* Second-touch promotion for one hintaware volume in four, and a flash
   * budget of 64 blocks a minute (so that it runs out and fills again,
   * turning second touch on and off) for another (by the seed, as the
   * forced ways above, so that the draws stay as they were). */
  bool ha = fo.policy[0] == 'h';
  struct hc_open_opts oo = { .dirty_high = 10 + (unsigned) below (&rng, 80),
                             .seq_cutoff = below (&rng, 2) ? 64 * 1024 : 0,
                             .second_touch = ha && current_seed / 27 % 4 == 1,
                             .flash_budget = ha && current_seed / 27 % 4 == 2
                                             ? UINT64_C (1440) * 64 * BS : 0 };
  M.touch_seeds += oo.second_touch;
  M.budget_seeds += oo.flash_budget != 0;
  R.all_fx = ha && current_seed / 27 % 4 == 3;
  M.all_fx_seeds += R.all_fx;
  rig_open (&oo);

  for (unsigned ph = 0; ph < phases; ph++) {
    bool cut = below (&rng, 3) == 0;
    R.faults = below (&rng, 4) == 0;
    R.corrupt = fo.checksums && below (&R.crng, 3) == 0 ? 1 + (unsigned) below (&R.crng, 40) : 0;
    TRACE ("phase %u: %s%s\n", ph, cut ? "cut " : "", R.faults ? "faults" : "");
    S.phase_steps = 0;
    if (R.faults)
      set_faults (&rng);
    if (cut)
      hc_power_arm (R.pw, 1 + below (&rng, 600));
    struct client cl[MAX_CLIENTS];
    pthread_t t[MAX_CLIENTS];
    for (unsigned k = 0; k < nclients; k++) {
      cl[k] = (struct client) { .id = k, .nops = 20 + (unsigned) below (&rng, 60),
                                .rng = next (&rng) };
      /* A client in two is a stream (a file, a process); the others share
       * the volume's run detection and readahead windows, as an NBD
       * client's connections do. */
      if (below (&rng, 2))
        hc_stream_new (R.v, (struct hc_hint) { 0 }, &cl[k].stream);
      if (hc_spawn (&t[k], client_main, &cl[k]))
        fail_now ("cannot start a client");
    }
    for (unsigned k = 0; k < nclients; k++) {
      hc_join (t[k]);
      hc_stream_free (cl[k].stream);
    }
    clear_faults ();
    R.corrupt = 0;
    M.phases++;
    hc_lock (&R.v->lock);
    M.beside += R.v->writer_jobs;
    R.v->writer_jobs = 0;
    M.fast_syncs += R.v->fast_syncs;
    R.v->fast_syncs = 0;
    M.budget_engaged += R.v->budget.engaged;
    R.v->budget.engaged = 0;
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
      M.around += R.v->dir.stats.cls[c].bypass[1][HC_BYPASS_POLICY];
      R.v->dir.stats.cls[c].bypass[1][HC_BYPASS_POLICY] = 0;
    }
    pthread_mutex_unlock (&R.v->lock);
    if (hc_power_is_cut (R.pw) || cut) {
      /* The power goes (now, if it has not yet): then recovery, maybe cut
       * short itself, must read back exactly the same. */
      if (!hc_power_is_cut (R.pw))
        hc_power_arm (R.pw, 1);
      TRACE ("power cut (at t%" PRIu64 ")\n", M.t);
      hc_volume_close (R.v);
      R.v = NULL;
      hc_power_cut_apply (R.pw);
      M.cuts++;
      verify_after_cut (before, "after a power cut");
      if (below (&rng, 2)) {
        struct hc_open_opts ro = { .no_cleaner = true };
        hc_volume *v;
        hc_power_arm (R.pw, 1 + below (&rng, 12));
        if (hc_volume_open (R.fast, R.slow, &ro, &v, why, sizeof why) == 0)
          hc_volume_close (v);
        if (!hc_power_is_cut (R.pw))
          hc_power_arm (R.pw, 1);
        hc_power_cut_apply (R.pw);
        M.recovery_cuts++;
        verify_after_cut (after, "after a recovery cut short");
        if (memcmp (before, after, (size_t) M.nblocks * BS) != 0)
          fail_now ("a recovery cut short changed what the volume reads");
      }
      hc_power_arm (R.pw, 0);
      rig_open (&oo);
      if (!M.corrupted)
        check_clean_copies ("after recovery");
      if (getenv ("SIM_WATCH")) {
        uint64_t wb = (uint64_t) atol (getenv ("SIM_WATCH"));
        uint32_t c = hc_dir_find (&R.v->dir, wb);
        fprintf (stderr, "  [rw: replayed %" PRIu64 " tail %d]\n", R.v->replayed, R.v->tail_damaged);
        uint8_t x[SECT] = { 0 }, y[SECT];
        if (c != HC_NIL)
          hc_tier_read (R.fmem, x, SECT, R.v->sb.data_off + (uint64_t) c * BS);
        hc_tier_read (R.smem, y, SECT, wb * BS);
        fprintf (stderr, "  [reopened: block in %d meta %#" PRIx64 " fast %02x%02x%02x%02x slow "
                 "%02x%02x%02x%02x view %02x%02x%02x%02x]\n", c == HC_NIL ? -1 : (int) c,
                 c == HC_NIL ? 0 : R.v->dir.map.blk[c].meta, x[0], x[1], x[2], x[3], y[0], y[1],
                 y[2], y[3], before[wb * BS], before[wb * BS + 1], before[wb * BS + 2],
                 before[wb * BS + 3]);
      }
      for (unsigned b = 0; b < M.nblocks; b++)
        model_reset_block (b, before + (size_t) b * BS);
    } else {
      bool failed = R.v->failed;
      int rc = hc_volume_close (R.v);
      R.v = NULL;
      if (rc < 0 && !failed && !R.faults)
        fail_now ("close failed: %s", strerror (-rc));
      if (hc_volume_check (R.fast, R.slow, why, sizeof why) < 0)
        fail_now ("check after close: %s", why);
      if (rc == 0)
        model_flushed (tick ());
      else {
        /* Not closed: like a crash without a cut — what was durable stays. */
        verify_after_cut (before, "after a failed close");
        for (unsigned b = 0; b < M.nblocks; b++)
          model_reset_block (b, before + (size_t) b * BS);
      }
      rig_open (&oo);
      M.reopens++;
    }
  }
  int rc = hc_volume_close (R.v);
  if (rc < 0)
    fail_now ("final close: %s", strerror (-rc));
  R.v = NULL;
  hc_sched = NULL;
  me = -1;
  hc_tier_close (R.fast);
  hc_tier_close (R.slow);
  hc_tier_close (R.ffault);
  hc_tier_close (R.sfault);
  hc_power_free (R.pw);
  hc_tier_close (R.fmem);
  hc_tier_close (R.smem);
  for (unsigned b = 0; b < M.nblocks; b++) {
    for (unsigned i = 0; i < M.b[b].n; i++)
      free (M.b[b].v[i].img);
    free (M.b[b].v);
  }
  free (M.b);
  M.b = NULL;
}

#ifndef SIM_FUZZ
int
main (int argc, char **argv)
{
  for (int i = 0; i < MAX_THREADS; i++)
    pthread_cond_init (&S.cv[i], NULL);
  tracing = getenv ("SIM_TRACE") != NULL;
  uint64_t first = 1, nseeds = 20, one = 0;
  unsigned phases = 6, clients = 3;
  double seconds = 0;
  bool have_one = false;

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--seeds") == 0 && i + 1 < argc)
      nseeds = strtoull (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--first") == 0 && i + 1 < argc)
      first = strtoull (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--seed") == 0 && i + 1 < argc)
      one = strtoull (argv[++i], NULL, 0), have_one = true;
    else if (strcmp (argv[i], "--seconds") == 0 && i + 1 < argc)
      seconds = strtod (argv[++i], NULL);
    else if (strcmp (argv[i], "--phases") == 0 && i + 1 < argc)
      phases = (unsigned) strtoul (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--clients") == 0 && i + 1 < argc)
      clients = (unsigned) strtoul (argv[++i], NULL, 0);
    else if (strcmp (argv[i], "--verbose") == 0)
      R.verbose = true;
    else {
      fprintf (stderr, "usage: sim [--seeds N] [--first S] [--seed S] [--seconds T] "
               "[--phases P] [--clients K] [--verbose]\n");
      return 2;
    }
  }
  if (clients < 1 || clients > MAX_CLIENTS) {
    fprintf (stderr, "sim: --clients 1 … %d\n", MAX_CLIENTS);
    return 2;
  }
  struct timespec t0, t1;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  uint64_t done = 0;
  for (uint64_t s = have_one ? one : first;; s++) {
    run_seed (s, phases, clients);
    done++;
    if (R.verbose)
      fprintf (stderr, "seed %" PRIu64 " ok\n", s);
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double el = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (have_one || (seconds > 0 ? el >= seconds : done >= nseeds))
      break;
  }
  printf ("sim: %" PRIu64 " seeds, %" PRIu64 " phases, %" PRIu64 " operations (%" PRIu64
          " reads checked), %" PRIu64 " scheduling steps, %" PRIu64 " power cuts (%" PRIu64
          " recoveries cut short), %" PRIu64 " reopens, %" PRIu64 " faults injected, %" PRIu64
          " silent corruptions (%" PRIu64 " reads refused for them), %" PRIu64
          " batches written through beside, %" PRIu64 " commits by the cleaner for data "
          "rewritten in place alone, %" PRIu64 " seeds promoting on the second touch, %"
          PRIu64 " with a flash budget (spent %" PRIu64 " times), %" PRIu64 " with every effect in "
          "force, %" PRIu64 " write misses sent around the cache, 0 violations\n", done,
          M.phases, M.ops, M.reads_checked, S.steps, M.cuts, M.recovery_cuts, M.reopens, M.faults,
          M.corruptions, M.corrupt_reads, M.beside, M.fast_syncs, M.touch_seeds, M.budget_seeds,
          M.budget_engaged, M.all_fx_seeds, M.around);
  return 0;
}
#endif /* SIM_FUZZ */
