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

/* A command of the control protocol, as its one table (exec.c) documents
 * it: the name, the usage ("advise OFF LEN HINT [from=SOURCE]") and what it
 * does, in a few words.  What it does names lists of names as the tool's
 * help texts do, by placeholders ("@MODES@": tools/cli.h), which the tool
 * expands from the registries. */
struct hc_ctl_command_doc {
  const char *name, *usage, *help;
};

/* Returns the i-th command's documentation, or NULL past the last. */
const struct hc_ctl_command_doc *hc_ctl_command_doc (unsigned i);

/* Returns the name of a positive errno value ("EINVAL") for an error reply;
 * errno values without a name in the table are reported as "EIO". */
const char *hc_ctl_errno_name (int err);

/* Returns the positive errno value a name stands for, or 0 if the name is
 * not in the table. */
int hc_ctl_errno_parse (const char *name);

#endif /* HC_CONTROL_PRIV_H */
