/* deltanet.c — Gated DeltaNet for a chunk of T tokens (spec §6).
 *
 *   qkv = x Wqkv^T -> causal depthwise conv (K taps, state = last K-1 rows) -> SiLU
 *   q, k = l2norm per key head (eps inside the rsqrt of the sum); q /= sqrt(dk)
 *   beta = sigmoid(x Wb^T);  g = -exp(A_log) * softplus(x Wa^T + dt_bias)
 *   per value head h (reading key head h / (Hv/Hk)), token by token:
 *       S *= exp(g);  delta = (v - S^T k) * beta;  S += k delta^T;  o = S^T q
 *   o = RMSNorm(o) * w * silu(z) per value head;  out = o Wout^T
 * The recurrence is the exact sequential form (the reference for the chunked
 * GPU scan); heads run in parallel. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vec.h"
#include "util/trace.h"

typedef struct {
    lilac_backend *b;
    lilac_state *s;
    const lilac_layer *ly;
    int slot, T;
} gdn_job;

enum { CONV_CH_PER_TASK = 256 };

/* Channels [i*256, ...): conv over the window [state rows; chunk rows], SiLU,
 * and the new state = the window's last K-1 rows. */
static void conv_task(void *ctx, int i, int tid) {
    gdn_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int C = c->conv_dim, K = c->conv_kernel, T = j->T;
    int c0 = i * CONV_CH_PER_TASK, c1 = c0 + CONV_CH_PER_TASK;
    if (c1 > C) c1 = C;
    float *win = b->convin; /* [(K-1) + T, C] */
    float *st = j->s->conv[j->slot];
    for (int r = 0; r < K - 1; r++) memcpy(win + (size_t)r * C + c0, st + (size_t)r * C + c0, (size_t)(c1 - c0) * sizeof(float));
    for (int t = 0; t < T; t++)
        memcpy(win + (size_t)(K - 1 + t) * C + c0, b->qkv + (size_t)t * C + c0, (size_t)(c1 - c0) * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int ch = c0; ch < c1; ch++) {
            const float *w = j->ly->conv_w + (size_t)ch * K;
            float acc = 0.0f;
            for (int k = 0; k < K; k++) acc += w[k] * win[(size_t)(t + k) * C + ch];
            b->qkv[(size_t)t * C + ch] = silu(acc);
        }
    for (int r = 0; r < K - 1; r++)
        memcpy(st + (size_t)r * C + c0, win + (size_t)(T + r) * C + c0, (size_t)(c1 - c0) * sizeof(float));
    (void)tid;
}

/* Per token: l2-normalise q and k heads, scale q, compute beta and g. */
static void gates_task(void *ctx, int t, int tid) {
    gdn_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int C = c->conv_dim, Hk = c->lin_k_heads, dk = c->lin_k_dim, Hv = c->lin_v_heads;
    float *row = b->qkv + (size_t)t * C;
    const float qscale = 1.0f / sqrtf((float)dk);
    for (int part = 0; part < 2; part++)
        for (int h = 0; h < Hk; h++) {
            float *x = row + (size_t)part * Hk * dk + (size_t)h * dk;
            float ss = 0.0f;
            for (int d = 0; d < dk; d++) ss += x[d] * x[d];
            float r = 1.0f / sqrtf(ss + 1e-6f);
            if (part == 0) r *= qscale;
            for (int d = 0; d < dk; d++) x[d] *= r;
        }
    float *ba = b->ba + (size_t)t * 2 * Hv;
    for (int h = 0; h < Hv; h++) {
        ba[h] = sigmoidf(ba[h]);
        ba[Hv + h] = -expf(j->ly->A_log[h]) * softplusf(ba[Hv + h] + j->ly->dt_bias[h]);
    }
    (void)tid;
}

/* One value head over all T tokens, then its gated RMSNorm. */
static void scan_task(void *ctx, int h, int tid) {
    gdn_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int C = c->conv_dim, Hk = c->lin_k_heads, dk = c->lin_k_dim, Hv = c->lin_v_heads, dv = c->lin_v_dim;
    const int kh = h / (Hv / Hk), Vd = c->lin_value_dim;
    float *S = j->s->rec[j->slot] + (size_t)h * dk * dv; /* [dk, dv] */
    float *tmp = b->rowbuf + (size_t)tid * b->maxcols;  /* [dv] */
    for (int t = 0; t < j->T; t++) {
        const float *row = b->qkv + (size_t)t * C;
        const float *q = row + (size_t)kh * dk, *k = row + (size_t)Hk * dk + (size_t)kh * dk;
        const float *v = row + 2 * (size_t)Hk * dk + (size_t)h * dv;
        const float beta = b->ba[(size_t)t * 2 * Hv + h], decay = expf(b->ba[(size_t)t * 2 * Hv + Hv + h]);
        memset(tmp, 0, (size_t)dv * sizeof(float));
        for (int a = 0; a < dk; a++) { /* S *= decay; tmp = S^T k */
            float *Sa = S + (size_t)a * dv;
            for (int d = 0; d < dv; d++) Sa[d] *= decay;
            vec_axpy(tmp, k[a], Sa, dv);
        }
        for (int d = 0; d < dv; d++) tmp[d] = (v[d] - tmp[d]) * beta; /* delta */
        float *o = b->go + (size_t)t * Vd + (size_t)h * dv;
        memset(o, 0, (size_t)dv * sizeof(float));
        for (int a = 0; a < dk; a++) { /* S += k delta^T; o = S^T q */
            float *Sa = S + (size_t)a * dv;
            vec_axpy(Sa, k[a], tmp, dv);
            vec_axpy(o, q[a], Sa, dv);
        }
        /* gated RMSNorm: normalise, scale by the plain weight, gate with silu(z) */
        float ss = 0.0f;
        for (int d = 0; d < dv; d++) ss += o[d] * o[d];
        float r = 1.0f / sqrtf(ss / (float)dv + c->rms_eps);
        const float *z = b->z + (size_t)t * Vd + (size_t)h * dv;
        for (int d = 0; d < dv; d++) o[d] = o[d] * r * j->ly->lin_norm[d] * silu(z[d]);
    }
}

void cpu_deltanet(lilac_backend *b, lilac_state *s, int layer, int T) {
    const lilac_config *c = &b->m->cfg;
    const lilac_layer *ly = &b->m->layers[layer];
    const int D = c->hidden, C = c->conv_dim, Vd = c->lin_value_dim, Hv = c->lin_v_heads;
    cpu_matmul(b, &ly->in_qkv, 0, b->xn, D, T, b->qkv, C);
    cpu_matmul(b, &ly->in_z, 0, b->xn, D, T, b->z, Vd);
    cpu_matmul(b, &ly->in_b, 0, b->xn, D, T, b->ba, 2 * Hv);
    cpu_matmul(b, &ly->in_a, 0, b->xn, D, T, b->ba + Hv, 2 * Hv);
    gdn_job j = {b, s, ly, lilac_config_layer_slot(c, layer), T};
    const int tr = lilac_trace_on();
    if (tr) lilac_trace("gdn_qkv", layer, b->qkv, (size_t)T * C), lilac_trace("gdn_z", layer, b->z, (size_t)T * Vd),
        lilac_trace("gdn_ba", layer, b->ba, (size_t)T * 2 * Hv);
    lilac_pool_for(b->pool, (C + CONV_CH_PER_TASK - 1) / CONV_CH_PER_TASK, conv_task, &j);
    lilac_pool_for(b->pool, T, gates_task, &j);
    if (tr) lilac_trace("gdn_conv", layer, b->qkv, (size_t)T * C), lilac_trace("gdn_gates", layer, b->ba, (size_t)T * 2 * Hv);
    lilac_pool_for(b->pool, Hv, scan_task, &j);
    if (tr) lilac_trace("gdn_scan", layer, b->go, (size_t)T * Vd);
    cpu_matmul(b, &ly->out_proj, 0, b->go, Vd, T, b->blk, D);
}
