/* Replacement policies: the ops table each policy fills in, and the access
 * record they see.
 *
 * A policy orders the mapped blocks of a map (src/cache/map.h) on the map's
 * queues and picks victims; it never does I/O and never maps or unmaps
 * blocks itself (the cache directory does, src/cache/dir.c).  The same
 * policy code runs inside the volume and inside the trace replayer.
 *
 *   policy.c     the registry and the dispatch wrappers (hc_policy_*)
 *   ghost.c      a compact "recently evicted" set (two rotating Bloom filters)
 *   lru.c        least recently used
 *   s3fifo.c     S3-FIFO: small FIFO + main FIFO with reinsertion + ghost
 *   hintaware.c  S3-FIFO that reads class priority and advice (the default)
 *   fifo.c       first in, first out (a baseline)
 *   arc.c        Adaptive Replacement Cache (a baseline; more RAM per block)
 *   sieve.c      SIEVE: FIFO with visited bits and a sifting hand
 *   twoq.c       2Q: A1in FIFO, exact A1out ghost FIFO, Am LRU
 *   wtinylfu.c   W-TinyLFU: window LRU, SLRU main, frequency-sketch admission
 *
 * Contract: every mapped block is on map->queue[its queue bits]; policy
 * state lives only in the meta word's queue/freq/demoted/hinted bits, the
 * links, and the policy's own summary structures (so the map can relocate a
 * block without the policy's help).
 */
#ifndef HC_POLICY_H
#define HC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hintcache/classes.h"
#include "hintcache/hint.h"
#include "hintcache/stats.h"
#include "../cache/map.h"

/* One block access, as the cache logic sees it. */
struct hc_access {
  uint64_t origin;     /* slow-tier block number */
  struct hc_hint hint; /* resolved hint */
  bool write;
  bool seq;            /* the request's stream is past its sequential cutoff */
  bool cont;           /* continues the request's previous block (origin − 1) */
};

/* May block c be evicted now (clean, not busy)? */
typedef bool (*hc_evictable_fn) (void *arg, uint32_t c);

/* Hint effects (enum hc_effect, hintcache/stats.h): each a bit of
 * hc_policy.effects.  The cache directory turns them on and off by
 * measured evidence (src/cache/evidence.c) for a policy that weighs it,
 * and keeps all on for the others.  A class attribute an administrator
 * chose (hc_classes_chosen) applies whatever its bit says: it is a bound,
 * not a guess; and advice (evict, dontneed, willneed) is a request, always
 * obeyed. */
/* What a policy that weighs evidence starts with: no hint effect (a wrong
 * one costs misses that later evidence cannot give back), S3-FIFO's filter
 * and its main queue's reinsertion. */
#define HC_FX_START (HC_FX_FILTER | HC_FX_REINSERT)
/* The families that act on hints (the others, the cutoff, probation and
 * reinsertion, are the policy's unhinted behaviour): the evidence holds
 * these to "never worse than no hints" (evidence.c). */
#define HC_FX_HINTS (HC_FX_ADMIT | HC_FX_PLACE | HC_FX_DEMOTE | HC_FX_THRIFT)

enum hc_policy_id {
  HC_POLICY_LRU = 0, HC_POLICY_S3FIFO, HC_POLICY_HINTAWARE, HC_POLICY_FIFO, HC_POLICY_ARC,
  /* Volumes record the id: new policies go at the end. */
  HC_POLICY_SIEVE, HC_POLICY_TWOQ, HC_POLICY_WTINYLFU,
};
#define HC_POLICY_COUNT 8
#define HC_POLICY_DEFAULT HC_POLICY_HINTAWARE

struct hc_policy;

struct hc_policy_ops {
  const char *name;
  const char *title;
  /* The policy's admit reads hc_access.seq (callers that must compute it
   * per access may skip that for other policies). */
  bool reads_seq;
  /* The policy reads hc_policy.effects, so the directory may weigh each
   * effect by evidence; for others every effect stays in force. */
  bool weighs_evidence;
  /* The policy's admit honours HC_FX_TOUCH (second-touch promotion), which
   * only an administrator turns on (hc_dir_set_second_touch). */
  bool second_touch;
  /* Allocates the policy's state for p->map.  Returns 0 or -ENOMEM. */
  int (*init) (struct hc_policy *p);
  void (*fini) (struct hc_policy *p);
  /* Optional (NULL admits everything): may a missed block enter?  Called
   * before the eviction that makes room for it, so it is also where a
   * policy sees a miss first (ARC and 2Q classify it, W-TinyLFU counts
   * it). */
  bool (*admit) (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why);
  /* Mapped block c enters the cache: put it on a queue. */
  void (*insert) (struct hc_policy *p, uint32_t c, const struct hc_access *a);
  /* A hit on c. */
  void (*hit) (struct hc_policy *p, uint32_t c, const struct hc_access *a);
  /* Chooses a victim that `ok` accepts and takes it off its queue; HC_NIL
   * if none can be found in a bounded search. */
  uint32_t (*victim) (struct hc_policy *p, hc_evictable_fn ok, void *arg);
  /* Takes c off its queue (it is being invalidated, not evicted). */
  void (*remove) (struct hc_policy *p, uint32_t c);
  /* Advice dontneed on cached c: make it the next to go. */
  void (*demote) (struct hc_policy *p, uint32_t c);
  /* Extra bytes of RAM beyond the map. */
  size_t (*bytes) (const struct hc_policy *p);
  /* Makes dst's state (same policy, a map of the same size) a copy of
   * src's.  Required of a policy that weighs evidence. */
  void (*copy) (struct hc_policy *dst, const struct hc_policy *src);
};

struct hc_policy {
  const struct hc_policy_ops *ops;
  struct hc_map *map;
  const hc_classes *classes; /* class attributes (may be NULL: defaults) */
  unsigned effects;          /* enum hc_effect bits in force (HC_FX_ALL after init) */
  void *state;
};

/* Looks a policy up by name; returns its id or -EINVAL. */
int hc_policy_find (const char *name);

/* Returns the name of policy id, or NULL. */
const char *hc_policy_name_of (unsigned id);

/* Sets up policy `id` over map m.  Returns 0, -EINVAL or -ENOMEM. */
int hc_policy_init (struct hc_policy *p, unsigned id, struct hc_map *m, const hc_classes *classes);

void hc_policy_fini (struct hc_policy *p);

/* Dispatch wrappers: the one place optional callbacks are handled. */
static inline bool
hc_policy_admit (struct hc_policy *p, const struct hc_access *a, enum hc_bypass *why)
{
  return p->ops->admit ? p->ops->admit (p, a, why) : true;
}
static inline void hc_policy_insert (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{ p->ops->insert (p, c, a); }
static inline void hc_policy_hit (struct hc_policy *p, uint32_t c, const struct hc_access *a)
{ p->ops->hit (p, c, a); }
static inline uint32_t hc_policy_victim (struct hc_policy *p, hc_evictable_fn ok, void *arg)
{ return p->ops->victim (p, ok, arg); }
static inline void hc_policy_remove (struct hc_policy *p, uint32_t c) { p->ops->remove (p, c); }
static inline void hc_policy_demote (struct hc_policy *p, uint32_t c) { p->ops->demote (p, c); }
static inline size_t hc_policy_bytes (const struct hc_policy *p)
{ return p->ops->bytes ? p->ops->bytes (p) : 0; }

/* Finds, within `limit` blocks from the tails of queues q0 then q1 (q1 may
 * be -1), the oldest block of class cls that `ok` accepts, takes it off its
 * queue and returns it; HC_NIL if none.  Used to keep a class inside its
 * maximum share by evicting its own blocks. */
uint32_t hc_policy_victim_of_class (struct hc_policy *p, unsigned cls, int q0, int q1,
                                    unsigned limit, hc_evictable_fn ok, void *arg);

/* Sets the queue bits of c and puts it at the head (newest end) or tail of
 * that queue. */
void hc_policy_enqueue (struct hc_map *m, uint32_t c, unsigned q, bool at_tail);

/* Takes c off the queue its bits name. */
void hc_policy_dequeue (struct hc_map *m, uint32_t c);

/* Attributes of class cls (from the attribute table, or the built-in
 * ones without a table). */
void hc_policy_attrs (const struct hc_policy *p, unsigned cls, struct hc_class_attrs *a);

/* Class priority of block c's data (from the attribute table). */
unsigned hc_policy_priority (const struct hc_policy *p, unsigned cls);

/* The priority that steers placement: the class's while HC_FX_PLACE is in
 * force or an administrator chose it, otherwise that of unclassified data. */
unsigned hc_policy_placing_priority (const struct hc_policy *p, unsigned cls);

/* ---- ghost.c: a set of recently evicted origins ---- */
struct hc_ghost {
  uint64_t *bits[2];   /* current and previous generation */
  uint32_t nbits;      /* bits per generation (a multiple of 64) */
  uint32_t inserted;   /* insertions into the current generation */
  uint32_t per_gen;    /* insertions before the generations rotate */
  unsigned cur;
};

/* Sizes a ghost to remember about `entries` recent evictions. */
int hc_ghost_init (struct hc_ghost *g, uint32_t entries);
void hc_ghost_fini (struct hc_ghost *g);
void hc_ghost_insert (struct hc_ghost *g, uint64_t origin);
bool hc_ghost_contains (const struct hc_ghost *g, uint64_t origin);
size_t hc_ghost_bytes (const struct hc_ghost *g);
/* dst, sized as src, remembers what src does. */
void hc_ghost_copy (struct hc_ghost *dst, const struct hc_ghost *src);

extern const struct hc_policy_ops hc_policy_lru, hc_policy_s3fifo, hc_policy_hintaware,
    hc_policy_fifo, hc_policy_arc, hc_policy_sieve, hc_policy_twoq, hc_policy_wtinylfu;

#endif /* HC_POLICY_H */
