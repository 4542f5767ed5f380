/* Tiers: the conformance suite (tier_conformance.h) over the memory tier
 * (calloc'd and mapped), a memory tier started from an image, file tiers
 * (writable and read-only) and the timing decorator over flash and disk
 * models; then what is particular to each: the memory tier's refusals and
 * the image left untouched; the file tier's data in the file itself, hole
 * punching, a file that shrinks, size rounding, refusals of what is not a
 * file, and claims; the timing model (sequential runs, seek by distance,
 * flash latencies) and the decorator's totals.  File tiers live on
 * temporary files in $TMPDIR (or /tmp).
 *
 * `test_tier direct` runs the suite over a file tier opened with O_DIRECT
 * instead, in 4096-byte units, and exits 77 (skipped) where the filesystem
 * there refuses O_DIRECT. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hintcache/tier.h"
#include "test.h"
#include "tier_conformance.h"

#define KiB ((uint64_t) 1 << 10)
#define MiB ((uint64_t) 1 << 20)
#define GiB ((uint64_t) 1 << 30)

/* Fills buf with a pattern that differs per seed and per byte. */
static void
fill (void *buf, size_t len, unsigned seed)
{
  unsigned char *p = buf;

  for (size_t i = 0; i < len; i++)
    p[i] = (unsigned char) (seed * 131u + i * 7u + (i >> 9) + 1);
}

/* True if a and b agree to a relative 1e-9 (the model is plain arithmetic,
 * so only rounding separates it from the formula). */
static bool
close_to (double a, double b)
{
  double d = a > b ? a - b : b - a, m = b > 0 ? b : -b;

  return d <= 1e-9 * (m > 1 ? m : 1);
}

/* Closes a file tier and opens its file again with the same flags (the
 * conformance suite's reopen hook; arg is struct reopen). */
struct reopen {
  const char *path;
  unsigned flags;
};

static hc_tier *
reopen_file (hc_tier *t, void *arg)
{
  const struct reopen *r = arg;
  hc_tier *n = NULL;

  hc_tier_close (t);
  return hc_tier_open_file (r->path, r->flags, &n) == 0 ? n : NULL;
}

/* Memory tiers: what they refuse to be made as, and the suite over one
 * calloc'd and one mapped (past 1 MiB the contents are mapped instead). */
static void
test_memory (void)
{
  hc_tier *t = NULL;

  CHECK_EQ (hc_tier_new_memory (0, &t), -EINVAL, "empty");
  CHECK_EQ (hc_tier_new_memory (1000, &t), -EINVAL, "not whole sectors");
  CHECK_EQ (hc_tier_new_memory (4096, NULL), -EINVAL, "nowhere to put it");
  CHECK (t == NULL, "nothing returned on failure");
  CHECK_EQ (hc_tier_new_memory (64 * KiB, &t), 0, "64 KiB");
  tier_conformance (&t, "memory", &(struct tier_caps) { .size = 64 * KiB, .caps = HC_CAP_DISCARD,
                                                          .name = "memory", .zeroed = true });
  hc_tier_close (t);
  hc_tier_close (NULL);

  CHECK_EQ (hc_tier_new_memory (4 * MiB, &t), 0, "4 MiB");
  tier_conformance (&t, "mapped memory",
                    &(struct tier_caps) { .size = 4 * MiB, .caps = HC_CAP_DISCARD,
                                          .name = "memory", .zeroed = true });
  hc_tier_close (t);
}

/* Memory tiers started from an image: the suite over one, then what is
 * their own — they start as the image, and writes change neither the image
 * nor another tier made from it. */
static void
test_memory_image (void)
{
  enum { SIZE = 2 << 20 };
  unsigned char *img = malloc (SIZE), *got = malloc (SIZE);
  hc_tier *t = NULL, *u = NULL;
  int fd = memfd_create ("hc_tier_image", MFD_CLOEXEC);

  CHECK (fd >= 0 && img && got, "memfd");
  if (fd < 0 || !img || !got)
    goto out;
  fill (img, SIZE, 12);
  CHECK (pwrite (fd, img, SIZE, 0) == SIZE, "image written");
  CHECK_EQ (hc_tier_new_memory_image (-1, SIZE, &t), -EINVAL, "no file");
  CHECK_EQ (hc_tier_new_memory_image (fd, 0, &t), -EINVAL, "empty");
  CHECK_EQ (hc_tier_new_memory_image (fd, SIZE - 100, &t), -EINVAL, "not whole sectors");
  CHECK_EQ (hc_tier_new_memory_image (fd, SIZE + 512, &t), -EINVAL, "longer than the image");
  CHECK (t == NULL, "nothing returned on failure");

  CHECK_EQ (hc_tier_new_memory_image (fd, SIZE, &t), 0, "image tier");
  CHECK_EQ (hc_tier_new_memory_image (fd, SIZE / 2, &u), 0, "a second, on half the image");
  CHECK (tc_reads_as (t, 0, img, SIZE), "starts as the image");
  tier_conformance (&t, "memory image", &(struct tier_caps) { .size = SIZE, .caps = HC_CAP_DISCARD,
                                                                .name = "memory" });
  CHECK (tc_reads_as (u, 0, img, SIZE / 2), "the other tier still holds the image");
  CHECK (pread (fd, got, SIZE, 0) == SIZE && memcmp (got, img, SIZE) == 0,
         "the image is unchanged");
out:
  hc_tier_close (t);
  hc_tier_close (u);
  if (fd >= 0)
    close (fd);
  free (img);
  free (got);
}

#define TMP_PATH 256

/* Makes a temporary file of `size` bytes; returns its descriptor, with the
 * name in path[TMP_PATH]. */
static int
temp_file (char path[TMP_PATH], off_t size)
{
  int fd;

  snprintf (path, TMP_PATH, "%s/hc_tier_XXXXXX", test_tmp ());
  fd = mkstemp (path);
  CHECK (fd >= 0, "mkstemp");
  if (fd >= 0)
    CHECK (ftruncate (fd, size) == 0, "ftruncate");
  return fd;
}

/* O_DIRECT: the suite in units of 4096 bytes from page-aligned buffers, on
 * a file of 1 MiB that already holds data, which must read back through the
 * tier first; exits 77 where the filesystem refuses O_DIRECT. */
static int
test_direct (void)
{
  char path[TMP_PATH], name[TMP_PATH + 8];
  unsigned char data[8192];
  hc_tier *t;
  void *b = NULL;
  int fd = temp_file (path, (off_t) MiB), rc;

  fill (data, sizeof data, 5);
  CHECK (fd >= 0 && pwrite (fd, data, sizeof data, 512 * KiB) == (ssize_t) sizeof data,
         "data in %s", path);
  if (fd >= 0)
    close (fd);
  rc = hc_tier_open_file (path, HC_TIER_DIRECT, &t);
  if (rc == -EINVAL) {
    unlink (path);
    return test_skip ("test_tier direct", "O_DIRECT not supported in %s", test_tmp ());
  }
  CHECK_EQ (rc, 0, "open O_DIRECT");
  if (rc < 0) {
    unlink (path);
    return 0;
  }
  CHECK (posix_memalign (&b, 4096, 8192) == 0, "aligned buffer");
  CHECK (b && hc_tier_read (t, b, 8192, 512 * KiB) == 0 && memcmp (b, data, 8192) == 0,
         "direct read of data written before");
  free (b);
  snprintf (name, sizeof name, "file:%s", path);
  tier_conformance (&t, "direct file",
                    &(struct tier_caps) { .size = MiB,
                                          .caps = HC_CAP_PERSISTENT | HC_CAP_FUA | HC_CAP_DISCARD,
                                          .name = name, .unit = 4096, .reopen = reopen_file,
                                          .arg = &(struct reopen) { path, HC_TIER_DIRECT } });
  hc_tier_close (t);
  unlink (path);
  return 0;
}

/* File tiers: the suite over a new file, writable and then read-only; then
 * what is the file tier's own: the data lands in the file at the same
 * offsets, discard punches only its range, a file that shrinks under the
 * tier, sizes rounded down to sectors, and what is not a file. */
static void
test_file (void)
{
  char path[TMP_PATH], small[TMP_PATH], name[TMP_PATH + 8], dir_no[TMP_PATH + 16];
  unsigned char a[8192], got[8192];
  hc_tier *t, *ro;
  int fd, sfd;

  fd = temp_file (path, (off_t) MiB);
  snprintf (name, sizeof name, "file:%s", path);
  CHECK_EQ (hc_tier_open_file (path, 0, &t), 0, "open %s", path);
  tier_conformance (&t, "file",
                    &(struct tier_caps) { .size = MiB,
                                          .caps = HC_CAP_PERSISTENT | HC_CAP_FUA | HC_CAP_DISCARD
                                                  | HC_CAP_PREFETCH,
                                          .name = name, .zeroed = true, .reopen = reopen_file,
                                          .arg = &(struct reopen) { path, 0 } });

  /* The data really is in the file, at the same offsets. */
  fill (a, sizeof a, 5);
  CHECK_EQ (hc_tier_write (t, a, sizeof a, 512 * KiB, HC_TIER_FUA), 0, "FUA write");
  CHECK (pread (fd, got, sizeof got, 512 * KiB) == (ssize_t) sizeof got
         && memcmp (a, got, sizeof a) == 0, "in the file");
  CHECK_EQ (hc_tier_discard (t, 512 * KiB, 4096), 0, "discard");
  CHECK (pread (fd, got, sizeof got, 512 * KiB) == (ssize_t) sizeof got
         && tc_all_zero (got, 4096) && memcmp (a + 4096, got + 4096, 4096) == 0,
         "discard punched only its range");
  hc_tier_close (t);

  /* A read-only open reads what a writable one wrote, and writes
   * nothing. */
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_READONLY, &ro), 0, "open read-only");
  CHECK (tc_reads_as (ro, 512 * KiB + 4096, a + 4096, 4096), "persistent");
  tier_conformance (&ro, "read-only file",
                    &(struct tier_caps) { .size = MiB, .caps = HC_CAP_PERSISTENT | HC_CAP_PREFETCH,
                                          .name = name, .readonly = true, .reopen = reopen_file,
                                          .arg = &(struct reopen) { path, HC_TIER_READONLY } });
  CHECK (tc_reads_as (ro, 512 * KiB + 4096, a + 4096, 4096), "unchanged");
  hc_tier_close (ro);

  /* A file that shrinks under the tier: a read past its new end is an
   * error, not silent zeros. */
  CHECK_EQ (hc_tier_open_file (path, 0, &t), 0, "reopen");
  CHECK (ftruncate (fd, 4096) == 0, "shrink");
  CHECK_EQ (hc_tier_read (t, got, 4096, 8192), -EIO, "read past the new end");
  CHECK_EQ (hc_tier_read (t, got, 8192, 0), -EIO, "read across the new end");
  CHECK_EQ (hc_tier_read (t, got, 4096, 0), 0, "read before it");
  hc_tier_close (t);
  close (fd);
  unlink (path);

  /* Sizes round down to whole sectors. */
  sfd = temp_file (small, 1000);
  CHECK_EQ (hc_tier_open_file (small, 0, &t), 0, "open 1000 bytes");
  CHECK_EQ (hc_tier_size (t), 512u, "1000 bytes is one sector");
  CHECK_EQ (hc_tier_write (t, a, 1024, 0, 0), -EINVAL, "no second sector");
  hc_tier_close (t);
  CHECK (ftruncate (sfd, 100) == 0, "truncate to 100");
  CHECK_EQ (hc_tier_open_file (small, 0, &t), 0, "open 100 bytes");
  CHECK_EQ (hc_tier_size (t), 0u, "100 bytes is no sector");
  CHECK_EQ (hc_tier_read (t, got, 512, 0), -EINVAL, "nothing to read");
  hc_tier_close (t);
  close (sfd);
  unlink (small);

  /* What is not a file. */
  t = NULL;
  CHECK_EQ (hc_tier_open_file (test_tmp (), 0, &t), -EINVAL, "directory");
  CHECK_EQ (hc_tier_open_file (test_tmp (), HC_TIER_READONLY, &t), -EINVAL,
            "directory read-only");
  CHECK_EQ (hc_tier_open_file ("/dev/null", 0, &t), -EINVAL, "character device");
  snprintf (dir_no, sizeof dir_no, "%s/hc_tier_no/such", test_tmp ());
  CHECK_EQ (hc_tier_open_file (dir_no, 0, &t), -ENOENT, "missing");
  CHECK_EQ (hc_tier_open_file (path, 0, &t), -ENOENT, "removed");
  CHECK_EQ (hc_tier_open_file (path, 8, &t), -EINVAL, "unknown open flag");
  CHECK (t == NULL, "nothing returned on failure");
}

/* Claims: one writer, or any number of readers, and the holder named. */
static void
test_claim (void)
{
  char path[TMP_PATH], who[96], want[96];
  hc_tier *a = NULL, *b = NULL, *c = NULL;
  int fd;

  snprintf (path, sizeof path, "%s/hc_claim_XXXXXX", test_tmp ());
  fd = mkstemp (path);
  CHECK (fd >= 0 && ftruncate (fd, 1 << 20) == 0, "temp file");
  close (fd);
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM, &a), 0, "first claim");
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM, &b), -EBUSY, "second writer refused");
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM | HC_TIER_READONLY, &b), -EBUSY,
            "reader refused while a writer holds it");
  CHECK_EQ (hc_tier_open_file (path, 0, &b), 0, "an open without a claim is not refused");
  hc_tier_close (b);
  hc_tier_file_holder (path, who, sizeof who);
  snprintf (want, sizeof want, "process %ld (", (long) getpid ());
  CHECK (strncmp (who, want, strlen (want)) == 0, "holder named: %s", who);
  hc_tier_close (a);
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM | HC_TIER_READONLY, &b), 0, "reader");
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM | HC_TIER_READONLY, &c), 0, "readers share");
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM, &a), -EBUSY, "no writer while read");
  hc_tier_close (b);
  hc_tier_close (c);
  CHECK_EQ (hc_tier_open_file (path, HC_TIER_CLAIM, &a), 0, "released at close");
  hc_tier_close (a);
  unlink (path);
}

static void
test_model (void)
{
  struct hc_timing_params disk, flash, bad;
  hc_timing_model *m, *m2;
  double rot, xfer, us;

  hc_timing_defaults (&disk, true);
  hc_timing_defaults (&flash, false);
  CHECK (disk.rotational && disk.rpm == 7200 && disk.seek_min_ms == 0.5
         && disk.seek_max_ms == 16 && disk.disk_mb_s == 180, "disk defaults");
  CHECK (!flash.rotational && flash.read_us == 60 && flash.program_us == 200
         && flash.flash_mb_s == 500, "flash defaults");

  m = NULL;
  CHECK_EQ (hc_timing_model_new (NULL, GiB, &m), -EINVAL, "no params");
  bad = disk;
  bad.rpm = 0;
  CHECK_EQ (hc_timing_model_new (&bad, GiB, &m), -EINVAL, "no rotation");
  bad = disk;
  bad.seek_max_ms = 0.1;
  CHECK_EQ (hc_timing_model_new (&bad, GiB, &m), -EINVAL, "full stroke shorter than a hop");
  bad = flash;
  bad.flash_mb_s = -1;
  CHECK_EQ (hc_timing_model_new (&bad, GiB, &m), -EINVAL, "negative rate");
  CHECK (m == NULL, "nothing returned on failure");

  /* Disk: a first I/O seeks (minimum, from 0) and waits half a turn; the
   * next one, where it ended, is only transfer. */
  CHECK_EQ (hc_timing_model_new (&disk, GiB, &m), 0, "disk model");
  rot = 30e6 / 7200;
  xfer = 4096 / 180.0;
  us = hc_timing_model_io (m, false, 0, 4096);
  CHECK (close_to (us, 500 + rot + xfer), "first I/O: %f", us);
  us = hc_timing_model_io (m, true, 4096, 4096);
  CHECK (close_to (us, xfer), "sequential: %f", us);
  CHECK_EQ (hc_timing_model_io (m, false, 500 * MiB, 0), 0.0, "empty I/O is free");
  us = hc_timing_model_io (m, false, 8192, 4096);
  CHECK (close_to (us, xfer), "still sequential after an empty I/O: %f", us);
  /* Seek time goes with the root of the distance: 1/1024 of the disk costs
   * 1/32 of the stroke, a quarter costs half of it. */
  us = hc_timing_model_io (m, false, 12288 + MiB, 4096);
  CHECK (close_to (us, 500 + 15500 / 32.0 + rot + xfer), "near seek: %f", us);
  us = hc_timing_model_io (m, false, 16384 + MiB + GiB / 4, 4096);
  CHECK (close_to (us, 500 + 15500 / 2.0 + rot + xfer), "far seek: %f", us);
  /* Backwards counts the same; re-reading the same block is not
   * sequential. */
  us = hc_timing_model_io (m, false, 20480 + MiB, 4096);
  CHECK (close_to (us, 500 + 15500 / 2.0 + rot + xfer), "backward seek: %f", us);
  us = hc_timing_model_io (m, false, 20480 + MiB, 4096);
  CHECK (us > 500 + rot + xfer && us < 500 + 15500 / 32.0 + rot + xfer, "re-read: %f", us);
  us = hc_timing_model_io (m, false, 2 * GiB, 4096);
  CHECK (close_to (us, 16000 + rot + xfer), "beyond the capacity: full stroke: %f", us);
  hc_timing_model_free (m);
  hc_timing_model_free (NULL);

  /* Same transfer, far and near, from the same place. */
  CHECK_EQ (hc_timing_model_new (&disk, GiB, &m), 0, "model 2");
  CHECK_EQ (hc_timing_model_new (&disk, GiB, &m2), 0, "model 3");
  hc_timing_model_io (m, false, 0, 512);
  hc_timing_model_io (m2, false, 0, 512);
  CHECK (hc_timing_model_io (m, false, 900 * MiB, 512)
         > hc_timing_model_io (m2, false, 10 * MiB, 512), "far costs more than near");
  hc_timing_model_free (m);
  hc_timing_model_free (m2);

  /* Flash: latency per I/O plus transfer, wherever it is. */
  CHECK_EQ (hc_timing_model_new (&flash, GiB, &m), 0, "flash model");
  us = hc_timing_model_io (m, true, 100 * MiB, 8192);
  CHECK (close_to (us, 200 + 8192 / 500.0), "flash write: %f", us);
  us = hc_timing_model_io (m, true, 100 * MiB + 8192, 8192);
  CHECK (close_to (us, 200 + 8192 / 500.0), "sequential flash write: %f", us);
  us = hc_timing_model_io (m, false, 0, 4096);
  CHECK (close_to (us, 60 + 4096 / 500.0), "flash read: %f", us);
  CHECK_EQ (hc_timing_model_io (m, true, 0, 0), 0.0, "flash flush");
  hc_timing_model_free (m);

  /* What a request costs beyond its block, in block transfers: checked
   * against the model itself, pricing reads at random places. */
  CHECK_EQ (hc_timing_model_new (&disk, GiB, &m), 0, "model 4");
  double sum = 0, expect = hc_timing_request_blocks (&disk, 4096);
  uint64_t r = 88172645463325252u;
  const unsigned n = 200000;
  for (unsigned i = 0; i < n; i++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    sum += hc_timing_model_io (m, false, (r % (GiB / 4096 - 1)) * 4096, 4096);
  }
  us = sum / n - xfer; /* the mean wait of a random read */
  CHECK (us / xfer > expect * 0.99 && us / xfer < expect * 1.01,
         "random reads wait %.1f block transfers, the estimate says %.1f", us / xfer, expect);
  CHECK (expect > 560 && expect < 575, "a 4 KiB read on the default disk: %.1f", expect);
  CHECK (close_to (hc_timing_request_blocks (&flash, 4096), 60 / (4096 / 500.0)), "flash: %f",
         hc_timing_request_blocks (&flash, 4096));
  CHECK (close_to (hc_timing_request_blocks (&disk, 8192) * 2, expect), "twice the block, half");
  CHECK_EQ (hc_timing_request_blocks (&disk, 0), 0.0, "no block");
  CHECK_EQ (hc_timing_request_blocks (NULL, 4096), 0.0, "no params");
  bad = disk;
  bad.rpm = 0;
  CHECK_EQ (hc_timing_request_blocks (&bad, 4096), 0.0, "bad params");
  hc_timing_model_free (m);
}

/* The timing decorator: the suite over a flash and a disk model stacked on
 * memory; then, on fresh decorators, what is their own — I/O lands below,
 * and reads, writes and zeros are counted and priced (flush and discard
 * are free), and closing a decorator leaves the tier below open. */
static void
test_timing_tier (void)
{
  struct hc_timing_params flash, disk;
  hc_tier *mem, *t, *d;
  unsigned char a[8192], b[8192];
  double rus = -1, wus = -1;
  uint64_t reads = 99, writes = 99;

  hc_timing_defaults (&flash, false);
  hc_timing_defaults (&disk, true);
  CHECK_EQ (hc_tier_new_memory (MiB, &mem), 0, "memory");
  CHECK_EQ (hc_tier_new_timing (mem, &flash, &t), 0, "flash timing");
  tier_conformance (&t, "flash timing",
                    &(struct tier_caps) { .size = MiB, .caps = HC_CAP_DISCARD,
                                          .name = "timing(memory)", .zeroed = true });
  hc_tier_close (t);
  CHECK_EQ (hc_tier_zero (mem, 0, MiB), 0, "memory cleared");
  CHECK_EQ (hc_tier_new_timing (mem, &disk, &d), 0, "disk timing");
  tier_conformance (&d, "disk timing",
                    &(struct tier_caps) { .size = MiB, .caps = HC_CAP_DISCARD | HC_CAP_ROTATIONAL,
                                          .name = "timing(memory)", .zeroed = true });
  hc_tier_close (d);

  CHECK_EQ (hc_tier_timing_get (mem, &rus, &wus, &reads, &writes), -EINVAL, "not timing");
  CHECK_EQ (hc_tier_new_timing (NULL, &flash, &t), -EINVAL, "no lower");
  CHECK_EQ (hc_tier_new_timing (mem, NULL, &t), -EINVAL, "no params");
  CHECK_EQ (hc_tier_new_timing (mem, &flash, &t), 0, "flash timing");
  CHECK_EQ (hc_tier_timing_get (t, &rus, &wus, &reads, &writes), 0, "get");
  CHECK (rus == 0 && wus == 0 && reads == 0 && writes == 0, "starts at zero");

  fill (a, sizeof a, 3);
  CHECK_EQ (hc_tier_write (t, a, sizeof a, 4096, 0), 0, "write through");
  CHECK (tc_reads_as (mem, 4096, a, sizeof a), "landed below");
  CHECK (hc_tier_read (t, b, sizeof b, 4096) == 0 && memcmp (a, b, sizeof a) == 0,
         "read through");
  CHECK_EQ (hc_tier_flush (t), 0, "flush through");
  CHECK_EQ (hc_tier_discard (t, 4096, 512), 0, "discard through");
  CHECK (tc_reads_zero (mem, 4096, 512), "discarded below");
  CHECK_EQ (hc_tier_zero (t, 8192, 4096), 0, "zero through");
  CHECK (tc_reads_zero (mem, 8192, 4096) && tc_reads_as (mem, 4608, a + 512, 3584), "zeroed below");
  CHECK_EQ (hc_tier_read (t, b, 512, 3), -EINVAL, "refused at the door: not counted");
  CHECK_EQ (hc_tier_timing_get (t, &rus, &wus, &reads, &writes), 0, "get");
  CHECK (reads == 1 && writes == 2, "counts: %llu reads, %llu writes",
         (unsigned long long) reads, (unsigned long long) writes);
  CHECK (close_to (rus, 60 + 8192 / 500.0), "read time %f", rus);
  CHECK (close_to (wus, 200 + 8192 / 500.0 + 200 + 4096 / 500.0), "write time %f", wus);
  CHECK_EQ (hc_tier_timing_get (t, NULL, NULL, NULL, &writes), 0, "NULL outputs");
  hc_tier_close (t);

  /* A disk model over the same memory: seeks priced. */
  CHECK_EQ (hc_tier_new_timing (mem, &disk, &d), 0, "disk timing");
  CHECK_EQ (hc_tier_write (d, a, 4096, 0, 0), 0, "disk write");
  CHECK_EQ (hc_tier_write (d, a, 4096, 4096, HC_TIER_FUA), 0, "disk sequential write");
  CHECK_EQ (hc_tier_timing_get (d, NULL, &wus, NULL, &writes), 0, "get");
  CHECK (writes == 2 && close_to (wus, 500 + 30e6 / 7200 + 2 * 4096 / 180.0), "disk time %f",
         wus);
  hc_tier_close (d);

  /* Closing the decorators left the memory tier open (ASan would object
   * otherwise). */
  CHECK (tc_reads_as (mem, 0, a, 4096), "lower still open");
  hc_tier_close (mem);
}

int
main (int argc, char **argv)
{
  if (argc > 1) {
    if (argc == 2 && strcmp (argv[1], "direct") == 0) {
      int rc = test_direct ();
      return rc ? rc : test_exit ("test_tier direct");
    }
    fprintf (stderr, "usage: test_tier [direct]\n");
    return 2;
  }
  test_memory ();
  test_memory_image ();
  test_file ();
  test_claim ();
  test_model ();
  test_timing_tier ();
  return test_exit ("test_tier");
}
