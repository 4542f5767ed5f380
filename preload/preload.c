/* libhintcache-preload.so: range hints from unmodified programs.
 *
 * Loaded with LD_PRELOAD (`hintcache run` sets it up), this library turns
 * what a program already says about its I/O into range hints on a running
 * hintcache volume, sent over the volume's control socket:
 *
 *   - the process's I/O priority: the 2014 RFC's advice bits, decoded with
 *     the rfc2014 codec, so that `ionice -c2 -n4096 cp big.iso /mnt/hc/`
 *     means "don't cache" for the copy's data (dontneed), and a per-process
 *     default hint (HINTCACHE_CLASS, HINTCACHE_ADVICE) from `hintcache run`;
 *     both apply to the data the process writes;
 *   - fcntl(F_SET_RW_HINT), decoded with the rwh codec: a per-file hint for
 *     the data written to that file afterwards (it takes precedence over the
 *     process's hint, class and advice separately);
 *   - posix_fadvise WILLNEED, DONTNEED, NOREUSE and SEQUENTIAL, decoded with
 *     the fadvise codec: advice for the range's extents at once (WILLNEED
 *     becomes a prefetch).  NORMAL and RANDOM, and calls whose decoded hint
 *     has neither class nor advice (SEQUENTIAL alone), send nothing.
 * Every call keeps its normal effect; the hints come in addition.
 *
 * Why range hints, and how written data gets them.  Data written through
 * the page cache reaches the device later, from the kernel's flusher, so a
 * per-process hint would be lost on the way (the RFC's flaw).  A range hint
 * stays with the blocks — but a file's blocks are chosen only at writeback
 * (delayed allocation), and the hint must be in place before the flusher
 * writes them or the data is admitted first.  So before a hinted write is
 * passed on, the library preallocates its range (fallocate with
 * FALLOC_FL_KEEP_SIZE: the blocks get their place now; size and contents do
 * not change, and ext4 converts the unwritten extents in place at
 * writeback), reads the range's extents (FIEMAP; unwritten extents count)
 * and sends "advise OFFSET LENGTH HINT" for each, OFFSET being the
 * physical place plus the filesystem's offset on the volume.  To keep this
 * rare it works ahead: per file (device + inode) it remembers the range
 * already hinted, and a write beyond it preallocates and hints the next
 * chunk — the write and up to 8 MiB more past it, the amount doubling from
 * 1 MiB as a sequential run grows, and nothing ahead when free space is
 * short or the fd appends.  Inside the end of file only the holes the write
 * itself fills are preallocated, so sparse files stay sparse.  When the
 * last writable fd of the file is closed (close, fclose, dup2/dup3 over it,
 * close_range, closefrom; or at exit), what was preallocated past the end
 * of file is given back: "unadvise" for its extents, then FALLOC_FL_PUNCH_HOLE
 * (invisible to readers; disk usage ends as without the library), or on
 * ext4, which does not punch past the end of file, ftruncate to the size;
 * the modification time is put back after either.
 *
 * Writes seen: write, pwrite, pwrite64, writev, pwritev, pwritev64,
 * pwritev2, pwritev64v2, copy_file_range and sendfile/sendfile64 (their
 * destination).  write's offset is the fd's position, or the size for
 * O_APPEND (and RWF_APPEND).  Not seen: stdio's fwrite and friends (glibc
 * writes through an internal write that cannot be interposed; dd, cp, tar,
 * sort and most tools call write() themselves), mmap'd stores, splice,
 * io_uring and raw syscalls: such data gets no hint.
 *
 * Configuration, from the environment (`hintcache run` sets it):
 *
 *   HINTCACHE_SOCKET   the volume's control socket.  Unset or empty: the
 *                      library does nothing at all.
 *   HINTCACHE_MOUNTS   colon-separated directories, one on each filesystem
 *                      that lives on the volume (normally its mount point),
 *                      each optionally DIR@OFFSET: where that filesystem's
 *                      device starts on the volume (bytes, 0x-hex, with an
 *                      optional K, M, G or T suffix; default 0).  Only files
 *                      whose st_dev is one of theirs get hints.
 *   HINTCACHE_CLASS    the process's default class (metadata, journal, …).
 *   HINTCACHE_ADVICE   the process's default advice (dontneed, willneed, …);
 *                      advice in the ioprio bits, when there is some, wins.
 *   HINTCACHE_QUIET    1: never print the warning below.
 *   HINTCACHE_STATS    a file to which each process appends one line of
 *                      counters at exit (hints sent, refused, dropped, …).
 *
 * Never in the way.  The program's results and behaviour do not change: a
 * missing, slow, refusing or garbled control socket only drops hints (they
 * are counted; one warning line on stderr per process at most, none with
 * HINTCACHE_QUIET=1, and none when stderr is a file on the volume, which
 * could be the program's data).  Connecting waits at most 100 ms, a batch of
 * requests at most 250 ms, and after a failure nothing is tried for 1 s
 * (doubling up to 30 s while failures repeat).  Nothing is preallocated
 * while the socket is unreachable.  errno is preserved across everything
 * the interposers do.  One mutex guards the connection and the tables; a
 * forked child forgets its parent's connection and preallocations
 * (pthread_atfork), and a vfork child changes nothing.  A process with no
 * hint and no F_SET_RW_HINT pays per write a check of a per-thread cache of
 * its ioprio, re-read at most every 100 ms (`ionice -p` can change it); a
 * hinted positioned write inside the range already hinted, or any hinted
 * write while the socket is down, pays the lock and a table lookup, no
 * system call; other hinted writes a statx that asks for
 * no timestamps (asking for them makes the next write dirty the inode on a
 * kernel with multigrain timestamps, which doubled the cost of small writes).
 * The library's own socket I/O uses send/recv, and it calls the real
 * functions (dlsym RTLD_NEXT) for everything it interposes.
 *
 * Limits.  Blocks a file frees (truncate, unlink) keep their range hints
 * unless the library itself gave them back (it does for ftruncate and for
 * its preallocation).  Preallocation past the end of file is kept, not
 * given back, when the file may have another writer (it grew beyond this
 * process's writes, a write is in flight, or it had blocks past its end
 * before — a program's own preallocation); a writer in another process
 * (or one the library does not see) that extends the file in the few
 * microseconds between the final size check and the punch or truncation
 * is the one case this cannot see.  A process killed by
 * a signal, or one that calls _exit or exec with the file still open,
 * leaves its preallocation past the end of file.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/codec.h"
#include "hintcache/control.h"
#include "hintcache/extents.h"
#include "hintcache/hint.h"
#include "util.h"

#define PUBLIC __attribute__ ((visibility ("default")))
#define TLS __thread __attribute__ ((tls_model ("initial-exec")))

#define MS 1000000ull                 /* nanoseconds */
#define CONNECT_NS (100 * MS)         /* connect and greeting... */
#define GREETING_NS (250 * MS)        /* ...each wait at most this */
#define REPLY_NS (250 * MS)           /* a batch of requests and its replies */
#define RETRY_MIN_NS (1000 * MS)      /* after a failure, nothing for this long */
#define RETRY_MAX_NS (30000 * MS)
#define IOPRIO_RECHECK_NS (100 * MS)  /* ioprio is re-read at most this often */
#define AHEAD_MIN (1ull << 20)        /* work ahead of a write by 1 MiB … */
#define AHEAD_MAX (8ull << 20)        /* … doubling up to 8 MiB */
#define BATCH 64                      /* requests sent before replies are read */
#define LINE 96                       /* room for one request line */
#define REPLY_MAX 1024                /* the longest reply line, newline included */
#define MAX_MOUNTS 32
#define SOCK_FD_MIN 200               /* keep our socket away from low fds */
#define NBUCKETS 256

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT 1036
#endif

/* ---------------------------------------------------------------------------
 * The real functions
 */
static ssize_t (*real_write) (int, const void *, size_t);
static ssize_t (*real_pwrite) (int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64) (int, const void *, size_t, off64_t);
static ssize_t (*real_writev) (int, const struct iovec *, int);
static ssize_t (*real_pwritev) (int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64) (int, const struct iovec *, int, off64_t);
static ssize_t (*real_pwritev2) (int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2) (int, const struct iovec *, int, off64_t, int);
static ssize_t (*real_copy_file_range) (int, off64_t *, int, off64_t *, size_t, unsigned);
static ssize_t (*real_sendfile) (int, int, off_t *, size_t);
static ssize_t (*real_sendfile64) (int, int, off64_t *, size_t);
static int (*real_posix_fadvise) (int, off_t, off_t, int);
static int (*real_posix_fadvise64) (int, off64_t, off64_t, int);
static int (*real_fcntl) (int, int, ...);
static int (*real_fcntl64) (int, int, ...);
static int (*real_close) (int);
static int (*real_fclose) (FILE *);
static int (*real_close_range) (unsigned, unsigned, int);
static void (*real_closefrom) (int);
static int (*real_dup) (int);
static int (*real_dup2) (int, int);
static int (*real_dup3) (int, int, int);
static int (*real_fallocate) (int, int, off_t, off_t);
static int (*real_fallocate64) (int, int, off64_t, off64_t);
static int (*real_ftruncate) (int, off_t);
static int (*real_ftruncate64) (int, off64_t);

/* Loads real_NAME on first use (an interposer can run before the
 * constructor, from another library's).  Evaluates to false when the C
 * library has no such function. */
#define RESOLVE(name)                                                                     \
  (__atomic_load_n (&real_##name, __ATOMIC_ACQUIRE)                                      \
   || (__atomic_store_n (&real_##name, (__typeof__ (real_##name)) dlsym (RTLD_NEXT, #name), \
                         __ATOMIC_RELEASE),                                               \
       real_##name != NULL))

/* ---------------------------------------------------------------------------
 * Configuration (read once by the constructor, then read-only)
 */
struct mount {
  dev_t dev;
  uint64_t offset; /* where the filesystem starts on the volume */
};

static struct {
  bool on;          /* a socket and at least one mount */
  bool quiet;
  char socket[sizeof ((struct sockaddr_un *) 0)->sun_path];
  struct mount mounts[MAX_MOUNTS];
  unsigned nmounts;
  struct hc_hint base; /* HINTCACHE_CLASS, HINTCACHE_ADVICE */
  char *stats_path;
  const hc_codec *rfc2014, *fadvise, *rwh;
} cfg;

static atomic_bool ready;    /* cfg is complete */
static atomic_bool finished; /* the destructor has run */
static pid_t my_pid;         /* differs in a vfork child */

/* ---------------------------------------------------------------------------
 * Shared state, under `lock`
 */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Set while this thread is inside the library, so that a signal handler's
 * write (or anything else re-entering) passes straight through. */
static TLS bool busy;

static struct {
  uint64_t sent;            /* requests the server accepted */
  uint64_t refused;         /* requests answered with an error */
  uint64_t dropped;         /* ranges not sent: no connection, or it failed */
  uint64_t unplaced;        /* ranges with data not placed yet (skipped) */
  uint64_t prealloc_failed; /* fallocate refused (ENOSPC, EOPNOTSUPP, …) */
  uint64_t kept;            /* preallocations past EOF not given back */
} stats;

static atomic_bool warned;

/* A file the process writes (or hinted with F_SET_RW_HINT). */
struct file {
  struct file *next; /* hash chain */
  dev_t dev;
  ino_t ino;
  uint64_t devoff;          /* its filesystem's offset on the volume */
  uint64_t bs;              /* block size */
  unsigned fds, wfds;       /* bound fds, and those open for writing */
  atomic_uint inflight;     /* writes passed on and not returned yet */
  bool has_hint;            /* F_SET_RW_HINT said something */
  struct hc_hint hint;      /* … this (the stream layer) */
  struct hc_hint hinted;    /* the hint [lo, hi) was sent with */
  uint64_t lo, hi;          /* bytes whose extents are placed and hinted */
  uint64_t pre_lo, pre_hi;  /* preallocated by us past the end of file */
  uint64_t max_end;         /* the end of the furthest write seen */
  uint64_t last_size;       /* the size before the last write seen */
  bool checked;             /* looked for blocks past EOF already there */
  bool no_punch;            /* never give back (the file has its own) */
  bool no_prealloc;         /* fallocate is not supported here */
};

static struct file *buckets[NBUCKETS];
static unsigned creations;
static atomic_uint file_hints; /* files with has_hint */

/* What the library knows about an fd. */
struct fdent {
  struct file *f;
  bool append, writable;
};
static struct fdent *fdtab;
static size_t nfdtab;
static atomic_uint nbound;

/* The connection. */
static hc_control_client *conn;
static int sock_fd = -1;  /* conn's socket, also read outside the lock */
static dev_t sock_dev;    /* … and what it is */
static ino_t sock_ino;
static uint64_t retry_at; /* CLOCK_MONOTONIC ns: no connection attempt before */
static uint64_t retry_ns = RETRY_MIN_NS;

/* Per-thread cache of the advice in this thread's ioprio. */
static TLS uint64_t ioprio_at;
static TLS uint8_t ioprio_adv;

/* ---------------------------------------------------------------------------
 * Small helpers
 */
static uint64_t
clock_ns (clockid_t id)
{
  struct timespec ts;
  clock_gettime (id, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static uint64_t
min64 (uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

static uint64_t
max64 (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

static uint64_t
down (uint64_t x, uint64_t bs)
{
  return x & ~(bs - 1);
}

static uint64_t
up (uint64_t x, uint64_t bs)
{
  return x > UINT64_MAX - bs ? down (UINT64_MAX, bs) : down (x + bs - 1, bs);
}

static bool
same_hint (struct hc_hint a, struct hc_hint b)
{
  return a.cls == b.cls && a.advice == b.advice;
}

static bool
empty_hint (struct hc_hint h)
{
  return h.cls == HC_CLASS_UNCLASSIFIED && h.advice == HC_ADVICE_NONE;
}

/* Copies n bytes of the program's memory at p without faulting on a bad
 * pointer (the kernel would answer EFAULT; so must we, by not hinting). */
static bool
safe_read (const void *p, void *out, size_t n)
{
  struct iovec local = { out, n }, remote = { (void *) p, n };

  if (!p)
    return false;
  return process_vm_readv (getpid (), &local, 1, &remote, 1, 0) == (ssize_t) n;
}

static const struct mount *
mount_of (dev_t dev)
{
  for (unsigned i = 0; i < cfg.nmounts; i++)
    if (cfg.mounts[i].dev == dev)
      return &cfg.mounts[i];
  return NULL;
}

/* Prints the process's one warning line, unless quiet, already done, or
 * stderr is a file on the volume (it could be the program's data). */
static void __attribute__ ((format (printf, 1, 2)))
warn (const char *fmt, ...)
{
  char msg[640];
  struct stat st;
  va_list ap;
  int n, k;

  if (cfg.quiet || atomic_exchange (&warned, true))
    return;
  if (fstat (2, &st) < 0 || (S_ISREG (st.st_mode) && mount_of (st.st_dev)))
    return;
  n = snprintf (msg, sizeof msg - 1, "hintcache-preload[%d]: ", (int) getpid ());
  va_start (ap, fmt);
  k = vsnprintf (msg + n, sizeof msg - 1 - (size_t) n, fmt, ap);
  va_end (ap);
  if (k > 0)
    n = (int) min64 ((uint64_t) n + (uint64_t) k, sizeof msg - 2);
  for (int i = 0; i < n; i++) /* a garbled reply quoted in it stays one plain line */
    if ((unsigned char) msg[i] < 0x20 || msg[i] == 0x7f)
      msg[i] = '?';
  msg[n++] = '\n';
  if (RESOLVE (write))
    (void) !real_write (2, msg, (size_t) n);
}

/* ---------------------------------------------------------------------------
 * The process's hint
 */

/* The advice in this thread's ioprio (the RFC's bits), re-read at most
 * every 100 ms. */
static unsigned
ioprio_advice (void)
{
  uint64_t now = clock_ns (CLOCK_MONOTONIC_COARSE);

  if (ioprio_at == 0 || now - ioprio_at >= IOPRIO_RECHECK_NS) {
    int saved = errno;
    long v = syscall (SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
    struct hc_hint h = { 0 };
    struct hc_wire w = { .n = 1 };
    errno = saved;
    w.v[0] = v > 0 ? (uint64_t) v : 0;
    if (v <= 0 || hc_codec_decode (cfg.rfc2014, NULL, &w, HC_DIR_WRITE, &h, NULL, 0) < 0)
      h.advice = HC_ADVICE_NONE;
    ioprio_adv = h.advice;
    ioprio_at = now ? now : 1;
  }
  return ioprio_adv;
}

static struct hc_hint
process_hint (void)
{
  struct hc_hint h = cfg.base;
  unsigned a = ioprio_advice ();

  if (a != HC_ADVICE_NONE)
    h.advice = (uint8_t) a;
  return h;
}

/* The hint for a range of file f (NULL: unknown file): `io` over the
 * file's F_SET_RW_HINT over the process's.  Class and advice only. */
static struct hc_hint
effective_hint (const struct file *f, struct hc_hint io)
{
  struct hc_hint layer[HC_LAYER_COUNT] = { { 0 } };

  layer[HC_LAYER_IO] = io;
  if (f && f->has_hint)
    layer[HC_LAYER_STREAM] = f->hint;
  layer[HC_LAYER_PROCESS] = process_hint ();
  struct hc_hint h = hc_hint_resolve (layer, NULL);
  h.flags = 0;
  return h;
}

/* Whether the library is active at all for this call. */
static bool
active (void)
{
  return atomic_load_explicit (&ready, memory_order_acquire) && cfg.on && !busy
         && !atomic_load_explicit (&finished, memory_order_relaxed);
}

/* The cheap check before every write: is there anything to say? */
static bool
want_write_hints (void)
{
  if (!active ())
    return false;
  if (atomic_load_explicit (&file_hints, memory_order_relaxed) > 0 || !empty_hint (cfg.base))
    return true;
  return ioprio_advice () != HC_ADVICE_NONE;
}

static void
enter (void)
{
  busy = true;
  pthread_mutex_lock (&lock);
}

static void
leave (void)
{
  pthread_mutex_unlock (&lock);
  busy = false;
}

/* ---------------------------------------------------------------------------
 * The control connection (under the lock)
 */

/* How the client closes our socket: with the real close, not ours. */
static int
sock_close (int fd)
{
  return RESOLVE (close) ? real_close (fd) : -1;
}

/* Forgets the connection; closes it only if the fd is still ours. */
static void
sock_forget (bool close_it)
{
  if (close_it)
    hc_control_close (conn);
  else
    hc_control_abandon (conn);
  conn = NULL;
  sock_fd = -1;
}

static void __attribute__ ((format (printf, 1, 2)))
sock_failed (const char *fmt, ...)
{
  char why[400];
  va_list ap;

  sock_forget (true);
  retry_at = clock_ns (CLOCK_MONOTONIC) + retry_ns;
  retry_ns = min64 (2 * retry_ns, RETRY_MAX_NS);
  va_start (ap, fmt);
  vsnprintf (why, sizeof why, fmt, ap);
  va_end (ap);
  warn ("control socket %s: %s; hints are dropped (the program runs as without them)",
        cfg.socket, why);
}

/* Makes sure there is a connection.  Returns false (and nothing waits)
 * while a failure is recent. */
static bool
sock_ready (void)
{
  static const struct hc_control_options opt = {
    .connect_ms = CONNECT_NS / MS, .greeting_ms = GREETING_NS / MS, .fd_min = SOCK_FD_MIN,
    .close_fd = sock_close, .line_max = REPLY_MAX,
  };
  struct hc_control_id id;
  struct stat st;
  char why[300];

  if (sock_fd >= 0) {
    /* Still ours?  A program may close fds it does not know, or put another
     * file there with dup2; then the fd is not ours to use or close. */
    if (fstat (sock_fd, &st) == 0 && st.st_dev == sock_dev && st.st_ino == sock_ino)
      return true;
    sock_forget (false);
  }
  if (clock_ns (CLOCK_MONOTONIC) < retry_at)
    return false;
  if (!RESOLVE (fcntl) || !RESOLVE (close))
    return false;
  if (hc_control_open (cfg.socket, &opt, &conn, why, sizeof why) < 0) {
    conn = NULL;
    sock_failed ("%s", why);
    return false;
  }
  hc_control_identity (conn, &id);
  sock_fd = id.fd;
  sock_dev = id.dev;
  sock_ino = id.ino;
  retry_ns = RETRY_MIN_NS;
  return true;
}

/* Requests waiting to be sent. */
struct batch {
  unsigned n;
  size_t used;
  char buf[BATCH * LINE];
};

/* Counts a reply (arg: the replies so far); warns of a refusal. */
static void
count_reply (void *arg, unsigned i, int status, const char *line)
{
  (void) i;
  ++*(unsigned *) arg;
  if (status == 0)
    stats.sent++;
  else {
    stats.refused++;
    warn ("control socket %s refused a hint: %.200s", cfg.socket, line + 6);
  }
}

/* Sends the batch and reads its replies; counts what happened. */
static void
batch_flush (struct batch *b)
{
  unsigned replies = 0;
  char why[300];

  if (b->n == 0)
    return;
  if (!sock_ready ()) {
    stats.dropped += b->n;
    goto out;
  }
  if (hc_control_batch (conn, b->buf, b->used, REPLY_NS / MS, count_reply, &replies, why,
                        sizeof why) < 0) {
    sock_failed ("%s", why);
    stats.dropped += b->n - replies;
  }
out:
  b->n = 0;
  b->used = 0;
}

/* Queues "advise OFF LEN HINT" (hint non-NULL) or "unadvise OFF LEN". */
static void
batch_add (struct batch *b, uint64_t off, uint64_t len, const char *hint)
{
  if (b->n == BATCH)
    batch_flush (b);
  int k = hint ? snprintf (b->buf + b->used, LINE,
                           "advise %" PRIu64 " %" PRIu64 " %s from=preload\n", off, len, hint)
               : snprintf (b->buf + b->used, LINE, "unadvise %" PRIu64 " %" PRIu64 " from=preload\n",
                           off, len);
  if (k > 0 && k < LINE) {
    b->used += (size_t) k;
    b->n++;
  }
}

/* Sends advise (hint non-NULL) or unadvise for the placed extents of
 * [a, b) of the file open as fd, cut to the range.  Returns the end of the
 * placed bytes that run without a gap from a. */
static uint64_t
send_extents (int fd, uint64_t devoff, uint64_t a, uint64_t b, const char *hint)
{
  struct hc_extent_list x;
  struct batch *bt;
  uint64_t cov = a;

  if (a >= b || hc_file_extents (fd, a, b - a, 0, &x) < 0)
    return a;
  if (x.unplaced)
    stats.unplaced++;
  if (!(bt = malloc (sizeof *bt))) {
    hc_extent_list_free (&x);
    return a;
  }
  bt->n = 0;
  bt->used = 0;
  for (size_t i = 0; i < x.n; i++) {
    const struct hc_extent *e = &x.e[i];
    uint64_t lo = max64 (e->logical, a), hi = min64 (e->logical + e->length, b);
    if (lo >= hi)
      continue;
    if (lo == cov)
      cov = hi;
    uint64_t phys = e->physical + (lo - e->logical);
    if (phys > UINT64_MAX - devoff - (hi - lo))
      continue;
    batch_add (bt, devoff + phys, hi - lo, hint);
  }
  batch_flush (bt);
  free (bt);
  hc_extent_list_free (&x);
  return cov;
}

/* ---------------------------------------------------------------------------
 * Files and fds (under the lock)
 */
static unsigned
bucket_of (dev_t dev, ino_t ino)
{
  uint64_t h = ((uint64_t) ino ^ ((uint64_t) dev << 32)) * 0x9e3779b97f4a7c15ull;
  return (unsigned) (h >> 56) % NBUCKETS;
}

static struct file *
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

static struct fdent *
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
static struct fdent *
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

/* ---------------------------------------------------------------------------
 * Preallocation, and giving it back
 */

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
static void
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
static void
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

/* Everything before a write of len bytes to fd passes on: off is the
 * offset, or -1 for the fd's position; append says RWF_APPEND.  Returns
 * the file, whose in-flight count after_write drops, or NULL. */
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

static struct file *
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
    } else if (sock_fd < 0 && g->pre_hi <= g->pre_lo && clock_ns (CLOCK_MONOTONIC) < retry_at) {
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

static void
after_write (struct file *f)
{
  if (f)
    atomic_fetch_sub (&f->inflight, 1);
}

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
 * fds going away, and other fd bookkeeping
 */

/* The program is closing fd, or putting another file there: if it is our
 * socket, forget it (the program closes it); if it was the last writable
 * fd of a file, give back the file's preallocation. */
static void
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

/* Whether an fd operation needs bookkeeping (and this is not a vfork
 * child, whose fd table is its own but whose memory is its parent's). */
static bool
fd_bookkeeping (void)
{
  return active () && (atomic_load (&nbound) > 0 || __atomic_load_n (&sock_fd, __ATOMIC_RELAXED) >= 0)
         && getpid () == my_pid;
}

static void
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
static void
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

PUBLIC ssize_t
write (int fd, const void *buf, size_t n)
{
  if (!RESOLVE (write))
    FAIL_NOSYS (-1);
  if (!want_write_hints ())
    return real_write (fd, buf, n);
  struct file *f = before_write (fd, -1, n, false);
  ssize_t r = real_write (fd, buf, n);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwrite (int fd, const void *buf, size_t n, off_t off)
{
  if (!RESOLVE (pwrite))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < 0)
    return real_pwrite (fd, buf, n, off);
  struct file *f = before_write (fd, off, n, false);
  ssize_t r = real_pwrite (fd, buf, n, off);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwrite64 (int fd, const void *buf, size_t n, off64_t off)
{
  if (!RESOLVE (pwrite64))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < 0)
    return real_pwrite64 (fd, buf, n, off);
  struct file *f = before_write (fd, off, n, false);
  ssize_t r = real_pwrite64 (fd, buf, n, off);
  after_write (f);
  return r;
}

PUBLIC ssize_t
writev (int fd, const struct iovec *iov, int cnt)
{
  if (!RESOLVE (writev))
    FAIL_NOSYS (-1);
  if (!want_write_hints ())
    return real_writev (fd, iov, cnt);
  struct file *f = before_write (fd, -1, iov_total (iov, cnt), false);
  ssize_t r = real_writev (fd, iov, cnt);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwritev (int fd, const struct iovec *iov, int cnt, off_t off)
{
  if (!RESOLVE (pwritev))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < 0)
    return real_pwritev (fd, iov, cnt, off);
  struct file *f = before_write (fd, off, iov_total (iov, cnt), false);
  ssize_t r = real_pwritev (fd, iov, cnt, off);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwritev64 (int fd, const struct iovec *iov, int cnt, off64_t off)
{
  if (!RESOLVE (pwritev64))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < 0)
    return real_pwritev64 (fd, iov, cnt, off);
  struct file *f = before_write (fd, off, iov_total (iov, cnt), false);
  ssize_t r = real_pwritev64 (fd, iov, cnt, off);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwritev2 (int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
  if (!RESOLVE (pwritev2))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < -1)
    return real_pwritev2 (fd, iov, cnt, off, flags);
  struct file *f = before_write (fd, off, iov_total (iov, cnt), (flags & RWF_APPEND) != 0);
  ssize_t r = real_pwritev2 (fd, iov, cnt, off, flags);
  after_write (f);
  return r;
}

PUBLIC ssize_t
pwritev64v2 (int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
  if (!RESOLVE (pwritev64v2))
    FAIL_NOSYS (-1);
  if (!want_write_hints () || off < -1)
    return real_pwritev64v2 (fd, iov, cnt, off, flags);
  struct file *f = before_write (fd, off, iov_total (iov, cnt), (flags & RWF_APPEND) != 0);
  ssize_t r = real_pwritev64v2 (fd, iov, cnt, off, flags);
  after_write (f);
  return r;
}

PUBLIC ssize_t
copy_file_range (int in_fd, off64_t *in_off, int out_fd, off64_t *out_off, size_t len,
                 unsigned flags)
{
  if (!RESOLVE (copy_file_range))
    FAIL_NOSYS (-1);
  if (!want_write_hints ())
    return real_copy_file_range (in_fd, in_off, out_fd, out_off, len, flags);
  struct file *f = NULL;
  int saved = errno;
  off64_t off = -1;
  if (!out_off || (safe_read (out_off, &off, sizeof off) && off >= 0))
    f = before_write (out_fd, off, copy_len (in_fd, in_off, len), false);
  errno = saved;
  ssize_t r = real_copy_file_range (in_fd, in_off, out_fd, out_off, len, flags);
  after_write (f);
  return r;
}

PUBLIC ssize_t
sendfile (int out_fd, int in_fd, off_t *off, size_t count)
{
  if (!RESOLVE (sendfile))
    FAIL_NOSYS (-1);
  if (!want_write_hints ())
    return real_sendfile (out_fd, in_fd, off, count);
  int saved = errno;
  struct file *f = before_write (out_fd, -1, copy_len (in_fd, off, count), false);
  errno = saved;
  ssize_t r = real_sendfile (out_fd, in_fd, off, count);
  after_write (f);
  return r;
}

PUBLIC ssize_t
sendfile64 (int out_fd, int in_fd, off64_t *off, size_t count)
{
  if (!RESOLVE (sendfile64))
    FAIL_NOSYS (-1);
  if (!want_write_hints ())
    return real_sendfile64 (out_fd, in_fd, off, count);
  int saved = errno;
  struct file *f = before_write (out_fd, -1, copy_len (in_fd, off, count), false);
  errno = saved;
  ssize_t r = real_sendfile64 (out_fd, in_fd, off, count);
  after_write (f);
  return r;
}

/* The calls posix_fadvise forwards. */
static bool
fadvise_forwarded (int advice)
{
  return advice == POSIX_FADV_WILLNEED || advice == POSIX_FADV_DONTNEED
         || advice == POSIX_FADV_NOREUSE || advice == POSIX_FADV_SEQUENTIAL;
}

PUBLIC int
posix_fadvise (int fd, off_t off, off_t len, int advice)
{
  if (!RESOLVE (posix_fadvise))
    return ENOSYS;
  if (active () && fadvise_forwarded (advice) && off >= 0 && len >= 0) {
    int saved = errno;
    forward_fadvise (fd, off, len, advice);
    errno = saved;
  }
  return real_posix_fadvise (fd, off, len, advice);
}

PUBLIC int
posix_fadvise64 (int fd, off64_t off, off64_t len, int advice)
{
  if (!RESOLVE (posix_fadvise64))
    return ENOSYS;
  if (active () && fadvise_forwarded (advice) && off >= 0 && len >= 0) {
    int saved = errno;
    forward_fadvise (fd, off, len, advice);
    errno = saved;
  }
  return real_posix_fadvise64 (fd, off, len, advice);
}

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

PUBLIC int
fcntl (int fd, int cmd, ...)
{
  va_list ap;
  va_start (ap, cmd);
  void *arg = va_arg (ap, void *);
  va_end (ap);
  if (!RESOLVE (fcntl))
    FAIL_NOSYS (-1);
  int r = real_fcntl (fd, cmd, arg);
  after_fcntl (fd, cmd, arg, r);
  return r;
}

PUBLIC int
fcntl64 (int fd, int cmd, ...)
{
  va_list ap;
  va_start (ap, cmd);
  void *arg = va_arg (ap, void *);
  va_end (ap);
  if (!RESOLVE (fcntl64))
    FAIL_NOSYS (-1);
  int r = real_fcntl64 (fd, cmd, arg);
  after_fcntl (fd, cmd, arg, r);
  return r;
}

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

PUBLIC int
dup2 (int oldfd, int newfd)
{
  if (!RESOLVE (dup2))
    FAIL_NOSYS (-1);
  before_dup2 (oldfd, newfd);
  int r = real_dup2 (oldfd, newfd);
  if (r >= 0 && fd_bookkeeping ()) {
    int saved = errno;
    dup_binding (oldfd, r);
    errno = saved;
  }
  return r;
}

PUBLIC int
dup3 (int oldfd, int newfd, int flags)
{
  if (!RESOLVE (dup3))
    FAIL_NOSYS (-1);
  before_dup2 (oldfd, newfd);
  int r = real_dup3 (oldfd, newfd, flags);
  if (r >= 0 && fd_bookkeeping ()) {
    int saved = errno;
    dup_binding (oldfd, r);
    errno = saved;
  }
  return r;
}

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

PUBLIC int
fallocate (int fd, int mode, off_t off, off_t len)
{
  if (!RESOLVE (fallocate))
    FAIL_NOSYS (-1);
  before_fallocate (fd, mode);
  return real_fallocate (fd, mode, off, len);
}

PUBLIC int
fallocate64 (int fd, int mode, off64_t off, off64_t len)
{
  if (!RESOLVE (fallocate64))
    FAIL_NOSYS (-1);
  before_fallocate (fd, mode);
  return real_fallocate64 (fd, mode, off, len);
}

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

PUBLIC int
ftruncate (int fd, off_t length)
{
  if (!RESOLVE (ftruncate))
    FAIL_NOSYS (-1);
  before_ftruncate (fd, length);
  return real_ftruncate (fd, length);
}

PUBLIC int
ftruncate64 (int fd, off64_t length)
{
  if (!RESOLVE (ftruncate64))
    FAIL_NOSYS (-1);
  before_ftruncate (fd, length);
  return real_ftruncate64 (fd, length);
}

/* ---------------------------------------------------------------------------
 * Set-up, fork, exit
 */

static void
load_config (void)
{
  const char *s = getenv ("HINTCACHE_SOCKET"), *q = getenv ("HINTCACHE_QUIET");
  const char *mounts = getenv ("HINTCACHE_MOUNTS");
  const char *cls = getenv ("HINTCACHE_CLASS"), *adv = getenv ("HINTCACHE_ADVICE");
  const char *st = getenv ("HINTCACHE_STATS");
  char problem[300] = "";

  cfg.quiet = q && *q && strcmp (q, "0") != 0;
  cfg.rfc2014 = hc_codec_get (HC_CODEC_RFC2014);
  cfg.fadvise = hc_codec_get (HC_CODEC_FADVISE);
  cfg.rwh = hc_codec_get (HC_CODEC_RWH);
  if (!s || !*s || !cfg.rfc2014 || !cfg.fadvise || !cfg.rwh)
    return;
  if (strlen (s) >= sizeof cfg.socket) {
    warn ("HINTCACHE_SOCKET is longer than %zu bytes; hints are off", sizeof cfg.socket - 1);
    return;
  }
  memcpy (cfg.socket, s, strlen (s) + 1);
  if (cls && *cls) {
    enum hc_class c;
    if (hc_class_parse (cls, &c) == 0)
      cfg.base.cls = (uint8_t) c;
    else
      snprintf (problem, sizeof problem, "HINTCACHE_CLASS '%.40s' is not a class; ignored", cls);
  }
  if (adv && *adv) {
    enum hc_advice a;
    if (hc_advice_parse (adv, &a) == 0)
      cfg.base.advice = (uint8_t) a;
    else
      snprintf (problem, sizeof problem, "HINTCACHE_ADVICE '%.40s' is not an advice; ignored",
                adv);
  }
  if (st && *st)
    cfg.stats_path = strdup (st);
  for (const char *p = mounts ? mounts : ""; *p;) {
    size_t n = strcspn (p, ":");
    char dir[PATH_MAX];
    uint64_t off = 0;
    struct stat sb;
    if (n > 0 && n < sizeof dir) {
      memcpy (dir, p, n);
      dir[n] = '\0';
      char *at = strrchr (dir, '@');
      if (at && hc_parse_size (at + 1, &off, NULL) == 0)
        *at = '\0';
      else
        off = 0;
      if (stat (dir, &sb) < 0)
        snprintf (problem, sizeof problem, "HINTCACHE_MOUNTS: %.200s: %s; ignored", dir,
                  strerror (errno));
      else if (cfg.nmounts < MAX_MOUNTS)
        cfg.mounts[cfg.nmounts++] = (struct mount) { sb.st_dev, off };
    }
    p += n;
    if (*p == ':')
      p++;
  }
  cfg.on = cfg.nmounts > 0;
  if (problem[0])
    warn ("%s", problem);
}

static void
atfork_prepare (void)
{
  if (cfg.on)
    pthread_mutex_lock (&lock);
}

static void
atfork_parent (void)
{
  if (cfg.on)
    pthread_mutex_unlock (&lock);
}

/* The child keeps its fds (and the files' F_SET_RW_HINT hints) but not the
 * parent's connection, hinted ranges or preallocations. */
static void
atfork_child (void)
{
  if (!cfg.on)
    return;
  my_pid = getpid ();
  sock_forget (true);
  for (unsigned i = 0; i < NBUCKETS; i++)
    for (struct file *f = buckets[i]; f; f = f->next) {
      f->lo = f->hi = 0;
      f->pre_lo = f->pre_hi = 0;
      atomic_store (&f->inflight, 0);
    }
  memset (&stats, 0, sizeof stats);
  pthread_mutex_unlock (&lock);
}

__attribute__ ((constructor)) static void
preload_init (void)
{
  int saved = errno;

  my_pid = getpid ();
  load_config ();
  if (cfg.on)
    pthread_atfork (atfork_prepare, atfork_parent, atfork_child);
  atomic_store_explicit (&ready, true, memory_order_release);
  errno = saved;
}

__attribute__ ((destructor)) static void
preload_fini (void)
{
  int saved = errno;

  if (!active () || getpid () != my_pid || !RESOLVE (close) || !RESOLVE (fallocate))
    return;
  enter ();
  /* Files still open at exit: give back as at their last close. */
  for (size_t fd = 0; fd < nfdtab; fd++) {
    struct file *f = fdtab[fd].f;
    if (f && fdtab[fd].writable && f->pre_hi > f->pre_lo)
      give_back_all (f, (int) fd);
  }
  if (cfg.stats_path && RESOLVE (write)) {
    char line[400];
    int n = snprintf (line, sizeof line,
                      "hintcache-preload pid=%d sent=%" PRIu64 " refused=%" PRIu64
                      " dropped=%" PRIu64 " unplaced=%" PRIu64 " prealloc_failed=%" PRIu64
                      " kept=%" PRIu64 "\n",
                      (int) getpid (), stats.sent, stats.refused, stats.dropped, stats.unplaced,
                      stats.prealloc_failed, stats.kept);
    int fd = open (cfg.stats_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void) !real_write (fd, line, (size_t) n);
      real_close (fd);
    }
  }
  sock_forget (true);
  atomic_store (&finished, true);
  leave ();
  errno = saved;
}
