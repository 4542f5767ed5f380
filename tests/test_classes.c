/* Per-class attributes: defaults, run-time changes, the config file with
 * line-numbered errors (a bad file changes nothing), and lock-free readers
 * that never see half an update. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hintcache/classes.h"
#include "test.h"

static bool
attrs_equal (const struct hc_class_attrs *a, const struct hc_class_attrs *b)
{
  return a->priority == b->priority && a->admit_read == b->admit_read
         && a->admit_write == b->admit_write && a->pattern == b->pattern
         && a->latency_sensitive == b->latency_sensitive && a->lifetime == b->lifetime
         && a->max_share == b->max_share;
}

static void
test_defaults (hc_classes *t)
{
  struct hc_class_attrs a, d;

  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    CHECK (hc_classes_get (t, c, &a) == 0 && hc_class_defaults (c, &d) == 0, "class %u", c);
    CHECK (attrs_equal (&a, &d), "new table holds the defaults for class %u", c);
    CHECK (hc_class_attrs_check (&d) == 0, "defaults of class %u are in range", c);
  }
  CHECK (hc_classes_get (t, HC_CLASS_COUNT, &a) == -EINVAL, "class out of range");
  CHECK (hc_class_defaults (HC_CLASS_COUNT, &a) == -EINVAL, "defaults out of range");

  /* The shape the seeds ask for: metadata valued, journal and background not. */
  struct hc_class_attrs meta, jour, back, data;
  hc_class_defaults (HC_CLASS_METADATA, &meta);
  hc_class_defaults (HC_CLASS_JOURNAL, &jour);
  hc_class_defaults (HC_CLASS_BACKGROUND, &back);
  hc_class_defaults (HC_CLASS_DATA, &data);
  CHECK (meta.priority > data.priority && data.priority > jour.priority, "priority order");
  CHECK (!jour.admit_read && !back.admit_read && !back.admit_write, "no admission for logs, backups");
  CHECK (back.lifetime == 5 && back.pattern == HC_PATTERN_SEQUENTIAL, "background attributes");
}

static void
test_set (hc_classes *t)
{
  struct hc_class_attrs a, b;
  struct hc_parse_error err;

  hc_classes_get (t, HC_CLASS_PAGING, &a);
  a.priority = 15;
  a.max_share = 0;
  CHECK (hc_classes_set (t, HC_CLASS_PAGING, &a) == 0, "set");
  CHECK (hc_classes_get (t, HC_CLASS_PAGING, &b) == 0 && attrs_equal (&a, &b), "get after set");

  struct hc_class_attrs bad[] = { a, a, a, a };
  bad[0].priority = 16;
  bad[1].lifetime = 6;
  bad[2].max_share = 101;
  bad[3].pattern = (enum hc_pattern) 2;
  for (unsigned i = 0; i < 4; i++) {
    CHECK (hc_classes_set (t, HC_CLASS_PAGING, &bad[i]) == -EINVAL, "bad attrs %u rejected", i);
    hc_classes_get (t, HC_CLASS_PAGING, &b);
    CHECK (attrs_equal (&a, &b), "rejected set changes nothing (%u)", i);
  }
  CHECK (hc_classes_set (t, 8, &a) == -EINVAL, "bad class");

  CHECK (hc_classes_set_key (t, "journal.admit_write", "no", &err) == 0, "set_key bool");
  hc_classes_get (t, HC_CLASS_JOURNAL, &b);
  CHECK (!b.admit_write, "set_key applied");
  CHECK (hc_classes_set_key (t, "journal.priority", "16", &err) == -EINVAL
         && strstr (err.msg, "0 … 15") && err.line == 0, "set_key range: %s", err.msg);
  CHECK (hc_classes_set_key (t, "jornal.priority", "1", &err) == -EINVAL
         && strstr (err.msg, "unknown class 'jornal'"), "set_key class: %s", err.msg);
  CHECK (hc_classes_set_key (t, "journal.prio", "1", &err) == -EINVAL
         && strstr (err.msg, "unknown attribute 'prio'"), "set_key attr: %s", err.msg);
  CHECK (hc_classes_set_key (t, "journal", "1", NULL) == -EINVAL, "set_key without dot, NULL err");
}

static void
test_config (void)
{
  hc_classes *t;
  struct hc_parse_error err;
  struct hc_class_attrs a;
  static const char good[] =
    "# hintcache class attributes\n"
    "\n"
    "metadata.priority    = 13   # keep\n"
    "journal.admit_read   = no\n"
    "journal.admit_write  = YES\n"
    "streaming.pattern    = sequential\n"
    "data.latency_sensitive = on\n"
    "background.max_share = 0\r\n"
    "paging.lifetime=3";

  hc_classes_new (&t);
  CHECK (hc_classes_load_text (t, good, strlen (good), &err) == 0, "good config: %u: %s",
         err.line, err.msg);
  hc_classes_get (t, HC_CLASS_METADATA, &a);
  CHECK (a.priority == 13, "metadata.priority");
  hc_classes_get (t, HC_CLASS_BACKGROUND, &a);
  CHECK (a.max_share == 0, "background.max_share with CRLF");
  hc_classes_get (t, HC_CLASS_PAGING, &a);
  CHECK (a.lifetime == 3, "last line without newline");
  hc_classes_get (t, HC_CLASS_DATA, &a);
  CHECK (a.latency_sensitive, "on");
  /* What the text chose, and only that, is chosen: journal.admit_read = no
   * equals the default and is chosen all the same. */
  CHECK (hc_classes_chosen (t, HC_CLASS_JOURNAL, HC_ATTR_ADMIT_READ)
         && hc_classes_chosen (t, HC_CLASS_METADATA, HC_ATTR_PRIORITY)
         && hc_classes_chosen (t, HC_CLASS_BACKGROUND, HC_ATTR_MAX_SHARE)
         && hc_classes_chosen (t, HC_CLASS_PAGING, HC_ATTR_LIFETIME),
         "chosen attributes");
  CHECK (!hc_classes_chosen (t, HC_CLASS_JOURNAL, HC_ATTR_PRIORITY)
         && !hc_classes_chosen (t, HC_CLASS_BACKGROUND, HC_ATTR_ADMIT_READ)
         && !hc_classes_chosen (t, HC_CLASS_UNCLASSIFIED, HC_ATTR_PRIORITY)
         && !hc_classes_chosen (NULL, HC_CLASS_JOURNAL, HC_ATTR_ADMIT_READ),
         "attributes left at their defaults");
  CHECK (hc_classes_set_key (t, "background.admit_read", "no", &err) == 0
         && hc_classes_chosen (t, HC_CLASS_BACKGROUND, HC_ATTR_ADMIT_READ)
         && !hc_classes_chosen (t, HC_CLASS_BACKGROUND, HC_ATTR_PRIORITY), "a key chooses one");
  CHECK (hc_classes_load_text (t, "bogus", 5, &err) == -EINVAL
         && !hc_classes_chosen (t, HC_CLASS_STREAMING, HC_ATTR_PRIORITY), "a bad text chooses nothing");
  hc_classes_get (t, HC_CLASS_STREAMING, &a);
  hc_classes_set (t, HC_CLASS_STREAMING, &a);
  CHECK (hc_classes_chosen (t, HC_CLASS_STREAMING, HC_ATTR_PRIORITY)
         && hc_classes_chosen (t, HC_CLASS_STREAMING, HC_ATTR_MAX_SHARE), "a set chooses all");

  /* Each bad text: the line and a word of the message; nothing applied. */
  static const struct {
    const char *text;
    unsigned line;
    const char *msg;
  } bad[] = {
    { "metadata.priority = 3\nmetadata.priority = 99\n", 2, "0 … 15" },
    { "\n\n# c\nmetadata.priority 3\n", 4, "expected 'key = value'" },
    { "metadata.priority =\n", 1, "missing value" },
    { " = 3\n", 1, "missing key" },
    { "metadata.priority = 3\nfoo.priority = 1\n", 2, "unknown class 'foo'" },
    { "metadata.speed = 1\n", 1, "unknown attribute 'speed'" },
    { "metadata.pattern = zigzag\n", 1, "random or sequential" },
    { "metadata.admit_read = maybe\n", 1, "yes or no" },
    { "metadata.priority = -1\n", 1, "0 … 15" },
    { "metadata.priority = 3x\n", 1, "0 … 15" },
    { "metadata.max_share = 101\n", 1, "0 … 100" },
    { "metadata.lifetime = 6\n", 1, "0 … 5" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hc_classes *u;
    hc_classes_new (&u);
    memset (&err, 0, sizeof err);
    CHECK (hc_classes_load_text (u, bad[i].text, strlen (bad[i].text), &err) == -EINVAL,
           "bad config %zu accepted", i);
    CHECK (err.line == bad[i].line, "bad config %zu: line %u, want %u", i, err.line, bad[i].line);
    CHECK (strstr (err.msg, bad[i].msg) != NULL, "bad config %zu: message '%s'", i, err.msg);
    for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
      struct hc_class_attrs d;
      hc_classes_get (u, c, &a);
      hc_class_defaults (c, &d);
      CHECK (attrs_equal (&a, &d), "bad config %zu changed class %u", i, c);
    }
    hc_classes_free (u);
  }

  /* A NUL byte and an over-long line are errors, not crashes. */
  static const char nul[] = "metadata.priority = 3\0\n";
  CHECK (hc_classes_load_text (t, nul, sizeof nul - 1, &err) == -EINVAL && err.line == 1,
         "NUL byte");
  char longline[700];
  memset (longline, 'x', sizeof longline);
  CHECK (hc_classes_load_text (t, longline, sizeof longline, &err) == -EINVAL && err.line == 1,
         "long line");

  /* format → load gives the same table. */
  char text[4096];
  int n = hc_classes_format (t, text, sizeof text);
  CHECK (n > 0 && (size_t) n < sizeof text, "format fits");
  hc_classes *v;
  hc_classes_new (&v);
  CHECK (hc_classes_load_text (v, text, (size_t) n, &err) == 0, "formatted text loads");
  for (unsigned c = 0; c < HC_CLASS_COUNT; c++) {
    struct hc_class_attrs x, y;
    hc_classes_get (t, c, &x);
    hc_classes_get (v, c, &y);
    CHECK (attrs_equal (&x, &y), "format/load round trip class %u", c);
  }
  CHECK (hc_classes_format (t, NULL, 0) == n, "format with no buffer reports the length");

  /* Files: missing file gives -ENOENT; a file loads like its text. */
  CHECK (hc_classes_load_file (v, "/nonexistent/hintcache.conf", &err) == -ENOENT, "missing file");
  char path[256];
  snprintf (path, sizeof path, "%s/hc-classes-XXXXXX", test_tmp ());
  int fd = mkstemp (path);
  CHECK (fd >= 0, "mkstemp");
  CHECK (write (fd, "transaction.priority = 2\n", 25) == 25, "write");
  close (fd);
  CHECK (hc_classes_load_file (v, path, &err) == 0, "load file");
  unlink (path);
  hc_classes_get (v, HC_CLASS_TRANSACTION, &a);
  CHECK (a.priority == 2, "file applied");
  unlink (path);
  hc_classes_free (v);
  hc_classes_free (t);
}

/* Readers racing a writer that flips a class between two attribute sets must
 * always see one of the two sets, never a mix. */
static hc_classes *race_table;
static atomic_bool race_stop;
static const struct hc_class_attrs set_a = { 1, true, false, HC_PATTERN_RANDOM, true, 1, 10 };
static const struct hc_class_attrs set_b = { 14, false, true, HC_PATTERN_SEQUENTIAL, false, 5, 90 };
static atomic_uint race_torn;

static void *
race_reader (void *arg)
{
  (void) arg;
  while (!atomic_load (&race_stop)) {
    struct hc_class_attrs a;
    hc_classes_get (race_table, HC_CLASS_DATA, &a);
    if (!attrs_equal (&a, &set_a) && !attrs_equal (&a, &set_b))
      atomic_fetch_add (&race_torn, 1);
  }
  return NULL;
}

static void
test_race (void)
{
  pthread_t th[2];

  hc_classes_new (&race_table);
  hc_classes_set (race_table, HC_CLASS_DATA, &set_a);
  for (int i = 0; i < 2; i++)
    pthread_create (&th[i], NULL, race_reader, NULL);
  for (int i = 0; i < 200000; i++)
    hc_classes_set (race_table, HC_CLASS_DATA, i & 1 ? &set_a : &set_b);
  atomic_store (&race_stop, true);
  for (int i = 0; i < 2; i++)
    pthread_join (th[i], NULL);
  CHECK (atomic_load (&race_torn) == 0, "%u torn reads", atomic_load (&race_torn));
  hc_classes_free (race_table);
}

/* Mutants of the canonical config text: each applies whole or is refused
 * with a line and a reason, changing nothing. */
static void
test_config_mutants (void)
{
  hc_classes *t, *pristine;
  char text[8192], before[8192], after[8192];
  unsigned applied = 0;

  CHECK (hc_classes_new (&t) == 0 && hc_classes_new (&pristine) == 0, "new");
  CHECK (hc_classes_format (pristine, text, sizeof text) > 0, "format");
  size_t len = strlen (text);
  unsigned char *buf = malloc (2 * len + 64);
  for (unsigned m = 0; m < 2000 && buf; m++) {
    struct hc_parse_error err = { 0 };
    memcpy (buf, text, len);
    size_t n = test_mutate (buf, len, 2 * len + 64);
    hc_classes_format (t, before, sizeof before);
    int rc = hc_classes_load_text (t, (const char *) buf, n, &err);
    hc_classes_format (t, after, sizeof after);
    if (rc == 0)
      applied++;
    else
      CHECK (rc == -EINVAL && err.msg[0] && strcmp (before, after) == 0,
             "mutant %u: rc %d, '%s', changed %d", m, rc, err.msg, strcmp (before, after) != 0);
  }
  free (buf);
  CHECK (applied > 0, "some config mutants still apply");
  hc_classes_free (t);
  hc_classes_free (pristine);
}

int
main (void)
{
  hc_classes *t;

  CHECK (hc_classes_new (&t) == 0, "new");
  test_defaults (t);
  test_set (t);
  hc_classes_free (t);
  hc_classes_free (NULL);
  test_config ();
  test_config_mutants ();
  test_race ();
  return test_exit ("test_classes");
}
