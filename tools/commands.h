/* Entry points of the hintcache tool's top-level commands.  Each takes the
 * arguments from its own name on (argv[0] is "hint", …) and returns the exit
 * status. */
#ifndef HC_TOOLS_COMMANDS_H
#define HC_TOOLS_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "hintcache/control.h"

/* `hintcache hint …`: the hint model and transport codecs (cmd_hint.c). */
int cmd_hint (int argc, char **argv);

/* Volume commands (cmd_volume.c). */
int cmd_format (int argc, char **argv); /* make a volume */
int cmd_info (int argc, char **argv);   /* geometry and occupancy */
int cmd_check (int argc, char **argv);  /* verify checksums and invariants */
int cmd_clean (int argc, char **argv);  /* write back all dirty data */
int cmd_stats (int argc, char **argv);  /* lifetime statistics */
int cmd_io (int argc, char **argv);     /* one operation, for scripts */


/* Commands that talk to a running volume's control socket (cmd_control.c). */
int cmd_advise (int argc, char **argv);  /* range hints for byte ranges or files */
int cmd_control (int argc, char **argv); /* raw requests, for scripts */

/* `hintcache trace record`: a labeled trace of a block device while a
 * command runs (cmd_record.c); argv[0] is "record". */
int cmd_trace_record (int argc, char **argv);

/* `hintcache hintd`: the file-system-aware hint daemon (cmd_hintd.c). */
int cmd_hintd (int argc, char **argv);

/* `hintcache run`: a command with a per-process hint, through the preload
 * library (cmd_run.c). */
int cmd_run (int argc, char **argv);

/* Connects to the control socket at `path`.  Returns 0, or prints why and
 * returns the exit status (cmd_control.c). */
int control_open (const char *cmd, const char *path, hc_control_client **out);

/* Sends one request and reads the payload of an "ok" reply into reply[len].
 * Returns 0, or prints the error reply and returns the exit status. */
int control_ask (const char *cmd, hc_control_client *c, const char *request, char *reply,
                 size_t len);

/* Trace commands (cmd_replay.c). */
int cmd_replay (int argc, char **argv); /* strategies × policies × sizes on a trace */
int cmd_trace (int argc, char **argv);  /* stats and convert */
int cmd_demo (int argc, char **argv);   /* the built-in database-server workload */

#endif /* HC_TOOLS_COMMANDS_H */
