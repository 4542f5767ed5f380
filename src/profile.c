/* Device profiles: what the device behind a transport supports.
 *
 * A profile bounds what a codec may put on the wire — chiefly the ATA
 * maximum hybrid priority level and whether tagging it may fail I/O, which
 * the drive reports in its Hybrid Information log — and what a codec may
 * read back.  Profiles are plain values; the keys are documented in
 * include/hintcache/codec.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

const struct hc_profile hc_profile_default = {
  .ata_max = 15,
  .ata_max_behavior = false,
  .ata_host_hinted = true,
  .ata_evict = true,
  .nvme_placements = 0,
};

/* The profile keys: name, bounds, and where the value lives. */
static const struct profile_key {
  const char *name;
  unsigned long min, max;
  size_t offset;
  bool is_bool;
} keys[] = {
  { "ata.max_priority", 3, 15, offsetof (struct hc_profile, ata_max), false },
  { "ata.max_priority_behavior", 0, 1, offsetof (struct hc_profile, ata_max_behavior), true },
  { "ata.host_hinted", 0, 1, offsetof (struct hc_profile, ata_host_hinted), true },
  { "ata.evict", 0, 1, offsetof (struct hc_profile, ata_evict), true },
  { "nvme.placements", 0, 65535, offsetof (struct hc_profile, nvme_placements), false },
};

static const struct profile_key *
find_key (const char *name)
{
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp (keys[i].name, name) == 0)
      return &keys[i];
  return NULL;
}

const char *
hc_profile_key_name (unsigned i)
{
  return i < sizeof keys / sizeof keys[0] ? keys[i].name : NULL;
}

int
hc_profile_new (hc_profile **out)
{
  hc_profile *p = malloc (sizeof *p);

  if (!p)
    return -ENOMEM;
  *p = hc_profile_default;
  *out = p;
  return 0;
}

void
hc_profile_free (hc_profile *p)
{
  free (p);
}

int
hc_profile_set (hc_profile *p, const char *name, const char *value)
{
  const struct profile_key *k = find_key (name);
  unsigned long long v;

  if (!k || hc_parse_number (value, &v) < 0 || v < k->min || v > k->max)
    return -EINVAL;
  if (k->is_bool)
    *(bool *) ((char *) p + k->offset) = v;
  else
    *(unsigned *) ((char *) p + k->offset) = (unsigned) v;
  return 0;
}

int
hc_profile_get (const hc_profile *p, const char *name, unsigned long *value)
{
  const struct profile_key *k = find_key (name);

  if (!k)
    return -EINVAL;
  if (k->is_bool)
    *value = *(const bool *) ((const char *) p + k->offset);
  else
    *value = *(const unsigned *) ((const char *) p + k->offset);
  return 0;
}

/* Hybrid Information log (GP log 14h) header offsets. */
enum {
  LOG_HYBRID_ENABLED = 2,    /* 00h disabled, 80h disable in progress, FFh enabled */
  LOG_MAX_PRIORITY = 7,      /* bits 3:0 */
  LOG_SUPPORTED_OPTIONS = 10 /* bit 0 MAXIMUM PRIORITY BEHAVIOR */
};
#define LOG_PAGE_SIZE 512

int
hc_profile_load_ata_log (hc_profile *p, const uint8_t *page, size_t len, char *why,
                         size_t whylen)
{
  struct hc_sb sb;
  unsigned max;

  hc_sb_init (&sb, why, whylen);
  if (len < LOG_PAGE_SIZE) {
    hc_sb_printf (&sb, "hybrid information log is %d bytes, got %zu", LOG_PAGE_SIZE, len);
    return -EINVAL;
  }
  if (page[LOG_HYBRID_ENABLED] != 0xff) {
    hc_sb_printf (&sb, "hybrid information is not enabled (HYBRID ENABLED = %02xh)",
                  page[LOG_HYBRID_ENABLED]);
    return -EINVAL;
  }
  max = page[LOG_MAX_PRIORITY] & 0x0f;
  if (max < 3) {
    hc_sb_printf (&sb, "maximum hybrid priority level %u leaves too few levels (need 3)", max);
    return -EINVAL;
  }
  p->ata_max = max;
  p->ata_max_behavior = page[LOG_SUPPORTED_OPTIONS] & 1;
  return 0;
}
