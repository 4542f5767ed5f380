/* rwh: Linux write-life hints, fcntl(fd, F_SET_RW_HINT, &u64).
 *
 *     0 RWH_WRITE_LIFE_NOT_SET   1 NONE   2 SHORT   3 MEDIUM   4 LONG   5 EXTREME
 *
 * A lifetime is how soon data will be overwritten, which is one attribute of
 * a class (metadata, journal and paging are short-lived, streams long,
 * backups extreme) — so several classes share a value and only the first of
 * them (in class order) comes back.  Advice is lost, except that dontneed
 * says "long" like the RFC's don't-cache data.  The kernel accepts 0 … 5 and
 * rejects the rest; the hint is per inode, not per I/O.
 */
#include "../codec.h"

static const char *const names[] = { "NOT_SET", "NONE", "SHORT", "MEDIUM", "LONG", "EXTREME" };

static void
rwh_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  const struct hc_map_row *a = hc_map_advice_row (h);
  w->n = 1;
  w->v[0] = a && a->rwh != HC_MAP_KEEP ? a->rwh : hc_map_class[h.cls].rwh;
}

static int
rwh_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
            struct hc_hint *h, struct hc_sb *why)
{
  uint64_t v = w->v[0];

  if (v > 5) {
    hc_sb_printf (why, "write-life hint %llu is undefined (0 … 5); the kernel rejects it",
                  (unsigned long long) v);
    return -EINVAL;
  }
  if (v == 1) { /* NONE: "no particular lifetime", which no class sends */
    hc_sb_printf (why, "RWH_WRITE_LIFE_NONE says nothing about the data");
    *h = (struct hc_hint) { 0 };
    return 0;
  }
  return hc_map_search (&hc_codec_rwh, p, w, dir, HC_PREFER_CLASS, HC_CLASS_COUNT, h) == 0
             ? 0 : -EINVAL;
}

static void
rwh_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  uint64_t v = w->v[0];
  hc_sb_printf (out, "write-life hint %llu (%s%s)", (unsigned long long) v,
                v <= 5 ? "RWH_WRITE_LIFE_" : "", v <= 5 ? names[v] : "undefined");
}

const struct hc_codec hc_codec_rwh = {
  .name = "rwh",
  .title = "Linux write-life hints (F_SET_RW_HINT), 0 … 5",
  .max_values = 1,
  .value_max = UINT64_MAX,
  .hex = false,
  .encode = rwh_encode,
  .decode = rwh_decode,
  .describe = rwh_describe,
};
