/* Fuzzes the replayer's strategy rules (hc_rules_new: "CONDITION &&
 * CONDITION -> HINT" lines, with regular expressions) and their use
 * (hc_rules_classify).  The first input byte picks the strategy, the rest
 * is the rule text.
 *
 * Requests to classify come from a small labeled CSV trace read once at
 * start-up (its reader stays open, so comm and object strings resolve),
 * and three more are made from the input's last bytes.
 *
 * Beyond not crashing:
 *   - rules that fail to compile name a line within the text and a reason
 *     and hand back nothing;
 *   - compiled rules classify every request into a valid hint, the same
 *     one twice over (regex results are memoised per string, and the memo
 *     must not change the answer), and a copy (hc_rules_copy, as each
 *     replay worker gets) classifies them alike.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hintcache/replay.h"

static const char sample[] =
  "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,comm,pid,"
  "label,object\n"
  "100,R,4096,4096,RM,be,0,4,tar,30811,fs_metadata,/\n"
  "200,W,8192,1048576,WS,idle,0,7,jbd2/sda1-8,512,journal,journal\n"
  "300,R,65536,8192,RA,rt,2,0,postgres,1200,index,/db/base/1/2\n"
  "400,D,0,4096,D,none,0,0,fstrim,77,,\n"
  "500,W,1048576,4096,WF,be,6,4,pg_wal,1201,wal,/db/pg_wal/0001\n"
  "600,R,2097152,131072,R,be,0,4,rsync,900,temp,/backup/2024/db.bak\n"
  "700,F,0,0,FF,be,0,4,kworker/u8:2,33,,\n";

#define MAX_REQS 16

static hc_trace *trace;
static struct hc_trace_req reqs[MAX_REQS + 3];
static size_t nreqs;

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  struct hc_trace_opts o = { .format = HC_TRACE_CSV, .strict = true };
  static struct fuzz_file f;
  char why[256];

  (void) argc, (void) argv;
  fuzz_file_init (&f, "fuzz_replay_rules");
  fuzz_file_set (&f, sample, sizeof sample - 1);
  FUZZ_CHECK (hc_trace_open (f.path, &o, &trace, why, sizeof why) == 0, "sample: %s", why);
  while (nreqs < MAX_REQS && hc_trace_next (trace, &reqs[nreqs]) == 1)
    nreqs++;
  FUZZ_CHECK (nreqs == 7, "sample: %zu requests (%s)", nreqs, hc_trace_error (trace));
  return 0;
}

/* Classifies every request with r and with its copy; returns nothing,
 * aborts on a difference. */
static void
check_classify (hc_rules *r, size_t n)
{
  hc_rules *copy = NULL;

  FUZZ_CHECK (hc_rules_copy (r, &copy) == 0 && copy, "copy failed");
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n; i++) {
      struct hc_hint h = hc_rules_classify (r, &reqs[i], trace);
      struct hc_hint c = hc_rules_classify (copy, &reqs[i], trace);
      FUZZ_CHECK (hc_hint_check (h) == 0, "request %zu: invalid hint %u/%u/%#x", i, h.cls,
                  h.advice, h.flags);
      FUZZ_CHECK (h.cls == c.cls && h.advice == c.advice && h.flags == c.flags,
                  "request %zu (pass %d): the copy says %u/%u/%#x, the rules %u/%u/%#x", i, pass,
                  c.cls, c.advice, c.flags, h.cls, h.advice, h.flags);
    }
  hc_rules_free (copy);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_in in = { data, size };
  enum hc_strategy s = (enum hc_strategy) (fuzz_take (&in, 1) % (HC_STRATEGY_COUNT + 1));
  struct hc_parse_error err;
  hc_rules *r = NULL;
  unsigned lines = 0;
  size_t n = nreqs;

  /* The text is what follows the strategy byte up to a NUL, as a file
   * read by the CLI would be. */
  char *text = fuzz_strdup (in.p, in.n);
  size_t len = strlen (text);
  for (size_t i = 0; i < len; i++)
    lines += text[i] == '\n';
  lines += len > 0 && text[len - 1] != '\n';

  /* Requests from the last bytes: fields in range, strings of the sample. */
  struct fuzz_in tail = { data + (size > 48 ? size - 48 : 0), size > 48 ? 48 : size };
  for (unsigned k = 0; k < 3; k++) {
    struct hc_trace_req *q = &reqs[nreqs + k];
    memset (q, 0, sizeof *q);
    q->op = (uint8_t) (fuzz_take (&tail, 1) % 4);
    q->label = (uint8_t) (fuzz_take (&tail, 1) % HC_LABEL_COUNT);
    q->ioprio_class = (uint8_t) (fuzz_take (&tail, 1) % 4);
    q->ioprio_level = (uint8_t) (fuzz_take (&tail, 1) % 8);
    q->ioprio_hint = (uint16_t) (fuzz_take (&tail, 2) % 1024);
    q->rwbs = (uint16_t) (fuzz_take (&tail, 1) & 0x1f);
    q->pid = (uint32_t) fuzz_take (&tail, 4);
    q->length = fuzz_take (&tail, 2) << (fuzz_take (&tail, 1) % 20);
    q->offset = fuzz_take (&tail, 4) << 9;
    q->comm = (uint32_t) (fuzz_take (&tail, 1) % 12);
    q->object = (uint32_t) (fuzz_take (&tail, 1) % 12);
    n++;
  }

  int rc = hc_rules_new (s, text, &r, &err);
  if ((unsigned) s >= HC_STRATEGY_COUNT) {
    FUZZ_CHECK (rc == -EINVAL && !r, "strategy %u accepted", (unsigned) s);
  } else if (rc < 0) {
    FUZZ_CHECK (rc == -EINVAL && !r, "rules_new returned %d", rc);
    FUZZ_CHECK (err.line >= 1 && err.line <= lines && err.msg[0], "failure at line %u of %u: '%s'",
                err.line, lines, err.msg);
  } else {
    check_classify (r, n);
    hc_rules_free (r);
  }
  free (text);
  return 0;
}
