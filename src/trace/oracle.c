/* libCacheSim's oracleGeneral traces.
 *
 * No header; packed little-endian 24-byte records
 *
 *   u32 time, u64 obj_id, u32 size, i64 next_access_vtime
 *
 * Reading: every record is a read of `size` bytes at obj_id × block size
 * (opts.block_size, default 4096), at ts_ns = time; next_access_vtime is
 * not needed by a replayer and is ignored.  An object id whose offset
 * would not fit in 64 bits is a malformed record; a file that ends inside
 * a record is -EIO.
 *
 * Writing cuts each read or write into the blocks it touches (block b from
 * offset / bs to (offset + length - 1) / bs), one record per block, with
 * time = the record's 1-based index (libCacheSim treats time 0 as warm-up),
 * size = bs, and next_access_vtime = the 1-based index of the next record
 * of the same block, or -1.  Discards and flushes are not accesses and are
 * dropped.  Next-access times need the future, so the writer keeps the
 * block number of every record (8 bytes each) until close; then one
 * backward pass over them with a map block → nearest later index produces
 * every next_access_vtime, and the records are streamed out.
 *
 * Detection is best effort, there being no magic: the size must be a
 * multiple of 24 (when known) and the first records must look like an
 * oracle trace (small, non-decreasing times; sizes above 0 and at most
 * 1 GiB; next access -1 or after the record and below 2^40).  Text read
 * as records fails those tests; --format oracle is the reliable way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_priv.h"
#include "util.h"

#define REC 24
/* The sanity bounds of detection. */
#define PROBE_RECORDS 64
#define PROBE_MAX_TIME (1u << 28)
#define PROBE_MAX_SIZE (1u << 30)
#define PROBE_MAX_NEXT ((int64_t) 1 << 40)

/* True if head looks like the start of an oracleGeneral trace. */
static int
oracle_probe (struct hc_trace *t, const unsigned char *head, size_t len, bool whole, int64_t size)
{
  size_t n = len / REC;
  uint32_t prev = 0;

  (void) t;
  if (size >= 0 && size % REC)
    return 0;
  if (whole && len % REC)
    return 0;
  if (n == 0)
    return 0;
  if (n > PROBE_RECORDS)
    n = PROBE_RECORDS;
  for (size_t i = 0; i < n; i++) {
    const unsigned char *p = head + i * REC;
    uint32_t time = hc_get32 (p), sz = hc_get32 (p + 12);
    int64_t next = (int64_t) hc_get64 (p + 16);
    if ((i == 0 && time > PROBE_MAX_TIME) || time < prev)
      return 0;
    if (sz == 0 || sz > PROBE_MAX_SIZE)
      return 0;
    if (next != -1 && (next <= (int64_t) i + 1 || next >= PROBE_MAX_NEXT))
      return 0;
    prev = time;
  }
  return 1;
}

/* Reads the next record. */
static int
oracle_next (struct hc_trace *t, struct hc_trace_req *r)
{
  uint64_t bs = t->opts.block_size;

  for (;;) {
    const unsigned char *p;
    uint64_t obj;
    uint32_t size;
    long have = (long) (t->fill - t->pos);
    int rc;

    if (have < REC && (have = hc_trace_fill (t, REC)) < REC) {
      if (have <= 0)
        return (int) have;
      return hc_trace_fail (t, -EIO, "truncated oracle record %llu (%ld of %d bytes)",
                            (unsigned long long) t->lineno + 1, have, REC);
    }
    p = (const unsigned char *) t->buf + t->pos;
    t->pos += REC;
    t->lineno++;
    obj = hc_get64 (p + 4);
    size = hc_get32 (p + 12);
    if (obj > (UINT64_MAX - size) / bs) {
      hc_trace_bad (t, "object id %llu overflows the byte offset", (unsigned long long) obj);
      if ((rc = hc_trace_malformed (t)) < 0)
        return rc;
      continue;
    }
    memset (r, 0, sizeof *r);
    r->ts_ns = hc_get32 (p);
    r->op = HC_TOP_READ;
    r->offset = obj * bs;
    r->length = size;
    return 1;
  }
}

/* No header to write. */
static int
oracle_wopen (struct hc_trace_writer *w)
{
  (void) w;
  return 0;
}

/* Records the blocks a read or write touches. */
static int
oracle_write (struct hc_trace_writer *w, const struct hc_trace_req *r, const struct hc_trace *src,
              const char *comm, const char *object)
{
  uint64_t first, last, count;

  (void) src, (void) comm, (void) object;
  if ((r->op != HC_TOP_READ && r->op != HC_TOP_WRITE) || !r->length)
    return 0;
  if (r->offset > UINT64_MAX - (r->length - 1))
    return -EINVAL;
  first = r->offset / w->block_size;
  last = (r->offset + r->length - 1) / w->block_size;
  count = last - first + 1;
  /* time and next_access are record indexes; time has 32 bits. */
  if (count > UINT32_MAX - w->nblocks)
    return -EOVERFLOW;
  if (w->nblocks + count > w->blockcap) {
    size_t cap = w->blockcap ? w->blockcap : 4096;
    uint64_t *b;
    while (cap < w->nblocks + count)
      cap *= 2;
    if (!(b = realloc (w->blocks, cap * sizeof *b)))
      return -ENOMEM;
    w->blocks = b;
    w->blockcap = cap;
  }
  for (uint64_t b = first; b <= last; b++)
    w->blocks[w->nblocks++] = b;
  return 0;
}

/* Computes next-access times and writes every record. */
static int
oracle_wclose (struct hc_trace_writer *w)
{
  struct hc_u64map later = { 0 }; /* block → the 1-based index of its next record */
  int64_t *next = NULL;
  int rc = 0;

  if (w->nblocks && !(next = malloc (w->nblocks * sizeof *next)))
    return -ENOMEM;
  for (size_t i = w->nblocks; i-- > 0;) {
    uint64_t *v = hc_u64map_get (&later, w->blocks[i]);
    next[i] = v ? (int64_t) *v : -1;
    if (v)
      *v = i + 1;
    else if ((rc = hc_u64map_put (&later, w->blocks[i], i + 1)) < 0)
      goto out;
  }
  for (size_t i = 0; i < w->nblocks; i++) {
    unsigned char rec[REC];
    hc_put32 (rec, (uint32_t) (i + 1));
    hc_put64 (rec + 4, w->blocks[i]);
    hc_put32 (rec + 12, w->block_size);
    hc_put64 (rec + 16, (uint64_t) next[i]);
    if ((rc = hc_trace_wput (w, rec, REC)) < 0)
      goto out;
  }
  rc = hc_trace_wflush (w);
out:
  hc_u64map_free (&later);
  free (next);
  return rc;
}

const struct hc_trace_fmt hc_trace_fmt_oracle = {
  .name = "oracle",
  .format = HC_TRACE_ORACLE,
  .probe = oracle_probe,
  .next = oracle_next,
  .wopen = oracle_wopen,
  .write = oracle_write,
  .wclose = oracle_wclose,
};
