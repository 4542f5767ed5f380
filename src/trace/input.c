/* The trace readers' input: one buffer filled with read(2) (up to 1 MiB;
 * no larger than a small file, so that opening one costs no large
 * allocation) that text formats cut into lines in place and binary formats
 * decode directly, so that a request never costs a system call.  Input
 * that starts with gzip's magic is inflated with zlib into that buffer
 * instead, so every format can also be read gzip-compressed: members are
 * read one after another, and anything after the last one is ignored, as
 * zlib's gzread does.  Every end of compressed input is checked: a stream
 * that stops inside a member, or damaged data, is -EIO, never a silent
 * short trace.  (The reader inflates for itself because gzread misses a
 * cut stream when its output fills up exactly as the input runs out: it
 * then reports a clean end.)
 *
 * Then the text formats' shared parts: lines, bounded by
 * HC_TRACE_LINE_MAX (a longer line is skipped whole and counted as
 * malformed like any line its format rejects), the line loop, probing by
 * parsing the first lines, and the fields several formats share (rwbs,
 * seconds, classes, tokens, comm).
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

/* The compressed input buffer (a small file's size when less). */
#define GZ_BUFFER (1u << 18)

/* The first input buffer: HC_TRACE_BUF0, or for a regular file smaller
 * than that, its size rounded up to the next 64 bytes, which holds it
 * whole with room to spare, so that the first read also meets the end.
 * (Input that turns out larger, a small gzip file say, grows it.) */
size_t
hc_trace_first_cap (int64_t size)
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
    t->zin_cap = t->size >= 0 && t->size < GZ_BUFFER ? hc_trace_first_cap (t->size) : GZ_BUFFER;
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
int
hc_trace_text_next (struct hc_trace *t, struct hc_trace_req *r)
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

/* Parses the "[comm]" that ends a block-layer line and interns it. */
static int
block_comm (struct hc_trace *t, char *p, uint32_t *id)
{
  char *e;

  p = hc_trace_blanks (p);
  e = p + strlen (p);
  while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
    e--;
  if (*p != '[' || e - p < 2 || e[-1] != ']')
    return hc_trace_bad (t, "expected [comm] at the end of the line");
  return hc_trace_intern (t, p + 1, (size_t) (e - p - 2), id);
}

/* Builds a request from a block-layer event. */
int
hc_trace_block_req (struct hc_trace *t, struct hc_trace_req *r, const char *rwbs, uint64_t sector,
                    uint64_t nsect, bool has_range, char *comm, uint64_t ts, uint32_t pid)
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
  if ((rc = block_comm (t, comm, &r->comm)) < 0)
    return rc;
  r->ts_ns = ts;
  r->pid = pid;
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

  int i = hc_name_find (names, 4, s);

  if (i < 0)
    return i;
  *cls = (uint8_t) i;
  return 0;
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

/* True if s is all decimal hc_trace_digits (and not empty). */
bool
hc_trace_digits (const char *s)
{
  if (!*s)
    return false;
  for (; *s; s++)
    if (!isdigit ((unsigned char) *s))
      return false;
  return true;
}

/* True for "major,minor". */
bool
hc_trace_is_dev (const char *s)
{
  if (!isdigit ((unsigned char) *s))
    return false;
  while (isdigit ((unsigned char) *s))
    s++;
  if (*s++ != ',')
    return false;
  return hc_trace_digits (s);
}

/* Parses "SECTOR + COUNT" and the blanks after it. */
int
hc_trace_sectors (struct hc_trace *t, char **p, uint64_t *sector, uint64_t *nsect)
{
  const char *tok;

  if (hc_trace_number (hc_trace_token (p), UINT64_MAX, sector) < 0)
    return hc_trace_bad (t, "bad sector");
  if (!(tok = hc_trace_token (p)) || strcmp (tok, "+") != 0)
    return hc_trace_bad (t, "expected 'sector + count'");
  if (hc_trace_number (hc_trace_token (p), UINT32_MAX, nsect) < 0)
    return hc_trace_bad (t, "bad sector count");
  *p = hc_trace_blanks (*p);
  return 0;
}

/* Parses a decimal token no larger than max. */
int
hc_trace_number (const char *s, uint64_t max, uint64_t *v)
{
  unsigned long long x;

  if (!s || !hc_trace_digits (s) || hc_parse_number (s, &x) < 0 || x > max)
    return -EINVAL;
  *v = x;
  return 0;
}
