/* cpu_backend.c — lifecycle of the CPU backend: scratch, states, the ops table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"

lilac_status cpu_forward(lilac_backend *b, lilac_state *s, const int32_t *ids, int n, const lilac_forward_out *out,
                         lilac_error *e);

static void cpu_close(lilac_backend *b) {
    if (!b) return;
    lilac_pool_free(b->pool);
    float **fs[] = {&b->rowbuf, &b->h,   &b->xn,   &b->blk,  &b->qg,   &b->kk,      &b->vv,
                    &b->ao,     &b->qkv, &b->z,    &b->ba,   &b->go,   &b->convin,  &b->rlog,
                    &b->topw,   &b->xg,  &b->act,  &b->eo,   &b->sg,   &b->su,      &b->sd,
                    &b->sgate,  &b->logit_h, &b->rope_inv};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(*fs[i]);
    free(b->topi);
    free(b->ecount);
    free(b->ecursor);
    free(b->slot_t);
    free(b->slot_of);
    free(b);
}

static int imax(int a, int b) { return a > b ? a : b; }

static lilac_status cpu_open(const lilac_model *m, const lilac_backend_opts *o, lilac_backend **out, lilac_error *e) {
    *out = NULL;
    const lilac_config *c = &m->cfg;
    if (m->synthetic) return lilac_fail(e, LILAC_EUNSUPPORTED, "the CPU backend needs real weights (synthetic models are for the GPU)");
    lilac_backend *b = calloc(1, sizeof *b);
    if (!b) return lilac_fail(e, LILAC_ENOMEM, "CPU backend");
    b->m = m;
    b->T = o->max_chunk > 0 ? o->max_chunk : 512;
    lilac_status st = lilac_pool_new(o->threads, &b->pool, e);
    if (st) {
        free(b);
        return st;
    }
    b->nthreads = lilac_pool_threads(b->pool);
    const size_t T = (size_t)b->T, D = (size_t)c->hidden, H = (size_t)c->n_heads, Hkv = (size_t)c->n_kv_heads,
                 hd = (size_t)c->head_dim, C = (size_t)c->conv_dim, Vd = (size_t)c->lin_value_dim,
                 Hv = (size_t)c->lin_v_heads, E = (size_t)c->n_experts, K = (size_t)c->n_experts_per_tok,
                 I = (size_t)c->moe_inter, Is = (size_t)c->shared_inter, Kc = (size_t)c->conv_kernel;
    b->maxcols = imax(imax(imax(c->hidden, c->n_heads * c->head_dim), imax(c->lin_value_dim, c->moe_inter)),
                      imax(c->shared_inter, c->lin_v_dim));
    struct {
        float **p;
        size_t n;
    } bufs[] = {
        {&b->rowbuf, (size_t)b->nthreads * b->maxcols},
        {&b->h, T * D}, {&b->xn, T * D}, {&b->blk, T * D},
        {&b->qg, T * H * 2 * hd}, {&b->kk, T * Hkv * hd}, {&b->vv, T * Hkv * hd}, {&b->ao, T * H * hd},
        {&b->qkv, T * C}, {&b->z, T * Vd}, {&b->ba, T * 2 * Hv}, {&b->go, T * Vd}, {&b->convin, (Kc - 1 + T) * C},
        {&b->rlog, T * E}, {&b->topw, T * K}, {&b->xg, T * K * D}, {&b->act, T * K * I}, {&b->eo, T * K * D},
        {&b->sg, T * Is}, {&b->su, T * Is}, {&b->sd, T * D}, {&b->sgate, T}, {&b->logit_h, T * D},
        {&b->rope_inv, (size_t)c->rotary_dim / 2},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ok &= (*bufs[i].p = malloc(bufs[i].n * sizeof(float))) != NULL;
    b->topi = malloc(T * K * sizeof(int));
    b->ecount = malloc((E + 1) * sizeof(int));
    b->ecursor = malloc(E * sizeof(int));
    b->slot_t = malloc(T * K * sizeof(int));
    b->slot_of = malloc(T * K * sizeof(int));
    if (!ok || !b->topi || !b->ecount || !b->ecursor || !b->slot_t || !b->slot_of) {
        cpu_close(b);
        return lilac_fail(e, LILAC_ENOMEM, "CPU backend scratch for %zu-token chunks", T);
    }
    /* inv_freq[j] = 1 / theta^(2j / rotary_dim), in f32 as the reference computes it */
    for (int j = 0; j < c->rotary_dim / 2; j++)
        b->rope_inv[j] = 1.0f / powf((float)c->rope_theta, (float)(2 * j) / (float)c->rotary_dim);
    *out = b;
    return LILAC_OK;
}

static size_t cpu_state_bytes(const lilac_backend *b, int max_ctx) {
    const lilac_config *c = &b->m->cfg;
    size_t kv = 2 * (size_t)max_ctx * c->n_kv_heads * c->head_dim;
    size_t lin = (size_t)(c->conv_kernel - 1) * c->conv_dim + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;
    return sizeof(float) * (kv * c->n_attn_layers + lin * c->n_lin_layers);
}

static void cpu_state_free(lilac_backend *b, lilac_state *s) {
    if (!s) return;
    const lilac_config *c = &b->m->cfg;
    for (int i = 0; s->k && i < c->n_attn_layers; i++) free(s->k[i]), free(s->v[i]);
    for (int i = 0; s->conv && i < c->n_lin_layers; i++) free(s->conv[i]), free(s->rec[i]);
    free(s->k);
    free(s->v);
    free(s->conv);
    free(s->rec);
    free(s);
}

static void cpu_state_reset(lilac_backend *b, lilac_state *s) {
    const lilac_config *c = &b->m->cfg;
    for (int i = 0; i < c->n_lin_layers; i++) {
        memset(s->conv[i], 0, (size_t)(c->conv_kernel - 1) * c->conv_dim * sizeof(float));
        memset(s->rec[i], 0, (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * sizeof(float));
    }
    s->pos = 0; /* KV rows past pos are never read */
}

static lilac_status cpu_state_new(lilac_backend *b, int max_ctx, lilac_state **out, lilac_error *e) {
    *out = NULL;
    const lilac_config *c = &b->m->cfg;
    if (max_ctx < 1) return lilac_fail(e, LILAC_EINVAL, "context size %d must be positive", max_ctx);
    lilac_state *s = calloc(1, sizeof *s);
    if (!s) return lilac_fail(e, LILAC_ENOMEM, "session state");
    s->cap = max_ctx;
    s->k = calloc((size_t)c->n_attn_layers + 1, sizeof *s->k);
    s->v = calloc((size_t)c->n_attn_layers + 1, sizeof *s->v);
    s->conv = calloc((size_t)c->n_lin_layers + 1, sizeof *s->conv);
    s->rec = calloc((size_t)c->n_lin_layers + 1, sizeof *s->rec);
    int ok = s->k && s->v && s->conv && s->rec;
    size_t kv = (size_t)max_ctx * c->n_kv_heads * c->head_dim;
    for (int i = 0; ok && i < c->n_attn_layers; i++)
        ok = (s->k[i] = malloc(kv * sizeof(float))) && (s->v[i] = malloc(kv * sizeof(float)));
    for (int i = 0; ok && i < c->n_lin_layers; i++)
        ok = (s->conv[i] = malloc((size_t)(c->conv_kernel - 1) * c->conv_dim * sizeof(float))) &&
             (s->rec[i] = malloc((size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * sizeof(float)));
    if (!ok) {
        cpu_state_free(b, s);
        return lilac_fail(e, LILAC_ENOMEM, "session state for %d tokens (%.1f MiB)", max_ctx,
                          cpu_state_bytes(b, max_ctx) / 1048576.0);
    }
    cpu_state_reset(b, s);
    *out = s;
    return LILAC_OK;
}

static int cpu_state_pos(const lilac_state *s) { return s->pos; }
static int cpu_state_capacity(const lilac_state *s) { return s->cap; }

static lilac_status cpu_state_copy(lilac_backend *b, lilac_state *dst, const lilac_state *src, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    if (src->pos > dst->cap)
        return lilac_fail(e, LILAC_EINVAL, "state copy: %d tokens do not fit a %d-token state", src->pos, dst->cap);
    size_t kv = (size_t)src->pos * c->n_kv_heads * c->head_dim * sizeof(float);
    for (int i = 0; i < c->n_attn_layers; i++) {
        memcpy(dst->k[i], src->k[i], kv);
        memcpy(dst->v[i], src->v[i], kv);
    }
    for (int i = 0; i < c->n_lin_layers; i++) {
        memcpy(dst->conv[i], src->conv[i], (size_t)(c->conv_kernel - 1) * c->conv_dim * sizeof(float));
        memcpy(dst->rec[i], src->rec[i], (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * sizeof(float));
    }
    dst->pos = src->pos;
    return LILAC_OK;
}

/* Serialisation: the layout is in backend.h ("cpu-f32-1"). */
static size_t cpu_payload_bytes(const lilac_backend *b, int pos) {
    const lilac_config *c = &b->m->cfg;
    size_t kv = 2 * (size_t)pos * c->n_kv_heads * c->head_dim;
    size_t lin = (size_t)(c->conv_kernel - 1) * c->conv_dim + (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;
    return sizeof(float) * (kv * c->n_attn_layers + lin * c->n_lin_layers);
}

static lilac_status cpu_state_save(lilac_backend *b, const lilac_state *s, lilac_write_fn w, void *ctx,
                                   lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    const size_t kv = (size_t)s->pos * c->n_kv_heads * c->head_dim * sizeof(float),
                 cv = (size_t)(c->conv_kernel - 1) * c->conv_dim * sizeof(float),
                 rc = (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * sizeof(float);
    lilac_status st = LILAC_OK;
    for (int i = 0; !st && i < c->n_attn_layers; i++)
        if (!(st = w(ctx, s->k[i], kv, e))) st = w(ctx, s->v[i], kv, e);
    for (int i = 0; !st && i < c->n_lin_layers; i++)
        if (!(st = w(ctx, s->conv[i], cv, e))) st = w(ctx, s->rec[i], rc, e);
    return st;
}

static lilac_status cpu_state_load(lilac_backend *b, lilac_state *s, int pos, lilac_read_fn r, void *ctx,
                                   lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    if (pos < 0 || pos > s->cap)
        return lilac_fail(e, LILAC_EINVAL, "state load: %d tokens do not fit a %d-token state", pos, s->cap);
    const size_t kv = (size_t)pos * c->n_kv_heads * c->head_dim * sizeof(float),
                 cv = (size_t)(c->conv_kernel - 1) * c->conv_dim * sizeof(float),
                 rc = (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * sizeof(float);
    lilac_status st = LILAC_OK;
    for (int i = 0; !st && i < c->n_attn_layers; i++)
        if (!(st = r(ctx, s->k[i], kv, e))) st = r(ctx, s->v[i], kv, e);
    for (int i = 0; !st && i < c->n_lin_layers; i++)
        if (!(st = r(ctx, s->conv[i], cv, e))) st = r(ctx, s->rec[i], rc, e);
    if (st) {
        cpu_state_reset(b, s);
        return st;
    }
    s->pos = pos;
    return LILAC_OK;
}

static const char *cpu_device_name(const lilac_backend *b) {
    (void)b;
    return "CPU (portable C, fp32)";
}

const lilac_backend_ops lilac_cpu_backend = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .state_new = cpu_state_new,
    .state_free = cpu_state_free,
    .state_reset = cpu_state_reset,
    .state_pos = cpu_state_pos,
    .state_capacity = cpu_state_capacity,
    .state_copy = cpu_state_copy,
    .state_bytes = cpu_state_bytes,
    .state_format = "cpu-f32-1",
    .state_payload_bytes = cpu_payload_bytes,
    .state_save = cpu_state_save,
    .state_load = cpu_state_load,
    .forward = cpu_forward,
    .device_name = cpu_device_name,
};
