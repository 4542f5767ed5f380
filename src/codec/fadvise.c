/* fadvise: posix_fadvise(2) advice, as a list of calls.
 *
 *     0 NORMAL  1 RANDOM  2 SEQUENTIAL  3 WILLNEED  4 DONTNEED  5 NOREUSE
 *
 * (On s390x DONTNEED and NOREUSE are 6 and 7; we speak the common values.)
 * One call carries one advice, so a hint may need several calls: a pattern
 * (NORMAL, RANDOM or SEQUENTIAL; each call replaces the previous), then
 * NOREUSE, then WILLNEED or DONTNEED.  The kernel keeps all of this in the
 * page cache and tells the device nothing — the gap hintcache's preload
 * library closes by forwarding the calls as range hints.
 *
 * fadvise speaks in advice, so a value is read as advice where it can be:
 * WILLNEED alone is willneed, not metadata.  Classes whose calls are
 * distinctive come back (SEQUENTIAL+NOREUSE is streaming); paging sends
 * nothing and is lost.  Evict is sent as DONTNEED.
 */
#include "../codec.h"

static const char *const names[] = {
  "NORMAL", "RANDOM", "SEQUENTIAL", "WILLNEED", "DONTNEED", "NOREUSE",
};

/* A hint's calls, folded: at most one pattern, then cache advice. */
struct calls {
  unsigned pattern;  /* HC_FADV_NORMAL/RANDOM/SEQUENTIAL, or HC_MAP_KEEP */
  bool noreuse;
  unsigned cache;    /* HC_FADV_WILLNEED/DONTNEED, or HC_MAP_KEEP */
};

static void
fold (struct calls *c, unsigned v)
{
  switch (v) {
  case HC_FADV_NORMAL: case HC_FADV_RANDOM: case HC_FADV_SEQUENTIAL: c->pattern = v; break;
  case HC_FADV_NOREUSE: c->noreuse = true; break;
  case HC_FADV_WILLNEED: case HC_FADV_DONTNEED: c->cache = v; break;
  default: break; /* HC_MAP_KEEP: end of a row's list */
  }
}

static void
emit (const struct calls *c, struct hc_wire *w)
{
  w->n = 0;
  if (c->pattern != HC_MAP_KEEP)
    w->v[w->n++] = c->pattern;
  if (c->noreuse)
    w->v[w->n++] = HC_FADV_NOREUSE;
  if (c->cache != HC_MAP_KEEP)
    w->v[w->n++] = c->cache;
}

static void
fadv_encode (const struct hc_profile *p, struct hc_hint h, enum hc_dir dir, struct hc_wire *w)
{
  (void) p, (void) dir;
  const struct hc_map_row *a = hc_map_advice_row (h);
  struct calls c = { HC_MAP_KEEP, false, HC_MAP_KEEP };

  for (unsigned i = 0; i < 2; i++)
    fold (&c, hc_map_class[h.cls].fadv[i]);
  if (a) { /* the advice replaces the class's cache calls */
    c.noreuse = false;
    c.cache = HC_MAP_KEEP;
    for (unsigned i = 0; i < 2; i++)
      fold (&c, a->fadv[i]);
  }
  if (h.flags & HC_HINT_SEQUENTIAL)
    c.pattern = HC_FADV_SEQUENTIAL;
  if (h.flags & HC_HINT_RANDOM)
    c.pattern = HC_FADV_RANDOM;
  if (h.flags & HC_HINT_NOREUSE)
    c.noreuse = true;
  emit (&c, w);
}

static int
fadv_decode (const struct hc_profile *p, const struct hc_wire *w, enum hc_dir dir,
             struct hc_hint *h, struct hc_sb *why)
{
  struct calls c = { HC_MAP_KEEP, false, HC_MAP_KEEP };
  struct hc_wire canon = { 0 };

  for (unsigned i = 0; i < w->n; i++) {
    uint64_t v = w->v[i];
    if (v == 6 || v == 7) {
      hc_sb_printf (why, "advice %llu is %s only on s390x; here it is invalid",
                    (unsigned long long) v, v == 6 ? "DONTNEED" : "NOREUSE");
      return -EINVAL;
    }
    if (v > 5) {
      hc_sb_printf (why, "advice %llu is undefined (0 … 5)", (unsigned long long) v);
      return -EINVAL;
    }
    fold (&c, (unsigned) v);
  }
  emit (&c, &canon);
  if (hc_map_search (&hc_codec_fadvise, p, &canon, dir, HC_PREFER_ADVICE, HC_CLASS_COUNT, h) == 0)
    return 0;

  /* No hint encodes to exactly these calls: read them one by one. */
  *h = (struct hc_hint) { 0 };
  if (c.pattern == HC_FADV_SEQUENTIAL)
    h->flags |= HC_HINT_SEQUENTIAL;
  else if (c.pattern == HC_FADV_RANDOM)
    h->flags |= HC_HINT_RANDOM;
  else if (c.pattern == HC_FADV_NORMAL && c.cache == HC_MAP_KEEP)
    h->advice = HC_ADVICE_NORMAL;
  if (c.noreuse)
    h->flags |= HC_HINT_NOREUSE;
  if (c.cache == HC_FADV_WILLNEED)
    h->advice = HC_ADVICE_WILLNEED;
  else if (c.cache == HC_FADV_DONTNEED)
    h->advice = HC_ADVICE_DONTNEED;
  return 0;
}

static void
fadv_describe (const struct hc_profile *p, const struct hc_wire *w, struct hc_sb *out)
{
  (void) p;
  if (w->n == 0)
    hc_sb_printf (out, "no posix_fadvise call");
  for (unsigned i = 0; i < w->n; i++) {
    uint64_t v = w->v[i];
    if (v <= 5)
      hc_sb_printf (out, "%sPOSIX_FADV_%s (%llu)", i ? ", " : "", names[v], (unsigned long long) v);
    else
      hc_sb_printf (out, "%s%llu (invalid)", i ? ", " : "", (unsigned long long) v);
  }
}

const struct hc_codec hc_codec_fadvise = {
  .name = "fadvise",
  .title = "posix_fadvise advice, one value per call",
  .max_values = HC_WIRE_VALUES,
  .value_max = UINT64_MAX,
  .hex = false,
  .encode = fadv_encode,
  .decode = fadv_decode,
  .describe = fadv_describe,
};
