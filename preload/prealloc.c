/* libhintcache-preload.so: working ahead of writers, and giving back.
 *
 * Before a hinted write passes on, its range must be placed (the blocks
 * chosen) and hinted, or the flusher writes the data first.  So the write
 * and a chunk past it — 1 MiB, doubling to 8 MiB as a sequential run grows,
 * nothing ahead when free space is short or the fd appends — are
 * preallocated (FALLOC_FL_KEEP_SIZE; inside the end of file only the holes
 * the write fills), their extents read (FIEMAP) and sent as "advise"
 * requests; writes inside the range already hinted pay a table lookup
 * only.  What was preallocated past the end of file is given back at the
 * file's last writable close (or when a write leaves a gap over it, or an
 * ftruncate grows the file): "unadvise" for its extents, then a punched
 * hole, or on ext4 a truncation to the size, the modification time put
 * back after — unless another writer may be at work, then it is kept.
 */
#include "preload.h"

#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "hintcache/extents.h"

/* Gives back our preallocation in [a, b) past the end of file: unadvise
 * its extents, punch it out.  Kept (not given back) when another writer
 * may be at work.
 *
 * ext4 does not punch past the end of file (it returns 0 and frees
 * nothing); there only truncating to the size frees those blocks, and it
 * frees all of them past the end of file: so it is done when blocks are
 * left in [a, b) and there are none past b (nothing past the end of file is
 * anyone's but ours), the size checked right before.  Both the punch (even
 * ext4's that frees nothing) and ftruncate set the modification time: it
 * is put back to what it was, since the program may have set it (cp -p,
 * tar and rsync -t do, before closing). */
void
give_back (struct file *f, int fd, uint64_t a, uint64_t b)
{
  struct stat st;
  struct hc_extent_list x;

  if (a >= b)
    return;
  if (f->no_punch || !RESOLVE (fallocate) || atomic_load (&f->inflight) > 0 || fstat (fd, &st) < 0) {
    stats.kept++;
    return;
  }
  uint64_t size = (uint64_t) st.st_size;
  if (size > max64 (f->last_size, f->max_end)) {
    stats.kept++; /* it grew beyond what this process wrote */
    return;
  }
  a = max64 (a, up (size, f->bs));
  if (a >= b)
    return;
  const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, st.st_mtim };
  send_extents (fd, f->devoff, a, b, NULL);
  if (fstat (fd, &st) < 0 || (uint64_t) st.st_size != size
      || real_fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) a,
                         (off_t) (b - a)) < 0) {
    stats.kept++;
    return;
  }
  if (hc_file_extents (fd, a, UINT64_MAX, 0, &x) == 0) {
    uint64_t last = 0;
    for (size_t i = 0; i < x.n; i++)
      last = max64 (last, x.e[i].logical + x.e[i].length);
    bool foreign = x.unplaced > 0 || last > b;
    hc_extent_list_free (&x);
    /* Blocks left (ext4): truncate, if they are only ours. */
    if (last > 0
        && (foreign || !RESOLVE (ftruncate) || fstat (fd, &st) < 0
            || (uint64_t) st.st_size != size || real_ftruncate (fd, (off_t) size) < 0))
      stats.kept++;
  }
  if (fstat (fd, &st) == 0 && (uint64_t) st.st_size == size)
    (void) futimens (fd, times);
}

/* The file's last writable fd (fd) is going: give back everything. */
void
give_back_all (struct file *f, int fd)
{
  uint64_t a = f->pre_lo, b = f->pre_hi;

  f->pre_lo = f->pre_hi = 0;
  f->lo = f->hi = 0;
  give_back (f, fd, a, b);
}

/* Whether the filesystem has room to work ahead by `bytes` without
 * getting anywhere near full. */
static bool
room_for (int fd, uint64_t bytes)
{
  struct statvfs sv;

  if (fstatvfs (fd, &sv) < 0)
    return false;
  uint64_t avail = (uint64_t) sv.f_bavail * sv.f_frsize;
  return avail / 16 >= bytes && sv.f_bavail >= sv.f_blocks / 100;
}

/* Preallocates the holes of [a, b) (inside the end of file), unless data
 * not placed yet is there (delayed allocation: left to the flusher).
 * Returns false if fallocate failed. */
static bool
fill_holes (struct file *f, int fd, uint64_t a, uint64_t b)
{
  struct hc_extent_list x;
  uint64_t cov = a;

  if (hc_file_extents (fd, a, b - a, 0, &x) < 0)
    return true;
  for (size_t i = 0; i < x.n; i++)
    if (x.e[i].logical <= cov)
      cov = max64 (cov, x.e[i].logical + x.e[i].length);
  bool delayed = x.unplaced > 0;
  hc_extent_list_free (&x);
  if (cov >= b)
    return true;
  if (delayed) {
    stats.unplaced++;
    return true;
  }
  if (real_fallocate (fd, FALLOC_FL_KEEP_SIZE, (off_t) a, (off_t) (b - a)) < 0) {
    stats.prealloc_failed++;
    if (errno == EOPNOTSUPP || errno == ENOSYS)
      f->no_prealloc = true;
    return false;
  }
  return true;
}

/* Whether a write at off leaves a gap past the end of file (size) over
 * blocks we preallocated (even inside the hinted range). */
static bool
gap_over_prealloc (const struct file *f, uint64_t size, uint64_t off)
{
  return off > size && f->pre_hi > f->pre_lo
         && max64 (up (size, f->bs), f->pre_lo) < min64 (f->pre_hi, down (off, f->bs));
}

/* A write of [off, end) with hint h goes beyond the hinted range (or
 * leaves a gap past the end of file over our preallocation): place and
 * hint the next chunk. */
static void
extend (struct file *f, int fd, uint64_t size, uint64_t off, uint64_t end, struct hc_hint h,
        bool append)
{
  uint64_t bs = f->bs;
  char text[64];

  if (!same_hint (f->hinted, h) || off < f->lo || off > f->hi) {
    f->lo = f->hi = down (off, bs);
    f->hinted = h;
  }
  /* A write past the end of file leaves a gap over our preallocation: give
   * our blocks back, so that the gap stays a hole as it would without us.
   * All of them (on ext4 only truncating frees blocks past the end of file,
   * and it frees them all; see give_back), and the write is placed anew.
   * Not while another thread's write is in flight: give_back would keep
   * them, and they would be forgotten, not given back at the last close.
   * Even when the socket has failed since we preallocated (no need of it). */
  if (gap_over_prealloc (f, size, off) && atomic_load (&f->inflight) == 0) {
    give_back (f, fd, max64 (up (size, bs), f->pre_lo), f->pre_hi);
    f->pre_lo = f->pre_hi = 0;
    f->lo = f->hi = down (off, bs);
  }
  if (!sock_ready ()) {
    stats.dropped++;
    return;
  }
  int tn = hc_hint_format (h, text, sizeof text);
  if (tn < 0 || (size_t) tn >= sizeof text)
    return;
  if (!f->checked) {
    /* Blocks past the end of file already: the program's own
     * preallocation (or an earlier run's).  Never punch this file. */
    struct hc_extent_list x;
    if (hc_file_extents (fd, up (size, bs), UINT64_MAX, 0, &x) == 0) {
      f->no_punch = x.n > 0 || x.unplaced > 0;
      hc_extent_list_free (&x);
    }
    f->checked = true;
  }
  uint64_t ahead = 0;
  if (!append && !f->no_punch) {
    ahead = min64 (max64 (f->hi - f->lo, AHEAD_MIN), AHEAD_MAX);
    if (!room_for (fd, ahead + (end - off)))
      ahead = 0;
  }
  uint64_t from = f->hi, to = up (max64 (end, from) + ahead, bs);
  bool failed = false;

  /* Inside the end of file: only the holes the write itself fills. */
  uint64_t ia = max64 (down (off, bs), from), ib = min64 (up (end, bs), up (size, bs));
  if (ia < ib && !fill_holes (f, fd, ia, ib))
    failed = true;
  /* Past the end of file: the whole chunk. */
  uint64_t pa = max64 (from, up (size, bs));
  if (pa < to && !f->no_prealloc) {
    if (f->pre_hi <= f->pre_lo) {
      f->pre_lo = pa;
      f->pre_hi = to;
    } else {
      f->pre_lo = min64 (f->pre_lo, pa);
      f->pre_hi = max64 (f->pre_hi, to);
    }
    if (real_fallocate (fd, FALLOC_FL_KEEP_SIZE, (off_t) pa, (off_t) (to - pa)) < 0) {
      int err = errno;
      stats.prealloc_failed++;
      failed = true;
      if (err == EOPNOTSUPP || err == ENOSYS) {
        f->no_prealloc = true;
        warn ("cannot preallocate on this filesystem (%s): written data gets no hints",
              strerror (err));
      }
    }
  }
  if (f->no_prealloc) {
    f->hi = to;
    return;
  }
  uint64_t cov = send_extents (fd, f->devoff, from, to, text);
  f->hi = failed ? to : max64 (min64 (up (end, bs), to), cov);
}

/* fstat without the times, for the per-write path: device, inode, mode,
 * size and block size.  Not asking for timestamps matters: on kernels with
 * multigrain timestamps, reading a file's ctime makes its next write take
 * a fresh timestamp and dirty the inode (a journal update on ext4), which
 * more than doubled the cost of a small write. */
static int
stat_fd (int fd, struct stat *st)
{
  struct statx x;

  if (statx (fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE, &x) < 0)
    return -1;
  memset (st, 0, sizeof *st);
  st->st_dev = makedev (x.stx_dev_major, x.stx_dev_minor);
  st->st_ino = x.stx_ino;
  st->st_mode = x.stx_mode;
  st->st_size = (off_t) x.stx_size;
  st->st_blksize = x.stx_blksize;
  return 0;
}

/* Everything before a write of len bytes to fd passes on: off is the
 * offset, or -1 for the fd's position; append says RWF_APPEND.  Returns
 * the file, whose in-flight count after_write drops, or NULL. */
struct file *
before_write (int fd, int64_t off, uint64_t len, bool append)
{
  struct stat st;
  const struct mount *m;
  struct file *f = NULL;
  int saved = errno;

  if (len == 0 || (off < 0 && off != -1))
    goto out;
  /* The common case, without a system call: a positioned write inside the
   * range already placed and hinted with the same hint, on an fd bound to
   * its file, not past the end of file as last seen (no gap to mind).  What
   * this cannot see is a truncation by another process since the last write
   * that went the long way; blocks re-allocated there may then miss their
   * hint (never anything of the program's). */
  enter ();
  struct fdent *d = fd_entry (fd);
  bool done = false;
  if (d && d->writable) {
    struct file *g = d->f;
    struct hc_hint h = effective_hint (g, (struct hc_hint) { 0 });
    uint64_t end = off >= 0 ? (uint64_t) off + len : 0;
    if (empty_hint (h) || g->no_prealloc) {
      /* the long way decides */
    } else if (sock_fd < 0 && g->pre_hi <= g->pre_lo && hc_clock_ns (CLOCK_MONOTONIC) < retry_at) {
      /* The socket is down and nothing of ours is in the file to mind:
       * nothing to place or send. */
      stats.dropped++;
      done = true;
    } else if (off >= 0 && !append && !d->append && (uint64_t) off <= (uint64_t) INT64_MAX - len
               && same_hint (g->hinted, h) && (uint64_t) off >= g->lo && end <= g->hi
               && (uint64_t) off <= g->last_size) {
      g->max_end = max64 (g->max_end, end);
      atomic_fetch_add (&g->inflight, 1);
      f = g;
      done = true;
    }
  }
  leave ();
  if (done)
    goto out;
  if (!RESOLVE (fcntl) || !RESOLVE (fallocate) || stat_fd (fd, &st) < 0 || !S_ISREG (st.st_mode)
      || !(m = mount_of (st.st_dev)))
    goto out;
  enter ();
  d = fd_lookup (fd, &st, m);
  if (!d || !d->writable)
    goto unlock;
  /* The size again, under the lock: another thread's write may have grown
   * the file since the fstat above and set last_size, and the stale size
   * would look like a truncation (forgetting the preallocation). */
  if (stat_fd (fd, &st) < 0)
    goto unlock;
  f = d->f;
  uint64_t size = (uint64_t) st.st_size;
  if (size < f->last_size) {
    /* Truncated behind our back: its blocks are gone. */
    f->lo = f->hi = 0;
    f->pre_lo = f->pre_hi = 0;
  }
  f->last_size = size;
  struct hc_hint h = effective_hint (f, (struct hc_hint) { 0 });
  if (empty_hint (h) || f->no_prealloc) {
    f = NULL;
    goto unlock;
  }
  uint64_t start;
  if (append || d->append)
    start = size;
  else if (off >= 0)
    start = (uint64_t) off;
  else {
    off_t pos = lseek (fd, 0, SEEK_CUR);
    if (pos < 0) {
      f = NULL;
      goto unlock;
    }
    start = (uint64_t) pos;
  }
  if (start > (uint64_t) INT64_MAX - len) {
    f = NULL;
    goto unlock;
  }
  uint64_t end = start + len;
  f->max_end = max64 (f->max_end, end);
  if (!same_hint (f->hinted, h) || start < f->lo || end > f->hi
      || (gap_over_prealloc (f, size, start) && atomic_load (&f->inflight) == 0))
    extend (f, fd, size, start, end, h, append || d->append);
  atomic_fetch_add (&f->inflight, 1);
unlock:
  leave ();
out:
  errno = saved;
  return f;
}
