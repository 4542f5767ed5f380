/* Many threads on one small volume at once, checking data, not only
 * survival.
 *
 * A volume of memory tiers (512 blocks of 4 KiB over a cache of about 130,
 * write-back to start with, the cleaner running) is hammered by T threads.
 * The volume's blocks are dealt out in groups of four: group g belongs to
 * thread g mod T, and only its owner writes, discards or zeroes it.  Every
 * 512-byte sector an owner writes says what it is (block, sector, owner and
 * the write's version, then bytes derived from them), so that:
 *
 *   - an owner knows every sector of its blocks exactly: each read of them
 *     must return its last acknowledged write (or zeros after a discard or
 *     zero) — "own";
 *   - any thread reading someone else's sector can tell whether it holds a
 *     version its owner did write there (or zeros) — "foreign".
 *
 * Each thread runs rounds.  A round starts with every thread at a barrier:
 * thread 0 evicts one block (the round's), then all of them read a
 * different part of that uncached block at the same moment (read misses of
 * one block, racing), each checked exactly — "collide".  Then each thread
 * does 64 operations drawn from its own seeded generator: reads of its own
 * blocks (any alignment) and of any blocks (sector-aligned, up to 16
 * blocks), writes of its blocks (whole groups, whole blocks, or sectors;
 * some FUA), flushes, discards and zeroes of its blocks, willneed,
 * dontneed, normal and evict advice over any range, mode switches, clean
 * and statistics.  Thread 0 ends the run at a barrier once the time (or
 * round count) is up, so each thread's sequence of operations depends only
 * on the seed; the time decides how much of it runs (a thread out of time
 * skips the rest of its round).  An operation that takes longer than the
 * stall limit is a failure ("stall"); when nothing ends for 30 s plus four
 * stall limits (no operation, nor a step of the checks below), a watchdog
 * says where each thread (or the main thread) is stuck and ends the test.
 *
 * Afterwards the whole volume is read and checked exactly, closed,
 * reopened and checked again, closed, and hc_volume_check must find it
 * clean.
 *
 *   test_volume_threads [--seed N] [--seconds S] [--rounds N] [--threads N]
 *                       [--stall S]
 *
 * Defaults: seed 1, 3 seconds, 4 threads, stall limit 5 s; --rounds N runs
 * exactly N rounds (no time limit).  Failures are counted per check and the
 * first few of each are described.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "test.h"

#define BS 4096u
#define SPB (BS / HC_SECTOR_SIZE) /* sectors per block */
#define GROUP 4u                  /* blocks per ownership group */
#define SLOW_BYTES ((512u * BS) + 4096u)
#define FAST_BYTES (832u << 10)
#define OPS_PER_ROUND 64
#define MAX_THREADS 16
#define MAX_READ_BLOCKS 16
#define MAGIC 0x48435453u /* "HCTS" */
#define UNKNOWN UINT32_MAX /* a sector whose write failed: not checked exactly */

/* Checks whose failures are counted. */
enum check { K_OWN, K_FOREIGN, K_COLLIDE, K_ERROR, K_STALL, K_COUNT };
static const char *const check_names[K_COUNT] = {
  [K_OWN] = "own (an owner's read differs from its last acknowledged write)",
  [K_FOREIGN] = "foreign (a sector holds no version its owner wrote there, nor zeros)",
  [K_COLLIDE] = "collide (racing reads of one uncached block differ from its data)",
  [K_ERROR] = "error (a call failed)",
  [K_STALL] = "stall (one call took longer than the stall limit)",
};

/* Operations, for statistics and the watchdog. */
enum op {
  OP_READ_OWN, OP_READ_ANY, OP_WRITE, OP_FLUSH, OP_DISCARD, OP_ZERO, OP_WILLNEED, OP_DONTNEED,
  OP_NORMAL, OP_EVICT, OP_MODE, OP_CLEAN, OP_STATS, OP_COLLIDE, OP_BARRIER, OP_IDLE, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
  "read-own", "read-any", "write", "flush", "discard", "zero", "willneed", "dontneed", "normal",
  "evict", "set-mode", "clean", "stats", "collide-read", "barrier", "idle",
};
/* Weights of the random operations (per 1000), in enum order. */
static const unsigned op_weight[OP_COLLIDE] = { 200, 250, 300, 40, 20, 20, 40,
                                                 30,  20,  30,  10, 10, 30 };

/* The run's parameters. */
static uint64_t seed = 1;
static double seconds = 3;
static unsigned long max_rounds; /* 0: until the time is up */
static unsigned nthreads = 4;
static double stall_s = 5;

static hc_volume *vol;
static uint64_t nblocks;      /* in the volume */
static pthread_barrier_t barrier;
static atomic_bool stop;
static atomic_uint finished;  /* threads that have returned */
static atomic_ulong progress; /* operations completed, for the watchdog */
static double t_start;

/* Published by owners: the version each sector's last acknowledged write
 * gave it (0: zeros; UNKNOWN: a write failed), and, per thread, the
 * highest version it has started writing. */
static _Atomic uint32_t *acked;
static _Atomic uint32_t issued[MAX_THREADS];

#define MAX_NOTES 3
struct thread {
  unsigned id;
  pthread_t tid;
  uint64_t rng;
  uint32_t version;      /* this thread's last write's version */
  uint32_t *model;       /* per sector of the volume: what an own sector holds */
  hc_stream *stream;
  uint64_t seq_next;     /* the sector its sequential reads go on from */
  uint8_t *buf;
  unsigned long fails[K_COUNT];
  char notes[K_COUNT][MAX_NOTES][256];
  unsigned long ops[OP_COUNT];
  double max_s[OP_COUNT];
  unsigned long rounds;
  _Atomic int op_now;      /* for the watchdog */
  _Atomic uint64_t op_since_ns;
};
static struct thread th[MAX_THREADS];

static uint64_t
now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t
mix (uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A number below n from the thread's generator. */
static uint64_t
rnd (struct thread *t, uint64_t n)
{
  t->rng ^= t->rng << 13, t->rng ^= t->rng >> 7, t->rng ^= t->rng << 17;
  return t->rng % n;
}

static unsigned
owner_of (uint64_t blk)
{
  return (unsigned) (blk / GROUP % nthreads);
}

static void
put32 (uint8_t *p, uint32_t x)
{
  memcpy (p, &x, 4);
}

static uint32_t
get32 (const uint8_t *p)
{
  uint32_t x;
  memcpy (&x, p, 4);
  return x;
}

/* The content of sector `sec` of block `blk` at version `ver` (0: zeros). */
static void
sector_fill (uint8_t *p, uint64_t blk, unsigned sec, uint32_t ver)
{
  if (ver == 0) {
    memset (p, 0, HC_SECTOR_SIZE);
    return;
  }
  put32 (p, MAGIC);
  put32 (p + 4, ver);
  put32 (p + 8, (uint32_t) blk);
  put32 (p + 12, sec);
  put32 (p + 16, owner_of (blk));
  put32 (p + 20, 0);
  uint64_t x = mix (blk * 8 + sec) ^ mix (ver) ^ 1;
  for (unsigned i = 24; i < HC_SECTOR_SIZE; i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    memcpy (p + i, &x, 8);
  }
}

/* Counts a failure of check k and keeps the first few descriptions. */
static void __attribute__ ((format (printf, 3, 4)))
fail (struct thread *t, enum check k, const char *fmt, ...)
{
  if (t->fails[k] < MAX_NOTES) {
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (t->notes[k][t->fails[k]], sizeof t->notes[k][0], fmt, ap);
    va_end (ap);
  }
  t->fails[k]++;
}

/* Describes what a sector holds, for a failure note. */
static void
describe (const uint8_t *p, char *out, size_t len)
{
  bool zero = true;
  for (unsigned i = 0; i < HC_SECTOR_SIZE && zero; i++)
    zero = p[i] == 0;
  if (zero)
    snprintf (out, len, "zeros");
  else if (get32 (p) != MAGIC)
    snprintf (out, len, "no header (%02x %02x %02x %02x …)", p[0], p[1], p[2], p[3]);
  else
    snprintf (out, len, "block %u sector %u version %u of thread %u", get32 (p + 8), get32 (p + 12),
              get32 (p + 4), get32 (p + 16));
}

/* Is p (a whole sector read at blk, sec) zeros or a version its owner wrote
 * there? */
static bool
sector_plausible (const uint8_t *p, uint64_t blk, unsigned sec, uint8_t *scratch)
{
  uint32_t ver = get32 (p + 4);
  bool zero = true;
  for (unsigned i = 0; i < HC_SECTOR_SIZE && zero; i++)
    zero = p[i] == 0;
  if (zero)
    return true;
  if (get32 (p) != MAGIC || get32 (p + 8) != (uint32_t) blk || get32 (p + 12) != sec
      || get32 (p + 16) != owner_of (blk) || ver == 0
      || ver > atomic_load_explicit (&issued[owner_of (blk)], memory_order_acquire))
    return false;
  sector_fill (scratch, blk, sec, ver);
  return memcmp (p, scratch, HC_SECTOR_SIZE) == 0;
}

/* Checks bytes [off, off+len) read into buf: exactly for the sectors the
 * model knows (exact: per volume sector, the version expected, UNKNOWN for
 * none), plausibly for the others (whole sectors only). */
static void
verify (struct thread *t, const uint8_t *buf, uint64_t off, size_t len,
        uint32_t (*expect) (struct thread *, uint64_t), enum check k, const char *what)
{
  uint8_t sector[HC_SECTOR_SIZE];
  char got[96];

  for (uint64_t s = off / HC_SECTOR_SIZE; s * HC_SECTOR_SIZE < off + len; s++) {
    uint64_t blk = s / SPB, so = s * HC_SECTOR_SIZE;
    unsigned sec = (unsigned) (s % SPB);
    uint64_t from = so < off ? off : so;
    uint64_t to = so + HC_SECTOR_SIZE > off + len ? off + len : so + HC_SECTOR_SIZE;
    const uint8_t *p = buf + (from - off);
    uint32_t ver = expect (t, s);
    if (ver != UNKNOWN) {
      sector_fill (sector, blk, sec, ver);
      if (memcmp (p, sector + (from - so), to - from) != 0) {
        if (from == so && to == so + HC_SECTOR_SIZE)
          describe (p, got, sizeof got);
        else
          snprintf (got, sizeof got, "other bytes");
        fail (t, k, "thread %u, %s: block %" PRIu64 " sector %u (bytes %" PRIu64 "-%" PRIu64
              "): want version %u, got %s", t->id, what, blk, sec, from - so, to - so, ver, got);
      }
    } else if (from == so && to == so + HC_SECTOR_SIZE
               && !sector_plausible (p, blk, sec, sector)) {
      describe (p, got, sizeof got);
      fail (t, K_FOREIGN, "thread %u, %s: block %" PRIu64 " (thread %u's) sector %u holds %s%s",
            t->id, what, blk, owner_of (blk), sec, got,
            get32 (p) == MAGIC && get32 (p + 8) == (uint32_t) blk && get32 (p + 12) == sec
                ? " but not that version's bytes (a torn sector, or a version not issued)" : "");
    }
  }
}

/* What sector s holds, as far as thread t knows it exactly: its own
 * sectors from its model, the others not at all. */
static uint32_t
expect_own (struct thread *t, uint64_t s)
{
  return owner_of (s / SPB) == t->id ? t->model[s] : UNKNOWN;
}

/* Every sector, from what the owners published (when no one writes). */
static uint32_t
expect_published (struct thread *t, uint64_t s)
{
  (void) t;
  return atomic_load_explicit (&acked[s], memory_order_acquire);
}

/* Sets the model and the published state of sectors [s0, s1) to ver. */
static void
model_set (struct thread *t, uint64_t s0, uint64_t s1, uint32_t ver)
{
  for (uint64_t s = s0; s < s1; s++) {
    t->model[s] = ver;
    atomic_store_explicit (&acked[s], ver, memory_order_release);
  }
}

/* A random own range: a group, or whole blocks of one, or sectors of one
 * block.  Returns the first sector and the count. */
static void
own_range (struct thread *t, uint64_t *s0, uint64_t *ns)
{
  uint64_t groups = nblocks / GROUP;
  uint64_t mine = (groups - t->id + nthreads - 1) / nthreads; /* groups g ≡ id (mod T) */
  uint64_t g = t->id + rnd (t, mine) * nthreads;
  uint64_t b = g * GROUP;
  switch (rnd (t, 3)) {
  case 0: /* the whole group */
    *s0 = b * SPB, *ns = GROUP * SPB;
    break;
  case 1: { /* whole blocks */
    uint64_t first = rnd (t, GROUP), n = 1 + rnd (t, GROUP - first);
    *s0 = (b + first) * SPB, *ns = n * SPB;
    break;
  }
  default: { /* sectors of one block */
    uint64_t blk = b + rnd (t, GROUP), first = rnd (t, SPB), n = 1 + rnd (t, SPB - first);
    *s0 = blk * SPB + first, *ns = n;
    break;
  }
  }
}

/* Starts and ends an operation: the watchdog's view and the statistics. */
static uint64_t
op_begin (struct thread *t, enum op op)
{
  uint64_t ns = now_ns ();
  atomic_store (&t->op_since_ns, ns);
  atomic_store (&t->op_now, (int) op);
  return ns;
}

static void
op_end (struct thread *t, enum op op, uint64_t began, int rc, bool enospc_ok)
{
  double s = (double) (now_ns () - began) / 1e9;
  t->ops[op]++;
  if (s > t->max_s[op])
    t->max_s[op] = s;
  if (op != OP_BARRIER && s > stall_s)
    fail (t, K_STALL, "thread %u: %s took %.1f s", t->id, op_names[op], s);
  if (rc < 0 && !(enospc_ok && rc == -ENOSPC))
    fail (t, K_ERROR, "thread %u: %s: %s", t->id, op_names[op], strerror (-rc));
  atomic_store (&t->op_now, (int) OP_IDLE);
  atomic_fetch_add (&progress, 1);
}

static void
wait_barrier (struct thread *t)
{
  uint64_t b = op_begin (t, OP_BARRIER);
  pthread_barrier_wait (&barrier);
  op_end (t, OP_BARRIER, b, 0, false);
}

/* One random operation. */
static void
random_op (struct thread *t)
{
  const uint64_t vsize = nblocks * BS;
  unsigned r = (unsigned) rnd (t, 1000), op = 0;
  while (r >= op_weight[op])
    r -= op_weight[op++];
  static const unsigned classes[] = { HC_CLASS_UNCLASSIFIED, HC_CLASS_DATA, HC_CLASS_METADATA,
                                      HC_CLASS_TRANSACTION };
  struct hc_ioctx ctx = { .stream = rnd (t, 2) ? t->stream : NULL };
  ctx.hint.cls = (uint8_t) classes[rnd (t, 4)];
  uint64_t s0, ns, off, len, b;
  int rc = 0;

  switch ((enum op) op) {
  case OP_READ_OWN: { /* any alignment inside an own range */
    own_range (t, &s0, &ns);
    off = s0 * HC_SECTOR_SIZE + rnd (t, HC_SECTOR_SIZE);
    len = 1 + rnd (t, (s0 + ns) * HC_SECTOR_SIZE - off);
    b = op_begin (t, OP_READ_OWN);
    rc = hc_volume_read (vol, t->buf, len, off, &ctx);
    op_end (t, OP_READ_OWN, b, rc, false);
    if (rc == 0)
      verify (t, t->buf, off, len, expect_own, K_OWN, "read-own");
    break;
  }
  case OP_READ_ANY: { /* whole sectors anywhere, up to 16 blocks */
    uint64_t first = rnd (t, nblocks * SPB);
    ns = 1 + rnd (t, rnd (t, 4) ? SPB * 2 : MAX_READ_BLOCKS * SPB);
    if (rnd (t, 3) == 0) {
      /* Whole blocks on from its last such read: a sequential run, past
       * the cutoff and into a readahead window, its own or a shared one. */
      first = t->seq_next < nblocks * SPB ? t->seq_next : 0;
      ns = (1 + rnd (t, MAX_READ_BLOCKS)) * SPB;
    }
    if (first + ns > nblocks * SPB)
      ns = nblocks * SPB - first;
    if (rnd (t, 2))
      first -= first % SPB; /* block-aligned: whole-block hits go by runs */
    t->seq_next = first + ns;
    off = first * HC_SECTOR_SIZE;
    len = ns * HC_SECTOR_SIZE;
    if (off + len > vsize)
      len = vsize - off;
    b = op_begin (t, OP_READ_ANY);
    rc = hc_volume_read (vol, t->buf, len, off, &ctx);
    op_end (t, OP_READ_ANY, b, rc, false);
    if (rc == 0)
      verify (t, t->buf, off, len, expect_own, K_OWN, "read-any");
    break;
  }
  case OP_WRITE: {
    own_range (t, &s0, &ns);
    uint32_t ver = ++t->version;
    for (uint64_t s = 0; s < ns; s++)
      sector_fill (t->buf + s * HC_SECTOR_SIZE, (s0 + s) / SPB, (unsigned) ((s0 + s) % SPB), ver);
    atomic_store_explicit (&issued[t->id], ver, memory_order_release);
    unsigned flags = rnd (t, 8) == 0 ? HC_VOL_FUA : 0;
    b = op_begin (t, OP_WRITE);
    rc = hc_volume_write (vol, t->buf, ns * HC_SECTOR_SIZE, s0 * HC_SECTOR_SIZE, flags, &ctx);
    op_end (t, OP_WRITE, b, rc, false);
    model_set (t, s0, s0 + ns, rc == 0 ? ver : UNKNOWN);
    break;
  }
  case OP_FLUSH:
    b = op_begin (t, OP_FLUSH);
    rc = hc_volume_flush (vol);
    op_end (t, OP_FLUSH, b, rc, false);
    break;
  case OP_DISCARD:
  case OP_ZERO:
    own_range (t, &s0, &ns);
    b = op_begin (t, (enum op) op);
    if (op == OP_DISCARD)
      rc = hc_volume_discard (vol, s0 * HC_SECTOR_SIZE, ns * HC_SECTOR_SIZE, &ctx);
    else
      rc = hc_volume_zero (vol, s0 * HC_SECTOR_SIZE, ns * HC_SECTOR_SIZE,
                           rnd (t, 4) == 0 ? HC_VOL_FUA : 0, &ctx);
    op_end (t, (enum op) op, b, rc, false);
    model_set (t, s0, s0 + ns, rc == 0 ? 0 : UNKNOWN);
    break;
  case OP_WILLNEED:
  case OP_DONTNEED:
  case OP_NORMAL:
  case OP_EVICT: { /* any range: advice never changes data */
    static const uint8_t advice[] = { [OP_WILLNEED] = HC_ADVICE_WILLNEED,
                                      [OP_DONTNEED] = HC_ADVICE_DONTNEED,
                                      [OP_NORMAL] = HC_ADVICE_NORMAL,
                                      [OP_EVICT] = HC_ADVICE_EVICT };
    uint64_t first = rnd (t, nblocks), n = 1 + rnd (t, 2 * GROUP);
    if (first + n > nblocks)
      n = nblocks - first;
    b = op_begin (t, (enum op) op);
    rc = hc_volume_advise (vol, first * BS, n * BS, (struct hc_hint) { .advice = advice[op] });
    op_end (t, (enum op) op, b, rc, true);
    break;
  }
  case OP_MODE:
    b = op_begin (t, OP_MODE);
    rc = hc_volume_set_mode (vol, (enum hc_mode) rnd (t, HC_MODE_COUNT));
    op_end (t, OP_MODE, b, rc, false);
    break;
  case OP_CLEAN:
    b = op_begin (t, OP_CLEAN);
    rc = hc_volume_clean (vol);
    op_end (t, OP_CLEAN, b, rc, false);
    break;
  case OP_STATS: {
    struct hc_stats st;
    struct hc_volume_info in;
    b = op_begin (t, OP_STATS);
    rc = hc_volume_stats (vol, &st);
    hc_volume_get_info (vol, &in); /* `hintcache info` beside advice that grows the range table */
    op_end (t, OP_STATS, b, rc, false);
    break;
  }
  default:
    break;
  }
}

/* The round's block, the same for every thread. */
static uint64_t
round_block (unsigned long round)
{
  return mix (seed ^ (round * 0x2545f4914f6cdd1dull)) % nblocks;
}

static void *
worker_main (void *arg)
{
  struct thread *t = arg;

  for (unsigned long round = 0;; round++) {
    uint64_t blk = round_block (round);
    /* Thread 0 decides whether to go on, and evicts the round's block. */
    wait_barrier (t);
    if (t->id == 0) {
      if ((max_rounds && round >= max_rounds) || (!max_rounds && test_now () - t_start >= seconds))
        atomic_store (&stop, true);
      else {
        uint64_t b = op_begin (t, OP_EVICT);
        struct hc_hint evict = { .advice = HC_ADVICE_EVICT };
        int rc = hc_volume_advise (vol, blk * BS, BS, evict);
        op_end (t, OP_EVICT, b, rc, false);
      }
    }
    wait_barrier (t);
    if (atomic_load (&stop))
      break;
    /* Everyone reads its own part of the (now uncached) block at once:
     * a sector, or some bytes inside one. */
    unsigned sec = (unsigned) ((t->id + round) % SPB);
    uint64_t off = blk * BS + sec * HC_SECTOR_SIZE, len = HC_SECTOR_SIZE;
    if (round % 2) {
      off += 1 + t->id;
      len = 200;
    }
    uint64_t b = op_begin (t, OP_COLLIDE);
    int rc = hc_volume_read (vol, t->buf, len, off, NULL);
    op_end (t, OP_COLLIDE, b, rc, false);
    if (rc == 0)
      verify (t, t->buf, off, len, expect_published, K_COLLIDE, "collide-read");
    wait_barrier (t); /* nobody writes the block before everyone has read it */
    /* (A run that is out of time skips the rest of its round, so that a
     * stalled volume still ends within a stall or so of its time.) */
    for (unsigned i = 0; i < OPS_PER_ROUND && (max_rounds || test_now () - t_start < seconds); i++)
      random_op (t);
    t->rounds++;
  }
  atomic_fetch_add (&finished, 1);
  return NULL;
}

/* Reads the whole volume and checks every sector against what its owner
 * published (no thread runs). */
static unsigned long
verify_all (hc_volume *v, const char *what)
{
  struct thread *t = &th[0];
  unsigned long before = t->fails[K_OWN] + t->fails[K_FOREIGN];
  uint8_t *all = malloc (nblocks * BS);

  if (!all) {
    CHECK (0, "%s: out of memory", what);
    return 0;
  }
  int rc = hc_volume_read (v, all, nblocks * BS, 0, NULL);
  CHECK (rc == 0, "%s: read all: %s", what, strerror (-rc));
  if (rc == 0)
    verify (t, all, 0, nblocks * BS, expect_published, K_OWN, what);
  free (all);
  return t->fails[K_OWN] + t->fails[K_FOREIGN] - before;
}

/* What the main thread is doing after the workers (NULL: waiting for
 * them), for the watchdog. */
static _Atomic (const char *) phase;

/* Marks the end of one of the main thread's steps and names the next. */
static void
step (const char *next)
{
  atomic_store (&phase, next);
  atomic_fetch_add (&progress, 1);
}

/* The watchdog: a run in which no operation (nor a step of the checks
 * after it) has ended for a long while is stuck.  It says where, and ends
 * the process: the volume cannot be closed under threads stuck in it. */
static void *
watchdog_main (void *arg)
{
  const double hang_s = 30 + 4 * stall_s;
  unsigned long seen = atomic_load (&progress);
  double seen_at = test_now ();

  (void) arg;
  for (;;) {
    usleep (50000);
    if (atomic_load (&progress) != seen) {
      seen = atomic_load (&progress);
      seen_at = test_now ();
      continue;
    }
    if (test_now () - seen_at <= hang_s)
      continue;
    const char *what = atomic_load (&phase);
    fprintf (stderr, "test_volume_threads: check failed: stall: nothing has ended for %.0f s, "
             "%s%s:\n", hang_s, what ? "the main thread " : "", what ? what : "in the run");
    for (unsigned i = 0; i < nthreads; i++) {
      int op = atomic_load (&th[i].op_now);
      double in = (double) (now_ns () - atomic_load (&th[i].op_since_ns)) / 1e9;
      if (atomic_load (&finished) < nthreads)
        fprintf (stderr, "  thread %u: %s for %.1f s\n", i, op_names[op], in);
    }
    fflush (stderr);
    _exit (1);
  }
  return NULL;
}

/* Prints the notes of verify_all's failures (kept in thread 0's slots). */
static void
print_notes (const struct thread *t)
{
  for (unsigned k = K_OWN; k <= K_FOREIGN; k++)
    for (unsigned j = 0; j < MAX_NOTES && j < t->fails[k]; j++)
      fprintf (stderr, "    %s\n", t->notes[k][j]);
}

static int
usage (const char *prog)
{
  fprintf (stderr, "usage: %s [--seed N] [--seconds S] [--rounds N] [--threads N] [--stall S]\n",
           prog);
  return 2;
}

int
main (int argc, char **argv)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .max_ranges = 4096 };
  struct hc_open_opts oo = { .seq_cutoff = 16 * BS }; /* runs read ahead soon */
  char why[256];
  int rc;

  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (i + 1 >= argc)
      return usage (argv[0]);
    const char *val = argv[++i];
    errno = 0;
    if (strcmp (argv[i - 1], "--seed") == 0)
      seed = strtoull (val, &end, 0);
    else if (strcmp (argv[i - 1], "--seconds") == 0)
      seconds = strtod (val, &end);
    else if (strcmp (argv[i - 1], "--rounds") == 0)
      max_rounds = strtoul (val, &end, 0);
    else if (strcmp (argv[i - 1], "--threads") == 0)
      nthreads = (unsigned) strtoul (val, &end, 0);
    else if (strcmp (argv[i - 1], "--stall") == 0)
      stall_s = strtod (val, &end);
    else
      return usage (argv[0]);
    if (errno || !end || *end || end == val)
      return usage (argv[0]);
  }
  if (nthreads < 2 || nthreads > MAX_THREADS || seconds <= 0 || stall_s <= 0) {
    fprintf (stderr, "%s: 2 to %d threads, positive seconds and stall limit\n", argv[0],
             MAX_THREADS);
    return 2;
  }

  if (hc_tier_new_memory (FAST_BYTES, &fast) < 0 || hc_tier_new_memory (SLOW_BYTES, &slow) < 0) {
    fprintf (stderr, "test_volume_threads: no memory for the tiers\n");
    return 1;
  }
  rc = hc_volume_format (fast, slow, &fo, why, sizeof why);
  CHECK (rc == 0, "format: %s", why);
  rc = rc ? rc : hc_volume_open (fast, slow, &oo, &vol, why, sizeof why);
  CHECK (rc == 0, "open: %s", why);
  if (rc < 0)
    return test_exit ("test_volume_threads");
  struct hc_volume_info info;
  hc_volume_get_info (vol, &info);
  nblocks = hc_volume_size (vol) / BS;
  printf ("test_volume_threads: seed %" PRIu64 ", %u threads, %s %g, stall limit %g s; "
          "%" PRIu64 " blocks over %u cached\n", seed, nthreads, max_rounds ? "rounds" : "seconds",
          max_rounds ? (double) max_rounds : seconds, stall_s, nblocks, info.nblocks);
  fflush (stdout);

  acked = calloc (nblocks * SPB, sizeof *acked);
  pthread_barrier_init (&barrier, NULL, nthreads);
  t_start = test_now ();
  for (unsigned i = 0; i < nthreads; i++) {
    struct thread *t = &th[i];
    t->id = i;
    t->rng = (mix (seed) ^ mix (i + 1)) | 1;
    t->model = calloc (nblocks * SPB, sizeof *t->model);
    t->buf = aligned_alloc (4096, MAX_READ_BLOCKS * BS);
    atomic_store (&t->op_now, (int) OP_IDLE);
    if (!acked || !t->model || !t->buf
        || hc_stream_new (vol, (struct hc_hint) { 0 }, &t->stream) < 0) {
      fprintf (stderr, "test_volume_threads: out of memory\n");
      return 1;
    }
  }
  pthread_t watchdog;
  for (unsigned i = 0; i < nthreads; i++)
    if (pthread_create (&th[i].tid, NULL, worker_main, &th[i]) != 0) {
      fprintf (stderr, "test_volume_threads: pthread_create failed\n");
      return 1;
    }
  if (pthread_create (&watchdog, NULL, watchdog_main, NULL) != 0) {
    fprintf (stderr, "test_volume_threads: pthread_create failed\n");
    return 1;
  }

  for (unsigned i = 0; i < nthreads; i++)
    pthread_join (th[i].tid, NULL);
  double ran = test_now () - t_start;

  /* What happened, and what failed. */
  unsigned long rounds = th[0].rounds, total[OP_COUNT] = { 0 };
  double maxs[OP_COUNT] = { 0 };
  for (unsigned i = 0; i < nthreads; i++)
    for (unsigned op = 0; op < OP_COUNT; op++) {
      total[op] += th[i].ops[op];
      if (th[i].max_s[op] > maxs[op])
        maxs[op] = th[i].max_s[op];
    }
  printf ("test_volume_threads: %lu rounds in %.1f s; operations (slowest):", rounds, ran);
  for (unsigned op = 0; op < OP_BARRIER; op++)
    printf ("%s %s %lu (%.3f s)", op ? "," : "", op_names[op], total[op], maxs[op]);
  printf ("\n");
  for (unsigned k = 0; k < K_COUNT; k++) {
    unsigned long n = 0;
    for (unsigned i = 0; i < nthreads; i++)
      n += th[i].fails[k];
    CHECK (n == 0, "%s: %lu times", check_names[k], n);
    for (unsigned i = 0, shown = 0; i < nthreads && n; i++)
      for (unsigned j = 0; j < MAX_NOTES && j < th[i].fails[k] && shown < 6; j++, shown++)
        fprintf (stderr, "    %s\n", th[i].notes[k][j]);
  }

  /* Everything, with every thread stopped: each sector exactly. */
  fflush (stdout);
  step ("reading the whole volume");
  memset (th[0].fails, 0, sizeof th[0].fails);
  memset (th[0].notes, 0, sizeof th[0].notes);
  unsigned long bad = verify_all (vol, "after the threads");
  CHECK (bad == 0, "after the threads: %lu sectors differ from their last write", bad);
  print_notes (&th[0]);
  for (unsigned i = 0; i < nthreads; i++)
    hc_stream_free (th[i].stream);
  step ("closing the volume");
  rc = hc_volume_close (vol);
  CHECK (rc == 0, "close: %s", strerror (-rc));

  /* Reopened: the same data. */
  oo.no_cleaner = true;
  step ("reopening the volume");
  rc = hc_volume_open (fast, slow, &oo, &vol, why, sizeof why);
  CHECK (rc == 0, "reopen: %s", why);
  if (rc == 0) {
    memset (th[0].fails, 0, sizeof th[0].fails);
    memset (th[0].notes, 0, sizeof th[0].notes);
    step ("reading the reopened volume");
    bad = verify_all (vol, "reopened");
    CHECK (bad == 0, "reopened: %lu sectors differ from their last write", bad);
    print_notes (&th[0]);
    step ("closing the reopened volume");
    rc = hc_volume_close (vol);
    CHECK (rc == 0, "close after reopening: %s", strerror (-rc));
  }
  step ("checking the volume");
  rc = hc_volume_check (fast, slow, why, sizeof why);
  CHECK (rc == 0, "hc_volume_check: %s", why);
  step ("finishing");

  for (unsigned i = 0; i < nthreads; i++) {
    free (th[i].model);
    free (th[i].buf);
  }
  free (acked);
  pthread_barrier_destroy (&barrier);
  hc_tier_close (fast);
  hc_tier_close (slow);
  return test_exit ("test_volume_threads");
}
