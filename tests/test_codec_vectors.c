/* Golden vectors for every codec, taken from the reference (hint-standards
 * §1, §2.3, §4.3, §5.1, §6, §7) and checked against the kernel headers:
 * what each wire value decodes to, and what each hint encodes to. */
#include <errno.h>
#include <string.h>

#include "hintcache/codec.h"
#include "test.h"

#define E (-EINVAL)

/* A profile given as "key=value,key=value" ("" for the default). */
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
    if (hc_profile_set (p, kv, eq + 1) < 0)
      fprintf (stderr, "bad profile key %s\n", kv);
  }
  return p;
}

static bool
parse_hex (const char *s, uint8_t *out)
{
  if (strlen (s) != 32)
    return false;
  for (int i = 0; i < 16; i++) {
    unsigned v;
    if (sscanf (s + 2 * i, "%2x", &v) != 1)
      return false;
    out[i] = (uint8_t) v;
  }
  return true;
}

static const struct decode_vector {
  const char *codec, *profile;
  enum hc_dir dir;
  const char *wire, *descriptor;
  int rc;
  const char *hint; /* expected, as hc_hint_format writes it */
  const char *note; /* a word the note or reason must contain, or NULL */
} decodes[] = {
  /* rfc2014: advice bit 0 → ioprio bit 11, bit 1 → 12, bit 2 → 15. */
  { "rfc2014", "", 0, "0x5000", NULL, 0, "dontneed", NULL }, /* ionice -c2 -n4096 */
  { "rfc2014", "", 0, "0x4800", NULL, 0, "evict", NULL },    /* -n2048 */
  { "rfc2014", "", 0, "0x5800", NULL, 0, "normal", NULL },   /* -n6144 */
  { "rfc2014", "", 0, "0xd800", NULL, 0, "willneed", NULL },
  { "rfc2014", "", 0, "0", NULL, 0, "none", NULL },
  { "rfc2014", "", 0, "0x4007", NULL, 0, "none", NULL },     /* level bits are not advice */
  { "rfc2014", "", 0, "0x1000", NULL, 0, "dontneed", NULL }, /* no class bits needed */
  { "rfc2014", "", 0, "0x8000", NULL, E, NULL, "RESERVED1" },
  { "rfc2014", "", 0, "0x8800", NULL, E, NULL, "RESERVED2" },
  { "rfc2014", "", 0, "0x9000", NULL, E, NULL, "RESERVED3" },
  /* ioprio: class 15:13, hint 12:3, level 2:0. */
  { "ioprio", "", 0, "0", NULL, 0, "none", NULL },
  { "ioprio", "", 0, "0x2004", NULL, 0, "transaction", NULL }, /* RT 4 */
  { "ioprio", "", 0, "0x2000", NULL, 0, "transaction", NULL }, /* RT 0 */
  { "ioprio", "", 0, "0x4000", NULL, 0, "metadata", NULL },    /* BE 0 */
  { "ioprio", "", 0, "0x4003", NULL, 0, "metadata", NULL },
  { "ioprio", "", 0, "0x4004", NULL, 0, "data", NULL },        /* BE 4 */
  { "ioprio", "", 0, "0x4007", NULL, 0, "data", NULL },
  { "ioprio", "", 0, "0x6007", NULL, 0, "background", NULL },  /* ionice -c3 */
  { "ioprio", "", 0, "0x6000", NULL, 0, "background", NULL },
  { "ioprio", "", 0, "0x4008", NULL, 0, "metadata", NULL },    /* CDL hint 1 */
  { "ioprio", "", 0, "0x5000", NULL, 0, "metadata", "RFC" },   /* the RFC's dontneed: hint 512 */
  { "ioprio", "", 0, "0x4800", NULL, 0, "metadata", "evict" },
  { "ioprio", "", 0, "0x8000", NULL, E, NULL, "undefined" },   /* class 4 */
  { "ioprio", "", 0, "0xd800", NULL, E, NULL, "RFC" },         /* RFC willneed: class 6 */
  { "ioprio", "", 0, "0xe000", NULL, E, NULL, "IOPRIO_CLASS_INVALID" },
  { "ioprio", "", 0, "0x0001", NULL, E, NULL, "level" },       /* class none takes no level */
  /* rwh: NOT_SET 0, NONE 1, SHORT 2, MEDIUM 3, LONG 4, EXTREME 5. */
  { "rwh", "", 0, "0", NULL, 0, "none", NULL },
  { "rwh", "", 0, "1", NULL, 0, "none", "NONE" },
  { "rwh", "", 0, "2", NULL, 0, "metadata", NULL },
  { "rwh", "", 0, "3", NULL, 0, "transaction", NULL },
  { "rwh", "", 0, "4", NULL, 0, "streaming", NULL },
  { "rwh", "", 0, "5", NULL, 0, "background", NULL },
  { "rwh", "", 0, "6", NULL, E, NULL, "undefined" },
  /* fadvise: NORMAL 0, RANDOM 1, SEQUENTIAL 2, WILLNEED 3, DONTNEED 4, NOREUSE 5. */
  { "fadvise", "", 0, "", NULL, 0, "none", NULL },
  { "fadvise", "", 0, "0", NULL, 0, "normal", NULL },
  { "fadvise", "", 0, "1", NULL, 0, "transaction", NULL },
  { "fadvise", "", 0, "2", NULL, 0, "sequential", NULL },
  { "fadvise", "", 0, "3", NULL, 0, "willneed", NULL },
  { "fadvise", "", 0, "4", NULL, 0, "dontneed", NULL },
  { "fadvise", "", 0, "5", NULL, 0, "journal", NULL },
  { "fadvise", "", 0, "2,5", NULL, 0, "streaming", NULL },
  { "fadvise", "", 0, "5,2", NULL, 0, "streaming", NULL },
  { "fadvise", "", 0, "5,4", NULL, 0, "background", NULL },
  { "fadvise", "", 0, "1,2", NULL, 0, "sequential", NULL },   /* the last pattern wins */
  { "fadvise", "", 0, "3,4", NULL, 0, "dontneed", NULL },
  { "fadvise", "", 0, "2,3", NULL, 0, "streaming+willneed", NULL },
  { "fadvise", "", 0, "1,3", NULL, 0, "transaction+willneed", NULL },
  { "fadvise", "", 0, "2,4,3", NULL, 0, "streaming+willneed", NULL }, /* the last cache call wins */
  { "fadvise", "", 0, "6", NULL, E, NULL, "s390x" },
  { "fadvise", "", 0, "7", NULL, E, NULL, "s390x" },
  { "fadvise", "", 0, "8", NULL, E, NULL, "undefined" },
  /* nfs42: IO_ADVISE4 value n is bit n. */
  { "nfs42", "", 0, "0", NULL, 0, "none", NULL },
  { "nfs42", "", 0, "0x1", NULL, 0, "normal", NULL },
  { "nfs42", "", 0, "0x10", NULL, 0, "willneed", NULL },
  { "nfs42", "", 0, "0x20", NULL, 0, "willneed", NULL },       /* WILLNEED_OPPORTUNISTIC */
  { "nfs42", "", 0, "0x40", NULL, 0, "dontneed", NULL },
  { "nfs42", "", 0, "0x82", NULL, 0, "streaming", NULL },
  { "nfs42", "", 0, "0xc0", NULL, 0, "background", NULL },
  { "nfs42", "", 0, "0x280", NULL, 0, "journal", NULL },
  { "nfs42", "", 0, "0x18", NULL, 0, "transaction", NULL },
  { "nfs42", "", 0, "0x8", NULL, 0, "paging", NULL },
  { "nfs42", "", 0, "0x2", NULL, 0, "sequential", NULL },
  { "nfs42", "", 0, "0x400", NULL, 0, "none", "INIT_PROXIMITY" },
  { "nfs42", "", 0, "0x50", NULL, 0, "dontneed", "DONTNEED wins" },
  { "nfs42", "", 0, "0x800", NULL, E, NULL, "undefined" },
  { "nfs42", "", 0, "0xa", NULL, E, NULL, "contradict" },
  /* nvme: DSM AF 3:0, AL 5:4, SEQ 6, INCOMPRESSIBLE 7; DSPEC 31:16. */
  { "nvme", "", 0, "0", NULL, 0, "none", NULL },
  { "nvme", "", 0, "0x35", NULL, 0, "metadata", NULL },
  { "nvme", "", 0, "0x74", NULL, 0, "journal", NULL },
  { "nvme", "", HC_DIR_READ, "0x66", NULL, 0, "streaming", NULL },
  { "nvme", "", HC_DIR_WRITE, "0x62", NULL, 0, "streaming", NULL },
  { "nvme", "", 0, "0x62", NULL, 0, "streaming+dontneed", NULL }, /* range advice */
  { "nvme", "", HC_DIR_READ, "0x56", NULL, 0, "background", NULL },
  { "nvme", "", HC_DIR_WRITE, "0x52", NULL, 0, "background", NULL },
  { "nvme", "", 0, "0x2", NULL, 0, "dontneed", NULL },
  { "nvme", "", 0, "0x21", NULL, 0, "normal", NULL },
  { "nvme", "", 0, "0x33", NULL, 0, "willneed", NULL },
  { "nvme", "", 0, "0xb5", NULL, 0, "metadata+incompressible", NULL },
  { "nvme", "", 0, "0x75", NULL, 0, "metadata+sequential", NULL },
  { "nvme", "", HC_DIR_READ, "0x7", NULL, 0, "readahead", NULL },
  { "nvme", "", 0, "0x9", NULL, E, NULL, "reserved" },
  { "nvme", "", 0, "0xf", NULL, E, NULL, "reserved" },
  { "nvme", "", 0, "0x100", NULL, E, NULL, "15:8" },
  { "nvme", "", 0, "0x10035", NULL, 0, "metadata", "DSPEC 1" }, /* no placements: ignored */
  { "nvme", "nvme.placements=8", 0, "0x10035", NULL, 0, "metadata", NULL },
  { "nvme", "nvme.placements=8", 0, "0x30035", NULL, 0, "transaction", NULL },
  { "nvme", "nvme.placements=8", 0, "0x50035", NULL, 0, "paging", NULL },
  { "nvme", "nvme.placements=8", 0, "0x20074", NULL, 0, "journal", NULL },
  { "nvme", "nvme.placements=8", 0, "0x70002", NULL, 0, "background+dontneed", NULL },
  /* ata: VALID bit 5, priority 3:0, M = 15 by default. */
  { "ata", "", 0, "0", NULL, 0, "none", NULL },
  { "ata", "", 0, "0x20", NULL, 0, "evict", NULL },    /* Akers: EVICT → 0x20 */
  { "ata", "", 0, "0x21", NULL, 0, "dontneed", NULL }, /* DONTNEED → 0x21 */
  { "ata", "", 0, "0x2e", NULL, 0, "normal", NULL },   /* NORMAL → M−1 */
  { "ata", "", 0, "0x2f", NULL, 0, "willneed", NULL }, /* WILLNEED → M */
  { "ata", "", 0, "0x25", NULL, 0, "normal", "intermediate" },
  { "ata", "", 0, "0x05", NULL, 0, "none", "VALID" },
  { "ata", "", 0, "0x10", NULL, E, NULL, "reserved" },
  { "ata", "", 0, "0x80", NULL, E, NULL, "reserved" },
  { "ata", "", 0, "0x100", NULL, E, NULL, "at most" },
  { "ata", "ata.max_priority=7", 0, "0x2f", NULL, E, NULL, "maximum level 7" },
  { "ata", "ata.max_priority=7", 0, "0x27", NULL, 0, "willneed", NULL },
  { "ata", "ata.max_priority=7", 0, "0x26", NULL, 0, "normal", NULL },
  { "ata", "ata.max_priority=7,ata.max_priority_behavior=1", 0, "0x26", NULL, 0, "normal", NULL },
  { "ata", "ata.max_priority=7,ata.max_priority_behavior=1", 0, "0x27", NULL, 0, "willneed",
    "may fail" },
  /* scsi: group = class + 8 × slot (none, evict, dontneed, willneed). */
  { "scsi", "", 0, "0", NULL, 0, "none", NULL },
  { "scsi", "", 0, "1", NULL, 0, "metadata", NULL },
  { "scsi", "", 0, "7", NULL, 0, "background", NULL },
  { "scsi", "", 0, "8", NULL, 0, "evict", NULL },
  { "scsi", "", 0, "16", NULL, 0, "dontneed", NULL },
  { "scsi", "", 0, "24", NULL, 0, "willneed", NULL },
  { "scsi", "", 0, "25", NULL, 0, "metadata+willneed", NULL },
  { "scsi", "", 0, "31", NULL, 0, "background+willneed", NULL },
  { "scsi", "", 0, "32", NULL, E, NULL, "outside" },
  { "scsi", "", 0, "64", NULL, E, NULL, "at most" },
  { "scsi", "", 0, "1", "00000000108518000000000000000000", 0, "metadata", NULL },
  /* A descriptor in a group of our layout that holds something else. */
  { "scsi", "", 0, "2", "00000000108518000000000000000000", 0, "metadata", "markup" },
  { "scsi", "", 0, "40", "00000000304a54000000000000000000", 0, "streaming", "markup" },
  { "scsi", "", 0, "40", "00000000804a54000000000000000000", 0, "background", "markup" },
  /* Markup no row of ours produces: read field by field. */
  { "scsi", "", 0, "40", "00000000004000000000000000000000", 0, "dontneed", "markup" },
  { "scsi", "", 0, "40", "00000000000a10000000000000000000", 0, "metadata+sequential", "markup" },
  { "scsi", "", 0, "40", "40000000108518000000000000000000", 0, "none", "invalid" },
  { "scsi", "", 0, "40", "80000000000000000000000000000000", E, NULL, "MODE" },
  { "scsi", "", 0, "40", "00000000010000000000000000000000", E, NULL, "type 1" },
  { "scsi", "", 0, "40", "00000000200000000000000000000000", E, NULL, "RLBSR" },
  { "scsi", "", 0, "40", "00000000000020000000000000000000", E, NULL, "IO CLASS 2" },
  { "scsi", "", 0, "40", "0000000000c000000000000000000000", E, NULL, "11b" },
};

static const struct encode_vector {
  const char *codec, *profile;
  enum hc_dir dir;
  const char *hint;
  const char *wire;       /* as hc_wire_format writes it */
  unsigned actions;
  const char *descriptor; /* scsi */
} encodes[] = {
  { "rfc2014", "", 0, "dontneed", "0x5000", 0, NULL },
  { "rfc2014", "", 0, "evict", "0x4800", 0, NULL },
  { "rfc2014", "", 0, "normal", "0x5800", 0, NULL },
  { "rfc2014", "", 0, "willneed", "0xd800", 0, NULL },
  { "rfc2014", "", 0, "none", "0x4000", 0, NULL },
  { "rfc2014", "", 0, "metadata", "0xd800", 0, NULL },     /* projected to willneed */
  { "rfc2014", "", 0, "journal", "0x5000", 0, NULL },      /* Chinner: journal dontneed */
  { "ioprio", "", 0, "transaction", "0x2004", 0, NULL },
  { "ioprio", "", 0, "metadata", "0x4000", 0, NULL },
  { "ioprio", "", 0, "streaming", "0x4004", 0, NULL },
  { "ioprio", "", 0, "background", "0x6007", 0, NULL },
  { "ioprio", "", 0, "none", "0x0", 0, NULL },
  { "rwh", "", 0, "transaction", "3", 0, NULL },
  { "rwh", "", 0, "streaming", "4", 0, NULL },
  { "rwh", "", 0, "metadata", "2", 0, NULL },
  { "rwh", "", 0, "journal", "2", 0, NULL },
  { "rwh", "", 0, "background", "5", 0, NULL },
  { "rwh", "", 0, "data", "0", 0, NULL },
  { "rwh", "", 0, "dontneed", "4", 0, NULL },
  { "rwh", "", 0, "metadata+willneed", "2", 0, NULL },
  { "fadvise", "", 0, "streaming", "2,5", 0, NULL },
  { "fadvise", "", 0, "background", "5,4", 0, NULL },
  { "fadvise", "", 0, "metadata", "3", 0, NULL },
  { "fadvise", "", 0, "transaction", "1", 0, NULL },
  { "fadvise", "", 0, "data", "0", 0, NULL },
  { "fadvise", "", 0, "paging", "", 0, NULL },
  { "fadvise", "", 0, "streaming+willneed", "2,3", 0, NULL },
  { "fadvise", "", 0, "transaction+sequential+noreuse", "2,5", 0, NULL },
  { "nfs42", "", 0, "transaction", "0x18", 0, NULL },
  { "nfs42", "", 0, "streaming", "0x82", 0, NULL },
  { "nfs42", "", 0, "metadata", "0x10", 0, NULL },
  { "nfs42", "", 0, "journal", "0x280", 0, NULL },
  { "nfs42", "", 0, "paging", "0x8", 0, NULL },
  { "nfs42", "", 0, "data", "0x1", 0, NULL },
  { "nfs42", "", 0, "background", "0xc0", 0, NULL },
  { "nfs42", "", 0, "evict", "0x40", 0, NULL },
  { "nfs42", "", 0, "streaming+dontneed", "0x42", 0, NULL },
  { "nvme", "", 0, "transaction", "0x35", 0, NULL },
  { "nvme", "", 0, "metadata", "0x35", 0, NULL },
  { "nvme", "", 0, "journal", "0x74", 0, NULL },
  { "nvme", "", HC_DIR_READ, "streaming", "0x66", 0, NULL },
  { "nvme", "", HC_DIR_WRITE, "streaming", "0x62", 0, NULL },
  { "nvme", "", HC_DIR_READ, "background", "0x56", 0, NULL },
  { "nvme", "", HC_DIR_WRITE, "background", "0x52", 0, NULL },
  { "nvme", "", 0, "evict", "0x2", 0, NULL },
  { "nvme", "", 0, "dontneed", "0x2", 0, NULL },
  { "nvme", "", 0, "normal", "0x21", 0, NULL },
  { "nvme", "", 0, "willneed", "0x33", 0, NULL },
  { "nvme", "", 0, "metadata+dontneed", "0x32", 0, NULL },
  { "nvme", "", HC_DIR_READ, "data+readahead", "0x7", 0, NULL },
  { "nvme", "", HC_DIR_WRITE, "data+readahead", "0x0", 0, NULL },
  { "nvme", "", 0, "incompressible", "0x80", 0, NULL },
  { "nvme", "nvme.placements=7", 0, "journal", "0x20074", 0, NULL },
  { "nvme", "nvme.placements=6", 0, "journal", "0x74", 0, NULL },
  { "ata", "", 0, "evict", "0x20", HC_WIRE_ACT_HYBRID_EVICT, NULL },
  { "ata", "ata.evict=0", 0, "evict", "0x20", 0, NULL },
  { "ata", "", 0, "dontneed", "0x21", 0, NULL },
  { "ata", "", 0, "normal", "0x2e", 0, NULL },
  { "ata", "", HC_DIR_READ, "willneed", "0x2f", 0, NULL },
  { "ata", "", HC_DIR_ANY, "willneed", "0x2f", HC_WIRE_ACT_CHANGE_RANGE, NULL },
  { "ata", "", HC_DIR_READ, "metadata", "0x2f", 0, NULL },
  { "ata", "", 0, "transaction", "0x2e", 0, NULL },
  { "ata", "", 0, "journal", "0x21", 0, NULL },
  { "ata", "", 0, "data", "0x2e", 0, NULL },
  { "ata", "ata.host_hinted=0", 0, "data", "0x0", 0, NULL },
  { "ata", "", 0, "none", "0x0", 0, NULL },
  { "ata", "", HC_DIR_WRITE, "background", "0x20", HC_WIRE_ACT_HYBRID_EVICT, NULL },
  { "ata", "", HC_DIR_READ, "background", "0x20", 0, NULL },
  { "ata", "ata.max_priority_behavior=1", HC_DIR_READ, "metadata", "0x2e", 0, NULL },
  { "ata", "ata.max_priority=7", HC_DIR_READ, "willneed", "0x27", 0, NULL },
  { "ata", "ata.max_priority=7", 0, "normal", "0x26", 0, NULL },
  { "ata", "", 0, "metadata+dontneed", "0x21", 0, NULL },
  { "scsi", "", 0, "none", "0", 0, "00000000000000000000000000000000" },
  { "scsi", "", 0, "metadata", "1", 0, "00000000108518000000000000000000" },
  { "scsi", "", 0, "journal", "2", 0, "00000000102808000000000000000000" },
  { "scsi", "", 0, "transaction", "3", 0, "00000000108548000000000000000000" },
  { "scsi", "", 0, "paging", "5", 0, "00000000008508000000000000000000" },
  { "scsi", "", 0, "streaming", "6", 0, "00000000304a54000000000000000000" },
  { "scsi", "", 0, "background", "7", 0, "00000000804a54000000000000000000" },
  { "scsi", "", 0, "evict", "8", 0, "00000000004000000000000000000000" },
  { "scsi", "", 0, "metadata+dontneed", "17", 0, "00000000104518000000000000000000" },
  { "scsi", "", 0, "metadata+normal", "1", 0, "00000000108518000000000000000000" },
};

int
main (void)
{
  char why[256], text[96], buf[96];

  for (size_t i = 0; i < sizeof decodes / sizeof decodes[0]; i++) {
    const struct decode_vector *v = &decodes[i];
    const hc_codec *c = hc_codec_find (v->codec);
    hc_profile *p = make_profile (v->profile);
    struct hc_wire w;
    struct hc_hint h = { 0 };

    CHECK (c != NULL, "codec %s", v->codec);
    if (hc_wire_parse (c, v->wire, &w) < 0) {
      /* Values wider than the transport are rejected by the parser; check
       * the decoder rejects them too. */
      w = (struct hc_wire) { .n = 1 };
      unsigned long long x = strtoull (v->wire, NULL, 0);
      w.v[0] = x;
    }
    if (v->descriptor)
      CHECK (parse_hex (v->descriptor, w.bytes) && (w.nbytes = 16), "descriptor %zu", i);
    int rc = hc_codec_decode (c, p, &w, v->dir, &h, why, sizeof why);
    CHECK (rc == v->rc, "decode %s %s: rc %d, want %d (%s)", v->codec, v->wire, rc, v->rc, why);
    if (rc == 0 && v->rc == 0) {
      hc_hint_format (h, text, sizeof text);
      CHECK (strcmp (text, v->hint) == 0, "decode %s %s (%s): got %s, want %s", v->codec,
             v->wire, v->profile, text, v->hint);
    }
    if (v->note)
      CHECK (strstr (why, v->note) != NULL, "decode %s %s: '%s' lacks '%s'", v->codec, v->wire,
             why, v->note);
    else if (rc == 0)
      CHECK (why[0] == '\0', "decode %s %s: unexpected note '%s'", v->codec, v->wire, why);
    hc_profile_free (p);
  }

  for (size_t i = 0; i < sizeof encodes / sizeof encodes[0]; i++) {
    const struct encode_vector *v = &encodes[i];
    const hc_codec *c = hc_codec_find (v->codec);
    hc_profile *p = make_profile (v->profile);
    struct hc_hint h;
    struct hc_wire w;

    CHECK (hc_hint_parse (v->hint, &h) == 0, "hint %s", v->hint);
    CHECK (hc_codec_encode (c, p, h, v->dir, &w) == 0, "encode %s %s", v->codec, v->hint);
    hc_wire_format (c, &w, buf, sizeof buf);
    CHECK (strcmp (buf, v->wire) == 0, "encode %s %s (%s): got %s, want %s", v->codec, v->hint,
           v->profile, buf, v->wire);
    CHECK (w.actions == v->actions, "encode %s %s: actions %#x, want %#x", v->codec, v->hint,
           w.actions, v->actions);
    if (v->descriptor) {
      uint8_t want[16];
      parse_hex (v->descriptor, want);
      CHECK (w.nbytes == 16 && memcmp (w.bytes, want, 16) == 0, "descriptor of %s", v->hint);
    } else
      CHECK (w.nbytes == 0, "no descriptor for %s", v->codec);
    hc_profile_free (p);
  }

  /* Wire text parsing. */
  const hc_codec *fa = hc_codec_find ("fadvise"), *at = hc_codec_find ("ata");
  struct hc_wire w;
  CHECK (hc_wire_parse (fa, "2,5", &w) == 0 && w.n == 2 && w.v[1] == 5, "fadvise list");
  CHECK (hc_wire_parse (fa, "1,2,3,4,5", &w) == -EINVAL, "too many calls");
  CHECK (hc_wire_parse (fa, "2,", &w) == -EINVAL && hc_wire_parse (fa, ",2", &w) == -EINVAL,
         "empty element");
  CHECK (hc_wire_parse (at, "", &w) == -EINVAL, "empty value");
  CHECK (hc_wire_parse (at, "0x100", &w) == -EINVAL, "wider than the byte");
  CHECK (hc_wire_parse (at, "017", &w) == 0 && w.v[0] == 17, "decimal, not octal");
  CHECK (hc_wire_parse (at, "-1", &w) == -EINVAL && hc_wire_parse (at, "0x", &w) == -EINVAL
         && hc_wire_parse (at, " 1", &w) == -EINVAL, "junk");
  CHECK (hc_codec_find ("sata") == NULL && hc_codec_get (HC_CODEC_COUNT) == NULL, "lookup");
  for (unsigned i = 0; i < HC_CODEC_COUNT; i++)
    CHECK (hc_codec_find (hc_codec_name (hc_codec_get (i))) == hc_codec_get (i), "registry %u", i);
  return test_exit ("test_codec_vectors");
}
