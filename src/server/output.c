/* output.c — what happens to each generated token, in the engine thread's
 * generate callback: logprobs, detokenizing (complete UTF-8 characters only,
 * special tokens skipped), stop strings, then the reasoning/tool-call parser
 * (chat) or the plain text (completions), and for streams the SSE chunks.
 *
 * Stop strings (matching in stop_match.c): text that could still be the
 * start of a stop string is held back, so a stop string is never sent in
 * part; when one completes, the text before it is released, the rest (the
 * stop string and anything after it in that token) is dropped, and the
 * callback stops generation at that token. */
#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "server/stop_match.h"

static void on_delta(void *ctx, const lilac_delta *d) {
    srv_job *j = ctx;
    if (j->api == SRV_API_ANTHROPIC) srv_anth_delta(j, d);
    else srv_resp_chat_delta(j, d);
}

/* Anthropic content blocks are built from the deltas, streaming or not. */
static lilac_delta_fn delta_fn(const srv_job *j) { return j->stream || j->api == SRV_API_ANTHROPIC ? on_delta : NULL; }

int srv_output_begin(srv_job *j) {
    lilac_tok_stream_init(&j->ts, j->srv->tok, LILAC_TOK_SKIP_SPECIAL);
    j->in_think = j->think_open;
    if (j->logprobs) {
        if (!(j->lp_all = json_array())) return -1;
        if (j->stream && !(j->lp_pend = json_array())) return -1;
    }
    return 0;
}

/* Text released from the stop-string hold goes to the parser or the text. */
static void emit(srv_job *j, const char *p, size_t n) {
    if (!n) return;
    if (j->kind == SRV_CHAT) {
        lilac_error e = {0};
        if (lilac_parser_feed(j->parser, p, n, delta_fn(j), j, &e))
            fprintf(stderr, "lilac serve: %s: parser: %s\n", j->id, e.msg);
    } else {
        lilac_buf_append(&j->text, p, n);
        if (j->stream) srv_resp_text_delta(j, p, n);
    }
}

/* Returns 1 when a stop string completed (stop_match.h decides what is
 * released, held back or dropped). */
static int push_text(srv_job *j, const char *p, size_t n) {
    if (!j->n_stop) { /* nothing to match: no copy through the hold */
        emit(j, p, n);
        return 0;
    }
    const srv_stops st = {j->stop, j->stop_len, j->n_stop, j->stop_max};
    int stopped = 0;
    size_t k = srv_stop_push(&st, &j->hold, p, n, &stopped);
    emit(j, j->hold.data, k);
    if (stopped) { /* which stop string starts at k (the earliest start; the first listed on a tie) */
        j->stop_hit = 1;
        for (int i = 0; i < j->n_stop && j->stop_which < 0; i++)
            if (j->stop_len[i] <= j->hold.len - k && memcmp(j->hold.data + k, j->stop[i], j->stop_len[i]) == 0)
                j->stop_which = i;
    }
    srv_stop_consume(&j->hold, k, stopped);
    return stopped;
}

int srv_output_token(void *ctx, const lilac_token_info *t) {
    srv_job *j = ctx;
    if (atomic_load(&j->cancel)) return 1;
    j->n_gen = t->index + 1;
    double now = srv_now();
    if (t->index == 0) srv_metrics_ttft(j->srv->metrics, now - j->t_created);
    else srv_metrics_token_gap(j->srv->metrics, now - j->t_token);
    j->t_token = now;
    j->last_id = t->id;
    if (j->in_think) { /* usage: completion_tokens_details.reasoning_tokens */
        if (t->id == j->srv->think_close) j->in_think = 0;
        else if (!t->forced) j->reasoning_tokens++;
    }
    if (j->logprobs) srv_resp_logprob(j, t, j->text.len + j->hold.len);
    lilac_buf_clear(&j->piece);
    lilac_error e = {0};
    /* an id the tokenizer does not know (padding rows of the embedding) has no text */
    if (lilac_tok_stream_push(&j->ts, t->id, &j->piece, &e)) return 0;
    return push_text(j, j->piece.data, j->piece.len);
}

void srv_output_end(srv_job *j) {
    lilac_buf_clear(&j->piece);
    lilac_tok_stream_finish(&j->ts, &j->piece);
    if (!j->stop_hit && !push_text(j, j->piece.data, j->piece.len)) {
        emit(j, j->hold.data, j->hold.len); /* no stop string came: all of it is output */
        lilac_buf_clear(&j->hold);
    }
    if (j->kind == SRV_CHAT) {
        lilac_error e = {0};
        if (lilac_parser_finish(j->parser, delta_fn(j), j, &e))
            fprintf(stderr, "lilac serve: %s: parser: %s\n", j->id, e.msg);
    }
    if (j->api == SRV_API_ANTHROPIC) srv_anth_end(j);
    else if (j->stream) srv_resp_stream_end(j);
}
