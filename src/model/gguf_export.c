/* gguf_export.c — lilac's in-memory model (either checkpoint layout) written
 * as a GGUF that llama.cpp loads as `qwen35moe`.
 *
 * The facts, from llama.cpp's converter (convert_hf_to_gguf.py,
 * conversion/qwen.py: Qwen3NextModel, _LinearAttentionVReorderBase,
 * Qwen3_5MoeTextModel) and loader (src/models/qwen35moe.cpp):
 *   - names: token_embd, output_norm, output, blk.N.{attn_norm,
 *     post_attention_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm,
 *     attn_k_norm, attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a,
 *     ssm_beta, ssm_alpha, ssm_norm, ssm_out, ffn_gate_inp, ffn_gate_exps,
 *     ffn_up_exps, ffn_down_exps, ffn_gate_inp_shexp, ffn_gate_shexp,
 *     ffn_up_shexp, ffn_down_shexp}; ggml shapes are PyTorch's reversed.
 *   - RMS norms hold (1 + w) (the converter adds 1 to every norm.weight
 *     but the DeltaNet gated norm, linear_attn.norm); lilac's model stores
 *     exactly that convention, MLX files already hold the +1.
 *   - ssm_a = -exp(A_log); dt_bias is ssm_dt.bias; conv1d [C, K, 1] is
 *     ggml {K, C} (lilac's conv_w is [C, K]).
 *   - with fewer key heads than value heads, the value heads move from
 *     grouped order (head h under key head h / r) to tiled order (new head
 *     j * Hk + k is old head k * r + j): the V rows of in_proj_qkv, the rows
 *     of in_proj_z, in_proj_a, in_proj_b, the V channels of the conv, dt_bias,
 *     A_log, and the input columns of out_proj.
 *   - the 8-bit router and shared-expert gate are F32 here (dequantised).
 * The tokenizer is not exported: tokenizer.ggml.model is "none" with
 * qwen35moe.vocab_size, which llama.cpp loads for token-id input
 * (llama-bench, logits by id). */
#include "model/gguf_export.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/model.h"
#include "util/bf16.h"

typedef enum { SRC_MAT, SRC_VEC } src_kind;

typedef struct {
    src_kind kind;
    const lilac_matrix *mat; /* SRC_MAT */
    const float *vec;        /* SRC_VEC: [rows, cols] f32 */
    int rows, cols, n_mat;
    int out_type;
    const int *row_perm;     /* new row i = old row row_perm[i] (within each matrix); NULL = identity */
    const int *col_perm;     /* new column block i = old block col_perm[i], blocks of col_block columns */
    int col_block;
    int neg_exp;             /* write -exp(x) */
    long long inexact;       /* Q4_1 groups not exact in fp16 */
} job;

/* head p of the tiled order holds head old_head(p) of the grouped order */
static int old_head(int p, int hk, int r) { return (p % hk) * r + p / hk; }

static int *head_perm(int first, int n_total, int n_heads, int head_size, int hk, int r) {
    int *p = malloc((size_t)n_total * sizeof *p);
    if (!p) return NULL;
    for (int i = 0; i < n_total; i++) p[i] = i;
    for (int h = 0; h < n_heads; h++)
        for (int i = 0; i < head_size; i++) p[first + h * head_size + i] = first + old_head(h, hk, r) * head_size + i;
    return p;
}

static int f16_exact(float f) { return lilac_f16_to_f32(lilac_f32_to_f16(f)) == f; }

/* Which Q4 type a 4-bit matrix can be: Q4_0 when every group is b = -8 s
 * with s exact in fp16; else Q4_1 (inexact groups counted). */
static int q4_type(const lilac_matrix *m, long long *inexact) {
    const size_t groups = (size_t)m->rows * (size_t)(m->cols / m->group);
    int q40 = 1;
    long long bad = 0;
    for (int e = 0; e < m->n_mat; e++)
        for (size_t g = 0; g < groups; g++) {
            const size_t i = (size_t)e * m->mat_stride_sb + g;
            const float s = lilac_bf16_to_f32(m->scales[i]), b = lilac_bf16_to_f32(m->biases[i]);
            if (!(b == -8.0f * s && f16_exact(s))) q40 = 0;
            bad += !(f16_exact(s) && f16_exact(b));
        }
    *inexact = q40 ? 0 : bad;
    return q40 ? LILAC_GGML_Q4_0 : LILAC_GGML_Q4_1;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }

static lilac_status write_job(void *ctx, FILE *f, lilac_error *e) {
    job *j = ctx;
    const int cols = j->cols;
    float *row = malloc((size_t)cols * sizeof *row), *tmp = malloc((size_t)cols * sizeof *tmp);
    unsigned char *out = malloc((size_t)cols * 4);
    lilac_status st = LILAC_OK;
    if (!row || !tmp || !out) {
        st = lilac_fail(e, LILAC_ENOMEM, "export: a row of %d values", cols);
        goto done;
    }
    for (int m = 0; m < j->n_mat && !st; m++)
        for (int r = 0; r < j->rows; r++) {
            const int src_r = j->row_perm ? j->row_perm[r] : r;
            size_t nb;
            if (j->out_type == LILAC_GGML_F32) {
                if (j->kind == SRC_MAT) lilac_matrix_row_f32(j->mat, m, src_r, tmp);
                else memcpy(tmp, j->vec + (size_t)src_r * cols, (size_t)cols * sizeof *tmp);
                if (j->col_perm)
                    for (int b = 0; b < cols / j->col_block; b++)
                        memcpy(row + (size_t)b * j->col_block, tmp + (size_t)j->col_perm[b] * j->col_block,
                               (size_t)j->col_block * sizeof *row);
                else memcpy(row, tmp, (size_t)cols * sizeof *row);
                if (j->neg_exp)
                    for (int i = 0; i < cols; i++) row[i] = -expf(row[i]);
                memcpy(out, row, (size_t)cols * 4);
                nb = (size_t)cols * 4;
            } else {
                /* 4-bit: blocks of 32 codes; a group of 64 is two blocks with its scale and bias */
                const lilac_matrix *mt = j->mat;
                const uint32_t *q = (const uint32_t *)((const unsigned char *)mt->w + (size_t)m * mt->mat_stride +
                                                       (size_t)src_r * lilac_matrix_row_bytes(mt));
                const size_t sb = (size_t)m * mt->mat_stride_sb + (size_t)src_r * (size_t)(cols / mt->group);
                const int q1 = j->out_type == LILAC_GGML_Q4_1, bb = q1 ? 20 : 18, per = j->col_block / 32;
                for (int nbk = 0; nbk < cols / 32; nbk++) {
                    /* the old block this new block comes from */
                    const int ob = j->col_perm ? j->col_perm[nbk / per] * per + nbk % per : nbk;
                    const int g = ob * 32 / mt->group;
                    const float s = lilac_bf16_to_f32(mt->scales[sb + (size_t)g]), bi = lilac_bf16_to_f32(mt->biases[sb + (size_t)g]);
                    unsigned char *blk = out + (size_t)nbk * bb;
                    put16(blk, lilac_f32_to_f16(s));
                    if (q1) put16(blk + 2, lilac_f32_to_f16(bi));
                    unsigned char *qs = blk + (q1 ? 4 : 2);
                    for (int i = 0; i < 16; i++) {
                        const int a = ob * 32 + i, c = ob * 32 + 16 + i; /* elements i and i + 16 of the block */
                        const unsigned lo = (q[a / 8] >> (4 * (a % 8))) & 15, hi = (q[c / 8] >> (4 * (c % 8))) & 15;
                        qs[i] = (unsigned char)(lo | hi << 4);
                    }
                }
                nb = (size_t)(cols / 32) * (size_t)bb;
            }
            if (fwrite(out, 1, nb, f) != nb) {
                st = lilac_fail(e, LILAC_EIO, "export: write failed (disk full?)");
                break;
            }
        }
done:
    free(row);
    free(tmp);
    free(out);
    return st;
}

/* mrope_section from config.json (rope_parameters or rope_scaling, under
 * text_config or at the top), padded to 4; Qwen3.5's [11, 11, 10, 0] when
 * absent, as the converter writes it. */
static void mrope_sections(const char *dir, int32_t out[4]) {
    out[0] = 11, out[1] = 11, out[2] = 10, out[3] = 0;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path) return;
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) return;
    json_t *tc = json_object_get(root, "text_config");
    if (!tc) tc = root;
    json_t *ms = NULL;
    const char *holders[] = {"rope_parameters", "rope_scaling"};
    for (int i = 0; i < 2 && !ms; i++) ms = json_object_get(json_object_get(tc, holders[i]), "mrope_section");
    if (json_is_array(ms) && json_array_size(ms) >= 1 && json_array_size(ms) <= 4) {
        int32_t v[4] = {0, 0, 0, 0};
        int ok = 1;
        for (size_t i = 0; i < json_array_size(ms); i++) {
            json_t *x = json_array_get(ms, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 1024) ok = 0;
            else v[i] = (int32_t)json_integer_value(x);
        }
        if (ok) memcpy(out, v, sizeof v);
    }
    json_decref(root);
}

typedef struct {
    lilac_gguf_writer *w;
    job *jobs;
    int n, cap;
    const lilac_gguf_export_opts *o;
    lilac_gguf_export_report *rep;
    int oom;
} ctx_t;

static job *add_job(ctx_t *c) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 1024;
        job *nj = realloc(c->jobs, (size_t)cap * sizeof *nj);
        if (!nj) return c->oom = 1, NULL;
        c->jobs = nj, c->cap = cap;
    }
    job *j = &c->jobs[c->n++];
    memset(j, 0, sizeof *j);
    return j;
}

/* A matrix tensor; flat = write [1, cols] as the 1-D {cols}. */
static void mat(ctx_t *c, const char *name, const lilac_matrix *m, const int *row_perm, const int *col_perm, int col_block,
                int flat) {
    job *j = add_job(c);
    if (!j) return;
    j->kind = SRC_MAT, j->mat = m, j->rows = m->rows, j->cols = m->cols, j->n_mat = m->n_mat;
    j->row_perm = row_perm, j->col_perm = col_perm, j->col_block = col_perm ? col_block : 32;
    j->out_type = LILAC_GGML_F32;
    if (!c->o->f32 && m->type == LILAC_MAT_Q4) j->out_type = q4_type(m, &j->inexact);
    c->rep->n_q4_0 += j->out_type == LILAC_GGML_Q4_0;
    c->rep->n_q4_1 += j->out_type == LILAC_GGML_Q4_1;
    c->rep->n_f32 += j->out_type == LILAC_GGML_F32;
    c->rep->q4_1_inexact_groups += j->inexact;
    int64_t ne[3] = {m->cols, m->rows, m->n_mat};
    const int nd = flat && m->rows == 1 && m->n_mat == 1 ? 1 : m->n_mat > 1 ? 3 : 2;
    c->rep->n_tensors++;
    /* the data callback is set once the job list stops growing */
    lilac_gguf_tensor(c->w, name, j->out_type, nd, ne, NULL, NULL);
}

static void vec(ctx_t *c, const char *name, const float *v, int rows, int cols, const int *row_perm, int neg_exp) {
    job *j = add_job(c);
    if (!j) return;
    j->kind = SRC_VEC, j->vec = v, j->rows = rows, j->cols = cols, j->n_mat = 1, j->row_perm = row_perm;
    j->neg_exp = neg_exp, j->out_type = LILAC_GGML_F32, j->col_block = 32;
    c->rep->n_f32++;
    c->rep->n_tensors++;
    /* [1, n] and [n, 1] are the 1-D {n} */
    int64_t ne[2] = {cols, rows};
    if (cols == 1) ne[0] = rows, ne[1] = 1;
    lilac_gguf_tensor(c->w, name, LILAC_GGML_F32, rows == 1 || cols == 1 ? 1 : 2, ne, NULL, NULL);
}

lilac_status lilac_gguf_export(const char *dir, const char *out, const lilac_gguf_export_opts *o,
                               lilac_gguf_export_report *rep, lilac_error *e) {
    memset(rep, 0, sizeof *rep);
    lilac_model m;
    lilac_status st = lilac_model_load(dir, &m, e);
    if (st) return st;
    const lilac_config *cf = &m.cfg;
    const int Hk = cf->lin_k_heads, Hv = cf->lin_v_heads, dv = cf->lin_v_dim, r = Hk > 0 ? Hv / Hk : 1;
    int *perm_qkv = NULL, *perm_z = NULL, *perm_h = NULL, *perm_cols = NULL;
    ctx_t c = {lilac_gguf_writer_new(), NULL, 0, 0, o, rep, 0};
    if (!c.w) {
        st = lilac_fail(e, LILAC_ENOMEM, "export: writer");
        goto done;
    }
    if (cf->n_lin_layers > 0) {
        if (Hk <= 0 || Hv % Hk) {
            st = lilac_fail(e, LILAC_EFORMAT, "%s: %d value heads are not a multiple of %d key heads", dir, Hv, Hk);
            goto done;
        }
        if (!o->f32 && dv % 32) {
            st = lilac_fail(e, LILAC_EFORMAT,
                            "%s: linear_value_head_dim %d is not a multiple of 32: out_proj's columns cannot be reordered in "
                            "Q4 blocks (use --f32)",
                            dir, dv);
            goto done;
        }
        perm_qkv = head_perm(2 * cf->lin_key_dim, cf->conv_dim, Hv, dv, Hk, r);
        perm_z = head_perm(0, cf->lin_value_dim, Hv, dv, Hk, r);
        perm_h = head_perm(0, Hv, Hv, 1, Hk, r);
        perm_cols = head_perm(0, Hv, Hv, 1, Hk, r); /* column blocks of dv */
        if (!perm_qkv || !perm_z || !perm_h || !perm_cols) {
            st = lilac_fail(e, LILAC_ENOMEM, "export: permutations");
            goto done;
        }
    }
    lilac_gguf_writer *w = c.w;
    const char *A = "qwen35moe";
    char k[160];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", A, s), k)
    lilac_gguf_kv_str(w, "general.architecture", A);
    lilac_gguf_kv_str(w, "general.name", "lilac export");
    lilac_gguf_kv_u32(w, "general.alignment", LILAC_GGUF_ALIGNMENT);
    lilac_gguf_kv_u32(w, KEY("block_count"), (uint32_t)cf->n_layers);
    lilac_gguf_kv_u32(w, KEY("context_length"), (uint32_t)cf->max_pos);
    lilac_gguf_kv_u32(w, KEY("embedding_length"), (uint32_t)cf->hidden);
    lilac_gguf_kv_u32(w, KEY("attention.head_count"), (uint32_t)cf->n_heads);
    lilac_gguf_kv_u32(w, KEY("attention.head_count_kv"), (uint32_t)cf->n_kv_heads);
    lilac_gguf_kv_u32(w, KEY("attention.key_length"), (uint32_t)cf->head_dim);
    lilac_gguf_kv_u32(w, KEY("attention.value_length"), (uint32_t)cf->head_dim);
    lilac_gguf_kv_f32(w, KEY("attention.layer_norm_rms_epsilon"), cf->rms_eps);
    lilac_gguf_kv_f32(w, KEY("rope.freq_base"), (float)cf->rope_theta);
    lilac_gguf_kv_u32(w, KEY("rope.dimension_count"), (uint32_t)cf->rotary_dim);
    int32_t sec[4];
    mrope_sections(dir, sec);
    lilac_gguf_kv_arr_i32(w, KEY("rope.dimension_sections"), sec, 4);
    lilac_gguf_kv_u32(w, KEY("expert_count"), (uint32_t)cf->n_experts);
    lilac_gguf_kv_u32(w, KEY("expert_used_count"), (uint32_t)cf->n_experts_per_tok);
    lilac_gguf_kv_u32(w, KEY("expert_feed_forward_length"), (uint32_t)cf->moe_inter);
    lilac_gguf_kv_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)cf->shared_inter);
    lilac_gguf_kv_u32(w, KEY("ssm.conv_kernel"), (uint32_t)cf->conv_kernel);
    lilac_gguf_kv_u32(w, KEY("ssm.state_size"), (uint32_t)cf->lin_k_dim);
    lilac_gguf_kv_u32(w, KEY("ssm.group_count"), (uint32_t)Hk);
    lilac_gguf_kv_u32(w, KEY("ssm.time_step_rank"), (uint32_t)Hv);
    lilac_gguf_kv_u32(w, KEY("ssm.inner_size"), (uint32_t)(dv * Hv));
    uint8_t recurrent[LILAC_MAX_LAYERS];
    int interval = 0;
    for (int i = 0; i < cf->n_layers; i++) {
        recurrent[i] = !cf->is_attn[i];
        if (cf->is_attn[i] && !interval) interval = i + 1;
    }
    lilac_gguf_kv_arr_bool(w, KEY("attention.recurrent_layers"), recurrent, (size_t)cf->n_layers);
    lilac_gguf_kv_u32(w, KEY("full_attention_interval"), (uint32_t)(interval ? interval : 4));
    lilac_gguf_kv_u32(w, KEY("vocab_size"), (uint32_t)cf->vocab_size);
    lilac_gguf_kv_str(w, "tokenizer.ggml.model", "none");

    char n[160];
#define T(fmt, ...) (snprintf(n, sizeof n, fmt, __VA_ARGS__), n)
    mat(&c, "token_embd.weight", &m.embed, NULL, NULL, 0, 0);
    vec(&c, "output_norm.weight", m.final_norm, 1, cf->hidden, NULL, 0);
    if (!cf->tie_embeddings) mat(&c, "output.weight", &m.lm_head, NULL, NULL, 0, 0);
    for (int i = 0; i < cf->n_layers; i++) {
        const lilac_layer *L = &m.layers[i];
        vec(&c, T("blk.%d.attn_norm.weight", i), L->input_norm, 1, cf->hidden, NULL, 0);
        vec(&c, T("blk.%d.post_attention_norm.weight", i), L->post_norm, 1, cf->hidden, NULL, 0);
        if (L->is_attn) {
            mat(&c, T("blk.%d.attn_q.weight", i), &L->q_proj, NULL, NULL, 0, 0);
            mat(&c, T("blk.%d.attn_k.weight", i), &L->k_proj, NULL, NULL, 0, 0);
            mat(&c, T("blk.%d.attn_v.weight", i), &L->v_proj, NULL, NULL, 0, 0);
            mat(&c, T("blk.%d.attn_output.weight", i), &L->o_proj, NULL, NULL, 0, 0);
            vec(&c, T("blk.%d.attn_q_norm.weight", i), L->q_norm, 1, cf->head_dim, NULL, 0);
            vec(&c, T("blk.%d.attn_k_norm.weight", i), L->k_norm, 1, cf->head_dim, NULL, 0);
        } else {
            mat(&c, T("blk.%d.attn_qkv.weight", i), &L->in_qkv, perm_qkv, NULL, 0, 0);
            mat(&c, T("blk.%d.attn_gate.weight", i), &L->in_z, perm_z, NULL, 0, 0);
            vec(&c, T("blk.%d.ssm_conv1d.weight", i), L->conv_w, cf->conv_dim, cf->conv_kernel, perm_qkv, 0);
            vec(&c, T("blk.%d.ssm_dt.bias", i), L->dt_bias, Hv, 1, perm_h, 0);
            vec(&c, T("blk.%d.ssm_a", i), L->A_log, Hv, 1, perm_h, 1);
            mat(&c, T("blk.%d.ssm_beta.weight", i), &L->in_b, perm_h, NULL, 0, 0);
            mat(&c, T("blk.%d.ssm_alpha.weight", i), &L->in_a, perm_h, NULL, 0, 0);
            vec(&c, T("blk.%d.ssm_norm.weight", i), L->lin_norm, 1, dv, NULL, 0);
            mat(&c, T("blk.%d.ssm_out.weight", i), &L->out_proj, NULL, perm_cols, dv, 0);
        }
        mat(&c, T("blk.%d.ffn_gate_inp.weight", i), &L->router, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_gate_exps.weight", i), &L->exp_gate, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_up_exps.weight", i), &L->exp_up, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_down_exps.weight", i), &L->exp_down, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_gate_inp_shexp.weight", i), &L->sh_gate_proj, NULL, NULL, 0, 1);
        mat(&c, T("blk.%d.ffn_gate_shexp.weight", i), &L->sh_gate, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_up_shexp.weight", i), &L->sh_up, NULL, NULL, 0, 0);
        mat(&c, T("blk.%d.ffn_down_shexp.weight", i), &L->sh_down, NULL, NULL, 0, 0);
    }
#undef T
    if (c.oom) {
        st = lilac_fail(e, LILAC_ENOMEM, "export: tensor list");
        goto done;
    }
    rep->file_type = rep->n_q4_1 ? 3 : rep->n_q4_0 ? 2 : 0;
    lilac_gguf_kv_u32(w, "general.file_type", (uint32_t)rep->file_type);
    if (rep->file_type) lilac_gguf_kv_u32(w, "general.quantization_version", 2);
#undef KEY
    /* one tensor per job, in order; the jobs no longer move */
    for (int i = 0; i < c.n; i++) lilac_gguf_tensor_data(w, i, write_job, &c.jobs[i]);
    st = lilac_gguf_write(w, out, o->progress, o->progress_ctx, e);
done:
    lilac_gguf_writer_free(c.w);
    free(c.jobs);
    free(perm_qkv);
    free(perm_z);
    free(perm_h);
    free(perm_cols);
    lilac_model_free(&m);
    return st;
}
