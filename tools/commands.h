/* Entry points of the hintcache tool's top-level commands.  Each takes the
 * arguments from its own name on (argv[0] is "hint", …) and returns the exit
 * status. */
#ifndef HC_TOOLS_COMMANDS_H
#define HC_TOOLS_COMMANDS_H

/* `hintcache hint …`: the hint model and transport codecs (cmd_hint.c). */
int cmd_hint (int argc, char **argv);

/* Volume commands (cmd_volume.c). */
int cmd_format (int argc, char **argv); /* make a volume */
int cmd_info (int argc, char **argv);   /* geometry and occupancy */
int cmd_check (int argc, char **argv);  /* verify checksums and invariants */
int cmd_clean (int argc, char **argv);  /* write back all dirty data */
int cmd_stats (int argc, char **argv);  /* lifetime statistics */
int cmd_io (int argc, char **argv);     /* one operation, for scripts */

/* Trace commands (cmd_replay.c). */
int cmd_replay (int argc, char **argv); /* strategies × policies × sizes on a trace */
int cmd_trace (int argc, char **argv);  /* stats and convert */
int cmd_demo (int argc, char **argv);   /* the built-in database-server workload */

#endif /* HC_TOOLS_COMMANDS_H */
