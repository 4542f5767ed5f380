/* The volume's lifecycle: format, open, close, mode, statistics, streams,
 * and the offline check.
 *
 * Opening reads the superblock, checks the slow tier's identity, loads the
 * table and range hints and replays the journal (load.c), then — unless
 * read-only — checkpoints at once, with the journal's sequence numbers moved
 * a full ring ahead: a commit cut short by the crash may have left sectors
 * whose numbers the next commits would reuse, and moving past them makes
 * sure replay can never splice them in.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

static const char *const mode_names[HC_MODE_COUNT] = {
  [HC_MODE_WRITETHROUGH] = "writethrough", [HC_MODE_WRITEBACK] = "writeback",
  [HC_MODE_WRITEAROUND] = "writearound", [HC_MODE_PASSTHROUGH] = "passthrough",
};
static const char *const mode_short[HC_MODE_COUNT] = { "wt", "wb", "wa", "pt" };

const char *
hc_mode_name (unsigned mode)
{
  return mode < HC_MODE_COUNT ? mode_names[mode] : NULL;
}

int
hc_mode_parse (const char *name, enum hc_mode *mode)
{
  int i = hc_name_find (mode_names, HC_MODE_COUNT, name);

  if (i < 0 && (i = hc_name_find (mode_short, HC_MODE_COUNT, name)) < 0)
    return i;
  *mode = (enum hc_mode) i;
  return 0;
}

const char *
hc_policy_name (unsigned index)
{
  /* The default first, then the others in registry order. */
  if (index == 0)
    return hc_policy_name_of (HC_POLICY_DEFAULT);
  unsigned k = 0;
  for (unsigned id = 0; id < HC_POLICY_COUNT; id++)
    if (id != HC_POLICY_DEFAULT && ++k == index)
      return hc_policy_name_of (id);
  return NULL;
}

static int open_volume (hc_tier *fast, hc_tier *slow, const struct hc_open_opts *o, bool any_slow,
                        struct hc_repair_report *salvage, hc_volume **out, char *why,
                        size_t whylen);
static void destroy (hc_volume *v);

/* May a format go over what the fast tier holds?  Formatting destroys the
 * cache's contents, so anything that may be a volume counts as one: a
 * damaged superblock, an I/O error, another format version.  To replace a
 * volume, it must open (with whatever slow tier it belongs to) and hold
 * no dirty data. */
static int
may_format (hc_tier *fast, hc_tier *slow, enum hc_format_over over, char *why, size_t whylen)
{
  struct hc_super sb;
  char reason[200];
  int rc;

  if (over == HC_FORMAT_DISCARD)
    return 0;
  rc = hc_meta_read_sb (fast, &sb, NULL, reason, sizeof reason);
  if (rc == -EINVAL)
    return 0; /* clearly not a volume */
  if (over == HC_FORMAT_NEW || rc < 0) {
    snprintf (why, whylen, "%s%s; refusing to format over it (%s)",
              rc == 0 ? "the fast tier already holds a hintcache volume" : "the fast tier may hold "
              "a hintcache volume: ", rc == 0 ? "" : reason,
              rc == 0 ? "replacing a volume with no dirty data is allowed when asked" : "only "
              "discarding whatever it holds is allowed");
    return -EEXIST;
  }
  struct hc_open_opts oo = { .read_only = true, .no_cleaner = true };
  hc_volume *v;
  if ((rc = open_volume (fast, slow, &oo, true, NULL, &v, reason, sizeof reason)) < 0) {
    snprintf (why, whylen, "the fast tier holds a hintcache volume that does not open (%s), so "
              "whether it holds dirty data is unknown; refusing to replace it", reason);
    return -EEXIST;
  }
  uint64_t dirty = hc_vol_dirty (v);
  destroy (v);
  if (dirty) {
    snprintf (why, whylen, "the fast tier's volume holds %" PRIu64 " dirty blocks not yet on its "
              "slow tier; write them back (hintcache clean) or discard them", dirty);
    return -EBUSY;
  }
  return 0;
}

int
hc_volume_format (hc_tier *fast, hc_tier *slow, const struct hc_format_opts *o, char *why,
                  size_t whylen)
{
  char dummy[8];
  int rc;

  why = hc_why (why, &whylen, dummy, sizeof dummy);
  if (o && (unsigned) o->over > HC_FORMAT_DISCARD) {
    snprintf (why, whylen, "unknown format-over choice %u", (unsigned) o->over);
    return -EINVAL;
  }
  if ((rc = hc_meta_format (fast, slow, o, true, why, whylen)) < 0
      || (rc = may_format (fast, slow, o ? o->over : HC_FORMAT_NEW, why, whylen)) < 0)
    return rc;
  return hc_meta_format (fast, slow, o, false, why, whylen);
}

/* Frees a volume's memory (its threads are stopped). */
static void
destroy (hc_volume *v)
{
  hc_dir_fini (&v->dir);
  hc_ranges_fini (&v->ranges);
  free ((void *) v->pins);
  free (v->jbuf);
  free (v->table_dirty);
  free (v->table_prev);
  free (v->sum);
  free (v->prefetch);
  free (atomic_load (&v->spare_bounce));
  hc_u64set_free (&v->unmapped);
  hc_u64set_free (&v->unmapped_committing);
  pthread_mutex_destroy (&v->lock);
  pthread_mutex_destroy (&v->commit_lock);
  pthread_mutex_destroy (&v->ra.lock);
  for (unsigned i = 0; i < HC_RA_SHARED; i++) {
    pthread_mutex_destroy (&v->ra.w[i].lock);
    free (v->ra.w[i].buf);
  }
  pthread_cond_destroy (&v->wake);
  pthread_cond_destroy (&v->space);
  pthread_cond_destroy (&v->fill_wake);
  pthread_cond_destroy (&v->writer_wake);
  pthread_cond_destroy (&v->writer_done);
  for (unsigned i = 0; v->stripes && i < v->nstripes; i++)
    pthread_rwlock_destroy (&v->stripes[i]);
  free (v->stripes);
  free (v->stripe_gen);
  free (v->fill_ring);
  free (v);
}

/* any_slow: skip the slow tier's identity check (to look at a volume without its
 * slow tier, read-only).  salvage: load leniently, counting what is passed
 * over (read-only; hc_volume_repair). */
static int
open_volume (hc_tier *fast, hc_tier *slow, const struct hc_open_opts *o, bool any_slow,
             struct hc_repair_report *salvage, hc_volume **out, char *why, size_t whylen)
{
  struct hc_open_opts def = { 0 };
  hc_volume *v;
  struct hc_super sb;
  struct hc_timing_params disk;
  int rc;

  if (!o)
    o = &def;
  unsigned damaged = 0;
  if ((rc = hc_meta_read_sb (fast, &sb, &damaged, why, whylen)) < 0)
    return rc;
  if (hc_tier_size (fast) < sb.fast_size) {
    snprintf (why, whylen, "the fast tier is truncated: %llu bytes, the volume needs %llu",
              (unsigned long long) hc_tier_size (fast), (unsigned long long) sb.fast_size);
    return -EINVAL;
  }
  /* Aligned as its type asks: its busiest words have cache lines of their own. */
  if (!(v = aligned_alloc (_Alignof (hc_volume), sizeof *v)))
    return -ENOMEM;
  memset (v, 0, sizeof *v);
  v->fast = fast;
  v->slow = slow;
  v->sb = sb;
  v->bs = sb.block_size;
  v->bshift = (uint32_t) __builtin_ctz (sb.block_size);
  v->nslow = sb.volume_size >> v->bshift;
  v->mode = (enum hc_mode) sb.mode;
  v->opts = *o;
  if (!v->opts.dirty_high || v->opts.dirty_high > 100)
    v->opts.dirty_high = 50;
  if (!v->opts.dirty_low || v->opts.dirty_low >= v->opts.dirty_high)
    v->opts.dirty_low = v->opts.dirty_high / 2;
  if (!v->opts.seq_cutoff)
    v->opts.seq_cutoff = 4u << 20;
  v->device_hint = o->device_hint;
  v->seed = hc_get64 (sb.cache_uuid) ^ hc_get64 (sb.cache_uuid + 8);
  v->was_clean = sb.flags & HC_SB_CLEAN;
  v->any_slow = any_slow && o->read_only;
  v->sb_damaged = damaged;
  v->salvage = salvage && o->read_only ? salvage : NULL;
  /* The volume lock is held for short stretches (a lookup, a policy step)
   * by every request: a thread that finds it busy spins a little before it
   * sleeps (glibc's adaptive mutex), since the wait is shorter than a
   * futex's sleep and wake-up.  Two threads reading hits in memory: 1.38 M
   * reads/s with a plain mutex, 1.60 M with this one. */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init (&ma);
  pthread_mutexattr_settype (&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init (&v->lock, &ma);
  pthread_mutexattr_destroy (&ma);
  pthread_mutex_init (&v->commit_lock, NULL);
  pthread_mutex_init (&v->ra.lock, NULL);
  for (unsigned i = 0; i < HC_RA_SHARED; i++)
    pthread_mutex_init (&v->ra.w[i].lock, NULL);
  pthread_cond_init (&v->wake, NULL);
  pthread_cond_init (&v->space, NULL);
  pthread_cond_init (&v->fill_wake, NULL);
  pthread_cond_init (&v->writer_wake, NULL);
  pthread_cond_init (&v->writer_done, NULL);
  for (v->nstripes = HC_STRIPES_MIN; v->nstripes < HC_STRIPES && v->nstripes < v->nslow;)
    v->nstripes *= 2;
  v->stripe_gen = calloc (v->nstripes, sizeof *v->stripe_gen);
  if ((v->stripes = malloc (v->nstripes * sizeof *v->stripes)))
    for (unsigned i = 0; i < v->nstripes; i++)
      pthread_rwlock_init (&v->stripes[i], NULL);
  hc_list_init (&v->committing);
  hc_ranges_init (&v->ranges, (uint32_t) (sb.range_sectors * HC_FMT_RANGE_PER_SECTOR));
  v->pins = calloc (sb.nblocks, sizeof *v->pins);
  v->table_dirty = calloc ((sb.table_sectors + 7) / 8, 1);
  v->table_prev = calloc ((sb.table_sectors + 7) / 8, 1);
  if (!v->stripes || !v->stripe_gen || !v->pins || !v->table_dirty || !v->table_prev) {
    rc = -ENOMEM;
    goto fail_early;
  }
  if ((rc = hc_dir_init (&v->dir, sb.nblocks, sb.policy, o->classes, true)) < 0)
    goto fail_early;
  hc_timing_defaults (&disk, true); /* the slow tier is priced as a disk */
  hc_dir_set_request_cost (&v->dir, (uint32_t) lround (hc_timing_request_blocks (&disk, sb.block_size)));
  hc_budget_init (&v->budget, o->flash_budget);
  if ((o->second_touch || o->flash_budget) && (rc = hc_dir_set_second_touch (&v->dir, o->second_touch)) < 0) {
    snprintf (why, whylen, "policy %s has no second-touch promotion (hintaware has)",
              hc_policy_name_of (sb.policy));
    goto fail;
  }
  if ((rc = hc_meta_load (v, why, whylen)) < 0)
    goto fail;
  if (!v->was_clean || v->replayed || v->tail_damaged || damaged) {
    /* The other checkpoint copy may lag the current one by anything: the
     * first checkpoint rewrites it whole. */
    memset (v->table_prev, 0xff, (sb.table_sectors + 7) / 8);
    v->ranges_prev = true;
  } else if (!o->read_only) {
    hc_meta_check_other (v);
  }
  if (!o->read_only) {
    /* What this open found is made durable before anything is served: the
     * slow tier may hold writes of a run whose flush failed or never came
     * (a crash of the process, not of the machine), which a power cut could
     * still take back — after a fill had made a clean copy of them, or a
     * read had returned them.  The checkpoint flushes the slow tier first. */
    v->slow_dirty = true;
    v->next_seq += sb.journal_sectors;
    if ((rc = hc_meta_commit (v, true)) < 0) {
      snprintf (why, whylen, "writing the checkpoint after recovery: %s", strerror (-rc));
      goto fail;
    }
    v->settle_idle_ns = 60 * 1000000000ull;  /* when idle, at most once a minute */
    v->settle_busy_ns = 600 * 1000000000ull; /* in any case every ten minutes */
    if (!o->no_cleaner && ((rc = hc_cleaner_start (v)) < 0 || (rc = hc_fill_start (v)) < 0
                           || (rc = hc_writer_start (v)) < 0)) {
      snprintf (why, whylen, "starting the %s: %s",
                !v->cleaner_started ? "cleaner" : !v->filler_started ? "filler" : "slow writer",
                strerror (-rc));
      goto fail;
    }
  }
  *out = v;
  return 0;
fail_early:
  snprintf (why, whylen, "%s", strerror (-rc));
fail:
  hc_writer_stop (v);
  hc_fill_stop (v);
  hc_cleaner_stop (v);
  destroy (v);
  return rc;
}

int
hc_volume_open (hc_tier *fast, hc_tier *slow, const struct hc_open_opts *o, hc_volume **out,
                char *why, size_t whylen)
{
  char dummy[8];
  why = hc_why (why, &whylen, dummy, sizeof dummy);
  return open_volume (fast, slow, o, false, NULL, out, why, whylen);
}

int
hc_volume_close (hc_volume *v)
{
  int rc = 0;

  if (!v)
    return 0;
  hc_writer_stop (v);
  hc_fill_stop (v);
  hc_cleaner_stop (v);
  if (v->failed)
    rc = -EIO; /* what the failed commit held was never made durable */
  else if (!v->opts.read_only) {
    /* Nothing recorded dirty that is clean; then two checkpoints, one into
     * each copy, so that both agree and the next open need not rewrite one
     * whole; then the clean mark. */
    long settled = hc_vol_settle (v, false);
    rc = settled < 0 ? (int) settled : hc_meta_commit (v, true);
    if (rc == 0)
      rc = hc_meta_commit (v, true);
    if (rc == 0) {
      /* The slow tier as it is left: nothing writes it until the next
       * open, which compares.  (Unreadable: the mark says no fingerprint.) */
      v->slow_fp_valid = hc_meta_slow_fingerprint (v->slow, &v->sb, &v->sb.slow_fp) == 0;
      hc_lock (&v->commit_lock);
      rc = hc_meta_write_sb (v, true);
      pthread_mutex_unlock (&v->commit_lock);
    }
  }
  destroy (v);
  return rc;
}

uint64_t
hc_volume_size (const hc_volume *v)
{
  return v->sb.volume_size;
}

uint32_t
hc_volume_block_size (const hc_volume *v)
{
  return v->bs;
}

enum hc_mode
hc_volume_mode (const hc_volume *v)
{
  return __atomic_load_n (&v->mode, __ATOMIC_RELAXED);
}

int
hc_volume_clean (hc_volume *v)
{
  unsigned door = hc_vol_enter (v);
  long n = hc_clean_to (v, 0);
  if (n >= 0)
    n = hc_vol_settle (v, false);
  hc_vol_leave (v, door);
  if (n < 0)
    return (int) n;
  return hc_meta_commit (v, false);
}

/* A switch to any mode but write-back is done as dm-cache leaves
 * write-back: no reader may ever be sent around dirty data, so the volume
 * first stops making dirty data that lasts (write-back becomes
 * write-through meanwhile; reads still see the cache), writes back
 * everything, and takes the new mode only once nothing is dirty, with
 * every stripe held so that no write is half-way.  If the write-back
 * fails, the old mode comes back and the call fails.  (Reads in
 * pass-through still take a dirty copy should one be there: after a crash
 * in the middle of a failed write-through, say.) */
int
hc_volume_set_mode (hc_volume *v, enum hc_mode mode)
{
  int rc = 0;

  if ((unsigned) mode >= HC_MODE_COUNT)
    return -EINVAL;
  if (v->opts.read_only)
    return -EROFS;
  hc_lock (&v->lock);
  enum hc_mode old = v->mode;
  /* Any mode may hold dirty blocks: write-back, and the others when a
   * write-through's slow write failed. */
  bool leaving = mode != HC_MODE_WRITEBACK && mode != old;
  __atomic_store_n (&v->mode, !leaving ? mode : old == HC_MODE_WRITEBACK ? HC_MODE_WRITETHROUGH : old,
                   __ATOMIC_RELAXED); /* (stored atomically: read without the lock too) */
  pthread_mutex_unlock (&v->lock);
  if (leaving) {
    for (int attempt = 0; rc == 0; attempt++) {
      if ((rc = hc_volume_clean (v)) < 0)
        break;
      hc_vol_lock_stripes (v);
      hc_lock (&v->lock);
      bool clean = hc_vol_dirty (v) == 0;
      if (clean)
        __atomic_store_n (&v->mode, mode, __ATOMIC_RELAXED);
      pthread_mutex_unlock (&v->lock);
      hc_vol_unlock_stripes (v);
      if (clean)
        break;
      if (attempt == 100)
        rc = -EBUSY; /* (write-through leaves nothing dirty for long) */
    }
    if (rc < 0) {
      hc_lock (&v->lock);
      __atomic_store_n (&v->mode, old, __ATOMIC_RELAXED);
      pthread_mutex_unlock (&v->lock);
      return rc;
    }
  }
  if ((rc = hc_meta_commit (v, false)) < 0)
    return rc;
  hc_lock (&v->commit_lock);
  rc = hc_meta_write_sb (v, false);
  pthread_mutex_unlock (&v->commit_lock);
  return rc;
}

/* Does the trial send its work the second way (forced, or as last chosen)? */
static bool
trial_chose (const struct hc_trial *t)
{
  return t->force ? t->force == 2 : t->alt;
}

int
hc_volume_stats (hc_volume *v, struct hc_stats *out)
{
  hc_lock (&v->lock);
  hc_dir_stats (&v->dir, out);
  out->ways = (v->filler_started && trial_chose (&v->fill_way[0]) ? HC_WAY_FILL_BLOCK : 0)
              | (v->filler_started && trial_chose (&v->fill_way[1]) ? HC_WAY_FILL_RUN : 0)
              | (v->writer_started && trial_chose (&v->write_way) ? HC_WAY_SLOW_BESIDE : 0);
  pthread_mutex_unlock (&v->lock);
  out->meta_flash_bytes = atomic_load_explicit (&v->meta_flash, memory_order_relaxed);
  return 0;
}

void
hc_volume_get_info (hc_volume *v, struct hc_volume_info *out)
{
  memset (out, 0, sizeof *out);
  hc_lock (&v->lock); /* the directory's size, the range table and the counters move under it */
  memcpy (out->cache_uuid, v->sb.cache_uuid, 16);
  out->format_version = v->sb.version;
  out->block_size = v->bs;
  out->nblocks = v->sb.nblocks;
  out->volume_size = v->sb.volume_size;
  out->data_off = v->sb.data_off;
  out->journal_sectors = v->sb.journal_sectors;
  out->mode = __atomic_load_n (&v->mode, __ATOMIC_RELAXED);
  snprintf (out->policy, sizeof out->policy, "%s", v->dir.policy.ops->name);
  snprintf (out->slow_path, sizeof out->slow_path, "%s", v->sb.slow_path);
  snprintf (out->slow_identity, sizeof out->slow_identity, "%s", v->sb.slow_id);
  out->slow_fingerprint = v->slow_fp_checked;
  out->checksums = v->sum != NULL;
  out->was_clean = v->was_clean;
  out->replayed = v->replayed;
  out->ram_bytes = hc_dir_bytes (&v->dir) + v->sb.nblocks * sizeof *v->pins;
  out->range_hints = v->ranges.n;
  out->sb_damaged = v->sb_damaged;
  out->degraded = atomic_load (&v->degraded);
  out->degraded_events = v->degraded_events;
  out->tail_damaged = v->tail_damaged;
  pthread_mutex_unlock (&v->lock);
}

int
hc_volume_degraded (const hc_volume *v)
{
  return atomic_load_explicit (&v->degraded, memory_order_relaxed);
}

int
hc_stream_new (hc_volume *v, struct hc_hint default_hint, hc_stream **out)
{
  hc_stream *s;

  if (hc_hint_check (default_hint) < 0)
    return -EINVAL;
  if (!(s = calloc (1, sizeof *s)))
    return -ENOMEM;
  s->v = v;
  s->hint = default_hint;
  pthread_mutex_init (&s->ra.lock, NULL);
  *out = s;
  return 0;
}

void
hc_stream_free (hc_stream *s)
{
  if (!s)
    return;
  pthread_mutex_destroy (&s->ra.lock);
  free (s->ra.buf);
  free (s);
}

int
hc_volume_check (hc_tier *fast, hc_tier *slow, char *why, size_t whylen)
{
  struct hc_open_opts o = { .read_only = true, .no_cleaner = true };
  hc_volume *v;
  char dummy[8];
  int rc;

  why = hc_why (why, &whylen, dummy, sizeof dummy);
  if ((rc = open_volume (fast, slow, &o, false, NULL, &v, why, whylen)) < 0)
    return rc;
  /* Both superblock copies were decoded by the open; the table, range
   * hints, journal and mapping invariants were checked by the load. */
  if (v->sb_damaged || v->tail_damaged)
    snprintf (why, whylen, "%s%s%s", v->sb_damaged == 1 ? "superblock A is damaged (B is used)"
                                     : v->sb_damaged == 2 ? "superblock B is damaged (A is used)" : "",
              v->sb_damaged && v->tail_damaged ? "; " : "",
              v->tail_damaged ? "the journal ends in a commit cut short (dropped)" : "");
  destroy (v);
  return 0;
}

/* Repair (see volume.h).  The salvage is read-only until every dirty block
 * that can be proven has reached the slow tier and it is flushed; only then
 * is the fast tier formatted anew, so a repair cut short by a crash or an
 * error can be run again from the same state. */
int
hc_volume_repair (hc_tier *fast, hc_tier *slow, struct hc_repair_report *rep, char *why,
                  size_t whylen)
{
  struct hc_open_opts ro = { .read_only = true, .no_cleaner = true }, rw = { .no_cleaner = true };
  struct hc_super sb;
  hc_volume *v;
  char dummy[8];
  int rc;

  why = hc_why (why, &whylen, dummy, sizeof dummy);
  memset (rep, 0, sizeof *rep);
  if ((rc = hc_meta_read_sb (fast, &sb, NULL, why, whylen)) < 0)
    return rc; /* nothing to salvage from */
  rep->block_size = sb.block_size;
  rc = hc_volume_check (fast, slow, why, whylen);
  if (rc == 0) {
    if (!why[0])
      return 0;
    /* What a read-write open repairs (a superblock copy, a torn tail). */
    if ((rc = open_volume (fast, slow, &rw, false, NULL, &v, why, whylen)) == 0
        && (rc = hc_volume_close (v)) == 0)
      rep->repaired = true;
    return rc;
  }
  if (rc == -ENODEV || rc == -EPROTONOSUPPORT || rc == -EINVAL)
    return rc; /* another slow tier, another version: not ours to repair */

  why[0] = '\0';
  if ((rc = open_volume (fast, slow, &ro, false, rep, &v, why, whylen)) < 0)
    return rc;
  uint8_t *buf = aligned_alloc (4096, v->bs);
  if (!buf) {
    destroy (v);
    return -ENOMEM;
  }
  for (uint32_t c = 0; c < v->dir.map.n && rc == 0; c++) {
    uint64_t w = v->dir.map.blk[c].meta;
    if (!(w & HC_M_VALID) || !(w & HC_M_DIRTY))
      continue;
    uint64_t blk = hc_meta_origin (w);
    if (hc_tier_read (fast, buf, v->bs, v->sb.data_off + (uint64_t) c * v->bs) < 0
        || !hc_vol_verify (v, c, blk, buf)) {
      rep->unreadable++;
      hc_repair_lost (rep, blk);
      continue;
    }
    if ((rc = hc_tier_write (slow, buf, v->bs, blk << v->bshift, 0)) < 0)
      snprintf (why, whylen, "writing block %" PRIu64 " back to the slow tier: %s; nothing "
                "else changed, the repair can be run again", blk, strerror (-rc));
    else
      rep->written_back++;
  }
  free (buf);
  if (rc == 0 && (rc = hc_tier_flush (slow)) < 0)
    snprintf (why, whylen, "flushing the slow tier: %s; the repair can be run again",
              strerror (-rc));
  /* The new volume: the same options, the range hints carried over. */
  struct hc_ranges ranges = v->ranges;
  memset (&v->ranges, 0, sizeof v->ranges);
  struct hc_format_opts fo = { .block_size = v->sb.block_size, .mode = v->sb.mode,
                               .policy = hc_policy_name_of (v->sb.policy),
                               .max_ranges = (uint32_t) (v->sb.range_sectors
                                                         * HC_FMT_RANGE_PER_SECTOR),
                               .over = HC_FORMAT_DISCARD,
                               .checksums = (v->sb.features & HC_FEAT_SUMS) != 0 };
  char path[HC_FMT_PATH_MAX + 1];
  snprintf (path, sizeof path, "%s", v->sb.slow_path);
  fo.slow_path = path;
  destroy (v);
  if (rc == 0 && (rc = hc_volume_format (fast, slow, &fo, why, whylen)) == 0
      && (rc = open_volume (fast, slow, &rw, false, NULL, &v, why, whylen)) == 0) {
    hc_lock (&v->lock);
    for (uint32_t i = 0; i < ranges.n; i++) {
      const struct hc_range *p = &ranges.r[i];
      if (hc_ranges_set (&v->ranges, p->start, p->end, p->cls, p->advice, p->src) == 0) {
        hc_meta_record_range (v, p->start, p->end, false, p->src, p->cls, p->advice);
        rep->range_hints_kept++;
      }
    }
    pthread_mutex_unlock (&v->lock);
    rc = hc_volume_close (v);
  }
  hc_ranges_fini (&ranges);
  if (rc == 0)
    rep->repaired = rep->rebuilt = rep->stats_reset = true;
  return rc;
}

int
hc_volume_slow_path (hc_tier *fast, char *path, size_t len)
{
  struct hc_super sb;
  char why[160];
  int rc = hc_meta_read_sb (fast, &sb, NULL, why, sizeof why);

  if (rc < 0)
    return rc;
  snprintf (path, len, "%s", sb.slow_path);
  return 0;
}
