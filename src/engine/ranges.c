/* Range hints: see ranges.h.
 *
 * A set rebuilds the array: pieces wholly before the range are copied,
 * pieces overlapping it are cut at its edges and their inner parts updated,
 * the gaps inside it become pieces of their own if the update says
 * something, and pieces after it are copied; then empty pieces are dropped
 * and equal neighbours merged.  Building into a new array makes -ENOSPC and
 * -ENOMEM leave the table untouched.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ranges.h"

void
hc_ranges_init (struct hc_ranges *rs, uint32_t max)
{
  memset (rs, 0, sizeof *rs);
  rs->max = max;
}

void
hc_ranges_fini (struct hc_ranges *rs)
{
  free (rs->r);
  memset (rs, 0, sizeof *rs);
}

/* Appends a piece to out[*n], merging with the previous one when equal and
 * adjacent, and skipping pieces that say nothing. */
static void
emit (struct hc_range *out, uint32_t *n, uint64_t start, uint64_t end, uint8_t cls,
      uint8_t advice, uint8_t src)
{
  if (start >= end || (cls == 0 && advice == 0))
    return;
  if (*n && out[*n - 1].end == start && out[*n - 1].cls == cls && out[*n - 1].advice == advice
      && out[*n - 1].src == src) {
    out[*n - 1].end = end;
    return;
  }
  out[(*n)++] = (struct hc_range) { start, end, cls, advice, src };
}

/* The set and the withdrawal (own: only pieces src set change). */
static int
update (struct hc_ranges *rs, uint64_t start, uint64_t end, unsigned cls, unsigned advice,
        unsigned src, bool own)
{
  struct hc_range *out;
  uint32_t n = 0, i = 0;
  uint64_t pos = start;

  if (start >= end || (cls != HC_RANGE_KEEP && cls >= HC_CLASS_COUNT)
      || (advice != HC_RANGE_KEEP && !hc_advice_name (advice)) || src >= HC_SOURCE_COUNT)
    return -EINVAL;
  /* At most: every old piece split in three, plus one per gap. */
  out = malloc ((2 * (size_t) rs->n + 3) * sizeof *out);
  if (!out)
    return -ENOMEM;

  for (; i < rs->n && rs->r[i].end <= start; i++)
    emit (out, &n, rs->r[i].start, rs->r[i].end, rs->r[i].cls, rs->r[i].advice, rs->r[i].src);
  for (; i < rs->n && rs->r[i].start < end; i++) {
    const struct hc_range *p = &rs->r[i];
    uint64_t s = p->start > start ? p->start : start, e = p->end < end ? p->end : end;
    emit (out, &n, p->start, s, p->cls, p->advice, p->src); /* before the range */
    emit (out, &n, pos, s, cls == HC_RANGE_KEEP ? 0 : cls, advice == HC_RANGE_KEEP ? 0 : advice,
          src);
    if (own && p->src != src)
      emit (out, &n, s, e, p->cls, p->advice, p->src); /* another source's: kept */
    else
      emit (out, &n, s, e, cls == HC_RANGE_KEEP ? p->cls : cls,
            advice == HC_RANGE_KEEP ? p->advice : advice, src);
    if (p->end > end)
      emit (out, &n, end, p->end, p->cls, p->advice, p->src); /* after the range */
    pos = e;
  }
  emit (out, &n, pos, end, cls == HC_RANGE_KEEP ? 0 : cls, advice == HC_RANGE_KEEP ? 0 : advice,
        src);
  for (; i < rs->n; i++)
    emit (out, &n, rs->r[i].start, rs->r[i].end, rs->r[i].cls, rs->r[i].advice, rs->r[i].src);

  if (n > rs->max) {
    free (out);
    return -ENOSPC;
  }
  free (rs->r);
  rs->r = out;
  rs->n = n;
  rs->cap = 2 * n + 3;
  return 0;
}

int
hc_ranges_set (struct hc_ranges *rs, uint64_t start, uint64_t end, unsigned cls, unsigned advice,
               unsigned src)
{
  return update (rs, start, end, cls, advice, src, false);
}

int
hc_ranges_withdraw (struct hc_ranges *rs, uint64_t start, uint64_t end, unsigned src)
{
  return update (rs, start, end, 0, 0, src, src != HC_SOURCE_ADMIN);
}

struct hc_hint
hc_ranges_get (const struct hc_ranges *rs, uint64_t sector)
{
  uint32_t lo = 0, hi = rs->n;

  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (rs->r[mid].end <= sector)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < rs->n && rs->r[lo].start <= sector)
    return (struct hc_hint) { .cls = rs->r[lo].cls, .advice = rs->r[lo].advice };
  return (struct hc_hint) { 0 };
}
