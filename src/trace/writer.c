/* The trace writer door: hc_trace_writer_open checks the format and the
 * block size and opens the file; every request goes through
 * hc_trace_write, which hands it to the format's write op.  Output is
 * buffered (the buffer starts small and grows) and written out on close.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "trace_priv.h"
#include "util.h"

/* Writes out the buffered output. */
int
hc_trace_wflush (struct hc_trace_writer *w)
{
  const unsigned char *p = w->buf;
  size_t n = w->len;

  if (w->gz) {
    int errnum;
    if (n && gzwrite (w->gz, p, (unsigned) n) != (int) n) {
      gzerror (w->gz, &errnum);
      return errnum == Z_ERRNO && errno ? -errno : -EIO;
    }
    w->len = 0;
    return 0;
  }
  while (n) {
    ssize_t k = write (w->fd, p, n);
    if (k < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (k == 0)
      return -EIO;
    p += k;
    n -= (size_t) k;
  }
  w->len = 0;
  return 0;
}

/* Appends bytes to the output. */
int
hc_trace_wput (struct hc_trace_writer *w, const void *p, size_t n)
{
  const unsigned char *s = p;

  while (n) {
    size_t room = w->cap - w->len, k;
    int rc;
    if (!room) {
      if ((rc = hc_trace_wflush (w)) < 0)
        return rc;
      /* A writer that filled its buffer writes more: a larger one, now
       * that it is empty (if memory is short, the one it has). */
      if (w->cap < HC_TRACE_BUF) {
        unsigned char *b = malloc (w->cap * 2);
        if (b) {
          free (w->buf);
          w->buf = b;
          w->cap *= 2;
        }
      }
      room = w->cap;
    }
    k = n < room ? n : room;
    memcpy (w->buf + w->len, s, k);
    w->len += k;
    s += k;
    n -= k;
  }
  return 0;
}

/* Frees a writer without finishing its file. */
static int
writer_free (struct hc_trace_writer *w)
{
  int rc = 0;

  if (w->gz) {
    if (gzclose (w->gz) != Z_OK)
      rc = -EIO;
  } else if (w->own_fd && w->fd >= 0 && close (w->fd) < 0)
    rc = -errno;
  hc_trace_strtab_free (&w->strs);
  free (w->src_map);
  free (w->blocks);
  hc_blockset_free (&w->footprint);
  free (w->buf);
  free (w);
  return rc;
}

/* Creates a trace file. */
int
hc_trace_writer_open (const char *path, enum hc_trace_format format, uint32_t block_size,
                      hc_trace_writer **out, char *why, size_t whylen)
{
  struct hc_trace_writer *w;
  struct hc_sb sb;
  int rc;

  hc_sb_init (&sb, why, why ? whylen : 0);
  if (!out || !path) {
    hc_sb_printf (&sb, "no path");
    return -EINVAL;
  }
  *out = NULL;
  if ((unsigned) format >= HC_TRACE_FORMAT_COUNT || format == HC_TRACE_AUTO
      || !hc_trace_fmt_of (format)->write) {
    hc_sb_printf (&sb, "cannot write traces in format '%s'",
                  hc_trace_format_name (format) ? hc_trace_format_name (format) : "?");
    return -EINVAL;
  }
  if (!(w = calloc (1, sizeof *w)) || !(w->buf = malloc (w->cap = HC_TRACE_WBUF0))) {
    free (w);
    hc_sb_printf (&sb, "out of memory");
    return -ENOMEM;
  }
  w->fmt = hc_trace_fmt_of (format);
  w->block_size = block_size ? block_size : 4096;
  if (strcmp (path, "-") == 0)
    w->fd = STDOUT_FILENO;
  else {
    w->own_fd = true;
    if ((w->fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
      rc = -errno;
      hc_sb_printf (&sb, "%s: %s", path, strerror (-rc));
      writer_free (w);
      return rc;
    }
    size_t n = strlen (path);
    if (n > 3 && strcmp (path + n - 3, ".gz") == 0 && !(w->gz = gzdopen (w->fd, "wb6"))) {
      hc_sb_printf (&sb, "%s: cannot start gzip", path);
      writer_free (w);
      return -ENOMEM;
    }
  }
  if ((rc = w->fmt->wopen (w)) < 0) {
    hc_sb_printf (&sb, "%s: %s", path, strerror (-rc));
    writer_free (w);
    return rc;
  }
  *out = w;
  return 0;
}

/* Appends a request: the door for both kinds of strings. */
static int
write_req (hc_trace_writer *w, const struct hc_trace_req *r, const hc_trace *src, const char *comm,
           const char *object)
{
  int rc;

  if (!w || !r)
    return -EINVAL;
  if (w->err)
    return w->err;
  /* Values a reader would reject are refused here, so every file written
   * reads back. */
  if (r->op > HC_TOP_FLUSH || r->label >= HC_LABEL_COUNT || r->ioprio_class > 3
      || r->ioprio_level > 7 || r->ioprio_hint > 1023 || r->rwbs > 0x1f
      || !hc_trace_req_in_range (r))
    return -EINVAL;
  /* A request the format cannot spell is refused alone; an output error
   * stays. */
  if ((rc = w->fmt->write (w, r, src, comm, object)) < 0 && rc != -EINVAL)
    w->err = rc;
  return rc;
}

int
hc_trace_write (hc_trace_writer *w, const struct hc_trace_req *r, const hc_trace *src)
{
  return write_req (w, r, src, NULL, NULL);
}

int
hc_trace_write_strings (hc_trace_writer *w, const struct hc_trace_req *r, const char *comm,
                        const char *object)
{
  return write_req (w, r, NULL, comm, object);
}

/* Finishes the file and frees the writer. */
int
hc_trace_writer_close (hc_trace_writer *w)
{
  int rc, rc2;

  if (!w)
    return 0;
  rc = w->err;
  if (!rc)
    rc = w->fmt->wclose (w);
  rc2 = writer_free (w);
  return rc ? rc : rc2;
}
