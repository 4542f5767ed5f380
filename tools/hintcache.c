/* hintcache: the command-line tool.
 *
 * Git-style: `hintcache COMMAND [SUBCOMMAND] [ARGS]`, each with --help.  This
 * file only dispatches; each command lives in tools/cmd_<name>.c.  Only the
 * tool prints and exits — the library never does.
 */
#include <stdio.h>
#include <string.h>

#include "hintcache/hintcache.h"
#include "cli.h"
#include "commands.h"

static const struct cli_command commands[] = {
  { "demo", cmd_demo, "replay a built-in database-server workload with every hint strategy" },
  { "replay", cmd_replay, "what each hint granularity buys on a block trace" },
  { "trace", cmd_trace, "a trace's statistics, or convert it to the fast binary form" },
  { "hint", cmd_hint, "hint model and transport codecs: decode, encode, map, classes" },
  { "format", cmd_format, "make a volume of a fast and a slow tier" },
  { "info", cmd_info, "a volume's geometry, mode, occupancy and dirty blocks by class" },
  { "check", cmd_check, "verify a volume's checksums and invariants" },
  { "clean", cmd_clean, "write back all dirty data (of a running volume with --socket)" },
  { "stats", cmd_stats, "a volume's lifetime statistics by class (live with --socket)" },
  { "io", cmd_io, "read, write, flush, discard, zero, advise or set the mode" },
  { "advise", cmd_advise, "hint byte ranges or files' extents to a running volume" },
  { "control", cmd_control, "send raw requests to a running volume's control socket" },
  { "hintd", cmd_hintd, "hint a file system's metadata, journal and files to a running volume" },
  { "run", cmd_run, "run a command whose writes carry a per-process hint (preload library)" },
};

int
main (int argc, char **argv)
{
  if (argc >= 2 && strcmp (argv[1], "--version") == 0) {
    printf ("hintcache %s\n", hc_version ());
    return 0;
  }
  if (argc >= 2 && (strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "--help") == 0)) {
    printf ("hintcache %s: a hint-aware hybrid drive in user space.\n\n", hc_version ());
  }
  return cli_dispatch (NULL, commands, sizeof commands / sizeof commands[0], argc, argv);
}
