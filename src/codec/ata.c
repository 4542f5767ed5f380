/* ata: the SATA hybrid information byte (ACS-3 / SATA 3.2), sent in the
 * AUXILIARY field bits 23:16 of READ/WRITE FPDMA QUEUED.
 *
 *     bits 3:0  HYBRID PRIORITY (0 … the device's maximum level M)
 *     bit  4    reserved
 *     bit  5    HYBRID INFORMATION VALID
 *     bits 7:6  reserved
 *
 * The device's Hybrid Information log (14h) bounds the priority: its
 * MAXIMUM HYBRID PRIORITY LEVEL is M, and with MAXIMUM PRIORITY BEHAVIOR set
 * an I/O tagged M may fail when the flash is full, so we never tag above
 * M−1 then (hc_profile_load_ata_log reads both).  Levels are relative to M:
 * 0 is "do not keep", 1 "little value", M−1 the ordinary level and the top
 * "keep" — the 2014 RFC's default translation.  A class travels as the
 * level its row projects it to, so the class is lost: the byte speaks in
 * advice, and a value is read back as advice.
 *
 * Follow-ups (wire actions): HYBRID EVICT of the range for evict, and after
 * background writes (§10); HYBRID CHANGE BY LBA RANGE to the top level for
 * willneed given as range advice.  Both only where the profile allows.
 */
#include "../codec.h"

#define VALID 0x20u
#define RESERVED 0xd0u

static uint64_t
level_byte (const struct hc_profile *p, unsigned level)
{
  switch (level) {
  case HC_ATA_P0: return VALID | 0;
  case HC_ATA_P1: return VALID | 1;
  case HC_ATA_NORMAL: return VALID | (p->ata_max - 1);
  case HC_ATA_TOP: return VALID | hc_profile_ata_top (p);
  case HC_ATA_DEFAULT: return p->ata_host_hinted ? VALID | (p->ata_max - 1) : 0;
  case HC_ATA_NONE:
  default: return 0;
  }
}

static void
ata_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  const struct hc_map_row *a = hc_map_advice_row (h);
  const struct hc_map_row *r = a ? a : &hc_map_class[h.cls];
  unsigned act = r->ata_act;

  if (!p->ata_evict || (!a && dir != HC_DIR_WRITE))
    act &= ~(unsigned) HC_WIRE_ACT_HYBRID_EVICT; /* a class evicts after writes only */
  if (dir != HC_DIR_ANY)
    act &= ~(unsigned) HC_WIRE_ACT_CHANGE_RANGE; /* only for range advice */
  w->n = 1;
  w->v[0] = level_byte (p, r->ata);
  w->actions = act;
}

static int
ata_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
            struct hc_hint *h, struct hc_sb *why)
{
  uint64_t v = w->v[0];
  unsigned prio = v & 0xf;

  if (v & RESERVED) {
    hc_sb_printf (why, "reserved bits set (0x%02llx; only bits 5 and 3:0 are defined)",
                  (unsigned long long) (v & RESERVED));
    return -EINVAL;
  }
  if (!(v & VALID)) {
    if (prio)
      hc_sb_printf (why, "priority %u without HYBRID INFORMATION VALID is ignored", prio);
    *h = (struct hc_hint) { 0 };
    return 0;
  }
  if (prio > p->ata_max) {
    hc_sb_printf (why, "priority %u exceeds the device's maximum level %u", prio, p->ata_max);
    return -EINVAL;
  }
  if (hc_map_search (&hc_codec_ata, p, w, dir, HC_PREFER_ADVICE, HC_CLASS_COUNT, h) == 0)
    return 0;
  *h = (struct hc_hint) { 0 };
  if (prio > hc_profile_ata_top (p)) {
    hc_sb_printf (why, "priority %u is the maximum level, which this device may fail "
                  "when its flash is full", prio);
    h->advice = HC_ADVICE_WILLNEED;
  } else {
    hc_sb_printf (why, "intermediate priority %u is read as normal", prio);
    h->advice = HC_ADVICE_NORMAL;
  }
  return 0;
}

static void
ata_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  uint64_t v = w->v[0];

  hc_sb_printf (out, "hybrid information 0x%02llx: VALID=%u, HYBRID PRIORITY=%u (maximum %u%s)",
                (unsigned long long) v, (unsigned) (v >> 5) & 1, (unsigned) v & 0xf, p->ata_max,
                p->ata_max_behavior ? ", which may fail" : "");
  if (v & RESERVED)
    hc_sb_printf (out, ", reserved bits 0x%02llx", (unsigned long long) (v & RESERVED));
  if (w->actions & HC_WIRE_ACT_HYBRID_EVICT)
    hc_sb_printf (out, "; then HYBRID EVICT of the range");
  if (w->actions & HC_WIRE_ACT_CHANGE_RANGE)
    hc_sb_printf (out, "; then HYBRID CHANGE BY LBA RANGE to priority %u",
                  hc_profile_ata_top (p));
}

const struct hc_codec hc_codec_ata = {
  .name = "ata",
  .title = "SATA hybrid information byte (AUXILIARY 23:16)",
  .max_values = 1,
  .value_max = 0xff,
  .hex = true,
  .encode = ata_encode,
  .decode = ata_decode,
  .describe = ata_describe,
};
