/* The hint model's vocabulary: names, checking, packing, parsing and
 * formatting of hints. */
#include <errno.h>
#include <string.h>

#include "hintcache/hint.h"
#include "test.h"

static void
test_names (void)
{
  static const char *const classes[] = {
    "unclassified", "metadata", "journal", "transaction", "data", "paging", "streaming",
    "background",
  };
  enum hc_class c;
  enum hc_advice a;

  /* Stable ids: the order is part of the on-disk and wire format. */
  for (unsigned i = 0; i < HC_CLASS_COUNT; i++) {
    CHECK (strcmp (hc_class_name (i), classes[i]) == 0, "class %u", i);
    CHECK (hc_class_parse (classes[i], &c) == 0 && c == i, "parse %s", classes[i]);
  }
  CHECK (hc_class_name (HC_CLASS_COUNT) == NULL, "class out of range");
  CHECK (hc_class_parse ("Metadata", &c) == -EINVAL, "names are exact");
  CHECK (hc_class_parse ("", &c) == -EINVAL, "empty class");

  /* The RFC's advice values. */
  CHECK (HC_ADVICE_NONE == 0 && HC_ADVICE_EVICT == 1 && HC_ADVICE_DONTNEED == 2
         && HC_ADVICE_NORMAL == 3 && HC_ADVICE_WILLNEED == 7, "advice values");
  for (unsigned v = 4; v <= 6; v++)
    CHECK (hc_advice_name (v) == NULL, "reserved advice %u has no name", v);
  CHECK (hc_advice_name (8) == NULL, "advice 8");
  CHECK (hc_advice_parse ("willneed", &a) == 0 && a == 7, "willneed");
  CHECK (hc_advice_parse ("reserved1", &a) == -EINVAL, "reserved by name");
  CHECK (strcmp (hc_flag_name (HC_HINT_SEQUENTIAL), "sequential") == 0, "flag name");
  CHECK (hc_flag_name (HC_HINT_SEQUENTIAL | HC_HINT_RANDOM) == NULL, "one flag only");
  CHECK (strcmp (hc_layer_name (HC_LAYER_PROCESS), "process") == 0, "layer name");
}

static void
test_check_and_pack (void)
{
  struct hc_hint h = { .cls = HC_CLASS_METADATA, .advice = HC_ADVICE_WILLNEED,
                       .flags = HC_HINT_SEQUENTIAL };
  struct hc_hint out;

  CHECK (sizeof (struct hc_hint) == 4, "a hint is 4 bytes");
  CHECK (hc_hint_check (h) == 0, "valid hint");
  /* Stable packed layout: class 7:0, advice 15:8, flags 31:16. */
  CHECK_EQ (hc_hint_pack (h), 0x00010701u, "packed %#x", hc_hint_pack (h));
  CHECK (hc_hint_unpack (0x00010701u, &out) == 0 && out.cls == 1 && out.advice == 7
         && out.flags == HC_HINT_SEQUENTIAL, "unpack");

  for (unsigned v = 4; v <= 6; v++) {
    struct hc_hint r = { .advice = v };
    out = (struct hc_hint) { .cls = 5 };
    CHECK (hc_hint_check (r) == -EINVAL, "reserved advice %u rejected by check", v);
    CHECK (hc_hint_unpack (v << 8, &out) == -EINVAL && out.cls == 5,
           "reserved advice %u rejected by unpack, output untouched", v);
  }
  CHECK (hc_hint_check ((struct hc_hint) { .cls = 8 }) == -EINVAL, "class 8");
  CHECK (hc_hint_check ((struct hc_hint) { .advice = 8 }) == -EINVAL, "advice 8");
  CHECK (hc_hint_check ((struct hc_hint) { .flags = 0x40 }) == -EINVAL, "unknown flag");
  CHECK (hc_hint_check ((struct hc_hint) { .flags = HC_HINT_PATTERN }) == -EINVAL,
         "sequential and random together");

  /* Every valid packed value round-trips; every other one is rejected. */
  unsigned valid = 0;
  for (uint32_t cls = 0; cls < 10; cls++)
    for (uint32_t adv = 0; adv < 10; adv++)
      for (uint32_t fl = 0; fl < 0x80; fl++) {
        uint32_t p = cls | adv << 8 | fl << 16;
        bool ok = cls < 8 && (adv <= 3 || adv == 7) && fl < 0x40 && (fl & 3) != 3;
        int rc = hc_hint_unpack (p, &out);
        CHECK (rc == (ok ? 0 : -EINVAL), "unpack %#x", p);
        if (ok && rc == 0) {
          valid++;
          CHECK (hc_hint_pack (out) == p, "repack %#x", p);
        }
      }
  CHECK_EQ (valid, 8u * 5 * 48, "valid packed hints: %u", valid);
}

static void
test_parse_format (void)
{
  static const struct {
    const char *text;
    int rc;
    struct hc_hint h;
    const char *formatted;
  } cases[] = {
    { "metadata", 0, { 1, 0, 0 }, "metadata" },
    { "willneed", 0, { 0, 7, 0 }, "willneed" },
    { "background+dontneed", 0, { 7, 2, 0 }, "background+dontneed" },
    { "dontneed,background", 0, { 7, 2, 0 }, "background+dontneed" },
    { "streaming sequential", 0, { 6, 0, HC_HINT_SEQUENTIAL }, "streaming+sequential" },
    { "  journal\tsync  ", 0, { 2, 0, HC_HINT_SYNC }, "journal+sync" },
    { "", 0, { 0, 0, 0 }, "none" },
    { "none", 0, { 0, 0, 0 }, "none" },
    { "unclassified+none", 0, { 0, 0, 0 }, "none" },
    { "metadata+journal", -EINVAL, { 0 }, NULL },
    { "evict+willneed", -EINVAL, { 0 }, NULL },
    { "sequential+random", -EINVAL, { 0 }, NULL },
    { "sync+sync", -EINVAL, { 0 }, NULL },
    { "hot", -EINVAL, { 0 }, NULL },
    { "4", -EINVAL, { 0 }, NULL },
    { "METADATA", -EINVAL, { 0 }, NULL },
    { "averyveryveryverylongwordthatdoesnotfit", -EINVAL, { 0 }, NULL },
  };
  char buf[96];

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct hc_hint h = { 9, 9, 9 };
    int rc = hc_hint_parse (cases[i].text, &h);
    CHECK (rc == cases[i].rc, "parse '%s' gives %d", cases[i].text, rc);
    if (rc == 0) {
      CHECK (h.cls == cases[i].h.cls && h.advice == cases[i].h.advice
             && h.flags == cases[i].h.flags, "parse '%s'", cases[i].text);
      CHECK (hc_hint_format (h, buf, sizeof buf) == (int) strlen (cases[i].formatted)
             && strcmp (buf, cases[i].formatted) == 0, "format '%s' gives '%s'",
             cases[i].text, buf);
    } else
      CHECK (h.cls == 9, "failed parse leaves output alone");
  }

  /* Format/parse round trip of every valid hint, and truncation. */
  for (uint32_t p = 0; p < 0x400000; p++) {
    struct hc_hint h, back;
    if ((p & 0xf8f8) || hc_hint_unpack (p, &h) < 0)
      continue;
    int n = hc_hint_format (h, buf, sizeof buf);
    CHECK (n > 0 && (size_t) n < sizeof buf, "format length");
    CHECK (hc_hint_parse (buf, &back) == 0 && hc_hint_pack (back) == p, "round trip '%s'", buf);
  }
  struct hc_hint big = { HC_CLASS_TRANSACTION, HC_ADVICE_WILLNEED, HC_HINT_SEQUENTIAL | HC_HINT_SYNC };
  char small[8];
  int need = hc_hint_format (big, small, sizeof small);
  CHECK (need == (int) strlen ("transaction+willneed+sequential+sync") && strlen (small) == 7,
         "truncated format reports the length needed (%d, '%s')", need, small);
  CHECK (hc_hint_format ((struct hc_hint) { .advice = 5 }, buf, sizeof buf) == -EINVAL,
         "format rejects reserved advice");
}

/* Mutants of hint texts: each parses into a valid hint or is refused. */
static void
test_parse_mutants (void)
{
  static const char *const seeds[] = { "metadata+willneed", "background+dontneed+sequential",
                                       "streaming sequential", "transaction,willneed,sync" };
  unsigned parsed = 0;

  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
    for (unsigned m = 0; m < 2000; m++) {
      unsigned char buf[128];
      size_t len = strlen (seeds[i]), n;
      struct hc_hint h;
      memcpy (buf, seeds[i], len);
      n = test_mutate (buf, len, sizeof buf - 1);
      buf[n] = '\0';
      if (hc_hint_parse ((const char *) buf, &h) == 0) {
        parsed++;
        CHECK (hc_hint_check (h) == 0, "'%s' parsed into an invalid hint", buf);
      }
    }
  CHECK (parsed > 0, "some hint mutants still parse");
}

int
main (void)
{
  test_names ();
  test_check_and_pack ();
  test_parse_format ();
  test_parse_mutants ();
  return test_exit ("test_hint_model");
}
