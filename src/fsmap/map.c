/* Range maps of the hint daemon: building one from overlapping pieces, the
 * difference between two as control-socket operations, applying operations
 * to one, and a whole scan (see fsmap.h).
 *
 * Building sorts the pieces by start and sweeps them with a heap of the
 * pieces covering the current offset, ordered by priority and then by
 * order of addition: the heap's top owns the bytes until it ends or a new
 * piece starts (a piece below the top that ends changes nothing, so ended
 * pieces leave the heap only when they surface).  The diff walks both maps
 * at once, collects the segments whose hint differs, and turns each run of
 * touching segments into its unadvises, then its advises.  Applying folds
 * the operations covering each elementary segment in order.  All three are
 * O(n log n) or better and allocate only their results and scratch arrays.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsmap/fsmap.h"
#include "util.h"

bool
hc_fsmap_hint_eq (struct hc_hint a, struct hc_hint b)
{
  return a.cls == b.cls && a.advice == b.advice && a.flags == b.flags;
}

void
hc_fsmap_free (struct hc_fsmap *m)
{
  if (!m)
    return;
  free (m->r);
  memset (m, 0, sizeof *m);
}

/* Appends [start, end) with hint to m, merging it into the last range when
 * they touch with the same hint.  Empty hints and empty ranges are
 * dropped.  Ranges must come in ascending order.  Returns 0 or -ENOMEM. */
static int
emit (struct hc_fsmap *m, uint64_t start, uint64_t end, struct hc_hint hint)
{
  if (start >= end || hc_hint_empty (hint))
    return 0;
  if (m->n > 0) {
    struct hc_fsmap_range *last = &m->r[m->n - 1];
    if (last->end == start && hc_fsmap_hint_eq (last->hint, hint)) {
      last->end = end;
      return 0;
    }
  }
  if (hc_grow (&m->r, &m->cap, m->n, sizeof *m->r, 64) < 0)
    return -ENOMEM;
  m->r[m->n++] = (struct hc_fsmap_range) { start, end, hint };
  return 0;
}

struct hc_hint
hc_fsmap_lookup (const struct hc_fsmap *m, uint64_t off)
{
  size_t lo = 0, hi = m->n;

  /* The first range ending after off. */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->r[mid].end <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < m->n && m->r[lo].start <= off)
    return m->r[lo].hint;
  return (struct hc_hint) { 0 };
}

int
hc_fsmap_check (const struct hc_fsmap *m)
{
  for (size_t i = 0; i < m->n; i++) {
    const struct hc_fsmap_range *r = &m->r[i];
    if (r->start >= r->end || hc_hint_empty (r->hint))
      return -EINVAL;
    if (i > 0) {
      const struct hc_fsmap_range *p = &m->r[i - 1];
      if (p->end > r->start || (p->end == r->start && hc_fsmap_hint_eq (p->hint, r->hint)))
        return -EINVAL;
    }
  }
  return 0;
}

void
hc_fsmap_count (const struct hc_fsmap *m, uint64_t bytes[HC_CLASS_COUNT],
                uint64_t ranges[HC_CLASS_COUNT])
{
  if (bytes)
    memset (bytes, 0, HC_CLASS_COUNT * sizeof bytes[0]);
  if (ranges)
    memset (ranges, 0, HC_CLASS_COUNT * sizeof ranges[0]);
  for (size_t i = 0; i < m->n; i++) {
    unsigned c = m->r[i].hint.cls;
    if (c >= HC_CLASS_COUNT)
      continue; /* HC_FSMAP_UNKNOWN */
    if (bytes)
      bytes[c] += m->r[i].end - m->r[i].start;
    if (ranges)
      ranges[c]++;
  }
}

/* ---------------------------------------------------------------------------
 * The builder
 */
int
hc_fsmap_add (struct hc_fsmap_builder *b, uint64_t start, uint64_t len, struct hc_hint hint,
              unsigned prio)
{
  if (len == 0)
    return 0;
  if (start > UINT64_MAX - len)
    return -ERANGE;
  if (b->n > 0) {
    struct hc_fsmap_piece *last = &b->p[b->n - 1];
    if (last->end == start && last->prio == prio && hc_fsmap_hint_eq (last->hint, hint)) {
      last->end = start + len;
      return 0;
    }
  }
  if (b->n >= UINT32_MAX)
    return -ENOMEM;
  if (hc_grow (&b->p, &b->cap, b->n, sizeof *b->p, 256) < 0)
    return -ENOMEM;
  b->p[b->n] = (struct hc_fsmap_piece) {
    .start = start, .end = start + len, .seq = (uint32_t) b->n, .prio = (uint8_t) prio,
    .hint = hint,
  };
  b->n++;
  return 0;
}

static int
piece_cmp (const void *a, const void *b)
{
  const struct hc_fsmap_piece *x = a, *y = b;

  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* True if piece a owns bytes that b also covers. */
static inline bool
wins (const struct hc_fsmap_piece *a, const struct hc_fsmap_piece *b)
{
  return a->prio > b->prio || (a->prio == b->prio && a->seq < b->seq);
}

static void
heap_push (size_t *heap, size_t *n, const struct hc_fsmap_piece *p, size_t x)
{
  size_t i = (*n)++;

  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!wins (&p[x], &p[heap[up]]))
      break;
    heap[i] = heap[up];
    i = up;
  }
  heap[i] = x;
}

static void
heap_pop (size_t *heap, size_t *n, const struct hc_fsmap_piece *p)
{
  size_t x = heap[--*n], i = 0;

  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && wins (&p[heap[c + 1]], &p[heap[c]]))
      c++;
    if (!wins (&p[heap[c]], &p[x]))
      break;
    heap[i] = heap[c];
    i = c;
  }
  if (*n > 0)
    heap[i] = x;
}

int
hc_fsmap_build (struct hc_fsmap_builder *b, struct hc_fsmap *out)
{
  struct hc_fsmap m = { 0 };
  const struct hc_fsmap_piece *p = b->p;
  size_t *heap = NULL, nheap = 0, i = 0, n = b->n;
  uint64_t pos = 0;
  int rc = 0;

  hc_fsmap_free (out);
  if (n == 0)
    return 0;
  if (!(heap = malloc (n * sizeof *heap))) {
    b->n = 0;
    return -ENOMEM;
  }
  qsort (b->p, n, sizeof *b->p, piece_cmp);
  while ((i < n || nheap > 0) && rc == 0) {
    if (nheap == 0)
      pos = p[i].start;
    while (i < n && p[i].start <= pos)
      heap_push (heap, &nheap, p, i++);
    while (nheap > 0 && p[heap[0]].end <= pos)
      heap_pop (heap, &nheap, p);
    if (nheap == 0)
      continue;
    const struct hc_fsmap_piece *top = &p[heap[0]];
    uint64_t next = top->end;
    if (i < n && p[i].start < next)
      next = p[i].start;
    rc = emit (&m, pos, next, top->hint);
    pos = next;
  }
  free (heap);
  b->n = 0;
  if (rc < 0) {
    hc_fsmap_free (&m);
    return rc;
  }
  *out = m;
  return 0;
}

void
hc_fsmap_builder_free (struct hc_fsmap_builder *b)
{
  if (!b)
    return;
  free (b->p);
  memset (b, 0, sizeof *b);
}

/* ---------------------------------------------------------------------------
 * The diff
 */

/* A segment where the two maps differ. */
struct change {
  uint64_t start, end;
  struct hc_hint old, new;
};

static int
push_op (struct hc_fsmap_ops *ops, uint8_t kind, uint64_t start, uint64_t end,
         struct hc_hint hint)
{
  if (hc_grow (&ops->op, &ops->cap, ops->n, sizeof *ops->op, 64) < 0)
    return -ENOMEM;
  ops->op[ops->n++] = (struct hc_fsmap_op) {
    .start = start, .end = end, .hint = kind == HC_FSMAP_ADVISE ? hint : (struct hc_hint) { 0 },
    .kind = kind, .state = HC_FSMAP_OP_APPLIED,
  };
  if (kind == HC_FSMAP_ADVISE)
    ops->advised_bytes += end - start;
  else
    ops->unadvised_bytes += end - start;
  return 0;
}

/* Collects the segments where a and b differ, in ascending order, into
 * *out (malloc'd) and *nout.  Returns 0 or -ENOMEM. */
static int
changes (const struct hc_fsmap *a, const struct hc_fsmap *b, struct change **out, size_t *nout)
{
  struct change *c = NULL;
  size_t n = 0, cap = 0, i = 0, j = 0;
  uint64_t pos = 0;
  const struct hc_hint none = { 0 };

  for (;;) {
    while (i < a->n && a->r[i].end <= pos)
      i++;
    while (j < b->n && b->r[j].end <= pos)
      j++;
    if (i == a->n && j == b->n)
      break;
    /* The next byte either map says something about. */
    uint64_t as = i < a->n ? (a->r[i].start > pos ? a->r[i].start : pos) : UINT64_MAX;
    uint64_t bs = j < b->n ? (b->r[j].start > pos ? b->r[j].start : pos) : UINT64_MAX;
    pos = as < bs ? as : bs;
    bool ain = i < a->n && a->r[i].start <= pos, bin = j < b->n && b->r[j].start <= pos;
    struct hc_hint ah = ain ? a->r[i].hint : none, bh = bin ? b->r[j].hint : none;
    uint64_t ae = ain ? a->r[i].end : (i < a->n ? a->r[i].start : UINT64_MAX);
    uint64_t be = bin ? b->r[j].end : (j < b->n ? b->r[j].start : UINT64_MAX);
    uint64_t end = ae < be ? ae : be;
    if (!hc_fsmap_hint_eq (ah, bh)) {
      if (n == cap) {
        size_t ncap = cap ? 2 * cap : 64;
        struct change *nc = realloc (c, ncap * sizeof *nc);
        if (!nc) {
          free (c);
          return -ENOMEM;
        }
        c = nc;
        cap = ncap;
      }
      c[n++] = (struct change) { pos, end, ah, bh };
    }
    pos = end;
    if (end == UINT64_MAX)
      break;
  }
  *out = c;
  *nout = n;
  return 0;
}

int
hc_fsmap_diff (const struct hc_fsmap *old, const struct hc_fsmap *new, struct hc_fsmap_ops *out)
{
  struct change *c;
  size_t n;
  int rc;

  hc_fsmap_ops_free (out);
  if ((rc = changes (old, new, &c, &n)) < 0)
    return rc;
  for (size_t k = 0; k < n && rc == 0;) {
    size_t m = k + 1; /* the run is c[k, m) */
    while (m < n && c[m].start == c[m - 1].end)
      m++;
    /* Withdraw what had a hint, touching pieces as one. */
    for (size_t x = k; x < m && rc == 0;) {
      if (hc_hint_empty (c[x].old)) {
        x++;
        continue;
      }
      uint64_t s = c[x].start;
      while (x < m && !hc_hint_empty (c[x].old)) {
        if (hc_hint_empty (c[x].new))
          out->withdrawn_bytes += c[x].end - c[x].start;
        x++;
      }
      rc = push_op (out, HC_FSMAP_UNADVISE, s, c[x - 1].end, (struct hc_hint) { 0 });
    }
    /* Then advise what gets a hint, touching pieces of one hint as one. */
    for (size_t x = k; x < m && rc == 0;) {
      if (hc_hint_empty (c[x].new)) {
        x++;
        continue;
      }
      struct hc_hint h = c[x].new;
      uint64_t s = c[x].start;
      while (x < m && hc_fsmap_hint_eq (c[x].new, h))
        x++;
      rc = push_op (out, HC_FSMAP_ADVISE, s, c[x - 1].end, h);
    }
    k = m;
  }
  free (c);
  if (rc < 0)
    hc_fsmap_ops_free (out);
  return rc;
}

/* ---------------------------------------------------------------------------
 * Applying operations
 */

/* A boundary event: operation `op` starts (on = true) or ends at pos. */
struct event {
  uint64_t pos;
  size_t op;
  bool on;
};

static int
event_cmp (const void *a, const void *b)
{
  const struct event *x = a, *y = b;

  if (x->pos != y->pos)
    return x->pos < y->pos ? -1 : 1;
  return (int) x->on - (int) y->on; /* ends first */
}

static int
u64_cmp (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

/* The state of a byte holding h after operation o. */
static struct hc_hint
fold (struct hc_hint h, const struct hc_fsmap_op *o)
{
  if (o->state == HC_FSMAP_OP_UNKNOWN)
    return HC_FSMAP_UNKNOWN;
  if (o->state != HC_FSMAP_OP_APPLIED)
    return h;
  if (o->kind == HC_FSMAP_UNADVISE)
    return (struct hc_hint) { 0 };
  if (hc_hint_empty (h) || hc_fsmap_hint_eq (h, o->hint))
    return o->hint;
  return HC_FSMAP_UNKNOWN;
}

int
hc_fsmap_apply (const struct hc_fsmap *old, const struct hc_fsmap_ops *ops, struct hc_fsmap *out)
{
  size_t nb = 0, ne = 0, nact = 0, e = 0, i = 0;
  struct hc_fsmap m = { 0 };
  uint64_t *bound = malloc ((2 * old->n + 2 * ops->n + 1) * sizeof *bound);
  struct event *ev = malloc ((2 * ops->n + 1) * sizeof *ev);
  size_t *act = malloc ((ops->n + 1) * sizeof *act);
  int rc = 0;

  hc_fsmap_free (out);
  if (!bound || !ev || !act) {
    rc = -ENOMEM;
    goto done;
  }
  for (size_t k = 0; k < old->n; k++) {
    bound[nb++] = old->r[k].start;
    bound[nb++] = old->r[k].end;
  }
  for (size_t k = 0; k < ops->n; k++) {
    if (ops->op[k].start >= ops->op[k].end)
      continue;
    bound[nb++] = ops->op[k].start;
    bound[nb++] = ops->op[k].end;
    ev[ne++] = (struct event) { ops->op[k].start, k, true };
    ev[ne++] = (struct event) { ops->op[k].end, k, false };
  }
  qsort (bound, nb, sizeof *bound, u64_cmp);
  qsort (ev, ne, sizeof *ev, event_cmp);
  for (size_t k = 0; k + 1 < nb && rc == 0; k++) {
    uint64_t s = bound[k], t = bound[k + 1];
    if (s == t)
      continue;
    /* The operations covering [s, t), kept in their order. */
    for (; e < ne && ev[e].pos <= s; e++) {
      if (ev[e].on) {
        size_t at = nact;
        while (at > 0 && act[at - 1] > ev[e].op)
          at--;
        memmove (act + at + 1, act + at, (nact - at) * sizeof *act);
        act[at] = ev[e].op;
        nact++;
      } else {
        for (size_t x = 0; x < nact; x++)
          if (act[x] == ev[e].op) {
            memmove (act + x, act + x + 1, (nact - x - 1) * sizeof *act);
            nact--;
            break;
          }
      }
    }
    while (i < old->n && old->r[i].end <= s)
      i++;
    struct hc_hint h = i < old->n && old->r[i].start <= s ? old->r[i].hint : (struct hc_hint) { 0 };
    for (size_t x = 0; x < nact; x++)
      h = fold (h, &ops->op[act[x]]);
    rc = emit (&m, s, t, h);
  }
done:
  free (bound);
  free (ev);
  free (act);
  if (rc < 0) {
    hc_fsmap_free (&m);
    return rc;
  }
  *out = m;
  return 0;
}

void
hc_fsmap_ops_free (struct hc_fsmap_ops *ops)
{
  if (!ops)
    return;
  free (ops->op);
  memset (ops, 0, sizeof *ops);
}

/* ---------------------------------------------------------------------------
 * A whole scan
 */
void
hc_fsmap_stats_free (struct hc_fsmap_stats *st)
{
  if (!st)
    return;
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++)
    for (unsigned k = 0; k < HC_FSMAP_TOP; k++)
      free (st->top[c][k].path);
  memset (st, 0, sizeof *st);
}

int
hc_fsmap_scan (const struct hc_fsmap_opts *o, struct hc_fsmap *out, struct hc_fsmap_stats *st)
{
  struct hc_fsmap_builder b = { 0 };
  int rc = 0;

  hc_fsmap_stats_free (st);
  hc_fsmap_free (out);
  if (o->device)
    rc = hc_fsmap_scan_layout (o->device, o->offset, &b, st);
  if (rc == 0 && o->mount)
    rc = hc_fsmap_scan_tree (o, &b, st);
  if (rc == 0 && (rc = hc_fsmap_build (&b, out)) < 0)
    snprintf (st->why, sizeof st->why, "out of memory building the map");
  hc_fsmap_builder_free (&b);
  if (rc < 0) {
    hc_fsmap_free (out);
    return rc;
  }
  hc_fsmap_count (out, st->bytes, st->ranges);
  return 0;
}
