/* Sequential-run detection, shared by the volume and the replayer.
 *
 * A run is a sequence of requests each starting where the previous one
 * ended.  A stream (a file, a process, an NBD connection) has a run of its
 * own; every request, a stream's too, is also matched against a few recent
 * runs by where they end, like bcache's per-task tracking (the volume calls
 * this twice, hc_vol_req_start), so that a reader spread over several
 * streams is found; a request that continues none of them replaces the
 * least recently used.  The hint-aware policy stops admitting a run's blocks
 * once the run is past its cutoff: a backup or a copy streams through
 * without washing the cache out.
 *
 * This runs once per request on the volume's and the replayer's hot paths,
 * so a request that continues no run — most of them, in random I/O — must
 * cost a few instructions: each slot has a one-byte fingerprint of where its
 * run continues, the sixteen packed in two words that are searched for the
 * request's offset with word-wide byte compares, and only a slot whose
 * fingerprint matches is checked.  The recency order is sixteen 4-bit slot
 * numbers in one word (move-to-front is a few shifts; the victim is the top
 * nibble).
 */
#ifndef HC_CACHE_SEQ_H
#define HC_CACHE_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#define HC_SEQ_SLOTS 16

/* A stream's own run. */
struct hc_seqslot {
  uint64_t next; /* byte offset where the run continues */
  uint64_t run;  /* bytes in the run so far (0: no run) */
};

/* Recent runs of I/O without a stream.  All zeroes is a valid empty state. */
struct hc_seq {
  uint64_t next[HC_SEQ_SLOTS];
  uint64_t run[HC_SEQ_SLOTS];
  uint64_t fp[2];  /* byte i: a fingerprint of next[i] (1 … 255; 0 for no run) */
  uint64_t order;  /* slot numbers, most recent in the low nibble, XOR the identity */
};

/* Notes request [off, off+len) in the run detection; `own` (may be NULL) is
 * a stream's own run.  Returns true when the request continues a run that
 * was already at least `cutoff` bytes long (never for UINT64_MAX). */
bool hc_seq_update (struct hc_seq *s, struct hc_seqslot *own, uint64_t off, uint64_t len,
                    uint64_t cutoff);

#endif /* HC_CACHE_SEQ_H */
