/* The memory tier: a tier kept in RAM, for tests and the simulator.
 *
 * The contents are one zero-filled buffer: calloc'd when small, an anonymous
 * mapping from 1 MiB up, so that a large simulated device costs only the
 * pages actually written (the kernel hands out zero pages lazily).  Reads and
 * writes are plain memcpy; the door has already checked every range, so no
 * call here can fail.  Concurrent calls need no lock: overlapping writes land
 * in some order, as the contract allows, and nobody expects a read racing a
 * write of the same bytes to be untorn.  Discard and zero both clear the
 * range, so discard honours "later reads return zeros" exactly.  Nothing is
 * persistent, so flush has nothing to do.
 *
 * A memory tier can also start from an image held in a file (typically a
 * memfd holding a snapshot of another memory tier): the file is mapped
 * privately, so the kernel shares its pages among all the tiers made from
 * it and copies a page only when one of them writes it.  A test that must
 * start thousands of runs from one large prepared state pays for the pages
 * each run changes, not for copying the state.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tier.h"

/* Sizes from here up are mapped rather than allocated. */
#define MAP_THRESHOLD ((uint64_t) 1 << 20)

struct memory_tier {
  hc_tier base;
  unsigned char *data;
  bool mapped; /* data comes from mmap, not calloc */
};

/* Copies out of the buffer. */
static int
memory_read (hc_tier *t, void *buf, size_t len, uint64_t off)
{
  struct memory_tier *m = (struct memory_tier *) t;

  memcpy (buf, m->data + off, len);
  return 0;
}

/* Copies into the buffer; FUA means nothing for RAM. */
static int
memory_write (hc_tier *t, const void *buf, size_t len, uint64_t off, unsigned flags)
{
  struct memory_tier *m = (struct memory_tier *) t;

  (void) flags;
  memcpy (m->data + off, buf, len);
  return 0;
}

/* Nothing to make durable: RAM is not persistent. */
static int
memory_flush (hc_tier *t)
{
  (void) t;
  return 0;
}

/* Clears a range; serves both discard and zero, since both read back as
 * zeros. */
static int
memory_clear (hc_tier *t, uint64_t off, uint64_t len)
{
  struct memory_tier *m = (struct memory_tier *) t;

  memset (m->data + off, 0, (size_t) len);
  return 0;
}

/* Frees the buffer and the tier. */
static void
memory_close (hc_tier *t)
{
  struct memory_tier *m = (struct memory_tier *) t;

  if (m->mapped)
    munmap (m->data, (size_t) t->size);
  else
    free (m->data);
  free (m);
}

static const struct hc_tier_ops memory_ops = {
  .kind = "memory",
  .read = memory_read,
  .write = memory_write,
  .flush = memory_flush,
  .discard = memory_clear,
  .zero = memory_clear,
  .close = memory_close,
};

int
hc_tier_new_memory (uint64_t size, hc_tier **out)
{
  struct memory_tier *m;

  if (!out || size == 0 || size % HC_SECTOR_SIZE)
    return -EINVAL;
  /* Sizes the address space cannot hold are a lack of memory, not a bad
   * argument. */
  if (size > SIZE_MAX)
    return -ENOMEM;
  if (!(m = calloc (1, sizeof *m)))
    return -ENOMEM;
  if (size >= MAP_THRESHOLD) {
    void *p = mmap (NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    if (p == MAP_FAILED) {
      free (m);
      return -ENOMEM;
    }
    m->data = p;
    m->mapped = true;
  } else if (!(m->data = calloc (1, (size_t) size))) {
    free (m);
    return -ENOMEM;
  }
  hc_tier_init (&m->base, &memory_ops, size, HC_CAP_DISCARD, "memory");
  *out = &m->base;
  return 0;
}

int
hc_tier_new_memory_image (int fd, uint64_t size, hc_tier **out)
{
  struct memory_tier *m;
  struct stat st;

  if (!out || fd < 0 || size == 0 || size % HC_SECTOR_SIZE)
    return -EINVAL;
  if (fstat (fd, &st) < 0)
    return -errno;
  if ((uint64_t) st.st_size < size)
    return -EINVAL;
  if (size > SIZE_MAX)
    return -ENOMEM;
  if (!(m = calloc (1, sizeof *m)))
    return -ENOMEM;
  void *p = mmap (NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    free (m);
    return -e;
  }
  m->data = p;
  m->mapped = true;
  hc_tier_init (&m->base, &memory_ops, size, HC_CAP_DISCARD, "memory");
  *out = &m->base;
  return 0;
}
