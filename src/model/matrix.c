/* matrix.c — sizes of lilac_matrix views and a scalar row dequantiser
 * (the reference every kernel's dequantisation is checked against). */
#include "model/model.h"
#include "util/bf16.h"

size_t lilac_matrix_row_bytes(const lilac_matrix *m) {
    switch (m->type) {
    case LILAC_MAT_F32: return (size_t)m->cols * 4;
    case LILAC_MAT_BF16: return (size_t)m->cols * 2;
    case LILAC_MAT_Q4: return (size_t)m->cols / 2;
    case LILAC_MAT_Q8: return (size_t)m->cols;
    }
    return 0;
}

size_t lilac_matrix_bytes(const lilac_matrix *m) {
    size_t per = (size_t)m->rows * lilac_matrix_row_bytes(m);
    if (m->group) per += 2 * 2 * (size_t)m->rows * (size_t)(m->cols / m->group);
    return per * (size_t)m->n_mat;
}

void lilac_matrix_row_f32(const lilac_matrix *m, int e, int r, float *out) {
    const unsigned char *w = (const unsigned char *)m->w + (size_t)e * m->mat_stride + (size_t)r * lilac_matrix_row_bytes(m);
    const int n = m->cols;
    switch (m->type) {
    case LILAC_MAT_F32:
        for (int i = 0; i < n; i++) out[i] = ((const float *)w)[i];
        return;
    case LILAC_MAT_BF16:
        for (int i = 0; i < n; i++) out[i] = lilac_bf16_to_f32(((const uint16_t *)w)[i]);
        return;
    case LILAC_MAT_Q4:
    case LILAC_MAT_Q8: {
        /* group by group, word by word: no division in the inner loop */
        const int bits = m->type == LILAC_MAT_Q4 ? 4 : 8, per_word = 32 / bits, G = m->group;
        const uint32_t mask = (1u << bits) - 1;
        const size_t sb = (size_t)e * m->mat_stride_sb + (size_t)r * (size_t)(n / G);
        const uint32_t *q = (const uint32_t *)w;
        for (int g = 0; g < n / G; g++) {
            const float s = lilac_bf16_to_f32(m->scales[sb + (size_t)g]), b = lilac_bf16_to_f32(m->biases[sb + (size_t)g]);
            const uint32_t *qw = q + (size_t)g * G / per_word;
            float *o = out + (size_t)g * G;
            for (int k = 0; k < G / per_word; k++) {
                const uint32_t word = qw[k];
                for (int i = 0; i < per_word; i++) o[k * per_word + i] = s * (float)((word >> (bits * i)) & mask) + b;
            }
        }
        return;
    }
    }
}

size_t lilac_model_weight_bytes(const lilac_model *m) {
    const int tied = m->lm_head.w && m->lm_head.w == m->embed.w;
    size_t n = lilac_matrix_bytes(&m->embed) + (tied ? 0 : lilac_matrix_bytes(&m->lm_head));
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const lilac_layer *ly = &m->layers[i];
        const lilac_matrix *all[] = {&ly->q_proj,   &ly->k_proj,   &ly->v_proj,  &ly->o_proj,  &ly->in_qkv,  &ly->in_z,
                                     &ly->in_b,     &ly->in_a,     &ly->out_proj, &ly->router, &ly->exp_gate,
                                     &ly->exp_up,   &ly->exp_down, &ly->sh_gate, &ly->sh_up,   &ly->sh_down,
                                     &ly->sh_gate_proj};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
            if (all[k]->rows) n += lilac_matrix_bytes(all[k]); /* the other layer type's views are empty */
    }
    return n;
}
