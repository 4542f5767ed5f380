/* The on-disk format of a hintcache volume.
 *
 * Everything persistent lives on the fast tier, in 512-byte sectors that each
 * carry their own checksum, because a sector is what a device writes
 * atomically: a power cut can leave any mix of old and new sectors of a
 * larger write, but never half a sector.  So a checksum failure is always
 * corruption, never a torn write, and `open` and `check` can tell the two
 * apart.  Integers are little-endian.
 *
 *   fast tier                                       slow tier
 *   ┌──────────────┐ 0                              ┌──────────────┐ 0
 *   │ superblock A │ (one sector, in a 4 KiB slot)  │ volume data, │
 *   │ superblock B │ 4 KiB                          │ all of it:   │
 *   │ checkpoint 0 │ 8 KiB: table (one 8-byte entry │ hintcache    │
 *   │              │ per cache block, 63 per        │ writes there │
 *   │              │ sector), range hints (31 per   │ only the     │
 *   │              │ sector), statistics            │ volume's own │
 *   │ checkpoint 1 │ the same, copy_stride further  │ data (a disk │
 *   │ journal      │ a ring of sectors, 31 records  │ that held a  │
 *   │ data         │ cache blocks, block-aligned    │ filesystem   │
 *   └──────────────┘                                │ keeps it)    │
 *                                                   └──────────────┘
 *
 * Superblock: two copies, always written together with the same content
 * (A, then B, each with FUA), so either one alone is enough: open takes the
 * valid copy with the highest generation and says so when the other is
 * damaged.  It holds the geometry, the mode, the cache's UUID, which
 * checkpoint copy is current, where journal replay starts, and the slow
 * tier's identity.
 *
 * Slow tier identity: nothing is written on the slow tier but the volume's
 * data (a cache put in front of a disk that holds data must not take its
 * last block, and the volume is exactly as large as the disk).  So the
 * superblock says which slow tier it belongs to: its size (which must
 * match exactly), its stable device name where it has one (see
 * hc_tier_identity; checked when both the recorded and the present one are
 * known), and a fingerprint: a hash of 16 sectors at places drawn from the
 * cache's UUID, taken by format and by every clean close.  Nothing writes
 * the slow tier between a clean close and the next open, so at an open
 * after a clean close the sectors must match; a mismatch means another
 * device of the same size, or one written behind the cache's back (which
 * would make its clean cached blocks stale).  After a crash the slow tier
 * may have been written since the last fingerprint, so only size and name
 * are checked (and `info` says so).
 *
 * Table entry (8 bytes): origin block (bits 39–0), class of the data (42–40),
 * valid (43), dirty (44) — the persistent bits of the in-RAM meta word.
 * Dirty means the cache, not the slow tier, holds the block's data after a
 * crash; a copy may be clean in RAM and written dirty (write-through copies
 * until settled: see write.c).
 *
 * Journal: copy-on-write data plus a write-ahead log of metadata.  A write
 * never overwrites a cache block that a durable mapping points to; it goes
 * to a free block, and the mapping change is a journal record.  A commit
 * flushes the slow tier (so "clean" is true), flushes the fast tier (so the
 * data of every new mapping is durable), then writes the commit's records as
 * consecutive journal sectors with FUA, the last marked END.  Replay applies
 * whole commits only.  Blocks freed by a commit become reusable only after
 * it.
 *
 * Checkpoint: shadow copies.  The table, range hints and statistics exist
 * twice; the superblock names the current copy.  A checkpoint writes the
 * *other* copy — every sector changed since that copy was last written,
 * that is, since the checkpoint before the last — flushes, and then writes
 * the superblocks naming it and moving the replay start past the log.  A
 * power cut anywhere before the superblocks land leaves the current copy
 * and the log it starts untouched, so the volume opens exactly as it was
 * at the last completed commit.  (Writing the table in place instead would
 * leave a mix of old and new sectors that the log cannot repair: the
 * checkpoint's own records are in neither.)  A clean close writes both
 * copies, so that the next open knows they agree; any other open rewrites
 * the other copy whole at its first checkpoint.
 *
 * Journal sector: seq (8), checksum (4), count (1), flags (1: END, FIRST of
 * its commit), reserved (2), then 31 records of 16 bytes.  Sequence numbers grow by one per sector and
 * are never reused, so a stale sector from an earlier lap of the ring never
 * has the expected number: the first unexpected number ends the log.  A
 * sector that cannot be read or fails its checksum ends it too when nothing
 * after it continues the log past its commit: that is a commit cut short
 * by a power cut (flash without power-loss protection may leave garbage,
 * not just old or new sectors), which never happened.  Damage followed by
 * the FIRST sector of a later commit is corruption (a commit is written
 * only after the one before it is durable), and open refuses the volume.
 *
 * Journal records: MAP (type 1, cache block (4 at offset 4), table entry
 * (8 at 8)); RANGE (type 2: class (1), advice (1), start sector (6),
 * sector count (6), source (1): hc_ranges_set) and WITHDRAW (type 3, the
 * same with class and advice 0: hc_ranges_withdraw, which clears only that
 * source's pieces).  A range-hint sector holds up to 31 pieces of 16 bytes
 * after a 16-byte header: start (6), count (7), class, advice, source.
 *
 * Data checksums (HC_FEAT_SUMS, chosen at format): each cache block's data
 * has a 32-bit checksum and a 32-bit generation (the volume's count of
 * block writes when it was written), kept as one 8-byte word (checksum in
 * the low half; 0: none) in a second half of the table — table sector
 * T + i holds the words of the blocks whose entries are in sector i, T
 * being the number of entry sectors — and journaled as SUM records (type
 * 4, cache block (4 at 4), checksum (4 at 8), generation (4 at 12)) with
 * the MAP record of every data write.  The checksum is XXH3 of the data
 * seeded with the cache's seed, the origin, the cache block and the
 * generation, so data that a lost write left behind (an older version, or
 * another block's), or that a misdirected write put there, does not match.
 * A block is never rewritten in place with checksums on: a new version
 * goes to a free block, so the checksum that is durable always describes
 * data that is durable too.
 */
#ifndef HC_ENGINE_FORMAT_H
#define HC_ENGINE_FORMAT_H

#include <stdint.h>
#include <string.h>

#include "../le.h"

#define HC_FMT_VERSION 2
#define HC_FMT_SB_MAGIC "HCVOLUM1"
#define HC_FMT_SECTOR 512u
#define HC_FMT_SB_SLOT 4096u
#define HC_FMT_TABLE_OFF (2 * HC_FMT_SB_SLOT)
#define HC_FMT_FP_SECTORS 16u   /* sectors of the slow tier in its fingerprint */
#define HC_FMT_ID_MAX 63u       /* bytes of the slow tier's device name */

#define HC_FMT_TABLE_PER_SECTOR 63u  /* 8-byte header + 63 × 8 */
#define HC_FMT_RANGE_PER_SECTOR 31u  /* 16-byte header + 31 × 16 */
#define HC_FMT_JREC_PER_SECTOR 31u   /* 16-byte header + 31 × 16 */
#define HC_FMT_PATH_MAX 200u
#define HC_FMT_STATS_SECTORS 8u     /* lifetime statistics, 63 counters per sector */

/* Journal record types. */
enum { HC_JREC_MAP = 1, HC_JREC_RANGE = 2, HC_JREC_WITHDRAW = 3, HC_JREC_SUM = 4 };
/* Journal sector flags. */
#define HC_JFLAG_END 1u
#define HC_JFLAG_FIRST 2u /* the first sector of a commit */

/* Table entry bits (the persistent bits of the meta word). */
#define HC_FMT_ENTRY_MASK ((UINT64_C (1) << 45) - 1)

/* Superblock flags. */
#define HC_SB_CLEAN 1u /* closed cleanly: nothing to replay, both checkpoint copies agree */
#define HC_SB_FP 2u    /* with CLEAN: slow_fp is the slow tier's fingerprint as it is now */

/* Features, chosen at format. */
#define HC_FEAT_SUMS 1u /* every cached block's data has a checksum (see "Data checksums") */
#define HC_FEAT_KNOWN HC_FEAT_SUMS

/* The superblock, decoded. */
struct hc_super {
  uint32_t version;
  uint32_t flags;
  uint64_t generation;
  uint8_t cache_uuid[16];
  uint64_t fast_size;       /* bytes the layout needs on the fast tier */
  uint64_t volume_size;     /* bytes of the volume: the whole slow tier */
  uint32_t block_size;
  uint32_t nblocks;
  uint64_t table_off, table_sectors;  /* offsets of checkpoint copy 0 */
  uint64_t range_off, range_sectors;
  uint64_t stats_off;       /* HC_FMT_STATS_SECTORS of lifetime counters */
  uint64_t journal_off, journal_sectors;
  uint64_t data_off;
  uint32_t mode, policy;
  uint64_t replay_seq;      /* first journal sector of the log */
  uint64_t replay_pos;      /* its position in the ring */
  uint64_t copy_stride;     /* checkpoint copy 1 is this far past copy 0 */
  uint32_t copy;            /* the current checkpoint copy: 0 or 1 */
  char slow_path[HC_FMT_PATH_MAX + 1]; /* where the slow tier was at format */
  char slow_id[HC_FMT_ID_MAX + 1];     /* its device name, "" if none (hc_tier_identity) */
  uint64_t slow_fp;         /* its fingerprint at the last clean close (HC_SB_FP) */
  uint32_t features;        /* HC_FEAT_* */
};

/* Superblock field offsets within its sector. */
enum {
  SB_MAGIC = 0, SB_VERSION = 8, SB_FLAGS = 12, SB_GEN = 16, SB_CUUID = 24, /* 40–55 zero */
  SB_FAST_SIZE = 56, /* 64–71 zero */ SB_VOL_SIZE = 72, SB_BLOCK = 80, SB_NBLOCKS = 84,
  SB_TABLE_OFF = 88, SB_TABLE_SECT = 96, SB_RANGE_OFF = 104, SB_RANGE_SECT = 112,
  SB_JOURNAL_OFF = 120, SB_JOURNAL_SECT = 128, SB_DATA_OFF = 136, SB_MODE = 144, SB_POLICY = 148,
  SB_REPLAY_SEQ = 152, SB_REPLAY_POS = 160, SB_PATH = 168, SB_STATS_OFF = 368,
  SB_COPY_STRIDE = 376, SB_COPY = 384, SB_SLOW_FP = 392, SB_SLOW_ID = 400,
  SB_FEATURES = 464, SB_CSUM = 504,
};

/* Table sectors holding entries (the first ones; with HC_FEAT_SUMS as many
 * again follow, holding checksum words). */
static inline uint64_t
hc_sb_entry_sectors (const struct hc_super *sb)
{
  return (sb->nblocks + HC_FMT_TABLE_PER_SECTOR - 1) / HC_FMT_TABLE_PER_SECTOR;
}

/* Where region `off0` (given for checkpoint copy 0) is in copy `copy`. */
static inline uint64_t
hc_sb_copy_off (const struct hc_super *sb, uint64_t off0, unsigned copy)
{
  return off0 + copy * sb->copy_stride;
}

#endif /* HC_ENGINE_FORMAT_H */
