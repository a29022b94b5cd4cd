/* server.c — `lilac serve` from start to exit: loads the engine and the
 * tokenizer, reads the sampling defaults and end tokens, starts the engine
 * thread and the HTTP daemon, waits for SIGINT/SIGTERM, and shuts down in
 * order: stop accepting, fail waiting requests with 503, cancel the running
 * one at its next token, join the engine thread, close connections, free.
 * A second signal during shutdown ends the process at once. */
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "util/file.h"
#include "util/progress.h"

void srv_stat_add(srv_ctx *srv, long *field, long v) {
    pthread_mutex_lock(&srv->stats_mu);
    *field += v;
    pthread_mutex_unlock(&srv->stats_mu);
}

static void add_stop_id(srv_ctx *srv, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < srv->n_stop_ids; i++)
        if (srv->stop_ids[i] == id) return;
    for (int i = 0; i < srv->info.n_eos; i++)
        if (srv->info.eos[i] == id) return;
    int32_t *p = realloc(srv->stop_ids, (size_t)(srv->n_stop_ids + 1) * sizeof *p);
    if (!p) return;
    srv->stop_ids = p;
    p[srv->n_stop_ids++] = id;
}

/* generation_config.json: sampling defaults and more end tokens (optional file). */
static int read_generation_config(srv_ctx *srv, char *msg, size_t cap) {
    lilac_sampling *s = &srv->defaults.s;
    *s = lilac_sampling_greedy();
    s->temperature = 1.0f; /* OpenAI's defaults, unless the model says otherwise */
    char path[4096];
    lilac_error e = {0};
    if (lilac_path_join(path, sizeof path, srv->o.model_dir, "generation_config.json", &e) || !lilac_file_exists(path))
        return 0;
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    if (!json_is_object(g)) {
        snprintf(msg, cap, "%.300s: not a JSON object (line %d: %.200s)", path, jerr.line, jerr.text);
        json_decref(g);
        return -1;
    }
    json_t *v;
    if (json_is_number(v = json_object_get(g, "temperature"))) s->temperature = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "top_p"))) s->top_p = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(g, "top_k"))) s->top_k = json_integer_value(v) > 0 ? (int)json_integer_value(v) : 0;
    if (json_is_number(v = json_object_get(g, "min_p"))) s->min_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "repetition_penalty"))) s->repetition_penalty = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(g, "presence_penalty"))) s->presence_penalty = (float)json_number_value(v);
    if (json_is_false(json_object_get(g, "do_sample"))) s->temperature = 0; /* HF: greedy */
    if (!(s->temperature >= 0 && s->top_p > 0 && s->top_p <= 1 && s->min_p >= 0 && s->min_p <= 1 &&
          s->repetition_penalty > 0)) {
        snprintf(msg, cap, "%.300s: sampling values out of range", path);
        json_decref(g);
        return -1;
    }
    v = json_object_get(g, "eos_token_id");
    if (json_is_integer(v)) add_stop_id(srv, (int32_t)json_integer_value(v));
    size_t i;
    json_t *x;
    if (json_is_array(v)) json_array_foreach(v, i, x) if (json_is_integer(x)) add_stop_id(srv, (int32_t)json_integer_value(x));
    json_decref(g);
    return 0;
}

static int setup_tokens(srv_ctx *srv, char *msg, size_t cap) {
    lilac_tokenizer *t = srv->tok;
    add_stop_id(srv, lilac_tokenizer_id(t, "<|im_end|>"));
    add_stop_id(srv, lilac_tokenizer_id(t, "<|endoftext|>"));
    srv->im_end = lilac_tokenizer_id(t, "<|im_end|>");
    lilac_ids nl = LILAC_IDS_INIT;
    lilac_error e = {0};
    if (lilac_tokenizer_encode(t, "\n", 1, 0, &nl, &e)) {
        snprintf(msg, cap, "tokenizer: %s", e.msg);
        return -1;
    }
    for (size_t i = 0; i < nl.len && i < 4; i++) srv->nl_ids[srv->n_nl++] = nl.v[i];
    lilac_ids_free(&nl);
    srv->think_close = lilac_tokenizer_id(t, "</think>");
    static const char close_seq[] = "\n</think>\n\n";
    lilac_ids ce = LILAC_IDS_INIT;
    if (srv->think_close >= 0 && lilac_tokenizer_encode(t, close_seq, sizeof close_seq - 1, 0, &ce, &e)) {
        snprintf(msg, cap, "tokenizer: %s", e.msg);
        return -1;
    }
    if (ce.len > 0 && ce.len <= LILAC_MAX_THINK_END)
        for (size_t i = 0; i < ce.len; i++) srv->think_end[srv->n_think_end++] = ce.v[i];
    lilac_ids_free(&ce);
    if (!srv->n_think_end) srv->think_close = -1;
    /* constrained decoding: the vocabulary index, and the ids that end an answer */
    srv->tool_call_open = lilac_tokenizer_id(t, "<tool_call>");
    srv->tool_call_close = lilac_tokenizer_id(t, "</tool_call>");
    if (lg_vocab_new(t, srv->info.vocab_size, &srv->gvocab, &e)) {
        snprintf(msg, cap, "grammar: %s", e.msg);
        return -1;
    }
    srv->n_end_ids = 0;
    for (int i = 0; i < srv->info.n_eos && srv->n_end_ids < SRV_MAX_END_IDS; i++) srv->end_ids[srv->n_end_ids++] = srv->info.eos[i];
    for (int i = 0; i < srv->n_stop_ids && srv->n_end_ids < SRV_MAX_END_IDS; i++) srv->end_ids[srv->n_end_ids++] = srv->stop_ids[i];
    int32_t n = lilac_tokenizer_n_ids(t);
    for (int32_t id = 0; id < n; id++) {
        size_t len = 0;
        const char *p;
        if (!lilac_tokenizer_is_added(t, id) || !(p = lilac_tokenizer_token(t, id, &len)) || len == 0) continue;
        char **a = realloc(srv->added, (size_t)(srv->n_added + 1) * sizeof *a);
        size_t *al = realloc(srv->added_len, (size_t)(srv->n_added + 1) * sizeof *al);
        if (a) srv->added = a;
        if (al) srv->added_len = al;
        char *c = a && al ? malloc(len) : NULL;
        if (!c) {
            snprintf(msg, cap, "out of memory");
            return -1;
        }
        memcpy(c, p, len);
        srv->added[srv->n_added] = c;
        srv->added_len[srv->n_added++] = len;
    }
    return 0;
}

static void free_ctx(srv_ctx *srv) {
    for (int i = 0; i < srv->n_added; i++) free(srv->added[i]);
    free(srv->added);
    free(srv->added_len);
    free(srv->stop_ids);
    lg_vocab_free(srv->gvocab);
    srv_queue_free(srv->q);
    lilac_tokenizer_free(srv->tok);
    lilac_engine_close(srv->eng);
    pthread_mutex_destroy(&srv->stats_mu);
    srv_metrics_free(srv->metrics);
}

int srv_run(const srv_opts *o) {
    /* Every thread (the engine's pool, the engine thread, MHD's) inherits
     * this mask, so the signals reach only the sigwait below. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    srv_ctx *srv = calloc(1, sizeof *srv);
    if (!srv) return fprintf(stderr, "error: serve: out of memory\n"), 1;
    srv->o = *o;
    srv->started = (long long)time(NULL);
    pthread_mutex_init(&srv->stats_mu, NULL);
    if (!(srv->metrics = srv_metrics_new())) {
        free(srv);
        return fprintf(stderr, "error: serve: out of memory\n"), 1;
    }
    atomic_init(&srv->stopping, 0);
    lilac_error e = {0};
    char msg[600] = "";
    int rc = 1;
    srv_worker *w = NULL;
    srv_http *h = NULL;

    lilac_progress_sink sink = {.quiet = o->quiet};
    lilac_engine_opts eo = {.model_dir = o->model_dir, .backend = o->backend, .threads = o->threads, .chunk = o->chunk,
                            .progress = lilac_progress_sink_cb, .progress_ctx = &sink};
    lilac_status ost = lilac_engine_open(&eo, &srv->eng, &e);
    lilac_progress_sink_end(&sink);
    if (ost || lilac_tokenizer_load(o->model_dir, &srv->tok, &e)) {
        snprintf(msg, sizeof msg, "%s", e.msg);
        goto out;
    }
    lilac_engine_get_info(srv->eng, &srv->info);
    if (srv->o.ctx <= 0) srv->o.ctx = srv->info.max_pos < 32768 ? srv->info.max_pos : 32768;
    if (srv->o.ctx > srv->info.max_pos) {
        snprintf(msg, sizeof msg, "--ctx %d is more than the model's %d positions", srv->o.ctx, srv->info.max_pos);
        goto out;
    }
    if (read_generation_config(srv, msg, sizeof msg) || setup_tokens(srv, msg, sizeof msg)) goto out;
    if (o->served_name) {
        snprintf(srv->model_name, sizeof srv->model_name, "%s", o->served_name);
    } else {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", o->model_dir);
        size_t l = strlen(tmp);
        while (l > 1 && tmp[l - 1] == '/') tmp[--l] = 0;
        snprintf(srv->model_name, sizeof srv->model_name, "%s", basename(tmp));
    }
    if (!(srv->q = srv_queue_new(o->queue))) {
        snprintf(msg, sizeof msg, "out of memory");
        goto out;
    }
    if (srv_worker_start(srv, &w, &e)) {
        snprintf(msg, sizeof msg, "%s", e.msg);
        goto out;
    }
    int port = 0;
    if (srv_http_start(srv, &h, &port, msg, sizeof msg)) goto out;

    double mib = (double)lilac_session_bytes(srv->eng, srv->o.ctx) / 1048576.0;
    fprintf(stderr,
            "lilac serve: model '%s' (%s), backend %s, context %d tokens\n"
            "lilac serve: sessions: %.1f MiB each; working session + %d prefix-cache slots = up to %.1f MiB\n"
            "lilac serve: queue %d, max body %zu bytes\n"
            "lilac serve: %s%s%s\n",
            srv->model_name, o->model_dir, srv->info.device, srv->o.ctx, mib, o->slots, mib * (1 + o->slots), o->queue,
            o->max_body,
            o->api_key ? "API key required on /v1/* (Authorization: Bearer KEY; the key from " :
                         "no API key: any client that can reach this address may use it (--api-key or LILAC_API_KEY to require one)",
            o->api_key ? (o->api_key_source ? o->api_key_source : "--api-key") : "", o->api_key ? ")" : "");
    if (o->cors_any) fprintf(stderr, "lilac serve: CORS: pages from any origin may call this server\n");
    else if (o->cors) fprintf(stderr, "lilac serve: CORS: pages from %s may call this server\n", o->cors);
    const char *host = o->host;
    int v6 = strchr(host, ':') != NULL;
    fprintf(stderr, "lilac serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "", port);
    fflush(stderr);

    int sig = 0;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigwait(&stop, &sig);
    fprintf(stderr, "lilac serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* a second signal ends the process the default way */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);

    atomic_store(&srv->stopping, 1);
    srv_http_quiesce(h);
    srv_queue_stop(srv->q);
    srv_worker_join(w);
    w = NULL;
    srv_http_stop(h);
    h = NULL;
    fprintf(stderr, "lilac serve: stopped\n");
    rc = 0;
out:
    if (rc) fprintf(stderr, "error: serve: %s\n", msg);
    if (w) {
        srv_queue_stop(srv->q);
        srv_worker_join(w);
    }
    srv_http_stop(h);
    free_ctx(srv);
    free(srv);
    return rc;
}
