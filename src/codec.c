/* The codec registry and its one door.
 *
 * Every call into a codec passes through the hc_codec_* functions below,
 * which check the contract (a valid hint going in, a wire of the right shape
 * coming in, a valid hint coming out) so that the codecs themselves trust
 * their arguments.  The registry is a const table indexed by enum
 * hc_codec_id; lookup by name walks it.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "codec.h"

static const struct hc_codec *const registry[HC_CODEC_COUNT] = {
  [HC_CODEC_RFC2014] = &hc_codec_rfc2014,
  [HC_CODEC_IOPRIO]  = &hc_codec_ioprio,
  [HC_CODEC_RWH]     = &hc_codec_rwh,
  [HC_CODEC_FADVISE] = &hc_codec_fadvise,
  [HC_CODEC_NFS42]   = &hc_codec_nfs42,
  [HC_CODEC_NVME]    = &hc_codec_nvme,
  [HC_CODEC_ATA]     = &hc_codec_ata,
  [HC_CODEC_SCSI]    = &hc_codec_scsi,
};

const hc_codec *
hc_codec_get (unsigned id)
{
  return id < HC_CODEC_COUNT ? registry[id] : NULL;
}

const hc_codec *
hc_codec_find (const char *name)
{
  for (unsigned i = 0; i < HC_CODEC_COUNT; i++)
    if (strcmp (registry[i]->name, name) == 0)
      return registry[i];
  return NULL;
}

const char *
hc_codec_name (const hc_codec *c)
{
  return c->name;
}

const char *
hc_codec_title (const hc_codec *c)
{
  return c->title;
}

static const struct hc_profile *
profile_or_default (const hc_profile *p)
{
  return p ? p : &hc_profile_default;
}

int
hc_codec_encode (const hc_codec *c, const hc_profile *p, struct hc_hint h, enum hc_dir dir,
                 struct hc_wire *w)
{
  if (hc_hint_check (h) < 0 || dir > HC_DIR_WRITE)
    return -EINVAL;
  memset (w, 0, sizeof *w);
  c->encode (profile_or_default (p), h, dir, w);
  assert (w->n <= c->max_values);
  assert (w->nbytes == 0 || w->nbytes == HC_WIRE_BYTES);
  for (unsigned i = 0; i < w->n; i++)
    assert (w->v[i] <= c->value_max);
  return 0;
}

/* Checks that a wire has the shape codec c uses; says why not in *why. */
static int
wire_check (const struct hc_codec *c, const struct hc_wire *w, struct hc_sb *why)
{
  /* A transport of one value reads v[0]: a wire without it is not one. */
  if (w->n == 0 && c->max_values == 1) {
    hc_sb_printf (why, "%s carries one value, got none", c->name);
    return -EINVAL;
  }
  if (w->n > c->max_values) {
    hc_sb_printf (why, "%s carries at most %u value%s, got %u", c->name, c->max_values,
                  c->max_values == 1 ? "" : "s", w->n);
    return -EINVAL;
  }
  for (unsigned i = 0; i < w->n; i++)
    if (w->v[i] > c->value_max) {
      hc_sb_printf (why, "%s values are at most 0x%llx, got 0x%llx", c->name,
                    (unsigned long long) c->value_max, (unsigned long long) w->v[i]);
      return -EINVAL;
    }
  if (w->nbytes != 0 && w->nbytes != HC_WIRE_BYTES) {
    hc_sb_printf (why, "a descriptor has %d bytes, got %u", HC_WIRE_BYTES, w->nbytes);
    return -EINVAL;
  }
  return 0;
}

int
hc_codec_decode (const hc_codec *c, const hc_profile *p, const struct hc_wire *w,
                 enum hc_dir dir, struct hc_hint *h, char *why, size_t whylen)
{
  struct hc_sb sb;
  struct hc_hint out = { 0 };
  int rc;

  hc_sb_init (&sb, why, whylen);
  if (dir > HC_DIR_WRITE)
    return -EINVAL;
  if ((rc = wire_check (c, w, &sb)) < 0)
    return rc;
  rc = c->decode (profile_or_default (p), w, dir, &out, &sb);
  if (rc < 0) {
    assert (rc == -EINVAL);
    return rc;
  }
  assert (hc_hint_check (out) == 0);
  *h = out;
  return 0;
}

int
hc_codec_describe (const hc_codec *c, const hc_profile *p, const struct hc_wire *w, char *buf,
                   size_t len)
{
  struct hc_sb sb;

  hc_sb_init (&sb, buf, len);
  if (wire_check (c, w, &sb) < 0)
    return -EINVAL;
  c->describe (profile_or_default (p), w, &sb);
  return hc_sb_result (&sb);
}

int
hc_codec_roundtrip (const hc_codec *c, const hc_profile *p, struct hc_hint h, enum hc_dir dir,
                    struct hc_hint *back, unsigned *loss)
{
  struct hc_wire w;
  struct hc_hint b;
  int rc;

  if ((rc = hc_codec_encode (c, p, h, dir, &w)) < 0)
    return rc;
  /* Anything an encoder emits must decode: a failure here is a codec bug. */
  rc = hc_codec_decode (c, p, &w, dir, &b, NULL, 0);
  assert (rc == 0);
  if (rc < 0)
    return rc;
  *back = b;
  *loss = (b.cls != h.cls ? HC_LOSS_CLASS : 0) | (b.advice != h.advice ? HC_LOSS_ADVICE : 0)
          | (b.flags != h.flags ? HC_LOSS_FLAGS : 0);
  return 0;
}

int
hc_wire_parse (const hc_codec *c, const char *text, struct hc_wire *w)
{
  struct hc_wire out = { 0 };
  char num[32];

  for (const char *p = text; *p;) {
    size_t n = strcspn (p, ",");
    unsigned long long v;

    if (n == 0 || n >= sizeof num || out.n == c->max_values)
      return -EINVAL;
    memcpy (num, p, n);
    num[n] = '\0';
    if (hc_parse_number (num, &v) < 0 || v > c->value_max)
      return -EINVAL;
    out.v[out.n++] = v;
    p += n;
    if (*p == ',' && *++p == '\0')
      return -EINVAL;
  }
  if (out.n == 0 && c->max_values == 1)
    return -EINVAL;
  *w = out;
  return 0;
}

int
hc_wire_format (const hc_codec *c, const struct hc_wire *w, char *buf, size_t len)
{
  struct hc_sb sb;

  hc_sb_init (&sb, buf, len);
  for (unsigned i = 0; i < w->n; i++)
    hc_sb_printf (&sb, c->hex ? "%s0x%llx" : "%s%llu", i ? "," : "",
                  (unsigned long long) w->v[i]);
  return hc_sb_result (&sb);
}
