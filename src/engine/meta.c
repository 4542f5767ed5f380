/* The on-disk format in motion: format, recovery, commit and checkpoint.
 *
 * The format itself is described in format.h.  This file is arranged as:
 *
 *   1. checksums, the superblock codec and the slow tier's identity
 *   2. format
 *   3. load: table, range hints, journal replay
 *   4. records, commit and checkpoint
 *
 * Why commits are safe: a commit first flushes the slow tier (every block
 * the records call clean is on stable media there), then the fast tier
 * (every block the records map holds its data), and only then writes the
 * records — so a record never reaches stable media before what it describes.
 * A block freed by a record stays off the free list until that record is
 * durable, so a durable mapping never points at a reused block.  Replay
 * applies whole commits, in order; records are absolute ("entry c is now
 * e"), so replaying one twice is harmless, which is what lets a checkpoint
 * write the table in place before moving the replay start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "vol.h"

#define REC 16u               /* bytes per journal record */
#define IO_CHUNK (1u << 20)   /* bytes per read or write of a metadata region */
/* Bytes per write of the empty metadata a format lays out: it is made
 * sector by sector, so larger writes would only take a larger buffer. */
#define FORMAT_CHUNK (64u << 10)

/* Sectors per I/O of `chunk` bytes for a region of `count` sectors: less
 * when the region is smaller, so that a small region costs no large
 * buffer. */
static inline uint64_t
chunk_sectors (uint64_t count, unsigned chunk)
{
  return count < chunk / HC_FMT_SECTOR ? (count ? count : 1) : chunk / HC_FMT_SECTOR;
}

/* ---------------------------------------------------------------------------
 * 1. Checksums, superblock, the slow tier's identity.
 */

uint32_t
hc_meta_csum (const uint8_t *sector, unsigned csum_off, uint64_t seed, uint64_t lba)
{
  uint8_t tmp[HC_FMT_SECTOR];

  memcpy (tmp, sector, sizeof tmp);
  memset (tmp + csum_off, 0, 4);
  return (uint32_t) XXH3_64bits_withSeed (tmp, sizeof tmp, seed ^ (lba * UINT64_C (0x9e3779b97f4a7c15)));
}

static uint64_t
uuid_seed (const uint8_t uuid[16])
{
  return hc_get64 (uuid) ^ hc_get64 (uuid + 8);
}

static inline uint64_t
align_up (uint64_t x, uint64_t a)
{
  return (x + a - 1) / a * a;
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
  uint64_t n = sb->volume_size / HC_FMT_SECTOR, x = uuid_seed (sb->cache_uuid);
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

/* Checks that `slow` is the slow tier this volume belongs to. */
static int
check_slow (hc_volume *v, char *why, size_t whylen)
{
  const struct hc_super *sb = &v->sb;
  const char *id = hc_tier_identity (v->slow);
  uint64_t fp, size = hc_tier_size (v->slow);
  int rc;

  if (size != sb->volume_size) {
    snprintf (why, whylen, "the slow tier is %" PRIu64 " bytes, this volume's was %" PRIu64
              " bytes: wrong slow tier?", size, sb->volume_size);
    return -ENODEV;
  }
  if (sb->slow_id[0] && id[0] && strcmp (sb->slow_id, id) != 0) {
    snprintf (why, whylen, "the slow tier is device %s, this volume's was %s", id, sb->slow_id);
    return -ENODEV;
  }
  v->slow_fp_checked = (sb->flags & (HC_SB_CLEAN | HC_SB_FP)) == (HC_SB_CLEAN | HC_SB_FP);
  if (!v->slow_fp_checked)
    return 0;
  if ((rc = hc_meta_slow_fingerprint (v->slow, sb, &fp)) < 0) {
    snprintf (why, whylen, "reading the slow tier: %s", strerror (-rc));
    return rc;
  }
  if (fp != sb->slow_fp) {
    snprintf (why, whylen, "the slow tier's contents differ from when this volume was closed "
              "(%u sampled sectors): another device of the same size, or written without its "
              "cache", HC_FMT_FP_SECTORS);
    return -ENODEV;
  }
  return 0;
}

/* ---------------------------------------------------------------------------
 * 2. Format.
 */

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
  const uint64_t chunk = chunk_sectors (count, FORMAT_CHUNK);
  uint8_t *buf = malloc (chunk * HC_FMT_SECTOR);
  int rc = 0;

  if (!buf)
    return -ENOMEM;
  for (uint64_t i = 0; i < count && rc == 0;) {
    uint64_t k = count - i < chunk ? count - i : chunk;
    for (uint64_t j = 0; j < k; j++) {
      uint8_t *s = buf + j * HC_FMT_SECTOR;
      memset (s, 0, HC_FMT_SECTOR);
      if (fill)
        fill (i + j, s);
      hc_put32 (s + csum_off, hc_meta_csum (s, csum_off, seed, off / HC_FMT_SECTOR + i + j));
    }
    rc = hc_tier_write (fast, buf, k * HC_FMT_SECTOR, off + i * HC_FMT_SECTOR, 0);
    i += k;
  }
  free (buf);
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
  seed = uuid_seed (sb.cache_uuid);
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

/* ---------------------------------------------------------------------------
 * 3. Load: table, range hints, statistics, replay.
 */

/* The lifetime counters, in a fixed order: each class's counters, then the
 * volume's.  get = true reads them out of s into a flat array and back. */
static unsigned
stats_walk (struct hc_stats *st, uint64_t *flat, bool to_flat)
{
  unsigned n = 0;
#define X(field) (to_flat ? (void) (flat[n++] = (field)) : (void) ((field) = flat[n++]))
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    struct hc_class_stats *k = &st->cls[c];
    for (unsigned o = 0; o < 2; o++) {
      X (k->hits[o]);
      X (k->misses[o]);
      X (k->admissions[o]);
      X (k->bytes[o]);
      for (unsigned r = 0; r < HC_BYPASS_COUNT; r++)
        X (k->bypass[o][r]);
    }
    X (k->evictions);
    X (k->writebacks);
    X (k->hint_hits);
    X (k->flash_bytes_written);
  }
  X (st->commits);
  X (st->flushes);
  X (st->prefetched);
  X (st->errors_fast);
  X (st->errors_checksum);
#undef X
  return n;
}

#define STATS_MAX (HC_FMT_STATS_SECTORS * 63)

static void
encode_stats (hc_volume *v, unsigned copy, uint8_t *buf)
{
  const uint64_t lba0 = hc_sb_copy_off (&v->sb, v->sb.stats_off, copy) / HC_FMT_SECTOR;
  uint64_t flat[STATS_MAX] = { 0 };
  unsigned n = stats_walk (&v->dir.stats, flat, true);

  memset (buf, 0, HC_FMT_STATS_SECTORS * HC_FMT_SECTOR);
  for (unsigned i = 0; i < n; i++)
    hc_put64 (buf + (i / 63) * HC_FMT_SECTOR + 8 + 8 * (i % 63), flat[i]);
  for (unsigned s = 0; s < HC_FMT_STATS_SECTORS; s++)
    hc_put32 (buf + s * HC_FMT_SECTOR,
              hc_meta_csum (buf + s * HC_FMT_SECTOR, 0, v->seed, lba0 + s));
}

static int
visit_stats (hc_volume *v, uint64_t i, const uint8_t *s, void *arg)
{
  uint64_t *flat = arg;
  (void) v;
  for (unsigned k = 0; k < 63; k++)
    flat[i * 63 + k] = hc_get64 (s + 8 + 8 * k);
  return 0;
}

/* Reads a region sector by sector, checking each checksum, and hands each
 * valid sector to visit().  Returns 0, -EUCLEAN with `why`, or an I/O error.
 * With `bad` (salvaging: hc_volume_repair), a sector that cannot be read or
 * fails its checksum is marked there and passed over instead. */
static int
read_region (hc_volume *v, const char *what, uint64_t off, uint64_t count, unsigned csum_off,
             int (*visit) (hc_volume *v, uint64_t i, const uint8_t *sector, void *arg), void *arg,
             uint8_t *bad, char *why, size_t whylen)
{
  const uint64_t chunk = chunk_sectors (count, IO_CHUNK);
  uint8_t *buf = malloc (chunk * HC_FMT_SECTOR);
  int rc = 0;

  if (!buf)
    return -ENOMEM;
  for (uint64_t i = 0; i < count && rc == 0;) {
    uint64_t k = count - i < chunk ? count - i : chunk;
    rc = hc_tier_read (v->fast, buf, k * HC_FMT_SECTOR, off + i * HC_FMT_SECTOR);
    if (rc < 0 && bad && k > 1) { /* salvaging: sector by sector, to find the unreadable ones */
      k = 1;
      rc = hc_tier_read (v->fast, buf, HC_FMT_SECTOR, off + i * HC_FMT_SECTOR);
    }
    if (rc < 0) {
      if (bad) {
        bad[i / 8] |= 1u << (i % 8);
        rc = 0;
        i++;
        continue;
      }
      snprintf (why, whylen, "reading the %s: %s", what, strerror (-rc));
      break;
    }
    for (uint64_t j = 0; j < k && rc == 0; j++) {
      const uint8_t *s = buf + j * HC_FMT_SECTOR;
      if (hc_get32 (s + csum_off) != hc_meta_csum (s, csum_off, v->seed, off / HC_FMT_SECTOR + i + j)) {
        if (bad)
          bad[(i + j) / 8] |= 1u << ((i + j) % 8);
        else {
          snprintf (why, whylen, "%s sector %" PRIu64 " is corrupt (checksum mismatch)", what,
                    i + j);
          rc = -EUCLEAN;
        }
      } else if (visit) {
        rc = visit (v, i + j, s, arg);
      }
    }
    i += k;
  }
  free (buf);
  return rc;
}

/* Load-time state: the table's entries, patched by replay, then turned into
 * the directory. */
struct load {
  uint64_t *entry;
  uint64_t *sum;   /* checksum words (HC_FEAT_SUMS), or NULL */
  struct hc_repair_report *rep; /* salvaging: what is invalid is passed over and counted here */
  char *why;
  size_t whylen;
};

static int
visit_table (hc_volume *v, uint64_t i, const uint8_t *s, void *arg)
{
  struct load *L = arg;
  const uint64_t t = hc_sb_entry_sectors (&v->sb);
  uint64_t *into = L->entry;
  if (L->sum && i >= t) { /* a sector of checksum words */
    into = L->sum;
    i -= t;
  }
  for (unsigned k = 0; k < HC_FMT_TABLE_PER_SECTOR; k++) {
    uint64_t c = i * HC_FMT_TABLE_PER_SECTOR + k;
    uint64_t e = hc_get64 (s + 8 + 8 * k);
    if (c >= v->sb.nblocks) {
      if (e != 0 && L->rep) {
        L->rep->entries_dropped++;
      } else if (e != 0) {
        snprintf (L->why, L->whylen, "table sector %" PRIu64 " maps a block past the cache", i);
        return -EUCLEAN;
      }
      continue;
    }
    into[c] = e;
  }
  return 0;
}

static int
visit_ranges (hc_volume *v, uint64_t i, const uint8_t *s, void *arg)
{
  struct load *L = arg;
  unsigned n = hc_get16 (s + 4);
  if (n > HC_FMT_RANGE_PER_SECTOR) {
    if (L->rep) {
      L->rep->range_sectors_damaged++;
      return 0;
    }
    snprintf (L->why, L->whylen, "range sector %" PRIu64 " claims %u entries", i, n);
    return -EUCLEAN;
  }
  for (unsigned k = 0; k < n; k++) {
    const uint8_t *r = s + 16 + 16 * k;
    uint64_t start = hc_get_n (r, 6), len = hc_get_n (r + 6, 7);
    if (hc_ranges_set (&v->ranges, start, start + len, r[13], r[14], r[15]) == 0)
      continue;
    if (!L->rep) {
      snprintf (L->why, L->whylen, "range sector %" PRIu64 " entry %u is invalid", i, k);
      return -EUCLEAN;
    }
    L->rep->range_hints_dropped++;
  }
  return 0;
}

static int read_jsector (hc_volume *v, uint64_t pos, uint8_t s[HC_FMT_SECTOR]);

/* Salvaging, the log ends at damage that later commits follow: what they
 * mapped dirty (the sectors after the damage that still read as the log)
 * may have lost its latest writes. */
static void
salvage_cut (hc_volume *v, struct load *L, uint64_t seq, uint64_t pos, uint64_t left)
{
  const uint64_t J = v->sb.journal_sectors;
  uint8_t s[HC_FMT_SECTOR];

  L->rep->journal_cut = true;
  for (uint64_t k = 1; k < left; k++) {
    uint64_t p = (pos + k) % J;
    if (read_jsector (v, p, s) < 0)
      continue; /* more damage: go on to what follows */
    if (hc_get64 (s) != seq + k)
      break; /* not the log any more */
    for (unsigned n = 0; n < s[12] && n < HC_FMT_JREC_PER_SECTOR; n++) {
      const uint8_t *r = s + 16 + n * REC;
      uint64_t e = hc_get64 (r + 8);
      if (r[0] == HC_JREC_MAP && (e & HC_M_VALID) && (e & HC_M_DIRTY))
        hc_repair_lost (L->rep, hc_meta_origin (e));
    }
  }
}

/* Applies one journal record to the load state. */
static int
apply_record (hc_volume *v, struct load *L, const uint8_t *r)
{
  switch (r[0]) {
  case HC_JREC_MAP: {
    uint32_t c = hc_get32 (r + 4);
    uint64_t e = hc_get64 (r + 8);
    if (c >= v->sb.nblocks || (e & ~HC_FMT_ENTRY_MASK))
      break;
    L->entry[c] = e;
    hc_meta_mark_table (v, c);
    return 0;
  }
  case HC_JREC_SUM: {
    uint32_t c = hc_get32 (r + 4);
    if (!L->sum || c >= v->sb.nblocks)
      break;
    L->sum[c] = hc_get64 (r + 8);
    hc_meta_mark_table (v, c);
    return 0;
  }
  case HC_JREC_RANGE:
  case HC_JREC_WITHDRAW: {
    uint64_t start = hc_get_n (r + 3, 6), len = hc_get_n (r + 9, 6);
    if (len == 0
        || (r[0] == HC_JREC_RANGE ? hc_ranges_set (&v->ranges, start, start + len, r[1], r[2], r[15])
                                  : hc_ranges_withdraw (&v->ranges, start, start + len, r[15])) < 0)
      break;
    v->ranges_dirty = true;
    return 0;
  }
  default:
    break;
  }
  if (L->rep) {
    L->rep->records_dropped++;
    return 0;
  }
  snprintf (L->why, L->whylen, "journal record of type %u is invalid", r[0]);
  return -EUCLEAN;
}

/* Reads journal sector `pos` into s and checks it; returns 0, or < 0 when
 * it cannot be read or its checksum fails. */
static int
read_jsector (hc_volume *v, uint64_t pos, uint8_t s[HC_FMT_SECTOR])
{
  const uint64_t lba = v->sb.journal_off / HC_FMT_SECTOR + pos;
  int rc = hc_tier_read (v->fast, s, HC_FMT_SECTOR, lba * HC_FMT_SECTOR);

  if (rc == 0 && hc_get32 (s + 8) != hc_meta_csum (s, 8, v->seed, lba))
    rc = -EUCLEAN;
  return rc;
}

/* The journal sector with sequence number seq at pos is damaged.  Does the
 * log go on past the commit it belongs to?  Commits are written one after
 * another, each flushed before the next begins, so if the first sector of
 * a later commit is there, the damaged one was written whole before: that
 * is corruption.  Otherwise the damage is the tail of a commit cut short.
 * Scans at most `left` sectors. */
static bool
later_commit_follows (hc_volume *v, uint64_t seq, uint64_t pos, uint64_t left)
{
  const uint64_t J = v->sb.journal_sectors;
  uint8_t s[HC_FMT_SECTOR];

  for (uint64_t i = 1; i < left; i++) {
    if (read_jsector (v, (pos + i) % J, s) < 0 || hc_get64 (s) != seq + i)
      return false;
    if (s[13] & HC_JFLAG_FIRST)
      return true;
  }
  return false;
}

/* Replays the journal from the superblock's start.  Whole commits only. */
static int
replay (hc_volume *v, struct load *L)
{
  const uint64_t J = v->sb.journal_sectors;
  uint64_t seq = v->sb.replay_seq, pos = v->sb.replay_pos, applied = 0;
  uint8_t *commit = NULL, s[HC_FMT_SECTOR];
  size_t ncommit = 0, capcommit = 0;
  uint64_t commit_sectors = 0;
  int rc = 0;

  for (uint64_t walked = 0; walked < J; walked++) {
    int r = read_jsector (v, pos, s);
    if (r < 0) {
      if (L->rep && later_commit_follows (v, seq, pos, J - walked)) {
        salvage_cut (v, L, seq, pos, J - walked); /* the log up to the damage */
        break;
      }
      if (later_commit_follows (v, seq, pos, J - walked)) {
        snprintf (L->why, L->whylen, "journal sector %" PRIu64 " is %s, and later commits follow "
                  "it; the volume needs repair", pos, r == -EUCLEAN ? "corrupt" : "unreadable");
        rc = -EUCLEAN;
        goto out;
      }
      v->tail_damaged = true; /* a commit cut short: it never happened */
      break;
    }
    if (hc_get64 (s) != seq)
      break; /* the end of the log */
    unsigned n = s[12];
    if (n > HC_FMT_JREC_PER_SECTOR && L->rep) {
      L->rep->journal_cut = true;
      break;
    }
    if (n > HC_FMT_JREC_PER_SECTOR) {
      snprintf (L->why, L->whylen, "journal sector %" PRIu64 " claims %u records", pos, n);
      rc = -EUCLEAN;
      goto out;
    }
    if (ncommit + n > capcommit) {
      capcommit = (ncommit + n) * 2 + 64;
      uint8_t *nb = realloc (commit, capcommit * REC);
      if (!nb) {
        rc = -ENOMEM;
        goto out;
      }
      commit = nb;
    }
    if (n) /* an empty sector (a commit of nothing) may come before any buffer */
      memcpy (commit + ncommit * REC, s + 16, n * REC);
    ncommit += n;
    commit_sectors++;
    seq++;
    pos = (pos + 1) % J;
    if (s[13] & HC_JFLAG_END) {
      for (size_t i = 0; i < ncommit; i++)
        if ((rc = apply_record (v, L, commit + i * REC)) < 0)
          goto out;
      applied += commit_sectors;
      ncommit = 0;
      commit_sectors = 0;
      v->next_seq = seq;
      v->next_pos = pos;
    }
  }
  /* A commit without its END was cut short: it never happened.  Sectors
   * past the end of the log are not read: they are stale, whatever they
   * hold. */
out:
  free (commit);
  v->replayed = applied;
  return rc;
}

static void salvage_table (hc_volume *v, struct load *L, const uint8_t *tbad);

int
hc_meta_load (hc_volume *v, char *why, size_t whylen)
{
  struct load L = { .why = why, .whylen = whylen, .rep = v->salvage };
  struct hc_directory *d = &v->dir;
  uint8_t *tbad = NULL, *rbad = NULL, sbad[1] = { 0 };
  int rc;

  if (L.rep && (!(tbad = calloc ((v->sb.table_sectors + 7) / 8, 1))
                || !(rbad = calloc ((v->sb.range_sectors + 7) / 8, 1)))) {
    free (tbad);
    return -ENOMEM;
  }
  L.entry = calloc (v->sb.nblocks, sizeof *L.entry);
  if ((v->sb.features & HC_FEAT_SUMS) && !(v->sum = calloc (v->sb.nblocks, sizeof *v->sum))) {
    free (L.entry);
    return -ENOMEM;
  }
  L.sum = v->sum;
  if (!L.entry)
    return -ENOMEM;
  if (!v->any_slow && (rc = check_slow (v, why, whylen)) < 0)
    goto out;
  const unsigned k = v->sb.copy;
  rc = read_region (v, "table", hc_sb_copy_off (&v->sb, v->sb.table_off, k), v->sb.table_sectors, 0,
                    visit_table, &L, tbad, why, whylen);
  if (rc == 0)
    rc = read_region (v, "range-hint", hc_sb_copy_off (&v->sb, v->sb.range_off, k),
                      v->sb.range_sectors, 0, visit_ranges, &L, rbad, why, whylen);
  if (rc == 0) {
    uint64_t flat[STATS_MAX] = { 0 };
    rc = read_region (v, "statistics", hc_sb_copy_off (&v->sb, v->sb.stats_off, k),
                      HC_FMT_STATS_SECTORS, 0, visit_stats, flat, L.rep ? sbad : NULL, why, whylen);
    if (rc == 0 && !sbad[0])
      stats_walk (&v->dir.stats, flat, false);
  }
  if (rc == 0 && L.rep) {
    L.rep->stats_reset = sbad[0] != 0;
    for (uint64_t i = 0; i < v->sb.range_sectors; i++)
      L.rep->range_sectors_damaged += (rbad[i / 8] >> (i % 8)) & 1;
  }
  v->next_seq = v->sb.replay_seq;
  v->next_pos = v->sb.replay_pos;
  if (rc == 0)
    rc = replay (v, &L);
  if (rc < 0)
    goto out;
  if (L.rep)
    salvage_table (v, &L, tbad);

  /* Build the directory; check the invariants on the way. */
  for (uint32_t c = 0; c < v->sb.nblocks; c++) {
    uint64_t e = L.entry[c];
    if (v->sum && !(e & HC_M_VALID))
      v->sum[c] = 0;
    else if (v->sum && (uint32_t) (v->sum[c] >> 32) > v->sum_gen)
      v->sum_gen = (uint32_t) (v->sum[c] >> 32);
    if (!(e & HC_M_VALID)) {
      if (e != 0 && L.rep) {
        L.rep->entries_dropped++;
      } else if (e != 0) {
        snprintf (why, whylen, "block %u has an entry but is not valid", c);
        rc = -EUCLEAN;
        goto out;
      }
      continue;
    }
    uint64_t origin = hc_meta_origin (e);
    uint32_t twin = origin < v->nslow ? hc_dir_find (d, origin) : HC_NIL;
    if (L.rep && (origin >= v->nslow || (e & ~HC_FMT_ENTRY_MASK) || twin != HC_NIL)) {
      /* Salvaging: an entry that cannot be right goes.  Of a block mapped
       * twice, which copy is newer is unknown: if either is dirty, the
       * block may have lost its last writes. */
      L.rep->entries_dropped++;
      if (twin != HC_NIL && ((e & HC_M_DIRTY) || (d->map.blk[twin].meta & HC_M_DIRTY)))
        hc_repair_lost (L.rep, origin);
      if (v->sum)
        v->sum[c] = 0;
      continue;
    }
    if (origin >= v->nslow || (e & ~HC_FMT_ENTRY_MASK)) {
      snprintf (why, whylen, "block %u maps block %" PRIu64 ", outside the volume", c, origin);
      rc = -EUCLEAN;
      goto out;
    }
    if (twin != HC_NIL) {
      snprintf (why, whylen, "volume block %" PRIu64 " is mapped twice", origin);
      rc = -EUCLEAN;
      goto out;
    }
    hc_dir_restore (d, c, origin, hc_meta_class (e), (e & HC_M_DIRTY) != 0);
  }
out:
  free (L.entry);
  free (tbad);
  free (rbad);
  return rc;
}

void
hc_repair_lost (struct hc_repair_report *rep, uint64_t origin)
{
  if (rep->nlost < HC_REPAIR_LOST_MAX)
    rep->lost[rep->nlost] = origin;
  rep->nlost++;
}

/* Salvaging: the blocks whose table sector of the current copy is damaged
 * are not mapped (their entries are unknown), unless the journal replayed
 * after the checkpoint says what they hold.  The other copy, one
 * checkpoint older, says what those blocks held then: its dirty ones may
 * have lost data (an older version is all that could be proven, and not
 * even that).  A damaged sector of checksum words leaves its blocks
 * without checksums. */
static void
salvage_table (hc_volume *v, struct load *L, const uint8_t *tbad)
{
  const uint64_t t = hc_sb_entry_sectors (&v->sb);
  const uint64_t other = hc_sb_copy_off (&v->sb, v->sb.table_off, 1 - v->sb.copy) / HC_FMT_SECTOR;
  uint8_t s[HC_FMT_SECTOR];

  for (uint64_t i = 0; i < v->sb.table_sectors; i++) {
    if (!((tbad[i / 8] >> (i % 8)) & 1))
      continue;
    L->rep->table_sectors_damaged++;
    if (i >= t)
      continue; /* checksum words: the entries stand, unverified */
    bool known = hc_tier_read (v->fast, s, sizeof s, (other + i) * HC_FMT_SECTOR) == 0
                 && hc_get32 (s) == hc_meta_csum (s, 0, v->seed, other + i);
    for (unsigned k = 0; k < HC_FMT_TABLE_PER_SECTOR; k++) {
      uint64_t c = i * HC_FMT_TABLE_PER_SECTOR + k, e = known ? hc_get64 (s + 8 + 8 * k) : 0;
      if (c >= v->sb.nblocks)
        break;
      if (L->entry[c])
        continue; /* the journal says what it holds now */
      if (!known)
        L->rep->unknown_blocks++;
      else if ((e & HC_M_VALID) && (e & HC_M_DIRTY))
        hc_repair_lost (L->rep, hc_meta_origin (e));
    }
  }
}

/* Marks for rewriting every sector of the other checkpoint copy that
 * cannot be read or fails its checksum (table sectors in table_prev, any
 * range sector in ranges_prev; statistics are always rewritten).  A clean
 * close leaves both copies equal, and the next checkpoints write only what
 * changed: a copy damaged meanwhile would otherwise become current with
 * its damage. */
void
hc_meta_check_other (hc_volume *v)
{
  const unsigned k = 1 - v->sb.copy;
  const uint64_t table = hc_sb_copy_off (&v->sb, v->sb.table_off, k) / HC_FMT_SECTOR;
  const uint64_t range = hc_sb_copy_off (&v->sb, v->sb.range_off, k) / HC_FMT_SECTOR;
  const uint64_t chunk = chunk_sectors (v->sb.table_sectors > v->sb.range_sectors
                                           ? v->sb.table_sectors : v->sb.range_sectors, IO_CHUNK);
  uint8_t *buf = malloc (chunk * HC_FMT_SECTOR);

  for (unsigned region = 0; region < 2; region++) {
    const uint64_t lba0 = region ? range : table;
    const uint64_t count = region ? v->sb.range_sectors : v->sb.table_sectors;
    for (uint64_t i = 0; i < count;) {
      uint64_t n = count - i < chunk ? count - i : chunk;
      bool readable = buf && hc_tier_read (v->fast, buf, n * HC_FMT_SECTOR,
                                           (lba0 + i) * HC_FMT_SECTOR) == 0;
      for (uint64_t j = 0; j < n; j++) {
        if (readable && hc_get32 (buf + j * HC_FMT_SECTOR)
                            == hc_meta_csum (buf + j * HC_FMT_SECTOR, 0, v->seed, lba0 + i + j))
          continue;
        if (region)
          v->ranges_prev = true;
        else
          v->table_prev[(i + j) / 8] |= 1u << ((i + j) % 8);
      }
      i += n;
    }
  }
  free (buf);
}

/* ---------------------------------------------------------------------------
 * 4. Records, commit, checkpoint.
 */

/* Makes room for one more record in the buffer. */
static uint8_t *
new_record (hc_volume *v)
{
  if (v->jrec == v->jcap) {
    size_t ncap = v->jcap ? v->jcap * 2 : 1024;
    uint8_t *nb = realloc (v->jbuf, ncap * REC);
    if (!nb)
      abort (); /* the record describes a change already made in RAM */
    v->jbuf = nb;
    v->jcap = ncap;
  }
  uint8_t *r = v->jbuf + v->jrec++ * REC;
  memset (r, 0, REC);
  return r;
}

void
hc_meta_record_block (hc_volume *v, uint32_t c)
{
  uint64_t w = v->dir.map.blk[c].meta;
  uint8_t *r = new_record (v);

  r[0] = HC_JREC_MAP;
  hc_put32 (r + 4, c);
  hc_put64 (r + 8, (w & HC_M_VALID) ? w & HC_FMT_ENTRY_MASK : 0);
  if ((w & HC_M_FORMER) && hc_u64set_add (&v->unmapped, hc_meta_origin (w)) < 0)
    abort (); /* as for records: the change is already made in RAM */
  hc_meta_mark_table (v, c);
}

void
hc_meta_mark_table (hc_volume *v, uint32_t c)
{
  uint64_t i = c / HC_FMT_TABLE_PER_SECTOR;
  v->table_dirty[i / 8] |= 1u << (i % 8);
  if (v->sum) {
    i += hc_sb_entry_sectors (&v->sb);
    v->table_dirty[i / 8] |= 1u << (i % 8);
  }
}

void
hc_meta_record_sum (hc_volume *v, uint32_t c)
{
  uint8_t *r = new_record (v);

  r[0] = HC_JREC_SUM;
  hc_put32 (r + 4, c);
  hc_put64 (r + 8, v->sum[c]);
  hc_meta_mark_table (v, c);
}

void
hc_meta_record_range (hc_volume *v, uint64_t start, uint64_t end, bool withdraw, unsigned src,
                      unsigned cls, unsigned advice)
{
  uint8_t *r = new_record (v);

  r[0] = withdraw ? HC_JREC_WITHDRAW : HC_JREC_RANGE;
  r[1] = (uint8_t) cls;
  r[2] = (uint8_t) advice;
  hc_put_n (r + 3, start, 6);
  hc_put_n (r + 9, end - start, 6);
  r[15] = (uint8_t) src;
  v->ranges_dirty = true;
}

int
hc_meta_write_sb (hc_volume *v, bool clean)
{
  uint8_t s[HC_FMT_SECTOR];
  struct hc_super sb = v->sb;

  int rc = 0;

  sb.generation++;
  sb.mode = __atomic_load_n (&v->mode, __ATOMIC_RELAXED);
  sb.flags = clean ? HC_SB_CLEAN | (v->slow_fp_valid ? HC_SB_FP : 0) : 0;
  hc_sb_encode (&sb, s);
  /* A, then B: a cut between them leaves one old and one new copy, each
   * whole and each naming a checkpoint copy that is intact. */
  for (unsigned k = 0; k < 2 && rc == 0; k++)
    rc = hc_tier_write (v->fast, s, sizeof s, k * HC_FMT_SB_SLOT, HC_TIER_FUA);
  if (rc == 0) {
    /* Only what changes: other threads read the rest without a lock. */
    v->sb.generation = sb.generation;
    v->sb.mode = sb.mode;
    v->sb.flags = sb.flags;
  }
  return rc;
}

/* Encodes table sector i of checkpoint copy `copy` from the live map
 * (caller holds lock). */
static void
encode_table_sector (hc_volume *v, unsigned copy, uint64_t i, uint8_t *s)
{
  const uint64_t t = hc_sb_entry_sectors (&v->sb);
  const bool sums = v->sum && i >= t;
  memset (s, 0, HC_FMT_SECTOR);
  hc_put32 (s + 4, (uint32_t) i);
  for (unsigned k = 0; k < HC_FMT_TABLE_PER_SECTOR; k++) {
    uint64_t c = (sums ? i - t : i) * HC_FMT_TABLE_PER_SECTOR + k;
    if (c >= v->sb.nblocks)
      break;
    uint64_t w = v->dir.map.blk[c].meta;
    hc_put64 (s + 8 + 8 * k, !(w & HC_M_VALID) ? 0 : sums ? v->sum[c] : w & HC_FMT_ENTRY_MASK);
  }
  hc_put32 (s, hc_meta_csum (s, 0, v->seed,
                             hc_sb_copy_off (&v->sb, v->sb.table_off, copy) / HC_FMT_SECTOR + i));
}

/* Encodes the whole range table of checkpoint copy `copy` into sectors
 * (caller holds lock). */
static void
encode_ranges (hc_volume *v, unsigned copy, uint8_t *buf)
{
  const uint64_t lba0 = hc_sb_copy_off (&v->sb, v->sb.range_off, copy) / HC_FMT_SECTOR;

  memset (buf, 0, v->sb.range_sectors * HC_FMT_SECTOR);
  for (uint32_t i = 0; i < v->ranges.n; i++) {
    uint8_t *s = buf + (i / HC_FMT_RANGE_PER_SECTOR) * HC_FMT_SECTOR;
    uint8_t *r = s + 16 + 16 * (i % HC_FMT_RANGE_PER_SECTOR);
    const struct hc_range *p = &v->ranges.r[i];
    hc_put_n (r, p->start, 6);
    hc_put_n (r + 6, p->end - p->start, 7);
    r[13] = p->cls;
    r[14] = p->advice;
    r[15] = p->src;
    hc_put16 (s + 4, (uint16_t) (i % HC_FMT_RANGE_PER_SECTOR + 1));
  }
  for (uint64_t i = 0; i < v->sb.range_sectors; i++) {
    uint8_t *s = buf + i * HC_FMT_SECTOR;
    hc_put32 (s, hc_meta_csum (s, 0, v->seed, lba0 + i));
  }
}

/* A checkpoint's payload, encoded under the lock and written after it into
 * the copy that is not current (format.h). */
struct ckpt {
  unsigned copy;       /* the copy it goes to */
  uint8_t *table;      /* table sectors to write, in order */
  uint64_t *index;     /* their sector numbers */
  uint64_t n;
  uint8_t *ranges;     /* the whole range region, or NULL */
  uint8_t *stats;      /* the statistics region */
  uint8_t *changed;    /* table sectors changed since the last checkpoint */
  bool ranges_changed;
};

/* Encodes a checkpoint (caller holds lock): every table sector changed
 * since the target copy was last written — since the last checkpoint
 * (table_dirty) or in the interval before it (table_prev). */
static int
take_checkpoint (hc_volume *v, struct ckpt *ck)
{
  const size_t bytes = (v->sb.table_sectors + 7) / 8;
  const bool ranges = v->ranges_dirty || v->ranges_prev;
  uint64_t count = 0;

  ck->copy = 1 - v->sb.copy;
  for (uint64_t i = 0; i < v->sb.table_sectors; i++)
    count += ((v->table_dirty[i / 8] | v->table_prev[i / 8]) >> (i % 8)) & 1;
  ck->table = malloc (count * HC_FMT_SECTOR + 1);
  ck->index = malloc (count * sizeof *ck->index + 1);
  ck->ranges = ranges ? malloc (v->sb.range_sectors * HC_FMT_SECTOR) : NULL;
  ck->stats = malloc (HC_FMT_STATS_SECTORS * HC_FMT_SECTOR);
  ck->changed = malloc (bytes);
  if (!ck->table || !ck->index || (ranges && !ck->ranges) || !ck->stats || !ck->changed)
    return -ENOMEM;
  encode_stats (v, ck->copy, ck->stats);
  ck->n = 0;
  for (uint64_t i = 0; i < v->sb.table_sectors; i++)
    if (((v->table_dirty[i / 8] | v->table_prev[i / 8]) >> (i % 8)) & 1) {
      encode_table_sector (v, ck->copy, i, ck->table + ck->n * HC_FMT_SECTOR);
      ck->index[ck->n++] = i;
    }
  if (ck->ranges)
    encode_ranges (v, ck->copy, ck->ranges);
  memcpy (ck->changed, v->table_dirty, bytes);
  ck->ranges_changed = v->ranges_dirty;
  memset (v->table_dirty, 0, bytes);
  v->ranges_dirty = false;
  return 0;
}

static void
free_checkpoint (struct ckpt *ck)
{
  free (ck->table);
  free (ck->index);
  free (ck->ranges);
  free (ck->stats);
  free (ck->changed);
}

/* Writes a checkpoint's sectors into its copy, coalescing runs of
 * consecutive sectors. */
static int
write_checkpoint (hc_volume *v, const struct ckpt *ck)
{
  const uint64_t table = hc_sb_copy_off (&v->sb, v->sb.table_off, ck->copy);
  int rc = 0;

  for (uint64_t i = 0; i < ck->n && rc == 0;) {
    uint64_t j = i + 1;
    while (j < ck->n && ck->index[j] == ck->index[j - 1] + 1 && j - i < IO_CHUNK / HC_FMT_SECTOR)
      j++;
    rc = hc_tier_write (v->fast, ck->table + i * HC_FMT_SECTOR, (j - i) * HC_FMT_SECTOR,
                        table + ck->index[i] * HC_FMT_SECTOR, 0);
    i = j;
  }
  if (rc == 0 && ck->ranges)
    rc = hc_tier_write (v->fast, ck->ranges, v->sb.range_sectors * HC_FMT_SECTOR,
                        hc_sb_copy_off (&v->sb, v->sb.range_off, ck->copy), 0);
  if (rc == 0)
    rc = hc_tier_write (v->fast, ck->stats, HC_FMT_STATS_SECTORS * HC_FMT_SECTOR,
                        hc_sb_copy_off (&v->sb, v->sb.stats_off, ck->copy), 0);
  return rc;
}

/* Writes records as journal sectors starting at (seq, pos), the last one
 * marked END; flushes.  Returns the number of sectors written, or an error. */
static long
write_journal (hc_volume *v, const uint8_t *recs, size_t nrec, uint64_t seq, uint64_t pos)
{
  const uint64_t J = v->sb.journal_sectors, base = v->sb.journal_off / HC_FMT_SECTOR;
  size_t nsect = (nrec + HC_FMT_JREC_PER_SECTOR - 1) / HC_FMT_JREC_PER_SECTOR;
  uint8_t *buf = calloc (nsect, HC_FMT_SECTOR);
  int rc = 0;

  if (!buf)
    return -ENOMEM;
  for (size_t i = 0; i < nsect; i++) {
    uint8_t *s = buf + i * HC_FMT_SECTOR;
    size_t first = i * HC_FMT_JREC_PER_SECTOR;
    size_t n = nrec - first < HC_FMT_JREC_PER_SECTOR ? nrec - first : HC_FMT_JREC_PER_SECTOR;
    hc_put64 (s, seq + i);
    s[12] = (uint8_t) n;
    s[13] = (i == nsect - 1 ? HC_JFLAG_END : 0) | (i == 0 ? HC_JFLAG_FIRST : 0);
    memcpy (s + 16, recs + first * REC, n * REC);
    hc_put32 (s + 8, hc_meta_csum (s, 8, v->seed, base + (pos + i) % J));
  }
  /* At most two runs (the ring may wrap), then one flush for both. */
  uint64_t first_run = J - pos < nsect ? J - pos : nsect;
  rc = hc_tier_write (v->fast, buf, first_run * HC_FMT_SECTOR, (base + pos) * HC_FMT_SECTOR, 0);
  if (rc == 0 && nsect > first_run)
    rc = hc_tier_write (v->fast, buf + first_run * HC_FMT_SECTOR,
                        (nsect - first_run) * HC_FMT_SECTOR, base * HC_FMT_SECTOR, 0);
  if (rc == 0)
    rc = hc_tier_flush (v->fast);
  free (buf);
  return rc < 0 ? rc : (long) nsect;
}

int
hc_meta_commit (hc_volume *v, bool want_checkpoint)
{
  uint8_t *recs;
  size_t nrec, reccap;
  bool put_back = false; /* the records went back to the buffer: not ours to free */
  bool slow_dirty, fast_dirty, checkpoint;
  struct ckpt ck = { 0 };
  uint64_t seq, pos;
  int rc = 0;

  if (v->opts.read_only)
    return 0;
  hc_lock (&v->commit_lock);
  hc_lock (&v->lock);
  if (v->failed) {
    pthread_mutex_unlock (&v->lock);
    pthread_mutex_unlock (&v->commit_lock);
    return -EIO;
  }
  recs = v->jbuf;
  nrec = v->jrec;
  reccap = v->jcap;
  v->jbuf = NULL;
  v->jrec = v->jcap = 0;
  /* Blocks freed by these records become reusable when they are durable. */
  while (v->dir.map.pending.count) {
    uint32_t c = hc_list_pop_tail (&v->dir.map, &v->dir.map.pending);
    hc_list_push_head (&v->dir.map, &v->committing, c);
  }
  slow_dirty = v->slow_dirty;
  v->slow_dirty = false;
  fast_dirty = v->fast_dirty;
  v->fast_dirty = false;
  {
    struct hc_u64set t = v->unmapped_committing;
    v->unmapped_committing = v->unmapped; /* becomes durable with this commit */
    v->unmapped = t;
    hc_u64set_clear (&v->unmapped);
  }
  seq = v->next_seq;
  pos = v->next_pos;
  {
    size_t nsect = (nrec + HC_FMT_JREC_PER_SECTOR - 1) / HC_FMT_JREC_PER_SECTOR;
    uint64_t used = seq - v->sb.replay_seq;
    /* Keep a quarter of the ring free: a full one forces a checkpoint. */
    checkpoint = want_checkpoint || used + nsect > v->sb.journal_sectors * 3 / 4;
  }
  if (checkpoint && (rc = take_checkpoint (v, &ck)) < 0) {
    /* Out of memory: put everything back; nothing was written. */
    v->jbuf = recs;
    v->jrec = v->jcap = nrec;
    put_back = true;
    v->slow_dirty |= slow_dirty;
    v->fast_dirty |= fast_dirty;
    while (v->committing.count)
      hc_list_push_head (&v->dir.map, &v->dir.map.pending,
                         hc_list_pop_tail (&v->dir.map, &v->committing));
    goto unlock;
  }
  pthread_mutex_unlock (&v->lock);

  if (slow_dirty)
    rc = hc_tier_flush (v->slow);
  if (rc == 0 && (nrec || checkpoint || fast_dirty))
    rc = hc_tier_flush (v->fast);
  if (rc == 0 && nrec && !checkpoint) {
    long n = write_journal (v, recs, nrec, seq, pos);
    if (n < 0)
      rc = (int) n;
    else {
      seq += (uint64_t) n;
      pos = (pos + (uint64_t) n) % v->sb.journal_sectors;
    }
  }
  if (rc == 0 && checkpoint) {
    /* The other copy now gets everything, these records included: write
     * it, make it durable, then name it in the superblocks and move the
     * replay start past the log.  Until they land, the current copy and
     * its log stand untouched. */
    rc = write_checkpoint (v, &ck);
    if (rc == 0)
      rc = hc_tier_flush (v->fast);
    if (rc == 0) {
      /* (Field by field: other threads read the fields that never change
       * without a lock.) */
      const uint64_t keep_seq = v->sb.replay_seq, keep_pos = v->sb.replay_pos;
      const uint32_t keep_copy = v->sb.copy;
      v->sb.replay_seq = seq;
      v->sb.replay_pos = pos;
      v->sb.copy = ck.copy;
      if ((rc = hc_meta_write_sb (v, false)) < 0) {
        v->sb.replay_seq = keep_seq;
        v->sb.replay_pos = keep_pos;
        v->sb.copy = keep_copy;
      }
    }
  }

  hc_lock (&v->lock);
  if (rc == 0) {
    v->next_seq = seq;
    v->next_pos = pos;
    v->dir.stats.commits++;
    if (checkpoint) {
      /* What this checkpoint wrote, the next one writes to the other copy. */
      memcpy (v->table_prev, ck.changed, (v->sb.table_sectors + 7) / 8);
      v->ranges_prev = ck.ranges_changed;
    }
    hc_u64set_clear (&v->unmapped_committing);
    /* Newest first, so that the free list hands them out in the order
     * they were freed: the blocks of a rewritten range come back ascending,
     * and a batch writes them as one run. */
    while (v->committing.count) {
      uint32_t c = hc_list_pop_head (&v->dir.map, &v->committing);
      hc_list_push_head (&v->dir.map, hc_vol_busy (v, c) ? &v->dir.map.pending : &v->dir.map.free, c);
    }
    pthread_cond_broadcast (&v->space);
  } else {
    /* Nothing of this commit is known to be durable, and RAM is ahead of
     * the disk: refuse further writes rather than guess. */
    v->failed = true;
    while (v->committing.count)
      hc_list_push_head (&v->dir.map, &v->dir.map.pending,
                         hc_list_pop_tail (&v->dir.map, &v->committing));
  }
  /* The records' buffer takes the next ones, unless some came meanwhile
   * (they have a buffer of their own): commits cost no allocation. */
  if (recs && !v->jbuf) {
    v->jbuf = recs;
    v->jcap = reccap;
    recs = NULL;
  }
unlock:
  pthread_mutex_unlock (&v->lock);
  pthread_mutex_unlock (&v->commit_lock);
  if (!put_back)
    free (recs);
  free_checkpoint (&ck);
  return rc;
}
