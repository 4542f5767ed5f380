/* hintcache — the volume: two tiers made into one hybrid drive.
 *
 * A volume caches blocks of a large slow tier on a small fast tier, honours
 * hints, never loses acknowledged data and recovers exactly after a crash.
 *
 * Consistency contract.  The volume behaves like a disk with a volatile
 * write cache: after a power cut at any moment, reopening gives, for every
 * block, the data of the last write that completed before the last completed
 * flush, or of a later write to that block — never older data, never data
 * that was never written, never a mix within one block of a write
 * acknowledged with HC_VOL_FUA (which is durable when it returns).  Dirty
 * data is never lost, and after recovery the dirty set is exact.
 *
 * Hints.  Each I/O may carry a context (struct hc_ioctx): its own hint, the
 * submitting process's hint, and a stream.  The volume resolves the I/O's
 * hint from, in precedence order, the I/O's own hint, the range hints stored
 * with hc_volume_advise, the stream's default, the process hint, and the
 * device default (hc_hint_resolve).
 *
 * Thread safety: every function may be called from any number of threads at
 * once, except hc_volume_close (no other call may be running or start).
 * Locking rules are in docs/ARCHITECTURE.md.
 *
 * Functions return 0 or a negative errno and never print or exit; those
 * that can fail for a reason worth telling take a `why` buffer.
 */
#ifndef HINTCACHE_VOLUME_H
#define HINTCACHE_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "classes.h"
#include "hint.h"
#include "stats.h"
#include "tier.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hc_volume hc_volume;
typedef struct hc_stream hc_stream;

/* Cache modes. */
enum hc_mode {
  HC_MODE_WRITETHROUGH = 0, /* writes go to both tiers; reads are cached */
  HC_MODE_WRITEBACK = 1,    /* writes go to the fast tier; a cleaner writes them back */
  HC_MODE_WRITEAROUND = 2,  /* write misses go to the slow tier only; reads are cached */
  HC_MODE_PASSTHROUGH = 3,  /* everything goes to the slow tier; cached copies are dropped */
};
#define HC_MODE_COUNT 4

/* Returns a mode's name ("writeback"), or NULL. */
const char *hc_mode_name (unsigned mode);

/* Parses a mode name; also accepts wt, wb, wa, pt.  Returns 0 or -EINVAL. */
int hc_mode_parse (const char *name, enum hc_mode *mode);

/* Names of the replacement policies, by index (NULL past the last); the
 * first is the default. */
const char *hc_policy_name (unsigned index);

/* What hc_volume_format may format over. */
enum hc_format_over {
  HC_FORMAT_NEW = 0,  /* only a fast tier that clearly holds no volume: both superblock
                       * slots read, and neither has hintcache's magic number */
  HC_FORMAT_REPLACE,  /* also a volume that opens and has no dirty data */
  HC_FORMAT_DISCARD,  /* anything: dirty data not yet on the slow tier is lost */
};

/* Options of hc_volume_format; zeroed fields take the defaults. */
struct hc_format_opts {
  uint32_t block_size;    /* 4096 … 65536, a power of two; default 4096 */
  enum hc_mode mode;      /* default write-through (0) */
  const char *policy;     /* default "hintaware" */
  const char *slow_path;  /* recorded so tools can find the slow tier */
  uint32_t max_ranges;    /* range hints kept; default 65536 */
  enum hc_format_over over; /* default HC_FORMAT_NEW */
  bool checksums;         /* checksum every cached block's data, verified on each read of
                           * it (silent corruption of the fast tier, lost or misdirected
                           * writes there are detected, not served); default off */
};

/* Formats a volume: a superblock and empty metadata on the fast tier.  The
 * slow tier is only read (a fingerprint of a few sectors, kept with its
 * size and device name to recognise it at open): the volume is exactly as
 * large as the slow tier, and a slow tier that holds data (a filesystem, a
 * partition table) keeps it, as the volume's contents.  What was on the fast tier is kept unless o->over allows
 * formatting over it.  Returns 0, -EINVAL (bad options, a tier too small:
 * `why` says), -EEXIST (a volume, or what may be one: damaged, unreadable
 * or of another format version, is there), -EBUSY (that volume holds dirty
 * data), or an I/O error. */
int hc_volume_format (hc_tier *fast, hc_tier *slow, const struct hc_format_opts *o, char *why,
                      size_t whylen);

/* Options of hc_volume_open; NULL means all defaults. */
struct hc_open_opts {
  hc_classes *classes;      /* class attributes (borrowed); NULL: built-in */
  bool read_only;           /* replay in memory, write nothing (info, check) */
  bool no_cleaner;          /* no background threads: write back only on
                               hc_volume_clean, fill read misses on the
                               reading thread, and write through to the
                               slow tier after the fast one (tests, tools) */
  unsigned dirty_high;      /* % of blocks dirty that starts write-back (paced while requests
                               arrive, flat out when idle or past halfway to 100 %); default 50 */
  unsigned dirty_low;       /* % where that write-back stops; default 25 */
  uint64_t seq_cutoff;      /* bytes of a sequential run before bypass; default 4 MiB,
                               UINT64_MAX for none */
  struct hc_hint device_hint; /* the device default layer */
  bool second_touch;        /* second-touch promotion: a read miss is admitted
                               only if read again while the policy's ghost
                               remembers it, for fewer flash writes at the cost
                               of a miss per block read twice; hintaware only
                               (-ENOTSUP for other policies) */
  uint64_t flash_budget;    /* flash bytes per day (0: none), data and
                               metadata (hc_stats.meta_flash_bytes): while the cache
                               writes flash faster (a bucket of a minute's
                               budget, empty), read misses are promoted on the
                               second touch as above and write misses go to
                               the slow tier alone (write hits still rewrite
                               their copies); hintaware only (-ENOTSUP) */
};

/* Opens a formatted volume, replaying its journal.  Fails, changing
 * nothing, if the slow tier is not the one it was formatted with, the
 * format is newer than this library, the fast tier is truncated, or a
 * checksum does not match (`why` says which).  Returns 0 and *out; -EINVAL
 * (not a volume), -EPROTONOSUPPORT (newer format), -ENODEV (wrong slow
 * tier), -EUCLEAN (corrupt metadata), -ENOMEM or an I/O error. */
int hc_volume_open (hc_tier *fast, hc_tier *slow, const struct hc_open_opts *o, hc_volume **out,
                    char *why, size_t whylen);

/* Commits, checkpoints, stops the cleaner and frees the volume (not the
 * tiers).  Dirty data stays dirty on the fast tier.  Returns 0, the error
 * of the final commit, or -EIO if an earlier commit had failed (what it
 * held is not durable; the next open recovers to the last commit that
 * was).  The volume is freed either way. */
int hc_volume_close (hc_volume *v);

/* Size of the volume in bytes, and its block size. */
uint64_t hc_volume_size (const hc_volume *v);
uint32_t hc_volume_block_size (const hc_volume *v);

/* What an I/O says about itself (every field may be zero). */
struct hc_ioctx {
  struct hc_hint hint;    /* the per-I/O layer */
  struct hc_hint process; /* the per-process layer */
  hc_stream *stream;      /* the per-stream layer and sequential detection */
};

/* Write flags. */
enum hc_vol_flag {
  HC_VOL_FUA = 1u << 0, /* durable when the call returns */
};

/* Reads len bytes at off (any alignment).  ctx may be NULL. */
int hc_volume_read (hc_volume *v, void *buf, size_t len, uint64_t off, const struct hc_ioctx *ctx);

/* Writes len bytes at off (any alignment); flags: HC_VOL_FUA. */
int hc_volume_write (hc_volume *v, const void *buf, size_t len, uint64_t off, unsigned flags,
                     const struct hc_ioctx *ctx);

/* Makes every completed write durable. */
int hc_volume_flush (hc_volume *v);

/* Discards a range: its data is dropped from both tiers (reads then return
 * zeros).  Unaligned edges are zeroed. */
int hc_volume_discard (hc_volume *v, uint64_t off, uint64_t len, const struct hc_ioctx *ctx);

/* Writes zeros over a range; flags: HC_VOL_FUA. */
int hc_volume_zero (hc_volume *v, uint64_t off, uint64_t len, unsigned flags,
                    const struct hc_ioctx *ctx);

/* Range advice and range hints.  A class in `hint` is stored for the range
 * (so later unhinted I/O there resolves to it); so are dontneed and
 * willneed, and normal clears stored advice.  Immediate effects: willneed
 * prefetches the range in the background, within its class's share;
 * dontneed demotes its cached blocks; evict writes back and drops them now.
 * Range hints persist with the metadata.  Returns 0, -EINVAL, or -ENOSPC
 * when the range table is full. */
int hc_volume_advise (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint);

/* Withdraws the range hints (class and advice) stored for [off, off+len),
 * as when a file no longer owns those blocks.  Cached data keeps its class
 * until it is next written.  Returns 0, -EINVAL, -EROFS, or -ENOSPC when
 * cutting a stored range would overflow the table. */
int hc_volume_unadvise (hc_volume *v, uint64_t off, uint64_t len);

/* hc_volume_advise on behalf of `source` (enum hc_hint_source): the range
 * hints it stores are that source's (hc_volume_advise is HC_SOURCE_ADMIN).
 * Returns as hc_volume_advise; -EINVAL for an unknown source. */
int hc_volume_advise_from (hc_volume *v, uint64_t off, uint64_t len, struct hc_hint hint,
                           unsigned source);

/* Withdraws the range hints in [off, off+len) that `source` stored, and no
 * other source's; HC_SOURCE_ADMIN withdraws all (as hc_volume_unadvise).
 * Returns as hc_volume_unadvise; -EINVAL for an unknown source. */
int hc_volume_unadvise_from (hc_volume *v, uint64_t off, uint64_t len, unsigned source);

/* The hint the range layer holds for the block at off (zero if none). */
struct hc_hint hc_volume_range_hint (hc_volume *v, uint64_t off);

/* Switches the cache mode on a live volume; leaving write-back writes back
 * every dirty block first.  The mode persists. */
int hc_volume_set_mode (hc_volume *v, enum hc_mode mode);

enum hc_mode hc_volume_mode (const hc_volume *v);

/* Writes back every dirty block and commits (so the fast tier could be
 * detached).  Returns 0 or the first error. */
int hc_volume_clean (hc_volume *v);

/* Copies the live statistics. */
int hc_volume_stats (hc_volume *v, struct hc_stats *out);

/* Geometry and state, for `hintcache info`. */
struct hc_volume_info {
  uint8_t cache_uuid[16];
  uint32_t format_version;
  uint32_t block_size;
  uint32_t nblocks;
  uint64_t volume_size;
  uint64_t data_off, journal_sectors;
  enum hc_mode mode;
  char policy[16];
  char slow_path[201];
  char slow_identity[64];  /* the slow tier's device name at format, "" if none */
  bool checksums;          /* cached data is checksummed (hc_format_opts.checksums) */
  bool slow_fingerprint;   /* the open compared the slow tier's sampled sectors (only
                            * possible after a clean close; else size and name only) */
  bool was_clean;          /* the last close was clean (no replay needed) */
  uint64_t replayed;       /* journal sectors replayed at open */
  uint64_t ram_bytes;      /* RAM for mapping and policy state */
  uint32_t range_hints;    /* stored range hints */
  unsigned sb_damaged;     /* superblock copies found damaged at open (bit 0: A, bit 1: B);
                            * the other one was used, and both are rewritten at open */
  bool tail_damaged;       /* replay ended at a damaged journal sector: the commit being
                            * written when the power failed, which never completed */
  int degraded;            /* as hc_volume_degraded */
  uint64_t degraded_events; /* times the fast tier started failing since open */
};

/* Fills out; takes the volume lock briefly, so any thread may call it. */
void hc_volume_get_info (hc_volume *v, struct hc_volume_info *out);

/* Whether the fast tier is failing data writes: 0, or the positive errno
 * of the last failure (ENOSPC, EIO…).  While it fails, the volume goes on
 * around it — writes and read-miss fills go to the slow tier, nothing is
 * lost, nothing fails for it — and tries the fast tier again once a
 * second; the first write it takes ends the degraded state.  Cheap (no
 * lock): a server may poll it after each request to log transitions. */
int hc_volume_degraded (const hc_volume *v);

/* Creates a stream: a handle standing for a file or a process, with its own
 * default hint and its own sequential-run detection.  Returns 0 or -ENOMEM. */
int hc_stream_new (hc_volume *v, struct hc_hint default_hint, hc_stream **out);

/* Frees a stream (NULL allowed); no I/O using it may be running. */
void hc_stream_free (hc_stream *s);

/* Verifies a volume offline: the superblocks, the slow tier's identity
 * (size, device name, sampled sectors after a clean close), every sector of
 * the current checkpoint copy (table, range hints, statistics), the journal
 * up to the end of its log, and the invariants (no origin mapped twice,
 * origins inside the volume).  Writes a one-line reason for the first
 * problem into `why`.  Returns 0 if the volume opens with everything
 * committed (then `why` is empty, or notes what an open repairs by
 * itself: a damaged superblock copy, a commit cut short at the end of the
 * journal), -EUCLEAN on corruption, other negative errnos as
 * hc_volume_open. */
int hc_volume_check (hc_tier *fast, hc_tier *slow, char *why, size_t whylen);

/* What hc_volume_repair found and did. */
#define HC_REPAIR_LOST_MAX 1024
struct hc_repair_report {
  bool repaired;                  /* something was wrong, and the volume opens now */
  uint32_t block_size;            /* the volume's (lost[] counts its blocks) */
  bool rebuilt;                   /* the fast tier was formatted anew after salvaging */
  uint64_t table_sectors_damaged; /* of the current checkpoint copy */
  uint64_t range_sectors_damaged; /* their range hints are gone */
  uint64_t range_hints_dropped;   /* invalid range hints passed over */
  bool stats_reset;               /* the statistics were damaged (or the volume rebuilt) */
  bool journal_cut;               /* damage inside the journal: the commits after it are gone */
  uint64_t records_dropped;       /* invalid journal records passed over */
  uint64_t entries_dropped;       /* mappings that could not be right (outside the volume,
                                   * one block mapped twice), dropped */
  uint64_t unknown_blocks;        /* cache blocks whose entries were lost with both copies:
                                   * whatever they held that was dirty is lost, where unknown */
  uint64_t written_back;          /* dirty blocks salvaged to the slow tier */
  uint64_t unreadable;            /* dirty blocks whose data could not be read or failed its
                                   * checksum: lost (also in lost[]) */
  uint64_t nlost;                 /* volume blocks that may have lost their latest writes */
  uint64_t lost[HC_REPAIR_LOST_MAX]; /* the first of them */
  uint64_t range_hints_kept;      /* range hints carried over to the rebuilt volume */
};

/* Repairs a volume that does not open (as cache_repair does for dm-cache):
 * salvages the newest state it can prove and writes nothing it cannot.
 *   - A volume that opens needs nothing, or only what a read-write open
 *     does (a damaged superblock copy, a journal tail cut short): done so.
 *   - Otherwise the metadata is read leniently: a damaged table sector
 *     leaves its blocks unmapped (the other checkpoint copy names what
 *     they held, reported as possibly lost), the journal is replayed up
 *     to its first damage, invalid records and entries are dropped.  Every
 *     dirty block that remains is written back to the slow tier (with data
 *     checksums, only if it verifies), the slow tier is flushed, and the
 *     fast tier is formatted anew with the same options, carrying over the
 *     range hints.  The slow tier receives nothing but dirty data.
 * Refused (nothing written): no valid superblock, another format version,
 * a slow tier that is not the volume's (its identity).  Returns 0 with
 * *rep filled, or a negative errno with `why`. */
int hc_volume_repair (hc_tier *fast, hc_tier *slow, struct hc_repair_report *rep, char *why,
                      size_t whylen);

/* Reads only the slow tier's path recorded at format time (NUL-terminated,
 * may be empty).  Returns 0, -EINVAL if not a volume, or an I/O error. */
int hc_volume_slow_path (hc_tier *fast, char *path, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_VOLUME_H */
