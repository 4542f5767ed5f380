/* The map: hash index against a reference under random churn (and, on a
 * tiny full map, through bucket overflow), lists, and relocation keeping a
 * block's place on its queue. */
#include <string.h>

#include "cache/map.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t
next_rand (void)
{
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Walks list l and checks it holds `count` blocks linked both ways. */
static void
check_list (const struct hc_map *m, const struct hc_list *l, const char *what)
{
  uint32_t n = 0, prev = HC_NIL;
  for (uint32_t c = l->head; c != HC_NIL && n <= m->n; c = m->blk[c].next, n++) {
    CHECK (m->blk[c].prev == prev, "%s: back link of %u", what, c);
    prev = c;
  }
  CHECK (n == l->count && prev == l->tail, "%s: count %u vs %u", what, n, l->count);
}

/* A tiny map kept full, so that both candidate buckets of an origin are
 * often full and entries overflow to later buckets: lookups stay right, and
 * once everything is removed, every overflow count is back to zero and
 * every slot empty. */
static void
test_overflow (void)
{
  enum { N = 40, ORIGINS = 400 };
  struct hc_map m;
  uint32_t where[ORIGINS] = { 0 };
  unsigned overflowed = 0;

  CHECK (hc_map_init (&m, N) == 0, "tiny init");
  for (unsigned step = 0; step < 100000; step++) {
    uint64_t o = next_rand () % ORIGINS;
    uint32_t c = hc_map_lookup (&m, o);
    CHECK (c == (where[o] ? where[o] - 1 : HC_NIL), "tiny lookup %llu at step %u",
           (unsigned long long) o, step);
    if (c == HC_NIL) {
      if (!m.free.count) { /* full: remove a random mapped block first */
        uint64_t v;
        do
          v = next_rand () % ORIGINS;
        while (!where[v]);
        hc_map_remove (&m, where[v] - 1);
        hc_list_push_tail (&m, &m.free, where[v] - 1);
        where[v] = 0;
      }
      c = hc_list_pop_head (&m, &m.free);
      hc_map_insert (&m, c, o, 0, false);
      where[o] = c + 1;
    }
    for (uint32_t b = 0; b < m.nbuckets; b++)
      overflowed += m.overflow[b] != 0;
  }
  CHECK (overflowed > 0, "the tiny map overflowed a bucket");
  for (uint64_t o = 0; o < ORIGINS; o++)
    if (where[o]) {
      CHECK (hc_map_lookup (&m, o) == where[o] - 1, "tiny final lookup %llu", (unsigned long long) o);
      hc_map_remove (&m, where[o] - 1);
    }
  for (uint32_t b = 0; b < m.nbuckets; b++)
    CHECK (m.overflow[b] == 0, "overflow count of bucket %u back to 0: %u", b, m.overflow[b]);
  for (uint32_t i = 0; i < m.nbuckets * 8; i++)
    CHECK (m.slots[i] == 0, "slot %u empty", i);
  CHECK (m.mapped == 0, "nothing mapped");
  hc_map_fini (&m);
}

int
main (void)
{
  enum { N = 5000, ORIGINS = 20000 };
  struct hc_map m;
  static uint32_t where[ORIGINS]; /* reference: origin → block + 1 */

  CHECK (hc_map_init (&m, 0) < 0, "zero blocks");
  CHECK (hc_map_init (&m, N) == 0, "init");
  CHECK (m.free.count == N && m.free.head == 0 && m.free.tail == N - 1, "free list ascending");
  check_list (&m, &m.free, "free");

  /* Random inserts and removals, checked against the reference. */
  for (unsigned step = 0; step < 200000; step++) {
    uint64_t o = next_rand () % ORIGINS;
    uint32_t c = hc_map_lookup (&m, o);
    CHECK (c == (where[o] ? where[o] - 1 : HC_NIL), "lookup %llu at step %u",
           (unsigned long long) o, step);
    if (c == HC_NIL && m.free.count) {
      c = hc_list_pop_head (&m, &m.free);
      hc_map_insert (&m, c, o, o % 8, false);
      hc_list_push_head (&m, &m.queue[0], c);
      where[o] = c + 1;
    } else if (c != HC_NIL) {
      hc_list_remove (&m, &m.queue[0], c);
      hc_map_remove (&m, c);
      hc_list_push_tail (&m, &m.free, c);
      where[o] = 0;
    }
  }
  unsigned mapped = 0;
  for (uint64_t o = 0; o < ORIGINS; o++) {
    uint32_t c = hc_map_lookup (&m, o);
    CHECK (c == (where[o] ? where[o] - 1 : HC_NIL), "final lookup %llu", (unsigned long long) o);
    if (c != HC_NIL) {
      mapped++;
      CHECK (hc_meta_origin (m.blk[c].meta) == o && hc_meta_class (m.blk[c].meta) == o % 8
             && (m.blk[c].meta & HC_M_VALID), "meta of %u", c);
    }
  }
  CHECK (mapped == m.mapped && mapped + m.free.count == N, "accounting");
  check_list (&m, &m.queue[0], "queue");
  check_list (&m, &m.free, "free");

  /* Relocation keeps the place on the queue, head and tail included. */
  for (int i = 0; i < 3; i++) {
    uint32_t v = m.queue[0].tail;
    hc_list_remove (&m, &m.queue[0], v);
    hc_map_remove (&m, v);
    hc_list_push_tail (&m, &m.free, v);
  }
  uint32_t head = m.queue[0].head, tail = m.queue[0].tail, mid = m.blk[head].next;
  uint64_t oh = hc_meta_origin (m.blk[head].meta);
  uint32_t to[3];
  for (int i = 0; i < 3; i++)
    to[i] = hc_list_pop_head (&m, &m.free);
  uint32_t mid_next = m.blk[mid].next;
  hc_map_relocate (&m, head, to[0]);
  hc_map_relocate (&m, tail, to[1]);
  hc_map_relocate (&m, mid, to[2]);
  CHECK (m.queue[0].head == to[0] && m.queue[0].tail == to[1], "ends relocated");
  CHECK (m.blk[to[0]].next == to[2] && m.blk[to[2]].next == mid_next, "middle relocated");
  CHECK (hc_map_lookup (&m, oh) == to[0] && !(m.blk[head].meta & HC_M_VALID), "index follows");
  check_list (&m, &m.queue[0], "queue after relocation");
  CHECK (hc_map_bytes (&m) < (size_t) N * 22, "about 21.5 bytes per block: %zu", hc_map_bytes (&m));
  hc_map_fini (&m);
  test_overflow ();
  return test_exit ("test_cache_map");
}
