/* The file tier: a regular file or a block device, driven with pread/pwrite.
 *
 * The size is fixed when the tier is opened (the file's size, or the
 * device's, rounded down to a sector), and the door keeps every I/O inside
 * it; a read that still meets end-of-file means the file shrank under us,
 * which is reported as -EIO rather than papered over with zeros.  Reads and
 * writes loop, since pread/pwrite may transfer less than asked and may be
 * interrupted by a signal.
 *
 * Durability: a FUA write uses pwritev2 with RWF_DSYNC, so only that write
 * waits for stable media; kernels or filesystems that refuse the flag get an
 * ordinary write followed by fdatasync, which is stronger (it flushes
 * everything) but correct.  Flush is fdatasync: the tier's size never
 * changes, so the metadata fsync would add is not needed.
 *
 * Discard punches a hole (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE); on a
 * block device the kernel turns that into a zero-out that may unmap, and —
 * unlike BLKDISCARD, whose later reads are unspecified on many devices — it
 * guarantees that reads return zeros, as the tier contract demands.  Zero
 * uses FALLOC_FL_ZERO_RANGE.  Where the filesystem or device supports
 * neither, both fall back to writing zeros.
 *
 * Faults are injected by the fault decorator (faulty.c) over any tier, so
 * the system calls here are plain calls.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tier.h"
#include "util.h"

/* Alignment of the zero buffer used with O_DIRECT: a page satisfies every
 * logical block size in practice. */
#define DIRECT_ALIGN 4096
/* Size of that buffer. */
#define ZERO_CHUNK ((size_t) 1 << 20)

struct file_tier {
  hc_tier base;
  int fd;
  bool readonly;
  bool direct; /* opened with O_DIRECT: buffers must be aligned */
};

/* fdatasync, retried if a signal interrupts it. */
static int
sync_data (int fd)
{
  while (fdatasync (fd) < 0) {
    if (errno != EINTR)
      return -errno;
  }
  return 0;
}

/* True for the errors that mean "this kind of request is not supported
 * here", after which a slower equivalent is tried. */
static bool
unsupported (int rc)
{
  return rc == -EOPNOTSUPP || rc == -ENOSYS || rc == -ENODEV;
}

enum how { READ, WRITE, WRITE_DSYNC };

/* Reads or writes exactly len bytes at off.  WRITE_DSYNC writes so that
 * the data is on stable media when it returns: RWF_DSYNC where the kernel
 * and filesystem take it, else write + fdatasync. */
static int
transfer (int fd, void *buf, size_t len, uint64_t off, enum how how)
{
  unsigned char *p = buf;

  while (len) {
    struct iovec iov = { .iov_base = p, .iov_len = len };
    ssize_t n = how == READ    ? pread (fd, p, len, (off_t) off)
                : how == WRITE ? pwrite (fd, p, len, (off_t) off)
                               : pwritev2 (fd, &iov, 1, (off_t) off, RWF_DSYNC);
    if (n < 0) {
      int rc = -errno;
      if (rc == -EINTR)
        continue;
      /* Old kernels reject the flag (EOPNOTSUPP) or the call (ENOSYS);
       * some filesystems answer EINVAL.  What is already written by a
       * partial RWF_DSYNC write is durable, so only the rest is redone. */
      if (how == WRITE_DSYNC && (unsupported (rc) || rc == -EINVAL)) {
        rc = transfer (fd, p, len, off, WRITE);
        return rc < 0 ? rc : sync_data (fd);
      }
      return rc;
    }
    /* End of file inside the tier (the file shrank since it was opened),
     * or a write that makes no progress (it would loop forever). */
    if (n == 0)
      return -EIO;
    p += n;
    off += (uint64_t) n;
    len -= (size_t) n;
  }
  return 0;
}

static inline int
read_all (int fd, void *buf, size_t len, uint64_t off)
{
  return transfer (fd, buf, len, off, READ);
}

static inline int
write_all (int fd, const void *buf, size_t len, uint64_t off)
{
  return transfer (fd, (void *) buf, len, off, WRITE);
}

/* fallocate, retried if a signal interrupts it. */
static int
allocate (int fd, int mode, uint64_t off, uint64_t len)
{
  while (fallocate (fd, mode, (off_t) off, (off_t) len) < 0) {
    if (errno != EINTR)
      return -errno;
  }
  return 0;
}

/* Writes zeros with ordinary writes; with O_DIRECT the door's fallback
 * buffer is not aligned, so an aligned one is used instead. */
static int
zero_by_writes (struct file_tier *f, uint64_t off, uint64_t len)
{
  void *zeros;
  int rc = 0;

  if (!f->direct)
    return hc_tier_zero_by_writes (&f->base, off, len);
  if (posix_memalign (&zeros, DIRECT_ALIGN, ZERO_CHUNK))
    return -ENOMEM;
  memset (zeros, 0, ZERO_CHUNK);
  while (len && rc == 0) {
    size_t n = len < ZERO_CHUNK ? (size_t) len : ZERO_CHUNK;
    rc = write_all (f->fd, zeros, n, off);
    off += n;
    len -= n;
  }
  free (zeros);
  return rc;
}

/* Reads through pread. */
static int
file_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  struct file_tier *f = (struct file_tier *) t;

  return read_all (f->fd, buf, len, off);
}

/* Writes through pwrite, or durably with HC_TIER_FUA. */
static int
file_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  struct file_tier *f = (struct file_tier *) t;

  if (f->readonly)
    return -EROFS;
  if (flags & HC_TIER_FUA)
    return transfer (f->fd, (void *) buf, len, off, WRITE_DSYNC);
  return write_all (f->fd, buf, len, off);
}

/* Makes completed writes durable. */
static int
file_flush (hc_tier *t)
{
  return sync_data (((struct file_tier *) t)->fd);
}

/* Makes a range read back as zeros with fallocate's `mode`, or by writing
 * zeros where the filesystem or device cannot. */
static int
fill_zeros (hc_tier *t, uint64_t off, uint64_t len, int mode)
{
  struct file_tier *f = (struct file_tier *) t;
  int rc;

  if (f->readonly)
    return -EROFS;
  rc = allocate (f->fd, mode, off, len);
  return unsupported (rc) ? zero_by_writes (f, off, len) : rc;
}

/* Releases a range so that it reads back as zeros. */
static int
file_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  return fill_zeros (t, off, len, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
}

/* Zeros a range, letting the filesystem or device do it where it can.
 * KEEP_SIZE: block devices insist on it, and for files the range is inside
 * the file anyway. */
static int
file_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  return fill_zeros (t, off, len, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE);
}

/* Starts the kernel's readahead of a range into the page cache. */
static int
file_prefetch (hc_tier *t, uint64_t off, uint64_t len)
{
  struct file_tier *f = (struct file_tier *) t;

  return -posix_fadvise (f->fd, (off_t) off, (off_t) len, POSIX_FADV_WILLNEED);
}

/* Closes the descriptor and frees the tier. */
static void
file_close (hc_tier *t)
{
  struct file_tier *f = (struct file_tier *) t;

  close (f->fd);
  free (f);
}

static const struct hc_tier_ops file_ops = {
  .kind = "file",
  .read = file_read,
  .write = file_write,
  .flush = file_flush,
  .discard = file_discard,
  .zero = file_zero,
  .prefetch = file_prefetch,
  .close = file_close,
};

/* Whether sysfs calls the block device `rdev` rotational; best effort, so
 * anything unreadable counts as not rotational. */
static bool
is_rotational (dev_t rdev)
{
  char path[96], *text;
  size_t len;
  bool rot;

  snprintf (path, sizeof path, "/sys/dev/block/%u:%u/queue/rotational", major (rdev),
            minor (rdev));
  if (hc_read_small_file (path, 16, &text, &len) < 0) {
    /* A partition has no queue of its own; its disk's is one level up. */
    snprintf (path, sizeof path, "/sys/dev/block/%u:%u/../queue/rotational", major (rdev),
              minor (rdev));
    if (hc_read_small_file (path, 16, &text, &len) < 0)
      return false;
  }
  rot = len > 0 && text[0] == '1';
  free (text);
  return rot;
}

/* Finds the size and capabilities of the open file fd. */
static int
probe (int fd, bool readonly, uint64_t *size, unsigned *caps)
{
  struct stat st;

  if (fstat (fd, &st) < 0)
    return -errno;
  /* A read-only tier can neither force writes nor release space. */
  *caps = HC_CAP_PERSISTENT | (readonly ? 0 : HC_CAP_FUA | HC_CAP_DISCARD);
  if (S_ISREG (st.st_mode)) {
    *size = (uint64_t) st.st_size;
  } else if (S_ISBLK (st.st_mode)) {
    if (ioctl (fd, BLKGETSIZE64, size) < 0)
      return -errno;
    if (is_rotational (st.st_rdev))
      *caps |= HC_CAP_ROTATIONAL;
  } else {
    return -EINVAL;
  }
  *size -= *size % HC_SECTOR_SIZE;
  return 0;
}

/* The stable name of block device `rdev`: its first /dev/disk/by-id link
 * in name order, a "wwn-" one first (the world-wide name is the device's
 * own; other names there come from its model and serial number).  Left ""
 * when udev has named nothing. */
static void
block_identity (dev_t rdev, char *buf, size_t len)
{
  DIR *d = opendir ("/dev/disk/by-id");
  struct dirent *e;
  struct stat st;
  char path[320];

  buf[0] = '\0';
  if (!d)
    return;
  while ((e = readdir (d))) {
    if (e->d_name[0] == '.' || strlen (e->d_name) >= len)
      continue;
    snprintf (path, sizeof path, "/dev/disk/by-id/%s", e->d_name);
    if (stat (path, &st) < 0 || !S_ISBLK (st.st_mode) || st.st_rdev != rdev)
      continue;
    bool wwn = strncmp (e->d_name, "wwn-", 4) == 0, had = strncmp (buf, "wwn-", 4) == 0;
    if (!buf[0] || (wwn && !had) || (wwn == had && strcmp (e->d_name, buf) < 0))
      snprintf (buf, len, "%s", e->d_name);
  }
  closedir (d);
}

/* The claim: flock on the file (shared when read-only, so that readers
 * exclude only writers); a block device opened for writing also gets
 * O_EXCL, which the kernel holds against mounts and other claimants. */
static int
claim (int fd, bool readonly)
{
  if (flock (fd, (readonly ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
    return errno == EWOULDBLOCK ? -EBUSY : -errno;
  return 0;
}

void
hc_tier_file_holder (const char *path, char *buf, size_t len)
{
  struct stat st;
  char line[256], comm[64] = "";
  FILE *f;
  long pid = 0;

  snprintf (buf, len, "another process");
  if (stat (path, &st) < 0 || !(f = fopen ("/proc/locks", "re")))
    return;
  /* "1: FLOCK  ADVISORY  WRITE 1234 08:01:56789 0 EOF" */
  while (!pid && fgets (line, sizeof line, f)) {
    char kind[16];
    long p;
    unsigned maj, min;
    unsigned long long ino;
    if (sscanf (line, "%*s %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min, &ino) == 5
        && strcmp (kind, "FLOCK") == 0 && ino == st.st_ino
        && makedev (maj, min) == st.st_dev)
      pid = p;
  }
  fclose (f);
  if (!pid)
    return;
  snprintf (line, sizeof line, "/proc/%ld/comm", pid);
  if ((f = fopen (line, "re"))) {
    if (fgets (comm, sizeof comm, f))
      comm[strcspn (comm, "\n")] = '\0';
    fclose (f);
  }
  snprintf (buf, len, "process %ld%s%s%s", pid, comm[0] ? " (" : "", comm, comm[0] ? ")" : "");
}

int
hc_tier_open_file (const char *path, unsigned flags, hc_tier **out)
{
  const unsigned known = HC_TIER_READONLY | HC_TIER_DIRECT | HC_TIER_CLAIM;
  bool readonly = flags & HC_TIER_READONLY;
  /* O_NONBLOCK only for the open itself: a FIFO must not hang it (it is
   * refused just after); O_NOCTTY so a terminal is never adopted. */
  int oflags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  char name[sizeof ((hc_tier *) 0)->name];
  struct file_tier *f = NULL;
  unsigned caps = 0;
  uint64_t size;
  int fd, fl, rc;

  if (!path || !out || (flags & ~known))
    return -EINVAL;
  if (flags & HC_TIER_DIRECT)
    oflags |= O_DIRECT;
  if ((flags & HC_TIER_CLAIM) && !readonly) {
    struct stat st;
    if (stat (path, &st) == 0 && S_ISBLK (st.st_mode))
      oflags |= O_EXCL;
  }
  fd = open (path, oflags);
  if (fd < 0)
    /* Opening a directory for writing fails with EISDIR; it is refused
     * for not being a file, read-only or not, so say so consistently. */
    return errno == EISDIR ? -EINVAL : -errno;
  rc = probe (fd, readonly, &size, &caps);
  if (rc == 0 && (flags & HC_TIER_CLAIM))
    rc = claim (fd, readonly);
  if (rc == 0 && ((fl = fcntl (fd, F_GETFL)) < 0 || fcntl (fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
    rc = -errno;
  if (rc == 0 && !(f = calloc (1, sizeof *f)))
    rc = -ENOMEM;
  if (rc < 0) {
    close (fd);
    return rc;
  }
  f->fd = fd;
  f->readonly = readonly;
  f->direct = flags & HC_TIER_DIRECT;
  if (!f->direct) /* O_DIRECT reads bypass the page cache */
    caps |= HC_CAP_PREFETCH;
  snprintf (name, sizeof name, "file:%s", path);
  hc_tier_init (&f->base, &file_ops, size, caps, name);
  struct stat st;
  if (fstat (fd, &st) == 0 && S_ISBLK (st.st_mode))
    block_identity (st.st_rdev, f->base.ident, sizeof f->base.ident);
  *out = &f->base;
  return 0;
}
