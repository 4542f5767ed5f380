/* The S3-FIFO machinery shared by s3fifo.c and hintaware.c: state, and the
 * victim search parameterised by three rules (when a small-queue block moves
 * to main, how fast main ages a block, whether an evicted block is
 * remembered in the ghost). */
#ifndef HC_POLICY_S3FIFO_H
#define HC_POLICY_S3FIFO_H

#include <errno.h>

#include "policy.h"

#define HC_S3_SMALL 0
#define HC_S3_MAIN 1

struct hc_s3 {
  uint32_t small_target; /* blocks the small FIFO may hold before it evicts */
  struct hc_ghost ghost;
};

struct hc_s3_rules {
  /* Hits needed in the small FIFO to move to main. */
  unsigned (*promote_freq) (const struct hc_policy *p, uint64_t meta);
  /* How much a pass over main's tail takes from the counter (≥ 1). */
  unsigned (*age_step) (const struct hc_policy *p, uint64_t meta);
  /* Remember the evicted block in the ghost? */
  bool (*remember) (const struct hc_policy *p, uint64_t meta);
};

/* Allocates the S3-FIFO state, the small FIFO holding small_ratio of the
 * cache, as the first member of a zeroed block of `size` bytes (0: just
 * struct hc_s3), so a policy built on it can keep more state after it.
 * Returns 0 or -ENOMEM. */
int hc_s3_init (struct hc_policy *p, double small_ratio, size_t size);
void hc_s3_fini (struct hc_policy *p);
size_t hc_s3_bytes (const struct hc_policy *p);

/* The victim search (see s3fifo.c). */
uint32_t hc_s3_victim (struct hc_policy *p, const struct hc_s3_rules *r, hc_evictable_fn ok,
                       void *arg);

/* Counts a hit (saturating 2-bit counter) and clears demotion. */
void hc_s3_hit (struct hc_policy *p, uint32_t c);

void hc_s3_remove (struct hc_policy *p, uint32_t c);

/* Copies the state of src into dst (caches of the same size). */
void hc_s3_copy (struct hc_policy *dst, const struct hc_policy *src);

/* Moves c to the eviction end of the small FIFO, counter 0, demoted. */
void hc_s3_demote (struct hc_policy *p, uint32_t c);

#endif /* HC_POLICY_S3FIFO_H */
