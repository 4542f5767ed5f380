/* A ghost: the set of recently evicted origins, for policies that admit a
 * block straight to their main queue when it comes back soon after
 * eviction (S3-FIFO, the hint-aware policy).
 *
 * A list of evicted origins would cost 8+ bytes per entry and a hash index
 * on top; the ghost only needs "was this evicted recently?", so it is two
 * Bloom filters of 8 bits per remembered entry and 5 probes (about 2.6 %
 * false positives).  Insertions go to the current generation; when it has taken
 * half the capacity, the older generation is cleared and becomes current.
 * Membership is "in either", so the ghost remembers the last ½ … 1×
 * capacity evictions, in 1 byte per entry.
 *
 * Sizing.  A full generation of b bits per entry probed k times answers
 * "yes" wrongly (1 − e^(−k/b))^k of the time; the current one, filling,
 * less.  Averaged over the current generation's fill, 10 bits and 3 probes
 * gave 2.2 % false positives, 8 bits and 5 probes give 2.6 % (8 bits and 3
 * probes: 3.9 %) — and 8 bits rather than 10 take 0.23 bytes per cached
 * block off the hint-aware policy, which is what brought it within its
 * 24-byte budget.  The two more probes cost a few cache misses on a cache
 * miss, where the slow tier's read costs thousands times more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define BITS_PER_ENTRY 8
#define PROBES 5

static inline uint64_t
ghost_hash (uint64_t x)
{
  x += UINT64_C (0x9e3779b97f4a7c15);
  x = (x ^ (x >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C (0x94d049bb133111eb);
  return x ^ (x >> 31);
}

/* Probe i's bit for hash h (double hashing). */
static inline uint32_t
probe (const struct hc_ghost *g, uint64_t h, unsigned i)
{
  uint32_t a = (uint32_t) h, b = (uint32_t) (h >> 32) | 1;
  return (uint32_t) (((uint64_t) (a + i * b) * g->nbits) >> 32);
}

int
hc_ghost_init (struct hc_ghost *g, uint32_t entries)
{
  memset (g, 0, sizeof *g);
  g->per_gen = entries / 2 ? entries / 2 : 1;
  g->nbits = ((g->per_gen * BITS_PER_ENTRY + 63) / 64) * 64;
  g->bits[0] = calloc (g->nbits / 64, sizeof (uint64_t));
  g->bits[1] = calloc (g->nbits / 64, sizeof (uint64_t));
  if (!g->bits[0] || !g->bits[1]) {
    hc_ghost_fini (g);
    return -ENOMEM;
  }
  return 0;
}

void
hc_ghost_copy (struct hc_ghost *dst, const struct hc_ghost *src)
{
  for (unsigned i = 0; i < 2; i++)
    memcpy (dst->bits[i], src->bits[i], src->nbits / 8);
  dst->inserted = src->inserted;
  dst->cur = src->cur;
}

void
hc_ghost_fini (struct hc_ghost *g)
{
  free (g->bits[0]);
  free (g->bits[1]);
  memset (g, 0, sizeof *g);
}

void
hc_ghost_insert (struct hc_ghost *g, uint64_t origin)
{
  uint64_t h = ghost_hash (origin);

  if (g->inserted >= g->per_gen) {
    g->cur ^= 1;
    memset (g->bits[g->cur], 0, g->nbits / 8);
    g->inserted = 0;
  }
  for (unsigned i = 0; i < PROBES; i++) {
    uint32_t b = probe (g, h, i);
    g->bits[g->cur][b / 64] |= UINT64_C (1) << (b % 64);
  }
  g->inserted++;
}

bool
hc_ghost_contains (const struct hc_ghost *g, uint64_t origin)
{
  uint64_t h = ghost_hash (origin);

  for (unsigned gen = 0; gen < 2; gen++) {
    unsigned i;
    for (i = 0; i < PROBES; i++) {
      uint32_t b = probe (g, h, i);
      if (!(g->bits[gen][b / 64] & (UINT64_C (1) << (b % 64))))
        break;
    }
    if (i == PROBES)
      return true;
  }
  return false;
}

size_t
hc_ghost_bytes (const struct hc_ghost *g)
{
  return 2 * (size_t) g->nbits / 8;
}
