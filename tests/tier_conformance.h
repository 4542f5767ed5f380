/* The tier conformance suite: the contract of include/hintcache/tier.h and
 * of its door (src/tier/tier.c), stated once and checked over any tier.
 * test_tier runs it over the memory tiers (calloc'd, mapped and started
 * from an image), file tiers (buffered, read-only, O_DIRECT) and the timing
 * decorator; test_tier_faulty over the fault decorator with no faults, alone
 * and in a power domain; test_tier_nbd over exports of nbdkit's memory
 * plugin with and without multi-conn, FUA, zero support or a request cap,
 * and over read-only exports.  What is specific to one kind of tier (fault
 * injection, power cuts, the NBD protocol, the backing file, O_DIRECT
 * alignment) stays in that tier's test.
 *
 * The contract, as checked here:
 *
 *   identity    the size is what the tier was made with and a multiple of
 *               HC_SECTOR_SIZE; the capabilities are exactly the expected
 *               ones, and a read-only tier claims neither FUA nor discard;
 *               the name is the expected one; the identity is a string
 *               (empty for everything but block devices);
 *   the door    a misaligned offset or length, a range past the end or
 *               wrapping around, an unknown write flag: -EINVAL, whatever
 *               the length, and nothing changes; a zero length inside the
 *               tier (its end included) is a successful no-op, except that
 *               an empty FUA write is a flush;
 *   contents    a new tier reads zeros where it is meant to; a write reads
 *               back, whole and in parts, and leaves its neighbours alone;
 *               a FUA write too; discard and zero read back zeros over
 *               exactly their range, whatever the capabilities (the door
 *               writes zeros where a tier cannot); a range discarded or
 *               zeroed takes writes again; the last sector is reachable;
 *   a model     random reads, writes (some FUA), zeros, discards and
 *               flushes of 1 sector to 4 MiB over the tier (or its first
 *               `span` bytes) agree with a model of it throughout and at
 *               the end — large requests cross any splitting a tier does;
 *   threads     four threads at once on disjoint ranges of the span (at
 *               most 16 MiB of it: writes, FUA writes, reads, zeros,
 *               discards, flushes) each read back exactly their own data;
 *   flush       succeeds, again and again, with or without writes pending;
 *   read-only   write, FUA write, zero and discard return -EROFS and
 *               change nothing; reads and flush work;
 *   persistence with HC_CAP_PERSISTENT, what was flushed or written with
 *               FUA is there after the tier is closed and opened again (the
 *               caller says how to reopen), at the same size.
 *
 * The suite's I/O is done in units of HC_SECTOR_SIZE, or of a larger
 * `unit` for tiers that need one (O_DIRECT: 4096), from page-aligned
 * buffers.  Include it after test.h, whose counters it shares; checks are
 * made on the calling thread only. */
#ifndef HC_TIER_CONFORMANCE_H
#define HC_TIER_CONFORMANCE_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hintcache/tier.h"
#include "test.h"

/* What the tier under test is expected to be. */
struct tier_caps {
  uint64_t size;    /* hc_tier_size */
  unsigned caps;    /* hc_tier_caps, exactly */
  const char *name; /* hc_tier_name, or NULL to check only that there is one */
  bool readonly;    /* writes are refused with -EROFS */
  bool zeroed;      /* a new tier reads zeros everywhere */
  unsigned unit;    /* granularity of the suite's I/O: 0 is HC_SECTOR_SIZE */
  uint64_t span;    /* how much of the tier the model and the threads cover:
                       0 is 16 MiB, or the whole of a smaller tier */
  /* Persistent tiers: closes t and opens the same storage again (NULL on
   * failure).  The suite then goes on with, and leaves the caller, the new
   * tier. */
  hc_tier *(*reopen) (hc_tier *t, void *arg);
  void *arg;
};

#define TC_MiB ((uint64_t) 1 << 20)
/* The largest request of the model, and the threads. */
#define TC_MAX_IO (4 * TC_MiB)
#define TC_THREADS 4

/* The suite's own generator (xorshift64), seeded per use. */
static inline uint64_t
tc_rand (uint64_t *s)
{
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* Fills buf with data that differs per seed and per byte offset, and is
 * never a run of zeros. */
static inline void
tc_fill (void *buf, size_t len, uint64_t seed)
{
  unsigned char *p = buf;
  uint64_t s = seed * 0x9e3779b97f4a7c15u + 1;

  for (size_t i = 0; i < len; i++) {
    if (i % 8 == 0)
      tc_rand (&s);
    p[i] = (unsigned char) ((s >> (i % 8 * 8)) | 1);
  }
}

/* A page-aligned buffer (O_DIRECT asks no more). */
static inline void *
tc_alloc (size_t len)
{
  void *p = NULL;

  return posix_memalign (&p, 4096, len ? len : 1) == 0 ? p : NULL;
}

static inline bool
tc_all_zero (const void *buf, size_t len)
{
  const unsigned char *p = buf;

  for (size_t i = 0; i < len; i++)
    if (p[i])
      return false;
  return true;
}

/* True if the tier reads back len bytes at off equal to want. */
static inline bool
tc_reads_as (hc_tier *t, uint64_t off, const void *want, size_t len)
{
  unsigned char *got = tc_alloc (len);
  bool same = got && hc_tier_read (t, got, len, off) == 0 && memcmp (got, want, len) == 0;

  free (got);
  return same;
}

/* True if the tier reads back zeros over [off, off+len). */
static inline bool
tc_reads_zero (hc_tier *t, uint64_t off, size_t len)
{
  unsigned char *got = tc_alloc (len);
  bool zero = got && hc_tier_read (t, got, len, off) == 0 && tc_all_zero (got, len);

  free (got);
  return zero;
}

/* Reads [off, off+len) in pieces of at most TC_MAX_IO into buf; 0 or the
 * first error. */
static inline int
tc_read_range (hc_tier *t, unsigned char *buf, uint64_t len, uint64_t off)
{
  int rc = 0;

  for (uint64_t at = 0; at < len && rc == 0; at += TC_MAX_IO)
    rc = hc_tier_read (t, buf + at, len - at < TC_MAX_IO ? len - at : TC_MAX_IO, off + at);
  return rc;
}

static inline unsigned
tc_unit (const struct tier_caps *c)
{
  return c->unit ? c->unit : HC_SECTOR_SIZE;
}

/* The part of the tier the model and the threads cover: a multiple of
 * TC_THREADS units. */
static inline uint64_t
tc_span (hc_tier *t, const struct tier_caps *c)
{
  uint64_t span = c->span ? c->span : 16 * TC_MiB, size = hc_tier_size (t);
  uint64_t q = (uint64_t) TC_THREADS * tc_unit (c);

  if (span > size)
    span = size;
  return span - span % q;
}

/* ---- What the tier says of itself. ---- */

static inline void
tc_identity (hc_tier *t, const char *what, const struct tier_caps *c)
{
  uint64_t size = hc_tier_size (t);
  unsigned caps = hc_tier_caps (t);
  const char *name = hc_tier_name (t), *ident = hc_tier_identity (t);

  CHECK (size == c->size, "%s: size %llu, expected %llu", what, (unsigned long long) size,
         (unsigned long long) c->size);
  CHECK (size % HC_SECTOR_SIZE == 0, "%s: size %llu in whole sectors", what,
         (unsigned long long) size);
  CHECK (caps == c->caps, "%s: caps %#x, expected %#x", what, caps, c->caps);
  /* Readahead is advice: it works where the tier says so, and is refused
   * (never pretended) elsewhere. */
  int pf = hc_tier_prefetch (t, 0, size);
  CHECK (pf == ((caps & HC_CAP_PREFETCH) ? 0 : -EOPNOTSUPP), "%s: prefetch gave %d", what, pf);
  CHECK (hc_tier_prefetch (t, size, HC_SECTOR_SIZE) == -EINVAL, "%s: prefetch past the end", what);
  CHECK (!c->readonly || !(caps & (HC_CAP_FUA | HC_CAP_DISCARD)),
         "%s: a read-only tier claims FUA or discard (%#x)", what, caps);
  CHECK (name && name[0] && strlen (name) < 128, "%s: a name", what);
  CHECK (!c->name || (name && strcmp (name, c->name) == 0), "%s: name %s, expected %s", what,
         name ? name : "(null)", c->name ? c->name : "");
  CHECK (ident && strlen (ident) < 64, "%s: an identity string", what);
}

/* ---- The door. ---- */

static inline void
tc_door (hc_tier *t, const char *what, const struct tier_caps *c)
{
  unsigned u = tc_unit (c);
  uint64_t size = hc_tier_size (t);
  unsigned char *buf = tc_alloc (2 * u), *before = tc_alloc (3 * u), *after = tc_alloc (3 * u);

  if (!buf || !before || !after) {
    CHECK (false, "%s: out of memory", what);
    goto out;
  }
  /* What the refused calls must leave alone: the first two units and the
   * last one. */
  CHECK (hc_tier_read (t, before, 2 * u, 0) == 0
         && hc_tier_read (t, before + 2 * u, u, size - u) == 0, "%s: read before", what);
  tc_fill (buf, 2 * u, 77);

  CHECK_EQ (hc_tier_read (t, buf, 512, 1), -EINVAL, "%s: misaligned offset", what);
  CHECK_EQ (hc_tier_read (t, buf, 100, 0), -EINVAL, "%s: misaligned length", what);
  CHECK_EQ (hc_tier_read (t, buf, 512, size), -EINVAL, "%s: read at the end", what);
  CHECK_EQ (hc_tier_read (t, buf, 1024, size - 512), -EINVAL, "%s: read across the end", what);
  CHECK_EQ (hc_tier_read (t, buf, 512, UINT64_MAX - 511), -EINVAL, "%s: read that wraps", what);
  CHECK_EQ (hc_tier_read (t, buf, SIZE_MAX - 511, 512), -EINVAL, "%s: huge read", what);
  CHECK_EQ (hc_tier_write (t, buf, 512, 256, 0), -EINVAL, "%s: misaligned write", what);
  CHECK_EQ (hc_tier_write (t, buf, 500, 0, 0), -EINVAL, "%s: misaligned write length", what);
  CHECK_EQ (hc_tier_write (t, buf, 512, size + 512, 0), -EINVAL, "%s: write beyond the end",
            what);
  CHECK_EQ (hc_tier_write (t, buf, 1024, size - 512, HC_TIER_FUA), -EINVAL,
            "%s: FUA write across the end", what);
  CHECK_EQ (hc_tier_write (t, buf, 512, 0, 2), -EINVAL, "%s: unknown write flag", what);
  CHECK_EQ (hc_tier_write (t, buf, 512, 0, ~0u), -EINVAL, "%s: every flag", what);
  CHECK_EQ (hc_tier_discard (t, 512, UINT64_MAX - 511), -EINVAL, "%s: wrapping range", what);
  CHECK_EQ (hc_tier_discard (t, 3, 512), -EINVAL, "%s: misaligned discard", what);
  CHECK_EQ (hc_tier_discard (t, 0, 700), -EINVAL, "%s: misaligned discard length", what);
  CHECK_EQ (hc_tier_discard (t, size - 512, 1024), -EINVAL, "%s: discard across the end", what);
  CHECK_EQ (hc_tier_zero (t, 0, size + 512), -EINVAL, "%s: zero beyond the end", what);
  CHECK_EQ (hc_tier_zero (t, 512, 3), -EINVAL, "%s: misaligned zero length", what);
  CHECK_EQ (hc_tier_zero (t, UINT64_MAX - 511, 1024), -EINVAL, "%s: zero that wraps", what);

  /* Alignment and range are checked whatever the length. */
  CHECK_EQ (hc_tier_read (t, buf, 0, 1), -EINVAL, "%s: empty misaligned read", what);
  CHECK_EQ (hc_tier_read (t, buf, 0, size + 512), -EINVAL, "%s: empty read past the end", what);
  CHECK_EQ (hc_tier_write (t, buf, 0, 7, 0), -EINVAL, "%s: empty misaligned write", what);
  CHECK_EQ (hc_tier_write (t, buf, 0, 0, 4), -EINVAL, "%s: empty write, unknown flag", what);
  CHECK_EQ (hc_tier_zero (t, size + 512, 0), -EINVAL, "%s: empty zero past the end", what);

  /* A zero length is a no-op, at the end too; an empty FUA write is a
   * flush (of a healthy tier: 0), read-only or not. */
  CHECK_EQ (hc_tier_read (t, buf, 0, 0), 0, "%s: empty read", what);
  CHECK_EQ (hc_tier_read (t, buf, 0, size), 0, "%s: empty read at the end", what);
  CHECK_EQ (hc_tier_write (t, buf, 0, 512, 0), 0, "%s: empty write", what);
  CHECK_EQ (hc_tier_write (t, buf, 0, size, 0), 0, "%s: empty write at the end", what);
  CHECK_EQ (hc_tier_write (t, buf, 0, 512, HC_TIER_FUA), 0, "%s: empty FUA write", what);
  CHECK_EQ (hc_tier_discard (t, 0, 0), 0, "%s: empty discard", what);
  CHECK_EQ (hc_tier_zero (t, size, 0), 0, "%s: empty zero", what);

  CHECK (hc_tier_read (t, after, 2 * u, 0) == 0 && hc_tier_read (t, after + 2 * u, u, size - u) == 0
         && memcmp (before, after, 3 * u) == 0, "%s: refused and empty calls changed nothing",
         what);
out:
  free (buf);
  free (before);
  free (after);
}

/* ---- Contents, step by step. ---- */

/* A new tier reads zeros (over the part the suite covers and the end). */
static inline void
tc_fresh (hc_tier *t, const char *what, const struct tier_caps *c)
{
  uint64_t span = tc_span (t, c), size = hc_tier_size (t), tail = 64 * (uint64_t) tc_unit (c);
  unsigned char *buf = tc_alloc (span);
  bool zero = buf && tc_read_range (t, buf, span, 0) == 0 && tc_all_zero (buf, span);

  CHECK (zero, "%s: a new tier reads zeros", what);
  if (tail > size)
    tail = size;
  CHECK (tc_reads_zero (t, size - tail, tail), "%s: zeros up to the end", what);
  free (buf);
}

/* Write, FUA write, flush, discard and zero with patterns, in units of u,
 * each checked against its neighbours. */
static inline void
tc_roundtrip (hc_tier *t, const char *what, const struct tier_caps *c)
{
  const uint64_t u = tc_unit (c), size = hc_tier_size (t);
  unsigned char *a = tc_alloc (16 * u), *b = tc_alloc (8 * u), *x = tc_alloc (2 * u);

  if (!a || !b || !x) {
    CHECK (false, "%s: out of memory", what);
    goto out;
  }
  tc_fill (a, 16 * u, 1);
  tc_fill (b, 8 * u, 2);
  tc_fill (x, 2 * u, 3);

  /* A write of 16 units at unit 8 reads back, whole and in parts; an
   * overlapping FUA write of 8 units at unit 12 replaces only its range. */
  CHECK_EQ (hc_tier_write (t, a, 16 * u, 8 * u, 0), 0, "%s: write", what);
  CHECK (tc_reads_as (t, 8 * u, a, 16 * u), "%s: read back", what);
  CHECK (tc_reads_as (t, 16 * u, a + 8 * u, u), "%s: read back a part", what);
  CHECK (tc_reads_as (t, 23 * u, a + 15 * u, u), "%s: read back the last unit", what);
  CHECK_EQ (hc_tier_write (t, b, 8 * u, 12 * u, HC_TIER_FUA), 0, "%s: FUA write", what);
  CHECK (tc_reads_as (t, 8 * u, a, 4 * u) && tc_reads_as (t, 12 * u, b, 8 * u)
         && tc_reads_as (t, 20 * u, a + 12 * u, 4 * u), "%s: overlapping FUA write", what);
  CHECK_EQ (hc_tier_flush (t), 0, "%s: flush", what);
  CHECK_EQ (hc_tier_flush (t), 0, "%s: flush with nothing pending", what);

  /* Discard the first half of b; the neighbours stay. */
  CHECK_EQ (hc_tier_discard (t, 12 * u, 4 * u), 0, "%s: discard", what);
  CHECK (tc_reads_zero (t, 12 * u, 4 * u), "%s: discarded reads zeros", what);
  CHECK (tc_reads_as (t, 8 * u, a, 4 * u) && tc_reads_as (t, 16 * u, b + 4 * u, 4 * u),
         "%s: discard kept the neighbours", what);
  /* Zero one unit in the second half of b (one sector from its
   * neighbours when u is a sector). */
  CHECK_EQ (hc_tier_zero (t, 17 * u, u), 0, "%s: zero", what);
  CHECK (tc_reads_zero (t, 17 * u, u), "%s: zeroed reads zeros", what);
  CHECK (tc_reads_as (t, 16 * u, b + 4 * u, u) && tc_reads_as (t, 18 * u, b + 6 * u, 2 * u)
         && tc_reads_as (t, 20 * u, a + 12 * u, 4 * u), "%s: zero kept the neighbours", what);
  /* Discarded and zeroed ranges take writes again. */
  CHECK (hc_tier_write (t, x, u, 12 * u, 0) == 0 && hc_tier_write (t, x + u, u, 17 * u, 0) == 0,
         "%s: write over discarded and zeroed", what);
  CHECK (tc_reads_as (t, 12 * u, x, u) && tc_reads_zero (t, 13 * u, 3 * u)
         && tc_reads_as (t, 17 * u, x + u, u), "%s: read back over discarded and zeroed", what);
  /* Over what was never written. */
  CHECK (hc_tier_discard (t, 40 * u, 4 * u) == 0 && tc_reads_zero (t, 40 * u, 4 * u),
         "%s: discard of an unwritten range", what);
  CHECK (hc_tier_zero (t, 44 * u, 4 * u) == 0 && tc_reads_zero (t, 44 * u, 4 * u),
         "%s: zero of an unwritten range", what);

  /* The last unit of the tier is reachable; a FUA write there too. */
  CHECK_EQ (hc_tier_write (t, b, u, size - u, 0), 0, "%s: last unit", what);
  CHECK (tc_reads_as (t, size - u, b, u), "%s: last unit back", what);
  CHECK_EQ (hc_tier_write (t, a, 2 * u, size - 2 * u, HC_TIER_FUA), 0, "%s: FUA at the end", what);
  CHECK (tc_reads_as (t, size - 2 * u, a, 2 * u), "%s: FUA at the end back", what);
  CHECK_EQ (hc_tier_read (t, b, 2 * u, size - u), -EINVAL, "%s: past the end", what);
  CHECK_EQ (hc_tier_zero (t, size - 2 * u, 2 * u), 0, "%s: zero at the end", what);
  CHECK (tc_reads_zero (t, size - 2 * u, 2 * u), "%s: zeroed at the end", what);
out:
  free (a);
  free (b);
  free (x);
}

/* ---- Against a model. ---- */

/* A request length in units: mostly small, a quarter of the time up to
 * max_units. */
static inline uint64_t
tc_len_units (uint64_t *s, uint64_t max_units)
{
  uint64_t n = tc_rand (s) % 4 ? 1 + tc_rand (s) % 64 : 1 + tc_rand (s) % max_units;

  return n < max_units ? n : max_units;
}

/* Random requests over [0, span) of a writable tier against a model, then
 * the whole span compared; on a read-only tier, random reads against one
 * read of the whole span. */
static inline void
tc_model (hc_tier *t, const char *what, const struct tier_caps *c)
{
  const uint64_t u = tc_unit (c), span = tc_span (t, c);
  const uint64_t max_units = (span / 2 < TC_MAX_IO ? span / 2 : TC_MAX_IO) / u;
  unsigned char *model = tc_alloc (span), *buf = tc_alloc (TC_MAX_IO);
  unsigned char *got = tc_alloc (span);
  unsigned bad = 0, first_bad = 0, ops = 0;
  uint64_t s = 0x2545f4914f6cdd1du ^ span;

  if (!model || !buf || !got) {
    CHECK (false, "%s: out of memory", what);
    goto out;
  }
  /* The tier holds what earlier checks wrote: the model starts from it. */
  CHECK_EQ (tc_read_range (t, model, span, 0), 0, "%s: read the span", what);
  for (unsigned i = 0; i < 400; i++) {
    uint64_t len = tc_len_units (&s, max_units) * u;
    uint64_t off = tc_rand (&s) % ((span - len) / u + 1) * u;
    unsigned kind = (unsigned) (tc_rand (&s) % 16);
    int rc;

    if (c->readonly || kind < 6) {
      rc = hc_tier_read (t, buf, len, off);
      rc = rc ? rc : memcmp (buf, model + off, len) ? 1 : 0;
    } else if (kind < 12) {
      tc_fill (buf, len, tc_rand (&s));
      rc = hc_tier_write (t, buf, len, off, kind == 11 ? HC_TIER_FUA : 0);
      memcpy (model + off, buf, len);
    } else if (kind < 14) {
      rc = kind == 12 ? hc_tier_zero (t, off, len) : hc_tier_discard (t, off, len);
      memset (model + off, 0, len);
    } else if (kind == 14) {
      rc = hc_tier_flush (t);
    } else {
      /* Read back what the last request left, at a unit's skew. */
      uint64_t o = off >= u ? off - u : off;
      rc = hc_tier_read (t, buf, len, o);
      rc = rc ? rc : memcmp (buf, model + o, len) ? 1 : 0;
    }
    ops++;
    if (rc && !bad++)
      first_bad = i;
  }
  CHECK (bad == 0, "%s: %u of %u random requests went wrong, the first at %u", what, bad, ops,
         first_bad);
  CHECK (tc_read_range (t, got, span, 0) == 0 && memcmp (got, model, span) == 0,
         "%s: the span agrees with the model", what);
out:
  free (model);
  free (buf);
  free (got);
}

/* ---- Threads. ---- */

struct tc_worker {
  hc_tier *t;
  const unsigned char *start; /* the span's content before, for read-only tiers */
  uint64_t base, len, unit;
  unsigned seed;
  bool readonly;
  unsigned bad;
};

/* Works on [base, base+len) alone: zero it, then random writes (some FUA),
 * reads, zeros and flushes against a model; at the end, all of it
 * compared.  Read-only: random reads against the content before. */
static void *
tc_worker_run (void *arg)
{
  struct tc_worker *w = arg;
  const uint64_t u = w->unit, max_units = (w->len / 2 < 256 * 1024 ? w->len / 2 : 256 * 1024) / u;
  unsigned char *model = tc_alloc (w->len), *buf = tc_alloc (w->len);
  uint64_t s = 0x9e3779b97f4a7c15u * (w->seed + 1);

  if (!model || !buf) {
    w->bad++;
    goto out;
  }
  if (w->readonly)
    memcpy (model, w->start + w->base, w->len);
  else if (hc_tier_zero (w->t, w->base, w->len) != 0)
    w->bad++;
  else
    memset (model, 0, w->len);
  for (unsigned i = 0; i < 200; i++) {
    uint64_t len = (1 + tc_rand (&s) % max_units) * u;
    uint64_t off = tc_rand (&s) % ((w->len - len) / u + 1) * u;
    unsigned kind = w->readonly ? 0 : (unsigned) (tc_rand (&s) % 32);
    if (kind < 12) {
      if (hc_tier_read (w->t, buf, len, w->base + off) != 0 || memcmp (buf, model + off, len))
        w->bad++;
    } else if (kind < 29) {
      tc_fill (buf, len, tc_rand (&s));
      if (hc_tier_write (w->t, buf, len, w->base + off, kind == 28 ? HC_TIER_FUA : 0) != 0)
        w->bad++;
      memcpy (model + off, buf, len);
    } else if (kind < 31) {
      if ((kind == 29 ? hc_tier_zero : hc_tier_discard) (w->t, w->base + off, len) != 0)
        w->bad++;
      memset (model + off, 0, len);
    } else if (hc_tier_flush (w->t) != 0) {
      w->bad++;
    }
  }
  if (tc_read_range (w->t, buf, w->len, w->base) != 0 || memcmp (buf, model, w->len))
    w->bad++;
out:
  free (model);
  free (buf);
  return NULL;
}

static inline void
tc_threads (hc_tier *t, const char *what, const struct tier_caps *c)
{
  const uint64_t span = tc_span (t, c) < 16 * TC_MiB ? tc_span (t, c) : 16 * TC_MiB;
  const uint64_t quarter = span / TC_THREADS;
  struct tc_worker w[TC_THREADS];
  pthread_t th[TC_THREADS];
  bool started[TC_THREADS] = { false };
  unsigned char *start = NULL;

  if (c->readonly && (!(start = tc_alloc (span)) || tc_read_range (t, start, span, 0) != 0)) {
    CHECK (false, "%s: threads: read the span", what);
    free (start);
    return;
  }
  for (unsigned i = 0; i < TC_THREADS; i++) {
    w[i] = (struct tc_worker) { .t = t, .start = start, .base = i * quarter, .len = quarter,
                                .unit = tc_unit (c), .seed = i, .readonly = c->readonly };
    started[i] = pthread_create (&th[i], NULL, tc_worker_run, &w[i]) == 0;
    CHECK (started[i], "%s: thread %u", what, i);
  }
  for (unsigned i = 0; i < TC_THREADS; i++) {
    if (!started[i])
      continue;
    pthread_join (th[i], NULL);
    CHECK (w[i].bad == 0, "%s: thread %u saw %u errors", what, i, w[i].bad);
  }
  CHECK_EQ (hc_tier_flush (t), 0, "%s: flush after the threads", what);
  free (start);
}

/* ---- Read-only tiers. ---- */

static inline void
tc_readonly (hc_tier *t, const char *what, const struct tier_caps *c)
{
  const uint64_t u = tc_unit (c);
  unsigned char *buf = tc_alloc (8 * u), *before = tc_alloc (8 * u);

  if (!buf || !before) {
    CHECK (false, "%s: out of memory", what);
    goto out;
  }
  CHECK_EQ (hc_tier_read (t, before, 8 * u, 0), 0, "%s: read", what);
  tc_fill (buf, 8 * u, 4);
  CHECK_EQ (hc_tier_write (t, buf, 8 * u, 0, 0), -EROFS, "%s: read-only write", what);
  CHECK_EQ (hc_tier_write (t, buf, u, 0, HC_TIER_FUA), -EROFS, "%s: read-only FUA write", what);
  CHECK_EQ (hc_tier_zero (t, 0, 8 * u), -EROFS, "%s: read-only zero", what);
  CHECK_EQ (hc_tier_discard (t, 0, 8 * u), -EROFS, "%s: read-only discard", what);
  CHECK_EQ (hc_tier_flush (t), 0, "%s: read-only flush", what);
  CHECK (tc_reads_as (t, 0, before, 8 * u), "%s: refused writes changed nothing", what);
out:
  free (buf);
  free (before);
}

/* ---- Persistence. ---- */

static inline void
tc_persist (hc_tier **tp, const char *what, const struct tier_caps *c)
{
  const uint64_t u = tc_unit (c);
  unsigned char *a = tc_alloc (8 * u), *before = tc_alloc (8 * u);
  hc_tier *t = *tp;

  CHECK (c->reopen, "%s: a persistent tier, but no way to reopen it given", what);
  if (!c->reopen || !a || !before)
    goto out;
  if (c->readonly) {
    CHECK_EQ (hc_tier_read (t, before, 8 * u, 0), 0, "%s: read before closing", what);
  } else {
    /* Flushed, and FUA: both must survive. */
    tc_fill (a, 8 * u, 5);
    CHECK_EQ (hc_tier_write (t, a, 4 * u, 0, 0), 0, "%s: write to keep", what);
    CHECK_EQ (hc_tier_flush (t), 0, "%s: flush it", what);
    CHECK_EQ (hc_tier_write (t, a + 4 * u, 4 * u, 4 * u, HC_TIER_FUA), 0, "%s: FUA write to keep",
              what);
    memcpy (before, a, 8 * u);
  }
  *tp = t = c->reopen (t, c->arg);
  CHECK (t, "%s: reopen", what);
  if (!t)
    goto out;
  CHECK (hc_tier_size (t) == c->size, "%s: same size after reopening", what);
  CHECK (tc_reads_as (t, 0, before, 8 * u), "%s: contents survive closing", what);
out:
  free (a);
  free (before);
}

/* Runs the suite over *tp, which is expected to be as c says; `what` names
 * it in messages.  A persistent tier is closed and reopened through
 * c->reopen, and *tp is then the new tier.  Returns the number of checks
 * that failed. */
static inline unsigned
tier_conformance (hc_tier **tp, const char *what, const struct tier_caps *c)
{
  unsigned failed = test_failures, checks = test_checks;
  hc_tier *t = *tp;

  CHECK (t, "%s: a tier to check", what);
  if (!t)
    return test_failures - failed;
  tc_identity (t, what, c);
  if (hc_tier_size (t) < 128 * (uint64_t) tc_unit (c)) {
    CHECK (false, "%s: too small for the suite (%llu bytes)", what,
           (unsigned long long) hc_tier_size (t));
    return test_failures - failed;
  }
  tc_door (t, what, c);
  if (c->zeroed)
    tc_fresh (t, what, c);
  if (c->readonly)
    tc_readonly (t, what, c);
  else
    tc_roundtrip (t, what, c);
  tc_model (t, what, c);
  tc_threads (t, what, c);
  if (c->caps & HC_CAP_PERSISTENT)
    tc_persist (tp, what, c);
  printf ("%s: conformance: %u checks, %u failed\n", what, test_checks - checks,
          test_failures - failed);
  return test_failures - failed;
}

#endif /* HC_TIER_CONFORMANCE_H */
