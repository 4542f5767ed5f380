/* The cache directory's mapping: which slow-tier block each fast-tier cache
 * block holds, and the lists every cache block lives on.
 *
 * A cache block c (0 … n−1) has one 64-bit meta word:
 *
 *     bits  0–39  origin: the slow-tier block number it holds
 *     bits 40–42  class of its data (the class it was last written or
 *                 admitted with; travels with dirty data to the cleaner)
 *     bit  43     valid: c is mapped
 *     bit  44     dirty: c is newer than the slow tier
 *     bit  45     hinted: admitted or protected because of a hint
 *     bits 46–47  queue: which policy queue c is on
 *     bits 48–49  freq: the policy's access counter
 *     bit  50     demoted: advised dontneed (first to go)
 *     bit  51     former: not mapped any more; the origin bits say what it
 *                 held, and the dirty bit whether it was dirty (an evicted or
 *                 invalidated block, until it is reused)
 *     bit  52     fua: its last write was FUA (the engine's, in RAM only)
 *     bit  53     writing: being rewritten in place (the engine's, in RAM)
 *
 * and two 32-bit links (prev, next), kept together in one 16-byte entry
 * (never straddling a cache line), so every block sits on exactly one
 * intrusive list at a time: the free list, the pending list (freed but not
 * reusable until the metadata that freed it is durable), or one of four
 * policy queues — a mapped block is always on queue[its queue bits], which
 * the policies maintain.
 * A hash index of 8-slot buckets (32-bit slots holding a block number and
 * hash tag bits; two candidate buckets per origin; load ≤ 0.75) finds the
 * block holding an origin.  In all, 16 + ~5.5 bytes per block;
 * pins (1 byte) live beside it in the engine.
 *
 * Not thread-safe: the owner (the volume, under its lock, or the replayer)
 * serialises calls.
 */
#ifndef HC_CACHE_MAP_H
#define HC_CACHE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HC_NIL UINT32_MAX
#define HC_ORIGIN_BITS 40
#define HC_ORIGIN_MAX ((UINT64_C (1) << HC_ORIGIN_BITS) - 1)

/* Meta word fields. */
#define HC_M_ORIGIN_MASK HC_ORIGIN_MAX
#define HC_M_CLASS_SHIFT 40
#define HC_M_CLASS_MASK (UINT64_C (7) << HC_M_CLASS_SHIFT)
#define HC_M_VALID (UINT64_C (1) << 43)
#define HC_M_DIRTY (UINT64_C (1) << 44)
#define HC_M_HINTED (UINT64_C (1) << 45)
#define HC_M_QUEUE_SHIFT 46
#define HC_M_QUEUE_MASK (UINT64_C (3) << HC_M_QUEUE_SHIFT)
#define HC_M_FREQ_SHIFT 48
#define HC_M_FREQ_MASK (UINT64_C (3) << HC_M_FREQ_SHIFT)
#define HC_M_DEMOTED (UINT64_C (1) << 50)
#define HC_M_FORMER (UINT64_C (1) << 51) /* unmapped: origin bits keep the former origin */
#define HC_M_FUA (UINT64_C (1) << 52)
#define HC_M_WRITING (UINT64_C (1) << 53)
#define HC_M_UNRECORDED (UINT64_C (1) << 54) /* clean, but recorded dirty (engine: write.c) */
#define HC_M_WB (UINT64_C (1) << 55) /* dirty, written back, the slow tier's flush to come
                                      * (engine: cleaner.c); a write clears it */

/* A list threaded through the map's links. */
struct hc_list {
  uint32_t head; /* newest */
  uint32_t tail; /* oldest */
  uint32_t count;
};

/* A cache block's entry: its meta word and its list links, together, so
 * that what one access touches of a block is one cache line. */
struct hc_block {
  uint64_t meta;
  uint32_t prev, next;
};

struct hc_map {
  uint32_t n;          /* cache blocks */
  void *region;        /* the arrays below, in one mapping */
  size_t region_bytes;
  struct hc_block *blk; /* n entries */
  uint32_t *slots;     /* hash index: nbuckets × 8 slots of cache block + 1 | tag, 0 = empty */
  uint8_t *overflow;   /* per bucket: entries that passed it full (saturating) */
  uint32_t nbuckets;
  uint32_t idx_mask;   /* the block-number bits of a slot; the tag is above them */
  unsigned idx_bits;
  uint32_t mapped;     /* valid blocks */
  struct hc_list queue[4]; /* policy queues: a mapped block is on queue[queue bits] */
  struct hc_list free; /* unmapped, reusable now */
  struct hc_list pending; /* unmapped, reusable after the next commit */
};

/* Creates a map of n blocks, all on the free list in ascending order.
 * Returns 0, -EINVAL (n = 0 or too large) or -ENOMEM. */
int hc_map_init (struct hc_map *m, uint32_t n);

/* Frees the map's arrays. */
void hc_map_fini (struct hc_map *m);

/* Bytes of RAM the map uses. */
size_t hc_map_bytes (const struct hc_map *m);

/* Makes dst, a map of as many blocks as src, hold what src holds, in the
 * same blocks and list orders. */
void hc_map_copy (struct hc_map *dst, const struct hc_map *src);

static inline uint64_t hc_meta_origin (uint64_t w) { return w & HC_M_ORIGIN_MASK; }
static inline unsigned hc_meta_class (uint64_t w) { return (unsigned) ((w & HC_M_CLASS_MASK) >> HC_M_CLASS_SHIFT); }
static inline unsigned hc_meta_queue (uint64_t w) { return (unsigned) ((w & HC_M_QUEUE_MASK) >> HC_M_QUEUE_SHIFT); }
static inline unsigned hc_meta_freq (uint64_t w) { return (unsigned) ((w & HC_M_FREQ_MASK) >> HC_M_FREQ_SHIFT); }

/* Sets a field of block c's meta word. */
static inline void
hc_map_set_field (struct hc_map *m, uint32_t c, uint64_t mask, unsigned shift, uint64_t v)
{
  m->blk[c].meta = (m->blk[c].meta & ~mask) | ((v << shift) & mask);
}

/* An origin's hash (splitmix64's finaliser: consecutive blocks land far
 * apart). */
static inline uint64_t
hc_map_hash (uint64_t x)
{
  x ^= x >> 30;
  x *= UINT64_C (0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C (0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

/* Returns the block holding origin, or HC_NIL. */
uint32_t hc_map_lookup (const struct hc_map *m, uint64_t origin);

#define HC_MAP_BUCKET 8 /* slots per bucket */

/* Where an origin's entry can be: two candidate buckets and its tag (map.c
 * explains the choice of bits). */
struct hc_map_where_s {
  uint32_t b1, b2; /* the candidate buckets */
  uint32_t tag;    /* the tag bits, in place; the lowest is always set */
};

static inline struct hc_map_where_s
hc_map_where (const struct hc_map *m, uint64_t origin)
{
  const uint64_t h = hc_map_hash (origin);
  struct hc_map_where_s w;

  w.b1 = (uint32_t) (((h >> 32) * (uint64_t) m->nbuckets) >> 32);
  w.b2 = (uint32_t) (((h & UINT32_MAX) * (uint64_t) m->nbuckets) >> 32);
  if (w.b2 == w.b1)
    w.b2 = w.b1 + 1 == m->nbuckets ? 0 : w.b1 + 1;
  w.tag = ((uint32_t) h << m->idx_bits) | (UINT32_C (1) << m->idx_bits); /* never 0 */
  return w;
}

/* Starts loading the cache line at p.  An asm statement where there is
 * one: GCC deletes a loop of __builtin_prefetch calls and nothing else as
 * dead code. */
static inline void
hc_prefetch (const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile ("prefetcht0 %0" : : "m" (*(const char *) p));
#else
  __builtin_prefetch (p);
#endif
}

/* Starts loading the buckets where origin's entry would be, for a lookup
 * soon after (a caller that knows its next origins hides the memory
 * latency of large maps behind its current work). */
static inline void
hc_map_prefetch (const struct hc_map *m, uint64_t origin)
{
  const struct hc_map_where_s w = hc_map_where (m, origin);

  hc_prefetch (m->slots + (size_t) w.b1 * HC_MAP_BUCKET);
  hc_prefetch (m->slots + (size_t) w.b2 * HC_MAP_BUCKET);
}

/* The block in origin's buckets whose slot carries origin's tag, or
 * HC_NIL: nearly always the block that holds origin, but not checked (that
 * would read the block's entry).  For loading what an access will touch
 * before it comes. */
uint32_t hc_map_guess (const struct hc_map *m, uint64_t origin);

/* Starts loading what evicting the tail of list l, and then its
 * predecessor, will touch.  A policy that evicts from a tail calls it after
 * each eviction: the new tail's entry arrived while the previous eviction
 * was under way (this call started it), so its origin is at hand to start
 * loading its buckets, and its predecessor's entry starts loading for the
 * eviction after.  Each eviction then finds its block's entry and buckets
 * in cache instead of waiting for them one after the other. */
static inline void
hc_map_prefetch_tail (const struct hc_map *m, const struct hc_list *l)
{
  const uint32_t t = l->tail;

  if (t == HC_NIL)
    return;
  hc_map_prefetch (m, hc_meta_origin (m->blk[t].meta));
  if (m->blk[t].prev != HC_NIL)
    hc_prefetch (&m->blk[m->blk[t].prev]);
}

/* Maps free or pending block c (already unlinked) to origin with class cls;
 * origin must not be mapped already.  Queue/freq/hinted bits start at 0. */
void hc_map_insert (struct hc_map *m, uint32_t c, uint64_t origin, unsigned cls, bool dirty);

/* Unmaps block c (it must be valid and already unlinked from its queue). */
void hc_map_remove (struct hc_map *m, uint32_t c);

/* Moves the mapping of block `from` to block `to` (a free block, unlinked):
 * `to` takes over from's meta word and its place on its policy queue; `from`
 * is left unmapped and unlinked.  Used for copy-on-write: the policy's state
 * travels with the data. */
void hc_map_relocate (struct hc_map *m, uint32_t from, uint32_t to);

/* ---- Lists. ---- */

static inline void hc_list_init (struct hc_list *l) { l->head = l->tail = HC_NIL; l->count = 0; }

/* Adds c at the head (newest end) / the tail (oldest end). */
void hc_list_push_head (struct hc_map *m, struct hc_list *l, uint32_t c);
void hc_list_push_tail (struct hc_map *m, struct hc_list *l, uint32_t c);

/* Removes c, which must be on l. */
void hc_list_remove (struct hc_map *m, struct hc_list *l, uint32_t c);

/* Removes and returns the tail (oldest), or HC_NIL. */
uint32_t hc_list_pop_tail (struct hc_map *m, struct hc_list *l);

/* Removes and returns the head, or HC_NIL. */
uint32_t hc_list_pop_head (struct hc_map *m, struct hc_list *l);

#endif /* HC_CACHE_MAP_H */
