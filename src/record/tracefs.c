/* Recording a block device's requests through tracefs.
 *
 * A private instance (instances/hintcache-PID-N) keeps the recording apart
 * from anyone else's tracing: its own ring buffer (buffer_size_kb per
 * CPU), its own trace_clock ("mono", so that times compare with the FIEMAP
 * snapshots' CLOCK_MONOTONIC stamps), and the two events filtered in the
 * kernel to one device ("dev == MAJOR << 20 | MINOR", the kernel's dev_t).
 * One thread reads the instance's trace_pipe, which merges the per-CPU
 * buffers in time order, without blocking (poll with a timeout, so that
 * stopping never waits for an event).
 *
 * Instances that recorders killed before they could clean up are removed at
 * the next start (their pid is gone): each holds megabytes per CPU.
 *
 * Loss is never silent: trace_pipe reports events the ring buffer dropped
 * as "CPU:n [LOST k EVENTS]" lines, and each CPU's stats file counts
 * overruns and dropped events; both are added up.  A lost completion
 * leaves its issue without a latency; a lost issue leaves its completion
 * unmatched (counted too).
 *
 * Event lines are tracefs's text (see also src/trace/ftrace.c, which reads
 * the issue events of saved traces):
 *
 *   "  dd-1234  [001] d..1.  1234.567890: block_rq_issue: 7,0 W 4096 () 2048 + 8 be,0,4 [dd]"
 *   "  <idle>-0 [001] ..s1.  1234.568012: block_rq_complete: 7,0 W () 2048 + 8 be,0,4 [0]"
 *
 * The fields are the kernel's TP_printk since 6.10 (dev, rwbs, bytes, cmd,
 * sector + count, ioprio class,hint,level, comm; a completion has no bytes
 * and ends with its error); the ioprio triple is optional, for older
 * kernels.  Times have microsecond resolution in text.  Issues are paired
 * with completions by op, sector and count, the oldest first (a flush by
 * its op alone).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "record/record.h"
#include "trace/trace_priv.h"
#include "util.h"

struct hc_rec {
  char dir[256];        /* the instance */
  int pipe_fd;
  pthread_t thread;
  bool running;
  atomic_bool stop;
  int err;              /* the reader's first error */
  struct hc_rec_req *reqs;
  size_t n, cap;
  size_t *inflight;     /* indexes of issued, not yet completed requests */
  size_t ninflight, capinflight;
  uint64_t lost, unmatched;
};

/* ---------------------------------------------------------------------------
 * Parsing
 */

/* Parses "sec.frac" ending at `end` (exclusive) into ns. */
static int
parse_ts (const char *start, const char *end, uint64_t *ns)
{
  uint64_t sec = 0, frac = 0, scale = 1000000000u;
  const char *p = start;

  if (p == end)
    return -EINVAL;
  for (; p < end && *p >= '0' && *p <= '9'; p++)
    sec = sec * 10 + (uint64_t) (*p - '0');
  if (p < end && *p == '.')
    for (p++; p < end && *p >= '0' && *p <= '9'; p++)
      if (scale > 1) {
        scale /= 10;
        frac += (uint64_t) (*p - '0') * scale;
      }
  if (p != end)
    return -EINVAL;
  *ns = sec * 1000000000u + frac;
  return 0;
}

int
hc_rec_parse_line (const char *line, struct hc_rec_req *req, uint64_t *lost)
{
  const char *ev;
  bool issue;

  if (strncmp (line, "CPU:", 4) == 0) {
    const char *l = strstr (line, "[LOST ");
    unsigned long long k;
    if (!l || sscanf (l, "[LOST %llu EVENTS]", &k) != 1)
      return -EINVAL;
    *lost = k;
    return HC_REC_LOST;
  }
  if ((ev = strstr (line, ": block_rq_issue: ")))
    issue = true;
  else if ((ev = strstr (line, ": block_rq_complete: ")))
    issue = false;
  else
    return HC_REC_OTHER;

  memset (req, 0, sizeof *req);
  /* The time: the token before the event's name. */
  const char *ts = ev;
  while (ts > line && ts[-1] != ' ')
    ts--;
  if (parse_ts (ts, ev, &req->ts_ns) < 0)
    return -EINVAL;
  /* The pid: after the last '-' of "task-pid", before " [cpu]". */
  const char *cpu = strstr (line, " [");
  if (cpu && cpu < ts) {
    const char *e = cpu, *d;
    while (e > line && e[-1] == ' ')
      e--;
    for (d = e; d > line && d[-1] >= '0' && d[-1] <= '9';)
      d--;
    if (d > line && d[-1] == '-' && d < e)
      req->pid = (uint32_t) strtoul (d, NULL, 10);
  }

  /* The fields. */
  const char *f = ev + (issue ? sizeof ": block_rq_issue: " : sizeof ": block_rq_complete: ") - 1;
  unsigned maj, min, bytes = 0;
  char rwbs[12];
  int n = 0;
  if (issue ? sscanf (f, "%u,%u %11s %u %n", &maj, &min, rwbs, &bytes, &n) < 4
            : sscanf (f, "%u,%u %11s %n", &maj, &min, rwbs, &n) < 3)
    return -EINVAL;
  f += n;
  /* "(cmd)": anything up to the matching ") ". */
  if (*f != '(' || !(f = strstr (f, ") ")))
    return -EINVAL;
  f += 2;
  unsigned long long sector;
  unsigned nr;
  n = 0;
  if (sscanf (f, "%llu + %u %n", &sector, &nr, &n) < 2)
    return -EINVAL;
  f += n;
  req->sector = sector;
  req->nr_sector = nr;
  uint16_t bits;
  if (hc_trace_rwbs_parse (rwbs, &req->op, &bits) < 0)
    return -EINVAL;
  req->rwbs = bits;
  /* The optional "class,hint,level". */
  if (*f && *f != '[') {
    char cls[12];
    unsigned hint, level;
    n = 0;
    if (sscanf (f, "%11[a-z],%u,%u %n", cls, &hint, &level, &n) < 3 || hint > 1023 || level > 7)
      return -EINVAL;
    if (strcmp (cls, "invalid") == 0)
      cls[0] = '\0';
    if (cls[0] && hc_trace_class_parse (cls, &req->ioprio_class) < 0)
      return -EINVAL;
    req->ioprio_hint = (uint16_t) hint;
    req->ioprio_level = (uint8_t) level;
    f += n;
  }
  if (issue) {
    /* "[comm]": the comm may hold anything, so up to the last ']'. */
    const char *end = strrchr (f, ']');
    if (*f != '[' || !end || end < f)
      return -EINVAL;
    size_t len = (size_t) (end - f - 1);
    if (len > sizeof req->comm - 1)
      len = sizeof req->comm - 1;
    memcpy (req->comm, f + 1, len);
    req->comm[len] = '\0';
  }
  (void) maj, (void) min;
  return issue ? HC_REC_ISSUE : HC_REC_COMPLETE;
}

/* ---------------------------------------------------------------------------
 * Pairing
 */

static int
add_issue (hc_rec *r, const struct hc_rec_req *q)
{
  if (hc_grow (&r->reqs, &r->cap, r->n, sizeof *r->reqs, 4096) < 0)
    return -ENOMEM;
  if (hc_grow (&r->inflight, &r->capinflight, r->ninflight, sizeof *r->inflight, 256) < 0)
    return -ENOMEM;
  r->reqs[r->n] = *q;
  r->inflight[r->ninflight++] = r->n++;
  return 0;
}

/* Matches a completion with the oldest in-flight issue of the same op,
 * sector and count (a flush: the oldest flush). */
static void
complete (hc_rec *r, const struct hc_rec_req *c)
{
  for (size_t i = 0; i < r->ninflight; i++) {
    struct hc_rec_req *q = &r->reqs[r->inflight[i]];
    if (q->op != c->op)
      continue;
    if (c->op != HC_TOP_FLUSH && (q->sector != c->sector || q->nr_sector != c->nr_sector))
      continue;
    q->completed = true;
    q->latency_ns = c->ts_ns >= q->ts_ns ? c->ts_ns - q->ts_ns : 0;
    memmove (&r->inflight[i], &r->inflight[i + 1], (r->ninflight - i - 1) * sizeof *r->inflight);
    r->ninflight--;
    return;
  }
  r->unmatched++;
}

/* Takes one line of the pipe. */
static int
take_line (hc_rec *r, const char *line)
{
  struct hc_rec_req q;
  uint64_t lost = 0;

  switch (hc_rec_parse_line (line, &q, &lost)) {
  case HC_REC_ISSUE: return add_issue (r, &q);
  case HC_REC_COMPLETE: complete (r, &q); return 0;
  case HC_REC_LOST: r->lost += lost; return 0;
  case HC_REC_OTHER: return 0;
  default: r->lost++; return 0; /* a line the kernel garbled counts as lost */
  }
}

/* ---------------------------------------------------------------------------
 * The reader thread
 */

static void *
reader (void *arg)
{
  hc_rec *r = arg;
  static const size_t cap = 1 << 20;
  char *buf = malloc (cap + 1);
  size_t have = 0;
  int quiet = 0;

  if (!buf) {
    r->err = -ENOMEM;
    return NULL;
  }
  for (;;) {
    struct pollfd p = { .fd = r->pipe_fd, .events = POLLIN };
    ssize_t k = read (r->pipe_fd, buf + have, cap - have);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && errno != EAGAIN) {
      r->err = -errno;
      break;
    }
    if (k <= 0) {
      /* Nothing now: stopping, the pipe is drained once tracing is off
       * and two reads in a row found nothing. */
      if (atomic_load (&r->stop) && ++quiet >= 2)
        break;
      poll (&p, 1, 100);
      continue;
    }
    quiet = 0;
    have += (size_t) k;
    buf[have] = '\0';
    char *line = buf, *nl;
    while ((nl = memchr (line, '\n', have - (size_t) (line - buf)))) {
      *nl = '\0';
      int rc = take_line (r, line);
      if (rc < 0 && !r->err)
        r->err = rc;
      line = nl + 1;
    }
    have -= (size_t) (line - buf);
    memmove (buf, line, have);
    if (have == cap) /* a line longer than the buffer: not an event */
      have = 0;
  }
  free (buf);
  return NULL;
}

/* ---------------------------------------------------------------------------
 * The instance
 */

/* Writes `value` to the file dir/name. */
static int
put (const char *dir, const char *name, const char *value)
{
  char path[512];
  int fd, rc = 0;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  if ((fd = open (path, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0)
    return -errno;
  size_t len = strlen (value);
  if (write (fd, value, len) != (ssize_t) len)
    rc = errno ? -errno : -EIO;
  close (fd);
  return rc;
}

/* Removes the instances earlier recorders left when they were killed: each
 * holds its ring buffers (megabytes per CPU) until it is removed. */
static void
remove_stale (const char *root)
{
  char path[256];
  DIR *d;
  struct dirent *e;

  snprintf (path, sizeof path, "%s/instances", root);
  if (!(d = opendir (path)))
    return;
  while ((e = readdir (d))) {
    long pid;
    char stale[600];
    if (sscanf (e->d_name, "hintcache-%ld-", &pid) != 1 || pid <= 0
        || kill ((pid_t) pid, 0) == 0 || errno != ESRCH)
      continue;
    snprintf (stale, sizeof stale, "%s/%s", path, e->d_name);
    rmdir (stale);
  }
  closedir (d);
}

/* Finds (or mounts) tracefs; fills root. */
static int
find_tracefs (char *root, size_t len)
{
  static const char *const places[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
  struct stat st;

  for (unsigned i = 0; i < 2; i++) {
    char ev[128];
    snprintf (ev, sizeof ev, "%s/instances", places[i]);
    if (stat (ev, &st) == 0) {
      snprintf (root, len, "%s", places[i]);
      return 0;
    }
  }
  if (mount ("nodev", places[0], "tracefs", 0, NULL) < 0)
    return -errno;
  snprintf (root, len, "%s", places[0]);
  return 0;
}

int
hc_rec_start (const char *device, unsigned buffer_kb, hc_rec **out, char *why, size_t whylen)
{
  static atomic_uint serial;
  struct hc_sb sb;
  struct stat st;
  char root[128], val[64], ev[320];
  hc_rec *r;
  int rc;

  hc_sb_init (&sb, why, whylen);
  *out = NULL;
  if (stat (device, &st) < 0) {
    rc = -errno;
    hc_sb_printf (&sb, "%s: %s", device, strerror (-rc));
    return rc;
  }
  if (!S_ISBLK (st.st_mode)) {
    hc_sb_printf (&sb, "%s is not a block device", device);
    return -ENOTBLK;
  }
  if ((rc = find_tracefs (root, sizeof root)) < 0) {
    hc_sb_printf (&sb, "tracefs is not mounted and cannot be (%s): it needs root and a kernel "
                  "with tracing", strerror (-rc));
    return rc;
  }
  snprintf (ev, sizeof ev, "%s/events/block/block_rq_issue", root);
  if (stat (ev, &st) < 0) {
    hc_sb_printf (&sb, "%s: the kernel has no block tracepoints (CONFIG_BLK_DEV_IO_TRACE)", ev);
    return -ENOENT;
  }
  remove_stale (root);
  if (!(r = calloc (1, sizeof *r)))
    return -ENOMEM;
  r->pipe_fd = -1;
  snprintf (r->dir, sizeof r->dir, "%s/instances/hintcache-%ld-%u", root, (long) getpid (),
            atomic_fetch_add (&serial, 1));
  if (mkdir (r->dir, 0700) < 0) {
    rc = -errno;
    hc_sb_printf (&sb, "%s: %s", r->dir, strerror (-rc));
    free (r);
    return rc;
  }
  struct stat dst;
  stat (device, &dst);
  snprintf (val, sizeof val, "%u", buffer_kb ? buffer_kb : 65536);
  char filter[64];
  snprintf (filter, sizeof filter, "dev == %u",
            (unsigned) ((major (dst.st_rdev) << 20) | minor (dst.st_rdev)));
  const char *step = "buffer_size_kb";
  if ((rc = put (r->dir, "buffer_size_kb", val)) < 0
      || (step = "trace_clock", rc = put (r->dir, "trace_clock", "mono")) < 0
      || (step = "events/block/block_rq_issue/filter",
          rc = put (r->dir, "events/block/block_rq_issue/filter", filter)) < 0
      || (step = "events/block/block_rq_complete/filter",
          rc = put (r->dir, "events/block/block_rq_complete/filter", filter)) < 0
      || (step = "events/block/block_rq_issue/enable",
          rc = put (r->dir, "events/block/block_rq_issue/enable", "1")) < 0
      || (step = "events/block/block_rq_complete/enable",
          rc = put (r->dir, "events/block/block_rq_complete/enable", "1")) < 0) {
    hc_sb_printf (&sb, "%s/%s: %s", r->dir, step, strerror (-rc));
    rmdir (r->dir);
    free (r);
    return rc;
  }
  snprintf (ev, sizeof ev, "%s/trace_pipe", r->dir);
  if ((r->pipe_fd = open (ev, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0
      || (rc = put (r->dir, "tracing_on", "1")) < 0) {
    rc = r->pipe_fd < 0 ? -errno : rc;
    hc_sb_printf (&sb, "%s: %s", ev, strerror (-rc));
    hc_rec_free (r);
    return rc;
  }
  if ((rc = pthread_create (&r->thread, NULL, reader, r)) != 0) {
    hc_sb_printf (&sb, "cannot start the reader: %s", strerror (rc));
    hc_rec_free (r);
    return -rc;
  }
  r->running = true;
  *out = r;
  return 0;
}

/* Adds each CPU's overruns and dropped events to r->lost. */
static void
count_overruns (hc_rec *r)
{
  char path[384];
  DIR *d;
  struct dirent *e;

  snprintf (path, sizeof path, "%s/per_cpu", r->dir);
  if (!(d = opendir (path)))
    return;
  while ((e = readdir (d))) {
    if (strncmp (e->d_name, "cpu", 3) != 0)
      continue;
    char stats[1024], line[128];
    snprintf (stats, sizeof stats, "%s/%s/stats", path, e->d_name);
    FILE *f = fopen (stats, "re");
    if (!f)
      continue;
    while (fgets (line, sizeof line, f)) {
      unsigned long long v;
      if (sscanf (line, "overrun: %llu", &v) == 1 || sscanf (line, "dropped events: %llu", &v) == 1)
        r->lost += v;
    }
    fclose (f);
  }
  closedir (d);
}

int
hc_rec_stop (hc_rec *r)
{
  if (!r->running)
    return r->err;
  put (r->dir, "tracing_on", "0");
  atomic_store (&r->stop, true);
  pthread_join (r->thread, NULL);
  r->running = false;
  count_overruns (r);
  put (r->dir, "events/block/block_rq_issue/enable", "0");
  put (r->dir, "events/block/block_rq_complete/enable", "0");
  close (r->pipe_fd);
  r->pipe_fd = -1;
  rmdir (r->dir);
  r->dir[0] = '\0';
  return r->err;
}

const struct hc_rec_req *
hc_rec_reqs (const hc_rec *r, size_t *n)
{
  *n = r->n;
  return r->reqs;
}

uint64_t
hc_rec_lost (const hc_rec *r)
{
  return r->lost;
}

uint64_t
hc_rec_unmatched (const hc_rec *r)
{
  return r->unmatched;
}

void
hc_rec_free (hc_rec *r)
{
  if (!r)
    return;
  if (r->running)
    hc_rec_stop (r);
  if (r->pipe_fd >= 0)
    close (r->pipe_fd);
  if (r->dir[0])
    rmdir (r->dir);
  free (r->reqs);
  free (r->inflight);
  free (r);
}
