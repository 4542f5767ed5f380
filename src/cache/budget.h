/* A flash write budget: a token bucket of flash bytes that says when the
 * cache should spare its flash (hc_dir_follow_budget: second-touch
 * promotion, and write misses around the cache).
 *
 * The budget is a rate, in bytes per day, as flash endurance is quoted
 * (drive writes per day times the fast tier's size).  The bucket holds a
 * minute of it and starts full; every byte written to flash (fills, write
 * admissions, write hits, and the volume's metadata — its journal,
 * checkpoints and superblocks, in the whole 4 KiB pages each write touches:
 * the caller's running total) takes one out, and time puts the rate back.
 * When it is empty, the cache spares its flash: blocks read once are not
 * cached (second touch), and write misses go to the slow tier alone, as in
 * write-around; when it is half full again, both end.  Write hits still rewrite their cached copies (the copy is
 * the newest data in write-back), so a workload whose write hits alone
 * exceed the budget exceeds it.
 *
 * Not thread-safe: the caller serialises (the volume holds its lock).
 */
#ifndef HC_CACHE_BUDGET_H
#define HC_CACHE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

struct hc_budget {
  uint64_t per_day;     /* bytes per day; 0: no budget */
  int64_t tokens, cap;  /* bytes */
  uint64_t last_ns, last_bytes;
  bool started, on;
  uint64_t engaged;     /* times second touch went on */
};

/* Sets a budget of bytes_per_day (0: none, and hc_budget_update always
 * says off). */
void hc_budget_init (struct hc_budget *b, uint64_t bytes_per_day);

/* Accounts for the flash bytes written up to now (a running total that
 * never decreases) at time now_ns (monotonic); returns whether second
 * touch should be in force. */
bool hc_budget_update (struct hc_budget *b, uint64_t now_ns, uint64_t flash_bytes);

#endif
