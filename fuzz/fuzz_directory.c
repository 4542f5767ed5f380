/* Fuzzes the cache directory (src/cache): every policy, the miniature
 * simulations of the default one, class shares, deferred frees, and every
 * operation the volume and the replayer perform, in any order the input
 * spells.  The directory is the code that decides what the fast tier
 * holds; a slip in its bookkeeping is how a cache serves the wrong block or
 * drops the only copy of acknowledged data, so it is checked after every
 * operation rather than trusted.
 *
 * Input: three bytes of set-up (policy, size, options), then operations of
 * four bytes each (what, which block, a class or advice, a mask of blocks
 * the operation's `ok` test calls busy).  Origins are drawn from a range
 * of four times the cache, so that hits, evictions and re-admissions are
 * common.  Second touch, and the declining of write misses, may be turned
 * on and off between operations, as a flash budget does.
 *
 * The model beside it knows only what a caller may rely on: which origins
 * hold data newer than the slow tier (written into the cache and not yet
 * cleaned).  After every operation:
 *   - no dirty origin has lost its block: the `ok` test, as the volume's,
 *     refuses dirty blocks, so no eviction may take one;
 *   - an evicted block was one `ok` accepted in that call;
 *   - every mapped block is found by its origin, its dirty bit is the
 *     model's, and per class the mapped and dirty blocks are what the
 *     directory's counts say;
 *   - the policy's queues hold exactly the mapped blocks, each on the queue
 *     its bits name; mapped, free and pending blocks add up to the cache,
 *     each exactly once;
 *   - second-touch promotion stays as it was set, whatever the evidence
 *     and the administrator's fixed effects do;
 *   - with thrift in force, a data write miss is not admitted;
 *   - a copy (hc_dir_copy, as the miniatures restart; policies that weigh
 *     evidence only) holds the same blocks.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "cache/dir.h"
#include "hintcache/classes.h"

#define MAX_BLOCKS 64
#define MAX_ORIGINS (4 * MAX_BLOCKS)

enum op {
  OP_READ, OP_WRITE, OP_INVALIDATE, OP_CLEAN, OP_RECLASS, OP_DEMOTE, OP_PROTECT, OP_EVICT,
  OP_RELOCATE, OP_RELEASE, OP_COPY, OP_EFFECTS, OP_TOUCH, OP_COUNT
};

struct ctx {
  struct hc_directory d;
  uint32_t n;
  bool dirty[MAX_ORIGINS];     /* the model: data newer than the slow tier */
  uint64_t busy;               /* this operation's busy blocks (bit c % 64) */
  bool accepted[MAX_BLOCKS];   /* blocks `ok` accepted in this operation */
  bool touch;                  /* second touch turned on */
};

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* The volume's test: clean and not busy. */
static bool
ok (void *arg, uint32_t c)
{
  struct ctx *x = arg;
  bool yes;

  FUZZ_CHECK (c < x->n, "ok asked about block %u of %u", c, x->n);
  yes = !(x->d.map.blk[c].meta & HC_M_DIRTY) && !(x->busy >> (c % 64) & 1);
  if (yes)
    x->accepted[c] = true;
  return yes;
}

static bool
busy (void *arg, uint32_t c)
{
  struct ctx *x = arg;
  return x->busy >> (c % 64) & 1;
}

/* Walks a list: its blocks are marked in seen[] (each at most once) and
 * must pass `want`; returns how many. */
static uint32_t
walk (struct ctx *x, const struct hc_list *l, uint8_t *seen, int queue)
{
  const struct hc_map *m = &x->d.map;
  uint32_t k = 0, prev = HC_NIL;

  for (uint32_t c = l->head; c != HC_NIL; prev = c, c = m->blk[c].next, k++) {
    FUZZ_CHECK (c < x->n && k < x->n, "list runs off the cache (block %u, %u walked)", c, k);
    FUZZ_CHECK (!seen[c], "block %u on two lists", c);
    FUZZ_CHECK (m->blk[c].prev == prev, "block %u: back link %u, want %u", c, m->blk[c].prev,
                prev);
    seen[c] = 1;
    uint64_t w = m->blk[c].meta;
    if (queue >= 0)
      FUZZ_CHECK ((w & HC_M_VALID) && (int) hc_meta_queue (w) == queue,
                  "block %u on queue %d: meta %#llx", c, queue, (unsigned long long) w);
    else
      FUZZ_CHECK (!(w & HC_M_VALID), "mapped block %u on a free list", c);
  }
  FUZZ_CHECK (l->tail == prev, "list tail %u, last walked %u", l->tail, prev);
  FUZZ_CHECK (k == l->count, "list counts %u, holds %u", l->count, k);
  return k;
}

static void
check (struct ctx *x, const char *after)
{
  const struct hc_map *m = &x->d.map;
  uint8_t seen[MAX_BLOCKS] = { 0 };
  uint32_t occ[HC_CLASS_COUNT] = { 0 }, dirty[HC_CLASS_COUNT] = { 0 }, mapped = 0, listed = 0;

  for (unsigned q = 0; q < 4; q++)
    listed += walk (x, &m->queue[q], seen, (int) q);
  FUZZ_CHECK (listed == m->mapped, "after %s: queues hold %u, mapped %u", after, listed,
              m->mapped);
  listed += walk (x, &m->free, seen, -1);
  listed += walk (x, &m->pending, seen, -1);
  FUZZ_CHECK (listed == x->n, "after %s: %u of %u blocks on a list", after, listed, x->n);

  for (uint32_t c = 0; c < x->n; c++) {
    uint64_t w = m->blk[c].meta;
    if (!(w & HC_M_VALID))
      continue;
    uint64_t o = hc_meta_origin (w);
    unsigned cls = hc_meta_class (w);
    mapped++;
    occ[cls]++;
    FUZZ_CHECK (o < MAX_ORIGINS, "after %s: block %u holds origin %llu, never used", after, c,
                (unsigned long long) o);
    FUZZ_CHECK (hc_dir_find (&x->d, o) == c, "after %s: origin %llu in block %u, found in %u",
                after, (unsigned long long) o, c, hc_dir_find (&x->d, o));
    FUZZ_CHECK (!!(w & HC_M_DIRTY) == x->dirty[o], "after %s: origin %llu dirty %d, model %d",
                after, (unsigned long long) o, !!(w & HC_M_DIRTY), x->dirty[o]);
    dirty[cls] += !!(w & HC_M_DIRTY);
  }
  FUZZ_CHECK (mapped == m->mapped, "after %s: %u valid, %u counted", after, mapped, m->mapped);
  for (unsigned k = 0; k < HC_CLASS_COUNT; k++) {
    FUZZ_CHECK (occ[k] == x->d.occupancy[k], "after %s: class %u holds %u, counted %u", after,
                k, occ[k], x->d.occupancy[k]);
    FUZZ_CHECK (dirty[k] == x->d.ndirty[k], "after %s: class %u dirty %u, counted %u", after, k,
                dirty[k], x->d.ndirty[k]);
  }
  FUZZ_CHECK (!!(hc_dir_effects (&x->d) & HC_FX_TOUCH) == x->touch,
              "after %s: second touch %s", after, x->touch ? "dropped" : "turned on");
  for (uint64_t o = 0; o < MAX_ORIGINS; o++)
    FUZZ_CHECK (!x->dirty[o] || hc_dir_find (&x->d, o) != HC_NIL,
                "after %s: dirty origin %llu lost its block", after, (unsigned long long) o);
}

/* An evicted block must be one `ok` accepted in this operation. */
static void
check_evicted (struct ctx *x, uint32_t c, const char *what)
{
  if (c == HC_NIL)
    return;
  FUZZ_CHECK (c < x->n && x->accepted[c], "%s evicted block %u, which ok did not accept", what,
              c);
}

/* A read or write of origin o, as the replayer runs one. */
static void
access_one (struct ctx *x, uint64_t o, bool write, struct hc_hint h, bool seq)
{
  struct hc_access a = { .origin = o, .hint = h, .write = write, .seq = seq };
  enum hc_bypass why = HC_BYPASS_COUNT;
  uint32_t c = hc_dir_access (&x->d, &a), ev;

  if (c != HC_NIL) {
    if (write) {
      hc_dir_set_dirty (&x->d, c, h.cls);
      x->dirty[o] = true;
    }
    return;
  }
  /* Thrift in force (the default policy's, the one with second touch):
   * a write miss of data, with the built-in attributes, goes around. */
  bool around = write && x->d.policy.ops->second_touch && (hc_dir_effects (&x->d) & HC_FX_THRIFT)
                && h.cls == HC_CLASS_DATA && h.advice != HC_ADVICE_WILLNEED;
  bool admitted = hc_dir_admit (&x->d, &a, &why);
  FUZZ_CHECK (!(around && admitted), "thrift admitted a data write miss");
  if (admitted && hc_dir_make_room (&x->d, &a, ok, x, &why, &ev)) {
    check_evicted (x, ev, "make_room");
    if ((c = hc_dir_take_free (&x->d)) != HC_NIL) {
      hc_dir_install (&x->d, c, &a, write);
      if (write)
        x->dirty[o] = true;
      return;
    }
    why = HC_BYPASS_FULL;
  }
  FUZZ_CHECK (why < HC_BYPASS_COUNT, "a refusal without a reason");
  hc_dir_bypass (&x->d, &a, why);
  /* A write that bypasses goes to the slow tier: a cached copy is stale. */
  if (write && (c = hc_dir_find (&x->d, o)) != HC_NIL)
    hc_dir_invalidate (&x->d, c);
  if (write)
    x->dirty[o] = false;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static struct ctx x;
  struct fuzz_in in = { data, size };
  unsigned policy = (unsigned) fuzz_take (&in, 1) % HC_POLICY_COUNT;
  uint32_t n = 2 + (uint32_t) fuzz_take (&in, 1) % (MAX_BLOCKS - 1);
  unsigned opts = (unsigned) fuzz_take (&in, 1);
  hc_classes *classes = NULL;
  int rc;

  memset (&x, 0, sizeof x);
  x.n = n;
  /* Option bit 0: an administrator's table, with small shares for three
   * classes (the share paths); bit 1: deferred frees, as the volume; bit
   * 2: second-touch promotion, where the policy has it. */
  if (opts & 1) {
    FUZZ_CHECK (hc_classes_new (&classes) == 0, "classes");
    for (unsigned k = 1; k <= 3; k++) {
      struct hc_class_attrs a;
      hc_class_defaults (k, &a);
      a.max_share = 10 * k;
      FUZZ_CHECK (hc_classes_set (classes, k, &a) == 0, "share");
    }
  }
  rc = hc_dir_init (&x.d, n, policy, classes, opts & 2);
  FUZZ_CHECK (rc == 0, "init: %d", rc);
  hc_dir_set_request_cost (&x.d, 1 + (opts >> 3) * 16);
  rc = hc_dir_set_second_touch (&x.d, opts & 4);
  FUZZ_CHECK (rc == 0 || rc == -ENOTSUP, "second touch: %d", rc);
  x.touch = rc == 0 && (opts & 4);

  while (in.n) {
    unsigned what = (unsigned) fuzz_take (&in, 1);
    uint64_t o = fuzz_take (&in, 1) % MAX_ORIGINS;
    unsigned arg = (unsigned) fuzz_take (&in, 1);
    struct hc_hint h = { .cls = (uint8_t) (arg % HC_CLASS_COUNT),
                         .advice = (uint8_t) ((arg >> 3) % 4) };
    uint32_t c = hc_dir_find (&x.d, o), ev;
    static const char *const names[OP_COUNT] = {
      "read", "write", "invalidate", "clean", "reclass", "demote", "protect", "evict",
      "relocate", "release", "copy", "effects", "touch",
    };

    x.busy = fuzz_take (&in, 1) * UINT64_C (0x0101010101010101) >> (arg & 7);
    memset (x.accepted, 0, sizeof x.accepted);
    switch (what % OP_COUNT) {
    case OP_READ:
    case OP_WRITE:
      access_one (&x, o, what % OP_COUNT == OP_WRITE, h, arg >> 7);
      break;
    case OP_INVALIDATE: /* a discard */
      if (c != HC_NIL)
        hc_dir_invalidate (&x.d, c);
      x.dirty[o] = false;
      break;
    case OP_CLEAN: /* written back */
      if (c != HC_NIL && x.dirty[o]) {
        hc_dir_set_clean (&x.d, c);
        x.dirty[o] = false;
      }
      break;
    case OP_RECLASS:
      if (c != HC_NIL)
        hc_dir_reclass (&x.d, c, h.cls);
      break;
    case OP_DEMOTE:
      if (c != HC_NIL)
        hc_dir_demote (&x.d, c);
      break;
    case OP_PROTECT:
      if (c != HC_NIL)
        hc_dir_protect (&x.d, c);
      break;
    case OP_EVICT:
      ev = hc_dir_evict (&x.d, arg & 8 ? h.cls : HC_CLASS_COUNT, ok, &x);
      check_evicted (&x, ev, "evict");
      break;
    case OP_RELOCATE: /* copy-on-write of a cached block */
      if (c != HC_NIL) {
        uint32_t to = hc_dir_take_free (&x.d);
        if (to != HC_NIL)
          hc_dir_relocate (&x.d, c, to);
      }
      break;
    case OP_RELEASE: /* a commit */
      hc_dir_release_pending (&x.d, arg & 1 ? busy : NULL, &x);
      break;
    case OP_COPY: {
      struct hc_directory copy;
      if (!x.d.policy.ops->copy) /* only the miniatures' policy is copied */
        break;
      FUZZ_CHECK (hc_dir_init_fixed (&copy, n, policy, classes, HC_FX_ALL) == 0, "copy init");
      hc_dir_copy (&copy, &x.d);
      FUZZ_CHECK (copy.map.mapped == x.d.map.mapped, "copy holds %u of %u", copy.map.mapped,
                  x.d.map.mapped);
      for (uint32_t b = 0; b < n; b++)
        if (x.d.map.blk[b].meta & HC_M_VALID)
          FUZZ_CHECK (hc_dir_find (&copy, hc_meta_origin (x.d.map.blk[b].meta)) != HC_NIL,
                      "copy lost block %u", b);
      hc_dir_fini (&copy);
      break;
    }
    case OP_EFFECTS: /* an administrator fixes the effects */
      if ((arg & 0xf0) == 0xf0)
        hc_dir_set_effects (&x.d, (unsigned) o & HC_FX_ALL);
      break;
    case OP_TOUCH: /* a flash budget spent or filled again */
      rc = hc_dir_set_second_touch (&x.d, arg & 1);
      FUZZ_CHECK (rc == 0 || (rc == -ENOTSUP && !x.d.policy.ops->second_touch), "touch: %d", rc);
      if (rc == 0) {
        x.touch = arg & 1;
        x.d.budget_spent = (arg & 2) != 0; /* write misses declined, as hc_dir_follow_budget does */
      }
      break;
    }
    check (&x, names[what % OP_COUNT]);
  }
  hc_dir_fini (&x.d);
  hc_classes_free (classes);
  return 0;
}
