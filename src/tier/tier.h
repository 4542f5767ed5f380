/* Internal interface of the tiers: the ops table each implementation fills
 * in, and the header every tier object starts with.
 *
 *   tier.c     the door (hc_tier_read, …): checks every contract, then
 *              dispatches; implementations trust their arguments
 *   file.c     regular files and block devices
 *   memory.c   RAM
 *   timing.c   the timing model and its decorator
 *   faulty.c   the fault decorator and power domains
 */
#ifndef HC_TIER_INTERNAL_H
#define HC_TIER_INTERNAL_H

#include "hintcache/tier.h"

struct hc_tier_ops {
  const char *kind; /* "file", "nbd", "memory", "timing", "faulty" */
  int (*read) (hc_tier *t, void *buf, size_t len, uint64_t off);
  int (*write) (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags);
  int (*flush) (hc_tier *t);
  /* Optional: NULL means the door writes zeros instead. */
  int (*discard) (hc_tier *t, uint64_t off, uint64_t len);
  /* Optional: NULL means the door writes zero buffers. */
  int (*zero) (hc_tier *t, uint64_t off, uint64_t len);
  /* Optional, with HC_CAP_PREFETCH: starts reading a range ahead. */
  int (*prefetch) (hc_tier *t, uint64_t off, uint64_t len);
  void (*close) (hc_tier *t);
};

/* Every tier object begins with this header. */
struct hc_tier {
  const struct hc_tier_ops *ops;
  uint64_t size;
  unsigned caps;
  char name[128];
  char ident[64]; /* see hc_tier_identity; "" when none */
};

/* Initialises the header of a new tier. */
void hc_tier_init (hc_tier *t, const struct hc_tier_ops *ops, uint64_t size, unsigned caps,
                   const char *name);

/* Writes zeros over a range with ordinary writes (the fallback of the door,
 * also usable by implementations). */
int hc_tier_zero_by_writes (hc_tier *t, uint64_t off, uint64_t len);

#endif /* HC_TIER_INTERNAL_H */
