/* What each recorded request touched: a label and an object.
 *
 * Two sources, as the shared traces' labeler used them:
 *   - the file system's layout, read once at the start with libext2fs
 *     (src/fsmap/ext4.c): its metadata (superblocks, descriptors, bitmaps,
 *     inode tables, directory and extent-tree blocks) is fs_metadata, its
 *     internal journal journal;
 *   - files, by FIEMAP snapshots of every regular file under the mount,
 *     each stamped with its CLOCK_MONOTONIC time.  A block's owner can
 *     change during a run (files are written, deleted and rewritten), so a
 *     request is resolved by the snapshot nearest to it in time; a file
 *     keeps the path it had in that snapshot.  Extents still in delayed
 *     allocation have no place yet and are left out (a later snapshot has
 *     them).
 * A file's data is labelled by path rules in hintd's rule language
 * (src/fsmap/rules.c), "PATTERN LABEL": first the user's (--rules), then,
 * inside a PostgreSQL data directory, what its catalog says (pgcat.c: table,
 * index, toast, catalog, wal, temp), then the built-in rules below
 * (write-ahead logs wal, backups and temporary files temp); a file none of
 * them names is other_file.  A SQLite database's pages are labelled by
 * kind from its dbstat table after the run (hc_labeler_finish), as the
 * shared kv trace was, unless a rule labelled the file (a copy under
 * /backup stays temp).  Bytes no snapshot and no layout claims are
 * unknown.
 *
 * A snapshot is an array of extents sorted by their place on the device,
 * and a table of paths; resolving is a binary search.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsmap/fsmap.h"
#include "hintcache/extents.h"
#include "record/record.h"
#include "util.h"

struct extent {
  uint64_t start, end; /* device bytes */
  uint64_t logical;    /* the file offset at start */
  uint32_t path;       /* index in the snapshot's paths */
};

/* A SQLite database's pages by kind, from its dbstat table after the run. */
struct pagemap {
  char *path;          /* relative to the mount, as in the snapshots */
  uint32_t page_size;
  uint8_t *label;      /* per page (page n at index n-1); 0: not known */
  size_t npages;
};

struct snapshot {
  uint64_t ts_ns;
  struct extent *e;
  size_t n, cap;
  char **paths;
  uint8_t *labels; /* per path */
  size_t npaths, cappaths;
};

/* A named structure of the file system (inode_table(g3), …). */
struct named {
  uint64_t start, end;
  char *name;
};

struct hc_labeler {
  char *mount;
  size_t mount_len;
  struct hc_fsrules user, builtin;
  hc_pgcat **pg;   /* PostgreSQL data directories found by the walks */
  char **pgrel;    /* their paths relative to the mount ("" for the mount) */
  size_t npg;
  struct named *names; /* sorted by start, not overlapping */
  size_t nnames, capnames;
  struct pagemap *pm;  /* SQLite databases (hc_labeler_finish) */
  size_t npm;
  struct hc_fsmap layout;
  struct snapshot *s;
  size_t ns, caps;
};

static const char builtin_rules[] =
  "# Built-in label rules of `hintcache trace record`: PATTERN LABEL, in the\n"
  "# language of hintd's rules; the first that matches a file's path (relative\n"
  "# to the mount point) labels its blocks; a file none matches is other_file.\n"
  "# Rules given with --rules come first, then a PostgreSQL data directory's\n"
  "# catalog (relations as table, index, toast or catalog), then these.\n"
  "#\n"
  "# Write-ahead and redo logs.\n"
  "**/pg_wal/**            wal\n"
  "**/pg_xlog/**           wal\n"
  "**/ib_logfile*          wal\n"
  "*-wal                   wal\n"
  "*.wal                   wal\n"
  "*-journal               wal\n"
  "# Backups, dumps and temporary files: written once, not read back soon.\n"
  "/backup/**              temp\n"
  "/backups/**             temp\n"
  "/tmp/**                 temp\n"
  "**/pgsql_tmp/**         temp\n";

const char *
hc_labeler_default_rules (void)
{
  return builtin_rules;
}

static int
read_label (const char *text, unsigned *value, struct hc_parse_error *err)
{
  enum hc_trace_label lab;

  if (hc_trace_label_parse (text, &lab) < 0 || lab == HC_LABEL_NONE) {
    hc_parse_fail (err, "'%.64s' is not a label (fs_metadata, journal, wal, index, table, toast, "
                   "catalog, other_file, temp, unknown)", text);
    return -EINVAL;
  }
  *value = lab;
  return 0;
}

/* The label of a file's path (relative to the mount, with a leading '/'),
 * by the user's rules, a PostgreSQL catalog, the built-in rules. */
static uint8_t
path_label (const hc_labeler *l, const char *p)
{
  size_t len = strlen (p);
  int i;
  uint8_t lab;

  if (len > 0 && p[len - 1] == '/')
    return HC_LABEL_FS_METADATA; /* a directory's blocks */
  if ((i = hc_fsrules_match (&l->user, p)) >= 0)
    return (uint8_t) l->user.r[i].value;
  for (size_t k = 0; k < l->npg; k++) {
    size_t n = strlen (l->pgrel[k]);
    if (strncmp (p, l->pgrel[k], n) == 0 && p[n] == '/' && hc_pgcat_label (l->pg[k], p + n + 1, &lab))
      return lab;
  }
  if ((i = hc_fsrules_match (&l->builtin, p)) >= 0)
    return (uint8_t) l->builtin.r[i].value;
  return HC_LABEL_OTHER_FILE;
}

static int
add_name (void *arg, uint64_t start, uint64_t len, const char *name)
{
  hc_labeler *l = arg;

  if (hc_grow (&l->names, &l->capnames, l->nnames, sizeof *l->names, 256) < 0)
    return -ENOMEM;
  if (!(l->names[l->nnames].name = strdup (name)))
    return -ENOMEM;
  l->names[l->nnames].start = start;
  l->names[l->nnames++].end = start + len;
  return 0;
}

static int
by_name_start (const void *a, const void *b)
{
  const struct named *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

int
hc_labeler_new (const char *device, const char *mount, const char *rules, hc_labeler **out,
                char *why, size_t whylen)
{
  struct hc_fsmap_builder b = { 0 };
  struct hc_fsmap_stats st = { 0 };
  struct hc_parse_error perr;
  struct hc_sb sb;
  hc_labeler *l;
  int rc;

  hc_sb_init (&sb, why, whylen);
  *out = NULL;
  if (!(l = calloc (1, sizeof *l)))
    return -ENOMEM;
  rc = hc_fsrules_parse_as (builtin_rules, sizeof builtin_rules - 1, read_label, &l->builtin,
                            NULL);
  if (rc == 0 && rules && (rc = hc_fsrules_load_file_as (rules, read_label, &l->user, &perr)) < 0)
    hc_sb_printf (&sb, "%s%s%.0u: %s", rules, perr.line ? ", line " : "", perr.line,
                  rc == -EINVAL ? perr.msg : strerror (-rc));
  if (rc < 0) {
    hc_labeler_free (l);
    return rc;
  }
  if (mount) {
    if (!(l->mount = realpath (mount, NULL))) {
      rc = -errno;
      hc_sb_printf (&sb, "%s: %s", mount, strerror (-rc));
      hc_labeler_free (l);
      return rc;
    }
    l->mount_len = strlen (l->mount);
    if (l->mount_len == 1)
      l->mount_len = 0; /* "/": paths under it keep their '/' */
  }
  rc = hc_fsmap_scan_layout (device, 0, &b, &st);
  if (rc == 0)
    rc = hc_fsmap_build (&b, &l->layout);
  hc_fsmap_builder_free (&b);
  if (rc == 0)
    rc = hc_fsmap_scan_structures (device, 0, add_name, l, &st);
  if (rc < 0) {
    hc_sb_printf (&sb, "the layout of %s: %s", device, st.why[0] ? st.why : strerror (-rc));
    hc_fsmap_stats_free (&st);
    hc_labeler_free (l);
    return rc;
  }
  hc_fsmap_stats_free (&st);
  qsort (l->names, l->nnames, sizeof *l->names, by_name_start);
  *out = l;
  return 0;
}

/* The snapshot being filled by the tree walk (nftw has no argument). */
static struct {
  hc_labeler *l;
  struct snapshot *s;
  int err;
} walk;

static int
add_path (struct snapshot *s, const char *path, uint32_t *id)
{
  if (s->npaths == s->cappaths) {
    size_t cap = s->cappaths ? 2 * s->cappaths : 256;
    char **p = realloc (s->paths, cap * sizeof *p);
    uint8_t *lab = realloc (s->labels, cap);
    if (p)
      s->paths = p;
    if (lab)
      s->labels = lab;
    if (!p || !lab)
      return -ENOMEM;
    s->cappaths = cap;
  }
  if (!(s->paths[s->npaths] = strdup (path)))
    return -ENOMEM;
  s->labels[s->npaths] = HC_LABEL_OTHER_FILE; /* set after the walk */
  *id = (uint32_t) s->npaths++;
  return 0;
}

static int
add_extent (struct snapshot *s, uint64_t start, uint64_t len, uint64_t logical, uint32_t path)
{
  if (hc_grow (&s->e, &s->cap, s->n, sizeof *s->e, 1024) < 0)
    return -ENOMEM;
  s->e[s->n++] = (struct extent) { start, start + len, logical, path };
  return 0;
}

/* A PostgreSQL data directory at `dir` (absolute): noted once. */
static int
note_pgdata (hc_labeler *l, const char *dir)
{
  char base[4096];
  struct stat st;
  hc_pgcat *c;
  int rc;

  if (snprintf (base, sizeof base, "%s/base", dir) >= (int) sizeof base || stat (base, &st) < 0
      || !S_ISDIR (st.st_mode))
    return 0;
  for (size_t i = 0; i < l->npg; i++)
    if (strcmp (hc_pgcat_datadir (l->pg[i]), dir) == 0)
      return 0;
  hc_pgcat **pg = realloc (l->pg, (l->npg + 1) * sizeof *pg);
  char **rel = pg ? realloc (l->pgrel, (l->npg + 1) * sizeof *rel) : NULL;
  if (pg)
    l->pg = pg;
  if (rel)
    l->pgrel = rel;
  if (!pg || !rel)
    return -ENOMEM;
  if ((rc = hc_pgcat_new (dir, &c)) < 0)
    return rc;
  if (!(l->pgrel[l->npg] = strdup (dir + l->mount_len))) {
    hc_pgcat_free (c);
    return -ENOMEM;
  }
  l->pg[l->npg++] = c;
  return 0;
}

/* Each regular file and directory: its extents, under its path relative to
 * the mount (a directory's ending in '/'). */
static int
visit (const char *fpath, const struct stat *sb, int type, struct FTW *ftw)
{
  struct hc_extent_list el = { 0 };
  char path[4096];
  uint32_t id;
  int fd, rc;

  if (type == FTW_F && strcmp (fpath + ftw->base, "PG_VERSION") == 0 && ftw->base > 1) {
    snprintf (path, sizeof path, "%.*s", ftw->base - 1, fpath);
    if ((rc = note_pgdata (walk.l, path)) < 0)
      goto fail;
  }
  bool dir = type == FTW_D && S_ISDIR (sb->st_mode);
  if (!dir && (type != FTW_F || !S_ISREG (sb->st_mode) || sb->st_size == 0))
    return 0;
  if ((fd = open (fpath, O_RDONLY | O_CLOEXEC | O_NOATIME)) < 0
      && (fd = open (fpath, O_RDONLY | O_CLOEXEC)) < 0)
    return 0; /* gone meanwhile, or unreadable: its blocks stay unlabelled */
  rc = hc_file_extents (fd, 0, UINT64_MAX, 0, &el);
  close (fd);
  if (rc < 0 || el.n == 0) {
    hc_extent_list_free (&el);
    return 0;
  }
  const char *rel = fpath + walk.l->mount_len;
  if (snprintf (path, sizeof path, "%s%s", *rel ? rel : "/",
                dir && *rel && rel[1] ? "/" : "") >= (int) sizeof path)
    goto skip;
  if ((rc = add_path (walk.s, path, &id)) < 0)
    goto fail;
  for (size_t i = 0; i < el.n; i++)
    if ((rc = add_extent (walk.s, el.e[i].physical, el.e[i].length, el.e[i].logical, id)) < 0)
      goto fail;
skip:
  hc_extent_list_free (&el);
  return 0;
fail:
  hc_extent_list_free (&el);
  walk.err = rc;
  return 1;
}

static int
by_start (const void *a, const void *b)
{
  const struct extent *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static void
snapshot_free (struct snapshot *s)
{
  for (size_t i = 0; i < s->npaths; i++)
    free (s->paths[i]);
  free (s->paths);
  free (s->labels);
  free (s->e);
}

int
hc_labeler_snapshot (hc_labeler *l)
{
  struct snapshot s = { 0 };
  struct timespec ts;

  if (!l->mount)
    return 0;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  s.ts_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
  walk.l = l;
  walk.s = &s;
  walk.err = 0;
  if (nftw (l->mount, visit, 64, FTW_PHYS | FTW_MOUNT) < 0 && !walk.err)
    walk.err = -errno;
  if (walk.err) {
    int rc = walk.err;
    snapshot_free (&s);
    return rc;
  }
  /* The catalogs as they are now (a server that does not answer leaves
   * the last answer), then every path's label. */
  for (size_t i = 0; i < l->npg; i++)
    hc_pgcat_refresh (l->pg[i]);
  for (size_t i = 0; i < s.npaths; i++)
    s.labels[i] = path_label (l, s.paths[i]);
  qsort (s.e, s.n, sizeof *s.e, by_start);
  if (l->ns == l->caps) {
    size_t cap = l->caps ? 2 * l->caps : 8;
    struct snapshot *v = realloc (l->s, cap * sizeof *v);
    if (!v) {
      snapshot_free (&s);
      return -ENOMEM;
    }
    l->s = v;
    l->caps = cap;
  }
  l->s[l->ns++] = s;
  return 0;
}

size_t
hc_labeler_snapshots (const hc_labeler *l, size_t *files)
{
  if (files)
    *files = l->ns ? l->s[l->ns - 1].npaths : 0;
  return l->ns;
}

/* The extent of a file that holds a byte of [off, off+len) in snapshot s,
 * as its index, or -1: the last extent that starts before the end. */
static long
owner (const struct snapshot *s, uint64_t off, uint64_t len)
{
  size_t lo = 0, hi = s->n;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (s->e[mid].start < off + len)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && s->e[lo - 1].end > off ? (long) lo - 1 : -1;
}

/* A SQLite database's bytes: the kind most of the request's pages have in
 * the page map, if one was made for the file and knows them. */
static void
page_label (const hc_labeler *l, const struct extent *e, uint64_t off, uint64_t len,
            const char *path, uint8_t *label)
{
  const struct pagemap *pm = NULL;
  unsigned votes[HC_LABEL_COUNT] = { 0 }, best = 0;

  for (size_t i = 0; i < l->npm && !pm; i++)
    if (strcmp (l->pm[i].path, path) == 0)
      pm = &l->pm[i];
  if (!pm)
    return;
  uint64_t a = off > e->start ? off : e->start, b = off + len < e->end ? off + len : e->end;
  for (uint64_t at = a; at < b;) {
    uint64_t page = (e->logical + (at - e->start)) / pm->page_size;
    if (page < pm->npages && pm->label[page] && pm->label[page] < HC_LABEL_COUNT)
      votes[pm->label[page]]++;
    at = e->start + (page + 1) * pm->page_size - e->logical;
  }
  for (unsigned k = 1; k < HC_LABEL_COUNT; k++)
    if (votes[k] > votes[best])
      best = k;
  if (best)
    *label = (uint8_t) best;
}

/* Is the file a SQLite database?  Only files named as databases usually are
 * (*.db, *.sqlite, *.sqlite3, *.db3) are opened to look, so that labelling
 * does not read every file of the tree. */
static bool
is_sqlite (const char *abs)
{
  static const char *const ext[] = { ".db", ".sqlite", ".sqlite3", ".db3" };
  const char *dot = strrchr (abs, '.');
  char head[16];
  bool named = false;
  int fd;

  for (unsigned i = 0; dot && i < sizeof ext / sizeof *ext; i++)
    named |= strcmp (dot, ext[i]) == 0;
  if (!named || (fd = open (abs, O_RDONLY | O_CLOEXEC | O_NOATIME)) < 0)
    return false;
  bool yes = pread (fd, head, sizeof head, 0) == (ssize_t) sizeof head
             && memcmp (head, "SQLite format 3", 16) == 0;
  close (fd);
  return yes;
}

/* Maps one database's pages with the sqlite3 shell's dbstat table. */
static int
map_pages (const char *abs, struct pagemap *pm)
{
  char uri[4200], *text = NULL, *save = NULL;
  char *argv[] = { "sqlite3", "-readonly", "-batch", "-noheader", "-list", uri,
                   "PRAGMA page_size; SELECT d.pageno, d.pagetype, coalesce(s.type, d.name) "
                   "FROM dbstat d LEFT JOIN sqlite_schema s ON s.name = d.name",
                   NULL };
  int rc;

  if (snprintf (uri, sizeof uri, "%s", abs) >= (int) sizeof uri)
    return -ENAMETOOLONG;
  if ((rc = hc_rec_capture (argv, &text)) < 0)
    return rc;
  char *line = strtok_r (text, "\n", &save);
  unsigned long long ps;
  if (!line || hc_parse_number (line, &ps) < 0 || ps < 512 || ps > 65536) {
    free (text);
    return -EIO;
  }
  pm->page_size = (uint32_t) ps;
  while ((line = strtok_r (NULL, "\n", &save))) {
    char *f[3], *s2 = NULL;
    unsigned long long page;
    int k = 0;
    for (char *x = strtok_r (line, "|", &s2); x && k < 3; x = strtok_r (NULL, "|", &s2))
      f[k++] = x;
    if (k < 3 || hc_parse_number (f[0], &page) < 0 || page == 0 || page > (1ull << 32))
      continue;
    if (page > pm->npages) {
      size_t n = pm->npages ? pm->npages : 1024;
      while (n < page)
        n *= 2;
      uint8_t *v = realloc (pm->label, n);
      if (!v) {
        free (text);
        return -ENOMEM;
      }
      memset (v + pm->npages, 0, n - pm->npages);
      pm->label = v;
      pm->npages = n;
    }
    pm->label[page - 1] = strcmp (f[1], "overflow") == 0 ? HC_LABEL_TOAST
                          : strcmp (f[2], "index") == 0  ? HC_LABEL_INDEX
                          : strcmp (f[2], "table") == 0  ? HC_LABEL_TABLE
                                                         : HC_LABEL_CATALOG;
  }
  free (text);
  /* Page 1 holds the schema and the header, whatever dbstat said. */
  if (pm->npages)
    pm->label[0] = HC_LABEL_CATALOG;
  return 0;
}

int
hc_labeler_finish (hc_labeler *l)
{
  const struct snapshot *s = l->ns ? &l->s[l->ns - 1] : NULL;
  char abs[4096];

  /* The catalogs as they ended, for every snapshot. */
  for (size_t k = 0; l->npg && k < l->ns; k++)
    for (size_t i = 0; i < l->s[k].npaths; i++)
      l->s[k].labels[i] = path_label (l, l->s[k].paths[i]);

  for (size_t i = 0; s && i < s->npaths; i++) {
    const char *p = s->paths[i];
    if (snprintf (abs, sizeof abs, "%s%s", l->mount_len ? l->mount : "", p) >= (int) sizeof abs
        || !is_sqlite (abs))
      continue;
    struct pagemap pm = { 0 };
    if (map_pages (abs, &pm) < 0 || !(pm.path = strdup (p))) {
      free (pm.label);
      continue; /* not readable now: its pages keep the file's label */
    }
    struct pagemap *v = realloc (l->pm, (l->npm + 1) * sizeof *v);
    if (!v) {
      free (pm.label);
      free (pm.path);
      return -ENOMEM;
    }
    l->pm = v;
    l->pm[l->npm++] = pm;
  }
  return 0;
}

size_t
hc_labeler_databases (const hc_labeler *l)
{
  return l->npm;
}

void
hc_labeler_resolve (const hc_labeler *l, uint64_t ts_ns, uint64_t off, uint64_t len,
                    uint8_t *label, const char **object)
{
  *label = HC_LABEL_UNKNOWN;
  *object = NULL;
  /* Files: the snapshots from the nearest in time outwards; the first that
   * knows an owner of these bytes says (a file written after one snapshot
   * is in the next). */
  if (len && l->ns) {
    size_t after = 0; /* the first snapshot at or after ts */
    while (after < l->ns && l->s[after].ts_ns < ts_ns)
      after++;
    for (size_t a = after, b = after; a < l->ns || b > 0;) {
      const struct snapshot *s;
      if (a < l->ns && (b == 0 || l->s[a].ts_ns - ts_ns <= ts_ns - l->s[b - 1].ts_ns))
        s = &l->s[a++];
      else
        s = &l->s[--b];
      long x = owner (s, off, len);
      if (x >= 0) {
        const struct extent *e = &s->e[x];
        *label = s->labels[e->path];
        *object = s->paths[e->path];
        if (*label == HC_LABEL_OTHER_FILE) /* a rule's label stands */
          page_label (l, e, off, len, *object, label);
        return;
      }
    }
  }
  /* The layout: a named structure (by binary search), else what the
   * layout scan classed (directories and extent trees no snapshot saw). */
  size_t lo = 0, hi = l->nnames;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->names[mid].start < off + (len ? len : 1))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo > 0 && l->names[lo - 1].end > off) {
    *label = HC_LABEL_FS_METADATA;
    *object = l->names[lo - 1].name;
    return;
  }
  for (uint64_t at = off; at < off + (len ? len : 1); at += 4096) {
    struct hc_hint h = hc_fsmap_lookup (&l->layout, at);
    if (h.cls == HC_CLASS_METADATA) {
      *label = HC_LABEL_FS_METADATA;
      *object = "<metadata>";
      return;
    }
    if (h.cls == HC_CLASS_JOURNAL) {
      *label = HC_LABEL_JOURNAL;
      *object = "<journal>";
      return;
    }
  }
}

void
hc_labeler_free (hc_labeler *l)
{
  if (!l)
    return;
  for (size_t i = 0; i < l->ns; i++)
    snapshot_free (&l->s[i]);
  free (l->s);
  hc_fsmap_free (&l->layout);
  for (size_t i = 0; i < l->npg; i++) {
    hc_pgcat_free (l->pg[i]);
    free (l->pgrel[i]);
  }
  free (l->pg);
  free (l->pgrel);
  for (size_t i = 0; i < l->nnames; i++)
    free (l->names[i].name);
  free (l->names);
  for (size_t i = 0; i < l->npm; i++) {
    free (l->pm[i].path);
    free (l->pm[i].label);
  }
  free (l->pm);
  hc_fsrules_free (&l->user);
  hc_fsrules_free (&l->builtin);
  free (l->mount);
  free (l);
}
