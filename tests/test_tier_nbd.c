/* The NBD tier against live nbdkit servers on Unix sockets.  The
 * conformance suite (tier_conformance.h) runs over exports of nbdkit's
 * memory plugin — with multi-conn, FUA and zero (its model over the whole
 * 128 MiB export), without multi-conn, without FUA, without zero, with
 * requests capped at 1 MiB — over a writable export opened read-only, a
 * read-only export and a file opened through hc_tier_open.  Then what is
 * the NBD tier's own: opening through hc_tier_open and hc_tier_open_nbd,
 * requests split at the server's maximum (and at 32 MiB when it names
 * none), FUA natively and emulated by a flush on the same connection, flush
 * on every connection, round robin over multi-conn connections (and one
 * connection without multi-conn, for threads too), zero and discard sent as
 * NBD zero requests (or as writes of zeros), a second connection seeing the
 * first one's writes, an export needing 4 KiB alignment refused, a server
 * that goes away or stops answering, bad URIs, and a write-back volume
 * whose slow tier is an NBD export, reopened over new connections.
 *
 * Most servers run nbdkit's log filter, whose log shows what reached the
 * server: how writes were split, which carried FUA, which connection each
 * request used.  Skipped (77) when nbdkit is not on PATH; the servers die
 * with the test (--exit-with-parent) and are killed at exit.  Their sockets,
 * logs and files go to a directory in $TMPDIR (or /tmp). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/tier.h"
#include "hintcache/volume.h"
#include "test.h"
#include "tier_conformance.h"

#define KiB ((uint64_t) 1 << 10)
#define MiB ((uint64_t) 1 << 20)

/* A running nbdkit. */
struct server {
  const char *tag;
  pid_t pid;
  char sock[100]; /* fits sun_path */
  char pidfile[160];
  char uri[200];
  char log[160]; /* its log filter's file, or "" */
  long mark;     /* log offset from which log_scan reads */
};

#define MAX_SERVERS 16
static struct server *servers[MAX_SERVERS];
static unsigned nservers;
static char tmpdir[64]; /* in $TMPDIR (or /tmp); short enough for its sockets */

/* Fills buf with a pattern that differs per seed and per byte. */
static void
fill (void *buf, size_t len, uint64_t seed)
{
  unsigned char *p = buf;

  for (size_t i = 0; i < len; i++)
    p[i] = (unsigned char) ((seed * 2654435761u + i * 40503u + (i >> 9)) >> 5);
}

/* True if an executable `name` is on PATH. */
static bool
on_path (const char *name)
{
  const char *path = getenv ("PATH");
  char dir[4096];

  while (path && *path) {
    size_t n = strcspn (path, ":");
    if (n > 0 && n + strlen (name) + 2 < sizeof dir) {
      snprintf (dir, sizeof dir, "%.*s/%s", (int) n, path, name);
      if (access (dir, X_OK) == 0)
        return true;
    }
    path += n + (path[n] == ':');
  }
  return false;
}

/* True once the file at path has some content. */
static bool
nonempty (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0 && st.st_size > 0;
}

/* Starts `nbdkit -f --exit-with-parent -U SOCK -P PIDFILE [--filter=log]
 * ARGS… [logfile=LOG]` and waits (up to 10 s) until it is ready to accept
 * connections, which nbdkit says by writing its PID file (a probe
 * connection would instead make it complain of a broken handshake).  `args`
 * holds options, the plugin and its parameters, NULL-terminated.  Returns
 * the server, or NULL. */
static struct server *
start_server (const char *tag, bool log, const char *const *args)
{
  struct server *s = calloc (1, sizeof *s);
  const char *argv[32];
  char logarg[200];
  unsigned n = 0;

  if (!s || nservers == MAX_SERVERS) {
    free (s);
    return NULL;
  }
  s->tag = tag;
  snprintf (s->sock, sizeof s->sock, "%s/%s.sock", tmpdir, tag);
  snprintf (s->pidfile, sizeof s->pidfile, "%s/%s.pid", tmpdir, tag);
  snprintf (s->uri, sizeof s->uri, "nbd+unix:///?socket=%s", s->sock);
  argv[n++] = "nbdkit";
  argv[n++] = "-f";
  argv[n++] = "--exit-with-parent";
  argv[n++] = "-U";
  argv[n++] = s->sock;
  argv[n++] = "-P";
  argv[n++] = s->pidfile;
  if (log) {
    snprintf (s->log, sizeof s->log, "%s/%s.log", tmpdir, tag);
    snprintf (logarg, sizeof logarg, "logfile=%s", s->log);
    argv[n++] = "--filter=log";
  }
  for (unsigned i = 0; args[i] && n < 30; i++)
    argv[n++] = args[i];
  if (log)
    argv[n++] = logarg;
  argv[n] = NULL;

  s->pid = fork ();
  if (s->pid < 0) {
    free (s);
    return NULL;
  }
  if (s->pid == 0) {
    int null = open ("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2 (null, STDOUT_FILENO);
    execvp ("nbdkit", (char *const *) argv);
    _exit (127);
  }
  servers[nservers++] = s;
  for (int i = 0; i < 500; i++) {
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    if (nonempty (s->pidfile))
      return s;
    if (waitpid (s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0;
      break;
    }
    nanosleep (&ts, NULL);
  }
  fprintf (stderr, "test_tier_nbd: nbdkit for %s did not start\n", tag);
  return NULL;
}

/* Stops a server and reaps it: SIGTERM, then SIGKILL if it is still there
 * after 5 s (nbdkit waits for connected clients to leave), or SIGKILL at
 * once with `crash`. */
static void
kill_server (struct server *s, bool crash)
{
  if (!s || s->pid <= 0)
    return;
  kill (s->pid, crash ? SIGKILL : SIGTERM);
  for (int i = 0; !crash && i < 250; i++) {
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    if (waitpid (s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0;
      return;
    }
    nanosleep (&ts, NULL);
  }
  kill (s->pid, SIGKILL);
  waitpid (s->pid, NULL, 0);
  s->pid = 0;
}

static void
stop_server (struct server *s)
{
  kill_server (s, false);
}

/* At exit: every server still running, then the temporary directory. */
static void
cleanup (void)
{
  DIR *d;
  struct dirent *e;
  char path[512];

  for (unsigned i = 0; i < nservers; i++) {
    stop_server (servers[i]);
    free (servers[i]);
  }
  nservers = 0;
  if ((d = opendir (tmpdir))) {
    while ((e = readdir (d)))
      if (strcmp (e->d_name, ".") && strcmp (e->d_name, "..")) {
        snprintf (path, sizeof path, "%s/%s", tmpdir, e->d_name);
        unlink (path);
      }
    closedir (d);
  }
  rmdir (tmpdir);
}

/* Makes log_scan start reading the server's log at its current end. */
static void
log_mark (struct server *s)
{
  struct stat st;

  s->mark = stat (s->log, &st) == 0 ? (long) st.st_size : 0;
}

/* What the log shows since the mark about one kind of request. */
struct scan {
  unsigned lines;       /* requests of that kind */
  unsigned conns;       /* distinct connections they came on */
  int conn[32];         /* those connections */
  int last_conn;        /* connection of the last one */
  uint64_t max_count;   /* largest count= among them */
  unsigned with;        /* how many contain the `with` text */
};

/* Scans the log since the mark for request lines of operation `op`
 * ("Read", "Write", "Zero", "Trim", "Flush"); `with` (may be NULL) is a text
 * counted in scan.with ("fua=1"). */
static struct scan
log_scan (const struct server *s, const char *op, const char *with)
{
  struct scan sc = { .last_conn = -1 };
  char line[1024], needle[32];
  FILE *f = fopen (s->log, "r");

  if (!f)
    return sc;
  snprintf (needle, sizeof needle, " %s id=", op);
  fseek (f, s->mark, SEEK_SET);
  while (fgets (line, sizeof line, f)) {
    const char *c = strstr (line, "connection="), *k = strstr (line, " count=0x");
    int conn;
    unsigned i;
    if (!strstr (line, needle) || !c)
      continue;
    sc.lines++;
    conn = atoi (c + strlen ("connection="));
    sc.last_conn = conn;
    for (i = 0; i < sc.conns && sc.conn[i] != conn; i++)
      ;
    if (i == sc.conns && sc.conns < 32)
      sc.conn[sc.conns++] = conn;
    if (k) {
      uint64_t count = strtoull (k + strlen (" count=0x"), NULL, 16);
      if (count > sc.max_count)
        sc.max_count = count;
    }
    if (with && strstr (line, with))
      sc.with++;
  }
  fclose (f);
  return sc;
}

/* Opens the server's export, checking success. */
static hc_tier *
open_nbd (const struct server *s, unsigned flags)
{
  hc_tier *t = NULL;
  char why[256] = "";
  int rc = hc_tier_open_nbd (s->uri, flags, &t, why, sizeof why);

  CHECK (rc == 0 && t, "%s: open: %d %s", s->tag, rc, why);
  return rc == 0 ? t : NULL;
}

/* Closes a tier and opens the server's export again (the conformance
 * suite's reopen hook; arg is struct reopen). */
struct reopen {
  const struct server *s;
  unsigned flags;
};

static hc_tier *
reopen_nbd (hc_tier *t, void *arg)
{
  const struct reopen *r = arg;

  hc_tier_close (t);
  return open_nbd (r->s, r->flags);
}

/* The expectations of the suite for a writable export of `size` bytes with
 * capabilities `caps`, new (reading zeros), reopened as `r` says. */
static struct tier_caps
writable (uint64_t size, unsigned caps, const char *name, struct reopen *r)
{
  return (struct tier_caps) { .size = size, .caps = caps, .name = name, .zeroed = true,
                              .reopen = reopen_nbd, .arg = r };
}

/* Writes and reads back one large buffer at off; returns what the log saw
 * of the writes. */
static struct scan
big_write (struct server *s, hc_tier *t, uint64_t len, uint64_t off, unsigned flags,
           const char *what)
{
  unsigned char *buf = malloc (len);
  struct scan sc = { 0 };

  if (!buf) {
    CHECK (false, "out of memory");
    return sc;
  }
  fill (buf, len, len ^ off);
  log_mark (s);
  CHECK_EQ (hc_tier_write (t, buf, len, off, flags), 0, "%s: write %llu MiB", what,
            (unsigned long long) (len / MiB));
  sc = log_scan (s, "Write", "fua=1");
  CHECK (tc_reads_as (t, off, buf, len), "%s: read back %llu MiB", what,
         (unsigned long long) (len / MiB));
  free (buf);
  return sc;
}

/* A writable export with multi-conn, FUA, zero and trim (nbdkit's memory
 * plugin), 128 MiB, logged. */
static void
test_memory_export (void)
{
  static const char *const args[] = { "memory", "128M", NULL };
  struct server *s = start_server ("mem", true, args);
  unsigned char buf[64 * KiB];
  char why[256] = "", name[256];
  struct reopen r = { s, 0 }, rr = { s, HC_TIER_READONLY };
  struct tier_caps c;
  hc_tier *t = NULL, *t2 = NULL;
  struct scan sc;

  if (!s) {
    CHECK (false, "server mem");
    return;
  }
  /* Through hc_tier_open: a URI is not taken for a path.  The suite
   * covers the whole export with its model. */
  CHECK_EQ (hc_tier_open (s->uri, 0, &t, why, sizeof why), 0, "hc_tier_open: %s", why);
  if (!t) {
    stop_server (s);
    return;
  }
  snprintf (name, sizeof name, "nbd:%s", s->uri);
  c = writable (128 * MiB, HC_CAP_FUA | HC_CAP_DISCARD | HC_CAP_PERSISTENT, name, &r);
  c.span = 128 * MiB;
  tier_conformance (&t, "memory export", &c);
  if (!t) {
    stop_server (s);
    return;
  }

  /* Over libnbd's 64 MiB limit: only works if split, at 32 MiB since the
   * server names no maximum; every piece of a FUA write carries FUA. */
  sc = big_write (s, t, 72 * MiB, 40 * MiB, 0, "72 MiB");
  CHECK (sc.lines == 3 && sc.max_count == 32 * MiB && sc.with == 0,
         "72 MiB in %u writes, largest %llu, %u with FUA", sc.lines,
         (unsigned long long) sc.max_count, sc.with);
  sc = big_write (s, t, 40 * MiB, 0, HC_TIER_FUA, "40 MiB FUA");
  CHECK (sc.lines == 2 && sc.with == 2, "40 MiB FUA in %u writes, %u with FUA", sc.lines, sc.with);

  /* FUA natively: the flag, no flush. */
  fill (buf, 4096, 7);
  log_mark (s);
  CHECK_EQ (hc_tier_write (t, buf, 4096, 0, HC_TIER_FUA), 0, "FUA write");
  sc = log_scan (s, "Write", "fua=1");
  CHECK (sc.lines == 1 && sc.with == 1, "FUA write carries FUA (%u of %u)", sc.with, sc.lines);
  CHECK_EQ (log_scan (s, "Flush", NULL).lines, 0u, "no flush for native FUA");
  log_mark (s);
  CHECK_EQ (hc_tier_write (t, buf, 4096, 0, 0), 0, "plain write");
  CHECK_EQ (log_scan (s, "Write", "fua=1").with, 0u, "plain write without FUA");

  /* Multi-conn: four connections, dealt out in turn; flush reaches all. */
  log_mark (s);
  for (int i = 0; i < 8; i++)
    CHECK_EQ (hc_tier_read (t, buf, 4096, (uint64_t) i * 4096), 0, "read %d", i);
  sc = log_scan (s, "Read", NULL);
  CHECK (sc.lines == 8 && sc.conns == 4, "8 reads over %u connections", sc.conns);
  log_mark (s);
  CHECK_EQ (hc_tier_flush (t), 0, "flush");
  sc = log_scan (s, "Flush", NULL);
  CHECK (sc.lines == 4 && sc.conns == 4, "flush: %u flushes on %u connections", sc.lines, sc.conns);

  /* Zero and discard are NBD zero requests, not writes; reads give zeros. */
  fill (buf, sizeof buf, 9);
  CHECK_EQ (hc_tier_write (t, buf, sizeof buf, 1 * MiB, 0), 0, "write before zero");
  log_mark (s);
  CHECK_EQ (hc_tier_discard (t, 1 * MiB, 16 * KiB), 0, "discard");
  CHECK_EQ (hc_tier_zero (t, 1 * MiB + 32 * KiB, 16 * KiB), 0, "zero");
  CHECK_EQ (log_scan (s, "Zero", "trim=1").with, 2u, "discard and zero sent as zero, may trim");
  CHECK_EQ (log_scan (s, "Write", NULL).lines, 0u, "no writes for zero");
  CHECK_EQ (log_scan (s, "Trim", NULL).lines, 0u, "no trim (it need not read back zeros)");
  /* A large zero is not split at the read/write maximum. */
  log_mark (s);
  CHECK_EQ (hc_tier_zero (t, 0, 128 * MiB), 0, "zero everything");
  CHECK_EQ (log_scan (s, "Zero", NULL).lines, 1u, "128 MiB zero in one request");
  CHECK (tc_reads_zero (t, 127 * MiB, 1 * MiB), "zeroed to the end");

  /* A second tier on the same export sees the first one's writes. */
  fill (buf, 4096, 11);
  CHECK_EQ (hc_tier_write (t, buf, 4096, 8192, HC_TIER_FUA), 0, "write for the second tier");
  CHECK_EQ (hc_tier_open_nbd (s->uri, HC_TIER_READONLY, &t2, why, sizeof why), 0,
            "second open: %s", why);
  CHECK (tc_reads_as (t2, 8192, buf, 4096), "second tier reads it");
  tier_conformance (&t2, "read-only open",
                    &(struct tier_caps) { .size = 128 * MiB, .caps = HC_CAP_PERSISTENT,
                                          .name = name, .readonly = true,
                                          .reopen = reopen_nbd, .arg = &rr });
  hc_tier_close (t2);
  hc_tier_close (t);
  stop_server (s);
}

/* The suite over a multi-conn export and one without multi-conn (one
 * connection, which must serialise the suite's threads correctly); then
 * its threads once more, to see in the log how many connections they
 * used. */
static void
test_concurrency (void)
{
  static const char *const multi[] = { "memory", "16M", NULL };
  static const char *const single[] = { "--filter=multi-conn", "memory", "16M",
                                        "multi-conn-mode=disable", NULL };
  struct server *s = start_server ("threads", true, multi);
  struct server *s1 = start_server ("single", true, single);
  struct reopen r = { s, 0 }, r1 = { s1, 0 };
  const unsigned caps = HC_CAP_FUA | HC_CAP_DISCARD | HC_CAP_PERSISTENT;
  unsigned char buf[4096];
  struct tier_caps c;
  hc_tier *t;
  struct scan sc;

  if (s && (t = open_nbd (s, 0))) {
    c = writable (16 * MiB, caps, NULL, &r);
    tier_conformance (&t, "multi-conn", &c);
    log_mark (s);
    tc_threads (t, "multi-conn", &c);
    CHECK_EQ (log_scan (s, "Read", NULL).conns, 4u, "multi-conn: threads used 4 connections");
    hc_tier_close (t);
  }
  if (s1 && (t = open_nbd (s1, 0))) {
    c = writable (16 * MiB, caps, NULL, &r1);
    tier_conformance (&t, "single", &c);
    log_mark (s1);
    tc_threads (t, "single", &c);
    CHECK_EQ (log_scan (s1, "Read", NULL).conns, 1u, "no multi-conn: one connection");
    log_mark (s1);
    for (int i = 0; i < 4; i++)
      CHECK_EQ (hc_tier_read (t, buf, sizeof buf, 0), 0, "read");
    CHECK_EQ (hc_tier_flush (t), 0, "flush");
    sc = log_scan (s1, "Read", NULL);
    CHECK (sc.lines == 4 && sc.conns == 1, "single: reads on %u connections", sc.conns);
    CHECK_EQ (log_scan (s1, "Flush", NULL).lines, 1u, "single: one flush");
    hc_tier_close (t);
  }
  CHECK (s && s1, "servers for threads");
  stop_server (s);
  stop_server (s1);
}

/* A server that caps requests at 1 MiB and rejects larger ones; one without
 * FUA; one without zero; one that needs 4 KiB alignment. */
static void
test_limits (void)
{
  static const char *const capped[] = { "--filter=blocksize-policy", "memory", "16M",
                                        "blocksize-maximum=1M", "blocksize-error-policy=error",
                                        NULL };
  static const char *const nofua[] = { "--filter=fua", "memory", "16M", NULL };
  static const char *const nozero[] = { "--filter=nozero", "memory", "16M", NULL };
  struct server *s = start_server ("capped", true, capped);
  struct server *sf = start_server ("nofua", true, nofua);
  struct server *sz = start_server ("nozero", true, nozero);
  struct reopen r = { s, 0 }, rf = { sf, 0 }, rz = { sz, 0 };
  unsigned char buf[64 * KiB];
  struct tier_caps c;
  hc_tier *t;
  struct scan sc;

  /* The suite first (the exports read zeros when new), then what the log
   * shows of each limit. */
  if (s && (t = open_nbd (s, 0))) {
    c = writable (16 * MiB, HC_CAP_FUA | HC_CAP_DISCARD | HC_CAP_PERSISTENT, NULL, &r);
    tier_conformance (&t, "capped", &c);
    sc = big_write (s, t, 5 * MiB, 3 * MiB + 512, 0, "capped");
    CHECK (sc.lines == 5 && sc.max_count == 1 * MiB, "capped: 5 MiB in %u writes, largest %llu",
           sc.lines, (unsigned long long) sc.max_count);
    sc = big_write (s, t, 3 * MiB, 9 * MiB, HC_TIER_FUA, "capped FUA");
    CHECK (sc.lines == 3 && sc.with == 3, "capped FUA: %u writes, %u with FUA", sc.lines, sc.with);
    hc_tier_close (t);
  }
  if (sf && (t = open_nbd (sf, 0))) {
    c = writable (16 * MiB, HC_CAP_DISCARD | HC_CAP_PERSISTENT, NULL, &rf);
    tier_conformance (&t, "nofua", &c);
    fill (buf, 8192, 3);
    log_mark (sf);
    CHECK_EQ (hc_tier_write (t, buf, 8192, 4096, HC_TIER_FUA), 0, "nofua: FUA write");
    sc = log_scan (sf, "Write", "fua=1");
    CHECK (sc.lines == 1 && sc.with == 0, "nofua: a plain write (%u, %u with FUA)", sc.lines,
           sc.with);
    int wconn = sc.last_conn;
    sc = log_scan (sf, "Flush", NULL);
    CHECK (sc.lines == 1 && sc.last_conn == wconn,
           "nofua: then one flush on the same connection (%u, conn %d vs %d)", sc.lines,
           sc.last_conn, wconn);
    hc_tier_close (t);
  }
  if (sz && (t = open_nbd (sz, 0))) {
    c = writable (16 * MiB, HC_CAP_FUA | HC_CAP_PERSISTENT, NULL, &rz);
    tier_conformance (&t, "nozero", &c);
    fill (buf, sizeof buf, 5);
    CHECK_EQ (hc_tier_write (t, buf, sizeof buf, 0, 0), 0, "nozero: write");
    log_mark (sz);
    CHECK_EQ (hc_tier_discard (t, 0, 8192), 0, "nozero: discard");
    CHECK_EQ (hc_tier_zero (t, 16384, 8192), 0, "nozero: zero");
    CHECK_EQ (log_scan (sz, "Zero", NULL).lines, 0u, "nozero: no zero requests");
    CHECK_EQ (log_scan (sz, "Trim", NULL).lines, 0u, "nozero: no trim");
    CHECK (log_scan (sz, "Write", NULL).lines >= 2, "nozero: zeros written instead");
    hc_tier_close (t);
  }
  CHECK (s && sf && sz, "servers for limits");
  stop_server (s);
  stop_server (sf);
  stop_server (sz);

  /* An export that cannot take 512-byte I/O is refused at open. */
  static const char *const aligned[] = { "--filter=blocksize-policy", "memory", "16M",
                                         "blocksize-minimum=4096", NULL };
  struct server *sa = start_server ("4k", false, aligned);
  char why[256] = "";
  if (sa) {
    t = NULL;
    int rc = hc_tier_open_nbd (sa->uri, 0, &t, why, sizeof why);
    CHECK (rc == -EINVAL && t == NULL && strstr (why, "4096"), "4 KiB minimum: %d %s", rc, why);
    stop_server (sa);
  }
  CHECK (sa, "server 4k");
}

/* A read-only export (the server says so): the suite, the pattern plugin's
 * data, and a server that goes away. */
static void
test_readonly (void)
{
  static const char *const args[] = { "-r", "pattern", "8M", NULL };
  struct server *s = start_server ("ro", false, args);
  struct reopen r = { s, 0 };
  unsigned char buf[4096];
  hc_tier *t;

  if (!s || !(t = open_nbd (s, 0))) {
    CHECK (false, "read-only server");
    stop_server (s);
    return;
  }
  tier_conformance (&t, "read-only export",
                    &(struct tier_caps) { .size = 8 * MiB, .caps = HC_CAP_PERSISTENT,
                                          .readonly = true, .reopen = reopen_nbd, .arg = &r });
  if (!t) {
    stop_server (s);
    return;
  }
  /* The pattern plugin: each 8-byte word holds its own offset, big-endian. */
  CHECK_EQ (hc_tier_read (t, buf, sizeof buf, 8192), 0, "ro: read");
  CHECK (buf[6] == 0x20 && buf[7] == 0x00 && buf[8 + 7] == 0x08, "ro: pattern data");

  /* A server that goes away: errors, not a crash or a signal. */
  kill_server (s, true);
  int rc = hc_tier_read (t, buf, sizeof buf, 0);
  CHECK (rc < 0 && rc != -EINVAL, "read from a dead server: %d", rc);
  hc_tier_close (t);
}

/* A writable server that goes away under an open tier. */
static void
test_server_gone (void)
{
  static const char *const args[] = { "memory", "8M", NULL };
  struct server *s = start_server ("gone", false, args);
  unsigned char buf[4096] = { 1 };
  hc_tier *t;
  int rc;

  if (!s || !(t = open_nbd (s, 0))) {
    CHECK (false, "server for gone");
    stop_server (s);
    return;
  }
  CHECK_EQ (hc_tier_write (t, buf, sizeof buf, 0, 0), 0, "gone: write while up");
  kill_server (s, true);
  for (int i = 0; i < 4; i++) {
    rc = hc_tier_write (t, buf, sizeof buf, 0, 0);
    CHECK (rc < 0 && rc != -EINVAL, "gone: write %d: %d", i, rc);
  }
  rc = hc_tier_write (t, buf, sizeof buf, 0, HC_TIER_FUA);
  CHECK (rc < 0, "gone: FUA write: %d", rc);
  rc = hc_tier_zero (t, 0, sizeof buf);
  CHECK (rc < 0, "gone: zero: %d", rc);
  rc = hc_tier_flush (t);
  CHECK (rc < 0, "gone: flush: %d", rc);
  hc_tier_close (t);
}

/* A server that stops answering: each call ends at the deadline with
 * -ETIMEDOUT, its connection is abandoned, and once none is left, calls
 * fail at once; closing does not wait for the server. */
static void
test_timeout (void)
{
  static const char *const args[] = { "--filter=delay", "memory", "8M", "rdelay=20", NULL };
  struct server *s = start_server ("stalled", false, args);
  unsigned char buf[4096] = { 1 };
  struct timespec t0, t1;
  hc_tier *t;

  if (!s || !(t = open_nbd (s, 0))) {
    CHECK (false, "server for timeout");
    stop_server (s);
    return;
  }
  CHECK_EQ (hc_tier_nbd_set_timeout (t, 0), -EINVAL, "a zero deadline");
  CHECK_EQ (hc_tier_nbd_set_timeout (t, 300), 0, "set the deadline");
  CHECK_EQ (hc_tier_write (t, buf, sizeof buf, 0, 0), 0, "writes are not delayed");
  clock_gettime (CLOCK_MONOTONIC, &t0);
  int rc = 0;
  for (int i = 0; i < 6; i++) /* one per connection (at most four), and more */
    rc = hc_tier_read (t, buf, sizeof buf, 0);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  double s_taken = (double) (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  CHECK_EQ (rc, -ETIMEDOUT, "a stalled read times out");
  CHECK (s_taken < 10, "each call ends at its deadline (%.1f s for six reads)", s_taken);
  CHECK_EQ (hc_tier_write (t, buf, sizeof buf, 0, 0), -ETIMEDOUT,
            "with every connection abandoned, calls fail at once");
  clock_gettime (CLOCK_MONOTONIC, &t0);
  hc_tier_close (t);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  CHECK (t1.tv_sec - t0.tv_sec < 5, "close does not wait for the server");
  stop_server (s);
}

/* Closes a tier and opens `arg` again through hc_tier_open. */
static hc_tier *
reopen_spec (hc_tier *t, void *arg)
{
  hc_tier *n = NULL;
  char why[256];

  hc_tier_close (t);
  return hc_tier_open (arg, 0, &n, why, sizeof why) == 0 ? n : NULL;
}

/* Refusals, and hc_tier_open on paths (the suite over a file opened so). */
static void
test_errors (void)
{
  char why[256], path[128], long_uri[512];
  hc_tier *t = NULL;
  int rc, fd;

  strcpy (why, "stale");
  rc = hc_tier_open_nbd ("nbd+unix:///?socket=/nonexistent", 0, &t, why, sizeof why);
  CHECK (rc < 0 && why[0] && strcmp (why, "stale"), "missing socket: %d %s", rc, why);
  CHECK (t == NULL, "nothing returned on failure");
  strcpy (why, "stale");
  rc = hc_tier_open ("nbd+unix:///?socket=/nonexistent", 0, &t, why, sizeof why);
  CHECK (rc < 0 && why[0] && strcmp (why, "stale"), "hc_tier_open, missing socket: %d %s", rc,
         why);
  rc = hc_tier_open_nbd ("nbd+unix:///", 0, &t, why, sizeof why);
  CHECK (rc < 0 && why[0], "no socket parameter: %d %s", rc, why);
  rc = hc_tier_open_nbd ("nbd://127.0.0.1:1/", 0, &t, why, sizeof why);
  CHECK (rc < 0 && why[0], "nothing listening: %d %s", rc, why);
  rc = hc_tier_open_nbd ("/dev/null", 0, &t, why, sizeof why);
  CHECK (rc == -EINVAL && strstr (why, "/dev/null"), "a path is not a URI: %d %s", rc, why);
  rc = hc_tier_open_nbd ("http://example.com/", 0, &t, why, sizeof why);
  CHECK (rc == -EINVAL && why[0], "http: %d %s", rc, why);
  CHECK_EQ (hc_tier_open_nbd ("nbd+unix:///?socket=/x", 1u << 7, &t, why, sizeof why), -EINVAL,
            "unknown flag");
  CHECK_EQ (hc_tier_open_nbd (NULL, 0, &t, why, sizeof why), -EINVAL, "NULL URI");
  CHECK_EQ (hc_tier_open_nbd ("nbd+unix:///?socket=/nonexistent", 0, &t, NULL, 0) < 0, true,
            "no why buffer");
  CHECK (hc_tier_open ("nbd+unix:///?socket=/nonexistent", 0, &t, why, 1) < 0 && why[0] == '\0',
         "a 1-byte why");
  CHECK (t == NULL, "still nothing returned");

  /* Paths go to the file tier. */
  snprintf (path, sizeof path, "%s/file", tmpdir);
  fd = open (path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK (fd >= 0 && ftruncate (fd, (off_t) (1 * MiB + 100)) == 0, "temp file");
  if (fd >= 0)
    close (fd);
  CHECK_EQ (hc_tier_open (path, 0, &t, why, sizeof why), 0, "hc_tier_open file: %s", why);
  if (t) {
    char name[160];
    snprintf (name, sizeof name, "file:%s", path);
    tier_conformance (&t, "file via hc_tier_open",
                      &(struct tier_caps) { .size = 1 * MiB,
                                            .caps = HC_CAP_PERSISTENT | HC_CAP_FUA | HC_CAP_DISCARD
                                                    | HC_CAP_PREFETCH,
                                            .name = name, .zeroed = true, .reopen = reopen_spec,
                                            .arg = path });
    hc_tier_close (t);
    t = NULL;
  }
  snprintf (path, sizeof path, "%s/missing", tmpdir);
  rc = hc_tier_open (path, 0, &t, why, sizeof why);
  CHECK (rc == -ENOENT && strstr (why, path) && strstr (why, strerror (ENOENT)),
         "missing file: %d %s", rc, why);
  rc = hc_tier_open (tmpdir, 0, &t, why, sizeof why);
  CHECK (rc == -EINVAL && strstr (why, tmpdir), "directory: %d %s", rc, why);
  /* A scheme must match exactly to be NBD; otherwise it is a path. */
  rc = hc_tier_open ("nbdx://host/", 0, &t, why, sizeof why);
  CHECK (rc == -ENOENT && strstr (why, "nbdx://host/"), "nbdx is a path: %d %s", rc, why);
  CHECK_EQ (hc_tier_open (NULL, 0, &t, why, sizeof why), -EINVAL, "NULL spec");
  CHECK_EQ (hc_tier_open (path, 1u << 7, &t, why, sizeof why), -EINVAL, "unknown flag");

  /* A name longer than the tier's name field is cut, not overflowed: an
   * unknown query parameter lengthens the URI and libnbd ignores it. */
  static const char *const args[] = { "memory", "1M", NULL };
  struct server *s = start_server ("name", false, args);
  if (s) {
    snprintf (long_uri, sizeof long_uri, "%s&x=%0200d", s->uri, 0);
    rc = hc_tier_open_nbd (long_uri, 0, &t, why, sizeof why);
    CHECK_EQ (rc, 0, "long URI: %s", why);
    if (rc == 0) {
      CHECK (strlen (hc_tier_name (t)) == 127 && strncmp (hc_tier_name (t), "nbd:", 4) == 0
             && strncmp (hc_tier_name (t) + 4, long_uri, 123) == 0, "long name %s",
             hc_tier_name (t));
      hc_tier_close (t);
    }
    stop_server (s);
  }
}

/* A write-back volume whose slow tier is an NBD export. */
static void
test_volume (void)
{
  static const char *const args[] = { "memory", "64M", NULL };
  struct server *s = start_server ("volume", false, args);
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct hc_open_opts oo = { .no_cleaner = true };
  enum { N = 24, LEN = 40000 };
  static unsigned char data[N][LEN], got[LEN];
  uint64_t off[N];
  hc_tier *fast = NULL, *slow = NULL, *direct;
  hc_volume *v = NULL;
  char why[256] = "";
  unsigned bad = 0;

  if (!s) {
    CHECK (false, "volume server");
    return;
  }
  fo.slow_path = s->uri;
  CHECK_EQ (hc_tier_new_memory (16 * MiB, &fast), 0, "fast tier");
  CHECK_EQ (hc_tier_open (s->uri, 0, &slow, why, sizeof why), 0, "slow tier: %s", why);
  if (!fast || !slow)
    goto out;
  CHECK_EQ (hc_volume_format (fast, slow, &fo, why, sizeof why), 0, "format: %s", why);
  CHECK_EQ (hc_volume_open (fast, slow, &oo, &v, why, sizeof why), 0, "open: %s", why);
  if (!v)
    goto out;
  CHECK_EQ (hc_volume_mode (v), HC_MODE_WRITEBACK, "write-back");
  /* Unaligned writes spread over the volume. */
  for (unsigned i = 0; i < N; i++) {
    off[i] = (uint64_t) i * (hc_volume_size (v) / N) + 333 * i;
    fill (data[i], LEN, 100 + i);
    if (hc_volume_write (v, data[i], LEN, off[i], i % 5 ? 0 : HC_VOL_FUA, NULL) != 0)
      bad++;
  }
  CHECK_EQ (bad, 0u, "volume writes");
  for (unsigned i = 0; i < N; i++)
    if (hc_volume_read (v, got, LEN, off[i], NULL) != 0 || memcmp (got, data[i], LEN))
      bad++;
  CHECK_EQ (bad, 0u, "volume reads");
  CHECK_EQ (hc_volume_flush (v), 0, "volume flush");
  CHECK_EQ (hc_volume_clean (v), 0, "volume clean");

  /* Cleaned: the export holds the data, seen over a connection of its own
   * (the volume addresses the slow tier one to one). */
  CHECK_EQ (hc_tier_open_nbd (s->uri, HC_TIER_READONLY, &direct, why, sizeof why), 0,
            "direct: %s", why);
  for (unsigned i = 0; i < N; i++) {
    unsigned char *sec = malloc (LEN + 1024);
    uint64_t a = off[i] - off[i] % HC_SECTOR_SIZE;
    size_t alen = (off[i] + LEN + HC_SECTOR_SIZE - 1) / HC_SECTOR_SIZE * HC_SECTOR_SIZE - a;
    if (!sec || hc_tier_read (direct, sec, alen, a) != 0
        || memcmp (sec + (off[i] - a), data[i], LEN))
      bad++;
    free (sec);
  }
  CHECK_EQ (bad, 0u, "the export holds the cleaned data");
  hc_tier_close (direct);
  CHECK_EQ (hc_volume_close (v), 0, "volume close");
  v = NULL;

  /* Over new connections, the volume opens and reads the same. */
  hc_tier_close (slow);
  slow = NULL;
  CHECK_EQ (hc_tier_open_nbd (s->uri, 0, &slow, why, sizeof why), 0, "reopen slow: %s", why);
  if (!slow)
    goto out;
  CHECK_EQ (hc_volume_check (fast, slow, why, sizeof why), 0, "check: %s", why);
  CHECK_EQ (hc_volume_open (fast, slow, &oo, &v, why, sizeof why), 0, "reopen: %s", why);
  if (!v)
    goto out;
  for (unsigned i = 0; i < N; i++)
    if (hc_volume_read (v, got, LEN, off[i], NULL) != 0 || memcmp (got, data[i], LEN))
      bad++;
  CHECK_EQ (bad, 0u, "volume reads after reopening");
  /* And once more with the fast tier's copies dropped: only the export has
   * the data now. */
  CHECK_EQ (hc_volume_set_mode (v, HC_MODE_PASSTHROUGH), 0, "passthrough");
  for (unsigned i = 0; i < N; i++)
    if (hc_volume_read (v, got, LEN, off[i], NULL) != 0 || memcmp (got, data[i], LEN))
      bad++;
  CHECK_EQ (bad, 0u, "passthrough reads from the export");
  CHECK_EQ (hc_volume_close (v), 0, "volume close");
out:
  hc_tier_close (slow);
  hc_tier_close (fast);
  stop_server (s);
}

int
main (void)
{
  if (!on_path ("nbdkit"))
    return test_skip ("test_tier_nbd", "nbdkit not on PATH");
  if (snprintf (tmpdir, sizeof tmpdir, "%s/hc_tier_nbd_XXXXXX", test_tmp ()) >= (int) sizeof tmpdir
      || !mkdtemp (tmpdir)) {
    fprintf (stderr, "test_tier_nbd: cannot make a directory in %s: %s\n", test_tmp (),
             strlen (test_tmp ()) > 44 ? "its path is too long for the sockets" : strerror (errno));
    return 1;
  }
  atexit (cleanup);
  test_errors ();
  test_memory_export ();
  test_limits ();
  test_readonly ();
  test_server_gone ();
  test_timeout ();
  test_concurrency ();
  test_volume ();
  return test_exit ("test_tier_nbd");
}
