/* libhintcache-preload.so: the interposers.
 *
 * Each one calls the real function (RESOLVE, from interposers.def) and
 * keeps its normal effect; around it, it tells the rest of the library
 * what happened: a write about to pass on (before_write, after_write), a
 * file's hint (F_SET_RW_HINT), advice for a range (posix_fadvise, sent at
 * once), an fd duplicated, closed or reused (the file table, and our own
 * socket), the program's own fallocate or ftruncate.  errno is preserved
 * across everything but the real call, and a call from inside the library
 * or from a signal handler on a thread that holds its lock (busy), or
 * before the configuration is read, passes straight through.
 */
#include "preload.h"

#include <sys/sendfile.h>

#include "hintcache/extents.h"

/* The real functions, from the one list. */
#define INTERPOSER(ret, name, params) ret (*real_##name) params;
#include "interposers.def"
#undef INTERPOSER

/* The sum of an iovec's lengths, read safely; 0 if unreadable. */
static uint64_t
iov_total (const struct iovec *iov, int cnt)
{
  struct iovec chunk[32];
  uint64_t total = 0;

  if (cnt <= 0 || cnt > IOV_MAX)
    return 0;
  for (int i = 0; i < cnt; i += 32) {
    int n = cnt - i < 32 ? cnt - i : 32;
    if (!safe_read (iov + i, chunk, (size_t) n * sizeof chunk[0]))
      return 0;
    for (int k = 0; k < n; k++)
      total += chunk[k].iov_len;
  }
  return min64 (total, SSIZE_MAX);
}

/* At most what a copy from in_fd (at *in_off, or its position) can bring. */
static uint64_t
copy_len (int in_fd, const off64_t *in_off, uint64_t len)
{
  struct stat st;
  off64_t pos;

  if (fstat (in_fd, &st) < 0)
    return 0;
  if (!S_ISREG (st.st_mode))
    return min64 (len, AHEAD_MAX);
  if (in_off) {
    if (!safe_read (in_off, &pos, sizeof pos))
      return 0;
  } else if ((pos = lseek (in_fd, 0, SEEK_CUR)) < 0)
    return 0;
  return pos >= st.st_size ? 0 : min64 (len, (uint64_t) (st.st_size - pos));
}

/* ---------------------------------------------------------------------------
 * Hints from calls: posix_fadvise, F_SET_RW_HINT
 */
static void
forward_fadvise (int fd, int64_t off, int64_t len, int advice)
{
  struct hc_wire w = { .n = 1, .v = { (uint64_t) advice } };
  struct hc_hint io = { 0 };
  const struct mount *m;
  struct stat st;
  char text[64];

  if (hc_codec_decode (cfg.fadvise, NULL, &w, HC_DIR_ANY, &io, NULL, 0) < 0 || empty_hint (io))
    return;
  if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode) || !(m = mount_of (st.st_dev)))
    return;
  uint64_t bs = 4096, size = (uint64_t) st.st_size;
  uint64_t a = down ((uint64_t) off, bs);
  uint64_t b = len == 0 || (uint64_t) len > UINT64_MAX - (uint64_t) off
                   ? up (size, bs) : min64 (up ((uint64_t) off + (uint64_t) len, bs), up (size, bs));
  if (a >= b)
    return;
  enter ();
  struct hc_hint h = effective_hint (file_find (st.st_dev, st.st_ino), io);
  int n = hc_hint_format (h, text, sizeof text);
  if (!empty_hint (h) && n > 0 && (size_t) n < sizeof text)
    send_extents (fd, m->offset, a, b, text);
  leave ();
}

static void
note_rw_hint (int fd, const void *arg)
{
  struct hc_wire w = { .n = 1 };
  struct hc_hint h = { 0 };
  const struct mount *m;
  struct stat st;
  uint64_t v;

  if (!safe_read (arg, &v, sizeof v) || fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)
      || !(m = mount_of (st.st_dev)))
    return;
  w.v[0] = v;
  if (hc_codec_decode (cfg.rwh, NULL, &w, HC_DIR_WRITE, &h, NULL, 0) < 0)
    h = (struct hc_hint) { 0 };
  h.flags = 0;
  enter ();
  struct fdent *d = fd_lookup (fd, &st, m);
  if (d) {
    struct file *f = d->f;
    bool had = f->has_hint;
    f->has_hint = !empty_hint (h);
    f->hint = h;
    if (had != f->has_hint) {
      if (f->has_hint)
        atomic_fetch_add (&file_hints, 1);
      else
        atomic_fetch_sub (&file_hints, 1);
    }
  }
  leave ();
}

/* ---------------------------------------------------------------------------
 * The interposers
 */
#define FAIL_NOSYS(ret)                                                                   \
  do {                                                                                    \
    errno = ENOSYS;                                                                       \
    return ret;                                                                           \
  } while (0)

/* A write interposer: NAME's PARAMS, passed on as ARGS to fd FD.  When
 * writes carry hints, before_write learns what is about to be written (at
 * offset OFF, or -1 for the fd's position; LEN bytes; APPEND for
 * RWF_APPEND) unless OFF is below LOWEST (a call the C library refuses, or
 * an offset it cannot read), and after_write that it returned.  errno is
 * the caller's again before the real call. */
#define WRITE_INTERPOSER(name, params, args, fd, off, lowest, len, append)               \
  PUBLIC ssize_t name params                                                            \
  {                                                                                     \
    if (!RESOLVE (name))                                                                \
      FAIL_NOSYS (-1);                                                                  \
    if (!want_write_hints ())                                                           \
      return real_##name args;                                                          \
    int saved = errno;                                                                  \
    int64_t at = (off);                                                                 \
    struct file *f = at >= (lowest) ? before_write ((fd), at, (len), (append)) : NULL;  \
    errno = saved;                                                                      \
    ssize_t r = real_##name args;                                                       \
    after_write (f);                                                                    \
    return r;                                                                           \
  }

/* Where a copy_file_range writes: -1 for out_fd's position, -2 if *out_off
 * cannot be read or is negative. */
static int64_t
copy_dest (const off64_t *out_off)
{
  off64_t off;

  if (!out_off)
    return -1;
  return safe_read (out_off, &off, sizeof off) && off >= 0 ? off : -2;
}

#define IOV_APPEND(flags) (((flags) & RWF_APPEND) != 0)

WRITE_INTERPOSER (write, (int fd, const void *buf, size_t n), (fd, buf, n), fd, -1, -1, n,
                  false)
WRITE_INTERPOSER (pwrite, (int fd, const void *buf, size_t n, off_t off),
                  (fd, buf, n, off), fd, off, 0, n, false)
WRITE_INTERPOSER (pwrite64, (int fd, const void *buf, size_t n, off64_t off),
                  (fd, buf, n, off), fd, off, 0, n, false)
WRITE_INTERPOSER (writev, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), fd,
                  -1, -1, iov_total (iov, cnt), false)
WRITE_INTERPOSER (pwritev, (int fd, const struct iovec *iov, int cnt, off_t off),
                  (fd, iov, cnt, off), fd, off, 0, iov_total (iov, cnt), false)
WRITE_INTERPOSER (pwritev64, (int fd, const struct iovec *iov, int cnt, off64_t off),
                  (fd, iov, cnt, off), fd, off, 0, iov_total (iov, cnt), false)
WRITE_INTERPOSER (pwritev2, (int fd, const struct iovec *iov, int cnt, off_t off, int flags),
                  (fd, iov, cnt, off, flags), fd, off, -1, iov_total (iov, cnt),
                  IOV_APPEND (flags))
WRITE_INTERPOSER (pwritev64v2,
                  (int fd, const struct iovec *iov, int cnt, off64_t off, int flags),
                  (fd, iov, cnt, off, flags), fd, off, -1, iov_total (iov, cnt),
                  IOV_APPEND (flags))
WRITE_INTERPOSER (copy_file_range,
                  (int in_fd, off64_t *in_off, int out_fd, off64_t *out_off, size_t len,
                       unsigned flags),
                  (in_fd, in_off, out_fd, out_off, len, flags), out_fd, copy_dest (out_off),
                  -1, copy_len (in_fd, in_off, len), false)
WRITE_INTERPOSER (sendfile, (int out_fd, int in_fd, off_t *off, size_t count),
                  (out_fd, in_fd, off, count), out_fd, -1, -1, copy_len (in_fd, off, count),
                  false)
WRITE_INTERPOSER (sendfile64, (int out_fd, int in_fd, off64_t *off, size_t count),
                  (out_fd, in_fd, off, count), out_fd, -1, -1, copy_len (in_fd, off, count),
                  false)

/* The calls posix_fadvise forwards. */
static bool
fadvise_forwarded (int advice)
{
  return advice == POSIX_FADV_WILLNEED || advice == POSIX_FADV_DONTNEED
         || advice == POSIX_FADV_NOREUSE || advice == POSIX_FADV_SEQUENTIAL;
}

/* posix_fadvise and posix_fadvise64: a range's advice is sent at once. */
#define FADVISE_INTERPOSER(name, off_type)                                             \
  PUBLIC int name (int fd, off_type off, off_type len, int advice)                     \
  {                                                                                    \
    if (!RESOLVE (name))                                                               \
      return ENOSYS;                                                                   \
    if (active () && fadvise_forwarded (advice) && off >= 0 && len >= 0) {             \
      int saved = errno;                                                               \
      forward_fadvise (fd, off, len, advice);                                          \
      errno = saved;                                                                   \
    }                                                                                  \
    return real_##name (fd, off, len, advice);                                         \
  }

FADVISE_INTERPOSER (posix_fadvise, off_t)
FADVISE_INTERPOSER (posix_fadvise64, off64_t)

/* After a successful fcntl: F_SET_RW_HINT, dups and O_APPEND changes. */
static void
after_fcntl (int fd, int cmd, void *arg, int ret)
{
  if (ret < 0 || !active ())
    return;
  int saved = errno;
  switch (cmd) {
  case F_SET_RW_HINT:
    note_rw_hint (fd, arg);
    break;
  case F_DUPFD:
  case F_DUPFD_CLOEXEC:
    dup_binding (fd, ret);
    break;
  case F_SETFL:
    if (atomic_load (&nbound) > 0) {
      enter ();
      struct fdent *d = fd_entry (fd);
      if (d)
        d->append = ((uintptr_t) arg & O_APPEND) != 0;
      leave ();
    }
    break;
  default:
    break;
  }
  errno = saved;
}

/* fcntl and fcntl64: every command takes at most one argument, passed on
 * as a pointer-sized word. */
#define FCNTL_INTERPOSER(name)                                                         \
  PUBLIC int name (int fd, int cmd, ...)                                               \
  {                                                                                    \
    va_list ap;                                                                        \
    va_start (ap, cmd);                                                                \
    void *arg = va_arg (ap, void *);                                                   \
    va_end (ap);                                                                       \
    if (!RESOLVE (name))                                                               \
      FAIL_NOSYS (-1);                                                                 \
    int r = real_##name (fd, cmd, arg);                                                \
    after_fcntl (fd, cmd, arg, r);                                                     \
    return r;                                                                          \
  }

FCNTL_INTERPOSER (fcntl)
FCNTL_INTERPOSER (fcntl64)

PUBLIC int
close (int fd)
{
  if (!RESOLVE (close))
    FAIL_NOSYS (-1);
  if (fd_bookkeeping ()) {
    int saved = errno;
    enter ();
    forget_fd (fd);
    leave ();
    errno = saved;
  }
  return real_close (fd);
}

PUBLIC int
fclose (FILE *fp)
{
  if (!RESOLVE (fclose))
    FAIL_NOSYS (EOF);
  if (fp && fd_bookkeeping ()) {
    int saved = errno;
    int fd = fileno (fp);
    if (fd >= 0) {
      enter ();
      forget_fd (fd);
      leave ();
    }
    errno = saved;
  }
  return real_fclose (fp);
}

PUBLIC int
close_range (unsigned first, unsigned last, int flags)
{
  if (!RESOLVE (close_range))
    FAIL_NOSYS (-1);
  if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last && fd_bookkeeping ()) {
    int saved = errno;
    forget_fd_range (first, last);
    errno = saved;
  }
  return real_close_range (first, last, flags);
}

PUBLIC void
closefrom (int low)
{
  if (!RESOLVE (closefrom))
    return;
  if (low >= 0 && fd_bookkeeping ()) {
    int saved = errno;
    forget_fd_range ((unsigned) low, UINT_MAX);
    errno = saved;
  }
  real_closefrom (low);
}

PUBLIC int
dup (int oldfd)
{
  if (!RESOLVE (dup))
    FAIL_NOSYS (-1);
  int r = real_dup (oldfd);
  if (r >= 0 && fd_bookkeeping ()) {
    int saved = errno;
    dup_binding (oldfd, r);
    errno = saved;
  }
  return r;
}

/* dup2 and dup3 close newfd first. */
static void
before_dup2 (int oldfd, int newfd)
{
  if (oldfd == newfd || newfd < 0 || !fd_bookkeeping ())
    return;
  int saved = errno;
  enter ();
  forget_fd (newfd);
  leave ();
  errno = saved;
}

/* dup2 and dup3: newfd is closed first, then bound like oldfd. */
#define DUP2_INTERPOSER(name, params, args)                                            \
  PUBLIC int name params                                                               \
  {                                                                                    \
    if (!RESOLVE (name))                                                               \
      FAIL_NOSYS (-1);                                                                 \
    before_dup2 (oldfd, newfd);                                                        \
    int r = real_##name args;                                                          \
    if (r >= 0 && fd_bookkeeping ()) {                                                 \
      int saved = errno;                                                               \
      dup_binding (oldfd, r);                                                          \
      errno = saved;                                                                   \
    }                                                                                  \
    return r;                                                                          \
  }

DUP2_INTERPOSER (dup2, (int oldfd, int newfd), (oldfd, newfd))
DUP2_INTERPOSER (dup3, (int oldfd, int newfd, int flags), (oldfd, newfd, flags))

/* The program's own fallocate: keep-size preallocation is its business
 * (never punch that file); punching or shifting makes the hinted range
 * stale. */
static void
before_fallocate (int fd, int mode)
{
  if (!fd_bookkeeping () || atomic_load (&nbound) == 0)
    return;
  int saved = errno;
  enter ();
  struct fdent *d = fd_entry (fd);
  if (d) {
    if ((mode & FALLOC_FL_KEEP_SIZE) && !(mode & FALLOC_FL_PUNCH_HOLE))
      d->f->no_punch = true;
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
      d->f->lo = d->f->hi = 0;
  }
  leave ();
  errno = saved;
}

#define FALLOCATE_INTERPOSER(name, off_type)                                           \
  PUBLIC int name (int fd, int mode, off_type off, off_type len)                       \
  {                                                                                    \
    if (!RESOLVE (name))                                                               \
      FAIL_NOSYS (-1);                                                                 \
    before_fallocate (fd, mode);                                                       \
    return real_##name (fd, mode, off, len);                                           \
  }

FALLOCATE_INTERPOSER (fallocate, off_t)
FALLOCATE_INTERPOSER (fallocate64, off64_t)

/* Before ftruncate: growing turns our preallocation past the end of file
 * into part of the file, so give it back first; shrinking frees blocks we
 * hinted, so withdraw their hints first. */
static void
before_ftruncate (int fd, int64_t length)
{
  struct stat st;

  if (length < 0 || !fd_bookkeeping () || atomic_load (&nbound) == 0 || !RESOLVE (fallocate))
    return;
  int saved = errno;
  enter ();
  struct fdent *d = fd_entry (fd);
  if (d && fstat (fd, &st) == 0 && st.st_dev == d->f->dev && st.st_ino == d->f->ino) {
    struct file *f = d->f;
    uint64_t size = (uint64_t) st.st_size;
    if ((uint64_t) length > size) {
      if (f->pre_hi > f->pre_lo) {
        uint64_t a = f->pre_lo, b = f->pre_hi;
        f->pre_lo = f->pre_hi = 0;
        give_back (f, fd, a, b);
      }
    } else {
      uint64_t a = max64 (up ((uint64_t) length, f->bs), f->lo), b = max64 (f->hi, f->pre_hi);
      if (f->hi > f->lo && a < b && sock_ready ())
        send_extents (fd, f->devoff, a, b, NULL);
      f->pre_lo = f->pre_hi = 0;
    }
    f->lo = f->hi = 0;
    f->last_size = min64 (size, (uint64_t) length);
  }
  leave ();
  errno = saved;
}

#define FTRUNCATE_INTERPOSER(name, off_type)                                           \
  PUBLIC int name (int fd, off_type length)                                            \
  {                                                                                    \
    if (!RESOLVE (name))                                                               \
      FAIL_NOSYS (-1);                                                                 \
    before_ftruncate (fd, length);                                                     \
    return real_##name (fd, length);                                                   \
  }

FTRUNCATE_INTERPOSER (ftruncate, off_t)
FTRUNCATE_INTERPOSER (ftruncate64, off64_t)
