/* grammar_vocab.c — the vocabulary index of constrained decoding: every
 * token's bytes and a trie over the plain tokens, built once per tokenizer
 * (248K ids: about a second's tenth).  The trie is stored in DFS order with,
 * per node, the index just past its subtree, so a walk that finds a prefix
 * dead skips everything below it in one step. */
#include <stdlib.h>
#include <string.h>

#include "text/grammar_impl.h"

void lg_vocab_free(lg_vocab *v) {
    if (!v) return;
    free(v->off);
    free(v->len);
    free(v->added);
    free(v->bytes);
    free(v->byte);
    free(v->depth);
    free(v->skip);
    free(v->tok);
    free(v);
}

int lg_vocab_size(const lg_vocab *v) { return v->V; }
size_t lg_vocab_nodes(const lg_vocab *v) { return v->n; }

static int cmp_bytes(const void *a, const void *b, void *ctx) {
    const lg_vocab *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t lx = v->len[x], ly = v->len[y], n = lx < ly ? lx : ly;
    int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], n);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The trie of the plain tokens, from their ids sorted by bytes. */
static int build_trie(lg_vocab *v, const int32_t *ids, int n) {
    size_t cap = 0;
    for (int i = 0; i < n; i++) cap += v->len[ids[i]];
    if (cap == 0) cap = 1;
    v->byte = malloc(cap);
    v->depth = malloc(cap * sizeof *v->depth);
    v->skip = malloc(cap * sizeof *v->skip);
    v->tok = malloc(cap * sizeof *v->tok);
    uint32_t *open = malloc(((size_t)v->max_len + 1) * sizeof *open); /* open[d]: the node at depth d */
    if (!v->byte || !v->depth || !v->skip || !v->tok || !open) {
        free(open);
        return -1;
    }
    size_t nn = 0;
    int depth = 0; /* nodes open[1..depth] are on the current path */
    const unsigned char *prev = NULL;
    size_t prev_len = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        const unsigned char *b = v->bytes + v->off[id];
        size_t L = v->len[id], common = 0;
        while (prev && common < L && common < prev_len && b[common] == prev[common]) common++;
        if (prev && common == L && L == prev_len) continue; /* same bytes as the previous id: the first one stands */
        while ((size_t)depth > common) v->skip[open[depth--]] = (uint32_t)nn;
        for (size_t d = common + 1; d <= L; d++) {
            v->byte[nn] = b[d - 1];
            v->depth[nn] = (uint16_t)d;
            v->tok[nn] = -1;
            open[++depth] = (uint32_t)nn++;
        }
        v->tok[open[L]] = id;
        prev = b;
        prev_len = L;
    }
    while (depth > 0) v->skip[open[depth--]] = (uint32_t)nn;
    v->n = nn;
    free(open);
    return 0;
}

lilac_status lg_vocab_new_raw(int V, const char *const *tokens, const size_t *len, const uint8_t *special,
                              lg_vocab **out, lilac_error *e) {
    *out = NULL;
    if (V <= 0) return lilac_fail(e, LILAC_EINVAL, "grammar vocabulary: %d ids", V);
    lg_vocab *v = calloc(1, sizeof *v);
    if (!v) return lilac_fail(e, LILAC_ENOMEM, "grammar vocabulary");
    v->V = V;
    v->words = (V + 31) / 32;
    v->off = calloc((size_t)V, sizeof *v->off);
    v->len = calloc((size_t)V, sizeof *v->len);
    v->added = calloc((size_t)V, 1);
    size_t total = 0;
    for (int i = 0; i < V; i++)
        if (tokens[i] && len[i] <= 65535) total += len[i];
    v->bytes = malloc(total ? total : 1);
    int32_t *ids = malloc((size_t)V * sizeof *ids);
    if (!v->off || !v->len || !v->added || !v->bytes || !ids) goto oom;
    size_t at = 0;
    int n = 0;
    for (int i = 0; i < V; i++) {
        if (!tokens[i] || len[i] == 0 || len[i] > 65535) continue;
        memcpy(v->bytes + at, tokens[i], len[i]);
        v->off[i] = (uint32_t)at;
        v->len[i] = (uint16_t)len[i];
        at += len[i];
        if (special && special[i]) {
            v->added[i] = 1;
            continue;
        }
        if ((int)len[i] > v->max_len) v->max_len = (int)len[i];
        ids[n++] = i;
    }
    qsort_r(ids, (size_t)n, sizeof *ids, cmp_bytes, v);
    if (build_trie(v, ids, n)) goto oom;
    free(ids);
    *out = v;
    return LILAC_OK;
oom:
    free(ids);
    lg_vocab_free(v);
    return lilac_fail(e, LILAC_ENOMEM, "grammar vocabulary of %d ids", V);
}

lilac_status lg_vocab_new(const lilac_tokenizer *t, int V, lg_vocab **out, lilac_error *e) {
    const char **tok = calloc((size_t)V, sizeof *tok);
    size_t *len = calloc((size_t)V, sizeof *len);
    uint8_t *sp = calloc((size_t)V, 1);
    lilac_status st;
    if (!tok || !len || !sp) {
        st = lilac_fail(e, LILAC_ENOMEM, "grammar vocabulary of %d ids", V);
    } else {
        for (int i = 0; i < V; i++) {
            tok[i] = lilac_tokenizer_token(t, i, &len[i]);
            sp[i] = tok[i] && lilac_tokenizer_is_added(t, i);
        }
        st = lg_vocab_new_raw(V, tok, len, sp, out, e);
    }
    free(tok);
    free(len);
    free(sp);
    return st;
}
