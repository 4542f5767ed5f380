/* The hint daemon's file system map (src/fsmap/) and the daemon itself:
 *
 *   - path rules: a table of patterns × paths (anchors, name rules, "**" at
 *     the start, middle and end, '?', '\'), first-match order, bad lines
 *     with their line numbers, and the built-in rules;
 *   - the builder against a brute-force painting of random pieces with
 *     priorities, and the diff engine against per-block comparison of
 *     random maps: applying its operations with the server's semantics to
 *     the old map gives the new one exactly (plus hand-made splits, merges,
 *     overlapping changes, a map going to empty, and hc_fsmap_apply with
 *     refused and unknown operations);
 *   - the ext4 layout scan's refusals (not ext2/3/4, no such image) and
 *     libext2fs's error messages;
 *   - `test_fsmap layout`: the ext4 layout scan of images made with
 *     mkfs.ext4 -d (no mounting), checked against dumpe2fs and debugfs:
 *     group metadata, the journal, directory blocks, extent-tree blocks,
 *     and data blocks left alone; damaged images;
 *   - `test_fsmap tree`: the tree walk with rules and FIEMAP on a directory
 *     in $TMPDIR (or /tmp);
 *   - `test_fsmap hintd`: `hintcache hintd` without a server: --show-rules,
 *     --help, usage errors and bad rules;
 *   - `test_fsmap daemon`: `hintcache hintd` against an in-process control
 *     server: --once, --dry-run, and a background daemon that withdraws and
 *     changes hints as files are deleted, renamed and truncated, survives a
 *     server restart, and exits 0 on SIGTERM.
 *
 * Without an argument it runs the parts without a prerequisite; each named
 * part is its own CTest test and exits 77 (skipped), saying why, where what
 * it needs is missing: mkfs.ext4, dumpe2fs and debugfs (on PATH, /usr/sbin
 * or /sbin) for layout; FIEMAP in $TMPDIR for tree; the tool (found as
 * ../hintcache next to this test's directory) for hintd; the tool, FIEMAP
 * and a sparse file large enough for the files' offsets for daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fsmap/fsmap.h"
#include "hintcache/control.h"
#include "hintcache/extents.h"
#include "hintcache/hintcache.h"
#include "test.h"
#include "util.h" /* hc_hint_empty */

static char tmpdir[96];
static char tool[PATH_MAX + 32];

static struct hc_hint
H (unsigned cls, unsigned advice)
{
  return (struct hc_hint) { .cls = (uint8_t) cls, .advice = (uint8_t) advice };
}

/* Runs a shell command; captures its stdout (and stderr when `both`).
 * Returns its exit status, or -1. */
static int __attribute__ ((format (printf, 4, 5)))
sh (char *out, size_t len, bool both, const char *fmt, ...)
{
  char cmd[8192];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (cmd, sizeof cmd, fmt, ap);
  va_end (ap);
  if (both)
    strncat (cmd, " 2>&1", sizeof cmd - strlen (cmd) - 1);
  FILE *f = popen (cmd, "r");
  if (!f)
    return -1;
  size_t n = out ? fread (out, 1, len - 1, f) : 0;
  if (out)
    out[n] = '\0';
  else {
    char sink[4096];
    while (fread (sink, 1, sizeof sink, f) > 0)
      ;
  }
  int st = pclose (f);
  return WIFEXITED (st) ? WEXITSTATUS (st) : -1;
}

/* True if prog is on PATH (which test_layout extends with /usr/sbin and
 * /sbin, where e2fsprogs lives). */
static bool
have (const char *prog)
{
  return sh (NULL, 0, true, "command -v %s >/dev/null", prog) == 0;
}

/* ---------------------------------------------------------------------------
 * Rules
 */
static void
test_rules_table (void)
{
  static const struct {
    const char *pattern, *path;
    bool match;
  } t[] = {
    /* A name without '/': the file's name, in any directory. */
    { "*.idx", "a.idx", true },          { "*.idx", "d/e/a.idx", true },
    { "*.idx", "a.idx/x", false },       { "*.idx", "a.idxx", false },
    { "*.idx", ".idx", true },           { "*.IDX", "a.idx", false },
    { "*-wal", "db.sqlite-wal", true },  { "*-wal", "x/y/db-wal", true },
    { "*-wal", "db-wal.old", false },    { "?.log", "a.log", true },
    { "?.log", "ab.log", false },        { "?.log", "d/a.log", true },
    { "?.log", ".log", false },          { "a*b*c", "abc", true },
    { "a*b*c", "aXbYc", true },          { "a*b*c", "aXbY", false },
    { "a*b*c", "acb", false },           { "a*b*c", "abcbc", true },
    { "*", "anything", true },           { "*", "d/anything", true },
    { "\\*.txt", "*.txt", true },        { "\\*.txt", "a.txt", false },
    { "a\\?", "a?", true },              { "a\\?", "ab", false },
    { "a**b", "aXYb", true },            { "a**b", "aX/Yb", false },
    /* Anchored at the mount point. */
    { "/top.txt", "top.txt", true },     { "/top.txt", "d/top.txt", false },
    { "/top.txt", "/top.txt", true },    { "/d/*.db", "d/x.db", true },
    { "/d/*.db", "e/d/x.db", false },    { "/d/*.db", "d/e/x.db", false },
    /* A '/' inside: a tail of the path at a component boundary. */
    { "pg_wal/x?", "a/pg_wal/x1", true },    { "pg_wal/x?", "pg_wal/x1", true },
    { "pg_wal/x?", "apg_wal/x1", false },    { "pg_wal/x?", "a/pg_wal/x12", false },
    { "pg_wal/x?", "a/pg_wal/x", false },    { "log*/*.txt", "logs/a.txt", true },
    { "log*/*.txt", "q/logs/a.txt", true },  { "log*/*.txt", "logs/d/a.txt", false },
    /* "**" at the start: zero or more components. */
    { "**/x", "x", true },               { "**/x", "a/b/x", true },
    { "**/x", "a/b/xx", false },         { "**", "a", true },
    { "**", "a/b/c", true },             { "/**/x", "x", true },
    { "/**/x", "a/x", true },
    /* In the middle: zero or more. */
    { "a/**/b", "a/b", true },           { "a/**/b", "a/x/b", true },
    { "a/**/b", "a/x/y/b", true },       { "a/**/b", "z/a/b", true },
    { "a/**/b", "a/bb", false },         { "/a/**/b", "z/a/b", false },
    { "/a/**/b", "a/x/b", true },        { "/a/**/b", "a/x/b/c", false },
    { "/a/**/**/b", "a/b", true },       { "/a/**/**/b", "a/1/2/3/b", true },
    /* At the end: one or more. */
    { "/backup/**", "backup/x", true },  { "/backup/**", "backup/a/b", true },
    { "/backup/**", "backup", false },   { "/backup/**", "x/backup/y", false },
    { "**/pg_wal/**", "pg_wal/1", true },    { "**/pg_wal/**", "a/b/pg_wal/1", true },
    { "**/pg_wal/**", "pg_wal", false },     { "**/pg_wal/**", "a/pg_wal", false },
    { "**/pg_wal/**", "apg_wal/1", false },  { "**/pg_wal/**", "pg_wal/a/b", true },
    { "x/**", "x/y", true },             { "x/**", "a/x/y/z", true },
    { "x/**", "x", false },              { "x/**", "ax/y", false },
    /* Many "**": each takes what the next part leaves (trying every split
     * at every one never finished on such paths). */
    { "/a/**/b/**/c/**/d", "a/b/c/d", true },  { "/a/**/b/**/c/**/d", "a/x/b/c/y/d", true },
    { "/a/**/b/**/c/**/d", "a/c/b/d", false },  { "**/a/**/a/**", "a/a/a", true },
    { "**/a/**/a/**", "a/a", false },
    { "/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/**/z",
      "x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/y", false },
    { "/**/x/**/x/**/x/**/x/**/x/**/x/**/x/**/x/**/z",
      "x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/x/z", true },
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    char text[256];
    struct hc_fsrules rs = { 0 };
    struct hc_parse_error err;
    snprintf (text, sizeof text, "%s data\n", t[i].pattern);
    int rc = hc_fsrules_parse (text, strlen (text), &rs, &err);
    CHECK (rc == 0 && rs.n == 1, "parse '%s': %d %s", t[i].pattern, rc, err.msg);
    if (rc == 0)
      CHECK ((hc_fsrules_match (&rs, t[i].path) == 0) == t[i].match, "'%s' vs '%s': want %s",
             t[i].pattern, t[i].path, t[i].match ? "match" : "no match");
    hc_fsrules_free (&rs);
  }
}

static void
test_rules_parse (void)
{
  struct hc_fsrules rs = { 0 };
  struct hc_parse_error err;
  const char *text =
    "# comment\n"
    "\n"
    "   \t\n"
    "a/*.idx\tjournal   # why\r\n"
    "  *.idx transaction\n"
    "/backup/** background dontneed\n"
    "*.tmp\t dontneed\n"
    "#*.no metadata\n"
    "#hash#name metadata\n";

  CHECK (hc_fsrules_parse (text, strlen (text), &rs, &err) == 0, "parse: line %u %s", err.line,
         err.msg);
  CHECK (rs.n == 4, "4 rules, got %zu", rs.n);
  if (rs.n == 4) {
    CHECK (rs.r[0].line == 4 && rs.r[1].line == 5 && rs.r[2].line == 6 && rs.r[3].line == 7,
           "line numbers");
    CHECK (strcmp (rs.r[0].pattern, "a/*.idx") == 0, "pattern kept: '%s'", rs.r[0].pattern);
    CHECK (hc_fsmap_hint_eq (rs.r[0].hint, H (HC_CLASS_JOURNAL, 0)), "hint 0");
    CHECK (hc_fsmap_hint_eq (rs.r[2].hint, H (HC_CLASS_BACKGROUND, HC_ADVICE_DONTNEED)), "hint 2");
    CHECK (hc_fsmap_hint_eq (rs.r[3].hint, H (0, HC_ADVICE_DONTNEED)), "advice only");
    /* First match wins. */
    CHECK (hc_fsrules_match (&rs, "a/q.idx") == 0, "first rule");
    CHECK (hc_fsrules_match (&rs, "b/q.idx") == 1, "second rule");
    CHECK (hc_fsrules_match (&rs, "backup/q.idx") == 1, "the earlier rule wins");
    CHECK (hc_fsrules_match (&rs, "backup/q") == 2, "third rule");
    CHECK (hc_fsrules_match (&rs, "notes.txt") == -1, "no rule");
    CHECK (hc_fsrules_match (&rs, "") == -1 && hc_fsrules_match (&rs, "/") == -1, "empty path");
  }

  /* A file name with '#' inside a pattern is not a comment. */
  struct hc_fsrules hs = { 0 };
  const char *hash = "x#y journal\n";
  CHECK (hc_fsrules_parse (hash, strlen (hash), &hs, &err) == 0 && hs.n == 1
         && hc_fsrules_match (&hs, "d/x#y") == 0, "'#' inside a pattern");
  hc_fsrules_free (&hs);

  /* Bad lines: -EINVAL, their line number and why; *out unchanged. */
  static const struct {
    const char *text;
    unsigned line;
    const char *says;
  } bad[] = {
    { "*.idx\n", 1, "missing HINT" },
    { "*.idx   # only a comment\n", 1, "missing HINT" },
    { "# c\n\n*.idx bogus\n", 3, "not a hint" },
    { "ok journal\nbad/ journal\n", 2, "ends in '/'" },
    { "a//b journal\n", 1, "empty component" },
    { "/ journal\n", 1, "names nothing" },
    { "a/./b journal\n", 1, "'.'" },
    { "../b journal\n", 1, "'..'" },
    { "x journal+sequential\n", 1, "flags" },
    { "x none\n", 1, "no class and no advice" },
    { "x journal+metadata\n", 1, "not a hint" },
    { "x 4\n", 1, "not a hint" },
    { "x willneed dontneed\n", 1, "not a hint" },
    { "a\\ journal\n", 1, "missing HINT" }, /* an escaped blank is part of the pattern */
    { "ok journal\nok2 journal\nab\\\n", 3, "lone" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset (&err, 0, sizeof err);
    int rc = hc_fsrules_parse (bad[i].text, strlen (bad[i].text), &rs, &err);
    CHECK (rc == -EINVAL, "'%s': %d", bad[i].text, rc);
    CHECK (err.line == bad[i].line, "'%s': line %u, want %u", bad[i].text, err.line, bad[i].line);
    CHECK (strstr (err.msg, bad[i].says), "'%s': '%s' lacks '%s'", bad[i].text, err.msg,
           bad[i].says);
  }
  CHECK (rs.n == 4, "failed parses leave the rules alone");
  const char nul[] = "a journal\nb\0 journal\n";
  CHECK (hc_fsrules_parse (nul, sizeof nul - 1, &rs, &err) == -EINVAL && err.line == 2,
         "NUL byte: line %u", err.line);
  hc_fsrules_free (&rs);

  /* Files. */
  char path[128];
  snprintf (path, sizeof path, "%s/rules", tmpdir);
  FILE *f = fopen (path, "w");
  fputs ("*.idx transaction\n\nx bogus\n", f);
  fclose (f);
  CHECK (hc_fsrules_load_file (path, &rs, &err) == -EINVAL && err.line == 3, "file: line %u",
         err.line);
  snprintf (path, sizeof path, "%s/none", tmpdir);
  CHECK (hc_fsrules_load_file (path, &rs, &err) == -ENOENT, "missing file");
}

static void
test_rules_default (void)
{
  struct hc_fsrules rs = { 0 };
  struct hc_parse_error err;
  const char *text = hc_fsrules_default_text ();

  CHECK (hc_fsrules_parse (text, strlen (text), &rs, &err) == 0, "defaults: line %u %s", err.line,
         err.msg);
  CHECK (rs.n >= 10, "%zu default rules", rs.n);
  static const struct {
    const char *path;
    unsigned cls, advice;
  } t[] = {
    { "var/lib/postgresql/15/main/pg_wal/000000010000000000000001", HC_CLASS_JOURNAL, 0 },
    { "srv/app/db.sqlite-wal", HC_CLASS_JOURNAL, 0 },
    { "mysql/ib_logfile0", HC_CLASS_JOURNAL, 0 },
    { "data/orders.idx", HC_CLASS_TRANSACTION, 0 },
    { "backup/2024/full.tar", HC_CLASS_BACKGROUND, HC_ADVICE_DONTNEED },
    { "home/u/old.bak", HC_CLASS_BACKGROUND, HC_ADVICE_DONTNEED },
    { "swapfile", HC_CLASS_PAGING, 0 },
    { "isos/debian.iso", HC_CLASS_STREAMING, 0 },
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    int k = hc_fsrules_match (&rs, t[i].path);
    CHECK (k >= 0 && hc_fsmap_hint_eq (rs.r[k].hint, H (t[i].cls, t[i].advice)), "%s: rule %d",
           t[i].path, k);
  }
  CHECK (hc_fsrules_match (&rs, "home/u/notes.txt") < 0, "plain files get nothing");
  CHECK (hc_fsrules_match (&rs, "x/backup/y") < 0, "/backup is anchored");
  hc_fsrules_free (&rs);
}

/* ---------------------------------------------------------------------------
 * Maps: builder, diff, apply
 */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd (uint64_t n)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return n ? rng_state % n : 0;
}

#define NB 64          /* blocks in the random universe */
#define BS 4096ull     /* bytes per block */

static const struct hc_hint palette[] = {
  { .cls = HC_CLASS_METADATA },
  { .cls = HC_CLASS_JOURNAL },
  { .cls = HC_CLASS_BACKGROUND, .advice = HC_ADVICE_DONTNEED },
  { .advice = HC_ADVICE_WILLNEED },
};
#define NPAL (sizeof palette / sizeof palette[0])

/* Per-block hints: 0 none, i+1 palette[i]. */
static struct hc_hint
pal (unsigned v)
{
  return v ? palette[v - 1] : (struct hc_hint) { 0 };
}

/* Makes a random map (through the builder, pieces at one priority: the
 * first piece added wins a block) and its per-block picture. */
static void
random_map (struct hc_fsmap *m, unsigned blocks[NB], uint64_t base)
{
  struct hc_fsmap_builder b = { 0 };
  unsigned n = (unsigned) rnd (12), ps[12], pl[12], pv[12];

  for (unsigned i = 0; i < n; i++) {
    ps[i] = (unsigned) rnd (NB);
    pl[i] = 1 + (unsigned) rnd (NB - ps[i]);
    pv[i] = 1 + (unsigned) rnd (NPAL);
    CHECK (hc_fsmap_add (&b, base + ps[i] * BS, pl[i] * BS, pal (pv[i]), HC_FSMAP_PRIO_RULES) == 0,
           "add");
  }
  /* Paint in reverse, so the first piece is painted last. */
  memset (blocks, 0, NB * sizeof blocks[0]);
  for (unsigned i = n; i-- > 0;)
    for (unsigned k = ps[i]; k < ps[i] + pl[i]; k++)
      blocks[k] = pv[i];
  CHECK (hc_fsmap_build (&b, m) == 0, "build");
  CHECK (hc_fsmap_check (m) == 0, "random map is well formed");
  hc_fsmap_builder_free (&b);
}

static void
test_builder (void)
{
  /* Random pieces with two priorities and empty hints, against painting:
   * a block takes the highest priority's first piece. */
  for (int iter = 0; iter < 3000; iter++) {
    struct hc_fsmap_builder b = { 0 };
    struct hc_fsmap m = { 0 };
    unsigned n = (unsigned) rnd (20), wprio[NB];
    struct hc_hint want[NB];

    for (unsigned k = 0; k < NB; k++)
      wprio[k] = 0, want[k] = (struct hc_hint) { 0 };
    for (unsigned i = 0; i < n; i++) {
      unsigned s = (unsigned) rnd (NB), len = 1 + (unsigned) rnd (NB - s);
      unsigned prio = 1 + (unsigned) rnd (2), v = (unsigned) rnd (NPAL + 1);
      if (rnd (4) == 0 && i > 0) /* sometimes continue the previous piece */
        s = s > 0 ? s - 1 : 0;
      CHECK (hc_fsmap_add (&b, s * BS, len * BS, pal (v), prio) == 0, "add");
      for (unsigned k = s; k < s + len; k++)
        if (prio > wprio[k]) {
          wprio[k] = prio;
          want[k] = pal (v);
        }
    }
    CHECK (hc_fsmap_build (&b, &m) == 0 && b.n == 0, "build");
    CHECK (hc_fsmap_check (&m) == 0, "well formed");
    for (unsigned k = 0; k < NB; k++) {
      struct hc_hint got = hc_fsmap_lookup (&m, k * BS), last = hc_fsmap_lookup (&m, k * BS + BS - 1);
      CHECK (hc_fsmap_hint_eq (got, want[k]) && hc_fsmap_hint_eq (last, want[k]),
             "iter %d block %u: got %u/%u want %u/%u", iter, k, got.cls, got.advice, want[k].cls,
             want[k].advice);
    }
    CHECK (hc_hint_empty (hc_fsmap_lookup (&m, NB * BS)), "past the end");
    hc_fsmap_free (&m);
    hc_fsmap_builder_free (&b);
  }

  /* Layout beats rules where they overlap, whatever the order. */
  struct hc_fsmap_builder b = { 0 };
  struct hc_fsmap m = { 0 };
  hc_fsmap_add (&b, 0, 100, H (HC_CLASS_TRANSACTION, 0), HC_FSMAP_PRIO_RULES);
  hc_fsmap_add (&b, 40, 20, H (HC_CLASS_METADATA, 0), HC_FSMAP_PRIO_LAYOUT);
  CHECK (hc_fsmap_build (&b, &m) == 0 && m.n == 3, "three ranges: %zu", m.n);
  if (m.n == 3)
    CHECK (m.r[0].end == 40 && m.r[1].start == 40 && m.r[1].end == 60
           && m.r[1].hint.cls == HC_CLASS_METADATA && m.r[2].start == 60 && m.r[2].end == 100,
           "layout wins in the middle");
  /* Touching pieces of one hint merge; the top of 2^64 is reachable. */
  hc_fsmap_add (&b, UINT64_MAX - 8192, 4096, H (1, 0), 1);
  hc_fsmap_add (&b, UINT64_MAX - 4096, 4096, H (1, 0), 2);
  CHECK (hc_fsmap_add (&b, UINT64_MAX - 4095, 4096, H (1, 0), 1) == -ERANGE, "past 2^64");
  CHECK (hc_fsmap_add (&b, 5, 0, H (1, 0), 1) == 0 && b.n == 2, "empty piece ignored");
  CHECK (hc_fsmap_build (&b, &m) == 0 && m.n == 1 && m.r[0].start == UINT64_MAX - 8192
         && m.r[0].end == UINT64_MAX, "merged at the top");
  hc_fsmap_free (&m);
  hc_fsmap_builder_free (&b);
}

/* Applies ops to a per-block picture as the server does; checks that each
 * advise lands on blocks without a hint (the unadvise came first). */
static void
server_apply (unsigned blocks[NB], struct hc_hint hb[NB], const struct hc_fsmap_ops *ops)
{
  (void) blocks;
  for (size_t i = 0; i < ops->n; i++) {
    const struct hc_fsmap_op *o = &ops->op[i];
    CHECK (o->start < o->end && o->start % BS == 0 && o->end % BS == 0, "op %zu aligned", i);
    for (uint64_t k = o->start / BS; k < o->end / BS && k < NB; k++) {
      if (o->kind == HC_FSMAP_UNADVISE)
        hb[k] = (struct hc_hint) { 0 };
      else {
        CHECK (hc_hint_empty (hb[k]), "op %zu: advise over a hint at block %" PRIu64, i, k);
        hb[k] = o->hint;
      }
    }
  }
}

static bool
maps_equal (const struct hc_fsmap *a, const struct hc_fsmap *b)
{
  if (a->n != b->n)
    return false;
  for (size_t i = 0; i < a->n; i++)
    if (a->r[i].start != b->r[i].start || a->r[i].end != b->r[i].end
        || !hc_fsmap_hint_eq (a->r[i].hint, b->r[i].hint))
      return false;
  return true;
}

static void
test_diff_random (void)
{
  for (int iter = 0; iter < 5000; iter++) {
    struct hc_fsmap a = { 0 }, b = { 0 }, c = { 0 };
    struct hc_fsmap_ops ops = { 0 };
    unsigned ab[NB], bb[NB];
    struct hc_hint hb[NB];

    random_map (&a, ab, 0);
    if (rnd (8) == 0)
      hc_fsmap_free (&a), memset (ab, 0, sizeof ab);
    random_map (&b, bb, 0);
    if (rnd (8) == 0)
      hc_fsmap_free (&b), memset (bb, 0, sizeof bb);
    /* The per-block picture of each map is what lookup says. */
    for (unsigned k = 0; k < NB; k++) {
      CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&a, k * BS), pal (ab[k])), "a block %u", k);
      CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&b, k * BS), pal (bb[k])), "b block %u", k);
    }
    CHECK (hc_fsmap_diff (&a, &b, &ops) == 0, "diff");
    for (unsigned k = 0; k < NB; k++)
      hb[k] = pal (ab[k]);
    server_apply (ab, hb, &ops);
    uint64_t withdrawn = 0, changed = 0;
    for (unsigned k = 0; k < NB; k++) {
      CHECK (hc_fsmap_hint_eq (hb[k], pal (bb[k])), "iter %d block %u: %u/%u want %u", iter, k,
             hb[k].cls, hb[k].advice, bb[k]);
      withdrawn += ab[k] && !bb[k] ? BS : 0;
      changed += ab[k] != bb[k];
    }
    CHECK (ops.withdrawn_bytes == withdrawn, "withdrawn %" PRIu64 " want %" PRIu64,
           ops.withdrawn_bytes, withdrawn);
    CHECK ((changed == 0) == (ops.n == 0), "ops only for changes");
    /* Only changed blocks are touched, and touching operations of one kind
     * and hint were merged. */
    uint64_t touched = 0;
    for (size_t i = 0; i < ops.n; i++) {
      const struct hc_fsmap_op *o = &ops.op[i];
      for (uint64_t k = o->start / BS; k < o->end / BS; k++)
        CHECK (ab[k] != bb[k], "op %zu touches unchanged block %" PRIu64, i, k);
      touched += o->end - o->start;
      for (size_t j = 0; j < ops.n; j++)
        if (j != i && ops.op[j].kind == o->kind && ops.op[j].end == o->start
            && hc_fsmap_hint_eq (ops.op[j].hint, o->hint))
          CHECK (0, "ops %zu and %zu touch and were not merged", j, i);
    }
    CHECK (touched == ops.advised_bytes + ops.unadvised_bytes, "byte counts");
    /* hc_fsmap_apply gives the new map exactly. */
    CHECK (hc_fsmap_apply (&a, &ops, &c) == 0, "apply");
    CHECK (maps_equal (&c, &b), "apply(old, diff) == new (iter %d: %zu vs %zu ranges)", iter,
           c.n, b.n);
    /* No change, no operations. */
    CHECK (hc_fsmap_diff (&b, &b, &ops) == 0 && ops.n == 0, "diff of a map with itself");
    hc_fsmap_ops_free (&ops);
    hc_fsmap_free (&a);
    hc_fsmap_free (&b);
    hc_fsmap_free (&c);
  }
}

/* Builds a map from (start, end, class, advice) rows. */
static void
mkmap (struct hc_fsmap *m, const uint64_t (*rows)[4], size_t n)
{
  struct hc_fsmap_builder b = { 0 };

  for (size_t i = 0; i < n; i++)
    hc_fsmap_add (&b, rows[i][0], rows[i][1] - rows[i][0], H ((unsigned) rows[i][2],
                  (unsigned) rows[i][3]), 1);
  CHECK (hc_fsmap_build (&b, m) == 0, "mkmap");
  hc_fsmap_builder_free (&b);
}

/* Checks a diff's operations against the expected (kind, start, end, cls). */
static void
expect_ops (const char *what, const uint64_t (*a)[4], size_t na, const uint64_t (*b)[4], size_t nb,
            const uint64_t (*want)[4], size_t nw)
{
  struct hc_fsmap x = { 0 }, y = { 0 };
  struct hc_fsmap_ops ops = { 0 };

  mkmap (&x, a, na);
  mkmap (&y, b, nb);
  CHECK (hc_fsmap_diff (&x, &y, &ops) == 0, "%s: diff", what);
  CHECK (ops.n == nw, "%s: %zu ops, want %zu", what, ops.n, nw);
  for (size_t i = 0; i < ops.n && i < nw; i++)
    CHECK (ops.op[i].kind == want[i][0] && ops.op[i].start == want[i][1]
           && ops.op[i].end == want[i][2] && ops.op[i].hint.cls == want[i][3],
           "%s: op %zu is %u [%" PRIu64 ", %" PRIu64 ") %u", what, i, ops.op[i].kind,
           ops.op[i].start, ops.op[i].end, ops.op[i].hint.cls);
  hc_fsmap_ops_free (&ops);
  hc_fsmap_free (&x);
  hc_fsmap_free (&y);
}

#define A HC_FSMAP_ADVISE
#define U HC_FSMAP_UNADVISE
#define N(x) (sizeof (x) / sizeof (x)[0])

static void
test_diff_cases (void)
{
  /* A split: the middle changes class. */
  static const uint64_t s_old[][4] = { { 0, 10, 1, 0 } };
  static const uint64_t s_new[][4] = { { 0, 3, 1, 0 }, { 3, 5, 2, 0 }, { 5, 10, 1, 0 } };
  static const uint64_t s_ops[][4] = { { U, 3, 5, 0 }, { A, 3, 5, 2 } };
  expect_ops ("split", s_old, N (s_old), s_new, N (s_new), s_ops, N (s_ops));
  /* A merge: two classes become one. */
  static const uint64_t m_old[][4] = { { 0, 5, 1, 0 }, { 5, 10, 2, 0 } };
  static const uint64_t m_new[][4] = { { 0, 10, 1, 0 } };
  static const uint64_t m_ops[][4] = { { U, 5, 10, 0 }, { A, 5, 10, 1 } };
  expect_ops ("merge", m_old, N (m_old), m_new, N (m_new), m_ops, N (m_ops));
  /* Both change to one class: one unadvise, one advise. */
  static const uint64_t b_new[][4] = { { 0, 10, 3, 0 } };
  static const uint64_t b_ops[][4] = { { U, 0, 10, 0 }, { A, 0, 10, 3 } };
  expect_ops ("all change", m_old, N (m_old), b_new, N (b_new), b_ops, N (b_ops));
  /* An overlapping move: [0,10) A becomes [5,15) B. */
  static const uint64_t o_old[][4] = { { 0, 10, 1, 0 } };
  static const uint64_t o_new[][4] = { { 5, 15, 2, 0 } };
  static const uint64_t o_ops[][4] = { { U, 0, 10, 0 }, { A, 5, 15, 2 } };
  expect_ops ("overlap", o_old, N (o_old), o_new, N (o_new), o_ops, N (o_ops));
  /* Growth keeps what was there. */
  static const uint64_t g_new[][4] = { { 0, 20, 1, 0 } };
  static const uint64_t g_ops[][4] = { { A, 10, 20, 1 } };
  expect_ops ("growth", o_old, N (o_old), g_new, N (g_new), g_ops, N (g_ops));
  /* Truncation withdraws the tail. */
  static const uint64_t t_new[][4] = { { 0, 4, 1, 0 } };
  static const uint64_t t_ops[][4] = { { U, 4, 10, 0 } };
  expect_ops ("truncation", o_old, N (o_old), t_new, N (t_new), t_ops, N (t_ops));
  /* Advice changes alone count too (background → background+dontneed). */
  static const uint64_t a_old[][4] = { { 0, 10, 7, 0 } };
  static const uint64_t a_new[][4] = { { 0, 10, 7, 2 } };
  static const uint64_t a_ops[][4] = { { U, 0, 10, 0 }, { A, 0, 10, 7 } };
  expect_ops ("advice", a_old, N (a_old), a_new, N (a_new), a_ops, N (a_ops));
  /* To empty, and from empty; separate runs stay separate. */
  static const uint64_t e_old[][4] = { { 0, 10, 1, 0 }, { 20, 30, 2, 0 }, { 30, 40, 1, 0 } };
  static const uint64_t e_ops[][4] = { { U, 0, 10, 0 }, { U, 20, 40, 0 } };
  expect_ops ("to empty", e_old, N (e_old), NULL, 0, e_ops, N (e_ops));
  static const uint64_t f_ops[][4] = { { A, 0, 10, 1 }, { A, 20, 30, 2 }, { A, 30, 40, 1 } };
  expect_ops ("from empty", NULL, 0, e_old, N (e_old), f_ops, N (f_ops));
  expect_ops ("empty to empty", NULL, 0, NULL, 0, NULL, 0);
  /* Two runs, each unadvise before its advise. */
  static const uint64_t r_new[][4] = { { 0, 10, 2, 0 }, { 20, 30, 2, 0 }, { 30, 40, 1, 0 } };
  static const uint64_t r_ops[][4] = { { U, 0, 10, 0 }, { A, 0, 10, 2 } };
  expect_ops ("one run", e_old, N (e_old), r_new, N (r_new), r_ops, N (r_ops));
  static const uint64_t q_new[][4] = { { 0, 10, 2, 0 }, { 20, 30, 1, 0 }, { 30, 40, 2, 0 } };
  static const uint64_t q_ops[][4] = { { U, 0, 10, 0 }, { A, 0, 10, 2 }, { U, 20, 40, 0 },
                                       { A, 20, 30, 1 }, { A, 30, 40, 2 } };
  expect_ops ("two runs", e_old, N (e_old), q_new, N (q_new), q_ops, N (q_ops));

  /* hc_fsmap_apply with outcomes: refused, unknown, merged advice. */
  struct hc_fsmap x = { 0 }, y = { 0 }, z = { 0 };
  struct hc_fsmap_ops ops = { 0 };
  mkmap (&x, e_old, N (e_old));
  mkmap (&y, q_new, N (q_new));
  CHECK (hc_fsmap_diff (&x, &y, &ops) == 0 && ops.n == 5, "diff");
  if (ops.n == 5) {
    ops.op[1].state = HC_FSMAP_OP_NOT_APPLIED; /* advise [0,10) refused */
    ops.op[2].state = HC_FSMAP_OP_UNKNOWN;     /* unadvise [20,40) lost */
    ops.op[3].state = HC_FSMAP_OP_NOT_APPLIED;
    ops.op[4].state = HC_FSMAP_OP_NOT_APPLIED;
    CHECK (hc_fsmap_apply (&x, &ops, &z) == 0 && hc_fsmap_check (&z) == 0, "apply");
    CHECK (hc_hint_empty (hc_fsmap_lookup (&z, 5)), "refused advise: nothing there");
    CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&z, 25), HC_FSMAP_UNKNOWN)
           && hc_fsmap_hint_eq (hc_fsmap_lookup (&z, 39), HC_FSMAP_UNKNOWN), "unknown range");
    /* The next diff withdraws the unknown range before advising it. */
    struct hc_fsmap_ops again = { 0 };
    CHECK (hc_fsmap_diff (&z, &y, &again) == 0, "diff again");
    unsigned hb[40] = { 0 };
    for (unsigned k = 0; k < 40; k++) /* the server after the first round */
      hb[k] = k >= 20 ? 99 : 0;        /* 99: unknown */
    for (size_t i = 0; i < again.n; i++)
      for (uint64_t k = again.op[i].start; k < again.op[i].end; k++) {
        if (again.op[i].kind == U)
          hb[k] = 0;
        else {
          CHECK (hb[k] == 0, "advise over a hint at %" PRIu64, k);
          hb[k] = again.op[i].hint.cls;
        }
      }
    CHECK (hb[0] == 2 && hb[25] == 1 && hb[35] == 2, "converges");
    hc_fsmap_ops_free (&again);
  }
  /* An advise applied over a different hint (no unadvise first) merges on
   * the server: unknown. */
  struct hc_fsmap_ops raw = { 0 };
  raw.op = calloc (2, sizeof *raw.op);
  raw.n = raw.cap = 2;
  raw.op[0] = (struct hc_fsmap_op) { .start = 0, .end = 5, .hint = H (2, 0), .kind = A };
  raw.op[1] = (struct hc_fsmap_op) { .start = 20, .end = 25, .hint = H (2, 0), .kind = A };
  CHECK (hc_fsmap_apply (&x, &raw, &z) == 0, "apply raw");
  CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&z, 0), HC_FSMAP_UNKNOWN), "merged: unknown");
  CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&z, 22), H (2, 0)), "same hint: kept");
  CHECK (hc_fsmap_hint_eq (hc_fsmap_lookup (&z, 7), H (1, 0)), "untouched");
  hc_fsmap_ops_free (&raw);
  hc_fsmap_ops_free (&ops);
  hc_fsmap_free (&x);
  hc_fsmap_free (&y);
  hc_fsmap_free (&z);
}

/* ---------------------------------------------------------------------------
 * The ext4 layout
 */

/* Writes len bytes of a pattern to path (fsync'ed). */
static int
write_file (const char *path, size_t len, int seed, bool sync)
{
  static char buf[1 << 16];
  int fd = open (path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0)
    return -1;
  for (size_t i = 0; i < sizeof buf; i++)
    buf[i] = (char) (i * 31 + (size_t) seed);
  for (size_t done = 0; done < len;) {
    size_t n = len - done < sizeof buf ? len - done : sizeof buf;
    if (write (fd, buf, n) != (ssize_t) n)
      return close (fd), -1;
    done += n;
  }
  int rc = sync ? fsync (fd) : 0;
  close (fd);
  return rc;
}

/* Checks every block of [first, last] has class cls in m (offset `off`). */
static unsigned
expect_blocks (const struct hc_fsmap *m, uint64_t off, uint64_t bs, uint64_t first, uint64_t last,
               unsigned cls, const char *what)
{
  unsigned bad = 0;
  for (uint64_t b = first; b <= last; b++) {
    struct hc_hint h = hc_fsmap_lookup (m, off + b * bs);
    struct hc_hint h2 = hc_fsmap_lookup (m, off + b * bs + bs - 1);
    if (h.cls != cls || h2.cls != cls) {
      if (bad++ < 3)
        CHECK (0, "%s: block %" PRIu64 " is class %u, want %u", what, b, h.cls, cls);
    }
  }
  return bad;
}

/* Parses a list of block numbers and ranges ("12 13-20 (ETB0):33 (0-9):15-24")
 * from debugfs; calls fn for each block. */
static unsigned
each_block (const char *text, void (*fn) (void *arg, uint64_t b, bool tree), void *arg)
{
  unsigned n = 0;
  for (const char *p = text; *p;) {
    bool tree = false;
    if (strncmp (p, "TOTAL:", 6) == 0) /* debugfs's count after the list */
      break;
    if (*p == '(') { /* "(ETB0):123", "(IND):801" or "(0-9):15-24" */
      tree = strncmp (p, "(ETB", 4) == 0 || strncmp (p, "(IND)", 5) == 0
             || strncmp (p, "(DIND)", 6) == 0 || strncmp (p, "(TIND)", 6) == 0;
      p = strchr (p, ')');
      if (!p || p[1] != ':')
        break;
      p += 2;
    }
    if (*p >= '0' && *p <= '9') {
      char *end;
      uint64_t a = strtoull (p, &end, 10), z = a;
      if (*end == '-' && end[1] >= '0' && end[1] <= '9')
        z = strtoull (end + 1, &end, 10);
      for (uint64_t b = a; b <= z; b++, n++)
        fn (arg, b, tree);
      p = end;
    } else
      p++;
  }
  return n;
}

struct blockcheck {
  const struct hc_fsmap *m;
  uint64_t off, bs;
  unsigned cls, tree_cls, bad, tree;
  const char *what;
};

static void
check_one (void *arg, uint64_t b, bool tree)
{
  struct blockcheck *c = arg;
  unsigned want = tree ? c->tree_cls : c->cls;
  struct hc_hint h = hc_fsmap_lookup (c->m, c->off + b * c->bs);

  c->tree += tree;
  if (h.cls != want && c->bad++ < 3)
    CHECK (0, "%s: block %" PRIu64 "%s is class %u, want %u", c->what, b, tree ? " (tree)" : "",
           h.cls, want);
}

/* Checks the blocks debugfs lists for `request` (e.g. "blocks /dir"). */
static unsigned
debugfs_blocks (const struct hc_fsmap *m, const char *image, const char *request, unsigned cls,
                unsigned tree_cls, uint64_t bs, unsigned *tree)
{
  static char out[1 << 16];
  struct blockcheck c = { .m = m, .bs = bs, .cls = cls, .tree_cls = tree_cls, .what = request };

  if (sh (out, sizeof out, false, "debugfs -R '%s' %s 2>/dev/null", request, image) != 0) {
    CHECK (0, "debugfs %s failed", request);
    return 0;
  }
  /* With "stat", only the EXTENTS/BLOCKS part lists blocks. */
  const char *list = out;
  const char *ext = strstr (out, "EXTENTS:\n");
  if (!ext)
    ext = strstr (out, "BLOCKS:\n");
  if (strncmp (request, "stat", 4) == 0) {
    if (!ext) {
      CHECK (0, "debugfs %s: no block list in '%.200s'", request, out);
      return 0;
    }
    list = strchr (ext, '\n') + 1;
  }
  unsigned n = each_block (list, check_one, &c);
  if (tree)
    *tree = c.tree;
  return n;
}

/* Checks, for one image, every group's metadata that dumpe2fs lists. */
static void
check_groups (const char *image, const struct hc_fsmap *m, uint64_t off, const char *variant)
{
  static char out[1 << 20];
  uint64_t bs = 0;
  unsigned items = 0, tables = 0, supers = 0;
  bool in_groups = false;

  if (sh (out, sizeof out, false, "dumpe2fs %s 2>/dev/null", image) != 0) {
    CHECK (0, "%s: dumpe2fs failed", variant);
    return;
  }
  for (char *line = strtok (out, "\n"); line; line = strtok (NULL, "\n")) {
    if (strncmp (line, "Block size:", 11) == 0)
      bs = strtoull (line + 11, NULL, 10);
    if (strncmp (line, "Group ", 6) == 0)
      in_groups = true;
    if (!in_groups || strncmp (line, "  ", 2) != 0 || strstr (line, "Free "))
      continue;
    /* "X at N" or "X at N-M", possibly several per line. */
    for (char *p = strstr (line, " at "); p; p = strstr (p + 1, " at ")) {
      char *end;
      uint64_t a = strtoull (p + 4, &end, 10), z = a;
      if (end == p + 4)
        continue;
      if (*end == '-')
        z = strtoull (end + 1, NULL, 10);
      char what[96];
      snprintf (what, sizeof what, "%s: %.40s", variant, line + 2);
      expect_blocks (m, off, bs, a, z, HC_CLASS_METADATA, what);
      items++;
      if (strstr (line, "Inode table at"))
        tables++;
      if (strstr (line, "superblock at") && p < strstr (line, "superblock at") + 14)
        supers++;
    }
  }
  CHECK (bs >= 1024 && tables >= 1 && supers >= 1 && items >= 4, "%s: dumpe2fs parsed: bs %" PRIu64
         ", %u tables, %u superblocks, %u items", variant, bs, tables, supers, items);
}

static int
layout_map (const char *image, uint64_t off, struct hc_fsmap *m, struct hc_fsmap_stats *st)
{
  struct hc_fsmap_builder b = { 0 };
  int rc = hc_fsmap_scan_layout (image, off, &b, st);
  if (rc == 0)
    rc = hc_fsmap_build (&b, m);
  hc_fsmap_builder_free (&b);
  return rc;
}

static int
test_layout (void)
{
  char src[160], image[160], path[256];
  struct hc_fsmap m = { 0 };
  struct hc_fsmap_stats st = { 0 };
  const char *old_path = getenv ("PATH");
  char *new_path;
  int rc;

  /* e2fsprogs lives in /usr/sbin, which a user's PATH may lack. */
  if (!old_path || !*old_path)
    old_path = "/usr/bin:/bin";
  new_path = malloc (strlen (old_path) + sizeof ":/usr/sbin:/sbin");
  if (new_path) {
    sprintf (new_path, "%s:/usr/sbin:/sbin", old_path);
    setenv ("PATH", new_path, 1);
    free (new_path);
  }
  if (!have ("mkfs.ext4") || !have ("debugfs") || !have ("dumpe2fs"))
    return test_skip ("test_fsmap layout", "mkfs.ext4, debugfs or dumpe2fs missing (e2fsprogs)");
  snprintf (src, sizeof src, "%s/src", tmpdir);
  snprintf (image, sizeof image, "%s/fs.img", tmpdir);
  /* A tree: nested directories, a directory of many entries (several
   * blocks), a big file, and a sparse file of 12 extents (an extent tree
   * of depth 1: one leaf block). */
  mkdir (src, 0755);
  snprintf (path, sizeof path, "%s/a", src);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/a/b", src);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/a/b/c", src);
  mkdir (path, 0755);
  snprintf (path, sizeof path, "%s/a/b/c/leaf.txt", src);
  write_file (path, 100, 1, false);
  snprintf (path, sizeof path, "%s/many", src);
  mkdir (path, 0755);
  for (int i = 0; i < 400; i++) {
    snprintf (path, sizeof path, "%s/many/a_file_with_a_long_name_to_fill_blocks_%04d", src, i);
    write_file (path, 3, i, false);
  }
  snprintf (path, sizeof path, "%s/big", src);
  write_file (path, 8 << 20, 7, false);
  snprintf (path, sizeof path, "%s/sparse", src);
  int fd = open (path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  char four[4096];
  memset (four, 'y', sizeof four);
  for (int i = 0; i < 12 && fd >= 0; i++)
    if (pwrite (fd, four, sizeof four, (off_t) i * 65536) != (ssize_t) sizeof four)
      break;
  if (fd >= 0)
    close (fd);

  rc = sh (NULL, 0, true, "mkfs.ext4 -q -F -b 4096 -d %s %s 64M", src, image);
  CHECK (rc == 0, "mkfs.ext4 -d: %d", rc);
  if (rc != 0)
    return 0;

  rc = layout_map (image, 0, &m, &st);
  CHECK (rc == 0, "layout scan: %d %s", rc, st.why);
  if (rc == 0) {
    CHECK (hc_fsmap_check (&m) == 0, "well formed");
    CHECK (st.layout && st.block_size == 4096 && st.groups >= 1 && st.dirs >= 6
           && st.inodes >= 400 && st.dir_errors == 0 && st.inode_errors == 0,
           "stats: bs %u groups %" PRIu64 " dirs %" PRIu64 " inodes %" PRIu64 " errors %" PRIu64,
           st.block_size, st.groups, st.dirs, st.inodes, st.dir_errors);
    CHECK (st.layout_journal >= (1 << 20), "journal bytes %" PRIu64, st.layout_journal);
    check_groups (image, &m, 0, "default");
    unsigned n, tree = 0;
    /* The journal: every block of inode 8. */
    n = debugfs_blocks (&m, image, "stat <8>", HC_CLASS_JOURNAL, HC_CLASS_JOURNAL, 4096, NULL);
    CHECK (n * 4096ull == st.layout_journal || n >= 256, "journal: %u blocks", n);
    /* Directories: all their blocks. */
    n = debugfs_blocks (&m, image, "blocks /many", HC_CLASS_METADATA, 0, 4096, NULL);
    CHECK (n >= 3, "/many has %u blocks (several wanted)", n);
    n = debugfs_blocks (&m, image, "blocks /a/b/c", HC_CLASS_METADATA, 0, 4096, NULL);
    CHECK (n >= 1, "/a/b/c: %u blocks", n);
    n = debugfs_blocks (&m, image, "blocks /", HC_CLASS_METADATA, 0, 4096, NULL);
    CHECK (n >= 1, "/: %u blocks", n);
    /* Regular files: data not hinted; the extent tree's leaf block is. */
    n = debugfs_blocks (&m, image, "blocks /big", 0, 0, 4096, NULL);
    CHECK (n == 2048, "/big: %u data blocks", n);
    n = debugfs_blocks (&m, image, "stat /sparse", 0, HC_CLASS_METADATA, 4096, &tree);
    CHECK (tree == 1 && n == 13, "/sparse: %u blocks, %u tree blocks", n, tree);
    CHECK (st.tree_files >= 1, "files with tree blocks: %" PRIu64, st.tree_files);
    n = debugfs_blocks (&m, image, "blocks /a/b/c/leaf.txt", 0, 0, 4096, NULL);
    CHECK (n == 1, "leaf.txt: %u blocks", n);
  }
  /* An offset shifts everything. */
  struct hc_fsmap shifted = { 0 };
  rc = layout_map (image, 1 << 20, &shifted, &st);
  CHECK (rc == 0 && shifted.n == m.n, "shifted scan");
  for (size_t i = 0; i < shifted.n && i < m.n; i++)
    CHECK (shifted.r[i].start == m.r[i].start + (1 << 20) && shifted.r[i].end == m.r[i].end + (1 << 20)
           && hc_fsmap_hint_eq (shifted.r[i].hint, m.r[i].hint), "range %zu shifted", i);
  hc_fsmap_free (&shifted);
  rc = layout_map (image, UINT64_MAX - 4096, &shifted, &st);
  CHECK (rc == -ERANGE && st.why[0], "offset past 2^64: %d", rc);
  hc_fsmap_free (&shifted);
  hc_fsmap_free (&m);
  hc_fsmap_stats_free (&st);

  /* Group layouts: several groups with backups and reserved GDT blocks,
   * without flex_bg, and meta_bg on 1 KiB blocks. */
  static const struct {
    const char *name, *opts;
  } variants[] = {
    { "4 groups", "-b 4096 -g 4096" },
    { "no flex_bg", "-b 4096 -g 4096 -O ^flex_bg" },
    { "meta_bg, 1 KiB blocks", "-b 1024 -O meta_bg,^resize_inode" },
    { "ext2", "-t ext2 -b 1024" },
  };
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    char img[160];
    snprintf (img, sizeof img, "%s/v%zu.img", tmpdir, i);
    rc = sh (NULL, 0, true, "mkfs.ext4 -q -F %s -d %s %s 64M", variants[i].opts, src, img);
    CHECK (rc == 0, "mkfs %s: %d", variants[i].name, rc);
    if (rc != 0)
      continue;
    rc = layout_map (img, 0, &m, &st);
    CHECK (rc == 0 && st.dir_errors == 0, "%s: scan %d %s", variants[i].name, rc, st.why);
    if (rc == 0) {
      uint64_t bs = st.block_size;
      check_groups (img, &m, 0, variants[i].name);
      char what[64];
      snprintf (what, sizeof what, "blocks /many");
      unsigned n = debugfs_blocks (&m, img, what, HC_CLASS_METADATA, 0, bs, NULL);
      CHECK (n >= 3, "%s: /many has %u blocks", variants[i].name, n);
      if (!strstr (variants[i].opts, "ext2")) {
        n = debugfs_blocks (&m, img, "blocks /big", 0, 0, bs, NULL);
        CHECK (n == (8u << 20) / bs, "%s: /big has %u blocks", variants[i].name, n);
      } else {
        /* Indirect maps: /big's data is not hinted, its indirect blocks
         * (single, double) are metadata. */
        unsigned tree = 0;
        n = debugfs_blocks (&m, img, "stat /big", 0, HC_CLASS_METADATA, bs, &tree);
        CHECK (n > (8u << 20) / bs && tree >= 3, "ext2 /big: %u blocks, %u indirect", n, tree);
        CHECK (st.tree_files >= 1 && st.layout_journal == 0, "ext2: %" PRIu64 " mapped files",
               st.tree_files);
        char out[1 << 15];
        sh (out, sizeof out, false, "debugfs -R 'stat /big' %s 2>/dev/null", img);
        const char *ind = strstr (out, "(IND):");
        CHECK (ind != NULL, "ext2 /big has an indirect block");
        if (ind)
          CHECK (hc_fsmap_lookup (&m, strtoull (ind + 6, NULL, 10) * bs).cls == HC_CLASS_METADATA,
                 "the indirect block is metadata");
        const char *dind = strstr (out, "(DIND):");
        CHECK (dind != NULL, "ext2 /big has a double indirect block");
        if (dind)
          CHECK (hc_fsmap_lookup (&m, strtoull (dind + 7, NULL, 10) * bs).cls == HC_CLASS_METADATA,
                 "the double indirect block is metadata");
      }
    }
    hc_fsmap_free (&m);
    hc_fsmap_stats_free (&st);
    unlink (img);
  }

  /* Damaged file systems: whatever libext2fs stops at, the reason is a
   * message, never a bare libext2fs error code.  Cut short after its
   * metadata; its inode table overwritten with a pattern; its group
   * descriptors garbled. */
  static const char *const damages[] = {
    "truncate -s 2M %s",
    "dd if=/dev/urandom of=%s bs=4096 seek=$(dumpe2fs %s 2>/dev/null | sed -n 's/.*Inode table at \\([0-9]*\\).*/\\1/p' | head -1) count=64 conv=notrunc status=none",
    "dd if=/dev/urandom of=%s bs=4096 seek=1 count=1 conv=notrunc status=none",
  };
  for (unsigned i = 0; i < sizeof damages / sizeof damages[0]; i++) {
    snprintf (path, sizeof path, "%s/damaged.img", tmpdir);
    rc = sh (NULL, 0, true, "mkfs.ext4 -q -F -b 4096 -d %s %s 64M", src, path);
    CHECK (rc == 0, "mkfs for damage %u", i);
    rc = sh (NULL, 0, true, damages[i], path, path);
    CHECK (rc == 0, "damage %u", i);
    rc = layout_map (path, 0, &m, &st);
    CHECK (!strstr (st.why, "libext2fs error"), "damage %u: '%s'", i, st.why);
    if (rc == 0)
      hc_fsmap_free (&m);
    hc_fsmap_stats_free (&st);
    unlink (path);
  }
  return 0;
}

/* What the layout scan refuses, and libext2fs's errors as messages: no
 * image made, so no e2fsprogs needed. */
static void
test_layout_errors (void)
{
  char path[160];
  struct hc_fsmap m = { 0 };
  struct hc_fsmap_stats st = { 0 };
  int fd, rc;

  /* Every libext2fs error has its message (2133571361 is "Can't read next
   * inode", which a scan of a device with a read error stops at). */
  const char *why = hc_fsmap_ext2_why (2133571361);
  CHECK (why && strstr (why, "inode"), "libext2fs error 2133571361: %s", why ? why : "(none)");
  why = hc_fsmap_ext2_why (2133571347);
  CHECK (why && strstr (why, "not an ext2/3/4"), "bad magic: %s", why ? why : "(none)");
  CHECK (hc_fsmap_ext2_why (5) && strcmp (hc_fsmap_ext2_why (5), strerror (5)) == 0, "an errno");

  /* Not ext2/3/4, and no such file. */
  snprintf (path, sizeof path, "%s/zeros", tmpdir);
  fd = open (path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  CHECK (fd >= 0 && ftruncate (fd, 1 << 20) == 0, "zeros");
  close (fd);
  rc = layout_map (path, 0, &m, &st);
  CHECK (rc == -EINVAL && strstr (st.why, "not an ext2/3/4"), "zeros: %d '%s'", rc, st.why);
  hc_fsmap_stats_free (&st);
  snprintf (path, sizeof path, "%s/nothing", tmpdir);
  rc = layout_map (path, 0, &m, &st);
  CHECK (rc == -ENOENT && st.why[0], "missing image: %d '%s'", rc, st.why);
  /* A whole scan fails as a whole. */
  struct hc_fsmap_opts o = { .device = path, .mount = tmpdir };
  CHECK (hc_fsmap_scan (&o, &m, &st) == -ENOENT && m.n == 0, "hc_fsmap_scan with a bad device");
  hc_fsmap_stats_free (&st);
}

/* ---------------------------------------------------------------------------
 * The tree walk
 */
static const char test_rules[] =
  "**/pg_wal/** journal\n"
  "*.idx transaction\n"
  "/backup/** background+dontneed\n";

/* Checks that every extent of path has hint h in m (offset off); returns
 * the first extent's physical offset (or UINT64_MAX). */
static uint64_t
expect_file (const struct hc_fsmap *m, const char *path, uint64_t off, struct hc_hint h)
{
  struct hc_extent_list x;
  uint64_t first = UINT64_MAX;
  int fd = open (path, O_RDONLY);

  if (fd < 0 || hc_file_extents (fd, 0, UINT64_MAX, 0, &x) < 0) {
    CHECK (0, "%s: extents", path);
    if (fd >= 0)
      close (fd);
    return first;
  }
  close (fd);
  CHECK (x.n > 0 && x.unplaced == 0, "%s: %zu extents, %" PRIu64 " unplaced", path, x.n,
         x.unplaced);
  for (size_t i = 0; i < x.n; i++) {
    const struct hc_extent *e = &x.e[i];
    struct hc_hint a = hc_fsmap_lookup (m, off + e->physical);
    struct hc_hint z = hc_fsmap_lookup (m, off + e->physical + e->length - 1);
    CHECK (hc_fsmap_hint_eq (a, h) && hc_fsmap_hint_eq (z, h), "%s extent %zu: %u/%u want %u/%u",
           path, i, a.cls, a.advice, h.cls, h.advice);
    if (i == 0)
      first = e->physical;
  }
  hc_extent_list_free (&x);
  return first;
}

struct dirs_seen {
  unsigned n;
  bool root;
  const char *rootpath;
};

static void
saw_dir (void *arg, const char *path)
{
  struct dirs_seen *d = arg;
  d->n++;
  if (strcmp (path, d->rootpath) == 0)
    d->root = true;
}

/* Returns 0 if FIEMAP places a file written and synced in dir; else why
 * not: -EOPNOTSUPP or -ENOTTY (no FIEMAP there), -ENODATA (no extent with
 * a place), or another errno (an error). */
static int
fiemap_in (const char *dir)
{
  char p[256];
  struct hc_extent_list x = { 0 };
  int fd, rc;

  snprintf (p, sizeof p, "%s/fiemap.probe", dir);
  CHECK (write_file (p, 64 << 10, 1, true) == 0, "wrote %s", p);
  fd = open (p, O_RDONLY);
  rc = fd < 0 ? -errno : hc_file_extents (fd, 0, UINT64_MAX, HC_EXTENTS_SYNC, &x);
  if (rc == 0 && x.n == 0)
    rc = -ENODATA;
  hc_extent_list_free (&x);
  if (fd >= 0)
    close (fd);
  unlink (p);
  return rc;
}

/* For a part that needs FIEMAP in tmpdir: 0 if it is there, test_skip's 77
 * if not, -1 after a failed check. */
static int
need_fiemap (const char *part)
{
  int rc = fiemap_in (tmpdir);

  if (rc == -EOPNOTSUPP || rc == -ENOTTY || rc == -ENODATA)
    return test_skip (part, "no FIEMAP extents in %s: %s", tmpdir, strerror (-rc));
  CHECK (rc == 0, "FIEMAP in %s: %s", tmpdir, strerror (-rc));
  return rc == 0 ? 0 : -1;
}

/* Makes the walk's tree under dir, its files placed (FIEMAP gives their
 * extents). */
static void
make_tree (const char *dir)
{
  char p[256];
  bool ok = true;

  static const char *const dirs[] = { "db", "db/pg_wal", "data", "backup", "backup/old", "misc" };
  mkdir (dir, 0755);
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf (p, sizeof p, "%s/%s", dir, dirs[i]);
    mkdir (p, 0755);
  }
  static const struct {
    const char *name;
    size_t len;
  } files[] = {
    { "db/pg_wal/000001", 256 << 10 }, { "data/t.idx", 64 << 10 },
    { "backup/old/full.tar", 128 << 10 }, { "notes.txt", 32 << 10 },
    { "misc/backup", 16 << 10 },
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf (p, sizeof p, "%s/%s", dir, files[i].name);
    ok &= write_file (p, files[i].len, (int) i, true) == 0;
  }
  snprintf (p, sizeof p, "%s/link.idx", dir);
  ok &= symlink ("data/t.idx", p) == 0; /* symbolic links are not followed */
  snprintf (p, sizeof p, "%s/etc", dir);
  ok &= symlink ("/etc", p) == 0;
  snprintf (p, sizeof p, "%s/notes.txt", dir);
  struct hc_extent_list x;
  int fd = open (p, O_RDONLY);
  ok &= fd >= 0 && hc_file_extents (fd, 0, UINT64_MAX, 0, &x) == 0 && x.n > 0;
  if (fd >= 0) {
    hc_extent_list_free (&x);
    close (fd);
  }
  CHECK (ok, "the tree under %s: files written, links made, extents found", dir);
}

static int
test_tree (void)
{
  char dir[128], p[256];
  struct hc_fsrules rs = { 0 };
  struct hc_fsmap m = { 0 };
  struct hc_fsmap_stats st = { 0 };
  struct dirs_seen seen = { 0 };

  int rc = need_fiemap ("test_fsmap tree");

  if (rc)
    return rc > 0 ? rc : 0;
  snprintf (dir, sizeof dir, "%s/tree", tmpdir);
  make_tree (dir);
  CHECK (hc_fsrules_parse (test_rules, strlen (test_rules), &rs, NULL) == 0, "rules");
  seen.rootpath = dir;
  struct hc_fsmap_opts o = { .mount = dir, .rules = &rs, .top = true, .on_dir = saw_dir,
                             .arg = &seen };
  rc = hc_fsmap_scan (&o, &m, &st);
  CHECK (rc == 0, "scan: %d %s", rc, st.why);
  CHECK (hc_fsmap_check (&m) == 0, "well formed");
  CHECK (st.walk_dirs == 7 && st.walk_files == 5 && st.matched == 3 && st.pending == 0
         && st.unreadable_files == 0 && st.unreadable_dirs == 0 && !st.layout,
         "stats: dirs %" PRIu64 " files %" PRIu64 " matched %" PRIu64 " pending %" PRIu64,
         st.walk_dirs, st.walk_files, st.matched, st.pending);
  CHECK (seen.n == 7 && seen.root, "on_dir: %u calls, root %d", seen.n, seen.root);
  snprintf (p, sizeof p, "%s/db/pg_wal/000001", dir);
  expect_file (&m, p, 0, H (HC_CLASS_JOURNAL, 0));
  snprintf (p, sizeof p, "%s/data/t.idx", dir);
  expect_file (&m, p, 0, H (HC_CLASS_TRANSACTION, 0));
  snprintf (p, sizeof p, "%s/backup/old/full.tar", dir);
  expect_file (&m, p, 0, H (HC_CLASS_BACKGROUND, HC_ADVICE_DONTNEED));
  snprintf (p, sizeof p, "%s/notes.txt", dir);
  expect_file (&m, p, 0, H (0, 0));
  snprintf (p, sizeof p, "%s/misc/backup", dir);
  expect_file (&m, p, 0, H (0, 0));
  CHECK (st.bytes[HC_CLASS_JOURNAL] == 256 << 10 && st.bytes[HC_CLASS_TRANSACTION] == 64 << 10
         && st.bytes[HC_CLASS_BACKGROUND] == 128 << 10, "bytes per class");
  CHECK (st.files[HC_CLASS_JOURNAL] == 1 && st.top[HC_CLASS_JOURNAL][0].path
         && strcmp (st.top[HC_CLASS_JOURNAL][0].path, "db/pg_wal/000001") == 0
         && st.top[HC_CLASS_JOURNAL][0].bytes == 256 << 10 && !st.top[HC_CLASS_JOURNAL][1].path,
         "largest journal file");

  /* With an offset. */
  o.offset = 1ull << 30;
  o.on_dir = NULL;
  CHECK (hc_fsmap_scan (&o, &m, &st) == 0, "scan with offset");
  snprintf (p, sizeof p, "%s/data/t.idx", dir);
  expect_file (&m, p, 1ull << 30, H (HC_CLASS_TRANSACTION, 0));

  /* Data in delayed allocation is pending, and placed at a later scan. */
  snprintf (p, sizeof p, "%s/data/late.idx", dir);
  write_file (p, 1 << 20, 9, false);
  o.offset = 0;
  CHECK (hc_fsmap_scan (&o, &m, &st) == 0, "scan with a late file");
  CHECK (st.pending <= 1 && st.matched == 4, "pending %" PRIu64, st.pending);
  if (st.pending == 0)
    printf ("test_fsmap: the late file was written back already; pending not observed\n");
  int fd = open (p, O_RDONLY);
  CHECK (fd >= 0 && fsync (fd) == 0, "fsync");
  close (fd);
  CHECK (hc_fsmap_scan (&o, &m, &st) == 0 && st.pending == 0, "rescan");
  expect_file (&m, p, 0, H (HC_CLASS_TRANSACTION, 0));
  unlink (p);

  /* No rules: nothing hinted, files still counted; a missing mount fails. */
  struct hc_fsmap_opts none = { .mount = dir };
  CHECK (hc_fsmap_scan (&none, &m, &st) == 0 && m.n == 0 && st.walk_files == 5, "no rules");
  snprintf (p, sizeof p, "%s/absent", tmpdir);
  none.mount = p;
  CHECK (hc_fsmap_scan (&none, &m, &st) == -ENOENT && strstr (st.why, "absent"), "missing mount");
  hc_fsmap_free (&m);
  hc_fsmap_stats_free (&st);
  hc_fsrules_free (&rs);
  return 0;
}

/* ---------------------------------------------------------------------------
 * The daemon
 */

/* Runs the tool with arguments (through sh); captures stdout and stderr. */
static int __attribute__ ((format (printf, 3, 4)))
run_tool (char *out, size_t len, const char *fmt, ...)
{
  char args[4096];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (args, sizeof args, fmt, ap);
  va_end (ap);
  return sh (out, len, true, "%s %s", tool, args);
}

/* The physical offset of a file's first extent (flushing it first). */
static uint64_t
phys_of (const char *path)
{
  struct hc_extent_list x;
  uint64_t p = UINT64_MAX;
  int fd = open (path, O_RDONLY);

  if (fd >= 0 && hc_file_extents (fd, 0, UINT64_MAX, HC_EXTENTS_SYNC, &x) == 0) {
    if (x.n)
      p = x.e[0].physical;
    hc_extent_list_free (&x);
  }
  if (fd >= 0)
    close (fd);
  return p;
}

/* Waits up to 10 s until the volume's hint at off is h. */
static bool
wait_hint (hc_volume *v, uint64_t off, struct hc_hint h)
{
  for (int i = 0; i < 200; i++) {
    struct hc_hint got = hc_volume_range_hint (v, off);
    if (got.cls == h.cls && got.advice == h.advice)
      return true;
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep (&ts, NULL);
  }
  return false;
}

static int
test_hintd (void)
{
  char rules[128];
  static char out[1 << 16];
  int rc;

  if (!tool[0])
    return test_skip ("test_fsmap hintd", "the hintcache tool is not next to the tests' "
                      "directory (../hintcache)");
  /* Usage, --show-rules, bad rules: no server needed. */
  rc = run_tool (out, sizeof out, "hintd --show-rules");
  CHECK (rc == 0 && strstr (out, "**/pg_wal/**") && strstr (out, "background+dontneed"),
         "--show-rules: %d", rc);
  rc = run_tool (out, sizeof out, "hintd --help");
  CHECK (rc == 0 && strstr (out, "demote on arrival") && strstr (out, "SIGTERM"), "--help: %d", rc);
  rc = run_tool (out, sizeof out, "hintd --socket /nonexistent");
  CHECK (rc == 2 && strstr (out, "--mount"), "no --mount: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "hintd --mount %s", tmpdir);
  CHECK (rc == 2 && strstr (out, "--socket"), "no --socket: %d '%s'", rc, out);
  rc = run_tool (out, sizeof out, "hintd --mount %s --dry-run --offset 12Q", tmpdir);
  CHECK (rc == 2, "bad offset: %d", rc);
  rc = run_tool (out, sizeof out, "hintd --mount %s --dry-run --interval 0", tmpdir);
  CHECK (rc == 2, "bad interval: %d", rc);
  snprintf (rules, sizeof rules, "%s/bad.rules", tmpdir);
  FILE *f = fopen (rules, "w");
  fputs ("*.idx transaction\n*.x frobnicate\n", f);
  fclose (f);
  rc = run_tool (out, sizeof out, "hintd --mount %s --dry-run --rules %s", tmpdir, rules);
  CHECK (rc == 2 && strstr (out, "bad.rules:2:") && strstr (out, "frobnicate"),
         "bad rules: %d '%s'", rc, out);
  snprintf (rules, sizeof rules, "%s/hintd.rules", tmpdir);
  f = fopen (rules, "w");
  fputs (test_rules, f);
  fclose (f);
  rc = run_tool (out, sizeof out, "hintd --show-rules --rules %s", rules);
  CHECK (rc == 0 && strstr (out, "/backup/**") && strstr (out, "background+dontneed"),
         "--show-rules --rules: '%s'", out);
  return 0;
}

static int
test_daemon (void)
{
  static const char part[] = "test_fsmap daemon";
  char dir[128], sock[128], slow[128], rules[128], log[128], p[256], p2[256];
  static char out[1 << 16];
  hc_tier *fast = NULL, *slowt = NULL;
  hc_volume *v = NULL;
  hc_control *srv = NULL;
  char why[256];
  int rc;

  if (!tool[0])
    return test_skip (part, "the hintcache tool is not next to the tests' directory "
                      "(../hintcache)");
  rc = need_fiemap (part);
  if (rc)
    return rc > 0 ? rc : 0;
  snprintf (rules, sizeof rules, "%s/hintd.rules", tmpdir);
  FILE *f = fopen (rules, "w");
  CHECK (f && fputs (test_rules, f) >= 0 && fclose (f) == 0, "wrote %s", rules);
  snprintf (dir, sizeof dir, "%s/dtree", tmpdir);
  make_tree (dir);
  /* --dry-run */
  rc = run_tool (out, sizeof out, "hintd --mount %s --rules %s --dry-run", dir, rules);
  CHECK (rc == 0 && strstr (out, "class map:") && strstr (out, "journal")
         && strstr (out, "db/pg_wal/000001") && strstr (out, "transaction")
         && strstr (out, "no --device"), "--dry-run: %d '%s'", rc, out);

  /* A volume over a sparse slow tier large enough for the files' offsets. */
  uint64_t wal, idx, tar, notes, vsize = 1ull << 40;
  snprintf (p, sizeof p, "%s/db/pg_wal/000001", dir);
  wal = phys_of (p);
  snprintf (p, sizeof p, "%s/data/t.idx", dir);
  idx = phys_of (p);
  snprintf (p, sizeof p, "%s/backup/old/full.tar", dir);
  tar = phys_of (p);
  snprintf (p, sizeof p, "%s/notes.txt", dir);
  notes = phys_of (p);
  uint64_t top = wal;
  if (idx > top) top = idx;
  if (tar > top) top = tar;
  if (notes > top) top = notes;
  CHECK (top != UINT64_MAX, "extents for the daemon's files");
  if (top == UINT64_MAX)
    return 0;
  if (top + (64 << 20) > vsize / 2)
    vsize = 2 * (top + (64 << 20));
  vsize = (vsize + (1 << 20) - 1) & ~(uint64_t) ((1 << 20) - 1);
  snprintf (slow, sizeof slow, "%s/slow.img", tmpdir);
  int fd = open (slow, O_CREAT | O_RDWR | O_TRUNC, 0600);
  CHECK (fd >= 0, "create %s: %s", slow, strerror (errno));
  if (fd < 0)
    return 0;
  if (ftruncate (fd, (off_t) vsize) < 0) {
    int e = errno;
    close (fd);
    unlink (slow);
    return test_skip (part, "cannot make a sparse %" PRIu64 "-byte file in %s: %s", vsize, tmpdir,
                      strerror (e));
  }
  close (fd);
  struct hc_format_opts fo = { 0 };
  struct hc_open_opts oo = { .no_cleaner = true };
  CHECK (hc_tier_new_memory (4 << 20, &fast) == 0 && hc_tier_open_file (slow, 0, &slowt) == 0,
         "tiers");
  rc = hc_volume_format (fast, slowt, &fo, why, sizeof why);
  if (rc == 0)
    rc = hc_volume_open (fast, slowt, &oo, &v, why, sizeof why);
  CHECK (rc == 0, "volume: %s", why);
  snprintf (sock, sizeof sock, "%s/ctl.sock", tmpdir);
  if (rc == 0) {
    rc = hc_control_start (v, sock, &srv, why, sizeof why);
    CHECK (rc == 0, "server: %s", why);
  }
  if (rc < 0)
    goto out;

  /* --once: every matching file hinted with its rule, the rest not. */
  rc = run_tool (out, sizeof out, "hintd --mount %s --socket %s --rules %s --once", dir, sock,
                 rules);
  CHECK (rc == 0 && strstr (out, "scan 1") && strstr (out, "sent 3 advise, 0 unadvise")
         && strstr (out, "no --device"), "--once: %d '%s'", rc, out);
  CHECK (hc_volume_range_hint (v, wal).cls == HC_CLASS_JOURNAL, "wal is journal");
  CHECK (hc_volume_range_hint (v, idx).cls == HC_CLASS_TRANSACTION, "idx is transaction");
  struct hc_hint th = hc_volume_range_hint (v, tar);
  CHECK (th.cls == HC_CLASS_BACKGROUND && th.advice == HC_ADVICE_DONTNEED, "tar is background");
  CHECK (hc_volume_range_hint (v, notes).cls == 0, "notes.txt not hinted");
  /* The same through the socket, as the brief's `hint OFF`. */
  hc_control_client *c;
  char reply[HC_CONTROL_LINE], line[64];
  CHECK (hc_control_connect (sock, &c, why, sizeof why) == 0, "connect: %s", why);
  snprintf (line, sizeof line, "hint %" PRIu64, wal);
  CHECK (hc_control_request (c, line, reply, sizeof reply) == 0 && strcmp (reply, "journal") == 0,
         "hint OFF: '%s'", reply);
  hc_control_close (c);
  /* With an offset, the ranges move. */
  rc = run_tool (out, sizeof out, "hintd --mount %s --socket %s --rules %s --once --offset 64M "
                 "--quiet", dir, sock, rules);
  CHECK (rc == 0 && out[0] == '\0', "--once --offset --quiet: %d '%s'", rc, out);
  CHECK (hc_volume_range_hint (v, wal + (64 << 20)).cls == HC_CLASS_JOURNAL, "offset 64M");
  rc = run_tool (out, sizeof out, "hintd --mount %s --socket %s/none --rules %s --once", dir,
                 tmpdir, rules);
  CHECK (rc == 1, "no server: %d '%s'", rc, out);

  /* In the background: withdrawals and changes follow the files.  A daemon
   * that starts assumes the server holds nothing from it, so clear what the
   * runs above left. */
  rc = hc_volume_unadvise (v, 0, hc_volume_size (v));
  CHECK (rc == 0, "clear: %s (volume %" PRIu64 " bytes)", strerror (-rc), hc_volume_size (v));
  snprintf (log, sizeof log, "%s/hintd.log", tmpdir);
  pid_t pid = fork ();
  if (pid == 0) {
    int lfd = open (log, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    dup2 (lfd, 1);
    dup2 (lfd, 2);
    execl (tool, tool, "hintd", "--mount", dir, "--socket", sock, "--rules", rules,
           "--interval", "1", "--verbose", (char *) NULL);
    _exit (127);
  }
  CHECK (pid > 0, "fork");
  if (pid < 0)
    goto out;
  /* It starts by sending everything. */
  CHECK (wait_hint (v, idx, H (HC_CLASS_TRANSACTION, 0)), "started");
  CHECK (wait_hint (v, tar, H (HC_CLASS_BACKGROUND, HC_ADVICE_DONTNEED)), "started: tar");
  CHECK (wait_hint (v, wal, H (HC_CLASS_JOURNAL, 0)), "started: wal");
  /* Delete one file, move one into another rule, one into a rule. */
  snprintf (p, sizeof p, "%s/data/t.idx", dir);
  CHECK (unlink (p) == 0, "unlink");
  snprintf (p, sizeof p, "%s/backup/old/full.tar", dir);
  snprintf (p2, sizeof p2, "%s/db/pg_wal/full.tar", dir);
  CHECK (rename (p, p2) == 0, "rename into pg_wal");
  snprintf (p, sizeof p, "%s/notes.txt", dir);
  snprintf (p2, sizeof p2, "%s/notes.idx", dir);
  CHECK (rename (p, p2) == 0, "rename to .idx");
  CHECK (wait_hint (v, idx, H (0, 0)), "deleted file withdrawn");
  /* background+dontneed → journal: the old advice must be gone too. */
  CHECK (wait_hint (v, tar, H (HC_CLASS_JOURNAL, 0)), "changed hint: %u/%u",
         hc_volume_range_hint (v, tar).cls, hc_volume_range_hint (v, tar).advice);
  CHECK (wait_hint (v, notes, H (HC_CLASS_TRANSACTION, 0)), "renamed into a rule");
  /* Moved out of its rule, and truncated. */
  snprintf (p, sizeof p, "%s/db/pg_wal/full.tar", dir);
  snprintf (p2, sizeof p2, "%s/full.tar", dir);
  CHECK (rename (p, p2) == 0, "rename out");
  snprintf (p, sizeof p, "%s/db/pg_wal/000001", dir);
  CHECK (truncate (p, 0) == 0, "truncate");
  CHECK (wait_hint (v, tar, H (0, 0)), "moved out of its rule: withdrawn");
  CHECK (wait_hint (v, wal, H (0, 0)), "truncated: withdrawn");
  /* The server goes away and comes back: the daemon reconnects. */
  hc_control_stop (srv);
  srv = NULL;
  rc = hc_control_start (v, sock, &srv, why, sizeof why);
  CHECK (rc == 0, "restart: %s", why);
  snprintf (p, sizeof p, "%s/notes.idx", dir);
  snprintf (p2, sizeof p2, "%s/notes.txt", dir);
  CHECK (rename (p, p2) == 0, "rename back");
  CHECK (wait_hint (v, notes, H (0, 0)), "after a server restart");
  /* SIGTERM: exit 0, hints stay. */
  snprintf (p, sizeof p, "%s/db/pg_wal/new", dir);
  write_file (p, 64 << 10, 3, true);
  uint64_t fresh = phys_of (p);
  CHECK (wait_hint (v, fresh, H (HC_CLASS_JOURNAL, 0)), "a new file");
  kill (pid, SIGTERM);
  int status = 0;
  CHECK (waitpid (pid, &status, 0) == pid && WIFEXITED (status) && WEXITSTATUS (status) == 0,
         "exit on SIGTERM: status 0x%x", status);
  CHECK (hc_volume_range_hint (v, fresh).cls == HC_CLASS_JOURNAL, "hints stay after exit");
  if (sh (out, sizeof out, false, "cat %s", log) == 0) {
    CHECK (strstr (out, "scan 1") && strstr (out, "unadvise ") && strstr (out, "advise ")
           && strstr (out, "exiting"), "log");
    if (test_failures)
      fprintf (stderr, "--- daemon log ---\n%s---\n", out);
  }

out:
  hc_control_stop (srv);
  if (v)
    CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (slowt);
  unlink (slow);
  return 0;
}

/* Mutants of the default rules: each parses or is refused with a line and
 * a reason. */
static void
test_rules_mutants (void)
{
  const char *text = hc_fsrules_default_text ();
  size_t len = strlen (text);
  unsigned char *buf = malloc (2 * len + 64);
  unsigned parsed = 0;

  for (unsigned m = 0; m < 1000 && buf; m++) {
    struct hc_fsrules rs = { 0 };
    struct hc_parse_error err = { 0 };
    memcpy (buf, text, len);
    size_t n = test_mutate (buf, len, 2 * len + 64);
    int rc = hc_fsrules_parse ((const char *) buf, n, &rs, &err);
    if (rc == 0) {
      parsed++;
      hc_fsrules_match (&rs, "var/lib/postgresql/base/1/2");
    } else
      CHECK (rc == -EINVAL && err.line > 0 && err.msg[0], "mutant %u: rc %d, line %u '%s'", m, rc,
             err.line, err.msg);
    hc_fsrules_free (&rs);
  }
  free (buf);
  CHECK (parsed > 0, "some rules mutants still parse");
}

int
main (int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*run) (void);
  } parts[] = { { "layout", test_layout }, { "tree", test_tree }, { "hintd", test_hintd },
                { "daemon", test_daemon } };
  const char *part = argc > 1 ? argv[1] : NULL;
  char self[PATH_MAX], name[64];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  int rc = 0;
  size_t i;

  for (i = 0; part && i < sizeof parts / sizeof parts[0]; i++)
    if (strcmp (part, parts[i].name) == 0)
      break;
  if (argc > 2 || (part && i == sizeof parts / sizeof parts[0])) {
    fprintf (stderr, "usage: test_fsmap [layout | tree | hintd | daemon]\n");
    return 2;
  }

  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr (self, '/');
    if (slash) {
      *slash = '\0';
      snprintf (tool, sizeof tool, "%s/../hintcache", self);
      if (access (tool, X_OK) != 0)
        tool[0] = '\0';
    }
  }
  if (snprintf (tmpdir, sizeof tmpdir, "%s/test_fsmap.XXXXXX", test_tmp ()) >= (int) sizeof tmpdir
      || !mkdtemp (tmpdir)) {
    fprintf (stderr, "test_fsmap: cannot make a directory in %s: %s\n", test_tmp (),
             strlen (test_tmp ()) > 60 ? "its path is too long" : strerror (errno));
    return 1;
  }
  if (part) {
    snprintf (name, sizeof name, "test_fsmap %s", part);
    rc = parts[i].run ();
  } else {
    snprintf (name, sizeof name, "test_fsmap");
    test_rules_table ();
    test_rules_parse ();
    test_rules_default ();
    test_rules_mutants ();
    test_builder ();
    test_diff_random ();
    test_diff_cases ();
    test_layout_errors ();
  }
  char cmd[160];
  snprintf (cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system (cmd) != 0)
    fprintf (stderr, "test_fsmap: could not remove %s\n", tmpdir);
  return rc ? rc : test_exit (name);
}
