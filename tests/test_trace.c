/* Trace readers and writers: every reader on its committed sample (exact
 * field values of chosen requests), format detection, malformed-line
 * accounting and strict mode, truncated and corrupt gzip, input and output
 * buffers at and around their sizes, rewind, the bin
 * round trip (every field and string), the oracle writer on a small
 * hand-computed example, and — when the shared development traces are
 * present — their row counts and footprints from their README, plus read
 * rates of kv.csv.gz and its bin conversion (printed, not asserted).
 *
 * argv[1]: the shared traces directory (may be absent);
 * argv[2]: the directory of the committed samples (tests/data/traces).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "hintcache/trace.h"
#include "record/record.h"
#include "test.h"
#include "util.h"

static const char *samples = "tests/data/traces";
static char tmpdir[256];

/* A request with its strings resolved, for comparing across readers. */
struct req {
  struct hc_trace_req r;
  const char *comm, *object;
};

/* A whole trace read into memory. */
struct reqs {
  struct req *v;
  size_t n, cap;
  int rc; /* what the last hc_trace_next returned */
};

/* A sample file and the format it is in. */
struct sample_file {
  const char *name;
  enum hc_trace_format format;
};

/* Joins a directory and a file name into a static rotating buffer. */
static const char *
join (const char *dir, const char *name)
{
  static char buf[4][512];
  static unsigned i;
  char *b = buf[i++ % 4];
  snprintf (b, sizeof buf[0], "%s/%s", dir, name);
  return b;
}

/* The path of a committed sample. */
static const char *
sample (const char *name)
{
  return join (samples, name);
}

/* The path of a scratch file. */
static const char *
scratch (const char *name)
{
  return join (tmpdir, name);
}

/* Opens a trace; NULL (and a failed check) if it does not open. */
static hc_trace *
open_trace (const char *path, enum hc_trace_format format, bool strict)
{
  struct hc_trace_opts o = { .format = format, .strict = strict };
  hc_trace *t = NULL;
  char why[256] = "";
  int rc = hc_trace_open (path, &o, &t, why, sizeof why);

  CHECK (rc == 0 && t, "open %s: %d %s", path, rc, why);
  return rc == 0 ? t : NULL;
}

/* Appends a request to a. */
static void
add_req (struct reqs *a, const hc_trace *t, const struct hc_trace_req *r)
{
  if (a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 64;
    a->v = realloc (a->v, a->cap * sizeof *a->v);
    if (!a->v)
      abort ();
  }
  a->v[a->n].r = *r;
  a->v[a->n].comm = hc_trace_string (t, r->comm);
  a->v[a->n].object = hc_trace_string (t, r->object);
  a->n++;
}

/* Reads t to its end (or first error); strings stay owned by t. */
static struct reqs
read_all (hc_trace *t)
{
  struct reqs a = { 0 };
  struct hc_trace_req r;

  while (t && (a.rc = hc_trace_next (t, &r)) == 1)
    add_req (&a, t, &r);
  return a;
}

/* The same through hc_trace_read, in batches of random sizes (mostly
 * small, sometimes up to 300); a.rc: 1 after requests, as read_all. */
static struct reqs
read_batches (hc_trace *t)
{
  struct reqs a = { 0 };
  struct hc_trace_req r[300];
  long got = 1;

  while (t && got > 0) {
    size_t want = 1 + test_rand (test_rand (4) ? 8 : 300);
    got = hc_trace_read (t, r, want);
    CHECK (got <= (long) want, "hc_trace_read gave %ld of %zu", got, want);
    for (long i = 0; i < got; i++)
      add_req (&a, t, &r[i]);
  }
  a.rc = (int) got;
  return a;
}

/* True if two requests agree in every field and string (ids too if asked). */
static bool
same_req (const struct req *a, const struct req *b, bool ids)
{
  const struct hc_trace_req *x = &a->r, *y = &b->r;
  return x->ts_ns == y->ts_ns && x->offset == y->offset && x->length == y->length
         && x->op == y->op && x->label == y->label && x->ioprio_class == y->ioprio_class
         && x->ioprio_level == y->ioprio_level && x->ioprio_hint == y->ioprio_hint
         && x->rwbs == y->rwbs && x->pid == y->pid && strcmp (a->comm, b->comm) == 0
         && strcmp (a->object, b->object) == 0
         && (!ids || (x->comm == y->comm && x->object == y->object));
}

/* Checks that two traces read alike; returns true if they do. */
static bool
same_reqs (const struct reqs *a, const struct reqs *b, bool ids, const char *what)
{
  size_t bad = 0;

  CHECK (a->n == b->n, "%s: %zu vs %zu requests", what, a->n, b->n);
  for (size_t i = 0; i < a->n && i < b->n; i++)
    if (!same_req (&a->v[i], &b->v[i], ids) && bad++ < 3)
      CHECK (0, "%s: request %zu differs", what, i);
  return a->n == b->n && !bad;
}

/* Frees a read trace. */
static void
free_reqs (struct reqs *a)
{
  free (a->v);
  memset (a, 0, sizeof *a);
}

/* Writes text to a scratch file. */
static void
write_file (const char *path, const void *data, size_t len)
{
  FILE *f = fopen (path, "wb");
  CHECK (f && fwrite (data, 1, len, f) == len && fclose (f) == 0, "write %s", path);
}

/* Reads a file whole (NULL if it cannot). */
static unsigned char *
slurp (const char *path, size_t *len)
{
  char *text = NULL;
  if (hc_read_small_file (path, (size_t) 1 << 30, &text, len) < 0)
    return NULL;
  return (unsigned char *) text;
}

/* Converts a trace to bin, `times` over (rewinding between: the repeats
 * are runs of requests with no string definitions among them); returns 0
 * or the first error. */
static int
to_bin_times (hc_trace *t, const char *out, int times)
{
  hc_trace_writer *w;
  struct hc_trace_req r;
  char why[256] = "";
  int rc = hc_trace_writer_open (out, HC_TRACE_BIN, 0, &w, why, sizeof why);

  CHECK (rc == 0, "writer open %s: %s", out, why);
  if (rc < 0)
    return rc;
  for (int i = 0; i < times && rc == 0; i++) {
    if (i && (rc = hc_trace_rewind (t)) < 0)
      break;
    while ((rc = hc_trace_next (t, &r)) == 1)
      if ((rc = hc_trace_write (w, &r, t)) < 0)
        break;
  }
  CHECK (rc == 0, "conversion to %s: %d %s", out, rc, hc_trace_error (t));
  int rc2 = hc_trace_writer_close (w);
  CHECK (rc2 == 0, "writer close: %d", rc2);
  return rc ? rc : rc2;
}

/* Converts a trace to bin once. */
static int
to_bin (hc_trace *t, const char *out)
{
  return to_bin_times (t, out, 1);
}

/* Names -------------------------------------------------------------------- */

/* Format, label and op names round-trip. */
static void
test_names (void)
{
  enum hc_trace_format f;
  enum hc_trace_label l;

  for (unsigned i = 0; i < HC_TRACE_FORMAT_COUNT; i++)
    CHECK (hc_trace_format_parse (hc_trace_format_name (i), &f) == 0 && f == i, "format %u", i);
  CHECK (strcmp (hc_trace_format_name (HC_TRACE_BLKPARSE), "blkparse") == 0, "blkparse name");
  CHECK (hc_trace_format_name (HC_TRACE_FORMAT_COUNT) == NULL, "format out of range");
  CHECK (hc_trace_format_parse ("json", &f) == -EINVAL, "unknown format");
  for (unsigned i = 0; i < HC_LABEL_COUNT; i++)
    CHECK (hc_trace_label_parse (hc_trace_label_name (i), &l) == 0 && l == i, "label %u", i);
  CHECK (strcmp (hc_trace_label_name (HC_LABEL_OTHER_FILE), "other_file") == 0, "label name");
  CHECK (hc_trace_label_name (HC_LABEL_COUNT) == NULL, "label out of range");
  CHECK (hc_trace_label_parse ("tabel", &l) == -EINVAL, "unknown label");
  CHECK (strcmp (hc_trace_op_name (HC_TOP_DISCARD), "D") == 0 && hc_trace_op_name (4) == NULL,
         "op names");
}

/* Readers on their samples -------------------------------------------------- */

/* The labeled CSV sample, and its gzip copy. */
static void
test_csv (void)
{
  hc_trace *t = open_trace (sample ("sample.csv"), HC_TRACE_AUTO, false);
  hc_trace *g = open_trace (sample ("sample.csv.gz"), HC_TRACE_AUTO, false);
  struct reqs a = read_all (t), z = read_all (g);
  uint64_t first = 99;
  const struct hc_trace_req *r;

  CHECK (t && hc_trace_get_format (t) == HC_TRACE_CSV, "csv detected");
  CHECK (a.rc == 0 && a.n == 24, "csv: rc %d, %zu requests", a.rc, a.n);
  CHECK (hc_trace_skipped (t, &first) == 0 && first == 0, "csv: nothing skipped");
  if (a.n == 24) {
    r = &a.v[0].r;
    CHECK (r->ts_ns == 44848406 && r->op == HC_TOP_READ && r->offset == 35786752
           && r->length == 4096 && r->rwbs == HC_RWBS_META && r->ioprio_class == 2
           && r->ioprio_hint == 0 && r->ioprio_level == 4 && r->pid == 30811
           && r->label == HC_LABEL_FS_METADATA, "csv request 1");
    CHECK (r->comm == 1 && r->object == 2 && strcmp (a.v[0].comm, "tar") == 0
           && strcmp (a.v[0].object, "/") == 0, "csv strings start at id 1");
    r = &a.v[5].r;
    CHECK (r->op == HC_TOP_WRITE && r->rwbs == (HC_RWBS_PREFLUSH | HC_RWBS_FUA | HC_RWBS_SYNC)
           && r->ioprio_level == 3 && r->label == HC_LABEL_JOURNAL
           && r->comm == a.v[4].r.comm && strcmp (a.v[5].object, "<journal>") == 0,
           "csv FWFS journal write");
    r = &a.v[6].r;
    CHECK (r->op == HC_TOP_FLUSH && r->length == 0 && r->rwbs == HC_RWBS_PREFLUSH
           && r->ioprio_class == 0 && r->label == HC_LABEL_UNKNOWN
           && strcmp (a.v[6].object, "(flush)") == 0, "csv flush");
    CHECK (strcmp (a.v[7].object, "/src/git-src/t/t9603/cvsroot/module/b,v") == 0,
           "quoted comma: %s", a.v[7].object);
    CHECK (strcmp (a.v[10].object, "/src/git-src/t/t3900/\"quoted\" name.txt") == 0
           && a.v[10].r.length == 8192, "quoted quotes: %s", a.v[10].object);
    CHECK (a.v[11].r.ioprio_class == 3 && a.v[11].r.ioprio_level == 7
           && a.v[11].r.object == a.v[12].r.object, "idle class, same object id");
    CHECK (a.v[14].r.object == 0 && strcmp (a.v[14].object, "") == 0
           && a.v[14].r.label == HC_LABEL_UNKNOWN, "empty object");
    CHECK (a.v[15].r.label == HC_LABEL_UNKNOWN, "empty label is unknown");
    CHECK (a.v[16].r.op == HC_TOP_DISCARD && a.v[16].r.length == 1048576, "discard");
    CHECK (a.v[17].r.ioprio_class == 1 && a.v[17].r.label == HC_LABEL_WAL, "rt, wal");
    CHECK (a.v[19].r.ioprio_hint == 5 && a.v[19].r.ioprio_level == 2
           && a.v[19].r.label == HC_LABEL_TABLE, "hint");
    CHECK (a.v[20].r.label == HC_LABEL_CATALOG && a.v[21].r.label == HC_LABEL_INDEX
           && a.v[22].r.label == HC_LABEL_TOAST && strcmp (a.v[22].object, "kv (overflow)") == 0,
           "catalog, index, toast");
    CHECK (strcmp (a.v[23].object, "/src/git-src/t/t9603/cvsroot/module/") == 0
           && a.v[23].r.rwbs == (HC_RWBS_SYNC | HC_RWBS_META), "needlessly quoted field");
  }
  CHECK (g && hc_trace_get_format (g) == HC_TRACE_CSV && z.rc == 0, "csv.gz detected and read");
  same_reqs (&a, &z, true, "csv vs csv.gz");
  CHECK (strcmp (hc_trace_string (t, 0), "") == 0 && strcmp (hc_trace_string (t, 99999), "") == 0,
         "string 0 and unknown ids are empty");
  free_reqs (&a);
  free_reqs (&z);
  hc_trace_close (t);
  hc_trace_close (g);
}

/* blkparse: only Q events, flushes, discards, the summary ignored. */
static void
test_blkparse (void)
{
  hc_trace *t = open_trace (sample ("blkparse.txt"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (t);
  const struct hc_trace_req *r;

  CHECK (t && hc_trace_get_format (t) == HC_TRACE_BLKPARSE, "blkparse detected");
  CHECK (a.rc == 0 && a.n == 12, "blkparse: rc %d (%s), %zu requests", a.rc,
         hc_trace_error (t), a.n);
  CHECK (hc_trace_skipped (t, NULL) == 0, "blkparse: nothing malformed");
  if (a.n == 12) {
    r = &a.v[0].r;
    CHECK (r->ts_ns == 512 && r->op == HC_TOP_READ && r->offset == 4637240ull * 512
           && r->length == 4096 && r->rwbs == HC_RWBS_READAHEAD && r->pid == 2077
           && strcmp (a.v[0].comm, "grep") == 0 && r->label == HC_LABEL_NONE && r->object == 0,
           "blkparse Q read");
    CHECK (a.v[1].r.op == HC_TOP_WRITE && a.v[2].r.offset == 1103880ull * 512
           && strcmp (a.v[2].comm, "jbd2/sda1-8") == 0, "blkparse writes");
    r = &a.v[3].r;
    CHECK (r->ts_ns == 360407 && r->op == HC_TOP_WRITE && r->offset == 1103888ull * 512
           && r->rwbs == (HC_RWBS_PREFLUSH | HC_RWBS_FUA | HC_RWBS_SYNC), "blkparse FWFS");
    r = &a.v[4].r;
    CHECK (r->op == HC_TOP_FLUSH && r->length == 0 && r->offset == 0
           && r->rwbs == (HC_RWBS_PREFLUSH | HC_RWBS_SYNC) && r->pid == 28498
           && strcmp (a.v[4].comm, "kv-client") == 0, "blkparse empty FWS is a flush");
    CHECK (a.v[5].r.op == HC_TOP_DISCARD && a.v[5].r.length == 2048 * 512, "blkparse discard");
    CHECK (a.v[6].r.op == HC_TOP_DISCARD && a.v[6].r.offset == 16777216ull * 512,
           "blkparse secure erase");
    CHECK (a.v[8].r.rwbs == (HC_RWBS_READAHEAD | HC_RWBS_META) && a.v[8].r.length == 32 * 512,
           "blkparse RAM");
    CHECK (a.v[9].r.length == 1024 * 512 && a.v[9].r.pid == 2119, "blkparse writeback");
    CHECK (a.v[10].r.op == HC_TOP_FLUSH && a.v[10].r.rwbs == HC_RWBS_PREFLUSH, "blkparse FN");
    CHECK (a.v[11].r.ts_ns == 1250000001 && strcmp (a.v[11].comm, "Web Content") == 0,
           "blkparse time and a comm with a blank");
  }
  free_reqs (&a);
  hc_trace_close (t);
}

/* ftrace: trace-cmd report and tracefs, with and without ioprio. */
static void
test_ftrace (void)
{
  hc_trace *t = open_trace (sample ("ftrace_report.txt"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (t);
  const struct hc_trace_req *r;

  CHECK (t && hc_trace_get_format (t) == HC_TRACE_FTRACE, "ftrace report detected");
  CHECK (a.rc == 0 && a.n == 10, "ftrace report: rc %d (%s), %zu requests", a.rc,
         hc_trace_error (t), a.n);
  if (a.n == 10) {
    r = &a.v[0].r;
    CHECK (r->ts_ns == 19271392387123ull && r->op == HC_TOP_READ
           && r->offset == 1702832ull * 512 && r->length == 4096 && r->rwbs == HC_RWBS_READAHEAD
           && r->ioprio_class == 2 && r->ioprio_hint == 0 && r->ioprio_level == 4
           && r->pid == 28498 && strcmp (a.v[0].comm, "kv-client") == 0, "ftrace issue");
    r = &a.v[2].r;
    CHECK (r->op == HC_TOP_FLUSH && r->length == 0 && r->rwbs == HC_RWBS_PREFLUSH
           && r->ioprio_class == 0 && r->pid == 151 && strcmp (a.v[2].comm, "kworker/1:0H") == 0,
           "ftrace FF flush");
    CHECK (a.v[3].r.pid == 1187 && strcmp (a.v[3].comm, "jbd2/loop0-8") == 0
           && a.v[3].r.length == 24 * 512 && a.v[3].r.ioprio_level == 3, "ftrace task with dashes");
    CHECK (a.v[5].r.ioprio_class == 3 && a.v[5].r.ioprio_level == 7
           && a.v[5].r.length == 131072, "ftrace idle");
    CHECK (a.v[6].r.pid == 2119 && strcmp (a.v[6].comm, "kworker/u8:2") == 0, "ftrace <...> task");
    CHECK (a.v[7].r.ioprio_hint == 3, "ftrace hint");
    CHECK (a.v[8].r.op == HC_TOP_DISCARD && a.v[8].r.rwbs == HC_RWBS_SYNC, "ftrace discard");
    CHECK (a.v[9].r.ts_ns == 19272000000001ull && a.v[9].r.ioprio_class == 1
           && a.v[9].r.ioprio_level == 2, "ftrace rt and ns timestamp");
  }
  free_reqs (&a);
  hc_trace_close (t);

  t = open_trace (sample ("ftrace_raw.txt"), HC_TRACE_AUTO, true);
  a = read_all (t);
  CHECK (t && hc_trace_get_format (t) == HC_TRACE_FTRACE, "ftrace raw detected");
  CHECK (a.rc == 0 && a.n == 7, "ftrace raw: rc %d (%s), %zu requests", a.rc,
         hc_trace_error (t), a.n);
  if (a.n == 7) {
    r = &a.v[0].r;
    CHECK (r->ts_ns == 4321041402000ull && r->offset == 4637240ull * 512 && r->pid == 2077
           && r->ioprio_class == 0 && strcmp (a.v[0].comm, "grep") == 0, "raw µs timestamp");
    CHECK (a.v[3].r.op == HC_TOP_FLUSH && a.v[3].r.pid == 88, "raw flush");
    CHECK (a.v[5].r.pid == 5120 && strcmp (a.v[5].comm, "Web Content") == 0, "raw comm with blank");
    CHECK (a.v[6].r.op == HC_TOP_WRITE && a.v[6].r.length == 4096 && a.v[6].r.pid == 4100,
           "raw line without bytes");
  }
  free_reqs (&a);
  hc_trace_close (t);

  t = open_trace (sample ("ftrace_raw_new.txt"), HC_TRACE_AUTO, true);
  a = read_all (t);
  CHECK (t && hc_trace_get_format (t) == HC_TRACE_FTRACE, "ftrace raw new detected");
  CHECK (a.rc == 0 && a.n == 4, "ftrace raw new: rc %d (%s), %zu", a.rc, hc_trace_error (t), a.n);
  if (a.n == 4) {
    CHECK (a.v[0].r.ioprio_class == 2 && a.v[0].r.ioprio_level == 4, "raw new ioprio");
    CHECK (a.v[2].r.ioprio_class == 3 && a.v[2].r.ioprio_hint == 0 && a.v[2].r.ioprio_level == 7,
           "ioprio without hint");
    CHECK (a.v[3].r.ioprio_class == 1 && a.v[3].r.ioprio_level == 1
           && a.v[3].r.rwbs == HC_RWBS_SYNC, "raw new rt");
  }
  free_reqs (&a);
  hc_trace_close (t);
}

/* MSR: filetime to relative ns, host and disk. */
static void
test_msr (void)
{
  hc_trace *t = open_trace (sample ("msr.csv"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (t);

  CHECK (t && hc_trace_get_format (t) == HC_TRACE_MSR, "msr detected");
  CHECK (a.rc == 0 && a.n == 16, "msr: rc %d (%s), %zu requests", a.rc, hc_trace_error (t), a.n);
  if (a.n == 16) {
    CHECK (a.v[0].r.ts_ns == 0 && a.v[0].r.op == HC_TOP_WRITE && a.v[0].r.offset == 3025285120ull
           && a.v[0].r.length == 4096 && strcmp (a.v[0].comm, "hm") == 0
           && strcmp (a.v[0].object, "hm_0") == 0 && a.v[0].r.label == HC_LABEL_NONE, "msr 1");
    CHECK (a.v[2].r.ts_ns == (128166372026382245ull - 128166372003061629ull) * 100
           && a.v[2].r.op == HC_TOP_READ && a.v[2].r.length == 24576, "msr 3");
    CHECK (strcmp (a.v[4].object, "hm_1") == 0 && a.v[4].r.comm == a.v[0].r.comm, "msr disk 1");
    CHECK (a.v[9].r.length == 512, "msr 512-byte write");
  }
  free_reqs (&a);
  hc_trace_close (t);
}

/* Malformed lines ----------------------------------------------------------- */

/* One malformed sample: count, first line, and strict mode. */
static void
check_bad (const char *name, enum hc_trace_format format, size_t good, uint64_t nbad,
           uint64_t first_bad, size_t good_before)
{
  hc_trace *t = open_trace (sample (name), format, false);
  struct reqs a = read_all (t);
  uint64_t first = 0;

  CHECK (a.rc == 0 && a.n == good, "%s: rc %d, %zu requests", name, a.rc, a.n);
  CHECK (hc_trace_skipped (t, &first) == nbad && first == first_bad,
         "%s: %llu skipped, first %llu", name, (unsigned long long) hc_trace_skipped (t, NULL),
         (unsigned long long) first);
  CHECK (strstr (hc_trace_error (t), "(skipped)") != NULL, "%s: reason kept: %s", name,
         hc_trace_error (t));
  free_reqs (&a);
  hc_trace_close (t);

  t = open_trace (sample (name), format, true);
  a = read_all (t);
  char expect[32];
  snprintf (expect, sizeof expect, "line %llu:", (unsigned long long) first_bad);
  CHECK (a.rc == -EINVAL && a.n == good_before && strstr (hc_trace_error (t), expect),
         "%s strict: rc %d after %zu requests: %s", name, a.rc, a.n, hc_trace_error (t));
  /* The line that ended the read was not skipped. */
  CHECK (hc_trace_skipped (t, &first) == 0 && first == 0, "%s strict: %llu skipped, first %llu",
         name, (unsigned long long) hc_trace_skipped (t, NULL), (unsigned long long) first);
  struct hc_trace_req r;
  CHECK (t && hc_trace_next (t, &r) == -EINVAL, "%s: strict error is sticky", name);
  free_reqs (&a);
  hc_trace_close (t);
}

/* Every format's malformed variant, and overlong lines. */
static void
test_malformed (void)
{
  /* Detection goes by the majority of lines: these still read as theirs. */
  static const struct sample_file detect[] = {
    { "sample_bad.csv", HC_TRACE_CSV },
    { "blkparse_bad.txt", HC_TRACE_BLKPARSE },
    { "msr_bad.csv", HC_TRACE_MSR },
  };
  for (size_t i = 0; i < sizeof detect / sizeof detect[0]; i++) {
    hc_trace *t = open_trace (sample (detect[i].name), HC_TRACE_AUTO, false);
    CHECK (t && hc_trace_get_format (t) == detect[i].format, "%s detected", detect[i].name);
    hc_trace_close (t);
  }

  check_bad ("sample_bad.csv", HC_TRACE_CSV, 6, 12, 4, 2);
  check_bad ("blkparse_bad.txt", HC_TRACE_BLKPARSE, 4, 5, 3, 1);
  check_bad ("ftrace_bad.txt", HC_TRACE_FTRACE, 4, 7, 3, 1);
  check_bad ("msr_bad.csv", HC_TRACE_MSR, 4, 5, 3, 1);

  /* A line over the bound is skipped whole, also as the last line. */
  const char *path = scratch ("long.csv");
  size_t big = 40000;
  char *text = malloc (2 * big + 1024);
  struct hc_sb sb;
  hc_sb_init (&sb, text, 2 * big + 1024);
  hc_sb_printf (&sb, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,"
                     "ioprio_level,comm,pid,label,object\n1,R,0,4096,R,be,0,4,a,1,table,x\n"
                     "2,R,0,4096,R,be,0,4,a,1,table,");
  memset (text + sb.need, 'y', big);
  sb.need += big;
  hc_sb_printf (&sb, "\n3,W,4096,4096,W,be,0,4,a,1,table,x\n4,R,0,4096,R,be,0,4,a,1,table,");
  memset (text + sb.need, 'z', big);
  write_file (path, text, sb.need + big);
  free (text);
  hc_trace *t = open_trace (path, HC_TRACE_AUTO, false);
  struct reqs a = read_all (t);
  uint64_t first = 0;
  CHECK (a.rc == 0 && a.n == 2 && a.v[1].r.ts_ns == 3, "long lines: rc %d, %zu", a.rc, a.n);
  CHECK (hc_trace_skipped (t, &first) == 2 && first == 3, "long lines counted, first %llu",
         (unsigned long long) first);
  free_reqs (&a);
  hc_trace_close (t);
}

/* Compressed input ------------------------------------------------------------ */

/* Reads a damaged gzip file to the end: must give -EIO, never a crash. */
static void
expect_eio (const char *path, const char *what)
{
  struct hc_trace_opts o = { 0 };
  hc_trace *t = NULL;
  char why[256] = "";
  int rc = hc_trace_open (path, &o, &t, why, sizeof why);

  if (rc == 0) {
    struct reqs a = read_all (t);
    struct hc_trace_req r;
    CHECK (a.rc == -EIO && *hc_trace_error (t), "%s: read rc %d after %zu requests", what, a.rc,
           a.n);
    CHECK (hc_trace_next (t, &r) == -EIO, "%s: the error is sticky", what);
    free_reqs (&a);
    hc_trace_close (t);
  } else
    CHECK (rc == -EIO && *why, "%s: open rc %d (%s)", what, rc, why);
}

/* Truncated and corrupt gzip streams. */
static void
test_gzip_damage (void)
{
  size_t len;
  unsigned char *z;

  expect_eio (sample ("sample_truncated.csv.gz"), "committed truncated .gz");

  /* Longer than the detection read: requests come, then the error. */
  gzFile g = gzopen (scratch ("big.csv.gz"), "wb");
  CHECK (g != NULL, "gzopen");
  gzprintf (g, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,"
               "ioprio_level,comm,pid,label,object\n");
  for (unsigned i = 0; i < 60000; i++)
    gzprintf (g, "%u,R,%llu,4096,RA,be,0,4,kv-client,28498,table,kv\n", i * 1000,
              (i * 2654435761u % 1000000) * 4096ull);
  CHECK (gzclose (g) == Z_OK, "gzclose");
  if ((z = slurp (scratch ("big.csv.gz"), &len))) {
    write_file (scratch ("big_cut.csv.gz"), z, len * 3 / 4);
    free (z);
    hc_trace *t = open_trace (scratch ("big_cut.csv.gz"), HC_TRACE_AUTO, false);
    struct reqs a = read_all (t);
    CHECK (a.rc == -EIO && a.n > 20000 && a.n < 60000
           && strstr (hc_trace_error (t), "unexpected end of file"),
           "cut after the head: rc %d after %zu requests: %s", a.rc, a.n, hc_trace_error (t));
    free_reqs (&a);
    hc_trace_close (t);
  }
  if (!(z = slurp (sample ("sample.csv.gz"), &len))) {
    CHECK (0, "read sample.csv.gz");
    return;
  }
  /* The deflate data complete but the trailer (CRC, size) cut. */
  write_file (scratch ("notrailer.csv.gz"), z, len - 4);
  expect_eio (scratch ("notrailer.csv.gz"), "gzip without trailer");
  /* Cut inside the header. */
  write_file (scratch ("header.csv.gz"), z, 6);
  expect_eio (scratch ("header.csv.gz"), "gzip cut in its header");
  /* A flipped byte in the deflate data: a data error or a CRC mismatch. */
  z[len / 2] ^= 0x55;
  write_file (scratch ("corrupt.csv.gz"), z, len);
  expect_eio (scratch ("corrupt.csv.gz"), "corrupt gzip");
  free (z);
}

/* Buffers sized to small inputs, and grown: files whose size lies at a
 * page boundary (the last line without a newline, so that only the end of
 * the input ends it; a string per line, so that the string arena grows)
 * read whole, detected or given; a gzip file far smaller than what it
 * holds reads exactly as its plain text, and its bin conversion, larger
 * than the writer's first buffer, reads back the same; a bin string and
 * detected lines longer than a small gzip file read whole. */
static void
test_buffer_sizes (void)
{
  static const char header[] = "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,"
                               "ioprio_hint,ioprio_level,comm,pid,label,object\n";
  static const size_t sizes[] = { 191, 192, 193, 4095, 4096, 4097, 131071, 131072, 131073 };
  char line[128];
  struct hc_sb sb;
  char *text = malloc (((size_t) 4 << 20) + 256);

  CHECK (text != NULL, "out of memory");
  if (!text)
    return;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t want = sizes[k], lines = 0;
    hc_sb_init (&sb, text, want + 256);
    hc_sb_printf (&sb, "%s", header);
    /* Requests while a whole one fits, blank lines to pad, then a last
     * request exactly long enough to end the file at `want` bytes. */
    for (;;) {
      int n = snprintf (line, sizeof line, "%zu,W,%zu,512,W,be,0,4,c%zu,1,wal,o\n", lines,
                        lines * 512, lines);
      if (sb.need + (size_t) n + 80 > want)
        break;
      hc_sb_printf (&sb, "%s", line);
      lines++;
    }
    int n = snprintf (line, sizeof line, "%zu,W,0,512,W,be,0,4,last,1,wal,", lines);
    while (sb.need + (size_t) n + 8 < want)
      hc_sb_printf (&sb, "\n");
    hc_sb_printf (&sb, "%s", line);
    size_t object = want - sb.need; /* the last object's name fills the rest */
    for (size_t i = 0; i < object; i++)
      hc_sb_printf (&sb, "x");
    CHECK (sb.need == want && object >= 1, "built %zu bytes, wanted %zu", sb.need, want);
    write_file (scratch ("edge.csv"), text, sb.need);
    for (int f = 0; f < 2; f++) {
      hc_trace *t = open_trace (scratch ("edge.csv"), f ? HC_TRACE_CSV : HC_TRACE_AUTO, true);
      struct reqs a = read_all (t);
      CHECK (a.rc == 0 && a.n == lines + 1 && hc_trace_get_format (t) == HC_TRACE_CSV,
             "%zu bytes (%s): rc %d, %zu of %zu requests (%s)", want, f ? "csv" : "auto", a.rc,
             a.n, lines + 1, hc_trace_error (t));
      CHECK (a.n == lines + 1 && strcmp (a.v[lines].comm, "last") == 0
                 && strlen (a.v[lines].object) == object,
             "%zu bytes: the last request ends the file", want);
      /* A string per line: the string table's arena grows block by block
       * and every text stays where it was. */
      size_t bad = 0;
      for (size_t i = 0; i < a.n && i < lines; i++) {
        snprintf (line, sizeof line, "c%zu", i);
        bad += strcmp (a.v[i].comm, line) != 0 || a.v[i].r.offset != i * 512;
      }
      CHECK (bad == 0, "%zu bytes: %zu requests differ from the lines written", want, bad);
      free_reqs (&a);
      hc_trace_close (t);
    }
  }

  /* Four megabytes of text in a gzip file of a few kilobytes. */
  hc_sb_init (&sb, text, ((size_t) 4 << 20) + 256);
  hc_sb_printf (&sb, "%s", header);
  size_t lines = 0;
  while (sb.need < (size_t) 4 << 20) {
    hc_sb_printf (&sb, "%zu,R,%zu,4096,RA,be,0,4,kv-client,28498,table,kv\n", lines / 512,
                  (lines % 8) * 4096);
    lines++;
  }
  write_file (scratch ("large.csv"), text, sb.need);
  gzFile g = gzopen (scratch ("large.csv.gz"), "wb9");
  CHECK (g && gzwrite (g, text, (unsigned) sb.need) == (int) sb.need && gzclose (g) == Z_OK,
         "gzip the large csv");
  struct stat st;
  CHECK (stat (scratch ("large.csv.gz"), &st) == 0 && st.st_size < (64 << 10),
         "the gzip file is small (%lld bytes)", (long long) st.st_size);
  hc_trace *p = open_trace (scratch ("large.csv"), HC_TRACE_AUTO, true);
  hc_trace *z = open_trace (scratch ("large.csv.gz"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (p), b = read_batches (z);
  CHECK (a.rc == 0 && b.rc == 0 && a.n == lines, "plain: rc %d, gzip: rc %d, %zu of %zu", a.rc,
         b.rc, a.n, lines);
  same_reqs (&a, &b, false, "large csv vs its small gzip");
  /* Written as bin (megabytes, far past the writer's first buffer) and
   * read back. */
  CHECK (hc_trace_rewind (z) == 0 && to_bin (z, scratch ("large.bin")) == 0, "large to bin");
  hc_trace *u = open_trace (scratch ("large.bin"), HC_TRACE_BIN, true);
  struct reqs c = read_all (u);
  CHECK (c.rc == 0, "large bin: rc %d", c.rc);
  same_reqs (&a, &c, false, "large csv vs its bin");
  free_reqs (&a);
  free_reqs (&b);
  free_reqs (&c);
  hc_trace_close (p);
  hc_trace_close (z);
  hc_trace_close (u);

  /* A bin string definition longer than a small gzip file's first buffer
   * (a record must lie whole in the buffer): read whole, not as a cut. */
  hc_trace_writer *w = NULL;
  char why[256] = "";
  memset (text, 'c', 60000);
  text[60000] = '\0';
  CHECK (hc_trace_writer_open (scratch ("long.bin"), HC_TRACE_BIN, 0, &w, why, sizeof why) == 0,
         "writer: %s", why);
  struct hc_trace_req r = { .op = HC_TOP_READ, .offset = 4096, .length = 4096 };
  CHECK (w && hc_trace_write_strings (w, &r, text, "o") == 0 && hc_trace_writer_close (w) == 0,
         "a long string written");
  size_t len;
  unsigned char *bin = slurp (scratch ("long.bin"), &len);
  CHECK (bin != NULL, "read long.bin");
  g = gzopen (scratch ("long.bin.gz"), "wb9");
  CHECK (bin && g && gzwrite (g, bin, (unsigned) len) == (int) len && gzclose (g) == Z_OK,
         "gzip the bin");
  CHECK (stat (scratch ("long.bin.gz"), &st) == 0 && st.st_size < 4096,
         "the gzip file is small (%lld bytes)", (long long) st.st_size);
  u = open_trace (scratch ("long.bin.gz"), HC_TRACE_AUTO, true);
  c = read_all (u);
  CHECK (c.rc == 0 && c.n == 1 && strcmp (c.v[0].comm, text) == 0
             && strcmp (c.v[0].object, "o") == 0,
         "the long string read back: rc %d, %zu requests (%s)", c.rc, c.n, hc_trace_error (u));
  free_reqs (&c);
  hc_trace_close (u);
  free (bin);

  /* Detection sees at least its head of a small gzip file that holds
   * more: here blkparse lines longer than the file itself. */
  hc_sb_init (&sb, text, (size_t) 1 << 20);
  for (unsigned i = 0; i < 20; i++) {
    hc_sb_printf (&sb, "  8,0    1 %8u     0.%09u  2077  Q  RA %u + 8 [", i + 1, i, 8 * i);
    for (unsigned k = 0; k < 6000; k++)
      hc_sb_printf (&sb, "g");
    hc_sb_printf (&sb, "]\n");
  }
  g = gzopen (scratch ("long_lines.txt.gz"), "wb9");
  CHECK (g && gzwrite (g, text, (unsigned) sb.need) == (int) sb.need && gzclose (g) == Z_OK,
         "gzip the long lines");
  CHECK (stat (scratch ("long_lines.txt.gz"), &st) == 0 && st.st_size < 4096,
         "the gzip file is small (%lld bytes)", (long long) st.st_size);
  u = open_trace (scratch ("long_lines.txt.gz"), HC_TRACE_AUTO, true);
  c = read_all (u);
  CHECK (u && hc_trace_get_format (u) == HC_TRACE_BLKPARSE && c.rc == 0 && c.n == 20
             && strlen (c.v[19].comm) == 6000,
         "long lines in a small gzip: %s, rc %d, %zu requests",
         u ? hc_trace_format_name (hc_trace_get_format (u)) : "not opened", c.rc, c.n);
  free_reqs (&c);
  hc_trace_close (u);
  free (text);
}

/* A gzip stream cut anywhere after its magic never reads as a clean end:
 * the open or the read ends with -EIO, after requests that are a prefix of
 * the whole stream's.  (zlib's gzread returns a clean end when its output
 * fills exactly as the cut input runs out: every cut point is tried, at
 * several compression levels.) */
static void
test_gzip_cuts (void)
{
  struct hc_sb sb;
  char *text = malloc (64 << 10);
  unsigned cuts = 0, bad = 0;

  CHECK (text != NULL, "out of memory");
  if (!text)
    return;
  hc_sb_init (&sb, text, 64 << 10);
  hc_sb_printf (&sb, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,"
                     "ioprio_level,comm,pid,label,object\n");
  for (unsigned i = 0; i < 400; i++)
    hc_sb_printf (&sb, "%u,%c,%u,4096,RA,be,0,4,client%u,%u,table,kv%u\n", i * 977,
                  "RW"[i % 3 == 0], (i * 2654435761u) % 100000 * 4096, i % 13, 1000 + i % 5,
                  i % 29);
  write_file (scratch ("cuts.csv"), text, sb.need);
  hc_trace *p = open_trace (scratch ("cuts.csv"), HC_TRACE_CSV, true);
  struct reqs whole = read_all (p);
  CHECK (whole.rc == 0 && whole.n == 400, "the whole csv: rc %d, %zu requests", whole.rc, whole.n);
  for (int level = 1; level <= 9; level += 4) {
    uLongf zlen = compressBound (sb.need) + 64;
    unsigned char *z = malloc (zlen);
    z_stream zs = { 0 };
    CHECK (z && deflateInit2 (&zs, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) == Z_OK,
           "deflateInit2");
    zs.next_in = (Bytef *) text;
    zs.avail_in = (uInt) sb.need;
    zs.next_out = z;
    zs.avail_out = (uInt) zlen;
    CHECK (deflate (&zs, Z_FINISH) == Z_STREAM_END, "deflate");
    zlen = zs.total_out;
    deflateEnd (&zs);
    for (size_t cut = 2; cut < zlen; cut++) {
      struct hc_trace_opts o = { .format = HC_TRACE_CSV };
      hc_trace *t = NULL;
      char why[256];
      write_file (scratch ("cut.csv.gz"), z, cut);
      int rc = hc_trace_open (scratch ("cut.csv.gz"), &o, &t, why, sizeof why);
      struct reqs a = read_all (t);
      size_t same = 0;
      while (same < a.n && same < whole.n && same_req (&a.v[same], &whole.v[same], false))
        same++;
      cuts++;
      if (!(rc == 0 ? a.rc == -EIO && same == a.n : rc == -EIO) && bad++ < 5)
        CHECK (0, "level %d, cut at %zu of %lu: open %d, read %d after %zu requests (%zu as "
               "in the whole stream): %s", level, cut, (unsigned long) zlen, rc, a.rc, a.n,
               same, t ? hc_trace_error (t) : why);
      free_reqs (&a);
      hc_trace_close (t);
    }
    free (z);
  }
  CHECK (bad == 0, "%u of %u cut gzip streams read wrongly", bad, cuts);
  free_reqs (&whole);
  hc_trace_close (p);
  free (text);
}

/* gzip members one after another read as one trace, whatever follows the
 * last member is ignored (as gzip and zlib's gzread do), and a second
 * member cut short is -EIO after the first member's requests. */
static void
test_gzip_members (void)
{
  size_t len;
  unsigned char *csv = slurp (sample ("sample.csv"), &len);
  const char *nl = csv ? memchr (csv, '\n', len) : NULL;

  CHECK (nl != NULL, "read sample.csv");
  if (!nl) {
    free (csv);
    return;
  }
  /* The header and the first half of the lines, then the rest. */
  size_t half = (size_t) ((const unsigned char *) nl + 1 - csv);
  size_t from = half + (len - half) / 2;
  const unsigned char *mid = memchr (csv + from, '\n', len - from);
  size_t split = mid ? (size_t) (mid + 1 - csv) : len;
  FILE *f = fopen (scratch ("members.csv.gz"), "wb");
  CHECK (f != NULL, "create members.csv.gz");
  if (!f) {
    free (csv);
    return;
  }
  size_t first_len = 0;
  for (int m = 0; m < 2; m++) {
    gzFile g = gzdopen (dup (fileno (f)), "ab");
    const unsigned char *p = m ? csv + split : csv;
    size_t n = m ? len - split : split;
    CHECK (g && gzwrite (g, p, (unsigned) n) == (int) n && gzclose (g) == Z_OK, "member %d", m);
    fseek (f, 0, SEEK_END);
    if (!m)
      first_len = (size_t) ftell (f);
  }
  size_t both_len = (size_t) ftell (f);
  fputs ("trailing garbage, not gzip\n", f);
  fclose (f);

  hc_trace *p = open_trace (sample ("sample.csv"), HC_TRACE_AUTO, true);
  hc_trace *t = open_trace (scratch ("members.csv.gz"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (p), b = read_all (t);
  CHECK (a.rc == 0 && b.rc == 0, "plain: %d, two members and garbage: %d (%s)", a.rc, b.rc,
         hc_trace_error (t));
  same_reqs (&a, &b, false, "two gzip members vs sample.csv");
  hc_trace_close (t);

  /* The second member cut in half: the open (which reads it all, as the
   * file is small) or the read fails. */
  unsigned char *z = slurp (scratch ("members.csv.gz"), &len);
  CHECK (z != NULL, "read members.csv.gz");
  if (z) {
    struct hc_trace_opts o = { .format = HC_TRACE_CSV };
    char why[256] = "";
    write_file (scratch ("members_cut.csv.gz"), z, first_len + (both_len - first_len) / 2);
    t = NULL;
    int rc = hc_trace_open (scratch ("members_cut.csv.gz"), &o, &t, why, sizeof why);
    struct reqs c = read_all (t);
    size_t same = 0;
    while (same < c.n && same < a.n && same_req (&c.v[same], &a.v[same], false))
      same++;
    CHECK (rc == 0 ? c.rc == -EIO && same == c.n : rc == -EIO && strstr (why, "unexpected end"),
           "a cut second member: open %d (%s), read %d after %zu requests", rc, why, c.rc, c.n);
    free_reqs (&c);
    hc_trace_close (t);
  }
  free_reqs (&a);
  free_reqs (&b);
  hc_trace_close (p);
  free (z);
  free (csv);
}

/* Detection failures and open errors. */
static void
test_open_errors (void)
{
  struct hc_trace_opts o = { 0 };
  hc_trace *t = NULL;
  char why[256];

  static const char prose[] = "Dear reader,\nthis is a letter, not a trace.\n";
  write_file (scratch ("prose.txt"), prose, strlen (prose));
  CHECK (hc_trace_open (scratch ("prose.txt"), &o, &t, why, sizeof why) == -EINVAL && !t
         && strstr (why, "not a trace"), "prose: %s", why);
  write_file (scratch ("empty"), "", 0);
  CHECK (hc_trace_open (scratch ("empty"), &o, &t, why, sizeof why) == -EINVAL
         && strstr (why, "empty"), "empty: %s", why);
  CHECK (hc_trace_open (scratch ("missing"), &o, &t, why, sizeof why) == -ENOENT, "missing");
  o.format = HC_TRACE_CSV;
  CHECK (hc_trace_open (sample ("blkparse.txt"), &o, &t, why, sizeof why) == -EINVAL
         && strstr (why, "header"), "csv forced on blkparse: %s", why);
  o.format = HC_TRACE_BIN;
  CHECK (hc_trace_open (sample ("sample.csv"), &o, &t, why, sizeof why) == -EINVAL, "bin forced");
  o.format = (enum hc_trace_format) 42;
  CHECK (hc_trace_open (sample ("sample.csv"), &o, &t, why, sizeof why) == -EINVAL, "bad format");

  hc_trace_writer *w = NULL;
  CHECK (hc_trace_writer_open (scratch ("x.msr"), HC_TRACE_MSR, 0, &w, why, sizeof why) == -EINVAL
         && !w, "msr is not writable");
  CHECK (hc_trace_writer_open ("/nonexistent/dir/x.bin", HC_TRACE_BIN, 0, &w, why, sizeof why)
         == -ENOENT, "writer open error");
  hc_trace_close (NULL);
  CHECK (hc_trace_writer_close (NULL) == 0, "close NULL");
}

/* Rewind ------------------------------------------------------------------------ */

/* Rewinding gives the same requests and resets the counts. */
static void
test_rewind (void)
{
  static const char *const names[] = { "sample.csv", "sample.csv.gz", "blkparse.txt",
                                       "ftrace_report.txt", "msr.csv", "sample_bad.csv" };

  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    hc_trace *t = open_trace (sample (names[i]), HC_TRACE_AUTO, false);
    struct hc_trace_req r;
    if (!t)
      continue;
    struct reqs a = read_all (t);
    uint64_t skipped = hc_trace_skipped (t, NULL);
    CHECK (hc_trace_rewind (t) == 0 && hc_trace_skipped (t, NULL) == 0, "%s: rewind", names[i]);
    struct reqs b = read_all (t);
    same_reqs (&a, &b, true, names[i]);
    CHECK (hc_trace_skipped (t, NULL) == skipped, "%s: same skips", names[i]);
    /* Rewind from the middle. */
    CHECK (hc_trace_rewind (t) == 0 && hc_trace_next (t, &r) == 1 && hc_trace_next (t, &r) == 1
           && hc_trace_rewind (t) == 0, "%s: rewind mid-way", names[i]);
    free_reqs (&b);
    b = read_all (t);
    same_reqs (&a, &b, true, names[i]);
    free_reqs (&a);
    free_reqs (&b);
    hc_trace_close (t);
  }
}

/* bin ---------------------------------------------------------------------------- */

static int
cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

/* The bin file's totals equal those counted here from its requests. */
static void
check_totals (hc_trace *b, const struct reqs *a, const char *what)
{
  struct hc_trace_totals got, want = { .block_size = 4096 };
  uint64_t *blocks = NULL;
  size_t nb = 0;

  for (size_t i = 0; i < a->n; i++) {
    const struct hc_trace_req *r = &a->v[i].r;
    want.requests++;
    want.reads += r->op == HC_TOP_READ;
    want.writes += r->op == HC_TOP_WRITE;
    want.discards += r->op == HC_TOP_DISCARD;
    want.flushes += r->op == HC_TOP_FLUSH;
    if ((r->op != HC_TOP_READ && r->op != HC_TOP_WRITE) || !r->length)
      continue;
    if (r->offset + r->length > want.max_end)
      want.max_end = r->offset + r->length;
    for (uint64_t k = r->offset / 4096; k <= (r->offset + r->length - 1) / 4096; k++) {
      if (!(nb & (nb + 1)) && !(blocks = realloc (blocks, (2 * nb + 2) * sizeof *blocks)))
        abort ();
      blocks[nb++] = k;
    }
  }
  want.block_accesses = nb;
  if (nb)
    qsort (blocks, nb, sizeof *blocks, cmp_u64);
  for (size_t i = 0; i < nb; i++)
    want.footprint_blocks += i == 0 || blocks[i] != blocks[i - 1];
  free (blocks);
  CHECK (hc_trace_totals (b, &got) == 0, "%s: totals recorded", what);
  CHECK (got.block_size == want.block_size && got.requests == want.requests
         && got.reads == want.reads && got.writes == want.writes && got.discards == want.discards
         && got.flushes == want.flushes && got.block_accesses == want.block_accesses
         && got.footprint_blocks == want.footprint_blocks && got.max_end == want.max_end,
         "%s: totals %llu req %llu acc %llu blocks %llu end, counted %llu %llu %llu %llu", what,
         (unsigned long long) got.requests, (unsigned long long) got.block_accesses,
         (unsigned long long) got.footprint_blocks, (unsigned long long) got.max_end,
         (unsigned long long) want.requests, (unsigned long long) want.block_accesses,
         (unsigned long long) want.footprint_blocks, (unsigned long long) want.max_end);
}

/* A trace converted to bin reads back identically, one request at a time
 * and in batches. */
static void
check_bin_roundtrip (const char *src, const char *bin)
{
  hc_trace *t = open_trace (src, HC_TRACE_AUTO, false);
  if (!t)
    return;
  struct reqs a = read_all (t);
  CHECK (hc_trace_rewind (t) == 0, "rewind %s", src);
  to_bin (t, bin);
  hc_trace *b = open_trace (bin, HC_TRACE_AUTO, true);
  struct reqs c = read_all (b);
  CHECK (b && hc_trace_get_format (b) == HC_TRACE_BIN && c.rc == 0, "%s: bin read rc %d (%s)",
         bin, c.rc, b ? hc_trace_error (b) : "");
  /* Ids too: the writer defines strings in the order a text reader meets them. */
  same_reqs (&a, &c, hc_trace_skipped (t, NULL) == 0, bin);
  if (b)
    check_totals (b, &c, bin);
  CHECK (b && hc_trace_rewind (b) == 0, "rewind %s", bin);
  struct reqs d = read_batches (b);
  struct hc_trace_req r;
  CHECK (d.rc == 0 && hc_trace_read (b, &r, 1) == 0, "%s: batched read rc %d (%s)", bin, d.rc,
         b ? hc_trace_error (b) : "");
  CHECK (hc_trace_read (b, &r, 0) == -EINVAL && hc_trace_read (b, NULL, 1) == -EINVAL
         && hc_trace_read (NULL, &r, 1) == -EINVAL, "hc_trace_read's arguments are checked");
  same_reqs (&c, &d, true, bin);
  free_reqs (&a);
  free_reqs (&c);
  free_reqs (&d);
  hc_trace_close (b);
  hc_trace_close (t);
}

/* The footprint a bin file records, of requests spanning many blocks that
 * overlap each other in part and cross the bitmap's words (64 blocks) and
 * leaves (32 K blocks), equals the one counted block by block here. */
static void
check_footprint_ranges (void)
{
  hc_trace_writer *w = NULL;
  char why[256] = "";

  CHECK (hc_trace_writer_open (scratch ("ranges.bin"), HC_TRACE_BIN, 0, &w, why, sizeof why) == 0,
         "writer: %s", why);
  for (unsigned i = 0; w && i < 400; i++) {
    uint64_t leaf_edge = (1 + test_rand (3)) * 32768, first = leaf_edge - test_rand (300);
    struct hc_trace_req r = { .op = test_rand (2) ? HC_TOP_READ : HC_TOP_WRITE,
                              .offset = first * 4096 + test_rand (4096),
                              .length = 1 + test_rand (i % 10 ? 130 * 4096 : 70000 * 4096) };
    CHECK (hc_trace_write_strings (w, &r, NULL, NULL) == 0, "request %u written", i);
  }
  CHECK (w && hc_trace_writer_close (w) == 0, "ranges.bin written");
  hc_trace *b = open_trace (scratch ("ranges.bin"), HC_TRACE_BIN, true);
  struct reqs c = read_all (b);
  CHECK (c.rc == 0 && c.n == 400, "ranges.bin: rc %d, %zu requests", c.rc, c.n);
  if (b)
    check_totals (b, &c, "ranges.bin");
  free_reqs (&c);
  hc_trace_close (b);
}

/* The bin form: round trips, damage, out-of-range records. */
static void
test_bin (void)
{
  check_footprint_ranges ();
  check_bin_roundtrip (sample ("sample.csv"), scratch ("sample.bin"));
  check_bin_roundtrip (sample ("blkparse.txt"), scratch ("blkparse.bin"));
  check_bin_roundtrip (sample ("ftrace_report.txt"), scratch ("ftrace.bin"));
  check_bin_roundtrip (sample ("msr.csv"), scratch ("msr.bin"));
  check_bin_roundtrip (sample ("sample_bad.csv"), scratch ("bad.bin"));

  /* Two sources into one file: each keeps its strings. */
  hc_trace *s1 = open_trace (sample ("sample.csv"), HC_TRACE_AUTO, false);
  hc_trace *s2 = open_trace (sample ("msr.csv"), HC_TRACE_AUTO, false);
  hc_trace_writer *w = NULL;
  struct hc_trace_req r1, r2, bare = { .ts_ns = 7, .comm = 5, .object = 6 };
  char why[256];
  CHECK (hc_trace_writer_open (scratch ("mixed.bin"), HC_TRACE_BIN, 0, &w, why, sizeof why) == 0,
         "open mixed: %s", why);
  for (int i = 0; i < 3; i++) {
    CHECK (hc_trace_next (s1, &r1) == 1 && hc_trace_next (s2, &r2) == 1, "mixed sources");
    CHECK (hc_trace_write (w, &r1, s1) == 0 && hc_trace_write (w, &r2, s2) == 0, "mixed write");
  }
  CHECK (hc_trace_write (w, &bare, NULL) == 0, "write without a source");
  r1.op = 9;
  CHECK (hc_trace_write (w, &r1, s1) == -EINVAL, "bad op refused");
  CHECK (hc_trace_writer_close (w) == 0, "close mixed");
  hc_trace *m = open_trace (scratch ("mixed.bin"), HC_TRACE_BIN, true);
  struct reqs a = read_all (m);
  CHECK (a.rc == 0 && a.n == 7, "mixed: rc %d, %zu", a.rc, a.n);
  if (a.n == 7) {
    CHECK (strcmp (a.v[0].comm, "tar") == 0 && strcmp (a.v[1].comm, "hm") == 0
           && strcmp (a.v[5].object, "hm_0") == 0 && strcmp (a.v[4].object, "/src/") == 0,
           "mixed strings");
    CHECK (a.v[6].r.ts_ns == 7 && a.v[6].r.comm == 0 && a.v[6].r.object == 0,
           "no source, no strings");
  }
  free_reqs (&a);
  hc_trace_close (m);
  hc_trace_close (s1);
  hc_trace_close (s2);

  /* Damage: a missing end record, a cut record, an unknown tag, data after
   * the end, and a request with an out-of-range op (malformed, skipped). */
  size_t len;
  unsigned char *b = slurp (scratch ("sample.bin"), &len);
  if (!b) {
    CHECK (0, "read sample.bin");
    return;
  }
  write_file (scratch ("noend.bin"), b, len - 16);
  expect_eio (scratch ("noend.bin"), "bin without end record");
  write_file (scratch ("cut.bin"), b, len - 16 - 20);
  expect_eio (scratch ("cut.bin"), "bin with a cut record");
  unsigned char *junk = malloc (len + 1);
  memcpy (junk, b, len);
  junk[len] = 0;
  write_file (scratch ("after.bin"), junk, len + 1);
  expect_eio (scratch ("after.bin"), "bin with data after the end");
  free (junk);
  /* Find the first request record: after the header and the definitions. */
  size_t pos = 16;
  while (pos < len && b[pos] == 2)
    pos += 8 + (b[pos + 2] | b[pos + 3] << 8);
  CHECK (b[pos] == 1, "first request record at %zu", pos);
  const unsigned char op0 = b[pos + 1];
  b[pos + 1] = 7; /* op 7 */
  write_file (scratch ("badop.bin"), b, len);
  hc_trace *t = open_trace (scratch ("badop.bin"), HC_TRACE_AUTO, false);
  a = read_all (t);
  uint64_t first = 0;
  CHECK (a.rc == 0 && a.n == 23 && hc_trace_skipped (t, &first) == 1 && first > 1,
         "bin bad op skipped: rc %d, %zu, first record %llu", a.rc, a.n,
         (unsigned long long) first);
  free_reqs (&a);
  hc_trace_close (t);
  b[pos + 1] = op0;
  b[pos] = 9; /* unknown tag */
  write_file (scratch ("badtag.bin"), b, len);
  expect_eio (scratch ("badtag.bin"), "bin with an unknown tag");
  b[pos] = 1;

  /* The totals: damage is seen both from the end and in the stream; a
   * version 1 file (no totals) still reads, and has none; nor has a
   * compressed one. */
  struct hc_trace_totals tot;
  size_t at = len - 16 - 80;
  CHECK (b[at] == 4, "totals record right before the end");
  b[at + 20] ^= 1;
  write_file (scratch ("badtotals.bin"), b, len);
  t = open_trace (scratch ("badtotals.bin"), HC_TRACE_AUTO, false);
  CHECK (t && hc_trace_totals (t, &tot) == -EIO, "damaged totals refused");
  hc_trace_close (t);
  expect_eio (scratch ("badtotals.bin"), "bin with damaged totals");
  b[at + 20] ^= 1;
  unsigned char *v1 = malloc (len);
  memcpy (v1, b, at);
  memcpy (v1 + at, b + at + 80, 16);
  v1[8] = 1;
  write_file (scratch ("v1.bin"), v1, len - 80);
  t = open_trace (scratch ("v1.bin"), HC_TRACE_AUTO, true);
  a = read_all (t);
  CHECK (a.rc == 0 && a.n == 24 && hc_trace_totals (t, &tot) == -ENODATA,
         "version 1: rc %d, %zu requests, no totals", a.rc, a.n);
  free_reqs (&a);
  hc_trace_close (t);
  memcpy (v1, b, len);
  v1[8] = 1; /* totals in a version 1 file: corrupt */
  write_file (scratch ("v1totals.bin"), v1, len);
  expect_eio (scratch ("v1totals.bin"), "totals record in a version 1 file");
  free (v1);
  gzFile gz = gzopen (scratch ("sample.bin.gz"), "wb");
  CHECK (gz && gzwrite (gz, b, (unsigned) len) == (int) len && gzclose (gz) == Z_OK, "gzip bin");
  t = open_trace (scratch ("sample.bin.gz"), HC_TRACE_AUTO, true);
  CHECK (t && hc_trace_totals (t, &tot) == -ENODATA, "compressed bin: totals not read from the end");
  a = read_all (t);
  CHECK (a.rc == 0 && a.n == 24, "compressed bin reads, totals passed over: rc %d", a.rc);
  free_reqs (&a);
  hc_trace_close (t);
  free (b);
}

/* oracle ------------------------------------------------------------------------- */

/* The oracle writer on a hand-computed example, and reading it back. */
static void
test_oracle (void)
{
  /* bs 4096.  Records (1-based): R 0+8192 → blocks 0,1 (records 1, 2);
   * W 4096+4096 → block 1 (3); F, D and an empty write → nothing;
   * R 6144+4096 → blocks 1, 2 (4, 5); R 0+1 → block 0 (6).
   * Next accesses: 1 → 6, 2 → 3, 3 → 4, 4, 5, 6 → -1. */
  static const struct hc_trace_req in[] = {
    { .op = HC_TOP_READ, .offset = 0, .length = 8192 },
    { .op = HC_TOP_WRITE, .offset = 4096, .length = 4096 },
    { .op = HC_TOP_FLUSH },
    { .op = HC_TOP_DISCARD, .offset = 0, .length = 4096 },
    { .op = HC_TOP_WRITE, .offset = 8192, .length = 0 },
    { .op = HC_TOP_READ, .offset = 6144, .length = 4096 },
    { .op = HC_TOP_READ, .offset = 0, .length = 1 },
  };
  static const uint64_t block[] = { 0, 1, 1, 1, 2, 0 };
  static const int64_t next[] = { 6, 3, 4, -1, -1, -1 };
  hc_trace_writer *w = NULL;
  char why[256];
  size_t len;
  unsigned char *b;

  CHECK (hc_trace_writer_open (scratch ("t.oracle"), HC_TRACE_ORACLE, 4096, &w, why, sizeof why)
         == 0, "oracle writer: %s", why);
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    CHECK (hc_trace_write (w, &in[i], NULL) == 0, "oracle write %zu", i);
  CHECK (hc_trace_writer_close (w) == 0, "oracle close");
  b = slurp (scratch ("t.oracle"), &len);
  CHECK (b && len == 6 * 24, "oracle size %zu", len);
  for (size_t i = 0; b && len == 6 * 24 && i < 6; i++) {
    const unsigned char *p = b + i * 24;
    uint32_t time, size;
    uint64_t obj;
    int64_t nx;
    memcpy (&time, p, 4);
    memcpy (&obj, p + 4, 8);
    memcpy (&size, p + 12, 4);
    memcpy (&nx, p + 16, 8);
    CHECK (time == i + 1 && obj == block[i] && size == 4096 && nx == next[i],
           "oracle record %zu: %u %llu %u %lld", i + 1, time, (unsigned long long) obj, size,
           (long long) nx);
  }
  free (b);

  /* Read back: detected, each record a 4 KiB read of its block. */
  hc_trace *t = open_trace (scratch ("t.oracle"), HC_TRACE_AUTO, true);
  struct reqs a = read_all (t);
  CHECK (t && hc_trace_get_format (t) == HC_TRACE_ORACLE, "oracle detected");
  CHECK (a.rc == 0 && a.n == 6, "oracle read: rc %d, %zu", a.rc, a.n);
  for (size_t i = 0; i < a.n && i < 6; i++)
    CHECK (a.v[i].r.op == HC_TOP_READ && a.v[i].r.ts_ns == i + 1
           && a.v[i].r.offset == block[i] * 4096 && a.v[i].r.length == 4096,
           "oracle request %zu", i);
  free_reqs (&a);
  hc_trace_close (t);

  /* Another block size for reading; a cut record is -EIO. */
  struct hc_trace_opts o = { .format = HC_TRACE_ORACLE, .block_size = 512 };
  CHECK (hc_trace_open (scratch ("t.oracle"), &o, &t, why, sizeof why) == 0, "oracle bs 512");
  a = read_all (t);
  CHECK (a.n == 6 && a.v[4].r.offset == 2 * 512, "oracle block size from opts");
  free_reqs (&a);
  hc_trace_close (t);
  b = slurp (scratch ("t.oracle"), &len);
  write_file (scratch ("cut.oracle"), b, len - 5);
  free (b);
  t = open_trace (scratch ("cut.oracle"), HC_TRACE_ORACLE, false);
  a = read_all (t);
  CHECK (a.rc == -EIO && a.n == 5, "cut oracle: rc %d after %zu", a.rc, a.n);
  free_reqs (&a);
  hc_trace_close (t);

  /* A csv converted to oracle: the reader's blocks match the csv's. */
  t = open_trace (sample ("sample.csv"), HC_TRACE_AUTO, false);
  CHECK (hc_trace_writer_open (scratch ("csv.oracle"), HC_TRACE_ORACLE, 4096, &w, why, sizeof why)
         == 0, "oracle writer 2");
  struct hc_trace_req r;
  uint64_t blocks = 0;
  while (hc_trace_next (t, &r) == 1) {
    if ((r.op == HC_TOP_READ || r.op == HC_TOP_WRITE) && r.length)
      blocks += (r.offset + r.length - 1) / 4096 - r.offset / 4096 + 1;
    hc_trace_write (w, &r, t);
  }
  CHECK (hc_trace_writer_close (w) == 0, "oracle close 2");
  hc_trace_close (t);
  t = open_trace (scratch ("csv.oracle"), HC_TRACE_AUTO, true);
  a = read_all (t);
  CHECK (t && hc_trace_get_format (t) == HC_TRACE_ORACLE && a.rc == 0 && a.n == blocks,
         "csv → oracle: %zu records, expected %llu", a.n, (unsigned long long) blocks);
  free_reqs (&a);
  hc_trace_close (t);
}

/* Mutated samples ----------------------------------------------------------- */

/* What every reader guarantees on any input, checked on one file read
 * with the given format, strict or not: hc_trace_next returns only 1, 0 or
 * a negative errno, and an error stays; every request has its fields in
 * range, a length of at most HC_TRACE_MAX_LENGTH and an end that does not
 * overflow; strict mode returns no request after skipping any; a rewind
 * read in batches (hc_trace_read) gives the same requests, end and errors.
 * Returns the requests read (0 if it did not open). */
static size_t
check_mutant (const char *path, enum hc_trace_format format, bool strict, const char *what)
{
  struct hc_trace_opts o = { .format = format, .strict = strict };
  hc_trace *t = NULL;
  char why[256] = "", err[320] = "";
  int rc = hc_trace_open (path, &o, &t, why, sizeof why);
  struct reqs got[2] = { { 0 } };
  uint64_t skipped = 0, first_bad = 0, first_bad1;

  if (rc < 0) {
    CHECK (!t && rc > -4096 && why[0], "%s: open failed without a reason: %d", what, rc);
    return 0;
  }
  /* Pass 0 one request at a time, pass 1 (rewound) in batches. */
  for (int pass = 0; pass < 2; pass++) {
    got[pass] = pass ? read_batches (t) : read_all (t);
    rc = got[pass].rc;
    for (size_t i = 0; i < got[pass].n; i++) {
      const struct hc_trace_req *r = &got[pass].v[i].r;
      if (r->op > HC_TOP_FLUSH || r->label >= HC_LABEL_COUNT || r->ioprio_class > 3
          || r->ioprio_level > 7 || r->ioprio_hint > 1023 || r->rwbs > 0x1f
          || r->length > HC_TRACE_MAX_LENGTH || r->offset > UINT64_MAX - r->length) {
        CHECK (0, "%s: request %zu out of range (op %u, length %llu, offset %llu)", what, i + 1,
               r->op, (unsigned long long) r->length, (unsigned long long) r->offset);
        break;
      }
    }
    CHECK (rc == 0 || (rc < 0 && rc > -4096), "%s: reading gave %d", what, rc);
    if (rc < 0) {
      struct hc_trace_req r;
      CHECK (hc_trace_next (t, &r) == rc && hc_trace_read (t, &r, 1) == rc,
             "%s: error %d not sticky", what, rc);
    }
    if (strict && rc == 0)
      CHECK (hc_trace_skipped (t, NULL) == 0, "%s: strict skipped a line", what);
    if (pass == 0) {
      skipped = hc_trace_skipped (t, &first_bad);
      snprintf (err, sizeof err, "%s", hc_trace_error (t));
      if (hc_trace_rewind (t) < 0)
        break;
    } else {
      same_reqs (&got[0], &got[1], true, what);
      CHECK (got[1].rc == got[0].rc && hc_trace_skipped (t, &first_bad1) == skipped
             && first_bad1 == first_bad && strcmp (hc_trace_error (t), err) == 0,
             "%s: rewound and read in batches: end %d, %llu skipped, '%s'; one at a time: end "
             "%d, %llu skipped, '%s'", what, got[1].rc,
             (unsigned long long) hc_trace_skipped (t, NULL), hc_trace_error (t), got[0].rc,
             (unsigned long long) skipped, err);
    }
  }
  hc_trace_close (t);
  free_reqs (&got[1]);
  size_t n = got[0].n;
  free_reqs (&got[0]);
  return n;
}

/* Every reader on mutants of its samples (and of a bin, an oracle and a
 * gzip file made from one): nothing may crash, hang or hand out a request
 * out of range — the sanitizer build checks the memory side. */
static void
test_mutants (void)
{
  static const struct sample_file seeds[] = {
    { "sample.csv", HC_TRACE_CSV },       { "blkparse.txt", HC_TRACE_BLKPARSE },
    { "ftrace_raw.txt", HC_TRACE_FTRACE }, { "ftrace_raw_new.txt", HC_TRACE_FTRACE },
    { "ftrace_report.txt", HC_TRACE_FTRACE }, { "msr.csv", HC_TRACE_MSR },
    { "sample.csv.gz", HC_TRACE_CSV },    { "t.bin", HC_TRACE_BIN },
    { "t.oracle", HC_TRACE_ORACLE },
  };
  const unsigned per_seed = 300;
  size_t total = 0, opened = 0;

  /* The bin seed, from the CSV sample six times over, so that most of it
   * is long runs of plain records, read in bulk by hc_trace_read (the
   * oracle seed is the one test_oracle wrote). */
  hc_trace *t = open_trace (sample ("sample.csv"), HC_TRACE_AUTO, false);
  if (t)
    to_bin_times (t, scratch ("t.bin"), 6);
  hc_trace_close (t);
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    const char *src = seeds[i].name[0] == 't' && seeds[i].name[1] == '.' ? scratch (seeds[i].name)
                                                                         : sample (seeds[i].name);
    size_t len;
    unsigned char *orig = slurp (src, &len);
    CHECK (orig != NULL, "seed %s", src);
    if (!orig)
      continue;
    size_t cap = 2 * len + 256;
    unsigned char *buf = malloc (cap);
    for (unsigned m = 0; m < per_seed && buf; m++) {
      char what[96];
      memcpy (buf, orig, len);
      size_t n = test_mutate (buf, len, cap);
      write_file (scratch ("mutant"), buf, n);
      snprintf (what, sizeof what, "%s mutant %u", seeds[i].name, m);
      for (int strict = 0; strict < 2; strict++) {
        size_t a = check_mutant (scratch ("mutant"), HC_TRACE_AUTO, strict, what);
        size_t b = check_mutant (scratch ("mutant"), seeds[i].format, strict, what);
        total += a + b;
        opened += (a > 0) + (b > 0);
      }
    }
    free (buf);
    free (orig);
  }
  printf ("  %zu mutants: %zu reads gave requests, %zu requests in all\n",
          per_seed * (sizeof seeds / sizeof seeds[0]), opened, total);
  CHECK (opened > 0, "some mutants still read");
}

/* The shared development traces ------------------------------------------------------ */

/* Counts ops and the 4 KiB footprint of a trace. */
static void
check_counts (const char *path, uint64_t rows, uint64_t nr, uint64_t nw, uint64_t nf,
              uint64_t footprint)
{
  hc_trace *t = open_trace (path, HC_TRACE_AUTO, true);
  struct hc_u64set set = { 0 };
  struct hc_trace_req r;
  uint64_t n = 0, ops[4] = { 0 };
  double t0 = test_now ();
  int rc;

  if (!t)
    return;
  CHECK (hc_trace_get_format (t) == HC_TRACE_CSV, "%s is csv", path);
  while ((rc = hc_trace_next (t, &r)) == 1) {
    n++;
    ops[r.op]++;
    if ((r.op == HC_TOP_READ || r.op == HC_TOP_WRITE) && r.length)
      for (uint64_t b = r.offset / 4096; b <= (r.offset + r.length - 1) / 4096; b++)
        hc_u64set_add (&set, b);
  }
  double dt = test_now () - t0;
  CHECK (rc == 0 && hc_trace_skipped (t, NULL) == 0, "%s: rc %d %s", path, rc, hc_trace_error (t));
  CHECK (n == rows && ops[0] == nr && ops[1] == nw && ops[3] == nf && ops[2] == 0,
         "%s: %llu rows R %llu W %llu D %llu F %llu", path, (unsigned long long) n,
         (unsigned long long) ops[0], (unsigned long long) ops[1], (unsigned long long) ops[2],
         (unsigned long long) ops[3]);
  CHECK (set.n == footprint, "%s: footprint %zu, expected %llu", path, set.n,
         (unsigned long long) footprint);
  printf ("%s: %llu requests in %.3f s (%.2f M/s, with footprint counting)\n", path,
          (unsigned long long) n, dt, n / dt / 1e6);
  hc_u64set_free (&set);
  hc_trace_close (t);
}

/* Times reading a trace `passes` times over. */
static void
time_read (const char *path, int passes)
{
  hc_trace *t = open_trace (path, HC_TRACE_AUTO, true);
  struct hc_trace_req r;
  uint64_t n = 0, sum = 0;
  double t0 = test_now ();

  if (!t)
    return;
  for (int p = 0; p < passes; p++) {
    int rc;
    while ((rc = hc_trace_next (t, &r)) == 1) {
      n++;
      sum += r.length;
    }
    CHECK (rc == 0, "time %s: %d", path, rc);
    if (p + 1 < passes)
      CHECK (hc_trace_rewind (t) == 0, "rewind %s", path);
  }
  double dt = test_now () - t0;
  printf ("%s (%s): %llu requests in %.3f s: %.2f M requests/s (bytes %llu)\n", path,
          hc_trace_format_name (hc_trace_get_format (t)), (unsigned long long) n, dt,
          n / dt / 1e6, (unsigned long long) sum);
  hc_trace_close (t);
}

/* Writes a trace back as labeled CSV (gzip-compressed) and compares the
 * decompressed bytes with the source's: the writer reproduces the shared
 * traces exactly, quoted objects included. */
static void
check_csv_roundtrip (const char *path, const char *out)
{
  hc_trace *t = open_trace (path, HC_TRACE_AUTO, true);
  hc_trace_writer *w;
  struct hc_trace_req r;
  char why[256];
  int rc;

  if (!t)
    return;
  CHECK (hc_trace_writer_open (out, HC_TRACE_CSV, 0, &w, why, sizeof why) == 0, "%s", why);
  while ((rc = hc_trace_next (t, &r)) == 1)
    CHECK (hc_trace_write (w, &r, t) == 0, "write");
  CHECK (rc == 0 && hc_trace_writer_close (w) == 0, "csv round trip of %s", path);
  hc_trace_close (t);
  gzFile a = gzopen (path, "rb"), b = gzopen (out, "rb");
  static char ba[1 << 16], bb[1 << 16];
  uint64_t same = 0;
  bool equal = a && b;
  while (equal) {
    int na = gzread (a, ba, sizeof ba), nb = gzread (b, bb, sizeof bb);
    equal = na == nb && na >= 0 && memcmp (ba, bb, (size_t) na) == 0;
    if (na <= 0)
      break;
    same += (uint64_t) na;
  }
  CHECK (equal, "%s written back as csv differs after %llu bytes", path, (unsigned long long) same);
  if (a)
    gzclose (a);
  if (b)
    gzclose (b);
}

/* The csv writer's edges: line breaks in strings, quoting, and the one
 * request it cannot spell. */
static void
test_csv_writer (void)
{
  const char *out = scratch ("w.csv");
  struct hc_trace_req r = { .ts_ns = 5, .op = HC_TOP_WRITE, .offset = 4096, .length = 512,
                            .rwbs = HC_RWBS_SYNC | HC_RWBS_FUA, .ioprio_class = 3, .ioprio_level = 7,
                            .pid = 9, .label = HC_LABEL_WAL };
  hc_trace_writer *w;
  char why[256];

  CHECK (hc_trace_writer_open (out, HC_TRACE_CSV, 0, &w, why, sizeof why) == 0, "%s", why);
  CHECK (hc_trace_write_strings (w, &r, "a,b", "line\nbreak \"q\"") == 0, "strings");
  r.op = HC_TOP_FLUSH, r.length = 0, r.offset = 0, r.rwbs = HC_RWBS_FUA;
  CHECK (hc_trace_write_strings (w, &r, NULL, NULL) == -EINVAL, "flush with FUA, no PREFLUSH");
  r.rwbs = HC_RWBS_FUA | HC_RWBS_PREFLUSH;
  CHECK (hc_trace_write_strings (w, &r, "k", NULL) == 0, "preflush flush fua");
  CHECK (hc_trace_writer_close (w) == 0, "close");
  hc_trace *t = open_trace (out, HC_TRACE_CSV, true);
  struct hc_trace_req g;
  if (!t)
    return;
  CHECK (hc_trace_next (t, &g) == 1 && g.op == HC_TOP_WRITE && g.rwbs == (HC_RWBS_SYNC | HC_RWBS_FUA)
             && g.ioprio_class == 3 && g.ioprio_level == 7 && g.pid == 9 && g.label == HC_LABEL_WAL
             && strcmp (hc_trace_string (t, g.comm), "a,b") == 0
             && strcmp (hc_trace_string (t, g.object), "line?break \"q\"") == 0,
         "the first request reads back");
  CHECK (hc_trace_next (t, &g) == 1 && g.op == HC_TOP_FLUSH
             && g.rwbs == (HC_RWBS_FUA | HC_RWBS_PREFLUSH), "the flush reads back");
  CHECK (hc_trace_next (t, &g) == 0 && hc_trace_skipped (t, NULL) == 0, "nothing else");
  hc_trace_close (t);
}

/* The recorder's reading of trace_pipe lines (src/record/tracefs.c). */
/* PostgreSQL's paths by kind, before the catalog has answered (no server):
 * what the layout alone says. */
static void
test_pgcat_paths (void)
{
  static const struct {
    const char *rel;
    int known;
    uint8_t label;
  } t[] = {
    { "pg_wal/000000010000000000000001", 1, HC_LABEL_WAL },
    { "pg_wal/archive_status/x.done", 1, HC_LABEL_WAL },
    { "pg_xact/0000", 1, HC_LABEL_CATALOG },
    { "pg_multixact/offsets/0000", 1, HC_LABEL_CATALOG },
    { "global/1262", 1, HC_LABEL_CATALOG },
    { "global/pg_control", 0, 0 },
    { "base/1/1259", 1, HC_LABEL_CATALOG },        /* a system relation */
    { "base/16384/16397", 1, HC_LABEL_TABLE },     /* unknown yet: a table */
    { "base/16384/16397.12", 1, HC_LABEL_TABLE },  /* a segment */
    { "base/16384/16397_fsm", 1, HC_LABEL_CATALOG },
    { "base/16384/16397_vm.1", 1, HC_LABEL_CATALOG },
    { "base/16384/t3_16400", 1, HC_LABEL_TEMP },
    { "base/pgsql_tmp/pgsql_tmp123.0", 1, HC_LABEL_TEMP },
    { "base/16384/PG_VERSION", 0, 0 },
    { "base/16384/16397x", 0, 0 },
    { "base/x/16397", 0, 0 },
    { "base/16384/99999999999", 0, 0 },
    { "PG_VERSION", 0, 0 },
    { "postgresql.auto.conf", 0, 0 },
  };
  hc_pgcat *c;
  uint8_t lab;

  CHECK (hc_pgcat_new ("/nonexistent/pgdata", &c) == 0, "pgcat");
  CHECK (hc_pgcat_refresh (c) < 0 && !hc_pgcat_known (c), "no server, no catalog");
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    lab = 0;
    int k = hc_pgcat_label (c, t[i].rel, &lab);
    CHECK (k == t[i].known && (!k || lab == t[i].label), "%s: %d, label %s", t[i].rel, k,
           hc_trace_label_name (lab));
  }
  hc_pgcat_free (c);
}

static void
test_record_lines (void)
{
  struct hc_rec_req q;
  uint64_t lost = 0;

  CHECK (hc_rec_parse_line ("  kworker/u8:1-19894   [000] ..... 51664.536383: block_rq_issue: "
                            "7,0 WM 2048 () 4 + 4 be,0,4 [kworker/u8:1]", &q, &lost) == HC_REC_ISSUE
             && q.ts_ns == 51664536383000ull && q.pid == 19894 && q.op == HC_TOP_WRITE
             && q.rwbs == HC_RWBS_META && q.sector == 4 && q.nr_sector == 4 && q.ioprio_class == 2
             && q.ioprio_level == 4 && strcmp (q.comm, "kworker/u8:1") == 0,
         "an issue");
  CHECK (hc_rec_parse_line ("  my prog-7 [001] d..1. 1.5: block_rq_issue: 7,0 FF 0 () 0 + 0 "
                            "none,0,0 [my [x] prog]", &q, &lost) == HC_REC_ISSUE
             && q.op == HC_TOP_FLUSH && q.rwbs == HC_RWBS_PREFLUSH && q.pid == 7
             && q.ts_ns == 1500000000ull && strcmp (q.comm, "my [x] prog") == 0,
         "a flush, a comm with blanks and brackets");
  CHECK (hc_rec_parse_line ("  dd-1 [000] ..... 2.000001: block_rq_issue: 8,16 RA 4096 () 2048 + 8 "
                            "[dd]", &q, &lost) == HC_REC_ISSUE && q.ioprio_class == 0
             && q.rwbs == HC_RWBS_READAHEAD,
         "a kernel before 6.10 (no ioprio)");
  CHECK (hc_rec_parse_line ("  <idle>-0 [001] ..s1. 3.25: block_rq_complete: 7,0 W () 2048 + 8 "
                            "be,0,4 [0]", &q, &lost) == HC_REC_COMPLETE
             && q.sector == 2048 && q.nr_sector == 8 && q.ts_ns == 3250000000ull,
         "a completion");
  CHECK (hc_rec_parse_line ("CPU:1 [LOST 42 EVENTS]", &q, &lost) == HC_REC_LOST && lost == 42,
         "lost events");
  CHECK (hc_rec_parse_line ("  a-1 [000] ..... 1.0: sched_switch: prev=a", &q, &lost) == HC_REC_OTHER,
         "another event");
  static const char *const bad[] = {
    "  a-1 [000] ..... x: block_rq_issue: 7,0 W 4096 () 8 + 8 be,0,4 [a]",
    "  a-1 [000] ..... 1.0: block_rq_issue: 7,0 Q 4096 () 8 + 8 be,0,4 [a]",
    "  a-1 [000] ..... 1.0: block_rq_issue: 7,0 W 4096 () 8 + 8 be,0,4",
    "  a-1 [000] ..... 1.0: block_rq_issue: 7,0 W 4096 (",
    "  a-1 [000] ..... 1.0: block_rq_complete: 7,0 W () 8 + 8 be,2000,4 [0]",
    "CPU:1 [LOST many EVENTS]",
  };
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK (hc_rec_parse_line (bad[i], &q, &lost) == -EINVAL, "bad line %u", i);
}

/* The README's numbers, the bin round trip on real data, read rates. */
static void
test_shared (const char *dir)
{
  struct stat st;
  char build[512], kv[512];

  snprintf (build, sizeof build, "%s/build.csv.gz", dir ? dir : ".");
  snprintf (kv, sizeof kv, "%s/kv.csv.gz", dir ? dir : ".");
  if (!dir || stat (build, &st) < 0 || stat (kv, &st) < 0) {
    printf ("shared traces not found in %s: their checks are skipped\n", dir ? dir : "(none)");
    return;
  }
  check_counts (build, 26847, 25207, 1600, 40, 128595);
  check_counts (kv, 255846, 117057, 92076, 46713, 1121608);
  check_bin_roundtrip (build, scratch ("build.bin"));
  check_bin_roundtrip (kv, scratch ("kv.bin"));
  check_csv_roundtrip (build, scratch ("build.csv.gz"));
  check_csv_roundtrip (kv, scratch ("kv.csv.gz"));
  time_read (kv, 1);
  time_read (scratch ("kv.bin"), 8);
}

/* Removes the scratch directory. */
static void
cleanup (void)
{
  DIR *d = opendir (tmpdir);
  struct dirent *e;

  if (!d)
    return;
  while ((e = readdir (d)))
    if (e->d_name[0] != '.')
      unlink (join (tmpdir, e->d_name));
  closedir (d);
  rmdir (tmpdir);
}

/* Runs every part in a scratch directory of its own. */
int
main (int argc, char **argv)
{
  const char *shared = argc > 1 ? argv[1] : NULL;
  const char *base = getenv ("TMPDIR");

  if (argc > 2)
    samples = argv[2];
  snprintf (tmpdir, sizeof tmpdir, "%s/hc_test_trace.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp (tmpdir)) {
    perror ("mkdtemp");
    return 1;
  }
  test_names ();
  test_csv ();
  test_blkparse ();
  test_ftrace ();
  test_msr ();
  test_malformed ();
  test_gzip_damage ();
  test_gzip_cuts ();
  test_gzip_members ();
  test_buffer_sizes ();
  test_open_errors ();
  test_rewind ();
  test_bin ();
  test_csv_writer ();
  test_record_lines ();
  test_pgcat_paths ();
  test_oracle ();
  test_mutants ();
  test_shared (shared);
  cleanup ();
  return test_exit ("test_trace");
}
