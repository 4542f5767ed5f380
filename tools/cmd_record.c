/* `hintcache trace record`: a labeled trace of what programs do to a disk.
 *
 *   trace record --device DEV [--mount DIR [--rules FILE]] [--memory-limit SIZE]
 *                [--snapshot-interval S] [--duration S] -o OUT [-- COMMAND …]
 *   trace record --show-rules
 *
 * Records every request issued to DEV through the kernel's block
 * tracepoints (src/record/tracefs.c) while COMMAND runs (or for --duration
 * seconds, or until SIGINT/SIGTERM), labels each by what it touched
 * (src/record/label.c: the file system's layout, and FIEMAP snapshots of
 * the files under DIR taken at the start, every --snapshot-interval seconds
 * and at the end; files labelled by path rules, --rules FILE first, and a
 * PostgreSQL data directory by its catalog) and writes the labeled CSV of the shared traces (gzip
 * when OUT ends in .gz), which `hintcache replay` and every trace reader
 * take as they are.  --memory-limit runs COMMAND in a memory cgroup of that
 * size, so that the page cache does not absorb the reuse a cache in front
 * of the disk would see.  A summary follows: requests, bytes, footprint,
 * shares by label, comm and I/O priority class, completion latency
 * percentiles, and events lost, which must be 0: a lossy trace is written
 * but the exit status is 3.  Otherwise the exit status is COMMAND's (0 when
 * --duration or a signal stopped it).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "hintcache/trace.h"
#include "cli.h"
#include "commands.h"
#include "record/record.h"
#include "util.h"

static const char record_usage[] =
  "Usage: hintcache trace record --device DEV [--mount DIR [--rules FILE]]\n"
  "                              [--memory-limit SIZE] [--snapshot-interval S]\n"
  "                              [--duration S] [--buffer-size SIZE] -o OUT\n"
  "                              [-- COMMAND [ARG …]]\n"
  "       hintcache trace record --show-rules\n"
  "\n"
  "Records every request issued to the block device DEV while COMMAND runs (or for\n"
  "--duration seconds, or until interrupted), through the kernel's block tracepoints,\n"
  "labels each by what it touched and writes the labeled CSV of the shared traces\n"
  "(gzip-compressed when OUT ends in .gz), ready for 'hintcache replay OUT'.  Needs root.\n"
  "  --device DEV           the block device (a disk, partition or loop device)\n"
  "  --mount DIR            where DEV's file system is mounted: its files label their\n"
  "                         blocks (path and label) by FIEMAP snapshots; in a\n"
  "                         PostgreSQL data directory, the running server's catalog\n"
  "                         says which files are tables, indexes, toast or catalog,\n"
  "                         and after the run a SQLite database's dbstat table says\n"
  "                         which pages are\n"
  "  --rules FILE           label rules (PATTERN LABEL, hintd's rule language) tried\n"
  "                         before the catalog and the built-in rules\n"
  "  --show-rules           print the built-in label rules and exit\n"
  "  --memory-limit SIZE    run COMMAND in a memory cgroup of SIZE (e.g. 256M), so that\n"
  "                         the page cache does not absorb all reuse\n"
  "  --snapshot-interval S  seconds between FIEMAP snapshots (default 10)\n"
  "  --duration S           stop after S seconds (COMMAND, if any, is stopped too)\n"
  "  --buffer-size SIZE     the kernel's trace buffer per CPU (default 64M)\n"
  "  -o, --output OUT       the trace to write\n"
  "The exit status is COMMAND's (0 if the recording stopped it), or 3 when the kernel\n"
  "lost events (the trace is written anyway, and the summary says how many).\n";

static volatile sig_atomic_t interrupted;

static void
on_signal (int sig)
{
  (void) sig;
  interrupted = 1;
}

/* ---- The memory cgroup. ---- */

/* Creates a memory cgroup limited to `bytes` (v2 at /sys/fs/cgroup, or v1's
 * memory hierarchy); fills dir and procs (the file a process writes its
 * pid to, to join).  Returns 0 or a negative errno. */
static int
cgroup_make (uint64_t bytes, char *dir, size_t dlen, char *procs, size_t plen)
{
  struct stat st;
  char val[32], path[512];
  const char *limit;
  FILE *f;

  if (stat ("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
    snprintf (dir, dlen, "/sys/fs/cgroup/hintcache-record-%ld", (long) getpid ());
    limit = "memory.max";
  } else if (stat ("/sys/fs/cgroup/memory", &st) == 0) {
    snprintf (dir, dlen, "/sys/fs/cgroup/memory/hintcache-record-%ld", (long) getpid ());
    limit = "memory.limit_in_bytes";
  } else
    return -ENOENT;
  if (mkdir (dir, 0755) < 0 && errno != EEXIST)
    return -errno;
  snprintf (path, sizeof path, "%s/%s", dir, limit);
  snprintf (val, sizeof val, "%" PRIu64, bytes);
  if (!(f = fopen (path, "we")) || fputs (val, f) < 0 || fclose (f) != 0) {
    int e = errno ? errno : EIO;
    rmdir (dir);
    return -e;
  }
  snprintf (procs, plen, "%s/cgroup.procs", dir);
  return 0;
}

/* ---- The summary. ---- */

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

struct tally {
  char name[32];
  uint64_t n;
};

static void
tally_add (struct tally *t, size_t *n, size_t cap, const char *name)
{
  for (size_t i = 0; i < *n; i++)
    if (strcmp (t[i].name, name) == 0) {
      t[i].n++;
      return;
    }
  if (*n < cap) {
    snprintf (t[*n].name, sizeof t[*n].name, "%s", name);
    t[(*n)++].n = 1;
  }
}

static int
by_count (const void *a, const void *b)
{
  const struct tally *x = a, *y = b;
  return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp (x->name, y->name);
}

static void
print_tally (const char *what, struct tally *t, size_t n, uint64_t total, size_t show)
{
  qsort (t, n, sizeof *t, by_count);
  printf ("  %-8s", what);
  for (size_t i = 0; i < n && i < show; i++)
    printf ("%s %s %.1f%%", i ? "," : "", t[i].name, total ? 100.0 * t[i].n / total : 0.0);
  printf ("%s\n", n > show ? ", …" : "");
}

/* ---- The command. ---- */

static const struct option record_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "device", required_argument, NULL, 'd' },
  { "mount", required_argument, NULL, 'm' },
  { "rules", required_argument, NULL, 'r' },
  { "show-rules", no_argument, NULL, 'S' },
  { "memory-limit", required_argument, NULL, 'M' },
  { "snapshot-interval", required_argument, NULL, 'i' },
  { "duration", required_argument, NULL, 't' },
  { "buffer-size", required_argument, NULL, 'b' },
  { "output", required_argument, NULL, 'o' },
  { NULL, 0, NULL, 0 },
};

int
cmd_trace_record (int argc, char **argv)
{
  const char *cmd = "trace record", *device = NULL, *mount = NULL, *out = NULL, *rules = NULL;
  uint64_t memlimit = 0, buffer = 0;
  double interval = 10, duration = 0;
  char why[512];
  int ch;

  optind = 1;
  while ((ch = getopt_long (argc, argv, "+ho:", record_opts, NULL)) != -1) {
    char *end;
    switch (ch) {
    case 'h': cli_help (stdout, record_usage); return 0;
    case 'd': device = optarg; break;
    case 'm': mount = optarg; break;
    case 'r': rules = optarg; break;
    case 'S': fputs (hc_labeler_default_rules (), stdout); return 0;
    case 'o': out = optarg; break;
    case 'b':
      if (hc_parse_size (optarg, &buffer, NULL) < 0 || buffer < 4096 || buffer > ((uint64_t) 1 << 32))
        return cli_usage (cmd, "--buffer-size: '%s' is not a size from 4K to 4G", optarg);
      break;
    case 'M':
      if (hc_parse_size (optarg, &memlimit, NULL) < 0 || memlimit < (1u << 20))
        return cli_usage (cmd, "--memory-limit: '%s' is not a size of at least 1M", optarg);
      break;
    case 'i':
    case 't': {
      double v = strtod (optarg, &end);
      if (end == optarg || *end || !(v > 0) || v > 1e7)
        return cli_usage (cmd, "--%s: '%s' is not a positive number of seconds",
                          ch == 'i' ? "snapshot-interval" : "duration", optarg);
      *(ch == 'i' ? &interval : &duration) = v;
      break;
    }
    default: return cli_usage (cmd, "bad option; see 'hintcache trace record --help'");
    }
  }
  if (!device || !out)
    return cli_usage (cmd, "--device DEV and -o OUT are required (see --help)");
  if (rules && !mount)
    return cli_usage (cmd, "--rules labels files: it needs --mount DIR");
  if (memlimit && optind >= argc)
    return cli_usage (cmd, "--memory-limit needs a COMMAND to run in it");
  if (geteuid () != 0)
    return cli_fail (cmd, "needs root: the kernel's block tracepoints (tracefs) are root's");

  /* The labels' sources first: the layout now, the files' first snapshot. */
  hc_labeler *lab = NULL;
  int rc = hc_labeler_new (device, mount, rules, &lab, why, sizeof why);
  if (rc < 0) {
    if (mount)
      return cli_fail (cmd, "%s", why);
    fprintf (stderr, "hintcache trace record: %s: requests are labelled unknown\n", why);
  }
  if (lab && (rc = hc_labeler_snapshot (lab)) < 0) {
    hc_labeler_free (lab);
    return cli_fail (cmd, "a FIEMAP snapshot of %s: %s", mount, strerror (-rc));
  }
  hc_trace_writer *w;
  if (hc_trace_writer_open (out, HC_TRACE_CSV, 0, &w, why, sizeof why) < 0) {
    hc_labeler_free (lab);
    return cli_fail (cmd, "%s", why);
  }

  char cg[256] = "", procs[300] = "";
  if (memlimit && (rc = cgroup_make (memlimit, cg, sizeof cg, procs, sizeof procs)) < 0) {
    hc_trace_writer_close (w);
    hc_labeler_free (lab);
    return cli_fail (cmd, "--memory-limit: cannot make a memory cgroup: %s", strerror (-rc));
  }

  hc_rec *rec;
  if ((rc = hc_rec_start (device, (unsigned) (buffer / 1024), &rec, why, sizeof why)) < 0) {
    hc_trace_writer_close (w);
    hc_labeler_free (lab);
    if (cg[0])
      rmdir (cg);
    return cli_fail (cmd, "%s", why);
  }
  uint64_t t0 = hc_clock_ns (CLOCK_MONOTONIC), next_snap = t0 + (uint64_t) (interval * 1e9);
  struct sigaction sa = { .sa_handler = on_signal };
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);

  pid_t child = -1;
  int status = 0;
  bool stopped = false; /* the command was stopped by --duration or a signal */
  if (optind < argc) {
    if ((child = fork ()) < 0) {
      rc = -errno;
      hc_rec_free (rec);
      hc_trace_writer_close (w);
      hc_labeler_free (lab);
      return cli_fail (cmd, "fork: %s", strerror (-rc));
    }
    if (child == 0) {
      signal (SIGINT, SIG_DFL);
      signal (SIGTERM, SIG_DFL);
      if (procs[0]) {
        FILE *f = fopen (procs, "we");
        if (!f || fprintf (f, "%ld\n", (long) getpid ()) < 0 || fclose (f) != 0) {
          fprintf (stderr, "hintcache trace record: cannot join %s: %s\n", procs, strerror (errno));
          _exit (126);
        }
      }
      execvp (argv[optind], argv + optind);
      fprintf (stderr, "hintcache trace record: %s: %s\n", argv[optind], strerror (errno));
      _exit (errno == ENOENT ? 127 : 126);
    }
  }
  /* Wait for the command, the duration or a signal; snapshot meanwhile. */
  for (;;) {
    if (child > 0 && waitpid (child, &status, WNOHANG) == child) {
      child = -1;
      break;
    }
    uint64_t now = hc_clock_ns (CLOCK_MONOTONIC);
    if (interrupted || (duration > 0 && now - t0 >= (uint64_t) (duration * 1e9))) {
      if (child > 0) {
        kill (child, SIGTERM);
        waitpid (child, &status, 0);
        child = -1;
        stopped = true;
      }
      break;
    }
    if (lab && mount && now >= next_snap) {
      hc_labeler_snapshot (lab);
      next_snap = now + (uint64_t) (interval * 1e9);
    }
    usleep (20000);
  }
  /* Requests still in flight complete within moments. */
  usleep (200000);
  if (lab && mount)
    hc_labeler_snapshot (lab);
  rc = hc_rec_stop (rec);
  if (cg[0])
    rmdir (cg);
  /* SQLite databases by page kind: read now, outside the recording. */
  if (lab && mount && hc_labeler_finish (lab) < 0)
    fprintf (stderr, "hintcache trace record: out of memory mapping SQLite databases\n");

  size_t n;
  const struct hc_rec_req *q = hc_rec_reqs (rec, &n);
  uint64_t *lat = malloc ((n + 1) * sizeof *lat), nlat = 0, bytes[4] = { 0 }, ops[4] = { 0 };
  struct hc_blockset fp = { 0 };
  struct tally labels[HC_LABEL_COUNT], comms[256], prios[8];
  size_t nlabels = 0, ncomms = 0, nprios = 0;
  static const char *const pclass[] = { "none", "rt", "be", "idle" };
  int wrc = 0;
  for (size_t i = 0; i < n && lat; i++) {
    struct hc_trace_req r = {
      .ts_ns = q[i].ts_ns >= t0 ? q[i].ts_ns - t0 : 0, .op = q[i].op, .rwbs = q[i].rwbs,
      .offset = q[i].op == HC_TOP_FLUSH ? 0 : q[i].sector * 512,
      .length = q[i].op == HC_TOP_FLUSH ? 0 : (uint64_t) q[i].nr_sector * 512,
      .ioprio_class = q[i].ioprio_class, .ioprio_level = q[i].ioprio_level,
      .ioprio_hint = q[i].ioprio_hint, .pid = q[i].pid,
    };
    const char *object = NULL;
    uint8_t label = HC_LABEL_UNKNOWN;
    if (r.op == HC_TOP_FLUSH)
      object = "(flush)";
    else if (lab)
      hc_labeler_resolve (lab, q[i].ts_ns, r.offset, r.length, &label, &object);
    r.label = label;
    if (!wrc && (wrc = hc_trace_write_strings (w, &r, q[i].comm, object)) == -EINVAL)
      wrc = 0; /* a request no CSV can spell: left out (cannot happen from the kernel) */
    ops[r.op]++;
    bytes[r.op] += r.length;
    if ((r.op == HC_TOP_READ || r.op == HC_TOP_WRITE) && r.length)
      for (uint64_t b = r.offset / 4096; b <= (r.offset + r.length - 1) / 4096; b++)
        hc_blockset_add (&fp, b);
    if (q[i].completed)
      lat[nlat++] = q[i].latency_ns;
    tally_add (labels, &nlabels, HC_LABEL_COUNT, hc_trace_label_name (label));
    tally_add (comms, &ncomms, 256, q[i].comm);
    tally_add (prios, &nprios, 8, pclass[q[i].ioprio_class & 3]);
  }
  int crc = hc_trace_writer_close (w);
  uint64_t lost = hc_rec_lost (rec), unmatched = hc_rec_unmatched (rec);
  size_t snaps = lab ? hc_labeler_snapshots (lab, NULL) : 0;
  size_t dbs = lab ? hc_labeler_databases (lab) : 0;
  hc_rec_free (rec);
  hc_labeler_free (lab);

  printf ("recorded %s for %.1f s: %zu requests (R %" PRIu64 ", W %" PRIu64 ", D %" PRIu64
          ", F %" PRIu64 "), %.1f MiB read, %.1f MiB written; footprint %zu blocks of 4 KiB "
          "(%.2f GiB); %zu snapshots", device, (hc_clock_ns (CLOCK_MONOTONIC) - t0) / 1e9, n, ops[0], ops[1],
          ops[2], ops[3], bytes[0] / 1048576.0, bytes[1] / 1048576.0, (size_t) fp.n,
          fp.n * 4096.0 / (1u << 30), snaps);
  if (dbs)
    printf (", %zu SQLite database%s mapped by page", dbs, dbs == 1 ? "" : "s");
  printf ("\n");
  print_tally ("labels", labels, nlabels, n, HC_LABEL_COUNT);
  print_tally ("comms", comms, ncomms, n, 8);
  print_tally ("ioprio", prios, nprios, n, 4);
  if (nlat) {
    qsort (lat, nlat, sizeof *lat, cmp_u64);
    printf ("  latency  p50 %.0f µs, p90 %.0f µs, p99 %.0f µs, max %.0f µs (%" PRIu64
            " completed)\n", lat[nlat / 2] / 1e3, lat[nlat * 9 / 10] / 1e3,
            lat[nlat * 99 / 100] / 1e3, lat[nlat - 1] / 1e3, nlat);
  }
  printf ("  lost events %" PRIu64 ", completions without an issue %" PRIu64 "\n", lost,
          unmatched);
  bool oom = !lat && n;
  free (lat);
  hc_blockset_free (&fp);
  if (oom)
    return cli_fail (cmd, "out of memory");
  if (rc < 0)
    return cli_fail (cmd, "reading the trace: %s", strerror (-rc));
  if (wrc < 0 || crc < 0)
    return cli_fail (cmd, "%s: %s", out, strerror (-(wrc < 0 ? wrc : crc)));
  if (lost) {
    fprintf (stderr, "hintcache trace record: the kernel lost %" PRIu64 " events: the trace is "
             "incomplete (a larger buffer or a lighter load would keep them)\n", lost);
    return 3;
  }
  if (stopped)
    return 0;
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  return WIFSIGNALED (status) ? 128 + WTERMSIG (status) : 0;
}
