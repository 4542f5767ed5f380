/* MSR Cambridge block traces (SNIA IOTTA, "MSR Cambridge Traces").
 *
 *   Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
 *   128166372003061629,hm,0,Read,3221225472,4096,3459
 *
 * Timestamp is a Windows filetime (100 ns units since 1601), turned into
 * ns since the first record so a replay starts at 0; a record older than
 * the first (the files are not strictly sorted everywhere) gets 0.  Type is
 * Read or Write (any case); Offset and Size are bytes; ResponseTime is
 * checked but not kept.  The published files have no header; a header line
 * on line 1 is accepted.
 *
 * The request's comm is the host name (the issuer) and its object is
 * "host_disk", the volume the file name of the trace is made from (hm_0), so
 * merged traces stay apart.  There are no labels, pids or priorities.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "trace_priv.h"
#include "util.h"

#define MSR_FIELDS 7

/* Clears the time origin. */
static void
msr_reset (struct hc_trace *t)
{
  t->msr_started = false;
  t->msr_first = 0;
}

/* Parses a decimal field. */
static int
number (const char *s, uint64_t *v)
{
  unsigned long long x;

  if (!isdigit ((unsigned char) *s) || hc_parse_number (s, &x) < 0)
    return -EINVAL;
  *v = x;
  return 0;
}

/* Parses one line. */
static int
msr_parse (struct hc_trace *t, char *line, size_t len, struct hc_trace_req *r)
{
  static const char *const header[MSR_FIELDS] = {
    "Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime",
  };
  char *f[MSR_FIELDS + 1], *p = line, object[128];
  uint64_t ts, disk, rt;
  int n = 0, rc;

  (void) len;
  if (!*line)
    return HC_LINE_EMPTY;
  for (;;) {
    char *c = strchr (p, ',');
    f[n++] = p;
    if (!c || n > MSR_FIELDS)
      break;
    *c = '\0';
    p = c + 1;
  }
  if (n != MSR_FIELDS)
    return hc_trace_bad (t, "%d fields, expected %d", n, MSR_FIELDS);
  if (t->lineno == 1 && strcasecmp (f[0], header[0]) == 0) {
    for (int i = 1; i < MSR_FIELDS; i++)
      if (strcasecmp (f[i], header[i]) != 0)
        return hc_trace_bad (t, "bad header field '%s'", f[i]);
    return HC_LINE_OTHER;
  }
  if (number (f[0], &ts) < 0)
    return hc_trace_bad (t, "bad timestamp '%s'", f[0]);
  if (!f[1][0])
    return hc_trace_bad (t, "empty hostname");
  if (number (f[2], &disk) < 0)
    return hc_trace_bad (t, "bad disk number '%s'", f[2]);
  if (strcasecmp (f[3], "Read") == 0)
    r->op = HC_TOP_READ;
  else if (strcasecmp (f[3], "Write") == 0)
    r->op = HC_TOP_WRITE;
  else
    return hc_trace_bad (t, "bad type '%s'", f[3]);
  if (number (f[4], &r->offset) < 0)
    return hc_trace_bad (t, "bad offset '%s'", f[4]);
  if (number (f[5], &r->length) < 0 || r->length > UINT64_MAX - r->offset)
    return hc_trace_bad (t, "bad size '%s'", f[5]);
  if (number (f[6], &rt) < 0)
    return hc_trace_bad (t, "bad response time '%s'", f[6]);
  if ((size_t) snprintf (object, sizeof object, "%s_%llu", f[1], (unsigned long long) disk)
      >= sizeof object)
    return hc_trace_bad (t, "hostname too long");
  if (!t->msr_started) {
    t->msr_first = ts;
    t->msr_started = true;
  }
  if (ts > t->msr_first) {
    if (ts - t->msr_first > UINT64_MAX / 100)
      return hc_trace_bad (t, "timestamp '%s' too far from the first", f[0]);
    r->ts_ns = (ts - t->msr_first) * 100;
  }
  if ((rc = hc_trace_intern (t, f[1], strlen (f[1]), &r->comm)) < 0
      || (rc = hc_trace_intern (t, object, strlen (object), &r->object)) < 0)
    return rc;
  return HC_LINE_REQ;
}

const struct hc_trace_fmt hc_trace_fmt_msr = {
  .name = "msr",
  .format = HC_TRACE_MSR,
  .reset = msr_reset,
  .parse = msr_parse,
};
