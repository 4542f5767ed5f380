/* What the fuzz targets share: FUZZ_CHECK, which turns a broken property
 * into a crash that libFuzzer keeps (a message, then abort), a reader of
 * little-endian fields that runs out gracefully, and a memory file that a
 * path-taking API can open, so that no run touches the disk.
 *
 * The memory file is a memfd created once per process; each run rewrites
 * it, and the API opens it again through /proc/self/fd/N, which gives a new
 * open file (its own offset) on the same bytes.
 */
#ifndef HC_FUZZ_H
#define HC_FUZZ_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_CHECK(cond, ...)                                                                 \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf (stderr, "%s:%d: property broken: %s: ", __FILE__, __LINE__, #cond);            \
      fprintf (stderr, __VA_ARGS__);                                                          \
      fputc ('\n', stderr);                                                                   \
      abort ();                                                                               \
    }                                                                                         \
  } while (0)

/* A cursor over the fuzzer's bytes: reads past the end give zeros. */
struct fuzz_in {
  const uint8_t *p;
  size_t n;
};

static inline uint64_t
fuzz_take (struct fuzz_in *in, unsigned bytes)
{
  uint64_t v = 0;

  for (unsigned i = 0; i < bytes; i++)
    if (in->n) {
      v |= (uint64_t) *in->p++ << (8 * i);
      in->n--;
    }
  return v;
}

/* A memory file and the path that opens it. */
struct fuzz_file {
  int fd;
  char path[48];
};

/* Creates a memory file (once, at start-up); aborts if it cannot. */
static inline void
fuzz_file_init (struct fuzz_file *f, const char *name)
{
  f->fd = memfd_create (name, MFD_CLOEXEC);
  FUZZ_CHECK (f->fd >= 0, "memfd_create failed");
  snprintf (f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

/* Replaces the file's contents with data[len]. */
static inline void
fuzz_file_set (struct fuzz_file *f, const void *data, size_t len)
{
  const uint8_t *p = data;
  size_t done = 0;

  FUZZ_CHECK (ftruncate (f->fd, 0) == 0, "ftruncate failed");
  while (done < len) {
    ssize_t k = pwrite (f->fd, p + done, len - done, (off_t) done);
    FUZZ_CHECK (k > 0, "pwrite to the memory file failed");
    done += (size_t) k;
  }
}

/* A NUL-terminated copy of the input (the caller frees it). */
static inline char *
fuzz_strdup (const uint8_t *data, size_t len)
{
  char *s = malloc (len + 1);

  FUZZ_CHECK (s != NULL, "out of memory");
  memcpy (s, data, len);
  s[len] = '\0';
  return s;
}

#endif /* HC_FUZZ_H */
