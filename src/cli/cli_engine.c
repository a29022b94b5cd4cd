/* cli_engine.c — engine opening and error printing for the commands. */
#include "cli/cli_engine.h"

#include <stdio.h>

#include "util/err.h"
#include "util/progress.h"

lilac_status cli_feed(lilac_session *s, const int32_t *ids, int n, int chunk, int quiet, volatile int *stop, lilac_error *e) {
    if (chunk <= 0) chunk = 512;
    lilac_progress p;
    lilac_progress_begin(&p, "prefill", LILAC_PROGRESS_TOKENS, (uint64_t)n, quiet || n <= chunk);
    lilac_status st = LILAC_OK;
    for (int off = 0; off < n && !st; off += chunk) {
        if (stop && *stop) {
            st = lilac_fail(e, LILAC_ECANCELLED, "prefill interrupted");
            break;
        }
        int m = n - off < chunk ? n - off : chunk;
        st = lilac_session_feed(s, ids + off, m, NULL, 0, e);
        lilac_progress_update(&p, (uint64_t)(off + m));
    }
    lilac_progress_end(&p);
    return st;
}

int cli_error(const lilac_error *e) {
    fprintf(stderr, "error: %s\n", e->msg);
    return 1;
}

lilac_engine *cli_open_engine(const char *model_dir, const cli_globals *g, int chunk, int quiet) {
    if (!model_dir) {
        fprintf(stderr, "error: --model DIR is required\n");
        return NULL;
    }
    lilac_progress_sink sink = {.quiet = quiet};
    lilac_engine_opts o = {.model_dir = model_dir, .backend = g->backend, .threads = g->threads, .chunk = chunk,
                           .progress = lilac_progress_sink_cb, .progress_ctx = &sink};
    lilac_engine *eng = NULL;
    lilac_error e = {0};
    lilac_status st = lilac_engine_open(&o, &eng, &e);
    lilac_progress_sink_end(&sink);
    if (st) {
        cli_error(&e);
        return NULL;
    }
    return eng;
}
