/* blkparse's default text output.
 *
 * Every event line starts with blkparse's header "%D %2c %8s %5T.%9t %5p
 * %2a %3d ": device (major,minor), cpu, sequence number, time (seconds and
 * nanoseconds since the trace started), pid, action, rwbs.  What follows
 * depends on the action; for a queued bio (Q) it is "sector + count [comm]",
 * or just "[comm]" when the bio has no sectors (an empty flush), possibly
 * with an elapsed time in parentheses before the comm.
 *
 * Only Q events are requests: each bio is queued exactly once, while the
 * other actions (G get request, I insert, D issue, C complete, M/F merges,
 * P/U plugs, X splits, A remaps, m messages, ...) describe the same I/O
 * again at other stages.  They are valid lines that are skipped.
 *
 * blkparse ends with a summary (per-CPU and total counters, throughput,
 * event counts); it starts at a "CPUn (" or "Total (" line, and everything
 * up to the next event line is ignored.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_priv.h"
#include "util.h"

/* Clears the summary state. */
static void
blk_reset (struct hc_trace *t)
{
  t->blk_summary = false;
}

/* True for a line that opens the closing summary. */
static bool
summary_start (const char *s)
{
  if (strncmp (s, "CPU", 3) == 0 && isdigit ((unsigned char) s[3])) {
    for (s += 3; isdigit ((unsigned char) *s); s++)
      ;
    return strncmp (s, " (", 2) == 0;
  }
  return strncmp (s, "Total (", 7) == 0;
}

/* Parses one line. */
static int
blk_parse (struct hc_trace *t, char *line, size_t len, struct hc_trace_req *r)
{
  char *p = line, *dev, *tok, *act, *rwbs;
  uint64_t ts, pid, sector = 0, nsect = 0;
  bool has_range = false;
  int rc;

  (void) len;
  p = hc_trace_blanks (p);
  if (!*p)
    return HC_LINE_EMPTY;
  if (summary_start (p)) {
    t->blk_summary = true;
    return HC_LINE_OTHER;
  }
  dev = hc_trace_token (&p);
  if (!hc_trace_is_dev (dev))
    return t->blk_summary ? HC_LINE_EMPTY : hc_trace_bad (t, "not a blkparse event line");
  t->blk_summary = false;
  if (!(tok = hc_trace_token (&p)) || !hc_trace_digits (tok))
    return hc_trace_bad (t, "bad cpu");
  if (!(tok = hc_trace_token (&p)) || !hc_trace_digits (tok))
    return hc_trace_bad (t, "bad sequence number");
  if (!(tok = hc_trace_token (&p)) || hc_trace_parse_secs (tok, &ts) < 0)
    return hc_trace_bad (t, "bad time");
  if (hc_trace_number (hc_trace_token (&p), UINT32_MAX, &pid) < 0)
    return hc_trace_bad (t, "bad pid");
  act = hc_trace_token (&p);
  if (!act || strlen (act) > 2 || !isalpha ((unsigned char) act[0])
      || (act[1] && !isalpha ((unsigned char) act[1])))
    return hc_trace_bad (t, "bad action");
  if (strcmp (act, "Q") != 0)
    return HC_LINE_OTHER;
  if (!(rwbs = hc_trace_token (&p)))
    return hc_trace_bad (t, "no rwbs");
  p = hc_trace_blanks (p);
  if (isdigit ((unsigned char) *p)) {
    if ((rc = hc_trace_sectors (t, &p, &sector, &nsect)) < 0)
      return rc;
    has_range = true;
  }
  /* blkparse -t adds the time since the bio was queued: "(  1234)". */
  if (*p == '(') {
    char *close = strchr (p, ')');
    if (!close)
      return hc_trace_bad (t, "unbalanced parenthesis");
    p = close + 1;
  }
  return hc_trace_block_req (t, r, rwbs, sector, nsect, has_range, p, ts, (uint32_t) pid);
}

const struct hc_trace_fmt hc_trace_fmt_blkparse = {
  .name = "blkparse",
  .format = HC_TRACE_BLKPARSE,
  .reset = blk_reset,
  .parse = blk_parse,
};
