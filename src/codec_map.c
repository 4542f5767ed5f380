/* The mapping table: how each class and each advice appears on every
 * transport.  This is the one place to read or change it.
 *
 * Source: the proposed canonical mapping of hint-standards §10, checked
 * against the kernel headers and specifications cited there.  Where we
 * deviate, the row says why.  Levels of the ATA hybrid byte are relative to
 * the device's maximum M (enum hc_ata_level), so the same table serves a
 * drive with 4 priority levels and one with 16.
 *
 * Combining a class with an advice (hc_map_advice_row): a transport field
 * takes the advice's value where the advice row has one, and the class's
 * value where the advice row says KEEP.  An advice describes what to do and a
 * class why, so a single-valued transport (the ATA byte, the RFC bits) carries
 * the advice when there is one, and a transport with separate fields (NVMe
 * access frequency vs latency, NFS cache bits vs pattern bits) carries both.
 *
 * Decoding (hc_map_search): a transport value usually has several preimages
 * (NVMe cannot tell metadata from paging).  We return the first preimage in a
 * fixed preference order, so decode(encode(x)) is always a hint that encodes
 * to the same value as x, and equal to x wherever the transport can express x.
 */
#include <errno.h>
#include <string.h>

#include "codec.h"

#define K HC_MAP_KEEP
#define NB(x) HC_NFS_BIT (HC_NFS_##x)

/* A row: the RFC's advice, ATA and RWH; NVMe and NFS; ioprio, fadvise (and
 * for advice, SCSI's OVERALL FREQUENCY); for classes, the SCSI markup.
 * Fields left out are 0; struct hc_map_row (codec.h) says what each is. */
const struct hc_map_row hc_map_class[HC_CLASS_COUNT] = {
  [HC_CLASS_UNCLASSIFIED] = {
    .rfc = HC_ADVICE_NONE, .ata = HC_ATA_NONE,
    .ioprio_class = HC_IOPRIO_NONE, .fadv = { K, K } },
  [HC_CLASS_METADATA] = {
    .rfc = HC_ADVICE_WILLNEED, .ata = HC_ATA_TOP, .rwh = 2 /* SHORT */,
    .nvme_af_read = 5, .nvme_af_write = 5, .nvme_al = 3, .nfs = NB (WILLNEED),
    .ioprio_class = HC_IOPRIO_BE, .fadv = { HC_FADV_WILLNEED, K },
    .scsi = { .ov_fr = 2, .wr_se = 1, .rd_se = 1, .io_cl = 0x1, .su_io = 2, .rlbsr = 1 } },
  /* Chinner: journal writes are never read back; keep them out of flash. */
  [HC_CLASS_JOURNAL] = {
    .rfc = HC_ADVICE_DONTNEED, .ata = HC_ATA_P1, .rwh = 2 /* SHORT */,
    .nvme_af_read = 4, .nvme_af_write = 4, .nvme_al = 3, .nvme_seq = 1,
    .nfs = NB (WRITE) | NB (NOREUSE),
    .ioprio_class = HC_IOPRIO_BE, .fadv = { HC_FADV_NOREUSE, K },
    .scsi = { .rw_fr = 2, .wr_se = 2, .su_io = 2, .rlbsr = 1 } },
  /* §10 allows RT 4 or BE 0 for ioprio; RT keeps it apart from metadata. */
  [HC_CLASS_TRANSACTION] = {
    .rfc = HC_ADVICE_NORMAL, .ata = HC_ATA_NORMAL, .rwh = 3 /* MEDIUM */,
    .nvme_af_read = 5, .nvme_af_write = 5, .nvme_al = 3, .nfs = NB (RANDOM) | NB (WILLNEED),
    .ioprio_class = HC_IOPRIO_RT, .ioprio_level = 4, .fadv = { HC_FADV_RANDOM, K },
    .scsi = { .ov_fr = 2, .wr_se = 1, .rd_se = 1, .io_cl = 0x4, .su_io = 2, .rlbsr = 1 } },
  [HC_CLASS_DATA] = {
    .rfc = HC_ADVICE_NORMAL, .ata = HC_ATA_DEFAULT,
    .nfs = NB (NORMAL),
    .ioprio_class = HC_IOPRIO_BE, .ioprio_level = 4, .fadv = { HC_FADV_NORMAL, K } },
  [HC_CLASS_PAGING] = {
    .rfc = HC_ADVICE_NORMAL, .ata = HC_ATA_NORMAL, .rwh = 2 /* SHORT */,
    .nvme_af_read = 5, .nvme_af_write = 5, .nvme_al = 3, .nfs = NB (RANDOM),
    .ioprio_class = HC_IOPRIO_BE, .fadv = { K, K },
    .scsi = { .ov_fr = 2, .wr_se = 1, .rd_se = 1, .su_io = 2 } },
  /* NVMe: a stream is a one-time read, or a rarely rewritten write. */
  [HC_CLASS_STREAMING] = {
    .rfc = HC_ADVICE_DONTNEED, .ata = HC_ATA_P1, .rwh = 4 /* LONG */,
    .nvme_af_read = 6, .nvme_af_write = 2, .nvme_al = 2, .nvme_seq = 1,
    .nfs = NB (SEQUENTIAL) | NB (NOREUSE),
    .ioprio_class = HC_IOPRIO_BE, .ioprio_level = 4,
    .fadv = { HC_FADV_SEQUENTIAL, HC_FADV_NOREUSE },
    .scsi = { .ov_fr = 1, .wr_se = 2, .rd_se = 2, .io_cl = 0x5, .su_io = 1, .rlbsr = 3 } },
  /* ATA: HYBRID EVICT follows writes only (codec/ata.c).  The RFC bits get
   * dontneed, not evict: a backup that merely reads a hot block must not
   * throw it out.  ioprio IDLE with level 7, as `ionice -c3` sets it. */
  [HC_CLASS_BACKGROUND] = {
    .rfc = HC_ADVICE_DONTNEED, .ata = HC_ATA_P0, .ata_act = HC_WIRE_ACT_HYBRID_EVICT,
    .rwh = 5 /* EXTREME */,
    .nvme_af_read = 6, .nvme_af_write = 2, .nvme_al = 1, .nvme_seq = 1,
    .nfs = NB (NOREUSE) | NB (DONTNEED),
    .ioprio_class = HC_IOPRIO_IDLE, .ioprio_level = 7,
    .fadv = { HC_FADV_NOREUSE, HC_FADV_DONTNEED },
    .scsi = { .ov_fr = 1, .wr_se = 2, .rd_se = 2, .io_cl = 0x5, .su_io = 1, .acdlu = 1 } },
};

/* Advice rows.  NVMe has no safe evict (DSM deallocate destroys data), so
 * evict degrades to "infrequent"; so do NFS and fadvise (DONTNEED). */
const struct hc_map_row hc_map_advice[HC_ADVICE_LIMIT] = {
  [HC_ADVICE_EVICT] = {
    .rfc = HC_ADVICE_EVICT, .ata = HC_ATA_P0, .ata_act = HC_WIRE_ACT_HYBRID_EVICT, .rwh = K,
    .nvme_af_read = 2, .nvme_af_write = 2, .nfs = NB (DONTNEED),
    .ioprio_class = K, .fadv = { HC_FADV_DONTNEED, K }, .scsi_ov_fr = 1 },
  [HC_ADVICE_DONTNEED] = {
    .rfc = HC_ADVICE_DONTNEED, .ata = HC_ATA_P1, .rwh = 4 /* LONG */,
    .nvme_af_read = 2, .nvme_af_write = 2, .nfs = NB (DONTNEED),
    .ioprio_class = K, .fadv = { HC_FADV_DONTNEED, K }, .scsi_ov_fr = 1 },
  [HC_ADVICE_NORMAL] = {
    .rfc = HC_ADVICE_NORMAL, .ata = HC_ATA_NORMAL, .rwh = K,
    .nvme_af_read = 1, .nvme_af_write = 1, .nvme_al = 2, .nfs = NB (NORMAL),
    .ioprio_class = K, .fadv = { HC_FADV_NORMAL, K } },
  /* §10: NVMe AF 3 ("infrequent writes, frequent reads") or 5; 3 says what
   * willneed means — the data will be read. */
  [HC_ADVICE_WILLNEED] = {
    .rfc = HC_ADVICE_WILLNEED, .ata = HC_ATA_TOP, .ata_act = HC_WIRE_ACT_CHANGE_RANGE, .rwh = K,
    .nvme_af_read = 3, .nvme_af_write = 3, .nvme_al = 3, .nfs = NB (WILLNEED),
    .ioprio_class = K, .fadv = { HC_FADV_WILLNEED, K }, .scsi_ov_fr = 2 },
};

#undef K
#undef NB

const struct hc_map_row *
hc_map_advice_row (struct hc_hint h)
{
  if (h.advice == HC_ADVICE_NONE)
    return NULL;
  if (h.advice == HC_ADVICE_NORMAL && h.cls != HC_CLASS_UNCLASSIFIED)
    return NULL;
  return &hc_map_advice[h.advice];
}

/* The advice values in decoding preference: evict last, since most
 * transports carry it as dontneed. */
static const uint8_t advice_order[] = {
  HC_ADVICE_DONTNEED, HC_ADVICE_NORMAL, HC_ADVICE_WILLNEED, HC_ADVICE_EVICT,
};
#define NADV (sizeof advice_order / sizeof advice_order[0])

/* The k-th candidate hint in order `prefer`.  Returns false past the end.
 *   class first:  each class alone; each advice alone; classes × advice
 *   advice first: no hint; each advice alone; each class alone; classes × advice */
bool
hc_map_candidate (enum hc_prefer prefer, unsigned k, struct hc_hint *h)
{
  const unsigned nclass = HC_CLASS_COUNT - 1; /* without unclassified */

  *h = (struct hc_hint) { 0 };
  if (k == 0)
    return true;
  k--;
  if (prefer == HC_PREFER_CLASS) {
    if (k < nclass)
      return h->cls = k + 1, true;
    k -= nclass;
    if (k < NADV)
      return h->advice = advice_order[k], true;
    k -= NADV;
  } else {
    if (k < NADV)
      return h->advice = advice_order[k], true;
    k -= NADV;
    if (k < nclass)
      return h->cls = k + 1, true;
    k -= nclass;
  }
  if (k >= nclass * NADV)
    return false;
  h->cls = k / NADV + 1;
  h->advice = advice_order[k % NADV];
  return true;
}

static bool
same_values (const struct hc_wire *a, const struct hc_wire *b)
{
  return a->n == b->n && memcmp (a->v, b->v, a->n * sizeof a->v[0]) == 0;
}

int
hc_map_search (const struct hc_codec *codec, const struct hc_profile *p, const struct hc_wire *w,
               enum hc_dir dir, enum hc_prefer prefer, unsigned cls, struct hc_hint *out)
{
  struct hc_hint h;

  for (unsigned k = 0; hc_map_candidate (prefer, k, &h); k++) {
    struct hc_wire e = { 0 };
    if (cls < HC_CLASS_COUNT && h.cls != cls)
      continue;
    codec->encode (p, h, dir, &e);
    if (same_values (&e, w)) {
      *out = h;
      return 0;
    }
  }
  return -ENOENT;
}
