/* Fuzzes the class config text (hc_classes_load_text), the CLASS.ATTRIBUTE
 * = VALUE file an administrator hands the volume, and hc_classes_set_key on
 * the key and value of its first line.
 *
 * Beyond not crashing:
 *   - all or nothing: a text that fails changes no attribute of any class
 *     and names a line (within the text) and a reason; one that loads
 *     leaves every class's attributes in range;
 *   - the table after a load, written by hc_classes_format and loaded into
 *     a fresh table, gives the same table (format → load round-trips), and
 *     loading the same text twice changes nothing more (idempotent);
 *   - hc_classes_set_key likewise changes nothing when it fails.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hintcache/classes.h"

#define FORMAT_MAX 8192

/* The whole table as text (static buffer per slot). */
static const char *
table_text (const hc_classes *t, unsigned slot)
{
  static char buf[3][FORMAT_MAX];
  int n = hc_classes_format (t, buf[slot], sizeof buf[slot]);

  FUZZ_CHECK (n > 0 && n < FORMAT_MAX, "format gave %d", n);
  return buf[slot];
}

/* Lines in text[len] (a last line without a newline counts). */
static unsigned
count_lines (const char *text, size_t len)
{
  unsigned n = 0;

  for (size_t i = 0; i < len; i++)
    n += text[i] == '\n';
  return n + (len > 0 && text[len - 1] != '\n');
}

/* hc_classes_set_key on the first line's "KEY = VALUE", when it has one. */
static void
check_set_key (hc_classes *t, const char *text)
{
  char line[256], *eq, *key, *value;
  struct hc_parse_error err;
  size_t n = strcspn (text, "\n");

  if (n >= sizeof line)
    return;
  memcpy (line, text, n);
  line[n] = '\0';
  if (!(eq = strchr (line, '=')))
    return;
  *eq = '\0';
  key = line;
  value = eq + 1;
  const char *before = table_text (t, 0);
  int rc = hc_classes_set_key (t, key, value, &err);
  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "set_key returned %d", rc);
  if (rc < 0)
    FUZZ_CHECK (strcmp (before, table_text (t, 1)) == 0 && err.line == 0 && err.msg[0],
                "a failed set_key changed the table or gave no reason");
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  hc_classes *t, *u;
  struct hc_parse_error err = { 0 };
  const char *text = (const char *) data;

  FUZZ_CHECK (hc_classes_new (&t) == 0 && hc_classes_new (&u) == 0, "out of memory");
  const char *before = table_text (t, 0);
  int rc = hc_classes_load_text (t, text, size, &err);
  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "load returned %d", rc);
  if (rc < 0) {
    FUZZ_CHECK (strcmp (before, table_text (t, 1)) == 0, "a failed load changed the table");
    FUZZ_CHECK (err.line >= 1 && err.line <= count_lines (text, size) && err.msg[0],
                "failure at line %u of %u: '%s'", err.line, count_lines (text, size), err.msg);
  } else {
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
      struct hc_class_attrs a;
      FUZZ_CHECK (hc_classes_get (t, c, &a) == 0 && hc_class_attrs_check (&a) == 0,
                  "class %u out of range after a load", c);
    }
    const char *after = table_text (t, 1);
    FUZZ_CHECK (hc_classes_load_text (u, after, strlen (after), &err) == 0,
                "the formatted table does not load: line %u: %s", err.line, err.msg);
    FUZZ_CHECK (strcmp (after, table_text (u, 2)) == 0, "format → load does not round-trip");
    FUZZ_CHECK (hc_classes_load_text (t, text, size, &err) == 0
                    && strcmp (after, table_text (t, 2)) == 0,
                "loading the same text twice is not idempotent");
  }
  char *copy = fuzz_strdup (data, size);
  check_set_key (t, copy);
  free (copy);
  hc_classes_free (t);
  hc_classes_free (u);
  return 0;
}
