/* Round trips of every class × advice through every codec, in every
 * direction and several device profiles:
 *
 *   - encoding never fails for a valid hint, and always fails for a reserved
 *     advice;
 *   - what an encoder emits always decodes;
 *   - decoding returns a preimage: encode(decode(encode(x))) == encode(x);
 *   - x comes back exactly wherever the transport can express it — listed
 *     per codec below — and hc_codec_roundtrip reports the loss otherwise.
 */
#include <errno.h>
#include <string.h>

#include "hintcache/codec.h"
#include "test.h"

static const uint8_t advices[] = { HC_ADVICE_NONE, HC_ADVICE_EVICT, HC_ADVICE_DONTNEED,
                                   HC_ADVICE_NORMAL, HC_ADVICE_WILLNEED };
static const char *const profiles[] = {
  "", "ata.max_priority=7,ata.max_priority_behavior=1", "ata.host_hinted=0,ata.evict=0",
  "nvme.placements=7", "ata.max_priority=3",
};

static bool
same_wire (const struct hc_wire *a, const struct hc_wire *b)
{
  return a->n == b->n && memcmp (a->v, b->v, a->n * sizeof a->v[0]) == 0
         && a->nbytes == b->nbytes && memcmp (a->bytes, b->bytes, a->nbytes) == 0;
}

static hc_profile *
make_profile (const char *spec)
{
  hc_profile *p;
  char buf[128], *save, *kv;

  hc_profile_new (&p);
  snprintf (buf, sizeof buf, "%s", spec);
  for (kv = strtok_r (buf, ",", &save); kv; kv = strtok_r (NULL, ",", &save)) {
    char *eq = strchr (kv, '=');
    *eq = '\0';
    CHECK (hc_profile_set (p, kv, eq + 1) == 0, "profile %s", kv);
  }
  return p;
}

/* What each transport is known to carry exactly (default profile). */
static bool
expect_exact_class (unsigned codec, unsigned cls, unsigned adv, bool placements)
{
  switch (codec) {
  case HC_CODEC_SCSI:
    return true; /* every class, with or without advice */
  case HC_CODEC_NVME:
    if (placements)
      return true;
    return adv == HC_ADVICE_NONE && cls != HC_CLASS_TRANSACTION && cls != HC_CLASS_PAGING
           && cls != HC_CLASS_DATA;
  case HC_CODEC_IOPRIO:
    return cls != HC_CLASS_JOURNAL && cls != HC_CLASS_PAGING && cls != HC_CLASS_STREAMING;
  case HC_CODEC_RWH:
    return adv == HC_ADVICE_NONE
           && (cls == HC_CLASS_UNCLASSIFIED || cls == HC_CLASS_METADATA
               || cls == HC_CLASS_TRANSACTION || cls == HC_CLASS_STREAMING
               || cls == HC_CLASS_BACKGROUND);
  case HC_CODEC_FADVISE:
    return adv == HC_ADVICE_NONE
           && (cls == HC_CLASS_UNCLASSIFIED || cls == HC_CLASS_TRANSACTION
               || cls == HC_CLASS_JOURNAL || cls == HC_CLASS_STREAMING
               || cls == HC_CLASS_BACKGROUND);
  case HC_CODEC_NFS42:
    return adv == HC_ADVICE_NONE
           && (cls == HC_CLASS_UNCLASSIFIED || cls == HC_CLASS_TRANSACTION
               || cls == HC_CLASS_JOURNAL || cls == HC_CLASS_STREAMING
               || cls == HC_CLASS_PAGING || cls == HC_CLASS_BACKGROUND);
  case HC_CODEC_RFC2014:
  case HC_CODEC_ATA:
    return cls == HC_CLASS_UNCLASSIFIED; /* advice-only transports */
  default:
    return false;
  }
}

static bool
expect_exact_advice (unsigned codec, unsigned cls, unsigned adv)
{
  if (adv == HC_ADVICE_NONE)
    return false; /* checked through the class expectations */
  switch (codec) {
  case HC_CODEC_RFC2014:
  case HC_CODEC_ATA:
    /* the RFC's own advice, end to end; normal beside a class asks for the
     * class's own treatment, which these transports send as its projection */
    return adv != HC_ADVICE_NORMAL || cls == HC_CLASS_UNCLASSIFIED;
  case HC_CODEC_SCSI:
    return adv != HC_ADVICE_NORMAL;
  case HC_CODEC_NVME:
  case HC_CODEC_NFS42:
  case HC_CODEC_FADVISE:
    /* no evict on these transports; bare advice comes back */
    return cls == HC_CLASS_UNCLASSIFIED && adv != HC_ADVICE_EVICT;
  default:
    return false; /* ioprio and rwh do not carry advice */
  }
}

int
main (void)
{
  unsigned exact = 0, lossy = 0;

  for (size_t pi = 0; pi < sizeof profiles / sizeof profiles[0]; pi++) {
    hc_profile *p = make_profile (profiles[pi]);
    bool placements = strstr (profiles[pi], "placements") != NULL;
    bool default_ata = profiles[pi][0] == '\0' || placements;

    for (unsigned ci = 0; ci < HC_CODEC_COUNT; ci++) {
      const hc_codec *c = hc_codec_get (ci);
      for (unsigned d = HC_DIR_ANY; d <= HC_DIR_WRITE; d++)
        for (unsigned cls = 0; cls < HC_CLASS_COUNT; cls++) {
          for (size_t ai = 0; ai < sizeof advices; ai++) {
            struct hc_hint h = { .cls = cls, .advice = advices[ai] }, back, back2;
            struct hc_wire w, w2;
            unsigned loss;
            char why[256];

            CHECK (hc_codec_encode (c, p, h, d, &w) == 0, "encode");
            int rc = hc_codec_decode (c, p, &w, d, &back, why, sizeof why);
            CHECK (rc == 0, "%s: decode of encode(%u,%u) failed: %s", hc_codec_name (c), cls,
                   advices[ai], why);
            if (rc < 0)
              continue;
            /* Canonical preimage. */
            CHECK (hc_codec_encode (c, p, back, d, &w2) == 0 && same_wire (&w, &w2),
                   "%s dir %u profile '%s': decode(encode(%u,%u)) = (%u,%u) encodes differently",
                   hc_codec_name (c), d, profiles[pi], cls, advices[ai], back.cls, back.advice);
            CHECK (hc_codec_decode (c, p, &w2, d, &back2, NULL, 0) == 0
                   && hc_hint_pack (back2) == hc_hint_pack (back), "decode is stable");
            /* Loss report. */
            CHECK (hc_codec_roundtrip (c, p, h, d, &back2, &loss) == 0, "roundtrip");
            CHECK (hc_hint_pack (back2) == hc_hint_pack (back), "roundtrip agrees with decode");
            CHECK (((loss & HC_LOSS_CLASS) != 0) == (back.cls != cls)
                   && ((loss & HC_LOSS_ADVICE) != 0) == (back.advice != advices[ai])
                   && !(loss & HC_LOSS_FLAGS), "%s: loss bits %#x", hc_codec_name (c), loss);
            loss ? lossy++ : exact++;

            /* Expectations for the default device profile. */
            if (!default_ata && (ci == HC_CODEC_ATA))
              continue;
            if (expect_exact_class (ci, cls, advices[ai], placements))
              CHECK (back.cls == cls, "%s dir %u: class %u should travel exactly (got %u)",
                     hc_codec_name (c), d, cls, back.cls);
            if (expect_exact_advice (ci, cls, advices[ai]))
              CHECK (back.advice == advices[ai], "%s dir %u: advice %u with class %u should "
                     "travel exactly (got %u)", hc_codec_name (c), d, advices[ai], cls,
                     back.advice);
          }
          /* Reserved advice is rejected everywhere. */
          for (unsigned r = 4; r <= 6; r++) {
            struct hc_wire w;
            struct hc_hint back;
            unsigned loss;
            CHECK (hc_codec_encode (c, p, (struct hc_hint) { .cls = cls, .advice = r }, d, &w)
                   == -EINVAL, "%s encodes reserved advice %u", hc_codec_name (c), r);
            CHECK (hc_codec_roundtrip (c, p, (struct hc_hint) { .advice = r }, d, &back, &loss)
                   == -EINVAL, "roundtrip of reserved advice");
          }
        }
    }
    hc_profile_free (p);
  }

  /* Flags, where transports have fields for them. */
  static const struct {
    unsigned codec;
    enum hc_dir dir;
    const char *hint;
  } flagged[] = {
    { HC_CODEC_NVME, HC_DIR_READ, "metadata+sequential" },
    { HC_CODEC_NVME, HC_DIR_READ, "readahead" },
    { HC_CODEC_NVME, HC_DIR_WRITE, "journal+incompressible" },
    { HC_CODEC_NFS42, HC_DIR_ANY, "sequential" },
    { HC_CODEC_NFS42, HC_DIR_ANY, "noreuse+random" },
    { HC_CODEC_NFS42, HC_DIR_ANY, "dontneed+noreuse+sequential" },
    { HC_CODEC_FADVISE, HC_DIR_ANY, "sequential" },
    { HC_CODEC_FADVISE, HC_DIR_ANY, "noreuse+random" },
  };
  for (size_t i = 0; i < sizeof flagged / sizeof flagged[0]; i++) {
    struct hc_hint h, back;
    unsigned loss;
    char text[96];
    hc_hint_parse (flagged[i].hint, &h);
    CHECK (hc_codec_roundtrip (hc_codec_get (flagged[i].codec), NULL, h, flagged[i].dir, &back,
                               &loss) == 0, "roundtrip");
    hc_hint_format (back, text, sizeof text);
    CHECK (loss == 0, "%s carries %s exactly (got %s)",
           hc_codec_name (hc_codec_get (flagged[i].codec)), flagged[i].hint, text);
  }
  printf ("round trips: %u exact, %u lossy\n", exact, lossy);
  return test_exit ("test_codec_roundtrip");
}
