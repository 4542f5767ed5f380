/* The checks every trace reader's output must pass, whatever the bytes.
 * The input is put in a memory file and read through the public door,
 * hc_trace_open on its /proc/self/fd path, as the replayer and the CLI
 * read a file: no run touches the disk.
 *
 * fuzz_trace_check reads the input in one format (or detected) and checks:
 *   1. open fails with a negative errno and a reason, or gives a reader;
 *   2. read one request at a time (hc_trace_next) to the end: every
 *      request has its fields in range (op, label, ioprio class, level and
 *      hint, rwbs bits), a length of at most HC_TRACE_MAX_LENGTH and an end
 *      that does not overflow; the end is 0 or a negative errno, and an
 *      error stays (both doors return it again);
 *   3. rewound and read in batches of varying sizes (hc_trace_read), it
 *      gives the same requests (string ids too), end, skipped-line count,
 *      first skipped line and error text;
 *   4. when lines were skipped, read again under `strict` it gives a
 *      prefix of the same requests and stops at the first malformed line
 *      with -EINVAL (or at the same error);
 *   5. the requests, written through the bin writer to a second memory
 *      file, are all accepted (the writer refuses what no reader should
 *      hand out) and read back, under strict, as the same requests with the
 *      same strings, and the file's totals count them;
 *   6. detected (HC_TRACE_AUTO) input reads the same when opened with the
 *      format detection chose: the same requests with the same strings,
 *      end, skipped-line count, first skipped line and error text.
 *
 * fuzz_trace_gzip covers the gzip side of the same door (see there).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "trace/trace_priv.h"
#include "trace_check.h"

/* Requests read by one reader (strings resolved through it while open). */
struct reqs {
  struct hc_trace_req *v;
  size_t n, cap;
  long rc;           /* how the read ended: 0 or a negative errno */
  uint64_t skipped, first_skipped;
  char err[320];
};

static struct fuzz_file in_file, bin_file, gz_file;

/* Creates the memory files once. */
static void
files_init (void)
{
  static bool done;

  if (done)
    return;
  fuzz_file_init (&in_file, "trace_in");
  fuzz_file_init (&bin_file, "trace_bin");
  fuzz_file_init (&gz_file, "trace_gz");
  done = true;
}

/* Request arrays are kept for the next ones rather than freed: a run
 * needs a few, and the next run as many. */
static struct {
  struct hc_trace_req *v;
  size_t cap;
} spare[8];
static unsigned nspare;

static void
reqs_add (struct reqs *a, const struct hc_trace_req *r)
{
  if (a->n == a->cap) {
    if (!a->v && nspare) {
      nspare--;
      a->v = spare[nspare].v;
      a->cap = spare[nspare].cap;
    } else {
      a->cap = a->cap ? 2 * a->cap : 64;
      a->v = realloc (a->v, a->cap * sizeof *a->v);
      FUZZ_CHECK (a->v != NULL, "out of memory");
    }
  }
  a->v[a->n++] = *r;
}

static void
reqs_free (struct reqs *a)
{
  if (a->v && nspare < sizeof spare / sizeof spare[0]) {
    spare[nspare].v = a->v;
    spare[nspare].cap = a->cap;
    nspare++;
  } else
    free (a->v);
  memset (a, 0, sizeof *a);
}

/* Notes how a read ended, and checks that an error stays. */
static void
reqs_end (struct reqs *a, hc_trace *t, long rc)
{
  struct hc_trace_req r;

  a->rc = rc;
  FUZZ_CHECK (rc == 0 || (rc < 0 && rc > -4096), "a read ended with %ld", rc);
  if (rc < 0)
    FUZZ_CHECK (hc_trace_next (t, &r) == rc && hc_trace_read (t, &r, 1) == rc,
                "error %ld is not sticky", rc);
  a->skipped = hc_trace_skipped (t, &a->first_skipped);
  snprintf (a->err, sizeof a->err, "%s", hc_trace_error (t));
  FUZZ_CHECK (a->skipped == 0 ? a->first_skipped == 0 : a->first_skipped >= 1,
              "%llu skipped, the first at %llu", (unsigned long long) a->skipped,
              (unsigned long long) a->first_skipped);
}

/* Reads to the end one request at a time. */
static void
read_next (hc_trace *t, struct reqs *a)
{
  struct hc_trace_req r;
  int rc;

  while ((rc = hc_trace_next (t, &r)) == 1)
    reqs_add (a, &r);
  reqs_end (a, t, rc);
}

/* Reads to the end in batches whose sizes come from `seed`. */
static void
read_batches (hc_trace *t, struct reqs *a, uint64_t seed)
{
  struct hc_trace_req r[200];
  long got;

  for (;;) {
    size_t want;
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    want = 1 + (seed >> 33) % ((seed >> 60) & 1 ? 200 : 7);
    got = hc_trace_read (t, r, want);
    if (got <= 0)
      break;
    FUZZ_CHECK ((size_t) got <= want, "hc_trace_read gave %ld of %zu", got, want);
    for (long i = 0; i < got; i++)
      reqs_add (a, &r[i]);
  }
  reqs_end (a, t, got);
}

/* Every request's fields in range, as the door and the writer promise. */
static void
check_ranges (const struct reqs *a)
{
  for (size_t i = 0; i < a->n; i++) {
    const struct hc_trace_req *r = &a->v[i];
    FUZZ_CHECK (r->op <= HC_TOP_FLUSH && r->label < HC_LABEL_COUNT && r->ioprio_class <= 3
                    && r->ioprio_level <= 7 && r->ioprio_hint <= 1023 && r->rwbs <= 0x1f,
                "request %zu: a field out of range (op %u label %u class %u level %u hint %u "
                "rwbs %#x)", i, r->op, r->label, r->ioprio_class, r->ioprio_level, r->ioprio_hint,
                r->rwbs);
    FUZZ_CHECK (r->length <= HC_TRACE_MAX_LENGTH && r->offset <= UINT64_MAX - r->length,
                "request %zu: offset %llu length %llu", i, (unsigned long long) r->offset,
                (unsigned long long) r->length);
  }
}

/* True if two requests agree in every field; strings by text through their
 * readers, or by id when `ids`. */
static bool
same_req (const struct hc_trace_req *x, const hc_trace *tx, const struct hc_trace_req *y,
          const hc_trace *ty, bool ids)
{
  if (x->ts_ns != y->ts_ns || x->offset != y->offset || x->length != y->length || x->op != y->op
      || x->label != y->label || x->ioprio_class != y->ioprio_class
      || x->ioprio_level != y->ioprio_level || x->ioprio_hint != y->ioprio_hint
      || x->rwbs != y->rwbs || x->pid != y->pid)
    return false;
  if (ids)
    return x->comm == y->comm && x->object == y->object;
  return strcmp (hc_trace_string (tx, x->comm), hc_trace_string (ty, y->comm)) == 0
         && strcmp (hc_trace_string (tx, x->object), hc_trace_string (ty, y->object)) == 0;
}

/* Checks that b's first n requests equal a's. */
static void
check_same (const struct reqs *a, const hc_trace *ta, const struct reqs *b, const hc_trace *tb,
            size_t n, bool ids, const char *what)
{
  FUZZ_CHECK (n <= a->n && n <= b->n, "%s: %zu of %zu and %zu requests", what, n, a->n, b->n);
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK (same_req (&a->v[i], ta, &b->v[i], tb, ids), "%s: request %zu differs", what, i);
}

/* Opens the memory file f; NULL (and checks on the failure) if it fails. */
static hc_trace *
open_file (const struct fuzz_file *f, enum hc_trace_format format, bool strict)
{
  struct hc_trace_opts o = { .format = format, .strict = strict };
  hc_trace *t = NULL;
  char why[256] = "";
  int rc = hc_trace_open (f->path, &o, &t, why, sizeof why);

  FUZZ_CHECK (rc == 0 ? t != NULL : (rc < 0 && rc > -4096 && !t && why[0]),
              "open: rc %d, reason '%s'", rc, why);
  return t;
}

/* Step 5: the requests through the bin writer and back. */
static void
check_bin_roundtrip (hc_trace *t, const struct reqs *a)
{
  struct hc_trace_totals tot, want = { 0 };
  hc_trace_writer *w = NULL;
  struct reqs b = { 0 };
  char why[256] = "";
  int rc;

  for (size_t i = 0; i < a->n; i++) {
    const struct hc_trace_req *r = &a->v[i];
    want.requests++;
    want.reads += r->op == HC_TOP_READ;
    want.writes += r->op == HC_TOP_WRITE;
    want.discards += r->op == HC_TOP_DISCARD;
    want.flushes += r->op == HC_TOP_FLUSH;
    if ((r->op == HC_TOP_READ || r->op == HC_TOP_WRITE) && r->length) {
      want.block_accesses += (r->offset + r->length - 1) / 4096 - r->offset / 4096 + 1;
      if (r->offset + r->length > want.max_end)
        want.max_end = r->offset + r->length;
    }
  }
  /* The writer counts the footprint block by block: a few long requests
   * are millions of blocks, a cost of the format, not of the reader. */
  if (want.block_accesses > (1u << 16))
    return;
  rc = hc_trace_writer_open (bin_file.path, HC_TRACE_BIN, 0, &w, why, sizeof why);
  FUZZ_CHECK (rc == 0, "bin writer: %s", why);
  for (size_t i = 0; i < a->n; i++)
    FUZZ_CHECK ((rc = hc_trace_write (w, &a->v[i], t)) == 0, "the writer refused request %zu: %d",
                i, rc);
  FUZZ_CHECK (hc_trace_writer_close (w) == 0, "bin writer close");

  hc_trace *u = open_file (&bin_file, HC_TRACE_BIN, true);
  FUZZ_CHECK (u != NULL, "the written bin does not open");
  read_next (u, &b);
  FUZZ_CHECK (b.rc == 0 && b.n == a->n, "bin read back: rc %ld, %zu of %zu requests (%s)", b.rc,
              b.n, a->n, b.err);
  check_same (a, t, &b, u, a->n, false, "bin round trip");
  FUZZ_CHECK (hc_trace_totals (u, &tot) == 0, "bin totals");
  FUZZ_CHECK (tot.block_size == 4096 && tot.requests == want.requests && tot.reads == want.reads
                  && tot.writes == want.writes && tot.discards == want.discards
                  && tot.flushes == want.flushes && tot.block_accesses == want.block_accesses
                  && tot.max_end == want.max_end && tot.footprint_blocks <= tot.block_accesses,
              "bin totals differ from the requests written");
  reqs_free (&b);
  hc_trace_close (u);
}

/* Step 6: f opened with the format detection chose reads as the detected
 * reader t read it (a): the same requests with the same strings, end,
 * skipped lines and error text. */
static void
check_explicit (const struct fuzz_file *f, enum hc_trace_format detected, hc_trace *t,
                const struct reqs *a)
{
  struct reqs e = { 0 };
  hc_trace *u = open_file (f, detected, false);

  FUZZ_CHECK (u != NULL && hc_trace_get_format (u) == detected,
              "detected as %u, but it does not open as such", detected);
  read_next (u, &e);
  FUZZ_CHECK (e.n == a->n && e.rc == a->rc && e.skipped == a->skipped
                  && e.first_skipped == a->first_skipped && strcmp (e.err, a->err) == 0,
              "detected: %zu requests, end %ld, %llu skipped from %llu, '%s'; given format %u: "
              "%zu, %ld, %llu from %llu, '%s'", a->n, a->rc, (unsigned long long) a->skipped,
              (unsigned long long) a->first_skipped, a->err, detected, e.n, e.rc,
              (unsigned long long) e.skipped, (unsigned long long) e.first_skipped, e.err);
  check_same (a, t, &e, u, a->n, false, "format given as detected");
  reqs_free (&e);
  hc_trace_close (u);
}

/* Steps 1–5 on file f in `format`, and with `explicit` (detected input)
 * step 6; with `plain` (what reader tp read), the first reading must be
 * the same (format, requests, strings and their ids, end and skipped
 * lines).  Returns the detected format through *detected (HC_TRACE_AUTO if
 * it did not open) and the lenient requests' count. */
static size_t
check_file (const struct fuzz_file *f, enum hc_trace_format format, uint64_t seed, bool explicit,
            const struct reqs *plain, const hc_trace *tp, enum hc_trace_format *detected)
{
  struct reqs a = { 0 }, b = { 0 }, s = { 0 };
  hc_trace *t = open_file (f, format, false), *st;
  size_t n;

  *detected = HC_TRACE_AUTO;
  if (!t)
    return 0;
  *detected = hc_trace_get_format (t);
  FUZZ_CHECK (*detected != HC_TRACE_AUTO && (format == HC_TRACE_AUTO || *detected == format),
              "format %u read as %u", format, *detected);
  read_next (t, &a);
  check_ranges (&a);
  if (plain) {
    FUZZ_CHECK (hc_trace_get_format (tp) == *detected && plain->n == a.n && plain->rc == a.rc
                    && plain->skipped == a.skipped && plain->first_skipped == a.first_skipped,
                "plain: %u, %zu requests, end %ld, %llu skipped; gzip: %u, %zu, %ld, %llu",
                hc_trace_get_format (tp), plain->n, plain->rc, (unsigned long long) plain->skipped,
                *detected, a.n, a.rc, (unsigned long long) a.skipped);
    check_same (plain, tp, &a, t, a.n, true, "gzip");
  }

  if (hc_trace_rewind (t) == 0) {
    read_batches (t, &b, seed);
    FUZZ_CHECK (a.n == b.n && a.rc == b.rc && a.skipped == b.skipped
                    && a.first_skipped == b.first_skipped && strcmp (a.err, b.err) == 0,
                "one at a time: %zu requests, end %ld, %llu skipped from %llu, '%s'; in "
                "batches: %zu, %ld, %llu from %llu, '%s'", a.n, a.rc,
                (unsigned long long) a.skipped, (unsigned long long) a.first_skipped, a.err, b.n,
                b.rc, (unsigned long long) b.skipped, (unsigned long long) b.first_skipped, b.err);
    check_same (&a, t, &b, t, a.n, true, "batches");
  } else
    FUZZ_CHECK (a.rc < 0, "a reader that read cleanly does not rewind");

  /* Strict differs only where a line is malformed: without one, reading
   * again would repeat the lenient read (and cost a reader's buffers). */
  if (a.skipped > 0) {
    st = open_file (f, *detected, true);
    FUZZ_CHECK (st != NULL, "opens leniently but not strictly");
    read_next (st, &s);
    FUZZ_CHECK (s.skipped == 0, "strict skipped %llu", (unsigned long long) s.skipped);
    check_same (&a, t, &s, st, s.n, false, "strict prefix");
    FUZZ_CHECK (a.rc < 0 ? s.rc < 0 : s.rc == -EINVAL,
                "strict ended with %ld after lenient skipped a line and ended with %ld", s.rc,
                a.rc);
    hc_trace_close (st);
  }

  check_bin_roundtrip (t, &a);
  if (explicit)
    check_explicit (f, *detected, t, &a);
  n = a.n;
  reqs_free (&a);
  reqs_free (&b);
  reqs_free (&s);
  hc_trace_close (t);
  return n;
}

/* A seed for the batch sizes, from the input. */
static uint64_t
seed_of (const uint8_t *data, size_t size)
{
  uint64_t h = size;

  for (size_t i = 0; i < size && i < 64; i++)
    h = h * 31 + data[i];
  return h;
}

void
fuzz_trace_check (const uint8_t *data, size_t size, enum hc_trace_format format)
{
  enum hc_trace_format detected;

  files_init ();
  fuzz_file_set (&in_file, data, size);
  check_file (&in_file, format, seed_of (data, size), format == HC_TRACE_AUTO, NULL, NULL,
              &detected);
}

/* ---------------------------------------------------------------------------
 * gzip
 */

/* gzip of data[size] at `level`, in a buffer that serves every run.  So
 * does the deflate stream: reset and set to the level, it compresses
 * exactly as a new one would, without allocating its few hundred KiB of
 * state each time. */
static uint8_t *
gzip (const uint8_t *data, size_t size, int level, size_t *out_len)
{
  static z_stream z;
  static bool ready;
  static uint8_t *out;
  static size_t cap;

  if (!ready) {
    FUZZ_CHECK (deflateInit2 (&z, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                "deflateInit2");
    ready = true;
  }
  FUZZ_CHECK (deflateReset (&z) == Z_OK && deflateParams (&z, level, Z_DEFAULT_STRATEGY) == Z_OK,
              "deflate at level %d", level);
  size_t need = deflateBound (&z, size) + 64;
  if (need > cap) {
    out = realloc (out, need);
    FUZZ_CHECK (out != NULL, "out of memory");
    cap = need;
  }
  z.next_in = (Bytef *) data;
  z.avail_in = (uInt) size;
  z.next_out = out;
  z.avail_out = (uInt) cap;
  FUZZ_CHECK (deflate (&z, Z_FINISH) == Z_STREAM_END, "deflate");
  *out_len = z.total_out;
  return out;
}

/* Reads file f in `format` leniently to its end. */
static hc_trace *
read_whole (const struct fuzz_file *f, enum hc_trace_format format, struct reqs *a)
{
  hc_trace *t = open_file (f, format, false);

  if (t) {
    read_next (t, a);
    check_ranges (a);
  }
  return t;
}

/* data[0] % 3 picks the mode:
 *   0  the rest as it is (gzip or not, damaged or not) through steps 1–6;
 *   1  the rest after data[1], gzipped at level data[1] % 10: opens and
 *      reads exactly as the plain bytes do (same format, requests,
 *      strings, skipped lines and end) unless they are a gzip stream
 *      themselves, then steps 1–5 on the gzip;
 *   2  that gzip cut after data[1] + 256 × data[2] bytes (modulo its
 *      length), read in the plain input's format: the requests are a
 *      prefix of the plain input's, and a stream cut after its header
 *      ends with -EIO. */
void
fuzz_trace_gzip (const uint8_t *data, size_t size)
{
  struct fuzz_in in = { data, size };
  unsigned mode = (unsigned) fuzz_take (&in, 1) % 3;

  files_init ();
  if (mode == 0) {
    fuzz_trace_check (in.p, in.n, HC_TRACE_AUTO);
    return;
  }
  unsigned level = (unsigned) fuzz_take (&in, 1);
  size_t cut = (size_t) fuzz_take (&in, mode == 2 ? 2 : 0) * 256 + level;
  size_t zlen;
  uint8_t *z = gzip (in.p, in.n, (int) (level % 10), &zlen);
  struct reqs a = { 0 }, b = { 0 };
  enum hc_trace_format detected;

  fuzz_file_set (&in_file, in.p, in.n);
  hc_trace *t = read_whole (&in_file, HC_TRACE_AUTO, &a);
  detected = t ? hc_trace_get_format (t) : HC_TRACE_AUTO;
  if (mode == 1) {
    /* Detection sees the same bytes and, below HC_TRACE_HEAD, the same
     * size: compressed or not, the reading is the same, then steps 1–5 on
     * the gzip.  (Unless the bytes are a gzip stream themselves: the
     * reader inflates once, so the plain bytes then read as what they
     * hold, and their gzip as them.) */
    bool same = in.n < HC_TRACE_HEAD && !(in.n >= 2 && in.p[0] == 0x1f && in.p[1] == 0x8b);
    enum hc_trace_format d;
    fuzz_file_set (&gz_file, z, zlen);
    check_file (&gz_file, HC_TRACE_AUTO, seed_of (data, size), false, same && t ? &a : NULL, t,
                &d);
    FUZZ_CHECK (!same || !t == (d == HC_TRACE_AUTO), "plain opens: %d, gzip opens: %d", t != NULL,
                d != HC_TRACE_AUTO);
  } else if (t) {
    cut %= zlen;
    fuzz_file_set (&gz_file, z, cut);
    hc_trace *u = read_whole (&gz_file, detected, &b);
    if (u) {
      check_same (&a, t, &b, u, b.n, true, "cut gzip");
      if (cut >= 10)
        FUZZ_CHECK (b.rc == -EIO, "a gzip cut at %zu of %zu ends with %ld", cut, zlen, b.rc);
    }
    hc_trace_close (u);
  }
  hc_trace_close (t);
  reqs_free (&a);
  reqs_free (&b);
}
