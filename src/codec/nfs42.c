/* nfs42: the NFS 4.2 IO_ADVISE operation's hints (RFC 7862 §15.5, op 63).
 *
 * The hints are a bitmap4 in which value n of IO_ADVISE_type4 is bit n:
 *
 *     0 NORMAL  1 SEQUENTIAL  2 SEQUENTIAL_BACKWARDS  3 RANDOM  4 WILLNEED
 *     5 WILLNEED_OPPORTUNISTIC  6 DONTNEED  7 NOREUSE  8 READ  9 WRITE
 *     10 INIT_PROXIMITY
 *
 * Bits 11 and up are undefined.  The bitmap mixes advice (WILLNEED,
 * DONTNEED, NOREUSE, NORMAL: the "cache bits") with access patterns, so a
 * class contributes its pattern bits, an advice replaces its cache bits, and
 * the flags add SEQUENTIAL, RANDOM and NOREUSE.  Like fadvise, a value is
 * read as advice where it can be (WILLNEED alone is willneed, not metadata).
 */
#include "../codec.h"

static const char *const names[] = {
  "NORMAL", "SEQUENTIAL", "SEQUENTIAL_BACKWARDS", "RANDOM", "WILLNEED",
  "WILLNEED_OPPORTUNISTIC", "DONTNEED", "NOREUSE", "READ", "WRITE", "INIT_PROXIMITY",
};
#define NBITS 11
#define PATTERN_BITS (HC_NFS_BIT (HC_NFS_SEQUENTIAL) | HC_NFS_BIT (HC_NFS_RANDOM))

static void
nfs_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  const struct hc_map_row *a = hc_map_advice_row (h);
  uint32_t bits = hc_map_class[h.cls].nfs;

  if (a)
    bits = (bits & ~HC_NFS_CACHE_BITS) | a->nfs;
  if (h.flags & HC_HINT_PATTERN)
    bits &= ~PATTERN_BITS;
  if (h.flags & HC_HINT_SEQUENTIAL)
    bits |= HC_NFS_BIT (HC_NFS_SEQUENTIAL);
  if (h.flags & HC_HINT_RANDOM)
    bits |= HC_NFS_BIT (HC_NFS_RANDOM);
  if (h.flags & HC_HINT_NOREUSE)
    bits |= HC_NFS_BIT (HC_NFS_NOREUSE);
  w->n = 1;
  w->v[0] = bits;
}

static int
nfs_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
            struct hc_hint *h, struct hc_sb *why)
{
  uint64_t v = w->v[0];
  const uint64_t seq = HC_NFS_BIT (HC_NFS_SEQUENTIAL), rnd = HC_NFS_BIT (HC_NFS_RANDOM);

  if (v >> NBITS) {
    hc_sb_printf (why, "bits 0x%llx are undefined (IO_ADVISE4 values are 0 … 10)",
                  (unsigned long long) (v & ~((1ull << NBITS) - 1)));
    return -EINVAL;
  }
  if ((v & seq) && (v & rnd)) {
    hc_sb_printf (why, "SEQUENTIAL and RANDOM contradict each other");
    return -EINVAL;
  }
  if (hc_map_search (&hc_codec_nfs42, p, w, dir, HC_PREFER_ADVICE, HC_CLASS_COUNT, h) == 0)
    return 0;

  /* No hint encodes to exactly this bitmap: read the bits one by one. */
  *h = (struct hc_hint) { 0 };
  if (v & seq)
    h->flags |= HC_HINT_SEQUENTIAL;
  if (v & rnd)
    h->flags |= HC_HINT_RANDOM;
  if (v & HC_NFS_BIT (HC_NFS_NOREUSE))
    h->flags |= HC_HINT_NOREUSE;
  if (v & HC_NFS_BIT (HC_NFS_DONTNEED))
    h->advice = HC_ADVICE_DONTNEED;
  else if (v & (HC_NFS_BIT (HC_NFS_WILLNEED) | HC_NFS_BIT (HC_NFS_WILLNEED_OPPORTUNISTIC)))
    h->advice = HC_ADVICE_WILLNEED;
  else if (v & HC_NFS_BIT (HC_NFS_NORMAL))
    h->advice = HC_ADVICE_NORMAL;
  if ((v & HC_NFS_BIT (HC_NFS_DONTNEED)) && (v & HC_NFS_BIT (HC_NFS_WILLNEED)))
    hc_sb_printf (why, "WILLNEED and DONTNEED both set: DONTNEED wins");
  else if (v & (HC_NFS_BIT (HC_NFS_SEQUENTIAL_BACKWARDS) | HC_NFS_BIT (HC_NFS_READ)
                | HC_NFS_BIT (HC_NFS_WRITE) | HC_NFS_BIT (HC_NFS_INIT_PROXIMITY)))
    hc_sb_printf (why, "SEQUENTIAL_BACKWARDS, READ, WRITE and INIT_PROXIMITY have no "
                  "hintcache equivalent and are ignored");
  return 0;
}

static void
nfs_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  uint64_t v = w->v[0];
  unsigned n = 0;

  hc_sb_printf (out, "IO_ADVISE4 bitmap 0x%llx:", (unsigned long long) v);
  for (unsigned b = 0; b < 64; b++)
    if (v & (1ull << b)) {
      hc_sb_printf (out, "%s%s", n++ ? " | " : " ", b < NBITS ? names[b] : "undefined");
      if (b >= NBITS)
        hc_sb_printf (out, "(%u)", b);
    }
  if (!n)
    hc_sb_printf (out, " no hints");
}

const struct hc_codec hc_codec_nfs42 = {
  .name = "nfs42",
  .title = "NFS 4.2 IO_ADVISE4 hints bitmap (RFC 7862 15.5)",
  .max_values = 1,
  .value_max = 0xffffffffu,
  .hex = true,
  .encode = nfs_encode,
  .decode = nfs_decode,
  .describe = nfs_describe,
};
