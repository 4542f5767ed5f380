/* Sequential-run detection: see seq.h. */
#include "seq.h"

/* The order word holds slot numbers XOR this, so that zero is the identity
 * order (slot 0 most recent … slot 15 least). */
#define IDENTITY UINT64_C (0xfedcba9876543210)
#define NIBBLES_1 UINT64_C (0x1111111111111111)
#define NIBBLES_8 UINT64_C (0x8888888888888888)

#define BYTES_1 UINT64_C (0x0101010101010101)
#define BYTES_80 UINT64_C (0x8080808080808080)

/* A byte (never 0) summarising a run's next offset. */
static inline unsigned
fingerprint (uint64_t off)
{
  uint64_t h = (off >> 9) * UINT64_C (0x9e3779b97f4a7c15);
  return (unsigned) (h >> 56) | 1;
}

/* Bit i set where byte i of w may be zero (no false negatives; the exact
 * check follows). */
static inline unsigned
zero_bytes (uint64_t w)
{
  uint64_t z = (w - BYTES_1) & ~w & BYTES_80;
  /* Gather the eight high bits into the low byte. */
  return (unsigned) ((z >> 7) * UINT64_C (0x0102040810204080) >> 56);
}

/* Moves slot x to the front of the recency order. */
static inline uint64_t
to_front (uint64_t order, unsigned x)
{
  uint64_t t = order ^ (x * NIBBLES_1);
  /* The lowest zero nibble of t is x's position (exact for the lowest). */
  unsigned p = (unsigned) __builtin_ctzll ((t - NIBBLES_1) & ~t & NIBBLES_8) / 4;
  uint64_t below = order & ((UINT64_C (1) << (4 * p)) - 1);
  uint64_t above = p == 15 ? 0 : order & ~((UINT64_C (1) << (4 * p + 4)) - 1);
  return above | below << 4 | x;
}

/* The candidate entry for a run that continues at `next`. */
static inline struct hc_seqslot *
candidate (struct hc_seq *s, uint64_t next)
{
  uint64_t h = (next >> 9) * UINT64_C (0x9e3779b97f4a7c15);
  return &s->cand[(h >> 40) & (HC_SEQ_CANDIDATES - 1)];
}

/* The established run request `off` continues, found by fingerprint, or
 * HC_SEQ_SLOTS. */
static inline unsigned
find_run (const struct hc_seq *s, uint64_t off)
{
  uint64_t want = fingerprint (off) * BYTES_1;
  unsigned cand = zero_bytes (s->fp[0] ^ want) | zero_bytes (s->fp[1] ^ want) << 8;

  for (; cand; cand &= cand - 1) {
    unsigned x = (unsigned) __builtin_ctz (cand);
    if (s->next[x] == off && s->run[x])
      return x;
  }
  return HC_SEQ_SLOTS;
}

bool
hc_seq_update (struct hc_seq *s, struct hc_seqslot *own, uint64_t off, uint64_t len,
               uint64_t cutoff)
{
  uint64_t *next, *run;

  if (cutoff == UINT64_MAX)
    return false;
  if (own) {
    next = &own->next;
    run = &own->run;
  } else {
    uint64_t order = s->order ^ IDENTITY;
    unsigned x = find_run (s, off);
    if (x == HC_SEQ_SLOTS) {
      struct hc_seqslot *c = candidate (s, off);
      if (!(c->run && c->next == off)) {
        /* Continues nothing: a candidate, where it ends. */
        if (len) {
          c = candidate (s, off + len);
          c->next = off + len;
          c->run = len;
        }
        return cutoff == 0;
      }
      /* Continues a candidate: promoted to the runs, in place of the
       * least recently used one, which becomes a candidate again. */
      struct hc_seqslot promoted = *c;
      c->run = 0;
      x = (unsigned) (order >> 60);
      if (s->run[x])
        *candidate (s, s->next[x]) = (struct hc_seqslot) { s->next[x], s->run[x] };
      s->next[x] = promoted.next;
      s->run[x] = promoted.run;
    }
    s->order = to_front (order, x) ^ IDENTITY;
    next = &s->next[x];
    run = &s->run[x];
  }
  if (*next != off)
    *run = 0;
  bool past = *run >= cutoff;
  *run += len;
  *next = off + len;
  if (!own) {
    unsigned x = (unsigned) (next - s->next), sh = 8 * (x & 7);
    s->fp[x >> 3] = (s->fp[x >> 3] & ~(UINT64_C (0xff) << sh)) | (uint64_t) fingerprint (*next) << sh;
  }
  return past;
}
