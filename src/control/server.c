/* The control socket's server: a Unix stream socket, an accept thread and
 * one thread per client, each reading request lines and answering them
 * with hc_control_exec.
 *
 * The socket file is made 0600 before anyone can connect: the socket's
 * mode is set with fchmod before bind (Linux creates the file with it) and
 * again with chmod before listen, and until listen a connect is refused
 * anyway.  A peer is checked with SO_PEERCRED as it is accepted.
 *
 * Threads and descriptors.  A client's descriptor is closed only by the
 * thread that joins its worker (the accept thread when it reaps finished
 * workers, or hc_control_stop), so shutdown(2) from hc_control_stop can
 * never hit a descriptor number that was reused.  A worker that ends by
 * itself shuts its socket down (so the peer sees the end at once) and pokes
 * the wake pipe so the accept thread reaps it.  hc_control_stop writes to
 * the wake pipe to end the accept thread, then shuts every client socket
 * down, which ends the workers' reads.
 *
 * Idle clients.  Long-lived clients (hintd, the preload library) keep
 * their connection between requests, so idleness alone ends nothing; but
 * when all MAX_CLIENTS slots are taken, a newcomer gets the slot of the
 * client idle longest, if it has been idle IDLE_S seconds or more (its
 * socket is shut down, its worker joined): idle connections can never
 * lock everyone out.  Such a client reconnects when it next needs to.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/control.h"
#include "control/control_priv.h"
#include "util.h"

#define MAX_CLIENTS 32
#define IDLE_S 10 /* a client idle this long may give its slot to a newcomer */

struct client {
  struct hc_control *srv;
  int fd;             /* -1: the slot is free */
  pthread_t thread;
  bool done;          /* the worker has finished; join and close it */
  time_t active;      /* when it last sent a request (CLOCK_MONOTONIC seconds) */
};

static time_t
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec;
}

struct hc_control {
  hc_volume *v;
  char *path;
  int lfd;            /* the listening socket */
  int wake[2];        /* a pipe: a byte wakes the accept thread */
  pthread_t acceptor;
  pthread_mutex_t lock;
  bool stopping;
  struct client clients[MAX_CLIENTS];
};

/* Sends a whole buffer; returns 0 or -1 if the connection failed. */
static int
send_all (int fd, const char *buf, size_t len, int flags)
{
  while (len > 0) {
    ssize_t n = send (fd, buf, len, MSG_NOSIGNAL | flags);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t) n;
  }
  return 0;
}

/* Sends one line, adding the newline. */
static int
send_line (int fd, const char *text, int flags)
{
  char buf[HC_CONTROL_LINE + 1];
  size_t n = strlen (text);

  if (n > HC_CONTROL_LINE - 1)
    n = HC_CONTROL_LINE - 1;
  memcpy (buf, text, n);
  buf[n++] = '\n';
  return send_all (fd, buf, n, flags);
}

static void
poke (struct hc_control *c)
{
  char b = 1;
  ssize_t r = write (c->wake[1], &b, 1);
  (void) r; /* a full pipe is awake already */
}

/* Answers the complete line buf[0 … n) (newline removed).  Returns 0 to go
 * on, 1 after quit, -1 if the connection failed. */
static int
serve_line (struct client *cl, char *buf, size_t n, char *reply)
{
  int rc = 0;

  if (n > 0 && buf[n - 1] == '\r')
    n--;
  if (memchr (buf, '\0', n))
    snprintf (reply, HC_CONTROL_LINE, "error %s NUL byte in request", hc_ctl_errno_name (EINVAL));
  else {
    buf[n] = '\0';
    rc = hc_control_exec (cl->srv->v, buf, reply, HC_CONTROL_LINE);
  }
  if (send_line (cl->fd, reply, 0) < 0)
    return -1;
  return rc;
}

static void *
client_main (void *arg)
{
  struct client *cl = arg;
  struct hc_control *c = cl->srv;
  /* One byte more than a line, for the NUL hc_control_exec needs. */
  char *buf = malloc (HC_CONTROL_LINE + 1), *reply = malloc (HC_CONTROL_LINE);
  size_t used = 0;
  bool discarding = false; /* inside a line that was too long */
  char greeting[64];

  snprintf (greeting, sizeof greeting, "%s %d", HC_CONTROL_GREETING, HC_CONTROL_VERSION);
  if (!buf || !reply) {
    send_line (cl->fd, "error ENOMEM out of memory", 0);
    goto out;
  }
  if (send_line (cl->fd, greeting, 0) < 0)
    goto out;
  for (;;) {
    ssize_t got = recv (cl->fd, buf + used, HC_CONTROL_LINE - used, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break; /* end of the connection (or of the server); a partial line is dropped */
    size_t scan = used;
    used += (size_t) got;
    /* Every complete line in the buffer, in order. */
    for (;;) {
      char *nl = memchr (buf + scan, '\n', used - scan);
      if (!nl)
        break;
      size_t n = (size_t) (nl - buf);
      int rc = 0;
      pthread_mutex_lock (&c->lock);
      cl->active = now_s ();
      pthread_mutex_unlock (&c->lock);
      if (discarding)
        discarding = false; /* the end of the over-long line */
      else
        rc = serve_line (cl, buf, n, reply);
      memmove (buf, nl + 1, used - n - 1);
      used -= n + 1;
      scan = 0;
      if (rc != 0)
        goto out;
    }
    if (used == HC_CONTROL_LINE) {
      /* A full buffer and no newline: the line is too long. */
      if (!discarding) {
        snprintf (reply, HC_CONTROL_LINE, "error %s request line longer than %d bytes",
                  hc_ctl_errno_name (E2BIG), HC_CONTROL_LINE);
        if (send_line (cl->fd, reply, 0) < 0)
          goto out;
        discarding = true;
      }
      used = 0;
    }
  }
out:
  free (buf);
  free (reply);
  shutdown (cl->fd, SHUT_RDWR);
  pthread_mutex_lock (&c->lock);
  cl->done = true;
  pthread_mutex_unlock (&c->lock);
  poke (c);
  return NULL;
}

/* Joins and frees the slots of finished workers. */
static void
reap (struct hc_control *c)
{
  for (unsigned i = 0; i < MAX_CLIENTS; i++) {
    struct client *cl = &c->clients[i];
    pthread_mutex_lock (&c->lock);
    bool done = cl->fd >= 0 && cl->done;
    pthread_mutex_unlock (&c->lock);
    if (!done)
      continue;
    pthread_join (cl->thread, NULL);
    pthread_mutex_lock (&c->lock);
    close (cl->fd);
    cl->fd = -1;
    cl->done = false;
    pthread_mutex_unlock (&c->lock);
  }
}

/* Checks a new connection and gives it a worker, or refuses it. */
static void
admit (struct hc_control *c, int fd)
{
  struct ucred cred;
  socklen_t clen = sizeof cred;
  char line[128];

  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0
      || (cred.uid != 0 && cred.uid != geteuid ())) {
    if (geteuid () == 0)
      snprintf (line, sizeof line, "error %s only root may use this socket",
                hc_ctl_errno_name (EPERM));
    else
      snprintf (line, sizeof line, "error %s only root and uid %u may use this socket",
                hc_ctl_errno_name (EPERM), (unsigned) geteuid ());
    send_line (fd, line, MSG_DONTWAIT);
    close (fd);
    return;
  }
  pthread_mutex_lock (&c->lock);
  struct client *cl = NULL, *idlest = NULL;
  for (unsigned i = 0; i < MAX_CLIENTS && !cl; i++)
    if (c->clients[i].fd < 0)
      cl = &c->clients[i];
    else if (!c->clients[i].done && (!idlest || c->clients[i].active < idlest->active))
      idlest = &c->clients[i];
  if (!cl && idlest && now_s () - idlest->active >= IDLE_S) {
    /* Full: the client idle longest goes (see the top of this file). */
    shutdown (idlest->fd, SHUT_RDWR);
    pthread_mutex_unlock (&c->lock);
    pthread_join (idlest->thread, NULL);
    pthread_mutex_lock (&c->lock);
    close (idlest->fd);
    idlest->fd = -1;
    idlest->done = false;
    cl = idlest;
  }
  if (cl) {
    cl->fd = fd;
    cl->done = false;
    cl->active = now_s ();
    if (pthread_create (&cl->thread, NULL, client_main, cl) != 0) {
      cl->fd = -1;
      cl = NULL;
    }
  }
  pthread_mutex_unlock (&c->lock);
  if (!cl) {
    snprintf (line, sizeof line, "error %s too many clients (at most %d)",
              hc_ctl_errno_name (EBUSY), MAX_CLIENTS);
    send_line (fd, line, MSG_DONTWAIT);
    close (fd);
  }
}

static void *
accept_main (void *arg)
{
  struct hc_control *c = arg;

  for (;;) {
    struct pollfd p[2] = { { .fd = c->lfd, .events = POLLIN }, { .fd = c->wake[0], .events = POLLIN } };
    if (poll (p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (p[1].revents) {
      char drain[64];
      while (read (c->wake[0], drain, sizeof drain) > 0)
        ;
      pthread_mutex_lock (&c->lock);
      bool stop = c->stopping;
      pthread_mutex_unlock (&c->lock);
      if (stop)
        break;
      reap (c);
    }
    if (p[0].revents & POLLIN) {
      reap (c);
      int fd = accept4 (c->lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        admit (c, fd);
      else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        poll (NULL, 0, 10); /* out of resources: do not spin */
    } else if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      break;
    }
  }
  return NULL;
}

/* Looks at what is at `path` already.  Returns 1 if nothing, 0 if a stale
 * socket nobody listens on (connect is refused), else a negative errno
 * (-EEXIST for any other file, a live socket included) with why filled. */
static int
check_existing (const struct sockaddr_un *addr, const char *path, char *why, size_t whylen)
{
  struct stat st;

  if (lstat (path, &st) < 0) {
    int e = errno;
    if (e == ENOENT)
      return 1;
    snprintf (why, whylen, "%s: %s", path, strerror (e));
    return -e;
  }
  if (!S_ISSOCK (st.st_mode)) {
    snprintf (why, whylen, "%s exists and is not a socket", path);
    return -EEXIST;
  }
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    snprintf (why, whylen, "socket: %s", strerror (e));
    return -e;
  }
  int rc = connect (fd, (const struct sockaddr *) addr, sizeof *addr);
  int e = errno;
  close (fd);
  if (rc == 0) {
    snprintf (why, whylen, "a server is already listening on %s", path);
    return -EEXIST;
  }
  if (e != ECONNREFUSED) {
    snprintf (why, whylen, "%s exists and connecting to it failed: %s", path, strerror (e));
    return -EEXIST;
  }
  return 0;
}

int
hc_control_start (hc_volume *v, const char *path, hc_control **out, char *why, size_t whylen)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct hc_control *c;
  char dummy[8];
  int rc;

  why = hc_why (why, &whylen, dummy, sizeof dummy);
  if (!v || !path || !out) {
    snprintf (why, whylen, "no volume, path or result pointer");
    return -EINVAL;
  }
  if (!path[0] || strlen (path) >= sizeof addr.sun_path) {
    snprintf (why, whylen, "socket path must be 1 to %zu bytes", sizeof addr.sun_path - 1);
    return path[0] ? -ENAMETOOLONG : -EINVAL;
  }
  memcpy (addr.sun_path, path, strlen (path) + 1);

  if (!(c = calloc (1, sizeof *c)) || !(c->path = strdup (path))) {
    free (c);
    snprintf (why, whylen, "out of memory");
    return -ENOMEM;
  }
  c->v = v;
  c->lfd = c->wake[0] = c->wake[1] = -1;
  for (unsigned i = 0; i < MAX_CLIENTS; i++) {
    c->clients[i].fd = -1;
    c->clients[i].srv = c;
  }
  pthread_mutex_init (&c->lock, NULL);

  if ((rc = check_existing (&addr, path, why, whylen)) < 0)
    goto fail;
  if (rc == 0 && unlink (path) < 0 && errno != ENOENT) {
    rc = -errno;
    snprintf (why, whylen, "removing the stale socket %s: %s", path, strerror (errno));
    goto fail;
  }
  if (pipe2 (c->wake, O_CLOEXEC | O_NONBLOCK) < 0
      || (c->lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
    rc = -errno;
    snprintf (why, whylen, "%s: %s", c->wake[0] < 0 ? "pipe" : "socket", strerror (errno));
    goto fail;
  }
  /* The file bind creates takes the socket inode's mode (less the umask). */
  if (fchmod (c->lfd, 0600) < 0) {
    rc = -errno;
    snprintf (why, whylen, "fchmod: %s", strerror (errno));
    goto fail;
  }
  if (bind (c->lfd, (struct sockaddr *) &addr, sizeof addr) < 0) {
    rc = errno == EADDRINUSE ? -EEXIST : -errno;
    snprintf (why, whylen, "bind %s: %s", path, strerror (errno));
    goto fail;
  }
  /* Nobody can connect before listen: make sure of the mode meanwhile. */
  if (chmod (path, 0600) < 0 || listen (c->lfd, 64) < 0) {
    rc = -errno;
    snprintf (why, whylen, "%s %s: %s", "listen", path, strerror (errno));
    unlink (path);
    goto fail;
  }
  if ((rc = pthread_create (&c->acceptor, NULL, accept_main, c)) != 0) {
    rc = -rc;
    snprintf (why, whylen, "pthread_create: %s", strerror (-rc));
    unlink (path);
    goto fail;
  }
  *out = c;
  return 0;

fail:
  if (c->lfd >= 0)
    close (c->lfd);
  if (c->wake[0] >= 0) {
    close (c->wake[0]);
    close (c->wake[1]);
  }
  pthread_mutex_destroy (&c->lock);
  free (c->path);
  free (c);
  return rc;
}

void
hc_control_stop (hc_control *c)
{
  if (!c)
    return;
  pthread_mutex_lock (&c->lock);
  c->stopping = true;
  pthread_mutex_unlock (&c->lock);
  poke (c);
  pthread_join (c->acceptor, NULL);
  /* No new workers now; end the running ones. */
  unlink (c->path);
  close (c->lfd);
  pthread_mutex_lock (&c->lock);
  for (unsigned i = 0; i < MAX_CLIENTS; i++)
    if (c->clients[i].fd >= 0)
      shutdown (c->clients[i].fd, SHUT_RDWR);
  pthread_mutex_unlock (&c->lock);
  for (unsigned i = 0; i < MAX_CLIENTS; i++) {
    struct client *cl = &c->clients[i];
    if (cl->fd < 0)
      continue;
    pthread_join (cl->thread, NULL);
    close (cl->fd);
    cl->fd = -1;
  }
  close (c->wake[0]);
  close (c->wake[1]);
  pthread_mutex_destroy (&c->lock);
  free (c->path);
  free (c);
}
