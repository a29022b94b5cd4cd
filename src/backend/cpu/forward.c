/* forward.c — the CPU forward pass over one chunk of tokens (spec §3).
 *
 *   h = embed[ids]
 *   for each layer:  h += mixer(RMSNorm1p(h))   (Gated DeltaNet or gated attention)
 *                    h += MoE(RMSNorm1p(h))
 *   logits = RMSNorm1p(h) lm_head^T             (last row, or all rows)
 * The state (KV cache, conv and recurrent state) advances by n tokens. */
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vec.h"
#include "util/trace.h"

typedef struct {
    lilac_backend *b;
    const float *w;
    const float *src;
    float *dst;
} norm_job;

static void norm_task(void *ctx, int t, int tid) {
    norm_job *j = ctx;
    const lilac_config *c = &j->b->m->cfg;
    const size_t D = (size_t)c->hidden;
    rmsnorm(j->dst + t * D, j->src + t * D, j->w, c->hidden, c->rms_eps);
    (void)tid;
}

static void norm_rows(lilac_backend *b, const float *w, const float *src, float *dst, int T) {
    norm_job j = {b, w, src, dst};
    lilac_pool_for(b->pool, T, norm_task, &j);
}

static void add_rows(float *h, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) h[i] += x[i];
}

lilac_status cpu_forward(lilac_backend *b, lilac_state *s, const int32_t *ids, int n, const lilac_forward_out *out,
                         lilac_error *e) {
    const lilac_model *m = b->m;
    const lilac_config *c = &m->cfg;
    const int D = c->hidden, L = c->n_layers;
    if (n <= 0 || n > b->T) return lilac_fail(e, LILAC_EINVAL, "forward: %d tokens (1..%d allowed per call)", n, b->T);
    if (s->pos + n > s->cap)
        return lilac_fail(e, LILAC_EINVAL, "context full: %d + %d tokens exceed the session's %d", s->pos, n, s->cap);
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= c->vocab_size)
            return lilac_fail(e, LILAC_EINVAL, "token id %d at position %d is outside the vocabulary [0, %d)", ids[t], t,
                              c->vocab_size);

    for (int t = 0; t < n; t++) lilac_matrix_row_f32(&m->embed, 0, ids[t], b->h + (size_t)t * D);
    const int tr = lilac_trace_on();
    if (tr) lilac_trace("embed", 0, b->h, (size_t)n * D);
    float *hid = out ? out->hidden : NULL;
    const size_t chunk = (size_t)n * D;
    if (hid) memcpy(hid, b->h, chunk * sizeof(float));

    for (int l = 0; l < L; l++) {
        const lilac_layer *ly = &m->layers[l];
        norm_rows(b, ly->input_norm, b->h, b->xn, n);
        if (tr) lilac_trace("norm1", l, b->xn, chunk);
        if (ly->is_attn) cpu_attention(b, s, l, n);
        else cpu_deltanet(b, s, l, n);
        add_rows(b->h, b->blk, chunk);
        if (tr) lilac_trace("h_mixer", l, b->h, chunk);
        norm_rows(b, ly->post_norm, b->h, b->xn, n);
        cpu_moe(b, l, n);
        add_rows(b->h, b->blk, chunk);
        if (tr) lilac_trace("h_moe", l, b->h, chunk);
        if (hid && l < L - 1) memcpy(hid + (size_t)(l + 1) * chunk, b->h, chunk * sizeof(float));
    }
    s->pos += n;

    /* Final norm on the rows whose logits are wanted (all rows for the
     * hidden-state dump, which reports the final-normed last layer). */
    int all = (out && out->all_logits) || hid;
    int first = all ? 0 : n - 1, rows = n - first;
    norm_rows(b, m->final_norm, b->h + (size_t)first * D, b->logit_h, rows);
    if (hid) memcpy(hid + (size_t)L * chunk, b->logit_h, chunk * sizeof(float));
    if (out && out->logits) {
        if (out->all_logits) cpu_matmul(b, &m->lm_head, 0, b->logit_h, D, n, out->logits, c->vocab_size);
        else cpu_matmul(b, &m->lm_head, 0, b->logit_h + (size_t)(rows - 1) * D, D, 1, out->logits, c->vocab_size);
    }
    return LILAC_OK;
}
