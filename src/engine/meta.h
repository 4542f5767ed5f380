/* What the files of the on-disk format in motion share (meta.c, format.c,
 * load.c, commit.c; the format itself is described in format.h). */
#ifndef HC_ENGINE_META_H
#define HC_ENGINE_META_H

#include "vol.h"

#define HC_META_REC 16u             /* bytes per journal record */
#define HC_META_IO_CHUNK (1u << 20) /* bytes per read or write of a metadata region */

/* Sectors per I/O of `chunk` bytes for a region of `count` sectors: less
 * when the region is smaller, so that a small region costs no large
 * buffer. */
static inline uint64_t
hc_meta_chunk_sectors (uint64_t count, unsigned chunk)
{
  return count < chunk / HC_FMT_SECTOR ? (count ? count : 1) : chunk / HC_FMT_SECTOR;
}

/* The seed of a volume's checksums, from its cache UUID (meta.c). */
uint64_t hc_meta_uuid_seed (const uint8_t uuid[16]);

/* Encodes the lifetime statistics as checkpoint copy `copy`'s statistics
 * sectors (HC_FMT_STATS_SECTORS of them) into buf (load.c, which decodes
 * them). */
void hc_meta_encode_stats (hc_volume *v, unsigned copy, uint8_t *buf);

#endif
