/* The flash write budget's token bucket (see budget.h).
 *
 * Constants.  The bucket holds a minute of the budget: long enough that a
 * burst of fills does not flip promotion on every request, short enough
 * that a replay of a few minutes of trace meets it.  Second touch goes off
 * at half a bucket, so that it does not flap at the edge.  Both were set
 * before any trace was replayed with a budget.
 */
#include "budget.h"

#define BUDGET_WINDOW_S 60
#define DAY_S 86400

void
hc_budget_init (struct hc_budget *b, uint64_t bytes_per_day)
{
  *b = (struct hc_budget) { .per_day = bytes_per_day };
  /* A minute of the budget, at least one byte. */
  b->cap = (int64_t) (bytes_per_day / (DAY_S / BUDGET_WINDOW_S));
  if (b->cap < 1)
    b->cap = 1;
  b->tokens = b->cap;
}

bool
hc_budget_update (struct hc_budget *b, uint64_t now_ns, uint64_t flash_bytes)
{
  if (!b->per_day)
    return false;
  if (!b->started) {
    b->started = true;
    b->last_ns = now_ns;
    b->last_bytes = flash_bytes;
    return b->on;
  }
  if (now_ns > b->last_ns) {
    /* per_day × elapsed / day.  Two windows fill the bucket from the
     * deepest debt, so a longer gap fills it; a shorter one is computed in
     * 128 bits, where it cannot overflow. */
    uint64_t dt = now_ns - b->last_ns;
    if (dt >= 2 * (uint64_t) BUDGET_WINDOW_S * 1000000000u)
      b->tokens = b->cap;
    else {
      uint64_t add = (uint64_t) ((unsigned __int128) b->per_day * dt / ((uint64_t) DAY_S * 1000000000u));
      b->tokens = add >= (uint64_t) (b->cap - b->tokens) ? b->cap : b->tokens + (int64_t) add;
    }
    b->last_ns = now_ns;
  }
  if (flash_bytes > b->last_bytes) {
    uint64_t used = flash_bytes - b->last_bytes;
    b->tokens = used > (uint64_t) INT64_MAX / 2 ? -b->cap : b->tokens - (int64_t) used;
    if (b->tokens < -b->cap)
      b->tokens = -b->cap; /* a debt of at most a bucket */
    b->last_bytes = flash_bytes;
  }
  if (!b->on && b->tokens <= 0) {
    b->on = true;
    b->engaged++;
  } else if (b->on && b->tokens >= b->cap / 2)
    b->on = false;
  return b->on;
}
