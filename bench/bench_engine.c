/* Engine benchmark: prints, in one run, each figure next to a reference
 * measured in the same run.
 *
 *   1. 4 KiB random read hits through the volume vs raw pread of the same
 *      fast file (goal: ≥ 0.9×), by one thread and by two at once;
 *   2. 4 KiB random writes in write-back mode vs raw pwrite of the fast file;
 *   3. 4 KiB random read misses (fill) vs raw pread of the slow file; 1 MiB
 *      write-through writes, declined writes and reads (the slow tier's
 *      alone), read misses and hits; 256 KiB read misses on
 *      tiers that sleep like devices, fills as the trials choose vs always
 *      on the reader's thread;
 *   4. RAM for mapping and policy state per cached block, at 1 M and 16 M
 *      blocks, for every policy (goal: ≤ 24 bytes);
 *   5. reopen time after a crash with 1 M cached blocks (goal: < 1 s);
 *   6. the fast tier's bytes written for metadata beside those for data.
 *
 * Files live in /dev/shm when it exists (tmpfs: the page cache cannot be
 * evicted under the measurement, so both sides see the same medium), else
 * in $TMPDIR.  Usage: bench_engine [--quick]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "cache/dir.h"
#include "engine/vol.h"
#include "hook.h"

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rs = 88172645463325252ull;
static inline uint64_t
rnd (void)
{
  rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
  return rs;
}

static char dir[256];

static const char *
path (const char *name)
{
  static char p[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf (p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}

static void
make_file (const char *p, uint64_t size)
{
  int fd = open (p, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) size) < 0) {
    perror (p);
    exit (1);
  }
  close (fd);
}

/* Writes data all over a file: reading a sparse tmpfs file's holes costs
 * nothing, which would flatter the raw side of a miss. */
static void
fill_file (const char *p, uint64_t size)
{
  int fd = open (p, O_WRONLY);
  uint8_t *b = malloc (1 << 20);
  if (fd < 0 || !b) {
    perror (p);
    exit (1);
  }
  for (uint64_t off = 0; off < size; off += 1 << 20) {
    size_t n = size - off < (1u << 20) ? (size_t) (size - off) : 1u << 20;
    memset (b, (int) (off >> 20) | 1, n);
    if (pwrite (fd, b, n, (off_t) off) != (ssize_t) n) {
      perror (p);
      exit (1);
    }
  }
  free (b);
  close (fd);
}

static hc_tier *
open_tier (const char *p)
{
  hc_tier *t;
  int rc = hc_tier_open_file (p, 0, &t);
  if (rc < 0) {
    fprintf (stderr, "%s: %s\n", p, strerror (-rc));
    exit (1);
  }
  return t;
}

static hc_volume *
open_volume (hc_tier *fast, hc_tier *slow, bool cleaner)
{
  struct hc_open_opts o = { .no_cleaner = !cleaner, .seq_cutoff = UINT64_MAX };
  char why[256];
  hc_volume *v;
  if (hc_volume_open (fast, slow, &o, &v, why, sizeof why) < 0) {
    fprintf (stderr, "open: %s\n", why);
    exit (1);
  }
  return v;
}

/* Formats over whatever the benchmark left on the fast tier. */
static void
format (hc_tier *fast, hc_tier *slow, enum hc_mode mode, bool checksums)
{
  struct hc_format_opts fo = { .mode = mode, .over = HC_FORMAT_DISCARD, .checksums = checksums };
  char why[256];
  if (hc_volume_format (fast, slow, &fo, why, sizeof why) < 0) {
    fprintf (stderr, "format: %s\n", why);
    exit (1);
  }
}

/* A device's waits, for the tiers behind hook.h's decorator: the slow
 * tier's reads (arg set) and the fast tier's large writes sleep for their
 * transfer time. */
static int
device_wait (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) off, (void) rc;
  if (!after && arg && (op == HOOK_READ || op == HOOK_WRITE))
    usleep ((useconds_t) (len / 512));
  else if (!after && !arg && op == HOOK_WRITE && len >= 65536)
    usleep ((useconds_t) (len / 1024));
  return 0;
}

/* Reads (write: writes) blocks [hot, 2 hot) in requests of `per` blocks,
 * `passes` times over, on freshly formatted write-through volumes over
 * wfast and wslow: way 0 with the request's trial (fills, or slow writes)
 * forced to its plain way, way 1 as the trials choose; best of two turns
 * of each, in bytes per second, into way[].  Returns what the trials of
 * the last way-1 volume chose. */
static bool
trial_ways (hc_tier *wfast, hc_tier *wslow, bool write, uint64_t hot, uint64_t per, int passes,
            double way[2], void *buf)
{
  bool chose = false;

  way[0] = way[1] = 0;
  for (int turn = 0; turn < 2; turn++)
    for (int w = 0; w < 2; w++) {
      format (wfast, wslow, HC_MODE_WRITETHROUGH, false);
      hc_volume *v = open_volume (wfast, wslow, true);
      struct hc_trial *t = write ? &v->write_way : hc_fill_trial (v, (unsigned) per);
      t->force = w == 0 ? 1 : 0;
      double t0 = now ();
      for (int pass = 0; pass < passes; pass++)
        for (uint64_t b = 0; b < hot; b += per)
          if (write)
            hc_volume_write (v, buf, per * 4096, (hot + b) * 4096, 0, NULL);
          else
            hc_volume_read (v, buf, per * 4096, (hot + b) * 4096, NULL);
      double r = passes * (double) hot * 4096 / (now () - t0);
      way[w] = r > way[w] ? r : way[w];
      if (w == 1)
        chose = t->alt;
      hc_volume_close (v);
    }
  return chose;
}

#define BIG 256 /* blocks of a large request: 1 MiB */

/* Reads (write: writes) blocks [first, first+n) in requests of BIG blocks,
 * through the volume v with ctx, or else on file descriptor fd (then
 * block numbers are the file's, and a write pass ends with fdatasync; a
 * volume's write pass with a flush); raises *best to the requests per
 * second if higher. */
static void
big_pass (hc_volume *v, int fd, bool write, uint64_t first, uint64_t n,
          const struct hc_ioctx *ctx, void *buf, double *best)
{
  const size_t len = BIG * 4096;
  double t0 = now ();

  for (uint64_t b = first; b < first + n; b += BIG) {
    if (v && write)
      hc_volume_write (v, buf, len, b * 4096, 0, ctx);
    else if (v)
      hc_volume_read (v, buf, len, b * 4096, ctx);
    else if ((write ? pwrite (fd, buf, len, (off_t) (b * 4096))
                    : pread (fd, buf, len, (off_t) (b * 4096))) != (ssize_t) len)
      abort ();
  }
  if (write)
    v ? hc_volume_flush (v) : fdatasync (fd);
  double r = (double) n / BIG / (now () - t0);
  *best = r > *best ? r : *best;
}

/* Runs fn n times; returns operations per second (best of 3). */
static double
rate (void (*fn) (void *, uint64_t), void *arg, uint64_t n)
{
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = now ();
    for (uint64_t i = 0; i < n; i++)
      fn (arg, i);
    double r = n / (now () - t0);
    if (r > best)
      best = r;
  }
  return best;
}

struct ctx {
  hc_volume *v;
  int fd;
  uint64_t base, blocks;
  uint8_t *buf;
};

static void
vol_read (void *a, uint64_t i)
{
  struct ctx *c = a;
  (void) i;
  hc_volume_read (c->v, c->buf, 4096, (rnd () % c->blocks) * 4096, NULL);
}

static void
raw_read (void *a, uint64_t i)
{
  struct ctx *c = a;
  (void) i;
  if (pread (c->fd, c->buf, 4096, (off_t) (c->base + (rnd () % c->blocks) * 4096)) != 4096)
    abort ();
}

/* Two threads reading hits (or the raw file) at once, as an NBD server's
 * workers do: the volume's shared state (its lock, its counters) is what
 * one thread alone never waits for.  Each thread draws its own blocks. */
struct duo {
  struct ctx *c;
  bool raw;
  uint64_t n, seed;
};

static void *
duo_main (void *arg)
{
  struct duo *d = arg;
  uint8_t *b = aligned_alloc (4096, 4096);
  uint64_t x = d->seed;
  for (uint64_t i = 0; i < d->n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t blk = x % d->c->blocks;
    if (!d->raw)
      hc_volume_read (d->c->v, b, 4096, blk * 4096, NULL);
    else if (pread (d->c->fd, b, 4096, (off_t) (d->c->base + blk * 4096)) != 4096)
      abort ();
  }
  free (b);
  return NULL;
}

/* Reads per second of two threads, n each (best of 3). */
static double
duo_rate (struct ctx *c, bool raw, uint64_t n)
{
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    struct duo d[2] = { { c, raw, n, rnd () | 1 }, { c, raw, n, rnd () | 1 } };
    pthread_t t[2];
    double t0 = now ();
    for (int i = 0; i < 2; i++)
      if (pthread_create (&t[i], NULL, duo_main, &d[i]) != 0)
        abort ();
    for (int i = 0; i < 2; i++)
      pthread_join (t[i], NULL);
    double r = 2 * n / (now () - t0);
    best = r > best ? r : best;
  }
  return best;
}

static void
vol_write (void *a, uint64_t i)
{
  struct ctx *c = a;
  c->buf[0] = (uint8_t) i;
  hc_volume_write (c->v, c->buf, 4096, (rnd () % c->blocks) * 4096, 0, NULL);
}

static void
raw_write (void *a, uint64_t i)
{
  struct ctx *c = a;
  c->buf[0] = (uint8_t) i;
  if (pwrite (c->fd, c->buf, 4096, (off_t) (c->base + (rnd () % c->blocks) * 4096)) != 4096)
    abort ();
}

static void
vol_miss (void *a, uint64_t i)
{
  struct ctx *c = a;
  hc_volume_read (c->v, c->buf, 4096, (c->base + i) * 4096, NULL);
}

static void
raw_miss (void *a, uint64_t i)
{
  struct ctx *c = a;
  if (pread (c->fd, c->buf, 4096, (off_t) ((c->base + i) * 4096)) != 4096)
    abort ();
}

static bool always (void *arg, uint32_t c) { (void) arg, (void) c; return true; }

/* RAM per block of a full directory of n blocks under policy p. */
static double
ram_per_block (uint32_t n, unsigned p)
{
  struct hc_directory d;
  if (hc_dir_init (&d, n, p, NULL, false) < 0)
    return -1;
  for (uint32_t c = 0; c < n; c++) {
    struct hc_access a = { .origin = (uint64_t) c * 7 + 3 };
    enum hc_bypass why;
    hc_dir_make_room (&d, &a, always, NULL, &why, NULL);
    hc_dir_install (&d, hc_dir_take_free (&d), &a, false);
  }
  /* + the pin count the volume keeps per block (hc_volume_get_info's ram_bytes) */
  double r = (double) (hc_dir_bytes (&d) + (uint64_t) n * sizeof *((hc_volume *) 0)->pins) / n;
  hc_dir_fini (&d);
  return r;
}

/* Bytes and writes to the fast tier, below its data area (metadata) and
 * in it (data), for meta_share. */
static uint64_t data_start, meta_bytes, meta_pages, meta_writes, data_bytes;

static int
count_writes (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) arg, (void) rc;
  if (!after && op == HOOK_WRITE) {
    if (off >= data_start)
      data_bytes += len;
    else
      meta_bytes += len, meta_pages += (len + 4095) / 4096, meta_writes++;
  }
  return 0;
}

/* n operations on a volume in RAM of 16,384 cache blocks: in write-back, 4
 * KiB random writes over four times the cache (half of them to an eighth
 * of it), a flush every flush_every (as a database commits); written
 * through, 4 KiB random reads over the same (misses filled).  Prints the
 * fast tier's bytes written for metadata against those for data, also
 * with each metadata write rounded up to whole 4 KiB pages (flash programs
 * a page at a time, so a 512-byte journal write wears it as 4 KiB). */
static void
meta_share (enum hc_mode mode, int flush_every, uint64_t n, uint8_t *buf)
{
  const uint64_t cache = 16384, span = 4 * cache;
  hc_tier *mf, *ms, *hf;
  if (hc_tier_new_memory ((cache + 1024) * 4096 + (64u << 20), &mf) < 0
      || hc_tier_new_memory (span * 4096, &ms) < 0)
    abort ();
  if (hook_new (mf, count_writes, NULL, &hf) < 0)
    abort ();
  format (hf, ms, mode, false);
  hc_volume *v = open_volume (hf, ms, true);
  struct hc_volume_info info;
  hc_volume_get_info (v, &info);
  data_start = info.data_off;
  meta_bytes = meta_pages = meta_writes = data_bytes = 0;
  for (uint64_t i = 1; i <= n; i++) {
    uint64_t b = rnd () % span;
    if (rnd () & 1)
      b %= span / 8;
    if (mode == HC_MODE_WRITEBACK)
      hc_volume_write (v, buf, 4096, b * 4096, 0, NULL);
    else
      hc_volume_read (v, buf, 4096, b * 4096, NULL);
    if (flush_every && i % (uint64_t) flush_every == 0)
      hc_volume_flush (v);
  }
  hc_volume_flush (v);
  hc_volume_close (v);
  printf ("  %-13s %-18s data %7.1f MB   metadata %5.2f MB in %6llu writes: %.2f %% of the "
          "bytes, %.1f %% in 4 KiB flash pages\n",
          mode == HC_MODE_WRITEBACK ? "write-back" : "write-through",
          mode != HC_MODE_WRITEBACK ? "reads (fills)" : flush_every == 10 ? "flush every 10"
                                                                       : "flush every 1,000",
          data_bytes / 1e6, meta_bytes / 1e6, (unsigned long long) meta_writes,
          100.0 * (double) meta_bytes / (double) (data_bytes + meta_bytes),
          100.0 * (double) (meta_pages * 4096) / (double) (data_bytes + meta_pages * 4096));
  hc_tier_close (hf);
  hc_tier_close (mf);
  hc_tier_close (ms);
}

int
main (int argc, char **argv)
{
  bool quick = argc > 1 && strcmp (argv[1], "--quick") == 0;
  const uint64_t hot = quick ? 16384 : 65536; /* cached working set, blocks */
  const uint64_t nops = quick ? 200000 : 1000000;
  uint8_t *buf = aligned_alloc (4096, 1 << 20);

  snprintf (dir, sizeof dir, "%s/hcbench.XXXXXX", access ("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                   : getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
  if (!mkdtemp (dir)) {
    perror ("mkdtemp");
    return 1;
  }
  printf ("hintcache engine benchmark (files in %s)\n\n", dir);

  /* ---- 1 and 2: hits and write-back writes. ---- */
  make_file (path ("fast"), (hot + 1024) * 4096 + (64u << 20));
  make_file (path ("slow"), 4 * hot * 4096);
  fill_file (path ("slow"), 4 * hot * 4096);
  hc_tier *fast = open_tier (path ("fast")), *slow = open_tier (path ("slow"));
  format (fast, slow, HC_MODE_WRITEBACK, false);
  hc_volume *v = open_volume (fast, slow, true);
  for (uint64_t b = 0; b < hot; b += 256)
    hc_volume_read (v, buf, 256 * 4096, b * 4096, NULL); /* fill */
  struct hc_volume_info info;
  hc_volume_get_info (v, &info);
  struct ctx c = { v, open (path ("fast"), O_RDWR), info.data_off, hot, buf };
  double hit = rate (vol_read, &c, nops), raw = rate (raw_read, &c, nops);
  printf ("4 KiB random read hits   %10.0f IOPS   raw pread of the fast file %10.0f IOPS   "
          "ratio %.2f (goal >= 0.90)\n", hit, raw, hit / raw);
  double hit2 = duo_rate (&c, false, nops), raw2 = duo_rate (&c, true, nops);
  printf ("  ... two threads        %10.0f IOPS   raw pread, two threads    %10.0f IOPS   "
          "ratio %.2f\n", hit2, raw2, hit2 / raw2);
  double wb = rate (vol_write, &c, nops / 4), rawb = rate (raw_write, &c, nops / 4);
  printf ("4 KiB random writes (wb) %10.0f IOPS   raw pwrite of the fast file %9.0f IOPS   "
          "ratio %.2f\n", wb, rawb, wb / rawb);
  close (c.fd);
  hc_volume_close (v);

  /* ---- The same hits with data checksums (each read verified): two
   * volumes side by side, measured in turns (the best of each). ---- */
  make_file (path ("fast2"), (hot + 1024) * 4096 + (64u << 20));
  hc_tier *fast2 = open_tier (path ("fast2"));
  format (fast, slow, HC_MODE_WRITEBACK, false);
  format (fast2, slow, HC_MODE_WRITEBACK, true);
  hc_volume *pv = open_volume (fast, slow, true), *sv = open_volume (fast2, slow, true);
  for (uint64_t b = 0; b < hot; b += 256) {
    hc_volume_read (pv, buf, 256 * 4096, b * 4096, NULL);
    hc_volume_read (sv, buf, 256 * 4096, b * 4096, NULL);
  }
  struct ctx pc = { pv, -1, 0, hot, buf }, sc = { sv, -1, 0, hot, buf };
  double plain = 0, sums = 0;
  for (int turn = 0; turn < 3; turn++) {
    double p = rate (vol_read, &pc, nops), q = rate (vol_read, &sc, nops);
    plain = p > plain ? p : plain;
    sums = q > sums ? q : sums;
  }
  printf ("4 KiB read hits, checksums %6.0f IOPS   without, in turns %13.0f IOPS   "
          "ratio %.2f (the cost of verifying each read)\n", sums, plain, sums / plain);
  hc_volume_close (pv);
  hc_volume_close (sv);
  hc_tier_close (fast2);
  unlink (path ("fast2"));

  /* ---- 3: misses: read-through with admission. ---- */
  format (fast, slow, HC_MODE_WRITETHROUGH, false);
  v = open_volume (fast, slow, true);
  struct ctx m = { v, open (path ("slow"), O_RDONLY), hot, hot, buf };
  double t0 = now ();
  for (uint64_t i = 0; i < hot; i++)
    vol_miss (&m, i);
  double miss = hot / (now () - t0);
  m.base = 2 * hot;
  t0 = now ();
  for (uint64_t i = 0; i < hot; i++)
    raw_miss (&m, i);
  double rawm = hot / (now () - t0);
  printf ("4 KiB read misses (fill) %10.0f IOPS   raw pread of the slow file %10.0f IOPS   "
          "ratio %.2f (a miss reads the slow tier and writes the fast one)\n", miss, rawm,
          miss / rawm);
  close (m.fd);
  hc_volume_close (v);

  /* ---- 1 MiB sequential read misses and the hits that follow, in turns
   * with raw preads of the same size: misses (fill) against the slow file,
   * hits against the fast file.  The volume runs as a running one does:
   * the same range is first read as misses twice and evicted each time,
   * so that the fill trials (fill.c: 2 × 64 runs) have chosen before the
   * measured pass; the chosen way is printed. ---- */
  double bmiss = 0, brawm = 0, bhit = 0, brawh = 0, none = 0;
  const uint64_t big = BIG;
  const struct hc_hint evict = { .advice = HC_ADVICE_EVICT };
  int sfd = open (path ("slow"), O_RDONLY), ffd = open (path ("fast"), O_RDONLY);
  bool fill_chose = false;
  for (int turn = 0; turn < 3; turn++) {
    format (fast, slow, HC_MODE_WRITETHROUGH, false);
    v = open_volume (fast, slow, true);
    for (int warm = 0; warm < 2; warm++) {
      big_pass (v, -1, false, hot, hot, NULL, buf, &none);
      hc_volume_advise (v, hot * 4096, hot * 4096, evict);
    }
    big_pass (v, -1, false, hot, hot, NULL, buf, &bmiss);
    fill_chose = hc_fill_trial (v, (unsigned) big)->alt;
    big_pass (NULL, sfd, false, 2 * hot, hot, NULL, buf, &brawm);
    hc_volume_get_info (v, &info);
    for (int pass = 0; pass < 4; pass++) {
      big_pass (v, -1, false, hot, hot, NULL, buf, &bhit);
      big_pass (NULL, ffd, false, info.data_off / 4096, hot, NULL, buf, &brawh);
    }
    hc_volume_close (v);
  }
  /* ---- 1 MiB sequential write-through writes (every block a miss,
   * admitted: written to both tiers) vs raw pwrites of the slow file; as
   * for the misses above, the range is written and evicted twice first,
   * so that the slow writer's trials (writer.c) have chosen. ---- */
  double wt = 0, rawwt = 0;
  bool write_chose = false;
  int wfd = open (path ("slow"), O_WRONLY);
  for (int turn = 0; turn < 3; turn++) {
    format (fast, slow, HC_MODE_WRITETHROUGH, false);
    v = open_volume (fast, slow, true);
    for (int warm = 0; warm < 2; warm++) {
      big_pass (v, -1, true, hot, hot, NULL, buf, &none);
      hc_volume_advise (v, hot * 4096, hot * 4096, evict);
    }
    big_pass (v, -1, true, hot, hot, NULL, buf, &wt);
    write_chose = v->write_way.alt;
    hc_volume_close (v);
    big_pass (NULL, wfd, true, 2 * hot, hot, NULL, buf, &rawwt);
  }
  /* ---- 1 MiB declined writes and reads (background + dontneed: the
   * policy admits nothing, every byte goes to the slow tier alone) vs raw
   * pwrites and preads of the slow file, in turns. ---- */
  const struct hc_ioctx declined = {
    .hint = { .cls = HC_CLASS_BACKGROUND, .advice = HC_ADVICE_DONTNEED } };
  double dw = 0, rawdw = 0, dr = 0, rawdr = 0;
  format (fast, slow, HC_MODE_WRITETHROUGH, false);
  v = open_volume (fast, slow, true);
  for (int turn = 0; turn < 3; turn++) {
    big_pass (v, -1, true, hot, hot, &declined, buf, &dw);
    big_pass (NULL, wfd, true, 2 * hot, hot, NULL, buf, &rawdw);
    big_pass (v, -1, false, hot, hot, &declined, buf, &dr);
    big_pass (NULL, sfd, false, 2 * hot, hot, NULL, buf, &rawdr);
  }
  hc_volume_close (v);
  close (wfd);
  close (sfd);
  close (ffd);
  printf ("1 MiB write-through      %10.0f MB/s  raw pwrite of the slow file %9.0f MB/s  "
          "ratio %.2f (goal >= 0.80; the trials chose %s)\n", wt * big * 4096 / 1e6,
          rawwt * big * 4096 / 1e6, wt / rawwt, write_chose ? "beside" : "after");
  printf ("1 MiB declined writes    %10.0f MB/s  raw pwrite of the slow file %9.0f MB/s  "
          "ratio %.2f (goal >= 0.90)\n", dw * big * 4096 / 1e6, rawdw * big * 4096 / 1e6,
          dw / rawdw);
  printf ("1 MiB declined reads     %10.0f MB/s  raw pread of the slow file %10.0f MB/s  "
          "ratio %.2f (goal >= 0.90)\n", dr * big * 4096 / 1e6, rawdr * big * 4096 / 1e6,
          dr / rawdr);
  printf ("1 MiB read misses (fill) %10.0f MB/s  raw pread of the slow file %10.0f MB/s  "
          "ratio %.2f (goal >= 0.50; the trials chose %s)\n", bmiss * big * 4096 / 1e6,
          brawm * big * 4096 / 1e6, bmiss / brawm, fill_chose ? "the filler" : "the reader");
  printf ("1 MiB read hits          %10.0f MB/s  raw pread of the fast file %10.0f MB/s  "
          "ratio %.2f (goal >= 0.90)\n", bhit * big * 4096 / 1e6, brawh * big * 4096 / 1e6,
          bhit / brawh);

  /* ---- 256 KiB read misses on tiers that wait like devices: the same
   * files behind decorators that sleep (slow-tier reads 2 ms per MiB,
   * about 500 MB/s; fast-tier writes of 64 KiB or more 1 ms per MiB),
   * fills always on the reader's thread against fills as the trials choose
   * (fill.c: two trials of 64 runs, then the choice), in turns. ---- */
  const uint64_t mid = 64; /* blocks per read */
  hc_tier *wfast, *wslow;
  hook_new (fast, device_wait, NULL, &wfast);
  hook_new (slow, device_wait, (void *) 1, &wslow);
  double way[2];
  bool deferred = trial_ways (wfast, wslow, false, hot, mid, 1, way, buf);
  printf ("256 KiB misses, device waits %5.0f MB/s  filled by the reader %11.0f MB/s  "
          "ratio %.2f (the trials chose %s)\n", way[1] / 1e6, way[0] / 1e6, way[1] / way[0],
          deferred ? "the filler" : "the reader");

  /* ---- 1 MiB write-through writes on the same waiting tiers (slow-tier
   * writes 2 ms per MiB too), each block written four times (a miss, then
   * hits): the slow writes always after the fast ones on the writer's
   * thread, against the way the trials choose (writer.c: beside them; the
   * choice comes after two trials of 64 requests). */
  bool besides = trial_ways (wfast, wslow, true, hot, big, 4, way, buf);
  printf ("1 MiB write-through, device waits %5.0f MB/s  slow after fast %9.0f MB/s  "
          "ratio %.2f (the trials chose %s)\n", way[1] / 1e6, way[0] / 1e6, way[1] / way[0],
          besides ? "beside" : "after");
  hc_tier_close (wfast);
  hc_tier_close (wslow);
  hc_tier_close (fast);
  hc_tier_close (slow);
  unlink (path ("fast"));
  unlink (path ("slow"));

  /* ---- 4: RAM per cached block. ---- */
  printf ("\nRAM for mapping and policy state per cached block (goal <= 24 bytes):\n");
  for (unsigned p = 0; hc_policy_name (p); p++) {
    unsigned id = (unsigned) hc_policy_find (hc_policy_name (p));
    printf ("  %-10s  1M blocks: %6.2f B   16M blocks: %6.2f B\n", hc_policy_name (p),
            ram_per_block (1u << 20, id), quick ? ram_per_block (1u << 20, id)
                                                : ram_per_block (16u << 20, id));
  }

  /* ---- 5: reopen after a crash with 1 M cached blocks. ---- */
  const uint64_t nb = quick ? 1u << 18 : 1u << 20;
  make_file (path ("fast"), nb * 4096 + (96u << 20));
  make_file (path ("slow"), 2 * nb * 4096);
  pid_t pid = fork ();
  if (pid == 0) {
    /* The crashing process: fill the cache with dirty blocks, flush, and die
     * without closing (no checkpoint, no clean flag). */
    hc_tier *f = open_tier (path ("fast")), *s = open_tier (path ("slow"));
    format (f, s, HC_MODE_WRITEBACK, false);
    hc_volume *cv = open_volume (f, s, false);
    for (uint64_t b = 0; b < nb; b += 256)
      hc_volume_write (cv, buf, 256 * 4096, b * 4096, 0, NULL);
    hc_volume_flush (cv);
    _exit (0);
  }
  int status;
  waitpid (pid, &status, 0);
  fast = open_tier (path ("fast"));
  slow = open_tier (path ("slow"));
  t0 = now ();
  v = open_volume (fast, slow, false);
  double reopen = now () - t0;
  struct hc_stats st;
  hc_volume_stats (v, &st);
  hc_volume_get_info (v, &info);
  uint64_t cached = 0, dirty = 0;
  for (unsigned k = 0; k < HC_CLASS_COUNT; k++) {
    cached += st.cls[k].blocks;
    dirty += st.cls[k].dirty;
  }
  printf ("\nreopen after a crash: %.3f s for %llu cached blocks (%llu dirty, %llu journal "
          "sectors replayed; goal < 1 s at 1 M)\n", reopen, (unsigned long long) cached,
          (unsigned long long) dirty, (unsigned long long) info.replayed);
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
  unlink (path ("fast"));
  unlink (path ("slow"));
  rmdir (dir);

  /* ---- 6: what the metadata costs the flash, beside the data. ---- */
  printf ("\nfast-tier writes for metadata (journal, checkpoints, superblocks) beside data:\n");
  for (int flush_every = 10; flush_every <= 1000; flush_every *= 100)
    meta_share (HC_MODE_WRITEBACK, flush_every, nops / 4, buf);
  meta_share (HC_MODE_WRITETHROUGH, 0, nops / 4, buf);
  free (buf);
  return 0;
}
