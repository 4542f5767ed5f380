/* Data checksums (hc_format_opts.checksums): silent corruption of the fast
 * tier is detected, never served.
 *
 * The fast tier is changed behind the volume's back, as a device that
 * flips bits, loses a write or puts it at the wrong place would:
 *   - a flipped byte in a clean block: the read returns the slow tier's
 *     data, counts a checksum error, and the copy is dropped (the next
 *     read fills it again, correctly);
 *   - the same in a dirty block: the read fails with EIO (counted), and
 *     write-back leaves the slow tier alone rather than spread it;
 *   - a lost write (the block keeps what an earlier occupant left) and a
 *     misdirected one (another block's data lands there): detected alike;
 *   - the checksums come back from a clean close (the checkpoint) and from
 *     a crash (the journal), and detect the same damage afterwards;
 *   - partial reads of a damaged block detect it too.
 * Without checksums the same flip is served: the check the option adds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/vol.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define BS 4096u
#define FAST (4u << 20)
#define SLOW (8u << 20)

static hc_tier *fast, *slow;

static void
pattern (uint8_t *p, size_t n, unsigned seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t) (seed * 131 + i * 7 + (i >> 9));
}

/* The fast-tier offset of the cache block holding volume block b (or 0). */
static uint64_t
where (hc_volume *v, uint64_t b)
{
  hc_lock (&v->lock);
  uint32_t c = hc_dir_find (&v->dir, b);
  pthread_mutex_unlock (&v->lock);
  return c == HC_NIL ? 0 : v->sb.data_off + (uint64_t) c * BS;
}

static void
flip_at (uint64_t off)
{
  uint8_t s[HC_SECTOR_SIZE];
  hc_tier_read (fast, s, sizeof s, off / HC_SECTOR_SIZE * HC_SECTOR_SIZE);
  s[off % HC_SECTOR_SIZE] ^= 0x04;
  hc_tier_write (fast, s, sizeof s, off / HC_SECTOR_SIZE * HC_SECTOR_SIZE, 0);
}

static uint64_t
sum_errors (hc_volume *v)
{
  struct hc_stats st;
  hc_volume_stats (v, &st);
  return st.errors_checksum;
}

static hc_volume *
open_vol (void)
{
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[200];
  hc_volume *v = NULL;
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  return v;
}

/* Blocks 0–15: written (dirty, write-back); blocks 100–115: the slow
 * tier's, read into the cache (clean). */
static void
populate (hc_volume *v, uint8_t *written, uint8_t *onslow)
{
  static uint8_t got[16 * BS];
  CHECK (hc_volume_write (v, written, 16 * BS, 0, 0, NULL) == 0, "write");
  CHECK (hc_volume_read (v, got, 16 * BS, 100 * BS, NULL) == 0
         && memcmp (got, onslow, 16 * BS) == 0, "fill");
  CHECK (hc_volume_flush (v) == 0, "flush");
}

/* The damage cases on an open volume with blocks populated; `sums` says
 * whether it has checksums. */
static void
damage (hc_volume *v, const uint8_t *written, const uint8_t *onslow, bool sums, const char *when)
{
  static uint8_t got[16 * BS];
  uint64_t e0 = sum_errors (v);

  /* A flipped byte in clean block 103. */
  uint64_t at = where (v, 103);
  CHECK (at != 0, "%s: block 103 cached", when);
  flip_at (at + 1000);
  int rc = hc_volume_read (v, got, BS, 103 * BS, NULL);
  if (!sums) {
    CHECK (rc == 0 && memcmp (got, onslow + 3 * BS, BS) != 0,
           "%s: without checksums the flip is served", when);
    return;
  }
  CHECK (rc == 0 && memcmp (got, onslow + 3 * BS, BS) == 0,
         "%s: a corrupt clean block reads from the slow tier (%d)", when, rc);
  CHECK (sum_errors (v) == e0 + 1, "%s: counted: %llu", when, (unsigned long long) sum_errors (v));
  CHECK (where (v, 103) == 0, "%s: the corrupt copy is dropped", when);
  CHECK (hc_volume_read (v, got, BS, 103 * BS, NULL) == 0 && where (v, 103) != 0
         && memcmp (got, onslow + 3 * BS, BS) == 0, "%s: filled again", when);
  CHECK (hc_volume_read (v, got, BS, 103 * BS, NULL) == 0
         && memcmp (got, onslow + 3 * BS, BS) == 0 && sum_errors (v) == e0 + 1,
         "%s: and it verifies", when);

  /* A partial read (one sector) of a damaged clean block. */
  flip_at (where (v, 104) + 3000);
  CHECK (hc_volume_read (v, got, 512, 104 * BS + 512, NULL) == 0
         && memcmp (got, onslow + 4 * BS + 512, 512) == 0 && sum_errors (v) == e0 + 2,
         "%s: a partial read detects it", when);

  /* A multi-block read over a damaged clean block (the run path). */
  flip_at (where (v, 106) + 5);
  CHECK (hc_volume_read (v, got, 8 * BS, 100 * BS, NULL) == 0
         && memcmp (got, onslow, 8 * BS) == 0 && sum_errors (v) == e0 + 3,
         "%s: a run with a damaged block reads correctly (errors %llu)", when,
         (unsigned long long) sum_errors (v) - e0);

  /* A flipped byte in dirty block 2: EIO, and write-back does not spread it. */
  flip_at (where (v, 2) + 77);
  CHECK (hc_volume_read (v, got, BS, 2 * BS, NULL) == -EIO, "%s: a corrupt dirty block is EIO",
         when);
  CHECK (hc_volume_read (v, got, 16 * BS, 0, NULL) == -EIO, "%s: also within a run", when);
  uint8_t before[BS], after[BS];
  hc_tier_read (slow, before, BS, 2 * BS);
  CHECK (hc_volume_clean (v) < 0, "%s: clean reports the block it cannot write back", when);
  hc_tier_read (slow, after, BS, 2 * BS);
  CHECK (memcmp (before, after, BS) == 0, "%s: the slow tier keeps its old data", when);
  CHECK (hc_volume_read (v, got, BS, 5 * BS, NULL) == 0 && memcmp (got, written + 5 * BS, BS) == 0,
         "%s: the other dirty blocks are fine", when);
  /* Rewritten whole, the block is good again. */
  CHECK (hc_volume_write (v, written + 2 * BS, BS, 2 * BS, 0, NULL) == 0
         && hc_volume_read (v, got, BS, 2 * BS, NULL) == 0 && memcmp (got, written + 2 * BS, BS) == 0,
         "%s: a rewrite heals it", when);

  /* A lost write: block 7's copy keeps what it held before (an older
   * version of block 7).  A misdirected write: block 9's data lands in
   * block 8's place. */
  uint8_t old[BS];
  hc_tier_read (fast, old, BS, where (v, 7));
  uint8_t newer[BS];
  pattern (newer, BS, 77);
  CHECK (hc_volume_write (v, newer, BS, 7 * BS, 0, NULL) == 0, "rewrite 7");
  hc_tier_write (fast, old, BS, where (v, 7), 0);
  CHECK (hc_volume_read (v, got, BS, 7 * BS, NULL) == -EIO, "%s: a lost write is caught", when);
  uint8_t nine[BS];
  hc_tier_read (fast, nine, BS, where (v, 9));
  hc_tier_write (fast, nine, BS, where (v, 8), 0);
  CHECK (hc_volume_read (v, got, BS, 8 * BS, NULL) == -EIO, "%s: a misdirected write is caught",
         when);
  CHECK (hc_volume_read (v, got, BS, 9 * BS, NULL) == 0 && memcmp (got, written + 9 * BS, BS) == 0,
         "%s: the block it came from is fine", when);
}

static void
run (bool sums)
{
  static uint8_t written[16 * BS], onslow[16 * BS], img[FAST];
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .checksums = sums };
  char why[200];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  pattern (written, sizeof written, 1);
  pattern (onslow, sizeof onslow, 2);
  hc_tier_write (slow, onslow, sizeof onslow, 100 * BS, 0);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);

  hc_volume *v = open_vol ();
  struct hc_volume_info in;
  hc_volume_get_info (v, &in);
  CHECK (in.checksums == sums, "info says checksums %d", in.checksums);
  populate (v, written, onslow);
  damage (v, written, onslow, sums, sums ? "live" : "no checksums");
  hc_volume_close (v);
  if (!sums)
    goto out;

  /* From the checkpoint: a clean close, then the same damage. */
  hc_tier_close (fast);
  hc_tier_new_memory (FAST, &fast);
  hc_tier_write (slow, onslow, sizeof onslow, 100 * BS, 0);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  v = open_vol ();
  populate (v, written, onslow);
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol ();
  damage (v, written, onslow, true, "after a clean close");
  hc_volume_close (v);

  /* From the journal: the image a crash leaves after the flush. */
  hc_tier_close (fast);
  hc_tier_new_memory (FAST, &fast);
  hc_tier_write (slow, onslow, sizeof onslow, 100 * BS, 0);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  v = open_vol ();
  populate (v, written, onslow);
  hc_tier_read (fast, img, FAST, 0);
  hc_volume_close (v);
  hc_tier_write (fast, img, FAST, 0, 0);
  v = open_vol ();
  hc_volume_get_info (v, &in);
  CHECK (!in.was_clean && in.replayed > 0, "recovered from the journal");
  damage (v, written, onslow, true, "after a crash");
  hc_volume_close (v);
out:
  hc_tier_close (fast);
  hc_tier_close (slow);
}

int
main (void)
{
  run (true);
  run (false);
  return test_exit ("test_checksums");
}
