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
#define HC_LE(bits, v) __builtin_bswap##bits (v)
#else
#define HC_LE(bits, v) (v)
#endif

/* hc_getBITS (p) and hc_putBITS (p, v) for 16, 32 and 64 bits. */
#define HC_LE_ACCESSORS(bits)                                                            \
  static inline uint##bits##_t hc_get##bits (const uint8_t *p)                           \
  {                                                                                      \
    uint##bits##_t v;                                                                    \
    memcpy (&v, p, sizeof v);                                                            \
    return HC_LE (bits, v);                                                              \
  }                                                                                      \
  static inline void hc_put##bits (uint8_t *p, uint##bits##_t v)                         \
  {                                                                                      \
    v = HC_LE (bits, v);                                                                 \
    memcpy (p, &v, sizeof v);                                                            \
  }

HC_LE_ACCESSORS (16)
HC_LE_ACCESSORS (32)
HC_LE_ACCESSORS (64)

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
