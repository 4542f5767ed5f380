/* The NBD tier: an export of an NBD server, reached through libnbd — a slow
 * tier that lives on another machine (or behind a Unix socket).
 *
 * The export is named only by its URI (nbd_connect_uri sets the export
 * name, TLS and the transport from it).  The size is the export's, rounded
 * down to a sector; the capabilities are what the server advertises.  A
 * tier is read-only when asked to be or when the server says so, and then
 * every write, zero and discard returns -EROFS before reaching the server.
 *
 * Threads.  Each connection serves one request at a time (its mutex held
 * from the first command to the last reply), as libnbd's synchronous calls
 * would: one connection serialises every caller.  When the server advertises multi-conn (all its connections
 * see one consistent view, and a flush on any covers writes completed on
 * all), up to four connections are opened and requests are dealt out round
 * robin by an atomic counter.  The extra connections are best effort: one
 * that fails, or reports a different size, just leaves fewer connections.
 * Each request, however it is split, goes to one connection, so that the
 * flush that stands in for a missing FUA reaches the connection that wrote.
 *
 * Sizes.  The NBD protocol lets a server cap the length of a read or write
 * (its advertised maximum block size); without one, 32 MiB is what every
 * server takes, and libnbd itself refuses more than 64 MiB.  Reads and
 * writes are therefore split at the advertised maximum, capped at 32 MiB.
 * Zero and trim carry no payload, so the cap does not apply to them; they
 * are split at 1 GiB only to stay far below the protocol's 32-bit length.
 * A server whose minimum block size exceeds 512 bytes cannot take the
 * sector-aligned I/O the door allows, and is refused at open.
 *
 * Durability.  A FUA write sets NBD's FUA flag on every piece when the
 * server supports it, else it is written and then flushed on the same
 * connection.  Flush flushes every connection (one would do under
 * multi-conn, but all is simplest and always correct); a server that cannot
 * flush has nothing to flush, and the call succeeds.
 *
 * Zero and discard.  NBD's trim gives no guarantee about what later reads
 * return, so trim is never used.  When the server can write zeros, both zero
 * and discard send NBD_CMD_WRITE_ZEROES without NO_HOLE, which lets the
 * server punch a hole yet still guarantees zeros on read — and only then
 * does the tier claim HC_CAP_DISCARD.  Otherwise the ops table leaves both
 * NULL and the door writes zeros.
 *
 * Deadlines.  A server that stops answering must not hang the volume (a
 * remote disk behind a dead network, say).  So every command is issued
 * asynchronously and its reply waited for with nbd_poll until a deadline
 * (30 s by default, hc_tier_nbd_set_timeout): past it, the call fails with
 * -ETIMEDOUT and the connection is abandoned for good — no call touches its
 * handle again until the tier closes, since a late reply would otherwise
 * be read into a buffer its caller has since freed.  Requests then go to
 * the remaining connections; with none left, every call fails at once.
 *
 * Errors are libnbd's errno (nbd_get_errno, thread-local), or -EIO when it
 * has none; at open, nbd_get_error's text goes into `why`.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnbd.h>

#include "tier.h"

/* Connections opened when the server allows multi-conn. */
#define MAX_CONNS 4
/* The largest read or write sent in one request. */
#define MAX_IO ((uint64_t) 32 << 20)
/* The largest zero sent in one request. */
#define MAX_ZERO ((uint64_t) 1 << 30)

/* The default deadline of a command. */
#define DEFAULT_TIMEOUT_MS 30000u

struct conn {
  struct nbd_handle *h;
  pthread_mutex_t mu;  /* one request at a time */
  bool dead;           /* a command timed out: never touched again (under mu) */
};

struct nbd_tier {
  hc_tier base;
  struct conn c[MAX_CONNS];
  unsigned nconns;
  _Atomic unsigned timeout_ms;
  atomic_uint next; /* round-robin counter over h[] */
  bool readonly;
  bool can_fua;
  bool can_flush;
  size_t max_io; /* reads and writes are split at this (a multiple of 512) */
};

/* Writes a message into why[whylen] (either may be empty). */
static void __attribute__ ((format (printf, 3, 4)))
say (char *why, size_t whylen, const char *fmt, ...)
{
  va_list ap;

  if (!why || whylen == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (why, whylen, fmt, ap);
  va_end (ap);
}

/* The negative errno of the libnbd call that just failed in this thread. */
static int
failure (void)
{
  int e = nbd_get_errno ();

  return e > 0 ? -e : -EIO;
}

static uint64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Takes the connection for the next request (locked), skipping abandoned
 * ones; NULL when every one is. */
static struct conn *
take (struct nbd_tier *n)
{
  unsigned i = atomic_fetch_add_explicit (&n->next, 1, memory_order_relaxed);

  for (unsigned k = 0; k < n->nconns; k++) {
    struct conn *c = &n->c[(i + k) % n->nconns];
    pthread_mutex_lock (&c->mu);
    if (!c->dead)
      return c;
    pthread_mutex_unlock (&c->mu);
  }
  return NULL;
}

/* Waits for the command `cookie` (as an aio call returned it) on c, whose
 * mutex is held, until it completes or the deadline passes.  Returns 0, the
 * command's error, or -ETIMEDOUT (and c is abandoned). */
static int
wait_cmd (struct nbd_tier *n, struct conn *c, int64_t cookie)
{
  uint64_t deadline = now_ms () + atomic_load (&n->timeout_ms);

  if (cookie < 0)
    return failure ();
  for (;;) {
    int r = nbd_aio_command_completed (c->h, (uint64_t) cookie);
    if (r == 1)
      return 0;
    if (r < 0)
      return failure ();
    uint64_t now = now_ms ();
    if (now >= deadline) {
      c->dead = true;
      return -ETIMEDOUT;
    }
    uint64_t left = deadline - now;
    if (nbd_poll (c->h, left > INT_MAX ? INT_MAX : (int) left) < 0)
      return failure ();
  }
}

enum op { OP_READ, OP_WRITE, OP_ZERO };

/* Carries out a read, write or zeroing of [off, off + len) on the next
 * connection, in pieces of at most max_io (MAX_ZERO for zeroing), each
 * with the NBD flags `cmd`; then, if `flush`, a flush.  p is the read's
 * buffer or the write's data (which nothing here writes to), NULL for
 * zeroing. */
static int
in_pieces (struct nbd_tier *n, enum op op, unsigned char *p, uint64_t len, uint64_t off,
           uint32_t cmd, bool flush)
{
  uint64_t max = op == OP_ZERO ? MAX_ZERO : n->max_io;
  int rc = 0;

  if (op != OP_READ && n->readonly)
    return -EROFS;
  struct conn *c = take (n);
  if (!c)
    return -ETIMEDOUT;
  while (len && rc == 0) {
    uint64_t k = len < max ? len : max;
    int64_t cookie = op == OP_READ    ? nbd_aio_pread (c->h, p, k, off, NBD_NULL_COMPLETION, cmd)
                     : op == OP_WRITE ? nbd_aio_pwrite (c->h, p, k, off, NBD_NULL_COMPLETION, cmd)
                                      : nbd_aio_zero (c->h, k, off, NBD_NULL_COMPLETION, cmd);
    rc = wait_cmd (n, c, cookie);
    if (p)
      p += k;
    off += k;
    len -= k;
  }
  if (rc == 0 && flush)
    rc = wait_cmd (n, c, nbd_aio_flush (c->h, NBD_NULL_COMPLETION, 0));
  pthread_mutex_unlock (&c->mu);
  return rc;
}

/* Reads, split at max_io. */
static int
remote_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  return in_pieces ((struct nbd_tier *) t, OP_READ, buf, len, off, 0, false);
}

/* Writes, split at max_io; with HC_TIER_FUA every piece carries NBD's FUA
 * flag, or the whole is flushed afterwards. */
static int
remote_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  struct nbd_tier *n = (struct nbd_tier *) t;
  bool fua = flags & HC_TIER_FUA;

  return in_pieces (n, OP_WRITE, (unsigned char *) buf, len, off,
                    fua && n->can_fua ? LIBNBD_CMD_FLAG_FUA : 0, fua && !n->can_fua && n->can_flush);
}

/* Flushes every connection; returns the first error after trying all.
 * An abandoned connection makes the flush fail: what it wrote is not
 * known to be durable. */
static int
remote_flush (hc_tier *t)
{
  struct nbd_tier *n = (struct nbd_tier *) t;
  int rc = 0;

  if (!n->can_flush)
    return 0;
  for (unsigned i = 0; i < n->nconns; i++) {
    struct conn *c = &n->c[i];
    pthread_mutex_lock (&c->mu);
    int r = c->dead ? -ETIMEDOUT : wait_cmd (n, c, nbd_aio_flush (c->h, NBD_NULL_COMPLETION, 0));
    pthread_mutex_unlock (&c->mu);
    if (r < 0 && rc == 0)
      rc = r;
  }
  return rc;
}

/* Zeros a range with NBD_CMD_WRITE_ZEROES, letting the server punch a hole;
 * reads return zeros either way, so this serves discard too. */
static int
remote_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  return in_pieces ((struct nbd_tier *) t, OP_ZERO, NULL, len, off, 0, false);
}

/* Closes every connection and frees the tier.  An abandoned one is closed
 * without a word to the server (its replies are not read). */
static void
remote_close (hc_tier *t)
{
  struct nbd_tier *n = (struct nbd_tier *) t;

  for (unsigned i = 0; i < n->nconns; i++) {
    if (!n->c[i].dead)
      nbd_shutdown (n->c[i].h, 0);
    nbd_close (n->c[i].h);
    pthread_mutex_destroy (&n->c[i].mu);
  }
  free (n);
}

int
hc_tier_nbd_set_timeout (hc_tier *t, unsigned ms)
{
  if (!t || t->ops->close != remote_close || ms == 0)
    return -EINVAL;
  atomic_store (&((struct nbd_tier *) t)->timeout_ms, ms);
  return 0;
}

/* For a server that can write zeros. */
static const struct hc_tier_ops zeroing_ops = {
  .kind = "nbd",
  .read = remote_read,
  .write = remote_write,
  .flush = remote_flush,
  .discard = remote_zero,
  .zero = remote_zero,
  .close = remote_close,
};

/* For one that cannot: the door writes zeros. */
static const struct hc_tier_ops plain_ops = {
  .kind = "nbd",
  .read = remote_read,
  .write = remote_write,
  .flush = remote_flush,
  .close = remote_close,
};

/* True if uri's scheme is one libnbd connects to. */
static bool
is_nbd_uri (const char *uri)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://", "nbds+vsock://",
  };

  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    if (strncmp (uri, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

/* Opens one connection to uri.  Returns 0, or a negative errno with `why`
 * filled from libnbd. */
static int
connect_one (const char *uri, struct nbd_handle **out, char *why, size_t whylen)
{
  struct nbd_handle *h = nbd_create ();
  int rc;

  if (!h) {
    rc = failure ();
    say (why, whylen, "%s", nbd_get_error () ? nbd_get_error () : strerror (-rc));
    return rc;
  }
  if (nbd_supports_uri (h) != 1) {
    say (why, whylen, "%s: this libnbd was built without support for URIs", uri);
    nbd_close (h);
    return -EPROTONOSUPPORT;
  }
  if (nbd_connect_uri (h, uri) < 0) {
    rc = failure ();
    say (why, whylen, "%s", nbd_get_error () ? nbd_get_error () : strerror (-rc));
    nbd_close (h);
    return rc;
  }
  *out = h;
  return 0;
}

/* Reads what the first connection's handshake told about the export into
 * n and *size, *caps.  Returns 0, or a negative errno with `why` filled. */
static int
probe (struct nbd_tier *n, const char *uri, uint64_t *size, unsigned *caps, bool *can_zero,
       char *why, size_t whylen)
{
  struct nbd_handle *h = n->c[0].h;
  int64_t sz = nbd_get_size (h), min, max;
  int ro, fua, flush, zero, rot;

  if (sz < 0 || (ro = nbd_is_read_only (h)) < 0 || (fua = nbd_can_fua (h)) < 0
      || (flush = nbd_can_flush (h)) < 0 || (zero = nbd_can_zero (h)) < 0
      || (rot = nbd_is_rotational (h)) < 0
      || (min = nbd_get_block_size (h, LIBNBD_SIZE_MINIMUM)) < 0) {
    int rc = failure ();
    say (why, whylen, "%s", nbd_get_error () ? nbd_get_error () : strerror (-rc));
    return rc;
  }
  if (min > HC_SECTOR_SIZE) {
    say (why, whylen, "%s: the export's minimum block size is %lld bytes; a tier must take %u",
         uri, (long long) min, HC_SECTOR_SIZE);
    return -EINVAL;
  }
  /* No maximum, or an unreadable one: 32 MiB, which every server takes. */
  max = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  if (max <= 0 || (uint64_t) max > MAX_IO)
    max = (int64_t) MAX_IO;
  max -= max % HC_SECTOR_SIZE;
  n->max_io = max > 0 ? (size_t) max : HC_SECTOR_SIZE;

  n->readonly = n->readonly || ro;
  n->can_fua = fua;
  n->can_flush = flush;
  *can_zero = zero;
  *size = (uint64_t) sz - (uint64_t) sz % HC_SECTOR_SIZE;
  /* A read-only tier can neither force writes nor release space. */
  *caps = HC_CAP_PERSISTENT | (rot ? HC_CAP_ROTATIONAL : 0);
  if (!n->readonly)
    *caps |= (fua ? HC_CAP_FUA : 0) | (zero ? HC_CAP_DISCARD : 0);
  return 0;
}

/* Adds connections up to MAX_CONNS when the server allows multi-conn; any
 * that fails, or disagrees about the size, is dropped and ends the
 * attempt. */
static void
add_connections (struct nbd_tier *n, const char *uri)
{
  int64_t size = nbd_get_size (n->c[0].h);

  if (nbd_can_multi_conn (n->c[0].h) != 1)
    return;
  while (n->nconns < MAX_CONNS) {
    struct nbd_handle *h;
    if (connect_one (uri, &h, NULL, 0) < 0)
      return;
    if (nbd_get_size (h) != size || nbd_is_read_only (h) != nbd_is_read_only (n->c[0].h)) {
      nbd_shutdown (h, 0);
      nbd_close (h);
      return;
    }
    pthread_mutex_init (&n->c[n->nconns].mu, NULL);
    n->c[n->nconns++].h = h;
  }
}

int
hc_tier_open_nbd (const char *uri, unsigned flags, hc_tier **out, char *why, size_t whylen)
{
  /* O_DIRECT has no meaning here: libnbd keeps no cache to bypass. */
  const unsigned known = HC_TIER_READONLY | HC_TIER_DIRECT;
  char name[sizeof ((hc_tier *) 0)->name];
  struct nbd_tier *n;
  uint64_t size = 0;
  unsigned caps = 0;
  bool can_zero = false;
  int rc;

  say (why, whylen, "%s", "");
  if (!uri || !out || (flags & ~known)) {
    say (why, whylen, "invalid arguments");
    return -EINVAL;
  }
  if (!is_nbd_uri (uri)) {
    say (why, whylen, "%s: not an NBD URI (nbd://, nbds://, nbd+unix://, …)", uri);
    return -EINVAL;
  }
  if (!(n = calloc (1, sizeof *n))) {
    say (why, whylen, "%s", strerror (ENOMEM));
    return -ENOMEM;
  }
  n->readonly = flags & HC_TIER_READONLY;
  atomic_init (&n->timeout_ms, DEFAULT_TIMEOUT_MS);
  rc = connect_one (uri, &n->c[0].h, why, whylen);
  if (rc < 0) {
    free (n);
    return rc;
  }
  pthread_mutex_init (&n->c[0].mu, NULL);
  n->nconns = 1;
  rc = probe (n, uri, &size, &caps, &can_zero, why, whylen);
  if (rc < 0) {
    remote_close (&n->base);
    return rc;
  }
  add_connections (n, uri);
  atomic_init (&n->next, 0);
  snprintf (name, sizeof name, "nbd:%s", uri);
  hc_tier_init (&n->base, can_zero ? &zeroing_ops : &plain_ops, size, caps, name);
  *out = &n->base;
  return 0;
}
