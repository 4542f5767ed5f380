/* The cache directory's mapping: meta words, links and the hash index.
 *
 * The hash index is open addressing with linear probing over 32-bit slots
 * that hold a block number + 1; the key (the origin) is read from the block's
 * meta word, so the index stores no keys.  The table has n / 0.85 slots (not
 * a power of two: the slot of a hash is found by a multiply-shift, which
 * spreads any size evenly), and deletion shifts later entries of the probe
 * run back instead of leaving tombstones, so lookups never slow down with
 * churn.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

/* A 64-bit mixer (splitmix64's finaliser): consecutive block numbers land
 * far apart. */
static inline uint64_t
mix (uint64_t x)
{
  x ^= x >> 30;
  x *= UINT64_C (0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C (0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

static inline uint32_t
home_slot (const struct hc_map *m, uint64_t origin)
{
  return (uint32_t) (((mix (origin) >> 32) * (uint64_t) m->nslots) >> 32);
}

int
hc_map_init (struct hc_map *m, uint32_t n)
{
  memset (m, 0, sizeof *m);
  if (n == 0 || n >= UINT32_MAX / 2)
    return -EINVAL;
  m->n = n;
  m->nslots = (uint32_t) ((uint64_t) n * 100 / 85 + 1);
  m->meta = calloc (n, sizeof *m->meta);
  m->prev = malloc (n * sizeof *m->prev);
  m->next = malloc (n * sizeof *m->next);
  m->slots = calloc (m->nslots, sizeof *m->slots);
  if (!m->meta || !m->prev || !m->next || !m->slots) {
    hc_map_fini (m);
    return -ENOMEM;
  }
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
  free (m->meta);
  free (m->prev);
  free (m->next);
  free (m->slots);
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
  uint32_t i = home_slot (m, origin);

  for (;;) {
    uint32_t s = m->slots[i];
    if (s == 0)
      return HC_NIL;
    if (hc_meta_origin (m->meta[s - 1]) == origin)
      return s - 1;
    if (++i == m->nslots)
      i = 0;
  }
}

void
hc_map_insert (struct hc_map *m, uint32_t c, uint64_t origin, unsigned cls, bool dirty)
{
  uint32_t i = home_slot (m, origin);

  m->meta[c] = (origin & HC_M_ORIGIN_MASK) | (uint64_t) cls << HC_M_CLASS_SHIFT | HC_M_VALID
               | (dirty ? HC_M_DIRTY : 0);
  while (m->slots[i] != 0)
    if (++i == m->nslots)
      i = 0;
  m->slots[i] = c + 1;
  m->mapped++;
}

/* Finds the slot holding block c (which is mapped). */
static uint32_t
slot_of (const struct hc_map *m, uint32_t c)
{
  uint32_t i = home_slot (m, hc_meta_origin (m->meta[c]));

  while (m->slots[i] != c + 1)
    if (++i == m->nslots)
      i = 0;
  return i;
}

/* Is slot position j "between" home h and hole i (cyclically), i.e. may the
 * entry whose home is h not move back to i? */
static inline bool
cyclic_between (uint32_t h, uint32_t i, uint32_t j)
{
  return i <= j ? (h > i && h <= j) : (h > i || h <= j);
}

/* Empties slot i and shifts later members of its probe run back. */
static void
slot_delete (struct hc_map *m, uint32_t i)
{
  uint32_t j = i;

  for (;;) {
    m->slots[i] = 0;
    for (;;) {
      if (++j == m->nslots)
        j = 0;
      if (m->slots[j] == 0)
        return;
      uint32_t h = home_slot (m, hc_meta_origin (m->meta[m->slots[j] - 1]));
      if (!cyclic_between (h, i, j))
        break;
    }
    m->slots[i] = m->slots[j];
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

  m->slots[slot_of (m, from)] = to + 1;
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
