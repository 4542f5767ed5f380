/* The trace core: opening, detection, buffered input, lines, strings,
 * malformed-line accounting, rewind, names, and the writer door.
 *
 * Input is read with read(2) straight into one buffer (up to 1 MiB; no
 * larger than a small file, so that opening one costs no large allocation)
 * that text formats cut into lines in place and binary formats decode
 * directly; a request therefore never costs a system call.  Input that
 * starts with gzip's magic is inflated with zlib into that buffer instead,
 * so every format can also be read gzip-compressed: members are read one
 * after another, and anything after the last one is ignored, as zlib's
 * gzread does.  Every end of compressed input is checked: a stream that
 * stops inside a member, or damaged data, is -EIO, never a silent short
 * trace.  (The reader inflates for itself because gzread misses a cut
 * stream when its output fills up exactly as the input runs out: it then
 * reports a clean end.)  Writers' output buffers start small and grow.
 *
 * Detection reads the first 128 KiB (HC_TRACE_HEAD) and asks every format
 * how sure it is: bin and csv have exact headers; blkparse, ftrace and msr
 * parse their first lines and count how many look like theirs; oracle,
 * which has no header at all, only wins when nothing else does.
 *
 * Text lines are bounded (HC_TRACE_LINE_MAX); a longer line is skipped whole
 * and counted as malformed like any line its format rejects.  Malformed
 * lines are counted with the number of the first; under `strict` the first
 * one ends the read with -EINVAL.  In the lenient mode the reason for the
 * first one stays readable through hc_trace_error, so a tool can say why
 * lines were dropped.
 *
 * Strings (comm, object) are interned in a hash table keyed by XXH3, with
 * the texts in an arena so their addresses never move; ids are dense from 1
 * in order of first appearance and survive a rewind.
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

/* Size of a block of the string arena: the first one small (a small
 * trace has few strings), each next one twice the last, up to this. */
#define ARENA_BLOCK0 ((size_t) 1 << 10)
#define ARENA_BLOCK ((size_t) 64 << 10)
/* The compressed input buffer (a small file's size when less). */
#define GZ_BUFFER (1u << 18)

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

/* The name of a label ("" for none), NULL if out of range. */
const char *
hc_trace_label_name (unsigned label)
{
  return label < HC_LABEL_COUNT ? label_names[label] : NULL;
}

/* Looks a label up by name ("" is none). */
int
hc_trace_label_parse (const char *name, enum hc_trace_label *label)
{
  if (!name)
    return -EINVAL;
  for (unsigned i = 0; i < HC_LABEL_COUNT; i++)
    if (strcmp (name, label_names[i]) == 0) {
      *label = (enum hc_trace_label) i;
      return 0;
    }
  return -EINVAL;
}

/* The letter of an op, NULL if out of range. */
const char *
hc_trace_op_name (unsigned op)
{
  return op < sizeof op_names / sizeof op_names[0] ? op_names[op] : NULL;
}

/* Strings ----------------------------------------------------------------- */

/* Rebuilds the hash index at twice the size. */
static int
strtab_grow_index (struct hc_trace_strtab *s)
{
  size_t nslot = s->nslot ? s->nslot * 2 : 256;
  uint32_t *slot = calloc (nslot, sizeof *slot);

  if (!slot)
    return -ENOMEM;
  for (uint32_t id = 1; id < s->n; id++) {
    size_t i = s->hash[id] & (nslot - 1);
    while (slot[i])
      i = (i + 1) & (nslot - 1);
    slot[i] = id;
  }
  free (s->slot);
  s->slot = slot;
  s->nslot = nslot;
  return 0;
}

/* Makes room for one more id in the per-id arrays. */
static int
strtab_grow_ids (struct hc_trace_strtab *s)
{
  uint32_t cap = s->cap ? s->cap * 2 : 64;
  const char **text;
  uint32_t *len, *hash;

  if (s->cap >= UINT32_MAX / 2)
    return -ENOMEM;
  /* Each array is replaced only once all three exist, so a failure leaves
   * the table as it was. */
  text = realloc (s->text, cap * sizeof *text);
  if (!text)
    return -ENOMEM;
  s->text = text;
  len = realloc (s->len, cap * sizeof *len);
  if (!len)
    return -ENOMEM;
  s->len = len;
  hash = realloc (s->hash, cap * sizeof *hash);
  if (!hash)
    return -ENOMEM;
  s->hash = hash;
  if (!s->cap) {
    s->text[0] = "";
    s->len[0] = 0;
    s->hash[0] = 0;
    s->n = 1;
  }
  s->cap = cap;
  return 0;
}

/* Copies text into the arena, NUL-terminated. */
static char *
strtab_store (struct hc_trace_strtab *s, const char *text, size_t len)
{
  char *p;

  if (len + 1 > s->block_left) {
    size_t size = s->nblocks < 6 ? ARENA_BLOCK0 << s->nblocks : ARENA_BLOCK;
    if (size < len + 1)
      size = len + 1;
    char **blocks = realloc (s->blocks, (s->nblocks + 1) * sizeof *blocks);
    if (!blocks)
      return NULL;
    s->blocks = blocks;
    if (!(p = malloc (size)))
      return NULL;
    s->blocks[s->nblocks++] = p;
    s->block_pos = p;
    s->block_left = size;
  }
  p = s->block_pos;
  memcpy (p, text, len);
  p[len] = '\0';
  s->block_pos += len + 1;
  s->block_left -= len + 1;
  return p;
}

/* Finds or adds a string; *added says whether it was new. */
int
hc_trace_strtab_intern (struct hc_trace_strtab *s, const char *text, size_t len, uint32_t *id,
                        bool *added)
{
  uint32_t h;
  size_t i;
  char *copy;
  int rc;

  if (added)
    *added = false;
  if (len == 0) {
    *id = 0;
    return 0;
  }
  if (len >= UINT32_MAX)
    return -EINVAL;
  if ((s->n + 1) * (size_t) 2 > s->nslot && (rc = strtab_grow_index (s)) < 0)
    return rc;
  h = (uint32_t) XXH3_64bits (text, len);
  for (i = h & (s->nslot - 1); s->slot[i]; i = (i + 1) & (s->nslot - 1)) {
    uint32_t k = s->slot[i];
    if (s->hash[k] == h && s->len[k] == len && memcmp (s->text[k], text, len) == 0) {
      *id = k;
      return 0;
    }
  }
  if (s->n >= s->cap && (rc = strtab_grow_ids (s)) < 0)
    return rc;
  if (!(copy = strtab_store (s, text, len)))
    return -ENOMEM;
  s->text[s->n] = copy;
  s->len[s->n] = (uint32_t) len;
  s->hash[s->n] = h;
  s->slot[i] = s->n;
  *id = s->n++;
  if (added)
    *added = true;
  return 0;
}

/* Frees a string table. */
void
hc_trace_strtab_free (struct hc_trace_strtab *s)
{
  for (size_t i = 0; i < s->nblocks; i++)
    free (s->blocks[i]);
  free (s->blocks);
  free (s->text);
  free (s->len);
  free (s->hash);
  free (s->slot);
  memset (s, 0, sizeof *s);
}

/* Interns a string for the reader (nothing while probing). */
int
hc_trace_intern (struct hc_trace *t, const char *s, size_t len, uint32_t *id)
{
  if (t->probing) {
    *id = 0;
    return 0;
  }
  return hc_trace_strtab_intern (&t->strs, s, len, id, NULL);
}

/* The text of an interned string. */
const char *
hc_trace_string (const hc_trace *t, uint32_t id)
{
  if (!t || id >= t->strs.n)
    return "";
  return t->strs.text[id];
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

/* Input --------------------------------------------------------------------- */

/* The first input buffer: HC_TRACE_BUF0, or for a regular file smaller
 * than that, its size rounded up to the next 64 bytes, which holds it
 * whole with room to spare, so that the first read also meets the end.
 * (Input that turns out larger, a small gzip file say, grows it.) */
static size_t
first_cap (int64_t size)
{
  if (size < 0 || (uint64_t) size >= HC_TRACE_BUF0)
    return HC_TRACE_BUF0;
  return ((size_t) size / 64 + 1) * 64;
}

/* Grows the input buffer to twice its size, up to HC_TRACE_BUF.  Returns 0
 * or -ENOMEM. */
static int
grow_buffer (struct hc_trace *t)
{
  size_t cap = t->cap * 2;
  char *b;

  if (cap > HC_TRACE_BUF)
    cap = HC_TRACE_BUF;
  if (cap <= t->cap || !(b = realloc (t->buf, cap + 1)))
    return -ENOMEM;
  t->buf = b;
  t->cap = cap;
  return 0;
}

/* One read(2) of up to len bytes: the count, 0 at the end of the file, or
 * -EIO (the reader then cannot be rewound). */
static long
read_some (struct hc_trace *t, unsigned char *dst, size_t len)
{
  for (;;) {
    ssize_t n = read (t->fd, dst, len);
    if (n >= 0) {
      t->in_eof = n == 0;
      return (long) n;
    }
    if (errno != EINTR) {
      t->in_broken = true;
      return hc_trace_fail (t, -EIO, "read error: %s", strerror (errno));
    }
  }
}

/* Fails on compressed input that cannot be read on; `broken` unless it
 * merely stops early (which a rewind may read again). */
static long
gzip_fail (struct hc_trace *t, int rc, bool broken, const char *msg)
{
  t->in_broken |= broken;
  return hc_trace_fail (t, rc, "truncated or corrupt compressed input: %s", msg);
}

/* Fails on what inflate returned. */
static long
inflate_fail (struct hc_trace *t, int ret)
{
  if (ret == Z_DATA_ERROR)
    return gzip_fail (t, -EIO, true, t->z.msg ? t->z.msg : "compressed data error");
  if (ret == Z_MEM_ERROR)
    return gzip_fail (t, -ENOMEM, true, "out of memory");
  return gzip_fail (t, -EIO, true, "internal error: inflate stream corrupt");
}

/* Reads more compressed input behind what is left of it (which moves to
 * the start of zin).  Returns 0 (at the end of the file too) or -EIO. */
static long
gzip_load (struct hc_trace *t)
{
  long n;

  if (t->z.avail_in && t->z.next_in != t->zin)
    memmove (t->zin, t->z.next_in, t->z.avail_in);
  t->z.next_in = t->zin;
  n = read_some (t, t->zin + t->z.avail_in, t->zin_cap - t->z.avail_in);
  if (n > 0)
    t->z.avail_in += (uInt) n;
  return n < 0 ? n : 0;
}

/* Inflates up to len bytes into dst: the count, 0 at the end of the last
 * member, or a negative errno.  Output made before an error is handed out
 * first; the error comes on the next call. */
static long
gzip_read (struct hc_trace *t, unsigned char *dst, size_t len)
{
  z_stream *z = &t->z;
  long rc;

  if (t->z_error)
    return inflate_fail (t, t->z_error);
  if (len > UINT_MAX)
    len = UINT_MAX;
  z->next_out = dst;
  z->avail_out = (uInt) len;
  while (z->avail_out) {
    if (t->z_member_end) {
      /* Another member, or the end: anything else is ignored. */
      if (z->avail_in < 2 && !t->in_eof && (rc = gzip_load (t)) < 0)
        return rc;
      if (z->avail_in < 2 && !t->in_eof)
        continue;
      if (z->avail_in < 2 || z->next_in[0] != 0x1f || z->next_in[1] != 0x8b) {
        z->avail_in = 0;
        break;
      }
      if (inflateReset (z) != Z_OK)
        return gzip_fail (t, -EIO, true, "internal error: inflate stream corrupt");
      t->z_member_end = false;
    }
    if (!z->avail_in) {
      if (!t->in_eof && (rc = gzip_load (t)) < 0)
        return rc;
      if (!z->avail_in && t->in_eof) {
        /* The file ends inside a member: whatever came before first. */
        if (z->avail_out < len)
          break;
        return gzip_fail (t, -EIO, false, "unexpected end of file");
      }
      continue;
    }
    int ret = inflate (z, Z_NO_FLUSH);
    if (ret == Z_STREAM_END)
      t->z_member_end = true;
    else if (ret != Z_OK && ret != Z_BUF_ERROR) {
      t->z_error = ret;
      if (z->avail_out == len)
        return inflate_fail (t, ret);
      break; /* the error on the next call */
    }
  }
  return (long) (len - z->avail_out);
}

/* Reads up to len (at least 2) bytes of the input into dst: the count, 0
 * at its end, or a negative errno.  The first bytes decide how, once: gzip's
 * magic makes the input compressed; anything else passes through. */
static long
input_read (struct hc_trace *t, unsigned char *dst, size_t len)
{
  long n;

  if (t->in_how == HC_IN_PLAIN)
    return t->in_eof ? 0 : read_some (t, dst, len);
  if (t->in_how == HC_IN_GZIP)
    return gzip_read (t, dst, len);
  size_t got = 0;
  while (got < 2 && !t->in_eof) {
    if ((n = read_some (t, dst + got, len - got)) < 0)
      return n;
    got += (size_t) n;
  }
  if (got < 2 || dst[0] != 0x1f || dst[1] != 0x8b) {
    t->in_how = HC_IN_PLAIN;
    return (long) got;
  }
  /* Compressed: what was read so far is the start of zin. */
  if (!t->zin) {
    t->zin_cap = t->size >= 0 && t->size < GZ_BUFFER ? first_cap (t->size) : GZ_BUFFER;
    if (t->zin_cap < got)
      t->zin_cap = got;
    if (!(t->zin = malloc (t->zin_cap)))
      return hc_trace_fail (t, -ENOMEM, "out of memory");
  }
  if (inflateInit2 (&t->z, 16 + MAX_WBITS) != Z_OK)
    return hc_trace_fail (t, -ENOMEM, "out of memory");
  t->z_init = true;
  memcpy (t->zin, dst, got);
  t->z.next_in = t->zin;
  t->z.avail_in = (uInt) got;
  t->z_member_end = false;
  t->in_how = HC_IN_GZIP;
  return gzip_read (t, dst, len);
}

/* Refills the buffer until `need` bytes are unread or the input ends. */
long
hc_trace_fill (struct hc_trace *t, size_t need)
{
  size_t have = t->fill - t->pos;

  if (have >= need || t->eof)
    return (long) have;
  if (t->pos) {
    memmove (t->buf, t->buf + t->pos, have);
    t->pos = 0;
    t->fill = have;
  }
  /* Input that filled the buffer is larger than it: read it in larger
   * chunks (if memory is short, the chunks simply stay as they are). */
  if (t->filled && t->cap < HC_TRACE_BUF)
    grow_buffer (t);
  t->filled = false;
  while (t->fill < need && !t->eof) {
    long n;

    /* A full buffer short of `need` (which is at most HC_TRACE_BUF) is a
     * first buffer sized to a file that holds more than its size. */
    if (t->fill == t->cap) {
      if (t->cap >= HC_TRACE_BUF)
        break;
      if (grow_buffer (t) < 0)
        return hc_trace_fail (t, -ENOMEM, "out of memory for the input buffer");
    }
    n = input_read (t, (unsigned char *) t->buf + t->fill, t->cap - t->fill);
    if (n < 0)
      return n;
    if (n > 0) {
      t->fill += (size_t) n;
      t->filled |= t->fill == t->cap;
      continue;
    }
    t->eof = true;
  }
  return (long) (t->fill - t->pos);
}

/* Reads the next line: 1 with *line (NUL-terminated, no newline or CR)
 * and *len, 2 for a line over the bound (consumed), 0 at the end, or a
 * negative errno. */
static int
read_line (struct hc_trace *t, char **line, size_t *len)
{
  bool toolong = false;

  for (;;) {
    char *start = t->buf + t->pos;
    size_t have = t->fill - t->pos;
    char *nl = memchr (start, '\n', have);
    size_t n;
    long rc;

    if (nl || (t->eof && have)) {
      n = nl ? (size_t) (nl - start) : have;
      t->pos += n + (nl != NULL);
      t->lineno++;
      if (toolong || n > HC_TRACE_LINE_MAX)
        return 2;
      /* A last line without a newline ends at fill: buf has a spare byte. */
      start[n] = '\0';
      if (n && start[n - 1] == '\r')
        start[--n] = '\0';
      *line = start;
      *len = n;
      return 1;
    }
    if (t->eof) {
      if (toolong) {
        t->lineno++;
        return 2;
      }
      return 0;
    }
    /* No newline within the bound: drop what we have of this line and
     * keep reading to its end, so memory stays bounded. */
    if (have > HC_TRACE_LINE_MAX) {
      toolong = true;
      t->pos = t->fill;
      have = 0;
    }
    rc = hc_trace_fill (t, have + 1);
    if (rc < 0)
      return (int) rc;
  }
}

/* The line loop of the text formats. */
static int
text_next (struct hc_trace *t, struct hc_trace_req *r)
{
  for (;;) {
    char *line = NULL;
    size_t len = 0;
    int rc = read_line (t, &line, &len);

    if (rc <= 0)
      return rc;
    if (rc == 2)
      rc = hc_trace_bad (t, "line longer than %d bytes", HC_TRACE_LINE_MAX);
    else if (memchr (line, '\0', len))
      rc = hc_trace_bad (t, "NUL byte in line");
    else {
      memset (r, 0, sizeof *r);
      rc = t->fmt->parse (t, line, len, r);
    }
    if (rc == HC_LINE_REQ)
      return 1;
    if (rc == -EINVAL) {
      if ((rc = hc_trace_malformed (t)) < 0)
        return rc;
    } else if (rc < 0)
      return hc_trace_fail (t, rc, "line %llu: %s", (unsigned long long) t->lineno,
                            strerror (-rc));
  }
}

/* Scores the head of the input for a text format. */
int
hc_trace_probe_text (struct hc_trace *t, const struct hc_trace_fmt *f, const unsigned char *head,
                     size_t len, bool whole)
{
  uint64_t saved = t->lineno;
  int good = 0, bad = 0;
  size_t pos = 0;

  if (f->reset)
    f->reset (t);
  t->probing = true;
  for (unsigned i = 0; i < HC_TRACE_PROBE_LINES && pos < len; i++) {
    const unsigned char *nl = memchr (head + pos, '\n', len - pos);
    size_t n = nl ? (size_t) (nl - (head + pos)) : len - pos;
    struct hc_trace_req r;
    int rc;

    /* A line cut off by the end of the head proves nothing. */
    if (!nl && !whole)
      break;
    if (n > HC_TRACE_LINE_MAX || memchr (head + pos, '\0', n))
      rc = -EINVAL;
    else {
      memcpy (t->scratch, head + pos, n);
      t->scratch[n] = '\0';
      if (n && t->scratch[n - 1] == '\r')
        t->scratch[--n] = '\0';
      t->lineno = i + 1;
      memset (&r, 0, sizeof r);
      rc = f->parse (t, t->scratch, n, &r);
    }
    if (rc == HC_LINE_REQ || rc == HC_LINE_OTHER)
      good++;
    else if (rc < 0)
      bad++;
    pos += n + 1;
  }
  t->probing = false;
  t->lineno = saved;
  if (f->reset)
    f->reset (t);
  /* Most lines must fit.  Other formats' lines score next to nothing
   * against each other, so a majority is safe, and some malformed lines
   * stay the reader's business rather than a reason to call the file
   * something else. */
  if (!good || bad > good)
    return 0;
  return good;
}

/* Helpers for the block-layer text formats -------------------------------- */

/* Parses an rwbs string. */
int
hc_trace_rwbs_parse (const char *s, uint8_t *op, uint16_t *bits)
{
  uint16_t b = 0;
  bool nodata = false;

  /* A leading F is PREFLUSH only when an op letter follows; "F" alone, or
   * followed by modifiers, is the flush op itself. */
  if (s[0] == 'F' && s[1] && strchr ("RWDFNE", s[1])) {
    b |= HC_RWBS_PREFLUSH;
    s++;
  }
  switch (*s++) {
  case 'R': *op = HC_TOP_READ; break;
  case 'W': *op = HC_TOP_WRITE; break;
  case 'D': *op = HC_TOP_DISCARD; break;
  case 'E': *op = HC_TOP_DISCARD; break; /* secure erase */
  case 'F': *op = HC_TOP_FLUSH; break;
  case 'N': *op = HC_TOP_READ; nodata = true; break;
  default: return -EINVAL;
  }
  for (; *s; s++)
    switch (*s) {
    case 'F': b |= HC_RWBS_FUA; break;
    case 'A': b |= HC_RWBS_READAHEAD; break;
    case 'S': b |= HC_RWBS_SYNC; break;
    case 'M': b |= HC_RWBS_META; break;
    case 'E': *op = HC_TOP_DISCARD; break; /* "DE": secure erase */
    case 'B': break;                       /* barrier, kernels before 2.6.36 */
    default: return -EINVAL;
    }
  *bits = b;
  return nodata ? 1 : 0;
}

/* Builds a request from a block-layer event. */
int
hc_trace_block_req (struct hc_trace *t, struct hc_trace_req *r, const char *rwbs, uint64_t sector,
                    uint64_t nsect, bool has_range)
{
  uint8_t op;
  uint16_t bits;
  int rc = hc_trace_rwbs_parse (rwbs, &op, &bits);

  if (rc < 0)
    return hc_trace_bad (t, "bad rwbs '%s'", rwbs);
  if (rc == 1) {
    /* N moves no data (a passthrough command, say): not a request.  With
     * PREFLUSH, though, it is how blkparse shows a pure flush. */
    if (!(bits & HC_RWBS_PREFLUSH))
      return HC_LINE_OTHER;
    op = HC_TOP_FLUSH;
  }
  if (!has_range)
    sector = nsect = 0;
  if (sector > UINT64_MAX / 512 || nsect > UINT64_MAX / 512
      || sector * 512 > UINT64_MAX - nsect * 512)
    return hc_trace_bad (t, "sector range %llu + %llu overflows", (unsigned long long) sector,
                         (unsigned long long) nsect);
  /* An empty write with PREFLUSH (blkdev_issue_flush's bio, as queued) is
   * a flush and nothing else. */
  if (op == HC_TOP_WRITE && (bits & HC_RWBS_PREFLUSH) && nsect == 0)
    op = HC_TOP_FLUSH;
  r->op = op;
  r->rwbs = bits;
  if (op != HC_TOP_FLUSH) {
    r->offset = sector * 512;
    r->length = nsect * 512;
  }
  return HC_LINE_REQ;
}

/* Parses seconds with an optional fraction into ns. */
int
hc_trace_parse_secs (const char *s, uint64_t *ns)
{
  uint64_t sec = 0, frac = 0;
  int digits = 0;

  if (!isdigit ((unsigned char) *s))
    return -EINVAL;
  for (; isdigit ((unsigned char) *s); s++) {
    if (sec > (UINT64_MAX - 9) / 10)
      return -EINVAL;
    sec = sec * 10 + (uint64_t) (*s - '0');
  }
  if (*s == '.') {
    s++;
    if (!isdigit ((unsigned char) *s))
      return -EINVAL;
    /* Digits beyond the nanosecond are dropped, not rounded. */
    for (; isdigit ((unsigned char) *s); s++)
      if (digits < 9) {
        frac = frac * 10 + (uint64_t) (*s - '0');
        digits++;
      }
  }
  if (*s)
    return -EINVAL;
  for (; digits < 9; digits++)
    frac *= 10;
  if (sec > (UINT64_MAX - frac) / 1000000000u)
    return -EINVAL;
  *ns = sec * 1000000000u + frac;
  return 0;
}

/* Parses an ioprio class name. */
int
hc_trace_class_parse (const char *s, uint8_t *cls)
{
  static const char *const names[] = { "none", "rt", "be", "idle" };

  for (unsigned i = 0; i < 4; i++)
    if (strcmp (s, names[i]) == 0) {
      *cls = (uint8_t) i;
      return 0;
    }
  return -EINVAL;
}

/* Splits off the next blank-separated token. */
char *
hc_trace_token (char **p)
{
  char *s = *p, *e;

  while (*s == ' ' || *s == '\t')
    s++;
  if (!*s) {
    *p = s;
    return NULL;
  }
  for (e = s; *e && *e != ' ' && *e != '\t'; e++)
    ;
  if (*e)
    *e++ = '\0';
  *p = e;
  return s;
}

/* Parses the "[comm]" that ends a block-layer line and interns it. */
int
hc_trace_comm (struct hc_trace *t, char *p, uint32_t *id)
{
  char *e;

  while (*p == ' ' || *p == '\t')
    p++;
  e = p + strlen (p);
  while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
    e--;
  if (*p != '[' || e - p < 2 || e[-1] != ']')
    return hc_trace_bad (t, "expected [comm] at the end of the line");
  return hc_trace_intern (t, p + 1, (size_t) (e - p - 2), id);
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
    int score = formats[i]->probe (t, head, len, whole, size);
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
  if (!(t->buf = malloc ((t->cap = first_cap (size)) + 1))) {
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

  while ((rc = t->fmt->next ? t->fmt->next (t, r) : text_next (t, r)) == 1
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

/* The writer door ---------------------------------------------------------- */

/* Writes out the buffered output. */
int
hc_trace_wflush (struct hc_trace_writer *w)
{
  const unsigned char *p = w->buf;
  size_t n = w->len;

  if (w->gz) {
    int errnum;
    if (n && gzwrite (w->gz, p, (unsigned) n) != (int) n) {
      gzerror (w->gz, &errnum);
      return errnum == Z_ERRNO && errno ? -errno : -EIO;
    }
    w->len = 0;
    return 0;
  }
  while (n) {
    ssize_t k = write (w->fd, p, n);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (k == 0)
      return -EIO;
    p += k;
    n -= (size_t) k;
  }
  w->len = 0;
  return 0;
}

/* Appends bytes to the output. */
int
hc_trace_wput (struct hc_trace_writer *w, const void *p, size_t n)
{
  const unsigned char *s = p;

  while (n) {
    size_t room = w->cap - w->len, k;
    int rc;
    if (!room) {
      if ((rc = hc_trace_wflush (w)) < 0)
        return rc;
      /* A writer that filled its buffer writes more: a larger one, now
       * that it is empty (if memory is short, the one it has). */
      if (w->cap < HC_TRACE_BUF) {
        unsigned char *b = malloc (w->cap * 2);
        if (b) {
          free (w->buf);
          w->buf = b;
          w->cap *= 2;
        }
      }
      room = w->cap;
    }
    k = n < room ? n : room;
    memcpy (w->buf + w->len, s, k);
    w->len += k;
    s += k;
    n -= k;
  }
  return 0;
}

/* Frees a writer without finishing its file. */
static int
writer_free (struct hc_trace_writer *w)
{
  int rc = 0;

  if (w->gz) {
    if (gzclose (w->gz) != Z_OK)
      rc = -EIO;
  } else if (w->own_fd && w->fd >= 0 && close (w->fd) < 0)
    rc = -errno;
  hc_trace_strtab_free (&w->strs);
  free (w->src_map);
  free (w->blocks);
  hc_blockset_free (&w->footprint);
  free (w->buf);
  free (w);
  return rc;
}

/* Creates a trace file. */
int
hc_trace_writer_open (const char *path, enum hc_trace_format format, uint32_t block_size,
                      hc_trace_writer **out, char *why, size_t whylen)
{
  struct hc_trace_writer *w;
  struct hc_sb sb;
  int rc;

  hc_sb_init (&sb, why, why ? whylen : 0);
  if (!out || !path) {
    hc_sb_printf (&sb, "no path");
    return -EINVAL;
  }
  *out = NULL;
  if ((unsigned) format >= HC_TRACE_FORMAT_COUNT || format == HC_TRACE_AUTO
      || !formats[format]->write) {
    hc_sb_printf (&sb, "cannot write traces in format '%s'",
                  hc_trace_format_name (format) ? hc_trace_format_name (format) : "?");
    return -EINVAL;
  }
  if (!(w = calloc (1, sizeof *w)) || !(w->buf = malloc (w->cap = HC_TRACE_WBUF0))) {
    free (w);
    hc_sb_printf (&sb, "out of memory");
    return -ENOMEM;
  }
  w->fmt = formats[format];
  w->block_size = block_size ? block_size : 4096;
  if (strcmp (path, "-") == 0)
    w->fd = STDOUT_FILENO;
  else {
    w->own_fd = true;
    if ((w->fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
      rc = -errno;
      hc_sb_printf (&sb, "%s: %s", path, strerror (-rc));
      writer_free (w);
      return rc;
    }
    size_t n = strlen (path);
    if (n > 3 && strcmp (path + n - 3, ".gz") == 0 && !(w->gz = gzdopen (w->fd, "wb6"))) {
      hc_sb_printf (&sb, "%s: cannot start gzip", path);
      writer_free (w);
      return -ENOMEM;
    }
  }
  if ((rc = w->fmt->wopen (w)) < 0) {
    hc_sb_printf (&sb, "%s: %s", path, strerror (-rc));
    writer_free (w);
    return rc;
  }
  *out = w;
  return 0;
}

/* Appends a request: the door for both kinds of strings. */
static int
write_req (hc_trace_writer *w, const struct hc_trace_req *r, const hc_trace *src, const char *comm,
           const char *object)
{
  int rc;

  if (!w || !r)
    return -EINVAL;
  if (w->err)
    return w->err;
  /* Values a reader would reject are refused here, so every file written
   * reads back. */
  if (r->op > HC_TOP_FLUSH || r->label >= HC_LABEL_COUNT || r->ioprio_class > 3
      || r->ioprio_level > 7 || r->ioprio_hint > 1023 || r->rwbs > 0x1f
      || !hc_trace_req_in_range (r))
    return -EINVAL;
  /* A request the format cannot spell is refused alone; an output error
   * stays. */
  if ((rc = w->fmt->write (w, r, src, comm, object)) < 0 && rc != -EINVAL)
    w->err = rc;
  return rc;
}

int
hc_trace_write (hc_trace_writer *w, const struct hc_trace_req *r, const hc_trace *src)
{
  return write_req (w, r, src, NULL, NULL);
}

int
hc_trace_write_strings (hc_trace_writer *w, const struct hc_trace_req *r, const char *comm,
                        const char *object)
{
  return write_req (w, r, NULL, comm, object);
}

/* Finishes the file and frees the writer. */
int
hc_trace_writer_close (hc_trace_writer *w)
{
  int rc, rc2;

  if (!w)
    return 0;
  rc = w->err;
  if (!rc)
    rc = w->fmt->wclose (w);
  rc2 = writer_free (w);
  return rc ? rc : rc2;
}
