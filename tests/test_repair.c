/* hc_volume_repair: salvage what can be proven, say what was lost, and
 * never write the slow tier but dirty data.
 *
 *   - a healthy volume: nothing to repair, nothing written;
 *   - a damaged superblock copy: repaired by a read-write open, no rebuild;
 *   - a damaged table sector of the current checkpoint copy, with dirty
 *     blocks in it and in other sectors: every dirty block outside it
 *     reaches the slow tier; those in it are reported lost, by origin (the
 *     other copy names them), and read back as the slow tier had them; the
 *     rebuilt volume opens, checks clean and keeps its range hints;
 *   - a damaged journal sector that later commits follow: the commits
 *     before it are salvaged, the blocks written dirty after it are
 *     reported lost;
 *   - with data checksums, a dirty block whose data is damaged is not
 *     written back (reported, the slow tier keeps its old data);
 *   - another slow tier is refused, and nothing changes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define BS 4096u
#define FAST (4u << 20)
#define SLOW (8u << 20)
#define NB 200u /* dirty blocks written: more than one table sector's 63 */

static hc_tier *fast, *slow;
static uint8_t data[NB * BS], old[NB * BS], got[NB * BS];

static uint64_t
tier_hash (hc_tier *t, uint64_t n)
{
  uint8_t *b = malloc (n);
  hc_tier_read (t, b, n, 0);
  uint64_t h = XXH3_64bits (b, n);
  free (b);
  return h;
}

static void
flip (uint64_t off)
{
  uint8_t s[HC_SECTOR_SIZE];
  hc_tier_read (fast, s, sizeof s, off / HC_SECTOR_SIZE * HC_SECTOR_SIZE);
  s[off % HC_SECTOR_SIZE] ^= 0x21;
  hc_tier_write (fast, s, sizeof s, off / HC_SECTOR_SIZE * HC_SECTOR_SIZE, 0);
}

/* A write-back volume with blocks 0 … NB-1 dirty (data) over a slow tier
 * holding `old` there, and a range hint; closed cleanly unless `crash`
 * (then the image is what a crash after the flush leaves). */
static struct hc_super
make (bool sums, bool crash)
{
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .checksums = sums, .max_ranges = 64 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  hc_volume *v;

  hc_tier_close (fast);
  hc_tier_close (slow);
  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_tier_write (slow, old, sizeof old, 0, 0);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  hc_volume_advise_from (v, 1 << 20, 64 << 10, (struct hc_hint) { .cls = HC_CLASS_METADATA },
                         HC_SOURCE_HINTD);
  for (unsigned i = 0; i < 4; i++) { /* several commits */
    CHECK (hc_volume_write (v, data + i * (NB / 4) * BS, NB / 4 * BS, i * (NB / 4) * BS, 0, NULL) == 0,
           "write");
    CHECK (hc_volume_flush (v) == 0, "flush");
  }
  struct hc_super sb = v->sb;
  if (crash) {
    uint8_t *img = malloc (FAST);
    hc_tier_read (fast, img, FAST, 0);
    hc_volume_close (v);
    hc_tier_write (fast, img, FAST, 0, 0);
    free (img);
  } else {
    CHECK (hc_volume_close (v) == 0, "close");
    hc_volume *w;
    CHECK (hc_volume_open (fast, slow, &oo, &w, why, sizeof why) == 0, "reopen: %s", why);
    sb = w->sb;
    hc_volume_close (w);
  }
  return sb;
}

/* After a repair: the volume opens, checks clean, reads each block as its
 * data or, if it is reported lost, as its data or the old; at most
 * `unnamed` blocks lost without being named (the records of a damaged
 * journal sector); the range hint is there if `hint`. */
static void
verify_after (const struct hc_repair_report *r, const char *what, unsigned unnamed, bool hint)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  hc_volume *v;

  CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0 && !why[0], "%s: checks clean: %s",
         what, why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "%s: opens: %s", what, why);
  if (!v)
    return;
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0, "%s: read", what);
  unsigned wrong = 0, silent = 0;
  for (unsigned b = 0; b < NB; b++) {
    bool lost = false;
    for (uint64_t i = 0; i < r->nlost && i < HC_REPAIR_LOST_MAX; i++)
      lost |= r->lost[i] == b;
    bool is_data = memcmp (got + b * BS, data + b * BS, BS) == 0;
    bool is_old = memcmp (got + b * BS, old + b * BS, BS) == 0;
    wrong += !is_data && !is_old;
    silent += is_old && !lost;
  }
  CHECK (wrong == 0, "%s: %u blocks read neither their data nor the old", what, wrong);
  CHECK (silent <= unnamed, "%s: %u blocks lost without being named (at most %u)", what, silent,
         unnamed);
  CHECK (!hint || hc_volume_range_hint (v, 1 << 20).cls == HC_CLASS_METADATA,
         "%s: the range hint is kept", what);
  hc_volume_close (v);
}

int
main (void)
{
  struct hc_repair_report r;
  char why[256];

  for (size_t i = 0; i < sizeof data; i++) {
    data[i] = (uint8_t) (i * 13 + (i >> 12));
    old[i] = (uint8_t) (i * 5 + 1);
  }
  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);

  /* Healthy: nothing to do, nothing written. */
  make (false, false);
  uint64_t hf = tier_hash (fast, FAST), hs = tier_hash (slow, SLOW);
  CHECK (hc_volume_repair (fast, slow, &r, why, sizeof why) == 0 && !r.repaired,
         "healthy: %s", why);
  CHECK (tier_hash (fast, FAST) == hf && tier_hash (slow, SLOW) == hs, "healthy: nothing written");

  /* A superblock copy: a read-write open repairs it. */
  flip (100);
  CHECK (hc_volume_repair (fast, slow, &r, why, sizeof why) == 0 && r.repaired && !r.rebuilt,
         "superblock A: %s", why);
  CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0 && !why[0], "then clean: %s", why);

  /* A table sector of the current copy. */
  for (int sums = 0; sums < 2; sums++) {
    struct hc_super sb = make (sums, false);
    flip (hc_sb_copy_off (&sb, sb.table_off, sb.copy) + 40); /* sector 0: cache blocks 0–62 */
    CHECK (hc_volume_check (fast, slow, why, sizeof why) == -EUCLEAN, "table: check fails");
    int rc = hc_volume_repair (fast, slow, &r, why, sizeof why);
    CHECK (rc == 0 && r.rebuilt && r.table_sectors_damaged == 1, "table: repaired: %d %s", rc, why);
    CHECK (r.nlost == 63 && r.written_back == NB - 63 && r.range_hints_kept == 1,
           "table: 63 lost (named by the other copy), %u written back: %llu lost, %llu back",
           NB - 63, (unsigned long long) r.nlost, (unsigned long long) r.written_back);
    verify_after (&r, sums ? "table (checksums)" : "table", 0, true);
  }

  /* The journal: damage in the first sector of its second commit (the
   * first holds the range hint and the first quarter of the blocks). */
  {
    struct hc_super sb = make (false, true);
    uint64_t pos = sb.replay_pos, firsts = 0;
    uint8_t s[HC_SECTOR_SIZE];
    for (;; pos = (pos + 1) % sb.journal_sectors) {
      hc_tier_read (fast, s, sizeof s, sb.journal_off + pos * HC_SECTOR_SIZE);
      if ((s[13] & HC_JFLAG_FIRST) && ++firsts == 2)
        break;
    }
    flip (sb.journal_off + pos * HC_SECTOR_SIZE + 100);
    CHECK (hc_volume_check (fast, slow, why, sizeof why) == -EUCLEAN, "journal: check fails");
    int rc = hc_volume_repair (fast, slow, &r, why, sizeof why);
    CHECK (rc == 0 && r.rebuilt && r.journal_cut, "journal: repaired: %d %s", rc, why);
    CHECK (r.written_back >= NB / 4 && r.nlost >= NB / 2 - HC_FMT_JREC_PER_SECTOR,
           "journal: the first commit salvaged (%llu), the blocks the later ones wrote named "
           "(%llu)", (unsigned long long) r.written_back, (unsigned long long) r.nlost);
    verify_after (&r, "journal", HC_FMT_JREC_PER_SECTOR, true);
  }

  /* Checksums: a damaged dirty block is not written back. */
  {
    struct hc_super sb = make (true, false);
    struct hc_open_opts oo = { .read_only = true, .no_cleaner = true };
    hc_volume *v;
    hc_volume_open (fast, slow, &oo, &v, why, sizeof why);
    uint32_t c = hc_dir_find (&v->dir, 150);
    hc_volume_close (v);
    flip (sb.data_off + (uint64_t) c * BS + 9);
    flip (hc_sb_copy_off (&sb, sb.table_off, sb.copy) + 40);
    int rc = hc_volume_repair (fast, slow, &r, why, sizeof why);
    bool listed = false;
    for (uint64_t i = 0; i < r.nlost && i < HC_REPAIR_LOST_MAX; i++)
      listed |= r.lost[i] == 150;
    CHECK (rc == 0 && listed && (c < 63 || r.unreadable == 1),
           "checksums: block 150 (cache block %u) failing its checksum is reported (%d, %llu)", c,
           rc, (unsigned long long) r.unreadable);
    hc_tier_read (slow, got, BS, 150 * BS);
    CHECK (c < 63 || memcmp (got, old + 150 * BS, BS) == 0,
           "checksums: its old data stays on the slow tier");
  }

  /* Another slow tier: refused, nothing written. */
  {
    struct hc_super sb = make (false, false);
    flip (hc_sb_copy_off (&sb, sb.table_off, sb.copy) + 40);
    hc_tier *other;
    hc_tier_new_memory (SLOW, &other);
    hf = tier_hash (fast, FAST);
    hs = tier_hash (other, SLOW);
    CHECK (hc_volume_repair (fast, other, &r, why, sizeof why) == -ENODEV, "another slow tier: %s",
           why);
    CHECK (tier_hash (fast, FAST) == hf && tier_hash (other, SLOW) == hs, "nothing written");
    hc_tier_close (other);
  }
  hc_tier_close (fast);
  hc_tier_close (slow);
  return test_exit ("test_repair");
}
