/* config.c — config.json -> lilac_config, with every value range-checked.
 *
 * Errors name the file and the key ("tests/x/config.json: text_config.head_dim:
 * must be an even integer in [2, 1024], got 33"). */
#include "model/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/file.h"

typedef struct {
    const char *where;  /* file name for messages */
    const char *prefix; /* "text_config." or "" */
    lilac_error *e;
} ctx;

static lilac_status get_int(ctx *c, json_t *obj, const char *key, long lo, long hi, int required, int dflt,
                            int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: missing", c->where, c->prefix, key);
        *out = dflt;
        return LILAC_OK;
    }
    if (!json_is_integer(v))
        return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: must be an integer", c->where, c->prefix, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: %lld is out of range [%ld, %ld]", c->where, c->prefix,
                          key, (long long)x, lo, hi);
    *out = (int)x;
    return LILAC_OK;
}

static lilac_status get_real(ctx *c, json_t *obj, const char *key, double lo, double hi, int required,
                             double dflt, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: missing", c->where, c->prefix, key);
        *out = dflt;
        return LILAC_OK;
    }
    if (!json_is_number(v))
        return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: must be a number", c->where, c->prefix, key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return lilac_fail(c->e, LILAC_EFORMAT, "%s: %s%s: %g is out of range [%g, %g]", c->where, c->prefix, key,
                          x, lo, hi);
    *out = x;
    return LILAC_OK;
}

/* Adds the id(s) of an eos_token_id value (int or list of ints) to c->eos. */
static lilac_status add_eos(ctx *cx, json_t *v, const char *key, lilac_config *c) {
    if (!v || json_is_null(v)) return LILAC_OK;
    json_t *items = v;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_is_array(v) ? json_array_get(items, i) : v;
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= c->vocab_size)
            return lilac_fail(cx->e, LILAC_EFORMAT, "%s: %s: every id must be an integer in [0, vocab_size)",
                              cx->where, key);
        int32_t id = (int32_t)json_integer_value(x);
        int dup = 0;
        for (int j = 0; j < c->n_eos; j++) dup |= c->eos[j] == id;
        if (dup) continue;
        if (c->n_eos >= LILAC_MAX_EOS)
            return lilac_fail(cx->e, LILAC_EFORMAT, "%s: %s: more than %d end ids", cx->where, key, LILAC_MAX_EOS);
        c->eos[c->n_eos++] = id;
    }
    return LILAC_OK;
}

static lilac_status parse_quant(ctx *cx, json_t *q, lilac_config *c) {
    cx->prefix = "quantization.";
    lilac_status st;
    if (!json_is_object(q)) return lilac_fail(cx->e, LILAC_EFORMAT, "%s: quantization: must be an object", cx->where);
    if ((st = get_int(cx, q, "bits", 1, 16, 1, 0, &c->q_bits))) return st;
    if ((st = get_int(cx, q, "group_size", 1, 1 << 20, 1, 0, &c->q_group_size))) return st;
    json_t *mode = json_object_get(q, "mode");
    if (mode && (!json_is_string(mode) || strcmp(json_string_value(mode), "affine") != 0))
        return lilac_fail(cx->e, LILAC_EUNSUPPORTED,
                          "%s: quantization.mode: only \"affine\" (MLX default) is supported", cx->where);
    const char *key;
    json_t *v;
    size_t n = 0;
    json_object_foreach(q, key, v) n += json_is_object(v) || json_is_false(v);
    if (n > LILAC_MAX_QUANT_OVERRIDES)
        return lilac_fail(cx->e, LILAC_EFORMAT, "%s: quantization: more than %d per-module overrides", cx->where,
                          LILAC_MAX_QUANT_OVERRIDES);
    c->quant_overrides = calloc(n ? n : 1, sizeof *c->quant_overrides);
    if (!c->quant_overrides) return lilac_fail(cx->e, LILAC_ENOMEM, "quantization overrides");
    json_object_foreach(q, key, v) {
        if (!json_is_object(v) && !json_is_false(v)) continue;
        lilac_quant_override *o = &c->quant_overrides[c->n_quant_overrides++];
        o->path = strdup(key);
        if (!o->path) return lilac_fail(cx->e, LILAC_ENOMEM, "quantization overrides");
        if (json_is_false(v)) continue; /* bits = 0: module kept unquantised */
        char pfx[320];
        snprintf(pfx, sizeof pfx, "quantization.%.280s.", key);
        cx->prefix = pfx;
        if ((st = get_int(cx, v, "bits", 1, 16, 1, 0, &o->bits))) return st;
        if ((st = get_int(cx, v, "group_size", 1, 1 << 20, 1, 0, &o->group_size))) return st;
        json_t *m = json_object_get(v, "mode");
        if (m && (!json_is_string(m) || strcmp(json_string_value(m), "affine") != 0))
            return lilac_fail(cx->e, LILAC_EUNSUPPORTED, "%s: %smode: only \"affine\" is supported", cx->where, pfx);
        cx->prefix = "quantization.";
    }
    return LILAC_OK;
}

/* lilac computes 4- and 8-bit affine groups of 32, 64 or 128. */
static lilac_status check_quant_supported(ctx *cx, const char *what, int bits, int group) {
    if (bits != 4 && bits != 8)
        return lilac_fail(cx->e, LILAC_EUNSUPPORTED, "%s: %s: %d-bit quantization is not supported (4 or 8)",
                          cx->where, what, bits);
    if (group != 32 && group != 64 && group != 128)
        return lilac_fail(cx->e, LILAC_EUNSUPPORTED,
                          "%s: %s: quantization group_size %d is not supported (32, 64 or 128)", cx->where, what,
                          group);
    return LILAC_OK;
}

static lilac_status parse_root(json_t *root, const char *where, lilac_config *c, lilac_error *e) {
    ctx cx = {where, "", e};
    lilac_status st;
    if (!json_is_object(root)) return lilac_fail(e, LILAC_EFORMAT, "%s: top level must be a JSON object", where);

    json_t *tc = json_object_get(root, "text_config");
    if (tc && !json_is_object(tc)) return lilac_fail(e, LILAC_EFORMAT, "%s: text_config: must be an object", where);
    if (!tc) tc = root;
    else cx.prefix = "text_config.";

    json_t *mt = json_object_get(tc, "model_type");
    if (mt && (!json_is_string(mt) || (strcmp(json_string_value(mt), "qwen3_5_moe") != 0 &&
                                       strcmp(json_string_value(mt), "qwen3_5_moe_text") != 0)))
        return lilac_fail(e, LILAC_EUNSUPPORTED, "%s: %smodel_type: %s%s%s is not qwen3_5_moe (Qwen3.6-35B-A3B)",
                          where, cx.prefix, json_is_string(mt) ? "\"" : "",
                          json_is_string(mt) ? json_string_value(mt) : "(not a string)", json_is_string(mt) ? "\"" : "");

    if ((st = get_int(&cx, tc, "vocab_size", 1, 4000000, 1, 0, &c->vocab_size))) return st;
    if ((st = get_int(&cx, tc, "hidden_size", 1, 65536, 1, 0, &c->hidden))) return st;
    if ((st = get_int(&cx, tc, "num_hidden_layers", 1, LILAC_MAX_LAYERS, 1, 0, &c->n_layers))) return st;
    if ((st = get_int(&cx, tc, "num_attention_heads", 1, 1024, 1, 0, &c->n_heads))) return st;
    if ((st = get_int(&cx, tc, "num_key_value_heads", 1, 1024, 1, 0, &c->n_kv_heads))) return st;
    if ((st = get_int(&cx, tc, "head_dim", 2, 1024, 1, 0, &c->head_dim))) return st;
    if ((st = get_int(&cx, tc, "linear_num_key_heads", 1, 1024, 1, 0, &c->lin_k_heads))) return st;
    if ((st = get_int(&cx, tc, "linear_num_value_heads", 1, 1024, 1, 0, &c->lin_v_heads))) return st;
    if ((st = get_int(&cx, tc, "linear_key_head_dim", 1, 1024, 1, 0, &c->lin_k_dim))) return st;
    if ((st = get_int(&cx, tc, "linear_value_head_dim", 1, 1024, 1, 0, &c->lin_v_dim))) return st;
    if ((st = get_int(&cx, tc, "linear_conv_kernel_dim", 1, 64, 1, 0, &c->conv_kernel))) return st;
    if ((st = get_int(&cx, tc, "num_experts", 1, 4096, 1, 0, &c->n_experts))) return st;
    if ((st = get_int(&cx, tc, "num_experts_per_tok", 1, 64, 1, 0, &c->n_experts_per_tok))) return st;
    if ((st = get_int(&cx, tc, "moe_intermediate_size", 1, 65536, 1, 0, &c->moe_inter))) return st;
    if ((st = get_int(&cx, tc, "shared_expert_intermediate_size", 1, 65536, 1, 0, &c->shared_inter))) return st;
    if ((st = get_int(&cx, tc, "max_position_embeddings", 1, 1 << 24, 0, 262144, &c->max_pos))) return st;
    double eps;
    if ((st = get_real(&cx, tc, "rms_norm_eps", 1e-12, 0.1, 1, 0, &eps))) return st;
    c->rms_eps = (float)eps;

    json_t *act = json_object_get(tc, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return lilac_fail(e, LILAC_EUNSUPPORTED, "%s: %shidden_act: only \"silu\" is supported", where, cx.prefix);
    json_t *gate = json_object_get(tc, "attn_output_gate");
    if (gate && !json_is_true(gate))
        return lilac_fail(e, LILAC_EUNSUPPORTED, "%s: %sattn_output_gate: must be true for this architecture", where,
                          cx.prefix);
    json_t *tie = json_object_get(tc, "tie_word_embeddings");
    if (!tie) tie = json_object_get(root, "tie_word_embeddings");
    c->tie_embeddings = tie && json_is_true(tie);

    /* RoPE: rope_parameters (transformers >= 5) or the legacy flat keys. */
    json_t *rp = json_object_get(tc, "rope_parameters");
    if (rp && !json_is_object(rp))
        return lilac_fail(e, LILAC_EFORMAT, "%s: %srope_parameters: must be an object", where, cx.prefix);
    json_t *legacy_scaling = json_object_get(tc, "rope_scaling");
    if (!rp && legacy_scaling && json_is_object(legacy_scaling)) rp = legacy_scaling;
    json_t *src = rp ? rp : tc;
    char rpfx[64];
    snprintf(rpfx, sizeof rpfx, "%s%s", cx.prefix, rp ? "rope_parameters." : "");
    ctx rcx = {where, rpfx, e};
    json_t *rt = json_object_get(src, "rope_type");
    if (!rt) rt = json_object_get(src, "type");
    if (rt && (!json_is_string(rt) || strcmp(json_string_value(rt), "default") != 0))
        return lilac_fail(e, LILAC_EUNSUPPORTED, "%s: %srope_type: only \"default\" RoPE is supported (got %s)",
                          where, rpfx, json_is_string(rt) ? json_string_value(rt) : "a non-string");
    if ((st = get_real(&rcx, src, "rope_theta", 1.0, 1e12, 0, -1, &c->rope_theta))) return st;
    if (c->rope_theta < 0 && (st = get_real(&cx, tc, "rope_theta", 1.0, 1e12, 1, 0, &c->rope_theta))) return st;
    double prf;
    if ((st = get_real(&rcx, src, "partial_rotary_factor", 1e-6, 1.0, 0, -1, &prf))) return st;
    if (prf < 0 && (st = get_real(&cx, tc, "partial_rotary_factor", 1e-6, 1.0, 0, 1.0, &prf))) return st;
    c->rotary_dim = (int)lround(c->head_dim * prf);
    if (c->rotary_dim < 2 || c->rotary_dim % 2 || c->rotary_dim > c->head_dim)
        return lilac_fail(e, LILAC_EFORMAT, "%s: rotary dim head_dim*partial_rotary_factor = %d must be even and in [2, %d]",
                          where, c->rotary_dim, c->head_dim);
    json_t *ms = json_object_get(src, "mrope_section");
    if (ms) {
        /* Interleaved multimodal RoPE: for text every axis carries the same
         * position, so only the section sizes are checked. */
        long sum = 0;
        if (!json_is_array(ms)) return lilac_fail(e, LILAC_EFORMAT, "%s: %smrope_section: must be a list", where, rpfx);
        for (size_t i = 0; i < json_array_size(ms); i++) {
            json_t *x = json_array_get(ms, i);
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                return lilac_fail(e, LILAC_EFORMAT, "%s: %smrope_section: entries must be non-negative integers", where, rpfx);
            sum += (long)json_integer_value(x);
        }
        if (sum != c->rotary_dim / 2)
            return lilac_fail(e, LILAC_EFORMAT, "%s: %smrope_section sums to %ld, not rotary_dim/2 = %d", where, rpfx, sum,
                              c->rotary_dim / 2);
    }

    /* Layer pattern: explicit layer_types, else every full_attention_interval-th layer. */
    json_t *lt = json_object_get(tc, "layer_types");
    if (lt) {
        if (!json_is_array(lt) || (int)json_array_size(lt) != c->n_layers)
            return lilac_fail(e, LILAC_EFORMAT, "%s: %slayer_types: must be a list of num_hidden_layers (%d) strings",
                              where, cx.prefix, c->n_layers);
        for (int i = 0; i < c->n_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "full_attention") == 0) c->is_attn[i] = 1;
            else if (s && strcmp(s, "linear_attention") == 0) c->is_attn[i] = 0;
            else
                return lilac_fail(e, LILAC_EFORMAT, "%s: %slayer_types[%d]: must be \"full_attention\" or \"linear_attention\"",
                                  where, cx.prefix, i);
        }
    } else {
        int interval;
        if ((st = get_int(&cx, tc, "full_attention_interval", 1, LILAC_MAX_LAYERS, 1, 0, &interval))) return st;
        for (int i = 0; i < c->n_layers; i++) c->is_attn[i] = (i + 1) % interval == 0;
    }
    for (int i = 0; i < c->n_layers; i++) c->n_attn_layers += c->is_attn[i];
    c->n_lin_layers = c->n_layers - c->n_attn_layers;

    /* Cross-checks the forward pass relies on. */
    if (c->n_heads % c->n_kv_heads)
        return lilac_fail(e, LILAC_EFORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", where,
                          c->n_heads, c->n_kv_heads);
    if (c->lin_v_heads % c->lin_k_heads)
        return lilac_fail(e, LILAC_EFORMAT, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
                          where, c->lin_v_heads, c->lin_k_heads);
    if (c->n_experts_per_tok > c->n_experts)
        return lilac_fail(e, LILAC_EFORMAT, "%s: num_experts_per_tok %d exceeds num_experts %d", where,
                          c->n_experts_per_tok, c->n_experts);
    if (c->conv_kernel < 2)
        return lilac_fail(e, LILAC_EFORMAT, "%s: linear_conv_kernel_dim %d must be at least 2", where, c->conv_kernel);
    c->lin_key_dim = c->lin_k_heads * c->lin_k_dim;
    c->lin_value_dim = c->lin_v_heads * c->lin_v_dim;
    c->conv_dim = 2 * c->lin_key_dim + c->lin_value_dim;

    /* End ids: the top level (chat checkpoints: a list) and text_config. */
    cx.prefix = "";
    if ((st = add_eos(&cx, json_object_get(root, "eos_token_id"), "eos_token_id", c))) return st;
    if (tc != root && (st = add_eos(&cx, json_object_get(tc, "eos_token_id"), "text_config.eos_token_id", c))) return st;

    json_t *q = json_object_get(root, "quantization");
    if (!q) q = json_object_get(root, "quantization_config");
    if (q) {
        c->quantized = 1;
        if ((st = parse_quant(&cx, q, c))) return st;
        if ((st = check_quant_supported(&cx, "quantization", c->q_bits, c->q_group_size))) return st;
        for (int i = 0; i < c->n_quant_overrides; i++) {
            lilac_quant_override *o = &c->quant_overrides[i];
            if (o->bits && (st = check_quant_supported(&cx, o->path, o->bits, o->group_size))) return st;
        }
    }
    return LILAC_OK;
}

lilac_status lilac_config_parse(const char *text, size_t len, const char *where, lilac_config *c, lilac_error *e) {
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return lilac_fail(e, LILAC_EFORMAT, "%s: invalid JSON at line %d column %d: %s", where, je.line, je.column,
                          je.text);
    lilac_status st = parse_root(root, where, c, e);
    json_decref(root);
    if (st) lilac_config_free(c);
    return st;
}

/* tests/fixtures/qwen36-config/config.json as bytes (Makefile: tools/embed_file.sh) */
#include "model/qwen36_config.inc"

lilac_status lilac_config_read(const char *model_dir, char **text, size_t *len, char *where, size_t cap,
                               lilac_error *e) {
    *text = NULL;
    if (model_dir && strcmp(model_dir, LILAC_CONFIG_BUILTIN) == 0) {
        *len = sizeof lilac_qwen36_config - 1;
        if (!(*text = malloc(sizeof lilac_qwen36_config))) return lilac_fail(e, LILAC_ENOMEM, "config.json");
        memcpy(*text, lilac_qwen36_config, sizeof lilac_qwen36_config);
        snprintf(where, cap, "the built-in Qwen3.6-35B-A3B config.json");
        return LILAC_OK;
    }
    lilac_status st = lilac_path_join(where, cap, model_dir, "config.json", e);
    if (st) return st;
    return lilac_read_file(where, 16u << 20, text, len, e);
}

lilac_status lilac_config_load(const char *model_dir, lilac_config *c, lilac_error *e) {
    char path[4096];
    char *text;
    size_t len;
    lilac_status st = lilac_config_read(model_dir, &text, &len, path, sizeof path, e);
    if (st) return st;
    st = lilac_config_parse(text, len, path, c, e);
    free(text);
    return st;
}

void lilac_config_free(lilac_config *c) {
    if (!c) return;
    for (int i = 0; i < c->n_quant_overrides; i++) free(c->quant_overrides[i].path);
    free(c->quant_overrides);
    c->quant_overrides = NULL;
    c->n_quant_overrides = 0;
}

int lilac_config_quant_for(const lilac_config *c, const char *module_path, int *bits, int *group_size) {
    if (!c->quantized) return 0;
    for (int i = 0; i < c->n_quant_overrides; i++)
        if (strcmp(c->quant_overrides[i].path, module_path) == 0) {
            *bits = c->quant_overrides[i].bits;
            *group_size = c->quant_overrides[i].group_size;
            return *bits != 0;
        }
    *bits = c->q_bits;
    *group_size = c->q_group_size;
    return 1;
}

int lilac_config_layer_slot(const lilac_config *c, int layer) {
    int k = 0;
    for (int i = 0; i < layer; i++) k += c->is_attn[i] == c->is_attn[layer];
    return k;
}
