/* hintcache's binary trace form: every field of struct hc_trace_req, fixed
 * size records, strings defined inline, little-endian throughout.
 *
 * Layout:
 *
 *   header, 16 bytes
 *      0  8  magic "HCTRACE1"
 *      8  4  u32 version (2; version 1 files, without totals, are read too)
 *     12  2  u16 size of a request record (48)
 *     14  2  u16 reserved, 0
 *
 *   then records, each opening with a one-byte tag:
 *
 *   request (tag 1), 48 bytes
 *      0  1  tag            1  1  op            2  1  label
 *      3  1  ioprio_class   4  1  ioprio_level  5  1  reserved, 0
 *      6  2  ioprio_hint    8  2  rwbs         10  2  reserved, 0
 *     12  4  pid           16  8  ts_ns        24  8  offset
 *     32  8  length        40  4  comm id      44  4  object id
 *
 *   string definition (tag 2), 8 + len bytes
 *      0  1  tag            1  1  reserved, 0   2  2  len (1 … 65535)
 *      4  4  id             8  len  the bytes (no NUL among them)
 *
 *   totals (tag 4, version 2: exactly once, right before the end), 80 bytes
 *      0  1  tag            1  3  reserved, 0   4  4  block size
 *      8  8  requests      16  8  reads        24  8  writes
 *     32  8  discards      40  8  flushes      48  8  block accesses
 *     56  8  footprint (distinct blocks)       64  8  largest end of a read/write
 *     72  8  XXH3-64 of bytes 0 … 71
 *
 *   end (tag 3), 16 bytes
 *      0  1  tag            1  7  reserved, 0   8  8  number of requests
 *
 * String ids are dense: the n-th definition defines id n, and it comes
 * before the first request that uses it; id 0 is "none".  So both sides
 * stream: the writer emits a definition the first time it meets a string,
 * the reader interns definitions as they come and maps file ids to its own
 * through an array.  The end record makes truncation visible (a file that
 * stops without it is -EIO, as is anything after it) and checks the count.
 * The totals sit at a fixed distance from the end of the file, so a
 * replayer can size its caches in percent of the footprint and model its
 * disk without a first pass over the records (hc_trace_totals); the replayer
 * checks them against what it then reads.
 *
 * Speed: requests are decoded straight out of the 1 MiB input buffer with
 * fixed offsets, so reading costs a few loads and a range check per record;
 * definitions are rare.  hc_trace_read takes the records lying whole in the
 * buffer in one loop (bin_read), without a call per record.  A request
 * whose values are out of range (an op or label that does not exist, an
 * undefined string id) is a malformed record, skipped or, under strict, an
 * error; an unknown tag or a cut record is corruption (-EIO), as records can
 * no longer be told apart.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "trace_priv.h"
#include "util.h"

#define MAGIC "HCTRACE1"
#define VERSION 2
#define HEADER 16
#define REQ 48
#define DEF 8
#define TOTALS 80
#define END 16

enum { TAG_REQ = 1, TAG_DEF = 2, TAG_END = 3, TAG_TOTALS = 4 };

/* True if the input starts with the header. */
static int
bin_probe (struct hc_trace *t, const unsigned char *head, size_t len, bool whole, int64_t size)
{
  (void) t;
  (void) whole;
  (void) size;
  return len >= HEADER && memcmp (head, MAGIC, 8) == 0 ? 100 : 0;
}

/* Forgets the file's string ids (the reader's own stay). */
static void
bin_reset (struct hc_trace *t)
{
  t->bin_started = t->bin_ended = false;
  t->bin_nmap = 0;
  t->bin_count = 0;
}

/* Reads and checks the header. */
static int
bin_header (struct hc_trace *t)
{
  const unsigned char *p;
  long have = hc_trace_fill (t, HEADER);

  if (have < 0)
    return (int) have;
  p = (const unsigned char *) t->buf + t->pos;
  if (have < HEADER || memcmp (p, MAGIC, 8) != 0)
    return hc_trace_fail (t, -EINVAL, "not a bin trace: no HCTRACE1 header");
  if (hc_get32 (p + 8) < 1 || hc_get32 (p + 8) > VERSION)
    return hc_trace_fail (t, -EINVAL, "bin trace version %u, this reader knows 1 … %u",
                          hc_get32 (p + 8), VERSION);
  t->bin_version = hc_get32 (p + 8);
  if (hc_get16 (p + 12) != REQ)
    return hc_trace_fail (t, -EINVAL, "bin trace request size %u, expected %u", hc_get16 (p + 12),
                          REQ);
  t->pos += HEADER;
  t->bin_started = true;
  return 0;
}

/* Makes `need` bytes at the read position readable at *p; fewer is a
 * truncated trace, and `what` says what is missing.  Returns 0 or a
 * negative errno. */
static int
bin_at (struct hc_trace *t, long need, const char *what, const unsigned char **p)
{
  long have = hc_trace_fill (t, need);

  *p = NULL;
  if (have < 0)
    return (int) have;
  if (have < need)
    return hc_trace_fail (t, -EIO, "truncated bin trace: %s", what);
  *p = (const unsigned char *) t->buf + t->pos;
  return 0;
}

/* Reads a string definition at the current position. */
static int
bin_def (struct hc_trace *t)
{
  const unsigned char *p;
  uint32_t len, id, local;
  int rc;

  if ((rc = bin_at (t, DEF, "cut string definition", &p)) < 0)
    return rc;
  len = hc_get16 (p + 2);
  id = hc_get32 (p + 4);
  if ((rc = bin_at (t, DEF + len, "cut string definition", &p)) < 0)
    return rc;
  if (!len || id != t->bin_nmap + 1 || memchr (p + DEF, '\0', len))
    return hc_trace_fail (t, -EIO, "corrupt bin trace: bad string definition %u at record %llu",
                          id, (unsigned long long) t->lineno + 1);
  if ((rc = hc_trace_intern (t, (const char *) p + DEF, len, &local)) < 0)
    return hc_trace_fail (t, rc, "out of memory");
  if (t->bin_nmap + 1 >= t->bin_mapcap) {
    uint32_t cap = t->bin_mapcap ? t->bin_mapcap * 2 : 256;
    uint32_t *m = realloc (t->bin_map, cap * sizeof *m);
    if (!m)
      return hc_trace_fail (t, -ENOMEM, "out of memory");
    t->bin_map = m;
    t->bin_mapcap = cap;
  }
  t->bin_map[0] = 0;
  t->bin_map[++t->bin_nmap] = local;
  t->pos += DEF + len;
  t->lineno++;
  return 0;
}

/* The totals record's 64-bit fields: where each lies in the record and in
 * struct hc_trace_totals (the block size is the one 32-bit field, at 4). */
#define T(at, field) { at, offsetof (struct hc_trace_totals, field) }
static const struct { uint8_t at, field; } totals_u64[] = {
  T (8, requests),  T (16, reads),           T (24, writes),           T (32, discards),
  T (40, flushes),  T (48, block_accesses),  T (56, footprint_blocks), T (64, max_end),
};
#undef T

static void
encode_totals (const struct hc_trace_totals *o, unsigned char *p)
{
  memset (p, 0, TOTALS);
  p[0] = TAG_TOTALS;
  hc_put32 (p + 4, o->block_size);
  for (size_t i = 0; i < sizeof totals_u64 / sizeof totals_u64[0]; i++) {
    uint64_t v;
    memcpy (&v, (const char *) o + totals_u64[i].field, sizeof v);
    hc_put64 (p + totals_u64[i].at, v);
  }
  hc_put64 (p + 72, XXH3_64bits (p, 72));
}

/* Decodes a totals record; -EIO if its checksum is wrong. */
static int
decode_totals (const unsigned char *p, struct hc_trace_totals *o)
{
  if (p[0] != TAG_TOTALS || hc_get64 (p + 72) != XXH3_64bits (p, 72))
    return -EIO;
  *o = (struct hc_trace_totals) { .block_size = hc_get32 (p + 4) };
  for (size_t i = 0; i < sizeof totals_u64 / sizeof totals_u64[0]; i++) {
    uint64_t v = hc_get64 (p + totals_u64[i].at);
    memcpy ((char *) o + totals_u64[i].field, &v, sizeof v);
  }
  return 0;
}

/* Reads the totals record in the stream: checked, then passed over (the
 * end record that must follow checks the count). */
static int
bin_totals_record (struct hc_trace *t)
{
  struct hc_trace_totals o;
  const unsigned char *p;
  int rc;

  if ((rc = bin_at (t, TOTALS, "cut totals record", &p)) < 0
      || (rc = bin_at (t, TOTALS + 1, "no end record", &p)) < 0)
    return rc;
  if (t->bin_version < 2 || decode_totals (p, &o) < 0 || p[TOTALS] != TAG_END)
    return hc_trace_fail (t, -EIO, "corrupt bin trace: bad totals record at record %llu",
                          (unsigned long long) t->lineno + 1);
  t->pos += TOTALS;
  t->lineno++;
  return 0;
}

/* The totals of a regular uncompressed file, read from its end. */
static int
bin_totals (struct hc_trace *t, struct hc_trace_totals *out)
{
  unsigned char b[TOTALS + END];

  if (t->size < HEADER + TOTALS + END || pread (t->fd, b, HEADER, 0) != HEADER
      || memcmp (b, MAGIC, 8) != 0 || hc_get32 (b + 8) < 2)
    return -ENODATA;
  if (pread (t->fd, b, sizeof b, t->size - (int64_t) sizeof b) != (ssize_t) sizeof b)
    return -EIO;
  if (decode_totals (b, out) < 0 || b[TOTALS] != TAG_END || hc_get64 (b + TOTALS + 8) != out->requests)
    return -EIO;
  return 0;
}

/* Reads the end record and checks that nothing follows. */
static int
bin_end (struct hc_trace *t)
{
  const unsigned char *p;
  long have;
  int rc;

  if ((rc = bin_at (t, END, "cut end record", &p)) < 0)
    return rc;
  if (hc_get64 (p + 8) != t->bin_count)
    return hc_trace_fail (t, -EIO,
                          "corrupt bin trace: %llu requests read, the end record says %llu",
                          (unsigned long long) t->bin_count, (unsigned long long) hc_get64 (p + 8));
  t->pos += END;
  t->lineno++;
  if ((have = hc_trace_fill (t, 1)) < 0)
    return (int) have;
  if (have)
    return hc_trace_fail (t, -EIO, "corrupt bin trace: data after the end record");
  t->bin_ended = true;
  return 0;
}

/* Decodes the request record at p; false if a value is out of range (one
 * test covers every field a writer could not have produced). */
static inline bool
decode_req (const struct hc_trace *t, const unsigned char *p, struct hc_trace_req *r)
{
  const uint32_t comm = hc_get32 (p + 40), object = hc_get32 (p + 44);

  r->op = p[1];
  r->label = p[2];
  r->ioprio_class = p[3];
  r->ioprio_level = p[4];
  r->ioprio_hint = hc_get16 (p + 6);
  r->rwbs = hc_get16 (p + 8);
  r->pid = hc_get32 (p + 12);
  r->ts_ns = hc_get64 (p + 16);
  r->offset = hc_get64 (p + 24);
  r->length = hc_get64 (p + 32);
  if (r->op > HC_TOP_FLUSH || r->label >= HC_LABEL_COUNT || r->ioprio_class > 3
      || r->ioprio_level > 7 || r->ioprio_hint > 1023 || r->rwbs > 0x1f || comm > t->bin_nmap
      || object > t->bin_nmap)
    return false;
  r->comm = comm ? t->bin_map[comm] : 0;
  r->object = object ? t->bin_map[object] : 0;
  return true;
}

/* Reads the next request. */
static int
bin_next (struct hc_trace *t, struct hc_trace_req *r)
{
  int rc;

  if (!t->bin_started && (rc = bin_header (t)) < 0)
    return rc;
  for (;;) {
    const unsigned char *p;

    if (t->bin_ended)
      return 0;
    if (t->fill - t->pos < REQ) {
      long have = hc_trace_fill (t, REQ);
      if (have < 0)
        return (int) have;
      if (have == 0)
        return hc_trace_fail (t, -EIO, "truncated bin trace: no end record");
    }
    p = (const unsigned char *) t->buf + t->pos;
    if (p[0] == TAG_DEF) {
      if ((rc = bin_def (t)) < 0)
        return rc;
      continue;
    }
    if (p[0] == TAG_END) {
      if ((rc = bin_end (t)) < 0)
        return rc;
      return 0;
    }
    if (p[0] == TAG_TOTALS) {
      if ((rc = bin_totals_record (t)) < 0)
        return rc;
      continue;
    }
    if (p[0] != TAG_REQ)
      return hc_trace_fail (t, -EIO, "corrupt bin trace: unknown record tag %u at record %llu",
                            p[0], (unsigned long long) t->lineno + 1);
    if (t->fill - t->pos < REQ)
      return hc_trace_fail (t, -EIO, "truncated bin trace: cut request record");
    t->pos += REQ;
    t->lineno++;
    t->bin_count++;
    if (!decode_req (t, p, r)) {
      hc_trace_bad (t, "field out of range or undefined string id");
      if ((rc = hc_trace_malformed (t)) < 0)
        return rc;
      continue;
    }
    return 1;
  }
}

/* Decodes the request records that lie whole in the buffer, up to n, until
 * one needs bin_next. */
static size_t
bin_read (struct hc_trace *t, struct hc_trace_req *r, size_t n)
{
  const unsigned char *p = (const unsigned char *) t->buf + t->pos;
  size_t got = 0;

  if (!t->bin_started || t->bin_ended)
    return 0;
  if (n > (t->fill - t->pos) / REQ)
    n = (t->fill - t->pos) / REQ;
  while (got < n && p[0] == TAG_REQ && decode_req (t, p, &r[got])
         && hc_trace_req_in_range (&r[got])) {
    got++;
    p += REQ;
  }
  t->pos += got * REQ;
  t->lineno += got;
  t->bin_count += got;
  return got;
}

/* Writes the header. */
static int
bin_wopen (struct hc_trace_writer *w)
{
  unsigned char h[HEADER] = { 0 };

  memcpy (h, MAGIC, 8);
  hc_put32 (h + 8, VERSION);
  hc_put16 (h + 12, REQ);
  return hc_trace_wput (w, h, HEADER);
}

/* The file's id of a string (0 for none or ""), defining it on first use. */
static int
bin_define (struct hc_trace_writer *w, const char *text, uint32_t *fid)
{
  size_t len = text ? strlen (text) : 0;
  bool added;
  int rc;

  *fid = 0;
  if (!len)
    return 0;
  if (len > UINT16_MAX)
    return -ENAMETOOLONG;
  if ((rc = hc_trace_strtab_intern (&w->strs, text, len, fid, &added)) < 0)
    return rc;
  if (added) {
    unsigned char d[DEF] = { TAG_DEF };
    hc_put16 (d + 2, (uint16_t) len);
    hc_put32 (d + 4, *fid);
    if ((rc = hc_trace_wput (w, d, DEF)) < 0 || (rc = hc_trace_wput (w, text, len)) < 0)
      return rc;
  }
  return 0;
}

/* Maps src's string id to the file's, defining it on first use. */
static int
bin_string (struct hc_trace_writer *w, const struct hc_trace *src, uint32_t id, uint32_t *fid)
{
  int rc;

  *fid = 0;
  if (!src || !id)
    return 0;
  /* The cache is per reader: ids mean nothing across readers. */
  if (src->serial != w->src_serial) {
    if (w->src_mapcap)
      memset (w->src_map, 0, w->src_mapcap * sizeof *w->src_map);
    w->src_serial = src->serial;
  }
  if (id < w->src_mapcap && w->src_map[id]) {
    *fid = w->src_map[id] - 1;
    return 0;
  }
  if ((rc = bin_define (w, hc_trace_string (src, id), fid)) < 0)
    return rc;
  if (id >= w->src_mapcap) {
    size_t cap = w->src_mapcap ? w->src_mapcap : 256;
    uint32_t *m;
    while (cap <= id)
      cap *= 2;
    if (!(m = realloc (w->src_map, cap * sizeof *m)))
      return -ENOMEM;
    memset (m + w->src_mapcap, 0, (cap - w->src_mapcap) * sizeof *m);
    w->src_map = m;
    w->src_mapcap = cap;
  }
  w->src_map[id] = *fid + 1;
  return 0;
}

/* Adds a written request to the totals. */
static int
count (struct hc_trace_writer *w, const struct hc_trace_req *r)
{
  struct hc_trace_totals *o = &w->totals;
  const unsigned shift = (unsigned) __builtin_ctz (w->block_size);

  o->requests++;
  switch (r->op) {
  case HC_TOP_READ: o->reads++; break;
  case HC_TOP_WRITE: o->writes++; break;
  case HC_TOP_DISCARD: o->discards++; break;
  default: o->flushes++; break;
  }
  if ((r->op != HC_TOP_READ && r->op != HC_TOP_WRITE) || r->length == 0)
    return 0;
  if (r->offset + r->length > o->max_end)
    o->max_end = r->offset + r->length;
  uint64_t b0 = r->offset >> shift, n = ((r->offset + r->length - 1) >> shift) - b0 + 1;
  o->block_accesses += n;
  return hc_blockset_add_range (&w->footprint, b0, n) < 0 ? -ENOMEM : 0;
}

/* Appends a request (after the definitions of its new strings). */
static int
bin_write (struct hc_trace_writer *w, const struct hc_trace_req *r, const struct hc_trace *src,
           const char *comm_text, const char *object_text)
{
  unsigned char rec[REQ] = { TAG_REQ };
  uint32_t comm, object;
  int rc;

  /* comm before object: the order a text reader interns them in, so a
   * converted file reads back with the same ids. */
  if ((rc = src ? bin_string (w, src, r->comm, &comm) : bin_define (w, comm_text, &comm)) < 0
      || (rc = src ? bin_string (w, src, r->object, &object)
                   : bin_define (w, object_text, &object)) < 0)
    return rc;
  rec[1] = r->op;
  rec[2] = r->label;
  rec[3] = r->ioprio_class;
  rec[4] = r->ioprio_level;
  hc_put16 (rec + 6, r->ioprio_hint);
  hc_put16 (rec + 8, r->rwbs);
  hc_put32 (rec + 12, r->pid);
  hc_put64 (rec + 16, r->ts_ns);
  hc_put64 (rec + 24, r->offset);
  hc_put64 (rec + 32, r->length);
  hc_put32 (rec + 40, comm);
  hc_put32 (rec + 44, object);
  if ((rc = hc_trace_wput (w, rec, REQ)) < 0)
    return rc;
  w->count++;
  return count (w, r);
}

/* Writes the end record and flushes. */
static int
bin_wclose (struct hc_trace_writer *w)
{
  unsigned char o[TOTALS], e[END] = { TAG_END };
  struct hc_trace_totals c = w->totals;
  int rc;

  c.block_size = w->block_size;
  c.footprint_blocks = w->footprint.n;
  encode_totals (&c, o);
  hc_put64 (e + 8, w->count);
  if ((rc = hc_trace_wput (w, o, TOTALS)) < 0 || (rc = hc_trace_wput (w, e, END)) < 0)
    return rc;
  return hc_trace_wflush (w);
}

const struct hc_trace_fmt hc_trace_fmt_bin = {
  .name = "bin",
  .format = HC_TRACE_BIN,
  .probe = bin_probe,
  .reset = bin_reset,
  .next = bin_next,
  .read = bin_read,
  .totals = bin_totals,
  .wopen = bin_wopen,
  .write = bin_write,
  .wclose = bin_wclose,
};
