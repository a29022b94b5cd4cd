/* cli_engine.h — what the model commands share: opening an engine from the
 * command line's options, and the one-line error convention. */
#ifndef LILAC_CLI_ENGINE_H
#define LILAC_CLI_ENGINE_H

#include "cli/commands.h"
#include "lilac.h"

/* Opens DIR with the global --threads/--backend, showing the load's progress
 * on stderr unless quiet; prints the error and returns NULL on failure. */
lilac_engine *cli_open_engine(const char *model_dir, const cli_globals *g, int chunk, int quiet);

/* Feeds ids[0..n) to s in chunks of the engine's prefill chunk, with a
 * "prefill" progress bar on stderr unless quiet (a terminal shows it only
 * when it takes a moment).  Between chunks, a nonzero *stop (may be NULL)
 * ends it with LILAC_ECANCELLED. */
lilac_status cli_feed(lilac_session *s, const int32_t *ids, int n, int chunk, int quiet, volatile int *stop, lilac_error *e);

/* Prints "error: MSG" on stderr; returns the exit code for a failed command. */
int cli_error(const lilac_error *e);

#endif
