/* libhintcache-preload.so: the control socket.
 *
 * One connection per process, made when there is something to send and
 * kept; requests go in batches of up to BATCH lines, sent at once, their
 * replies read after.  All of it through the control client
 * (hc_control_open, hc_control_batch), with the deadlines the library
 * promises (connecting 100 ms, the greeting 250 ms, a batch and its
 * replies 250 ms) and the hooks it needs inside an arbitrary program: the
 * socket's fd at SOCK_FD_MIN or above, out of the way of programs that use
 * low fds by number, and closed with the real close, not ours.  A program
 * may close that fd or dup2 another file over it (forget_fd, and the
 * device and inode check here, see to it: the fd is then not ours to use
 * or close).
 *
 * After a failure the connection is dropped, one warning is printed (at
 * most one per process, see warn) and nothing is tried for 1 s, doubling
 * up to 30 s while failures repeat; what could not be sent is counted as
 * dropped.  Everything here runs under the lock.
 */
#include "preload.h"

#include "hintcache/control.h"
#include "hintcache/extents.h"

static hc_control_client *conn;
int sock_fd = -1;          /* conn's socket, also read outside the lock */
static dev_t sock_dev;     /* … and what it is */
static ino_t sock_ino;
uint64_t retry_at;         /* CLOCK_MONOTONIC ns: no connection attempt before */
static uint64_t retry_ns = RETRY_MIN_NS;

/* How the client closes our socket: with the real close, not ours. */
static int
sock_close (int fd)
{
  return RESOLVE (close) ? real_close (fd) : -1;
}

/* Forgets the connection; closes it only if the fd is still ours. */
void
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
  retry_at = hc_clock_ns (CLOCK_MONOTONIC) + retry_ns;
  retry_ns = min64 (2 * retry_ns, RETRY_MAX_NS);
  va_start (ap, fmt);
  vsnprintf (why, sizeof why, fmt, ap);
  va_end (ap);
  warn ("control socket %s: %s; hints are dropped (the program runs as without them)",
        cfg.socket, why);
}

/* Makes sure there is a connection.  Returns false (and nothing waits)
 * while a failure is recent. */
bool
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
  if (hc_clock_ns (CLOCK_MONOTONIC) < retry_at)
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
uint64_t
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
