/* placeholder until the engine lands */
#include <stdio.h>
#include "cli/commands.h"
int cmd_score(int argc, char **argv, const cli_globals *g) { (void)argc; (void)argv; (void)g; fprintf(stderr, "error: not built yet\n"); return 2; }
int cmd_generate(int argc, char **argv, const cli_globals *g) { (void)argc; (void)argv; (void)g; fprintf(stderr, "error: not built yet\n"); return 2; }
