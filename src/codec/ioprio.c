/* ioprio: today's Linux I/O priority (include/uapi/linux/ioprio.h).
 *
 *     bits 15:13  class: 0 none, 1 realtime, 2 best-effort, 3 idle,
 *                 7 IOPRIO_CLASS_INVALID, 4–6 undefined
 *     bits 12:3   hint: 0 none, 1–7 command duration limit descriptor k
 *     bits  2:0   level: 0 highest … 7 lowest
 *
 * ioprio says how urgent an I/O is, which is a shadow of its class: the
 * mapping table sends transaction as realtime 4, metadata, journal and
 * paging as best-effort 0, data and streaming as best-effort 4, background
 * as idle.  Advice has no place here and is lost.
 *
 * The kernel rejects classes 4–7 (and class none with a level), but stores a
 * hint it does not know and ignores it.  We decode the same way, and say so
 * when a value looks like the 2014 RFC's advice bits, which fall inside
 * today's hint field (bits 11, 12) and class field (bit 15).
 */
#include "../codec.h"

#define CLASS_OF(v) ((unsigned) ((v) >> 13) & 7)
#define HINT_OF(v) ((unsigned) ((v) >> 3) & 0x3ff)
#define LEVEL_OF(v) ((unsigned) (v) & 7)

static const char *const class_names[8] = {
  "none", "realtime", "best-effort", "idle", NULL, NULL, NULL, "invalid",
};

static void
ioprio_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  const struct hc_map_row *r = &hc_map_class[h.cls];
  w->n = 1;
  w->v[0] = (uint64_t) r->ioprio_class << 13 | r->ioprio_level;
}

/* Says what the RFC would have meant by this value, if its bits are set. */
static void
rfc_note (uint64_t v, struct hc_sb *why)
{
  unsigned a = ((v >> 11) & 1) | ((v >> 12) & 1) << 1 | ((v >> 15) & 1) << 2;
  const char *name = hc_advice_name (a);

  if (a)
    hc_sb_printf (why, "; bits 11/12/15 are the 2014 RFC's advice %u (%s), "
                  "which collides with today's hint and class fields",
                  a, name ? name : "reserved");
}

static int
ioprio_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
               struct hc_hint *h, struct hc_sb *why)
{
  (void) dir;
  uint64_t v = w->v[0];
  unsigned cls = CLASS_OF (v), hint = HINT_OF (v), level = LEVEL_OF (v);
  struct hc_wire canon = { .n = 1 };

  switch (cls) {
  case HC_IOPRIO_NONE:
    if (level) {
      hc_sb_printf (why, "class none takes no level (got %u); the kernel rejects it", level);
      rfc_note (v, why);
      return -EINVAL;
    }
    canon.v[0] = 0;
    break;
  case HC_IOPRIO_RT:
    canon.v[0] = (uint64_t) HC_IOPRIO_RT << 13 | 4;
    break;
  case HC_IOPRIO_BE: /* levels 0–3 read as urgent, 4–7 as ordinary */
    canon.v[0] = (uint64_t) HC_IOPRIO_BE << 13 | (level < 4 ? 0 : 4);
    break;
  case HC_IOPRIO_IDLE:
    canon.v[0] = (uint64_t) HC_IOPRIO_IDLE << 13 | 7;
    break;
  default:
    hc_sb_printf (why, "class %u is %s; the kernel rejects it", cls,
                  cls == 7 ? "IOPRIO_CLASS_INVALID" : "undefined");
    rfc_note (v, why);
    return -EINVAL;
  }
  if (hint > 7) {
    hc_sb_printf (why, "hint %u is undefined (the kernel stores it and ignores it)", hint);
    rfc_note (v, why);
  }
  /* Every canonical value is the encoding of some class. */
  return hc_map_search (&hc_codec_ioprio, p, &canon, HC_DIR_ANY, HC_PREFER_CLASS,
                        HC_CLASS_COUNT, h) == 0 ? 0 : -EINVAL;
}

static void
ioprio_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  uint64_t v = w->v[0];
  unsigned cls = CLASS_OF (v), hint = HINT_OF (v);
  const char *cn = class_names[cls];

  hc_sb_printf (out, "ioprio 0x%04llx: class %u (%s), level %u, hint %u", (unsigned long long) v,
                cls, cn ? cn : "undefined", LEVEL_OF (v), hint);
  if (hint >= 1 && hint <= 7)
    hc_sb_printf (out, " (command duration limit %u)", hint);
  else if (hint > 7)
    hc_sb_printf (out, " (undefined)");
}

const struct hc_codec hc_codec_ioprio = {
  .name = "ioprio",
  .title = "Linux ioprio: class 15:13, hint 12:3, level 2:0",
  .max_values = 1,
  .value_max = 0xffff,
  .hex = true,
  .encode = ioprio_encode,
  .decode = ioprio_decode,
  .describe = ioprio_describe,
};
