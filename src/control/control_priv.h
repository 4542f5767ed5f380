/* Private helpers shared by the control socket's server, client and
 * request executor: the errno names written in "error ENAME message"
 * replies and read back by the client, and the protocol's number syntax.
 *
 * Internal: not exported from the shared library.
 */
#ifndef HC_CONTROL_PRIV_H
#define HC_CONTROL_PRIV_H

#include <stdint.h>

/* The greeting line the server sends first (without its newline). */
#define HC_CONTROL_GREETING "hintcache-control"

/* Returns the name of a positive errno value ("EINVAL") for an error reply;
 * errno values without a name in the table are reported as "EIO". */
const char *hc_ctl_errno_name (int err);

/* Returns the positive errno value a name stands for, or 0 if the name is
 * not in the table. */
int hc_ctl_errno_parse (const char *name);

#endif /* HC_CONTROL_PRIV_H */
