/* The engine's scheduling points.
 *
 * Every place where an engine thread may wait or observe the world — taking
 * a lock, waiting on a condition, reading the clock, starting or joining
 * its thread, drawing randomness — goes through these few functions.  By
 * default (hc_sched == NULL) each is the plain call, behind one
 * well-predicted branch.  A deterministic simulator (tests/sim.c) installs
 * its own table: it then runs one engine thread at a time, chooses at each
 * of these points (and at each tier I/O, through a tier decorator) which
 * thread goes on, from its seed, and keeps a virtual clock — so that one
 * seed is one interleaving, replayable exactly.
 *
 * Unlocking never waits, so unlocks stay plain pthread calls.  A simulator
 * must implement a lock by trying it and yielding while it is busy (the
 * holder may be a thread it has parked), and a condition wait as "unlock,
 * let others run, relock": every caller already loops around its waits.
 */
#ifndef HC_ENGINE_SCHED_H
#define HC_ENGINE_SCHED_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct hc_sched_ops {
  void (*lock) (pthread_mutex_t *m);
  void (*rdlock) (pthread_rwlock_t *l);
  void (*wrlock) (pthread_rwlock_t *l);
  int (*trywrlock) (pthread_rwlock_t *l);                      /* 0 or EBUSY */
  int (*tryrdlock) (pthread_rwlock_t *l);                      /* 0 or EBUSY */
  void (*timedwait) (pthread_cond_t *c, pthread_mutex_t *m, uint64_t ns); /* may return early */
  uint64_t (*now_ns) (void);                                   /* a monotonic clock */
  int (*spawn) (pthread_t *t, void *(*fn) (void *), void *arg); /* 0 or a positive errno */
  void (*join) (pthread_t t);
  void (*random) (void *buf, size_t len);
};

/* The installed simulator, or NULL.  Set only while no volume is open. */
extern const struct hc_sched_ops *hc_sched;

static inline void
hc_lock (pthread_mutex_t *m)
{
  if (__builtin_expect (hc_sched != NULL, 0))
    hc_sched->lock (m);
  else
    pthread_mutex_lock (m);
}

static inline void
hc_rdlock (pthread_rwlock_t *l)
{
  if (__builtin_expect (hc_sched != NULL, 0))
    hc_sched->rdlock (l);
  else
    pthread_rwlock_rdlock (l);
}

static inline void
hc_wrlock (pthread_rwlock_t *l)
{
  if (__builtin_expect (hc_sched != NULL, 0))
    hc_sched->wrlock (l);
  else
    pthread_rwlock_wrlock (l);
}

static inline int
hc_trywrlock (pthread_rwlock_t *l)
{
  if (__builtin_expect (hc_sched != NULL, 0))
    return hc_sched->trywrlock (l);
  return pthread_rwlock_trywrlock (l);
}

static inline int
hc_tryrdlock (pthread_rwlock_t *l)
{
  if (__builtin_expect (hc_sched != NULL, 0))
    return hc_sched->tryrdlock (l);
  return pthread_rwlock_tryrdlock (l);
}

/* Waits on c (m held) for at most ns nanoseconds; may return early. */
void hc_timedwait (pthread_cond_t *c, pthread_mutex_t *m, uint64_t ns);

/* Nanoseconds of a monotonic clock (coarse: for idle and pacing only). */
uint64_t hc_now_ns (void);

/* Nanoseconds of a monotonic clock, to the nanosecond: for timing work
 * that takes microseconds (trial.c).  The coarse clock above ticks every
 * few milliseconds (4 on a kernel of 250 Hz): a trial's 64 runs of a few
 * microseconds each summed to 0 on both ways, or to a whole tick on one of
 * them by chance, so the trials chose by where the tick fell. */
uint64_t hc_now_precise_ns (void);

/* Starts a thread (0 or a positive errno), joins it. */
int hc_spawn (pthread_t *t, void *(*fn) (void *), void *arg);
void hc_join (pthread_t t);

/* Fills buf with random bytes (UUIDs); 0 or -EIO. */
int hc_random (void *buf, size_t len);

#endif /* HC_ENGINE_SCHED_H */
