/* The cache directory: see dir.h for the rules.
 *
 * Statistics are counted here and only here, so the volume and the
 * replayer report the same numbers for the same decisions.
 */
#include <errno.h>
#include <string.h>

#include "budget.h"
#include "dir.h"

/* How far a class-share eviction searches from each queue's tail. */
#define SHARE_SCAN 256

/* Priorities at which a reclassified block is demoted or protected (those
 * of the hint-aware policy's placement rules). */
#define RECLASS_LOW 4
#define RECLASS_HIGH 12

static int
init (struct hc_directory *d, uint32_t n, unsigned policy_id, const hc_classes *classes,
      bool defer_free)
{
  int rc;

  memset (d, 0, sizeof *d);
  d->classes = classes;
  d->defer_free = defer_free;
  if ((rc = hc_map_init (&d->map, n)) < 0)
    return rc;
  if ((rc = hc_policy_init (&d->policy, policy_id, &d->map, classes)) < 0) {
    hc_map_fini (&d->map);
    return rc;
  }
  d->stats.cache_blocks = n;
  return 0;
}

int
hc_dir_init (struct hc_directory *d, uint32_t n, unsigned policy_id, const hc_classes *classes,
             bool defer_free)
{
  int rc = init (d, n, policy_id, classes, defer_free);

  if (rc < 0 || !d->policy.ops->weighs_evidence || !d->policy.ops->copy)
    return rc;
  if ((rc = hc_evidence_new (n, policy_id, classes, HC_FX_START, &d->evidence)) < 0) {
    hc_dir_fini (d);
    return rc;
  }
  d->policy.effects = HC_FX_START;
  return 0;
}

int
hc_dir_init_fixed (struct hc_directory *d, uint32_t n, unsigned policy_id,
                   const hc_classes *classes, unsigned effects)
{
  int rc = init (d, n, policy_id, classes, false);

  if (rc == 0)
    d->policy.effects = effects & HC_FX_ALL;
  return rc;
}

void
hc_dir_copy (struct hc_directory *dst, const struct hc_directory *src)
{
  hc_map_copy (&dst->map, &src->map);
  dst->policy.ops->copy (&dst->policy, &src->policy);
  memcpy (dst->occupancy, src->occupancy, sizeof dst->occupancy);
  memcpy (dst->ndirty, src->ndirty, sizeof dst->ndirty);
  dst->stats = src->stats;
}

void
hc_dir_set_request_cost (struct hc_directory *d, uint32_t blocks)
{
  if (d->evidence)
    hc_evidence_set_request_cost (d->evidence, blocks);
}

void
hc_dir_set_effects (struct hc_directory *d, unsigned effects)
{
  hc_evidence_free (d->evidence);
  d->evidence = NULL;
  d->policy.effects = (effects & HC_FX_ALL) | (d->policy.effects & HC_FX_TOUCH);
}

int
hc_dir_set_second_touch (struct hc_directory *d, bool on)
{
  if (!d->policy.ops->second_touch)
    return -ENOTSUP;
  if (d->evidence)
    hc_evidence_force (d->evidence, HC_FX_TOUCH, on);
  d->policy.effects = on ? d->policy.effects | HC_FX_TOUCH : d->policy.effects & ~HC_FX_TOUCH;
  return 0;
}

void
hc_dir_follow_budget (struct hc_directory *d, struct hc_budget *b, uint64_t now_ns,
                      uint64_t flash_bytes)
{
  bool on = hc_budget_update (b, now_ns, flash_bytes);

  if (on == d->budget_spent)
    return;
  d->budget_spent = on;
  if (on && !(d->policy.effects & HC_FX_TOUCH)) {
    hc_dir_set_second_touch (d, true);
    d->budget_touch = true;
  } else if (!on && d->budget_touch) {
    hc_dir_set_second_touch (d, false);
    d->budget_touch = false;
  }
}

uint64_t
hc_dir_effect_changes (const struct hc_directory *d)
{
  return d->evidence ? hc_evidence_changes (d->evidence) : 0;
}

void
hc_dir_fini (struct hc_directory *d)
{
  hc_evidence_free (d->evidence);
  d->evidence = NULL;
  hc_policy_fini (&d->policy);
  hc_map_fini (&d->map);
}

size_t
hc_dir_bytes (const struct hc_directory *d)
{
  return hc_map_bytes (&d->map) + hc_policy_bytes (&d->policy)
         + (d->evidence ? hc_evidence_bytes (d->evidence) : 0);
}

void
hc_dir_attrs (const struct hc_directory *d, unsigned cls, struct hc_class_attrs *a)
{
  if (!d->classes || hc_classes_get (d->classes, cls, a) < 0)
    hc_class_defaults (cls, a);
}

/* The evidence sees every access before the decisions it steers. */
static inline void
observe (struct hc_directory *d, const struct hc_access *a)
{
  if (d->evidence) {
    unsigned e = hc_evidence_observe (d->evidence, a);
    if (e != d->policy.effects) /* written only on a change: other CPUs keep the line */
      d->policy.effects = e;
  }
}

static void
hit (struct hc_directory *d, uint32_t c, const struct hc_access *a)
{
  struct hc_class_stats *s = &d->stats.cls[a->hint.cls];

  s->hits[a->write]++;
  if (d->map.blk[c].meta & HC_M_HINTED)
    s->hint_hits++;
  hc_policy_hit (&d->policy, c, a);
}

uint32_t
hc_dir_access (struct hc_directory *d, const struct hc_access *a)
{
  uint32_t c;

  observe (d, a);
  if ((c = hc_map_lookup (&d->map, a->origin)) == HC_NIL) {
    d->stats.cls[a->hint.cls].misses[a->write]++;
    return HC_NIL;
  }
  hit (d, c, a);
  return c;
}

void
hc_dir_miss (struct hc_directory *d, const struct hc_access *a)
{
  observe (d, a);
  d->stats.cls[a->hint.cls].misses[a->write]++;
}

void
hc_dir_hit (struct hc_directory *d, uint32_t c, const struct hc_access *a)
{
  observe (d, a);
  hit (d, c, a);
}

/* Does attribute `attr` of class `cls`, where it departs from the unhinted
 * behaviour, apply?  While its effect is in force, or when an administrator
 * chose it. */
static inline bool
applies (const struct hc_directory *d, unsigned effect, unsigned cls, enum hc_class_attr attr)
{
  return (d->policy.effects & effect) || hc_classes_chosen (d->classes, cls, attr);
}

bool
hc_dir_admit (struct hc_directory *d, const struct hc_access *a, enum hc_bypass *why)
{
  struct hc_class_attrs attrs;
  unsigned cls = a->hint.cls;

  if (a->hint.advice == HC_ADVICE_DONTNEED || a->hint.advice == HC_ADVICE_EVICT) {
    *why = HC_BYPASS_ADVICE;
    return false;
  }
  if (a->write && d->budget_spent && a->hint.advice != HC_ADVICE_WILLNEED) {
    *why = HC_BYPASS_POLICY; /* the flash budget is spent: the write goes around */
    return false;
  }
  hc_dir_attrs (d, cls, &attrs);
  if (a->hint.advice != HC_ADVICE_WILLNEED && !(a->write ? attrs.admit_write : attrs.admit_read)
      && applies (d, HC_FX_ADMIT, cls, a->write ? HC_ATTR_ADMIT_WRITE : HC_ATTR_ADMIT_READ)) {
    *why = HC_BYPASS_CLASS;
    return false;
  }
  if (attrs.max_share == 0 && applies (d, HC_FX_ADMIT, cls, HC_ATTR_MAX_SHARE)) {
    *why = HC_BYPASS_SHARE;
    return false;
  }
  return hc_policy_admit (&d->policy, a, why);
}

void
hc_dir_bypass (struct hc_directory *d, const struct hc_access *a, enum hc_bypass why)
{
  d->stats.cls[a->hint.cls].bypass[a->write][why]++;
}

/* Unmaps block c, which its queue no longer holds, and parks it. */
static void
drop (struct hc_directory *d, uint32_t c)
{
  uint64_t w = d->map.blk[c].meta;
  unsigned cls = hc_meta_class (w);

  d->occupancy[cls]--;
  if (w & HC_M_DIRTY)
    d->ndirty[cls]--;
  hc_map_remove (&d->map, c);
  d->map.blk[c].meta = hc_meta_origin (w) | HC_M_FORMER | (w & HC_M_DIRTY);
  hc_list_push_head (&d->map, d->defer_free ? &d->map.pending : &d->map.free, c);
}

uint32_t
hc_dir_evict (struct hc_directory *d, unsigned cls, hc_evictable_fn ok, void *arg)
{
  uint32_t c = cls < HC_CLASS_COUNT
                   ? hc_policy_victim_of_class (&d->policy, cls, 0, 1, SHARE_SCAN, ok, arg)
                   : hc_policy_victim (&d->policy, ok, arg);

  if (c != HC_NIL) {
    d->stats.cls[hc_meta_class (d->map.blk[c].meta)].evictions++;
    drop (d, c);
  }
  return c;
}

bool
hc_dir_at_share (const struct hc_directory *d, unsigned cls)
{
  struct hc_class_attrs attrs;

  hc_dir_attrs (d, cls, &attrs);
  return attrs.max_share < 100 && applies (d, HC_FX_ADMIT, cls, HC_ATTR_MAX_SHARE)
         && d->occupancy[cls] >= (uint64_t) d->map.n * attrs.max_share / 100;
}

bool
hc_dir_make_room (struct hc_directory *d, const struct hc_access *a, hc_evictable_fn ok, void *arg,
                  enum hc_bypass *why, uint32_t *evicted)
{
  unsigned cls = a->hint.cls;
  uint32_t c = HC_NIL;

  if (evicted)
    *evicted = HC_NIL;
  if (hc_dir_at_share (d, cls)) {
    if ((c = hc_dir_evict (d, cls, ok, arg)) == HC_NIL) {
      *why = HC_BYPASS_SHARE;
      return false;
    }
  } else if (d->map.free.count == 0 && (c = hc_dir_evict (d, HC_CLASS_COUNT, ok, arg)) == HC_NIL) {
    *why = HC_BYPASS_FULL;
    return false;
  }
  if (evicted)
    *evicted = c;
  return true;
}

void
hc_dir_restore (struct hc_directory *d, uint32_t c, uint64_t origin, unsigned cls, bool dirty)
{
  struct hc_access a = { .origin = origin, .hint = { .cls = (uint8_t) cls } };

  hc_list_remove (&d->map, &d->map.free, c);
  hc_map_insert (&d->map, c, origin, cls, dirty);
  d->occupancy[cls]++;
  if (dirty)
    d->ndirty[cls]++;
  hc_policy_insert (&d->policy, c, &a);
}

uint32_t
hc_dir_take_free (struct hc_directory *d)
{
  return hc_list_pop_head (&d->map, &d->map.free);
}

void
hc_dir_install (struct hc_directory *d, uint32_t c, const struct hc_access *a, bool dirty)
{
  unsigned cls = a->hint.cls;

  hc_map_insert (&d->map, c, a->origin, cls, dirty);
  d->occupancy[cls]++;
  if (dirty)
    d->ndirty[cls]++;
  d->stats.cls[cls].admissions[a->write]++;
  hc_policy_insert (&d->policy, c, a);
}

void
hc_dir_invalidate (struct hc_directory *d, uint32_t c)
{
  hc_policy_remove (&d->policy, c);
  drop (d, c);
}

void
hc_dir_relocate (struct hc_directory *d, uint32_t from, uint32_t to)
{
  hc_map_relocate (&d->map, from, to);
  /* Like a dropped block, it remembers whom it held (for the journal). */
  d->map.blk[from].meta = hc_meta_origin (d->map.blk[to].meta) | HC_M_FORMER;
  hc_list_push_head (&d->map, d->defer_free ? &d->map.pending : &d->map.free, from);
}

void
hc_dir_set_dirty (struct hc_directory *d, uint32_t c, unsigned cls)
{
  uint64_t w = d->map.blk[c].meta;
  unsigned old = hc_meta_class (w);

  if (w & HC_M_DIRTY)
    d->ndirty[old]--;
  d->occupancy[old]--;
  d->occupancy[cls]++;
  d->ndirty[cls]++;
  hc_map_set_field (&d->map, c, HC_M_CLASS_MASK, HC_M_CLASS_SHIFT, cls);
  d->map.blk[c].meta = (d->map.blk[c].meta | HC_M_DIRTY) & ~(HC_M_UNRECORDED | HC_M_WB);
}

void
hc_dir_set_clean (struct hc_directory *d, uint32_t c)
{
  uint64_t w = d->map.blk[c].meta;
  unsigned cls = hc_meta_class (w);
  struct hc_class_attrs attrs;

  if (!(w & HC_M_DIRTY))
    return;
  d->map.blk[c].meta &= ~(HC_M_DIRTY | HC_M_WB);
  d->ndirty[cls]--;
  d->stats.cls[cls].writebacks++;
  hc_dir_attrs (d, cls, &attrs);
  if (!attrs.admit_read && applies (d, HC_FX_DEMOTE, cls, HC_ATTR_ADMIT_READ))
    hc_policy_demote (&d->policy, c);
}

/* A hit on c by its own class, with `advice`: a protected class's credit
 * (one hit), or willneed's (the most a block holds). */
static void
protect (struct hc_directory *d, uint32_t c, enum hc_advice advice)
{
  struct hc_access a = {
    .origin = hc_meta_origin (d->map.blk[c].meta),
    .hint = { .cls = (uint8_t) hc_meta_class (d->map.blk[c].meta), .advice = (uint8_t) advice },
  };
  hc_policy_hit (&d->policy, c, &a);
  d->map.blk[c].meta |= HC_M_HINTED;
}

void
hc_dir_reclass (struct hc_directory *d, uint32_t c, unsigned cls)
{
  uint64_t w = d->map.blk[c].meta;
  unsigned old = hc_meta_class (w);
  struct hc_class_attrs attrs;

  if (old == cls)
    return;
  d->occupancy[old]--;
  d->occupancy[cls]++;
  if (w & HC_M_DIRTY) {
    d->ndirty[old]--;
    d->ndirty[cls]++;
  }
  hc_map_set_field (&d->map, c, HC_M_CLASS_MASK, HC_M_CLASS_SHIFT, cls);
  hc_dir_attrs (d, cls, &attrs);
  bool demote = (!attrs.admit_read && applies (d, HC_FX_DEMOTE, cls, HC_ATTR_ADMIT_READ))
                || (attrs.priority < RECLASS_LOW && applies (d, HC_FX_DEMOTE, cls, HC_ATTR_PRIORITY));
  if (demote)
    hc_policy_demote (&d->policy, c);
  else if (attrs.priority >= RECLASS_HIGH && applies (d, HC_FX_PLACE, cls, HC_ATTR_PRIORITY))
    protect (d, c, HC_ADVICE_NONE);
}

void
hc_dir_demote (struct hc_directory *d, uint32_t c)
{
  hc_policy_demote (&d->policy, c);
}

void
hc_dir_protect (struct hc_directory *d, uint32_t c)
{
  protect (d, c, HC_ADVICE_WILLNEED);
}

uint32_t
hc_dir_release_pending (struct hc_directory *d, bool (*busy) (void *arg, uint32_t c), void *arg)
{
  struct hc_map *m = &d->map;
  uint32_t moved = 0, c = m->pending.head;

  /* Newest first: the free list then hands blocks out in the order they
   * were freed. */
  while (c != HC_NIL) {
    uint32_t next = m->blk[c].next;
    if (!busy || !busy (arg, c)) {
      hc_list_remove (m, &m->pending, c);
      hc_list_push_head (m, &m->free, c);
      moved++;
    }
    c = next;
  }
  return moved;
}

void
hc_dir_stats (const struct hc_directory *d, struct hc_stats *out)
{
  *out = d->stats;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    out->cls[c].blocks = d->occupancy[c];
    out->cls[c].dirty = d->ndirty[c];
  }
  out->cache_blocks = d->map.n;
  out->free_blocks = d->map.free.count;
  out->pending_blocks = d->map.pending.count;
  out->hint_effects = d->policy.effects;
  out->effect_changes = hc_dir_effect_changes (d);
}
