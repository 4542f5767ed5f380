/* hintcache — where a file's data lives on its device.
 *
 * Range hints are about device ranges; programs know files.  This asks the
 * file system (the FIEMAP ioctl) for the physical extents under a range of
 * a file, so a hint about a file becomes hints about its extents: what
 * `hintcache advise --file`, the hint daemon and the preload library send.
 *
 * Extents without a fixed place on the device are not returned but
 * counted: data still in delayed allocation (its place is chosen at
 * writeback; ask again later, or pass HC_EXTENTS_SYNC to flush first),
 * inline, encoded or unaligned data.  Unwritten (preallocated) extents are
 * returned: their place is fixed, which is what lets a hint arrive before
 * the data does.  Physically and logically adjacent extents are merged.
 *
 * Functions return 0 or a negative errno and never print.
 */
#ifndef HINTCACHE_EXTENTS_H
#define HINTCACHE_EXTENTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_extent {
  uint64_t logical;  /* byte offset in the file */
  uint64_t physical; /* byte offset on the file system's device */
  uint64_t length;
};

struct hc_extent_list {
  struct hc_extent *e;   /* malloc'd; sorted by logical offset */
  size_t n, cap;
  uint64_t bytes;        /* sum of the lengths */
  uint64_t unplaced;     /* extents skipped: no fixed place yet or ever */
  uint64_t unplaced_bytes;
};

enum hc_extents_flag {
  HC_EXTENTS_SYNC = 1u << 0, /* write the file's dirty data first, so delayed
                                allocation has placed it */
};

/* Reads the extents of open file fd (a regular file, or a directory where
 * the file system maps those too, as ext4 does) that overlap [off, off+len)
 * into *out (zeroed first; free with hc_extent_list_free).  Extents are
 * returned whole, as the file system reports them.  Returns 0, -EOPNOTSUPP
 * or -ENOTTY (the file system does not report extents), -EINVAL (neither a
 * regular file nor a directory), -ENOMEM, or the errno of the ioctl. */
int hc_file_extents (int fd, uint64_t off, uint64_t len, unsigned flags,
                     struct hc_extent_list *out);

/* Frees a list's array and zeroes it (NULL is allowed). */
void hc_extent_list_free (struct hc_extent_list *l);

#ifdef __cplusplus
}
#endif

#endif /* HINTCACHE_EXTENTS_H */
