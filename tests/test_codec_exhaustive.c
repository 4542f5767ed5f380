/* Every possible wire value of the small transports, and large samples of
 * the wide ones, through the decoders: no crash (the sanitizer build runs
 * this too), -EINVAL with a reason exactly for the invalid ones, and the
 * results of rfc2014 and ioprio checked against independent computations
 * from the bit layouts. */
#include <errno.h>
#include <string.h>

#include "hintcache/codec.h"
#include "test.h"

static int
decode1 (const char *codec, const hc_profile *p, uint64_t v, struct hc_hint *h, char *why)
{
  struct hc_wire w = { .n = 1, .v = { v } };
  why[0] = '\0';
  return hc_codec_decode (hc_codec_find (codec), p, &w, HC_DIR_ANY, h, why, 256);
}

/* rfc2014: all 65,536 ioprio values. */
static void
test_rfc2014 (void)
{
  unsigned counts[8] = { 0 }, invalid = 0;

  for (uint32_t v = 0; v < 0x10000; v++) {
    struct hc_hint h;
    char why[256];
    unsigned adv = ((v >> 11) & 1) | ((v >> 12) & 1) << 1 | ((v >> 15) & 1) << 2;
    int rc = decode1 ("rfc2014", NULL, v, &h, why);
    if (adv >= 4 && adv <= 6) {
      CHECK (rc == -EINVAL && strstr (why, "reserved"), "0x%04x: reserved advice %u", v, adv);
      invalid++;
    } else {
      CHECK (rc == 0 && h.advice == adv && h.cls == 0 && h.flags == 0, "0x%04x: advice %u", v,
             adv);
      counts[adv]++;
    }
  }
  /* Each of the 8 advice values owns 1/8 of the space. */
  CHECK (invalid == 3 * 8192, "invalid %u", invalid);
  CHECK (counts[0] == 8192 && counts[2] == 8192 && counts[7] == 8192, "counts");
}

/* ioprio: all 65,536 values against the uapi layout and the kernel's rules. */
static void
test_ioprio (void)
{
  unsigned rfc_notes = 0;

  for (uint32_t v = 0; v < 0x10000; v++) {
    struct hc_hint h;
    char why[256];
    unsigned cls = v >> 13, hint = (v >> 3) & 0x3ff, level = v & 7;
    int rc = decode1 ("ioprio", NULL, v, &h, why);
    bool rfc_bits = (v & 0x9800) != 0;

    if (cls >= 4 || (cls == 0 && level != 0)) {
      CHECK (rc == -EINVAL && why[0], "0x%04x: rejected by the kernel", v);
      continue;
    }
    CHECK (rc == 0, "0x%04x: valid (%s)", v, why);
    unsigned want = cls == 0 ? HC_CLASS_UNCLASSIFIED
                    : cls == 1 ? HC_CLASS_TRANSACTION
                    : cls == 3 ? HC_CLASS_BACKGROUND
                    : level < 4 ? HC_CLASS_METADATA : HC_CLASS_DATA;
    CHECK (h.cls == want && h.advice == 0, "0x%04x: class %u, want %u", v, h.cls, want);
    /* Undefined hints are noted; the RFC's bits are named when present. */
    CHECK ((hint > 7) == (why[0] != '\0'), "0x%04x: note '%s'", v, why);
    if (hint > 7 && rfc_bits) {
      CHECK (strstr (why, "RFC") != NULL, "0x%04x: RFC collision named", v);
      rfc_notes++;
    }
  }
  CHECK (rfc_notes > 0, "some values collide with the RFC");
}

/* What a decoder answers is faithful: re-encoding it and decoding again
 * lands on the same wire value (encode ∘ decode ∘ encode = encode on every
 * decoded hint), and the hint is valid.  A decoded hint may differ from the
 * second decode only where the transport cannot tell them apart. */
static void
check_stable (const char *codec, const hc_profile *p, const struct hc_wire *w)
{
  const hc_codec *c = hc_codec_find (codec);
  struct hc_hint h, h2;
  struct hc_wire e;
  char why[256] = "";

  int rc = hc_codec_decode (c, p, w, HC_DIR_ANY, &h, why, sizeof why);
  if (rc < 0) {
    CHECK (rc == -EINVAL && why[0], "%s 0x%llx: error without reason", codec,
           (unsigned long long) w->v[0]);
    return;
  }
  CHECK (hc_hint_check (h) == 0, "%s: valid hint", codec);
  for (unsigned d = HC_DIR_ANY; d <= HC_DIR_WRITE; d++) {
    struct hc_wire e2;
    CHECK (hc_codec_encode (c, p, h, d, &e) == 0, "encode");
    CHECK (hc_codec_decode (c, p, &e, d, &h2, NULL, 0) == 0, "%s: re-decode", codec);
    CHECK (hc_codec_encode (c, p, h2, d, &e2) == 0 && e2.n == e.n
           && memcmp (e2.v, e.v, e.n * sizeof e.v[0]) == 0,
           "%s 0x%llx dir %u: decoded hint does not re-encode faithfully", codec,
           (unsigned long long) w->v[0], d);
  }
}

int
main (void)
{
  hc_profile *p, *q;
  struct hc_wire w;

  test_rfc2014 ();
  test_ioprio ();

  hc_profile_new (&p);
  hc_profile_new (&q);
  hc_profile_set (q, "ata.max_priority", "5");
  hc_profile_set (q, "ata.max_priority_behavior", "1");
  hc_profile_set (q, "nvme.placements", "7");

  for (uint64_t v = 0; v < 0x10000; v++) { /* rfc2014, ioprio: stability */
    w = (struct hc_wire) { .n = 1, .v = { v } };
    check_stable ("rfc2014", p, &w);
    check_stable ("ioprio", p, &w);
  }
  for (uint64_t v = 0; v < 256; v++) { /* ata: every byte, two profiles */
    w = (struct hc_wire) { .n = 1, .v = { v } };
    check_stable ("ata", p, &w);
    check_stable ("ata", q, &w);
  }
  for (uint64_t v = 0; v < 0x1000; v++) { /* nfs42: every defined bitmap and then some */
    w = (struct hc_wire) { .n = 1, .v = { v } };
    check_stable ("nfs42", p, &w);
  }
  for (uint64_t v = 0; v < 0x10000; v++) { /* nvme: every DSM byte and reserved byte */
    w = (struct hc_wire) { .n = 1, .v = { v } };
    check_stable ("nvme", p, &w);
    check_stable ("nvme", q, &w);
    w.v[0] = v | (v % 11) << 16; /* DSPEC 0 … 10 */
    check_stable ("nvme", q, &w);
  }
  for (uint64_t v = 0; v < 64; v++) { /* rwh and scsi groups */
    w = (struct hc_wire) { .n = 1, .v = { v } };
    check_stable ("rwh", p, &w);
    check_stable ("scsi", p, &w);
  }
  for (uint64_t a = 0; a < 10; a++) /* fadvise: every pair and triple of calls */
    for (uint64_t b = 0; b < 10; b++)
      for (uint64_t c = 0; c < 10; c++) {
        w = (struct hc_wire) { .n = 3, .v = { a, b, c } };
        check_stable ("fadvise", p, &w);
        w.n = 2;
        check_stable ("fadvise", p, &w);
      }
  /* scsi: every value of descriptor bytes 0, 4, 5 and 6 in turn. */
  for (unsigned byte = 0; byte < 7; byte++)
    for (unsigned v = 0; v < 256; v++) {
      w = (struct hc_wire) { .n = 1, .v = { 40 }, .nbytes = 16 };
      w.bytes[byte] = (uint8_t) v;
      check_stable ("scsi", p, &w);
    }
  /* Wide values: a pseudo-random sample of all 64 bits. */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (unsigned i = 0; i < 200000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    for (unsigned ci = 0; ci < HC_CODEC_COUNT; ci++) {
      const hc_codec *c = hc_codec_get (ci);
      struct hc_hint h;
      w = (struct hc_wire) { .n = 1, .v = { x >> (i % 64) } };
      int rc = hc_codec_decode (c, p, &w, (enum hc_dir) (i % 3), &h, NULL, 0);
      CHECK (rc == 0 || rc == -EINVAL, "%s: rc %d", hc_codec_name (c), rc);
    }
  }
  /* Malformed wires are rejected at the door. */
  w = (struct hc_wire) { .n = 2 };
  struct hc_hint h;
  char why[128];
  CHECK (hc_codec_decode (hc_codec_find ("ata"), p, &w, 0, &h, why, sizeof why) == -EINVAL
         && strstr (why, "at most 1 value"), "two values for ata: %s", why);
  w = (struct hc_wire) { .n = 1, .nbytes = 3 };
  CHECK (hc_codec_decode (hc_codec_find ("scsi"), p, &w, 0, &h, why, sizeof why) == -EINVAL,
         "short descriptor");
  w = (struct hc_wire) { .n = 0 };
  for (unsigned ci = 0; ci < HC_CODEC_COUNT; ci++)
    if (ci != HC_CODEC_FADVISE) {
      why[0] = '\0';
      CHECK (hc_codec_decode (hc_codec_get (ci), p, &w, 0, &h, why, sizeof why) == -EINVAL
             && strstr (why, "got none"), "%s: no value: %s", hc_codec_name (hc_codec_get (ci)),
             why);
    }
  w = (struct hc_wire) { .n = 5 };
  CHECK (hc_codec_decode (hc_codec_find ("fadvise"), p, &w, 0, &h, NULL, 0) == -EINVAL, "n > 4");
  CHECK (hc_codec_decode (hc_codec_find ("rwh"), p, &w, 7, &h, NULL, 0) == -EINVAL, "bad dir");

  hc_profile_free (p);
  hc_profile_free (q);
  return test_exit ("test_codec_exhaustive");
}
