/* SIEVE, 2Q and W-TinyLFU against independent references.
 *
 * Each reference below is written from its paper (and, for W-TinyLFU's
 * sketch, from the specification in the policy's top comment) over block
 * numbers, with a hash table and circular lists of its own: it shares no
 * code with src/policy and keeps no queue bits, no map, no two-list hand.
 * Every check compares the real policy, run through the cache directory or
 * the replayer exactly as the volume and `hintcache replay` run it, with
 * the reference:
 *
 *   1. hand-made sequences whose outcomes are worked out in the comments
 *      (SIEVE's hand sifting past visited blocks, 2Q's A1out promotion and
 *      forgetting, W-TinyLFU turning a one-hit wonder away), access by
 *      access, for both the policy and the reference;
 *   2. random, Zipf and scanning sequences with discards, access by access,
 *      at cache sizes from 1 block up (the sizes where Kin, Kout or the
 *      window round to 0 or 1 included), with blocks relocated under the
 *      policy as copy-on-write does;
 *   3. the replayer's miss counts on a synthetic trace (reads, writes,
 *      discards, multi-block and unaligned requests), and on the shared
 *      development traces at 1 %, 5 % and 10 % of their footprint when the
 *      directory given as the first argument holds them;
 *   4. the contract: victims that must be clean, an exhausted search,
 *      demotion, class-share evictions behind the policy's back, and each
 *      policy's RAM per cached block.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cache/dir.h"
#include "hintcache/replay.h"
#include "test.h"

#define NONE UINT32_MAX

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t
next_rand (void)
{
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* ---------------------------------------------------------------------------
 * Reference building blocks: a hash table from block numbers to node
 * numbers, and a pool of nodes on circular lists with sentinels.
 */

struct rmap {
  uint64_t *key; /* block + 1; 0 = empty */
  uint32_t *val;
  uint64_t mask;
};

static uint64_t
rmix (uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static void
rmap_init (struct rmap *m, uint64_t entries)
{
  uint64_t n = 16;
  while (n < 2 * entries + 16)
    n *= 2;
  m->key = calloc (n, sizeof *m->key);
  m->val = calloc (n, sizeof *m->val);
  m->mask = n - 1;
}

static void
rmap_free (struct rmap *m)
{
  free (m->key), free (m->val);
}

static uint64_t
rmap_slot (const struct rmap *m, uint64_t b)
{
  uint64_t s = rmix (b) & m->mask;
  while (m->key[s] && m->key[s] != b + 1)
    s = (s + 1) & m->mask;
  return s;
}

static uint32_t
rmap_get (const struct rmap *m, uint64_t b)
{
  uint64_t s = rmap_slot (m, b);
  return m->key[s] ? m->val[s] : NONE;
}

static void
rmap_put (struct rmap *m, uint64_t b, uint32_t v)
{
  uint64_t s = rmap_slot (m, b);
  m->key[s] = b + 1;
  m->val[s] = v;
}

static void
rmap_del (struct rmap *m, uint64_t b)
{
  uint64_t s = rmap_slot (m, b);
  if (!m->key[s])
    return;
  m->key[s] = 0;
  for (uint64_t j = (s + 1) & m->mask; m->key[j]; j = (j + 1) & m->mask) {
    uint64_t home = rmix (m->key[j] - 1) & m->mask;
    if (((j - home) & m->mask) >= ((j - s) & m->mask)) {
      m->key[s] = m->key[j], m->val[s] = m->val[j];
      m->key[j] = 0;
      s = j;
    }
  }
}

/* Nodes 0 … NLISTS−1 are the lists' sentinels; next runs from a list's
 * front (newest) to its back (oldest). */
#define NLISTS 3
struct rpool {
  uint64_t *key;
  uint32_t *prev, *next;
  uint8_t *list, *bit;
  uint32_t free_head;
  uint64_t count[NLISTS];
};

static void
pool_init (struct rpool *p, uint64_t nodes)
{
  nodes += NLISTS;
  p->key = calloc (nodes, sizeof *p->key);
  p->prev = calloc (nodes, sizeof *p->prev);
  p->next = calloc (nodes, sizeof *p->next);
  p->list = calloc (nodes, 1);
  p->bit = calloc (nodes, 1);
  for (uint32_t s = 0; s < NLISTS; s++)
    p->prev[s] = p->next[s] = s, p->count[s] = 0;
  for (uint64_t i = NLISTS; i < nodes; i++)
    p->next[i] = i + 1 < nodes ? (uint32_t) i + 1 : NONE;
  p->free_head = NLISTS;
}

static void
pool_free (struct rpool *p)
{
  free (p->key), free (p->prev), free (p->next), free (p->list), free (p->bit);
}

static void
unlink_node (struct rpool *p, uint32_t n)
{
  p->next[p->prev[n]] = p->next[n];
  p->prev[p->next[n]] = p->prev[n];
  p->count[p->list[n]]--;
}

static void
push_front (struct rpool *p, unsigned l, uint32_t n)
{
  p->prev[n] = l;
  p->next[n] = p->next[l];
  p->prev[p->next[l]] = n;
  p->next[l] = n;
  p->list[n] = (uint8_t) l;
  p->count[l]++;
}

static void
move_front (struct rpool *p, unsigned l, uint32_t n)
{
  unlink_node (p, n);
  push_front (p, l, n);
}

static uint32_t
back (const struct rpool *p, unsigned l)
{
  return p->prev[l] == l ? NONE : p->prev[l];
}

/* ---------------------------------------------------------------------------
 * The references.  One cache of `cap` blocks; access() returns whether the
 * block was cached; remove() is a discard; restore() puts a block in as a
 * volume's load does (the cache not full, nothing counted).
 */

enum ref_kind { R_SIEVE, R_TWOQ, R_WTLFU };

struct ref {
  enum ref_kind kind;
  uint64_t cap, used;
  struct rmap map;
  struct rpool pool;
  /* SIEVE */
  uint32_t hand;              /* NONE: start at the back */
  /* 2Q */
  uint64_t kin, kout;
  /* W-TinyLFU */
  uint64_t window, protect, samples, period;
  uint8_t *cnt;               /* 4 rows × cap counters, a byte each */
};

/* SIEVE: list 0 is the queue. */
enum { S_Q = 0 };
/* 2Q: lists. */
enum { Q_IN = 0, Q_M = 1, Q_OUT = 2 };
/* W-TinyLFU: lists. */
enum { W_WIN = 0, W_PROB = 1, W_PROT = 2 };

static void
ref_init (struct ref *r, enum ref_kind kind, uint64_t cap)
{
  memset (r, 0, sizeof *r);
  r->kind = kind;
  r->cap = cap;
  r->hand = NONE;
  r->kin = cap / 4;
  r->kout = cap / 2;
  r->window = cap - cap * 99 / 100;
  r->protect = (cap - r->window) * 4 / 5;
  r->period = 10 * cap;
  rmap_init (&r->map, cap + r->kout + 1);
  pool_init (&r->pool, cap + r->kout + 1);
  if (kind == R_WTLFU)
    r->cnt = calloc (4 * cap, 1);
}

static void
ref_free (struct ref *r)
{
  rmap_free (&r->map);
  pool_free (&r->pool);
  free (r->cnt);
}

static uint32_t
new_node (struct ref *r, uint64_t b, unsigned l)
{
  struct rpool *p = &r->pool;
  uint32_t n = p->free_head;
  p->free_head = p->next[n];
  p->key[n] = b;
  p->bit[n] = 0;
  push_front (p, l, n);
  rmap_put (&r->map, b, n);
  return n;
}

static void
drop_node (struct ref *r, uint32_t n)
{
  struct rpool *p = &r->pool;
  unlink_node (p, n);
  rmap_del (&r->map, p->key[n]);
  p->next[n] = p->free_head;
  p->free_head = n;
}

/* W-TinyLFU's sketch, from the policy's specification: 4 rows of cap
 * counters, row r's counter for block b at ⌊((a + r·c) mod 2³²) · cap / 2³²⌋
 * where a and c | 1 are the low and high halves of splitmix64's finaliser
 * of b + 0x9e3779b97f4a7c15. */
static uint64_t
sketch_cell (const struct ref *r, uint64_t b, unsigned row)
{
  uint64_t z = b + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  uint32_t a = (uint32_t) z, c = (uint32_t) (z >> 32) | 1u;
  uint32_t x = a + row * c;
  return row * r->cap + (((uint64_t) x * r->cap) >> 32);
}

static unsigned
sketch_estimate (const struct ref *r, uint64_t b)
{
  unsigned e = 15;
  for (unsigned row = 0; row < 4; row++) {
    unsigned v = r->cnt[sketch_cell (r, b, row)];
    if (v < e)
      e = v;
  }
  return e;
}

static void
sketch_add (struct ref *r, uint64_t b)
{
  for (unsigned row = 0; row < 4; row++) {
    uint8_t *v = &r->cnt[sketch_cell (r, b, row)];
    if (*v < 15)
      ++*v;
  }
  if (++r->samples == r->period) {
    for (uint64_t i = 0; i < 4 * r->cap; i++)
      r->cnt[i] /= 2;
    r->samples /= 2;
  }
}

/* SIEVE's eviction, as the paper's pseudocode: from the hand (or the back)
 * towards the front, clearing visited bits, wrapping at the front. */
static void
sieve_evict (struct ref *r)
{
  struct rpool *p = &r->pool;
  uint32_t o = r->hand != NONE ? r->hand : back (p, S_Q);

  while (p->bit[o]) {
    p->bit[o] = 0;
    o = p->prev[o] == S_Q ? back (p, S_Q) : p->prev[o];
  }
  r->hand = p->prev[o] == S_Q ? NONE : p->prev[o];
  drop_node (r, o);
}

/* 2Q's reclaimfor(): the paper's pseudocode. */
static void
twoq_reclaim (struct ref *r)
{
  struct rpool *p = &r->pool;

  if (p->count[Q_IN] > r->kin) {
    uint32_t y = back (p, Q_IN);
    move_front (p, Q_OUT, y); /* its identifier goes to A1out */
    if (p->count[Q_OUT] > r->kout)
      drop_node (r, back (p, Q_OUT));
  } else {
    drop_node (r, back (p, Q_M));
  }
}

/* W-TinyLFU's eviction when the cache is full and a block comes in. */
static void
wtlfu_evict (struct ref *r)
{
  struct rpool *p = &r->pool;
  uint32_t v = back (p, W_PROB) != NONE ? back (p, W_PROB) : back (p, W_PROT);

  if (p->count[W_WIN] && p->count[W_WIN] >= r->window) {
    uint32_t cand = back (p, W_WIN);
    if (v != NONE && sketch_estimate (r, p->key[cand]) > sketch_estimate (r, p->key[v])) {
      move_front (p, W_PROB, cand);
      drop_node (r, v);
    } else {
      drop_node (r, cand);
    }
  } else {
    drop_node (r, v != NONE ? v : back (p, W_WIN));
  }
}

/* The window's overflow moves to probation (no contest: there was room). */
static void
wtlfu_settle_window (struct ref *r)
{
  if (r->pool.count[W_WIN] > r->window)
    move_front (&r->pool, W_PROB, back (&r->pool, W_WIN));
}

static bool
ref_access (struct ref *r, uint64_t b)
{
  struct rpool *p = &r->pool;
  uint32_t n = rmap_get (&r->map, b);

  switch (r->kind) {
  case R_SIEVE:
    if (n != NONE) {
      p->bit[n] = 1;
      return true;
    }
    if (r->used == r->cap)
      sieve_evict (r), r->used--;
    new_node (r, b, S_Q);
    r->used++;
    return false;
  case R_TWOQ: {
    bool ghost = false;
    if (n != NONE && p->list[n] == Q_M) {
      move_front (p, Q_M, n);
      return true;
    }
    if (n != NONE && p->list[n] == Q_IN)
      return true;
    if (n != NONE) { /* in A1out */
      drop_node (r, n);
      ghost = true;
    }
    if (r->used == r->cap)
      twoq_reclaim (r), r->used--;
    new_node (r, b, ghost ? Q_M : Q_IN);
    r->used++;
    return false;
  }
  case R_WTLFU:
    sketch_add (r, b);
    if (n != NONE) {
      if (p->list[n] == W_PROB) {
        move_front (p, W_PROT, n);
        if (p->count[W_PROT] > r->protect)
          move_front (p, W_PROB, back (p, W_PROT));
      } else {
        move_front (p, p->list[n], n);
      }
      return true;
    }
    if (r->used == r->cap)
      wtlfu_evict (r), r->used--;
    new_node (r, b, W_WIN);
    r->used++;
    wtlfu_settle_window (r);
    return false;
  }
  return false;
}

static void
ref_remove (struct ref *r, uint64_t b)
{
  uint32_t n = rmap_get (&r->map, b);

  if (n == NONE || (r->kind == R_TWOQ && r->pool.list[n] == Q_OUT))
    return;
  if (r->kind == R_SIEVE && r->hand == n)
    r->hand = r->pool.prev[n] == S_Q ? NONE : r->pool.prev[n];
  drop_node (r, n);
  r->used--;
}

static void
ref_restore (struct ref *r, uint64_t b)
{
  new_node (r, b, r->kind == R_TWOQ ? Q_IN : r->kind == R_WTLFU ? W_WIN : S_Q);
  r->used++;
  if (r->kind == R_WTLFU)
    wtlfu_settle_window (r);
}

/* ---------------------------------------------------------------------------
 * The policies under test, through the cache directory.
 */

static const struct {
  enum ref_kind kind;
  const char *name;
} policies[] = { { R_SIEVE, "sieve" }, { R_TWOQ, "2q" }, { R_WTLFU, "wtinylfu" } };
#define NPOL (sizeof policies / sizeof policies[0])

static bool always (void *arg, uint32_t c) { (void) arg, (void) c; return true; }

static bool
clean_only (void *arg, uint32_t c)
{
  struct hc_directory *d = arg;
  return !(d->map.blk[c].meta & HC_M_DIRTY);
}

static void
dir_open (struct hc_directory *d, const char *policy, uint32_t n, bool defer_free)
{
  int id = hc_policy_find (policy);
  CHECK (id >= 0, "policy %s is registered", policy);
  CHECK (hc_dir_init (d, n, (unsigned) (id < 0 ? 0 : id), NULL, defer_free) == 0, "%s: init %u",
         policy, n);
}

/* One access as the replayer makes it; returns true on a hit. */
static bool
dir_access (struct hc_directory *d, uint64_t origin, bool write)
{
  struct hc_access a = { .origin = origin, .write = write };
  enum hc_bypass why;
  uint32_t c;

  if (hc_dir_access (d, &a) != HC_NIL)
    return true;
  if (!hc_dir_admit (d, &a, &why) || !hc_dir_make_room (d, &a, always, NULL, &why, NULL)) {
    hc_dir_bypass (d, &a, why);
    CHECK (0, "%s: a miss of %" PRIu64 " was not admitted (%d)", d->policy.ops->name, origin,
           (int) why);
    return false;
  }
  c = hc_dir_take_free (d);
  hc_dir_install (d, c, &a, write);
  return false;
}

static void
dir_discard (struct hc_directory *d, uint64_t origin)
{
  uint32_t c = hc_dir_find (d, origin);
  if (c != HC_NIL)
    hc_dir_invalidate (d, c);
}

/* The contract: every mapped block on the queue its bits name, the queues'
 * counts adding up to the mapped blocks. */
static bool
queues_consistent (const struct hc_directory *d)
{
  const struct hc_map *m = &d->map;
  uint64_t total = 0;

  for (unsigned q = 0; q < 4; q++) {
    uint32_t k = 0;
    for (uint32_t c = m->queue[q].head; c != HC_NIL; c = m->blk[c].next, k++) {
      uint64_t w = m->blk[c].meta;
      if (!(w & HC_M_VALID) || hc_meta_queue (w) != q || k > m->n)
        return false;
    }
    if (k != m->queue[q].count)
      return false;
    total += k;
  }
  return total == m->mapped;
}

/* ---------------------------------------------------------------------------
 * 1. Hand-made sequences.
 */

/* The queue holding origin, or -1 if it is not cached. */
static int
queue_of (const struct hc_directory *d, uint64_t origin)
{
  uint32_t c = hc_dir_find (d, origin);
  return c == HC_NIL ? -1 : (int) hc_meta_queue (d->map.blk[c].meta);
}

/* Runs `seq` (block numbers) through the policy and the reference, checking
 * each outcome against `expect` ('h' hit, 'm' miss). */
static void
run_expected (struct hc_directory *d, struct ref *r, const char *what, const uint64_t *seq,
              size_t n, const char *expect)
{
  CHECK_EQ (strlen (expect), n, "%s: an outcome per access", what);
  for (size_t i = 0; i < n; i++) {
    bool hp = dir_access (d, seq[i], false), hr = ref_access (r, seq[i]);
    CHECK (hp == (expect[i] == 'h'), "%s: access %zu (block %" PRIu64 "): the policy %s, worked "
           "out: %s", what, i + 1, seq[i], hp ? "hit" : "missed",
           expect[i] == 'h' ? "hit" : "miss");
    CHECK (hr == (expect[i] == 'h'), "%s: access %zu (block %" PRIu64 "): the reference %s",
           what, i + 1, seq[i], hr ? "hit" : "missed");
  }
}

static void
check_cached (const struct hc_directory *d, const char *what, const uint64_t *in, size_t nin,
              const uint64_t *out, size_t nout)
{
  for (size_t i = 0; i < nin; i++)
    CHECK (hc_dir_find (d, in[i]) != HC_NIL, "%s: %" PRIu64 " is cached", what, in[i]);
  for (size_t i = 0; i < nout; i++)
    CHECK (hc_dir_find (d, out[i]) == HC_NIL, "%s: %" PRIu64 " is not cached", what, out[i]);
}

/* SIEVE in a cache of 4 (A … J are blocks 1 … 10; queues written front =
 * newest first, * = visited, ^ = the hand).
 *
 *   A B C D      misses            D C B A       the hand at the back
 *   A B          hits              D C B* A*
 *   E            miss: A* and B* are passed (bits cleared), C evicted; the
 *                hand stays at C's newer neighbour D      E D^ B A
 *   A            hit               E D^ B A*
 *   F            miss: D evicted, the hand to E           F E^ B A*
 *   D            miss: E evicted   D F^ B A*
 *   B            hit               D F^ B* A*
 *   G            miss: F evicted   G D^ B* A*
 *   C            miss: D evicted   C G^ B* A*
 *   A            hit
 *   H            miss: G evicted   H C^ B* A*
 *   E            miss: C evicted   E H^ B* A*
 *   H            hit               E H*^ B* A*
 *   I            miss: H* passed, E evicted; E was the newest, so the hand
 *                goes back to the back                   I H B* A*
 *   J            miss: A* and B* passed, H evicted       J I^ B A
 *
 * A and B, each hit once and then left alone, outlive 8 blocks that came
 * later (LRU would have evicted them at the fourth and fifth misses after
 * their hits); the final cache holds A, B, I and J. */
static void
check_sieve_by_hand (void)
{
  enum { A = 1, B, C, D, E, F, G, H, I, J };
  static const uint64_t seq[] = { A, B, C, D, A, B, E, A, F, D, B, G, C, A, H, E, H, I, J };
  static const char expect[] = "mmmmhhmhmmhmmhmmhmm";
  struct hc_directory d;
  struct ref r;

  dir_open (&d, "sieve", 4, false);
  ref_init (&r, R_SIEVE, 4);
  run_expected (&d, &r, "sieve by hand", seq, sizeof seq / sizeof seq[0], expect);
  static const uint64_t in[] = { A, B, I, J }, out[] = { C, D, E, F, G, H };
  check_cached (&d, "sieve by hand", in, 4, out, 6);
  CHECK (queues_consistent (&d), "sieve by hand: queues");
  hc_dir_fini (&d);
  ref_free (&r);
}

/* 2Q in a cache of 8: Kin = 2, Kout = 4 (lists front = newest first).
 *
 *   1 … 8    misses                     A1in 8 7 6 5 4 3 2 1
 *   9        miss: A1in holds 8 > Kin, its back (1) goes   A1out 1
 *   10       miss: 2 goes                                  A1out 2 1
 *   1        miss, found in A1out: 1 enters Am; 3 goes     A1out 3 2, Am 1
 *   1        hit in Am
 *   4        hit in A1in (nothing moves: A1in is a FIFO)
 *   11       miss: 4 goes all the same                     A1out 4 3 2
 *   2        miss, in A1out: to Am; 5 goes                 A1out 5 4 3, Am 2 1
 *   12       miss: 6 goes                                  A1out 6 5 4 3
 *   13       miss: 7 goes; A1out over Kout forgets 3       A1out 7 6 5 4
 *   3        miss, forgotten: to A1in; 8 goes, 4 forgotten A1out 8 7 6 5
 *   4        miss, forgotten: to A1in; 9 goes, 5 forgotten A1out 9 8 7 6
 *   6 7 8 9  misses, each in A1out: to Am; A1in's back goes each time
 *            (10, 11, 12, 13)            A1out 13 12 11 10, A1in 4 3,
 *                                        Am 9 8 7 6 2 1
 *   1        hit in Am                   Am 1 9 8 7 6 2
 *   14       miss: A1in holds 2 = Kin, so Am's LRU block (2) goes, not
 *            remembered                  A1in 14 4 3, Am 1 9 8 7 6
 *   2        miss, not in A1out: to A1in; 3 goes (11 … 13 stay)
 *                                        A1out 3 13 12 11, A1in 2 14 4
 *   10       miss, forgotten: to A1in; 4 goes   A1out 4 3 13 12, A1in 10 2 14
 *   3        miss, in A1out: to Am; 14 goes     A1out 14 4 13 12, A1in 10 2
 *   12       miss, in A1out: to Am; A1in holds Kin, so Am's LRU (6) goes
 *                                        Am 12 3 1 9 8 7
 *   5        miss, long forgotten: to A1in; Am's LRU (7) goes
 *                                        A1in 5 10 2, Am 12 3 1 9 8   */
static void
check_twoq_by_hand (void)
{
  static const uint64_t seq[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 1, 4, 11, 2, 12, 13, 3,
                                  4, 6, 7, 8, 9, 1, 14, 2, 10, 3, 12, 5 };
  static const char expect[] = "mmmmmmmmmmmhhmmmmmmmmmmhmmmmmm";
  struct hc_directory d;
  struct ref r;

  dir_open (&d, "2q", 8, false);
  ref_init (&r, R_TWOQ, 8);
  run_expected (&d, &r, "2q by hand", seq, sizeof seq / sizeof seq[0], expect);
  static const uint64_t in[] = { 5, 10, 2, 12, 3, 1, 9, 8 }, out[] = { 4, 6, 7, 11, 13, 14 };
  check_cached (&d, "2q by hand", in, 8, out, 6);
  static const uint64_t a1in[] = { 5, 10, 2 };
  for (size_t i = 0; i < 3; i++)
    CHECK (queue_of (&d, a1in[i]) == 0, "2q by hand: %" PRIu64
           " in A1in (queue 0)", a1in[i]);
  static const uint64_t am[] = { 12, 3, 1, 9, 8 };
  for (size_t i = 0; i < 5; i++)
    CHECK (queue_of (&d, am[i]) == 1, "2q by hand: %" PRIu64
           " in Am (queue 1)", am[i]);
  CHECK (queues_consistent (&d), "2q by hand: queues");
  hc_dir_fini (&d);
  ref_free (&r);
}

/* W-TinyLFU in a cache of 1000: a window of 10, protected up to 792, the
 * sketch 4 rows of 1000 counters, halved after 10,000 accesses (not
 * reached here).
 *
 *   Warm blocks w1 … w5 (blocks 1 … 5) are each read twice into the empty
 *   cache (a miss, then a hit in the window): each is estimated at 2.  Then
 *   995 cold blocks (1001 …) are restored as a volume's load restores them
 *   (nothing counted, estimated at 0).  The window keeps the last 10, and
 *   probation the rest in order: w1 at its back, the first victim.
 *
 *   X (block 100)  miss, X counted once.  The window is at its size: its
 *                  back, a cold block (0), meets w1 (2) and goes.
 *   Y1 … Y9        misses (each counted once): 9 more cold blocks leave the
 *                  window the same way; X is now at the window's back.
 *   Y10            miss: X (1) meets w1 (2) and is turned away — a one-hit
 *                  wonder, gone while an LRU of 1000 would keep it for 990
 *                  more misses.
 *   X              miss (counted: 2); Y1 (1) meets w1 (2) and goes.
 *   X              hit in the window (3).
 *   Y11 … Y19      misses: Y2 … Y10 meet w1 and go; X reaches the back.
 *   Y20            miss: X (3) beats w1 (2): X enters probation, w1 goes.
 *   w1             miss (it was evicted; counted: 3); Y11 (1) meets w2 (2).
 *   X              hit in probation: X moves to protected.
 *   w2             hit: still cached, as probation's back; to protected.
 *   T (block 300)  miss (1); Y12 (1) meets w3 (2), now probation's back.
 *   T              hit in the window (2).
 *   Z1 … Z9        misses: Y13 … Y20 leave the window for good; then w1
 *                  (3) reaches its back and beats w3 (2): w1 is back in
 *                  probation, w3 goes.
 *   Z10            miss: T (2) meets w4 (2): a tie keeps the incumbent, T
 *                  goes.
 *   T              miss.
 *
 * The outcomes hold if the sketch estimates each of these blocks exactly,
 * which the reference's sketch confirms (4 rows of 1000 counters and 37
 * counted blocks make a collision in all 4 rows most unlikely). */
static void
check_wtinylfu_by_hand (void)
{
  enum { W1 = 1, X = 100, Y = 200, T = 300, Z = 400, COLD = 1001 };
  struct hc_directory d;
  struct ref r;
  uint64_t seq[80];
  char expect[80];
  size_t n = 0;

  dir_open (&d, "wtinylfu", 1000, false);
  ref_init (&r, R_WTLFU, 1000);
  for (uint64_t w = W1; w < W1 + 5; w++) {
    seq[n] = w, expect[n++] = 'm';
    seq[n] = w, expect[n++] = 'h';
  }
  expect[n] = '\0';
  run_expected (&d, &r, "wtinylfu warm-up", seq, n, expect);
  for (uint64_t c = COLD; c < COLD + 995; c++) {
    hc_dir_restore (&d, d.map.free.head, c, 0, false);
    ref_restore (&r, c);
  }
  CHECK (d.map.free.count == 0 && r.used == 1000, "wtinylfu by hand: the cache is full");
  CHECK (d.map.queue[0].tail == hc_dir_find (&d, W1), "wtinylfu by hand: w1 is probation's back");
  n = 0;
  seq[n] = X, expect[n++] = 'm';
  for (uint64_t i = 1; i <= 10; i++)
    seq[n] = Y + i, expect[n++] = 'm';
  seq[n] = X, expect[n++] = 'm';
  seq[n] = X, expect[n++] = 'h';
  for (uint64_t i = 11; i <= 20; i++)
    seq[n] = Y + i, expect[n++] = 'm';
  seq[n] = W1, expect[n++] = 'm';
  seq[n] = X, expect[n++] = 'h';
  seq[n] = W1 + 1, expect[n++] = 'h';
  seq[n] = T, expect[n++] = 'm';
  seq[n] = T, expect[n++] = 'h';
  for (uint64_t i = 1; i <= 10; i++)
    seq[n] = Z + i, expect[n++] = 'm';
  seq[n] = T, expect[n++] = 'm';
  expect[n] = '\0';
  run_expected (&d, &r, "wtinylfu by hand", seq, n, expect);
  CHECK (sketch_estimate (&r, X) == 4 && sketch_estimate (&r, W1) == 3
             && sketch_estimate (&r, W1 + 1) == 3 && sketch_estimate (&r, COLD) == 0,
         "wtinylfu by hand: the sketch is exact for these blocks (x %u, w1 %u, w2 %u, cold %u)",
         sketch_estimate (&r, X), sketch_estimate (&r, W1), sketch_estimate (&r, W1 + 1),
         sketch_estimate (&r, COLD));
  for (uint64_t i = 1; i <= 20; i++)
    CHECK (sketch_estimate (&r, Y + i) == 1, "wtinylfu by hand: y%" PRIu64 " estimated once", i);
  CHECK (sketch_estimate (&r, T) == 3 && sketch_estimate (&r, W1 + 3) == 2,
         "wtinylfu by hand: the sketch is exact for T (%u) and w4 (%u)", sketch_estimate (&r, T),
         sketch_estimate (&r, W1 + 3));
  static const uint64_t in[] = { X, W1, W1 + 1, W1 + 3, T, Z + 10, COLD },
                        out[] = { Y + 1, Y + 11, Y + 20, W1 + 2, COLD + 985, COLD + 994 };
  check_cached (&d, "wtinylfu by hand", in, 7, out, 6);
  CHECK (queue_of (&d, W1) == 0, "wtinylfu by hand: w1 in probation");
  CHECK (queue_of (&d, X) == 1, "wtinylfu by hand: X protected");
  CHECK (queues_consistent (&d), "wtinylfu by hand: queues");
  hc_dir_fini (&d);
  ref_free (&r);
}

/* ---------------------------------------------------------------------------
 * 2. Generated sequences, access by access.
 */

/* Zipf(alpha) over `span` blocks, scattered by a multiplicative permutation. */
struct zipf {
  double *cdf;
  uint64_t span;
};

static void
zipf_init (struct zipf *z, uint64_t span, double alpha)
{
  double sum = 0;
  z->span = span;
  z->cdf = malloc (span * sizeof *z->cdf);
  for (uint64_t i = 0; i < span; i++)
    z->cdf[i] = (sum += 1.0 / pow ((double) (i + 1), alpha));
  for (uint64_t i = 0; i < span; i++)
    z->cdf[i] /= sum;
}

static uint64_t
zipf_next (const struct zipf *z)
{
  double u = (double) (next_rand () >> 11) / 9007199254740992.0;
  uint64_t lo = 0, hi = z->span - 1;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (z->cdf[mid] < u)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (lo * 0x9e3779b97f4a7c15ull) % (z->span * 7 + 1);
}

enum op_kind { OP_ACCESS, OP_DISCARD, OP_RELOCATE };
struct op {
  enum op_kind kind;
  uint64_t block;
};

/* A mixed workload: Zipf phases, uniform phases, sequential scans (the
 * one-hit wonders), discards and relocations. */
static size_t
make_ops (struct op *ops, size_t n, uint64_t span)
{
  struct zipf z;
  uint64_t scan = 1u << 30;
  size_t k = 0;

  zipf_init (&z, span, 0.7 + (double) (next_rand () % 6) / 10);
  while (k < n) {
    unsigned phase = (unsigned) (next_rand () % 4);
    size_t len = 1 + next_rand () % (n / 8 + 1);
    for (size_t i = 0; i < len && k < n; i++) {
      uint64_t r = next_rand ();
      struct op o = { OP_ACCESS, 0 };
      if (r % 100 < 2)
        o.kind = OP_DISCARD;
      else if (r % 100 < 4)
        o.kind = OP_RELOCATE;
      switch (phase) {
      case 0: case 1: o.block = zipf_next (&z); break;
      case 2: o.block = (r >> 8) % (span * 2); break;
      default: o.block = o.kind == OP_ACCESS ? scan++ : zipf_next (&z); break;
      }
      ops[k++] = o;
    }
  }
  free (z.cdf);
  return k;
}

static unsigned relocations;

/* Moves the mapping of a random cached block to a free block, as
 * copy-on-write does (the reference is not told: nothing may change). */
static void
relocate_one (struct hc_directory *d, uint64_t seed)
{
  uint32_t to = hc_dir_take_free (d);
  if (to == HC_NIL)
    return;
  for (uint32_t k = 0; k < d->map.n; k++) {
    uint32_t from = (uint32_t) ((seed + k) % d->map.n);
    if (from != to && (d->map.blk[from].meta & HC_M_VALID)) {
      hc_dir_relocate (d, from, to);
      relocations++;
      return;
    }
  }
  hc_list_push_head (&d->map, &d->map.free, to);
}

/* Runs ops through the policy and the reference, and reports the first
 * access where they part. */
static void
compare_ops (const char *policy, enum ref_kind kind, uint32_t cap, const struct op *ops, size_t n,
             const char *what)
{
  struct hc_directory d;
  struct ref r;
  bool parted = false;

  dir_open (&d, policy, cap, false);
  ref_init (&r, kind, cap);
  for (size_t i = 0; i < n && !parted; i++) {
    switch (ops[i].kind) {
    case OP_ACCESS: {
      bool hp = dir_access (&d, ops[i].block, i % 3 == 0), hr = ref_access (&r, ops[i].block);
      if (hp != hr) {
        CHECK (0, "%s: %s at %u blocks: access %zu (block %" PRIu64 ") %s, the reference %s",
               what, policy, cap, i, ops[i].block, hp ? "hits" : "misses", hr ? "hits" : "misses");
        parted = true;
      }
      break;
    }
    case OP_DISCARD:
      dir_discard (&d, ops[i].block);
      ref_remove (&r, ops[i].block);
      break;
    case OP_RELOCATE:
      relocate_one (&d, ops[i].block);
      break;
    }
  }
  CHECK (queues_consistent (&d), "%s: %s at %u blocks: queues consistent", what, policy, cap);
  CHECK_EQ ((uint64_t) d.map.mapped, r.used, "%s: %s at %u blocks: as many cached (%u vs %" PRIu64
            ")", what, policy, cap, d.map.mapped, r.used);
  hc_dir_fini (&d);
  ref_free (&r);
}

static void
check_generated (void)
{
  static const uint32_t caps[] = { 1, 2, 3, 4, 5, 7, 8, 10, 16, 50, 99, 100, 101, 199, 333, 1000,
                                   4096 };
  enum { N = 60000 };
  struct op *ops = malloc (N * sizeof *ops);
  unsigned runs = 0;

  for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
    uint64_t span = caps[c] * (2 + next_rand () % 6);
    size_t n = make_ops (ops, caps[c] < 100 ? N / 4 : N, span);
    for (size_t p = 0; p < NPOL; p++) {
      compare_ops (policies[p].name, policies[p].kind, caps[c], ops, n, "generated");
      runs++;
    }
  }
  /* Long enough for W-TinyLFU's sketch to halve many times. */
  struct op *long_ops = malloc (400000 * sizeof *long_ops);
  size_t n = make_ops (long_ops, 400000, 3000);
  for (size_t p = 0; p < NPOL; p++, runs++)
    compare_ops (policies[p].name, policies[p].kind, 1000, long_ops, n, "long generated");
  /* The top of the map's 40-bit block numbers (2Q keeps origins in 40 bits). */
  for (size_t i = 0; i < n; i++)
    long_ops[i].block = HC_ORIGIN_MAX - long_ops[i].block % (UINT64_C (1) << 32);
  for (size_t p = 0; p < NPOL; p++, runs++)
    compare_ops (policies[p].name, policies[p].kind, 500, long_ops, n / 4, "high origins");
  free (long_ops);
  free (ops);
  CHECK (relocations > 1000, "blocks were relocated under the policies (%u)", relocations);
  printf ("  %u generated runs (%u relocations): every access as the references say\n", runs,
          relocations);
}

/* ---------------------------------------------------------------------------
 * 3. The replayer.
 */

struct ref_req {
  char op;
  uint64_t off, len;
};

/* The reference's own parse of a labeled CSV (gzip or plain): op, offset,
 * length. */
static int
load_csv (const char *path, struct ref_req **out, size_t *count)
{
  gzFile f = gzopen (path, "rb");
  char line[4096];
  size_t n = 0, cap = 0;
  struct ref_req *q = NULL;

  if (!f)
    return -errno;
  while (gzgets (f, line, sizeof line)) {
    if (strncmp (line, "ts_ns,", 6) == 0)
      continue;
    char *p = strchr (line, ','), *end;
    if (!p)
      continue;
    struct ref_req r = { .op = p[1] };
    r.off = strtoull (p + 3, &end, 10);
    r.len = strtoull (end + 1, NULL, 10);
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      q = realloc (q, cap * sizeof *q);
    }
    q[n++] = r;
  }
  gzclose (f);
  *out = q;
  *count = n;
  return 0;
}

/* The replayer's semantics: each block of a read or write is an access,
 * each block of a discard is removed; flushes and empty requests are
 * nothing. */
static uint64_t
ref_replay_misses (enum ref_kind kind, uint64_t cap, const struct ref_req *q, size_t n)
{
  struct ref r;
  uint64_t misses = 0;

  ref_init (&r, kind, cap);
  for (size_t i = 0; i < n; i++) {
    if (!q[i].len || (q[i].op != 'R' && q[i].op != 'W' && q[i].op != 'D'))
      continue;
    for (uint64_t b = q[i].off / 4096; b <= (q[i].off + q[i].len - 1) / 4096; b++) {
      if (q[i].op == 'D')
        ref_remove (&r, b);
      else
        misses += !ref_access (&r, b);
    }
  }
  ref_free (&r);
  return misses;
}

static void
check_replayer (const char *path, const char *const *sizes, size_t nsizes)
{
  const char *pols[NPOL];
  const enum hc_strategy none = HC_STRATEGY_NONE;
  struct hc_replay_row *rows = NULL;
  struct hc_replay_summary sum;
  struct hc_trace_opts o = { 0 };
  struct ref_req *q = NULL;
  size_t nrows = 0, nq = 0;
  char why[256];

  for (size_t p = 0; p < NPOL; p++)
    pols[p] = policies[p].name;
  struct hc_replay_config cfg = {
    .block_size = 4096, .sizes = sizes, .nsizes = nsizes, .strategies = &none, .nstrategies = 1,
    .policies = pols, .npolicies = NPOL,
  };
  int rc = hc_replay_run (path, &o, &cfg, &rows, &nrows, &sum, why, sizeof why);
  CHECK (rc == 0, "%s replays: %s", path, why);
  CHECK (load_csv (path, &q, &nq) == 0, "%s loads", path);
  CHECK_EQ (nrows, NPOL * nsizes, "%s: a row per policy and size", path);
  for (size_t i = 0; rc == 0 && i < nrows; i++) {
    const struct hc_replay_row *row = &rows[i];
    enum ref_kind kind = R_SIEVE;
    for (size_t p = 0; p < NPOL; p++)
      if (strcmp (row->policy, policies[p].name) == 0)
        kind = policies[p].kind;
    uint64_t e = ref_replay_misses (kind, row->cache_blocks, q, nq);
    CHECK_EQ (row->misses, e, "%s: %s at %" PRIu64 " blocks: %" PRIu64 " misses, the reference %"
              PRIu64, path, row->policy, row->cache_blocks, row->misses, e);
    CHECK_EQ (row->bypasses, 0, "%s: %s admits every miss", path, row->policy);
    printf ("  %s: %-8s at %7" PRIu64 " blocks: %8" PRIu64 " of %8" PRIu64 " accesses missed = "
            "reference\n", path, row->policy, row->cache_blocks, row->misses, row->accesses);
  }
  free (rows);
  free (q);
}

/* A labeled CSV: skewed reads and writes of 1–4 blocks, some unaligned,
 * discards, flushes, empty requests and sequential scans. */
static void
write_trace (const char *path, unsigned nreq, uint64_t span)
{
  FILE *f = fopen (path, "w");
  struct zipf z;
  uint64_t scan = 0;

  zipf_init (&z, span, 0.9);
  fprintf (f, "ts_ns,op,offset_bytes,length_bytes,flags,ioprio_class,ioprio_hint,ioprio_level,"
              "comm,pid,label,object\n");
  for (unsigned i = 0; i < nreq; i++) {
    uint64_t r = next_rand ();
    unsigned kind = (unsigned) (r % 100);
    const char *op = kind < 62 ? "R" : kind < 90 ? "W" : kind < 95 ? "D" : kind < 97 ? "F" : "R";
    uint64_t blk = zipf_next (&z), off, len;
    off = blk * 4096 + ((r >> 40) % 5 == 0 ? (r >> 44) % 4096 : 0);
    len = ((r >> 50) % 4 + 1) * 4096 - ((r >> 54) % 3 == 0 ? 512 : 0);
    if (kind >= 97) { /* a scan */
      off = (span * 8 + scan) * 4096;
      scan += 32;
      len = 128 * 1024;
    }
    if (op[0] == 'F' || (r >> 58) % 40 == 0)
      len = 0;
    fprintf (f, "%u,%s,%" PRIu64 ",%" PRIu64 ",%s,be,0,4,db,1,table,/db/t\n", i * 1000, op, off,
             len, op);
  }
  fclose (f);
  free (z.cdf);
}

/* ---------------------------------------------------------------------------
 * 4. The contract.
 */

/* Victims that must be clean: each one is clean, the search never loops,
 * and an all-dirty cache makes no room until a block is cleaned. */
static void
check_refusals (const char *policy)
{
  struct hc_directory d;
  enum hc_bypass why;
  unsigned evicted = 0;

  dir_open (&d, policy, 256, false);
  for (unsigned i = 0; i < 6000; i++)
    dir_access (&d, next_rand () % 700, false);
  for (uint32_t c = 0; c < d.map.n; c++)
    if ((d.map.blk[c].meta & HC_M_VALID) && next_rand () % 3)
      hc_dir_set_dirty (&d, c, 0);
  for (unsigned i = 0; i < 50; i++) {
    struct hc_access a = { .origin = 100000 + i };
    uint32_t ev = HC_NIL;
    if (!hc_dir_make_room (&d, &a, clean_only, &d, &why, &ev))
      break;
    CHECK (ev != HC_NIL && !(d.map.blk[ev].meta & HC_M_DIRTY), "%s: a clean victim", policy);
    uint32_t c = hc_dir_take_free (&d);
    hc_dir_install (&d, c, &a, true); /* written: dirty */
    evicted++;
    CHECK (queues_consistent (&d), "%s: queues after a refused search", policy);
  }
  CHECK (evicted == 50, "%s: room was made past dirty blocks (%u)", policy, evicted);
  /* Everything dirty: no room, in a bounded search. */
  for (uint32_t c = 0; c < d.map.n; c++)
    if (d.map.blk[c].meta & HC_M_VALID)
      hc_dir_set_dirty (&d, c, 0);
  struct hc_access a = { .origin = 999999 };
  CHECK (!hc_dir_make_room (&d, &a, clean_only, &d, &why, NULL) && why == HC_BYPASS_FULL,
         "%s: all dirty, no room", policy);
  CHECK (queues_consistent (&d), "%s: queues after a failed search", policy);
  uint32_t c = d.map.queue[0].count ? d.map.queue[0].head : d.map.queue[1].head;
  hc_dir_set_clean (&d, c);
  uint32_t ev = HC_NIL;
  CHECK (hc_dir_make_room (&d, &a, clean_only, &d, &why, &ev) && ev == c,
         "%s: the one clean block goes", policy);
  hc_dir_fini (&d);
}

/* Advice dontneed makes a block the next to go; a hit after it cancels. */
static void
check_demote (const char *policy)
{
  struct hc_directory d;
  enum hc_bypass why;

  dir_open (&d, policy, 200, false);
  for (unsigned i = 0; i < 5000; i++)
    dir_access (&d, next_rand () % 500, false);
  for (unsigned round = 0; round < 20; round++) {
    uint32_t c;
    do
      c = (uint32_t) (next_rand () % d.map.n);
    while (!(d.map.blk[c].meta & HC_M_VALID));
    uint64_t origin = hc_meta_origin (d.map.blk[c].meta);
    hc_dir_demote (&d, c);
    struct hc_access a = { .origin = 10000 + round };
    uint32_t ev = HC_NIL;
    CHECK (hc_dir_make_room (&d, &a, always, NULL, &why, &ev) && ev == c,
           "%s: the demoted block %" PRIu64 " goes first", policy, origin);
    hc_dir_install (&d, hc_dir_take_free (&d), &a, false);
    for (unsigned i = 0; i < 50; i++)
      dir_access (&d, next_rand () % 500, false);
  }
  CHECK (queues_consistent (&d), "%s: queues after demotions", policy);
  hc_dir_fini (&d);
}

/* The directory's class-share eviction takes blocks off queues 0 and 1
 * without telling the policy; the policy carries on. */
static void
check_evicted_behind (const char *policy)
{
  struct hc_directory d;
  unsigned hits = 0;

  dir_open (&d, policy, 100, false);
  for (unsigned i = 0; i < 3000; i++)
    dir_access (&d, next_rand () % 300, false);
  for (unsigned i = 0; i < 60; i++)
    CHECK (hc_dir_evict (&d, 0, always, NULL) != HC_NIL, "%s: a class-share eviction", policy);
  CHECK (queues_consistent (&d), "%s: queues after class-share evictions", policy);
  for (unsigned i = 0; i < 3000; i++)
    hits += dir_access (&d, next_rand () % 300, false);
  CHECK (queues_consistent (&d) && d.map.mapped == 100 && hits > 0,
         "%s: carries on after class-share evictions (%u hits)", policy, hits);
  hc_dir_fini (&d);
}

/* Extra RAM per cached block (the project's budget: 24 bytes with the map). */
static void
check_bytes (void)
{
  static const double most[] = { 0.01, 6.0, 2.01 }; /* sieve: none; 2q: A1out; wtinylfu: sketch */
  const uint32_t n = 1u << 20;

  for (size_t p = 0; p < NPOL; p++) {
    struct hc_directory d;
    dir_open (&d, policies[p].name, n, false);
    double extra = (double) hc_policy_bytes (&d.policy) / n;
    double map = (double) hc_map_bytes (&d.map) / n;
    CHECK (extra <= most[p], "%s: %.2f bytes per block beyond the map", policies[p].name, extra);
    printf ("  %-8s %5.2f bytes per cached block beyond the map (%.2f with it)\n",
            policies[p].name, extra, extra + map);
    hc_dir_fini (&d);
  }
}

int
main (int argc, char **argv)
{
  const char *shared = argc > 1 ? argv[1] : NULL, *tmp = getenv ("TMPDIR");
  char dir[512], path[600];

  check_sieve_by_hand ();
  check_twoq_by_hand ();
  check_wtinylfu_by_hand ();
  check_generated ();
  for (size_t p = 0; p < NPOL; p++) {
    check_refusals (policies[p].name);
    check_demote (policies[p].name);
    check_evicted_behind (policies[p].name);
  }
  check_bytes ();

  snprintf (dir, sizeof dir, "%s/hc-policies-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
  if (!mkdtemp (dir))
    return 99;
  snprintf (path, sizeof path, "%s/synthetic.csv", dir);
  write_trace (path, 40000, 20000);
  const char *sizes[] = { "1", "7", "1%", "5%", "10%", "40%" };
  check_replayer (path, sizes, sizeof sizes / sizeof sizes[0]);
  unlink (path);
  rmdir (dir);

  if (shared && *shared) {
    const char *pct[] = { "1%", "5%", "10%" };
    static const char *const names[] = { "build.csv.gz", "kv.csv.gz" };
    for (size_t i = 0; i < 2; i++) {
      char p[1024];
      snprintf (p, sizeof p, "%s/%s", shared, names[i]);
      if (access (p, R_OK) == 0)
        check_replayer (p, pct, 3);
      else
        printf ("  %s not found: the shared traces are not checked\n", p);
    }
  } else {
    printf ("  no shared traces directory given: only generated traces checked\n");
  }
  return test_exit ("test_policies");
}
