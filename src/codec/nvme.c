/* nvme: NVMe read/write command Dword 13.
 *
 *     bits  3:0   DSM access frequency: 0 none, 1 typical, 2 infrequent,
 *                 3 infrequent writes / frequent reads, 4 frequent writes /
 *                 infrequent reads, 5 frequent, 6 one-time read,
 *                 7 speculative read, 8 overwritten soon; 9–15 reserved
 *     bits  5:4   DSM access latency: 0 none, 1 idle, 2 normal, 3 low
 *     bit   6     DSM sequential request
 *     bit   7     DSM incompressible
 *     bits 15:8   reserved
 *     bits 31:16  DSPEC: stream id or FDP placement identifier (the
 *                 directive type itself is in Dword 12)
 *
 * The access frequency carries the advice (or the class's own frequency),
 * latency and sequentiality carry the class.  Metadata, transaction and
 * paging look alike (frequent, low latency, random); with a profile that has
 * at least 7 placement handles each class gets its own (DSPEC = class id),
 * which separates them exactly — and keeps short-lived journal blocks out of
 * the erase units of long-lived data, which is what placement is for.
 * Flags: sequential sets bit 6, incompressible bit 7, and readahead on a
 * read sends frequency 7 as Linux does for REQ_RAHEAD.  There is no safe
 * evict (Dataset Management deallocate destroys data), so evict is sent as
 * "infrequent".
 */
#include "../codec.h"

static const char *const af_names[16] = {
  "no information", "typical", "infrequent", "infrequent writes, frequent reads",
  "frequent writes, infrequent reads", "frequent", "one-time read", "speculative read",
  "overwritten soon",
};
static const char *const al_names[4] = { "none", "idle", "normal", "low" };

#define SEQ_BIT 0x40u
#define INCOMPRESSIBLE_BIT 0x80u
#define RESERVED_BITS 0xff00u
#define DIRECT_CLASSES (HC_CLASS_COUNT - 1)

static void
nvme_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  const struct hc_map_row *c = &hc_map_class[h.cls], *a = hc_map_advice_row (h);
  unsigned af = dir == HC_DIR_WRITE ? c->nvme_af_write : c->nvme_af_read;
  unsigned al = c->nvme_al, seq = c->nvme_seq;
  uint64_t dspec = 0;

  if (a) {
    af = dir == HC_DIR_WRITE ? a->nvme_af_write : a->nvme_af_read;
    if (h.cls == HC_CLASS_UNCLASSIFIED) {
      al = a->nvme_al;
      seq = a->nvme_seq;
    }
  }
  if (h.flags & HC_HINT_SEQUENTIAL)
    seq = 1;
  if (h.flags & HC_HINT_RANDOM)
    seq = 0;
  if ((h.flags & HC_HINT_READAHEAD) && dir != HC_DIR_WRITE)
    af = 7;
  if (p->nvme_placements >= DIRECT_CLASSES)
    dspec = h.cls;
  w->n = 1;
  w->v[0] = af | al << 4 | seq << 6 | (h.flags & HC_HINT_INCOMPRESSIBLE ? INCOMPRESSIBLE_BIT : 0)
            | dspec << 16;
}

static int
nvme_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
             struct hc_hint *h, struct hc_sb *why)
{
  uint64_t v = w->v[0];
  unsigned af = v & 0xf, al = (v >> 4) & 3, dspec = (unsigned) (v >> 16);
  unsigned extra = v & INCOMPRESSIBLE_BIT ? HC_HINT_INCOMPRESSIBLE : 0;
  bool mapped = p->nvme_placements >= DIRECT_CLASSES;
  struct hc_wire k = { .n = 1, .v = { v & ~(uint64_t) INCOMPRESSIBLE_BIT } };

  if (v & RESERVED_BITS) {
    hc_sb_printf (why, "Dword 13 bits 15:8 are reserved (got 0x%02llx)",
                  (unsigned long long) ((v >> 8) & 0xff));
    return -EINVAL;
  }
  if (af > 8) {
    hc_sb_printf (why, "access frequency %u is reserved (0 … 8)", af);
    return -EINVAL;
  }
  if (dspec && (!mapped || dspec > DIRECT_CLASSES)) {
    hc_sb_printf (why, "DSPEC %u is not a class placement of this profile; ignored", dspec);
    k.v[0] &= 0xffff;
    dspec = 0;
  }

  /* As encoded; then as encoded with the sequential flag; then by field. */
  if (hc_map_search (&hc_codec_nvme, p, &k, dir, HC_PREFER_CLASS, HC_CLASS_COUNT, h) == 0) {
    h->flags |= extra;
    return 0;
  }
  if (k.v[0] & SEQ_BIT) {
    k.v[0] &= ~(uint64_t) SEQ_BIT;
    if (hc_map_search (&hc_codec_nvme, p, &k, dir, HC_PREFER_CLASS, HC_CLASS_COUNT, h) == 0) {
      h->flags |= extra | HC_HINT_SEQUENTIAL;
      return 0;
    }
  }
  *h = (struct hc_hint) { .cls = dspec, .flags = extra };
  if (v & SEQ_BIT)
    h->flags |= HC_HINT_SEQUENTIAL;
  if (al == 3)
    h->flags |= HC_HINT_SYNC;
  switch (af) {
  case 1: h->advice = HC_ADVICE_NORMAL; break;
  case 2: h->advice = HC_ADVICE_DONTNEED; break;
  case 3: case 5: h->advice = HC_ADVICE_WILLNEED; break;
  case 6: h->advice = HC_ADVICE_DONTNEED; h->flags |= HC_HINT_NOREUSE; break;
  case 7: h->flags |= HC_HINT_READAHEAD; break;
  default: break; /* 0, 4 and 8 say nothing about keeping the data */
  }
  return 0;
}

static void
nvme_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  uint64_t v = w->v[0];
  unsigned af = v & 0xf;

  hc_sb_printf (out, "Dword 13 0x%08llx: AF=%u (%s), AL=%u (%s), SEQ=%u, INCOMPRESSIBLE=%u, "
                "DSPEC=%llu", (unsigned long long) v, af, af_names[af] ? af_names[af] : "reserved",
                (unsigned) (v >> 4) & 3, al_names[(v >> 4) & 3], (unsigned) (v >> 6) & 1,
                (unsigned) (v >> 7) & 1, (unsigned long long) (v >> 16));
  if (v & RESERVED_BITS)
    hc_sb_printf (out, ", reserved bits 15:8 = 0x%02llx", (unsigned long long) (v >> 8) & 0xff);
}

const struct hc_codec hc_codec_nvme = {
  .name = "nvme",
  .title = "NVMe read/write Dword 13: DSM 7:0, DSPEC 31:16",
  .max_values = 1,
  .value_max = 0xffffffffu,
  .hex = true,
  .encode = nvme_encode,
  .decode = nvme_decode,
  .describe = nvme_describe,
};
