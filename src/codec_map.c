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

/* Fields:   rfc advice           ATA level       ATA action    rwh
 *           nvme AF r/w, AL, SEQ                 NFS bits
 *           ioprio class, level  fadvise calls   SCSI OV_FR (advice rows)
 *           SCSI markup {OV_FR, RW_FR, WR_SE, RD_SE, IO_CL, SU_IO, OSI, ACDLU, RLBSR} */
const struct hc_map_row hc_map_class[HC_CLASS_COUNT] = {
  [HC_CLASS_UNCLASSIFIED] = {
    HC_ADVICE_NONE, HC_ATA_NONE, 0, 0,
    0, 0, 0, 0, 0,
    HC_IOPRIO_NONE, 0, { K, K }, K,
    { 0, 0, 0, 0, 0x0, 0, 0, 0, 0 } },
  [HC_CLASS_METADATA] = {
    HC_ADVICE_WILLNEED, HC_ATA_TOP, 0, 2 /* SHORT */,
    5, 5, 3, 0, NB (WILLNEED),
    HC_IOPRIO_BE, 0, { HC_FADV_WILLNEED, K }, K,
    { 2, 0, 1, 1, 0x1, 2, 0, 0, 1 } },
  /* Chinner: journal writes are never read back; keep them out of flash. */
  [HC_CLASS_JOURNAL] = {
    HC_ADVICE_DONTNEED, HC_ATA_P1, 0, 2 /* SHORT */,
    4, 4, 3, 1, NB (WRITE) | NB (NOREUSE),
    HC_IOPRIO_BE, 0, { HC_FADV_NOREUSE, K }, K,
    { 0, 2, 2, 0, 0x0, 2, 0, 0, 1 } },
  /* §10 allows RT 4 or BE 0 for ioprio; RT keeps it apart from metadata. */
  [HC_CLASS_TRANSACTION] = {
    HC_ADVICE_NORMAL, HC_ATA_NORMAL, 0, 3 /* MEDIUM */,
    5, 5, 3, 0, NB (RANDOM) | NB (WILLNEED),
    HC_IOPRIO_RT, 4, { HC_FADV_RANDOM, K }, K,
    { 2, 0, 1, 1, 0x4, 2, 0, 0, 1 } },
  [HC_CLASS_DATA] = {
    HC_ADVICE_NORMAL, HC_ATA_DEFAULT, 0, 0 /* NOT_SET */,
    0, 0, 0, 0, NB (NORMAL),
    HC_IOPRIO_BE, 4, { HC_FADV_NORMAL, K }, K,
    { 0, 0, 0, 0, 0x0, 0, 0, 0, 0 } },
  [HC_CLASS_PAGING] = {
    HC_ADVICE_NORMAL, HC_ATA_NORMAL, 0, 2 /* SHORT */,
    5, 5, 3, 0, NB (RANDOM),
    HC_IOPRIO_BE, 0, { K, K }, K,
    { 2, 0, 1, 1, 0x0, 2, 0, 0, 0 } },
  /* NVMe: a stream is a one-time read, or a rarely rewritten write. */
  [HC_CLASS_STREAMING] = {
    HC_ADVICE_DONTNEED, HC_ATA_P1, 0, 4 /* LONG */,
    6, 2, 2, 1, NB (SEQUENTIAL) | NB (NOREUSE),
    HC_IOPRIO_BE, 4, { HC_FADV_SEQUENTIAL, HC_FADV_NOREUSE }, K,
    { 1, 0, 2, 2, 0x5, 1, 0, 0, 3 } },
  /* ATA: HYBRID EVICT follows writes only (codec/ata.c).  The RFC bits get
   * dontneed, not evict: a backup that merely reads a hot block must not
   * throw it out.  ioprio IDLE with level 7, as `ionice -c3` sets it. */
  [HC_CLASS_BACKGROUND] = {
    HC_ADVICE_DONTNEED, HC_ATA_P0, HC_WIRE_ACT_HYBRID_EVICT, 5 /* EXTREME */,
    6, 2, 1, 1, NB (NOREUSE) | NB (DONTNEED),
    HC_IOPRIO_IDLE, 7, { HC_FADV_NOREUSE, HC_FADV_DONTNEED }, K,
    { 1, 0, 2, 2, 0x5, 1, 0, 1, 0 } },
};

/* Advice rows.  NVMe has no safe evict (DSM deallocate destroys data), so
 * evict degrades to "infrequent"; so do NFS and fadvise (DONTNEED). */
const struct hc_map_row hc_map_advice[HC_ADVICE_LIMIT] = {
  [HC_ADVICE_EVICT] = {
    HC_ADVICE_EVICT, HC_ATA_P0, HC_WIRE_ACT_HYBRID_EVICT, K,
    2, 2, 0, 0, NB (DONTNEED),
    K, 0, { HC_FADV_DONTNEED, K }, 1,
    { 0 } },
  [HC_ADVICE_DONTNEED] = {
    HC_ADVICE_DONTNEED, HC_ATA_P1, 0, 4 /* LONG */,
    2, 2, 0, 0, NB (DONTNEED),
    K, 0, { HC_FADV_DONTNEED, K }, 1,
    { 0 } },
  [HC_ADVICE_NORMAL] = {
    HC_ADVICE_NORMAL, HC_ATA_NORMAL, 0, K,
    1, 1, 2, 0, NB (NORMAL),
    K, 0, { HC_FADV_NORMAL, K }, 0,
    { 0 } },
  /* §10: NVMe AF 3 ("infrequent writes, frequent reads") or 5; 3 says what
   * willneed means — the data will be read. */
  [HC_ADVICE_WILLNEED] = {
    HC_ADVICE_WILLNEED, HC_ATA_TOP, HC_WIRE_ACT_CHANGE_RANGE, K,
    3, 3, 3, 0, NB (WILLNEED),
    K, 0, { HC_FADV_WILLNEED, K }, 2,
    { 0 } },
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
