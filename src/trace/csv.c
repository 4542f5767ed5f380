/* The labeled CSV of hintcache's development traces.
 *
 *   ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,
 *   ioprio_level,comm,pid,label,object
 *
 * The header must be exactly that (it is also how the format is detected).
 * Quoting follows RFC 4180 as the traces use it: a field is quoted when it
 * contains a comma or a quote, and "" inside quotes is one quote.  Fields
 * are split and unquoted in place, in one pass over the line.  A quoted
 * field cannot span lines (the traces never need it), so an unterminated
 * quote is a malformed line like any bad field: a wrong field count, an op
 * other than R/W/D/F, a flags string that is not an rwbs, an unknown ioprio
 * class or label, a number that does not parse or is out of range.  An
 * empty label means unknown; blank lines are ignored.
 *
 * The writer produces the same form, one line per request: the flags are
 * rebuilt from the op and the rwbs bits, strings are quoted as above, and
 * a line break inside a string (which no line can hold) becomes '?'.  A
 * flush with FUA but without PREFLUSH has no rwbs spelling ("FF" reads as
 * PREFLUSH) and is refused; an unlabeled request (label none) is written
 * with an empty label, which reads back as unknown.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "trace_priv.h"
#include "util.h"

#define CSV_HEADER                                                                            \
  "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,comm,pid,"  \
  "label,object"
#define CSV_FIELDS 12

/* True if the input starts with the header line. */
static int
csv_probe (struct hc_trace *t, const unsigned char *head, size_t len, bool whole, int64_t size)
{
  size_t n = sizeof CSV_HEADER - 1;

  (void) t;
  (void) size;
  if (len < n || memcmp (head, CSV_HEADER, n) != 0)
    return 0;
  if (len == n)
    return whole ? 100 : 0;
  if (head[n] == '\n' || (head[n] == '\r' && len > n + 1 && head[n + 1] == '\n'))
    return 100;
  return 0;
}

/* Splits line into at most `max` fields, unquoting in place.  Returns the
 * count or -EINVAL. */
static int
csv_split (struct hc_trace *t, char *line, char **field, int max)
{
  char *p = line;
  int n = 0;

  for (;;) {
    if (n == max)
      return hc_trace_bad (t, "more than %d fields", max);
    field[n++] = p;
    if (*p == '"') {
      char *w = p, *q = p + 1;
      for (;;) {
        if (!*q)
          return hc_trace_bad (t, "unterminated quote in field %d", n);
        if (*q == '"') {
          if (q[1] != '"')
            break;
          q++;
        }
        *w++ = *q++;
      }
      *w = '\0'; /* w trails q, so this never clobbers unread text */
      q++;
      if (!*q)
        return n;
      if (*q != ',')
        return hc_trace_bad (t, "text after the closing quote of field %d", n);
      p = q + 1;
    } else {
      char *e = p;
      for (; *e && *e != ','; e++)
        if (*e == '"')
          return hc_trace_bad (t, "quote inside unquoted field %d", n);
      if (!*e)
        return n;
      *e = '\0';
      p = e + 1;
    }
  }
}

/* Parses a decimal field no larger than max. */
static int
number (const char *s, uint64_t max, uint64_t *v)
{
  unsigned long long x;

  if (hc_parse_number (s, &x) < 0 || x > max)
    return -EINVAL;
  *v = x;
  return 0;
}

/* Parses one line. */
static int
csv_parse (struct hc_trace *t, char *line, size_t len, struct hc_trace_req *r)
{
  static const char ops[] = "RWDF";
  char *f[CSV_FIELDS];
  enum hc_trace_label label;
  uint64_t v;
  uint8_t op;
  int n, rc;

  (void) len;
  if (t->lineno == 1) {
    if (strcmp (line, CSV_HEADER) == 0)
      return HC_LINE_OTHER;
    return hc_trace_bad (t, "the first line is not the csv header");
  }
  if (!*line)
    return HC_LINE_EMPTY;
  if ((n = csv_split (t, line, f, CSV_FIELDS)) < 0)
    return n;
  if (n != CSV_FIELDS)
    return hc_trace_bad (t, "%d fields, expected %d", n, CSV_FIELDS);
  if (number (f[0], UINT64_MAX, &r->ts_ns) < 0)
    return hc_trace_bad (t, "bad ts_ns '%s'", f[0]);
  if (!f[1][0] || f[1][1] || !strchr (ops, f[1][0]))
    return hc_trace_bad (t, "bad op '%s'", f[1]);
  r->op = (uint8_t) (strchr (ops, f[1][0]) - ops);
  if (number (f[2], UINT64_MAX, &r->offset) < 0)
    return hc_trace_bad (t, "bad offset_bytes '%s'", f[2]);
  if (number (f[3], UINT64_MAX - r->offset, &r->length) < 0)
    return hc_trace_bad (t, "bad length_bytes '%s'", f[3]);
  /* The op column is authoritative; flags contribute the modifiers. */
  if (hc_trace_rwbs_parse (f[4], &op, &r->rwbs) < 0)
    return hc_trace_bad (t, "bad flags '%s'", f[4]);
  if (hc_trace_class_parse (f[5], &r->ioprio_class) < 0)
    return hc_trace_bad (t, "bad ioprio_class '%s'", f[5]);
  if (number (f[6], 1023, &v) < 0)
    return hc_trace_bad (t, "bad ioprio_hint '%s'", f[6]);
  r->ioprio_hint = (uint16_t) v;
  if (number (f[7], 7, &v) < 0)
    return hc_trace_bad (t, "bad ioprio_level '%s'", f[7]);
  r->ioprio_level = (uint8_t) v;
  if (number (f[9], UINT32_MAX, &v) < 0)
    return hc_trace_bad (t, "bad pid '%s'", f[9]);
  r->pid = (uint32_t) v;
  if (!f[10][0])
    label = HC_LABEL_UNKNOWN;
  else if (hc_trace_label_parse (f[10], &label) < 0)
    return hc_trace_bad (t, "bad label '%s'", f[10]);
  r->label = (uint8_t) label;
  /* Strings last: a line rejected above interns nothing. */
  if ((rc = hc_trace_intern (t, f[8], strlen (f[8]), &r->comm)) < 0
      || (rc = hc_trace_intern (t, f[11], strlen (f[11]), &r->object)) < 0)
    return rc;
  return HC_LINE_REQ;
}

/* The writer ------------------------------------------------------------- */

static int
csv_wopen (struct hc_trace_writer *w)
{
  return hc_trace_wput (w, CSV_HEADER "\n", sizeof CSV_HEADER);
}

/* Appends a field: quoted when it holds a comma or a quote. */
static int
csv_wstring (struct hc_trace_writer *w, const char *s)
{
  char buf[1024];
  size_t n = 0;
  bool quote = s && strpbrk (s, ",\"");
  int rc;

  if (quote)
    buf[n++] = '"';
  for (; s && *s; s++) {
    if (n + 3 > sizeof buf) {
      if ((rc = hc_trace_wput (w, buf, n)) < 0)
        return rc;
      n = 0;
    }
    if (*s == '"')
      buf[n++] = '"';
    buf[n++] = *s == '\n' || *s == '\r' ? '?' : *s;
  }
  if (quote)
    buf[n++] = '"';
  return hc_trace_wput (w, buf, n);
}

static int
csv_write (struct hc_trace_writer *w, const struct hc_trace_req *r, const struct hc_trace *src,
           const char *comm, const char *object)
{
  static const char ops[] = "RWDF", *const classes[] = { "none", "rt", "be", "idle" };
  char line[160], flags[8];
  size_t f = 0;
  int n, rc;

  if (r->op == HC_TOP_FLUSH && (r->rwbs & HC_RWBS_FUA) && !(r->rwbs & HC_RWBS_PREFLUSH))
    return -EINVAL;
  if (r->rwbs & HC_RWBS_PREFLUSH)
    flags[f++] = 'F';
  flags[f++] = ops[r->op];
  if (r->rwbs & HC_RWBS_FUA)
    flags[f++] = 'F';
  if (r->rwbs & HC_RWBS_READAHEAD)
    flags[f++] = 'A';
  if (r->rwbs & HC_RWBS_SYNC)
    flags[f++] = 'S';
  if (r->rwbs & HC_RWBS_META)
    flags[f++] = 'M';
  flags[f] = '\0';
  if (src) {
    comm = r->comm ? hc_trace_string (src, r->comm) : NULL;
    object = r->object ? hc_trace_string (src, r->object) : NULL;
  }
  n = snprintf (line, sizeof line, "%" PRIu64 ",%c,%" PRIu64 ",%" PRIu64 ",%s,%s,%u,%u,",
                r->ts_ns, ops[r->op], r->offset, r->length, flags, classes[r->ioprio_class],
                r->ioprio_hint, r->ioprio_level);
  if ((rc = hc_trace_wput (w, line, (size_t) n)) < 0 || (rc = csv_wstring (w, comm)) < 0)
    return rc;
  n = snprintf (line, sizeof line, ",%" PRIu32 ",%s,", r->pid, hc_trace_label_name (r->label));
  if ((rc = hc_trace_wput (w, line, (size_t) n)) < 0 || (rc = csv_wstring (w, object)) < 0
      || (rc = hc_trace_wput (w, "\n", 1)) < 0)
    return rc;
  w->count++;
  return 0;
}

static int
csv_wclose (struct hc_trace_writer *w)
{
  return hc_trace_wflush (w);
}

const struct hc_trace_fmt hc_trace_fmt_csv = {
  .name = "csv",
  .format = HC_TRACE_CSV,
  .probe = csv_probe,
  .parse = csv_parse,
  .wopen = csv_wopen,
  .write = csv_write,
  .wclose = csv_wclose,
};
