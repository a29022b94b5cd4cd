/* cli_engine.h — what the model commands share: opening an engine from the
 * command line's options, and the one-line error convention. */
#ifndef LILAC_CLI_ENGINE_H
#define LILAC_CLI_ENGINE_H

#include "cli/commands.h"
#include "lilac.h"

/* Opens DIR with the global --threads/--backend; prints the error and returns
 * NULL on failure. */
lilac_engine *cli_open_engine(const char *model_dir, const cli_globals *g, int chunk);

/* Prints "error: MSG" on stderr; returns the exit code for a failed command. */
int cli_error(const lilac_error *e);

#endif
