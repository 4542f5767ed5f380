/* Fuzzes the hint daemon's path rules (hc_fsrules_parse: "PATTERN HINT"
 * lines, gitignore-style patterns) and the matcher that applies them to
 * file paths (hc_fsrules_match).
 *
 * Beyond not crashing:
 *   - a text that fails names a line within it and a reason, and leaves
 *     the caller's rules as they were;
 *   - every parsed rule has a pattern, components (none empty, "." or
 *     ".."), and a hint naming a class or an advice, without flags; rules
 *     are numbered by increasing line;
 *   - every rule matches a path made from its own pattern ('*' and '?'
 *     replaced by a letter, "**" by nothing or, at the end, by one
 *     component, '\' escapes resolved): hc_fsrules_match gives that rule
 *     or an earlier one;
 *   - matching a few fixed paths, deep ones included, gives -1 or a rule.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "fsmap/fsmap.h"

/* Fixed paths to match, from a real tree and some odd ones. */
static const char *const paths[] = {
  "var/lib/postgresql/15/main/pg_wal/000000010000000000000001",
  "home/user/backup/2024/db.bak",
  "swapfile",
  "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/file.idx",
  "x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x",
  "/leading/slash//double/slash",
  "*?\\",
};

/* Builds into buf[len] a path that rule r must match; false if the
 * pattern has a component no path component can equal (an escaped '/'). */
static bool
path_of (const struct hc_fsrule *r, char *buf, size_t len)
{
  size_t o = 0;

  for (size_t i = 0; i < r->nseg; i++) {
    const char *s = r->seg[i];
    if (strcmp (s, "**") == 0) {
      if (i + 1 < r->nseg)
        continue; /* zero components */
      s = "z";    /* a trailing "**": one */
    }
    if (o && o + 1 < len)
      buf[o++] = '/';
    for (; *s && o + 2 < len; s++) {
      char c = *s;
      if (c == '\\')
        c = *++s; /* compile refused a lone '\' at the end */
      else if (c == '*' || c == '?')
        c = 'y';
      if (c == '/')
        return false;
      buf[o++] = c;
    }
  }
  buf[o] = '\0';
  return o + 2 < len;
}

/* A value reader that takes any text (as the recorder's label rules read
 * a label): checks it is what a rule's right-hand side must be, non-empty
 * and trimmed, and keeps its length. */
static int
any_value (const char *text, unsigned *value, struct hc_parse_error *err)
{
  size_t n = strlen (text);
  (void) err;
  FUZZ_CHECK (n > 0 && text[0] != ' ' && text[0] != '\t' && text[n - 1] != ' '
                  && text[n - 1] != '\t',
              "a value reader was given '%s'", text);
  *value = (unsigned) n;
  return 0;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct hc_fsrules rs = { 0 }, keep = { 0 };
  struct hc_parse_error err;
  const char *text = (const char *) data;
  unsigned lines = 0;

  for (size_t i = 0; i < size; i++)
    lines += data[i] == '\n';
  lines += size > 0 && data[size - 1] != '\n';

  /* A failed parse leaves the rules given as they were. */
  FUZZ_CHECK (hc_fsrules_parse ("*.x journal\n", 12, &keep, NULL) == 0, "seed rules");
  int rc = hc_fsrules_parse (text, size, &keep, &err);
  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "parse returned %d", rc);
  if (rc < 0) {
    FUZZ_CHECK (err.line >= 1 && err.line <= lines && err.msg[0],
                "failure at line %u of %u: '%s'", err.line, lines, err.msg);
    FUZZ_CHECK (keep.n == 1 && strcmp (keep.r[0].pattern, "*.x") == 0,
                "a failed parse changed the rules");
    hc_fsrules_free (&keep);
    return 0;
  }
  hc_fsrules_free (&keep);
  FUZZ_CHECK (hc_fsrules_parse (text, size, &rs, &err) == 0, "the same text failed");

  /* Read with a value reader instead of hints: the same rules. */
  struct hc_fsrules vs = { 0 };
  FUZZ_CHECK (hc_fsrules_parse_as (text, size, any_value, &vs, &err) == 0,
              "read with values, line %u failed: %s", err.line, err.msg);
  FUZZ_CHECK (vs.n == rs.n, "%zu rules with values, %zu with hints", vs.n, rs.n);
  for (size_t i = 0; i < rs.n; i++)
    FUZZ_CHECK (strcmp (vs.r[i].pattern, rs.r[i].pattern) == 0 && vs.r[i].line == rs.r[i].line
                    && vs.r[i].value > 0,
                "rule %zu read with a value: '%s' at line %u", i, vs.r[i].pattern, vs.r[i].line);
  hc_fsrules_free (&vs);

  for (size_t i = 0; i < rs.n; i++) {
    const struct hc_fsrule *r = &rs.r[i];
    FUZZ_CHECK (r->pattern && r->pattern[0] && r->nseg > 0, "rule %zu is empty", i);
    FUZZ_CHECK (r->line >= 1 && r->line <= lines && (i == 0 || r->line > rs.r[i - 1].line),
                "rule %zu at line %u", i, r->line);
    FUZZ_CHECK (hc_hint_check (r->hint) == 0 && r->hint.flags == 0
                    && (r->hint.cls != HC_CLASS_UNCLASSIFIED || r->hint.advice != HC_ADVICE_NONE),
                "rule %zu: hint %u/%u/%u", i, r->hint.cls, r->hint.advice, r->hint.flags);
    for (size_t k = 0; k < r->nseg; k++)
      FUZZ_CHECK (r->seg[k][0] && strcmp (r->seg[k], ".") != 0 && strcmp (r->seg[k], "..") != 0,
                  "rule %zu ('%s'): component %zu is '%s'", i, r->pattern, k, r->seg[k]);
    char path[4096];
    if (path_of (r, path, sizeof path)) {
      int m = hc_fsrules_match (&rs, path);
      FUZZ_CHECK (m >= 0 && (size_t) m <= i, "rule %zu ('%s') does not match '%s' (got %d)", i,
                  r->pattern, path, m);
    }
  }
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    int m = hc_fsrules_match (&rs, paths[i]);
    FUZZ_CHECK (m >= -1 && m < (int) rs.n, "match '%s' gave %d", paths[i], m);
  }
  hc_fsrules_free (&rs);
  return 0;
}
