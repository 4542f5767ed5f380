/* The slow writer: a thread that writes a write-through batch's data to the
 * slow tier while the batch's own thread writes it to the fast tier.
 *
 * Why.  Written through, a request is acknowledged once both tiers have
 * its data.  One after the other, it waits for the sum of the two writes;
 * side by side, for the longer — on a disk behind flash, the disk's alone,
 * as bcache writes the backing device and the cache at once.  Only a
 * batch of whole blocks (write.c, write_batch) goes this way, and only one
 * whose slow writes need no commit first (no clean recorded copy is
 * replaced, no unmapping waits to be durable): then nothing orders the
 * slow writes after the fast ones.  A crash between them leaves each copy
 * recorded dirty (write.c, "Clean, but recorded dirty"), so recovery
 * writes the copy over the slow tier, whichever of the two had landed —
 * the old data or the new, as an unacknowledged write may.  The request
 * holds the batch's stripes exclusively from before the job is handed over
 * until after it is done, so no reader, cleaner or fill meets the slow tier
 * halfway.
 *
 * One job at a time, and a request that finds the writer busy writes its
 * slow data itself: the writer adds overlap, never a queue.  Whether the
 * overlap pays is the machine's business (trial.c): it does when the tiers
 * wait on devices, and cannot when the CPUs are already busy copying, where
 * the hand-off only adds a switch.
 */
#include "vol.h"

static void *
writer_main (void *arg)
{
  hc_volume *v = arg;

  hc_lock (&v->lock);
  for (;;) {
    struct hc_slow_job *j = v->writer_job;
    if (!j || j->taken) {
      if (v->writer_stop)
        break;
      hc_timedwait (&v->writer_wake, &v->lock, 100 * 1000000ull);
      continue;
    }
    j->taken = true;
    pthread_mutex_unlock (&v->lock);
    int rc = 0;
    for (unsigned i = 0; i < j->n && rc == 0; i++)
      rc = hc_tier_write (v->slow, j->run[i].buf, j->run[i].len, j->run[i].off, j->flags);
    hc_lock (&v->lock);
    j->rc = rc;
    j->done = true;
    v->writer_jobs++;
    v->writer_job = NULL;
    pthread_cond_broadcast (&v->writer_done);
  }
  pthread_mutex_unlock (&v->lock);
  return NULL;
}

int
hc_writer_start (hc_volume *v)
{
  int rc = hc_spawn (&v->writer, writer_main, v);
  if (rc)
    return -rc;
  v->writer_started = true;
  return 0;
}

void
hc_writer_stop (hc_volume *v)
{
  if (!v->writer_started)
    return;
  hc_lock (&v->lock);
  v->writer_stop = true;
  pthread_cond_broadcast (&v->writer_wake);
  pthread_mutex_unlock (&v->lock);
  hc_join (v->writer);
  v->writer_started = false;
}

bool
hc_writer_submit (hc_volume *v, struct hc_slow_job *j)
{
  bool ok;

  j->rc = 0;
  j->taken = j->done = false;
  hc_lock (&v->lock);
  ok = v->writer_started && !v->writer_stop && !v->writer_job;
  if (ok) {
    v->writer_job = j;
    pthread_cond_signal (&v->writer_wake);
  }
  pthread_mutex_unlock (&v->lock);
  return ok;
}

int
hc_writer_wait (hc_volume *v, struct hc_slow_job *j)
{
  hc_lock (&v->lock);
  while (!j->done)
    hc_timedwait (&v->writer_done, &v->lock, 100 * 1000000ull);
  pthread_mutex_unlock (&v->lock);
  return j->rc;
}
