/* A tiny test harness: CHECK records a failure with its location and goes
 * on, so one run reports every broken case; test_exit() turns the count into
 * the exit status CTest reads (0 pass, 1 fail); test_skip() ends a part whose
 * prerequisite is missing with 77, which CTest reports as skipped;
 * test_tmp() is where temporary files go; test_mutate() makes seeded mutants
 * of an input for robustness tests. */
#ifndef HC_TEST_H
#define HC_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned test_failures;
static unsigned test_checks;

#define CHECK(cond, ...)                                                                      \
  do {                                                                                        \
    test_checks++;                                                                            \
    if (!(cond)) {                                                                            \
      test_failures++;                                                                        \
      fprintf (stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
      fprintf (stderr, __VA_ARGS__);                                                          \
      fputc ('\n', stderr);                                                                   \
    }                                                                                         \
  } while (0)

#define CHECK_EQ(a, b, ...) CHECK ((a) == (b), __VA_ARGS__)

static inline int
test_exit (const char *name)
{
  if (test_failures) {
    fprintf (stderr, "%s: %u of %u checks failed\n", name, test_failures, test_checks);
    return 1;
  }
  printf ("%s: %u checks passed\n", name, test_checks);
  return 0;
}

/* Ends a part of a test whose prerequisite is missing: prints why on one
 * line and returns 77 (skipped) — or, if a check has failed already, fails
 * as test_exit() does.  A missing prerequisite never makes a part pass. */
static inline int __attribute__ ((format (printf, 2, 3)))
test_skip (const char *name, const char *fmt, ...)
{
  va_list ap;

  if (test_failures)
    return test_exit (name);
  printf ("%s: skipped: ", name);
  va_start (ap, fmt);
  vprintf (fmt, ap);
  va_end (ap);
  putchar ('\n');
  return 77;
}

/* The directory for temporary files: $TMPDIR, or /tmp where it is unset or
 * empty. */
static inline const char *
test_tmp (void)
{
  const char *t = getenv ("TMPDIR");

  return t && *t ? t : "/tmp";
}

/* Seconds on the monotonic clock. */
static inline double
test_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seeded mutations, for robustness tests: every run tries the same
 * mutants.  A number below n. */
static inline uint64_t
test_rand (uint64_t n)
{
  static uint64_t x = UINT64_C (0x2545f4914f6cdd1d);
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  return x % n;
}

/* Applies one to three random edits to buf (len bytes, room for cap):
 * bytes overwritten (with anything, or with what parsers split on), a range
 * deleted or repeated, a number too large for any field spliced in, or the
 * end cut off.  Returns the new length. */
static inline size_t
test_mutate (unsigned char *buf, size_t len, size_t cap)
{
  static const char special[] = "\n,\t :-+=~#\"0123456789";
  static const char *const big[] = { "18446744073709551616", "4294967296", "-1",
                                     "99999999999999999999999", "0x", "1e308" };

  for (unsigned k = 0, edits = 1 + (unsigned) test_rand (3); k < edits && len; k++) {
    size_t at = test_rand (len), n = 1 + test_rand (len - at < 64 ? len - at : 64);
    switch (test_rand (6)) {
    case 0: /* random bytes */
      for (size_t i = 0; i < n && i < 4; i++)
        buf[at + i] = (unsigned char) test_rand (256);
      break;
    case 1: /* a separator, an operator, a digit or a sign */
      buf[at] = (unsigned char) special[test_rand (sizeof special - 1)];
      break;
    case 2: /* a range deleted */
      memmove (buf + at, buf + at + n, len - at - n);
      len -= n;
      break;
    case 3: /* a range repeated */
      if (len + n <= cap) {
        memmove (buf + at + n, buf + at, len - at);
        len += n;
      }
      break;
    case 4: { /* a huge or odd number */
      const char *b = big[test_rand (sizeof big / sizeof big[0])];
      size_t bl = strlen (b);
      if (len + bl <= cap) {
        memmove (buf + at + bl, buf + at, len - at);
        memcpy (buf + at, b, bl);
        len += bl;
      }
      break;
    }
    default: /* cut short */
      len = at;
      break;
    }
  }
  return len;
}

#endif /* HC_TEST_H */
