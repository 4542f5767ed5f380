/* Hint daemon benchmark: what one rescan of a large tree costs.
 *
 * `hintcache hintd` rescans its mount point periodically (and when inotify
 * says so): it walks the tree, gives each file a path rule matches its
 * FIEMAP extents, builds the class map and diffs it against the previous
 * one.  The goal is a rescan of 100,000 files cheap enough to repeat; this
 * measures it on a generated tree of small files (4 KiB each, 100 per
 * directory) where about a fifth match the built-in rules (WAL segments
 * under dbN/pg_wal/, *.idx files, everything under /backup/), all
 * allocated (one syncfs after writing them, so nothing is in delayed
 * allocation).
 *
 * The reference, measured in the same run, is a plain walk of the same
 * tree that lstat()s every entry (opendir, readdir, fstatat: what `find`
 * with a test on the inode, or `du`, costs).  A readdir-only walk is shown
 * too.  Figures, each the median of 3 runs, with a warm cache (the tree
 * was just written; a cold-cache rescan costs what the disk adds, for the
 * walk and the scan alike):
 *
 *   - a full hc_fsmap_scan with the default rules and no device: the walk,
 *     FIEMAP of each matched file, and building the map;
 *   - hc_fsmap_diff of two consecutive scans with no change in between
 *     (what a rescan that finds nothing new costs on top of the scan);
 *   - if mkfs.ext4 is installed: the layout scan (libext2fs) of an ext4
 *     image made from the tree with `mkfs.ext4 -d`.
 *
 * Usage: bench_hintd [--quick] [--files N]   (default 100,000; --quick 20,000)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsmap/fsmap.h"
#include "hintcache/extents.h"

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median3 (double t[3])
{
  qsort (t, 3, sizeof t[0], cmp_double);
  return t[1];
}

/* The directory number k: 5% under /backup, 5% WAL directories, the rest
 * data directories (where one file in ten is an index).  Writes its path
 * relative to the root into buf. */
static void
dir_of (unsigned long k, char *buf, size_t len)
{
  if (k % 20 == 0)
    snprintf (buf, len, "backup/b%lu", k);
  else if (k % 20 == 1)
    snprintf (buf, len, "db%lu/pg_wal", k);
  else
    snprintf (buf, len, "data/d%lu", k);
}

static int
mkdir_p (const char *root, const char *rel)
{
  char p[4096];
  int n = snprintf (p, sizeof p, "%s/%s", root, rel);

  for (char *s = p + strlen (root) + 1; s < p + n; s++)
    if (*s == '/') {
      *s = '\0';
      if (mkdir (p, 0755) < 0 && errno != EEXIST)
        return -1;
      *s = '/';
    }
  return mkdir (p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* Creates nfiles files of 4 KiB over ndirs directories under root, then
 * syncs the file system so every file has its blocks.  Returns 0 or -1. */
static int
make_tree (const char *root, unsigned long nfiles, unsigned long ndirs)
{
  static char data[4096];
  char rel[256], p[4096];

  memset (data, 'x', sizeof data);
  for (unsigned long k = 0; k < ndirs; k++) {
    dir_of (k, rel, sizeof rel);
    if (mkdir_p (root, rel) < 0) {
      perror (rel);
      return -1;
    }
  }
  for (unsigned long i = 0; i < nfiles; i++) {
    unsigned long k = i % ndirs;
    dir_of (k, rel, sizeof rel);
    if (k % 20 == 1)
      snprintf (p, sizeof p, "%s/%s/%024lX", root, rel, i);
    else
      snprintf (p, sizeof p, "%s/%s/f%lu.%s", root, rel, i,
                k % 20 != 0 && (i / ndirs) % 10 == 3 ? "idx" : "dat");
    int fd = open (p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write (fd, data, sizeof data) != (ssize_t) sizeof data) {
      perror (p);
      return -1;
    }
    close (fd);
  }
  int fd = open (root, O_RDONLY | O_DIRECTORY);
  if (fd < 0 || syncfs (fd) < 0) {
    perror ("syncfs");
    return -1;
  }
  close (fd);
  return 0;
}

/* The reference: a walk of the tree, with an lstat of every entry (or
 * readdir alone).  Returns the number of entries seen. */
static unsigned long
plain_walk (int dfd, bool stat_each)
{
  unsigned long n = 0;
  struct dirent *de;
  DIR *d = fdopendir (dfd);

  if (!d) {
    close (dfd);
    return 0;
  }
  while ((de = readdir (d))) {
    const char *name = de->d_name;
    if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
      continue;
    struct stat st;
    bool isdir = de->d_type == DT_DIR;
    if (stat_each || de->d_type == DT_UNKNOWN) {
      if (fstatat (dirfd (d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        continue;
      isdir = S_ISDIR (st.st_mode);
    }
    n++;
    if (isdir) {
      int cfd = openat (dirfd (d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (cfd >= 0)
        n += plain_walk (cfd, stat_each);
    }
  }
  closedir (d);
  return n;
}

static double
time_walk (const char *root, bool stat_each, unsigned long *entries)
{
  double t0 = now ();
  int fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  *entries = fd < 0 ? 0 : plain_walk (fd, stat_each);
  return now () - t0;
}

/* Whether files in dir get FIEMAP extents (not on tmpfs, for one). */
static bool
has_fiemap (const char *dir)
{
  static char data[4096];
  char p[4200];
  struct hc_extent_list x;
  bool ok = false;

  snprintf (p, sizeof p, "%s/probe", dir);
  int fd = open (p, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return false;
  if (write (fd, data, sizeof data) == (ssize_t) sizeof data
      && hc_file_extents (fd, 0, UINT64_MAX, HC_EXTENTS_SYNC, &x) == 0) {
    ok = x.n > 0;
    hc_extent_list_free (&x);
  }
  close (fd);
  unlink (p);
  return ok;
}

static int
rm_one (const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void) sb, (void) flag, (void) ftw;
  return remove (p) < 0 ? -1 : 0;
}

static uint64_t
sum (const uint64_t a[HC_CLASS_COUNT])
{
  uint64_t s = 0;
  for (unsigned k = 0; k < HC_CLASS_COUNT; k++)
    s += a[k];
  return s;
}

/* The layout scan of an ext4 image made from the tree, if mkfs.ext4 can
 * make one. */
static void
layout_scan (const char *dir, const char *root, unsigned long nfiles)
{
  char img[4200], cmd[9000];
  struct hc_fsmap map = { 0 };
  struct hc_fsmap_stats st = { 0 };
  double t[3];

  if (system ("command -v mkfs.ext4 >/dev/null 2>&1") != 0) {
    printf ("layout scan: skipped (no mkfs.ext4)\n");
    return;
  }
  if (strchr (dir, '\'')) {
    printf ("layout scan: skipped (a quote in the directory name)\n");
    return;
  }
  snprintf (img, sizeof img, "%s/ext4.img", dir);
  /* 8 KiB a file (its 4 KiB, inode, entry), and an inode for each: the
   * default ratio would leave a 1 GiB file system 64 K inodes. */
  unsigned long mib = 256 + nfiles / 128, inodes = nfiles * 11 / 10 + 1024;
  snprintf (cmd, sizeof cmd, "mkfs.ext4 -q -F -N %lu -d '%s' '%s' %luM >/dev/null", inodes, root,
            img, mib);
  fflush (stdout);
  double t0 = now ();
  if (system (cmd) != 0) {
    printf ("layout scan: skipped (mkfs.ext4 -d failed)\n");
    unlink (img);
    return;
  }
  double mkfs = now () - t0;
  struct hc_fsmap_opts o = { .device = img };
  for (int r = 0; r < 3; r++) {
    t0 = now ();
    int rc = hc_fsmap_scan (&o, &map, &st);
    t[r] = now () - t0;
    if (rc < 0) {
      printf ("layout scan: failed: %s\n", st.why);
      goto out;
    }
  }
  printf ("layout scan of an ext4 image of the tree (%lu MiB, made in %.1f s): %.3f s, "
          "%llu inodes, %llu directories, %zu ranges (%llu KiB metadata, %llu KiB journal)\n",
          mib, mkfs, median3 (t), (unsigned long long) st.inodes,
          (unsigned long long) st.dirs, map.n,
          (unsigned long long) st.bytes[HC_CLASS_METADATA] / 1024,
          (unsigned long long) st.bytes[HC_CLASS_JOURNAL] / 1024);
out:
  hc_fsmap_free (&map);
  hc_fsmap_stats_free (&st);
  unlink (img);
}

int
main (int argc, char **argv)
{
  bool quick = false;
  unsigned long nfiles = 0;

  for (int i = 1; i < argc; i++)
    if (strcmp (argv[i], "--quick") == 0)
      quick = true;
    else if (strcmp (argv[i], "--files") == 0 && i + 1 < argc && atol (argv[i + 1]) > 0)
      nfiles = (unsigned long) atol (argv[++i]);
    else {
      fprintf (stderr, "usage: bench_hintd [--quick] [--files N]\n");
      return 2;
    }
  if (!nfiles)
    nfiles = quick ? 20000 : 100000;
  unsigned long ndirs = nfiles >= 200 ? nfiles / 100 : 2;

  const char *tmp = getenv ("TMPDIR") && *getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  char dir[4096], root[4200];
  snprintf (dir, sizeof dir, "%s/hcbench-hintd.XXXXXX", tmp);
  if (!mkdtemp (dir)) {
    perror ("mkdtemp");
    return 1;
  }
  snprintf (root, sizeof root, "%s/tree", dir);
  printf ("hint daemon rescan benchmark: %lu files of 4 KiB in %lu directories under %s\n",
          nfiles, ndirs, dir);
  printf ("(warm cache: the tree was just written; each time is the median of 3 runs)\n\n");

  int status = 1;
  struct hc_fsrules rules = { 0 };
  struct hc_parse_error perr;
  struct hc_fsmap m1 = { 0 }, m2 = { 0 };
  struct hc_fsmap_ops ops = { 0 };
  struct hc_fsmap_stats st = { 0 };
  const char *text = hc_fsrules_default_text ();

  if (!has_fiemap (dir)) {
    printf ("skipped: %s has no FIEMAP extents (tmpfs?); set TMPDIR to a directory on ext4, "
            "xfs or btrfs\n", dir);
    status = 0;
    goto out;
  }
  double t0 = now ();
  if (mkdir (root, 0755) < 0 || make_tree (root, nfiles, ndirs) < 0)
    goto out;
  printf ("tree made and synced in %.1f s\n", now () - t0);
  if (hc_fsrules_parse (text, strlen (text), &rules, &perr) < 0) {
    fprintf (stderr, "default rules, line %u: %s\n", perr.line, perr.msg);
    goto out;
  }

  /* References. */
  unsigned long entries, entries2;
  double tw[3], tr[3], ts[3];
  time_walk (root, true, &entries); /* warm up */
  for (int r = 0; r < 3; r++) {
    tw[r] = time_walk (root, true, &entries);
    tr[r] = time_walk (root, false, &entries2);
  }
  double walk = median3 (tw), readdir_only = median3 (tr);

  /* Scans; the last two give the maps for the diff. */
  struct hc_fsmap_opts o = { .mount = root, .rules = &rules };
  for (int r = 0; r < 3; r++) {
    t0 = now ();
    int rc = hc_fsmap_scan (&o, r == 2 ? &m2 : &m1, &st);
    ts[r] = now () - t0;
    if (rc < 0) {
      fprintf (stderr, "scan: %s\n", st.why);
      goto out;
    }
  }
  double scan = median3 (ts);

  /* The diff of two scans with nothing changed, repeated to be timed. */
  const int nd = 20;
  double td[3];
  for (int r = 0; r < 3; r++) {
    t0 = now ();
    for (int i = 0; i < nd; i++)
      if (hc_fsmap_diff (&m1, &m2, &ops) < 0) {
        fprintf (stderr, "diff: out of memory\n");
        goto out;
      }
    td[r] = (now () - t0) / nd;
  }
  double diff = median3 (td);

  printf ("files %lu, directories %llu, matched files %llu (%.0f%%), pending %llu, "
          "map ranges %zu (%llu MiB hinted)\n\n", nfiles, (unsigned long long) st.walk_dirs,
          (unsigned long long) st.matched, 100.0 * st.matched / nfiles,
          (unsigned long long) st.pending, m2.n,
          (unsigned long long) (sum (st.bytes) >> 20));
  printf ("%-46s %9s %10s %9s\n", "", "s/scan", "us/file", "vs walk");
  printf ("%-46s %9.3f %10.2f %8.2fx\n", "plain walk, lstat of every entry (reference)", walk,
          walk / nfiles * 1e6, 1.0);
  printf ("%-46s %9.3f %10.2f %8.2fx\n", "walk, readdir only", readdir_only,
          readdir_only / nfiles * 1e6, readdir_only / walk);
  printf ("%-46s %9.3f %10.2f %8.2fx\n", "hc_fsmap_scan, default rules, no device", scan,
          scan / nfiles * 1e6, scan / walk);
  printf ("%-46s %9.6f %10.4f %8.4fx   (%zu operations: none expected)\n",
          "hc_fsmap_diff of two scans, nothing changed", diff, diff / nfiles * 1e6, diff / walk,
          ops.n);
  if (entries != entries2)
    printf ("(the two walks saw %lu and %lu entries)\n", entries, entries2);

  printf ("\n");
  layout_scan (dir, root, nfiles);
  struct rusage ru;
  getrusage (RUSAGE_SELF, &ru);
  printf ("peak RSS of this process: %.1f MiB\n", ru.ru_maxrss / 1024.0);
  status = 0;
out:
  hc_fsmap_ops_free (&ops);
  hc_fsmap_free (&m1);
  hc_fsmap_free (&m2);
  hc_fsmap_stats_free (&st);
  hc_fsrules_free (&rules);
  if (nftw (dir, rm_one, 64, FTW_DEPTH | FTW_PHYS) < 0)
    fprintf (stderr, "bench_hintd: could not remove %s\n", dir);
  return status;
}
