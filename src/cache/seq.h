/* Sequential-run detection, shared by the volume and the replayer.
 *
 * A run is a sequence of requests each starting where the previous one
 * ended.  A stream (a file, a process, an NBD connection) has a run of its
 * own; every request, a stream's too, is also matched against the recent
 * runs of the whole volume (the volume calls this twice, hc_vol_req_start),
 * so that a reader spread over several streams is found — an NBD client
 * may send one reader's requests over all its connections in turn, and
 * the kernel's client sends every process's requests over the same ones.
 * The hint-aware policy stops admitting a run's blocks once the run is
 * past its cutoff: a backup or a copy streams through without washing the
 * cache out.
 *
 * Two tables, so that random I/O cannot wash runs out.  Most requests
 * continue no run, and a reader beside a random one at a high queue depth
 * may see dozens of them between two of its own.  With one table of
 * recent runs replaced least recently used (bcache's per-task tracking),
 * each of those displaces a run: a table of 16 forgot a sequential reader
 * that had 16 random requests between two of its own, and then read its
 * every request from the slow tier alone.  So:
 *
 *   candidates   a request that continues nothing is remembered in a
 *                direct-mapped table of HC_SEQ_CANDIDATES entries, at the
 *                hash of where it ends: cheap to write, cheap to look up,
 *                and a random request overwrites one entry at random, so
 *                a new run's first request survives n random ones with
 *                probability (1 − 1/256)^n (94 % at 16, 68 % at 100), and
 *                a lost one costs one more request to find;
 *   runs         a request that continues a candidate promotes it to the
 *                16 established runs, replacing the least recently used
 *                one (which becomes a candidate again).  Only promotions
 *                replace runs: no amount of random I/O displaces an
 *                established one, only 16 newer runs do.
 *
 * This runs once per request on the volume's and the replayer's hot paths,
 * so a request that continues no run — most of them, in random I/O — must
 * cost a few instructions: each run has a one-byte fingerprint of where it
 * continues, the sixteen packed in two words that are searched for the
 * request's offset with word-wide byte compares, and only a run whose
 * fingerprint matches is checked; then one candidate entry is read and one
 * written.  The recency order is sixteen 4-bit slot numbers in one word
 * (move-to-front is a few shifts; the victim is the top nibble).
 */
#ifndef HC_CACHE_SEQ_H
#define HC_CACHE_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#define HC_SEQ_SLOTS 16
#define HC_SEQ_CANDIDATES 256 /* a power of two */

/* A stream's own run. */
struct hc_seqslot {
  uint64_t next; /* byte offset where the run continues */
  uint64_t run;  /* bytes in the run so far (0: no run) */
};

/* The volume's runs: established ones and candidates.  All zeroes is a
 * valid empty state. */
struct hc_seq {
  uint64_t next[HC_SEQ_SLOTS];
  uint64_t run[HC_SEQ_SLOTS];
  uint64_t fp[2];  /* byte i: a fingerprint of next[i] (1 … 255; 0 for no run) */
  uint64_t order;  /* slot numbers, most recent in the low nibble, XOR the identity */
  struct hc_seqslot cand[HC_SEQ_CANDIDATES]; /* at the hash of next; run 0: empty */
};

/* Notes request [off, off+len) in the run detection; `own` (may be NULL) is
 * a stream's own run.  Returns true when the request continues a run that
 * was already at least `cutoff` bytes long (never for UINT64_MAX). */
bool hc_seq_update (struct hc_seq *s, struct hc_seqslot *own, uint64_t off, uint64_t len,
                    uint64_t cutoff);

#endif /* HC_CACHE_SEQ_H */
