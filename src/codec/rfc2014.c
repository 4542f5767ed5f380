/* rfc2014: the advice bits of the 2014 "Enable use of Solid State Hybrid
 * Drives" RFC, carried in the process I/O priority.
 *
 * The RFC took three bits of the ioprio value as a 3-bit advice field:
 * advice bit 0 → ioprio bit 11, bit 1 → bit 12, bit 2 → bit 15, with the
 * IOPRIO_ADV_* values none 0, evict 1, dontneed 2, normal 3, reserved 4–6,
 * willneed 7.  So `ionice -c2 -n4096` (ioprio 0x5000) means dontneed.
 *
 * Encoding gives the value `ionice -c2 -n N` would set (best-effort class,
 * level 0, plus the advice bits).  The transport has no classes: a class is
 * sent as the advice its mapping-table row projects it to, and the class is
 * lost.  Decoding looks only at bits 11, 12 and 15; the rest of the value is
 * the process's ordinary priority, which we leave alone.
 */
#include "../codec.h"

#define ADV_BITS ((1u << 11) | (1u << 12) | (1u << 15))

static unsigned
advice_to_bits (unsigned a)
{
  return (a & 1) << 11 | ((a >> 1) & 1) << 12 | ((a >> 2) & 1) << 15;
}

static unsigned
bits_to_advice (uint64_t v)
{
  return ((v >> 11) & 1) | ((v >> 12) & 1) << 1 | ((v >> 15) & 1) << 2;
}

static void
rfc_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  unsigned a = hc_map_advice_row (h) ? h.advice : hc_map_class[h.cls].rfc;
  w->n = 1;
  w->v[0] = (uint64_t) HC_IOPRIO_BE << 13 | advice_to_bits (a);
}

static int
rfc_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
            struct hc_hint *h, struct hc_sb *why)
{
  (void) p, (void) dir;
  unsigned a = bits_to_advice (w->v[0]);

  if (!hc_advice_name (a)) {
    hc_sb_printf (why, "advice %u (IOPRIO_ADV_RESERVED%u) is reserved", a, a - 3);
    return -EINVAL;
  }
  h->advice = a;
  return 0;
}

static void
rfc_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  uint64_t v = w->v[0];
  unsigned a = bits_to_advice (v);
  const char *name = hc_advice_name (a);

  /* ionice -cC -nN sets (C << 13) | N without masking N, so the RFC's
   * bit 15 travels inside N. */
  hc_sb_printf (out, "ioprio 0x%04llx (ionice -c%u -n%llu): advice bits 15,12,11 = %u%u%u "
                "→ %u %s; other bits 0x%04llx",
                (unsigned long long) v, (unsigned) (v >> 13) & 3,
                (unsigned long long) (v & ~(uint64_t) 0x6000), (unsigned) (v >> 15) & 1,
                (unsigned) (v >> 12) & 1, (unsigned) (v >> 11) & 1, a,
                name ? name : "(reserved)", (unsigned long long) (v & ~(uint64_t) ADV_BITS));
}

const struct hc_codec hc_codec_rfc2014 = {
  .name = "rfc2014",
  .title = "2014 SSHD RFC: advice in ioprio bits 11, 12, 15",
  .max_values = 1,
  .value_max = 0xffff,
  .hex = true,
  .encode = rfc_encode,
  .decode = rfc_decode,
  .describe = rfc_describe,
};
