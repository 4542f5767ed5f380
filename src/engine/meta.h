/* What the files of the on-disk format in motion share (meta.c, format.c,
 * load.c, commit.c; the format itself is described in format.h). */
#ifndef HC_ENGINE_META_H
#define HC_ENGINE_META_H

#include <errno.h>
#include <stdlib.h>

#include "vol.h"

#define HC_META_REC 16u             /* bytes per journal record */
#define HC_META_IO_CHUNK (1u << 20) /* bytes per read or write of a metadata region */

/* A walk over a metadata region of `count` sectors in chunks, through one
 * buffer of at most `limit` bytes (less when the region is smaller, so
 * that a small region costs no large buffer):
 *
 *     struct hc_meta_chunks c;
 *     if (hc_meta_chunks_start (&c, count, limit) < 0) return -ENOMEM;
 *     while (hc_meta_chunks_next (&c)) … sectors [c.i, c.i + c.k) in c.buf …
 *     free (c.buf);
 *
 * The body may lower c.k (to 1, say) to move on by fewer sectors. */
struct hc_meta_chunks {
  uint8_t *buf;
  uint64_t count, chunk; /* the region's sectors; the buffer's */
  uint64_t i, k;         /* the sectors in hand: [i, i + k) */
};

static inline int
hc_meta_chunks_start (struct hc_meta_chunks *c, uint64_t count, unsigned limit)
{
  uint64_t chunk = count < limit / HC_FMT_SECTOR ? (count ? count : 1) : limit / HC_FMT_SECTOR;

  *c = (struct hc_meta_chunks) { .buf = malloc (chunk * HC_FMT_SECTOR), .count = count, .chunk = chunk };
  return c->buf ? 0 : -ENOMEM;
}

static inline bool
hc_meta_chunks_next (struct hc_meta_chunks *c)
{
  c->i += c->k;
  c->k = c->count - c->i < c->chunk ? c->count - c->i : c->chunk;
  return c->i < c->count;
}

/* The table entry that records and checkpoints hold for meta word w: its
 * persistent bits, and dirty for a copy that is clean but unrecorded
 * (HC_M_UNRECORDED: see write.c). */
static inline uint64_t
hc_meta_entry (uint64_t w)
{
  if (!(w & HC_M_VALID))
    return 0;
  return (w & HC_FMT_ENTRY_MASK) | ((w & HC_M_UNRECORDED) ? HC_M_DIRTY : 0);
}

/* The seed of a volume's checksums, from its cache UUID (meta.c). */
uint64_t hc_meta_uuid_seed (const uint8_t uuid[16]);

/* Encodes the lifetime statistics as checkpoint copy `copy`'s statistics
 * sectors (HC_FMT_STATS_SECTORS of them) into buf (load.c, which decodes
 * them). */
void hc_meta_encode_stats (hc_volume *v, unsigned copy, uint8_t *buf);

#endif
