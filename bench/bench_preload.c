/* Preload library benchmark: what libhintcache-preload.so adds to each
 * pwrite, as a ratio against the same writes without it, in the same run.
 *
 * The library interposes every write.  A process with nothing to say pays
 * one check of a cached ioprio per write; a hinted one (HINTCACHE_CLASS)
 * also pays an fstat and a lock per write, and per chunk of 1 to 8 MiB a
 * preallocation, a FIEMAP and "advise" requests to the volume's control
 * socket.  This measures both, against a real control server started in
 * this process (an in-memory fast tier over a sparse file as large as the
 * file system's physical offsets need), in five modes:
 *
 *   none      no preload: the reference;
 *   inert     preloaded, HINTCACHE_SOCKET unset: the library does nothing;
 *   unhinted  preloaded with socket and mounts, no hint: the common case;
 *   hinted    HINTCACHE_CLASS=journal: preallocation and advise traffic;
 *   noserver  hinted, but the socket does not exist: hints are dropped.
 *
 * Each run is a child process (this program again, with --child) that
 * times N pwrite calls of 4 KiB, then of 64 KiB, into a new file in a
 * temporary directory under $TMPDIR (or /tmp), through the page cache with
 * no fsync: a "fresh" pass that writes the file once (new data, so the
 * hinted mode preallocates and advises as it goes), then an "overwrite"
 * pass over the same file (the hinted range is known: only the per-write
 * checks remain).  Every mode is run 5 times (--quick: 3, with a 16 MiB
 * file instead of 64 MiB and a quarter of the overwrites), the modes
 * interleaved, and each figure is the fastest run's.  The directory must be on a
 * file system with FIEMAP (ext4, xfs, btrfs …); elsewhere the benchmark
 * says "skipped".
 *
 * Usage: bench_preload [--quick] [PRELOAD.so]
 *   (default: libhintcache-preload.so in the parent of this program's
 *   directory, where the build tree puts it)
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/hintcache.h"

extern char **environ;

enum mode { NONE, INERT, UNHINTED, HINTED, NOSERVER, NMODES };
static const char *const mode_word[NMODES] = { "none", "inert", "unhinted", "hinted",
                                               "noserver" };
static const char *const mode_text[NMODES] = {
  "no preload (reference)", "preload, no HINTCACHE_SOCKET", "preload, unhinted process",
  "preload, HINTCACHE_CLASS=journal", "journal, socket missing",
};

#define MAX_REPS 5
static const size_t io_size[2] = { 4096, 65536 };

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------------
 * The child: times the writes and prints "FRESH_NS OVERWRITE_NS".
 */
static int
child (const char *path, size_t bs, uint64_t file_bytes, uint64_t overwrites)
{
  char *buf = aligned_alloc (4096, bs);
  int fd = open (path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);

  if (!buf || fd < 0) {
    perror (path);
    return 1;
  }
  memset (buf, 0x5a, bs);
  uint64_t n = file_bytes / bs;
  double t0 = now ();
  for (uint64_t off = 0; off < file_bytes; off += bs)
    if (pwrite (fd, buf, bs, (off_t) off) != (ssize_t) bs)
      goto fail;
  double fresh = (now () - t0) / n;
  uint64_t off = 0;
  t0 = now ();
  for (uint64_t i = 0; i < overwrites; i++) {
    if (pwrite (fd, buf, bs, (off_t) off) != (ssize_t) bs)
      goto fail;
    off = off + bs == file_bytes ? 0 : off + bs;
  }
  double over = (now () - t0) / overwrites;
  close (fd);
  unlink (path);
  free (buf);
  printf ("%.1f %.1f\n", fresh * 1e9, over * 1e9);
  return 0; /* by exit: the library's destructor writes its stats line */
fail:
  perror ("pwrite");
  close (fd);
  unlink (path);
  return 1;
}

/* ---------------------------------------------------------------------------
 * The parent
 */
static char dir[PATH_MAX], sock[PATH_MAX + 16], lib[PATH_MAX];

/* A file in dir, its name formatted as printf does (four buffers in turn). */
static const char *__attribute__ ((format (printf, 1, 2)))
path (const char *fmt, ...)
{
  static char p[4][PATH_MAX + 64];
  static int k;
  char name[64];
  va_list ap;

  k = (k + 1) % 4;
  va_start (ap, fmt);
  vsnprintf (name, sizeof name, fmt, ap);
  va_end (ap);
  snprintf (p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}

/* The environment of a child in mode m, writing its stats to stats_file:
 * ours without LD_PRELOAD and HINTCACHE_*, plus the mode's. */
static char **
child_env (enum mode m, const char *stats_file)
{
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc (n + 8, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp (environ[i], "LD_PRELOAD=", 11) != 0 && strncmp (environ[i], "HINTCACHE_", 10) != 0)
      env[k++] = strdup (environ[i]);
  if (m != NONE && asprintf (&env[k++], "LD_PRELOAD=%s", lib) < 0)
    return NULL;
  if (m >= UNHINTED) {
    if (asprintf (&env[k++], "HINTCACHE_SOCKET=%s%s", sock, m == NOSERVER ? ".missing" : "") < 0
        || asprintf (&env[k++], "HINTCACHE_MOUNTS=%s", dir) < 0
        || asprintf (&env[k++], "HINTCACHE_STATS=%s", stats_file) < 0)
      return NULL;
    env[k++] = strdup ("HINTCACHE_QUIET=1");
  }
  if (m >= HINTED)
    env[k++] = strdup ("HINTCACHE_CLASS=journal");
  return env;
}

static void
env_free (char **env)
{
  for (size_t i = 0; env && env[i]; i++)
    free (env[i]);
  free (env);
}

struct result {
  double fresh, over; /* ns per pwrite */
  bool ok;
};

/* One run: this program again with --child, in mode m. */
static struct result
run_child (enum mode m, size_t bs, uint64_t file_bytes, uint64_t overwrites)
{
  struct result r = { 0 };
  char a_bs[32], a_file[32], a_over[32], out[128];
  char **env = child_env (m, path ("stats.%s.%zu", mode_word[m], bs));
  int fd[2];

  snprintf (a_bs, sizeof a_bs, "%zu", bs);
  snprintf (a_file, sizeof a_file, "%" PRIu64, file_bytes);
  snprintf (a_over, sizeof a_over, "%" PRIu64, overwrites);
  char *argv[] = { "bench_preload", "--child", (char *) path ("data.%s.%zu", mode_word[m], bs),
                   a_bs, a_file, a_over, NULL };
  if (!env || pipe (fd) < 0) {
    env_free (env);
    return r;
  }
  pid_t pid = fork ();
  if (pid == 0) {
    dup2 (fd[1], 1);
    close (fd[0]);
    close (fd[1]);
    execve ("/proc/self/exe", argv, env);
    _exit (127);
  }
  close (fd[1]);
  size_t got = 0;
  ssize_t k;
  while (pid > 0 && got < sizeof out - 1 && (k = read (fd[0], out + got, sizeof out - 1 - got)) > 0)
    got += (size_t) k;
  out[got] = '\0';
  close (fd[0]);
  int status = 1;
  if (pid > 0)
    waitpid (pid, &status, 0);
  r.ok = status == 0 && sscanf (out, "%lf %lf", &r.fresh, &r.over) == 2;
  env_free (env);
  return r;
}

/* The fastest of n runs: noise on a shared machine only ever adds time
 * (and the fresh pass can be bimodal, so a median would pick a side at
 * random). */
static double
best (const double *v, int n)
{
  double b = v[0];
  for (int i = 1; i < n; i++)
    if (v[i] < b)
      b = v[i];
  return b;
}

/* Adds up the library's stats lines in a file ("hintcache-preload pid=…
 * sent=… refused=… dropped=… …"): sent, refused, dropped, and lines. */
static void
read_stats (const char *file, uint64_t tot[4])
{
  char line[512];
  FILE *f = fopen (file, "r");

  memset (tot, 0, 4 * sizeof tot[0]);
  if (!f)
    return;
  while (fgets (line, sizeof line, f)) {
    static const char *const key[3] = { " sent=", " refused=", " dropped=" };
    for (int i = 0; i < 3; i++) {
      const char *s = strstr (line, key[i]);
      if (s)
        tot[i] += strtoull (s + strlen (key[i]), NULL, 10);
    }
    tot[3]++;
  }
  fclose (f);
}

/* The physical offset of a probe file's data, or UINT64_MAX when the file
 * system has no FIEMAP (or placed nothing). */
static uint64_t
probe (void)
{
  static char data[1 << 20];
  struct hc_extent_list x;
  uint64_t phys = UINT64_MAX;
  const char *p = path ("probe");
  int fd = open (p, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);

  if (fd < 0)
    return phys;
  if (write (fd, data, sizeof data) == (ssize_t) sizeof data
      && hc_file_extents (fd, 0, UINT64_MAX, HC_EXTENTS_SYNC, &x) == 0) {
    if (x.n)
      phys = x.e[x.n - 1].physical + x.e[x.n - 1].length;
    hc_extent_list_free (&x);
  }
  close (fd);
  unlink (p);
  return phys;
}

/* A volume whose slow tier is a sparse file larger than any physical
 * offset on dir's file system, and its control server on `sock`. */
static int
start_server (hc_tier **fast, hc_tier **slow, hc_volume **v, hc_control **srv, uint64_t top)
{
  struct statvfs sv;
  struct hc_format_opts fo = { 0 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[256];
  uint64_t size = 1ull << 40;

  if (statvfs (dir, &sv) == 0 && 2 * (uint64_t) sv.f_blocks * sv.f_frsize > size)
    size = 2 * (uint64_t) sv.f_blocks * sv.f_frsize;
  if (2 * (top + (64u << 20)) > size)
    size = 2 * (top + (64u << 20));
  size = (size + (1u << 20) - 1) & ~(uint64_t) ((1u << 20) - 1);
  const char *img = path ("slow.img");
  int fd = open (img, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) size) < 0) {
    fprintf (stderr, "bench_preload: a sparse slow tier of %" PRIu64 " bytes: %s\n", size,
             strerror (errno));
    return -1;
  }
  close (fd);
  if (hc_tier_new_memory (4u << 20, fast) < 0 || hc_tier_open_file (img, 0, slow) < 0) {
    fprintf (stderr, "bench_preload: cannot open the tiers\n");
    return -1;
  }
  if (hc_volume_format (*fast, *slow, &fo, why, sizeof why) < 0
      || hc_volume_open (*fast, *slow, &oo, v, why, sizeof why) < 0
      || hc_control_start (*v, sock, srv, why, sizeof why) < 0) {
    fprintf (stderr, "bench_preload: %s\n", why);
    return -1;
  }
  return 0;
}

int
main (int argc, char **argv)
{
  if (argc == 6 && strcmp (argv[1], "--child") == 0)
    return child (argv[2], strtoul (argv[3], NULL, 10), strtoull (argv[4], NULL, 10),
                  strtoull (argv[5], NULL, 10));

  bool quick = false;
  const char *libarg = NULL;
  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--quick") == 0)
      quick = true;
    else if (argv[i][0] != '-' && !libarg)
      libarg = argv[i];
    else {
      fprintf (stderr, "usage: bench_preload [--quick] [PRELOAD.so]\n");
      return 2;
    }
  char self[PATH_MAX], guess[PATH_MAX + 64];
  ssize_t k = readlink ("/proc/self/exe", self, sizeof self - 1);
  self[k > 0 ? k : 0] = '\0';
  snprintf (guess, sizeof guess, "%s/../libhintcache-preload.so", dirname (self));
  if (!realpath (libarg ? libarg : guess, lib)) {
    fprintf (stderr, "bench_preload: %s: %s (build the hintcache-preload target, or name it)\n",
             libarg ? libarg : guess, strerror (errno));
    return 1;
  }

  const int reps = quick ? 3 : MAX_REPS;
  const uint64_t file_bytes = quick ? 16u << 20 : 64u << 20;
  const uint64_t overwrites[2] = { quick ? 50000 : 200000, quick ? 5000 : 20000 };
  const char *tmp = getenv ("TMPDIR") && *getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  snprintf (dir, sizeof dir, "%s/hcbench-preload.XXXXXX", tmp);
  if (!mkdtemp (dir)) {
    perror ("mkdtemp");
    return 1;
  }
  snprintf (sock, sizeof sock, "%s/ctl.sock", dir);
  if (strlen (sock) + sizeof ".missing" > sizeof ((struct sockaddr_un *) 0)->sun_path) {
    fprintf (stderr, "bench_preload: %s: too long for a socket path (set TMPDIR)\n", sock);
    rmdir (dir);
    return 1;
  }

  hc_tier *fast = NULL, *slow = NULL;
  hc_volume *v = NULL;
  hc_control *srv = NULL;
  int status = 1;
  uint64_t top = probe ();
  if (top == UINT64_MAX) {
    printf ("bench_preload: skipped: %s has no FIEMAP extents (tmpfs?); set TMPDIR to a "
            "directory on ext4, xfs or btrfs\n", dir);
    status = 0;
    goto out;
  }
  if (start_server (&fast, &slow, &v, &srv, top) < 0)
    goto out;

  printf ("preload library overhead per pwrite: %s\n", lib);
  printf ("files in %s; page cache, no fsync; a %" PRIu64 " MiB file written once (fresh), "
          "then %" PRIu64 " / %" PRIu64 " overwrites;\nbest of %d runs per mode, modes "
          "interleaved; control server in this process\n\n", dir, file_bytes >> 20,
          overwrites[0], overwrites[1], reps);

  double res[2][NMODES][2][MAX_REPS]; /* size, mode, fresh/over, rep */
  uint32_t held = 0;                  /* range hints the server held after a hinted run */
  for (int r = 0; r < reps; r++)
    for (int s = 0; s < 2; s++)
      for (int j = 0; j < NMODES; j++) {
        enum mode m = (enum mode) ((j + r) % NMODES);
        struct result x = run_child (m, io_size[s], file_bytes, overwrites[s]);
        if (!x.ok) {
          fprintf (stderr, "bench_preload: the %s run with %zu-byte writes failed\n",
                   mode_word[m], io_size[s]);
          goto out;
        }
        res[s][m][0][r] = x.fresh;
        res[s][m][1][r] = x.over;
        struct hc_volume_info info;
        hc_volume_get_info (v, &info);
        if (info.range_hints > held)
          held = info.range_hints;
        hc_volume_unadvise (v, 0, hc_volume_size (v)); /* each run starts from none */
      }

  printf ("%-34s %21s %21s %21s %21s\n", "", "4 KiB fresh", "4 KiB overwrite",
          "64 KiB fresh", "64 KiB overwrite");
  printf ("%-34s", "mode");
  for (int c = 0; c < 4; c++)
    printf (" %11s %9s", "ns/pwrite", "ratio");
  printf ("\n");
  double ref[2][2];
  for (int s = 0; s < 2; s++)
    for (int p = 0; p < 2; p++)
      ref[s][p] = best (res[s][NONE][p], reps);
  for (int m = 0; m < NMODES; m++) {
    printf ("%-34s", mode_text[m]);
    for (int s = 0; s < 2; s++)
      for (int p = 0; p < 2; p++) {
        double t = best (res[s][m][p], reps);
        printf (" %11.0f %8.3fx", t, t / ref[s][p]);
      }
    printf ("\n");
  }

  printf ("\nhint traffic per run (the library's HINTCACHE_STATS lines):\n");
  for (int m = UNHINTED; m < NMODES; m++)
    for (int s = 0; s < 2; s++) {
      uint64_t t[4];
      read_stats (path ("stats.%s.%zu", mode_word[m], io_size[s]), t);
      uint64_t runs = t[3] ? t[3] : 1;
      printf ("  %-9s %2zu KiB: %6.1f advise/unadvise accepted, %4.1f refused, %6.1f dropped "
              "(%" PRIu64 " runs)\n", mode_word[m], io_size[s] / 1024, (double) t[0] / runs,
              (double) t[1] / runs, (double) t[2] / runs, t[3]);
    }
  printf ("  range hints the server held after a run, at most: %" PRIu32 "\n", held);
  printf ("\ngoal: unhinted (and inert) <= 1.05x; hinted <= 1.5x (the ratios above are "
          "measured, not adjusted)\n");
  status = 0;
out:
  hc_control_stop (srv);
  if (v)
    hc_volume_close (v);
  if (fast)
    hc_tier_close (fast);
  if (slow)
    hc_tier_close (slow);
  for (int m = 0; m < NMODES; m++)
    for (int s = 0; s < 2; s++) {
      unlink (path ("stats.%s.%zu", mode_word[m], io_size[s]));
      unlink (path ("data.%s.%zu", mode_word[m], io_size[s]));
    }
  unlink (path ("slow.img"));
  unlink (sock);
  if (rmdir (dir) < 0)
    fprintf (stderr, "bench_preload: could not remove %s: %s\n", dir, strerror (errno));
  return status;
}
