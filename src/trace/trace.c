/* The trace core: format names, errors and malformed-line accounting,
 * opening (with detection), the request loop, rewind and close.  The
 * input buffer and the text formats' shared parsing are in input.c, the
 * string table in strtab.c, the writer door in writer.c.
 *
 * Detection reads the first 128 KiB (HC_TRACE_HEAD) and asks every format
 * how sure it is: bin and csv have exact headers; blkparse, ftrace and msr
 * parse their first lines and count how many look like theirs; oracle,
 * which has no header at all, only wins when nothing else does.
 *
 * Malformed lines are counted with the number of the first; under
 * `strict` the first one ends the read with -EINVAL.  In the lenient mode
 * the reason for the first one stays readable through hc_trace_error, so a
 * tool can say why lines were dropped.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "trace_priv.h"
#include "util.h"


static const struct hc_trace_fmt *const formats[HC_TRACE_FORMAT_COUNT] = {
  [HC_TRACE_CSV] = &hc_trace_fmt_csv,
  [HC_TRACE_BLKPARSE] = &hc_trace_fmt_blkparse,
  [HC_TRACE_FTRACE] = &hc_trace_fmt_ftrace,
  [HC_TRACE_MSR] = &hc_trace_fmt_msr,
  [HC_TRACE_ORACLE] = &hc_trace_fmt_oracle,
  [HC_TRACE_BIN] = &hc_trace_fmt_bin,
};

static const char *const label_names[HC_LABEL_COUNT] = {
  [HC_LABEL_NONE] = "",
  [HC_LABEL_FS_METADATA] = "fs_metadata",
  [HC_LABEL_JOURNAL] = "journal",
  [HC_LABEL_WAL] = "wal",
  [HC_LABEL_INDEX] = "index",
  [HC_LABEL_TABLE] = "table",
  [HC_LABEL_TOAST] = "toast",
  [HC_LABEL_CATALOG] = "catalog",
  [HC_LABEL_OTHER_FILE] = "other_file",
  [HC_LABEL_TEMP] = "temp",
  [HC_LABEL_UNKNOWN] = "unknown",
};

static const char *const op_names[] = { "R", "W", "D", "F" };

const struct hc_trace_fmt *
hc_trace_fmt_of (enum hc_trace_format format)
{
  return format < HC_TRACE_FORMAT_COUNT ? formats[format] : NULL;
}

/* Readers get distinct serials so a writer can cache per-reader ids. */
static uint64_t next_serial = 1;

/* Names ------------------------------------------------------------------ */

/* The name of a format ("auto" for 0), NULL if out of range. */
const char *
hc_trace_format_name (unsigned format)
{
  if (format == HC_TRACE_AUTO)
    return "auto";
  return format < HC_TRACE_FORMAT_COUNT ? formats[format]->name : NULL;
}

/* Looks a format up by name. */
int
hc_trace_format_parse (const char *name, enum hc_trace_format *format)
{
  if (!name)
    return -EINVAL;
  for (unsigned i = 0; i < HC_TRACE_FORMAT_COUNT; i++)
    if (strcmp (name, hc_trace_format_name (i)) == 0) {
      *format = (enum hc_trace_format) i;
      return 0;
    }
  return -EINVAL;
}

/* Labels by name ("" for none). */
HC_DEFINE_NAMES (hc_trace_label, enum hc_trace_label, label_names, HC_LABEL_COUNT)

/* The letter of an op, NULL if out of range. */
const char *
hc_trace_op_name (unsigned op)
{
  return op < sizeof op_names / sizeof op_names[0] ? op_names[op] : NULL;
}

/* Errors and accounting ------------------------------------------------------ */

/* Sets the error text and returns rc. */
int
hc_trace_fail (struct hc_trace *t, int rc, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (t->err, sizeof t->err, fmt, ap);
  va_end (ap);
  return rc;
}

/* Notes why the current line is malformed. */
int
hc_trace_bad (struct hc_trace *t, const char *fmt, ...)
{
  va_list ap;

  /* Detection rejects lines by the dozen: formatting them would be waste. */
  if (t->probing)
    return -EINVAL;
  va_start (ap, fmt);
  vsnprintf (t->reason, sizeof t->reason, fmt, ap);
  va_end (ap);
  return -EINVAL;
}

/* Counts a malformed line or record. */
int
hc_trace_malformed (struct hc_trace *t)
{
  const char *unit = t->fmt->next ? "record" : "line";

  /* Under strict the line ends the read: it is not skipped. */
  if (t->opts.strict)
    return hc_trace_fail (t, -EINVAL, "%s %llu: %s", unit, (unsigned long long) t->lineno,
                          t->reason);
  t->skipped++;
  if (!t->first_skipped) {
    t->first_skipped = t->lineno;
    if (!t->err[0])
      snprintf (t->err, sizeof t->err, "%s %llu: %s (skipped)", unit,
                (unsigned long long) t->lineno, t->reason);
  }
  return 0;
}

/* The text of the last error. */
const char *
hc_trace_error (const hc_trace *t)
{
  return t ? t->err : "";
}

/* How many lines were skipped, and the first. */
uint64_t
hc_trace_skipped (const hc_trace *t, uint64_t *first_line)
{
  if (first_line)
    *first_line = t ? t->first_skipped : 0;
  return t ? t->skipped : 0;
}

/* The format being read. */
enum hc_trace_format
hc_trace_get_format (const hc_trace *t)
{
  return t ? t->fmt->format : HC_TRACE_AUTO;
}

/* Opening and closing -------------------------------------------------------- */

/* Copies the start of the first line into a message, made printable. */
static void
first_line (const char *buf, size_t len, char *out, size_t outlen)
{
  size_t i;

  for (i = 0; i < len && i + 1 < outlen && buf[i] != '\n'; i++)
    out[i] = isprint ((unsigned char) buf[i]) ? buf[i] : '?';
  out[i] = '\0';
}

/* Picks the format the head of the input is most likely in. */
static const struct hc_trace_fmt *
detect (struct hc_trace *t, bool whole, int64_t size)
{
  const struct hc_trace_fmt *best = NULL;
  const unsigned char *head = (const unsigned char *) t->buf + t->pos;
  size_t len = t->fill - t->pos;
  int best_score = 0;

  for (unsigned i = 1; i < HC_TRACE_FORMAT_COUNT; i++) {
    int score = formats[i]->probe ? formats[i]->probe (t, head, len, whole, size)
                                  : hc_trace_probe_text (t, formats[i], head, len, whole);
    if (score > best_score) {
      best = formats[i];
      best_score = score;
    }
  }
  return best;
}

/* Opens the input of t: path, or standard input for "-". */
static int
open_input (struct hc_trace *t, const char *path, int64_t *size)
{
  struct stat st;
  int fd;

  fd = t->is_stdin ? dup (STDIN_FILENO) : open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat (fd, &st) < 0) {
    int rc = -errno;
    close (fd);
    return rc;
  }
  if (S_ISDIR (st.st_mode)) {
    close (fd);
    return -EISDIR;
  }
  *size = S_ISREG (st.st_mode) ? (int64_t) st.st_size : -1;
  t->fd = fd;
  t->size = *size;
  return 0;
}

/* Opens a trace. */
int
hc_trace_open (const char *path, const struct hc_trace_opts *o, hc_trace **out, char *why,
               size_t whylen)
{
  struct hc_trace_opts opts = { 0 };
  struct hc_trace *t;
  struct hc_sb sb;
  int64_t size = -1;
  bool whole;
  long have;
  int rc;

  hc_sb_init (&sb, why, why ? whylen : 0);
  if (!out || !path) {
    hc_sb_printf (&sb, "no path");
    return -EINVAL;
  }
  *out = NULL;
  if (o)
    opts = *o;
  if ((unsigned) opts.format >= HC_TRACE_FORMAT_COUNT) {
    hc_sb_printf (&sb, "unknown trace format %u", (unsigned) opts.format);
    return -EINVAL;
  }
  if (!opts.block_size)
    opts.block_size = 4096;
  if (!(t = calloc (1, sizeof *t))) {
    hc_sb_printf (&sb, "out of memory");
    return -ENOMEM;
  }
  t->fd = -1;
  t->opts = opts;
  t->is_stdin = strcmp (path, "-") == 0;
  t->serial = __atomic_fetch_add (&next_serial, 1, __ATOMIC_RELAXED);
  if ((rc = open_input (t, path, &size)) < 0) {
    hc_sb_printf (&sb, "%s: %s", path, strerror (-rc));
    goto err;
  }
  /* The buffer is sized once the file's size is known. */
  if (!(t->buf = malloc ((t->cap = hc_trace_first_cap (size)) + 1))) {
    hc_sb_printf (&sb, "out of memory");
    rc = -ENOMEM;
    goto err;
  }
  if ((have = hc_trace_fill (t, HC_TRACE_HEAD)) < 0) {
    rc = (int) have;
    hc_sb_printf (&sb, "%s: %s", path, t->err);
    goto err;
  }
  /* The line copy of the text formats' probes, that is of detection: no
   * line of the head is longer than the head. */
  if (opts.format == HC_TRACE_AUTO
      && !(t->scratch = malloc ((t->fill < HC_TRACE_LINE_MAX ? t->fill : HC_TRACE_LINE_MAX) + 1))) {
    hc_sb_printf (&sb, "out of memory");
    rc = -ENOMEM;
    goto err;
  }
  whole = t->eof;
  /* The size on disk is the trace's size only when it is not compressed. */
  if (t->in_how == HC_IN_GZIP)
    size = whole ? (int64_t) t->fill : -1;
  if (opts.format == HC_TRACE_AUTO) {
    char line[64];
    if (!(t->fmt = detect (t, whole, size))) {
      first_line (t->buf, t->fill, line, sizeof line);
      if (have == 0)
        hc_sb_printf (&sb, "%s: empty input", path);
      else
        hc_sb_printf (&sb, "%s: not a trace in any known format (starts with '%s')", path, line);
      rc = -EINVAL;
      goto err;
    }
  } else {
    t->fmt = formats[opts.format];
    /* Formats with a header are checked now, so a wrong --format fails at
     * open and not as a stream of malformed lines. */
    if ((t->fmt == &hc_trace_fmt_csv || t->fmt == &hc_trace_fmt_bin)
        && !t->fmt->probe (t, (const unsigned char *) t->buf, t->fill, whole, size)) {
      hc_sb_printf (&sb, "%s: not a %s trace (%s)", path, t->fmt->name,
                    t->fmt == &hc_trace_fmt_csv ? "the first line is not the csv header"
                                                : "no HCTRACE1 header");
      rc = -EINVAL;
      goto err;
    }
  }
  if (t->fmt->reset)
    t->fmt->reset (t);
  *out = t;
  return 0;

err:
  hc_trace_close (t);
  return rc;
}

/* The next request through the format, checked for what holds for every
 * format's requests (the one place those checks live). */
static int
next_checked (hc_trace *t, struct hc_trace_req *r)
{
  int rc;

  while ((rc = t->fmt->next ? t->fmt->next (t, r) : hc_trace_text_next (t, r)) == 1
         && !hc_trace_req_in_range (r)) {
    if (r->length > HC_TRACE_MAX_LENGTH)
      hc_trace_bad (t, "length %llu bytes: a request is under 4 GiB",
                    (unsigned long long) r->length);
    else
      hc_trace_bad (t, "offset %llu + length %llu overflows", (unsigned long long) r->offset,
                    (unsigned long long) r->length);
    if ((rc = hc_trace_malformed (t)) < 0)
      break;
  }
  return rc;
}

/* Reads the next request: the door every request passes, one at a time. */
int
hc_trace_next (hc_trace *t, struct hc_trace_req *r)
{
  int rc;

  if (!t || !r)
    return -EINVAL;
  if (t->status)
    return t->status;
  if ((rc = next_checked (t, r)) < 0)
    t->status = rc;
  return rc;
}

/* Reads up to n requests: the same door, many at a time.  A format with a
 * `read` op decodes the plain records in bulk; whatever it leaves (a refill,
 * a definition, a malformed record, the end) takes the one-at-a-time path,
 * so both paths see the same requests and the same errors.  An error met
 * after some requests were read is kept for the next call. */
long
hc_trace_read (hc_trace *t, struct hc_trace_req *r, size_t n)
{
  size_t got = 0;
  int rc;

  if (!t || !r || n == 0)
    return -EINVAL;
  if (t->status)
    return t->status;
  if (n > LONG_MAX)
    n = LONG_MAX;
  while (got < n) {
    if (t->fmt->read && (got += t->fmt->read (t, r + got, n - got)) == n)
      break;
    if ((rc = next_checked (t, r + got)) <= 0) {
      if (rc < 0)
        t->status = rc;
      return got ? (long) got : rc;
    }
    got++;
  }
  return (long) got;
}

/* Restarts at the first request. */
int
hc_trace_rewind (hc_trace *t)
{
  if (!t)
    return -EINVAL;
  if (t->is_stdin)
    return hc_trace_fail (t, -ESPIPE, "standard input cannot be rewound");
  /* A reader that hit a read error or corrupt data stays failed, as a
   * reopen would only meet the same damage again; one that met the early
   * end of a compressed stream may read it again. */
  if (t->in_broken || lseek (t->fd, 0, SEEK_SET) < 0
      || (t->in_how == HC_IN_GZIP && inflateReset (&t->z) != Z_OK))
    return hc_trace_fail (t, -EIO, "cannot rewind: %s", t->err[0] ? t->err : "seek failed");
  t->in_eof = t->z_member_end = false;
  t->z.avail_in = 0;
  t->pos = t->fill = 0;
  t->eof = false;
  t->lineno = t->skipped = t->first_skipped = 0;
  t->status = 0;
  t->err[0] = t->reason[0] = '\0';
  if (t->fmt->reset)
    t->fmt->reset (t);
  return 0;
}

int
hc_trace_totals (hc_trace *t, struct hc_trace_totals *out)
{
  if (!t || !out)
    return -EINVAL;
  if (!t->fmt->totals || t->size < 0 || t->in_how == HC_IN_GZIP)
    return -ENODATA;
  return t->fmt->totals (t, out);
}

/* Closes a trace. */
void
hc_trace_close (hc_trace *t)
{
  if (!t)
    return;
  if (t->fd >= 0)
    close (t->fd);
  if (t->z_init)
    inflateEnd (&t->z);
  free (t->zin);
  hc_trace_strtab_free (&t->strs);
  free (t->bin_map);
  free (t->scratch);
  free (t->buf);
  free (t);
}
