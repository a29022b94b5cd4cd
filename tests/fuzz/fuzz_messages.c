/* fuzz_messages.c — libFuzzer target: any bytes as the body of POST
 * /v1/messages and /v1/messages/count_tokens (Anthropic's shapes mapped to a
 * chat request, rendered and tokenized with the tiny fixture's tokenizer). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/server.h"

static srv_ctx *ctx(void) {
    static srv_ctx *srv;
    if (srv) return srv;
    srv = calloc(1, sizeof *srv);
    lilac_error e;
    if (lilac_tokenizer_load("tests/fixtures/tiny", &srv->tok, &e)) abort(); /* run from the repository root */
    srv->o.ctx = 4096;
    srv->defaults.s = lilac_sampling_greedy();
    srv->info.vocab_size = 512;
    snprintf(srv->model_name, sizeof srv->model_name, "tiny");
    return srv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    srv_ctx *srv = ctx();
    json_t *body = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    srv_err err;
    srv_job *j = srv_job_new(srv, SRV_CHAT);
    if (j) {
        if (srv_req_messages(srv, body, j, &err) && err.status == 0) abort(); /* a failure always has a status */
        srv_job_release(j);
    }
    free(srv_req_count_tokens(srv, body, &err));
    json_decref(body);
    return 0;
}
