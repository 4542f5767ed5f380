/* A synthetic, seeded block trace of a database server, for the demo.
 *
 * One ext4-like device of 24 GiB holds:
 *
 *   fs metadata   64 MiB    inode tables, bitmaps, directories (ext4)
 *   journal      128 MiB    ext4's journal, written by jbd2
 *   index          1 GiB    b-tree index pages (8 KiB)
 *   table          6 GiB    table pages (8 KiB)
 *   wal          512 MiB    write-ahead log, appended circularly
 *   log            1 GiB    the server's text log, appended, never read
 *   backup         7 GiB    the nightly backup's output
 *
 * and its life over one simulated hour:
 *
 *   queries   index lookups (Zipf over index pages, α 0.95) then a table
 *             page (Zipf, α 0.85); one in five updates a table page, which
 *             the flusher writes back later, and commits: a WAL append with
 *             FUA|sync and a flush;
 *   ext4      the journal commits every few seconds (jbd2, sync writes);
 *             metadata reads and writes now and then (flagged M);
 *   log       rsyslogd appends lines; the flusher writes them back;
 *   backup    at 60 % of the hour, `pg_basebackup` under `ionice -c3` reads
 *             the whole index and table once, sequentially, in 512 KiB
 *             requests, and writes the archive — which reaches the disk from
 *             the flusher at best-effort priority, as real writeback does.
 *
 * Every request carries what a real trace would: comm, pid, ioprio, rwbs
 * flags, and the label and object a filesystem-aware tracer would attach.
 * So each hint strategy finds here what it would find on a real machine:
 * process hints see the backup's reads but not its writes; file hints see
 * the labels; per-I/O hints see both.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hintcache/replay.h"
#include "util.h"

#define MiB (UINT64_C (1) << 20)
#define GiB (UINT64_C (1) << 30)
#define PAGE 8192

struct region {
  uint64_t off, size;
};

static const struct region R_META = { 0, 64 * MiB }, R_JOURNAL = { 64 * MiB, 128 * MiB },
  R_INDEX = { 192 * MiB, 512 * MiB }, R_TABLE = { 704 * MiB, 4 * GiB },
  R_WAL = { 704 * MiB + 4 * GiB, 512 * MiB }, R_LOG = { 1216 * MiB + 4 * GiB, 1 * GiB },
  R_BACKUP = { 1216 * MiB + 5 * GiB, 6 * GiB };

struct gen {
  uint64_t rs;
  hc_trace_writer *w;
  uint64_t now;
  int rc;
  /* Dirty pages waiting for the flusher. */
  uint64_t *dirty;
  size_t ndirty, capdirty;
  uint8_t *dirty_label;
  uint64_t wal_pos, journal_pos, log_pos, log_flushed, backup_pos;
};

static uint64_t
rnd (struct gen *g)
{
  g->rs ^= g->rs << 13, g->rs ^= g->rs >> 7, g->rs ^= g->rs << 17;
  return g->rs;
}

static double
unit (struct gen *g)
{
  return (double) (rnd (g) >> 11) / 9007199254740992.0;
}

/* A Zipf-like rank in 1 … n (continuous power-law inverse CDF), spread over
 * the space by a multiplicative permutation so hot pages are not adjacent. */
static uint64_t
zipf_page (struct gen *g, uint64_t n, double alpha)
{
  double u = unit (g), x;
  if (fabs (alpha - 1) < 1e-9)
    x = exp (u * log ((double) n));
  else
    x = pow (u * (pow ((double) n, 1 - alpha) - 1) + 1, 1 / (1 - alpha));
  uint64_t r = (uint64_t) x;
  if (r < 1)
    r = 1;
  if (r > n)
    r = n;
  return ((r - 1) * 1000003) % n;
}

/* Appends one request. */
static void
emit (struct gen *g, unsigned op, uint64_t off, uint64_t len, unsigned rwbs, unsigned iocls,
      unsigned level, uint32_t pid, const char *comm, unsigned label, const char *object)
{
  struct hc_trace_req q = {
    .ts_ns = g->now, .offset = off, .length = len, .op = (uint8_t) op, .label = (uint8_t) label,
    .ioprio_class = (uint8_t) iocls, .ioprio_level = (uint8_t) level, .rwbs = (uint16_t) rwbs,
    .pid = pid,
  };
  if (g->rc < 0)
    return;
  g->rc = hc_trace_write_strings (g->w, &q, comm, object);
}

static void
mark_dirty (struct gen *g, uint64_t off, unsigned label)
{
  if (g->ndirty == g->capdirty) {
    size_t ncap = g->capdirty ? g->capdirty * 2 : 4096;
    uint64_t *nd = realloc (g->dirty, ncap * sizeof *nd);
    uint8_t *nl = realloc (g->dirty_label, ncap);
    if (!nd || !nl) {
      free (nd == g->dirty ? NULL : nd);
      g->rc = -ENOMEM;
      return;
    }
    g->dirty = nd;
    g->dirty_label = nl;
    g->capdirty = ncap;
  }
  g->dirty_label[g->ndirty] = (uint8_t) label;
  g->dirty[g->ndirty++] = off;
}

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

/* The flusher: dirty pages go out in offset order, merged where adjacent,
 * from a kworker at best-effort priority — whoever dirtied them. */
static void
flusher (struct gen *g)
{
  if (!g->ndirty)
    return;
  /* Keep labels with offsets: sort pairs by packing the label in the low
   * bits (offsets are page-aligned). */
  for (size_t i = 0; i < g->ndirty; i++)
    g->dirty[i] |= g->dirty_label[i];
  qsort (g->dirty, g->ndirty, sizeof *g->dirty, cmp_u64);
  for (size_t i = 0; i < g->ndirty;) {
    uint64_t off = g->dirty[i] & ~(uint64_t) 0xff, len = PAGE;
    unsigned label = g->dirty[i] & 0xff;
    size_t j = i + 1;
    while (j < g->ndirty && (g->dirty[j] & ~(uint64_t) 0xff) == off + len && len < 512 * 1024
           && (g->dirty[j] & 0xff) == label)
      len += PAGE, j++;
    while (j < g->ndirty && (g->dirty[j] & ~(uint64_t) 0xff) < off + len)
      j++; /* the same page dirtied twice */
    const char *obj = label == HC_LABEL_TABLE ? "/db/base/table" : label == HC_LABEL_INDEX
                      ? "/db/base/index" : label == HC_LABEL_TEMP ? "/backup/base.tar"
                      : "/var/log/db.log";
    emit (g, HC_TOP_WRITE, off, len, 0, 2, 4, 91, "kworker/u8:2", label, obj);
    g->now += 20000;
    i = j;
  }
  g->ndirty = 0;
}

static void
jbd2_commit (struct gen *g)
{
  uint64_t len = (1 + rnd (g) % 4) * 4096;
  if (g->journal_pos + len > R_JOURNAL.size)
    g->journal_pos = 0;
  emit (g, HC_TOP_WRITE, R_JOURNAL.off + g->journal_pos, len, HC_RWBS_SYNC | HC_RWBS_PREFLUSH, 2,
        3, 88, "jbd2/sda1-8", HC_LABEL_JOURNAL, "<journal>");
  g->journal_pos += len;
  emit (g, HC_TOP_FLUSH, 0, 0, 0, 0, 0, 88, "jbd2/sda1-8", HC_LABEL_UNKNOWN, "(flush)");
  /* Some metadata: an inode table block and a bitmap, often the same ones. */
  for (int k = 0; k < 2; k++)
    emit (g, HC_TOP_WRITE, R_META.off + zipf_page (g, R_META.size / 4096, 1.1) * 4096, 4096,
          HC_RWBS_META | HC_RWBS_SYNC, 2, 3, 88, "jbd2/sda1-8", HC_LABEL_FS_METADATA,
          "inode_table");
}

static void
query (struct gen *g, bool update)
{
  const uint32_t pid = 2001 + (uint32_t) (rnd (g) % 8);
  /* Index: an inner page (few, hot), then a leaf. */
  for (int lvl = 0; lvl < 2; lvl++) {
    uint64_t pages = R_INDEX.size / PAGE / (lvl ? 1 : 64);
    uint64_t p = zipf_page (g, pages, lvl ? 1.0 : 1.1);
    emit (g, HC_TOP_READ, R_INDEX.off + p * PAGE, PAGE, 0, 2, 4, pid, "postgres",
          HC_LABEL_INDEX, "/db/base/index");
  }
  uint64_t p = zipf_page (g, R_TABLE.size / PAGE, 0.95);
  emit (g, HC_TOP_READ, R_TABLE.off + p * PAGE, PAGE, 0, 2, 4, pid, "postgres",
        HC_LABEL_TABLE, "/db/base/table");
  if (update) {
    mark_dirty (g, R_TABLE.off + p * PAGE, HC_LABEL_TABLE);
    if (rnd (g) % 4 == 0)
      mark_dirty (g, R_INDEX.off + zipf_page (g, R_INDEX.size / PAGE, 0.9) * PAGE, HC_LABEL_INDEX);
    if (g->wal_pos + PAGE > R_WAL.size)
      g->wal_pos = 0;
    emit (g, HC_TOP_WRITE, R_WAL.off + g->wal_pos, PAGE, HC_RWBS_SYNC | HC_RWBS_FUA, 2, 4, 1999,
          "walwriter", HC_LABEL_WAL, "/db/pg_wal/000000010000000000000001");
    g->wal_pos += PAGE;
    emit (g, HC_TOP_FLUSH, 0, 0, 0, 0, 0, 1999, "walwriter", HC_LABEL_UNKNOWN, "(flush)");
  }
}

/* One 512 KiB step of the backup: read the source, queue the archive. */
static void
backup_step (struct gen *g, uint64_t src)
{
  const uint64_t chunk = 512 * 1024;
  unsigned label = src < R_INDEX.size ? HC_LABEL_INDEX : HC_LABEL_TABLE;
  uint64_t off = R_INDEX.off + src;
  emit (g, HC_TOP_READ, off, chunk, HC_RWBS_READAHEAD, 3, 7, 3001, "pg_basebackup", label,
        label == HC_LABEL_INDEX ? "/db/base/index" : "/db/base/table");
  for (uint64_t k = 0; k < chunk; k += PAGE)
    mark_dirty (g, R_BACKUP.off + g->backup_pos + k, HC_LABEL_TEMP);
  g->backup_pos = (g->backup_pos + chunk) % R_BACKUP.size;
}

int
hc_replay_synth_db (const char *path, uint64_t seed, double scale, char *why, size_t whylen)
{
  struct gen g = { .rs = seed * 0x9e3779b97f4a7c15ull + 0x1234567 };
  const uint64_t queries = (uint64_t) (400000 * scale);
  const uint64_t source = R_INDEX.size + R_TABLE.size, chunk = 512 * 1024;
  /* The backup starts at half time and is done by 90 %. */
  const uint64_t backup_at = queries / 2;
  const uint64_t backup_every = queries * 4 / 10 / (source / chunk) + 1;
  uint64_t backup_done = 0;
  int rc;

  if (scale <= 0 || scale > 1000) {
    snprintf (why, whylen, "scale %g out of range", scale);
    return -EINVAL;
  }
  if ((rc = hc_trace_writer_open (path, HC_TRACE_BIN, 4096, &g.w, why, whylen)) < 0)
    return rc;
  for (uint64_t i = 0; i < queries && g.rc == 0; i++) {
    g.now += 12000 + rnd (&g) % 5000; /* ~70 queries per ms of simulated time */
    query (&g, rnd (&g) % 5 == 0);
    if (i % 50 == 0) { /* the log */
      uint64_t len = 4096;
      mark_dirty (&g, R_LOG.off + (g.log_pos % R_LOG.size), HC_LABEL_OTHER_FILE);
      g.log_pos += len;
    }
    if (i % 400 == 0)
      jbd2_commit (&g);
    if (i % 1500 == 0)
      flusher (&g);
    if (i % 997 == 0) /* a directory lookup */
      emit (&g, HC_TOP_READ, R_META.off + zipf_page (&g, R_META.size / 4096, 1.1) * 4096, 4096,
            HC_RWBS_META, 2, 4, 2001, "postgres", HC_LABEL_FS_METADATA, "/db/base/");
    /* The backup runs beside the queries. */
    if (i >= backup_at && backup_done < source && (i - backup_at) % backup_every == 0) {
      backup_step (&g, backup_done);
      backup_done += chunk;
    }
  }
  flusher (&g);
  free (g.dirty);
  free (g.dirty_label);
  rc = hc_trace_writer_close (g.w);
  if (g.rc < 0) {
    snprintf (why, whylen, "writing the synthetic trace: %s", strerror (-g.rc));
    return g.rc;
  }
  if (rc < 0)
    snprintf (why, whylen, "writing the synthetic trace: %s", strerror (-rc));
  return rc;
}
