/* The control socket's client: connect and read the greeting, then one
 * request line and one reply line at a time.
 *
 * Replies are read through a small buffer; a reply longer than the
 * caller's buffer is cut to fit and the rest of its line is skipped, so the
 * next request still gets its own reply.  "error ENAME message" replies are
 * turned back into negative errno values with the table exec.c writes them
 * with.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "hintcache/control.h"
#include "control/control_priv.h"

#define GREETING_TIMEOUT 10 /* seconds to wait for the server to speak */

struct hc_control_client {
  int fd;
  size_t used;                /* bytes in buf not yet returned */
  char buf[HC_CONTROL_LINE];
  char line[HC_CONTROL_LINE]; /* the reply being parsed */
};

/* Reads one line into out[len] (newline and a '\r' before it removed,
 * truncated to fit).  Returns 0, -EPIPE at the end of the connection,
 * -EAGAIN on a receive timeout or -EIO. */
static int
read_line (struct hc_control_client *c, char *out, size_t len)
{
  size_t copied = 0;

  for (;;) {
    char *nl = memchr (c->buf, '\n', c->used);
    size_t take = nl ? (size_t) (nl - c->buf) : c->used;
    size_t room = len - 1 - copied, k = take < room ? take : room;
    memcpy (out + copied, c->buf, k);
    copied += k;
    if (nl) {
      memmove (c->buf, nl + 1, c->used - take - 1);
      c->used -= take + 1;
      break;
    }
    c->used = 0;
    ssize_t n = recv (c->fd, c->buf, sizeof c->buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n == 0)
      return -EPIPE;
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN
             : errno == ECONNRESET || errno == EPIPE ? -EPIPE : -EIO;
    c->used = (size_t) n;
  }
  if (copied > 0 && out[copied - 1] == '\r')
    copied--;
  out[copied] = '\0';
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

static void
set_timeout (int fd, unsigned seconds)
{
  struct timeval tv = { .tv_sec = seconds };
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

int
hc_control_connect (const char *path, hc_control_client **out, char *why, size_t whylen)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct hc_control_client *c;
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
  if (!path[0] || strlen (path) >= sizeof addr.sun_path) {
    snprintf (why, whylen, "socket path must be 1 to %zu bytes", sizeof addr.sun_path - 1);
    return path[0] ? -ENAMETOOLONG : -EINVAL;
  }
  memcpy (addr.sun_path, path, strlen (path) + 1);
  if (!(c = malloc (sizeof *c))) {
    snprintf (why, whylen, "out of memory");
    return -ENOMEM;
  }
  c->used = 0;
  if ((c->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
    rc = -errno;
    snprintf (why, whylen, "socket: %s", strerror (errno));
    free (c);
    return rc;
  }
  if (connect (c->fd, (struct sockaddr *) &addr, sizeof addr) < 0) {
    rc = -errno;
    snprintf (why, whylen, "connect %s: %s", path, strerror (errno));
    goto fail;
  }
  set_timeout (c->fd, GREETING_TIMEOUT);
  rc = read_line (c, c->line, sizeof c->line);
  set_timeout (c->fd, 0);
  if (rc < 0) {
    snprintf (why, whylen, "%s: %s", path, rc == -EAGAIN ? "the server sent no greeting"
              : rc == -EPIPE ? "the server closed the connection before its greeting"
              : "reading the greeting failed");
    rc = -EPROTO;
    goto fail;
  }
  if ((rc = error_reply (c->line, &msg)) < 0) {
    if (rc == -EPERM || rc == -EACCES) {
      snprintf (why, whylen, "%s: the server refused this user: %.200s", path, msg);
      rc = -EACCES;
    } else
      snprintf (why, whylen, "%s: the server refused the connection: %.200s", path, msg);
    goto fail;
  }
  size_t g = strlen (HC_CONTROL_GREETING);
  if (strncmp (c->line, HC_CONTROL_GREETING " ", g + 1) != 0) {
    snprintf (why, whylen, "%s is not a hintcache control socket", path);
    rc = -EPROTO;
    goto fail;
  }
  char version[16];
  snprintf (version, sizeof version, "%d", HC_CONTROL_VERSION);
  if (strcmp (c->line + g + 1, version) != 0) {
    snprintf (why, whylen, "%s speaks control protocol version '%.20s'; this client speaks %d",
              path, c->line + g + 1, HC_CONTROL_VERSION);
    rc = -EPROTO;
    goto fail;
  }
  *out = c;
  return 0;

fail:
  close (c->fd);
  free (c);
  return rc;
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
  char *send_buf;
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
  if (n > HC_CONTROL_LINE - 1) {
    put_reply (reply, len, "request line too long");
    return -E2BIG;
  }
  /* The line and its newline in one send. */
  send_buf = c->line;
  memcpy (send_buf, line, n);
  send_buf[n++] = '\n';
  for (size_t done = 0; done < n;) {
    ssize_t k = send (c->fd, send_buf + done, n - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      rc = k < 0 && errno != EPIPE && errno != ECONNRESET ? -EIO : -EPIPE;
      put_reply (reply, len, rc == -EPIPE ? "the server closed the connection"
                 : "sending the request failed");
      return rc;
    }
    done += (size_t) k;
  }
  if ((rc = read_line (c, c->line, sizeof c->line)) < 0) {
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

void
hc_control_close (hc_control_client *c)
{
  if (!c)
    return;
  close (c->fd);
  free (c);
}
