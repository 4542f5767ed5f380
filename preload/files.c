/* libhintcache-preload.so: the files and fds the program writes.
 *
 * A file (device + inode) is what the library works ahead on: the range
 * already placed and hinted, the hint it was sent with, what it
 * preallocated past the end of file, whether it may give that back, and
 * the F_SET_RW_HINT hint of the file.  They are in a hash table, created
 * at the first hinted write (or F_SET_RW_HINT) and freed when no fd, hint
 * or write in flight uses them any more.  An fd table maps the program's
 * fds to their files, with O_APPEND and whether the fd writes: several fds
 * (dup, F_DUPFD, another open) share one file, and giving back waits for
 * its last writable fd to go (close, fclose, dup2/dup3 over it,
 * close_range, closefrom; or exit).
 *
 * Everything here runs under the lock.
 */
#include "preload.h"

static struct file *buckets[NBUCKETS];
static unsigned creations;
atomic_uint file_hints; /* files with has_hint */

static struct fdent *fdtab;
static size_t nfdtab;
atomic_uint nbound;

static unsigned
bucket_of (dev_t dev, ino_t ino)
{
  uint64_t h = ((uint64_t) ino ^ ((uint64_t) dev << 32)) * 0x9e3779b97f4a7c15ull;
  return (unsigned) (h >> 56) % NBUCKETS;
}

struct file *
file_find (dev_t dev, ino_t ino)
{
  for (struct file *f = buckets[bucket_of (dev, ino)]; f; f = f->next)
    if (f->dev == dev && f->ino == ino)
      return f;
  return NULL;
}

static bool
file_unused (const struct file *f)
{
  return f->fds == 0 && !f->has_hint && atomic_load (&f->inflight) == 0;
}

/* Frees the files nobody uses any more (a write in flight can keep one
 * alive after its last fd is gone; it is collected later). */
static void
file_sweep (void)
{
  for (unsigned i = 0; i < NBUCKETS; i++)
    for (struct file **p = &buckets[i]; *p;) {
      struct file *f = *p;
      if (file_unused (f)) {
        *p = f->next;
        free (f);
      } else
        p = &f->next;
    }
}

static struct file *
file_get (const struct stat *st, const struct mount *m)
{
  struct file *f = file_find (st->st_dev, st->st_ino);

  if (f)
    return f;
  if (++creations % 256 == 0)
    file_sweep ();
  if (!(f = calloc (1, sizeof *f)))
    return NULL;
  f->dev = st->st_dev;
  f->ino = st->st_ino;
  f->devoff = m->offset;
  f->bs = st->st_blksize >= 512 && st->st_blksize <= (1 << 20)
              && (st->st_blksize & (st->st_blksize - 1)) == 0 ? (uint64_t) st->st_blksize : 4096;
  f->last_size = (uint64_t) st->st_size;
  unsigned b = bucket_of (f->dev, f->ino);
  f->next = buckets[b];
  buckets[b] = f;
  return f;
}

static void
file_maybe_free (struct file *f)
{
  if (!file_unused (f))
    return;
  for (struct file **p = &buckets[bucket_of (f->dev, f->ino)]; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      free (f);
      return;
    }
}

struct fdent *
fd_entry (int fd)
{
  return fd >= 0 && (size_t) fd < nfdtab && fdtab[fd].f ? &fdtab[fd] : NULL;
}

/* Unbinds fd from its file (no giving back).  Returns the file, or NULL. */
static struct file *
fd_unbind (int fd, bool *writable)
{
  struct fdent *d = fd_entry (fd);
  struct file *f;

  if (!d)
    return NULL;
  f = d->f;
  f->fds--;
  if (d->writable)
    f->wfds--;
  if (writable)
    *writable = d->writable;
  d->f = NULL;
  atomic_fetch_sub (&nbound, 1);
  return f;
}

static bool
fd_bind (int fd, struct file *f, bool append, bool writable)
{
  if (fd < 0)
    return false;
  if ((size_t) fd >= nfdtab) {
    size_t n = nfdtab ? nfdtab : 64;
    while (n <= (size_t) fd)
      n *= 2;
    struct fdent *t = realloc (fdtab, n * sizeof *t);
    if (!t)
      return false;
    memset (t + nfdtab, 0, (n - nfdtab) * sizeof *t);
    fdtab = t;
    nfdtab = n;
  }
  struct file *old = fd_unbind (fd, NULL);
  if (old && old != f)
    file_maybe_free (old);
  fdtab[fd] = (struct fdent) { f, append, writable };
  f->fds++;
  if (writable)
    f->wfds++;
  atomic_fetch_add (&nbound, 1);
  return true;
}

/* Binds fd (whose fstat is st) to its file, creating both as needed;
 * rebinds an fd that now refers to another file.  Returns the entry. */
struct fdent *
fd_lookup (int fd, const struct stat *st, const struct mount *m)
{
  struct fdent *d = fd_entry (fd);

  if (d && d->f->dev == st->st_dev && d->f->ino == st->st_ino)
    return d;
  if (!RESOLVE (fcntl))
    return NULL;
  int fl = real_fcntl (fd, F_GETFL);
  struct file *f = fl < 0 ? NULL : file_get (st, m);
  if (!f)
    return NULL;
  if (!fd_bind (fd, f, (fl & O_APPEND) != 0, (fl & O_ACCMODE) != O_RDONLY)) {
    file_maybe_free (f);
    return NULL;
  }
  return &fdtab[fd];
}

/* The program is closing fd, or putting another file there: if it is our
 * socket, forget it (the program closes it); if it was the last writable
 * fd of a file, give back the file's preallocation. */
void
forget_fd (int fd)
{
  bool writable = false;

  if (fd == sock_fd) {
    sock_forget (false);
    return;
  }
  struct file *f = fd_unbind (fd, &writable);
  if (!f)
    return;
  if (writable && f->wfds == 0 && f->pre_hi > f->pre_lo)
    give_back_all (f, fd);
  if (f->fds == 0)
    f->lo = f->hi = 0;
  file_maybe_free (f);
}

void
forget_fd_range (unsigned first, unsigned last)
{
  enter ();
  if (sock_fd >= 0 && (unsigned) sock_fd >= first && (unsigned) sock_fd <= last)
    sock_forget (false);
  for (size_t fd = first; fd < nfdtab && fd <= last; fd++)
    if (fdtab[fd].f)
      forget_fd ((int) fd);
  leave ();
}

/* newfd is a duplicate of oldfd: it writes to the same file. */
void
dup_binding (int oldfd, int newfd)
{
  if (newfd < 0 || oldfd == newfd || atomic_load (&nbound) == 0)
    return;
  enter ();
  struct fdent *d = fd_entry (oldfd);
  if (d)
    fd_bind (newfd, d->f, d->append, d->writable);
  leave ();
}

/* In a forked child: the files stay (with their F_SET_RW_HINT hints), the
 * parent's hinted ranges and preallocations do not. */
void
files_after_fork (void)
{
  for (unsigned i = 0; i < NBUCKETS; i++)
    for (struct file *f = buckets[i]; f; f = f->next) {
      f->lo = f->hi = 0;
      f->pre_lo = f->pre_hi = 0;
      atomic_store (&f->inflight, 0);
    }
}

/* At exit: files still open give back as at their last close. */
void
files_at_exit (void)
{
  for (size_t fd = 0; fd < nfdtab; fd++) {
    struct file *f = fdtab[fd].f;
    if (f && fdtab[fd].writable && f->pre_hi > f->pre_lo)
      give_back_all (f, (int) fd);
  }
}
