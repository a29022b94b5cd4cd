/* config.h — the validated hyper-parameters of a Qwen3.6 (qwen3_5_moe) model.
 *
 * Read from config.json: the decoder fields live under `text_config` in the
 * real checkpoints (multimodal wrapper) or at the top level in flat configs.
 * Every dimension the engine uses comes from here; nothing about a particular
 * size is hard-coded, so the tiny test fixture and the real 35B model load
 * through the same path.  Values are range-checked and cross-checked at load
 * (heads divide, rotary dims fit, layer_types agrees with the layer count). */
#ifndef LILAC_MODEL_CONFIG_H
#define LILAC_MODEL_CONFIG_H

#include <stdint.h>

#include "util/err.h"

#define LILAC_MAX_LAYERS 256
#define LILAC_MAX_EOS 8
#define LILAC_MAX_QUANT_OVERRIDES 1024

/* One per-module override of the default quantisation, as MLX writes it in
 * config.json "quantization": {"<module path>": {"group_size": 64, "bits": 8}}. */
typedef struct {
    char *path; /* module path, e.g. "language_model.model.layers.0.mlp.gate" */
    int bits;
    int group_size;
} lilac_quant_override;

typedef struct {
    /* decoder shape */
    int vocab_size;
    int hidden;      /* D */
    int n_layers;
    uint8_t is_attn[LILAC_MAX_LAYERS]; /* 1 = full attention, 0 = Gated DeltaNet */
    int n_attn_layers, n_lin_layers;
    float rms_eps;
    int max_pos;
    int tie_embeddings;

    /* gated full attention */
    int n_heads, n_kv_heads, head_dim, rotary_dim;
    double rope_theta;

    /* Gated DeltaNet */
    int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, conv_kernel;
    int lin_key_dim, lin_value_dim, conv_dim; /* derived: Hk*dk, Hv*dv, 2*key+value */

    /* MoE */
    int n_experts, n_experts_per_tok, moe_inter, shared_inter;

    /* end-of-sequence ids (union of top-level and text_config eos_token_id) */
    int n_eos;
    int32_t eos[LILAC_MAX_EOS];

    /* MLX quantisation ("quantization" block); quantized == 0 for bf16 files */
    int quantized;
    int q_bits, q_group_size;
    int n_quant_overrides;
    lilac_quant_override *quant_overrides;
} lilac_config;

/* Parses and validates config.json text (`where` names the file in errors). */
lilac_status lilac_config_parse(const char *json_text, size_t len, const char *where, lilac_config *c,
                                lilac_error *e);
/* A model directory name that stands for the real Qwen3.6-35B-A3B
 * config.json, built into the binary (for synthetic models: `lilac bench
 * --synthetic` and `lilac synth` run from any directory). */
#define LILAC_CONFIG_BUILTIN "builtin:qwen3.6-35b-a3b"
/* DIR/config.json (or the built-in text) as a malloc'd, NUL-terminated
 * buffer; where (cap bytes) receives the file's name for messages. */
lilac_status lilac_config_read(const char *model_dir, char **text, size_t *len, char *where, size_t cap,
                               lilac_error *e);
/* Reads DIR/config.json (DIR may be LILAC_CONFIG_BUILTIN). */
lilac_status lilac_config_load(const char *model_dir, lilac_config *c, lilac_error *e);
void lilac_config_free(lilac_config *c);

/* Index of a layer among the layers of its kind (attention or DeltaNet):
 * which KV cache or recurrent state it owns in a session. */
int lilac_config_layer_slot(const lilac_config *c, int layer);

/* Quantisation for a module path: bits and group size from its override, or
 * the defaults.  Returns 0 when the model is not quantized. */
int lilac_config_quant_for(const lilac_config *c, const char *module_path, int *bits, int *group_size);

#endif
