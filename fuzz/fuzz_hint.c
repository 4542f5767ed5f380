/* Fuzzes the hint texts: hc_hint_parse on any text (as written in range
 * hints, rules, export names and the CLI), and hc_hint_unpack on the
 * 32-bit packed form read from disk and the wire.
 *
 * Beyond not crashing:
 *   - a text that parses gives a hint passing hc_hint_check, which
 *     hc_hint_format writes and hc_hint_parse reads back as the same hint
 *     (parse → format → parse round-trips), and formatting is stable;
 *   - the text's words, each parsed alone, agree with the whole: a word
 *     that is a class name parses to that class (hc_class_parse), an
 *     advice name to that advice;
 *   - the first four bytes, unpacked, either fail or give a valid hint
 *     that packs back to the same value;
 *   - hc_hint_resolve over five layers of valid hints from the input gives
 *     a valid hint whose class, advice and pattern come from the layers
 *     its origin names.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hintcache/hint.h"

/* The text round trip. */
static void
check_text (const char *text)
{
  struct hc_hint h, back;
  char buf[256], again[256];
  int rc = hc_hint_parse (text, &h);

  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "parse returned %d", rc);
  if (rc < 0)
    return;
  FUZZ_CHECK (hc_hint_check (h) == 0, "'%s' parsed to an invalid hint", text);
  int n = hc_hint_format (h, buf, sizeof buf);
  FUZZ_CHECK (n > 0 && (size_t) n < sizeof buf, "format gave %d", n);
  FUZZ_CHECK (hc_hint_parse (buf, &back) == 0, "'%s' (formatted from '%s') does not parse", buf,
              text);
  FUZZ_CHECK (back.cls == h.cls && back.advice == h.advice && back.flags == h.flags,
              "'%s' → '%s' does not round-trip", text, buf);
  FUZZ_CHECK (hc_hint_format (back, again, sizeof again) == n && strcmp (buf, again) == 0,
              "formatting '%s' is not stable", buf);

  /* Class and advice names, word by word. */
  for (const char *p = text; *p;) {
    size_t k = strcspn (p, "+, \t");
    char word[64];
    enum hc_class c;
    enum hc_advice a;
    if (k > 0 && k < sizeof word) {
      memcpy (word, p, k);
      word[k] = '\0';
      if (hc_class_parse (word, &c) == 0)
        FUZZ_CHECK (h.cls == c && strcmp (hc_class_name (c), word) == 0, "class word '%s'", word);
      if (hc_advice_parse (word, &a) == 0)
        FUZZ_CHECK (h.advice == a && strcmp (hc_advice_name (a), word) == 0,
                    "advice word '%s'", word);
    }
    p += k + (p[k] != '\0');
  }
}

/* The packed form, and resolution over layers made of the input. */
static void
check_packed (const uint8_t *data, size_t size)
{
  struct fuzz_in in = { data, size };
  struct hc_hint layer[HC_LAYER_COUNT] = { { 0 } }, h;
  uint32_t v = (uint32_t) fuzz_take (&in, 4);
  int rc = hc_hint_unpack (v, &h);

  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "unpack returned %d", rc);
  if (rc == 0)
    FUZZ_CHECK (hc_hint_check (h) == 0 && hc_hint_pack (h) == v, "0x%08x does not repack", v);
  for (unsigned i = 0; i < HC_LAYER_COUNT; i++)
    if (hc_hint_unpack ((uint32_t) fuzz_take (&in, 4), &h) == 0)
      layer[i] = h;
  struct hc_hint_origin o;
  struct hc_hint r = hc_hint_resolve (layer, &o);
  FUZZ_CHECK (hc_hint_check (r) == 0, "resolved hint is invalid");
  FUZZ_CHECK (o.cls == HC_LAYER_COUNT ? r.cls == 0 : r.cls == layer[o.cls].cls,
              "class from layer %u", o.cls);
  FUZZ_CHECK (o.advice == HC_LAYER_COUNT ? r.advice == 0 : r.advice == layer[o.advice].advice,
              "advice from layer %u", o.advice);
  FUZZ_CHECK (o.pattern == HC_LAYER_COUNT
                  ? (r.flags & HC_HINT_PATTERN) == 0
                  : (r.flags & HC_HINT_PATTERN) == (layer[o.pattern].flags & HC_HINT_PATTERN),
              "pattern from layer %u", o.pattern);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *text = fuzz_strdup (data, size);

  check_text (text);
  free (text);
  check_packed (data, size);
  return 0;
}
