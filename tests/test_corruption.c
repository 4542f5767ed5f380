/* Corruption is detected, and a failed open changes nothing: flipping any
 * single byte of either superblock, and of a sample of table, range-hint
 * and journal sectors, makes both hc_volume_open and hc_volume_check fail
 * with a message naming what is corrupt; the slow tier's label likewise.
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

int
main (void)
{
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .max_ranges = 128 };
  struct hc_open_opts oo = { .no_cleaner = true };
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
  struct hc_super sb = v->sb;
  /* Leave it open-ish: close cleanly, then reopen and write more so the
   * journal has a live log too. */
  CHECK (hc_volume_close (v) == 0, "close");
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "reopen: %s", why);
  hc_volume_write (v, data, 65536, 2 << 20, 0, NULL);
  hc_volume_flush (v);
  sb = v->sb;
  uint64_t live_journal = v->sb.replay_pos;
  hc_volume_close (v);
  (void) image;

  /* Superblocks: every byte of both. */
  for (unsigned slot = 0; slot < 2; slot++)
    for (unsigned b = 0; b < HC_SECTOR_SIZE; b++, flips++)
      bad += try_flip (fast, slot * HC_FMT_SB_SLOT + b, "superblock", "superblock");
  /* Table, range-hint and journal sectors: a sample of sectors, every 7th
   * byte and the checksum bytes. */
  struct {
    const char *word;
    uint64_t off, sectors;
  } regions[] = {
    { "table", sb.table_off, sb.table_sectors },
    { "range", sb.range_off, sb.range_sectors },
    { "statistics", sb.stats_off, HC_FMT_STATS_SECTORS },
    { "journal", sb.journal_off, sb.journal_sectors },
  };
  for (unsigned r = 0; r < 4; r++) {
    uint64_t pick[4] = { 0, regions[r].sectors - 1, regions[r].sectors / 2,
                         r == 3 ? live_journal : regions[r].sectors / 3 };
    for (unsigned p = 0; p < 4; p++)
      for (unsigned b = 0; b < HC_SECTOR_SIZE; b += (b < 16 ? 1 : 7), flips++)
        bad += try_flip (fast, regions[r].off + pick[p] * HC_SECTOR_SIZE + b, regions[r].word,
                         regions[r].word);
  }
  /* The slow tier's label. */
  for (unsigned b = 0; b < HC_SECTOR_SIZE; b += 11, flips++)
    bad += try_flip (slow, sb.slow_label_off + b, "slow tier", "label");

  printf ("corruption: %u single-byte flips, %u undetected or misreported\n", flips, bad);
  CHECK (bad == 0, "every flip detected");
  CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0, "clean again: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "opens again: %s", why);
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0 && memcmp (got, data, sizeof got) == 0,
         "data intact");
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
  return test_exit ("test_corruption");
}
