/* Trials: which of two ways of doing the same work is faster on this
 * machine, measured while the volume serves.
 *
 * Some of the engine's choices depend on the devices and the machine more
 * than on the workload.  Handing work to a helper thread pays when the
 * tiers wait on devices (the waits overlap), and does not when both tiers
 * are served from memory by a few busy CPUs (the hand-off adds a switch
 * and the helper competes for the same CPUs).  The read path's fills
 * (fill.c) and write-through's slow writes (writer.c) are such choices.
 * Which case a volume is in depends on its devices, its machine and its
 * load, so it is measured, not assumed.
 *
 * Of every `cycle` × HC_TRIAL_RUNS runs, the first HC_TRIAL_RUNS go way 0
 * (the plain one: on the caller's thread), the next HC_TRIAL_RUNS way 1,
 * and each reports the caller's time per unit of work (a block), read on
 * the precise clock (hc_now_precise_ns: a run may take a few
 * microseconds, far under the coarse clock's tick).  The way
 * with the lower mean serves the rest of the cycle; a trial of way 1 that
 * was spoiled (it lost something way 0 would not have: a fill dropped for
 * want of room) loses.  The losing way's trial is the price of measuring,
 * so while the trials keep choosing the same way each cycle is twice as
 * long as the last, up to TRIAL_CYCLE_MAX: the price falls from an eighth
 * of the runs to under 1 %, and a change of the workload is still seen
 * within TRIAL_CYCLE_MAX trial lengths.  A change of the winner starts
 * again from TRIAL_CYCLE.
 */
#include "vol.h"

#define TRIAL_CYCLE 16
#define TRIAL_CYCLE_MAX 512

int
hc_trial_way (struct hc_trial *t, bool *alt)
{
  *alt = false;
  if (t->force == 1)
    return -1;
  if (t->force == 2) {
    *alt = true;
    return -1;
  }
  if (!t->cycle || t->pos >= t->cycle * HC_TRIAL_RUNS) { /* a new cycle: its trials first */
    t->cycle = t->cycle ? t->cycle : TRIAL_CYCLE;
    t->pos = 0;
    t->ns[0] = t->ns[1] = t->units[0] = t->units[1] = 0;
    t->spoiled = false;
  }
  uint64_t pos = t->pos++;
  if (pos == 2 * HC_TRIAL_RUNS && t->units[0] && t->units[1]) {
    /* Mean time per unit, way 1 against way 0. */
    bool a = !t->spoiled && (double) t->ns[1] / (double) t->units[1]
                                < (double) t->ns[0] / (double) t->units[0];
    t->cycle = a != t->alt ? TRIAL_CYCLE
               : t->cycle < TRIAL_CYCLE_MAX ? 2 * t->cycle : TRIAL_CYCLE_MAX;
    t->alt = a;
  }
  if (pos < 2 * HC_TRIAL_RUNS) {
    *alt = pos >= HC_TRIAL_RUNS;
    return (int) (pos / HC_TRIAL_RUNS);
  }
  *alt = t->alt;
  return -1;
}

void
hc_trial_report (hc_volume *v, struct hc_trial *t, int trial, uint64_t ns, unsigned units)
{
  if (trial < 0)
    return;
  hc_lock (&v->lock);
  t->ns[trial] += ns;
  t->units[trial] += units;
  pthread_mutex_unlock (&v->lock);
}
