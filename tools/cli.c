/* Shared plumbing of the command-line tool: see cli.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hintcache/hintcache.h"
#include "hintcache/replay.h"
#include "hintcache/trace.h"
#include "cli.h"
#include "codec.h" /* hc_profile_key_name */
#include "util.h"

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

/* ---------------------------------------------------------------------------
 * Placeholders: the registries' lists
 */
static const char *
codec_name (unsigned i)
{
  const hc_codec *c = i < HC_CODEC_COUNT ? hc_codec_get (i) : NULL;
  return c ? hc_codec_name (c) : NULL;
}

static const char *
replay_policy_name (unsigned i)
{
  unsigned n = 0;

  while (hc_policy_name (n))
    n++;
  return i < n ? hc_policy_name (i) : i == n ? HC_REPLAY_BELADY : NULL;
}

/* A list: its key, the registry that names its values by index, and which
 * of them means none given and which is the default (-1: none). */
static const struct cli_list {
  const char *key;
  const char *(*name) (unsigned);
  int none, dflt;
} lists[] = {
  { "CLASSES", hc_class_name, HC_CLASS_UNCLASSIFIED, -1 },
  { "ADVICE", hc_advice_name, HC_ADVICE_NONE, -1 },
  { "SOURCES", hc_source_name, -1, HC_SOURCE_ADMIN },
  { "CODECS", codec_name, -1, -1 },
  { "PROFILE_KEYS", hc_profile_key_name, -1, -1 },
  { "PATTERNS", hc_pattern_name, -1, -1 },
  { "MODES", hc_mode_name, -1, HC_MODE_WRITETHROUGH },
  { "POLICIES", hc_policy_name, -1, 0 },
  { "REPLAY_POLICIES", replay_policy_name, -1, 0 },
  { "STRATEGIES", hc_strategy_name, -1, -1 },
  { "FORMATS", hc_trace_format_name, HC_TRACE_AUTO, -1 },
};
_Static_assert (HC_MODE_WRITETHROUGH == 0, "a zeroed hc_format_opts formats write-through");

enum form { ALL, DEFAULT, MARKED, GIVEN, BARS };

/* Where expanded text goes, and where its line is: the display column
 * (UTF-8 continuation bytes take none), the line's indentation, and the
 * column after its last run of two or more blanks (0: none yet). */
struct sink {
  FILE *f;          /* or */
  struct hc_sb *sb;
  unsigned width;   /* 0: never wrap */
  unsigned col, lead, desc, blanks;
  bool blank_line;  /* nothing but blanks so far */
};

static void
put (struct sink *o, const char *s, size_t n)
{
  if (o->f)
    fwrite (s, 1, n, o->f);
  else
    hc_sb_printf (o->sb, "%.*s", (int) n, s);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char) s[i];
    if (c == '\n') {
      o->col = o->lead = o->desc = o->blanks = 0;
      o->blank_line = true;
      continue;
    }
    if (c == ' ') {
      o->blanks++;
      o->lead += o->blank_line;
      o->col++;
      continue;
    }
    if (o->blanks >= 2 && o->lead)
      o->desc = o->col;
    o->blanks = 0;
    o->blank_line = false;
    o->col += (c & 0xc0) != 0x80;
  }
}

static void
put_s (struct sink *o, const char *s)
{
  put (o, s, strlen (s));
}

/* Display columns of s[n]. */
static unsigned
width_of (const char *s, size_t n)
{
  unsigned w = 0;

  for (size_t i = 0; i < n; i++)
    w += ((unsigned char) s[i] & 0xc0) != 0x80;
  return w;
}

/* Writes list l in form `form`; `after` is the text that follows it, whose
 * first word stays on the last name's line.  Returns false if the list has
 * no default for the form to name. */
static bool
put_list (struct sink *o, const struct cli_list *l, enum form form, const char *after)
{
  const char *names[256];
  int index[256];
  unsigned n = 0;

  if ((form == DEFAULT || form == MARKED) && l->dflt < 0)
    return false;
  if (form == GIVEN && l->none < 0)
    return false;
  for (unsigned i = 0; i < 256; i++) {
    const char *s = l->name (i);
    if (s && !(form == GIVEN && (int) i == l->none)) {
      index[n] = (int) i;
      names[n++] = s;
    }
  }
  if (form == DEFAULT) {
    put_s (o, l->name ((unsigned) l->dflt));
    return true;
  }
  unsigned tail = width_of (after, strcspn (after, " \n@"));
  for (unsigned k = 0; k < n; k++) {
    bool marked = form == MARKED && index[k] == l->dflt;
    unsigned w = width_of (names[k], strlen (names[k])) + (marked ? 10 : 0)
                 + (k + 1 < n ? 1 : tail);
    if (k && form == BARS)
      put_s (o, "|");
    else if (k && o->width && o->col + 2 + w > o->width) {
      unsigned indent = o->lead && o->desc ? o->desc : o->lead;
      put_s (o, ",\n");
      for (unsigned i = 0; i < indent; i++)
        put_s (o, " ");
    } else if (k)
      put_s (o, ", ");
    put_s (o, names[k]);
    if (marked)
      put_s (o, " (default)");
  }
  return true;
}

/* Expands the placeholder at *p (a '@') if it is one, moving *p past it;
 * returns false, *p unmoved, if it is not. */
static bool
expand_one (struct sink *o, const char **p)
{
  static const char *const forms[] = { [ALL] = "", [DEFAULT] = ":default",
                                       [MARKED] = ":marked", [GIVEN] = ":given",
                                       [BARS] = ":bars" };
  const char *s = *p + 1;
  size_t k = strspn (s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
  size_t m = s[k] == ':' ? 1 + strspn (s + k + 1, "abcdefghijklmnopqrstuvwxyz") : 0;

  if (!k || s[k + m] != '@')
    return false;
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    if (strlen (lists[i].key) != k || strncmp (lists[i].key, s, k) != 0)
      continue;
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++)
      if (strlen (forms[f]) == m && strncmp (forms[f], s + k, m) == 0
          && put_list (o, &lists[i], (enum form) f, s + k + m + 1)) {
        *p = s + k + m + 1;
        return true;
      }
  }
  return false;
}

static void
expand (struct sink *o, const char *text)
{
  const char *p = text;

  o->blank_line = true;
  while (*p) {
    size_t n = strcspn (p, "@");
    put (o, p, n);
    p += n;
    if (*p && !expand_one (o, &p)) {
      put (o, p, 1);
      p++;
    }
  }
}

void
cli_help (FILE *f, const char *text)
{
  struct sink o = { .f = f, .width = CLI_WIDTH };

  expand (&o, text);
}

const char *
cli_expand (const char *text, char *buf, size_t len)
{
  struct hc_sb sb;
  struct sink o = { .sb = &sb };

  hc_sb_init (&sb, buf, len);
  expand (&o, text);
  return buf;
}
