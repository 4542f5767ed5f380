/* The volume end to end on memory tiers: every mode reads back what was
 * written (aligned and not), data survives close and reopen, a wrong slow
 * tier or a truncated fast tier is refused, range hints persist, mode
 * switches clean, discard and zero, admission and statistics follow hints,
 * fast-tier read errors are survived, write-through copies are recorded
 * dirty until settled, concurrent writers and readers
 * agree with a model, the cleaner paces its write-back while the volume
 * is busy, and flushes the slow tier for its write-back itself (a client's
 * flush meanwhile never does). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine/vol.h"
#include "hook.h"
#include "hintcache/hintcache.h"
#include "test.h"

#define BS 4096
#define SLOW (8u << 20)
#define FAST (4u << 20)

static uint64_t rng = 12345;
static uint64_t
next_rand (void)
{
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static uint8_t model[SLOW];

static void
fill (uint8_t *p, size_t n, uint64_t seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (uint8_t) ((seed * 2654435761u + i * 40503u) >> 7);
}

static hc_volume *
open_vol (hc_tier *fast, hc_tier *slow, bool cleaner)
{
  struct hc_open_opts o = { .no_cleaner = !cleaner };
  hc_volume *v = NULL;
  char why[200];
  int rc = hc_volume_open (fast, slow, &o, &v, why, sizeof why);
  CHECK (rc == 0, "open: %s", why);
  return v;
}

/* Random writes and reads of random sizes and alignments against the
 * model, with context ctx (may be NULL). */
static void
exercise_with (hc_volume *v, unsigned ops, uint64_t span, const struct hc_ioctx *ctx)
{
  static uint8_t buf[64 * 1024], got[64 * 1024];
  for (unsigned i = 0; i < ops; i++) {
    uint64_t len = 1 + next_rand () % (next_rand () % 2 ? 512 : sizeof buf);
    uint64_t off = next_rand () % (span - len);
    if (next_rand () % 2) {
      fill (buf, len, next_rand ());
      CHECK (hc_volume_write (v, buf, len, off, next_rand () % 8 == 0 ? HC_VOL_FUA : 0, ctx) == 0,
             "write %llu+%llu", (unsigned long long) off, (unsigned long long) len);
      memcpy (model + off, buf, len);
    } else {
      CHECK (hc_volume_read (v, got, len, off, ctx) == 0, "read");
      CHECK (memcmp (got, model + off, len) == 0, "read %llu+%llu matches the model",
             (unsigned long long) off, (unsigned long long) len);
    }
    if (next_rand () % 64 == 0)
      CHECK (hc_volume_flush (v) == 0, "flush");
  }
}

/* Random writes and reads of random sizes and alignments against the model. */
static void
exercise (hc_volume *v, unsigned ops, uint64_t span)
{
  exercise_with (v, ops, span, NULL);
}

static void
verify_all (hc_volume *v, uint64_t span, const char *what)
{
  static uint8_t got[SLOW];
  CHECK (hc_volume_read (v, got, span, 0, NULL) == 0, "%s: read all", what);
  size_t bad = 0;
  while (bad < span && got[bad] == model[bad])
    bad++;
  CHECK (bad == span, "%s: first difference at byte %zu", what, bad);
}

/* Dirty blocks of every class. */
static uint64_t
dirty_blocks (hc_volume *v)
{
  struct hc_stats st;
  uint64_t n = 0;
  hc_volume_stats (v, &st);
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    n += st.cls[c].dirty;
  return n;
}

static void
test_modes (void)
{
  for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++)
    for (unsigned pol = 0; hc_policy_name (pol); pol++) {
      hc_tier *fast, *slow;
      struct hc_format_opts fo = { .mode = mode, .policy = hc_policy_name (pol) };
      char why[200];
      hc_tier_new_memory (FAST, &fast);
      hc_tier_new_memory (SLOW, &slow);
      CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
      hc_volume *v = open_vol (fast, slow, pol == 0);
      uint64_t span = hc_volume_size (v);
      CHECK (span == SLOW, "volume size %llu", (unsigned long long) span);
      memset (model, 0, sizeof model);
      exercise (v, 1500, span);
      verify_all (v, span, "before close");
      struct hc_stats st;
      hc_volume_stats (v, &st);
      uint64_t hits = 0;
      for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
        hits += st.cls[c].hits[0] + st.cls[c].hits[1];
      if (mode != HC_MODE_PASSTHROUGH)
        CHECK (hits > 0, "%s/%s: some hits", hc_mode_name (mode), hc_policy_name (pol));
      else
        CHECK (hits == 0, "pass-through never hits");
      CHECK (hc_volume_close (v) == 0, "close");
      v = open_vol (fast, slow, false);
      verify_all (v, span, "after reopen");
      if (mode == HC_MODE_WRITEBACK) {
        /* The slow tier alone is stale until cleaned; then it is the truth. */
        CHECK (hc_volume_clean (v) == 0, "clean");
        static uint8_t raw[SLOW];
        hc_tier_read (slow, raw, span, 0);
        CHECK (memcmp (raw, model, span) == 0, "after clean, the slow tier holds everything");
      }
      hc_volume_close (v);
      hc_tier_close (fast);
      hc_tier_close (slow);
    }
}

static void
test_refusals (void)
{
  hc_tier *fast, *slow, *other, *small;
  char why[200];
  hc_volume *v;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_tier_new_memory (SLOW, &other);
  /* Two disks of one size with different contents (a slow tier's data is
   * what tells it from another: nothing is written on it). */
  static uint8_t disk[SLOW];
  fill (disk, SLOW, 1);
  hc_tier_write (slow, disk, SLOW, 0, 0);
  fill (disk, SLOW, 2);
  hc_tier_write (other, disk, SLOW, 0, 0);
  CHECK (hc_volume_open (fast, slow, NULL, &v, why, sizeof why) == -EINVAL
         && strstr (why, "not formatted"), "unformatted: %s", why);
  CHECK (hc_volume_format (fast, slow, NULL, why, sizeof why) == 0, "format");
  CHECK (hc_volume_open (fast, other, NULL, &v, why, sizeof why) == -ENODEV
         && strstr (why, "differ"), "other slow tier: %s", why);
  /* Another volume's slow tier. */
  hc_tier *fast2;
  hc_tier_new_memory (FAST, &fast2);
  CHECK (hc_volume_format (fast2, other, NULL, why, sizeof why) == 0, "format 2");
  CHECK (hc_volume_open (fast, other, NULL, &v, why, sizeof why) == -ENODEV, "another volume's");
  CHECK (hc_volume_open (fast2, slow, NULL, &v, why, sizeof why) == -ENODEV, "and the reverse");
  /* A truncated copy of the fast tier. */
  hc_tier_new_memory (FAST / 2, &small);
  uint8_t *img = malloc (FAST / 2);
  hc_tier_read (fast, img, FAST / 2, 0);
  hc_tier_write (small, img, FAST / 2, 0, 0);
  CHECK (hc_volume_open (small, slow, NULL, &v, why, sizeof why) == -EINVAL
         && strstr (why, "truncated"), "truncated: %s", why);
  /* A newer format version: bump it and fix the checksum like a newer
   * hintcache would. */
  struct hc_format_opts bad = { .block_size = 3000 };
  CHECK (hc_volume_format (fast2, other, &bad, why, sizeof why) == -EINVAL
         && strstr (why, "block size"), "bad block size: %s", why);
  hc_tier *tiny;
  hc_tier_new_memory (64 * 1024, &tiny);
  CHECK (hc_volume_format (tiny, slow, NULL, why, sizeof why) == -EINVAL
         && strstr (why, "too small"), "tiny fast tier: %s", why);
  CHECK (hc_volume_check (fast, slow, why, sizeof why) == 0, "check of a good volume: %s", why);
  free (img);
  hc_tier_close (tiny);
  hc_tier_close (small);
  hc_tier_close (fast2);
  hc_tier_close (fast);
  hc_tier_close (slow);
  hc_tier_close (other);
}

/* The volume is the whole slow tier and leaves its data alone: a slow tier
 * that holds data (and whose size is no multiple of the block size) reads
 * the same through a new volume; writes anywhere, the partial last block
 * included, survive a close and reopen and reach the slow tier when it is
 * cleaned; nothing else of it is written. */
static void
test_whole_slow_tier (void)
{
  static const uint32_t sizes[][2] = { { 4096, SLOW + 1536 }, { 65536, SLOW + 4096 + 512 },
                                       { 65536, SLOW } };
  static uint8_t got[SLOW + 65536];
  char why[200];

  for (unsigned k = 0; k < 3; k++)
    for (unsigned mode = 0; mode < HC_MODE_COUNT; mode++) {
      uint32_t bs = sizes[k][0], size = sizes[k][1];
      struct hc_format_opts fo = { .mode = mode, .block_size = bs };
      hc_tier *fast, *slow;
      hc_tier_new_memory (FAST, &fast);
      hc_tier_new_memory (size, &slow);
      uint8_t *disk = malloc (size);
      fill (disk, size, 40 + k);
      hc_tier_write (slow, disk, size, 0, 0);
      CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
      CHECK (hc_tier_read (slow, got, size, 0) == 0 && memcmp (got, disk, size) == 0,
             "format leaves the slow tier's data alone (%u, %s)", size, hc_mode_name (mode));
      hc_volume *v = open_vol (fast, slow, false);
      CHECK (hc_volume_size (v) == size, "the volume is the whole slow tier: %llu of %u",
             (unsigned long long) hc_volume_size (v), size);
      CHECK (hc_volume_read (v, got, size, 0, NULL) == 0 && memcmp (got, disk, size) == 0,
             "the slow tier's data reads through the volume");
      CHECK (hc_volume_read (v, got, 512, size, NULL) == -EINVAL, "nothing past its end");
      /* Writes across the last whole block and the partial one. */
      for (unsigned i = 0; i < 200; i++) {
        uint64_t len = 1 + next_rand () % (2 * bs);
        uint64_t off = size - len - next_rand () % (3 * bs);
        uint8_t buf[2 * 65536];
        fill (buf, len, next_rand ());
        CHECK (hc_volume_write (v, buf, len, off, i % 7 == 0 ? HC_VOL_FUA : 0, NULL) == 0,
               "write %llu+%llu", (unsigned long long) off, (unsigned long long) len);
        memcpy (disk + off, buf, len);
        if (i % 5 == 0)
          hc_volume_advise (v, off, len, (struct hc_hint) { .advice = HC_ADVICE_WILLNEED });
      }
      CHECK (hc_volume_read (v, got, size, 0, NULL) == 0 && memcmp (got, disk, size) == 0,
             "reads match (%s)", hc_mode_name (mode));
      CHECK (hc_volume_close (v) == 0, "close");
      v = open_vol (fast, slow, false);
      CHECK (hc_volume_read (v, got, size, 0, NULL) == 0 && memcmp (got, disk, size) == 0,
             "reads match after a reopen");
      CHECK (hc_volume_clean (v) == 0, "clean");
      CHECK (hc_volume_close (v) == 0, "close");
      CHECK (hc_tier_read (slow, got, size, 0) == 0 && memcmp (got, disk, size) == 0,
             "cleaned, the slow tier holds exactly the volume");
      free (disk);
      hc_tier_close (fast);
      hc_tier_close (slow);
    }
}

static uint64_t
total (const struct hc_stats *st, unsigned cls, int what)
{
  const struct hc_class_stats *c = &st->cls[cls];
  switch (what) {
  case 0: return c->admissions[0] + c->admissions[1];
  case 1: return c->hits[0] + c->hits[1];
  default: return c->blocks;
  }
}

static void
test_hints (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t buf[256 * 1024];
  struct hc_stats st;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);

  /* A built-in class rule is weighed by evidence, not obeyed: on a fresh
   * volume, before any evidence, background reads are admitted like
   * metadata reads (the rule "background is not admitted" applies once
   * the cache's miniature simulations show that it pays; test_cache_dir);
   * dontneed advice is obeyed at once. */
  struct hc_ioctx bg = { .hint = { .cls = HC_CLASS_BACKGROUND } };
  struct hc_ioctx md = { .hint = { .cls = HC_CLASS_METADATA } };
  struct hc_ioctx dn = { .hint = { .cls = HC_CLASS_BACKGROUND, .advice = HC_ADVICE_DONTNEED } };
  CHECK (hc_volume_read (v, buf, sizeof buf, 0, &bg) == 0, "background read");
  CHECK (hc_volume_read (v, buf, sizeof buf, 1 << 20, &md) == 0, "metadata read");
  CHECK (hc_volume_read (v, buf, sizeof buf, 4 << 20, &dn) == 0, "dontneed read");
  hc_volume_stats (v, &st);
  CHECK (total (&st, HC_CLASS_BACKGROUND, 0) == 64
         && st.cls[HC_CLASS_BACKGROUND].bypass[0][HC_BYPASS_CLASS] == 0
         && st.cls[HC_CLASS_BACKGROUND].bypass[0][HC_BYPASS_ADVICE] == 64,
         "background admitted before evidence, dontneed advice obeyed");
  CHECK (total (&st, HC_CLASS_METADATA, 0) == 64, "metadata admitted");

  /* A range hint classifies later unhinted I/O, and persists. */
  CHECK (hc_volume_advise (v, 2 << 20, 1 << 20, (struct hc_hint) { .cls = HC_CLASS_STREAMING })
         == 0, "advise streaming");
  CHECK (hc_volume_read (v, buf, sizeof buf, 2 << 20, NULL) == 0, "read in the range");
  hc_volume_stats (v, &st);
  CHECK (st.cls[HC_CLASS_STREAMING].misses[0] == 64, "range class applied to unhinted reads");
  CHECK (hc_volume_range_hint (v, (2 << 20) + 4096).cls == HC_CLASS_STREAMING, "range hint");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  CHECK (hc_volume_range_hint (v, (2 << 20) + 4096).cls == HC_CLASS_STREAMING
         && hc_volume_range_hint (v, 3 << 20).cls == 0, "range hint persisted exactly");
  hc_volume_stats (v, &st);
  CHECK (total (&st, HC_CLASS_METADATA, 0) == 64
         && st.cls[HC_CLASS_BACKGROUND].bypass[0][HC_BYPASS_ADVICE] == 64,
         "lifetime statistics persisted");

  /* Withdrawing the middle of a range hint leaves its two ends, and persists. */
  CHECK (hc_volume_unadvise (v, (2 << 20) + (256 << 10), 512 << 10) == 0, "unadvise");
  CHECK (hc_volume_range_hint (v, (2 << 20) + (256 << 10)).cls == 0
         && hc_volume_range_hint (v, (2 << 20) + (767 << 10)).cls == 0
         && hc_volume_range_hint (v, (2 << 20) + (255 << 10)).cls == HC_CLASS_STREAMING
         && hc_volume_range_hint (v, (2 << 20) + (768 << 10)).cls == HC_CLASS_STREAMING,
         "withdrawn exactly");
  CHECK (hc_volume_unadvise (v, hc_volume_size (v), 4096) == -EINVAL, "unadvise past the end");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  CHECK (hc_volume_range_hint (v, (2 << 20) + (300 << 10)).cls == 0
         && hc_volume_range_hint (v, (2 << 20) + (900 << 10)).cls == HC_CLASS_STREAMING,
         "withdrawal persisted");

  /* willneed prefetches (no cleaner: at once); evict drops; dontneed demotes. */
  CHECK (hc_volume_advise (v, 4 << 20, 128 << 10, (struct hc_hint) { .advice = HC_ADVICE_WILLNEED })
         == 0, "willneed");
  hc_volume_stats (v, &st);
  CHECK (st.prefetched == 32, "prefetched 32 blocks (%llu)", (unsigned long long) st.prefetched);
  CHECK (hc_volume_read (v, buf, 128 << 10, 4 << 20, NULL) == 0, "read prefetched");
  hc_volume_stats (v, &st);
  CHECK (st.cls[0].hits[0] == 32 && st.cls[0].hint_hits == 32, "hits on hinted blocks: %llu",
         (unsigned long long) st.cls[0].hint_hits);
  fill (buf, 64 << 10, 7);
  CHECK (hc_volume_write (v, buf, 64 << 10, 5 << 20, 0, NULL) == 0, "write-back");
  hc_volume_stats (v, &st);
  CHECK (st.cls[0].dirty == 16, "16 dirty");
  CHECK (hc_volume_advise (v, 5 << 20, 64 << 10, (struct hc_hint) { .advice = HC_ADVICE_EVICT })
         == 0, "evict");
  hc_volume_stats (v, &st);
  CHECK (st.cls[0].dirty == 0 && st.cls[0].writebacks == 16, "evict wrote back");
  uint8_t raw[64 << 10];
  hc_tier_read (slow, raw, sizeof raw, 5 << 20);
  CHECK (memcmp (raw, buf, sizeof raw) == 0, "slow tier has the evicted data");
  CHECK (hc_volume_advise (v, 0, 1, (struct hc_hint) { .advice = 5 }) == -EINVAL,
         "reserved advice refused");

  /* A stream's default and the device default resolve through precedence. */
  hc_stream *s;
  CHECK (hc_stream_new (v, (struct hc_hint) { .cls = HC_CLASS_JOURNAL }, &s) == 0, "stream");
  struct hc_ioctx sc = { .stream = s };
  CHECK (hc_volume_read (v, buf, 4096, 6 << 20, &sc) == 0, "stream read");
  hc_volume_stats (v, &st);
  CHECK (st.cls[HC_CLASS_JOURNAL].misses[0] == 1, "stream class");
  hc_stream_free (s);
  hc_volume_close (v);

  /* The device's hint (background+dontneed) is the answer for I/O that
   * says nothing, with or without a stream of its own; an I/O hint that
   * names a class keeps the device's advice, and willneed overrides it.
   * A fresh volume: no range hints. */
  hc_tier_close (fast);
  hc_tier_new_memory (FAST, &fast);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  struct hc_open_opts dev = { .no_cleaner = true,
                              .device_hint = { .cls = HC_CLASS_BACKGROUND,
                                               .advice = HC_ADVICE_DONTNEED } };
  CHECK (hc_volume_open (fast, slow, &dev, &v, why, sizeof why) == 0, "open: %s", why);
  hc_stream *js;
  CHECK (hc_stream_new (v, (struct hc_hint) { 0 }, &s) == 0
         && hc_stream_new (v, (struct hc_hint) { .cls = HC_CLASS_JOURNAL }, &js) == 0, "streams");
  struct hc_ioctx quiet = { .stream = s }, named = { .hint = { .cls = HC_CLASS_METADATA } },
                  wanted = { .hint = { .advice = HC_ADVICE_WILLNEED } }, journal = { .stream = js };
  CHECK (hc_volume_read (v, buf, 4 * 4096, 7 << 20, NULL) == 0
         && hc_volume_read (v, buf, 4 * 4096, (7 << 20) + 65536, &quiet) == 0
         && hc_volume_read (v, buf, 4 * 4096, (7 << 20) + 131072, &named) == 0
         && hc_volume_read (v, buf, 4 * 4096, (7 << 20) + 196608, &wanted) == 0
         && hc_volume_read (v, buf, 4 * 4096, (7 << 20) + 262144, &journal) == 0,
         "reads under a device hint");
  hc_volume_stats (v, &st);
  const uint64_t *declined[] = { &st.cls[HC_CLASS_BACKGROUND].bypass[0][HC_BYPASS_ADVICE],
                                 &st.cls[HC_CLASS_METADATA].bypass[0][HC_BYPASS_ADVICE],
                                 &st.cls[HC_CLASS_JOURNAL].bypass[0][HC_BYPASS_ADVICE] };
  CHECK (*declined[0] == 8 && *declined[1] == 4 && *declined[2] == 4,
         "declined as the device advises: %llu unhinted (streamed or not), %llu metadata, %llu "
         "journal (want 8, 4, 4)", (unsigned long long) *declined[0],
         (unsigned long long) *declined[1], (unsigned long long) *declined[2]);
  CHECK (hc_dir_find (&v->dir, ((7 << 20) + 196608) / BS) != HC_NIL
         && hc_dir_find (&v->dir, (7 << 20) / BS) == HC_NIL, "willneed admitted, the rest not");
  hc_stream_free (s);
  hc_stream_free (js);
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
}

static void
test_mode_switch_discard_zero (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t buf[1 << 20], got[1 << 20];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, true);
  fill (buf, sizeof buf, 3);
  CHECK (hc_volume_write (v, buf, sizeof buf, 0, 0, NULL) == 0, "write 1 MiB");
  CHECK (hc_volume_set_mode (v, HC_MODE_WRITETHROUGH) == 0, "switch to write-through");
  CHECK (dirty_blocks (v) == 0, "leaving write-back cleaned everything");
  hc_tier_read (slow, got, sizeof got, 0);
  CHECK (memcmp (got, buf, sizeof buf) == 0, "slow tier up to date");
  CHECK (hc_volume_mode (v) == HC_MODE_WRITETHROUGH, "mode");

  /* Discard whole blocks and an unaligned edge; zero likewise. */
  CHECK (hc_volume_discard (v, 4096 + 100, 3 * 4096, NULL) == 0, "discard");
  memset (buf + 4096 + 100, 0, 3 * 4096);
  CHECK (hc_volume_zero (v, 300000, 70000, HC_VOL_FUA, NULL) == 0, "zero");
  memset (buf + 300000, 0, 70000);
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0
         && memcmp (got, buf, sizeof got) == 0, "discard and zero read back");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  CHECK (hc_volume_mode (v) == HC_MODE_WRITETHROUGH, "mode persisted");
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0
         && memcmp (got, buf, sizeof got) == 0, "after reopen");
  CHECK (hc_volume_read (v, got, 10, hc_volume_size (v) - 5, NULL) == -EINVAL, "past the end");
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* EIO from the fast tier on reads: clean blocks are served from the slow
 * tier, dirty ones reported; the volume keeps working. */
static void
test_fast_errors (void)
{
  hc_tier *fmem, *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t a[64 << 10], b[64 << 10], got[64 << 10];

  hc_tier_new_memory (FAST, &fmem);
  hc_tier_new_faulty (fmem, NULL, 1, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);
  fill (a, sizeof a, 1);
  fill (b, sizeof b, 2);
  hc_tier_write (slow, a, sizeof a, 0, 0);
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0, "fill clean blocks");
  CHECK (hc_volume_write (v, b, sizeof b, 1 << 20, 0, NULL) == 0, "dirty blocks");
  struct hc_fault_rule r = { .ops = HC_FAULT_READ, .fraction = 1, .err = EIO };
  hc_tier_faulty_set (fast, &r);
  CHECK (hc_volume_read (v, got, sizeof got, 0, NULL) == 0 && memcmp (got, a, sizeof a) == 0,
         "clean blocks served from the slow tier");
  CHECK (hc_volume_read (v, got, 4096, 1 << 20, NULL) == -EIO, "dirty block error reported");
  CHECK (hc_volume_read (v, got, sizeof got, 1 << 20, NULL) == -EIO,
         "dirty blocks' error reported by a read of many");
  struct hc_fault_rule none = { 0 };
  hc_tier_faulty_set (fast, &none);
  CHECK (hc_volume_read (v, got, sizeof got, 1 << 20, NULL) == 0 && memcmp (got, b, sizeof b) == 0,
         "dirty data intact afterwards");
  struct hc_stats st;
  hc_volume_stats (v, &st);
  CHECK (st.errors_fast >= 18, "errors counted (%llu)", (unsigned long long) st.errors_fast);
  CHECK (hc_volume_write (v, a, 4096, 2 << 20, 0, NULL) == 0, "still writable");
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (fmem);
  hc_tier_close (slow);
}

/* Threads write disjoint block ranges and read everything back. */
struct worker {
  hc_volume *v;
  unsigned id;
  uint64_t span;
  unsigned errors;
};

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  uint8_t buf[8192], got[8192];
  uint64_t local = w->id * 7919 + 1;
  for (unsigned i = 0; i < 2000; i++) {
    local ^= local << 13, local ^= local >> 7, local ^= local << 17;
    uint64_t blk = (local % (w->span / 8192 / 4)) * 4 + w->id;
    fill (buf, sizeof buf, blk * 1000 + i);
    if (hc_volume_write (w->v, buf, sizeof buf, blk * 8192, 0, NULL) < 0
        || hc_volume_read (w->v, got, sizeof got, blk * 8192, NULL) < 0
        || memcmp (buf, got, sizeof got) != 0)
      w->errors++;
    memcpy (model + blk * 8192, buf, sizeof buf);
  }
  return NULL;
}

static void
test_threads (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  pthread_t th[4];
  struct worker w[4];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, true);
  memset (model, 0, sizeof model);
  for (unsigned i = 0; i < 4; i++) {
    w[i] = (struct worker) { v, i, hc_volume_size (v), 0 };
    pthread_create (&th[i], NULL, worker_main, &w[i]);
  }
  for (unsigned i = 0; i < 4; i++) {
    pthread_join (th[i], NULL);
    CHECK (w[i].errors == 0, "worker %u: %u errors", i, w[i].errors);
  }
  verify_all (v, hc_volume_size (v), "after threads");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  verify_all (v, hc_volume_size (v), "threads, reopened");
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* Multi-block writes in write-back are batched, each batch holding several
 * stripes (io.c, write_batch).  Threads write overlapping 64 KiB - 1 MiB
 * runs across the whole 8 MiB volume (2,048 blocks: stripes wrap, two blocks
 * share each one) while others read: every block must end whole, from one
 * write (each block's bytes name the write), and a thread started after
 * them must still get every stripe (a stripe left locked would hang it). */
struct batcher {
  hc_volume *v;
  unsigned id, errors;
  uint64_t blocks; /* the volume's */
};

static void *
batcher_main (void *arg)
{
  struct batcher *b = arg;
  const uint64_t blocks = b->blocks;
  uint8_t *buf = malloc (256 * BS);
  uint64_t local = b->id * 104729 + 7;

  for (unsigned i = 0; buf && i < 300; i++) {
    local ^= local << 13, local ^= local >> 7, local ^= local << 17;
    uint64_t n = 16 + local % 241, first = (local >> 12) % (blocks - n);
    if (b->id % 2 == 0) {
      for (uint64_t k = 0; k < n; k++) /* each block: the write's id, whole */
        memset (buf + k * BS, (int) (1 + b->id * 64 + i % 61), BS);
      if (hc_volume_write (b->v, buf, n * BS, first * BS, i % 16 == 0 ? HC_VOL_FUA : 0, NULL) < 0)
        b->errors++;
    } else if (hc_volume_read (b->v, buf, n * BS, first * BS, NULL) < 0) {
      b->errors++;
    } else {
      for (uint64_t k = 0; k < n; k++)
        if (buf[k * BS] != buf[k * BS + BS / 2] || buf[k * BS] != buf[k * BS + BS - 1])
          b->errors++; /* a torn block: two writes in one */
    }
  }
  free (buf);
  return NULL;
}

static void
test_batched_writes (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  pthread_t th[4];
  struct batcher b[4];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, true);
  for (unsigned i = 0; i < 4; i++) {
    b[i] = (struct batcher) { v, i, 0, hc_volume_size (v) / BS };
    pthread_create (&th[i], NULL, batcher_main, &b[i]);
  }
  for (unsigned i = 0; i < 4; i++) {
    pthread_join (th[i], NULL);
    CHECK (b[i].errors == 0, "batcher %u: %u errors", i, b[i].errors);
  }
  /* Every block whole, and every stripe free for another thread. */
  static uint8_t all[SLOW];
  CHECK (hc_volume_read (v, all, hc_volume_size (v), 0, NULL) == 0, "read all");
  unsigned torn = 0;
  for (uint64_t k = 0; k < hc_volume_size (v) / BS; k++)
    for (unsigned j = 1; j < BS; j++)
      if (all[k * BS + j] != all[k * BS]) {
        torn++;
        break;
      }
  CHECK (torn == 0, "%u torn blocks", torn);
  b[0] = (struct batcher) { v, 0, 0, hc_volume_size (v) / BS };
  pthread_create (&th[0], NULL, batcher_main, &b[0]);
  pthread_join (th[0], NULL);
  CHECK (b[0].errors == 0, "a later writer: %u errors", b[0].errors);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* Where block blk is cached (HC_NIL: not), and how many records wait. */
static uint32_t
where (hc_volume *v, uint64_t blk, size_t *records)
{
  pthread_mutex_lock (&v->lock);
  uint32_t c = hc_dir_find (&v->dir, blk);
  *records = v->jrec;
  pthread_mutex_unlock (&v->lock);
  return c;
}

/* A clock the test moves: the engine's scheduling points as plain calls
 * (sched.h), but its clock CLOCK_MONOTONIC plus `skew`. */
static _Atomic uint64_t skew;

static void p_lock (pthread_mutex_t *m) { pthread_mutex_lock (m); }
static void p_rdlock (pthread_rwlock_t *l) { pthread_rwlock_rdlock (l); }
static void p_wrlock (pthread_rwlock_t *l) { pthread_rwlock_wrlock (l); }
static int p_trywrlock (pthread_rwlock_t *l) { return pthread_rwlock_trywrlock (l); }
static int p_tryrdlock (pthread_rwlock_t *l) { return pthread_rwlock_tryrdlock (l); }
static void
p_timedwait (pthread_cond_t *c, pthread_mutex_t *m, uint64_t ns)
{
  struct timespec ts;
  clock_gettime (CLOCK_REALTIME, &ts);
  ns += (uint64_t) ts.tv_nsec;
  ts.tv_sec += (time_t) (ns / 1000000000u);
  ts.tv_nsec = (long) (ns % 1000000000u);
  pthread_cond_timedwait (c, m, &ts);
}
static uint64_t
p_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec + skew;
}
static int p_spawn (pthread_t *t, void *(*fn) (void *), void *arg) { return pthread_create (t, NULL, fn, arg); }
static void p_join (pthread_t t) { pthread_join (t, NULL); }
static void
p_random (void *buf, size_t len)
{
  CHECK (getrandom (buf, len, 0) == (ssize_t) len, "getrandom");
}
static const struct hc_sched_ops skewed_clock = {
  .lock = p_lock, .rdlock = p_rdlock, .wrlock = p_wrlock, .trywrlock = p_trywrlock,
  .tryrdlock = p_tryrdlock, .timedwait = p_timedwait, .now_ns = p_now, .spawn = p_spawn,
  .join = p_join, .random = p_random,
};

static bool
fast_dirty (hc_volume *v)
{
  pthread_mutex_lock (&v->lock);
  bool d = v->fast_dirty;
  pthread_mutex_unlock (&v->lock);
  return d;
}

/* 10 ms of a busy volume: a read of block blk (a hit), then a sleep. */
static void
busy_tick (hc_volume *v, uint64_t blk)
{
  static uint8_t got[BS];
  CHECK (hc_volume_read (v, got, BS, blk * BS, NULL) == 0, "read");
  usleep (10000);
}

/* Waits up to ms real milliseconds, the volume busy, for the cleaner to
 * commit data rewritten in place; returns whether it did. */
static bool
cleaner_synced (hc_volume *v, uint64_t blk, unsigned ms)
{
  for (unsigned t = 0; t < ms && fast_dirty (v); t += 10)
    busy_tick (v, blk);
  return !fast_dirty (v);
}

/* Data rewritten in place with no record waiting is left to the fast
 * tier's own write-out for up to 30 s (FAST_SYNC_NS, cleaner.c), not
 * flushed every second with the records: a clock moved 5 s on finds it
 * still waiting after a second of the cleaner's rounds, one moved past
 * 30 s finds it committed.  Records still commit within a second.  In
 * write-through, whose copies are never dirty, so that no idle write-back
 * (the clock's jumps make the volume look idle until the next read) can
 * commit in the cleaner's stead; a copy written through is recorded
 * dirty, and rewritten in place from then on (write.c). */
static void
test_fast_sync (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITETHROUGH };
  char why[200];
  static uint8_t buf[BS];
  size_t r;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  skew = 0;
  hc_sched = &skewed_clock;
  hc_volume *v = open_vol (fast, slow, true);
  memset (buf, 1, sizeof buf);
  CHECK (hc_volume_write (v, buf, BS, 7 * BS, 0, NULL) == 0, "first write");
  CHECK (hc_volume_flush (v) == 0 && !fast_dirty (v), "flushed");
  memset (buf, 2, sizeof buf);
  uint32_t c = where (v, 7, &r);
  CHECK (hc_volume_write (v, buf, BS, 7 * BS, 0, NULL) == 0 && where (v, 7, &r) == c && r == 0,
         "rewritten in place, nothing recorded (%zu records)", r);
  CHECK (fast_dirty (v), "waits for a commit");
  skew += 5 * 1000000000ull;
  CHECK (!cleaner_synced (v, 7, 1000), "5 s on, the cleaner has not flushed the fast tier");
  skew += 30 * 1000000000ull;
  CHECK (cleaner_synced (v, 7, 5000), "35 s on, it has");

  /* A record still commits within a second. */
  CHECK (hc_volume_write (v, buf, BS, 9 * BS, 0, NULL) == 0 && where (v, 9, &r) != HC_NIL && r > 0,
         "a miss admitted: a record waits (%zu)", r);
  skew += 2 * 1000000000ull;
  bool committed = false;
  for (unsigned t = 0; t < 5000 && !committed; t += 10) {
    busy_tick (v, 7);
    committed = (where (v, 9, &r), r == 0);
  }
  CHECK (committed, "2 s on, the record is committed");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_sched = NULL;
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* Write-back rewrites a dirty block in place, recording nothing and
 * leaving the fast tier to the next commit — except a partial write, a
 * change of class, and the write after a FUA one, which copy. */
static void
test_in_place (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t buf[2 * BS], got[2 * BS];
  struct hc_ioctx meta = { .hint = { .cls = HC_CLASS_METADATA } };
  size_t r0, r1;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);
  memset (buf, 1, sizeof buf);
  CHECK (hc_volume_write (v, buf, 2 * BS, 5 * BS, 0, NULL) == 0, "first write");
  CHECK (hc_volume_flush (v) == 0 && !v->fast_dirty, "flushed");
  uint32_t c = where (v, 5, &r0), d = where (v, 6, &r0);
  memset (buf, 2, sizeof buf);
  CHECK (hc_volume_write (v, buf, 2 * BS, 5 * BS, 0, NULL) == 0, "rewrite");
  CHECK (where (v, 5, &r1) == c && where (v, 6, &r1) == d && r1 == r0,
         "rewritten in place, nothing recorded (%zu → %zu records)", r0, r1);
  CHECK (v->fast_dirty, "the next commit flushes the fast tier");
  CHECK (hc_volume_read (v, got, 2 * BS, 5 * BS, NULL) == 0 && memcmp (got, buf, 2 * BS) == 0,
         "reads the rewrite");
  CHECK (hc_volume_flush (v) == 0 && !v->fast_dirty, "a flush makes it durable");

  memset (buf, 3, BS);
  CHECK (hc_volume_write (v, buf, BS / 2, 5 * BS, 0, NULL) == 0 && where (v, 5, &r1) != c,
         "a partial write copies");
  c = where (v, 5, &r0);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, &meta) == 0 && where (v, 5, &r1) != c,
         "a change of class copies");
  c = where (v, 5, &r0);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, HC_VOL_FUA, &meta) == 0 && where (v, 5, &r1) == c,
         "a FUA write goes in place too (and commits)");
  CHECK (!v->fast_dirty && r1 == 0, "the FUA write is durable: %zu records wait", r1);
  memset (buf, 4, BS);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, &meta) == 0 && where (v, 5, &r1) != c,
         "the write after a FUA write copies, so the FUA data stays whole");
  c = where (v, 5, &r0);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, &meta) == 0 && where (v, 5, &r1) == c,
         "then in place again");
  CHECK (hc_volume_read (v, got, BS, 5 * BS, NULL) == 0 && memcmp (got, buf, BS) == 0, "reads back");

  /* Clean blocks copy: the slow tier holds their data. */
  CHECK (hc_volume_clean (v) == 0, "clean");
  c = where (v, 5, &r0);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, &meta) == 0 && where (v, 5, &r1) != c,
         "a clean block copies");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (slow);
}

static uint64_t
commits (hc_volume *v)
{
  struct hc_stats st;
  hc_volume_stats (v, &st);
  return st.commits;
}

static unsigned
unrecorded (hc_volume *v)
{
  unsigned n = 0;
  pthread_mutex_lock (&v->lock);
  for (uint32_t c = 0; c < v->dir.map.n; c++)
    n += (v->dir.map.blk[c].meta & HC_M_UNRECORDED) != 0;
  pthread_mutex_unlock (&v->lock);
  return n;
}

/* Write-through copies are clean but recorded dirty (the top of
 * src/engine/write.c): a write through a copy written or filled before
 * needs no commit, a settled copy's does, and clean and close settle. */
static void
test_write_through_unrecorded (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITETHROUGH };
  char why[200];
  static uint8_t buf[BS], got[BS];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);
  memset (buf, 1, BS);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, NULL) == 0, "write a miss");
  CHECK (hc_volume_read (v, got, BS, 9 * BS, NULL) == 0, "fill by a read miss");
  CHECK (unrecorded (v) == 2, "both copies clean, recorded dirty (%u)", unrecorded (v));
  CHECK (dirty_blocks (v) == 0, "nothing dirty");
  uint64_t c0 = commits (v);
  size_t rec0, rec1;
  const uint32_t at5 = where (v, 5, &rec0), at9 = where (v, 9, &rec0);
  memset (buf, 2, BS);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, NULL) == 0
             && hc_volume_write (v, buf, BS, 9 * BS, 0, NULL) == 0,
         "write through both");
  CHECK (commits (v) == c0, "no commit for copies recorded dirty (%" PRIu64 " → %" PRIu64 ")", c0,
         commits (v));
  /* Whole blocks over copies recorded dirty: rewritten where they are. */
  CHECK (where (v, 5, &rec1) == at5 && where (v, 9, &rec1) == at9 && at5 != HC_NIL
             && at9 != HC_NIL,
         "rewritten in place");
  CHECK (rec1 == rec0, "nothing recorded (%zu → %zu records)", rec0, rec1);
  CHECK (unrecorded (v) == 2 && dirty_blocks (v) == 0, "still clean, recorded dirty");
  CHECK (hc_tier_read (fast, got, BS, v->sb.data_off + (uint64_t) at5 * BS) == 0
             && memcmp (got, buf, BS) == 0
             && hc_tier_read (slow, got, BS, 5 * BS) == 0 && memcmp (got, buf, BS) == 0,
         "both tiers have the write");
  /* A part of a block is still copied. */
  memset (buf, 4, BS);
  CHECK (hc_volume_write (v, buf, 512, 9 * BS, 0, NULL) == 0 && where (v, 9, &rec1) != at9
             && commits (v) == c0,
         "a partial write moves the copy, without a commit");
  CHECK (hc_volume_read (v, got, BS, 9 * BS, NULL) == 0 && got[0] == 4 && got[511] == 4
             && got[512] == 2 && got[BS - 1] == 2,
         "and merges the rest of the block");
  CHECK (hc_volume_clean (v) == 0 && unrecorded (v) == 0, "clean settles every copy");
  c0 = commits (v);
  memset (buf, 3, BS);
  CHECK (hc_volume_write (v, buf, BS, 5 * BS, 0, NULL) == 0 && commits (v) == c0 + 1,
         "a settled copy's write commits first (%" PRIu64 " → %" PRIu64 ")", c0, commits (v));
  CHECK (unrecorded (v) == 1, "and its new copy is recorded dirty");
  CHECK (hc_tier_read (slow, got, BS, 5 * BS) == 0 && memcmp (got, buf, BS) == 0,
         "the slow tier has the write");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  CHECK (dirty_blocks (v) == 0 && unrecorded (v) == 0, "close settled: reopened with nothing dirty");
  CHECK (hc_volume_read (v, got, BS, 5 * BS, NULL) == 0 && memcmp (got, buf, BS) == 0, "reads back");
  CHECK (hc_volume_close (v) == 0, "close again");
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* A write-through rewrite in place whose slow-tier write fails: the copy
 * holds the new data and the slow tier does not, so the copy must stay
 * dirty (never dropped as clean, which would change the block by itself)
 * until the cleaner has written it back. */
static void
test_write_through_in_place_error (void)
{
  hc_tier *smem, *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITETHROUGH };
  char why[200];
  static uint8_t one[BS], two[BS], got[BS];
  size_t rec;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &smem);
  hc_tier_new_faulty (smem, NULL, 1, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);
  memset (one, 1, BS);
  memset (two, 2, BS);
  CHECK (hc_volume_write (v, one, BS, 7 * BS, 0, NULL) == 0, "write a miss");
  uint32_t c = where (v, 7, &rec);
  struct hc_fault_rule r = { .ops = HC_FAULT_WRITE, .fraction = 1, .err = EIO };
  hc_tier_faulty_set (slow, &r);
  CHECK (hc_volume_write (v, two, BS, 7 * BS, 0, NULL) == -EIO, "the slow write fails");
  struct hc_fault_rule none = { 0 };
  hc_tier_faulty_set (slow, &none);
  CHECK (where (v, 7, &rec) == c && dirty_blocks (v) == 1,
         "the copy, rewritten in place, stays dirty (%u dirty)", (unsigned) dirty_blocks (v));
  CHECK (hc_volume_read (v, got, BS, 7 * BS, NULL) == 0 && memcmp (got, two, BS) == 0,
         "and is what a read returns");
  CHECK (hc_volume_clean (v) == 0 && dirty_blocks (v) == 0, "clean writes it back");
  CHECK (hc_tier_read (smem, got, BS, 7 * BS) == 0 && memcmp (got, two, BS) == 0,
         "the slow tier has it");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (slow);
  hc_tier_close (smem);
  hc_tier_close (fast);
}

/* Second-touch promotion (hc_open_opts.second_touch): a block read once
 * is served from the slow tier and not cached, read again it is admitted;
 * random reads and writes of every size still read what was written; a
 * flash budget turns it on when spent; thrift does it, and sends write
 * misses around the cache, for data-hinted I/O alone; a policy without it
 * refuses to open with either. */
static void
test_second_touch (void)
{
  static uint8_t got[8192];
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct hc_open_opts oo = { .no_cleaner = true, .second_touch = true },
                      oo_plain = { .no_cleaner = true };
  hc_tier *fast, *slow;
  hc_volume *v = NULL;
  struct hc_stats st;
  char why[200];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  fill (model, SLOW, 77);
  CHECK (hc_tier_write (slow, model, SLOW, 0, 0) == 0, "slow data");
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  for (int i = 0; i < 3; i++) {
    CHECK (hc_volume_read (v, got, 4096, 4096, NULL) == 0 && memcmp (got, model + 4096, 4096) == 0,
           "read %d of block 1", i + 1);
    hc_volume_stats (v, &st);
    CHECK_EQ (st.cls[0].blocks, i == 0 ? 0 : 1, "after read %d: %llu cached", i + 1,
              (unsigned long long) st.cls[0].blocks);
  }
  CHECK_EQ (st.cls[0].bypass[0][HC_BYPASS_POLICY], 1, "one refusal, the first read's");
  CHECK_EQ (st.cls[0].hits[0], 1, "the third read hit");
  CHECK (st.hint_effects & HC_FX_TOUCH, "second-touch is among the effects in force");
  exercise (v, 4000, SLOW);
  verify_all (v, SLOW, "second touch");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);

  /* A budget of a byte a day: the first fill empties it, and from the
   * next request on, reads are promoted on the second touch. */
  hc_tier_new_memory (FAST, &fast);
  fill (model, SLOW, 78); /* (the write-back volume above kept its dirty blocks) */
  CHECK (hc_tier_write (slow, model, SLOW, 0, 0) == 0, "slow data");
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  struct hc_open_opts bo = { .no_cleaner = true, .flash_budget = 1 };
  CHECK (hc_volume_open (fast, slow, &bo, &v, why, sizeof why) == 0, "open: %s", why);
  hc_volume_stats (v, &st);
  CHECK (!(st.hint_effects & HC_FX_TOUCH), "a budget starts with promotion on the first touch");
  for (uint64_t b = 10; b < 14; b++)
    CHECK (hc_volume_read (v, got, 4096, b * 4096, NULL) == 0
           && memcmp (got, model + b * 4096, 4096) == 0, "read block %llu", (unsigned long long) b);
  hc_volume_stats (v, &st);
  CHECK_EQ (st.cls[0].blocks, 1, "only the first read was admitted: %llu cached",
            (unsigned long long) st.cls[0].blocks);
  CHECK_EQ (st.cls[0].bypass[0][HC_BYPASS_POLICY], 3, "the other three refused");
  CHECK (st.hint_effects & HC_FX_TOUCH, "the budget turned second touch on");
  /* Spent, the write-back volume sends a write miss of a whole block to
   * the slow tier alone (one of part of a block always goes there); a
   * write hit rewrites its copy. */
  static uint8_t w[2 * 4096], back[4096];
  fill (w, sizeof w, 79);
  CHECK (hc_volume_write (v, w, 4096, 20 * 4096, 0, NULL) == 0
         && hc_volume_write (v, w + 4096, 1000, 21 * 4096 + 512, 0, NULL) == 0
         && hc_volume_write (v, w, 4096, 10 * 4096, 0, NULL) == 0, "writes");
  hc_volume_stats (v, &st);
  CHECK_EQ (st.cls[0].blocks, 1, "the write misses went around: %llu cached",
            (unsigned long long) st.cls[0].blocks);
  CHECK_EQ (st.cls[0].bypass[1][HC_BYPASS_POLICY], 1, "the whole block's refused by the budget");
  CHECK_EQ (st.cls[0].bypass[1][HC_BYPASS_PARTIAL], 1, "(a partial miss never is admitted)");
  CHECK_EQ (st.cls[0].dirty, 1, "the write hit is dirty in the cache");
  CHECK (hc_tier_read (slow, back, 4096, 20 * 4096) == 0 && memcmp (back, w, 4096) == 0,
         "block 20 is on the slow tier");
  memcpy (model + 20 * 4096, w, 4096);
  memcpy (model + 21 * 4096 + 512, w + 4096, 1000);
  memcpy (model + 10 * 4096, w, 4096);
  for (uint64_t b = 10; b < 22; b += 1)
    CHECK (hc_volume_read (v, got, 4096, b * 4096, NULL) == 0
           && memcmp (got, model + b * 4096, 4096) == 0, "read back block %llu",
           (unsigned long long) b);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);

  /* Thrift in force (the evidence's choice; fixed here): a data-hinted
   * write miss goes to the slow tier alone, a data-hinted read is admitted
   * on its second touch, an unhinted one at once; hinted and unhinted
   * random I/O still reads what was written. */
  hc_tier_new_memory (FAST, &fast);
  fill (model, SLOW, 80);
  CHECK (hc_tier_write (slow, model, SLOW, 0, 0) == 0, "slow data");
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo_plain, &v, why, sizeof why) == 0, "open: %s", why);
  hc_lock (&v->lock);
  hc_dir_set_effects (&v->dir, HC_FX_START | HC_FX_THRIFT);
  pthread_mutex_unlock (&v->lock);
  const struct hc_ioctx data = { .hint = { .cls = HC_CLASS_DATA } };
  fill (w, sizeof w, 81);
  CHECK (hc_volume_write (v, w, 4096, 30 * 4096, 0, &data) == 0, "a data write miss");
  CHECK (hc_volume_write (v, w + 4096, 4096, 31 * 4096, 0, NULL) == 0, "an unhinted one");
  memcpy (model + 30 * 4096, w, 2 * 4096);
  hc_volume_stats (v, &st);
  CHECK_EQ (st.cls[HC_CLASS_DATA].bypass[1][HC_BYPASS_POLICY], 1, "the data write went around");
  CHECK_EQ (st.cls[HC_CLASS_DATA].blocks + st.cls[0].blocks, 1, "the unhinted one is cached");
  CHECK (hc_tier_read (slow, back, 4096, 30 * 4096) == 0 && memcmp (back, w, 4096) == 0,
         "block 30 is on the slow tier");
  for (int i = 0; i < 2; i++)
    CHECK (hc_volume_read (v, got, 4096, 40 * 4096, &data) == 0
           && memcmp (got, model + 40 * 4096, 4096) == 0, "data read %d of block 40", i + 1);
  hc_volume_stats (v, &st);
  CHECK_EQ (st.cls[HC_CLASS_DATA].bypass[0][HC_BYPASS_POLICY], 1, "the first data read refused");
  CHECK_EQ (st.cls[HC_CLASS_DATA].blocks, 1, "the second admitted");
  CHECK (st.hint_effects & HC_FX_THRIFT, "thrift is among the effects in force");
  for (int i = 0; i < 4; i++) {
    exercise_with (v, 1000, SLOW, i % 2 ? &data : NULL);
    verify_all (v, SLOW, "thrift");
  }
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);

  hc_tier_new_memory (FAST, &fast);
  fo.policy = "lru";
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == -ENOTSUP
         && strstr (why, "second-touch"), "lru refuses second touch: %s", why);
  CHECK (hc_volume_open (fast, slow, &bo, &v, why, sizeof why) == -ENOTSUP, "and a budget");
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* A sequential stream's readahead.  Over a slow tier that reads ahead into
 * a cache of its own (a file), the window is announced to the tier and the
 * stream keeps no copy of it; over one that does not (memory), the stream
 * keeps the window.  Either way every read returns the slow tier's data. */
static void
test_readahead (void)
{
  static uint8_t data[4u << 20], got[64 << 10];
  char path[512];

  fill (data, sizeof data, 11);
  for (int file = 0; file < 2; file++) {
    hc_tier *fast, *slow = NULL;
    struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
    struct hc_open_opts oo = { .no_cleaner = true, .seq_cutoff = 128 << 10 };
    hc_volume *v = NULL;
    hc_stream *st = NULL;
    char why[200];
    int fd = -1;

    hc_tier_new_memory (FAST, &fast);
    if (file) {
      snprintf (path, sizeof path, "%s/hc-readahead-XXXXXX", test_tmp ());
      fd = mkstemp (path);
      CHECK (fd >= 0 && ftruncate (fd, SLOW) == 0, "temp file");
      CHECK (hc_tier_open_file (path, 0, &slow) == 0, "open %s", path);
    } else
      hc_tier_new_memory (SLOW, &slow);
    const char *what = file ? "file" : "memory";
    CHECK (hc_tier_write (slow, data, sizeof data, 0, 0) == 0, "%s: data", what);
    CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
    CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
    CHECK (hc_stream_new (v, (struct hc_hint) { 0 }, &st) == 0, "stream");
    struct hc_ioctx ctx = { .stream = st };
    unsigned bad = 0;
    for (uint64_t off = 0; off < sizeof data; off += sizeof got)
      bad += hc_volume_read (v, got, sizeof got, off, &ctx) != 0
             || memcmp (got, data + off, sizeof got) != 0;
    CHECK (bad == 0, "%s: %u sequential reads wrong", what, bad);
    CHECK (st->ra.n > 0, "%s: the stream read ahead", what);
    if (file)
      CHECK (st->ra.buf == NULL, "file: the page cache holds the window, the stream no copy");
    else
      CHECK (st->ra.buf != NULL, "memory: the stream holds the window");
    hc_stream_free (st);

    /* Without a stream (an NBD client's connections), two readers taking
     * turns, each a run of its own: each run gets a shared window.  The
     * cache is emptied first, so that both runs miss throughout, whatever
     * the policy kept of the reads above. */
    const uint64_t half = sizeof data / 2;
    CHECK (hc_volume_advise (v, 0, sizeof data, (struct hc_hint) { .advice = HC_ADVICE_EVICT }) == 0,
           "%s: evict", what);
    for (uint64_t off = 0; off < half; off += sizeof got)
      for (int reader = 0; reader < 2; reader++) {
        uint64_t o = reader * half + off;
        bad += hc_volume_read (v, got, sizeof got, o, NULL) != 0
               || memcmp (got, data + o, sizeof got) != 0;
      }
    CHECK (bad == 0, "%s: %u interleaved sequential reads wrong", what, bad);
    unsigned windows[2] = { 0, 0 };
    for (unsigned i = 0; i < HC_RA_SHARED; i++)
      if (v->ra.w[i].n)
        windows[(v->ra.w[i].blk << v->bshift) >= half]++;
    CHECK (windows[0] == 1 && windows[1] == 1,
           "%s: each interleaved run has its own window (%u and %u)", what, windows[0],
           windows[1]);
    CHECK (hc_volume_close (v) == 0, "close");
    hc_tier_close (slow);
    hc_tier_close (fast);
    if (fd >= 0) {
      close (fd);
      unlink (path);
    }
  }
}

/* A sequential reader without a stream (the kernel's NBD client sends every
 * process's requests over the same connections), with 40 random reads of
 * another reader between every two of its own, still reads ahead: its
 * 64 KiB requests over 2 MiB cost the slow tier a few windows, not 32
 * reads.  (The volume's run table used to hold 16 runs, each random read
 * displacing the least recent: the reader was forgotten.) */
struct span_count {
  uint64_t end;
  unsigned reads;
};

static int
count_reads_below (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  struct span_count *sc = arg;
  (void) len, (void) rc;
  if (op == HOOK_READ && !after && off < sc->end)
    sc->reads++;
  return 0;
}

/* Reads [0, size) in requests of `per` bytes, checking them against data,
 * with `between` random one-block reads past it after each; returns how
 * many reads failed or were wrong. */
static unsigned
read_beside_random (hc_volume *v, const uint8_t *data, size_t size, size_t per, unsigned between)
{
  static uint8_t got[64 << 10], small[BS];
  unsigned bad = 0;

  for (uint64_t off = 0; off < size; off += per) {
    bad += hc_volume_read (v, got, per, off, NULL) != 0 || memcmp (got, data + off, per) != 0;
    for (unsigned k = 0; k < between; k++) {
      uint64_t b = size / BS + next_rand () % (SLOW / BS - size / BS);
      bad += hc_volume_read (v, small, BS, b * BS, NULL) != 0;
    }
  }
  return bad;
}

static void
test_readahead_beside_random (void)
{
  hc_tier *fast, *slow_mem, *slow = NULL;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct hc_open_opts oo = { .no_cleaner = true, .seq_cutoff = 128 << 10 };
  static uint8_t data[2u << 20];
  struct span_count sc = { .end = sizeof data };
  hc_volume *v = NULL;
  char why[200];

  fill (data, sizeof data, 21);
  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow_mem);
  CHECK (hook_new (slow_mem, count_reads_below, &sc, &slow) == 0, "hook tier");
  if (!slow)
    return;
  CHECK (hc_tier_write (slow_mem, data, sizeof data, 0, 0) == 0, "data");
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  sc.reads = 0; /* not format's and open's own */
  unsigned bad = read_beside_random (v, data, sizeof data, 64 << 10, 40);
  CHECK (bad == 0, "%u reads failed or wrong", bad);
  CHECK (sc.reads <= 8, "32 sequential reads among 1,280 random ones: %u slow-tier reads of the "
         "sequential reader's range", sc.reads);

  /* The same with a reader of one block per request (a single-block miss
   * goes the way of a run of misses, readahead included): 32 reads until
   * the run passes the cutoff, then windows (45 slow reads when written;
   * 512, one per request, when single blocks did not read ahead). */
  CHECK (hc_volume_advise (v, 0, sizeof data, (struct hc_hint) { .advice = HC_ADVICE_EVICT }) == 0,
         "evict");
  sc.reads = 0;
  bad = read_beside_random (v, data, sizeof data, BS, 4);
  CHECK (bad == 0, "%u reads failed or wrong", bad);
  CHECK (sc.reads <= 64, "512 sequential reads of one block among 2,048 random ones: %u slow-tier "
         "reads of the sequential reader's range", sc.reads);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (slow);
  hc_tier_close (slow_mem);
  hc_tier_close (fast);
}

/* Write-back of dirty blocks of consecutive origins is one slow-tier write
 * per run, not one per block (a disk's request costs mostly its latency):
 * 64 blocks written as two separate runs of 32 (and one lone block) are
 * cleaned in 3 slow writes, and read back. */
static int
count_writes (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) off, (void) len, (void) rc;
  if (op == HOOK_WRITE && !after)
    ++*(unsigned *) arg;
  return 0;
}

static void
test_writeback_runs (void)
{
  hc_tier *fast, *slow_mem, *slow = NULL;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  static uint8_t buf[32 * BS], got[BS];
  unsigned writes = 0;
  char why[200];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow_mem);
  CHECK (hook_new (slow_mem, count_writes, &writes, &slow) == 0, "hook tier");
  if (!slow)
    return;
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  hc_volume *v = open_vol (fast, slow, false);
  const uint64_t starts[] = { 100, 300, 500 }, lens[] = { 32, 32, 1 };
  for (unsigned r = 0; r < 3; r++) {
    fill (buf, lens[r] * BS, starts[r]);
    /* Block by block, in reverse: the cache blocks come in no useful order. */
    for (uint64_t i = lens[r]; i-- > 0;)
      CHECK (hc_volume_write (v, buf + i * BS, BS, (starts[r] + i) * BS, 0, NULL) == 0, "write");
  }
  writes = 0;
  CHECK (hc_volume_clean (v) == 0, "clean");
  CHECK (writes == 3, "65 dirty blocks in 3 runs written back in %u slow writes", writes);
  unsigned bad = 0;
  for (unsigned r = 0; r < 3; r++) {
    fill (buf, lens[r] * BS, starts[r]);
    for (uint64_t i = 0; i < lens[r]; i++)
      bad += hc_tier_read (slow_mem, got, BS, (starts[r] + i) * BS) != 0
             || memcmp (got, buf + i * BS, BS) != 0;
  }
  CHECK (bad == 0, "%u blocks differ on the slow tier after write-back", bad);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (slow);
  hc_tier_close (slow_mem);
  hc_tier_close (fast);
}

/* The cleaner flushes the slow tier for its own write-back: a client that
 * flushes while the cleaner writes back (as a database's every commit
 * does) never waits for the slow tier's flush (cleaner.c).  The slow tier
 * takes 300 us per write, so 400 scattered dirty blocks take a while to
 * write back; meanwhile a client thread rewrites a block of its own and
 * flushes, over and over.  Every flush of the slow tier must come from the
 * cleaning thread, and the slow tier must then hold every block. */
static _Thread_local bool wb_in_client;

struct wb_spy {
  _Atomic unsigned flushes, client_flushes, client_errors;
  _Atomic bool done;
  hc_volume *v;
  unsigned rounds;
};

static int
wb_spy_hook (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  struct wb_spy *s = arg;

  (void) off, (void) len, (void) rc;
  if (after)
    return 0;
  if (op == HOOK_WRITE)
    usleep (300);
  if (op == HOOK_FLUSH) {
    s->flushes++;
    if (wb_in_client)
      s->client_flushes++;
  }
  return 0;
}

static void *
wb_client (void *arg)
{
  struct wb_spy *s = arg;
  static uint8_t b[BS];

  /* (Checked by the main thread: CHECK's counters are not for threads.) */
  wb_in_client = true;
  while (!s->done) {
    fill (b, BS, s->rounds);
    if (hc_volume_write (s->v, b, BS, (uint64_t) 1500 * BS, 0, NULL) != 0
        || hc_volume_flush (s->v) != 0)
      s->client_errors++;
    s->rounds++;
  }
  return NULL;
}

static void
test_writeback_flushes_its_own (void)
{
  hc_tier *fast, *slow_mem, *slow = NULL;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct wb_spy spy = { 0 };
  static uint8_t buf[BS], got[BS];
  char why[200];
  pthread_t t;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow_mem);
  CHECK (hook_new (slow_mem, wb_spy_hook, &spy, &slow) == 0, "hook tier");
  if (!slow)
    return;
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  spy.v = open_vol (fast, slow, false);
  for (uint64_t b = 0; b < 800; b += 2) {
    fill (buf, BS, b);
    CHECK (hc_volume_write (spy.v, buf, BS, b * BS, 0, NULL) == 0, "write");
  }
  CHECK (hc_volume_flush (spy.v) == 0, "flush");
  CHECK (pthread_create (&t, NULL, wb_client, &spy) == 0, "client thread");
  CHECK (hc_volume_clean (spy.v) == 0, "clean");
  spy.done = true;
  pthread_join (t, NULL);
  printf ("write-back of 400 blocks: %u slow-tier flushes, %u of them by a client that flushed "
          "%u times meanwhile\n", spy.flushes, spy.client_flushes, spy.rounds);
  CHECK (spy.client_errors == 0, "the client's writes and flushes failed %u times",
         spy.client_errors);
  CHECK (spy.rounds >= 3, "the client flushed while the cleaner wrote back (%u times)", spy.rounds);
  CHECK (spy.client_flushes == 0, "a client's flush waited for the slow tier's (%u times)",
         spy.client_flushes);
  unsigned bad = 0;
  for (uint64_t b = 0; b < 800; b += 2) {
    fill (buf, BS, b);
    bad += hc_tier_read (slow_mem, got, BS, b * BS) != 0 || memcmp (got, buf, BS) != 0;
  }
  CHECK (bad == 0, "%u blocks differ on the slow tier after write-back", bad);
  CHECK (hc_volume_close (spy.v) == 0, "close");
  hc_tier_close (slow);
  hc_tier_close (slow_mem);
  hc_tier_close (fast);
}

/* Without memory for a journal record, the volume fails as after a failed
 * commit (the records describe changes already made in RAM): the writes
 * after it, the flush and the close return -EIO, and the next open finds
 * every write flushed before it.  realloc is wrapped (-Wl,--wrap=realloc,
 * for this test only) so that it can be made to fail. */
static bool realloc_fails;
void *__real_realloc (void *p, size_t n);
void *__wrap_realloc (void *p, size_t n);
void *
__wrap_realloc (void *p, size_t n)
{
  return realloc_fails ? NULL : __real_realloc (p, n);
}

static void
test_no_memory_for_records (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  static uint8_t buf[BS], got[BS];
  char why[200];

  hc_tier_new_memory (64u << 20, &fast);
  hc_tier_new_memory (128u << 20, &slow);
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  hc_volume *v = open_vol (fast, slow, false);
  for (unsigned b = 0; b < 100; b++) {
    fill (buf, BS, b);
    CHECK (hc_volume_write (v, buf, BS, (uint64_t) b * BS, 0, NULL) == 0, "write %u", b);
  }
  CHECK (hc_volume_flush (v) == 0, "flush");
  realloc_fails = true;
  int rc = 0;
  unsigned b = 100;
  for (; b < 3000 && rc == 0; b++) { /* a record each: the buffer must grow */
    fill (buf, BS, b);
    rc = hc_volume_write (v, buf, BS, (uint64_t) b * BS, 0, NULL);
  }
  realloc_fails = false;
  CHECK (rc == -EIO, "a write after the record was lost fails with EIO (%d, at block %u)", rc, b);
  CHECK (hc_volume_write (v, buf, BS, 0, 0, NULL) == -EIO, "and so does the next");
  CHECK (hc_volume_flush (v) == -EIO, "a flush fails: what it would cover is not durable");
  CHECK (hc_volume_close (v) == -EIO, "close reports it");
  v = open_vol (fast, slow, false);
  unsigned bad = 0;
  for (unsigned i = 0; i < 100; i++) {
    fill (buf, BS, i);
    bad += hc_volume_read (v, got, BS, (uint64_t) i * BS, NULL) != 0 || memcmp (got, buf, BS) != 0;
  }
  CHECK (bad == 0, "reopened: %u of the flushed blocks differ", bad);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (slow);
  hc_tier_close (fast);
}

/* Sustained write-back writes of three times the cache: the cleaner keeps
 * up (no write falls back to the slow tier for want of a clean block), the
 * class of dirty data survives to its write-back, and everything reads back. */
static void
test_sustained_writes (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t buf[128 << 10];
  struct hc_stats st;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, true);
  struct hc_volume_info in;
  hc_volume_get_info (v, &in);
  uint64_t span = hc_volume_size (v), total_bytes = 3ull * in.nblocks * BS;
  struct hc_ioctx j = { .hint = { .cls = HC_CLASS_DATA } };
  memset (model, 0, sizeof model);
  for (uint64_t done = 0; done < total_bytes; done += sizeof buf) {
    uint64_t off = (next_rand () % (span / sizeof buf)) * sizeof buf;
    fill (buf, sizeof buf, done);
    CHECK (hc_volume_write (v, buf, sizeof buf, off, 0, &j) == 0, "sustained write");
    memcpy (model + off, buf, sizeof buf);
  }
  hc_volume_stats (v, &st);
  CHECK (st.cls[HC_CLASS_DATA].bypass[1][HC_BYPASS_FULL] == 0,
         "no write fell back for want of a clean block (%llu did)",
         (unsigned long long) st.cls[HC_CLASS_DATA].bypass[1][HC_BYPASS_FULL]);
  CHECK (st.cls[HC_CLASS_DATA].writebacks > 0, "the cleaner wrote back data blocks as data");
  CHECK (st.cls[HC_CLASS_UNCLASSIFIED].writebacks == 0, "and as nothing else");
  verify_all (v, span, "sustained writes");
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  verify_all (v, span, "sustained writes, reopened");
  /* Dirty journal data reopens as journal and is written back as journal.
   * This volume has no cleaner: clean it first, so that the journal writes
   * find clean blocks to take however far the cleaner had got above (on a
   * loaded machine, not far: the writes then went to the slow tier). */
  struct hc_ioctx jc = { .hint = { .cls = HC_CLASS_JOURNAL } };
  struct hc_stats before;
  CHECK (hc_volume_clean (v) == 0, "clean before the journal writes");
  hc_volume_stats (v, &before);
  fill (buf, sizeof buf, 99);
  CHECK (hc_volume_write (v, buf, sizeof buf, 0, 0, &jc) == 0, "journal write");
  memcpy (model, buf, sizeof buf);
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  hc_volume_stats (v, &st);
  CHECK (st.cls[HC_CLASS_JOURNAL].dirty == sizeof buf / BS, "dirty journal blocks reopened as "
         "journal (%llu)", (unsigned long long) st.cls[HC_CLASS_JOURNAL].dirty);
  CHECK (hc_volume_clean (v) == 0, "clean");
  hc_volume_stats (v, &st);
  CHECK (st.cls[HC_CLASS_JOURNAL].dirty == 0
         && st.cls[HC_CLASS_JOURNAL].writebacks - before.cls[HC_CLASS_JOURNAL].writebacks
                == sizeof buf / BS, "written back as journal");
  verify_all (v, span, "sustained writes, reopened");
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* Reads a cached block again and again for `secs` (or until dirty blocks
 * fall to `until`): a busy volume. Returns the dirty blocks at the end. */
static uint64_t
stay_busy (hc_volume *v, double secs, uint64_t until)
{
  static uint8_t got[BS];
  uint64_t dirty = dirty_blocks (v);
  for (double t0 = test_now (); test_now () - t0 < secs && dirty > until; dirty = dirty_blocks (v)) {
    CHECK (hc_volume_read (v, got, BS, 0, NULL) == 0, "busy read");
    usleep (1000);
  }
  return dirty;
}

/* The cleaner paces its write-back while requests arrive: past dirty_high
 * it does not run flat out; idle, it cleans to dirty_low; past the halfway
 * mark to 100 %, it cleans to dirty_low even while requests arrive. */
static void
test_paced_cleaning (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  char why[200];
  static uint8_t buf[BS];
  struct hc_volume_info in;

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, true);
  hc_volume_get_info (v, &in);
  const uint64_t n = in.nblocks, low = n * 25 / 100;
  uint64_t b = 0;
  for (; b < n * 60 / 100; b++) {
    fill (buf, BS, b);
    CHECK (hc_volume_write (v, buf, BS, b * BS, 0, NULL) == 0, "write");
  }
  uint64_t at60 = dirty_blocks (v), busy = stay_busy (v, 1.5, 0);
  CHECK (busy > low + (at60 - low) / 2,
         "busy at 60 %% dirty: paced, not flat out (%llu of %llu dirty, dirty_low %llu)",
         (unsigned long long) busy, (unsigned long long) at60, (unsigned long long) low);
  double t0 = test_now ();
  while (dirty_blocks (v) > low && test_now () - t0 < 20)
    usleep (10000);
  CHECK (dirty_blocks (v) <= low, "idle: cleaned to dirty_low (%llu dirty)",
         (unsigned long long) dirty_blocks (v));
  /* (The idle cleaner may still be writing back as these writes start,
   * and paced write-back goes on while they run: on a slow build it can
   * clean a block before one pass of the slow tier has made it dirty
   * again, so the writes go round up to four times.) */
  b = 0; /* blocks 0 … b−1 now hold their second contents */
  uint64_t reached = 0;
  for (uint64_t w = 0; (reached = dirty_blocks (v)) < n * 80 / 100 && w < 4 * (SLOW / BS); w++) {
    uint64_t x = w % (SLOW / BS);
    fill (buf, BS, x + 7);
    CHECK (hc_volume_write (v, buf, BS, x * BS, 0, NULL) == 0, "write");
    b = w + 1 < SLOW / BS ? w + 1 : SLOW / BS;
  }
  CHECK (reached >= n * 80 / 100, "80 %% dirty (%llu of %llu)", (unsigned long long) reached,
         (unsigned long long) n);
  busy = stay_busy (v, 20, low);
  CHECK (busy <= low, "busy at 80 %% dirty: cleaned to dirty_low anyway (%llu dirty)",
         (unsigned long long) busy);
  for (uint64_t i = 0; i < n * 60 / 100 || i < b; i++) {
    fill (buf, BS, i < b ? i + 7 : i);
    uint8_t got[BS];
    CHECK (hc_volume_read (v, got, BS, i * BS, NULL) == 0 && memcmp (got, buf, BS) == 0,
           "block %llu reads back", (unsigned long long) i);
  }
  hc_volume_close (v);
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* dontneed over a range longer than the cache demotes every cached block
 * of it, not only those among its first cache-size blocks. */
static void
test_dontneed_long_range (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  static uint8_t buf[64 * 4096];
  char why[200];

  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  hc_volume *v = open_vol (fast, slow, false);
  const uint64_t n = v->dir.map.n, end = SLOW / 4096;
  CHECK (end > n + 64, "the slow tier is longer than the cache (%llu vs %llu blocks)",
         (unsigned long long) end, (unsigned long long) n);
  /* Cache the last 64 blocks, past the first n of the range. */
  CHECK (hc_volume_read (v, buf, sizeof buf, (end - 64) * 4096, NULL) == 0, "read");
  CHECK (hc_volume_advise (v, 0, SLOW, (struct hc_hint) { .advice = HC_ADVICE_DONTNEED }) == 0,
         "advise dontneed over the whole volume");
  unsigned cached = 0, demoted = 0;
  for (uint64_t b = end - 64; b < end; b++) {
    uint32_t c = hc_dir_find (&v->dir, b);
    if (c != HC_NIL) {
      cached++;
      demoted += (v->dir.map.blk[c].meta & HC_M_DEMOTED) != 0;
    }
  }
  CHECK (cached == 64 && demoted == 64, "%u of %u cached blocks past the first %llu demoted",
         demoted, cached, (unsigned long long) n);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (slow);
}

/* A class rule an administrator chose is a bound: obeyed from the first
 * request, whatever the evidence says. */
static void
test_chosen_class_rule (void)
{
  hc_tier *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct hc_open_opts o = { .no_cleaner = true };
  struct hc_parse_error err;
  static uint8_t buf[256 * 1024];
  struct hc_stats st;
  hc_classes *t;
  hc_volume *v;
  char why[200];

  hc_classes_new (&t);
  const char *conf = "background.admit_read = no\n";
  CHECK (hc_classes_load_text (t, conf, strlen (conf), &err) == 0, "config");
  o.classes = t;
  hc_tier_new_memory (FAST, &fast);
  hc_tier_new_memory (SLOW, &slow);
  hc_volume_format (fast, slow, &fo, why, sizeof why);
  CHECK (hc_volume_open (fast, slow, &o, &v, why, sizeof why) == 0, "open: %s", why);
  struct hc_ioctx bg = { .hint = { .cls = HC_CLASS_BACKGROUND } };
  CHECK (hc_volume_read (v, buf, sizeof buf, 0, &bg) == 0, "background read");
  hc_volume_stats (v, &st);
  CHECK (total (&st, HC_CLASS_BACKGROUND, 0) == 0
         && st.cls[HC_CLASS_BACKGROUND].bypass[0][HC_BYPASS_CLASS] == 64,
         "background bypassed by the chosen class rule");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (slow);
  hc_classes_free (t);
}

/* The metadata's flash (stats.meta_flash_bytes): every fast-tier write
 * below the data area, in the 4 KiB pages it touches, counted as a hook on
 * the tier counts it; kept across a close; and spent from the flash budget
 * beside the data. */
static uint64_t meta_pages_seen, meta_data_off = UINT64_MAX;

static int
count_meta (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) arg;
  if (after && rc == 0 && op == HOOK_WRITE && len && off < meta_data_off)
    meta_pages_seen += (off + len - 1) / 4096 - off / 4096 + 1;
  return 0;
}

static void
test_meta_flash (void)
{
  hc_tier *mem, *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITEBACK };
  struct hc_open_opts ro = { .read_only = true };
  struct hc_volume_info info;
  struct hc_stats st;
  hc_volume *v;
  char why[200];

  hc_tier_new_memory (FAST, &mem);
  hc_tier_new_memory (SLOW, &slow);
  memset (model, 0, SLOW);
  CHECK (hc_volume_format (mem, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (mem, slow, &ro, &v, why, sizeof why) == 0, "open: %s", why);
  hc_volume_get_info (v, &info);
  CHECK (hc_volume_close (v) == 0, "close");
  meta_data_off = info.data_off;
  CHECK (hook_new (mem, count_meta, NULL, &fast) == 0, "hook");

  v = open_vol (fast, slow, false);
  exercise (v, 3000, SLOW);
  for (uint64_t i = 0; i < 20; i++) { /* range records in the journal */
    struct hc_hint h = { .cls = HC_CLASS_METADATA };
    CHECK (hc_volume_advise (v, i * 3 * BS, BS, h) == 0 && hc_volume_flush (v) == 0, "advise");
  }
  CHECK (hc_volume_clean (v) == 0, "clean");
  hc_volume_stats (v, &st);
  CHECK (meta_pages_seen > 20, "metadata written: %llu pages", (unsigned long long) meta_pages_seen);
  CHECK_EQ (st.meta_flash_bytes, meta_pages_seen * 4096, "counted as the tier saw it");
  const uint64_t before = st.meta_flash_bytes;
  CHECK (hc_volume_close (v) == 0, "close");
  v = open_vol (fast, slow, false);
  hc_volume_stats (v, &st);
  CHECK (st.meta_flash_bytes > before && st.meta_flash_bytes <= meta_pages_seen * 4096,
         "kept across the close: %llu after, %llu before, %llu written in all",
         (unsigned long long) st.meta_flash_bytes, (unsigned long long) before,
         (unsigned long long) (meta_pages_seen * 4096));
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);

  /* A budget of 64 KiB a minute, spent by metadata alone: one block read
   * (the budget's first look), then range hints, each committed; the next
   * read miss is refused (second touch), as after as many data writes. */
  hc_tier_close (mem);
  hc_tier_new_memory (FAST, &mem);
  CHECK (hc_volume_format (mem, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  struct hc_open_opts bo = { .no_cleaner = true, .flash_budget = 1440u * 65536 };
  static uint8_t got[BS];
  CHECK (hc_volume_open (mem, slow, &bo, &v, why, sizeof why) == 0, "open: %s", why);
  CHECK (hc_volume_read (v, got, BS, 0, NULL) == 0, "read");
  for (uint64_t i = 0; i < 40; i++) {
    struct hc_hint h = { .cls = HC_CLASS_METADATA };
    CHECK (hc_volume_advise (v, (i * 3 + 100) * BS, BS, h) == 0 && hc_volume_flush (v) == 0,
           "advise");
  }
  CHECK (hc_volume_read (v, got, BS, BS, NULL) == 0, "read");
  hc_volume_stats (v, &st);
  uint64_t data = 0;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    data += st.cls[c].flash_bytes_written;
  CHECK (data == BS && st.meta_flash_bytes > 2 * 65536, "data %llu, metadata %llu bytes",
         (unsigned long long) data, (unsigned long long) st.meta_flash_bytes);
  CHECK_EQ (st.cls[0].blocks, 1, "the second read was refused: %llu cached",
            (unsigned long long) st.cls[0].blocks);
  CHECK (st.hint_effects & HC_FX_TOUCH, "the budget turned second touch on");
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (mem);
  hc_tier_close (slow);
}

/* Trials (trial.c) time each way of a fill and take the faster.  Here every
 * fast-tier write sleeps 100 µs, so a fill on the reader's thread (way 0)
 * costs the reader at least that per block, and a fill handed to the
 * filler (way 1) does not.  Each of eight fresh trials must have timed way
 * 0 at no less than the sleeps it contains and way 1 at more than nothing,
 * and chosen way 1 (six of eight at least: a preemption can cost way 1
 * its trial now and then).  Timed with the coarse clock (a tick every 1 to
 * 4 ms), way 1's 64 runs of a few microseconds summed to 0 unless a tick
 * fell inside one; a 4 KiB fill's two ways both did, and the trials chose
 * by where the ticks fell. */
#define TRIAL_SLEEP_NS 100000

static int
slow_fast_writes (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after, int rc)
{
  (void) arg, (void) off, (void) len, (void) rc;
  if (op == HOOK_WRITE && !after)
    nanosleep (&(struct timespec) { .tv_nsec = TRIAL_SLEEP_NS }, NULL);
  return 0;
}

static void
test_trials (void)
{
  hc_tier *fast_mem, *fast, *slow;
  struct hc_format_opts fo = { .mode = HC_MODE_WRITETHROUGH };
  struct hc_open_opts oo = { .seq_cutoff = UINT64_MAX };
  hc_volume *v = NULL;
  char why[200];
  uint8_t buf[4096];
  const uint64_t nslow = (64u << 20) / 4096;

  hc_tier_new_memory (16u << 20, &fast_mem);
  hc_tier_new_memory (nslow * 4096, &slow);
  CHECK (hook_new (fast_mem, slow_fast_writes, NULL, &fast) == 0, "hook tier");
  CHECK (hc_volume_format (fast, slow, &fo, why, sizeof why) == 0, "format: %s", why);
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  struct hc_trial *t = hc_fill_trial (v, 1);
  unsigned chose = 0, timed = 0;
  for (int round = 0; round < 8; round++) {
    pthread_mutex_lock (&v->lock);
    t->cycle = 0; /* the next miss starts a fresh cycle: its trials first */
    pthread_mutex_unlock (&v->lock);
    /* Single-block misses (every third block: no two in one run), each
     * read once: 64 trial runs of each way, then the choice. */
    for (uint64_t i = 0; i < 2 * HC_TRIAL_RUNS + 1; i++) {
      const uint64_t blk = (uint64_t) round * 1000 + 3 * i;
      CHECK (hc_volume_read (v, buf, sizeof buf, blk * 4096, NULL) == 0, "read %" PRIu64, blk);
    }
    pthread_mutex_lock (&v->lock);
    bool ok = t->units[0] == HC_TRIAL_RUNS && t->units[1] == HC_TRIAL_RUNS
              && t->ns[0] >= t->units[0] * TRIAL_SLEEP_NS && t->ns[1] > 0;
    timed += ok;
    chose += t->alt;
    if (!ok)
      printf ("# trial %d: way 0 %" PRIu64 " ns over %" PRIu64 " blocks, way 1 %" PRIu64
              " ns over %" PRIu64 "\n", round, t->ns[0], t->units[0], t->ns[1], t->units[1]);
    pthread_mutex_unlock (&v->lock);
  }
  CHECK (timed == 8, "trials timed both ways (way 0 at no less than its sleeps): %u of 8", timed);
  CHECK (chose >= 6, "trials chose the filler when the reader's fill sleeps: %u of 8", chose);
  /* The statistics say what the trials chose, or what a test forced. */
  struct hc_stats st;
  pthread_mutex_lock (&v->lock);
  bool alt = t->alt;
  v->fill_way[1].force = 2;
  v->write_way.force = 1;
  pthread_mutex_unlock (&v->lock);
  hc_volume_stats (v, &st);
  CHECK (st.ways == ((alt ? HC_WAY_FILL_BLOCK : 0) | HC_WAY_FILL_RUN), "ways: %#" PRIx64, st.ways);
  pthread_mutex_lock (&v->lock);
  v->fill_way[1].force = 1;
  v->write_way.force = 2;
  pthread_mutex_unlock (&v->lock);
  hc_volume_stats (v, &st);
  CHECK (st.ways == ((alt ? HC_WAY_FILL_BLOCK : 0) | HC_WAY_SLOW_BESIDE), "ways: %#" PRIx64,
         st.ways);
  CHECK (hc_volume_close (v) == 0, "close");
  /* Without background threads the caller does all: no way is a helper's. */
  oo.no_cleaner = true;
  CHECK (hc_volume_open (fast, slow, &oo, &v, why, sizeof why) == 0, "open: %s", why);
  v->fill_way[0].force = v->fill_way[1].force = v->write_way.force = 2;
  hc_volume_stats (v, &st);
  CHECK (st.ways == 0, "no helper threads, no ways: %#" PRIx64, st.ways);
  CHECK (hc_volume_close (v) == 0, "close");
  hc_tier_close (fast);
  hc_tier_close (fast_mem);
  hc_tier_close (slow);
}

int
main (void)
{
  test_modes ();
  test_refusals ();
  test_whole_slow_tier ();
  test_hints ();
  test_chosen_class_rule ();
  test_dontneed_long_range ();
  test_mode_switch_discard_zero ();
  test_fast_errors ();
  test_threads ();
  test_batched_writes ();
  test_in_place ();
  test_fast_sync ();
  test_write_through_unrecorded ();
  test_write_through_in_place_error ();
  test_second_touch ();
  test_readahead ();
  test_readahead_beside_random ();
  test_no_memory_for_records ();
  test_writeback_runs ();
  test_writeback_flushes_its_own ();
  test_sustained_writes ();
  test_paced_cleaning ();
  test_meta_flash ();
  test_trials ();
  return test_exit ("test_volume");
}
