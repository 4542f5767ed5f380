/* A file's physical extents through FIEMAP: see extents.h.
 *
 * FIEMAP answers in batches; each call starts where the previous batch's
 * last extent ended, until an extent flagged LAST or the end of the range.
 * An extent whose flags say it has no fixed, aligned place on the device is
 * counted instead of returned.
 */
#include <errno.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "hintcache/extents.h"
#include "util.h"

#define BATCH 256
#define UNPLACED (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_ENCODED \
                  | FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED)

/* Appends an extent, merging it into the last when both sides touch. */
static int
add (struct hc_extent_list *l, uint64_t logical, uint64_t physical, uint64_t length)
{
  struct hc_extent *last = l->n ? &l->e[l->n - 1] : NULL;

  l->bytes += length;
  if (last && last->logical + last->length == logical && last->physical + last->length == physical) {
    last->length += length;
    return 0;
  }
  if (hc_grow (&l->e, &l->cap, l->n, sizeof *l->e, 16) < 0)
    return -ENOMEM;
  l->e[l->n++] = (struct hc_extent) { logical, physical, length };
  return 0;
}

int
hc_file_extents (int fd, uint64_t off, uint64_t len, unsigned flags, struct hc_extent_list *out)
{
  struct fiemap *fm;
  struct stat st;
  uint64_t start = off, end = len > UINT64_MAX - off ? UINT64_MAX : off + len;
  int rc = 0;

  memset (out, 0, sizeof *out);
  if (flags & ~(unsigned) HC_EXTENTS_SYNC)
    return -EINVAL;
  if (fstat (fd, &st) < 0)
    return -errno;
  if (!S_ISREG (st.st_mode) && !S_ISDIR (st.st_mode))
    return -EINVAL;
  if (len == 0)
    return 0;
  if (!(fm = calloc (1, sizeof *fm + BATCH * sizeof fm->fm_extents[0])))
    return -ENOMEM;
  while (start < end) {
    memset (fm, 0, sizeof *fm);
    fm->fm_start = start;
    fm->fm_length = end - start;
    fm->fm_flags = (flags & HC_EXTENTS_SYNC) ? FIEMAP_FLAG_SYNC : 0;
    fm->fm_extent_count = BATCH;
    if (ioctl (fd, FS_IOC_FIEMAP, fm) < 0) {
      rc = -errno;
      break;
    }
    if (fm->fm_mapped_extents == 0)
      break;
    for (uint32_t i = 0; i < fm->fm_mapped_extents && rc == 0; i++) {
      const struct fiemap_extent *e = &fm->fm_extents[i];
      if (e->fe_flags & UNPLACED) {
        out->unplaced++;
        out->unplaced_bytes += e->fe_length;
      } else if (e->fe_length > 0)
        rc = add (out, e->fe_logical, e->fe_physical, e->fe_length);
    }
    const struct fiemap_extent *last = &fm->fm_extents[fm->fm_mapped_extents - 1];
    if (rc < 0 || (last->fe_flags & FIEMAP_EXTENT_LAST)
        || last->fe_logical + last->fe_length <= start)
      break;
    start = last->fe_logical + last->fe_length;
  }
  free (fm);
  if (rc < 0)
    hc_extent_list_free (out);
  return rc;
}

void
hc_extent_list_free (struct hc_extent_list *l)
{
  if (!l)
    return;
  free (l->e);
  memset (l, 0, sizeof *l);
}
