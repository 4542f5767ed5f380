/* scsi: the GROUP NUMBER of READ/WRITE commands (6 bits: byte 6 of the 10-
 * and 32-byte CDBs, byte 14 bits 5:0 of the 16-byte one), and the IO advice
 * hints grouping descriptor that the group selects (SBC-5, mode page 0Ah
 * subpage 05h: 64 descriptors of 16 bytes).
 *
 *   descriptor byte 0   bits 7:6 IO ADVICE HINTS MODE (00b markup valid,
 *                       01b invalid), bits 2:0 ST_ENBLE, CS_ENBLE, IC_ENABLE
 *   byte 4              bit 7 ACDLU, bits 5:4 RLBSR, bits 3:0 markup type (0)
 *   byte 5              OVERALL FREQUENCY 7:6, READ/WRITE FREQUENCY 5:4,
 *                       WRITE SEQUENTIALITY 3:2, READ SEQUENTIALITY 1:0
 *   byte 6              IO CLASS 7:4 (0 none, 1 metadata, 4 small collection,
 *                       5 large collection), SUBSEQUENT I/O 3:2,
 *                       OSI PROXIMITY 1:0
 *
 * SCSI has no per-command markup: the host programs a descriptor into each
 * group once and then sends group numbers.  hintcache's layout uses groups
 * 0 … 31 (the ones every device supporting grouping must have):
 *
 *     group = class id + 8 × slot,  slot 0 no advice, 1 evict, 2 dontneed,
 *                                   3 willneed
 *
 * so every class and every class+advice pair travels exactly, except a
 * normal advice (which on the wire is the absence of advice) and flags.
 * Group 0 is "no hint".  The encoder returns the descriptor the group must
 * hold; the decoder reads the group through that layout, and reads the
 * markup itself when a group holds some other descriptor (a device we did
 * not program).
 */
#include <string.h>

#include "../codec.h"

#define LAYOUT_GROUPS 32

static unsigned
slot_of (unsigned advice)
{
  switch (advice) {
  case HC_ADVICE_EVICT: return 1;
  case HC_ADVICE_DONTNEED: return 2;
  case HC_ADVICE_WILLNEED: return 3;
  default: return 0;
  }
}

static const uint8_t slot_advice[4] = {
  HC_ADVICE_NONE, HC_ADVICE_EVICT, HC_ADVICE_DONTNEED, HC_ADVICE_WILLNEED,
};

static void
put_descriptor (const struct hc_scsi_lbm *m, uint8_t d[HC_WIRE_BYTES])
{
  memset (d, 0, HC_WIRE_BYTES);
  d[4] = (uint8_t) (m->acdlu << 7 | m->rlbsr << 4);
  d[5] = (uint8_t) (m->ov_fr << 6 | m->rw_fr << 4 | m->wr_se << 2 | m->rd_se);
  d[6] = (uint8_t) (m->io_cl << 4 | m->su_io << 2 | m->osi_pr);
}

static void
scsi_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  const struct hc_map_row *a = hc_map_advice_row (h);
  struct hc_scsi_lbm m = hc_map_class[h.cls].scsi;

  if (a && a->scsi_ov_fr != HC_MAP_KEEP)
    m.ov_fr = a->scsi_ov_fr;
  put_descriptor (&m, w->bytes);
  w->nbytes = HC_WIRE_BYTES;
  w->n = 1;
  w->v[0] = h.cls | slot_of (h.advice) << 3;
}

/* The hint of a group of hintcache's layout. */
static struct hc_hint
layout_hint (unsigned g)
{
  return (struct hc_hint) { .cls = g & 7, .advice = slot_advice[g >> 3] };
}

/* Checks a descriptor's fields for reserved values. */
static int
check_descriptor (const uint8_t *d, struct hc_sb *why)
{
  unsigned mode = d[0] >> 6, type = d[4] & 0xf, rlbsr = (d[4] >> 4) & 3, iocl = d[6] >> 4;

  if (mode >= 2) {
    hc_sb_printf (why, "IO ADVICE HINTS MODE %u is reserved", mode);
    return -EINVAL;
  }
  if (type != 0) {
    hc_sb_printf (why, "logical block markup type %u is reserved", type);
    return -EINVAL;
  }
  if (rlbsr == 2) {
    hc_sb_printf (why, "RLBSR 10b is reserved");
    return -EINVAL;
  }
  if (iocl != 0 && iocl != 1 && iocl != 4 && iocl != 5) {
    hc_sb_printf (why, "IO CLASS %u is reserved", iocl);
    return -EINVAL;
  }
  for (unsigned sh = 0; sh < 8; sh += 2)
    if (((d[5] >> sh) & 3) == 3) {
      hc_sb_printf (why, "byte 5 bits %u:%u hold the reserved value 11b", sh + 1, sh);
      return -EINVAL;
    }
  if (((d[6] >> 2) & 3) == 3 || (d[6] & 3) == 3) {
    hc_sb_printf (why, "SUBSEQUENT I/O or OSI PROXIMITY holds the reserved value 11b");
    return -EINVAL;
  }
  return 0;
}

/* Reads a markup that no hint of ours produces, field by field. */
static void
read_markup (const uint8_t *d, struct hc_hint *h)
{
  unsigned ov = d[5] >> 6, rw = (d[5] >> 4) & 3, wr = (d[5] >> 2) & 3, rd = d[5] & 3;
  unsigned iocl = d[6] >> 4;

  *h = (struct hc_hint) { 0 };
  if (iocl == 1)
    h->cls = HC_CLASS_METADATA;
  else if (iocl == 4)
    h->cls = HC_CLASS_TRANSACTION;
  else if (iocl == 5)
    h->cls = d[4] >> 7 ? HC_CLASS_BACKGROUND : HC_CLASS_STREAMING;
  else if (rw == 2 && wr == 2)
    h->cls = HC_CLASS_JOURNAL;
  if (ov != hc_map_class[h->cls].scsi.ov_fr)
    h->advice = ov == 1 ? HC_ADVICE_DONTNEED : ov == 2 ? HC_ADVICE_WILLNEED : HC_ADVICE_NONE;
  if ((rd == 2 || wr == 2) && rd != 1 && wr != 1)
    h->flags |= HC_HINT_SEQUENTIAL;
  else if ((rd == 1 || wr == 1) && rd != 2 && wr != 2)
    h->flags |= HC_HINT_RANDOM;
}

static int
scsi_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
             struct hc_hint *h, struct hc_sb *why)
{
  unsigned g = (unsigned) w->v[0];
  struct hc_wire e;
  struct hc_hint c;

  if (w->nbytes == 0) {
    if (g >= LAYOUT_GROUPS) {
      hc_sb_printf (why, "group %u is outside hintcache's layout (0 … 31); give its descriptor", g);
      return -EINVAL;
    }
    *h = layout_hint (g);
    return 0;
  }
  if (check_descriptor (w->bytes, why) < 0)
    return -EINVAL;
  if (w->bytes[0] >> 6 == 1) {
    hc_sb_printf (why, "the descriptor marks its markup invalid: no hint");
    *h = (struct hc_hint) { 0 };
    return 0;
  }
  if (g < LAYOUT_GROUPS) {
    scsi_encode (p, layout_hint (g), dir, &e);
    if (memcmp (e.bytes + 4, w->bytes + 4, 3) == 0) {
      *h = layout_hint (g);
      return 0;
    }
  }
  hc_sb_printf (why, "group %u does not hold hintcache's descriptor; read from its markup", g);
  for (unsigned k = 0; hc_map_candidate (HC_PREFER_CLASS, k, &c); k++) {
    scsi_encode (p, c, dir, &e);
    if (memcmp (e.bytes + 4, w->bytes + 4, 3) == 0) {
      *h = c;
      return 0;
    }
  }
  read_markup (w->bytes, h);
  return 0;
}

static void
scsi_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  unsigned g = (unsigned) w->v[0];
  const uint8_t *d = w->bytes;

  hc_sb_printf (out, "GROUP NUMBER %u", g);
  if (g < LAYOUT_GROUPS) {
    struct hc_hint h = layout_hint (g);
    hc_sb_printf (out, " (layout: class %s, advice %s)", hc_class_name (h.cls),
                  hc_advice_name (h.advice));
  }
  if (w->nbytes == HC_WIRE_BYTES)
    hc_sb_printf (out, "; descriptor: mode %u, ACDLU %u, RLBSR %u, type %u, OV_FR %u, RW_FR %u, "
                  "WR_SE %u, RD_SE %u, IO_CL %u, SU_IO %u, OSI_PR %u",
                  d[0] >> 6, d[4] >> 7, (d[4] >> 4) & 3, d[4] & 0xf, d[5] >> 6, (d[5] >> 4) & 3,
                  (d[5] >> 2) & 3, d[5] & 3, d[6] >> 4, (d[6] >> 2) & 3, d[6] & 3);
}

const struct hc_codec hc_codec_scsi = {
  .name = "scsi",
  .title = "SCSI GROUP NUMBER + IO advice hints grouping descriptor",
  .max_values = 1,
  .value_max = 63,
  .hex = false,
  .encode = scsi_encode,
  .decode = scsi_decode,
  .describe = scsi_describe,
};
