/* Entry points of the hintcache tool's top-level commands.  Each takes the
 * arguments from its own name on (argv[0] is "hint", …) and returns the exit
 * status. */
#ifndef HC_TOOLS_COMMANDS_H
#define HC_TOOLS_COMMANDS_H

/* `hintcache hint …`: the hint model and transport codecs (cmd_hint.c). */
int cmd_hint (int argc, char **argv);

#endif /* HC_TOOLS_COMMANDS_H */
