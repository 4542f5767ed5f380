/* The timing model and the timing decorator.
 *
 * The model prices one I/O in microseconds without sleeping, so that the
 * simulator and the trace replayer can compare placements in modeled time,
 * deterministically (no randomness anywhere).
 *
 * A disk: an I/O starting exactly where the previous one ended continues a
 * sequential run and pays only the media transfer.  Any other I/O seeks and
 * then waits, on average, half a revolution.  The seek grows with the square
 * root of the distance as a fraction of the capacity (the arm accelerates
 * then decelerates, so time goes as the root of the stroke): from seek_min_ms
 * for the shortest hop to seek_max_ms for a full stroke.  The head starts at
 * offset 0 with no run under way, so a first I/O at 0 still pays the
 * minimum seek and the rotation.
 *
 * Flash: no mechanics, so position does not matter: each I/O pays the page
 * read or program latency once, plus the transfer.
 *
 * The decorator forwards every call to the tier below through the door and,
 * for each one that succeeds, adds its modeled time to the totals, under a
 * mutex since the model's head position is shared state.  Flush costs
 * nothing in the model (the totals have no flush line anyway).  Zero is
 * priced as a write of the range; discard is priced at nothing, as devices
 * treat it as a metadata update, and is not counted as a write.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tier.h"

struct hc_timing_model {
  struct hc_timing_params p;
  uint64_t capacity;
  /* From p and capacity, so that pricing an I/O divides nothing. */
  double us_per_byte, per_capacity, seek_min_us, seek_span_us, half_turn_us, latency_us[2];
  uint64_t head; /* end of the previous I/O */
  bool run;      /* a previous I/O exists, so `head` can continue it */
};

void
hc_timing_defaults (struct hc_timing_params *p, bool rotational)
{
  *p = (struct hc_timing_params) {
    .rotational = rotational,
    .rpm = 7200,
    .seek_min_ms = 0.5,
    .seek_max_ms = 16,
    .disk_mb_s = 180,
    .read_us = 60,
    .program_us = 200,
    .flash_mb_s = 500,
  };
}

/* True if v is a usable non-negative number. */
static bool
nonneg (double v)
{
  return isfinite (v) && v >= 0;
}

/* Checks the parameters the selected kind of device uses. */
static int
check_params (const struct hc_timing_params *p)
{
  if (!p)
    return -EINVAL;
  if (p->rotational) {
    if (!nonneg (p->rpm) || p->rpm == 0 || !nonneg (p->seek_min_ms)
        || !nonneg (p->seek_max_ms) || p->seek_max_ms < p->seek_min_ms
        || !nonneg (p->disk_mb_s) || p->disk_mb_s == 0)
      return -EINVAL;
  } else if (!nonneg (p->read_us) || !nonneg (p->program_us) || !nonneg (p->flash_mb_s)
             || p->flash_mb_s == 0) {
    return -EINVAL;
  }
  return 0;
}

double
hc_timing_request_blocks (const struct hc_timing_params *p, uint32_t block)
{
  double wait_us, block_us;

  if (check_params (p) < 0 || block == 0)
    return 0;
  if (p->rotational) {
    wait_us = 1000 * (p->seek_min_ms + (p->seek_max_ms - p->seek_min_ms) * 8 / 15) + 30e6 / p->rpm;
    block_us = block / p->disk_mb_s;
  } else {
    wait_us = p->read_us;
    block_us = block / p->flash_mb_s;
  }
  return wait_us / block_us;
}

int
hc_timing_model_new (const struct hc_timing_params *p, uint64_t capacity,
                     hc_timing_model **out)
{
  hc_timing_model *m;
  int rc = check_params (p);

  if (rc < 0 || !out)
    return -EINVAL;
  if (!(m = calloc (1, sizeof *m)))
    return -ENOMEM;
  m->p = *p;
  m->capacity = capacity;
  m->us_per_byte = 1 / (p->rotational ? p->disk_mb_s : p->flash_mb_s); /* bytes / (MB/s) = µs */
  m->per_capacity = capacity ? 1 / (double) capacity : 0;
  m->seek_min_us = 1000 * p->seek_min_ms;
  m->seek_span_us = 1000 * (p->seek_max_ms - p->seek_min_ms);
  m->half_turn_us = 30e6 / p->rpm; /* (60e6 / rpm) / 2 */
  m->latency_us[false] = p->read_us;
  m->latency_us[true] = p->program_us;
  *out = m;
  return 0;
}

void
hc_timing_model_free (hc_timing_model *m)
{
  free (m);
}

/* Modeled microseconds of a disk I/O. */
static double
disk_io (hc_timing_model *m, uint64_t off, uint64_t len)
{
  double us = (double) len * m->us_per_byte;

  if (!(m->run && off == m->head)) {
    uint64_t d = off > m->head ? off - m->head : m->head - off;
    /* The trace replayer may pass offsets beyond the capacity it declared:
     * a seek never costs more than a full stroke. */
    double frac = m->capacity && d < m->capacity ? (double) d * m->per_capacity : 1;
    us += m->seek_min_us + m->seek_span_us * sqrt (frac) + m->half_turn_us;
  }
  return us;
}

double
hc_timing_model_io (hc_timing_model *m, bool write, uint64_t off, uint64_t len)
{
  double us;

  if (len == 0)
    return 0;
  if (m->p.rotational)
    us = disk_io (m, off, len);
  else
    us = m->latency_us[write] + (double) len * m->us_per_byte;
  m->head = off + len;
  m->run = true;
  return us;
}

/* ---- The decorator. ---- */

struct timing_tier {
  hc_tier base;
  hc_tier *lower;
  hc_timing_model *model;
  pthread_mutex_t mu; /* guards the model and the totals */
  double read_us, write_us;
  uint64_t reads, writes;
};

/* Prices one completed I/O and adds it to the totals. */
static void
charge (struct timing_tier *tt, bool write, uint64_t off, uint64_t len)
{
  double us;

  pthread_mutex_lock (&tt->mu);
  us = hc_timing_model_io (tt->model, write, off, len);
  if (write) {
    tt->write_us += us;
    tt->writes++;
  } else {
    tt->read_us += us;
    tt->reads++;
  }
  pthread_mutex_unlock (&tt->mu);
}

/* Forwards a read and prices it. */
static int
timing_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  struct timing_tier *tt = (struct timing_tier *) t;
  int rc = hc_tier_read (tt->lower, buf, len, off);

  if (rc == 0)
    charge (tt, false, off, len);
  return rc;
}

/* Forwards a write and prices it. */
static int
timing_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  struct timing_tier *tt = (struct timing_tier *) t;
  int rc = hc_tier_write (tt->lower, buf, len, off, flags);

  if (rc == 0)
    charge (tt, true, off, len);
  return rc;
}

/* Forwards a flush, which the model prices at nothing. */
static int
timing_flush (hc_tier *t)
{
  return hc_tier_flush (((struct timing_tier *) t)->lower);
}

/* Forwards a discard, which the model prices at nothing. */
static int
timing_discard (hc_tier *t, uint64_t off, uint64_t len)
{
  return hc_tier_discard (((struct timing_tier *) t)->lower, off, len);
}

/* Forwards a zero and prices it as a write of the range. */
static int
timing_zero (hc_tier *t, uint64_t off, uint64_t len)
{
  struct timing_tier *tt = (struct timing_tier *) t;
  int rc = hc_tier_zero (tt->lower, off, len);

  if (rc == 0)
    charge (tt, true, off, len);
  return rc;
}

/* Frees the decorator, leaving the tier below open. */
static void
timing_close (hc_tier *t)
{
  struct timing_tier *tt = (struct timing_tier *) t;

  pthread_mutex_destroy (&tt->mu);
  hc_timing_model_free (tt->model);
  free (tt);
}

static const struct hc_tier_ops timing_ops = {
  .kind = "timing",
  .read = timing_read,
  .write = timing_write,
  .flush = timing_flush,
  .discard = timing_discard,
  .zero = timing_zero,
  .close = timing_close,
};

int
hc_tier_new_timing (hc_tier *lower, const struct hc_timing_params *p, hc_tier **out)
{
  char name[sizeof ((hc_tier *) 0)->name];
  struct timing_tier *tt;
  unsigned caps;
  int rc;

  if (!lower || !out || check_params (p) < 0)
    return -EINVAL;
  if (!(tt = calloc (1, sizeof *tt)))
    return -ENOMEM;
  rc = hc_timing_model_new (p, hc_tier_size (lower), &tt->model);
  if (rc == 0 && pthread_mutex_init (&tt->mu, NULL) != 0) {
    hc_timing_model_free (tt->model);
    rc = -ENOMEM;
  }
  if (rc < 0) {
    free (tt);
    return rc;
  }
  tt->lower = lower;
  /* The modeled device decides whether seeks cost time, whatever lies
   * below (a flash model over a file on a disk is still flash). */
  /* Not HC_CAP_PREFETCH: what the tier below reads ahead would still be
   * charged its modeled service time here. */
  caps = hc_tier_caps (lower) & ~(unsigned) (HC_CAP_ROTATIONAL | HC_CAP_PREFETCH);
  if (p->rotational)
    caps |= HC_CAP_ROTATIONAL;
  if (snprintf (name, sizeof name, "timing(%s)", hc_tier_name (lower)) >= (int) sizeof name)
    name[sizeof name - 2] = ')'; /* keep the parenthesis closed when truncated */
  hc_tier_init (&tt->base, &timing_ops, hc_tier_size (lower), caps, name);
  snprintf (tt->base.ident, sizeof tt->base.ident, "%s", hc_tier_identity (lower));
  *out = &tt->base;
  return 0;
}

int
hc_tier_timing_get (const hc_tier *t, double *read_us, double *write_us, uint64_t *reads,
                    uint64_t *writes)
{
  struct timing_tier *tt;

  if (!t || t->ops != &timing_ops)
    return -EINVAL;
  /* The totals change under the mutex, which locking needs to modify. */
  tt = (struct timing_tier *) t;
  pthread_mutex_lock (&tt->mu);
  if (read_us)
    *read_us = tt->read_us;
  if (write_us)
    *write_us = tt->write_us;
  if (reads)
    *reads = tt->reads;
  if (writes)
    *writes = tt->writes;
  pthread_mutex_unlock (&tt->mu);
  return 0;
}
