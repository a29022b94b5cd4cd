/* openai_resp.c — the JSON the server sends: OpenAI error objects,
 * chat.completion / text_completion bodies, chat.completion.chunk and
 * text_completion stream events, logprobs in both OpenAI shapes, /v1/models
 * (and /v1/models/{id}) and /health.
 *
 * Streams: the chat stream opens with a role chunk; each parser delta is one
 * chunk (reasoning_content, content, or a tool_calls entry: index, id, type
 * and name first, then argument fragments); logprobs of the tokens since the
 * previous chunk ride on the next chunk, so the streamed logprobs concatenate
 * to the non-streaming ones.  Then a chunk with finish_reason, a usage chunk
 * (choices: []) when stream_options.include_usage, and `data: [DONE]`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "text/utf8.h"

#define JFLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

json_t *srv_json_str(const char *s, size_t n) {
    json_t *v = json_stringn(s ? s : "", s ? n : 0);
    if (v) return v;
    lilac_buf b = LILAC_BUF_INIT; /* invalid UTF-8: repaired as the tokenizer's decoder does */
    lilac_utf8_lossy(s, n, &b);
    v = json_stringn(b.data ? b.data : "", b.len);
    lilac_buf_free(&b);
    return v;
}

char *srv_resp_error(const srv_err *e) {
    json_t *o = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", e->msg, "type", e->type ? e->type : "server_error",
                          "param", e->param[0] ? json_string(e->param) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}

static json_t *usage(const srv_job *j) {
    json_t *u = json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", j->n_prompt, "completion_tokens", j->n_gen,
                          "total_tokens", j->n_prompt + j->n_gen, "prompt_tokens_details", "cached_tokens", j->cached);
    /* the tokens before </think> (not the closing sequence a budget forced) */
    if (u && j->kind == SRV_CHAT)
        json_object_set_new(u, "completion_tokens_details", json_pack("{s:i}", "reasoning_tokens", j->reasoning_tokens));
    return u;
}

const char *srv_finish_reason(const srv_job *j) {
    const char *r = j->stop_hit || j->why != LILAC_FINISH_LENGTH ? "stop" : "length";
    if (j->kind == SRV_CHAT && j->parser && lilac_parser_ntool_calls(j->parser) > 0 && strcmp(r, "stop") == 0)
        r = "tool_calls";
    return r;
}

/* --------------------------------------------------------------- logprobs */

static json_t *token_bytes(const srv_ctx *srv, int32_t id, json_t **str) {
    size_t n = 0;
    const char *p = lilac_tokenizer_token(srv->tok, id, &n);
    json_t *bytes = json_array();
    for (size_t i = 0; p && i < n; i++) json_array_append_new(bytes, json_integer((unsigned char)p[i]));
    *str = srv_json_str(p, p ? n : 0);
    return bytes;
}

/* JSON has no -inf: OpenAI writes -9999.0 for impossible tokens. */
static double lp_value(float x) { return x > -9999.0f ? (double)x : -9999.0; }

/* One entry, kept in a neutral form {token, logprob, bytes, top_logprobs:
 * [{token, logprob, bytes}], offset}; the legacy completions shape is made
 * from it when a chunk or body is written. */
void srv_resp_logprob(srv_job *j, const lilac_token_info *t, size_t text_offset) {
    json_t *tok = NULL;
    json_t *bytes = token_bytes(j->srv, t->id, &tok);
    json_t *top = json_array();
    for (int k = 0; k < t->n_top && k < j->top_logprobs; k++) {
        json_t *ttok = NULL;
        json_t *tb = token_bytes(j->srv, t->top_ids[k], &ttok);
        json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", ttok, "logprob", lp_value(t->top_logprobs[k]),
                                             "bytes", tb));
    }
    json_t *e = json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", lp_value(t->logprob), "bytes", bytes,
                          "top_logprobs", top);
    if (j->kind == SRV_COMPLETION) json_object_set_new(e, "offset", json_integer((json_int_t)text_offset));
    if (j->lp_pend) json_array_append(j->lp_pend, e);
    json_array_append_new(j->lp_all, e);
}

/* entries -> the chat shape {"content": [...], "refusal": null} or the
 * legacy {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static json_t *logprobs_json(const srv_job *j, json_t *entries) {
    if (!entries) return json_null();
    if (j->kind == SRV_CHAT) {
        json_t *content = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            json_t *c = json_copy(e);
            json_array_append_new(content, c);
        }
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        json_array_append(tokens, json_object_get(e, "token"));
        json_array_append(lps, json_object_get(e, "logprob"));
        json_array_append(offs, json_object_get(e, "offset"));
        json_t *d = json_object(), *alt;
        size_t k;
        json_array_foreach(json_object_get(e, "top_logprobs"), k, alt) {
            /* a dict keyed by token text: equal texts of different ids keep the first, as OpenAI's does */
            const char *key = json_string_value(json_object_get(alt, "token"));
            if (key && !json_object_get(d, key)) json_object_set(d, key, json_object_get(alt, "logprob"));
        }
        json_array_append_new(tops, d);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* Logprobs for the next chunk: what is pending, then nothing. */
static json_t *take_pending(srv_job *j) {
    if (!j->lp_pend) return json_null();
    json_t *l = logprobs_json(j, j->lp_pend);
    json_array_clear(j->lp_pend);
    return l;
}

/* ----------------------------------------------------------------- chunks */

static void push_event(srv_job *j, json_t *o) {
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    if (!s) {
        fprintf(stderr, "lilac serve: %s: out of memory writing a chunk\n", j->id);
        return;
    }
    lilac_buf b = LILAC_BUF_INIT;
    lilac_buf_puts(&b, "data: ");
    lilac_buf_puts(&b, s);
    lilac_buf_puts(&b, "\n\n");
    free(s);
    if (!b.oom) srv_job_push_sse(j, b.data, b.len);
    lilac_buf_free(&b);
}

static json_t *chunk(const srv_job *j, json_t *choice) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", j->id, "object",
                          j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->srv->model_name, "choices", choice);
    if (o && j->include_usage) json_object_set_new(o, "usage", json_null());
    return o;
}

static json_t *chat_choice(json_t *delta, json_t *logprobs, const char *finish) {
    return json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "delta", delta, "logprobs", logprobs, "finish_reason",
                     finish ? json_string(finish) : json_null());
}

static json_t *text_choice(json_t *text, json_t *logprobs, const char *finish) {
    return json_pack("{s:i, s:o, s:o, s:o}", "index", 0, "text", text, "logprobs", logprobs, "finish_reason",
                     finish ? json_string(finish) : json_null());
}

void srv_resp_stream_start(srv_job *j) {
    if (j->kind != SRV_CHAT || j->api == SRV_API_ANTHROPIC) return; /* Anthropic: the engine starts it */
    push_event(j, chunk(j, chat_choice(json_pack("{s:s, s:s}", "role", "assistant", "content", ""), json_null(), NULL)));
}

void srv_resp_chat_delta(srv_job *j, const lilac_delta *d) {
    json_t *delta = NULL;
    switch (d->kind) {
    case LILAC_DELTA_REASONING:
        delta = json_pack("{s:o}", "reasoning_content", srv_json_str(d->text, d->len));
        break;
    case LILAC_DELTA_CONTENT:
        delta = json_pack("{s:o}", "content", srv_json_str(d->text, d->len));
        break;
    case LILAC_DELTA_TOOL_START:
        delta = json_pack("{s:[{s:i, s:s, s:s, s:{s:o, s:s}}]}", "tool_calls", "index", d->index, "id", d->id, "type",
                          "function", "function", "name", srv_json_str(d->name, strlen(d->name)), "arguments", "");
        break;
    case LILAC_DELTA_TOOL_ARGS:
        delta = json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", d->index, "function", "arguments",
                          srv_json_str(d->text, d->len));
        break;
    }
    push_event(j, chunk(j, chat_choice(delta, take_pending(j), NULL)));
}

void srv_resp_text_delta(srv_job *j, const char *text, size_t n) {
    push_event(j, chunk(j, text_choice(srv_json_str(text, n), take_pending(j), NULL)));
}

static void push_done(srv_job *j) { srv_job_push_sse(j, "data: [DONE]\n\n", 14); }

void srv_resp_stream_end(srv_job *j) {
    const char *fin = srv_finish_reason(j);
    if (j->kind == SRV_CHAT) push_event(j, chunk(j, chat_choice(json_object(), take_pending(j), fin)));
    else push_event(j, chunk(j, text_choice(json_string(""), take_pending(j), fin)));
    if (j->include_usage) {
        json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", j->id, "object",
                              j->kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                              (json_int_t)j->created, "model", j->srv->model_name, "choices", "usage", usage(j));
        push_event(j, o);
    }
    push_done(j);
}

void srv_resp_stream_error(srv_job *j, const srv_err *e) {
    if (j->api == SRV_API_ANTHROPIC) {
        srv_anth_stream_error(j, e);
        return;
    }
    char *s = srv_resp_error(e);
    if (s) {
        lilac_buf b = LILAC_BUF_INIT;
        lilac_buf_printf(&b, "data: %s\n\n", s);
        if (!b.oom) srv_job_push_sse(j, b.data, b.len);
        lilac_buf_free(&b);
        free(s);
    }
    push_done(j);
}

/* ------------------------------------------------------------------ bodies */

char *srv_resp_body(const srv_job *j) {
    if (j->api == SRV_API_ANTHROPIC) return srv_anth_body(j);
    json_t *choice;
    const char *fin = srv_finish_reason(j);
    json_t *lp = j->lp_all ? logprobs_json(j, j->lp_all) : json_null();
    if (j->kind == SRV_CHAT) {
        size_t nc = 0, nr = 0;
        const char *content = lilac_parser_content(j->parser, &nc);
        const char *reasoning = lilac_parser_reasoning(j->parser, &nr);
        json_t *msg = json_pack("{s:s, s:o, s:o}", "role", "assistant", "content",
                                content ? srv_json_str(content, nc) : json_null(), "reasoning_content",
                                reasoning ? srv_json_str(reasoning, nr) : json_null());
        if (msg && lilac_parser_ntool_calls(j->parser) > 0)
            json_object_set(msg, "tool_calls", lilac_parser_tool_calls(j->parser));
        choice = json_pack("{s:i, s:o, s:o, s:s}", "index", 0, "message", msg, "logprobs", lp, "finish_reason", fin);
    } else {
        choice = text_choice(srv_json_str(j->text.data, j->text.len), lp, fin);
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o}", "id", j->id, "object",
                          j->kind == SRV_CHAT ? "chat.completion" : "text_completion", "created", (json_int_t)j->created,
                          "model", j->srv->model_name, "choices", choice, "usage", usage(j));
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}

static json_t *model_object(const srv_ctx *srv) {
    return json_pack("{s:s, s:s, s:I, s:s, s:i}", "id", srv->model_name, "object", "model", "created",
                     (json_int_t)srv->started, "owned_by", "lilac", "max_model_len", srv->o.ctx);
}

char *srv_resp_models(const srv_ctx *srv) {
    json_t *o = json_pack("{s:s, s:[o]}", "object", "list", "data", model_object(srv));
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}

char *srv_resp_model(const srv_ctx *srv) {
    json_t *o = model_object(srv);
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}

char *srv_resp_health(srv_ctx *srv) {
    pthread_mutex_lock(&srv->stats_mu);
    srv_stats st = srv->stats;
    pthread_mutex_unlock(&srv->stats_mu);
    /* cache: cached_tokens and reused_tokens are the same count (the older
     * name kept); evictions = snapshots the LRU replaced to make room,
     * superseded = ones a longer prompt end of the same conversation dropped */
    json_t *o = json_pack(
        "{s:s, s:s, s:{s:i, s:i, s:b}, s:{s:I, s:I, s:I, s:I, s:I}, "
        "s:{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
        "status", atomic_load(&srv->stopping) ? "stopping" : "ok", "model", srv->model_name, "queue", "capacity",
        srv->o.queue, "waiting", srv_queue_waiting(srv->q), "running", srv_queue_busy(srv->q), "requests", "total",
        (json_int_t)st.requests, "completed", (json_int_t)st.completed, "cancelled", (json_int_t)st.cancelled,
        "rejected_busy", (json_int_t)st.rejected_busy, "errors", (json_int_t)st.errors, "cache", "slots",
        srv->o.slots, "lookups", (json_int_t)st.cache_lookups, "hits", (json_int_t)st.cache_hits, "prompt_tokens",
        (json_int_t)st.prompt_tokens, "cached_tokens", (json_int_t)st.cached_tokens, "reused_tokens",
        (json_int_t)st.cached_tokens, "generated_tokens", (json_int_t)st.generated_tokens, "reasoning_tokens",
        (json_int_t)st.reasoning_tokens, "snapshots", (json_int_t)st.cache_snapshots, "evictions",
        (json_int_t)st.cache_evictions, "superseded", (json_int_t)st.cache_superseded);
    /* cache.tiers: where reused prefixes came from (their hits and tokens
     * sum to hits and reused_tokens), evictions out of each tier's bound,
     * and what each holds now */
    json_t *tiers = json_object();
    for (int t = 0; o && tiers && t < SRV_TIER_N; t++) {
        const srv_tier_stats *ts = &st.tiers[t];
        json_object_set_new(tiers, srv_tier_name[t],
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "hits", (json_int_t)ts->hits, "reused_tokens",
                                      (json_int_t)ts->reused_tokens, "evictions", (json_int_t)ts->evictions, "snapshots",
                                      (json_int_t)ts->snapshots, "bytes", (json_int_t)ts->bytes, "capacity_bytes",
                                      (json_int_t)ts->capacity));
    }
    if (o && tiers) json_object_set_new(json_object_get(o, "cache"), "tiers", tiers);
    else json_decref(tiers);
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}
