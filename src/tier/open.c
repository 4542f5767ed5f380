/* Opening a tier by name: the one entry point for tools and configuration
 * that take "a device" from the user.
 *
 * A name whose scheme is one of libnbd's (nbd, nbds, nbd+unix, nbds+unix,
 * nbd+vsock, nbds+vsock, followed by "://") is an NBD URI and goes to
 * hc_tier_open_nbd; anything else is a path and goes to hc_tier_open_file.
 * Schemes are matched exactly, as libnbd matches them, so "NBD://host" is a
 * path.  The file tier reports a bare errno, so its failures are put into
 * words here, naming the path.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tier.h"

/* True if spec starts with an NBD URI scheme. */
static bool
is_nbd_uri (const char *spec)
{
  static const char *const schemes[] = {
    "nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://", "nbds+vsock://",
  };

  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
    if (strncmp (spec, schemes[i], strlen (schemes[i])) == 0)
      return true;
  return false;
}

int
hc_tier_open (const char *spec, unsigned flags, hc_tier **out, char *why, size_t whylen)
{
  const unsigned known = HC_TIER_READONLY | HC_TIER_DIRECT | HC_TIER_CLAIM;
  int rc;

  if (why && whylen)
    why[0] = '\0';
  if (!spec || !out || (flags & ~known)) {
    if (why && whylen)
      snprintf (why, whylen, "invalid arguments");
    return -EINVAL;
  }
  if (is_nbd_uri (spec))
    return hc_tier_open_nbd (spec, flags & ~HC_TIER_CLAIM, out, why, whylen);
  rc = hc_tier_open_file (spec, flags, out);
  if (rc < 0 && why && whylen) {
    /* With the arguments checked above, EINVAL can only mean the kind of
     * file; O_DIRECT refused by the filesystem also says EINVAL. */
    char holder[96];
    if (rc == -EINVAL)
      snprintf (why, whylen, "%s: not a regular file or block device%s", spec,
                (flags & HC_TIER_DIRECT) ? " (or O_DIRECT is not supported there)" : "");
    else if (rc == -EBUSY && (flags & HC_TIER_CLAIM)) {
      hc_tier_file_holder (spec, holder, sizeof holder);
      snprintf (why, whylen, "%s is in use by %s (a volume is opened by one process at a "
                "time; a running server answers on its control socket)", spec, holder);
    }
    else
      snprintf (why, whylen, "%s: %s", spec, strerror (-rc));
  }
  return rc;
}
