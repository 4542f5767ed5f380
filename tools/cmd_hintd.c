/* `hintcache hintd`: the file-system-aware hint daemon.
 *
 * It runs beside a volume's server and tells it, as range hints over the
 * control socket, what each part of a file system on the volume is: the
 * file system's own metadata and journal (from its layout, read with
 * libext2fs from --device) and files' data by path rules (a tree walk of
 * --mount with FIEMAP).  The scan, the rules and the map are library code
 * (src/fsmap/); this file is the daemon loop, the connection and all the
 * printing.
 *
 * Keeping hints current.  The daemon keeps the map the server holds from it
 * (`sent`) and after every scan sends only the difference to the new map
 * (hc_fsmap_diff): "unadvise" where a range loses its hint (a file deleted,
 * renamed out of its rule, truncated), "unadvise" then "advise" where it
 * changes hint (an advise alone would merge with the earlier advice), and
 * "advise" where it gains one.  `sent` follows what the server acknowledged
 * (hc_fsmap_apply with each request's outcome), so a refused request or a
 * lost connection is retried by the next scan's diff.  Scans run at start,
 * about a second after inotify reports a change in a watched directory (at
 * most --max-watches directories are watched; the rest rely on the periodic
 * scan), every --interval seconds, and within 5 s while files are waiting
 * for allocation.
 *
 * How late a hint can be.  ext4 allocates a new file's blocks only at
 * writeback (delayed allocation; FIEMAP reports such extents DELALLOC and
 * the scan counts them as pending instead of forcing a flush — the daemon
 * never uses HC_EXTENTS_SYNC, which would write back every file it looks
 * at).  So a new file's hint arrives after writeback (dirty_expire, 30 s by
 * default, or the writer's fsync) plus the scan delay.  Meanwhile its data
 * is cached under whatever class the I/O resolves to; when the range hint
 * arrives the volume re-classes the blocks already cached in the range
 * (hc_volume_advise → hc_dir_reclass): demoted when the class has low
 * priority or does not admit reads, protected when it has high priority —
 * "demote on arrival", so a late hint still takes effect.
 *
 * Restarts.  On SIGTERM or SIGINT the daemon exits with status 0 and
 * withdraws nothing: range hints are stored with the volume's metadata, so
 * they persist across a restart of the daemon (or of the server).  A
 * daemon that starts assumes the server holds nothing from it and sends its
 * whole map; a range whose file went away while no daemon ran keeps its
 * stale hint until something else is hinted there.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsmap/fsmap.h"
#include "hintcache/control.h"
#include "util.h"
#include "cli.h"
#include "commands.h"

static const char *const cmd = "hintd";

static const char usage[] =
  "Usage: hintcache hintd --mount DIR --socket SOCKET [--device DEV] [--offset N] [OPTIONS]\n"
  "       hintcache hintd --mount DIR [--device DEV] --dry-run\n"
  "       hintcache hintd --show-rules [--rules FILE]\n"
  "\n"
  "Tells a running volume what the blocks of a file system on it are, as range hints over\n"
  "its control socket, and keeps them current.  From the file system's layout (ext2/3/4,\n"
  "read from --device with libext2fs): superblocks, group descriptors, bitmaps, inode\n"
  "tables, directory and extent-tree blocks are metadata, the internal journal is journal.\n"
  "From path rules: the data of regular files under --mount takes the hint of the first\n"
  "rule matching its path (found with FIEMAP); files no rule matches are not hinted.\n"
  "Directory blocks stay metadata whatever the rules say.\n"
  "\n"
  "  --mount DIR       the file system's mount point (or a directory in it: rule paths are\n"
  "                    relative to DIR); the walk does not cross into other file systems\n"
  "  --device DEV      the block device or image the file system lives on, for the layout\n"
  "                    scan (read-only, opened afresh every scan); without it only path\n"
  "                    rules are applied\n"
  "  --offset N        where DEV starts on the volume (default 0): hints go to N + the\n"
  "                    offset on DEV.  Decimal or 0x hex, optional K, M, G or T suffix\n"
  "  --socket SOCKET   the volume's control socket (not needed with --dry-run)\n"
  "  --rules FILE      path rules instead of the built-in ones (see --show-rules)\n"
  "  --interval SEC    rescan at least every SEC seconds (default 30)\n"
  "  --max-watches N   watch at most N directories with inotify (default: 65536 or half\n"
  "                    the user's inotify limit); the others rely on the periodic rescan\n"
  "  --once            scan, send, exit (status 1 if a request failed)\n"
  "  --dry-run         scan and print the class map (bytes and ranges per class, the\n"
  "                    largest files per class); no socket\n"
  "  --show-rules      print the rules in effect and exit\n"
  "  --verbose         print every request sent\n"
  "  --quiet           no per-scan summary line\n"
  "\n"
  "Rules, one per line ('#' starts a comment): PATTERN HINT.  HINT is a class and/or an\n"
  "advice (journal, transaction, background+dontneed …).  A PATTERN starting with '/' is\n"
  "anchored at DIR; one without '/' matches a file name in any directory; one with a '/'\n"
  "inside matches the end of the path at a component boundary.  '*' matches within one\n"
  "component, '?' one character, a '**' component any number of components (one or more\n"
  "at the end).  The first matching rule wins.\n"
  "\n"
  "It keeps the map the server holds from it and sends only differences: 'unadvise' for\n"
  "ranges that lose their hint (a file deleted, renamed out of its rule, truncated),\n"
  "'unadvise' then 'advise' for ranges that change hint, 'advise' for new ones.  It\n"
  "rescans about 1 s after inotify reports a change, every --interval seconds, and within\n"
  "5 s while files wait for allocation.  Each scan prints one line (unless --quiet).\n"
  "\n"
  "How late a hint can be: ext4 places a new file's blocks only at writeback (delayed\n"
  "allocation; up to ~30 s, or the writer's fsync), and hintd never forces writeback, so a\n"
  "new file is hinted at the first scan after its writeback.  Data the cache admitted\n"
  "before then is re-classed when the hint arrives: the volume demotes cached blocks of a\n"
  "low-priority class (or one that does not admit reads) and protects those of a\n"
  "high-priority class, so late hints still take effect (\"demote on arrival\").\n"
  "\n"
  "SIGTERM or SIGINT: exit 0 without withdrawing anything.  Range hints persist with the\n"
  "volume, so they survive a restart of hintd, which sends its whole map again on start.\n";

enum {
  OPT_MOUNT = 500, OPT_DEVICE, OPT_OFFSET, OPT_SOCKET, OPT_RULES, OPT_INTERVAL, OPT_WATCHES,
  OPT_ONCE, OPT_DRY, OPT_SHOW, OPT_VERBOSE, OPT_QUIET,
};

static const struct option opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "mount", required_argument, NULL, OPT_MOUNT },
  { "device", required_argument, NULL, OPT_DEVICE },
  { "offset", required_argument, NULL, OPT_OFFSET },
  { "socket", required_argument, NULL, OPT_SOCKET },
  { "rules", required_argument, NULL, OPT_RULES },
  { "interval", required_argument, NULL, OPT_INTERVAL },
  { "max-watches", required_argument, NULL, OPT_WATCHES },
  { "once", no_argument, NULL, OPT_ONCE },
  { "dry-run", no_argument, NULL, OPT_DRY },
  { "show-rules", no_argument, NULL, OPT_SHOW },
  { "verbose", no_argument, NULL, OPT_VERBOSE },
  { "quiet", no_argument, NULL, OPT_QUIET },
  { NULL, 0, NULL, 0 },
};

#define DEBOUNCE_MS 1000      /* from a change to its rescan */
#define PENDING_RETRY_MS 5000 /* rescan delay while files wait for allocation */
#define MAX_REFUSALS_SHOWN 5  /* refused requests printed per scan without --verbose */

/* The daemon's state. */
struct hintd {
  const char *mount, *device, *socket, *rules_path;
  uint64_t offset;
  unsigned interval;
  bool once, dry_run, verbose, quiet;
  struct hc_fsrules rules;

  hc_control_client *c;
  bool connect_failed;    /* the last attempt failed (said once) */
  struct hc_fsmap sent;   /* what the server holds from us */
  unsigned long scans;

  int ifd;                /* inotify, or -1 */
  size_t max_watches, nwatch, unwatched;
  uint8_t *wd_live;       /* watch descriptors we hold */
  size_t wd_cap;
};

static volatile sig_atomic_t stop_signal;

static void
on_signal (int sig)
{
  stop_signal = sig;
}

/* Milliseconds on the monotonic clock. */
static int64_t
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Formats a byte count for people ("1.5 MiB"). */
static const char *
human (uint64_t n, char *buf, size_t len)
{
  static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  double v = (double) n;
  unsigned u = 0;

  while (v >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf (buf, len, "%" PRIu64 " B", n);
  else
    snprintf (buf, len, "%.1f %s", v, unit[u]);
  return buf;
}

/* ---------------------------------------------------------------------------
 * inotify
 */
#define WATCH_MASK                                                                            \
  (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY           \
   | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

/* The default cap: 65536, or half the user's limit if that is less. */
static size_t
default_max_watches (void)
{
  size_t cap = 65536;
  FILE *f = fopen ("/proc/sys/fs/inotify/max_user_watches", "r");
  unsigned long lim;

  if (f) {
    if (fscanf (f, "%lu", &lim) == 1 && lim / 2 < cap)
      cap = lim / 2;
    fclose (f);
  }
  return cap;
}

/* The walk's directory callback: watch the directory while under the cap. */
static void
watch_dir (void *arg, const char *path)
{
  struct hintd *d = arg;
  int wd;

  if (d->ifd < 0)
    return;
  if (d->nwatch >= d->max_watches) {
    d->unwatched++;
    return;
  }
  if ((wd = inotify_add_watch (d->ifd, path, WATCH_MASK)) < 0) {
    if (errno == ENOSPC) /* the user's limit */
      d->max_watches = d->nwatch;
    d->unwatched++;
    return;
  }
  if ((size_t) wd >= d->wd_cap) {
    size_t cap = ((size_t) wd + 1) * 2;
    uint8_t *p = realloc (d->wd_live, cap);
    if (!p) {
      inotify_rm_watch (d->ifd, wd);
      d->unwatched++;
      return;
    }
    memset (p + d->wd_cap, 0, cap - d->wd_cap);
    d->wd_live = p;
    d->wd_cap = cap;
  }
  if (!d->wd_live[wd]) {
    d->wd_live[wd] = 1;
    d->nwatch++;
  }
}

/* Reads every pending event.  Returns true if any says something changed. */
static bool
drain_events (struct hintd *d)
{
  char buf[65536] __attribute__ ((aligned (__alignof__ (struct inotify_event))));
  bool changed = false;
  ssize_t n;

  while ((n = read (d->ifd, buf, sizeof buf)) > 0) {
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *ev = (const struct inotify_event *) p;
      if (ev->mask & IN_IGNORED) {
        if (ev->wd >= 0 && (size_t) ev->wd < d->wd_cap && d->wd_live[ev->wd]) {
          d->wd_live[ev->wd] = 0;
          d->nwatch--;
        }
      } else
        changed = true; /* IN_Q_OVERFLOW included */
      p += sizeof *ev + ev->len;
    }
  }
  return changed;
}

/* ---------------------------------------------------------------------------
 * Sending
 */

/* What one round of requests did. */
struct sent_counts {
  size_t advised, unadvised, refused, lost;
};

/* True if a request's error means the connection is gone. */
static bool
connection_error (int rc)
{
  return rc == -EPIPE || rc == -EIO || rc == -EPROTO || rc == -EAGAIN;
}

/* Connects if not connected.  Returns true if connected. */
static bool
ensure_connected (struct hintd *d)
{
  char why[512];

  if (d->c)
    return true;
  if (hc_control_connect (d->socket, &d->c, why, sizeof why) == 0) {
    if (d->connect_failed && !d->quiet)
      printf ("hintcache hintd: connected to %s again\n", d->socket);
    d->connect_failed = false;
    return true;
  }
  d->c = NULL;
  if (!d->connect_failed)
    cli_fail (cmd, "%s (will retry at each scan)", why);
  d->connect_failed = true;
  return false;
}

/* Sends ops (setting each one's state) and updates d->sent.  Returns 0, or
 * -ENOMEM if the new state of the server could not be computed (then the
 * daemon cannot go on). */
static int
send_ops (struct hintd *d, struct hc_fsmap_ops *ops, struct hc_fsmap *map, struct sent_counts *n)
{
  static char reply[HC_CONTROL_LINE];
  bool all = true;

  memset (n, 0, sizeof *n);
  for (size_t k = 0; k < ops->n; k++) {
    struct hc_fsmap_op *o = &ops->op[k];
    char line[256], hint[64];
    int rc;

    if (!d->c) {
      o->state = HC_FSMAP_OP_NOT_APPLIED;
      all = false;
      continue;
    }
    if (o->kind == HC_FSMAP_ADVISE) {
      if (hc_hint_format (o->hint, hint, sizeof hint) < 0)
        snprintf (hint, sizeof hint, "?");
      snprintf (line, sizeof line, "advise %" PRIu64 " %" PRIu64 " %s from=hintd", o->start,
                o->end - o->start, hint);
    } else
      snprintf (line, sizeof line, "unadvise %" PRIu64 " %" PRIu64 " from=hintd", o->start,
                o->end - o->start);
    rc = hc_control_request (d->c, line, reply, sizeof reply);
    if (rc == 0) {
      o->state = HC_FSMAP_OP_APPLIED;
      if (o->kind == HC_FSMAP_ADVISE)
        n->advised++;
      else
        n->unadvised++;
      if (d->verbose)
        printf ("  %s\n", line);
      continue;
    }
    all = false;
    if (connection_error (rc)) {
      /* It may or may not have happened; the ones after it did not. */
      o->state = HC_FSMAP_OP_UNKNOWN;
      n->lost = ops->n - k;
      cli_fail (cmd, "%s: %s: %s (reconnecting at the next scan)", d->socket, line, reply);
      hc_control_close (d->c);
      d->c = NULL;
      d->connect_failed = true;
      continue;
    }
    /* Refused: an advise did nothing; a refused unadvise leaves its range
     * in a state we cannot know, so the next diff withdraws it again. */
    o->state = o->kind == HC_FSMAP_ADVISE ? HC_FSMAP_OP_NOT_APPLIED : HC_FSMAP_OP_UNKNOWN;
    if (d->verbose || n->refused < MAX_REFUSALS_SHOWN)
      cli_fail (cmd, "%s: %s", line, reply);
    else if (n->refused == MAX_REFUSALS_SHOWN)
      cli_fail (cmd, "… more requests refused this scan (--verbose shows them)");
    n->refused++;
  }
  if (all) {
    /* The server holds the new map. */
    hc_fsmap_free (&d->sent);
    d->sent = *map;
    memset (map, 0, sizeof *map);
    return 0;
  }
  struct hc_fsmap next = { 0 };
  int rc = hc_fsmap_apply (&d->sent, ops, &next);
  if (rc < 0)
    return rc;
  hc_fsmap_free (&d->sent);
  d->sent = next;
  return 0;
}

/* ---------------------------------------------------------------------------
 * Scans
 */
static void
scan_opts (struct hintd *d, struct hc_fsmap_opts *o, bool top)
{
  *o = (struct hc_fsmap_opts) {
    .mount = d->mount, .device = d->device, .offset = d->offset, .rules = &d->rules, .top = top,
    .on_dir = d->ifd >= 0 ? watch_dir : NULL, .arg = d,
  };
}

/* Appends ", CLASS BYTES" for each class with bytes to the summary. */
static void
class_bytes (struct hc_sb *sb, const uint64_t bytes[HC_CLASS_COUNT])
{
  bool any = false;
  char h[32];

  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    if (bytes[c]) {
      hc_sb_printf (sb, "%s%s %s", any ? ", " : "", hc_class_name (c), human (bytes[c], h, sizeof h));
      any = true;
    }
  if (!any)
    hc_sb_printf (sb, "nothing");
}

/* One scan, diff and send.  Returns 0, 1 if something failed (scan,
 * requests), or -1 if the daemon cannot go on. */
static int
scan_once (struct hintd *d, bool *pending)
{
  struct hc_fsmap_opts o;
  struct hc_fsmap map = { 0 };
  struct hc_fsmap_stats st = { 0 };
  struct hc_fsmap_ops ops = { 0 };
  struct sent_counts n = { 0 };
  int64_t t0 = now_ms ();
  int rc, status = 0;

  d->scans++;
  d->unwatched = 0;
  scan_opts (d, &o, false);
  if ((rc = hc_fsmap_scan (&o, &map, &st)) < 0) {
    cli_fail (cmd, "scan %lu failed, nothing sent: %s", d->scans,
              st.why[0] ? st.why : strerror (-rc));
    hc_fsmap_stats_free (&st);
    *pending = false;
    return rc == -ENOMEM ? -1 : 1;
  }
  *pending = st.pending > 0;
  if ((rc = hc_fsmap_diff (&d->sent, &map, &ops)) < 0) {
    cli_fail (cmd, "out of memory");
    status = -1;
    goto out;
  }
  if (ops.n > 0 && !ensure_connected (d)) {
    status = 1;
    goto out;
  }
  if ((rc = send_ops (d, &ops, &map, &n)) < 0) {
    cli_fail (cmd, "out of memory");
    status = -1;
    goto out;
  }
  if (n.refused || n.lost)
    status = 1;
  if (!d->quiet) {
    char line[2048], h[32];
    struct hc_sb sb;
    uint64_t held[HC_CLASS_COUNT];
    size_t ranges = d->sent.n;

    hc_fsmap_count (&d->sent, held, NULL);
    hc_sb_init (&sb, line, sizeof line);
    hc_sb_printf (&sb, "hintcache hintd: scan %lu (%.2f s): %zu range%s held (", d->scans,
                  (double) (now_ms () - t0) / 1000, ranges, ranges == 1 ? "" : "s");
    class_bytes (&sb, held);
    hc_sb_printf (&sb, ")");
    size_t doubt = 0;
    for (size_t i = 0; i < d->sent.n; i++)
      doubt += hc_fsmap_hint_eq (d->sent.r[i].hint, HC_FSMAP_UNKNOWN);
    if (doubt)
      hc_sb_printf (&sb, ", %zu in doubt (retried next scan)", doubt);
    hc_sb_printf (&sb, "; sent %zu advise, %zu unadvise (withdrew %s)", n.advised, n.unadvised,
                  human (ops.withdrawn_bytes, h, sizeof h));
    if (n.refused)
      hc_sb_printf (&sb, ", %zu refused", n.refused);
    if (n.lost)
      hc_sb_printf (&sb, ", %zu not sent (connection lost)", n.lost);
    hc_sb_printf (&sb, "; %" PRIu64 " file%s pending allocation", st.pending,
                  st.pending == 1 ? "" : "s");
    if (st.unreadable_files || st.unreadable_dirs || st.dir_errors || st.inode_errors)
      hc_sb_printf (&sb, "; skipped %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64
                    " inodes unreadable", st.unreadable_files, st.unreadable_dirs + st.dir_errors,
                    st.inode_errors);
    if (d->unwatched)
      hc_sb_printf (&sb, "; %zu directories not watched (limit %zu)", d->unwatched,
                    d->max_watches);
    puts (line);
    fflush (stdout);
  }
out:
  hc_fsmap_free (&map);
  hc_fsmap_ops_free (&ops);
  hc_fsmap_stats_free (&st);
  return status;
}

/* --dry-run: one scan, the class map, the largest files. */
static int
dry_run (struct hintd *d)
{
  struct hc_fsmap_opts o;
  struct hc_fsmap map = { 0 };
  struct hc_fsmap_stats st = { 0 };
  char h[32];
  int rc;

  scan_opts (d, &o, true);
  if ((rc = hc_fsmap_scan (&o, &map, &st)) < 0) {
    cli_fail (cmd, "%s", st.why[0] ? st.why : strerror (-rc));
    hc_fsmap_stats_free (&st);
    return 1;
  }
  printf ("mount %s", d->mount);
  if (d->device)
    printf (", device %s at offset %" PRIu64, d->device, d->offset);
  else if (d->offset)
    printf (", offset %" PRIu64, d->offset);
  putchar ('\n');
  if (st.layout) {
    printf ("layout: %" PRIu64 " group%s of %u-byte blocks, %" PRIu64 " inodes in use, %" PRIu64
            " directories, %" PRIu64 " files with mapping blocks, journal %s%s",
            st.groups, st.groups == 1 ? "" : "s", st.block_size, st.inodes, st.dirs,
            st.tree_files, human (st.layout_journal, h, sizeof h),
            st.external_journal ? " (external: not mapped)" : "");
    if (st.dir_errors || st.inode_errors)
      printf ("; %" PRIu64 " inodes unreadable, %" PRIu64 " mappings unreadable", st.inode_errors,
              st.dir_errors);
    putchar ('\n');
  } else
    printf ("layout: not scanned (no --device): the file system's metadata and journal are "
            "not hinted\n");
  printf ("tree: %" PRIu64 " directories, %" PRIu64 " regular files, %" PRIu64
          " matched a rule (%s placed), %" PRIu64 " pending allocation",
          st.walk_dirs, st.walk_files, st.matched, human (st.rule_hits_bytes, h, sizeof h),
          st.pending);
  if (st.unreadable_dirs || st.unreadable_files || st.other_fs)
    printf ("; skipped %" PRIu64 " directories and %" PRIu64 " files unreadable, %" PRIu64
            " on other file systems", st.unreadable_dirs, st.unreadable_files, st.other_fs);
  putchar ('\n');
  printf ("class map: %zu ranges\n", map.n);
  printf ("  %-13s %12s %8s %8s\n", "class", "bytes", "ranges", "files");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    if (st.bytes[c] || st.files[c])
      printf ("  %-13s %12s %8" PRIu64 " %8" PRIu64 "\n", hc_class_name (c),
              human (st.bytes[c], h, sizeof h), st.ranges[c], st.files[c]);
  bool any = false;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    if (!st.top[c][0].path)
      continue;
    if (!any)
      printf ("largest files per class:\n");
    any = true;
    printf ("  %s:\n", hc_class_name (c));
    for (unsigned k = 0; k < HC_FSMAP_TOP && st.top[c][k].path; k++)
      printf ("    %12s  %s\n", human (st.top[c][k].bytes, h, sizeof h), st.top[c][k].path);
  }
  hc_fsmap_free (&map);
  hc_fsmap_stats_free (&st);
  return 0;
}

/* --show-rules. */
static void
show_rules (const struct hintd *d)
{
  if (!d->rules_path) {
    fputs (hc_fsrules_default_text (), stdout);
    return;
  }
  printf ("# Rules from %s, first match wins.\n", d->rules_path);
  for (size_t i = 0; i < d->rules.n; i++) {
    char h[64];
    if (hc_hint_format (d->rules.r[i].hint, h, sizeof h) < 0)
      snprintf (h, sizeof h, "?");
    printf ("%-24s %s\n", d->rules.r[i].pattern, h);
  }
}

/* Warns when --device does not look like the device mounted at --mount. */
static void
check_device (const struct hintd *d)
{
  struct stat dev, mnt;

  if (!d->device || stat (d->device, &dev) < 0 || stat (d->mount, &mnt) < 0)
    return;
  if (S_ISBLK (dev.st_mode) && dev.st_rdev != mnt.st_dev)
    fprintf (stderr, "hintcache hintd: note: %s is not the device %s is on; the layout and "
             "the files' extents may not describe the same disk\n", d->device, d->mount);
}

/* The daemon loop, until a signal. */
static int
run (struct hintd *d)
{
  struct sigaction sa = { .sa_handler = on_signal };
  sigset_t block, orig;
  int64_t due = 0, event_due = -1, last_len = 0;
  int status = 0;

  sigemptyset (&block);
  sigaddset (&block, SIGTERM);
  sigaddset (&block, SIGINT);
  sigprocmask (SIG_BLOCK, &block, &orig);
  sigaction (SIGTERM, &sa, NULL);
  sigaction (SIGINT, &sa, NULL);
  sigdelset (&orig, SIGTERM);
  sigdelset (&orig, SIGINT);

  d->ifd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
  if (d->ifd < 0)
    fprintf (stderr, "hintcache hintd: note: inotify: %s; rescanning every %u s only\n",
             strerror (errno), d->interval);
  while (!stop_signal) {
    int64_t now = now_ms ();
    if (now >= due || (event_due >= 0 && now >= event_due)) {
      bool pending;
      int rc = scan_once (d, &pending);
      int64_t end = now_ms ();
      if (rc < 0) {
        status = 1;
        break;
      }
      last_len = end - now;
      due = end + (int64_t) d->interval * 1000;
      if (pending && due > end + PENDING_RETRY_MS)
        due = end + PENDING_RETRY_MS;
      event_due = -1;
      continue;
    }
    int64_t wake = event_due >= 0 && event_due < due ? event_due : due;
    struct timespec ts = { .tv_sec = (wake - now) / 1000, .tv_nsec = (wake - now) % 1000 * 1000000 };
    struct pollfd p = { .fd = d->ifd, .events = POLLIN };
    int r = ppoll (&p, d->ifd >= 0 ? 1 : 0, &ts, &orig);
    if (r > 0 && drain_events (d) && event_due < 0) {
      /* Debounce; and let scans take at most half the time. */
      int64_t t = now_ms ();
      event_due = t + DEBOUNCE_MS;
      if (event_due < t + last_len)
        event_due = t + last_len;
    }
  }
  if (stop_signal && !d->quiet)
    printf ("hintcache hintd: %s: exiting; the %zu ranges sent stay hinted\n",
            strsignal (stop_signal), d->sent.n);
  if (d->ifd >= 0)
    close (d->ifd);
  return status;
}

int
cmd_hintd (int argc, char **argv)
{
  struct hintd d = { .interval = 30, .ifd = -1 };
  struct hc_parse_error perr;
  bool show = false, watches_given = false;
  uint64_t v;
  int ch, status;

  optind = 1;
  while ((ch = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
    switch (ch) {
    case 'h': cli_help (stdout, usage); return 0;
    case OPT_MOUNT: d.mount = optarg; break;
    case OPT_DEVICE: d.device = optarg; break;
    case OPT_SOCKET: d.socket = optarg; break;
    case OPT_RULES: d.rules_path = optarg; break;
    case OPT_OFFSET:
      if (hc_parse_size (optarg, &d.offset, NULL) < 0)
        return cli_usage (cmd, "--offset: '%s' is not a number (decimal or 0x hex, K/M/G/T)",
                          optarg);
      break;
    case OPT_INTERVAL:
      if (hc_parse_size (optarg, &v, NULL) < 0 || v < 1 || v > 86400)
        return cli_usage (cmd, "--interval: '%s' is not a number of seconds (1 … 86400)", optarg);
      d.interval = (unsigned) v;
      break;
    case OPT_WATCHES:
      if (hc_parse_size (optarg, &v, NULL) < 0 || v > (1u << 30))
        return cli_usage (cmd, "--max-watches: '%s' is not a count", optarg);
      d.max_watches = (size_t) v;
      watches_given = true;
      break;
    case OPT_ONCE: d.once = true; break;
    case OPT_DRY: d.dry_run = true; break;
    case OPT_SHOW: show = true; break;
    case OPT_VERBOSE: d.verbose = true; break;
    case OPT_QUIET: d.quiet = true; break;
    default: return cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
    }
  }
  if (optind < argc)
    return cli_usage (cmd, "unexpected operand '%s' (see --help)", argv[optind]);
  if (!show && !d.mount)
    return cli_usage (cmd, "--mount DIR is required (see --help)");
  if (!show && !d.dry_run && !d.socket)
    return cli_usage (cmd, "--socket SOCKET is required unless --dry-run (see --help)");
  if (d.once && d.dry_run)
    return cli_usage (cmd, "--once and --dry-run exclude each other");
  if (d.verbose && d.quiet)
    return cli_usage (cmd, "--verbose and --quiet exclude each other");

  if (d.rules_path) {
    int rc = hc_fsrules_load_file (d.rules_path, &d.rules, &perr);
    if (rc == -EINVAL)
      return cli_usage (cmd, "%s:%u: %s", d.rules_path, perr.line, perr.msg);
    if (rc < 0)
      return cli_fail (cmd, "%s: %s", d.rules_path, strerror (-rc));
  } else {
    const char *text = hc_fsrules_default_text ();
    if (hc_fsrules_parse (text, strlen (text), &d.rules, &perr) < 0)
      return cli_fail (cmd, "the built-in rules, line %u: %s", perr.line, perr.msg);
  }
  if (show) {
    show_rules (&d);
    hc_fsrules_free (&d.rules);
    return 0;
  }
  if (!watches_given)
    d.max_watches = default_max_watches ();
  signal (SIGPIPE, SIG_IGN);
  check_device (&d);
  if (!d.device && !d.quiet && !d.dry_run)
    fprintf (stderr, "hintcache hintd: note: no --device: only path rules are applied (the "
             "file system's metadata and journal are not hinted)\n");

  if (d.dry_run)
    status = dry_run (&d);
  else if (!ensure_connected (&d))
    status = 1;
  else if (d.once) {
    bool pending;
    status = scan_once (&d, &pending) == 0 ? 0 : 1;
  } else
    status = run (&d);
  hc_control_close (d.c);
  hc_fsmap_free (&d.sent);
  hc_fsrules_free (&d.rules);
  free (d.wd_live);
  return status;
}
