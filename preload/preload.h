/* libhintcache-preload.so's internal header: what its files share.
 *
 * The library is one idea per file (preload.c says what it does as a
 * whole): preload.c the configuration, the process's hint, set-up, fork
 * and exit; files.c the table of the files and fds the program writes;
 * prealloc.c the work ahead of writers (preallocating, placing and hinting
 * the next chunk) and giving it back; conn.c the control socket, through
 * the control client; interpose.c the interposers themselves.
 *
 * Here: the constants, the real functions (declared from interposers.def),
 * the configuration and the state under `lock`, the small helpers the
 * per-write path inlines, and the functions one file offers the others.
 * Everything is hidden: only the interposers (PUBLIC) are exported, so
 * nothing clashes with the program the library is loaded into.
 */
#ifndef HC_PRELOAD_H
#define HC_PRELOAD_H

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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/codec.h"
#include "hintcache/hint.h"
#include "util.h"

#pragma GCC visibility push(hidden)

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
 * The real functions: real_NAME, and resolve_NAME, which loads it on first
 * use (an interposer can run before the constructor, from another
 * library's) and is false when the C library has no such function.
 */
#define INTERPOSER(ret, name, params)                                                     \
  extern ret (*real_##name) params;                                                       \
  static inline bool resolve_##name (void)                                                \
  {                                                                                       \
    return __atomic_load_n (&real_##name, __ATOMIC_ACQUIRE)                               \
           || (__atomic_store_n (&real_##name, (__typeof__ (real_##name)) dlsym (RTLD_NEXT, #name), \
                                 __ATOMIC_RELEASE),                                       \
               real_##name != NULL);                                                      \
  }
#include "interposers.def"
#undef INTERPOSER

/* Loads real_NAME on first use; false when the C library has none. */
#define RESOLVE(name) resolve_##name ()

/* ---------------------------------------------------------------------------
 * Configuration (read once by the constructor, then read-only)
 */
struct mount {
  dev_t dev;
  uint64_t offset; /* where the filesystem starts on the volume */
};

struct config {
  bool on;          /* a socket and at least one mount */
  bool quiet;
  char socket[sizeof ((struct sockaddr_un *) 0)->sun_path];
  struct mount mounts[MAX_MOUNTS];
  unsigned nmounts;
  struct hc_hint base; /* HINTCACHE_CLASS, HINTCACHE_ADVICE */
  char *stats_path;
  const hc_codec *rfc2014, *fadvise, *rwh;
};

extern struct config cfg;
extern atomic_bool ready;    /* cfg is complete */
extern atomic_bool finished; /* the destructor has run */
extern pid_t my_pid;         /* differs in a vfork child */

/* ---------------------------------------------------------------------------
 * Shared state, under `lock`
 */
extern pthread_mutex_t lock;

/* Set while this thread is inside the library, so that a signal handler's
 * write (or anything else re-entering) passes straight through. */
extern TLS bool busy;

struct counters {
  uint64_t sent;            /* requests the server accepted */
  uint64_t refused;         /* requests answered with an error */
  uint64_t dropped;         /* ranges not sent: no connection, or it failed */
  uint64_t unplaced;        /* ranges with data not placed yet (skipped) */
  uint64_t prealloc_failed; /* fallocate refused (ENOSPC, EOPNOTSUPP, …) */
  uint64_t kept;            /* preallocations past EOF not given back */
};
extern struct counters stats;

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

/* What the library knows about an fd. */
struct fdent {
  struct file *f;
  bool append, writable;
};

extern atomic_uint file_hints; /* files with has_hint */
extern atomic_uint nbound;     /* fds bound to a file */

/* The connection's socket (-1: none), also read outside the lock, and when
 * the next connection attempt may be made (CLOCK_MONOTONIC ns). */
extern int sock_fd;
extern uint64_t retry_at;

/* Per-thread cache of the advice in this thread's ioprio. */
extern TLS uint64_t ioprio_at;
extern TLS uint8_t ioprio_adv;

/* ---------------------------------------------------------------------------
 * Small helpers
 */
static inline uint64_t
min64 (uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

static inline uint64_t
max64 (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

static inline uint64_t
down (uint64_t x, uint64_t bs)
{
  return x & ~(bs - 1);
}

static inline uint64_t
up (uint64_t x, uint64_t bs)
{
  return x > UINT64_MAX - bs ? down (UINT64_MAX, bs) : down (x + bs - 1, bs);
}

static inline bool
same_hint (struct hc_hint a, struct hc_hint b)
{
  return a.cls == b.cls && a.advice == b.advice;
}

static inline bool
empty_hint (struct hc_hint h)
{
  return h.cls == HC_CLASS_UNCLASSIFIED && h.advice == HC_ADVICE_NONE;
}

/* preload.c */

/* Copies n bytes of the program's memory at p without faulting on a bad
 * pointer (the kernel would answer EFAULT; so must we, by not hinting). */
bool safe_read (const void *p, void *out, size_t n);

/* The configured mount with this device, or NULL. */
const struct mount *mount_of (dev_t dev);

/* Prints the process's one warning line, unless quiet, already done, or
 * stderr is a file on the volume (it could be the program's data). */
void warn (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

/* Re-reads the advice in this thread's ioprio into the cache. */
unsigned ioprio_reread (uint64_t now);

/* The hint for a range of file f (NULL: unknown file): `io` over the
 * file's F_SET_RW_HINT over the process's.  Class and advice only. */
struct hc_hint effective_hint (const struct file *f, struct hc_hint io);

/* The advice in this thread's ioprio (the RFC's bits), re-read at most
 * every 100 ms. */
static inline unsigned
ioprio_advice (void)
{
  uint64_t now = hc_clock_ns (CLOCK_MONOTONIC_COARSE);

  if (ioprio_at == 0 || now - ioprio_at >= IOPRIO_RECHECK_NS)
    return ioprio_reread (now);
  return ioprio_adv;
}

/* Whether the library is active at all for this call. */
static inline bool
active (void)
{
  return atomic_load_explicit (&ready, memory_order_acquire) && cfg.on && !busy
         && !atomic_load_explicit (&finished, memory_order_relaxed);
}

/* The cheap check before every write: is there anything to say? */
static inline bool
want_write_hints (void)
{
  if (!active ())
    return false;
  if (atomic_load_explicit (&file_hints, memory_order_relaxed) > 0 || !empty_hint (cfg.base))
    return true;
  return ioprio_advice () != HC_ADVICE_NONE;
}

/* The lock, and the mark that this thread holds it (or is about to, or
 * has just let it go): a signal handler run on this thread meanwhile that
 * writes or closes passes straight through (active() is false) instead of
 * waiting for the lock forever. */
static inline void
enter (void)
{
  busy = true;
  atomic_signal_fence (memory_order_seq_cst);
  pthread_mutex_lock (&lock);
}

static inline void
leave (void)
{
  pthread_mutex_unlock (&lock);
  atomic_signal_fence (memory_order_seq_cst);
  busy = false;
}

/* Whether an fd operation needs bookkeeping (and this is not a vfork
 * child, whose fd table is its own but whose memory is its parent's). */
static inline bool
fd_bookkeeping (void)
{
  return active () && (atomic_load (&nbound) > 0 || __atomic_load_n (&sock_fd, __ATOMIC_RELAXED) >= 0)
         && getpid () == my_pid;
}

/* conn.c (under the lock) */

/* Makes sure there is a connection.  Returns false (and nothing waits)
 * while a failure is recent. */
bool sock_ready (void);

/* Forgets the connection; closes it only if the fd is still ours
 * (close_it). */
void sock_forget (bool close_it);

/* Sends advise (hint non-NULL) or unadvise for the placed extents of
 * [a, b) of the file open as fd, cut to the range.  Returns the end of the
 * placed bytes that run without a gap from a. */
uint64_t send_extents (int fd, uint64_t devoff, uint64_t a, uint64_t b, const char *hint);

/* files.c (under the lock, but fd_bookkeeping's callers) */
struct file *file_find (dev_t dev, ino_t ino);
struct fdent *fd_entry (int fd);
struct fdent *fd_lookup (int fd, const struct stat *st, const struct mount *m);
void forget_fd (int fd);
void forget_fd_range (unsigned first, unsigned last);
void dup_binding (int oldfd, int newfd);
void files_after_fork (void);
void files_at_exit (void);

/* prealloc.c (give_back and give_back_all under the lock) */
void give_back (struct file *f, int fd, uint64_t a, uint64_t b);
void give_back_all (struct file *f, int fd);
struct file *before_write (int fd, int64_t off, uint64_t len, bool append);

/* The write before_write prepared has returned. */
static inline void
after_write (struct file *f)
{
  if (f)
    atomic_fetch_sub (&f->inflight, 1);
}

#pragma GCC visibility pop

#endif /* HC_PRELOAD_H */
