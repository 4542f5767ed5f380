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
#include <stdio.h>

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

/* Help texts and messages name the values of the library's registries
 * through placeholders, never typed out, so that a new class, codec,
 * policy, mode or strategy appears in every text that lists them:
 *
 *   @CLASSES@          hint classes (hc_class_name)
 *   @ADVICE@           advice (hc_advice_name)
 *   @SOURCES@          who stores a range hint (hc_source_name); default
 *                      HC_SOURCE_ADMIN, an "advise" without from=
 *   @CODECS@           transport codecs (hc_codec_get, hc_codec_name)
 *   @PROFILE_KEYS@     device profile keys (hc_profile_key_name)
 *   @PATTERNS@         access patterns (hc_pattern_name)
 *   @MODES@            cache modes (hc_mode_name); default what a zeroed
 *                      hc_format_opts formats, write-through
 *   @POLICIES@         the engine's replacement policies (hc_policy_name);
 *                      default the first
 *   @REPLAY_POLICIES@  what a replay takes: those, then HC_REPLAY_BELADY
 *   @STRATEGIES@       replay strategies (hc_strategy_name)
 *   @FORMATS@          trace formats (hc_trace_format_name), auto first
 *
 * each expanding to the names separated by ", ".  A modifier after a colon
 * picks another form:
 *
 *   @KEY:default@      the default's name alone
 *   @KEY:marked@       every name, the default's followed by " (default)"
 *   @KEY:given@        every name but the one that means none given
 *                      (unclassified, advice none, format auto)
 *   @KEY:bars@         every name, separated by "|"
 *
 * Anything else, a '@' of an address or an unknown key or modifier, is
 * copied as it is. */

/* Where a help text's lists wrap. */
#define CLI_WIDTH 88

/* Writes a help text to f with its placeholders expanded.  A list that
 * would run past column CLI_WIDTH goes on on the next line after a comma,
 * indented to the line's description (the column after its last run of two
 * or more blanks) when the line starts with a blank, else as the line. */
void cli_help (FILE *f, const char *text);

/* Expands text's placeholders into buf[len] (cut short if it does not
 * fit), never wrapping; returns buf.  For messages, e.g.
 * cli_usage (cmd, "'%s' is not a mode (%s)", s, cli_expand ("@MODES@", buf, sizeof buf)). */
const char *cli_expand (const char *text, char *buf, size_t len);

#endif /* HC_TOOLS_CLI_H */
