/* Little-endian loads and stores: the one set, for every on-disk and
 * on-wire layout the project defines (the volume's metadata, the binary
 * trace format, the oracle's files).  The 16-, 32- and 64-bit ones compile
 * to plain moves on little-endian machines; the 48- and 56-bit ones are the
 * journal's packed record fields. */
#ifndef HC_LE_H
#define HC_LE_H

#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HC_LE16(v) __builtin_bswap16 (v)
#define HC_LE32(v) __builtin_bswap32 (v)
#define HC_LE64(v) __builtin_bswap64 (v)
#else
#define HC_LE16(v) (v)
#define HC_LE32(v) (v)
#define HC_LE64(v) (v)
#endif

static inline uint16_t
hc_get16 (const uint8_t *p)
{
  uint16_t v;
  memcpy (&v, p, 2);
  return HC_LE16 (v);
}

static inline uint32_t
hc_get32 (const uint8_t *p)
{
  uint32_t v;
  memcpy (&v, p, 4);
  return HC_LE32 (v);
}

static inline uint64_t
hc_get64 (const uint8_t *p)
{
  uint64_t v;
  memcpy (&v, p, 8);
  return HC_LE64 (v);
}

static inline void
hc_put16 (uint8_t *p, uint16_t v)
{
  v = HC_LE16 (v);
  memcpy (p, &v, 2);
}

static inline void
hc_put32 (uint8_t *p, uint32_t v)
{
  v = HC_LE32 (v);
  memcpy (p, &v, 4);
}

static inline void
hc_put64 (uint8_t *p, uint64_t v)
{
  v = HC_LE64 (v);
  memcpy (p, &v, 8);
}

/* The low `n` bytes of v (n < 8), and back. */
static inline void
hc_put_n (uint8_t *p, uint64_t v, unsigned n)
{
  for (unsigned i = 0; i < n; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint64_t
hc_get_n (const uint8_t *p, unsigned n)
{
  uint64_t v = 0;
  for (unsigned i = n; i-- > 0;)
    v = v << 8 | p[i];
  return v;
}

#endif
