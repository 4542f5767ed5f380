/* The control socket's client: connect and read the greeting, then request
 * lines and their replies — one at a time (hc_control_request, for tools
 * that wait as long as it takes) or a batch sent at once and its replies
 * read after, all within a deadline (hc_control_batch, for the preload
 * library, which must never hold up the program it is loaded into).
 *
 * Every wait is a poll with a deadline (or none), and every send and recv
 * passes MSG_DONTWAIT: a call bound by a deadline returns by it whatever
 * the server does.  Replies are read through a buffer of the client's
 * longest line; a client opened with hc_control_connect cuts a longer reply
 * to fit and skips the rest of its line, so the next request still gets
 * its own reply, and one opened with hc_control_open fails on it.  "error
 * ENAME message" replies are turned back into negative errno values with
 * the table exec.c writes them with.
 *
 * The client closes its socket through the function its options name, so
 * that a library interposing close (the preload library) closes it with the
 * real one, and it knows the socket's identity (fd, device, inode), so that
 * such a library can tell whether the program closed the fd or put another
 * file there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/control.h"
#include "util.h"
#include "control/control_priv.h"

#define GREETING_TIMEOUT_MS 10000 /* hc_control_connect: the server speaks by then */
#define MS 1000000ull             /* nanoseconds */
#define NO_DEADLINE UINT64_MAX

struct hc_control_client {
  int fd;
  dev_t dev;
  ino_t ino;
  int (*close_fd) (int);
  bool strict;  /* a line longer than the buffer is an error (not cut) */
  size_t cap;   /* the longest line, newline included: the size of buf and line */
  size_t used;  /* bytes in buf not yet returned */
  char *buf;    /* received bytes */
  char *line;   /* the line being sent or the reply being parsed */
  char mem[];   /* buf and line */
};

/* The deadline timeout_ms from now (NO_DEADLINE for a negative one). */
static uint64_t
deadline_in (int timeout_ms)
{
  return timeout_ms < 0 ? NO_DEADLINE : hc_clock_ns (CLOCK_MONOTONIC) + (uint64_t) timeout_ms * MS;
}

/* Waits until fd is ready for `events` or the deadline passes.  Returns 1,
 * 0 on timeout, -1 on error. */
static int
wait_fd (int fd, short events, uint64_t deadline)
{
  for (;;) {
    int ms = -1;
    if (deadline != NO_DEADLINE) {
      uint64_t now = hc_clock_ns (CLOCK_MONOTONIC);
      if (now >= deadline)
        return 0;
      uint64_t left = (deadline - now + MS - 1) / MS;
      ms = left > INT_MAX ? INT_MAX : (int) left;
    }
    struct pollfd p = { .fd = fd, .events = events };
    int r = poll (&p, 1, ms);
    if (r > 0)
      return 1;
    if (r == 0)
      continue; /* the loop checks the deadline */
    if (errno != EINTR)
      return -1;
  }
}

/* Reads one line into c->line (newline and a '\r' before it removed).
 * Returns 0, -ETIMEDOUT, -EPIPE (the server closed), -EMSGSIZE (a line
 * longer than the buffer, on a strict client; others cut it) or -EIO. */
static int
read_line (struct hc_control_client *c, uint64_t deadline)
{
  size_t copied = 0;

  for (;;) {
    char *nl = memchr (c->buf, '\n', c->used);
    if (nl) {
      size_t k = (size_t) (nl - c->buf), n = k;
      if (n > 0 && c->buf[n - 1] == '\r')
        n--;
      if (n > c->cap - 1 - copied)
        n = c->cap - 1 - copied;
      memcpy (c->line + copied, c->buf, n);
      c->line[copied + n] = '\0';
      memmove (c->buf, nl + 1, c->used - k - 1);
      c->used -= k + 1;
      return 0;
    }
    if (c->used == c->cap) {
      if (c->strict)
        return -EMSGSIZE;
      /* Keep what fits of a line longer than the buffer; skip the rest. */
      size_t n = c->cap - 1 - copied < c->used ? c->cap - 1 - copied : c->used;
      memcpy (c->line + copied, c->buf, n);
      copied += n;
      c->used = 0;
    }
    ssize_t n = recv (c->fd, c->buf + c->used, c->cap - c->used, MSG_DONTWAIT);
    if (n > 0) {
      c->used += (size_t) n;
      continue;
    }
    if (n == 0)
      return -EPIPE;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return errno == ECONNRESET || errno == EPIPE ? -EPIPE : -EIO;
    int w = wait_fd (c->fd, POLLIN, deadline);
    if (w <= 0)
      return w == 0 ? -ETIMEDOUT : -EIO;
  }
}

/* Sends buf[len] whole.  Returns 0, -ETIMEDOUT (the server takes nothing
 * by the deadline), -EIO (waiting failed) or the negative errno of send. */
static int
send_all (struct hc_control_client *c, const char *buf, size_t len, uint64_t deadline)
{
  for (size_t done = 0; done < len;) {
    ssize_t k = send (c->fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      done += (size_t) k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd (c->fd, POLLOUT, deadline);
      if (w > 0)
        continue;
      return w == 0 ? -ETIMEDOUT : -EIO;
    }
    return k < 0 ? -errno : -EPIPE;
  }
  return 0;
}

/* Splits "error ENAME message": returns the negative errno (-EIO for a
 * name not in the table) and points *msg at the message, or returns 0 if
 * the line is not an error reply. */
static int
error_reply (const char *line, const char **msg)
{
  char name[32];
  size_t n;
  int err;

  if (strncmp (line, "error ", 6) != 0)
    return 0;
  line += 6;
  n = strcspn (line, " ");
  if (n == 0 || n >= sizeof name)
    return 0;
  memcpy (name, line, n);
  name[n] = '\0';
  err = hc_ctl_errno_parse (name);
  *msg = line[n] ? line + n + 1 : line + n;
  return err ? -err : -EIO;
}

static int
plain_close (int fd)
{
  return close (fd);
}

/* What connecting reports in `why`: hc_control_connect's words (with the
 * path) or hc_control_open's (without it, for a caller that names the
 * socket itself). */
enum style { CONNECT_STYLE, OPEN_STYLE };

static const char *
read_error (int rc)
{
  return rc == -ETIMEDOUT ? "no reply in time"
         : rc == -EPIPE ? "the server closed the connection"
         : rc == -EMSGSIZE ? "a reply line too long" : "receiving failed";
}

static int
open_client (const char *path, const struct hc_control_options *opt, enum style style,
             hc_control_client **out, char *why, size_t whylen)
{
  static const struct hc_control_options defaults = { .connect_ms = -1,
                                                      .greeting_ms = GREETING_TIMEOUT_MS };
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct hc_control_client *c;
  struct stat st;
  const char *msg;
  char dummy[8];
  int rc;

  if (!why || whylen == 0) {
    why = dummy;
    whylen = sizeof dummy;
  }
  why[0] = '\0';
  if (!path || !out) {
    snprintf (why, whylen, "no path or result pointer");
    return -EINVAL;
  }
  if (!opt)
    opt = &defaults;
  if (!path[0] || strlen (path) >= sizeof addr.sun_path) {
    snprintf (why, whylen, "socket path must be 1 to %zu bytes", sizeof addr.sun_path - 1);
    return path[0] ? -ENAMETOOLONG : -EINVAL;
  }
  size_t cap = opt->line_max ? opt->line_max : HC_CONTROL_LINE;
  if (cap < 2 || opt->fd_min < 0) {
    snprintf (why, whylen, "line_max must be at least 2 and fd_min not negative");
    return -EINVAL;
  }
  uint64_t connect_by = deadline_in (opt->connect_ms);
  memcpy (addr.sun_path, path, strlen (path) + 1);
  if (!(c = malloc (sizeof *c + 2 * cap))) {
    snprintf (why, whylen, "out of memory");
    return -ENOMEM;
  }
  c->close_fd = opt->close_fd ? opt->close_fd : plain_close;
  c->strict = style == OPEN_STYLE;
  c->cap = cap;
  c->used = 0;
  c->buf = c->mem;
  c->line = c->mem + cap;
  /* Nonblocking connect only when it has a deadline: a blocking one waits
   * for room in the server's backlog, where a nonblocking one fails. */
  int type = SOCK_STREAM | SOCK_CLOEXEC | (opt->connect_ms >= 0 ? SOCK_NONBLOCK : 0);
  if ((c->fd = socket (AF_UNIX, type, 0)) < 0) {
    rc = -errno;
    snprintf (why, whylen, "socket: %s", strerror (errno));
    free (c);
    return rc;
  }
  if (opt->fd_min > 0 && c->fd < opt->fd_min) {
    int high = fcntl (c->fd, F_DUPFD_CLOEXEC, opt->fd_min);
    if (high >= 0) {
      c->close_fd (c->fd);
      c->fd = high;
    }
  }
  if (connect (c->fd, (struct sockaddr *) &addr, sizeof addr) < 0) {
    rc = -errno;
    if (errno != EINPROGRESS) {
      if (style == OPEN_STYLE)
        snprintf (why, whylen, "cannot connect: %s", strerror (errno));
      else
        snprintf (why, whylen, "connect %s: %s", path, strerror (errno));
      goto fail;
    }
    int err = 0;
    socklen_t elen = sizeof err;
    if (wait_fd (c->fd, POLLOUT, connect_by) <= 0) {
      rc = -ETIMEDOUT;
      if (style == OPEN_STYLE)
        snprintf (why, whylen, "cannot connect within %d ms", opt->connect_ms);
      else
        snprintf (why, whylen, "connect %s: no connection within %d ms", path, opt->connect_ms);
      goto fail;
    }
    if (getsockopt (c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err != 0) {
      err = err ? err : errno;
      rc = -err;
      if (style == OPEN_STYLE)
        snprintf (why, whylen, "cannot connect: %s", strerror (err));
      else
        snprintf (why, whylen, "connect %s: %s", path, strerror (err));
      goto fail;
    }
  }
  if (fstat (c->fd, &st) < 0) {
    rc = -errno;
    snprintf (why, whylen, "fstat: %s", strerror (errno));
    goto fail;
  }
  c->dev = st.st_dev;
  c->ino = st.st_ino;
  rc = read_line (c, deadline_in (opt->greeting_ms));
  if (rc < 0) {
    if (style == OPEN_STYLE)
      snprintf (why, whylen, "no greeting (%s)", read_error (rc));
    else
      snprintf (why, whylen, "%s: %s", path, rc == -ETIMEDOUT ? "the server sent no greeting"
                : rc == -EPIPE ? "the server closed the connection before its greeting"
                : "reading the greeting failed");
    rc = -EPROTO;
    goto fail;
  }
  size_t g = strlen (HC_CONTROL_GREETING);
  char version[16];
  snprintf (version, sizeof version, "%d", HC_CONTROL_VERSION);
  if ((rc = error_reply (c->line, &msg)) < 0) {
    if (rc == -EPERM || rc == -EACCES) {
      rc = -EACCES;
      if (style == CONNECT_STYLE)
        snprintf (why, whylen, "%s: the server refused this user: %.200s", path, msg);
    } else if (style == CONNECT_STYLE)
      snprintf (why, whylen, "%s: the server refused the connection: %.200s", path, msg);
  } else if (strncmp (c->line, HC_CONTROL_GREETING " ", g + 1) != 0) {
    rc = -EPROTO;
    if (style == CONNECT_STYLE)
      snprintf (why, whylen, "%s is not a hintcache control socket", path);
  } else if (strcmp (c->line + g + 1, version) != 0) {
    rc = -EPROTO;
    if (style == CONNECT_STYLE)
      snprintf (why, whylen, "%s speaks control protocol version '%.20s'; this client speaks %d",
                path, c->line + g + 1, HC_CONTROL_VERSION);
  }
  if (rc < 0) {
    if (style == OPEN_STYLE)
      snprintf (why, whylen, "not a hintcache control socket (it said '%.60s')", c->line);
    goto fail;
  }
  *out = c;
  return 0;

fail:
  c->close_fd (c->fd);
  free (c);
  return rc;
}

int
hc_control_connect (const char *path, hc_control_client **out, char *why, size_t whylen)
{
  return open_client (path, NULL, CONNECT_STYLE, out, why, whylen);
}

int
hc_control_open (const char *path, const struct hc_control_options *opt, hc_control_client **out,
                 char *why, size_t whylen)
{
  return open_client (path, opt, OPEN_STYLE, out, why, whylen);
}

/* Copies text into reply[len], truncated to fit. */
static void
put_reply (char *reply, size_t len, const char *text)
{
  if (len)
    snprintf (reply, len, "%s", text);
}

int
hc_control_request (hc_control_client *c, const char *line, char *reply, size_t len)
{
  size_t n;
  int rc;

  if (!c || !line) {
    put_reply (reply, len, "no connection or no request");
    return -EINVAL;
  }
  n = strlen (line);
  if (strchr (line, '\n')) {
    put_reply (reply, len, "a request must not contain a newline");
    return -EINVAL;
  }
  if (n > HC_CONTROL_LINE - 1 || n > c->cap - 1) {
    put_reply (reply, len, "request line too long");
    return -E2BIG;
  }
  /* The line and its newline in one send. */
  memcpy (c->line, line, n);
  c->line[n++] = '\n';
  if ((rc = send_all (c, c->line, n, NO_DEADLINE)) < 0) {
    rc = rc == -EPIPE || rc == -ECONNRESET ? -EPIPE : -EIO;
    put_reply (reply, len, rc == -EPIPE ? "the server closed the connection"
               : "sending the request failed");
    return rc;
  }
  if ((rc = read_line (c, NO_DEADLINE)) < 0) {
    rc = rc == -EPIPE ? -EPIPE : -EIO;
    put_reply (reply, len, rc == -EPIPE ? "the server closed the connection"
               : "reading the reply failed");
    return rc;
  }
  if (strcmp (c->line, "ok") == 0) {
    put_reply (reply, len, "");
    return 0;
  }
  if (strncmp (c->line, "ok ", 3) == 0) {
    put_reply (reply, len, c->line + 3);
    return 0;
  }
  const char *msg;
  if ((rc = error_reply (c->line, &msg)) < 0) {
    put_reply (reply, len, msg);
    return rc;
  }
  put_reply (reply, len, "malformed reply from the server");
  return -EPROTO;
}

int
hc_control_batch (hc_control_client *c, const char *requests, size_t len, int timeout_ms,
                  hc_control_on_reply on_reply, void *arg, char *why, size_t whylen)
{
  char dummy[8];
  unsigned n = 0;
  int rc;

  if (!why || whylen == 0) {
    why = dummy;
    whylen = sizeof dummy;
  }
  why[0] = '\0';
  if (!c || (len > 0 && !requests)) {
    snprintf (why, whylen, "no connection or no requests");
    return -EINVAL;
  }
  if (len == 0)
    return 0;
  if (requests[len - 1] != '\n') {
    snprintf (why, whylen, "the last request has no newline");
    return -EINVAL;
  }
  for (const char *p = requests, *end = requests + len; p < end; n++) {
    const char *nl = memchr (p, '\n', (size_t) (end - p));
    if ((size_t) (nl - p) > HC_CONTROL_LINE - 1 || n == UINT_MAX) {
      snprintf (why, whylen, "request line too long");
      return -E2BIG;
    }
    p = nl + 1;
  }
  uint64_t deadline = deadline_in (timeout_ms);
  if ((rc = send_all (c, requests, len, deadline)) < 0) {
    if (rc == -ETIMEDOUT)
      snprintf (why, whylen, "the server takes no requests");
    else if (rc == -EIO)
      snprintf (why, whylen, "sending failed");
    else
      snprintf (why, whylen, "sending failed: %s", strerror (-rc));
    return rc;
  }
  for (unsigned i = 0; i < n; i++) {
    const char *msg;
    int status;
    if ((rc = read_line (c, deadline)) < 0) {
      snprintf (why, whylen, "%s", read_error (rc));
      return rc;
    }
    if (strcmp (c->line, "ok") == 0 || strncmp (c->line, "ok ", 3) == 0)
      status = 0;
    else if (strncmp (c->line, "error ", 6) == 0)
      status = (status = error_reply (c->line, &msg)) < 0 ? status : -EIO;
    else {
      snprintf (why, whylen, "a reply that is neither ok nor error: '%.60s'", c->line);
      return -EPROTO;
    }
    if (on_reply)
      on_reply (arg, i, status, c->line);
  }
  return 0;
}

int
hc_control_identity (const hc_control_client *c, struct hc_control_id *id)
{
  if (!c || !id)
    return -EINVAL;
  *id = (struct hc_control_id) { .fd = c->fd, .dev = c->dev, .ino = c->ino };
  return 0;
}

void
hc_control_close (hc_control_client *c)
{
  if (!c)
    return;
  c->close_fd (c->fd);
  free (c);
}

void
hc_control_abandon (hc_control_client *c)
{
  free (c);
}
