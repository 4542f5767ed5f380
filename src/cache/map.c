/* The cache directory's mapping: meta words, links and the hash index.
 *
 * The hash index finds the cache block that holds an origin.  It stores no
 * keys: a slot is 32 bits, the block number + 1 (0: empty) in the low bits
 * and, in the bits the block number does not need, a tag — more bits of the
 * origin's hash — so that most slots can be ruled out without reading the
 * block's meta word, a random memory access.
 *
 * Slots come in buckets of eight (32 bytes, never straddling a cache line),
 * and each origin has two candidate buckets drawn from its hash.  An entry
 * goes to the emptier of the two ("the power of two choices": at load 0.75
 * both are full for about one insert in ten thousand while the table
 * fills, and about one in a hundred once removals and inserts churn a full
 * table, since entries stay where they went), so a lookup nearly always
 * reads two buckets at most and an insert or a delete touches one.  A
 * denser index does not pay: at load 0.8 (0.34 bytes per block less) a
 * full, churned table of 16 M blocks had overflow counts in 22 % of its
 * buckets instead of 6 %, and lookups of absent origins took 14–17 %
 * longer.  Within a
 * bucket the occupied slots are a prefix: an insert appends, a delete moves
 * the last entry into the hole.
 *
 * When both candidates are full, the entry goes to the first bucket with
 * room after the second, and every full bucket it passes counts it in a
 * saturating overflow byte (as in Folly's F14 tables).  A lookup goes on
 * past the second bucket only while the bucket it just read has a non-zero
 * count, and a delete of an overflowed entry takes its count back off the
 * buckets it passed (a saturated count stays, costing only longer probes).
 * So inserts never fail and never move other entries, even for origins
 * chosen to collide — those degrade to linear probing, no worse.
 *
 * Why not open addressing with one probe sequence (Robin Hood, as before)?
 * At load 0.75 its clusters average several slots and reach a hundred, and
 * every insert and delete walks one: the replayer spent half its map time
 * there.  Buckets keep the load (and so the memory) while bounding the walk.
 *
 * The two buckets come from disjoint bit fields of the 64-bit hash (its top
 * half and the top of its low half, each scaled to the bucket count by
 * multiply-shift, which spreads any count evenly), and the tag from its
 * lowest bits, so they are independent.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "util.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define BUCKET HC_MAP_BUCKET
#define OVERFLOW_MAX UINT8_MAX

static inline uint32_t
next_bucket (const struct hc_map *m, uint32_t b)
{
  return b + 1 == m->nbuckets ? 0 : b + 1;
}

/* Bit i set where (slot i of bucket b & mask) == want: two SSE2 compares
 * where the target has them. */
static inline unsigned
lanes (const struct hc_map *m, uint32_t b, uint32_t mask, uint32_t want)
{
  const uint32_t *s = m->slots + (size_t) b * BUCKET;
#ifdef __SSE2__
  const __m128i k = _mm_set1_epi32 ((int) mask), v = _mm_set1_epi32 ((int) want);
  __m128i lo = _mm_load_si128 ((const __m128i *) s), hi = _mm_load_si128 ((const __m128i *) s + 1);
  lo = _mm_cmpeq_epi32 (_mm_and_si128 (lo, k), v);
  hi = _mm_cmpeq_epi32 (_mm_and_si128 (hi, k), v);
  return (unsigned) _mm_movemask_ps (_mm_castsi128_ps (lo))
         | (unsigned) _mm_movemask_ps (_mm_castsi128_ps (hi)) << 4;
#else
  unsigned bits = 0;
  for (unsigned i = 0; i < BUCKET; i++)
    bits |= (unsigned) ((s[i] & mask) == want) << i;
  return bits;
#endif
}

/* Slots of bucket b holding an entry with this tag (never an empty one: a
 * tag is never 0). */
static inline unsigned
tag_matches (const struct hc_map *m, uint32_t b, uint32_t tag)
{
  return lanes (m, b, ~m->idx_mask, tag);
}

/* Entries in bucket b (a prefix of its slots). */
static inline unsigned
occupancy (const struct hc_map *m, uint32_t b)
{
  unsigned empty = lanes (m, b, UINT32_MAX, 0);
  return empty ? (unsigned) __builtin_ctz (empty) : BUCKET;
}

/* The block in bucket b holding origin, or HC_NIL. */
static inline uint32_t
find_in (const struct hc_map *m, uint32_t b, const struct hc_map_where_s *w, uint64_t origin)
{
  for (unsigned bits = tag_matches (m, b, w->tag); bits; bits &= bits - 1) {
    uint32_t c = (m->slots[(size_t) b * BUCKET + (unsigned) __builtin_ctz (bits)] & m->idx_mask) - 1;
    if (hc_meta_origin (m->blk[c].meta) == origin)
      return c;
  }
  return HC_NIL;
}

/* Slot i of the pair of origin's candidate buckets (0 … 7 in the first,
 * 8 … 15 in the second), for masks of both at once: whether an entry went
 * to the first or the second is a coin toss, which a branch on it would
 * mispredict half the time. */
static inline uint32_t *
pair_slot (const struct hc_map *m, const struct hc_map_where_s *w, unsigned i)
{
  return m->slots + (size_t) (i < BUCKET ? w->b1 : w->b2) * BUCKET + i % BUCKET;
}

/* lanes () over both of origin's candidate buckets: bits 0 … 7 the first,
 * 8 … 15 the second, as pair_slot numbers them. */
static inline unsigned
pair_lanes (const struct hc_map *m, const struct hc_map_where_s *w, uint32_t mask, uint32_t want)
{
  return lanes (m, w->b1, mask, want) | lanes (m, w->b2, mask, want) << BUCKET;
}

int
hc_map_init (struct hc_map *m, uint32_t n)
{
  memset (m, 0, sizeof *m);
  if (n == 0 || n >= UINT32_MAX / 2)
    return -EINVAL;
  m->n = n;
  m->nbuckets = (uint32_t) (((uint64_t) n * 4 / 3 + BUCKET - 1) / BUCKET);
  if (m->nbuckets < 2)
    m->nbuckets = 2;
  /* Block numbers + 1 go up to n; the tag takes the bits above them. */
  m->idx_bits = 32 - (unsigned) __builtin_clz (n);
  m->idx_mask = UINT32_MAX >> __builtin_clz (n);
  /* One zeroed mapping for all the arrays, buckets first (so aligned), in
   * huge pages where the kernel has them: the lookups are random, and with
   * 4 KiB pages nearly every one would also miss the TLB. */
  m->region_bytes = hc_map_bytes (m);
  m->region = hc_alloc_huge (m->region_bytes);
  if (!m->region) {
    memset (m, 0, sizeof *m);
    return -ENOMEM;
  }
  m->slots = m->region;
  m->blk = (struct hc_block *) (m->slots + (size_t) m->nbuckets * BUCKET);
  m->overflow = (uint8_t *) (m->blk + n);
  for (unsigned q = 0; q < 4; q++)
    hc_list_init (&m->queue[q]);
  hc_list_init (&m->free);
  hc_list_init (&m->pending);
  for (uint32_t c = 0; c < n; c++)
    hc_list_push_tail (m, &m->free, c);
  return 0;
}

void
hc_map_copy (struct hc_map *dst, const struct hc_map *src)
{
  memcpy (dst->region, src->region, src->region_bytes);
  memcpy (dst->queue, src->queue, sizeof dst->queue);
  dst->free = src->free;
  dst->pending = src->pending;
  dst->mapped = src->mapped;
}

void
hc_map_fini (struct hc_map *m)
{
  hc_free_huge (m->region, m->region_bytes);
  memset (m, 0, sizeof *m);
}

size_t
hc_map_bytes (const struct hc_map *m)
{
  return (size_t) m->nbuckets * (BUCKET * sizeof *m->slots + sizeof *m->overflow)
         + (size_t) m->n * sizeof *m->blk;
}

uint32_t
hc_map_lookup (const struct hc_map *m, uint64_t origin)
{
  const struct hc_map_where_s w = hc_map_where (m, origin);
  uint32_t c, b = w.b2;

  for (unsigned bits = pair_lanes (m, &w, ~m->idx_mask, w.tag); bits; bits &= bits - 1) {
    c = (*pair_slot (m, &w, (unsigned) __builtin_ctz (bits)) & m->idx_mask) - 1;
    if (hc_meta_origin (m->blk[c].meta) == origin)
      return c;
  }
  /* Entries that found both full went on past the second. */
  for (uint32_t k = 0; k < m->nbuckets && m->overflow[b] != 0; k++) {
    b = next_bucket (m, b);
    if ((c = find_in (m, b, &w, origin)) != HC_NIL)
      return c;
  }
  return HC_NIL;
}

uint32_t
hc_map_guess (const struct hc_map *m, uint64_t origin)
{
  const struct hc_map_where_s w = hc_map_where (m, origin);
  const unsigned bits = pair_lanes (m, &w, ~m->idx_mask, w.tag);

  return bits ? (*pair_slot (m, &w, (unsigned) __builtin_ctz (bits)) & m->idx_mask) - 1 : HC_NIL;
}

void
hc_map_insert (struct hc_map *m, uint32_t c, uint64_t origin, unsigned cls, bool dirty)
{
  const struct hc_map_where_s w = hc_map_where (m, origin);
  const unsigned o1 = occupancy (m, w.b1), o2 = occupancy (m, w.b2);
  /* The emptier, chosen without a branch: which one it is, is a coin toss. */
  const bool first = o1 <= o2 && o1 < BUCKET;
  uint32_t b = first ? w.b1 : w.b2;
  unsigned o = first ? o1 : o2;

  /* One entry per origin: hc_dir_holds relies on it. */
  assert (hc_map_lookup (m, origin) == HC_NIL);

  m->blk[c].meta = (origin & HC_M_ORIGIN_MASK) | (uint64_t) cls << HC_M_CLASS_SHIFT | HC_M_VALID
               | (dirty ? HC_M_DIRTY : 0);
  /* Both full: on to the first bucket with room, counting the passage.
   * There is one: the table has more slots than blocks. */
  while (o == BUCKET) {
    if (m->overflow[b] < OVERFLOW_MAX)
      m->overflow[b]++;
    b = next_bucket (m, b);
    o = occupancy (m, b);
  }
  m->slots[(size_t) b * BUCKET + o] = (c + 1) | w.tag;
  m->mapped++;
}

/* Finds the slot holding block c (which is mapped); with `unlink`, also
 * takes the entry's passage off the overflow counts it added. */
static uint32_t *
slot_of (struct hc_map *m, uint32_t c, bool unlink)
{
  const struct hc_map_where_s w = hc_map_where (m, hc_meta_origin (m->blk[c].meta));
  const uint32_t want = (c + 1) | w.tag;
  unsigned bits = pair_lanes (m, &w, UINT32_MAX, want);

  if (bits)
    return pair_slot (m, &w, (unsigned) __builtin_ctz (bits));
  for (uint32_t b = w.b2;;) {
    if (unlink && m->overflow[b] < OVERFLOW_MAX)
      m->overflow[b]--;
    b = next_bucket (m, b);
    if ((bits = lanes (m, b, UINT32_MAX, want)))
      return m->slots + (size_t) b * BUCKET + __builtin_ctz (bits);
  }
}

void
hc_map_remove (struct hc_map *m, uint32_t c)
{
  uint32_t *s = slot_of (m, c, true);
  size_t i = (size_t) (s - m->slots);
  uint32_t *bucket = m->slots + (i - i % BUCKET);
  unsigned last = occupancy (m, (uint32_t) (i / BUCKET)) - 1;

  *s = bucket[last]; /* keep the occupied slots a prefix */
  bucket[last] = 0;
  m->blk[c].meta = 0;
  m->mapped--;
}

void
hc_map_relocate (struct hc_map *m, uint32_t from, uint32_t to)
{
  struct hc_list *l = &m->queue[hc_meta_queue (m->blk[from].meta)];
  uint32_t p = m->blk[from].prev, n = m->blk[from].next;
  uint32_t *s = slot_of (m, from, false);

  *s = (*s & ~m->idx_mask) | (to + 1); /* same origin: same buckets, same tag */
  m->blk[to].meta = m->blk[from].meta;
  m->blk[from].meta = 0;
  m->blk[to].prev = p;
  m->blk[to].next = n;
  if (p != HC_NIL)
    m->blk[p].next = to;
  else
    l->head = to;
  if (n != HC_NIL)
    m->blk[n].prev = to;
  else
    l->tail = to;
  m->blk[from].prev = m->blk[from].next = HC_NIL;
}

void
hc_list_push_head (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  m->blk[c].prev = HC_NIL;
  m->blk[c].next = l->head;
  if (l->head != HC_NIL)
    m->blk[l->head].prev = c;
  else
    l->tail = c;
  l->head = c;
  l->count++;
}

void
hc_list_push_tail (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  m->blk[c].next = HC_NIL;
  m->blk[c].prev = l->tail;
  if (l->tail != HC_NIL)
    m->blk[l->tail].next = c;
  else
    l->head = c;
  l->tail = c;
  l->count++;
}

void
hc_list_remove (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  uint32_t p = m->blk[c].prev, n = m->blk[c].next;

  if (p != HC_NIL)
    m->blk[p].next = n;
  else
    l->head = n;
  if (n != HC_NIL)
    m->blk[n].prev = p;
  else
    l->tail = p;
  l->count--;
}

uint32_t
hc_list_pop_tail (struct hc_map *m, struct hc_list *l)
{
  uint32_t c = l->tail;
  if (c != HC_NIL)
    hc_list_remove (m, l, c);
  return c;
}

uint32_t
hc_list_pop_head (struct hc_map *m, struct hc_list *l)
{
  uint32_t c = l->head;
  if (c != HC_NIL)
    hc_list_remove (m, l, c);
  return c;
}
