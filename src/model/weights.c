/* weights.c — checkpoint tensors -> lilac_model, for both layouts.
 *
 * Layouts (see docs/MODEL.md and the team spec §2, §11):
 *   MLX  names language_model.model.* and language_model.lm_head.*; stacked
 *        experts mlp.switch_mlp.{gate,up,down}_proj; quantised linears as
 *        {weight U32, scales BF16, biases BF16}; conv1d [C, K, 1]; the +1 of
 *        the zero-centred norms already added; A_log F32 or BF16.
 *   HF   names model.language_model.* and lm_head.weight; fused experts
 *        mlp.experts.gate_up_proj [E, 2I, H] and down_proj [E, H, I]; bf16
 *        linears; conv1d [C, 1, K]; zero-centred norms used as 1 + w.
 * Every tensor in the files must be consumed, except the vision encoder
 * (MLX vision_tower.*, HF model.visual.*) and HF's multi-token-prediction
 * head (mtp.*), which the text decoder does not use. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/bf16.h"

typedef struct {
    lilac_model *m;
    lilac_tensors *ts;
    char pfx[64];      /* decoder prefix, e.g. "language_model.model." */
    char head[64];     /* lm_head module, e.g. "language_model.lm_head" */
    lilac_error *e;
} loader;

static const char *fmt_name(char *buf, size_t cap, const char *fmt, va_list ap) {
    vsnprintf(buf, cap, fmt, ap);
    return buf;
}

static lilac_tensor *find(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static lilac_tensor *find(loader *L, const char *fmt, ...) {
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    fmt_name(name, sizeof name, fmt, ap);
    va_end(ap);
    return lilac_st_find_mut(L->ts, name);
}

static const char *shape_str(const lilac_tensor *t, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int i = 0; i < t->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

/* Checks t's shape against dims[0..ndim); names the tensor on mismatch. */
static lilac_status expect_shape(loader *L, const lilac_tensor *t, int ndim, const int64_t *dims) {
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == dims[i];
    if (ok) return LILAC_OK;
    char got[128], want[128];
    lilac_tensor w = {.ndim = ndim};
    for (int i = 0; i < ndim; i++) w.shape[i] = dims[i];
    return lilac_fail(L->e, LILAC_EFORMAT, "%s: tensor %s has shape %s, expected %s (from config.json)",
                      L->ts->files[t->file], t->name, shape_str(t, got, sizeof got), shape_str(&w, want, sizeof want));
}

static lilac_status expect_dtype(loader *L, const lilac_tensor *t, lilac_dtype a, lilac_dtype b) {
    if (t->dtype == a || t->dtype == b) return LILAC_OK;
    return lilac_fail(L->e, LILAC_EFORMAT, "%s: tensor %s has dtype %s, expected %s%s%s", L->ts->files[t->file], t->name,
                      lilac_dtype_name(t->dtype), lilac_dtype_name(a), a != b ? " or " : "", a != b ? lilac_dtype_name(b) : "");
}

static lilac_status missing(loader *L, const char *name) {
    return lilac_fail(L->e, LILAC_EFORMAT, "missing tensor %s", name);
}

static float *arena_alloc(loader *L, size_t n) {
    lilac_model *m = L->m;
    if (m->arena_used + n > m->arena_cap) return NULL;
    float *p = m->arena + m->arena_used;
    m->arena_used += n;
    return p;
}

/* A 1-D (or [C, K]) parameter converted to f32; add_one for zero-centred
 * norms stored without the +1 (HF layout). */
static lilac_status load_vec(loader *L, const char *name, int ndim, const int64_t *dims, int add_one, const float **out) {
    lilac_tensor *t = lilac_st_find_mut(L->ts, name);
    if (!t) return missing(L, name);
    lilac_status st;
    if ((st = expect_dtype(L, t, LILAC_DT_BF16, LILAC_DT_F32)) || (st = expect_shape(L, t, ndim, dims))) return st;
    size_t n = t->nbytes / lilac_dtype_size(t->dtype);
    float *v = arena_alloc(L, n);
    if (!v) return lilac_fail(L->e, LILAC_ENOMEM, "parameter arena is full at %s", name);
    for (size_t i = 0; i < n; i++) {
        float x = t->dtype == LILAC_DT_F32 ? ((const float *)t->data)[i] : lilac_bf16_to_f32(((const uint16_t *)t->data)[i]);
        v[i] = add_one ? 1.0f + x : x;
    }
    t->used = 1;
    *out = v;
    return LILAC_OK;
}

static lilac_status load_norm(loader *L, const char *name, int n, const float **out) {
    int64_t d[1] = {n};
    return load_vec(L, name, 1, d, L->m->layout == LILAC_LAYOUT_HF, out);
}

/* A linear (or a stack of n_mat expert linears when stacked) named
 * BASE.weight [+ BASE.scales/.biases when quantised]. */
static lilac_status load_matrix(loader *L, const char *base, int stacked, int n_mat, int rows, int cols, lilac_matrix *mt) {
    char name[512];
    snprintf(name, sizeof name, "%s.weight", base);
    lilac_tensor *w = lilac_st_find_mut(L->ts, name);
    if (!w) return missing(L, name);
    lilac_tensor *s = find(L, "%s.scales", base), *b = find(L, "%s.biases", base);
    const lilac_config *c = &L->m->cfg;
    int nd = stacked ? 3 : 2;
    int64_t dims[3];
    int o = 0;
    if (stacked) dims[o++] = n_mat;
    lilac_status st;
    memset(mt, 0, sizeof *mt);
    mt->rows = rows, mt->cols = cols, mt->n_mat = stacked ? n_mat : 1;
    if (s || b) {
        if (!s || !b)
            return lilac_fail(L->e, LILAC_EFORMAT, "%s: quantised linear %s needs both .scales and .biases", L->ts->files[w->file], base);
        int bits, group;
        if (!lilac_config_quant_for(c, base, &bits, &group))
            return lilac_fail(L->e, LILAC_EFORMAT,
                              "%s: %s is quantised (has .scales) but config.json's quantization does not cover it",
                              L->ts->files[w->file], base);
        if (cols % group)
            return lilac_fail(L->e, LILAC_EFORMAT, "%s: input size %d is not a multiple of the quantization group %d", base, cols, group);
        if ((st = expect_dtype(L, w, LILAC_DT_U32, LILAC_DT_U32))) return st;
        /* The packed width must agree with config.json's bits for this module. */
        if (w->ndim == nd && w->shape[nd - 1] * 32 != (int64_t)cols * bits)
            return lilac_fail(L->e, LILAC_EFORMAT,
                              "%s: tensor %s packs %lld words per row, which is not %d-bit codes for %d inputs (config.json quantization)",
                              L->ts->files[w->file], w->name, (long long)w->shape[nd - 1], bits, cols);
        dims[o] = rows, dims[o + 1] = (int64_t)cols * bits / 32;
        if ((st = expect_shape(L, w, nd, dims))) return st;
        dims[o + 1] = cols / group;
        if ((st = expect_dtype(L, s, LILAC_DT_BF16, LILAC_DT_BF16)) || (st = expect_shape(L, s, nd, dims)) ||
            (st = expect_dtype(L, b, LILAC_DT_BF16, LILAC_DT_BF16)) || (st = expect_shape(L, b, nd, dims)))
            return st;
        mt->type = bits == 4 ? LILAC_MAT_Q4 : LILAC_MAT_Q8;
        mt->group = group;
        mt->scales = s->data;
        mt->biases = b->data;
        mt->mat_stride_sb = (size_t)rows * (size_t)(cols / group);
        s->used = b->used = 1;
    } else {
        if ((st = expect_dtype(L, w, LILAC_DT_BF16, LILAC_DT_F32))) return st;
        dims[o] = rows, dims[o + 1] = cols;
        if ((st = expect_shape(L, w, nd, dims))) return st;
        mt->type = w->dtype == LILAC_DT_BF16 ? LILAC_MAT_BF16 : LILAC_MAT_F32;
    }
    mt->w = w->data;
    mt->mat_stride = (size_t)rows * lilac_matrix_row_bytes(mt);
    w->used = 1;
    return LILAC_OK;
}

/* HF fused experts: gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up)
 * and down_proj [E, H, I], viewed as three stacked matrices. */
static lilac_status load_hf_experts(loader *L, const char *lp, lilac_layer *ly) {
    const lilac_config *c = &L->m->cfg;
    char name[512];
    snprintf(name, sizeof name, "%smlp.experts.gate_up_proj", lp);
    lilac_tensor *gu = lilac_st_find_mut(L->ts, name);
    if (!gu) return missing(L, name);
    lilac_status st;
    int64_t d1[3] = {c->n_experts, 2 * c->moe_inter, c->hidden};
    if ((st = expect_dtype(L, gu, LILAC_DT_BF16, LILAC_DT_F32)) || (st = expect_shape(L, gu, 3, d1))) return st;
    snprintf(name, sizeof name, "%smlp.experts.down_proj", lp);
    lilac_tensor *dn = lilac_st_find_mut(L->ts, name);
    if (!dn) return missing(L, name);
    int64_t d2[3] = {c->n_experts, c->hidden, c->moe_inter};
    if ((st = expect_dtype(L, dn, LILAC_DT_BF16, LILAC_DT_F32)) || (st = expect_shape(L, dn, 3, d2))) return st;
    lilac_mat_type ty = gu->dtype == LILAC_DT_BF16 ? LILAC_MAT_BF16 : LILAC_MAT_F32;
    size_t es = lilac_dtype_size(gu->dtype);
    ly->exp_gate = (lilac_matrix){.type = ty, .rows = c->moe_inter, .cols = c->hidden, .n_mat = c->n_experts, .w = gu->data,
                                  .mat_stride = (size_t)2 * c->moe_inter * c->hidden * es};
    ly->exp_up = ly->exp_gate;
    ly->exp_up.w = (const char *)gu->data + (size_t)c->moe_inter * c->hidden * es;
    ly->exp_down = (lilac_matrix){.type = dn->dtype == LILAC_DT_BF16 ? LILAC_MAT_BF16 : LILAC_MAT_F32, .rows = c->hidden,
                                  .cols = c->moe_inter, .n_mat = c->n_experts, .w = dn->data,
                                  .mat_stride = (size_t)c->hidden * c->moe_inter * lilac_dtype_size(dn->dtype)};
    gu->used = dn->used = 1;
    return LILAC_OK;
}

static lilac_status load_layer(loader *L, int i) {
    lilac_model *m = L->m;
    const lilac_config *c = &m->cfg;
    lilac_layer *ly = &m->layers[i];
    char lp[128], base[512];
    snprintf(lp, sizeof lp, "%slayers.%d.", L->pfx, i);
    lilac_status st;
    ly->is_attn = c->is_attn[i];
#define NAME(...) (snprintf(base, sizeof base, __VA_ARGS__), base)
    if ((st = load_norm(L, NAME("%sinput_layernorm.weight", lp), c->hidden, &ly->input_norm)) ||
        (st = load_norm(L, NAME("%spost_attention_layernorm.weight", lp), c->hidden, &ly->post_norm)))
        return st;
    const int D = c->hidden;
    if (ly->is_attn) {
        int hd = c->head_dim;
        if ((st = load_matrix(L, NAME("%sself_attn.q_proj", lp), 0, 1, c->n_heads * hd * 2, D, &ly->q_proj)) ||
            (st = load_matrix(L, NAME("%sself_attn.k_proj", lp), 0, 1, c->n_kv_heads * hd, D, &ly->k_proj)) ||
            (st = load_matrix(L, NAME("%sself_attn.v_proj", lp), 0, 1, c->n_kv_heads * hd, D, &ly->v_proj)) ||
            (st = load_matrix(L, NAME("%sself_attn.o_proj", lp), 0, 1, D, c->n_heads * hd, &ly->o_proj)) ||
            (st = load_norm(L, NAME("%sself_attn.q_norm.weight", lp), hd, &ly->q_norm)) ||
            (st = load_norm(L, NAME("%sself_attn.k_norm.weight", lp), hd, &ly->k_norm)))
            return st;
    } else {
        int Hv = c->lin_v_heads;
        int64_t conv_mlx[3] = {c->conv_dim, c->conv_kernel, 1}, conv_hf[3] = {c->conv_dim, 1, c->conv_kernel};
        int64_t hv[1] = {Hv}, dv[1] = {c->lin_v_dim};
        if ((st = load_matrix(L, NAME("%slinear_attn.in_proj_qkv", lp), 0, 1, c->conv_dim, D, &ly->in_qkv)) ||
            (st = load_matrix(L, NAME("%slinear_attn.in_proj_z", lp), 0, 1, c->lin_value_dim, D, &ly->in_z)) ||
            (st = load_matrix(L, NAME("%slinear_attn.in_proj_b", lp), 0, 1, Hv, D, &ly->in_b)) ||
            (st = load_matrix(L, NAME("%slinear_attn.in_proj_a", lp), 0, 1, Hv, D, &ly->in_a)) ||
            (st = load_matrix(L, NAME("%slinear_attn.out_proj", lp), 0, 1, D, c->lin_value_dim, &ly->out_proj)) ||
            /* [C, K, 1] (MLX) and [C, 1, K] (HF) are the same bytes: C-major, taps contiguous. */
            (st = load_vec(L, NAME("%slinear_attn.conv1d.weight", lp), 3,
                           m->layout == LILAC_LAYOUT_MLX ? conv_mlx : conv_hf, 0, &ly->conv_w)) ||
            (st = load_vec(L, NAME("%slinear_attn.A_log", lp), 1, hv, 0, &ly->A_log)) ||
            (st = load_vec(L, NAME("%slinear_attn.dt_bias", lp), 1, hv, 0, &ly->dt_bias)) ||
            (st = load_vec(L, NAME("%slinear_attn.norm.weight", lp), 1, dv, 0, &ly->lin_norm)))
            return st;
    }
    const int E = c->n_experts, I = c->moe_inter, Is = c->shared_inter;
    if ((st = load_matrix(L, NAME("%smlp.gate", lp), 0, 1, E, D, &ly->router)) ||
        (st = load_matrix(L, NAME("%smlp.shared_expert.gate_proj", lp), 0, 1, Is, D, &ly->sh_gate)) ||
        (st = load_matrix(L, NAME("%smlp.shared_expert.up_proj", lp), 0, 1, Is, D, &ly->sh_up)) ||
        (st = load_matrix(L, NAME("%smlp.shared_expert.down_proj", lp), 0, 1, D, Is, &ly->sh_down)) ||
        (st = load_matrix(L, NAME("%smlp.shared_expert_gate", lp), 0, 1, 1, D, &ly->sh_gate_proj)))
        return st;
    if (m->layout == LILAC_LAYOUT_MLX) {
        if ((st = load_matrix(L, NAME("%smlp.switch_mlp.gate_proj", lp), 1, E, I, D, &ly->exp_gate)) ||
            (st = load_matrix(L, NAME("%smlp.switch_mlp.up_proj", lp), 1, E, I, D, &ly->exp_up)) ||
            (st = load_matrix(L, NAME("%smlp.switch_mlp.down_proj", lp), 1, E, D, I, &ly->exp_down)))
            return st;
    } else if ((st = load_hf_experts(L, lp, ly))) {
        return st;
    }
#undef NAME
    return LILAC_OK;
}

/* Picks the naming scheme from the embedding's name, and the layout from how
 * layer 0 stores its experts. */
static lilac_status detect_layout(loader *L) {
    static const struct {
        const char *pfx, *head;
    } schemes[] = {
        {"language_model.model.", "language_model.lm_head"}, /* MLX (mlx-vlm / mlx-lm conversions) */
        {"model.language_model.", "lm_head"},                /* HF Qwen3_5MoeForConditionalGeneration */
        {"model.", "lm_head"},                               /* text-only (ForCausalLM) saves */
    };
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        if (!find(L, "%sembed_tokens.weight", schemes[i].pfx)) continue;
        snprintf(L->pfx, sizeof L->pfx, "%s", schemes[i].pfx);
        snprintf(L->head, sizeof L->head, "%s", schemes[i].head);
        if (find(L, "%slayers.0.mlp.switch_mlp.gate_proj.weight", L->pfx)) L->m->layout = LILAC_LAYOUT_MLX;
        else if (find(L, "%slayers.0.mlp.experts.gate_up_proj", L->pfx)) L->m->layout = LILAC_LAYOUT_HF;
        else
            return lilac_fail(L->e, LILAC_EFORMAT,
                              "%slayers.0.mlp: neither switch_mlp.* (MLX) nor experts.gate_up_proj (Hugging Face) experts found",
                              L->pfx);
        return LILAC_OK;
    }
    return lilac_fail(L->e, LILAC_EFORMAT,
                      "no embedding found (language_model.model.embed_tokens.weight, model.language_model.embed_tokens.weight "
                      "or model.embed_tokens.weight): not a Qwen3.6 checkpoint");
}

static int skipped(const lilac_model *m, const char *name) {
    if (m->layout == LILAC_LAYOUT_MLX) return strncmp(name, "vision_tower.", 13) == 0;
    return strncmp(name, "model.visual.", 13) == 0 || strncmp(name, "mtp.", 4) == 0;
}

lilac_status lilac_model_load(const char *dir, lilac_model *m, lilac_error *e) {
    memset(m, 0, sizeof *m);
    lilac_status st = lilac_config_load(dir, &m->cfg, e);
    if (st) return st;
    if ((st = lilac_st_open_dir(dir, &m->tensors, e))) goto fail;
    const lilac_config *c = &m->cfg;
    loader L = {.m = m, .ts = &m->tensors, .e = e};
    if ((st = detect_layout(&L))) goto fail;

    /* Arena for the small f32 parameters: norms, conv taps, gates. */
    size_t per_layer = 2 * (size_t)c->hidden + 2 * (size_t)c->head_dim + (size_t)c->conv_dim * c->conv_kernel +
                       2 * (size_t)c->lin_v_heads + (size_t)c->lin_v_dim;
    m->arena_cap = per_layer * (size_t)c->n_layers + (size_t)c->hidden;
    m->arena = malloc(m->arena_cap * sizeof *m->arena);
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->arena || !m->layers) {
        st = lilac_fail(e, LILAC_ENOMEM, "model parameters");
        goto fail;
    }

    char name[512];
    snprintf(name, sizeof name, "%sembed_tokens", L.pfx);
    if ((st = load_matrix(&L, name, 0, 1, c->vocab_size, c->hidden, &m->embed))) goto fail;
    if (c->tie_embeddings && !find(&L, "%s.weight", L.head)) {
        m->lm_head = m->embed;
    } else if ((st = load_matrix(&L, L.head, 0, 1, c->vocab_size, c->hidden, &m->lm_head))) {
        goto fail;
    }
    snprintf(name, sizeof name, "%snorm.weight", L.pfx);
    if ((st = load_norm(&L, name, c->hidden, &m->final_norm))) goto fail;
    for (int i = 0; i < c->n_layers; i++)
        if ((st = load_layer(&L, i))) goto fail;

    for (int i = 0; i < m->tensors.n; i++) {
        const lilac_tensor *t = &m->tensors.t[i];
        if (!t->used && !skipped(m, t->name)) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: unexpected tensor %s (not part of the %s layout of this config)",
                            m->tensors.files[t->file], t->name, m->layout == LILAC_LAYOUT_MLX ? "MLX" : "Hugging Face");
            goto fail;
        }
    }

    m->weight_bytes = lilac_model_weight_bytes(m);
    return LILAC_OK;
fail:
    lilac_model_free(m);
    return st;
}

void lilac_model_free(lilac_model *m) {
    if (!m) return;
    lilac_st_close(&m->tensors);
    lilac_config_free(&m->cfg);
    free(m->arena);
    free(m->layers);
    memset(m, 0, sizeof *m);
}
