/* `hintcache run`: a command with a per-process default hint.
 *
 * It sets up the preload library (libhintcache-preload.so, see
 * preload/) for one command and executes it: the hint becomes the
 * process's default (HINTCACHE_CLASS, HINTCACHE_ADVICE), the library sends
 * it as range hints for the data the command writes on the volume's file
 * systems (HINTCACHE_MOUNTS) over the control socket (HINTCACHE_SOCKET),
 * and children inherit it with the environment.  Nothing else changes: the
 * command's arguments, exit status and output are its own, and when the
 * volume is unreachable it runs as without hints.
 *
 * The library is looked for in $HINTCACHE_PRELOAD, then next to this
 * executable (a build tree), then in the library directory it was
 * installed to.  It is put first in LD_PRELOAD, keeping what was there.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "cli.h"
#include "commands.h"
#include "util.h"

#ifndef HC_INSTALL_LIBDIR
#define HC_INSTALL_LIBDIR "/usr/local/lib"
#endif

#define PRELOAD_NAME "libhintcache-preload.so"

static const char *const cmd = "run";

static const char usage[] =
  "Usage: hintcache run [--class CLASS] [--advice ADVICE] [--socket SOCKET]\n"
  "                     [--mount DIR[@OFFSET] …] [--quiet] [--stats FILE] -- COMMAND [ARG …]\n"
  "\n"
  "Runs COMMAND with a per-process default hint: the data it (and its children) write to\n"
  "files on the volume's file systems is hinted CLASS/ADVICE, as range hints sent over the\n"
  "volume's control socket, so the hint stays with the data when the kernel writes it back\n"
  "later.  It works through the preload library, which also honours the RFC's advice in the\n"
  "I/O priority (ionice -c2 -n4096: dontneed), posix_fadvise and fcntl(F_SET_RW_HINT).\n"
  "\n"
  "  --class CLASS     the default class (@CLASSES:given@)\n"
  "  --advice ADVICE   the default advice (@ADVICE:given@); advice in\n"
  "                    the I/O priority wins, and is enough without --class/--advice\n"
  "  --socket SOCKET   the volume's control socket (default: $HINTCACHE_SOCKET)\n"
  "  --mount DIR       a directory on a file system that lives on the volume; @OFFSET\n"
  "                    (K/M/G/T suffixes) is where its device starts on the volume.\n"
  "                    Repeatable (default: $HINTCACHE_MOUNTS).  Only files there get hints\n"
  "  --quiet           the library prints no warning when the socket cannot be used\n"
  "  --stats FILE      each process appends a line of hint counters to FILE at exit\n"
  "\n"
  "COMMAND runs as without hintcache when the socket is missing, slow or refuses: hints\n"
  "are dropped and counted, with one warning at most.  The exit status is COMMAND's\n"
  "(127 if it cannot be found, 126 if it cannot be executed).\n"
  "\n"
  "Example: hintcache run --class background --advice dontneed --socket /run/hc.sock \\\n"
  "           --mount /mnt/hc -- cp dump.tar /mnt/hc/\n";

/* The advice the RFC's bits of this process's I/O priority carry (as the
 * preload library reads them), or HC_ADVICE_NONE. */
static unsigned
ioprio_advice (void)
{
  long v = syscall (SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
  struct hc_wire w = { .n = 1, .v = { v > 0 ? (uint64_t) v : 0 } };
  struct hc_hint h = { 0 };

  if (v <= 0 || hc_codec_decode (hc_codec_get (HC_CODEC_RFC2014), NULL, &w, HC_DIR_WRITE, &h,
                                 NULL, 0) < 0)
    return HC_ADVICE_NONE;
  return h.advice;
}

/* Finds the preload library; returns 0 with its path in out, or -ENOENT. */
static int
find_preload (char *out, size_t len)
{
  const char *env = getenv ("HINTCACHE_PRELOAD");
  char self[PATH_MAX];
  ssize_t n;

  if (env && *env) {
    snprintf (out, len, "%s", env);
    return access (out, R_OK) == 0 ? 0 : -ENOENT;
  }
  n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr (self, '/');
    if (slash) {
      *slash = '\0';
      if ((size_t) snprintf (out, len, "%s/%s", self, PRELOAD_NAME) < len && access (out, R_OK) == 0)
        return 0;
    }
  }
  if ((size_t) snprintf (out, len, "%s/%s", HC_INSTALL_LIBDIR, PRELOAD_NAME) < len
      && access (out, R_OK) == 0)
    return 0;
  return -ENOENT;
}

/* Appends ":item" (or "item" if *buf is empty) to buf; -ENAMETOOLONG if it
 * does not fit. */
static int
append (char *buf, size_t len, const char *item)
{
  size_t used = strlen (buf);
  int n = snprintf (buf + used, len - used, "%s%s", used ? ":" : "", item);
  return n < 0 || (size_t) n >= len - used ? -ENAMETOOLONG : 0;
}

/* Long options only, but -h. */
enum { OPT_CLASS = 256, OPT_ADVICE, OPT_SOCKET, OPT_MOUNT, OPT_QUIET, OPT_STATS };

static const struct option run_opts[] = {
  { "help", no_argument, NULL, 'h' },
  { "class", required_argument, NULL, OPT_CLASS },
  { "advice", required_argument, NULL, OPT_ADVICE },
  { "socket", required_argument, NULL, OPT_SOCKET },
  { "mount", required_argument, NULL, OPT_MOUNT },
  { "quiet", no_argument, NULL, OPT_QUIET },
  { "stats", required_argument, NULL, OPT_STATS },
  { NULL, 0, NULL, 0 },
};

int
cmd_run (int argc, char **argv)
{
  const char *cls = NULL, *adv = NULL, *sock = NULL, *stats = NULL;
  static char mounts[8192], preload[PATH_MAX + 8192], lib[PATH_MAX];
  bool quiet = false;
  int ch;

  mounts[0] = '\0';
  /* '+': stop at the first operand, so COMMAND's own options stay its own. */
  while ((ch = getopt_long (argc, argv, "+h", run_opts, NULL)) != -1) {
    switch (ch) {
    case 'h': cli_help (stdout, usage); return 0;
    case OPT_CLASS: {
      enum hc_class c;
      if (hc_class_parse (optarg, &c) < 0)
        return cli_usage (cmd, "--class: '%s' is not a class (see 'hintcache hint classes')",
                          optarg);
      cls = optarg;
      break;
    }
    case OPT_ADVICE: {
      enum hc_advice a;
      char names[128];
      if (hc_advice_parse (optarg, &a) < 0)
        return cli_usage (cmd, "--advice: '%s' is not an advice (%s)", optarg,
                          cli_expand ("@ADVICE:given@", names, sizeof names));
      adv = optarg;
      break;
    }
    case OPT_SOCKET: sock = optarg; break;
    case OPT_MOUNT: {
      char dir[PATH_MAX];
      struct stat st;
      snprintf (dir, sizeof dir, "%s", optarg);
      char *at = strrchr (dir, '@');
      uint64_t off;
      if (at) {
        if (hc_parse_size (at + 1, &off, NULL) < 0)
          return cli_usage (cmd, "--mount %s: '%s' is not an offset", optarg, at + 1);
        *at = '\0';
      }
      if (strchr (dir, ':'))
        return cli_usage (cmd, "--mount %s: a directory with ':' in its name cannot be passed on",
                          optarg);
      if (stat (dir, &st) < 0)
        return cli_usage (cmd, "--mount %s: %s", dir, strerror (errno));
      if (!S_ISDIR (st.st_mode))
        return cli_usage (cmd, "--mount %s: not a directory", dir);
      if (append (mounts, sizeof mounts, optarg) < 0)
        return cli_usage (cmd, "--mount: too many directories");
      break;
    }
    case OPT_QUIET: quiet = true; break;
    case OPT_STATS: stats = optarg; break;
    default: return cli_usage (cmd, "bad option; see 'hintcache %s --help'", cmd);
    }
  }
  if (optind >= argc)
    return cli_usage (cmd, "no COMMAND to run (hintcache run [OPTIONS] -- COMMAND …)");
  if (!cls && !adv && ioprio_advice () == HC_ADVICE_NONE)
    return cli_usage (cmd, "say what hint: --class CLASS and/or --advice ADVICE, or run under "
                      "an I/O priority that carries advice (ionice -c2 -n4096: dontneed)");
  if (!sock)
    sock = getenv ("HINTCACHE_SOCKET");
  if (!sock || !*sock)
    return cli_usage (cmd, "--socket SOCKET is required (or HINTCACHE_SOCKET)");
  if (!mounts[0]) {
    const char *env = getenv ("HINTCACHE_MOUNTS");
    if (!env || !*env)
      return cli_usage (cmd, "--mount DIR is required (or HINTCACHE_MOUNTS): which file "
                        "systems live on the volume");
    snprintf (mounts, sizeof mounts, "%s", env);
  }
  if (find_preload (lib, sizeof lib) < 0)
    return cli_fail (cmd, "%s not found (looked in $HINTCACHE_PRELOAD, next to this program "
                     "and in %s)", PRELOAD_NAME, HC_INSTALL_LIBDIR);

  /* The library first, then whatever was preloaded already. */
  const char *old = getenv ("LD_PRELOAD");
  snprintf (preload, sizeof preload, "%s", lib);
  if (old && *old && append (preload, sizeof preload, old) < 0)
    return cli_fail (cmd, "LD_PRELOAD is too long");

  if (setenv ("LD_PRELOAD", preload, 1) < 0 || setenv ("HINTCACHE_SOCKET", sock, 1) < 0
      || setenv ("HINTCACHE_MOUNTS", mounts, 1) < 0
      || (cls ? setenv ("HINTCACHE_CLASS", cls, 1) : unsetenv ("HINTCACHE_CLASS")) < 0
      || (adv ? setenv ("HINTCACHE_ADVICE", adv, 1) : unsetenv ("HINTCACHE_ADVICE")) < 0
      || (quiet && setenv ("HINTCACHE_QUIET", "1", 1) < 0)
      || (stats && setenv ("HINTCACHE_STATS", stats, 1) < 0))
    return cli_fail (cmd, "cannot set the environment: %s", strerror (errno));

  execvp (argv[optind], argv + optind);
  int err = errno;
  cli_fail (cmd, "%s: %s", argv[optind], strerror (err));
  return err == ENOENT ? 127 : 126;
}
