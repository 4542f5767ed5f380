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
 * (pthread_atfork), and a vfork child changes nothing.  A thread holding
 * the mutex (fork holds it throughout) is marked busy, so that a signal
 * handler run on it that writes or closes passes straight through instead
 * of waiting for itself.  A process with no hint and no F_SET_RW_HINT pays
 * per write a check of a per-thread cache of its ioprio, re-read at most every 100 ms (`ionice -p` can change it); a
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
 *
 * The library's files: this one (the configuration, the process's hint,
 * the one warning, set-up, fork and exit), files.c (the files and fds the
 * program writes), prealloc.c (working ahead of writers, giving back),
 * conn.c (the control socket, through the control client), interpose.c
 * (the interposers; the list of them is interposers.def) and preload.h
 * (what they share).
 */
#include "preload.h"

#include <sys/syscall.h>

#include "util.h"

/* ---------------------------------------------------------------------------
 * Configuration and shared state
 */
struct config cfg;
atomic_bool ready;
atomic_bool finished;
pid_t my_pid;

pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
TLS bool busy;
struct counters stats;
TLS uint64_t ioprio_at;
TLS uint8_t ioprio_adv;

static atomic_bool warned;

/* ---------------------------------------------------------------------------
 * Small helpers
 */
/* Copies n bytes of the program's memory at p without faulting on a bad
 * pointer (the kernel would answer EFAULT; so must we, by not hinting). */
bool
safe_read (const void *p, void *out, size_t n)
{
  struct iovec local = { out, n }, remote = { (void *) p, n };

  if (!p)
    return false;
  return process_vm_readv (getpid (), &local, 1, &remote, 1, 0) == (ssize_t) n;
}

const struct mount *
mount_of (dev_t dev)
{
  for (unsigned i = 0; i < cfg.nmounts; i++)
    if (cfg.mounts[i].dev == dev)
      return &cfg.mounts[i];
  return NULL;
}

/* Prints the process's one warning line, unless quiet, already done, or
 * stderr is a file on the volume (it could be the program's data). */
void
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
/* Reads the advice in this thread's ioprio (the RFC's bits) into the
 * per-thread cache ioprio_advice checks (preload.h). */
unsigned
ioprio_reread (uint64_t now)
{
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

struct hc_hint
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

/* fork holds the lock from prepare to parent (or child), and a signal may
 * be handled in between, on this thread, while the kernel restarts the
 * fork: libuv's SIGCHLD handler (cmake's) and CPython's write to a pipe
 * there.  enter() marks the thread busy, so that their write passes
 * straight through rather than wait for the lock this thread holds. */
static void
atfork_prepare (void)
{
  if (cfg.on)
    enter ();
}

static void
atfork_parent (void)
{
  if (cfg.on)
    leave ();
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
  files_after_fork ();
  memset (&stats, 0, sizeof stats);
  leave ();
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
  files_at_exit ();
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
