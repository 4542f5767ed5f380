/* Device profiles: keys and their bounds, and the SATA Hybrid Information
 * log (14h) that bounds the ATA priority. */
#include <errno.h>
#include <string.h>

#include "hintcache/codec.h"
#include "test.h"

/* A log page as a drive would return it. */
static void
make_log (uint8_t page[512], uint8_t enabled, uint8_t max, uint8_t options)
{
  memset (page, 0, 512);
  page[0] = 1;     /* one descriptor */
  page[2] = enabled;
  page[4] = 0x40;  /* dirty low threshold */
  page[5] = 0xc0;  /* dirty high threshold */
  page[7] = max;
  page[10] = options;
  page[16] = 0x00, page[17] = 0x00, page[18] = 0x80; /* NVM size: 8 Mi LBAs */
  page[64] = max;  /* descriptor 0: priority */
}

static unsigned long
get (hc_profile *p, const char *key)
{
  unsigned long v = 12345;
  CHECK (hc_profile_get (p, key, &v) == 0, "get %s", key);
  return v;
}

static uint64_t
encode_willneed (hc_profile *p)
{
  struct hc_wire w;
  hc_codec_encode (hc_codec_find ("ata"), p, (struct hc_hint) { .advice = HC_ADVICE_WILLNEED },
                   HC_DIR_READ, &w);
  return w.v[0];
}

int
main (void)
{
  hc_profile *p;
  uint8_t page[512];
  char why[160];
  unsigned long v;

  CHECK (hc_profile_new (&p) == 0, "new");
  CHECK (get (p, "ata.max_priority") == 15 && get (p, "ata.max_priority_behavior") == 0
         && get (p, "ata.host_hinted") == 1 && get (p, "ata.evict") == 1
         && get (p, "nvme.placements") == 0, "defaults");
  CHECK (hc_profile_get (p, "ata.bogus", &v) == -EINVAL, "unknown key");

  /* Bounds: a rejected set changes nothing. */
  CHECK (hc_profile_set (p, "ata.max_priority", "2") == -EINVAL, "too few levels");
  CHECK (hc_profile_set (p, "ata.max_priority", "16") == -EINVAL, "beyond 4 bits");
  CHECK (hc_profile_set (p, "ata.max_priority", "seven") == -EINVAL, "not a number");
  CHECK (hc_profile_set (p, "ata.max_priority_behavior", "2") == -EINVAL, "boolean");
  CHECK (hc_profile_set (p, "nvme.placements", "65536") == -EINVAL, "placements bound");
  CHECK (hc_profile_set (p, "nvme.streams", "1") == -EINVAL, "unknown key");
  CHECK (get (p, "ata.max_priority") == 15, "unchanged after rejections");
  CHECK (hc_profile_set (p, "ata.max_priority", "0x7") == 0 && get (p, "ata.max_priority") == 7,
         "hex value");
  CHECK (encode_willneed (p) == 0x27, "willneed at M = 7");

  /* The log page: M = 9 with MAXIMUM PRIORITY BEHAVIOR → tag at most 8. */
  make_log (page, 0xff, 9, 0x01);
  CHECK (hc_profile_load_ata_log (p, page, 512, why, sizeof why) == 0, "log: %s", why);
  CHECK (get (p, "ata.max_priority") == 9 && get (p, "ata.max_priority_behavior") == 1, "loaded");
  CHECK (encode_willneed (p) == 0x28, "willneed at M−1 when M may fail: %#llx",
         (unsigned long long) encode_willneed (p));
  make_log (page, 0xff, 0xf9, 0x02); /* high nibble of byte 7 is not the level */
  CHECK (hc_profile_load_ata_log (p, page, 512, why, sizeof why) == 0, "log 2");
  CHECK (get (p, "ata.max_priority") == 9 && get (p, "ata.max_priority_behavior") == 0, "loaded 2");
  CHECK (encode_willneed (p) == 0x29, "willneed at M");

  /* Bad pages change nothing and say why. */
  hc_profile_set (p, "ata.max_priority", "12");
  make_log (page, 0x00, 9, 0);
  CHECK (hc_profile_load_ata_log (p, page, 512, why, sizeof why) == -EINVAL
         && strstr (why, "not enabled"), "disabled: %s", why);
  make_log (page, 0x80, 9, 0);
  CHECK (hc_profile_load_ata_log (p, page, 512, why, sizeof why) == -EINVAL, "disabling");
  make_log (page, 0xff, 2, 0);
  CHECK (hc_profile_load_ata_log (p, page, 512, why, sizeof why) == -EINVAL
         && strstr (why, "too few"), "two levels: %s", why);
  make_log (page, 0xff, 9, 0);
  CHECK (hc_profile_load_ata_log (p, page, 511, why, sizeof why) == -EINVAL
         && strstr (why, "512"), "short page: %s", why);
  CHECK (get (p, "ata.max_priority") == 12, "bad pages changed nothing");

  hc_profile_free (p);
  hc_profile_free (NULL);
  return test_exit ("test_profile");
}
