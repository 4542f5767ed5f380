/* hintcache — statistics.
 *
 * Counters are kept per class × operation × outcome, in cache blocks (and
 * bytes where named).  A miss is a lookup that found nothing; it is then
 * either admitted or bypassed, and a bypass says why.  "Hint hits" are hits
 * on blocks that a hint admitted or protected (willneed, a high-priority
 * class): the hint-efficacy figure is their share of all hits.
 */
#ifndef HINTCACHE_STATS_H
#define HINTCACHE_STATS_H

#include <stdint.h>

#include "hint.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a missed block was not admitted to the fast tier. */
enum hc_bypass {
  HC_BYPASS_MODE = 0,   /* the cache mode sends it to the slow tier */
  HC_BYPASS_ADVICE,     /* dontneed or evict advice */
  HC_BYPASS_CLASS,      /* the class does not admit this operation */
  HC_BYPASS_SHARE,      /* the class holds its maximum share */
  HC_BYPASS_SEQUENTIAL, /* the stream is past the sequential cutoff */
  HC_BYPASS_PARTIAL,    /* a write of part of a block that is not cached */
  HC_BYPASS_FULL,       /* no clean, idle block to evict */
  HC_BYPASS_ERROR,      /* the fast tier failed */
  HC_BYPASS_POLICY,     /* the replacement policy declined */
};
#define HC_BYPASS_COUNT 9

/* Hint effects: the families of decisions hints (and three unhinted choices)
 * change.  The default policy keeps each in force only while miniature
 * simulations show it saves misses (hc_stats.hint_effects says which are
 * now; placement and demotion are weighed together, so they come and go
 * together); other policies keep all.  Advice, and class attributes an
 * administrator chose, apply whatever these say. */
enum hc_effect {
  HC_FX_SEQ_CUTOFF = 1u << 0, /* a miss on a stream past its cutoff is bypassed */
  HC_FX_FILTER     = 1u << 1, /* new blocks start on probation (S3-FIFO's small
                                 queue); off: straight into main (CLOCK-like) */
  HC_FX_ADMIT      = 1u << 2, /* class admission rules and maximum shares */
  HC_FX_PLACE      = 1u << 3, /* class priority: high ones protected, low ones
                                 aged fast and not remembered */
  HC_FX_DEMOTE     = 1u << 4, /* a written-back block of a class that does not admit
                                 reads, a reclass to low priority: evicted next */
  HC_FX_REINSERT   = 1u << 5, /* a block hit in main goes round again (CLOCK, as
                                 S3-FIFO's main); off: evicted in turn (FIFO) */
  HC_FX_TOUCH      = 1u << 6, /* second-touch promotion: a read miss is admitted
                                 only when read again soon (an administrator's
                                 choice, never the evidence's) */
  HC_FX_THRIFT     = 1u << 7, /* a hinted class that asks for no speed earns flash
                                 by reuse: its write misses go around the cache,
                                 its read misses are admitted on a second touch */
};
#define HC_FX_KNOBS 8
/* The effects hints and evidence govern (all but second touch). */
#define HC_FX_ALL (((1u << HC_FX_KNOBS) - 1) & ~HC_FX_TOUCH)

/* Returns the name of effect bit number `i` ("cutoff", "probation",
 * "admission", "placement", "demotion", "reinsertion", "second-touch",
 * "thrift"), or NULL. */
const char *hc_effect_name (unsigned i);

/* The trials' choices: which of two ways of doing the same work the
 * volume measured to be faster on its machine and devices (a volume's
 * trials, src/engine/trial.c), as bits of hc_stats.ways.  A bit is set
 * while the volume hands that work to a helper thread; clear, the caller's
 * thread does it (as it always does on a volume opened without background
 * threads). */
enum hc_way {
  HC_WAY_FILL_BLOCK = 1u << 0, /* a read miss of one block is filled by the filler thread */
  HC_WAY_FILL_RUN   = 1u << 1, /* so is a run of read misses */
  HC_WAY_SLOW_BESIDE = 1u << 2, /* write-through writes the slow tier on the slow writer,
                                   beside the fast writes, not after them */
};
#define HC_WAY_KNOBS 3

/* Returns the name of way bit number `i` ("filler-block", "filler-run",
 * "slow-beside"), or NULL. */
const char *hc_way_name (unsigned i);

/* Operations, as indices of the per-operation counters. */
enum hc_stat_op { HC_STAT_READ = 0, HC_STAT_WRITE = 1 };

struct hc_class_stats {
  uint64_t hits[2];                     /* by enum hc_stat_op */
  uint64_t misses[2];
  uint64_t admissions[2];
  uint64_t bypass[2][HC_BYPASS_COUNT];
  uint64_t evictions;                   /* blocks dropped to make room */
  uint64_t writebacks;                  /* dirty blocks written to the slow tier */
  uint64_t hint_hits;                   /* hits on blocks a hint admitted or protected */
  uint64_t bytes[2];                    /* bytes clients read / wrote with this class */
  uint64_t flash_bytes_written;         /* fills and write hits: the endurance cost */
  uint64_t blocks;                      /* now cached */
  uint64_t dirty;                       /* now dirty */
};

struct hc_stats {
  struct hc_class_stats cls[HC_CLASS_COUNT];
  uint64_t cache_blocks;   /* capacity */
  uint64_t free_blocks;    /* reusable now */
  uint64_t pending_blocks; /* freed, reusable after the next commit */
  uint64_t commits;        /* metadata commits */
  uint64_t flushes;        /* client flushes */
  uint64_t prefetched;     /* blocks brought in by willneed */
  uint64_t errors_fast;    /* fast-tier errors survived */
  uint64_t errors_checksum; /* cached blocks whose data failed its checksum (clean ones
                             * were read from the slow tier and dropped; dirty ones
                             * returned EIO) */
  uint64_t hint_effects;    /* enum hc_effect bits in force now (a gauge) */
  uint64_t effect_changes;  /* times the evidence changed them since open */
  uint64_t ways;            /* enum hc_way bits the trials chose (a gauge; 0 but in
                             * a running volume with background threads) */
  uint64_t meta_flash_bytes; /* the metadata's share of the flash's wear: the fast
                              * tier's journal, checkpoint and superblock writes,
                              * each counted as the whole 4 KiB pages it touches
                              * (flash programs a page at a time: a 512-byte
                              * journal write wears 4 KiB).  Beside the classes'
                              * flash_bytes_written, the flash budget counts it */
};

/* Returns the name of a bypass reason ("sequential"), or NULL. */
const char *hc_bypass_name (unsigned reason);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_STATS_H */
