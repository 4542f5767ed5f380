/* The tool's help texts and usage errors list every name of the registries
 * they name: classes, advice, sources, codecs, profile keys, patterns,
 * modes, policies, strategies and trace formats.  Each list is taken from
 * the library's registry here and looked for in what the tool prints, in
 * the part of the text that lists it; a default the text marks must be the
 * registry's.  No text may keep an unexpanded placeholder.
 *
 * Usage: test_help TOOL (the hintcache binary).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hintcache/hintcache.h"
#include "hintcache/replay.h"
#include "hintcache/trace.h"
#include "codec.h" /* hc_profile_key_name */
#include "test.h"

static const char *tool;

/* ---------------------------------------------------------------------------
 * The lists, from the registries
 */
struct list {
  const char *what;
  const char *names[64];
  unsigned n;
};

static void
add (struct list *l, const char *name)
{
  if (name && l->n < 64)
    l->names[l->n++] = name;
}

/* Every name registry name(i) gives, but index `skip` (-1: none). */
static void
from_registry (struct list *l, const char *what, const char *(*name) (unsigned), int skip)
{
  l->what = what;
  l->n = 0;
  for (unsigned i = 0; i < 256; i++)
    if ((int) i != skip)
      add (l, name (i));
}

static const char *
codec_name (unsigned i)
{
  return i < HC_CODEC_COUNT ? hc_codec_name (hc_codec_get (i)) : NULL;
}

static struct list classes, classes_given, advice, advice_given, sources, codecs, profile_keys,
  patterns, modes, policies, replay_policies, strategies, rule_strategies, formats, formats_given;

static void
make_lists (void)
{
  from_registry (&classes, "classes", hc_class_name, -1);
  from_registry (&classes_given, "classes but unclassified", hc_class_name,
                 HC_CLASS_UNCLASSIFIED);
  from_registry (&advice, "advice", hc_advice_name, -1);
  from_registry (&advice_given, "advice but none", hc_advice_name, HC_ADVICE_NONE);
  from_registry (&sources, "sources", hc_source_name, -1);
  from_registry (&codecs, "codecs", codec_name, -1);
  from_registry (&profile_keys, "profile keys", hc_profile_key_name, -1);
  from_registry (&patterns, "patterns", hc_pattern_name, -1);
  from_registry (&modes, "modes", hc_mode_name, -1);
  from_registry (&policies, "policies", hc_policy_name, -1);
  from_registry (&replay_policies, "replay policies", hc_policy_name, -1);
  add (&replay_policies, HC_REPLAY_BELADY);
  from_registry (&strategies, "strategies", hc_strategy_name, -1);
  rule_strategies.what = "strategies that take rules";
  for (unsigned s = 0; s < HC_STRATEGY_COUNT; s++)
    if (s != HC_STRATEGY_NONE && s != HC_STRATEGY_ORACLE)
      add (&rule_strategies, hc_strategy_name (s));
  from_registry (&formats, "trace formats", hc_trace_format_name, -1);
  from_registry (&formats_given, "trace formats but auto", hc_trace_format_name, HC_TRACE_AUTO);
  CHECK (classes.n > 1 && advice.n > 1 && sources.n > 1 && codecs.n > 1 && profile_keys.n > 1
         && patterns.n > 1 && modes.n > 1 && policies.n > 1 && strategies.n > 1
         && rule_strategies.n > 1 && formats_given.n > 1, "a registry is empty");
}

/* ---------------------------------------------------------------------------
 * Running the tool
 */
static char out[1 << 16];

/* Runs the tool with args (NULL-terminated) and keeps its stdout and
 * stderr, together, in out.  Returns its exit status, or -1. */
static int
run (const char *const *args)
{
  const char *argv[16] = { tool };
  int fd[2], status;
  size_t len = 0;
  ssize_t r;
  pid_t pid;

  for (unsigned i = 0; args[i] && i < 14; i++)
    argv[i + 1] = args[i];
  if (pipe (fd) < 0 || (pid = fork ()) < 0)
    return -1;
  if (pid == 0) {
    dup2 (fd[1], 1);
    dup2 (fd[1], 2);
    close (fd[0]);
    close (fd[1]);
    execv (tool, (char *const *) argv);
    _exit (127);
  }
  close (fd[1]);
  while ((r = read (fd[0], out + len, sizeof out - 1 - len)) > 0 || (r < 0 && errno == EINTR))
    len += r > 0 ? (size_t) r : 0;
  close (fd[0]);
  out[len] = '\0';
  if (waitpid (pid, &status, 0) < 0)
    return -1;
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

static void
joined (const char *const *args, char *buf, size_t len)
{
  buf[0] = '\0';
  for (unsigned i = 0; args[i]; i++)
    snprintf (buf + strlen (buf), len - strlen (buf), "%s%s", i ? " " : "", args[i]);
}

/* ---------------------------------------------------------------------------
 * Finding the names
 */

/* The part of out that lists something, its blanks and line breaks each
 * made one blank: from the end of `anchor` to `end`, or, with end NULL, to
 * the end of the anchor's line and the lines after it that go on with four
 * blanks or more.  Returns false if the anchor is not there. */
static bool
section (const char *anchor, const char *end, char *buf, size_t len)
{
  const char *a = strstr (out, anchor), *e;
  size_t n = 0;

  if (!a)
    return false;
  a += strlen (anchor);
  if (end) {
    e = strstr (a, end);
    e = e ? e : a + strlen (a);
  } else {
    e = a;
    for (;;) {
      e += strcspn (e, "\n");
      if (*e && strncmp (e + 1, "    ", 4) == 0)
        e++;
      else
        break;
    }
  }
  for (const char *p = a; p < e && n + 1 < len; p++) {
    bool blank = *p == ' ' || *p == '\n';
    if (!blank)
      buf[n++] = *p;
    else if (n && buf[n - 1] != ' ')
      buf[n++] = ' ';
  }
  buf[n] = '\0';
  return true;
}

/* Is name in s as a word of a list: between separators or the ends (not
 * "oracle:", a note on one)? */
static bool
has_word (const char *s, const char *name)
{
  size_t n = strlen (name);

  for (const char *p = s; (p = strstr (p, name)); p++)
    if ((p == s || strchr (" ,;|(", p[-1])) && (!p[n] || strchr (" ,;|().", p[n])))
      return true;
  return false;
}

/* Checks that the part of out from anchor (to end) names every name of l
 * and, if `mark` is not NULL, has it (e.g. "admin (default)"). */
static void
expect (const char *where, const char *anchor, const char *end, const struct list *l,
        const char *mark)
{
  char s[4096];

  if (!section (anchor, end, s, sizeof s)) {
    CHECK (false, "%s: no '%s' in:\n%s", where, anchor, out);
    return;
  }
  for (unsigned i = 0; i < l->n; i++)
    CHECK (has_word (s, l->names[i]), "%s: '%s' is not among the %s after '%s': %s", where,
           l->names[i], l->what, anchor, s);
  if (mark)
    CHECK (strstr (s, mark), "%s: no '%s' after '%s': %s", where, mark, anchor, s);
}

/* A placeholder the tool did not expand: @KEY@ or @KEY:modifier@. */
static const char *
placeholder (const char *s)
{
  for (const char *p = s; (p = strchr (p, '@')); p++) {
    size_t k = strspn (p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
    size_t m = p[1 + k] == ':' ? 1 + strspn (p + 2 + k, "abcdefghijklmnopqrstuvwxyz") : 0;
    if (k && p[1 + k + m] == '@')
      return p;
  }
  return NULL;
}

/* Runs the tool, checks its status and that nothing is left unexpanded. */
static bool
ran (const char *const *args, int want, char *where, size_t len)
{
  int rc = run (args);
  const char *p;

  joined (args, where, len);
  CHECK (rc == want, "'%s' exited %d, want %d:\n%s", where, rc, want, out);
  p = placeholder (out);
  CHECK (!p, "'%s' leaves a placeholder unexpanded: %.40s", where, p ? p : "");
  return rc == want;
}

#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })

/* ---------------------------------------------------------------------------
 * The texts
 */
static void
check_help (void)
{
  char w[256], mark[128];

  /* Every help text expands its placeholders. */
  static const char *const helps[][4] = {
    { "--help" }, { "demo", "--help" }, { "replay", "--help" }, { "trace", "--help" },
    { "trace", "stats", "--help" }, { "trace", "convert", "--help" },
    { "trace", "record", "--help" }, { "hint", "--help" }, { "hint", "decode", "--help" },
    { "hint", "encode", "--help" }, { "hint", "map", "--help" }, { "hint", "classes", "--help" },
    { "format", "--help" }, { "info", "--help" }, { "check", "--help" }, { "clean", "--help" },
    { "stats", "--help" }, { "io", "--help" }, { "advise", "--help" }, { "control", "--help" },
    { "hintd", "--help" }, { "run", "--help" },
  };
  for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
    ran (helps[i], 0, w, sizeof w);

  if (ran (ARGS ("hint", "decode", "--help"), 0, w, sizeof w))
    expect (w, "Codecs: ", ".", &codecs, NULL);
  const char *const *hint_cmds[] = { ARGS ("hint", "encode", "--help"),
                                     ARGS ("hint", "map", "--help") };
  for (unsigned i = 0; i < 2; i++)
    if (ran (hint_cmds[i], 0, w, sizeof w)) {
      expect (w, "Classes: ", ".", &classes, NULL);
      expect (w, "Advice: ", ".", &advice, NULL);
      expect (w, "\n  --profile KEY=VALUE", "\n  --ata-log", &profile_keys, NULL);
    }
  if (ran (ARGS ("hint", "classes", "--help"), 0, w, sizeof w))
    expect (w, "pattern ", ",", &patterns, NULL);

  if (ran (ARGS ("format", "--help"), 0, w, sizeof w)) {
    snprintf (mark, sizeof mark, "%s (default)", hc_mode_name (HC_MODE_WRITETHROUGH));
    expect (w, "\n  --mode M", NULL, &modes, mark);
    snprintf (mark, sizeof mark, "%s (default)", hc_policy_name (0));
    expect (w, "\n  --policy P", NULL, &policies, mark);
  }
  if (ran (ARGS ("io", "--help"), 0, w, sizeof w))
    expect (w, "\n  mode MODE", NULL, &modes, NULL);
  if (ran (ARGS ("control", "--help"), 0, w, sizeof w)) {
    snprintf (mark, sizeof mark, "%s (default)", hc_source_name (HC_SOURCE_ADMIN));
    expect (w, "\n  advise OFF LEN HINT", NULL, &sources, mark);
    expect (w, "\n  mode MODE", NULL, &modes, NULL);
  }

  if (ran (ARGS ("replay", "--help"), 0, w, sizeof w)) {
    expect (w, "\n  --strategy LIST", NULL, &strategies, "default all");
    snprintf (mark, sizeof mark, "default %s", hc_policy_name (0));
    expect (w, "\n  --policy LIST", NULL, &replay_policies, mark);
    expect (w, "\n  --format F", NULL, &formats_given, NULL);
  }
  const char *const *trace_cmds[] = { ARGS ("trace", "stats", "--help"),
                                      ARGS ("trace", "convert", "--help") };
  for (unsigned i = 0; i < 2; i++)
    if (ran (trace_cmds[i], 0, w, sizeof w))
      expect (w, "\n  --format F", NULL, &formats_given, NULL);

  if (ran (ARGS ("run", "--help"), 0, w, sizeof w)) {
    expect (w, "\n  --class CLASS", NULL, &classes_given, NULL);
    expect (w, "\n  --advice ADVICE", NULL, &advice_given, NULL);
  }
}

/* Usage errors that name the valid choices. */
static void
check_errors (void)
{
  char w[256], missing[512];

  /* A tier that is never opened (the errors come first); the replays read
   * /dev/null, an empty trace, if they get that far. */
  snprintf (missing, sizeof missing, "%s/hintcache-test-help-%d-missing", test_tmp (),
            (int) getpid ());
  if (ran (ARGS ("hint", "decode", "nosuch", "1"), 2, w, sizeof w))
    expect (w, "codecs: ", ")", &codecs, NULL);
  if (ran (ARGS ("hint", "encode", "ata", "nosuch"), 2, w, sizeof w)) {
    expect (w, "classes: ", ";", &classes, NULL);
    expect (w, "advice: ", ";", &advice, NULL);
  }
  if (ran (ARGS ("hint", "map", "metadata", "--profile", "nosuch=1"), 2, w, sizeof w))
    expect (w, "keys: ", ")", &profile_keys, NULL);
  if (ran (ARGS ("replay", "/dev/null", "--strategy", "nosuch"), 2, w, sizeof w))
    expect (w, "not a strategy (", ")", &strategies, NULL);
  if (ran (ARGS ("replay", "/dev/null", "--rules", "none=x"), 2, w, sizeof w))
    expect (w, "takes rules (", ")", &rule_strategies, NULL);
  if (ran (ARGS ("replay", "/dev/null", "--policy", "nosuch"), 2, w, sizeof w))
    expect (w, "policies: ", ")", &replay_policies, NULL);
  if (ran (ARGS ("replay", "/dev/null", "--format", "nosuch"), 2, w, sizeof w))
    expect (w, "one of ", "\n", &formats, NULL);
  if (ran (ARGS ("format", "--fast", missing, "--slow", missing, "--mode", "nosuch"), 2, w,
           sizeof w))
    expect (w, "one of ", "\n", &modes, NULL);
  if (ran (ARGS ("format", "--fast", missing, "--slow", missing, "--policy", "nosuch"), 2, w,
           sizeof w))
    expect (w, "one of ", "\n", &policies, NULL);
  if (ran (ARGS ("io", missing, "mode", "nosuch"), 2, w, sizeof w))
    expect (w, "not a mode (", ")", &modes, NULL);
  if (ran (ARGS ("run", "--advice", "nosuch", "--", "true"), 2, w, sizeof w))
    expect (w, "not an advice (", ")", &advice_given, NULL);
}

int
main (int argc, char **argv)
{
  if (argc != 2) {
    fprintf (stderr, "usage: %s TOOL\n", argv[0]);
    return 1;
  }
  tool = argv[1];
  make_lists ();
  check_help ();
  check_errors ();
  return test_exit ("test_help");
}
