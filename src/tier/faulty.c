/* The fault decorator and power domains.
 *
 * Errors.  A decorator holds one rule (see struct hc_fault_rule): calls of
 * the selected operations are counted from 1 since the rule was set; call
 * number nth fails, every other call fails with probability `fraction`
 * (drawn from the decorator's own splitmix64 generator, so a seed replays
 * exactly), and a persistent rule keeps failing once it has failed.  A
 * failing call returns -err and does nothing at all: no data moves, and a
 * write is neither counted by the power domain nor logged.
 *
 * Power.  The tiers of a domain lose power together.  To let a cut lose,
 * keep or tear the writes since the last flush, each attached decorator
 * keeps an undo log: before a write (discard and zero are writes of zeros)
 * goes down, the current content of every sector it covers is read from the
 * tier below and appended to that sector's list of versions.  So for a
 * sector written k times since the flush, the list holds v0 (its content
 * before the first of them) through v(k-1), and the tier below holds vk.  A
 * flush that succeeds makes everything durable and empties the log.  A FUA
 * write that succeeds is durable by itself: its sectors' lists are emptied,
 * which makes its content their new v0 (the floor) for later writes, while
 * other sectors keep their unflushed history.  At hc_power_cut_apply, each
 * logged sector takes one of v0 … vk, uniformly, from the domain's
 * generator, independently of its neighbours — which is how a multi-sector
 * write comes out torn.
 *
 * The log is a hash table from sector number to that sector's versions,
 * which keeps FUA's per-sector truncation trivial; it costs one extra read
 * of the range per write, which is fine for tests and simulation.
 *
 * Locking.  A decorator's rule state has its own mutex.  In a domain, every
 * I/O of every attached tier runs under the domain's mutex (taken before the
 * decorator's), so that a write's logged old content really is the content
 * it replaced, and so that nothing passes while a cut is being applied.
 * Without a domain, I/O passes down unserialised.
 *
 * Stacking: the undo log reads through the tier below, so a timing
 * decorator below this one would price those reads; stack timing on top.  A
 * decorator must not sit directly on another of the same domain (the domain
 * mutex is not recursive); that case is refused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tier.h"

#define ALL_OPS (HC_FAULT_READ | HC_FAULT_WRITE | HC_FAULT_FLUSH | HC_FAULT_DISCARD)
/* The largest piece of old content read at once while logging. */
#define LOG_CHUNK ((uint64_t) 1 << 20)

/* One sector's versions since the last flush, oldest first. */
struct sector_log {
  uint64_t key;     /* sector number + 1; 0 marks a free slot */
  uint32_t n, cap;  /* versions held, and room for */
  unsigned char *v; /* n versions of HC_SECTOR_SIZE bytes */
};

/* Open addressing, linear probing; nothing is ever removed singly (a FUA
 * write just empties a sector's list), so no tombstones are needed. */
struct undo_log {
  struct sector_log *slots;
  size_t cap;  /* a power of two, or 0 */
  size_t used; /* slots with a key */
};

struct faulty_tier {
  hc_tier base;
  hc_tier *lower;
  hc_power *pw;             /* NULL when in no domain */
  struct faulty_tier *next; /* in pw->tiers */
  struct undo_log log;      /* guarded by pw->mu */
  pthread_mutex_t mu;       /* guards the fields below */
  struct hc_fault_rule rule;
  uint64_t rng;
  uint64_t calls;    /* of the rule's ops since it was set */
  uint64_t injected; /* failures injected */
  bool tripped;      /* the rule has failed a call */
};

struct hc_power {
  pthread_mutex_t mu;
  uint64_t rng;
  uint64_t writes; /* counted so far */
  uint64_t cut_at; /* the count at which to cut; 0 when disarmed */
  bool cut;
  struct faulty_tier *tiers;
};

/* splitmix64: the next 64 random bits of the generator with state *s. */
static uint64_t
next_random (uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* ---- The undo log. ---- */

/* The home slot of a sector in a table of `cap` slots. */
static size_t
home (uint64_t sector, size_t cap)
{
  uint64_t s = sector;

  /* Scramble, so that runs of neighbouring sectors do not cluster. */
  return (size_t) next_random (&s) & (cap - 1);
}

/* Doubles the table (or creates it). */
static int
log_grow (struct undo_log *log)
{
  size_t cap = log->cap ? log->cap * 2 : 64;
  struct sector_log *slots = calloc (cap, sizeof *slots);

  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; i < log->cap; i++) {
    struct sector_log *s = &log->slots[i];
    size_t j;
    if (!s->key)
      continue;
    for (j = home (s->key - 1, cap); slots[j].key; j = (j + 1) & (cap - 1))
      ;
    slots[j] = *s;
  }
  free (log->slots);
  log->slots = slots;
  log->cap = cap;
  return 0;
}

/* Finds a sector's entry; with `add`, creates it if missing.  NULL when it
 * is missing (or, with `add`, when memory ran out). */
static struct sector_log *
log_find (struct undo_log *log, uint64_t sector, bool add)
{
  size_t i;

  if (add && (log->used + 1) * 2 > log->cap && log_grow (log) < 0)
    return NULL;
  if (!log->cap)
    return NULL;
  for (i = home (sector, log->cap); log->slots[i].key; i = (i + 1) & (log->cap - 1)) {
    if (log->slots[i].key == sector + 1)
      return &log->slots[i];
  }
  if (!add)
    return NULL;
  log->slots[i].key = sector + 1;
  log->used++;
  return &log->slots[i];
}

/* Appends a version to a sector's list. */
static int
log_push (struct sector_log *s, const unsigned char *data)
{
  if (s->n == s->cap) {
    uint32_t cap = s->cap ? s->cap * 2 : 2;
    unsigned char *v = realloc (s->v, (size_t) cap * HC_SECTOR_SIZE);
    if (!v)
      return -ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  memcpy (s->v + (size_t) s->n * HC_SECTOR_SIZE, data, HC_SECTOR_SIZE);
  s->n++;
  return 0;
}

/* Forgets every sector's history. */
static void
log_clear (struct undo_log *log)
{
  for (size_t i = 0; i < log->cap; i++)
    free (log->slots[i].v);
  free (log->slots);
  *log = (struct undo_log) { 0 };
}

/* Logs the content of [off, off+len) below, before a write replaces it. */
static int
log_before_write (struct faulty_tier *f, uint64_t off, uint64_t len)
{
  unsigned char *buf = malloc ((size_t) (len < LOG_CHUNK ? len : LOG_CHUNK));
  int rc = 0;

  if (!buf)
    return -ENOMEM;
  while (len && rc == 0) {
    uint64_t n = len < LOG_CHUNK ? len : LOG_CHUNK;
    rc = hc_tier_read (f->lower, buf, (size_t) n, off);
    for (uint64_t done = 0; rc == 0 && done < n; done += HC_SECTOR_SIZE) {
      struct sector_log *s = log_find (&f->log, (off + done) / HC_SECTOR_SIZE, true);
      rc = s ? log_push (s, buf + done) : -ENOMEM;
    }
    off += n;
    len -= n;
  }
  free (buf);
  return rc;
}

/* Makes a completed FUA write the floor of its sectors: their earlier
 * versions can no longer come back. */
static void
log_floor (struct faulty_tier *f, uint64_t off, uint64_t len)
{
  for (uint64_t done = 0; done < len; done += HC_SECTOR_SIZE) {
    struct sector_log *s = log_find (&f->log, (off + done) / HC_SECTOR_SIZE, false);
    if (s)
      s->n = 0;
  }
}

/* Picks each logged sector's surviving version and writes it below, then
 * flushes so that the outcome is what the media holds.  Returns 0 or the
 * first error, having tried every sector. */
static int
log_settle (struct faulty_tier *f, uint64_t *rng)
{
  int first = 0, rc;
  bool wrote = false;

  for (size_t i = 0; i < f->log.cap; i++) {
    struct sector_log *s = &f->log.slots[i];
    uint64_t pick;
    if (!s->key || !s->n)
      continue;
    /* 0 … n-1 are logged versions; n is the current content, kept as is. */
    pick = next_random (rng) % ((uint64_t) s->n + 1);
    if (pick == s->n)
      continue;
    rc = hc_tier_write (f->lower, s->v + pick * HC_SECTOR_SIZE, HC_SECTOR_SIZE,
                        (s->key - 1) * HC_SECTOR_SIZE, 0);
    if (rc < 0 && first == 0)
      first = rc;
    wrote = true;
  }
  if (wrote && (rc = hc_tier_flush (f->lower)) < 0 && first == 0)
    first = rc;
  return first;
}

/* ---- The rule. ---- */

/* Counts a call of `op` against the rule; returns 0, or -err when the call
 * is to fail. */
static int
rule_check (struct faulty_tier *f, unsigned op)
{
  int rc = 0;

  pthread_mutex_lock (&f->mu);
  if (f->rule.ops & op) {
    uint64_t call = ++f->calls;
    bool fail;
    if (f->rule.persistent && f->tripped)
      fail = true;
    else if (f->rule.nth && call == f->rule.nth)
      fail = true;
    else
      fail = f->rule.fraction > 0
             && (double) (next_random (&f->rng) >> 11) * 0x1p-53 < f->rule.fraction;
    if (fail) {
      f->tripped = true;
      f->injected++;
      rc = -f->rule.err;
    }
  }
  pthread_mutex_unlock (&f->mu);
  return rc;
}

/* ---- The decorator. ---- */

/* Enters the domain for one I/O: takes its mutex, or returns -EIO (without
 * it) while the power is off.  Tiers in no domain always enter. */
static int
power_enter (struct faulty_tier *f)
{
  if (!f->pw)
    return 0;
  pthread_mutex_lock (&f->pw->mu);
  if (f->pw->cut) {
    pthread_mutex_unlock (&f->pw->mu);
    return -EIO;
  }
  return 0;
}

/* Leaves the domain after an I/O. */
static void
power_leave (struct faulty_tier *f)
{
  if (f->pw)
    pthread_mutex_unlock (&f->pw->mu);
}

/* Counts a write in the domain and logs what it will replace; -EIO when
 * this is the write the power dies on. */
static int
power_count_write (struct faulty_tier *f, uint64_t off, uint64_t len)
{
  hc_power *pw = f->pw;
  int rc;

  pw->writes++;
  if (pw->cut_at && pw->writes == pw->cut_at) {
    pw->cut = true;
    return -EIO;
  }
  /* A write that cannot be logged is not performed, so not counted. */
  if ((rc = log_before_write (f, off, len)) < 0)
    pw->writes--;
  return rc;
}

enum change { CHANGE_WRITE, CHANGE_DISCARD, CHANGE_ZERO };

/* The common path of write, discard and zero. */
static int
change (hc_tier *t, enum change kind, const void *buf, uint64_t len, uint64_t off,
        unsigned flags)
{
  struct faulty_tier *f = (struct faulty_tier *) t;
  int rc = power_enter (f);

  if (rc < 0)
    return rc;
  rc = rule_check (f, kind == CHANGE_WRITE ? HC_FAULT_WRITE : HC_FAULT_DISCARD);
  if (rc == 0 && f->pw)
    rc = power_count_write (f, off, len);
  if (rc == 0) {
    switch (kind) {
    case CHANGE_WRITE: rc = hc_tier_write (f->lower, buf, (size_t) len, off, flags); break;
    case CHANGE_DISCARD: rc = hc_tier_discard (f->lower, off, len); break;
    case CHANGE_ZERO: rc = hc_tier_zero (f->lower, off, len); break;
    }
  }
  if (rc == 0 && f->pw && (flags & HC_TIER_FUA))
    log_floor (f, off, len);
  power_leave (f);
  return rc;
}

/* Reads, unless the rule or the power says no. */
static int
faulty_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  struct faulty_tier *f = (struct faulty_tier *) t;
  int rc = power_enter (f);

  if (rc < 0)
    return rc;
  rc = rule_check (f, HC_FAULT_READ);
  if (rc == 0)
    rc = hc_tier_read (f->lower, buf, len, off);
  power_leave (f);
  return rc;
}

/* Writes, unless the rule or the power says no. */
static int
faulty_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  return change (t, CHANGE_WRITE, buf, len, off, flags);
}

/* Flushes; success makes every logged write durable. */
static int
faulty_flush (hc_tier *t)
{
  struct faulty_tier *f = (struct faulty_tier *) t;
  int rc = power_enter (f);

  if (rc < 0)
    return rc;
  rc = rule_check (f, HC_FAULT_FLUSH);
  if (rc == 0)
    rc = hc_tier_flush (f->lower);
  if (rc == 0 && f->pw)
    log_clear (&f->log);
  power_leave (f);
  return rc;
}

/* Discards: a write of zeros, as far as faults and power go. */
static int
faulty_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  return change (t, CHANGE_DISCARD, NULL, len, off, 0);
}

/* Readahead: advice, passed down (it changes no data). */
static int
faulty_prefetch (hc_tier *t, uint64_t off, uint64_t len)
{
  return hc_tier_prefetch (((struct faulty_tier *) t)->lower, off, len);
}

/* Zeros: a write of zeros, as far as faults and power go. */
static int
faulty_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  return change (t, CHANGE_ZERO, NULL, len, off, 0);
}

/* Detaches from the domain and frees the decorator; the tier below stays
 * open, and whatever the log held is simply forgotten. */
static void
faulty_close (hc_tier *t)
{
  struct faulty_tier *f = (struct faulty_tier *) t;

  if (f->pw) {
    pthread_mutex_lock (&f->pw->mu);
    for (struct faulty_tier **p = &f->pw->tiers; *p; p = &(*p)->next) {
      if (*p == f) {
        *p = f->next;
        break;
      }
    }
    pthread_mutex_unlock (&f->pw->mu);
  }
  log_clear (&f->log);
  pthread_mutex_destroy (&f->mu);
  free (f);
}

static const struct hc_tier_ops faulty_ops = {
  .kind = "faulty",
  .read = faulty_read,
  .write = faulty_write,
  .flush = faulty_flush,
  .discard = faulty_discard,
  .zero = faulty_zero,
  .prefetch = faulty_prefetch,
  .close = faulty_close,
};

int
hc_tier_new_faulty (hc_tier *lower, hc_power *pw, uint64_t seed, hc_tier **out)
{
  char name[sizeof ((hc_tier *) 0)->name];
  struct faulty_tier *f;

  if (!lower || !out)
    return -EINVAL;
  /* Stacked directly on a decorator of the same domain, a write would take
   * the domain mutex twice. */
  if (pw && lower->ops == &faulty_ops && ((struct faulty_tier *) lower)->pw == pw)
    return -EINVAL;
  if (!(f = calloc (1, sizeof *f)))
    return -ENOMEM;
  if (pthread_mutex_init (&f->mu, NULL) != 0) {
    free (f);
    return -ENOMEM;
  }
  f->lower = lower;
  f->rng = seed;
  if (snprintf (name, sizeof name, "faulty(%s)", hc_tier_name (lower)) >= (int) sizeof name)
    name[sizeof name - 2] = ')'; /* keep the parenthesis closed when truncated */
  hc_tier_init (&f->base, &faulty_ops, hc_tier_size (lower), hc_tier_caps (lower), name);
  snprintf (f->base.ident, sizeof f->base.ident, "%s", hc_tier_identity (lower));
  if (pw) {
    pthread_mutex_lock (&pw->mu);
    f->pw = pw;
    f->next = pw->tiers;
    pw->tiers = f;
    pthread_mutex_unlock (&pw->mu);
  }
  *out = &f->base;
  return 0;
}

int
hc_tier_faulty_set (hc_tier *t, const struct hc_fault_rule *rule)
{
  struct faulty_tier *f = (struct faulty_tier *) t;

  if (!t || t->ops != &faulty_ops || !rule)
    return -EINVAL;
  if ((rule->ops & ~(unsigned) ALL_OPS)
      || !(rule->fraction >= 0 && rule->fraction <= 1) /* NaN too */
      || (rule->err != EIO && rule->err != ENOSPC && !(rule->err == 0 && rule->ops == 0)))
    return -EINVAL;
  pthread_mutex_lock (&f->mu);
  f->rule = *rule;
  f->calls = 0;
  f->tripped = false; /* a new rule starts with a clean slate */
  pthread_mutex_unlock (&f->mu);
  return 0;
}

uint64_t
hc_tier_faulty_injected (const hc_tier *t)
{
  /* The mutex must be locked, so the object is used as the mutable thing
   * it was allocated as. */
  struct faulty_tier *f = (struct faulty_tier *) t;
  uint64_t n;

  if (!t || t->ops != &faulty_ops)
    return 0;
  pthread_mutex_lock (&f->mu);
  n = f->injected;
  pthread_mutex_unlock (&f->mu);
  return n;
}

/* ---- Power domains. ---- */

int
hc_power_new (uint64_t seed, hc_power **out)
{
  hc_power *pw;

  if (!out)
    return -EINVAL;
  if (!(pw = calloc (1, sizeof *pw)))
    return -ENOMEM;
  if (pthread_mutex_init (&pw->mu, NULL) != 0) {
    free (pw);
    return -ENOMEM;
  }
  pw->rng = seed;
  *out = pw;
  return 0;
}

void
hc_power_free (hc_power *pw)
{
  struct faulty_tier *f, *next;

  if (!pw)
    return;
  /* Tiers should have been closed first; any still attached are detached
   * (their logs dropped), so that closing them later is still safe. */
  for (f = pw->tiers; f; f = next) {
    next = f->next;
    log_clear (&f->log);
    f->pw = NULL;
    f->next = NULL;
  }
  pthread_mutex_destroy (&pw->mu);
  free (pw);
}

void
hc_power_arm (hc_power *pw, uint64_t cut_at)
{
  pthread_mutex_lock (&pw->mu);
  pw->cut_at = cut_at ? pw->writes + cut_at : 0;
  pthread_mutex_unlock (&pw->mu);
}

uint64_t
hc_power_writes (const hc_power *pw)
{
  hc_power *m = (hc_power *) pw; /* locking needs it mutable */
  uint64_t n;

  pthread_mutex_lock (&m->mu);
  n = m->writes;
  pthread_mutex_unlock (&m->mu);
  return n;
}

bool
hc_power_is_cut (const hc_power *pw)
{
  hc_power *m = (hc_power *) pw; /* locking needs it mutable */
  bool cut;

  pthread_mutex_lock (&m->mu);
  cut = m->cut;
  pthread_mutex_unlock (&m->mu);
  return cut;
}

int
hc_power_cut_apply (hc_power *pw)
{
  int first = 0;

  pthread_mutex_lock (&pw->mu);
  pw->cut = true;
  for (struct faulty_tier *f = pw->tiers; f; f = f->next) {
    int rc = log_settle (f, &pw->rng);
    if (rc < 0 && first == 0)
      first = rc;
    log_clear (&f->log);
  }
  /* The power is back: I/O passes again, and nothing is armed. */
  pw->cut = false;
  pw->cut_at = 0;
  pthread_mutex_unlock (&pw->mu);
  return first;
}
