/* A tiny test harness: CHECK records a failure with its location and goes
 * on, so one run reports every broken case; test_exit() turns the count into
 * the exit status CTest reads (0 pass, 1 fail; 77 means skipped). */
#ifndef HC_TEST_H
#define HC_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Seconds on the monotonic clock. */
static inline double
test_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif /* HC_TEST_H */
