/* tokenize_ep.c — POST /tokenize and POST /detokenize, in llama.cpp's
 * request and response shapes, on the served model's tokenizer (HTTP
 * threads; the tokenizer is shared read-only).
 *
 *   /tokenize    {"content": STRING, "parse_special": true, "with_pieces": false,
 *                 "add_special": false}
 *                -> {"tokens": [ID, ...]}, or with_pieces
 *                -> {"tokens": [{"id": ID, "piece": STRING}, ...]}
 *   /detokenize  {"tokens": [ID, ...]} -> {"content": STRING}
 *
 * parse_special false reads added tokens (<|im_start|> ...) as plain text.
 * add_special is accepted and changes nothing: the Qwen tokenizer adds no BOS
 * or EOS.  Pieces and content that are not valid UTF-8 on their own (a
 * character split across tokens) are repaired with U+FFFD. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define JFLAGS JSON_COMPACT

static int opt_bool(json_t *body, const char *key, int dflt, int *out, srv_err *err) {
    json_t *v = json_object_get(body, key);
    *out = dflt;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return srv_errf(err, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static char *dump(json_t *o, srv_err *err) {
    char *s = o ? json_dumps(o, JFLAGS) : NULL;
    json_decref(o);
    if (!s) srv_errf(err, 500, NULL, "out of memory");
    return s;
}

char *srv_tokenize(const srv_ctx *srv, json_t *body, srv_err *err) {
    json_t *content = json_object_get(body, "content");
    if (!content || json_is_null(content)) return srv_errf(err, 400, "content", "'content' is required"), NULL;
    if (!json_is_string(content)) return srv_errf(err, 400, "content", "'content' must be a string"), NULL;
    int parse_special, with_pieces, add_special;
    if (opt_bool(body, "parse_special", 1, &parse_special, err) || opt_bool(body, "with_pieces", 0, &with_pieces, err) ||
        opt_bool(body, "add_special", 0, &add_special, err))
        return NULL;
    lilac_ids ids = LILAC_IDS_INIT;
    lilac_error e = {0};
    if (lilac_tokenizer_encode(srv->tok, json_string_value(content), json_string_length(content),
                               parse_special ? 0 : LILAC_TOK_SPLIT_SPECIAL, &ids, &e)) {
        fprintf(stderr, "lilac serve: /tokenize: %s\n", e.msg);
        lilac_ids_free(&ids);
        return srv_errf(err, 500, NULL, "internal error while tokenizing"), NULL;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < ids.len; i++) {
        if (!with_pieces) {
            json_array_append_new(arr, json_integer(ids.v[i]));
            continue;
        }
        lilac_buf piece = LILAC_BUF_INIT;
        lilac_tokenizer_decode(srv->tok, &ids.v[i], 1, 0, &piece, &e);
        json_array_append_new(arr, json_pack("{s:i, s:o}", "id", ids.v[i], "piece", srv_json_str(piece.data, piece.len)));
        lilac_buf_free(&piece);
    }
    lilac_ids_free(&ids);
    return dump(arr ? json_pack("{s:o}", "tokens", arr) : NULL, err);
}

char *srv_detokenize(const srv_ctx *srv, json_t *body, srv_err *err) {
    json_t *tokens = json_object_get(body, "tokens");
    if (!tokens || json_is_null(tokens)) return srv_errf(err, 400, "tokens", "'tokens' is required"), NULL;
    if (!json_is_array(tokens)) return srv_errf(err, 400, "tokens", "'tokens' must be an array of token ids"), NULL;
    size_t n = json_array_size(tokens);
    int32_t nids = lilac_tokenizer_n_ids(srv->tok);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return srv_errf(err, 500, NULL, "out of memory"), NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(tokens, i);
        json_int_t id = json_integer_value(x);
        if (!json_is_integer(x) || id < 0 || id >= nids) {
            free(ids);
            return srv_errf(err, 400, "tokens", "tokens[%zu] must be a token id in [0, %d)", i, (int)nids), NULL;
        }
        ids[i] = (int32_t)id;
    }
    lilac_buf out = LILAC_BUF_INIT;
    lilac_error e = {0};
    lilac_status st = lilac_tokenizer_decode(srv->tok, ids, n, 0, &out, &e);
    free(ids);
    if (st || out.oom) {
        fprintf(stderr, "lilac serve: /detokenize: %s\n", st ? e.msg : "out of memory");
        lilac_buf_free(&out);
        return srv_errf(err, 500, NULL, "internal error while detokenizing"), NULL;
    }
    json_t *o = json_pack("{s:o}", "content", srv_json_str(out.data, out.len));
    lilac_buf_free(&out);
    return dump(o, err);
}
