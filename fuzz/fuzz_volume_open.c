/* Fuzzes opening a corrupted fast tier: hc_volume_check and hc_volume_open
 * on a valid volume image with patches applied, so the fuzzer mutates a
 * real image rather than noise.
 *
 * LLVMFuzzerInitialize formats a small volume on memory tiers (a 384 KiB
 * fast tier: superblocks, table, range hints, statistics, a 256 KiB
 * journal and 27 cache blocks; a 512 KiB slow tier), writes blocks in
 * write-back mode, stores range hints, closes, reopens and writes more, and
 * snapshots the fast tier twice: after a flush while still open (a crash
 * image, whose journal has commits to replay) and after the close (a clean
 * image).  The volume is formatted with S3-FIFO, not the default: on a
 * cache this small the default's miniature simulations see every access
 * and took 43 % of each run, none of it reading what the fuzzer wrote; a
 * patch to the superblock's policy field (resealed) still reaches it.
 *
 * Input: a flags byte — bit 0 picks the image, bit 1 reseals, that is
 * recomputes the checksum of every sector a patch touched (superblocks,
 * table, range-hint, statistics and journal sectors, each as the format
 * places its checksum; the geometry is the snapshot's), so that patches
 * also reach what lies behind the checksums — then patches, each a 32-bit
 * offset (modulo the image size), a length byte (0 … 63) and that many
 * bytes.
 *
 * Each run puts the patched image on the fast tier and the snapshot on the
 * slow tier, then, beyond not crashing, hanging or leaking:
 *   - hc_volume_check and hc_volume_open each succeed or fail with a
 *     negative errno and a reason, and agree (the check is the open's
 *     load, read-only);
 *   - the check, and an open that fails, leave the fast tier as it was;
 *   - after an open that fails, hc_volume_repair either says why it
 *     cannot, or leaves a volume that passes hc_volume_check;
 *   - an open that succeeds serves a read of every block of the volume,
 *     in requests of READ_RUN blocks and block by block where one fails
 *     (the reads may fail, but only with an errno), closes, and what it
 *     leaves behind passes hc_volume_check.
 *
 * The tiers are memory tiers of this file's own that note every sector
 * written to them (written, discarded or zeroed): putting the images back
 * copies only the sectors the last run wrote or either run patched, and
 * the fast tier is as it was exactly when every sector written since holds
 * what it held (no other can have changed).  Only copying is saved: every
 * run checks, opens, reads and repairs as before.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "engine/vol.h"
#include "fuzz.h"
#include "hintcache/volume.h"
#include "tier/tier.h"

#define FAST (384u << 10)
#define SLOW (512u << 10)
#define SECTORS (FAST / HC_FMT_SECTOR)
#define MAX_PATCHES 64
#define READ_RUN 8 /* blocks per read of the opened volume */

/* A memory tier that notes the sectors written to it since track_reset. */
struct track_tier {
  hc_tier base;
  uint8_t *data;
  uint8_t *written; /* a bit per sector */
};

static struct track_tier *fast, *slow;
static uint8_t *image[2], *slow_image, *work;
static unsigned work_image;            /* the image work was made from */
static uint8_t patched[SECTORS / 8];   /* the sectors this run's patches touched */
static uint8_t unpatch[SECTORS / 8];   /* … the last run's */
static uint8_t images_differ[SECTORS / 8];
static struct hc_super geo; /* the snapshot's geometry */
static uint64_t seed;       /* its checksum seed */
static uint8_t *block;

static bool
bit (const uint8_t *map, uint64_t s)
{
  return (map[s / 8] >> (s % 8)) & 1;
}

static void
track_mark (struct track_tier *t, uint64_t off, uint64_t len)
{
  for (uint64_t s = off / HC_FMT_SECTOR; s < (off + len) / HC_FMT_SECTOR; s++)
    t->written[s / 8] |= (uint8_t) (1u << (s % 8));
}

static int
track_read (hc_tier *h, void *buf, size_t len, uint64_t off)
{
  memcpy (buf, ((struct track_tier *) h)->data + off, len);
  return 0;
}

static int
track_write (hc_tier *h, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  struct track_tier *t = (struct track_tier *) h;

  (void) flags;
  memcpy (t->data + off, buf, len);
  track_mark (t, off, len);
  return 0;
}

static int
track_flush (hc_tier *h)
{
  (void) h;
  return 0;
}

/* Discard and zero: both read back as zeros. */
static int
track_clear (hc_tier *h, uint64_t off, uint64_t len)
{
  struct track_tier *t = (struct track_tier *) h;

  memset (t->data + off, 0, (size_t) len);
  track_mark (t, off, len);
  return 0;
}

static void
track_close (hc_tier *h)
{
  struct track_tier *t = (struct track_tier *) h;

  free (t->data);
  free (t->written);
  free (t);
}

static const struct hc_tier_ops track_ops = {
  .kind = "memory",
  .read = track_read,
  .write = track_write,
  .flush = track_flush,
  .discard = track_clear,
  .zero = track_clear,
  .close = track_close,
};

/* A zeroed tracking tier of `size` bytes. */
static struct track_tier *
track_new (size_t size)
{
  struct track_tier *t = calloc (1, sizeof *t);

  FUZZ_CHECK (t && (t->data = calloc (1, size))
                  && (t->written = calloc (size / HC_FMT_SECTOR / 8 + 1, 1)),
              "out of memory");
  hc_tier_init (&t->base, &track_ops, size, HC_CAP_DISCARD, "memory");
  return t;
}

/* Forgets what was written. */
static void
track_reset (struct track_tier *t)
{
  memset (t->written, 0, t->base.size / HC_FMT_SECTOR / 8 + 1);
}

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Writes blocks [first, first + n) with a pattern of their number. */
static void
write_blocks (hc_volume *v, uint64_t first, unsigned n)
{
  for (uint64_t b = first; b < first + n; b++) {
    for (unsigned i = 0; i < 4096; i++)
      block[i] = (uint8_t) (b * 31 + i);
    FUZZ_CHECK (hc_volume_write (v, block, 4096, b << 12, 0, NULL) == 0, "write");
  }
}

static void
snapshot (struct track_tier *t, uint8_t *buf, size_t len)
{
  FUZZ_CHECK (hc_tier_read (&t->base, buf, len, 0) == 0, "snapshot");
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK, .policy = "s3fifo", .max_ranges = 62 };
  struct hc_open_opts oo = { .no_cleaner = true };
  char why[256] = "";
  hc_volume *v;

  (void) argc, (void) argv;
  for (unsigned i = 0; i < 2; i++)
    FUZZ_CHECK ((image[i] = malloc (FAST)), "out of memory");
  FUZZ_CHECK ((slow_image = malloc (SLOW)) && (work = malloc (FAST)) && (block = malloc (4096)),
              "out of memory");
  fast = track_new (FAST);
  slow = track_new (SLOW);
  FUZZ_CHECK (hc_volume_format (&fast->base, &slow->base, &fo, why, sizeof why) == 0, "format: %s",
              why);
  FUZZ_CHECK (hc_volume_open (&fast->base, &slow->base, &oo, &v, why, sizeof why) == 0, "open: %s",
              why);
  write_blocks (v, 0, 8);
  for (unsigned k = 0; k < 4; k++)
    FUZZ_CHECK (hc_volume_advise (v, (uint64_t) k * 65536, 8192,
                                  (struct hc_hint) { .cls = 1 + k, .advice = k ? 0 : 2 })
                    == 0,
                "advise");
  FUZZ_CHECK (hc_volume_close (v) == 0, "close");
  FUZZ_CHECK (hc_volume_open (&fast->base, &slow->base, &oo, &v, why, sizeof why) == 0,
              "reopen: %s", why);
  write_blocks (v, 40, 6);
  FUZZ_CHECK (hc_volume_advise (v, 200 << 10, 4096, (struct hc_hint) { .cls = 6 }) == 0, "advise");
  FUZZ_CHECK (hc_volume_flush (v) == 0, "flush");
  snapshot (fast, image[1], FAST);
  FUZZ_CHECK (hc_volume_close (v) == 0, "close");
  snapshot (fast, image[0], FAST);
  snapshot (slow, slow_image, SLOW);
  FUZZ_CHECK (hc_sb_decode (image[0], &geo) == 0, "the snapshot's superblock");
  seed = hc_get64 (geo.cache_uuid) ^ hc_get64 (geo.cache_uuid + 8);
  FUZZ_CHECK (geo.fast_size <= FAST && geo.nblocks >= 16, "geometry: %llu bytes, %u blocks",
              (unsigned long long) geo.fast_size, geo.nblocks);
  /* The tiers start as the first run expects them (the clean image): from
   * now on a run puts back only what changed. */
  for (uint64_t s = 0; s < SECTORS; s++)
    if (memcmp (image[0] + s * HC_FMT_SECTOR, image[1] + s * HC_FMT_SECTOR, HC_FMT_SECTOR))
      images_differ[s / 8] |= (uint8_t) (1u << (s % 8));
  memcpy (work, image[0], FAST);
  memcpy (fast->data, image[0], FAST);
  work_image = 0;
  track_reset (fast);
  track_reset (slow);
  return 0;
}

/* True if sector s lies in the region of `count` sectors at byte `off`. */
static bool
in_region (uint64_t s, uint64_t off, uint64_t count)
{
  return s >= off / HC_FMT_SECTOR && s < off / HC_FMT_SECTOR + count;
}

/* Recomputes the checksum of sector s of the work image, as the format
 * places it there; sectors of data or padding have none. */
static void
reseal (uint64_t s)
{
  uint8_t *p = work + s * HC_FMT_SECTOR;

  if (s == 0 || s == HC_FMT_SB_SLOT / HC_FMT_SECTOR)
    hc_put64 (p + SB_CSUM, XXH3_64bits (p, SB_CSUM));
  else if (in_region (s, geo.table_off, geo.table_sectors)
           || in_region (s, geo.range_off, geo.range_sectors)
           || in_region (s, geo.stats_off, HC_FMT_STATS_SECTORS))
    hc_put32 (p, hc_meta_csum (p, 0, seed, s));
  else if (in_region (s, geo.journal_off, geo.journal_sectors))
    hc_put32 (p + 8, hc_meta_csum (p, 8, seed, s));
}

/* Reads n blocks of the volume from block b in one request (the path of
 * multi-block hits and misses): it may fail, but only with an errno, and
 * then each block is read alone, with the same contract. */
static void
read_blocks (hc_volume *v, uint8_t *buf, uint64_t b, uint64_t n)
{
  uint32_t bs = hc_volume_block_size (v);
  int r = hc_volume_read (v, buf, n * bs, b * bs, NULL);

  FUZZ_CHECK (r == 0 || (r < 0 && r > -4096), "read of blocks %llu+%llu: %d",
              (unsigned long long) b, (unsigned long long) n, r);
  if (r < 0 && n > 1)
    for (uint64_t i = 0; i < n; i++)
      read_blocks (v, buf, b + i, 1);
}

/* The fast tier equals the work image: every sector written since the
 * tiers were put back holds what work holds (no other can differ). */
static bool
fast_unchanged (void)
{
  for (uint64_t s = 0; s < SECTORS; s++)
    if (bit (fast->written, s)
        && memcmp (fast->data + s * HC_FMT_SECTOR, work + s * HC_FMT_SECTOR, HC_FMT_SECTOR))
      return false;
  return true;
}

/* Makes work image k with this run's patches (`patched` says where) from
 * what it was (image work_image with the last run's, `unpatch`), sector by
 * sector: a sector either patch touched, or that differs between the
 * images if k is the other one, comes from image k. */
static void
work_from (unsigned k)
{
  for (uint64_t s = 0; s < SECTORS; s++)
    if (bit (unpatch, s) || (k != work_image && bit (images_differ, s)))
      memcpy (work + s * HC_FMT_SECTOR, image[k] + s * HC_FMT_SECTOR, HC_FMT_SECTOR);
  work_image = k;
}

/* Puts work on the fast tier and the snapshot on the slow one: the
 * sectors the last run wrote there, and on the fast tier those where work
 * changed (either run's patches, or all the sectors where the images
 * differ if it changed images, as `switched` says). */
static void
put_back (bool switched)
{
  for (uint64_t s = 0; s < SECTORS; s++)
    if (bit (fast->written, s) || bit (unpatch, s) || bit (patched, s)
        || (switched && bit (images_differ, s)))
      memcpy (fast->data + s * HC_FMT_SECTOR, work + s * HC_FMT_SECTOR, HC_FMT_SECTOR);
  for (uint64_t s = 0; s < SLOW / HC_FMT_SECTOR; s++)
    if (bit (slow->written, s))
      memcpy (slow->data + s * HC_FMT_SECTOR, slow_image + s * HC_FMT_SECTOR, HC_FMT_SECTOR);
  track_reset (fast);
  track_reset (slow);
  memcpy (unpatch, patched, sizeof unpatch);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_in in = { data, size };
  struct hc_open_opts oo = { .no_cleaner = true };
  unsigned flags = (unsigned) fuzz_take (&in, 1);
  bool switched = (flags & 1) != work_image;
  char why[256] = "", why2[256] = "";
  hc_tier *fast_t = &fast->base, *slow_t = &slow->base;
  hc_volume *v = NULL;

  work_from (flags & 1);
  memset (patched, 0, sizeof patched);
  for (unsigned k = 0; k < MAX_PATCHES && in.n >= 5; k++) {
    uint64_t off = fuzz_take (&in, 4) % FAST;
    size_t len = (size_t) fuzz_take (&in, 1) % 64;
    for (size_t i = 0; i < len && in.n && off + i < FAST; i++) {
      work[off + i] = (uint8_t) fuzz_take (&in, 1);
      patched[(off + i) / HC_FMT_SECTOR / 8] |= 1u << ((off + i) / HC_FMT_SECTOR % 8);
    }
  }
  if (flags & 2)
    for (uint64_t s = 0; s < SECTORS; s++)
      if (bit (patched, s))
        reseal (s);
  put_back (switched);

  int rc = hc_volume_check (fast_t, slow_t, why, sizeof why);
  FUZZ_CHECK (rc == 0 || (rc < 0 && rc > -4096 && why[0]), "check: rc %d, '%s'", rc, why);
  FUZZ_CHECK (fast_unchanged (), "the check changed the fast tier (rc %d, '%s')", rc, why);

  int rc2 = hc_volume_open (fast_t, slow_t, &oo, &v, why2, sizeof why2);
  FUZZ_CHECK (rc2 == 0 ? v != NULL : (rc2 > -4096 && why2[0]), "open: rc %d, '%s'", rc2, why2);
  FUZZ_CHECK ((rc == 0) == (rc2 == 0), "check says %d '%s', open says %d '%s'", rc, why, rc2,
              why2);
  if (rc2 < 0) {
    FUZZ_CHECK (fast_unchanged (), "a failed open changed the fast tier ('%s')", why2);
    /* Whatever repair makes of it opens and checks clean, or it says why
     * it cannot. */
    struct hc_repair_report rep;
    int rr = hc_volume_repair (fast_t, slow_t, &rep, why, sizeof why);
    FUZZ_CHECK (rr == 0 || (rr < 0 && rr > -4096 && why[0]), "repair: %d '%s'", rr, why);
    if (rr == 0) {
      rc = hc_volume_check (fast_t, slow_t, why, sizeof why);
      FUZZ_CHECK (rc == 0 && rep.repaired, "after a repair (%d) the check says %d '%s'",
                  rep.repaired, rc, why);
    }
    return 0;
  }
  /* Every block of the volume: the open checked that it is the slow
   * tier's size. */
  uint32_t bs = hc_volume_block_size (v);
  uint64_t nblocks = hc_volume_size (v) / bs;
  FUZZ_CHECK (hc_volume_size (v) <= SLOW, "a %llu-byte volume opened on a %u-byte slow tier",
              (unsigned long long) hc_volume_size (v), (unsigned) SLOW);
  uint8_t *buf = malloc ((size_t) READ_RUN * bs);
  FUZZ_CHECK (buf != NULL, "out of memory");
  for (uint64_t b = 0; b < nblocks; b += READ_RUN)
    read_blocks (v, buf, b, nblocks - b < READ_RUN ? nblocks - b : READ_RUN);
  free (buf);
  rc = hc_volume_close (v);
  FUZZ_CHECK (rc <= 0 && rc > -4096, "close: %d", rc);
  rc = hc_volume_check (fast_t, slow_t, why, sizeof why);
  FUZZ_CHECK (rc == 0, "what open and close left fails the check: %d '%s'", rc, why);
  return 0;
}
