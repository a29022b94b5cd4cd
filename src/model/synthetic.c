/* synthetic.c — a model of real shapes without weight data, for device-side
 * benchmarks ("lilac bench --synthetic"): the backend generates the weights
 * where they will be used, so a 19 GB model never crosses PCIe or disk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static lilac_matrix qmat(int bits, int n_mat, int rows, int cols) {
    lilac_matrix m = {0};
    m.type = bits == 8 ? LILAC_MAT_Q8 : LILAC_MAT_Q4;
    m.rows = rows, m.cols = cols, m.n_mat = n_mat, m.group = 64;
    m.mat_stride = (size_t)rows * (size_t)cols * (size_t)bits / 8;
    m.mat_stride_sb = (size_t)rows * (size_t)(cols / 64);
    return m;
}

lilac_status lilac_model_synthetic(const lilac_config *c, lilac_model *m, lilac_error *e) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->cfg.quant_overrides = NULL; /* not needed: shapes are fixed here */
    m->cfg.n_quant_overrides = 0;
    m->cfg.quantized = 1;
    m->layout = LILAC_LAYOUT_MLX;
    m->synthetic = 1;
    const int D = c->hidden, L = c->n_layers;
    size_t per_layer = 2 * (size_t)D + 2 * (size_t)c->head_dim + (size_t)c->conv_dim * c->conv_kernel +
                       2 * (size_t)c->lin_v_heads + (size_t)c->lin_v_dim;
    m->arena_cap = per_layer * (size_t)L + (size_t)D;
    m->arena = malloc(m->arena_cap * sizeof *m->arena);
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->arena || !m->layers) {
        lilac_model_free(m);
        return lilac_fail(e, LILAC_ENOMEM, "synthetic model");
    }
    float *a = m->arena;
#define TAKE(n) (m->arena_used += (n), a + m->arena_used - (n))
    uint64_t x = 0x9e3779b97f4a7c15ull;
#define RND() ((x = x * 6364136223846793005ull + 1442695040888963407ull), (float)((x >> 40) & 0xffffff) / 16777216.0f)
    m->embed = qmat(4, 1, c->vocab_size, D);
    m->lm_head = qmat(4, 1, c->vocab_size, D);
    float *fn = TAKE((size_t)D);
    for (int i = 0; i < D; i++) fn[i] = 1.0f;
    m->final_norm = fn;
    for (int l = 0; l < L; l++) {
        lilac_layer *ly = &m->layers[l];
        ly->is_attn = c->is_attn[l];
        float *in = TAKE((size_t)D), *pn = TAKE((size_t)D);
        for (int i = 0; i < D; i++) in[i] = pn[i] = 1.0f;
        ly->input_norm = in, ly->post_norm = pn;
        if (ly->is_attn) {
            int hd = c->head_dim;
            ly->q_proj = qmat(4, 1, c->n_heads * hd * 2, D);
            ly->k_proj = qmat(4, 1, c->n_kv_heads * hd, D);
            ly->v_proj = qmat(4, 1, c->n_kv_heads * hd, D);
            ly->o_proj = qmat(4, 1, D, c->n_heads * hd);
            float *qn = TAKE((size_t)hd), *kn = TAKE((size_t)hd);
            for (int i = 0; i < hd; i++) qn[i] = kn[i] = 1.0f;
            ly->q_norm = qn, ly->k_norm = kn;
        } else {
            const int Hv = c->lin_v_heads;
            ly->in_qkv = qmat(4, 1, c->conv_dim, D);
            ly->in_z = qmat(4, 1, c->lin_value_dim, D);
            ly->in_b = qmat(4, 1, Hv, D);
            ly->in_a = qmat(4, 1, Hv, D);
            ly->out_proj = qmat(4, 1, D, c->lin_value_dim);
            float *cw = TAKE((size_t)c->conv_dim * c->conv_kernel), *al = TAKE((size_t)Hv), *dt = TAKE((size_t)Hv),
                  *ln = TAKE((size_t)c->lin_v_dim);
            for (size_t i = 0; i < (size_t)c->conv_dim * c->conv_kernel; i++) cw[i] = (RND() - 0.5f) * 0.5f;
            for (int h = 0; h < Hv; h++) al[h] = logf(1.0f + 15.0f * RND()), dt[h] = RND() - 0.5f;
            for (int i = 0; i < c->lin_v_dim; i++) ln[i] = 1.0f;
            ly->conv_w = cw, ly->A_log = al, ly->dt_bias = dt, ly->lin_norm = ln;
        }
        const int E = c->n_experts, I = c->moe_inter, Is = c->shared_inter;
        ly->router = qmat(8, 1, E, D);
        ly->sh_gate_proj = qmat(8, 1, 1, D);
        ly->exp_gate = qmat(4, E, I, D);
        ly->exp_up = qmat(4, E, I, D);
        ly->exp_down = qmat(4, E, D, I);
        ly->sh_gate = qmat(4, 1, Is, D);
        ly->sh_up = qmat(4, 1, Is, D);
        ly->sh_down = qmat(4, 1, D, Is);
    }
#undef TAKE
#undef RND
    m->weight_bytes = lilac_model_weight_bytes(m);
    return LILAC_OK;
}
