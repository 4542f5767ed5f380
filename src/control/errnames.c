/* The errno names of the control protocol's error replies ("error EINVAL
 * …"): written by the server, read back into errno values by the client.
 * A file of its own so that the client (also built into the preload
 * library) needs nothing of the server.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "control/control_priv.h"

#define E(x) { x, #x }
static const struct {
  int err;
  const char *name;
} errno_names[] = {
  E (EPERM),     E (ENOENT),    E (EIO),        E (E2BIG),     E (ENOMEM),
  E (EACCES),    E (EBUSY),     E (EEXIST),     E (ENODEV),    E (EINVAL),
  E (EFBIG),     E (ENOSPC),    E (EROFS),      E (EPIPE),     E (ERANGE),
  E (EAGAIN),    E (ENOSYS),    E (ENODATA),    E (EPROTO),    E (EBADMSG),
  E (EOVERFLOW), E (ENOTSUP),   E (EPROTONOSUPPORT), E (ECONNRESET),
  E (ETIMEDOUT), E (EUCLEAN),   E (ECANCELED),  E (ENAMETOOLONG),
};
#undef E

const char *
hc_ctl_errno_name (int err)
{
  for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
    if (errno_names[i].err == err)
      return errno_names[i].name;
  return "EIO";
}

int
hc_ctl_errno_parse (const char *name)
{
  for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
    if (strcmp (errno_names[i].name, name) == 0)
      return errno_names[i].err;
  return 0;
}

