/* Fuzzes the recorder's reading of tracefs's trace_pipe lines
 * (hc_rec_parse_line, src/record/tracefs.c): the input, up to its first
 * newline, is one line of text.
 *
 * Beyond not crashing: the result is one of the line kinds or -EINVAL; an
 * issue or completion has its op, rwbs bits and I/O priority in range and
 * a NUL-terminated comm; a lost-events line gives a count; and a request
 * the line describes, written as the labeled CSV's flags and read back with
 * the block-layer rwbs parser, has the same op and bits.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "record/record.h"
#include "trace/trace_priv.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *line = malloc (size + 1);
  struct hc_rec_req q;
  uint64_t lost = 0;

  FUZZ_CHECK (line != NULL, "out of memory");
  memcpy (line, data, size);
  line[size] = '\0';
  char *nl = strchr (line, '\n');
  if (nl)
    *nl = '\0';
  int rc = hc_rec_parse_line (line, &q, &lost);
  FUZZ_CHECK (rc == -EINVAL || (rc >= HC_REC_OTHER && rc <= HC_REC_LOST), "returned %d", rc);
  if (rc == HC_REC_ISSUE || rc == HC_REC_COMPLETE) {
    FUZZ_CHECK (q.op <= HC_TOP_FLUSH && q.rwbs <= 0x1f && q.ioprio_class <= 3
                    && q.ioprio_level <= 7 && q.ioprio_hint <= 1023,
                "a field out of range: op %u rwbs %#x class %u level %u hint %u", q.op, q.rwbs,
                q.ioprio_class, q.ioprio_level, q.ioprio_hint);
    FUZZ_CHECK (memchr (q.comm, '\0', sizeof q.comm) != NULL, "comm not terminated");
    /* The flags as the CSV writer spells them read back the same. */
    static const char ops[] = "RWDF";
    char flags[8];
    size_t f = 0;
    if (q.rwbs & HC_RWBS_PREFLUSH)
      flags[f++] = 'F';
    flags[f++] = ops[q.op];
    if (q.rwbs & HC_RWBS_FUA)
      flags[f++] = 'F';
    if (q.rwbs & HC_RWBS_READAHEAD)
      flags[f++] = 'A';
    if (q.rwbs & HC_RWBS_SYNC)
      flags[f++] = 'S';
    if (q.rwbs & HC_RWBS_META)
      flags[f++] = 'M';
    flags[f] = '\0';
    uint8_t op;
    uint16_t bits;
    bool spellable = !(q.op == HC_TOP_FLUSH && (q.rwbs & HC_RWBS_FUA) && !(q.rwbs & HC_RWBS_PREFLUSH));
    if (spellable)
      FUZZ_CHECK (hc_trace_rwbs_parse (flags, &op, &bits) >= 0 && op == q.op && bits == q.rwbs,
                  "'%s' does not read back", flags);
  }
  free (line);
  return 0;
}
