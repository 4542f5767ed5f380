/* Fuzzes every codec's decoder on arbitrary wire values, under a device
 * profile made from the input (the default, keys set from text — some out
 * of range — or a SATA Hybrid Information log page), and the wire values'
 * text form (hc_wire_parse).
 *
 * Input: a profile byte, a direction byte, a value count, that many 64-bit
 * values, a descriptor selector and 16 descriptor bytes, the five profile
 * key values, then the rest: the log page (profile byte 2) or wire text.
 *
 * Beyond not crashing, for every codec:
 *   - a wire that decodes gives a hint passing hc_hint_check, and that hint
 *     is faithful: encoded for each direction, decoded again and encoded
 *     once more, it lands on the same wire values (what
 *     test_codec_exhaustive checks on the small transports);
 *   - a wire that does not decode says why; a wire of the right shape is
 *     described, and written as text reads back as the same values;
 *   - a rejected profile key changes nothing;
 *   - wire text that parses formats back to text that parses to the same
 *     values.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "hintcache/codec.h"

static const char *const profile_keys[] = {
  "ata.max_priority", "ata.max_priority_behavior", "ata.host_hinted", "ata.evict",
  "nvme.placements",
};
#define NKEYS (sizeof profile_keys / sizeof profile_keys[0])

/* True if two wires carry the same values. */
static bool
same_values (const struct hc_wire *a, const struct hc_wire *b)
{
  return a->n == b->n && memcmp (a->v, b->v, a->n * sizeof a->v[0]) == 0;
}

/* Decodes w with codec c; on success checks that the hint is faithful. */
static void
check_decode (const hc_codec *c, const hc_profile *p, const struct hc_wire *w, unsigned dir)
{
  const char *name = hc_codec_name (c);
  struct hc_hint h, h2;
  struct hc_wire e, e2;
  char why[256] = "";
  int rc = hc_codec_decode (c, p, w, (enum hc_dir) dir, &h, why, sizeof why);

  FUZZ_CHECK (rc == 0 || rc == -EINVAL, "%s: decode returned %d", name, rc);
  if (rc < 0) {
    FUZZ_CHECK (why[0] || dir > HC_DIR_WRITE, "%s: rejected without a reason", name);
    return;
  }
  FUZZ_CHECK (hc_hint_check (h) == 0, "%s: decoded an invalid hint", name);
  for (unsigned d = HC_DIR_ANY; d <= HC_DIR_WRITE; d++) {
    FUZZ_CHECK (hc_codec_encode (c, p, h, (enum hc_dir) d, &e) == 0, "%s: encode", name);
    FUZZ_CHECK (hc_codec_decode (c, p, &e, (enum hc_dir) d, &h2, NULL, 0) == 0,
                "%s: its own encoding does not decode", name);
    FUZZ_CHECK (hc_codec_encode (c, p, h2, (enum hc_dir) d, &e2) == 0 && same_values (&e, &e2),
                "%s 0x%llx dir %u: the decoded hint does not re-encode faithfully", name,
                (unsigned long long) w->v[0], d);
  }
}

/* Text forms of a wire that has the codec's shape. */
static void
check_text (const hc_codec *c, const hc_profile *p, const struct hc_wire *w)
{
  const char *name = hc_codec_name (c);
  char buf[512];
  struct hc_wire back;
  int n = hc_codec_describe (c, p, w, buf, sizeof buf);

  if (n < 0)
    return; /* not this codec's shape */
  n = hc_wire_format (c, w, buf, sizeof buf);
  FUZZ_CHECK (n >= 0 && (size_t) n < sizeof buf, "%s: format gave %d", name, n);
  if (w->n == 0 && n == 0)
    return; /* "" is no wire where one value is required */
  FUZZ_CHECK (hc_wire_parse (c, buf, &back) == 0 && same_values (w, &back),
              "%s: '%s' does not read back", name, buf);
}

/* Wire text from the input. */
static void
check_wire_text (const hc_codec *c, const char *text)
{
  const char *name = hc_codec_name (c);
  struct hc_wire w, back;
  char buf[512];

  if (hc_wire_parse (c, text, &w) < 0)
    return;
  int n = hc_wire_format (c, &w, buf, sizeof buf);
  FUZZ_CHECK (n >= 0 && (size_t) n < sizeof buf, "%s: format gave %d", name, n);
  FUZZ_CHECK (hc_wire_parse (c, buf, &back) == 0 && same_values (&w, &back),
              "%s: '%s' read as '%s' does not read back", name, text, buf);
}

/* Sets the profile keys from the input; a rejected value changes nothing. */
static void
set_keys (hc_profile *p, struct fuzz_in *in)
{
  for (unsigned i = 0; i < NKEYS; i++) {
    unsigned long before, after;
    char value[24];
    snprintf (value, sizeof value, "%u", (unsigned) fuzz_take (in, i == NKEYS - 1 ? 3 : 1));
    FUZZ_CHECK (hc_profile_get (p, profile_keys[i], &before) == 0, "get %s", profile_keys[i]);
    int rc = hc_profile_set (p, profile_keys[i], value);
    FUZZ_CHECK (hc_profile_get (p, profile_keys[i], &after) == 0, "get %s", profile_keys[i]);
    FUZZ_CHECK (rc == 0 ? after == strtoul (value, NULL, 10) : (rc == -EINVAL && after == before),
                "%s = %s: rc %d, %lu → %lu", profile_keys[i], value, rc, before, after);
  }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct fuzz_in in = { data, size };
  struct hc_wire w = { 0 };
  hc_profile *p = NULL;
  unsigned mode = (unsigned) fuzz_take (&in, 1) % 3, dir = (unsigned) fuzz_take (&in, 1) % 4;

  /* One count past the array: the door must refuse it before reading v[]. */
  w.n = (unsigned) fuzz_take (&in, 1) % (HC_WIRE_VALUES + 2);
  for (unsigned i = 0; i < w.n && i < HC_WIRE_VALUES; i++)
    w.v[i] = fuzz_take (&in, 8);
  unsigned nb = (unsigned) fuzz_take (&in, 1);
  w.nbytes = nb == 0 ? 0 : nb == 1 ? HC_WIRE_BYTES : nb;
  for (unsigned i = 0; i < HC_WIRE_BYTES; i++)
    w.bytes[i] = (uint8_t) fuzz_take (&in, 1);

  if (mode > 0) {
    FUZZ_CHECK (hc_profile_new (&p) == 0, "out of memory");
    set_keys (p, &in);
  }
  if (mode == 2) {
    char why[256] = "";
    unsigned long before, after;
    hc_profile_get (p, "ata.max_priority", &before);
    int rc = hc_profile_load_ata_log (p, in.p, in.n, why, sizeof why);
    hc_profile_get (p, "ata.max_priority", &after);
    FUZZ_CHECK (rc == 0 ? after >= 3 && after <= 15 : rc == -EINVAL && why[0] && after == before,
                "ata log: rc %d '%s', max %lu → %lu", rc, why, before, after);
  }

  char *text = fuzz_strdup (in.p, in.n);
  for (unsigned i = 0; i < HC_CODEC_COUNT; i++) {
    const hc_codec *c = hc_codec_get (i);
    check_decode (c, p, &w, dir);
    check_text (c, p, &w);
    check_wire_text (c, text);
  }
  free (text);
  hc_profile_free (p);
  return 0;
}
