/* Path rules of the hint daemon, and the walk of a mounted tree that
 * applies them (see fsmap.h for the rule syntax).
 *
 * A pattern is compiled into its components; a pattern that is not
 * anchored gets a leading "**" component, which is what makes a bare name
 * match in any directory and a pattern with a '/' match a tail of the path.
 * Matching is the usual wildcard loop with one backtracking point, twice
 * over: over components, where "**" is the wildcard, and inside a
 * component, where '*' is.  So it takes at most pattern × path steps, and
 * is cheap next to the FIEMAP call a matching file costs.
 *
 * The walk opens each directory relative to its parent (openat, never
 * following symbolic links), checks that it is on the mount's file system,
 * reads it once and recurses, holding one descriptor per level (at most
 * MAX_DEPTH levels).  Only regular files a rule matches are opened; their
 * extents come from FIEMAP without a flush, so data still in delayed
 * allocation is counted as pending rather than written back.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsmap/fsmap.h"
#include "hintcache/extents.h"
#include "util.h"

#define MAX_DEPTH 1000      /* directory levels the walk descends */
#define MAX_RULES_FILE (1u << 20)

static const char default_rules[] =
  "# Built-in rules of `hintcache hintd`: PATTERN HINT, one per line; the first\n"
  "# rule that matches a regular file's path (relative to the mount point) gives\n"
  "# its data blocks the hint.  The file system's own metadata and journal come\n"
  "# from the layout scan (--device), whatever these rules say.\n"
  "#\n"
  "# Write-ahead and redo logs: written once, read back only at recovery.\n"
  "**/pg_wal/**            journal\n"
  "**/pg_xlog/**           journal\n"
  "**/ib_logfile*          journal\n"
  "**/#innodb_redo/**      journal\n"
  "*-wal                   journal\n"
  "*-journal               journal\n"
  "*.wal                   journal\n"
  "# Index files: small, read at random on every lookup.\n"
  "*.idx                   transaction\n"
  "# Backups and dumps: written and read once, at idle.\n"
  "/backup/**              background+dontneed\n"
  "/backups/**             background+dontneed\n"
  "*.bak                   background+dontneed\n"
  "# Swap files.\n"
  "/swapfile               paging\n"
  "/swap.img               paging\n"
  "# Large media and disk images: read sequentially, once.\n"
  "*.iso                   streaming\n"
  "*.mp4                   streaming\n"
  "*.mkv                   streaming\n";

const char *
hc_fsrules_default_text (void)
{
  return default_rules;
}

/* ---------------------------------------------------------------------------
 * Parsing
 */
static bool
blank (char c)
{
  return c == ' ' || c == '\t';
}

static void
rule_free (struct hc_fsrule *r)
{
  free (r->pattern);
  for (size_t i = 0; i < r->nseg; i++)
    free (r->seg[i]);
  free (r->seg);
  memset (r, 0, sizeof *r);
}

void
hc_fsrules_free (struct hc_fsrules *rs)
{
  if (!rs)
    return;
  for (size_t i = 0; i < rs->n; i++)
    rule_free (&rs->r[i]);
  free (rs->r);
  memset (rs, 0, sizeof *rs);
}

/* Appends a copy of s[len] to r's components.  Returns 0 or -ENOMEM. */
static int
add_seg (struct hc_fsrule *r, const char *s, size_t len)
{
  char **seg = realloc (r->seg, (r->nseg + 1) * sizeof *seg);
  if (!seg)
    return -ENOMEM;
  r->seg = seg;
  if (!(seg[r->nseg] = strndup (s, len)))
    return -ENOMEM;
  r->nseg++;
  return 0;
}

/* Compiles r->pattern into r->seg.  Returns 0, -EINVAL with err filled, or
 * -ENOMEM. */
static int
compile (struct hc_fsrule *r, struct hc_parse_error *err)
{
  const char *p = r->pattern;
  bool anchored = *p == '/';
  int rc;

  if (anchored)
    p++;
  if (!*p) {
    hc_parse_fail (err, "pattern '%s' names nothing", r->pattern);
    return -EINVAL;
  }
  if (!anchored && (rc = add_seg (r, "**", 2)) < 0)
    return rc;
  for (;;) {
    size_t n = 0;
    while (p[n] && p[n] != '/') {
      if (p[n] == '\\') {
        if (!p[n + 1]) {
          hc_parse_fail (err, "pattern '%s' ends in a lone '\\'", r->pattern);
          return -EINVAL;
        }
        n++;
      }
      n++;
    }
    if (n == 0) {
      hc_parse_fail (err, p[0] ? "pattern '%s' has an empty component"
                     : "pattern '%s' ends in '/' (it would match directories only; "
                       "write DIR/** for the files under DIR)", r->pattern);
      return -EINVAL;
    }
    if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
      hc_parse_fail (err, "pattern '%s' has a '.' or '..' component", r->pattern);
      return -EINVAL;
    }
    /* A leading "**" already does what the implied one would. */
    bool twostar = n == 2 && p[0] == '*' && p[1] == '*';
    if (!(twostar && r->nseg == 1 && !anchored && p == r->pattern))
      if ((rc = add_seg (r, p, n)) < 0)
        return rc;
    p += n;
    if (!*p)
      break;
    p++;
  }
  return 0;
}

/* Reads a rule's HINT (hintd's rules). */
static int
parse_hint (const char *hint, struct hc_fsrule *r, struct hc_parse_error *err)
{
  if (hc_hint_parse (hint, &r->hint) < 0) {
    hc_parse_fail (err, "'%.64s' is not a hint (a class and/or an advice: metadata, journal, "
                   "transaction, background+dontneed …)", hint);
    return -EINVAL;
  }
  if (r->hint.cls == HC_CLASS_UNCLASSIFIED && r->hint.advice == HC_ADVICE_NONE) {
    hc_parse_fail (err, "'%.64s' names no class and no advice", hint);
    return -EINVAL;
  }
  if (r->hint.flags) {
    hc_parse_fail (err, "'%.64s' has flags: a range hint stores a class and an advice only",
                   hint);
    return -EINVAL;
  }
  return 0;
}

/* Parses one line (NUL-terminated, no newline) into r (zeroed by the
 * caller), its right-hand side read by value (NULL: a hint).  Returns 1 for
 * a rule, 0 for a blank or comment line, -EINVAL with err filled, or
 * -ENOMEM. */
static int
parse_line (char *line, hc_fsrule_value_fn *value, struct hc_fsrule *r,
            struct hc_parse_error *err)
{
  char *p = line, *pat, *hint;
  size_t n = 0;
  int rc;

  while (blank (*p))
    p++;
  if (!*p || *p == '#')
    return 0;
  pat = p;
  while (pat[n] && !blank (pat[n])) {
    if (pat[n] == '\\' && pat[n + 1])
      n++;
    n++;
  }
  hint = pat + n;
  /* A comment: '#' after a blank. */
  for (char *q = hint; *q; q++)
    if (*q == '#' && blank (q[-1])) {
      *q = '\0';
      break;
    }
  while (blank (*hint))
    hint++;
  size_t hl = strlen (hint);
  while (hl > 0 && blank (hint[hl - 1]))
    hint[--hl] = '\0';
  if (!(r->pattern = strndup (pat, n)))
    return -ENOMEM;
  if ((rc = compile (r, err)) < 0)
    return rc;
  if (!*hint) {
    hc_parse_fail (err, "'%s': missing %s after the pattern (PATTERN %s)", r->pattern,
                   value ? "VALUE" : "HINT", value ? "VALUE" : "HINT");
    return -EINVAL;
  }
  if (value)
    rc = value (hint, &r->value, err);
  else
    rc = parse_hint (hint, r, err);
  return rc < 0 ? rc : 1;
}

int
hc_fsrules_parse (const char *text, size_t len, struct hc_fsrules *out, struct hc_parse_error *err)
{
  return hc_fsrules_parse_as (text, len, NULL, out, err);
}

int
hc_fsrules_parse_as (const char *text, size_t len, hc_fsrule_value_fn *value,
                     struct hc_fsrules *out, struct hc_parse_error *err)
{
  struct hc_fsrules rs = { 0 };
  size_t pos = 0;
  unsigned lineno = 0;
  int rc = 0;

  if (err)
    memset (err, 0, sizeof *err);
  while (pos < len && rc == 0) {
    const char *nl = memchr (text + pos, '\n', len - pos);
    size_t n = nl ? (size_t) (nl - (text + pos)) : len - pos;
    struct hc_fsrule r = { 0 };
    char *line;

    lineno++;
    if (memchr (text + pos, '\0', n)) {
      hc_parse_fail (err, "a NUL byte");
      rc = -EINVAL;
    } else if (!(line = strndup (text + pos, n))) {
      rc = -ENOMEM;
    } else {
      if (n > 0 && line[n - 1] == '\r')
        line[n - 1] = '\0';
      rc = parse_line (line, value, &r, err);
      free (line);
      if (rc == 1) {
        struct hc_fsrule *nr = realloc (rs.r, (rs.n + 1) * sizeof *nr);
        if (!nr)
          rc = -ENOMEM;
        else {
          r.line = lineno;
          rs.r = nr;
          rs.r[rs.n++] = r;
          memset (&r, 0, sizeof r);
          rc = 0;
        }
      }
      rule_free (&r);
    }
    if (rc == -EINVAL && err)
      err->line = lineno;
    pos += n + 1;
  }
  if (rc < 0) {
    hc_fsrules_free (&rs);
    return rc;
  }
  hc_fsrules_free (out);
  *out = rs;
  return 0;
}

int
hc_fsrules_load_file (const char *path, struct hc_fsrules *out, struct hc_parse_error *err)
{
  return hc_fsrules_load_file_as (path, NULL, out, err);
}

int
hc_fsrules_load_file_as (const char *path, hc_fsrule_value_fn *value, struct hc_fsrules *out,
                         struct hc_parse_error *err)
{
  char *text;
  size_t len;
  int rc;

  if (err)
    memset (err, 0, sizeof *err);
  if ((rc = hc_read_small_file (path, MAX_RULES_FILE, &text, &len)) < 0)
    return rc;
  rc = hc_fsrules_parse_as (text, len, value, out, err);
  free (text);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Matching
 */

/* A path component: s[len]. */
struct comp {
  const char *s;
  size_t len;
};

/* Matches one component against one pattern component ('*', '?', '\'). */
static bool
glob1 (const char *p, const char *s, size_t len)
{
  const char *star_p = NULL;
  size_t i = 0, star_i = 0;

  while (i < len) {
    if (*p == '*') {
      while (*p == '*')
        p++;
      star_p = p;
      star_i = i;
      continue;
    }
    if (*p == '?') {
      p++;
      i++;
      continue;
    }
    if (*p) {
      char lit = *p;
      size_t step = 1;
      if (lit == '\\' && p[1]) {
        lit = p[1];
        step = 2;
      }
      if (lit == s[i]) {
        p += step;
        i++;
        continue;
      }
    }
    if (!star_p)
      return false;
    p = star_p;
    i = ++star_i;
  }
  while (*p == '*')
    p++;
  return *p == '\0';
}

static bool
twostar (const char *seg)
{
  return seg[0] == '*' && seg[1] == '*' && seg[2] == '\0';
}

/* Matches pattern components seg[np] against path components c[nc].  A
 * "**" is to components what '*' is to characters, so the same loop as
 * glob1's serves, with one backtracking point: the latest "**" takes one
 * more component whenever what follows it fails.  Trying every split at
 * every "**" instead is exponential in their number ("**" twelve times
 * over against a deep path never finished). */
static bool
match_segs (char *const *seg, size_t np, const struct comp *c, size_t nc)
{
  size_t p = 0, i = 0, star_p = 0, star_i = 0;
  bool star = false;

  while (i < nc) {
    if (p < np && twostar (seg[p])) {
      if (p + 1 == np)
        return true; /* a trailing "**": one or more, and one is left */
      star = true;
      star_p = ++p;
      star_i = i;
      continue;
    }
    if (p < np && glob1 (seg[p], c[i].s, c[i].len)) {
      p++, i++;
      continue;
    }
    if (!star)
      return false;
    p = star_p;
    i = ++star_i;
  }
  /* The path is used up: what is left may be "**"s that match nothing,
   * but not a trailing one. */
  while (p + 1 < np && twostar (seg[p]))
    p++;
  return p == np;
}

int
hc_fsrules_match (const struct hc_fsrules *rs, const char *path)
{
  struct comp stack[64], *c = stack;
  size_t nc = 0, cap = sizeof stack / sizeof stack[0];
  int found = -1;

  while (*path == '/')
    path++;
  if (!*path || rs->n == 0)
    return -1;
  for (const char *p = path; *p;) {
    size_t n = strcspn (p, "/");
    if (n > 0) {
      if (nc == cap) {
        struct comp *nc2 = malloc (2 * cap * sizeof *nc2);
        if (!nc2) {
          found = -1;
          goto out;
        }
        memcpy (nc2, c, nc * sizeof *c);
        if (c != stack)
          free (c);
        c = nc2;
        cap *= 2;
      }
      c[nc++] = (struct comp) { p, n };
    }
    p += n;
    while (*p == '/')
      p++;
  }
  for (size_t i = 0; i < rs->n; i++)
    if (match_segs (rs->r[i].seg, rs->r[i].nseg, c, nc)) {
      found = (int) i;
      break;
    }
out:
  if (c != stack)
    free (c);
  return found;
}

/* ---------------------------------------------------------------------------
 * The walk
 */
struct walk {
  const struct hc_fsmap_opts *o;
  struct hc_fsmap_builder *b;
  struct hc_fsmap_stats *st;
  dev_t dev;
  char *path;      /* absolute path of the current entry */
  size_t len, cap;
  size_t rootlen;  /* length of the mount point's path in path */
  int rc;          /* a fatal error: stops the walk */
};

/* The current path relative to the mount point. */
static const char *
rel_path (const struct walk *w)
{
  return w->len > w->rootlen ? w->path + w->rootlen + 1 : "";
}

/* Appends "/name" to the path.  Returns the old length, or (size_t) -1 and
 * sets w->rc when out of memory. */
static size_t
push_name (struct walk *w, const char *name)
{
  size_t old = w->len, n = strlen (name);

  if (w->len + n + 2 > w->cap) {
    size_t cap = (w->len + n + 2) * 2;
    char *p = realloc (w->path, cap);
    if (!p) {
      w->rc = -ENOMEM;
      return (size_t) -1;
    }
    w->path = p;
    w->cap = cap;
  }
  w->path[w->len++] = '/';
  memcpy (w->path + w->len, name, n + 1);
  w->len += n;
  return old;
}

static void
pop_name (struct walk *w, size_t old)
{
  w->len = old;
  w->path[old] = '\0';
}

/* Remembers a file among its class's largest. */
static void
remember (struct walk *w, unsigned cls, const char *rel, uint64_t bytes)
{
  struct hc_fsmap_topfile *t = w->st->top[cls];
  size_t k = HC_FSMAP_TOP;

  while (k > 0 && (!t[k - 1].path || t[k - 1].bytes < bytes))
    k--;
  if (k == HC_FSMAP_TOP)
    return;
  char *copy = strdup (rel);
  if (!copy)
    return; /* only the report loses it */
  free (t[HC_FSMAP_TOP - 1].path);
  memmove (t + k + 1, t + k, (HC_FSMAP_TOP - 1 - k) * sizeof *t);
  t[k] = (struct hc_fsmap_topfile) { copy, bytes };
}

/* Maps one regular file a rule matched. */
static void
walk_file (struct walk *w, int dirfd, const char *name, const struct hc_fsrule *rule)
{
  struct hc_fsmap_stats *st = w->st;
  struct hc_extent_list x;
  struct stat sb;
  int fd, rc;

  fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOATIME);
  if (fd < 0 && errno == EPERM) /* O_NOATIME needs ownership or CAP_FOWNER */
    fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    st->unreadable_files++;
    return;
  }
  if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode)) {
    close (fd);
    st->unreadable_files++;
    return;
  }
  if (sb.st_dev != w->dev) { /* a file bind-mounted from elsewhere */
    close (fd);
    st->other_fs++;
    return;
  }
  rc = hc_file_extents (fd, 0, UINT64_MAX, 0, &x);
  close (fd);
  if (rc < 0) {
    st->unreadable_files++;
    return;
  }
  st->matched++;
  for (size_t i = 0; i < x.n && w->rc == 0; i++) {
    const struct hc_extent *e = &x.e[i];
    if (e->physical > UINT64_MAX - w->o->offset) {
      w->rc = -ERANGE;
      snprintf (st->why, sizeof st->why, "%s: the offset puts an extent past 2^64", rel_path (w));
    } else if ((rc = hc_fsmap_add (w->b, w->o->offset + e->physical, e->length, rule->hint,
                                   HC_FSMAP_PRIO_RULES)) < 0) {
      w->rc = rc;
      snprintf (st->why, sizeof st->why, "%s: %s", rel_path (w),
                rc == -ERANGE ? "the offset puts an extent past 2^64" : "out of memory");
    }
  }
  if (x.unplaced) {
    st->pending++;
    st->pending_bytes += x.unplaced_bytes;
  }
  unsigned cls = rule->hint.cls < HC_CLASS_COUNT ? rule->hint.cls : 0;
  st->files[cls]++;
  st->rule_hits_bytes += x.bytes;
  if (w->o->top && x.bytes > 0)
    remember (w, cls, rel_path (w), x.bytes);
  hc_extent_list_free (&x);
}

/* Walks the directory open at fd (which it closes), whose path is w->path. */
static void
walk_dir (struct walk *w, int fd, unsigned depth)
{
  struct hc_fsmap_stats *st = w->st;
  struct stat sb;
  struct dirent *de;
  DIR *d;

  if (fstat (fd, &sb) < 0) {
    close (fd);
    st->unreadable_dirs++;
    return;
  }
  if (sb.st_dev != w->dev) {
    close (fd);
    st->other_fs++;
    return;
  }
  if (!(d = fdopendir (fd))) {
    close (fd);
    st->unreadable_dirs++;
    return;
  }
  st->walk_dirs++;
  if (w->o->on_dir)
    w->o->on_dir (w->o->arg, w->len ? w->path : "/");
  for (;;) {
    errno = 0;
    if (!(de = readdir (d))) {
      if (errno)
        st->unreadable_dirs++;
      break;
    }
    const char *name = de->d_name;
    if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
      continue;
    unsigned type = de->d_type;
    if (type == DT_UNKNOWN) {
      struct stat es;
      if (fstatat (dirfd (d), name, &es, AT_SYMLINK_NOFOLLOW) < 0)
        continue; /* gone meanwhile */
      type = S_ISDIR (es.st_mode) ? DT_DIR : S_ISREG (es.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type == DT_DIR) {
      size_t old = push_name (w, name);
      if (old == (size_t) -1)
        break;
      int cfd = depth + 1 < MAX_DEPTH
                  ? openat (dirfd (d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK
                                                 | O_CLOEXEC)
                  : -1;
      if (cfd < 0)
        st->unreadable_dirs++;
      else
        walk_dir (w, cfd, depth + 1);
      pop_name (w, old);
    } else if (type == DT_REG) {
      st->walk_files++;
      if (!w->o->rules || w->o->rules->n == 0)
        continue;
      size_t old = push_name (w, name);
      if (old == (size_t) -1)
        break;
      int k = hc_fsrules_match (w->o->rules, rel_path (w));
      if (k >= 0)
        walk_file (w, dirfd (d), name, &w->o->rules->r[k]);
      pop_name (w, old);
    }
    if (w->rc < 0)
      break;
  }
  closedir (d);
}

int
hc_fsmap_scan_tree (const struct hc_fsmap_opts *o, struct hc_fsmap_builder *b,
                    struct hc_fsmap_stats *st)
{
  struct walk w = { .o = o, .b = b, .st = st };
  struct stat sb;
  size_t n = strlen (o->mount);
  int fd;

  fd = open (o->mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &sb) < 0) {
    int e = errno;
    if (fd >= 0)
      close (fd);
    snprintf (st->why, sizeof st->why, "%s: %s", o->mount, strerror (e));
    return -e;
  }
  w.dev = sb.st_dev;
  while (n > 0 && o->mount[n - 1] == '/')
    n--;
  w.cap = n + 256;
  if (!(w.path = malloc (w.cap))) {
    close (fd);
    snprintf (st->why, sizeof st->why, "out of memory");
    return -ENOMEM;
  }
  memcpy (w.path, o->mount, n);
  w.path[n] = '\0';
  w.len = w.rootlen = n;
  walk_dir (&w, fd, 0);
  free (w.path);
  if (w.rc == -ENOMEM && !st->why[0])
    snprintf (st->why, sizeof st->why, "out of memory");
  return w.rc;
}
