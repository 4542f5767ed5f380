/* Corruption is detected, damage a crash can cause is survived, and a
 * failed open changes nothing.
 *
 *   - Superblocks: flipping any byte of one copy leaves the volume opening
 *     from the other (both are written with the same content), `check`
 *     naming the damaged copy, and the open rewriting it; flipping the same
 *     byte of both makes open and check fail naming the superblock.
 *   - The current checkpoint copy (table, range hints, statistics): any
 *     flip in a sample of sectors makes open and check fail naming the
 *     region, and the failed attempts change neither tier.
 *   - The other checkpoint copy: a flip there is repaired by the first
 *     checkpoint (a clean open checks it), so it never becomes current.
 *   - The journal: stale sectors past the log are never read; in a live
 *     log (a volume not closed), damage in the last commit ends the log
 *     there (a commit cut short by a power cut, on flash that can garble
 *     a sector), and damage followed by a later commit is corruption.
 *   - Hostile superblock geometry with recomputed checksums (offsets and
 *     sizes past the tiers, sector counts whose byte size wraps): refused,
 *     nothing allocated by the bogus size, neither tier changed.
 *   - The slow tier's identity after a clean close: a flip in a sampled
 *     sector (the first, the last) or another size is refused.
 * After each flip is undone the volume opens again with its data. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define FAST (4u << 20)
#define SLOW (8u << 20)

static hc_tier *fast, *slow;
static uint8_t *image;

static uint64_t
tier_hash (hc_tier *t)
{
  uint64_t n = hc_tier_size (t);
  uint8_t *buf = malloc (n);
  hc_tier_read (t, buf, n, 0);
  uint64_t h = XXH3_64bits (buf, n);
  free (buf);
  return h;
}

static void
flip (hc_tier *t, uint64_t off)
{
  uint8_t b[HC_SECTOR_SIZE];
  uint64_t s = off / HC_SECTOR_SIZE * HC_SECTOR_SIZE;
  hc_tier_read (t, b, sizeof b, s);
  b[off - s] ^= 0x10;
  hc_tier_write (t, b, sizeof b, s, 0);
}

/* A copy of the whole fast tier, to put back after an open that rewrote
 * some of it. */
static uint8_t *saved;

static void
save_fast (void)
{
  if (!saved)
    saved = malloc (FAST);
  hc_tier_read (fast, saved, FAST, 0);
}

static void
restore_fast (void)
{
  hc_tier_write (fast, saved, FAST, 0, 0);
}

/* Flips one byte, expects open and check to fail mentioning `word`, the
 * tiers to be unchanged by the attempts, and flips it back. */
static unsigned
try_flip (hc_tier *t, uint64_t off, const char *word, const char *what)
{
  char why[256];
  hc_volume *v;
  unsigned bad = 0;

  static unsigned count;
  bool hash = count++ % 8 == 0; /* hashing whole tiers is slow: every 8th flip */
  flip (t, off);
  uint64_t hf = hash ? tier_hash (fast) : 0, hs = hash ? tier_hash (slow) : 0;
  int rc = hc_volume_open (fast, slow, NULL, &v, why, sizeof why);
  if (rc == 0) {
    hc_volume_close (v);
    bad++;
    fprintf (stderr, "%s: byte %llu flipped, open succeeded\n", what, (unsigned long long) off);
  } else if (!strstr (why, word)) {
    bad++;
    fprintf (stderr, "%s: byte %llu: open said '%s'\n", what, (unsigned long long) off, why);
  }
  rc = hc_volume_check (fast, slow, why, sizeof why);
  if (rc == 0 || !strstr (why, word)) {
    bad++;
    fprintf (stderr, "%s: byte %llu: check gave %d '%s'\n", what, (unsigned long long) off, rc, why);
  }
  if (hash && (tier_hash (fast) != hf || tier_hash (slow) != hs)) {
    bad++;
    fprintf (stderr, "%s: a failed open changed a tier\n", what);
  }
  flip (t, off);
  return bad;
}

/* Opens, reads the first n bytes and compares them with `want`; closes.
 * Returns the open's info through *in. */
static bool
opens_with (const uint8_t *want, size_t n, struct hc_volume_info *in, char *why, size_t whylen)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  static uint8_t got[1 << 20];
  hc_volume *v;

  if (hc_volume_open (fast, slow, &oo, &v, why, whylen) < 0)
    return false;
  hc_volume_get_info (v, in);
  bool same = hc_volume_read (v, got, n, 0, NULL) == 0 && memcmp (got, want, n) == 0;
  if (!same)
    snprintf (why, whylen, "data differs");
  return hc_volume_close (v) == 0 && same;
}

int
main (void)
{
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .max_ranges = 128 };
  struct hc_open_opts oo = { .no_cleaner = true };
  struct hc_volume_info in;
  char why[256];
  hc_volume *v;
  static uint8_t data[1 << 20], got[1 << 20];
  unsigned flips = 0, bad = 0;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t) (i * 7 + (i >> 12));
  hc_volume_write (v, data, sizeof data, 0, 0, NULL);
  for (unsigned k = 0; k < 20; k++)
    hc_volume_advise (v, (uint64_t) k * 65536, 8192, (struct hc_hint) { .cls = 1 + k % 7 });
  hc_volume_flush (v);
  /* Close cleanly, then reopen and write more, so that both checkpoint
   * copies and the journal have seen use. */
  CHECK (hc_volume_close (v) == 0, "close");
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "reopen: %s", why);
  hc_volume_write (v, data, 65536, 2 << 20, 0, NULL);
  hc_volume_flush (v);
  hc_volume_close (v);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "reopen: %s", why);
  struct hc_super sb = v->sb;
  hc_volume_close (v);
  (void) image;

  /* Superblocks: every byte of one copy (the volume opens from the other,
   * check names the damaged one, the open repairs it), and a sample of
   * bytes of both at once (nothing to open from). */
  save_fast ();
  for (unsigned slot = 0; slot < 2; slot++)
    for (unsigned b = 0; b < HC_SECTOR_SIZE; b++, flips++) {
      flip (fast, slot * HC_FMT_SB_SLOT + b);
      int rc = hc_volume_check (fast, slow, why, sizeof why);
      if (rc != 0 || !strstr (why, slot ? "superblock B is damaged" : "superblock A is damaged")) {
        bad++;
        fprintf (stderr, "superblock %u byte %u: check gave %d '%s'\n", slot, b, rc, why);
      }
      if (!opens_with (data, sizeof data, &in, why, sizeof why) || in.sb_damaged != 1u << slot) {
        bad++;
        fprintf (stderr, "superblock %u byte %u: open: '%s', damaged %u\n", slot, b, why,
                 in.sb_damaged);
      } else if (hc_volume_check (fast, slow, why, sizeof why) != 0 || why[0]) {
        bad++;
        fprintf (stderr, "superblock %u byte %u: not repaired: '%s'\n", slot, b, why);
      }
      restore_fast ();
    }
  for (unsigned b = 0; b < HC_SECTOR_SIZE; b += 13, flips++) {
    flip (fast, HC_FMT_SB_SLOT + b);
    bad += try_flip (fast, b, "superblock", "both superblocks");
    flip (fast, HC_FMT_SB_SLOT + b);
  }

  /* The current checkpoint copy and the live journal: a sample of
   * sectors, every 7th byte and the checksum bytes. */
  struct {
    const char *word;
    uint64_t off, sectors;
  } regions[] = {
    { "table", hc_sb_copy_off (&sb, sb.table_off, sb.copy), sb.table_sectors },
    { "range", hc_sb_copy_off (&sb, sb.range_off, sb.copy), sb.range_sectors },
    { "statistics", hc_sb_copy_off (&sb, sb.stats_off, sb.copy), HC_FMT_STATS_SECTORS },
  };
  for (unsigned r = 0; r < 3; r++) {
    uint64_t pick[4] = { 0, regions[r].sectors - 1, regions[r].sectors / 2, regions[r].sectors / 3 };
    for (unsigned p = 0; p < 4; p++)
      for (unsigned b = 0; b < HC_SECTOR_SIZE; b += (b < 16 ? 1 : 7), flips++)
        bad += try_flip (fast, regions[r].off + pick[p] * HC_SECTOR_SIZE + b, regions[r].word,
                         regions[r].word);
  }

  /* The other copy: repaired at the first checkpoint, never made current. */
  for (unsigned r = 0; r < 3; r++) {
    uint64_t other = regions[r].off + (sb.copy ? -1 : 1) * (int64_t) sb.copy_stride;
    uint64_t pick[2] = { 0, regions[r].sectors / 2 };
    for (unsigned p = 0; p < 2; p++, flips++) {
      flip (fast, other + pick[p] * HC_SECTOR_SIZE + 100);
      /* Two opens: the first checkpoints into the damaged copy, the
       * second's close makes it current and then writes the other. */
      bool ok = opens_with (data, sizeof data, &in, why, sizeof why)
                && opens_with (data, sizeof data, &in, why, sizeof why)
                && hc_volume_check (fast, slow, why, sizeof why) == 0;
      if (!ok) {
        bad++;
        fprintf (stderr, "other %s copy, sector %llu: %s\n", regions[r].word,
                 (unsigned long long) pick[p], why);
      }
      restore_fast ();
    }
  }

  /* Stale journal sectors (the volume was closed: the whole ring is past
   * the log) are never read. */
  for (uint64_t k = 0; k < sb.journal_sectors; k += sb.journal_sectors / 7, flips++) {
    flip (fast, sb.journal_off + k * HC_SECTOR_SIZE + 20);
    if (!opens_with (data, sizeof data, &in, why, sizeof why)) {
      bad++;
      fprintf (stderr, "stale journal sector %llu: %s\n", (unsigned long long) k, why);
    }
    restore_fast ();
  }

  /* A live log: three commits, then the state a crash leaves. */
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  uint64_t log0 = v->next_pos, ends[3];
  for (unsigned k = 0; k < 3; k++) {
    CHECK (hc_volume_write (v, data + k * 8192, 8192, (3u << 20) + k * 8192, 0, NULL) == 0, "w");
    CHECK (hc_volume_flush (v) == 0, "flush");
    ends[k] = v->next_pos;
  }
  uint8_t *crashed = malloc (FAST);
  hc_tier_read (fast, crashed, FAST, 0);
  hc_volume_close (v);
  hc_tier_write (fast, crashed, FAST, 0, 0);
  save_fast ();
  /* Damage in the first two commits, which a later one follows: refused. */
  for (uint64_t k = log0; k < ends[1]; k++, flips++)
    bad += try_flip (fast, sb.journal_off + k * HC_SECTOR_SIZE + 40, "journal", "live journal");
  /* Damage in the last commit: the log ends before it. */
  for (uint64_t k = ends[1]; k < ends[2]; k++, flips++) {
    flip (fast, sb.journal_off + k * HC_SECTOR_SIZE + 40);
    CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0 && strstr (why, "cut short"),
           "journal tail: check: %s", why);
    CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "tail: open: %s", why);
    hc_volume_get_info (v, &in);
    CHECK (in.tail_damaged, "tail reported");
    CHECK (hc_volume_read (v, got, 16384, 3u << 20, NULL) == 0 && memcmp (got, data, 16384) == 0,
           "the first two commits are there");
    hc_volume_close (v);
    restore_fast ();
  }
  free (crashed);

  /* Hostile geometry behind sound checksums: each region, offset and size
   * field of both superblocks set to values past the tiers -- some chosen
   * so that a sector count times 512 wraps to a small number -- and the
   * checksums recomputed.  Each must be refused without touching a tier
   * (and without allocating by the bogus size: AddressSanitizer would stop
   * the test). */
  static const struct {
    unsigned off, width;
  } fields[] = {
    { SB_FAST_SIZE, 8 }, { SB_VOL_SIZE, 8 }, { SB_NBLOCKS, 4 },
    { SB_TABLE_OFF, 8 }, { SB_TABLE_SECT, 8 }, { SB_RANGE_OFF, 8 }, { SB_RANGE_SECT, 8 },
    { SB_JOURNAL_OFF, 8 }, { SB_JOURNAL_SECT, 8 }, { SB_DATA_OFF, 8 }, { SB_STATS_OFF, 8 },
    { SB_COPY_STRIDE, 8 }, { SB_REPLAY_POS, 8 },
  };
  static const uint64_t hostile[] = {
    UINT64_MAX, UINT64_C (1) << 63, UINT64_C (1) << 55, (UINT64_C (1) << 55) + 8,
    (UINT64_C (1) << 61) + 1, UINT64_C (1) << 40, 2 * (uint64_t) SLOW,
  };
  unsigned geo = 0;
  save_fast ();
  for (unsigned f = 0; f < sizeof fields / sizeof fields[0]; f++)
    for (unsigned h = 0; h < sizeof hostile / sizeof hostile[0]; h++, geo++) {
      uint64_t val = fields[f].width == 4 ? (uint32_t) (hostile[h] >> 32 | hostile[h]) : hostile[h];
      for (unsigned slot = 0; slot < 2; slot++) {
        uint8_t sec[HC_SECTOR_SIZE];
        hc_tier_read (fast, sec, sizeof sec, slot * HC_FMT_SB_SLOT);
        if (fields[f].width == 4)
          hc_put32 (sec + fields[f].off, (uint32_t) val);
        else
          hc_put64 (sec + fields[f].off, val);
        hc_put64 (sec + SB_CSUM, XXH3_64bits (sec, SB_CSUM));
        hc_tier_write (fast, sec, sizeof sec, slot * HC_FMT_SB_SLOT, 0);
      }
      uint64_t hf = tier_hash (fast), hs = tier_hash (slow);
      int rc = hc_volume_open (fast, slow, &oo, &v, why, sizeof why);
      if (rc == 0) {
        hc_volume_close (v);
        bad++;
        fprintf (stderr, "superblock field at %u = %#llx: opened\n", fields[f].off,
                 (unsigned long long) val);
      } else if (!why[0] || hc_volume_check (fast, slow, why, sizeof why) == 0
                 || tier_hash (fast) != hf || tier_hash (slow) != hs) {
        bad++;
        fprintf (stderr, "superblock field at %u = %#llx: check '%s', or a tier changed\n",
                 fields[f].off, (unsigned long long) val, why);
      }
      restore_fast ();
    }
  flips += geo;

  /* The slow tier's identity, after a clean close: a change in its
   * sampled sectors (the first and the last are always among them) or
   * another size is another slow tier (or one written behind the cache). */
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  CHECK (hc_volume_close (v) == 0, "clean close");
  for (unsigned b = 0; b < HC_SECTOR_SIZE; b += 11, flips += 2) {
    bad += try_flip (slow, b, "slow tier", "first slow sector");
    bad += try_flip (slow, SLOW - HC_SECTOR_SIZE + b, "slow tier", "last slow sector");
  }
  hc_tier *other;
  hc_tier_new_memory (SLOW + 4096, &other);
  CHECK (hc_volume_open (fast, other, &oo, &v, why, sizeof why) == -ENODEV && strstr (why, "bytes"),
         "a slow tier of another size: %s", why);
  hc_tier_close (other);

  printf ("corruption: %u single-byte flips, %u undetected or misreported\n", flips, bad);
  CHECK (bad == 0, "every flip detected");
  CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0, "clean again: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "opens again: %s", why);
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0 && memcmp (got, data, sizeof got) == 0,
         "data intact");
  hc_volume_close (v);
  free (saved);
  hc_tier_close (fast);
  hc_tier_close (slow);
  return test_exit ("test_corruption");
}
