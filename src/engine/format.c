/* Format: lays out a new volume (format.h) and writes its empty metadata
 * and superblocks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "meta.h"

/* Bytes per write of the empty metadata a format lays out: it is made
 * sector by sector, so larger writes would only take a larger buffer. */
#define FORMAT_CHUNK (64u << 10)

static inline uint64_t
align_up (uint64_t x, uint64_t a)
{
  return (x + a - 1) / a * a;
}

/* Journal size for n blocks: 16 bytes per block, 256 KiB … 64 MiB. */
static uint64_t
journal_sectors_for (uint64_t n)
{
  uint64_t bytes = n * 16;
  if (bytes < (256u << 10))
    bytes = 256u << 10;
  if (bytes > (64u << 20))
    bytes = 64u << 20;
  return bytes / HC_FMT_SECTOR;
}

/* Lays out a volume of n cache blocks; returns the fast-tier bytes needed. */
static uint64_t
layout (struct hc_super *sb, uint64_t n, uint32_t bs, uint32_t max_ranges)
{
  sb->nblocks = (uint32_t) n;
  sb->table_off = HC_FMT_TABLE_OFF;
  sb->table_sectors = hc_sb_entry_sectors (sb) * ((sb->features & HC_FEAT_SUMS) ? 2 : 1);
  sb->range_off = align_up (sb->table_off + sb->table_sectors * HC_FMT_SECTOR, 4096);
  sb->range_sectors = (max_ranges + HC_FMT_RANGE_PER_SECTOR - 1) / HC_FMT_RANGE_PER_SECTOR;
  sb->stats_off = align_up (sb->range_off + sb->range_sectors * HC_FMT_SECTOR, 4096);
  sb->copy_stride = align_up (sb->stats_off + HC_FMT_STATS_SECTORS * HC_FMT_SECTOR, 4096)
                    - sb->table_off;
  sb->journal_off = sb->table_off + 2 * sb->copy_stride;
  sb->journal_sectors = journal_sectors_for (n);
  sb->data_off = align_up (sb->journal_off + sb->journal_sectors * HC_FMT_SECTOR, bs);
  return sb->data_off + n * bs;
}

/* Writes `count` sectors at `off`, each made by fill(i, sector) and then
 * checksummed at csum_off. */
static int
write_region (hc_tier *fast, uint64_t off, uint64_t count, unsigned csum_off, uint64_t seed,
              void (*fill) (uint64_t i, uint8_t *sector))
{
  struct hc_meta_chunks c;
  int rc;

  if ((rc = hc_meta_chunks_start (&c, count, FORMAT_CHUNK)) < 0)
    return rc;
  while (rc == 0 && hc_meta_chunks_next (&c)) {
    for (uint64_t j = 0; j < c.k; j++) {
      uint8_t *s = c.buf + j * HC_FMT_SECTOR;
      memset (s, 0, HC_FMT_SECTOR);
      if (fill)
        fill (c.i + j, s);
      hc_put32 (s + csum_off, hc_meta_csum (s, csum_off, seed, off / HC_FMT_SECTOR + c.i + j));
    }
    rc = hc_tier_write (fast, c.buf, c.k * HC_FMT_SECTOR, off + c.i * HC_FMT_SECTOR, 0);
  }
  free (c.buf);
  return rc;
}

static void
fill_table (uint64_t i, uint8_t *s)
{
  hc_put32 (s + 4, (uint32_t) i);
}

int
hc_meta_format (hc_tier *fast, hc_tier *slow, const struct hc_format_opts *o, bool dry, char *why,
                size_t whylen)
{
  struct hc_format_opts def = { 0 };
  struct hc_super sb = { 0 };
  uint8_t s[HC_FMT_SECTOR];
  uint64_t slow_size = hc_tier_size (slow), fast_size = hc_tier_size (fast), lo, hi, seed;
  uint32_t bs, max_ranges;
  int policy, rc = 0;

  if (!o)
    o = &def;
  bs = o->block_size ? o->block_size : 4096;
  max_ranges = o->max_ranges ? o->max_ranges : 65536;
  if (bs < 4096 || bs > 65536 || (bs & (bs - 1))) {
    snprintf (why, whylen, "block size %u: must be a power of two from 4096 to 65536", bs);
    return -EINVAL;
  }
  if ((unsigned) o->mode >= HC_MODE_COUNT) {
    snprintf (why, whylen, "unknown cache mode %u", (unsigned) o->mode);
    return -EINVAL;
  }
  if ((policy = hc_policy_find (o->policy ? o->policy : hc_policy_name_of (HC_POLICY_DEFAULT))) < 0) {
    snprintf (why, whylen, "unknown policy '%s' (policies: hintaware, lru, s3fifo, fifo, arc, "
              "sieve, 2q, wtinylfu)", o->policy);
    return -EINVAL;
  }
  if (max_ranges > (1u << 22)) {
    snprintf (why, whylen, "at most %u range hints", 1u << 22);
    return -EINVAL;
  }
  if (o->slow_path && strlen (o->slow_path) > HC_FMT_PATH_MAX) {
    snprintf (why, whylen, "slow tier path longer than %u bytes", HC_FMT_PATH_MAX);
    return -EINVAL;
  }
  if (slow_size < bs) {
    snprintf (why, whylen, "the slow tier (%" PRIu64 " bytes) is smaller than a block", slow_size);
    return -EINVAL;
  }

  sb.version = HC_FMT_VERSION;
  sb.features = o->checksums ? HC_FEAT_SUMS : 0;
  sb.block_size = bs;
  sb.mode = o->mode;
  sb.policy = (uint32_t) policy;
  sb.volume_size = slow_size;
  if (sb.volume_size / bs > HC_ORIGIN_MAX) {
    snprintf (why, whylen, "the slow tier is larger than %" PRIu64 " blocks", HC_ORIGIN_MAX);
    return -EINVAL;
  }
  /* The largest block count that fits (the layout grows with it). */
  lo = 0;
  hi = fast_size / bs;
  if (hi > (1u << 31))
    hi = 1u << 31;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo + 1) / 2;
    if (layout (&sb, mid, bs, max_ranges) <= fast_size)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo < 16) {
    uint64_t need = layout (&sb, 16, bs, max_ranges);
    snprintf (why, whylen, "the fast tier (%" PRIu64 " bytes) is too small: at least %" PRIu64
              " bytes are needed for 16 blocks of %u bytes", fast_size, need, bs);
    return -EINVAL;
  }
  sb.fast_size = layout (&sb, lo, bs, max_ranges);
  if (hc_random (sb.cache_uuid, 16) < 0) {
    snprintf (why, whylen, "no randomness for the UUID");
    return -EIO;
  }
  if (o->slow_path)
    snprintf (sb.slow_path, sizeof sb.slow_path, "%s", o->slow_path);
  snprintf (sb.slow_id, sizeof sb.slow_id, "%s", hc_tier_identity (slow));
  sb.replay_seq = 1;
  sb.replay_pos = 0;
  sb.flags = HC_SB_CLEAN | HC_SB_FP;
  seed = hc_meta_uuid_seed (sb.cache_uuid);
  if (dry)
    return 0;

  /* Any old superblocks go first, then empty metadata, then the
   * superblocks last: a format cut short leaves no superblock and so no
   * volume.  The slow tier is only read (its fingerprint). */
  if ((rc = hc_meta_slow_fingerprint (slow, &sb, &sb.slow_fp)) < 0) {
    snprintf (why, whylen, "reading the slow tier: %s", strerror (-rc));
    return rc;
  }
  memset (s, 0, sizeof s);
  for (unsigned k = 0; k < 2 && rc == 0; k++)
    rc = hc_tier_write (fast, s, sizeof s, k * HC_FMT_SB_SLOT, HC_TIER_FUA);
  for (unsigned k = 0; k < 2 && rc == 0; k++)
    if ((rc = write_region (fast, hc_sb_copy_off (&sb, sb.table_off, k), sb.table_sectors, 0, seed,
                            fill_table)) == 0
        && (rc = write_region (fast, hc_sb_copy_off (&sb, sb.range_off, k), sb.range_sectors, 0,
                               seed, NULL)) == 0)
      rc = write_region (fast, hc_sb_copy_off (&sb, sb.stats_off, k), HC_FMT_STATS_SECTORS, 0,
                         seed, NULL);
  if (rc == 0)
    rc = write_region (fast, sb.journal_off, sb.journal_sectors, 8, seed, NULL);
  if (rc < 0) {
    snprintf (why, whylen, "writing metadata to the fast tier: %s", strerror (-rc));
    return rc;
  }
  if ((rc = hc_tier_flush (fast)) < 0)
    goto sb_error;
  sb.generation = 1;
  hc_sb_encode (&sb, s);
  for (unsigned k = 0; k < 2; k++)
    if ((rc = hc_tier_write (fast, s, sizeof s, k * HC_FMT_SB_SLOT, HC_TIER_FUA)) < 0)
      goto sb_error;
  return 0;
sb_error:
  snprintf (why, whylen, "writing the superblock: %s", strerror (-rc));
  return rc;
}
