/* PostgreSQL's files by what they hold, from its own catalog.
 *
 * A path alone cannot say whether base/16384/16397 is a table or an index:
 * relations are stored in files named by number (the relfilenode), and
 * only the database's catalog knows which number is which.  So, for a data
 * directory found on the recorded file system (a PG_VERSION file beside a
 * base/ directory), the recorder asks the running server: it reads the
 * socket directory and port from postmaster.pid and runs psql, as the data
 * directory's owner, once for the list of databases and once per database
 * for every relation's file number, kind and namespace.  Answers add up:
 * a file number keeps the kind it was last seen with, so a relation that
 * was still being created at one refresh (an index built in a transaction
 * the catalog query cannot see yet) is known at the next, and a server
 * that is down, or busy starting, takes nothing away.  The recorder labels
 * every snapshot's paths again after the run with all it learnt.
 *
 * Paths inside a data directory are then labelled:
 *   base/DB/N[.seg], global/N[.seg]  by the relation N is the file of:
 *       catalog (a system relation: its oid below 16384, or anything in
 *       global/), toast (the pg_toast namespace, its indexes too), index,
 *       else table; a relation the catalog does not know yet is a table
 *   …_fsm, …_vm (free-space and visibility maps)   catalog
 *   base/DB/tB_N (a temporary relation), base/pgsql_tmp/  temp
 *   pg_wal/                                        wal
 *   pg_xact/, pg_multixact/, pg_subtrans/, pg_commit_ts/  catalog
 *       (transaction status, read on the way to every tuple's visibility)
 *   anything else                                  other_file
 * A file created and dropped between two refreshes (a table rewritten by
 * TRUNCATE, CLUSTER or VACUUM FULL gets a new number), never seen in the
 * catalog, is labelled a table.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record/record.h"
#include "util.h"

/* PostgreSQL's FirstNormalObjectId: below it, the system's own objects. */
#define PG_FIRST_NORMAL_OID 16384

struct hc_pgcat {
  char *datadir;          /* absolute */
  struct hc_u64map kinds; /* (database oid << 32 | file number) → label */
  bool known;             /* one refresh succeeded */
};

extern char **environ;

int
hc_pgcat_new (const char *datadir, hc_pgcat **out)
{
  hc_pgcat *c = calloc (1, sizeof *c);

  *out = NULL;
  if (!c || !(c->datadir = strdup (datadir))) {
    free (c);
    return -ENOMEM;
  }
  *out = c;
  return 0;
}

const char *
hc_pgcat_datadir (const hc_pgcat *c)
{
  return c->datadir;
}

bool
hc_pgcat_known (const hc_pgcat *c)
{
  return c->known;
}

int
hc_rec_capture (char *const argv[], char **text)
{
  posix_spawn_file_actions_t fa;
  int p[2], rc, status;
  size_t len = 0, cap = 4096;
  char *buf = malloc (cap);
  pid_t pid;

  *text = NULL;
  if (!buf)
    return -ENOMEM;
  if (pipe2 (p, O_CLOEXEC) < 0) {
    free (buf);
    return -errno;
  }
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, p[1], 1);
  posix_spawn_file_actions_addopen (&fa, 2, "/dev/null", O_WRONLY, 0);
  rc = posix_spawnp (&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  close (p[1]);
  if (rc) {
    close (p[0]);
    free (buf);
    return -rc;
  }
  for (;;) {
    if (len + 1 == cap) {
      char *b = cap < ((size_t) 64 << 20) ? realloc (buf, cap * 2) : NULL;
      if (!b)
        break; /* too much: read no further, fail below */
      buf = b;
      cap *= 2;
    }
    ssize_t n = read (p[0], buf + len, cap - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t) n;
  }
  close (p[0]);
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR) {
      free (buf);
      return -errno;
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0 || len + 1 == cap) {
    free (buf);
    return -EIO;
  }
  buf[len] = '\0';
  *text = buf;
  return 0;
}

/* psql, as the data directory's owner, on the server's socket, for one
 * query; the rows in *text as "a|b|c" lines. */
static int
query (const char *user, const char *host, const char *port, const char *db,
       const char *sql, char **text)
{
  char *argv[] = { "runuser", "-u", (char *) user, "--", "psql", "-X", "-q", "-A", "-t",
                   "-F", "|", "-h", (char *) host, "-p", (char *) port, "-d", (char *) db,
                   "-c", (char *) sql, NULL };
  return hc_rec_capture (argv, text);
}

/* The label of one pg_class row. */
static uint8_t
kind_label (unsigned long long oid, char relkind, const char *nsp)
{
  if (oid < PG_FIRST_NORMAL_OID)
    return HC_LABEL_CATALOG;
  if (strcmp (nsp, "pg_toast") == 0)
    return HC_LABEL_TOAST;
  if (relkind == 'i' || relkind == 'I')
    return HC_LABEL_INDEX;
  return HC_LABEL_TABLE;
}

int
hc_pgcat_refresh (hc_pgcat *c)
{
  char path[4096], *pid = NULL, *dbs = NULL, *rows = NULL, *lines[6] = { 0 };
  struct passwd *pw;
  struct stat st;
  size_t len;
  int rc;

  if (stat (c->datadir, &st) < 0)
    return -errno;
  if (!(pw = getpwuid (st.st_uid)))
    return -ENOENT;
  /* postmaster.pid: pid, data directory, start time, port, socket dir. */
  snprintf (path, sizeof path, "%s/postmaster.pid", c->datadir);
  if ((rc = hc_read_small_file (path, 4096, &pid, &len)) < 0)
    return rc;
  char *save = NULL, *l = strtok_r (pid, "\n", &save);
  for (int i = 0; i < 6 && l; i++, l = strtok_r (NULL, "\n", &save))
    lines[i] = l;
  if (!lines[3] || !lines[4] || !*lines[4]) {
    free (pid);
    return -ENOENT; /* starting, or listening on no socket */
  }
  const char *port = lines[3], *host = lines[4];

  rc = query (pw->pw_name, host, port, "template1",
              "SELECT oid, datname FROM pg_database WHERE datallowconn", &dbs);
  for (char *s2 = NULL, *d = rc == 0 ? strtok_r (dbs, "\n", &s2) : NULL; d && rc == 0;
       d = strtok_r (NULL, "\n", &s2)) {
    char *bar = strchr (d, '|');
    unsigned long long dboid;
    if (!bar)
      continue;
    *bar = '\0';
    if (hc_parse_number (d, &dboid) < 0 || dboid > UINT32_MAX)
      continue;
    rc = query (pw->pw_name, host, port, bar + 1,
                "SELECT c.oid, pg_relation_filenode(c.oid), c.relkind, n.nspname "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE pg_relation_filenode(c.oid) IS NOT NULL",
                &rows);
    if (rc == -EIO) {
      rc = 0; /* a database that went away meanwhile */
      continue;
    }
    for (char *s3 = NULL, *r = rc == 0 ? strtok_r (rows, "\n", &s3) : NULL; r && rc == 0;
         r = strtok_r (NULL, "\n", &s3)) {
      char *f[4];
      unsigned long long oid, node;
      int k = 0;
      for (char *s4 = NULL, *x = strtok_r (r, "|", &s4); x && k < 4; x = strtok_r (NULL, "|", &s4))
        f[k++] = x;
      if (k < 4 || hc_parse_number (f[0], &oid) < 0 || hc_parse_number (f[1], &node) < 0
          || node > UINT32_MAX)
        continue;
      rc = hc_u64map_put (&c->kinds, dboid << 32 | node, kind_label (oid, f[2][0], f[3]));
    }
    free (rows);
    rows = NULL;
  }
  free (dbs);
  free (pid);
  if (rc < 0)
    return rc; /* what was read so far is kept: each entry is true */
  c->known = true;
  return 0;
}

/* Parses "N" optionally followed by "_fork" and/or ".seg" at the end of
 * name: the file number in *node, and whether a fork (fsm, vm, init) was
 * named.  Returns false when name is not a relation file's. */
static bool
relfile (const char *name, unsigned long long *node, bool *fork)
{
  char num[24];
  size_t n = strspn (name, "0123456789");

  if (n == 0 || n >= sizeof num)
    return false;
  memcpy (num, name, n);
  num[n] = '\0';
  if (hc_parse_number (num, node) < 0 || *node > UINT32_MAX)
    return false;
  name += n;
  *fork = false;
  if (strncmp (name, "_fsm", 4) == 0 || strncmp (name, "_vm", 3) == 0
      || strncmp (name, "_init", 5) == 0) {
    *fork = true;
    name += name[1] == 'v' ? 3 : name[1] == 'f' ? 4 : 5;
  }
  if (*name == '.')
    name += 1 + strspn (name + 1, "0123456789");
  return *name == '\0';
}

int
hc_pgcat_label (const hc_pgcat *c, const char *rel, uint8_t *label)
{
  static const char *const xact[] = { "pg_xact/", "pg_multixact/", "pg_subtrans/",
                                      "pg_commit_ts/", "pg_clog/" };
  unsigned long long db, node;
  bool fork;

  if (strncmp (rel, "pg_wal/", 7) == 0 || strncmp (rel, "pg_xlog/", 8) == 0) {
    *label = HC_LABEL_WAL;
    return 1;
  }
  for (unsigned i = 0; i < sizeof xact / sizeof *xact; i++)
    if (strncmp (rel, xact[i], strlen (xact[i])) == 0) {
      *label = HC_LABEL_CATALOG;
      return 1;
    }
  if (strncmp (rel, "base/pgsql_tmp/", 15) == 0 || strstr (rel, "/pgsql_tmp/")) {
    *label = HC_LABEL_TEMP;
    return 1;
  }
  if (strncmp (rel, "global/", 7) == 0 && relfile (rel + 7, &node, &fork)) {
    *label = HC_LABEL_CATALOG;
    return 1;
  }
  if (strncmp (rel, "base/", 5) != 0)
    return 0;
  const char *p = rel + 5, *slash = strchr (p, '/');
  char num[24];
  if (!slash || (size_t) (slash - p) >= sizeof num)
    return 0;
  memcpy (num, p, (size_t) (slash - p));
  num[slash - p] = '\0';
  if (hc_parse_number (num, &db) < 0 || db > UINT32_MAX)
    return 0;
  p = slash + 1;
  if (p[0] == 't' && strchr (p, '_') && relfile (strchr (p, '_') + 1, &node, &fork)) {
    *label = HC_LABEL_TEMP;
    return 1;
  }
  if (!relfile (p, &node, &fork))
    return 0;
  if (fork) {
    *label = HC_LABEL_CATALOG;
    return 1;
  }
  const uint64_t *k = hc_u64map_get (&c->kinds, db << 32 | node);
  *label = k ? (uint8_t) *k : node < PG_FIRST_NORMAL_OID ? HC_LABEL_CATALOG : HC_LABEL_TABLE;
  return 1;
}

void
hc_pgcat_free (hc_pgcat *c)
{
  if (!c)
    return;
  hc_u64map_free (&c->kinds);
  free (c->datadir);
  free (c);
}
