/* The tier door: every tier I/O of hintcache passes through here.
 *
 * The door checks alignment, range and flags, so that implementations and
 * decorators trust their arguments; a zero length succeeds without reaching
 * them (an empty FUA write is a flush); optional operations (discard,
 * zero) fall back to writing zeros, and prefetch, which only advises,
 * says -EOPNOTSUPP where the tier has no cache to read ahead into.
 * Failures from below must be negative errnos — asserted, since a positive
 * or stray value there is a bug in an implementation.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier.h"

#define ALIGNED(x) (((x) & (HC_SECTOR_SIZE - 1)) == 0)

void
hc_tier_init (hc_tier *t, const struct hc_tier_ops *ops, uint64_t size, unsigned caps,
              const char *name)
{
  t->ops = ops;
  t->size = size;
  t->caps = caps;
  snprintf (t->name, sizeof t->name, "%s", name);
  t->ident[0] = '\0';
}

/* The range check shared by every operation. */
static int
check_range (const hc_tier *t, uint64_t off, uint64_t len)
{
  if (!ALIGNED (off) || !ALIGNED (len) || off > t->size || len > t->size - off)
    return -EINVAL;
  return 0;
}

static int
result (int rc)
{
  assert (rc <= 0);
  return rc;
}

int
hc_tier_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  int rc = check_range (t, off, len);
  if (rc < 0 || len == 0)
    return rc;
  return result (t->ops->read (t, buf, len, off));
}

int
hc_tier_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  int rc = check_range (t, off, len);
  if (rc < 0)
    return rc;
  if (flags & ~(unsigned) HC_TIER_FUA)
    return -EINVAL;
  if (len == 0)
    return (flags & HC_TIER_FUA) ? hc_tier_flush (t) : 0;
  return result (t->ops->write (t, buf, len, off, flags));
}

int
hc_tier_flush (hc_tier *t)
{
  return result (t->ops->flush (t));
}

int
hc_tier_zero_by_writes (hc_tier *t, uint64_t off, uint64_t len)
{
  static const size_t chunk = 1 << 20;
  void *zeros = calloc (1, chunk);
  int rc = 0;

  if (!zeros)
    return -ENOMEM;
  while (len && rc == 0) {
    size_t n = len < chunk ? (size_t) len : chunk;
    rc = t->ops->write (t, zeros, n, off, 0);
    off += n;
    len -= n;
  }
  free (zeros);
  return rc;
}

int
hc_tier_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  int rc = check_range (t, off, len);
  if (rc < 0 || len == 0)
    return rc;
  if (t->ops->discard)
    return result (t->ops->discard (t, off, len));
  return result (t->ops->zero ? t->ops->zero (t, off, len) : hc_tier_zero_by_writes (t, off, len));
}

int
hc_tier_prefetch (hc_tier *t, uint64_t off, uint64_t len)
{
  int rc = check_range (t, off, len);
  if (rc < 0 || len == 0)
    return rc;
  if (!(t->caps & HC_CAP_PREFETCH) || !t->ops->prefetch)
    return -EOPNOTSUPP;
  return result (t->ops->prefetch (t, off, len));
}

int
hc_tier_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  int rc = check_range (t, off, len);
  if (rc < 0 || len == 0)
    return rc;
  return result (t->ops->zero ? t->ops->zero (t, off, len) : hc_tier_zero_by_writes (t, off, len));
}

uint64_t
hc_tier_size (const hc_tier *t)
{
  return t->size;
}

unsigned
hc_tier_caps (const hc_tier *t)
{
  return t->caps;
}

const char *
hc_tier_name (const hc_tier *t)
{
  return t->name;
}

const char *
hc_tier_identity (const hc_tier *t)
{
  return t->ident;
}

void
hc_tier_close (hc_tier *t)
{
  if (t)
    t->ops->close (t);
}
