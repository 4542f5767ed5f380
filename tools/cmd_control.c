/* The commands of the hintcache tool that talk to a running volume through
 * its control socket:
 *
 *   advise --socket S --range OFF:LEN … HINT      hint byte ranges of the volume
 *   advise --socket S --file PATH … HINT          hint where files lie on it
 *   advise … --withdraw                           withdraw those hints instead
 *   control --socket S LINE …                     raw requests, for scripts
 *
 * (stats and clean take --socket too; they live in cmd_volume.c and use the
 * helpers here.)
 *
 * A file's place on the device comes from the FIEMAP ioctl: its physical
 * extents, flushed first (FIEMAP_FLAG_SYNC) so delayed allocation has
 * happened, merged where they touch, and shifted by --device-offset when
 * the file system does not start at the volume's byte 0 (a partition).
 * Extents that have no fixed, aligned place — unknown, delayed, encoded,
 * inline or unaligned — are skipped and counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hintcache/control.h"
#include "hintcache/extents.h"
#include "hintcache/hintcache.h"
#include "cli.h"
#include "commands.h"
#include "control/control_priv.h"
#include "util.h"

/* ---------------------------------------------------------------------------
 * Helpers shared with cmd_volume.c
 */
int
control_open (const char *cmd, const char *path, hc_control_client **out)
{
  char why[512];
  int rc = hc_control_connect (path, out, why, sizeof why);

  if (rc < 0)
    return cli_fail (cmd, "%s", why);
  return 0;
}

int
control_ask (const char *cmd, hc_control_client *c, const char *request, char *reply, size_t len)
{
  int rc = hc_control_request (c, request, reply, len);

  if (rc < 0)
    return cli_fail (cmd, "%s: %s", request, len ? reply : strerror (-rc));
  return 0;
}

/* ---------------------------------------------------------------------------
 * advise
 */
static const char advise_usage[] =
  "Usage: hintcache advise --socket SOCKET --range OFF:LEN [--range OFF:LEN …] HINT\n"
  "       hintcache advise --socket SOCKET --mount DIR --file PATH [PATH …] [--device-offset N] HINT\n"
  "       hintcache advise --socket SOCKET (--range OFF:LEN | --file PATH) … --withdraw\n"
  "\n"
  "Stores a range hint on a running volume for byte ranges of it, or for the blocks that\n"
  "files occupy on it (found with the FIEMAP ioctl, after flushing the files' delayed\n"
  "allocation).  Later I/O there without a hint of its own takes the range's class.\n"
  "  --socket SOCKET      the volume's control socket\n"
  "  --range OFF:LEN      a byte range of the volume (k, M, G, T suffixes); repeatable\n"
  "  --file PATH          a file on a file system on the volume; repeatable, and with\n"
  "                       --file every operand before HINT is a file too, so that\n"
  "                       'advise --socket S --file /mnt/db/pg_wal/* journal' works\n"
  "  --device-offset N    where the file system starts on the volume (default 0)\n"
  "  --mount DIR          where the file system on the volume is mounted (required with\n"
  "                       --file): a file on any other file system is refused, as its\n"
  "                       extents are offsets on another device\n"
  "  --withdraw           withdraw the hints that 'hintcache advise' stored for those\n"
  "                       ranges or files instead (no HINT); hints from hintd, the preload\n"
  "                       library or an administrator stay ('hintcache control' with\n"
  "                       'unadvise OFF LEN' withdraws everyone's)\n"
  "HINT: a class and/or an advice (metadata, journal, willneed, background+dontneed …).\n"
  "Prints one line per file: 'PATH: N extents, BYTES bytes -> HINT'.\n";

enum { OPT_SOCKET = 400, OPT_RANGE, OPT_FILE, OPT_DEVOFF, OPT_WITHDRAW, OPT_MOUNT };

static const struct option advise_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "socket", required_argument, NULL, OPT_SOCKET },
  { "range", required_argument, NULL, OPT_RANGE },
  { "file", required_argument, NULL, OPT_FILE },
  { "device-offset", required_argument, NULL, OPT_DEVOFF },
  { "mount", required_argument, NULL, OPT_MOUNT },
  { "withdraw", no_argument, NULL, OPT_WITHDRAW },
  { NULL, 0, NULL, 0 },
};

/* A byte range of the volume. */
struct range {
  uint64_t off, len;
};

/* Sends advise (hint non-NULL) or unadvise for one range.  Returns 0, or
 * prints why (prefixed with `what`) and returns -1. */
static int
send_range (const char *cmd, hc_control_client *c, const char *what, uint64_t off, uint64_t len,
            const char *hint)
{
  char line[256], reply[HC_CONTROL_LINE];
  int rc;

  if (hint)
    snprintf (line, sizeof line, "advise %" PRIu64 " %" PRIu64 " %s from=advise", off, len, hint);
  else
    snprintf (line, sizeof line, "unadvise %" PRIu64 " %" PRIu64 " from=advise", off, len);
  if ((rc = hc_control_request (c, line, reply, sizeof reply)) < 0) {
    cli_fail (cmd, "%s: %" PRIu64 "+%" PRIu64 ": %s", what, off, len, reply);
    return -1;
  }
  return 0;
}

/* Hints (or withdraws) one file's extents.  Returns 0 or -1 after printing
 * why. */
static int
advise_file (const char *cmd, hc_control_client *c, const char *path, uint64_t devoff,
             const char *hint)
{
  struct hc_extent_list x;
  struct stat st;
  int fd, rc;

  if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0) {
    cli_fail (cmd, "%s: %s", path, strerror (errno));
    return -1;
  }
  /* Files only: a directory's blocks are the file system's metadata. */
  if (fstat (fd, &st) == 0 && !S_ISREG (st.st_mode))
    rc = -EINVAL;
  else
    rc = hc_file_extents (fd, 0, UINT64_MAX, HC_EXTENTS_SYNC, &x);
  close (fd);
  if (rc < 0) {
    if (rc == -EOPNOTSUPP || rc == -ENOTTY)
      cli_fail (cmd, "%s: the file system does not report extents (FIEMAP: %s)", path,
                strerror (-rc));
    else if (rc == -EINVAL)
      cli_fail (cmd, "%s: not a regular file", path);
    else
      cli_fail (cmd, "%s: %s", path, strerror (-rc));
    return -1;
  }
  for (size_t i = 0; i < x.n && rc == 0; i++) {
    const struct hc_extent *e = &x.e[i];
    if (e->physical > UINT64_MAX - devoff || e->length > UINT64_MAX - devoff - e->physical) {
      cli_fail (cmd, "%s: --device-offset %" PRIu64 " puts an extent past 2^64", path, devoff);
      rc = -1;
    } else {
      rc = send_range (cmd, c, path, devoff + e->physical, e->length, hint);
    }
  }
  if (rc == 0) {
    printf ("%s: %zu extent%s, %" PRIu64 " bytes -> %s", path, x.n, x.n == 1 ? "" : "s", x.bytes,
            hint ? hint : "withdrawn");
    if (x.unplaced)
      printf (" (%" PRIu64 " extent%s skipped: not at a fixed, aligned place)", x.unplaced,
              x.unplaced == 1 ? "" : "s");
    putchar ('\n');
  }
  hc_extent_list_free (&x);
  return rc;
}

int
cmd_advise (int argc, char **argv)
{
  const char *cmd = "advise";
  const char *socket = NULL, *hint_text = NULL;
  struct range *ranges = NULL;
  const char **files = NULL;
  size_t nranges = 0, nfiles = 0;
  uint64_t devoff = 0;
  const char *mount = NULL;
  bool withdraw = false, devoff_given = false;
  int ch, status = EXIT_USAGE;

  /* At most one range or file per argument. */
  if (!(ranges = calloc ((size_t) argc, sizeof *ranges))
      || !(files = calloc ((size_t) argc, sizeof *files))) {
    free (ranges);
    return cli_fail (cmd, "out of memory");
  }
  optind = 1;
  while ((ch = getopt_long (argc, argv, "h", advise_opts, NULL)) != -1) {
    switch (ch) {
    case 'h':
      cli_help (stdout, advise_usage);
      status = 0;
      goto out;
    case OPT_SOCKET: socket = optarg; break;
    case OPT_RANGE: {
      char *colon = strchr (optarg, ':');
      struct range *r = &ranges[nranges];
      if (colon)
        *colon = '\0';
      bool ok = colon && hc_parse_size (optarg, &r->off, NULL) == 0 && hc_parse_size (colon + 1, &r->len, NULL) == 0;
      if (colon)
        *colon = ':';
      if (!ok) {
        cli_usage (cmd, "--range: '%s' is not OFF:LEN (e.g. 1M:64k)", optarg);
        goto out;
      }
      if (r->len == 0 || r->off > UINT64_MAX - r->len) {
        cli_usage (cmd, "--range: '%s' is empty or past 2^64", optarg);
        goto out;
      }
      nranges++;
      break;
    }
    case OPT_FILE: files[nfiles++] = optarg; break;
    case OPT_DEVOFF:
      if (hc_parse_size (optarg, &devoff, NULL) < 0) {
        cli_usage (cmd, "--device-offset: '%s' is not a size", optarg);
        goto out;
      }
      devoff_given = true;
      break;
    case OPT_WITHDRAW: withdraw = true; break;
    case OPT_MOUNT: mount = optarg; break;
    default:
      cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
      goto out;
    }
  }
  if (!socket) {
    cli_usage (cmd, "--socket SOCKET is required (see --help)");
    goto out;
  }
  /* Operands: the HINT last (unless --withdraw); with --file, files before it. */
  int nops = argc - optind, nfile_ops = withdraw ? nops : nops - 1;
  if (!withdraw) {
    if (nops < 1) {
      cli_usage (cmd, "missing HINT (or --withdraw); see --help");
      goto out;
    }
    hint_text = argv[argc - 1];
  }
  if (nfile_ops > 0) {
    if (nfiles == 0) {
      cli_usage (cmd, "unexpected operand '%s' (files need --file; see --help)", argv[optind]);
      goto out;
    }
    for (int i = 0; i < nfile_ops; i++)
      files[nfiles++] = argv[optind + i];
  }
  if (nranges == 0 && nfiles == 0) {
    cli_usage (cmd, "give --range OFF:LEN or --file PATH (see --help)");
    goto out;
  }
  if (devoff_given && nfiles == 0) {
    cli_usage (cmd, "--device-offset applies to --file only");
    goto out;
  }
  /* Files must be on the volume's file system: FIEMAP gives offsets on
   * whatever device holds the file, and hinting those offsets on the
   * volume would re-class blocks of something else entirely. */
  if (nfiles) {
    struct stat ms, fs;
    if (!mount) {
      cli_usage (cmd, "--file needs --mount DIR: the mount point of the file system on the volume");
      goto out;
    }
    if (stat (mount, &ms) < 0) {
      cli_usage (cmd, "--mount %s: %s", mount, strerror (errno));
      goto out;
    }
    if (!S_ISDIR (ms.st_mode)) {
      cli_usage (cmd, "--mount %s: not a directory", mount);
      goto out;
    }
    for (size_t i = 0; i < nfiles; i++)
      if (stat (files[i], &fs) == 0 && fs.st_dev != ms.st_dev) {
        status = cli_fail (cmd, "%s is not on the file system mounted at %s (the volume's); "
                           "nothing was hinted", files[i], mount);
        goto out;
      }
  }

  /* Check the hint here for a clear message, and send it as one word. */
  char hint[128];
  if (hint_text) {
    struct hc_hint h;
    if (hc_hint_parse (hint_text, &h) < 0 || hc_hint_format (h, hint, sizeof hint) < 0
        || (h.cls == HC_CLASS_UNCLASSIFIED && h.advice == HC_ADVICE_NONE)) {
      cli_usage (cmd, "'%s' is not a hint with a class or an advice (e.g. metadata, journal, "
                 "willneed, background+dontneed)", hint_text);
      goto out;
    }
  }

  hc_control_client *c;
  if ((status = control_open (cmd, socket, &c)) != 0)
    goto out;
  for (size_t i = 0; i < nranges; i++) {
    char what[64];
    snprintf (what, sizeof what, "range %" PRIu64 ":%" PRIu64, ranges[i].off, ranges[i].len);
    if (send_range (cmd, c, what, ranges[i].off, ranges[i].len, hint_text ? hint : NULL) < 0)
      status = 1;
    else
      printf ("%s -> %s\n", what, hint_text ? hint : "withdrawn");
  }
  for (size_t i = 0; i < nfiles; i++)
    if (advise_file (cmd, c, files[i], devoff, hint_text ? hint : NULL) < 0)
      status = 1;
  hc_control_close (c);

out:
  free (ranges);
  free (files);
  return status;
}

/* ---------------------------------------------------------------------------
 * control
 */
static const char control_usage[] =
  "Usage: hintcache control --socket SOCKET LINE [LINE …]\n"
  "\n"
  "Sends each LINE as one request to a running volume's control socket and prints each\n"
  "reply as it comes: 'ok [PAYLOAD]' or 'error ENAME MESSAGE'.  Exit 0 if every reply\n"
  "was ok, 1 otherwise.  Requests:\n";

/* The usage, then every request as the protocol's table documents it: its
 * usage in a column of 24 (on a line of its own if longer), what it does
 * (its lists expanded) wrapped at 90 columns. */
static void
control_help (void)
{
  const struct hc_ctl_command_doc *d;

  cli_help (stdout, control_usage);
  for (unsigned i = 0; (d = hc_ctl_command_doc (i)); i++) {
    char help[512];
    int col = printf ("  %s", d->usage);
    const char *p = cli_expand (d->help, help, sizeof help);
    if (col > 25) {
      putchar ('\n');
      col = 0;
    }
    while (*p) {
      size_t n = strlen (p);
      if (n > 64) { /* break at the last blank that fits */
        n = 64;
        while (n && p[n] != ' ')
          n--;
        if (!n)
          n = strcspn (p, " ");
      }
      printf ("%*s%.*s\n", 26 - col, "", (int) n, p);
      col = 0;
      p += n + (p[n] == ' ');
    }
  }
  fputs ("Numbers: decimal or 0x hex, with an optional K, M, G or T unit (KiB, MiB, … also).\n",
         stdout);
}

static const struct option control_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "socket", required_argument, NULL, OPT_SOCKET },
  { NULL, 0, NULL, 0 },
};

int
cmd_control (int argc, char **argv)
{
  const char *cmd = "control", *socket = NULL;
  hc_control_client *c;
  char *reply;
  int ch, status = 0, rc;

  optind = 1;
  /* "+": stop at the first LINE, so that lines are never taken for options. */
  while ((ch = getopt_long (argc, argv, "+h", control_opts, NULL)) != -1) {
    switch (ch) {
    case 'h': control_help (); return 0;
    case OPT_SOCKET: socket = optarg; break;
    default: return cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
    }
  }
  if (!socket)
    return cli_usage (cmd, "--socket SOCKET is required (see --help)");
  if (optind == argc)
    return cli_usage (cmd, "expected at least one request LINE (see --help)");
  if (!(reply = malloc (HC_CONTROL_LINE)))
    return cli_fail (cmd, "out of memory");
  if ((rc = control_open (cmd, socket, &c)) != 0) {
    free (reply);
    return rc;
  }
  for (int i = optind; i < argc; i++) {
    rc = hc_control_request (c, argv[i], reply, HC_CONTROL_LINE);
    if (rc == 0)
      printf ("ok%s%s\n", reply[0] ? " " : "", reply);
    else {
      printf ("error %s %s\n", hc_ctl_errno_name (-rc), reply);
      status = 1;
    }
    fflush (stdout);
  }
  hc_control_close (c);
  free (reply);
  return status;
}
