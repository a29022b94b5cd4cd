/* synth_write.c — a random MLX-layout checkpoint of a config's shapes.
 *
 * The tensor inventory written here is the one the loader expects for the
 * MLX layout (weights.c): quantised linears as {weight U32, scales BF16,
 * biases BF16}, stacked switch_mlp experts, conv1d [C, K, 1], norms with the
 * +1 baked in, A_log F32.  Data is streamed to the file tensor by tensor.
 *
 * gguf_exact: every 4-bit group's bias is -8 times its (bf16-rounded) scale,
 * exactly, so w = s*q + b = s*(q - 8) and each group of 64 is two llama.cpp
 * Q4_0 blocks of 32 with d = s and the same codes (lilac export-gguf writes
 * them as such).  The 8-bit router and shared-expert gate are unchanged. */
#include "model/synth_write.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/config.h"
#include "util/bf16.h"
#include "util/buf.h"
#include "util/file.h"

typedef enum { T_Q4W, T_Q8W, T_SCALES, T_BIASES, T_ONES, T_CONV, T_ALOG, T_DTBIAS } kind;

typedef struct {
    char name[160];
    const char *dtype;
    int ndim;
    int64_t shape[3];
    size_t nbytes;
    kind k;
    float std; /* target weight std for scales/biases */
    int bits;
} entry;

typedef struct {
    entry *v;
    int n, cap;
} list;

static int add(list *l, const char *name, const char *dt, int ndim, int64_t a, int64_t b, int64_t c, kind k, float std,
               int bits) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 512;
        entry *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv) return 0;
        l->v = nv, l->cap = cap;
    }
    entry *x = &l->v[l->n++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = dt, x->ndim = ndim, x->shape[0] = a, x->shape[1] = b, x->shape[2] = c, x->k = k, x->std = std, x->bits = bits;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)x->shape[i];
    x->nbytes = n * (strcmp(dt, "BF16") == 0 ? 2 : 4);
    return 1;
}

/* A quantised linear: stacked over E experts when E > 0. */
static int add_q(list *l, const char *base, int E, int rows, int cols, int bits, float std) {
    char n[160];
    int nd = E > 0 ? 3 : 2;
    int64_t d0 = E > 0 ? E : rows, d1 = E > 0 ? rows : cols * bits / 32, d2 = cols * bits / 32;
    snprintf(n, sizeof n, "%s.weight", base);
    if (!add(l, n, "U32", nd, d0, d1, d2, bits == 4 ? T_Q4W : T_Q8W, std, bits)) return 0;
    if (E > 0) d2 = cols / 64;
    else d1 = cols / 64;
    snprintf(n, sizeof n, "%s.scales", base);
    if (!add(l, n, "BF16", nd, d0, d1, d2, T_SCALES, std, bits)) return 0;
    snprintf(n, sizeof n, "%s.biases", base);
    return add(l, n, "BF16", nd, d0, d1, d2, T_BIASES, std, bits);
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_unit(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }

/* Scales and biases are drawn per group in pairs so that w = s*q + b has mean
 * about 0: b = -mid * s. */
static int write_data(FILE *f, const entry *x, uint64_t *rng, int gguf_exact) {
    enum { CHUNK = 1 << 20 };
    static unsigned char buf[CHUNK];
    size_t left = x->nbytes;
    const float mid = x->bits == 8 ? 127.5f : 7.5f, s0 = x->std / (x->bits == 8 ? 73.9f : 4.6f);
    /* A tensor's scales and then its biases replay the same draws (the
     * stream advances only after the biases), so each group gets b = -mid*s. */
    uint64_t pair = *rng;
    if (x->k == T_BIASES) rng_next(rng);
    while (left) {
        size_t n = left < CHUNK ? left : CHUNK;
        switch (x->k) {
        case T_Q4W:
        case T_Q8W:
            for (size_t i = 0; i < n; i += 8) {
                uint64_t r = rng_next(rng);
                memcpy(buf + i, &r, n - i < 8 ? n - i : 8);
            }
            break;
        case T_SCALES:
        case T_BIASES:
            for (size_t i = 0; i < n; i += 2) {
                float s = s0 * (0.8f + 0.4f * rng_unit(&pair));
                uint16_t h;
                if (gguf_exact && x->bits == 4)
                    /* -8 * a bf16 value is a bf16 value: the bias is exact */
                    h = x->k == T_SCALES ? lilac_f32_to_bf16(s) : lilac_f32_to_bf16(-8.0f * lilac_bf16_to_f32(lilac_f32_to_bf16(s)));
                else h = lilac_f32_to_bf16(x->k == T_SCALES ? s : -mid * s);
                memcpy(buf + i, &h, 2);
            }
            break;
        case T_ONES:
            for (size_t i = 0; i < n; i += 2) {
                uint16_t h = lilac_f32_to_bf16(1.0f);
                memcpy(buf + i, &h, 2);
            }
            break;
        case T_CONV:
            for (size_t i = 0; i < n; i += 2) {
                uint16_t h = lilac_f32_to_bf16((rng_unit(rng) - 0.5f) * 0.5f);
                memcpy(buf + i, &h, 2);
            }
            break;
        case T_ALOG:
            for (size_t i = 0; i < n; i += 4) {
                float v = logf(1.0f + 15.0f * rng_unit(rng));
                memcpy(buf + i, &v, 4);
            }
            break;
        case T_DTBIAS:
            for (size_t i = 0; i < n; i += 2) {
                uint16_t h = lilac_f32_to_bf16(rng_unit(rng) - 0.5f);
                memcpy(buf + i, &h, 2);
            }
            break;
        }
        if (fwrite(buf, 1, n, f) != n) return 0;
        left -= n;
    }
    return 1;
}

static lilac_status inventory(const lilac_config *c, int L, list *l, lilac_error *e) {
    const int D = c->hidden, E = c->n_experts, I = c->moe_inter, Is = c->shared_inter;
    char b[160];
    int ok = add_q(l, "language_model.model.embed_tokens", 0, c->vocab_size, D, 4, 0.02f) &&
             add_q(l, "language_model.lm_head", 0, c->vocab_size, D, 4, 0.1f) &&
             add(l, "language_model.model.norm.weight", "BF16", 1, D, 0, 0, T_ONES, 0, 0);
    for (int i = 0; ok && i < L; i++) {
#define P(s) (snprintf(b, sizeof b, "language_model.model.layers.%d.%s", i, s), b)
        ok = add(l, P("input_layernorm.weight"), "BF16", 1, D, 0, 0, T_ONES, 0, 0) &&
             add(l, P("post_attention_layernorm.weight"), "BF16", 1, D, 0, 0, T_ONES, 0, 0);
        if (ok && c->is_attn[i]) {
            const int hd = c->head_dim;
            ok = add_q(l, P("self_attn.q_proj"), 0, c->n_heads * hd * 2, D, 4, 0.02f) &&
                 add_q(l, P("self_attn.k_proj"), 0, c->n_kv_heads * hd, D, 4, 0.02f) &&
                 add_q(l, P("self_attn.v_proj"), 0, c->n_kv_heads * hd, D, 4, 0.02f) &&
                 add_q(l, P("self_attn.o_proj"), 0, D, c->n_heads * hd, 4, 0.02f) &&
                 add(l, P("self_attn.q_norm.weight"), "BF16", 1, hd, 0, 0, T_ONES, 0, 0) &&
                 add(l, P("self_attn.k_norm.weight"), "BF16", 1, hd, 0, 0, T_ONES, 0, 0);
        } else if (ok) {
            const int Hv = c->lin_v_heads;
            ok = add_q(l, P("linear_attn.in_proj_qkv"), 0, c->conv_dim, D, 4, 0.02f) &&
                 add_q(l, P("linear_attn.in_proj_z"), 0, c->lin_value_dim, D, 4, 0.02f) &&
                 add_q(l, P("linear_attn.in_proj_a"), 0, Hv, D, 4, 0.02f) &&
                 add_q(l, P("linear_attn.in_proj_b"), 0, Hv, D, 4, 0.02f) &&
                 add_q(l, P("linear_attn.out_proj"), 0, D, c->lin_value_dim, 4, 0.02f) &&
                 add(l, P("linear_attn.conv1d.weight"), "BF16", 3, c->conv_dim, c->conv_kernel, 1, T_CONV, 0, 0) &&
                 add(l, P("linear_attn.A_log"), "F32", 1, Hv, 0, 0, T_ALOG, 0, 0) &&
                 add(l, P("linear_attn.dt_bias"), "BF16", 1, Hv, 0, 0, T_DTBIAS, 0, 0) &&
                 add(l, P("linear_attn.norm.weight"), "BF16", 1, c->lin_v_dim, 0, 0, T_ONES, 0, 0);
        }
        ok = ok && add_q(l, P("mlp.gate"), 0, E, D, 8, 0.1f) && add_q(l, P("mlp.shared_expert_gate"), 0, 1, D, 8, 0.02f) &&
             add_q(l, P("mlp.shared_expert.gate_proj"), 0, Is, D, 4, 0.02f) &&
             add_q(l, P("mlp.shared_expert.up_proj"), 0, Is, D, 4, 0.02f) &&
             add_q(l, P("mlp.shared_expert.down_proj"), 0, D, Is, 4, 0.02f) &&
             add_q(l, P("mlp.switch_mlp.gate_proj"), E, I, D, 4, 0.02f) &&
             add_q(l, P("mlp.switch_mlp.up_proj"), E, I, D, 4, 0.02f) &&
             add_q(l, P("mlp.switch_mlp.down_proj"), E, D, I, 4, 0.02f);
#undef P
    }
    return ok ? LILAC_OK : lilac_fail(e, LILAC_ENOMEM, "tensor inventory");
}

/* config.json with the decoder cut to n_layers (layer_types too). */
static lilac_status write_config(const char *src_dir, int L, const char *out_dir, lilac_error *e) {
    char path[4096];
    char *text;
    size_t len;
    lilac_status st = lilac_config_read(src_dir, &text, &len, path, sizeof path, e);
    if (st) return st;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    if (!root) return lilac_fail(e, LILAC_EFORMAT, "%s: %s", path, je.text);
    json_t *tc = json_object_get(root, "text_config");
    if (!tc) tc = root;
    json_object_set_new(tc, "num_hidden_layers", json_integer(L));
    json_t *lt = json_object_get(tc, "layer_types");
    if (json_is_array(lt))
        while ((int)json_array_size(lt) > L) json_array_remove(lt, json_array_size(lt) - 1);
    json_object_set_new(tc, "mtp_num_hidden_layers", json_integer(0));
    if ((st = lilac_path_join(path, sizeof path, out_dir, "config.json", e))) {
        json_decref(root);
        return st;
    }
    int rc = json_dump_file(root, path, JSON_INDENT(2));
    json_decref(root);
    return rc ? lilac_fail(e, LILAC_EIO, "%s: cannot write", path) : LILAC_OK;
}

lilac_status lilac_synth_write(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed, lilac_error *e) {
    return lilac_synth_write_progress(src_dir, n_layers, out_dir, seed, NULL, NULL, e);
}

lilac_status lilac_synth_write_progress(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed,
                                        lilac_progress_fn progress, void *progress_ctx, lilac_error *e) {
    return lilac_synth_write_ex(src_dir, n_layers, out_dir, seed, 0, progress, progress_ctx, e);
}

lilac_status lilac_synth_write_ex(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed, int gguf_exact,
                                  lilac_progress_fn progress, void *progress_ctx, lilac_error *e) {
    lilac_config c;
    lilac_status st = lilac_config_load(src_dir, &c, e);
    if (st) return st;
    if (n_layers < 0 || n_layers > c.n_layers) {
        int have = c.n_layers;
        lilac_config_free(&c);
        return lilac_fail(e, LILAC_EINVAL, "--layers %d: the config has %d decoder layers (give 1 to %d, or leave it out for all)",
                          n_layers, have, have);
    }
    const int L = n_layers > 0 ? n_layers : c.n_layers;
    mkdir(out_dir, 0755);
    list l = {0};
    FILE *f = NULL;
    char path[4096];
    if ((st = inventory(&c, L, &l, e)) || (st = write_config(src_dir, L, out_dir, e)) ||
        (st = lilac_path_join(path, sizeof path, out_dir, "model.safetensors", e)))
        goto done;
    lilac_buf h = LILAC_BUF_INIT;
    lilac_buf_puts(&h, gguf_exact ? "{\"__metadata__\":{\"format\":\"mlx\",\"lilac\":\"synthetic\",\"biases\":\"-8*scale\"}"
                              : "{\"__metadata__\":{\"format\":\"mlx\",\"lilac\":\"synthetic\"}");
    size_t off = 0;
    for (int i = 0; i < l.n; i++) {
        const entry *x = &l.v[i];
        lilac_buf_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", x->name, x->dtype);
        for (int d = 0; d < x->ndim; d++) lilac_buf_printf(&h, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        lilac_buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + x->nbytes);
        off += x->nbytes;
    }
    lilac_buf_putc(&h, '}');
    while (h.len % 8) lilac_buf_putc(&h, ' ');
    if (h.oom) {
        lilac_buf_free(&h);
        st = lilac_fail(e, LILAC_ENOMEM, "safetensors header");
        goto done;
    }
    f = fopen(path, "wb");
    if (!f) {
        lilac_buf_free(&h);
        st = lilac_fail(e, LILAC_EIO, "%s: cannot create", path);
        goto done;
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(h.data, 1, h.len, f) == h.len;
    lilac_buf_free(&h);
    uint64_t rng = seed;
    uint64_t written = 0;
    for (int i = 0; ok && i < l.n; i++) {
        ok = write_data(f, &l.v[i], &rng, gguf_exact);
        written += l.v[i].nbytes;
        if (progress) progress(progress_ctx, "writing model.safetensors", written, off);
    }
    if (fclose(f) != 0) ok = 0;
    f = NULL;
    if (!ok) st = lilac_fail(e, LILAC_EIO, "%s: write failed (disk full?)", path);
done:
    free(l.v);
    lilac_config_free(&c);
    return st;
}
