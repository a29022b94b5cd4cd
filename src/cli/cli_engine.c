/* cli_engine.c — engine opening and error printing for the commands. */
#include "cli/cli_engine.h"

#include <stdio.h>

int cli_error(const lilac_error *e) {
    fprintf(stderr, "error: %s\n", e->msg);
    return 1;
}

lilac_engine *cli_open_engine(const char *model_dir, const cli_globals *g, int chunk) {
    if (!model_dir) {
        fprintf(stderr, "error: --model DIR is required\n");
        return NULL;
    }
    lilac_engine_opts o = {.model_dir = model_dir, .backend = g->backend, .threads = g->threads, .chunk = chunk};
    lilac_engine *eng = NULL;
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e)) {
        cli_error(&e);
        return NULL;
    }
    return eng;
}
