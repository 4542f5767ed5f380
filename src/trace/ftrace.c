/* block_rq_issue events in ftrace's text form.
 *
 * Two printers produce the same event line with small differences:
 *
 *   tracefs (trace, trace_pipe):
 *     "  comm-pid   [001] d..1.  1234.567890: block_rq_issue: <fields>"
 *   trace-cmd report (no latency column by default; -t gives ns):
 *     "  comm-pid [001] 1234.567890123: block_rq_issue:   <fields>"
 *
 * so a line is read as: task-pid, "[cpu]", an optional latency-flags
 * column, "seconds.fraction:", "event:", fields.  The task name may itself
 * contain '-' and blanks, so the pid is what follows the last '-' before
 * the cpu column.  The fields are the kernel's TP_printk of block_rq_issue
 * (include/trace/events/block.h):
 *
 *   since 6.10:  "%d,%d %s %u (%s) %llu + %u %s,%u,%u [%s]"
 *                dev, rwbs, bytes, cmd, sector, nr_sector,
 *                ioprio class,hint,level, comm
 *   before:      "%d,%d %s %u (%s) %llu + %u [%s]"
 *   very old:    "%d,%d %s (%s) %llu + %u [%s]" (no bytes)
 *
 * and an ioprio written "class,level" (without the hint) is accepted too.
 * Sectors are 512 bytes whatever the device.  The pid comes from the task
 * column and the comm from the event's own [comm] (the task column shows
 * "<...>" when the comm cache missed it).
 *
 * Other events (block_rq_complete, block_bio_queue, ...) are valid lines
 * but not requests; '#' comments, trace-cmd's "cpus=" and "version ="
 * preamble and the "CPU n is empty" / "CPU:n [LOST k EVENTS]" notes are
 * skipped.  Timestamps are kept as printed (the trace clock's seconds),
 * converted to ns.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_priv.h"
#include "util.h"

/* Finds the " [cpu]" column: the first '[' after a blank that holds only
 * digits.  Returns the '[' or NULL. */
static char *
cpu_column (char *line)
{
  for (char *b = strchr (line, '['); b; b = strchr (b + 1, '[')) {
    char *e = b + 1;
    if (b == line || (b[-1] != ' ' && b[-1] != '\t'))
      continue;
    while (isdigit ((unsigned char) *e))
      e++;
    if (e > b + 1 && *e == ']')
      return b;
  }
  return NULL;
}

/* Parses "class,hint,level" or "class,level" into r. */
static int
ioprio (struct hc_trace *t, char *s, struct hc_trace_req *r)
{
  char *part[4];
  int n = 0;
  uint64_t hint = 0, level;

  for (char *p = s; n < 4; p++) {
    part[n++] = p;
    if (!(p = strchr (p, ',')))
      break;
    *p = '\0';
  }
  if (n < 2 || n > 3 || hc_trace_class_parse (part[0], &r->ioprio_class) < 0
      || (n == 3 && hc_trace_number (part[1], 1023, &hint) < 0) || hc_trace_number (part[n - 1], 7, &level) < 0)
    return hc_trace_bad (t, "bad ioprio '%s'", s);
  r->ioprio_hint = (uint16_t) hint;
  r->ioprio_level = (uint8_t) level;
  return 0;
}

/* Parses one line. */
static int
ft_parse (struct hc_trace *t, char *line, size_t len, struct hc_trace_req *r)
{
  char *p = line, *b, *e, *dash, *tok, *rwbs;
  uint64_t ts, pid, sector, nsect, bytes;
  int rc;

  (void) len;
  p = hc_trace_blanks (p);
  if (!*p)
    return HC_LINE_EMPTY;
  if (*p == '#')
    return strncmp (p, "# tracer:", 9) == 0 ? HC_LINE_OTHER : HC_LINE_EMPTY;
  if (strncmp (p, "cpus=", 5) == 0 || strncmp (p, "version =", 9) == 0)
    return HC_LINE_OTHER;
  if (strncmp (p, "CPU", 3) == 0)
    return HC_LINE_EMPTY;

  /* task-pid [cpu] */
  if (!(b = cpu_column (p)))
    return hc_trace_bad (t, "not an ftrace event line");
  for (e = b; e > p && (e[-1] == ' ' || e[-1] == '\t'); e--)
    ;
  *e = '\0';
  if (!(dash = strrchr (p, '-')) || hc_trace_number (dash + 1, UINT32_MAX, &pid) < 0)
    return hc_trace_bad (t, "no pid in the task column");
  p = strchr (b, ']') + 1;

  /* [flags] seconds.fraction: event: */
  if (!(tok = hc_trace_token (&p)))
    return hc_trace_bad (t, "no timestamp");
  if (tok[strlen (tok) - 1] != ':' && !(tok = hc_trace_token (&p)))
    return hc_trace_bad (t, "no timestamp");
  e = tok + strlen (tok) - 1;
  if (*e != ':')
    return hc_trace_bad (t, "bad timestamp '%s'", tok);
  *e = '\0';
  if (hc_trace_parse_secs (tok, &ts) < 0)
    return hc_trace_bad (t, "bad timestamp '%s'", tok);
  if (!(tok = hc_trace_token (&p)) || tok[strlen (tok) - 1] != ':')
    return hc_trace_bad (t, "no event name");
  tok[strlen (tok) - 1] = '\0';
  if (strcmp (tok, "block_rq_issue") != 0 && strcmp (tok, "block:block_rq_issue") != 0)
    return HC_LINE_OTHER;

  /* dev rwbs [bytes] (cmd) sector + nr [ioprio] [comm] */
  if (!(tok = hc_trace_token (&p)) || !hc_trace_is_dev (tok))
    return hc_trace_bad (t, "bad device");
  if (!(rwbs = hc_trace_token (&p)))
    return hc_trace_bad (t, "no rwbs");
  p = hc_trace_blanks (p);
  if (*p != '(' && hc_trace_number (hc_trace_token (&p), UINT32_MAX, &bytes) < 0)
    return hc_trace_bad (t, "bad byte count");
  p = hc_trace_blanks (p);
  /* The command bytes of passthrough requests may contain blanks. */
  if (*p != '(' || !(e = strchr (p, ')')))
    return hc_trace_bad (t, "expected (cmd)");
  p = e + 1;
  if ((rc = hc_trace_sectors (t, &p, &sector, &nsect)) < 0)
    return rc;
  if (*p != '[') {
    if (!(tok = hc_trace_token (&p)) || (rc = ioprio (t, tok, r)) < 0)
      return tok ? rc : hc_trace_bad (t, "expected [comm]");
  }
  return hc_trace_block_req (t, r, rwbs, sector, nsect, true, p, ts, (uint32_t) pid);
}

const struct hc_trace_fmt hc_trace_fmt_ftrace = {
  .name = "ftrace",
  .format = HC_TRACE_FTRACE,
  .parse = ft_parse,
};
