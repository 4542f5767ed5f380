/* The cache directory's mapping: meta words, links and the hash index.
 *
 * The hash index is a Robin Hood hash table (linear probing, where an entry
 * farther from its home slot displaces a nearer one) over 32-bit slots that
 * hold a block number + 1; the key (the origin) is read from the block's
 * meta word, so the index stores no keys.  Reading a meta word is a random
 * memory access, so the slot bits the block number does not need (8 of
 * them for 16 M blocks) carry what lets most probes skip it:
 *
 *   bits 0 …          the block number + 1 (0: an empty slot)
 *   next ≤ 5 bits     the entry's distance from its home slot, saturating
 *                     (a saturated distance is recomputed from the meta)
 *   the rest          a tag: more bits of the origin's hash
 *
 * A lookup stops at the first entry nearer its home than the probe is to
 * the origin's (Robin Hood order guarantees the origin is not further on),
 * and reads a meta word only for an entry at its own distance whose tag
 * matches.  Deletion shifts the following entries back by one until one
 * sits at its home — no tombstones, so lookups never slow down with churn,
 * and the distances make the shift need no meta reads either.  The table
 * has n / 0.75 slots (not a power of two: the slot of a hash is found by a
 * multiply-shift, which spreads any size evenly).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "util.h"

static inline uint32_t
home_slot (const struct hc_map *m, uint64_t origin)
{
  return hc_map_home (m, hc_map_hash (origin));
}

/* The tag bits of a slot for hash h (low bits of the hash, in place). */
static inline uint32_t
tag_of_hash (const struct hc_map *m, uint64_t h)
{
  return (uint32_t) h & m->tag_mask;
}

static inline uint32_t
stored_dist (const struct hc_map *m, uint32_t s)
{
  return (s >> m->dist_shift) & m->dist_max;
}

/* Slot value s with its distance set to d. */
static inline uint32_t
with_dist (const struct hc_map *m, uint32_t s, uint32_t d)
{
  return (s & ~(m->dist_max << m->dist_shift)) | (d < m->dist_max ? d : m->dist_max) << m->dist_shift;
}

/* The distance of slot i's entry s from its home. */
static inline uint32_t
dist (const struct hc_map *m, uint32_t i, uint32_t s)
{
  uint32_t d = stored_dist (m, s), h;

  if (d < m->dist_max)
    return d;
  h = home_slot (m, hc_meta_origin (m->meta[(s & m->idx_mask) - 1]));
  return i >= h ? i - h : i + m->nslots - h;
}

static inline uint32_t
next_slot (const struct hc_map *m, uint32_t i)
{
  return i + 1 == m->nslots ? 0 : i + 1;
}

int
hc_map_init (struct hc_map *m, uint32_t n)
{
  memset (m, 0, sizeof *m);
  if (n == 0 || n >= UINT32_MAX / 2)
    return -EINVAL;
  m->n = n;
  m->nslots = (uint32_t) ((uint64_t) n * 4 / 3 + 1);
  /* Block numbers + 1 go up to n; above them the distance, then the tag. */
  unsigned idx_bits = 32 - (unsigned) __builtin_clz (n), spare = 32 - idx_bits;
  unsigned dist_bits = spare < 5 ? spare : 5;
  m->idx_mask = UINT32_MAX >> __builtin_clz (n);
  m->dist_shift = idx_bits;
  m->dist_max = (1u << dist_bits) - 1;
  m->tag_mask = dist_bits + idx_bits >= 32 ? 0 : UINT32_MAX << (idx_bits + dist_bits);
  /* One zeroed mapping for all four arrays, in huge pages where the kernel
   * has them: the lookups are random, and with 4 KiB pages nearly every one
   * would also miss the TLB. */
  m->region_bytes = hc_map_bytes (m);
  m->region = hc_alloc_huge (m->region_bytes);
  if (!m->region) {
    memset (m, 0, sizeof *m);
    return -ENOMEM;
  }
  m->meta = m->region;
  m->prev = (uint32_t *) (m->meta + n);
  m->next = m->prev + n;
  m->slots = m->next + n;
  for (unsigned q = 0; q < 4; q++)
    hc_list_init (&m->queue[q]);
  hc_list_init (&m->free);
  hc_list_init (&m->pending);
  for (uint32_t c = 0; c < n; c++)
    hc_list_push_tail (m, &m->free, c);
  return 0;
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
  return (size_t) m->n * (sizeof *m->meta + sizeof *m->prev + sizeof *m->next)
         + (size_t) m->nslots * sizeof *m->slots;
}

uint32_t
hc_map_lookup (const struct hc_map *m, uint64_t origin)
{
  const uint64_t h = hc_map_hash (origin);
  const uint32_t tag = tag_of_hash (m, h), mask = m->idx_mask, dmax = m->dist_max;
  uint32_t i = hc_map_home (m, h);

  for (uint32_t d = 0;; d++, i = next_slot (m, i)) {
    uint32_t s = m->slots[i], sd;
    if (s == 0)
      return HC_NIL;
    sd = stored_dist (m, s);
    if (sd < d && sd < dmax)
      return HC_NIL; /* Robin Hood order: the origin would have displaced it */
    if ((sd == d || sd == dmax) && (s & m->tag_mask) == tag
        && hc_meta_origin (m->meta[(s & mask) - 1]) == origin)
      return (s & mask) - 1;
  }
}

void
hc_map_insert (struct hc_map *m, uint32_t c, uint64_t origin, unsigned cls, bool dirty)
{
  const uint64_t h = hc_map_hash (origin);
  uint32_t i = hc_map_home (m, h), cur = (c + 1) | tag_of_hash (m, h), d = 0;

  m->meta[c] = (origin & HC_M_ORIGIN_MASK) | (uint64_t) cls << HC_M_CLASS_SHIFT | HC_M_VALID
               | (dirty ? HC_M_DIRTY : 0);
  for (;; d++, i = next_slot (m, i)) {
    uint32_t s = m->slots[i], sd;
    if (s == 0) {
      m->slots[i] = with_dist (m, cur, d);
      break;
    }
    /* Take the slot of an entry nearer its home; carry that one on. */
    if ((sd = dist (m, i, s)) < d) {
      m->slots[i] = with_dist (m, cur, d);
      cur = s;
      d = sd;
    }
  }
  m->mapped++;
}

/* Finds the slot holding block c (which is mapped). */
static uint32_t
slot_of (const struct hc_map *m, uint32_t c)
{
  uint32_t i = home_slot (m, hc_meta_origin (m->meta[c]));

  while ((m->slots[i] & m->idx_mask) != c + 1)
    i = next_slot (m, i);
  return i;
}

/* Empties slot i, shifting the entries after it back until one is home. */
static void
slot_delete (struct hc_map *m, uint32_t i)
{
  for (;;) {
    uint32_t j = next_slot (m, i), s = m->slots[j], d;
    if (s == 0 || (d = dist (m, j, s)) == 0) {
      m->slots[i] = 0;
      return;
    }
    m->slots[i] = with_dist (m, s, d - 1);
    i = j;
  }
}

void
hc_map_remove (struct hc_map *m, uint32_t c)
{
  slot_delete (m, slot_of (m, c));
  m->meta[c] = 0;
  m->mapped--;
}

void
hc_map_relocate (struct hc_map *m, uint32_t from, uint32_t to)
{
  struct hc_list *l = &m->queue[hc_meta_queue (m->meta[from])];
  uint32_t p = m->prev[from], n = m->next[from];

  uint32_t s = slot_of (m, from);

  m->slots[s] = (m->slots[s] & ~m->idx_mask) | (to + 1);  /* same origin: same distance, tag */
  m->meta[to] = m->meta[from];
  m->meta[from] = 0;
  m->prev[to] = p;
  m->next[to] = n;
  if (p != HC_NIL)
    m->next[p] = to;
  else
    l->head = to;
  if (n != HC_NIL)
    m->prev[n] = to;
  else
    l->tail = to;
  m->prev[from] = m->next[from] = HC_NIL;
}

void
hc_list_push_head (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  m->prev[c] = HC_NIL;
  m->next[c] = l->head;
  if (l->head != HC_NIL)
    m->prev[l->head] = c;
  else
    l->tail = c;
  l->head = c;
  l->count++;
}

void
hc_list_push_tail (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  m->next[c] = HC_NIL;
  m->prev[c] = l->tail;
  if (l->tail != HC_NIL)
    m->next[l->tail] = c;
  else
    l->head = c;
  l->tail = c;
  l->count++;
}

void
hc_list_remove (struct hc_map *m, struct hc_list *l, uint32_t c)
{
  uint32_t p = m->prev[c], n = m->next[c];

  if (p != HC_NIL)
    m->next[p] = n;
  else
    l->head = n;
  if (n != HC_NIL)
    m->prev[n] = p;
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
