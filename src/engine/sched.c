/* The engine's scheduling points without a simulator: plain calls (see
 * sched.h). */
#include <errno.h>
#include <sys/random.h>

#include "sched.h"
#include "../util.h"

const struct hc_sched_ops *hc_sched;

void
hc_timedwait (pthread_cond_t *c, pthread_mutex_t *m, uint64_t ns)
{
  struct timespec ts;

  if (hc_sched) {
    hc_sched->timedwait (c, m, ns);
    return;
  }
  clock_gettime (CLOCK_REALTIME, &ts);
  ns += (uint64_t) ts.tv_nsec;
  ts.tv_sec += (time_t) (ns / 1000000000u);
  ts.tv_nsec = (long) (ns % 1000000000u);
  pthread_cond_timedwait (c, m, &ts);
}

uint64_t
hc_now_ns (void)
{
  struct timespec ts;

  if (hc_sched)
    return hc_sched->now_ns ();
  clock_gettime (CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

uint64_t
hc_now_precise_ns (void)
{
  return hc_sched ? hc_sched->now_ns () : hc_clock_ns (CLOCK_MONOTONIC);
}

int
hc_spawn (pthread_t *t, void *(*fn) (void *), void *arg)
{
  return hc_sched ? hc_sched->spawn (t, fn, arg) : pthread_create (t, NULL, fn, arg);
}

void
hc_join (pthread_t t)
{
  if (hc_sched)
    hc_sched->join (t);
  else
    pthread_join (t, NULL);
}

int
hc_random (void *buf, size_t len)
{
  if (hc_sched) {
    hc_sched->random (buf, len);
    return 0;
  }
  return getrandom (buf, len, 0) == (ssize_t) len ? 0 : -EIO;
}
