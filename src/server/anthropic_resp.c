/* anthropic_resp.c — the JSON of Anthropic's Messages API: error objects,
 * the message body, and the streaming events.
 *
 * Content blocks come from the output parser's deltas in their order (for
 * streams and bodies alike, so the two agree): reasoning opens a "thinking"
 * block, content a "text" block, each tool call a "tool_use" block whose
 * input is its arguments JSON parsed at the block's end; a delta of another
 * kind closes the open block.  A stream is
 *   message_start (usage: input and cached tokens), ping,
 *   per block: content_block_start, content_block_delta* (thinking_delta,
 *   text_delta, input_json_delta), content_block_stop,
 *   message_delta (stop_reason, stop_sequence, usage), message_stop;
 * an error after the start is an `error` event.  Each event is
 * "event: NAME\ndata: JSON\n\n".
 *
 * Usage follows Anthropic's accounting: input_tokens are the prompt tokens
 * that were computed, cache_read_input_tokens those reused from the prefix
 * cache (their sum is the prompt), cache_creation_input_tokens is 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define JFLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

static const char *error_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 405: return "invalid_request_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static json_t *error_json(const srv_err *e) {
    return json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type", error_type(e->status), "message", e->msg);
}

char *srv_anth_error(const srv_err *e) {
    json_t *o = error_json(e);
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}

static void push(srv_job *j, const char *event, json_t *o) {
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    if (!s) {
        fprintf(stderr, "lilac serve: %s: out of memory writing an event\n", j->id);
        return;
    }
    lilac_buf b = LILAC_BUF_INIT;
    lilac_buf_printf(&b, "event: %s\ndata: %s\n\n", event, s);
    free(s);
    if (!b.oom) srv_job_push_sse(j, b.data, b.len);
    lilac_buf_free(&b);
}

static json_t *usage(const srv_job *j, int with_output) {
    json_t *u = json_pack("{s:i, s:i, s:i}", "input_tokens", j->n_prompt - j->cached, "cache_creation_input_tokens", 0,
                          "cache_read_input_tokens", j->cached);
    if (u && with_output) json_object_set_new(u, "output_tokens", json_integer(j->n_gen));
    return u;
}

const char *srv_anth_stop_reason(const srv_job *j) {
    if (j->stop_hit) return "stop_sequence";
    if (j->why == LILAC_FINISH_LENGTH) return "max_tokens";
    if (j->parser && lilac_parser_ntool_calls(j->parser) > 0) return "tool_use";
    return "end_turn";
}

static json_t *stop_sequence(const srv_job *j) {
    if (!j->stop_hit || j->stop_which < 0 || j->stop_which >= j->n_stop) return json_null();
    return srv_json_str(j->stop[j->stop_which], j->stop_len[j->stop_which]);
}

void srv_anth_stream_start(srv_job *j) {
    if (j->anth_started) return;
    j->anth_started = 1;
    json_t *u = usage(j, 0);
    json_object_set_new(u, "output_tokens", json_integer(0));
    push(j, "message_start",
         json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:o}}", "type", "message_start", "message", "id", j->id,
                   "type", "message", "role", "assistant", "model", j->srv->model_name, "content", "stop_reason",
                   "stop_sequence", "usage", u));
    push(j, "ping", json_pack("{s:s}", "type", "ping"));
}

/* ------------------------------------------------------------------ blocks */

static void close_block(srv_job *j) {
    if (j->blk_kind < 0) return;
    json_t *b = j->blk;
    const char *t = j->blk_text.data ? j->blk_text.data : "";
    size_t n = j->blk_text.len;
    if (j->blk_kind == LILAC_DELTA_REASONING) {
        json_object_set_new(b, "thinking", srv_json_str(t, n));
    } else if (j->blk_kind == LILAC_DELTA_CONTENT) {
        json_object_set_new(b, "text", srv_json_str(t, n));
    } else {
        json_t *in = json_loadb(t, n, 0, NULL);
        if (!json_is_object(in)) { /* the parser writes objects; anything else would be a bug */
            fprintf(stderr, "lilac serve: %s: tool input is not a JSON object: %.200s\n", j->id, t);
            json_decref(in);
            in = json_object();
        }
        json_object_set_new(b, "input", in);
    }
    json_array_append_new(j->blocks, b);
    j->blk = NULL;
    j->blk_kind = -1;
    lilac_buf_clear(&j->blk_text);
    if (j->stream)
        push(j, "content_block_stop",
             json_pack("{s:s, s:i}", "type", "content_block_stop", "index", (int)json_array_size(j->blocks) - 1));
}

static void open_block(srv_job *j, int kind, const lilac_delta *d) {
    close_block(j);
    json_t *b;
    if (kind == LILAC_DELTA_REASONING) {
        b = json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", "");
    } else if (kind == LILAC_DELTA_CONTENT) {
        b = json_pack("{s:s, s:s}", "type", "text", "text", "");
    } else {
        /* the parser's "call_XXXX" ids in Anthropic's form */
        const char *id = d->id && !strncmp(d->id, "call_", 5) ? d->id + 5 : d->id ? d->id : "";
        char tid[96];
        snprintf(tid, sizeof tid, "toolu_%s", id);
        b = json_pack("{s:s, s:s, s:o, s:o}", "type", "tool_use", "id", tid, "name",
                      srv_json_str(d->name, d->name ? strlen(d->name) : 0), "input", json_object());
    }
    if (!b) return;
    j->blk = b;
    j->blk_kind = kind;
    if (j->stream) {
        json_t *shown = json_deep_copy(b);
        push(j, "content_block_start",
             json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", (int)json_array_size(j->blocks),
                       "content_block", shown));
    }
}

void srv_anth_delta(srv_job *j, const lilac_delta *d) {
    if (!j->blocks) return;
    int kind = d->kind == LILAC_DELTA_TOOL_ARGS ? (int)LILAC_DELTA_TOOL_START : (int)d->kind;
    if (d->kind == LILAC_DELTA_TOOL_START || kind != j->blk_kind) {
        if (d->kind == LILAC_DELTA_TOOL_ARGS) return; /* arguments without their call: the parser never does this */
        open_block(j, kind, d);
    }
    if (d->kind == LILAC_DELTA_TOOL_START || !d->len || j->blk_kind < 0) return;
    lilac_buf_append(&j->blk_text, d->text, d->len);
    if (!j->stream) return;
    const char *dt = kind == LILAC_DELTA_REASONING ? "thinking_delta" : kind == LILAC_DELTA_CONTENT ? "text_delta" : "input_json_delta";
    const char *key = kind == LILAC_DELTA_REASONING ? "thinking" : kind == LILAC_DELTA_CONTENT ? "text" : "partial_json";
    push(j, "content_block_delta",
         json_pack("{s:s, s:i, s:{s:s, s:o}}", "type", "content_block_delta", "index", (int)json_array_size(j->blocks),
                   "delta", "type", dt, key, srv_json_str(d->text, d->len)));
}

void srv_anth_end(srv_job *j) {
    if (!j->blocks) return;
    close_block(j);
    if (!j->stream) return;
    push(j, "message_delta",
         json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason", srv_anth_stop_reason(j),
                   "stop_sequence", stop_sequence(j), "usage", usage(j, 1)));
    push(j, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

void srv_anth_stream_error(srv_job *j, const srv_err *e) { push(j, "error", error_json(e)); }

char *srv_anth_body(const srv_job *j) {
    json_t *blocks = j->blocks ? json_incref(j->blocks) : json_array();
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", j->id, "type", "message", "role", "assistant",
                          "model", j->srv->model_name, "content", blocks, "stop_reason",
                          srv_anth_stop_reason(j), "stop_sequence", stop_sequence(j), "usage", usage(j, 1));
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    return s;
}
