/* The write decision (src/engine/plan.c), exhaustively: every combination
 * of mode and facts — hit, dirty, whole block, around the fast tier, may
 * be rewritten in place, an unmapping not yet durable, a clean copy
 * recorded dirty — and, where the route is a copy, whether the policy
 * admitted it and a block was free.
 *
 * Two independent statements of what must happen.  The table says it row
 * by row (each combination must match exactly one row); the contract says
 * it as the rules the crash and staleness guarantees rest on, checked over
 * every combination, so that a row written wrong in both the code and the
 * table still breaks a rule. */
#include "test.h"
#include "engine/plan.h"

/* A row matches facts by pattern: one character per fact, in the order
 * h(it) d(irty) f(ull) a(round) i(n place ok) u(nmap pending) g(ot a block)
 * r(ecorded dirty), each '0', '1' or '-' (either).  The expected values are '0', '1', 'u' (the unmap fact), 'F'
 * (not full), 'd' (the dirty fact) or 'c' (a commit is due: the copy is
 * recorded clean or an unmapping is not durable). */
struct row {
  const char *modes; /* T(hrough) B(ack) A(round) P(ass) */
  const char *pat;
  char route1;       /* the first step: I(n place), C(opy), S(low) */
  int why;           /* with S: the bypass reason, -1 for "counted already" */
  char route;        /* the route that held */
  enum hc_write_old old;
  char merge, slow, whole, commit;
};

#define NONE HC_OLD_NONE
#define REPL HC_OLD_REPLACED
#define DROP HC_OLD_DROP_FIRST
#define KEEP HC_OLD_DROP_AFTER

static const struct row rows[] = {
  /* Pass-through: the slow tier takes everything, a copy leaves. */
  { "P", "00--0---", 'S', -1, 'S', NONE, '0', '1', '0', 'u' },
  { "P", "10------", 'S', -1, 'S', DROP, 'F', '1', '0', 'c' },
  { "P", "11------", 'S', -1, 'S', KEEP, 'F', '1', '1', 'c' },
  /* A whole block over a copy that may be rewritten and whose records say
   * dirty: in place (write-back: a dirty copy; written through: and its
   * slow tier, after a commit only if an unmapping is not durable). */
  { "B", "11101---", 'I', 0, 'I', NONE, '0', '0', '0', '0' },
  { "TA", "1-101--1", 'I', 0, 'I', NONE, '0', '1', 'd', 'u' },
  /* Hits going around a failed fast tier. */
  { "TBA", "10-1----", 'S', HC_BYPASS_ERROR, 'S', DROP, 'F', '1', '0', 'c' },
  { "TBA", "11-1----", 'S', HC_BYPASS_ERROR, 'S', KEEP, 'F', '1', '1', 'c' },
  /* Other hits: copy-on-write, or out of the cache without room. */
  { "B", "10-0--1-", 'C', 0, 'C', REPL, 'F', '0', '0', '0' },
  { "B", "1100--1-", 'C', 0, 'C', REPL, '1', '0', '0', '0' },
  { "B", "11100-1-", 'C', 0, 'C', REPL, '0', '0', '0', '0' },
  { "TA", "1-00--1-", 'C', 0, 'C', REPL, '1', '1', 'd', 'c' },
  { "TA", "1-100-1-", 'C', 0, 'C', REPL, '0', '1', 'd', 'c' },
  { "TA", "10101-10", 'C', 0, 'C', REPL, '0', '1', '0', '1' },
  { "B", "10-0--0-", 'C', 0, 'S', DROP, 'F', '1', '0', 'c' },
  { "B", "1100--0-", 'C', 0, 'S', KEEP, '1', '1', '1', 'c' },
  { "B", "11100-0-", 'C', 0, 'S', KEEP, '0', '1', '1', 'c' },
  { "TA", "1000--0-", 'C', 0, 'S', DROP, '1', '1', '0', 'c' },
  { "TA", "10100-0-", 'C', 0, 'S', DROP, '0', '1', '0', 'c' },
  { "TA", "10101-00", 'C', 0, 'S', DROP, '0', '1', '0', '1' },
  { "TA", "1100--0-", 'C', 0, 'S', KEEP, '1', '1', '1', 'c' },
  { "TA", "11100-0-", 'C', 0, 'S', KEEP, '0', '1', '1', 'c' },
  /* Misses. */
  { "A", "00--0---", 'S', HC_BYPASS_MODE, 'S', NONE, '0', '1', '0', 'u' },
  { "TB", "000-0---", 'S', HC_BYPASS_PARTIAL, 'S', NONE, '0', '1', '0', 'u' },
  { "TB", "00110---", 'S', HC_BYPASS_ERROR, 'S', NONE, '0', '1', '0', 'u' },
  { "B", "00100-1-", 'C', 0, 'C', NONE, '0', '0', '0', '0' },
  { "T", "00100-1-", 'C', 0, 'C', NONE, '0', '1', '0', 'u' },
  { "TB", "00100-0-", 'C', 0, 'S', NONE, '0', '1', '0', 'u' },
};

static const char mode_chars[HC_MODE_COUNT] = {
  [HC_MODE_WRITETHROUGH] = 'T',
  [HC_MODE_WRITEBACK] = 'B',
  [HC_MODE_WRITEAROUND] = 'A',
  [HC_MODE_PASSTHROUGH] = 'P',
};

static bool
matches (const struct row *r, enum hc_mode m, const bool fact[8])
{
  if (!strchr (r->modes, mode_chars[m]))
    return false;
  for (int i = 0; i < 8; i++)
    if (r->pat[i] != '-' && (r->pat[i] == '1') != fact[i])
      return false;
  return true;
}

static bool
want (char e, const struct hc_write_facts *f)
{
  switch (e) {
  case 'u': return f->unmap_pending;
  case 'F': return !f->full;
  case 'd': return f->dirty;
  case 'c': return !f->recorded_dirty || f->unmap_pending;
  default: return e == '1';
  }
}

static char
route_char (enum hc_write_route r)
{
  return r == HC_WRITE_IN_PLACE ? 'I' : r == HC_WRITE_COPY ? 'C' : 'S';
}

/* The contract, rule by rule (the essay at the top of plan.c). */
static void
check_contract (const struct hc_write_facts *f, enum hc_write_route first,
                const struct hc_write_plan *p, const char *name)
{
  const bool wb = f->mode == HC_MODE_WRITEBACK;

  /* The data lands somewhere, and where the mode says. */
  CHECK (p->route != HC_WRITE_SLOW || p->to_slow, "%s: slow route without the slow tier", name);
  CHECK (f->mode != HC_MODE_PASSTHROUGH || p->route == HC_WRITE_SLOW, "%s: pass-through cached",
         name);
  CHECK (f->mode != HC_MODE_WRITETHROUGH || p->to_slow, "%s: write-through skipped the slow tier",
         name);
  CHECK (!(wb && p->route != HC_WRITE_SLOW) || !p->to_slow,
         "%s: write-back wrote the slow tier at once", name);
  CHECK (f->hit || f->full || p->route == HC_WRITE_SLOW, "%s: part of a block cached", name);
  CHECK (f->hit || f->mode != HC_MODE_WRITEAROUND || p->route == HC_WRITE_SLOW,
         "%s: write-around cached a miss", name);
  CHECK (!f->around || p->route == HC_WRITE_SLOW, "%s: went to a failed fast tier", name);
  /* Copy-on-write, with one exception: a whole block over a copy whose
   * records say dirty (in write-back, one that is dirty), in the modes
   * that cache writes. */
  const bool in_place = f->hit && f->full && !f->around && f->in_place_ok
                        && f->mode != HC_MODE_PASSTHROUGH && (wb ? f->dirty : f->recorded_dirty);
  CHECK (p->route != HC_WRITE_IN_PLACE || in_place, "%s: rewritten in place", name);
  CHECK (!in_place || first == HC_WRITE_IN_PLACE, "%s: not rewritten in place", name);
  CHECK (p->route != HC_WRITE_IN_PLACE || f->recorded_dirty,
         "%s: rewritten in place under a mapping recorded clean", name);
  CHECK ((p->old == HC_OLD_REPLACED) == (f->hit && p->route == HC_WRITE_COPY),
         "%s: the old copy's mapping did not move", name);
  /* Never the slow tier under a clean mapping that may be the durable one. */
  CHECK (!(p->to_slow && ((f->hit && !f->recorded_dirty) || f->unmap_pending)) || p->commit_first,
         "%s: slow tier changed before a commit", name);
  CHECK (p->to_slow || !p->commit_first, "%s: a commit for nothing", name);
  CHECK (f->hit || f->unmap_pending || !p->commit_first, "%s: a miss committed", name);
  CHECK ((f->hit && !f->recorded_dirty) || f->unmap_pending || !p->commit_first,
         "%s: a commit for a copy recorded dirty", name);
  /* A cached copy that leaves: a clean one first, a dirty one last. */
  if (f->hit && p->route == HC_WRITE_SLOW)
    CHECK (p->old == (f->dirty ? HC_OLD_DROP_AFTER : HC_OLD_DROP_FIRST),
           "%s: copy dropped at the wrong time", name);
  CHECK (!f->hit || p->route == HC_WRITE_IN_PLACE || p->old != HC_OLD_NONE,
         "%s: a copy left behind", name);
  /* A dirty copy's other bytes reach the slow tier before it is clean or gone. */
  CHECK (!(f->hit && f->dirty && p->to_slow) || p->whole_to_slow, "%s: dirty bytes lost", name);
  CHECK (!p->whole_to_slow || (p->to_slow && f->hit && f->dirty), "%s: whole block for nothing",
         name);
  CHECK (p->merge_old == (f->hit && !f->full && p->route != HC_WRITE_IN_PLACE),
         "%s: merge", name);
}

int
main (void)
{
  unsigned combos = 0;

  for (int m = 0; m < HC_MODE_COUNT; m++)
    for (unsigned bits = 0; bits < 256; bits++) {
      bool fact[8];
      for (int i = 0; i < 8; i++)
        fact[i] = (bits >> (7 - i)) & 1;
      if (!fact[0] && (fact[1] || fact[4] || fact[7]))
        continue; /* a miss has no copy to be dirty, rewritten or recorded */
      if (fact[1] && !fact[7])
        continue; /* a dirty copy is recorded dirty */
      struct hc_write_facts f = { .mode = m, .hit = fact[0], .dirty = fact[1], .full = fact[2],
                                  .around = fact[3], .in_place_ok = fact[4],
                                  .unmap_pending = fact[5], .recorded_dirty = fact[7] };
      char name[32];
      snprintf (name, sizeof name, "%c %c%c%c%c%c%c%c r%c", mode_chars[m], '0' + fact[0],
                '0' + fact[1], '0' + fact[2], '0' + fact[3], '0' + fact[4], '0' + fact[5],
                '0' + fact[6], '0' + fact[7]);
      enum hc_bypass why = HC_BYPASS_POLICY; /* must be set or left alone as documented */
      enum hc_write_route first = hc_write_route (&f, &why);
      enum hc_write_route route = first == HC_WRITE_COPY && !fact[6] ? HC_WRITE_SLOW : first;
      struct hc_write_plan p = hc_write_plan (&f, route);
      combos++;

      const struct row *r = NULL;
      unsigned n = 0;
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (matches (&rows[i], m, fact)) {
          r = &rows[i];
          n++;
        }
      CHECK (n == 1, "%s: %u rows match", name, n);
      if (n == 1) {
        CHECK (route_char (first) == r->route1, "%s: first route %c, want %c", name,
               route_char (first), r->route1);
        if (first == HC_WRITE_SLOW)
          CHECK ((int) why == (r->why < 0 ? HC_BYPASS_COUNT : r->why), "%s: why %d, want %d",
                 name, why, r->why);
        CHECK (route_char (p.route) == r->route, "%s: route %c, want %c", name,
               route_char (p.route), r->route);
        CHECK (p.old == r->old, "%s: old %d, want %d", name, p.old, r->old);
        CHECK (p.merge_old == want (r->merge, &f), "%s: merge_old %d", name, p.merge_old);
        CHECK (p.to_slow == want (r->slow, &f), "%s: to_slow %d", name, p.to_slow);
        CHECK (p.whole_to_slow == want (r->whole, &f), "%s: whole_to_slow %d", name,
               p.whole_to_slow);
        CHECK (p.commit_first == want (r->commit, &f), "%s: commit_first %d", name,
               p.commit_first);
      }
      check_contract (&f, first, &p, name);
    }
  CHECK (combos == 4 * (16 + 64 + 32), "%u combinations", combos);
  return test_exit ("test_plan");
}
