/* The control socket: the protocol executor on a volume of memory tiers
 * (every command, and a table of malformed requests that must each get an
 * error and change nothing), the statistics' text form round trip, the
 * server over a real socket (greeting, concurrent clients, malformed lines
 * while it keeps serving, the socket file's mode and life, stale and foreign
 * files at its path, the client limit, and — as root — a user that is
 * neither root nor the server's own refused by the file mode and then by
 * SO_PEERCRED), and the tool against a live server: control, advise with
 * ranges and with files' FIEMAP extents, stats --json, clean, --withdraw.
 *
 * Without an argument it runs everything but the parts below, each of
 * which is its own CTest test and exits 77 (skipped), saying why, where its
 * prerequisite is missing:
 *
 *   test_control other-user               the other-user refusals (root)
 *   test_control tool PATH-TO-hintcache   the tool against a live server
 *                                         (a sparse 1 TiB file)
 *   test_control files PATH-TO-hintcache  advise --file (FIEMAP where the
 *                                         files are, a sparse file)
 *
 * Files and sockets go to a directory in $TMPDIR (or /tmp).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <grp.h>
#include <unistd.h>

#include "hintcache/control.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define FAST (4u << 20)
#define SLOW (8u << 20)

static char tmpdir[96];
static const char *tool;

/* ---------------------------------------------------------------------------
 * Helpers
 */

/* A volume over two memory tiers (or a given slow tier). */
struct vol {
  hc_tier *fast, *slow;
  hc_volume *v;
};

static int
vol_make (struct vol *x, hc_tier *slow)
{
  struct hc_format_opts fo = { 0 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];

  memset (x, 0, sizeof *x);
  if (hc_tier_new_memory (FAST, &x->fast) < 0)
    return -1;
  x->slow = slow;
  if (!x->slow && hc_tier_new_memory (SLOW, &x->slow) < 0)
    return -1;
  if (hc_volume_format (x->fast, x->slow, &fo, why, sizeof why) < 0
      || hc_volume_open (x->fast, x->slow, &oo, &x->v, why, sizeof why) < 0) {
    CHECK (0, "volume: %s", why);
    return -1;
  }
  return 0;
}

static void
vol_free (struct vol *x)
{
  if (x->v)
    CHECK (hc_volume_close (x->v) == 0, "close");
  hc_tier_close (x->fast);
  hc_tier_close (x->slow);
}

/* Runs one request; returns the reply (a static buffer). */
static const char *
ask (hc_volume *v, const char *line)
{
  static char reply[HC_CONTROL_LINE];
  int rc = hc_control_exec (v, line, reply, sizeof reply);
  CHECK (rc == 0 || (rc == 1 && strcmp (reply, "ok") == 0), "'%s': exec returned %d", line, rc);
  CHECK (strchr (reply, '\n') == NULL && strlen (reply) < sizeof reply, "'%s': one line", line);
  return reply;
}

static bool
starts (const char *s, const char *prefix)
{
  return strncmp (s, prefix, strlen (prefix)) == 0;
}

/* Connects a raw stream socket to path; returns the fd or -errno. */
static int
raw_connect (const char *path)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  size_t n = strlen (path);
  int fd;

  if (n >= sizeof a.sun_path)
    return -ENAMETOOLONG;
  memcpy (a.sun_path, path, n + 1);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect (fd, (struct sockaddr *) &a, sizeof a) < 0) {
    int e = errno;
    close (fd);
    return -e;
  }
  return fd;
}

/* Reads one line (newline removed) from fd, waiting at most 10 s.  Uses a
 * small per-call buffer: reads one byte at a time.  Returns its length or
 * -1 at the end or on timeout. */
static int
raw_line (int fd, char *buf, size_t len)
{
  size_t n = 0;

  for (;;) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char ch;
    if (poll (&p, 1, 10000) <= 0 || read (fd, &ch, 1) != 1)
      return -1;
    if (ch == '\n')
      break;
    if (n + 1 < len)
      buf[n++] = ch;
  }
  buf[n] = '\0';
  return (int) n;
}

static int
raw_send (int fd, const void *buf, size_t len)
{
  return send (fd, buf, len, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -1;
}

/* Runs the tool with the arguments (through sh); captures its output.
 * Returns its exit status, or -1. */
static int __attribute__ ((format (printf, 3, 4)))
run_tool (char *out, size_t len, const char *fmt, ...)
{
  char args[4096], cmd[8192];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (args, sizeof args, fmt, ap);
  va_end (ap);
  snprintf (cmd, sizeof cmd, "%s %s 2>&1", tool, args);
  FILE *f = popen (cmd, "r");
  if (!f)
    return -1;
  size_t n = fread (out, 1, len - 1, f);
  out[n] = '\0';
  int st = pclose (f);
  return WIFEXITED (st) ? WEXITSTATUS (st) : -1;
}

/* ---------------------------------------------------------------------------
 * hc_control_exec
 */
static void
test_exec (void)
{
  struct vol x;
  char line[HC_CONTROL_LINE + 64], reply[HC_CONTROL_LINE];

  if (vol_make (&x, NULL) < 0)
    return;
  hc_volume *v = x.v;
  uint64_t size = hc_volume_size (v);

  /* Malformed requests: each gets "error ENAME …" and changes nothing. */
  char past[64], past2[64], pastlen[64], hintpast[64];
  snprintf (past, sizeof past, "advise %" PRIu64 " 1 journal", size);
  snprintf (past2, sizeof past2, "advise 4096 %" PRIu64 " journal", size);
  snprintf (pastlen, sizeof pastlen, "unadvise 0 %" PRIu64, size + 1);
  snprintf (hintpast, sizeof hintpast, "hint %" PRIu64, size);
  static const struct {
    const char *line, *err, *says;
  } bad[] = {
    { "", "EINVAL", "commands:" },
    { " ", "EINVAL", "commands:" },
    { "     ", "EINVAL", "empty" },
    { "frobnicate", "EINVAL", "unknown command" },
    { "frobnicate 1 2", "EINVAL", "advise OFF LEN HINT" },
    { "VERSION", "EINVAL", "unknown command" },
    { "version 1", "EINVAL", "too many" },
    { "quit now", "EINVAL", "too many" },
    { "stats all", "EINVAL", "too many" },
    { "info x", "EINVAL", "too many" },
    { "clean now", "EINVAL", "too many" },
    { "advise", "EINVAL", "missing" },
    { "advise 0", "EINVAL", "missing" },
    { "advise 0 4096", "EINVAL", "usage: advise OFF LEN HINT" },
    { "advise 0 4096 journal extra", "EINVAL", "too many" },
    { "advise 0 4096 journal extra more words here", "EINVAL", "too many" },
    { "advise x 4096 journal", "EINVAL", "not a number" },
    { "advise 0 y journal", "EINVAL", "not a number" },
    { "advise -1 4096 journal", "EINVAL", "not a number" },
    { "advise 0 -4096 journal", "EINVAL", "not a number" },
    { "advise +1 4096 journal", "EINVAL", "not a number" },
    { "advise 1.5 4096 journal", "EINVAL", "not a number" },
    { "advise 1e3 4096 journal", "EINVAL", "not a number" },
    { "advise 0x 4096 journal", "EINVAL", "not a number" },
    { "advise 0xg 4096 journal", "EINVAL", "not a number" },
    { "advise K 4096 journal", "EINVAL", "not a number" },
    { "advise 1KK 4096 journal", "EINVAL", "not a number" },
    { "advise 1KM 4096 journal", "EINVAL", "not a number" },
    { "advise 1K5 4096 journal", "EINVAL", "not a number" },
    { "advise 1Ki 4096 journal", "EINVAL", "not a number" },
    { "advise 1P 4096 journal", "EINVAL", "not a number" },
    { "advise 010x 4096 journal", "EINVAL", "not a number" },
    { "advise 18446744073709551616 1 journal", "ERANGE", "too large" },
    { "advise 99999999999999999999999999999999999 1 journal", "ERANGE", "too large" },
    { "advise 0x10000000000000000 1 journal", "ERANGE", "too large" },
    { "advise 16777216T 1 journal", "ERANGE", "too large" },
    { "advise 0 0xffffffffffffffffK journal", "ERANGE", "too large" },
    { "advise 18446744073709551615 1 journal", "ERANGE", "outside" },
    { "advise 4096 18446744073709551615 journal", "ERANGE", "outside" },
    { "advise 1T 4096 journal", "ERANGE", "outside" },
    { "advise 0 0 journal", "EINVAL", "LEN" },
    { "advise 0 0x0 journal", "EINVAL", "LEN" },
    { "advise 0 0K journal", "EINVAL", "LEN" },
    { "unadvise 0 0", "EINVAL", "LEN" },
    { "advise 0 4096 bogus", "EINVAL", "classes: unclassified, metadata" },
    { "advise 0 4096 Journal", "EINVAL", "unknown class" },
    { "advise 0 4096 journal+bogus", "EINVAL", "'bogus'" },
    { "advise 0 4096 4", "EINVAL", "advice: none, evict, dontneed, normal, willneed" },
    { "advise 0 4096 5", "EINVAL", "unknown" },
    { "advise 0 4096 6", "EINVAL", "unknown" },
    { "advise 0 4096 reserved", "EINVAL", "unknown" },
    { "advise 0 4096 journal+4", "EINVAL", "'4'" },
    { "advise 0 4096 none", "EINVAL", "no class and no advice" },
    { "advise 0 4096 sequential", "EINVAL", "no class and no advice" },
    { "advise 0 4096 journal+metadata", "EINVAL", "conflicting" },
    { "advise 0 4096 willneed+dontneed", "EINVAL", "conflicting" },
    { "advise 0 4096 journal+sequential+random", "EINVAL", "conflicting" },
    { "unadvise", "EINVAL", "missing" },
    { "unadvise 0", "EINVAL", "usage: unadvise OFF LEN" },
    { "unadvise 0 4096 journal", "EINVAL", "too many" },
    { "unadvise 0 4096 from=nobody", "EINVAL", "unknown source 'nobody'" },
    { "advise 0 4096 journal from=", "EINVAL", "unknown source ''" },
    { "advise 0 4096 from=hintd", "EINVAL", "unknown class, advice or flag 'from=hintd'" },
    { "unadvise 0 4096 from=hintd from=hintd", "EINVAL", "too many" },
    { "hint", "EINVAL", "usage: hint OFF" },
    { "hint 0 1", "EINVAL", "too many" },
    { "hint x", "EINVAL", "not a number" },
    { "hint 1T", "ERANGE", "outside" },
    { "mode", "EINVAL", "usage: mode MODE" },
    { "mode bogus", "EINVAL", "writethrough, writeback" },
    { "mode writeback now", "EINVAL", "too many" },
    { "version\r", "EINVAL", "control byte 0x0d" },
    { "version\t", "EINVAL", "control byte 0x09" },
    { "\tversion", "EINVAL", "control" },
    { "advise\t0 4096 journal", "EINVAL", "control" },
    { "ver\x01sion", "EINVAL", "control" },
    { "version\x7f", "EINVAL", "control" },
    { "version \xc3\xa9", "EINVAL", "non-ASCII" },
    { "\xff", "EINVAL", "non-ASCII" },
  };
  struct hc_volume_info before, after;
  hc_volume_get_info (v, &before);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *r = ask (v, bad[i].line);
    char want[32];
    snprintf (want, sizeof want, "error %s ", bad[i].err);
    CHECK (starts (r, want), "'%s' -> '%s' (want %s)", bad[i].line, r, bad[i].err);
    CHECK (strstr (r, bad[i].says) != NULL, "'%s' -> '%s' says '%s'", bad[i].line, r, bad[i].says);
  }
  const char *computed[] = { past, past2, pastlen, hintpast };
  for (size_t i = 0; i < 4; i++) {
    const char *r = ask (v, computed[i]);
    CHECK (starts (r, "error ERANGE ") && strstr (r, "outside"), "'%s' -> '%s'", computed[i], r);
  }
  /* Too long for the protocol. */
  memset (line, 'a', HC_CONTROL_LINE);
  line[HC_CONTROL_LINE] = '\0';
  CHECK (starts (ask (v, line), "error E2BIG "), "a line of HC_CONTROL_LINE bytes");
  /* Exactly the longest line: a command padded with spaces. */
  memset (line, ' ', HC_CONTROL_LINE - 1);
  memcpy (line, "version", 7);
  line[HC_CONTROL_LINE - 1] = '\0';
  CHECK (strcmp (ask (v, line), "ok 1") == 0, "the longest line");
  hc_volume_get_info (v, &after);
  CHECK (after.range_hints == before.range_hints && after.mode == before.mode,
         "malformed requests changed nothing");
  CHECK (hc_volume_range_hint (v, 0).cls == 0 && hc_volume_range_hint (v, 4096).cls == 0,
         "no range hint stored");

  /* Valid requests. */
  CHECK (strcmp (ask (v, "version"), "ok 1") == 0, "version");
  CHECK (strcmp (ask (v, "  version  "), "ok 1") == 0, "blanks around");
  CHECK (strcmp (ask (v, "hint 1M"), "ok unclassified") == 0, "no hint yet");
  CHECK (strcmp (ask (v, "advise 1M 64K journal"), "ok") == 0, "advise");
  CHECK (strcmp (ask (v, "hint 1M"), "ok journal") == 0, "hint after advise");
  CHECK (strcmp (ask (v, "hint 0x10ffff"), "ok journal") == 0, "last byte of the range");
  CHECK (strcmp (ask (v, "hint 1114112"), "ok unclassified") == 0, "just past the range");
  CHECK (strcmp (ask (v, "hint 1048575"), "ok unclassified") == 0, "just before the range");
  CHECK (hc_volume_range_hint (v, 1 << 20).cls == HC_CLASS_JOURNAL, "the volume has it");
  CHECK (strcmp (ask (v, "advise  0x100000   0x10000  willneed"), "ok") == 0, "advice, hex");
  CHECK (strcmp (ask (v, "hint 1M"), "ok journal+willneed") == 0, "class and advice");
  CHECK (strcmp (ask (v, "advise 2m 4k background+dontneed"), "ok") == 0, "both at once");
  CHECK (strcmp (ask (v, "hint 2M"), "ok background+dontneed") == 0, "both stored");
  CHECK (strcmp (ask (v, "advise 2M 4K normal"), "ok") == 0, "normal clears the advice");
  CHECK (strcmp (ask (v, "hint 2M"), "ok background") == 0, "advice cleared");
  CHECK (strstr (ask (v, "info"), " range_hints=") != NULL, "info has range_hints");
  CHECK (strcmp (ask (v, "unadvise 1M 64K"), "ok") == 0, "unadvise");
  CHECK (strcmp (ask (v, "hint 1M"), "ok unclassified") == 0, "unadvise cleared it");
  CHECK (strcmp (ask (v, "unadvise 0 1T") , "error ERANGE range 0+1099511627776 is outside the "
                 "volume (8388608 bytes)") == 0, "unadvise past the end: '%s'", ask (v, "unadvise 0 1T"));
  char want[256];
  snprintf (want, sizeof want, "ok size=%" PRIu64 " block_size=4096 cache_blocks=", size);
  CHECK (starts (ask (v, "info"), want), "info: %s", ask (v, "info"));
  CHECK (strstr (ask (v, "info"), " mode=writethrough policy=hintaware range_hints=") != NULL,
         "info: %s", ask (v, "info"));

  /* Modes. */
  CHECK (strcmp (ask (v, "mode wb"), "ok") == 0, "mode wb");
  CHECK (hc_volume_mode (v) == HC_MODE_WRITEBACK, "writeback now");
  CHECK (strstr (ask (v, "info"), " mode=writeback ") != NULL, "info says writeback");

  /* Statistics after I/O. */
  static uint8_t buf[256 << 10];
  struct hc_ioctx ctx = { .hint = { .cls = HC_CLASS_METADATA } };
  memset (buf, 0x5a, sizeof buf);
  CHECK (hc_volume_write (v, buf, sizeof buf, 3 << 20, 0, &ctx) == 0, "write");
  CHECK (hc_volume_read (v, buf, sizeof buf, 3 << 20, &ctx) == 0, "read");
  CHECK (hc_volume_read (v, buf, sizeof buf, 5 << 20, NULL) == 0, "read a miss");
  struct hc_stats live, got;
  const char *r = ask (v, "stats");
  CHECK (starts (r, "ok cache_blocks="), "stats: %.80s", r);
  CHECK (hc_stats_parse (r + 3, &got) == 0, "stats parse");
  hc_volume_stats (v, &live);
  CHECK (memcmp (&live, &got, sizeof got) == 0, "stats over the protocol = hc_volume_stats");
  CHECK (got.cls[HC_CLASS_METADATA].bytes[HC_STAT_WRITE] == sizeof buf
         && got.cls[HC_CLASS_METADATA].bytes[HC_STAT_READ] == sizeof buf
         && got.cls[HC_CLASS_METADATA].hits[HC_STAT_READ] == (sizeof buf) / 4096
         && got.cls[HC_CLASS_METADATA].dirty == (sizeof buf) / 4096,
         "metadata: %" PRIu64 " read hits, %" PRIu64 " dirty",
         got.cls[HC_CLASS_METADATA].hits[HC_STAT_READ], got.cls[HC_CLASS_METADATA].dirty);
  CHECK (strstr (r, " metadata.read.hits=64 ") != NULL, "key metadata.read.hits: %.200s", r);
  CHECK (strstr (r, " metadata.write.bytes=262144") != NULL, "key metadata.write.bytes");

  /* clean writes back; then back to write-through. */
  CHECK (strcmp (ask (v, "clean"), "ok") == 0, "clean");
  hc_volume_stats (v, &live);
  CHECK (live.cls[HC_CLASS_METADATA].dirty == 0
         && live.cls[HC_CLASS_METADATA].writebacks == (sizeof buf) / 4096, "clean wrote back");
  CHECK (strcmp (ask (v, "mode writethrough"), "ok") == 0, "mode writethrough");
  CHECK (hc_volume_mode (v) == HC_MODE_WRITETHROUGH, "write-through now");
  CHECK (strcmp (ask (v, "mode pt"), "ok") == 0 && hc_volume_mode (v) == HC_MODE_PASSTHROUGH,
         "pass-through");
  CHECK (strcmp (ask (v, "mode wt"), "ok") == 0, "back");

  /* quit, small and missing reply buffers. */
  CHECK (hc_control_exec (v, "quit", reply, sizeof reply) == 1 && strcmp (reply, "ok") == 0, "quit");
  char small[8];
  memset (small, 'x', sizeof small);
  CHECK (hc_control_exec (v, "info", small, sizeof small) == 0 && strlen (small) == 7
         && strncmp (small, "ok size", 7) == 0, "a short reply buffer is cut");
  CHECK (hc_control_exec (v, "version", NULL, 0) == -EINVAL, "no reply buffer");
  CHECK (hc_control_exec (NULL, "version", reply, sizeof reply) == 0 && starts (reply, "error "),
         "no volume");
  vol_free (&x);
}

/* ---------------------------------------------------------------------------
 * hc_stats_format / hc_stats_parse
 */
/* Each source withdraws only its own range hints, and the owner of each
 * piece survives a clean close (the checkpoint) and a crash (the journal). */
static void
test_sources (void)
{
  struct vol x;
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];

  if (vol_make (&x, NULL) < 0)
    return;
  for (unsigned round = 0; round < 3; round++) {
    hc_volume *v = x.v;
    CHECK (strcmp (ask (v, "advise 0 64K metadata from=hintd"), "ok") == 0, "hintd's");
    CHECK (strcmp (ask (v, "advise 32K 64K journal from=advise"), "ok") == 0, "advise's");
    CHECK (strcmp (ask (v, "advise 1M 4K streaming"), "ok") == 0, "the administrator's");
    if (round == 1) {        /* a clean close: the checkpoint holds the owners */
      CHECK (hc_volume_close (v) == 0, "close");
      CHECK (hc_volume_open (x.fast, x.slow, &oo, &x.v, why, sizeof why) == 0, "open: %s", why);
    } else if (round == 2) { /* a crash: only the journal holds them */
      CHECK (hc_volume_flush (v) == 0, "flush");
      static uint8_t img[FAST];
      hc_tier_read (x.fast, img, FAST, 0);
      hc_volume_close (v);
      hc_tier_write (x.fast, img, FAST, 0, 0);
      CHECK (hc_volume_open (x.fast, x.slow, &oo, &x.v, why, sizeof why) == 0, "open: %s", why);
      struct hc_volume_info in;
      hc_volume_get_info (x.v, &in);
      CHECK (in.replayed > 0, "the hints came back from the journal");
    }
    v = x.v;
    /* hintd's file is deleted: its withdrawal leaves advise's part. */
    CHECK (strcmp (ask (v, "unadvise 0 96K from=hintd"), "ok") == 0, "hintd withdraws");
    CHECK (strcmp (ask (v, "hint 0"), "ok unclassified") == 0, "hintd's gone: %s", ask (v, "hint 0"));
    CHECK (strcmp (ask (v, "hint 40K"), "ok journal") == 0, "advise's kept: %s", ask (v, "hint 40K"));
    CHECK (strcmp (ask (v, "unadvise 0 2M from=advise"), "ok") == 0, "advise withdraws");
    CHECK (strcmp (ask (v, "hint 40K"), "ok unclassified") == 0, "advise's gone");
    CHECK (strcmp (ask (v, "hint 1M"), "ok streaming") == 0, "the administrator's kept");
    CHECK (strcmp (ask (v, "unadvise 0 2M from=preload"), "ok") == 0, "preload has nothing");
    CHECK (strcmp (ask (v, "hint 1M"), "ok streaming") == 0, "still kept");
    CHECK (strcmp (ask (v, "advise 2M 4K data from=preload"), "ok") == 0, "preload's");
    CHECK (strcmp (ask (v, "unadvise 0 4M"), "ok") == 0, "the administrator withdraws all");
    CHECK (strcmp (ask (v, "hint 1M"), "ok unclassified") == 0 && strcmp (ask (v, "hint 2M"),
           "ok unclassified") == 0, "all gone");
  }
  vol_free (&x);
}

static void
test_stats_text (void)
{
  struct hc_stats s, t;
  uint64_t *w = (uint64_t *) &s;
  size_t n = sizeof s / sizeof (uint64_t);
  static char buf[HC_CONTROL_LINE];

  CHECK (sizeof s % sizeof (uint64_t) == 0, "hc_stats is all uint64_t");
  /* Distinct values in every field, of varied sizes. */
  for (size_t i = 0; i < n; i++)
    w[i] = (i + 1) * 0x9e3779b97f4a7c15ull >> (i % 60);
  int len = hc_stats_format (&s, buf, sizeof buf);
  CHECK (len > 0 && (size_t) len == strlen (buf), "format: %d", len);
  memset (&t, 0xee, sizeof t);
  CHECK (hc_stats_parse (buf, &t) == 0, "parse");
  CHECK (memcmp (&s, &t, sizeof s) == 0, "round trip of distinct values");
  CHECK (strstr (buf, "cache_blocks=") == buf, "starts with cache_blocks");
  const char *keys[] = { " free_blocks=", " pending_blocks=", " commits=", " flushes=",
                         " prefetched=", " errors_fast=", " metadata.read.hits=",
                         " journal.write.hits=", " data.read.misses=", " paging.read.admissions=",
                         " streaming.read.bypass.sequential=", " background.write.bypass.policy=",
                         " unclassified.evictions=", " transaction.writebacks=",
                         " metadata.hint_hits=", " data.read.bytes=", " data.write.bytes=",
                         " journal.flash_bytes_written=", " paging.blocks=", " paging.dirty=" };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    CHECK (strstr (buf, keys[i]) != NULL, "key%s present", keys[i]);
  /* Each field is its own key: changing one changes only that one. */
  for (size_t i = 0; i < n; i++) {
    struct hc_stats u = s;
    ((uint64_t *) &u)[i] += 1;
    hc_stats_format (&u, buf, sizeof buf);
    CHECK (hc_stats_parse (buf, &t) == 0 && memcmp (&u, &t, sizeof u) == 0, "field %zu", i);
  }
  /* The largest values fit in a reply line. */
  memset (&s, 0xff, sizeof s);
  len = hc_stats_format (&s, buf, HC_CONTROL_LINE - 4);
  CHECK (len > 0 && len < HC_CONTROL_LINE - 4, "all UINT64_MAX fits: %d", len);
  CHECK (hc_stats_parse (buf, &t) == 0 && memcmp (&s, &t, sizeof s) == 0, "round trip of maxima");
  /* Zeros are short; and the volume-wide counters are always there. */
  memset (&s, 0, sizeof s);
  len = hc_stats_format (&s, buf, sizeof buf);
  CHECK (strcmp (buf, "cache_blocks=0 free_blocks=0 pending_blocks=0 commits=0 flushes=0 "
                 "prefetched=0 errors_fast=0 errors_checksum=0 hint_effects=0 effect_changes=0 "
                 "meta_flash_bytes=0 ways=0")
             == 0, "zeros: %s", buf);
  memset (&t, 0xee, sizeof t);
  CHECK (hc_stats_parse (buf, &t) == 0 && memcmp (&s, &t, sizeof s) == 0, "round trip of zeros");
  /* Too small a buffer. */
  CHECK (hc_stats_format (&s, buf, 10) == -ENOSPC && strlen (buf) < 10, "ENOSPC");
  /* Parse: unknown keys skipped, bad words refused, *s untouched on error. */
  CHECK (hc_stats_parse ("commits=5 future.key=7 metadata.future=3  flushes=0x10", &t) == 0
         && t.commits == 5 && t.flushes == 16 && t.cache_blocks == 0, "unknown keys skipped");
  const char *bad[] = { "", "   ", "commits", "commits=", "=5", "commits=x", "commits=-1",
                        "commits=99999999999999999999", "commits=5 flushes", "metadata.read.hits=1K" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset (&t, 0xab, sizeof t);
    struct hc_stats ref;
    memset (&ref, 0xab, sizeof ref);
    CHECK (hc_stats_parse (bad[i], &t) == -EINVAL && memcmp (&t, &ref, sizeof t) == 0,
           "parse '%s' is EINVAL", bad[i]);
  }
}

/* ---------------------------------------------------------------------------
 * The server
 */
struct worker {
  const char *path;
  unsigned id;
  int failures;
};

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  hc_control_client *c;
  char why[256], line[128], reply[HC_CONTROL_LINE];
  static const char *const cls[] = { "metadata", "journal", "transaction", "data" };

  if (hc_control_connect (w->path, &c, why, sizeof why) < 0) {
    w->failures++;
    return NULL;
  }
  for (unsigned i = 0; i < 40; i++) {
    uint64_t off = (uint64_t) (w->id * 40 + i) * 8192;
    const char *k = cls[(w->id + i) % 4];
    snprintf (line, sizeof line, "advise %" PRIu64 " 8192 %s", off, k);
    if (hc_control_request (c, line, reply, sizeof reply) != 0)
      w->failures++;
    snprintf (line, sizeof line, "hint %" PRIu64, off + 4096);
    if (hc_control_request (c, line, reply, sizeof reply) != 0 || strcmp (reply, k) != 0)
      w->failures++;
    if (i % 8 == 0 && (hc_control_request (c, "stats", reply, sizeof reply) != 0
                       || !starts (reply, "cache_blocks=")))
      w->failures++;
    if (i % 10 == 0 && hc_control_request (c, "bogus", reply, sizeof reply) != -EINVAL)
      w->failures++;
  }
  hc_control_close (c);
  return NULL;
}

/* A fake server for the client's greeting checks: accepts one connection
 * and sends `greeting`. */
struct fake {
  const char *path;
  int rc;
  char why[256];
};

static void *
fake_client (void *arg)
{
  struct fake *f = arg;
  hc_control_client *c = NULL;
  f->rc = hc_control_connect (f->path, &c, f->why, sizeof f->why);
  hc_control_close (c);
  return NULL;
}

static int
fake_greeting (const char *path, const char *greeting, char *why, size_t whylen)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  struct fake f = { .path = path };
  pthread_t t;
  int lfd = socket (AF_UNIX, SOCK_STREAM, 0);

  unlink (path);
  snprintf (a.sun_path, sizeof a.sun_path, "%s", path);
  if (bind (lfd, (struct sockaddr *) &a, sizeof a) < 0 || listen (lfd, 1) < 0) {
    close (lfd);
    return 1;
  }
  pthread_create (&t, NULL, fake_client, &f);
  int fd = accept (lfd, NULL, NULL);
  if (fd >= 0) {
    raw_send (fd, greeting, strlen (greeting));
    shutdown (fd, SHUT_WR);
  }
  pthread_join (t, NULL);
  if (fd >= 0)
    close (fd);
  close (lfd);
  unlink (path);
  snprintf (why, whylen, "%s", f.why);
  return f.rc;
}

/* In a child that becomes uid 65534 (3 if it cannot): connects, and exits 0
 * if the result is -EACCES and `why` contains `says`. */
static int
as_nobody (const char *path, const char *says)
{
  pid_t pid = fork ();
  if (pid == 0) {
    hc_control_client *c;
    char why[256];
    if (setgroups (0, NULL) < 0 || setgid (65534) < 0 || setuid (65534) < 0)
      _exit (3);
    int rc = hc_control_connect (path, &c, why, sizeof why);
    if (rc == 0)
      _exit (2);
    _exit (rc == -EACCES && strstr (why, says) ? 0 : 1);
  }
  int st;
  if (pid < 0 || waitpid (pid, &st, 0) != pid || !WIFEXITED (st))
    return -1;
  return WEXITSTATUS (st);
}

/* In a child that becomes uid 65534: exits 0 if it can reach dir, 1 if
 * not, 3 if it cannot become that user. */
static int
nobody_reaches (const char *dir)
{
  pid_t pid = fork ();
  if (pid == 0) {
    if (setgroups (0, NULL) < 0 || setgid (65534) < 0 || setuid (65534) < 0)
      _exit (3);
    _exit (access (dir, X_OK) == 0 ? 0 : 1);
  }
  int st;
  if (pid < 0 || waitpid (pid, &st, 0) != pid || !WIFEXITED (st))
    return -1;
  return WEXITSTATUS (st);
}

/* Idle clients cannot lock everyone out: with every slot taken, a
 * newcomer gets the slot of the client idle longest, once it has been
 * idle 10 s; the others go on. */
static void
test_idle_slots (void)
{
  struct vol x;
  hc_control *srv = NULL;
  char path[128], why[256], line[256];
  int fd[33];

  if (vol_make (&x, NULL) < 0)
    return;
  snprintf (path, sizeof path, "%s/idle.sock", tmpdir);
  if (hc_control_start (x.v, path, &srv, why, sizeof why) < 0) {
    CHECK (0, "start: %s", why);
    vol_free (&x);
    return;
  }
  for (unsigned i = 0; i < 32; i++) {
    fd[i] = raw_connect (path);
    CHECK (fd[i] >= 0 && raw_line (fd[i], line, sizeof line) >= 0
           && strcmp (line, "hintcache-control 1") == 0, "client %u: '%s'", i, line);
  }
  fd[32] = raw_connect (path);
  CHECK (raw_line (fd[32], line, sizeof line) >= 0 && strstr (line, "EBUSY"),
         "full, nobody idle long: '%s'", line);
  close (fd[32]);
  usleep (1100 * 1000);
  for (unsigned i = 1; i < 32; i++) { /* all but the first speak */
    raw_send (fd[i], "version\n", 8);
    CHECK (raw_line (fd[i], line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0, "client %u", i);
  }
  usleep (10 * 1000 * 1000);
  fd[32] = raw_connect (path);
  CHECK (raw_line (fd[32], line, sizeof line) >= 0 && strcmp (line, "hintcache-control 1") == 0,
         "the newcomer gets the idlest slot: '%s'", line);
  CHECK (raw_line (fd[0], line, sizeof line) < 0, "the idlest was disconnected");
  raw_send (fd[1], "version\n", 8);
  CHECK (raw_line (fd[1], line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0, "others go on");
  for (unsigned i = 0; i < 33; i++)
    close (fd[i]);
  hc_control_stop (srv);
  vol_free (&x);
}

/* For the batch tests: the close function the client is given, and the
 * replies it hands back. */
static int closes;

static int
counted_close (int fd)
{
  closes++;
  return close (fd);
}

struct replies {
  unsigned n;
  int status[8];
  char line[8][64];
};

static void
keep_reply (void *arg, unsigned i, int status, const char *line)
{
  struct replies *r = arg;
  if (i != r->n || r->n >= 8)
    return;
  r->status[r->n] = status;
  snprintf (r->line[r->n++], sizeof r->line[0], "%s", line);
}

static uint64_t
ms_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* A server that greets and then never replies: it reads the requests, or
 * (no_read) not even that, until `hold` has something to read or ends. */
struct mute {
  int lfd, hold;
  bool no_read;
};

static void *
mute_server (void *arg)
{
  struct mute *m = arg;
  char buf[4096];
  int fd = accept (m->lfd, NULL, NULL);

  if (fd < 0)
    return NULL;
  raw_send (fd, "hintcache-control 1\n", 20);
  for (;;) {
    struct pollfd p[2] = { { .fd = m->hold, .events = POLLIN },
                           { .fd = fd, .events = m->no_read ? 0 : POLLIN } };
    if (poll (p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[0].revents)
      break;
    if (p[1].revents && recv (fd, buf, sizeof buf, 0) <= 0)
      break;
  }
  close (fd);
  return NULL;
}

/* hc_control_open and hc_control_batch keep their deadlines whatever the
 * server does: no greeting, no replies, not even reading the requests. */
static void
test_deadlines (void)
{
  struct hc_control_options o = { .connect_ms = 100, .greeting_ms = 150, .close_fd = counted_close,
                                  .line_max = 1024 };
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  hc_control_client *c = NULL;
  char why[256];
  int lfd, rc;

  snprintf (a.sun_path, sizeof a.sun_path, "%s/mute.sock", tmpdir);
  lfd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (bind (lfd, (struct sockaddr *) &a, sizeof a) < 0 || listen (lfd, 4) < 0) {
    CHECK (0, "listen: %s", strerror (errno));
    close (lfd);
    return;
  }
  /* Connected (in the backlog), never accepted: no greeting. */
  closes = 0;
  uint64_t t0 = ms_now ();
  rc = hc_control_open (a.sun_path, &o, &c, why, sizeof why);
  uint64_t took = ms_now () - t0;
  CHECK (rc == -EPROTO && strcmp (why, "no greeting (no reply in time)") == 0, "no greeting: %d %s",
         rc, why);
  CHECK (took >= 140 && took < 2000, "no greeting: %" PRIu64 " ms", took);
  CHECK (closes == 1, "the socket closed with the given function: %d", closes);
  int gone = accept (lfd, NULL, NULL); /* that connection, out of the backlog */
  if (gone >= 0)
    close (gone);

  for (int no_read = 0; no_read <= 1; no_read++) {
    int hold[2];
    pthread_t t;
    if (pipe (hold) < 0)
      break;
    struct mute m = { .lfd = lfd, .hold = hold[0], .no_read = no_read };
    pthread_create (&t, NULL, mute_server, &m);
    rc = hc_control_open (a.sun_path, &o, &c, why, sizeof why);
    CHECK (rc == 0, "open (mute %d): %s", no_read, why);
    if (rc == 0) {
      /* Enough requests to fill the socket's buffers when nobody reads. */
      size_t len = no_read ? 8u << 20 : 8 * 100;
      char *req = malloc (len);
      for (size_t i = 0; req && i < len; i += 8)
        memcpy (req + i, "version\n", 8);
      t0 = ms_now ();
      rc = hc_control_batch (c, req, req ? len : 0, 200, NULL, NULL, why, sizeof why);
      took = ms_now () - t0;
      CHECK (rc == -ETIMEDOUT
             && strcmp (why, no_read ? "the server takes no requests" : "no reply in time") == 0,
             "mute server (%s): %d %s", no_read ? "not reading" : "reading", rc, why);
      CHECK (took >= 190 && took < 2000, "mute server: %" PRIu64 " ms", took);
      free (req);
      hc_control_close (c);
    }
    close (hold[1]);
    pthread_join (t, NULL);
    close (hold[0]);
  }
  close (lfd);
  unlink (a.sun_path);
}

static void
test_server (void)
{
  struct vol x;
  hc_control *srv = NULL, *srv2 = NULL;
  hc_control_client *c = NULL;
  char path[128], why[256], line[256], reply[HC_CONTROL_LINE];
  struct stat st;
  int rc, fd;

  if (vol_make (&x, NULL) < 0)
    return;
  snprintf (path, sizeof path, "%s/ctl.sock", tmpdir);

  /* Start: the file is a socket of mode 0600. */
  rc = hc_control_start (x.v, path, &srv, why, sizeof why);
  CHECK (rc == 0, "start: %s", why);
  if (rc < 0) {
    vol_free (&x);
    return;
  }
  CHECK (stat (path, &st) == 0 && S_ISSOCK (st.st_mode) && (st.st_mode & 07777) == 0600,
         "socket mode %o", st.st_mode & 07777);

  /* A second server at the same path is refused while the first listens. */
  CHECK (hc_control_start (x.v, path, &srv2, why, sizeof why) == -EEXIST, "second server: %s", why);

  /* The greeting, and requests over a raw socket. */
  fd = raw_connect (path);
  CHECK (fd >= 0, "raw connect: %s", strerror (-fd));
  CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "hintcache-control 1") == 0,
         "greeting '%s'", line);
  raw_send (fd, "version\n", 8);
  CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0, "version");
  raw_send (fd, "version\r\n", 9);
  CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0, "CRLF: '%s'", line);
  raw_send (fd, "version\r\r\n", 10);
  CHECK (raw_line (fd, line, sizeof line) >= 0 && starts (line, "error EINVAL "), "CRCRLF: '%s'", line);
  /* Several requests in one send, answered in order. */
  const char *pipelined = "advise 64K 4K paging\nhint 64K\nfrob\n\nhint 68K\n";
  raw_send (fd, pipelined, strlen (pipelined));
  const char *expect[] = { "ok", "ok paging", "error EINVAL ", "error EINVAL ", "ok unclassified" };
  for (unsigned i = 0; i < 5; i++)
    CHECK (raw_line (fd, line, sizeof line) >= 0 && starts (line, expect[i]), "pipelined %u: '%s'",
           i, line);
  /* A NUL byte in a line. */
  raw_send (fd, "vers\0ion\n", 9);
  CHECK (raw_line (fd, line, sizeof line) >= 0 && starts (line, "error EINVAL ")
         && strstr (line, "NUL"), "NUL: '%s'", line);
  /* An over-long line, sent in pieces: one E2BIG, the rest discarded. */
  {
    static char big[3 * HC_CONTROL_LINE];
    memset (big, 'v', sizeof big);
    raw_send (fd, big, HC_CONTROL_LINE / 2);
    raw_send (fd, big, sizeof big);
    raw_send (fd, "ersion\nversion\n", 15);
    CHECK (raw_line (fd, line, sizeof line) >= 0 && starts (line, "error E2BIG "), "long: '%s'", line);
    CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0,
           "after the long line: '%s'", line);
    /* A line of exactly HC_CONTROL_LINE bytes with its newline is fine;
     * one byte more is not. */
    memset (big, ' ', HC_CONTROL_LINE);
    memcpy (big, "version", 7);
    big[HC_CONTROL_LINE - 1] = '\n';
    raw_send (fd, big, HC_CONTROL_LINE);
    CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok 1") == 0, "longest: '%s'", line);
    big[HC_CONTROL_LINE - 1] = ' ';
    big[HC_CONTROL_LINE] = '\n';
    raw_send (fd, big, HC_CONTROL_LINE + 1);
    CHECK (raw_line (fd, line, sizeof line) >= 0 && starts (line, "error E2BIG "), "one more: '%s'",
           line);
    raw_send (fd, "hint 64K\n", 9);
    CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok paging") == 0,
           "still serving: '%s'", line);
  }
  /* quit: "ok", then the server closes. */
  raw_send (fd, "quit\nversion\n", 13);
  CHECK (raw_line (fd, line, sizeof line) >= 0 && strcmp (line, "ok") == 0, "quit");
  CHECK (raw_line (fd, line, sizeof line) < 0, "closed after quit");
  close (fd);

  /* The client library. */
  rc = hc_control_connect (path, &c, why, sizeof why);
  CHECK (rc == 0, "connect: %s", why);
  if (rc == 0) {
    CHECK (hc_control_request (c, "version", reply, sizeof reply) == 0 && strcmp (reply, "1") == 0,
           "version");
    CHECK (hc_control_request (c, "clean", reply, sizeof reply) == 0 && reply[0] == '\0', "empty ok");
    CHECK (hc_control_request (c, "advise 1T 1 journal", reply, sizeof reply) == -ERANGE
           && strstr (reply, "outside"), "ERANGE: %s", reply);
    CHECK (hc_control_request (c, "advise 0 4096 bogus", reply, sizeof reply) == -EINVAL
           && strstr (reply, "classes:"), "EINVAL: %s", reply);
    CHECK (hc_control_request (c, "hint 0\nversion", reply, sizeof reply) == -EINVAL, "newline");
    static char big[HC_CONTROL_LINE + 1];
    memset (big, ' ', HC_CONTROL_LINE);
    CHECK (hc_control_request (c, big, reply, sizeof reply) == -E2BIG, "too long for the client");
    char tiny[6];
    CHECK (hc_control_request (c, "stats", tiny, sizeof tiny) == 0 && strcmp (tiny, "cache") == 0,
           "a long reply is cut: '%s'", tiny);
    CHECK (hc_control_request (c, "version", tiny, sizeof tiny) == 0 && strcmp (tiny, "1") == 0,
           "and the next reply is its own");
    CHECK (hc_control_request (c, "version", NULL, 0) == 0, "no reply buffer");
    CHECK (hc_control_request (c, "quit", reply, sizeof reply) == 0, "quit");
    CHECK (hc_control_request (c, "version", reply, sizeof reply) == -EPIPE, "after quit: %s", reply);
    hc_control_close (c);
  }

  /* A client opened with options, and a batch of requests. */
  {
    struct hc_control_options o = { .connect_ms = 100, .greeting_ms = 250, .fd_min = 200,
                                    .close_fd = counted_close, .line_max = 1024 };
    const char *req = "version\nhint 64K\nfrob\nadvise 1T 1 journal\nversion\n";
    struct replies got = { 0 };
    struct hc_control_id id;
    struct stat s2;
    closes = 0;
    rc = hc_control_open (path, &o, &c, why, sizeof why);
    CHECK (rc == 0, "open: %s", why);
    if (rc == 0) {
      CHECK (hc_control_identity (c, &id) == 0 && id.fd >= 200 && fstat (id.fd, &s2) == 0
             && s2.st_dev == id.dev && s2.st_ino == id.ino, "identity: fd %d", id.fd);
      rc = hc_control_batch (c, req, strlen (req), 1000, keep_reply, &got, why, sizeof why);
      CHECK (rc == 0 && got.n == 5, "batch: %d, %u replies: %s", rc, got.n, why);
      CHECK (got.status[0] == 0 && strcmp (got.line[0], "ok 1") == 0, "batch 0: '%s'", got.line[0]);
      CHECK (got.status[1] == 0 && strcmp (got.line[1], "ok paging") == 0, "batch 1: '%s'",
             got.line[1]);
      CHECK (got.status[2] == -EINVAL && starts (got.line[2], "error EINVAL "), "batch 2: '%s'",
             got.line[2]);
      CHECK (got.status[3] == -ERANGE, "batch 3: '%s'", got.line[3]);
      CHECK (got.status[4] == 0 && strcmp (got.line[4], "ok 1") == 0, "batch 4: '%s'", got.line[4]);
      CHECK (hc_control_batch (c, "version", 7, 1000, NULL, NULL, why, sizeof why) == -EINVAL,
             "a batch without its last newline");
      CHECK (hc_control_batch (c, NULL, 0, 1000, NULL, NULL, NULL, 0) == 0, "an empty batch");
      CHECK (hc_control_request (c, "version", reply, sizeof reply) == 0 && strcmp (reply, "1") == 0,
             "a request after a batch");
      hc_control_close (c);
      /* Twice: the fd it had before moving above fd_min, then the socket. */
      CHECK (closes == 2, "closed with the given function: %d", closes);
    }
  }

  /* Concurrent clients. */
  {
    enum { N = 8 };
    pthread_t t[N];
    struct worker w[N];
    for (unsigned i = 0; i < N; i++) {
      w[i] = (struct worker) { .path = path, .id = i };
      pthread_create (&t[i], NULL, worker_main, &w[i]);
    }
    for (unsigned i = 0; i < N; i++) {
      pthread_join (t[i], NULL);
      CHECK (w[i].failures == 0, "worker %u: %d failures", i, w[i].failures);
    }
    CHECK (hc_volume_range_hint (x.v, (3 * 40 + 5) * 8192).cls
           == (unsigned) (1 + (3 + 5) % 4), "a worker's hint is stored");
  }

  /* The client limit: 32 served, the 33rd refused with EBUSY. */
  {
    hc_control_client *many[32] = { 0 };
    unsigned ok = 0;
    for (unsigned i = 0; i < 32; i++)
      ok += hc_control_connect (path, &many[i], why, sizeof why) == 0;
    /* Workers of earlier connections may still be finishing: wait for their
     * slots to free up, then fill again. */
    for (unsigned tries = 0; ok < 32 && tries < 200; tries++) {
      usleep (10000);
      for (unsigned i = 0; i < 32; i++)
        if (!many[i])
          ok += hc_control_connect (path, &many[i], why, sizeof why) == 0;
    }
    CHECK (ok == 32, "32 clients: %u", ok);
    rc = hc_control_connect (path, &c, why, sizeof why);
    CHECK (rc == -EBUSY && strstr (why, "too many"), "33rd: %d %s", rc, why);
    if (rc == 0)
      hc_control_close (c);
    CHECK (hc_control_request (many[31], "version", reply, sizeof reply) == 0, "the 32nd works");
    hc_control_close (many[0]);
    many[0] = NULL;
    rc = -1;
    for (unsigned tries = 0; rc != 0 && tries < 200; tries++) {
      rc = hc_control_connect (path, &c, why, sizeof why);
      if (rc != 0)
        usleep (10000);
    }
    CHECK (rc == 0, "a freed slot is reused: %s", why);
    if (rc == 0)
      hc_control_close (c);
    /* Leave some connected: stop must end them. */
    for (unsigned i = 1; i < 16; i++)
      hc_control_close (many[i]);
    for (unsigned i = 16; i < 32; i++)
      CHECK (hc_control_request (many[i], "version", reply, sizeof reply) == 0, "client %u", i);
    c = many[16];
    for (unsigned i = 17; i < 32; i++)
      hc_control_close (many[i]);
  }

  /* Stop with a client still connected: it sees the end; the file is gone. */
  hc_control_stop (srv);
  CHECK (hc_control_request (c, "version", reply, sizeof reply) == -EPIPE, "after stop: %s", reply);
  hc_control_close (c);
  CHECK (lstat (path, &st) < 0 && errno == ENOENT, "stop removed the socket file");
  hc_control_stop (NULL);

  /* A stale socket (bound, nobody listening) is replaced. */
  {
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    memcpy (a.sun_path, path, strlen (path) + 1); /* shorter than sun_path */
    int s = socket (AF_UNIX, SOCK_STREAM, 0);
    CHECK (bind (s, (struct sockaddr *) &a, sizeof a) == 0, "bind a stale socket");
    close (s);
    CHECK (lstat (path, &st) == 0 && S_ISSOCK (st.st_mode), "stale socket file is there");
    rc = hc_control_start (x.v, path, &srv, why, sizeof why);
    CHECK (rc == 0, "start over a stale socket: %s", why);
    if (rc == 0) {
      CHECK (hc_control_connect (path, &c, why, sizeof why) == 0, "connect: %s", why);
      hc_control_close (c);
      hc_control_stop (srv);
    }
  }
  /* Any other file is refused and left alone. */
  {
    int f = open (path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK (f >= 0 && write (f, "keep", 4) == 4, "a regular file");
    close (f);
    CHECK (hc_control_start (x.v, path, &srv, why, sizeof why) == -EEXIST, "regular file: %s", why);
    CHECK (lstat (path, &st) == 0 && S_ISREG (st.st_mode) && st.st_size == 4, "left alone");
    unlink (path);
    CHECK (mkdir (path, 0700) == 0, "a directory");
    CHECK (hc_control_start (x.v, path, &srv, why, sizeof why) == -EEXIST, "directory: %s", why);
    rmdir (path);
    char longpath[200];
    memset (longpath, 'x', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = '\0';
    CHECK (hc_control_start (x.v, longpath, &srv, why, sizeof why) == -ENAMETOOLONG, "long path");
  }

  /* The client against things that are not this server. */
  CHECK (hc_control_connect (path, &c, why, sizeof why) == -ENOENT, "no socket: %s", why);
  CHECK (fake_greeting (path, "hello\n", why, sizeof why) == -EPROTO && strstr (why, "not a hintcache"),
         "not hintcache: %s", why);
  CHECK (fake_greeting (path, "hintcache-control 2\n", why, sizeof why) == -EPROTO
         && strstr (why, "version"), "version 2: %s", why);
  CHECK (fake_greeting (path, "", why, sizeof why) == -EPROTO, "silent close: %s", why);
  CHECK (fake_greeting (path, "error EPERM go away\n", why, sizeof why) == -EACCES, "EPERM: %s", why);
  CHECK (fake_greeting (path, "error EBUSY full\n", why, sizeof why) == -EBUSY, "EBUSY: %s", why);
  vol_free (&x);
}

/* `test_control other-user`: a user that is neither root nor the server's
 * is refused by the socket file's mode, then (after chmod 0666) by
 * SO_PEERCRED.  Needs root, to become uid 65534. */
static int
test_other_user (void)
{
  struct vol x;
  hc_control *srv = NULL;
  char path[128], why[256];
  struct stat st;
  int rc;

  if (geteuid () != 0)
    return test_skip ("test_control other-user", "not root: cannot become another user");
  /* The refusals must come from the socket, not from a directory above it
   * closed to that user. */
  CHECK (chmod (tmpdir, 0711) == 0, "chmod 0711 %s", tmpdir);
  rc = nobody_reaches (tmpdir);
  chmod (tmpdir, 0700);
  if (rc == 1)
    return test_skip ("test_control other-user", "uid 65534 cannot reach %s: a directory above "
                      "it is closed to other users", tmpdir);
  CHECK (rc == 0, "uid 65534 reaches %s: status %d", tmpdir, rc);
  if (rc != 0 || vol_make (&x, NULL) < 0)
    return 0;
  snprintf (path, sizeof path, "%s/user.sock", tmpdir);
  rc = hc_control_start (x.v, path, &srv, why, sizeof why);
  CHECK (rc == 0, "start: %s", why);
  if (rc == 0) {
    CHECK (stat (path, &st) == 0 && (st.st_mode & 07777) == 0600, "socket mode %o",
           st.st_mode & 07777);
    chmod (tmpdir, 0711);
    CHECK (as_nobody (path, "Permission denied") == 0, "uid 65534 refused by the 0600 mode");
    CHECK (chmod (path, 0666) == 0, "chmod 0666");
    CHECK (as_nobody (path, "refused this user") == 0, "uid 65534 refused by SO_PEERCRED");
    chmod (path, 0600);
    chmod (tmpdir, 0700);
    hc_control_stop (srv);
  }
  vol_free (&x);
  return 0;
}

/* ---------------------------------------------------------------------------
 * The tool
 */

/* The physical offset of a file's first extent with a fixed place, via
 * FIEMAP, and the end of its last one; returns 0, or a negative errno. */
static int
first_extent (const char *path, uint64_t *phys, uint64_t *end)
{
  struct {
    struct fiemap fm;
    struct fiemap_extent e[64];
  } m;
  int fd = open (path, O_RDONLY), rc = -ENODATA;

  if (fd < 0)
    return -errno;
  memset (&m, 0, sizeof m);
  m.fm.fm_length = FIEMAP_MAX_OFFSET;
  m.fm.fm_flags = FIEMAP_FLAG_SYNC;
  m.fm.fm_extent_count = 64;
  if (ioctl (fd, FS_IOC_FIEMAP, &m.fm) < 0)
    rc = -errno;
  else {
    *end = 0;
    for (uint32_t i = 0; i < m.fm.fm_mapped_extents; i++) {
      const struct fiemap_extent *e = &m.fm.fm_extents[i];
      if (e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_ENCODED
                         | FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED))
        continue;
      if (rc < 0) {
        *phys = e->fe_physical;
        rc = 0;
      }
      if (e->fe_physical + e->fe_length > *end)
        *end = e->fe_physical + e->fe_length;
    }
  }
  close (fd);
  return rc;
}

static int
write_file (const char *path, size_t len, int seed)
{
  static char buf[1 << 20];
  int fd = open (path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0)
    return -1;
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (char) (i * 31 + (size_t) seed);
  for (size_t done = 0; done < len; done += sizeof buf)
    if (write (fd, buf, sizeof buf) != (ssize_t) sizeof buf)
      return close (fd), -1;
  int rc = fsync (fd);
  close (fd);
  return rc;
}

/* Starts a volume over a sparse slow tier of `vsize` bytes at slowpath,
 * served at sock; returns 0, 77 (test_skip's) where no sparse file that
 * large can be made there, or -1 after a failed check. */
static int
serve_sparse (struct vol *x, hc_control **srv, const char *sock, const char *slowpath,
              uint64_t vsize, const char *part)
{
  hc_tier *slow = NULL;
  char why[256];
  int fd, rc;

  fd = open (slowpath, O_CREAT | O_RDWR | O_TRUNC, 0600);
  CHECK (fd >= 0, "create %s: %s", slowpath, strerror (errno));
  if (fd < 0)
    return -1;
  if (ftruncate (fd, (off_t) vsize) < 0) {
    int e = errno;
    close (fd);
    unlink (slowpath);
    return test_skip (part, "cannot make a sparse %" PRIu64 "-byte file in %s: %s", vsize, tmpdir,
                      strerror (e));
  }
  close (fd);
  rc = hc_tier_open_file (slowpath, 0, &slow);
  CHECK (rc == 0, "open the sparse slow tier: %s", strerror (-rc));
  if (rc < 0 || vol_make (x, slow) < 0) {
    unlink (slowpath);
    return -1;
  }
  rc = hc_control_start (x->v, sock, srv, why, sizeof why);
  CHECK (rc == 0, "start: %s", why);
  if (rc < 0) {
    vol_free (x);
    unlink (slowpath);
    return -1;
  }
  return 0;
}

static int
test_tool (void)
{
  static const char part[] = "test_control tool";
  char sock[128], slowpath[128], out[1 << 16];
  struct vol x;
  hc_control *srv;
  int rc;

  if (!tool)
    return test_skip (part, "no tool given (usage: test_control tool PATH-TO-hintcache)");
  snprintf (sock, sizeof sock, "%s/tool.sock", tmpdir);
  snprintf (slowpath, sizeof slowpath, "%s/slow.img", tmpdir);
  rc = serve_sparse (&x, &srv, sock, slowpath, 1ull << 40, part);
  if (rc)
    return rc > 0 ? rc : 0;

  /* control */
  rc = run_tool (out, sizeof out, "control --socket %s version", sock);
  CHECK (rc == 0 && strcmp (out, "ok 1\n") == 0, "control version: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "control --socket %s version 'hint 1M' 'advise 0 0 journal'", sock);
  CHECK (rc == 1 && starts (out, "ok 1\nok unclassified\nerror EINVAL LEN must not be 0\n"),
         "control with an error: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "control --socket %s bogus", sock);
  CHECK (rc == 1 && starts (out, "error EINVAL unknown command 'bogus'"), "bogus: '%s'", out);
  rc = run_tool (out, sizeof out, "control --socket %s/nope version", tmpdir);
  CHECK (rc == 1, "no socket: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "control version");
  CHECK (rc == 2, "no --socket: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "control --help");
  CHECK (rc == 0 && strstr (out, "Usage: hintcache control"), "control --help");

  /* advise --range */
  rc = run_tool (out, sizeof out, "advise --socket %s --range 1M:64K journal", sock);
  CHECK (rc == 0, "advise --range: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "control --socket %s 'hint 1M' 'hint 0x10ffff' 'hint 1114112'", sock);
  CHECK (rc == 0 && strcmp (out, "ok journal\nok journal\nok unclassified\n") == 0, "hint: '%s'", out);
  rc = run_tool (out, sizeof out, "advise --socket %s --range 4M:4k --range 8M:8k 'background dontneed'",
                 sock);
  CHECK (rc == 0, "two ranges: %d '%s'", rc, out);
  CHECK (hc_volume_range_hint (x.v, 8 << 20).cls == HC_CLASS_BACKGROUND
         && hc_volume_range_hint (x.v, 8 << 20).advice == HC_ADVICE_DONTNEED
         && hc_volume_range_hint (x.v, 4 << 20).cls == HC_CLASS_BACKGROUND, "both ranges hinted");
  /* hintd's hint beside it (overlapping the range) is not advise's to
   * withdraw. */
  rc = run_tool (out, sizeof out, "control --socket %s 'advise 1056K 64K metadata from=hintd'", sock);
  CHECK (rc == 0, "hintd's hint: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "advise --socket %s --range 1M:128K --withdraw", sock);
  CHECK (rc == 0, "withdraw: %d '%s'", rc, out);
  CHECK (hc_volume_range_hint (x.v, 1 << 20).cls == 0, "withdrawn");
  CHECK (hc_volume_range_hint (x.v, 1100 << 10).cls == HC_CLASS_METADATA, "hintd's hint stays");
  rc = run_tool (out, sizeof out, "control --socket %s 'unadvise 1M 128K'", sock);
  CHECK (rc == 0 && hc_volume_range_hint (x.v, 1100 << 10).cls == 0, "an administrator's "
         "unadvise withdraws it: %d '%s'", rc, out);
  /* Usage errors. */
  const char *usage[] = { "--socket %s --range 1M:64K bogus", "--socket %s --range 1M journal",
                          "--socket %s --range 1M:0 journal", "--socket %s journal",
                          "--socket %s --range 1M:4k", "--socket %s --range 1M:4k journal extra",
                          "--range 1M:4k journal", "--socket %s --range 1M:4k none" };
  for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
    char args[256];
    snprintf (args, sizeof args, usage[i], sock);
    rc = run_tool (out, sizeof out, "advise %s", args);
    CHECK (rc == 2, "advise %s: %d '%s'", args, rc, out);
  }
  rc = run_tool (out, sizeof out, "advise --socket %s --range 2T:4k journal", sock);
  CHECK (rc == 1 && strstr (out, "outside"), "outside the volume: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "advise --help");
  CHECK (rc == 0 && strstr (out, "--withdraw"), "advise --help");

  /* stats and clean over the socket. */
  static uint8_t buf[64 << 10];
  struct hc_ioctx ctx = { .hint = { .cls = HC_CLASS_TRANSACTION } };
  CHECK (hc_volume_write (x.v, buf, sizeof buf, 16 << 20, 0, &ctx) == 0, "write");
  CHECK (hc_volume_read (x.v, buf, sizeof buf, 16 << 20, &ctx) == 0, "read");
  struct hc_stats st;
  hc_volume_stats (x.v, &st);
  char want_hits[128];
  snprintf (want_hits, sizeof want_hits, "\"transaction\":{\"read\":{\"hits\":%" PRIu64 ",",
            st.cls[HC_CLASS_TRANSACTION].hits[HC_STAT_READ]);
  CHECK (st.cls[HC_CLASS_TRANSACTION].hits[HC_STAT_READ] > 0, "some transaction hits");
  rc = run_tool (out, sizeof out, "stats --socket %s --json", sock);
  CHECK (rc == 0 && out[0] == '{' && strstr (out, "}\n"), "stats --json: %d '%.200s'", rc, out);
  CHECK (strstr (out, want_hits), "%s in %s", want_hits, out);
  CHECK (strstr (out, "\"block_size\":4096") && strstr (out, "\"mode\":\"writethrough\"")
         && strstr (out, "\"commits\":"), "stats --json fields");
  rc = run_tool (out, sizeof out, "stats --socket %s", sock);
  CHECK (rc == 0 && strstr (out, "rd hits") && strstr (out, "hint efficacy"), "stats: '%s'", out);
  rc = run_tool (out, sizeof out, "stats --socket %s something", sock);
  CHECK (rc == 2, "stats --socket with a path: %d", rc);
  rc = run_tool (out, sizeof out, "info --socket %s", sock);
  CHECK (rc == 2, "info --socket: %d", rc);
  rc = run_tool (out, sizeof out, "control --socket %s 'mode writeback'", sock);
  CHECK (rc == 0 && hc_volume_mode (x.v) == HC_MODE_WRITEBACK, "mode writeback");
  CHECK (hc_volume_write (x.v, buf, sizeof buf, 32 << 20, 0, &ctx) == 0, "dirty write");
  hc_volume_stats (x.v, &st);
  CHECK (st.cls[HC_CLASS_TRANSACTION].dirty > 0, "some dirty blocks");
  char want_clean[256];
  snprintf (want_clean, sizeof want_clean, "%s: wrote back %" PRIu64 " blocks; 0 dirty\n", sock,
            st.cls[HC_CLASS_TRANSACTION].dirty);
  rc = run_tool (out, sizeof out, "clean --socket %s", sock);
  CHECK (rc == 0 && strcmp (out, want_clean) == 0, "clean: %d '%s'", rc, out);

  hc_control_stop (srv);
  vol_free (&x);
  unlink (slowpath);
  return 0;
}

/* `test_control files`: advise --file with the extents FIEMAP reports, on
 * files in tmpdir.  Needs the tool, FIEMAP there, and a sparse file as
 * large as twice the files' offsets (1 TiB at least). */
static int
test_files (void)
{
  static const char part[] = "test_control files";
  char sock[128], slowpath[128], f1[128], f2[128], out[1 << 16], hint[64], want[256];
  struct vol x;
  hc_control *srv;
  uint64_t phys1 = 0, phys2 = 0, end1 = 0, end2 = 0, vsize = 1ull << 40;
  int rc, rc2;

  if (!tool)
    return test_skip (part, "no tool given (usage: test_control files PATH-TO-hintcache)");
  snprintf (sock, sizeof sock, "%s/tool.sock", tmpdir);
  snprintf (slowpath, sizeof slowpath, "%s/slow.img", tmpdir);
  snprintf (f1, sizeof f1, "%s/file1", tmpdir);
  snprintf (f2, sizeof f2, "%s/file2", tmpdir);

  /* Files with extents on this file system, and where they are. */
  CHECK (write_file (f1, 2 << 20, 1) == 0 && write_file (f2, 1 << 20, 2) == 0, "wrote %s and %s",
         f1, f2);
  rc = first_extent (f1, &phys1, &end1);
  rc2 = first_extent (f2, &phys2, &end2);
  if (rc == 0)
    rc = rc2;
  if (rc == -EOPNOTSUPP || rc == -ENOTTY || rc == -ENODATA) {
    unlink (f1);
    unlink (f2);
    return test_skip (part, "no FIEMAP extents in %s: %s", tmpdir, strerror (-rc));
  }
  CHECK (rc == 0, "FIEMAP of %s and %s: %s", f1, f2, strerror (-rc));
  if (end1 > vsize / 2 || end2 > vsize / 2)
    vsize = 2 * (end1 > end2 ? end1 : end2);
  vsize = (vsize + (1 << 20) - 1) & ~(uint64_t) ((1 << 20) - 1);

  /* A volume over a sparse slow tier as large as that. */
  if (rc == 0)
    rc = serve_sparse (&x, &srv, sock, slowpath, vsize, part);
  if (rc) {
    unlink (f1);
    unlink (f2);
    return rc > 0 ? rc : 0;
  }

  /* advise --file: the extents FIEMAP reports are hinted. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s metadata "
                 "--device-offset 0", sock, tmpdir, f1);
  CHECK (rc == 0, "advise --file: %d '%s'", rc, out);
  snprintf (want, sizeof want, "%s: ", f1);
  CHECK (starts (out, want) && strstr (out, " bytes -> metadata\n"), "output: '%s'", out);
  CHECK (strstr (out, " 2097152 bytes"), "all 2 MiB: '%s'", out);
  snprintf (hint, sizeof hint, "hint %" PRIu64, phys1);
  rc = run_tool (out, sizeof out, "control --socket %s '%s'", sock, hint);
  CHECK (rc == 0 && strcmp (out, "ok metadata\n") == 0, "%s: '%s'", hint, out);
  CHECK (hc_volume_range_hint (x.v, end1 - 1).cls == HC_CLASS_METADATA, "the last extent too");
  /* Several files as operands (a shell glob), with --file once. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s %s journal", sock,
                 tmpdir, f1, f2);
  CHECK (rc == 0 && strstr (out, "file1: ") && strstr (out, "file2: "), "two files: '%s'", out);
  CHECK (hc_volume_range_hint (x.v, phys1).cls == HC_CLASS_JOURNAL
         && hc_volume_range_hint (x.v, phys2).cls == HC_CLASS_JOURNAL, "both journal");
  /* --withdraw clears them. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s --file %s --withdraw",
                 sock, tmpdir, f1, f2);
  CHECK (rc == 0 && strstr (out, "-> withdrawn"), "withdraw files: %d '%s'", rc, out);
  snprintf (hint, sizeof hint, "hint %" PRIu64, phys1);
  rc = run_tool (out, sizeof out, "control --socket %s '%s'", sock, hint);
  CHECK (rc == 0 && strcmp (out, "ok unclassified\n") == 0, "withdrawn: '%s'", out);
  CHECK (hc_volume_range_hint (x.v, phys2).cls == 0, "file2 withdrawn");
  /* A device offset shifts the ranges. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s --device-offset 1M data",
                 sock, tmpdir, f2);
  CHECK (rc == 0 && hc_volume_range_hint (x.v, phys2 + (1 << 20)).cls == HC_CLASS_DATA,
         "device offset: %d '%s'", rc, out);
  /* Files that are not there, or not regular. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s/none journal", sock,
                 tmpdir, tmpdir);
  CHECK (rc == 1 && strstr (out, "No such file"), "missing file: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "advise --socket %s --mount %s --file %s journal", sock, tmpdir,
                 tmpdir);
  CHECK (rc == 1 && strstr (out, "not a regular file"), "directory: %d '%s'", rc, out);
  /* A file on another file system than the volume's is refused, and
   * nothing is hinted. */
  rc = run_tool (out, sizeof out, "advise --socket %s --mount /proc --file %s background", sock,
                 f1);
  CHECK (rc == 1 && strstr (out, "is not on the file system mounted at /proc"),
         "another file system: %d '%s'", rc, out);
  CHECK (hc_volume_range_hint (x.v, phys1).cls != HC_CLASS_BACKGROUND, "nothing hinted");
  rc = run_tool (out, sizeof out, "advise --socket %s --file %s journal", sock, f1);
  CHECK (rc == 2 && strstr (out, "--file needs --mount"), "--mount required: %d '%s'", rc, out);

  hc_control_stop (srv);
  vol_free (&x);
  unlink (slowpath);
  unlink (f1);
  unlink (f2);
  return 0;
}

/* Mutants of well-formed requests: every one gets one reply line, "ok…"
 * or "error ENAME …", and exec returns 0 (1 only for a quit). */
static void
test_exec_mutants (void)
{
  static const char *const seeds[] = { "advise 0 4096 journal", "unadvise 0 1M", "hint 8192",
                                       "stats", "info", "version", "advise 1K 4K metadata+willneed",
                                       "clean", "mode writethrough", "mode writeback" };
  static char reply[HC_CONTROL_LINE];
  struct vol x;

  if (vol_make (&x, NULL) < 0)
    return;
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    for (unsigned m = 0; m < 500; m++) {
      unsigned char buf[256];
      size_t len = strlen (seeds[i]), n;
      memcpy (buf, seeds[i], len);
      n = test_mutate (buf, len, sizeof buf - 1);
      buf[n] = '\0';
      int rc = hc_control_exec (x.v, (const char *) buf, reply, sizeof reply);
      CHECK ((rc == 0 || rc == 1) && !strchr (reply, '\n')
                 && (starts (reply, "ok") || starts (reply, "error E")),
             "'%s': rc %d, reply '%.80s'", buf, rc, reply);
    }
  vol_free (&x);
}

int
main (int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*run) (void);
  } parts[] = { { "other-user", test_other_user }, { "tool", test_tool }, { "files", test_files } };
  const char *part = argc > 1 ? argv[1] : NULL;
  char name[64];
  int rc = 0;
  size_t i;

  for (i = 0; part && i < sizeof parts / sizeof parts[0]; i++)
    if (strcmp (part, parts[i].name) == 0)
      break;
  if (argc > 3 || (part && i == sizeof parts / sizeof parts[0])) {
    fprintf (stderr, "usage: test_control [other-user | tool PATH-TO-hintcache | files "
             "PATH-TO-hintcache]\n");
    return 2;
  }
  if (argc > 2)
    tool = argv[2];
  if (tool && access (tool, X_OK) != 0) {
    fprintf (stderr, "test_control: %s is not executable\n", tool);
    return 1;
  }
  if (snprintf (tmpdir, sizeof tmpdir, "%s/test_control.XXXXXX", test_tmp ()) >= (int) sizeof tmpdir
      || !mkdtemp (tmpdir)) {
    fprintf (stderr, "test_control: cannot make a directory in %s: %s\n", test_tmp (),
             strlen (test_tmp ()) > 60 ? "its path is too long" : strerror (errno));
    return 1;
  }
  if (part) {
    snprintf (name, sizeof name, "test_control %s", part);
    rc = parts[i].run ();
  } else {
    snprintf (name, sizeof name, "test_control");
    test_exec ();
    test_sources ();
    test_exec_mutants ();
    test_stats_text ();
    test_server ();
    test_deadlines ();
    test_idle_slots ();
  }
  rmdir (tmpdir);
  return rc ? rc : test_exit (name);
}
