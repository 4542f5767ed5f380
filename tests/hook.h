/* A tier decorator for tests that need to act at a chosen I/O: every
 * operation calls the test's hook before passing down (the hook may block,
 * inject an error by returning one, or do anything else the test needs)
 * and once more after (with the outcome).  Header-only: each test that
 * includes it gets its own copy.
 *
 *   struct hook_tier *h;
 *   hook_new (lower, my_hook, my_arg, &h);   ... use &h->base as the tier
 *
 * The hook gets the operation, the range, and `after` (false before the
 * call, true after it, with rc).  Returning non-zero before the call fails
 * it with that value without calling below. */
#ifndef HC_TEST_HOOK_H
#define HC_TEST_HOOK_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tier/tier.h"

enum hook_op { HOOK_READ, HOOK_WRITE, HOOK_FLUSH, HOOK_DISCARD, HOOK_ZERO };

typedef int (*hook_fn) (void *arg, enum hook_op op, uint64_t off, uint64_t len, bool after,
                        int rc);

struct hook_tier {
  hc_tier base;
  hc_tier *lower;
  hook_fn fn;
  void *arg;
};

#define HOOK_CALL(t, op, off, len, call)                                                       \
  do {                                                                                       \
    struct hook_tier *h_ = (struct hook_tier *) (t);                                         \
    int r_ = h_->fn (h_->arg, op, off, len, false, 0);                                       \
    if (r_)                                                                                  \
      return r_;                                                                             \
    r_ = (call);                                                                             \
    h_->fn (h_->arg, op, off, len, true, r_);                                                \
    return r_;                                                                               \
  } while (0)

static int
hook_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  HOOK_CALL (t, HOOK_READ, off, len, hc_tier_read (((struct hook_tier *) t)->lower, buf, len, off));
}

static int
hook_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  HOOK_CALL (t, HOOK_WRITE, off, len,
             hc_tier_write (((struct hook_tier *) t)->lower, buf, len, off, flags));
}

static int
hook_flush (hc_tier *t)
{
  HOOK_CALL (t, HOOK_FLUSH, 0, 0, hc_tier_flush (((struct hook_tier *) t)->lower));
}

static int
hook_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  HOOK_CALL (t, HOOK_DISCARD, off, len, hc_tier_discard (((struct hook_tier *) t)->lower, off, len));
}

static int
hook_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  HOOK_CALL (t, HOOK_ZERO, off, len, hc_tier_zero (((struct hook_tier *) t)->lower, off, len));
}

static void
hook_close (hc_tier *t)
{
  free (t);
}

static const struct hc_tier_ops hook_ops = {
  .kind = "hook",
  .read = hook_read,
  .write = hook_write,
  .flush = hook_flush,
  .discard = hook_discard,
  .zero = hook_zero,
  .close = hook_close,
};

/* Wraps `lower` (which stays the caller's to close, after this one). */
static inline int
hook_new (hc_tier *lower, hook_fn fn, void *arg, hc_tier **out)
{
  struct hook_tier *h = calloc (1, sizeof *h);

  if (!h)
    return -ENOMEM;
  hc_tier_init (&h->base, &hook_ops, hc_tier_size (lower), hc_tier_caps (lower), "hook");
  h->lower = lower;
  h->fn = fn;
  h->arg = arg;
  *out = &h->base;
  return 0;
}

#endif /* HC_TEST_HOOK_H */
