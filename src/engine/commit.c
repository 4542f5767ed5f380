/* Records, commit and checkpoint.
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

#include "meta.h"

#define FLASH_PAGE 4096u /* what a flash device programs at once, at least */

int
hc_meta_flash_write (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  int rc = hc_tier_write (v->fast, buf, len, off, flags);

  if (rc == 0 && len) {
    uint64_t pages = (off + len - 1) / FLASH_PAGE - off / FLASH_PAGE + 1;
    atomic_fetch_add_explicit (&v->meta_flash, pages * FLASH_PAGE, memory_order_relaxed);
  }
  return rc;
}

/* The record of a change already made in RAM cannot be kept (no memory):
 * RAM is ahead of what any commit can make durable, so the volume fails as
 * after a failed commit (hc_meta_commit) — writes, flushes and close return
 * -EIO and nothing more is committed, so the fast tier keeps the last
 * durable state, which the next open recovers (caller holds lock). */
static void
lost_record (hc_volume *v)
{
  v->failed = true;
}

/* Makes room for one more record in the buffer; NULL (the volume failed)
 * if there is no memory for it. */
static uint8_t *
new_record (hc_volume *v)
{
  if (v->jrec == v->jcap) {
    size_t ncap = v->jcap ? v->jcap * 2 : 1024;
    uint8_t *nb = realloc (v->jbuf, ncap * HC_META_REC);
    if (!nb) {
      lost_record (v);
      return NULL;
    }
    v->jbuf = nb;
    v->jcap = ncap;
  }
  uint8_t *r = v->jbuf + v->jrec++ * HC_META_REC;
  memset (r, 0, HC_META_REC);
  return r;
}

void
hc_meta_record_block (hc_volume *v, uint32_t c)
{
  uint64_t w = v->dir.map.blk[c].meta;
  uint8_t *r = new_record (v);

  if (!r)
    return;
  r[0] = HC_JREC_MAP;
  hc_put32 (r + 4, c);
  hc_put64 (r + 8, hc_meta_entry (w));
  if ((w & HC_M_FORMER) && hc_u64set_add (&v->unmapped, hc_meta_origin (w)) < 0)
    lost_record (v); /* the slow tier could change under an unmapping not yet durable */
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

  if (!r)
    return;
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

  if (!r)
    return;
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
    rc = hc_meta_flash_write (v, s, sizeof s, k * HC_FMT_SB_SLOT, HC_TIER_FUA);
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
    hc_put64 (s + 8 + 8 * k, !(w & HC_M_VALID) ? 0 : sums ? v->sum[c] : hc_meta_entry (w));
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
  hc_meta_encode_stats (v, ck->copy, ck->stats);
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
    while (j < ck->n && ck->index[j] == ck->index[j - 1] + 1 && j - i < HC_META_IO_CHUNK / HC_FMT_SECTOR)
      j++;
    rc = hc_meta_flash_write (v, ck->table + i * HC_FMT_SECTOR, (j - i) * HC_FMT_SECTOR,
                              table + ck->index[i] * HC_FMT_SECTOR, 0);
    i = j;
  }
  if (rc == 0 && ck->ranges)
    rc = hc_meta_flash_write (v, ck->ranges, v->sb.range_sectors * HC_FMT_SECTOR,
                              hc_sb_copy_off (&v->sb, v->sb.range_off, ck->copy), 0);
  if (rc == 0)
    rc = hc_meta_flash_write (v, ck->stats, HC_FMT_STATS_SECTORS * HC_FMT_SECTOR,
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
    memcpy (s + 16, recs + first * HC_META_REC, n * HC_META_REC);
    hc_put32 (s + 8, hc_meta_csum (s, 8, v->seed, base + (pos + i) % J));
  }
  /* At most two runs (the ring may wrap), then one flush for both. */
  uint64_t first_run = J - pos < nsect ? J - pos : nsect;
  rc = hc_meta_flash_write (v, buf, first_run * HC_FMT_SECTOR, (base + pos) * HC_FMT_SECTOR, 0);
  if (rc == 0 && nsect > first_run)
    rc = hc_meta_flash_write (v, buf + first_run * HC_FMT_SECTOR,
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
  /* Everything the caller did before this call (records, fast and slow
   * writes) is taken by the next commit to start: if one has started and
   * landed while we waited for commit_lock, it was all made durable there. */
  hc_lock (&v->lock);
  const uint64_t ticket = v->commits_taken + 1;
  pthread_mutex_unlock (&v->lock);
  hc_lock (&v->commit_lock);
  hc_lock (&v->lock);
  if (v->failed) {
    pthread_mutex_unlock (&v->lock);
    pthread_mutex_unlock (&v->commit_lock);
    return -EIO;
  }
  if (!want_checkpoint && v->commits_durable >= ticket) {
    pthread_mutex_unlock (&v->lock);
    pthread_mutex_unlock (&v->commit_lock);
    return 0;
  }
  const uint64_t number = ++v->commits_taken;
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
    v->commits_durable = number;
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
