/* Shared plumbing of the command-line tool: see cli.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void
vreport (const char *cmd, const char *fmt, va_list ap)
{
  fprintf (stderr, "hintcache%s%s: ", cmd ? " " : "", cmd ? cmd : "");
  vfprintf (stderr, fmt, ap);
  fputc ('\n', stderr);
}

int
cli_usage (const char *cmd, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vreport (cmd, fmt, ap);
  va_end (ap);
  return EXIT_USAGE;
}

int
cli_fail (const char *cmd, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vreport (cmd, fmt, ap);
  va_end (ap);
  return 1;
}

static void
list_commands (FILE *f, const char *parent, const struct cli_command *cmds, size_t n)
{
  fprintf (f, "Usage: hintcache %s%sCOMMAND [ARGS] [--help]\n\nCommands:\n", parent ? parent : "",
           parent ? " " : "");
  for (size_t i = 0; i < n; i++)
    fprintf (f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
}

int
cli_dispatch (const char *parent, const struct cli_command *cmds, size_t n, int argc, char **argv)
{
  char names[256] = "";

  if (argc >= 2 && (strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "--help") == 0)) {
    list_commands (stdout, parent, cmds, n);
    return 0;
  }
  if (argc >= 2)
    for (size_t i = 0; i < n; i++)
      if (strcmp (argv[1], cmds[i].name) == 0)
        return cmds[i].run (argc - 1, argv + 1);

  for (size_t i = 0; i < n; i++) {
    strncat (names, i ? ", " : "", sizeof names - strlen (names) - 1);
    strncat (names, cmds[i].name, sizeof names - strlen (names) - 1);
  }
  if (argc < 2)
    return cli_usage (parent, "missing command (one of: %s)", names);
  return cli_usage (parent, "unknown command '%s' (one of: %s)", argv[1], names);
}
