/* attention.c — gated full attention for a chunk of T tokens (spec §5).
 *
 *   q|gate = x Wq^T (per head: hd query rows, then hd gate rows)
 *   k, v   = x Wk^T, x Wv^T
 *   q, k   = RMSNorm1p per head, then rotate-half RoPE on the first rotary_dim dims
 *   o      = causal softmax(q k^T / sqrt(hd)) v, query head h reading kv head h / (H/Hkv)
 *   out    = (o * sigmoid(gate)) Wo^T
 * K (after norm and RoPE) and V are appended to the state's cache; the
 * softmax is computed online (running max and sum), so no score buffer. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vec.h"
#include "util/trace.h"

/* Rotate-half RoPE over x[0..rd): pairs (j, j + rd/2). */
static void rope(float *x, int rd, const float *inv, int pos) {
    const int half = rd / 2;
    for (int j = 0; j < half; j++) {
        float ang = (float)pos * inv[j];
        float c = cosf(ang), s = sinf(ang);
        float x1 = x[j], x2 = x[j + half];
        x[j] = x1 * c - x2 * s;
        x[j + half] = x2 * c + x1 * s;
    }
}

typedef struct {
    lilac_backend *b;
    lilac_state *s;
    const lilac_layer *ly;
    int slot, T, pos0;
} attn_job;

/* Per token: norm + RoPE of its query heads and kv heads, cache append. */
static void prep_task(void *ctx, int t, int tid) {
    attn_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int H = c->n_heads, Hkv = c->n_kv_heads, hd = c->head_dim, pos = j->pos0 + t;
    for (int h = 0; h < H; h++) {
        float *q = b->qg + (size_t)t * H * 2 * hd + (size_t)h * 2 * hd;
        rmsnorm(q, q, j->ly->q_norm, hd, c->rms_eps);
        rope(q, c->rotary_dim, b->rope_inv, pos);
    }
    float *kc = j->s->k[j->slot] + (size_t)pos * Hkv * hd, *vc = j->s->v[j->slot] + (size_t)pos * Hkv * hd;
    for (int g = 0; g < Hkv; g++) {
        float *k = b->kk + (size_t)t * Hkv * hd + (size_t)g * hd;
        rmsnorm(k, k, j->ly->k_norm, hd, c->rms_eps);
        rope(k, c->rotary_dim, b->rope_inv, pos);
        memcpy(kc + (size_t)g * hd, k, (size_t)hd * sizeof(float));
        memcpy(vc + (size_t)g * hd, b->vv + (size_t)t * Hkv * hd + (size_t)g * hd, (size_t)hd * sizeof(float));
    }
    (void)tid;
}

/* One (token, query head): online-softmax attention over the cache, gated. */
static void attend_task(void *ctx, int i, int tid) {
    attn_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int H = c->n_heads, Hkv = c->n_kv_heads, hd = c->head_dim;
    const int t = i / H, h = i % H, g = h / (H / Hkv), n = j->pos0 + t + 1;
    const float *q = b->qg + (size_t)t * H * 2 * hd + (size_t)h * 2 * hd;
    const float *gate = q + hd;
    const float scale = 1.0f / sqrtf((float)hd);
    float *acc = b->rowbuf + (size_t)tid * b->maxcols; /* [hd] */
    memset(acc, 0, (size_t)hd * sizeof(float));
    float mx = -INFINITY, sum = 0.0f;
    const float *K = j->s->k[j->slot], *V = j->s->v[j->slot];
    for (int p = 0; p < n; p++) {
        float sc = vec_dot(q, K + ((size_t)p * Hkv + g) * hd, hd) * scale;
        if (sc > mx) {
            float r = expf(mx - sc); /* rescale what was accumulated under the old max */
            sum *= r;
            for (int d = 0; d < hd; d++) acc[d] *= r;
            mx = sc;
        }
        float w = expf(sc - mx);
        sum += w;
        vec_axpy(acc, w, V + ((size_t)p * Hkv + g) * hd, hd);
    }
    float *o = b->ao + (size_t)t * H * hd + (size_t)h * hd;
    for (int d = 0; d < hd; d++) o[d] = acc[d] / sum * sigmoidf(gate[d]);
}

void cpu_attention(lilac_backend *b, lilac_state *s, int layer, int T) {
    const lilac_config *c = &b->m->cfg;
    const lilac_layer *ly = &b->m->layers[layer];
    const int D = c->hidden, H = c->n_heads, Hkv = c->n_kv_heads, hd = c->head_dim;
    cpu_matmul(b, &ly->q_proj, 0, b->xn, D, T, b->qg, H * 2 * hd);
    cpu_matmul(b, &ly->k_proj, 0, b->xn, D, T, b->kk, Hkv * hd);
    cpu_matmul(b, &ly->v_proj, 0, b->xn, D, T, b->vv, Hkv * hd);
    attn_job j = {b, s, ly, lilac_config_layer_slot(c, layer), T, s->pos};
    const int tr = lilac_trace_on();
    if (tr) lilac_trace("attn_qg", layer, b->qg, (size_t)T * H * 2 * hd), lilac_trace("attn_k", layer, b->kk, (size_t)T * Hkv * hd);
    lilac_pool_for(b->pool, T, prep_task, &j);
    if (tr) lilac_trace("attn_qrope", layer, b->qg, (size_t)T * H * 2 * hd), lilac_trace("attn_krope", layer, b->kk, (size_t)T * Hkv * hd);
    lilac_pool_for(b->pool, T * H, attend_task, &j);
    if (tr) lilac_trace("attn_out", layer, b->ao, (size_t)T * H * hd);
    cpu_matmul(b, &ly->o_proj, 0, b->ao, H * hd, T, b->blk, D);
}
