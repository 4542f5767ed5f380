/* Load: what open reads — the current checkpoint's table and range hints,
 * the statistics, then the journal replayed from the superblock's start,
 * whole commits only, ending at its first unexpected or damaged sector
 * (format.h, "Recovery"); and the salvaging variant that repair uses.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "meta.h"

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
  X (st->meta_flash_bytes); /* 0 in a volume written before it was counted */
#undef X
  return n;
}

#define STATS_MAX (HC_FMT_STATS_SECTORS * 63)

void
hc_meta_encode_stats (hc_volume *v, unsigned copy, uint8_t *buf)
{
  const uint64_t lba0 = hc_sb_copy_off (&v->sb, v->sb.stats_off, copy) / HC_FMT_SECTOR;
  uint64_t flat[STATS_MAX] = { 0 };
  struct hc_stats st = v->dir.stats;
  st.meta_flash_bytes = atomic_load_explicit (&v->meta_flash, memory_order_relaxed);
  unsigned n = stats_walk (&st, flat, true);

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
  struct hc_meta_chunks c;
  int rc;

  if ((rc = hc_meta_chunks_start (&c, count, HC_META_IO_CHUNK)) < 0)
    return rc;
  while (rc == 0 && hc_meta_chunks_next (&c)) {
    const uint64_t i = c.i;
    rc = hc_tier_read (v->fast, c.buf, c.k * HC_FMT_SECTOR, off + i * HC_FMT_SECTOR);
    if (rc < 0 && bad && c.k > 1) { /* salvaging: sector by sector, to find the unreadable ones */
      c.k = 1;
      rc = hc_tier_read (v->fast, c.buf, HC_FMT_SECTOR, off + i * HC_FMT_SECTOR);
    }
    if (rc < 0) {
      if (bad) {
        bad[i / 8] |= 1u << (i % 8);
        rc = 0;
        continue;
      }
      snprintf (why, whylen, "reading the %s: %s", what, strerror (-rc));
      break;
    }
    for (uint64_t j = 0; j < c.k && rc == 0; j++) {
      const uint8_t *s = c.buf + j * HC_FMT_SECTOR;
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
  }
  free (c.buf);
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
      const uint8_t *r = s + 16 + n * HC_META_REC;
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
      uint8_t *nb = realloc (commit, capcommit * HC_META_REC);
      if (!nb) {
        rc = -ENOMEM;
        goto out;
      }
      commit = nb;
    }
    if (n) /* an empty sector (a commit of nothing) may come before any buffer */
      memcpy (commit + ncommit * HC_META_REC, s + 16, n * HC_META_REC);
    ncommit += n;
    commit_sectors++;
    seq++;
    pos = (pos + 1) % J;
    if (s[13] & HC_JFLAG_END) {
      for (size_t i = 0; i < ncommit; i++)
        if ((rc = apply_record (v, L, commit + i * HC_META_REC)) < 0)
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
    atomic_store_explicit (&v->meta_flash, v->dir.stats.meta_flash_bytes, memory_order_relaxed);
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
  for (unsigned region = 0; region < 2; region++) {
    const uint64_t lba0 = region ? range : table;
    struct hc_meta_chunks c;
    int rc = hc_meta_chunks_start (&c, region ? v->sb.range_sectors : v->sb.table_sectors,
                                   HC_META_IO_CHUNK);
    while (hc_meta_chunks_next (&c)) {
      const uint64_t i = c.i;
      bool readable = rc == 0 && hc_tier_read (v->fast, c.buf, c.k * HC_FMT_SECTOR,
                                               (lba0 + i) * HC_FMT_SECTOR) == 0;
      for (uint64_t j = 0; j < c.k; j++) {
        if (readable && hc_get32 (c.buf + j * HC_FMT_SECTOR)
                            == hc_meta_csum (c.buf + j * HC_FMT_SECTOR, 0, v->seed, lba0 + i + j))
          continue;
        if (region)
          v->ranges_prev = true;
        else
          v->table_prev[(i + j) / 8] |= 1u << ((i + j) % 8);
      }
    }
    free (c.buf);
  }
}
