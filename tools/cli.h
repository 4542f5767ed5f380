/* Shared plumbing of the hintcache command-line tool: subcommand dispatch,
 * error reporting with the project's exit codes, and the option helpers every
 * subcommand uses.
 *
 * Exit codes: 0 success, 1 the operation failed, 2 bad usage (unknown
 * command, codec, class or value; a malformed option).
 */
#ifndef HC_TOOLS_CLI_H
#define HC_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>

#define EXIT_USAGE 2

/* A subcommand: its name, its entry point and a one-line summary. */
struct cli_command {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
};

/* Runs the subcommand argv[1] of `cmds` (argv[0] is the parent command's
 * name, e.g. "hint").  Prints the list of subcommands for --help, and a usage
 * error naming the valid ones for an unknown or missing subcommand. */
int cli_dispatch (const char *parent, const struct cli_command *cmds, size_t n, int argc,
                  char **argv);

/* Prints "hintcache CMD: MESSAGE" and a hint to use --help; returns 2. */
int cli_usage (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Prints "hintcache CMD: MESSAGE"; returns 1. */
int cli_fail (const char *cmd, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#endif /* HC_TOOLS_CLI_H */
