/* The one size grammar (hc_parse_size), as a table: every size and offset
 * the tools, the control protocol, the replayer and the preload library
 * read goes through it, so what it accepts, refuses and how it reports an
 * overflow is fixed here once.  The replayer's cache sizes add percentages
 * and blocks on top; test_replay covers those through the replayer. */
#include <errno.h>
#include <stdint.h>

#include "test.h"
#include "util.h"

struct row {
  const char *in;
  int rc;
  uint64_t v;
  bool unit;
};

static const struct row rows[] = {
  { "0", 0, 0, false },
  { "123", 0, 123, false },
  { "010", 0, 10, false }, /* never octal */
  { "0x10", 0, 16, false },
  { "0XfF", 0, 255, false },
  { "4k", 0, 4096, true },
  { "4K", 0, 4096, true },
  { "4KB", 0, 4096, true },
  { "4KiB", 0, 4096, true },
  { "64m", 0, 64ull << 20, true },
  { "1G", 0, 1ull << 30, true },
  { "2T", 0, 2ull << 40, true },
  { "0x10k", 0, 16384, true },
  { "0x1B", 0, 27, false }, /* B is a hex digit, not bytes */
  { "18446744073709551615", 0, UINT64_MAX, false },
  { "0xffffffffffffffff", 0, UINT64_MAX, false },
  { "16777215T", 0, 16777215ull << 40, true },
  { "00000000000000000000000000001", 0, 1, false },
  { "18446744073709551616", -ERANGE, 0, false },
  { "0x10000000000000000", -ERANGE, 0, false },
  { "16777216T", -ERANGE, 0, false },
  { "", -EINVAL, 0, false },
  { "0x", -EINVAL, 0, false },
  { "k", -EINVAL, 0, false },
  { "-1", -EINVAL, 0, false },
  { "+1", -EINVAL, 0, false },
  { " 1", -EINVAL, 0, false },
  { "1 ", -EINVAL, 0, false },
  { "1.5M", -EINVAL, 0, false },
  { "4B", -EINVAL, 0, false },
  { "4i", -EINVAL, 0, false },
  { "4Ki", -EINVAL, 0, false },
  { "4KiBs", -EINVAL, 0, false },
  { "4KK", -EINVAL, 0, false },
  { "4P", -EINVAL, 0, false },
  { "1e3", -EINVAL, 0, false },
};

int
main (void)
{
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct row *r = &rows[i];
    uint64_t v = 12345;
    bool unit = !r->unit;
    int rc = hc_parse_size (r->in, &v, &unit);
    CHECK (rc == r->rc, "'%s': rc %d, want %d", r->in, rc, r->rc);
    if (r->rc == 0)
      CHECK (v == r->v && unit == r->unit, "'%s': %llu (unit %d), want %llu (unit %d)", r->in,
             (unsigned long long) v, unit, (unsigned long long) r->v, r->unit);
    else
      CHECK (v == 12345, "'%s': *out changed on error", r->in);
    CHECK (hc_parse_size (r->in, &v, NULL) == r->rc, "'%s': without unit", r->in);
  }
  uint64_t v;
  CHECK (hc_parse_size (NULL, &v, NULL) == -EINVAL, "NULL");
  return test_exit ("test_parse");
}
