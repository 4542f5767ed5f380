/* The on-disk format's codecs: sector checksums, the superblock (encode,
 * decode, sanity, reading the current copy) and the slow tier's identity.
 *
 * The format itself is described in format.h; it is set in motion by
 * format.c (a new volume), load.c (open: table, range hints, statistics,
 * journal replay) and commit.c (records, commit, checkpoint).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "meta.h"

uint32_t
hc_meta_csum (const uint8_t *sector, unsigned csum_off, uint64_t seed, uint64_t lba)
{
  uint8_t tmp[HC_FMT_SECTOR];

  memcpy (tmp, sector, sizeof tmp);
  memset (tmp + csum_off, 0, 4);
  return (uint32_t) XXH3_64bits_withSeed (tmp, sizeof tmp, seed ^ (lba * UINT64_C (0x9e3779b97f4a7c15)));
}

uint64_t
hc_meta_uuid_seed (const uint8_t uuid[16])
{
  return hc_get64 (uuid) ^ hc_get64 (uuid + 8);
}

void
hc_sb_encode (const struct hc_super *sb, uint8_t s[HC_FMT_SECTOR])
{
  memset (s, 0, HC_FMT_SECTOR);
  memcpy (s + SB_MAGIC, HC_FMT_SB_MAGIC, 8);
  hc_put32 (s + SB_VERSION, sb->version);
  hc_put32 (s + SB_FLAGS, sb->flags);
  hc_put64 (s + SB_GEN, sb->generation);
  memcpy (s + SB_CUUID, sb->cache_uuid, 16);
  hc_put64 (s + SB_FAST_SIZE, sb->fast_size);
  hc_put64 (s + SB_VOL_SIZE, sb->volume_size);
  hc_put32 (s + SB_BLOCK, sb->block_size);
  hc_put32 (s + SB_NBLOCKS, sb->nblocks);
  hc_put64 (s + SB_TABLE_OFF, sb->table_off);
  hc_put64 (s + SB_TABLE_SECT, sb->table_sectors);
  hc_put64 (s + SB_RANGE_OFF, sb->range_off);
  hc_put64 (s + SB_RANGE_SECT, sb->range_sectors);
  hc_put64 (s + SB_JOURNAL_OFF, sb->journal_off);
  hc_put64 (s + SB_JOURNAL_SECT, sb->journal_sectors);
  hc_put64 (s + SB_DATA_OFF, sb->data_off);
  hc_put32 (s + SB_MODE, sb->mode);
  hc_put32 (s + SB_POLICY, sb->policy);
  hc_put64 (s + SB_REPLAY_SEQ, sb->replay_seq);
  hc_put64 (s + SB_REPLAY_POS, sb->replay_pos);
  hc_put64 (s + SB_STATS_OFF, sb->stats_off);
  hc_put64 (s + SB_COPY_STRIDE, sb->copy_stride);
  hc_put32 (s + SB_COPY, sb->copy);
  memcpy (s + SB_PATH, sb->slow_path, strnlen (sb->slow_path, HC_FMT_PATH_MAX));
  hc_put64 (s + SB_SLOW_FP, sb->slow_fp);
  hc_put32 (s + SB_FEATURES, sb->features);
  memcpy (s + SB_SLOW_ID, sb->slow_id, strnlen (sb->slow_id, HC_FMT_ID_MAX));
  hc_put64 (s + SB_CSUM, XXH3_64bits (s, SB_CSUM));
}

int
hc_sb_decode (const uint8_t s[HC_FMT_SECTOR], struct hc_super *sb)
{
  if (memcmp (s + SB_MAGIC, HC_FMT_SB_MAGIC, 8) != 0)
    return -EINVAL;
  if (hc_get64 (s + SB_CSUM) != XXH3_64bits (s, SB_CSUM))
    return -EUCLEAN;
  memset (sb, 0, sizeof *sb);
  sb->version = hc_get32 (s + SB_VERSION);
  if (sb->version != HC_FMT_VERSION)
    return -EPROTONOSUPPORT;
  sb->flags = hc_get32 (s + SB_FLAGS);
  sb->generation = hc_get64 (s + SB_GEN);
  memcpy (sb->cache_uuid, s + SB_CUUID, 16);
  sb->fast_size = hc_get64 (s + SB_FAST_SIZE);
  sb->volume_size = hc_get64 (s + SB_VOL_SIZE);
  sb->block_size = hc_get32 (s + SB_BLOCK);
  sb->nblocks = hc_get32 (s + SB_NBLOCKS);
  sb->table_off = hc_get64 (s + SB_TABLE_OFF);
  sb->table_sectors = hc_get64 (s + SB_TABLE_SECT);
  sb->range_off = hc_get64 (s + SB_RANGE_OFF);
  sb->range_sectors = hc_get64 (s + SB_RANGE_SECT);
  sb->journal_off = hc_get64 (s + SB_JOURNAL_OFF);
  sb->journal_sectors = hc_get64 (s + SB_JOURNAL_SECT);
  sb->data_off = hc_get64 (s + SB_DATA_OFF);
  sb->mode = hc_get32 (s + SB_MODE);
  sb->policy = hc_get32 (s + SB_POLICY);
  sb->replay_seq = hc_get64 (s + SB_REPLAY_SEQ);
  sb->replay_pos = hc_get64 (s + SB_REPLAY_POS);
  sb->stats_off = hc_get64 (s + SB_STATS_OFF);
  sb->copy_stride = hc_get64 (s + SB_COPY_STRIDE);
  sb->copy = hc_get32 (s + SB_COPY);
  memcpy (sb->slow_path, s + SB_PATH, HC_FMT_PATH_MAX);
  sb->slow_path[HC_FMT_PATH_MAX] = '\0';
  sb->slow_fp = hc_get64 (s + SB_SLOW_FP);
  sb->features = hc_get32 (s + SB_FEATURES);
  memcpy (sb->slow_id, s + SB_SLOW_ID, HC_FMT_ID_MAX);
  sb->slow_id[HC_FMT_ID_MAX] = '\0';
  return 0;
}

/* Checks a decoded superblock's geometry for sanity (a corrupt or hostile
 * one must not make us allocate or read nonsense).  Every offset and region
 * length is first bounded by the fast tier's recorded size (itself bounded
 * well below 2^64), so that the sums and products below cannot wrap, and
 * everything the open allocates per sector or per block is at most a small
 * multiple of a tier that exists (the open checks that the tier is at least
 * fast_size bytes).  The volume is at least one block (its last block may
 * be partial). */
static int
sb_sane (const struct hc_super *sb)
{
  uint32_t bs = sb->block_size;
  uint64_t f = sb->fast_size, fs = f / HC_FMT_SECTOR;
  if (f < 2 * HC_FMT_SB_SLOT || f > (UINT64_C (1) << 60)
      || sb->table_off > f || sb->range_off > f || sb->stats_off > f || sb->journal_off > f
      || sb->data_off > f || sb->copy_stride > f || sb->table_sectors > fs
      || sb->range_sectors > fs || sb->journal_sectors > fs
      || sb->volume_size > (UINT64_C (1) << 62) || sb->volume_size % HC_FMT_SECTOR)
    return -EUCLEAN;
  if (bs < 4096 || bs > 65536 || (bs & (bs - 1)) || sb->nblocks == 0 || sb->nblocks > (1u << 31)
      || sb->mode >= HC_MODE_COUNT || sb->policy >= HC_POLICY_COUNT
      || (sb->features & ~HC_FEAT_KNOWN)
      || sb->table_sectors < hc_sb_entry_sectors (sb) * ((sb->features & HC_FEAT_SUMS) ? 2 : 1)
      || sb->journal_sectors == 0 || sb->replay_pos >= sb->journal_sectors
      || sb->range_off < sb->table_off + sb->table_sectors * HC_FMT_SECTOR
      || sb->stats_off < sb->range_off + sb->range_sectors * HC_FMT_SECTOR
      || sb->copy > 1 || sb->table_off < HC_FMT_TABLE_OFF
      || sb->copy_stride < sb->stats_off + HC_FMT_STATS_SECTORS * HC_FMT_SECTOR - sb->table_off
      || sb->journal_off < sb->table_off + 2 * sb->copy_stride
      || sb->data_off < sb->journal_off + sb->journal_sectors * HC_FMT_SECTOR
      || sb->data_off % bs || sb->volume_size < bs || sb->volume_size / bs > HC_ORIGIN_MAX
      || sb->data_off + (uint64_t) sb->nblocks * bs > sb->fast_size)
    return -EUCLEAN;
  return 0;
}

int
hc_meta_read_sb (hc_tier *fast, struct hc_super *out, unsigned *damaged, char *why, size_t whylen)
{
  uint8_t s[HC_FMT_SECTOR];
  struct hc_super sb[2];
  int rc[2];

  if (hc_tier_size (fast) < 2 * HC_FMT_SB_SLOT) {
    snprintf (why, whylen, "the fast tier is %" PRIu64 " bytes: too small to hold a volume",
              hc_tier_size (fast));
    return -EINVAL;
  }
  for (unsigned i = 0; i < 2; i++) {
    rc[i] = hc_tier_read (fast, s, sizeof s, i * HC_FMT_SB_SLOT);
    if (rc[i] == 0)
      rc[i] = hc_sb_decode (s, &sb[i]);
    if (rc[i] == 0 && sb_sane (&sb[i]) < 0)
      rc[i] = -EUCLEAN;
  }
  if (rc[0] == -EINVAL && rc[1] == -EINVAL) {
    snprintf (why, whylen, "no hintcache superblock on the fast tier (not formatted?)");
    return -EINVAL;
  }
  for (unsigned i = 0; i < 2; i++)
    if (rc[i] == -EPROTONOSUPPORT) {
      snprintf (why, whylen, "superblock %c has format version %u; this hintcache reads version "
                "%d only (%s)", 'A' + i, sb[i].version, HC_FMT_VERSION,
                sb[i].version > HC_FMT_VERSION ? "upgrade hintcache"
                                               : "write it back with the hintcache that made it");
      return -EPROTONOSUPPORT;
    }
  if (rc[0] < 0 && rc[1] < 0) {
    snprintf (why, whylen, "both superblocks are damaged (A: %s; B: %s); the volume needs repair",
              strerror (-rc[0]), strerror (-rc[1]));
    return rc[0] == -EIO || rc[1] == -EIO ? -EIO : -EUCLEAN;
  }
  if (rc[0] == 0 && rc[1] == 0 && memcmp (sb[0].cache_uuid, sb[1].cache_uuid, 16) != 0) {
    snprintf (why, whylen, "the two superblocks belong to different volumes");
    return -EUCLEAN;
  }
  /* Both copies are written with the same content each time, so either
   * one is a whole superblock: the newest valid one wins. */
  unsigned newest = rc[0] < 0 || (rc[1] == 0 && sb[1].generation > sb[0].generation);
  *out = sb[newest];
  if (damaged)
    *damaged = (rc[0] < 0) | (rc[1] < 0) << 1;
  return 0;
}

/* The slow tier's fingerprint (see format.h): a hash of HC_FMT_FP_SECTORS
 * sectors, the first and the last of the volume and others drawn from the
 * cache's UUID, so that two volumes sample different places. */
int
hc_meta_slow_fingerprint (hc_tier *slow, const struct hc_super *sb, uint64_t *fp)
{
  uint8_t buf[HC_FMT_FP_SECTORS * HC_FMT_SECTOR];
  uint64_t n = sb->volume_size / HC_FMT_SECTOR, x = hc_meta_uuid_seed (sb->cache_uuid);
  int rc = 0;

  for (unsigned i = 0; i < HC_FMT_FP_SECTORS && rc == 0; i++) {
    uint64_t z = (x += UINT64_C (0x9e3779b97f4a7c15)); /* splitmix64 */
    z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
    uint64_t at = i == 0 ? 0 : i == 1 ? n - 1 : (z ^ (z >> 31)) % n;
    rc = hc_tier_read (slow, buf + i * HC_FMT_SECTOR, HC_FMT_SECTOR, at * HC_FMT_SECTOR);
  }
  if (rc == 0)
    *fp = XXH3_64bits (buf, sizeof buf);
  return rc;
}
