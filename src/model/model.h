/* model.h — the in-memory Qwen3.6 model: validated views of the checkpoint.
 *
 * Both checkpoint layouts (MLX affine 4/8-bit as mlx-community ships it, and
 * the original Hugging Face bf16 files) load into this one structure:
 *   - large matrices stay where they are (memory-mapped) and are described by
 *     a lilac_matrix view: element type, shape, quantisation group, strides;
 *   - small per-channel parameters (norm weights, conv taps, A_log, dt_bias)
 *     are converted once to f32 in the model's arena, with the layout
 *     differences resolved: zero-centred norms are stored as (1 + w) whatever
 *     the file held, conv taps as [C, K] whatever the file's axis order.
 * Backends read only this structure; they never see tensor names. */
#ifndef LILAC_MODEL_MODEL_H
#define LILAC_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/safetensors.h"

typedef enum {
    LILAC_MAT_F32,
    LILAC_MAT_BF16,
    LILAC_MAT_Q4, /* MLX affine: 8 values per u32, lowest bits first; w = scale*q + bias per group */
    LILAC_MAT_Q8, /* MLX affine: 4 values per u32 */
} lilac_mat_type;

/* n_mat matrices of [rows, cols] (row = output, col = input), stored with a
 * fixed byte stride between matrices (stacked experts; 1 for plain linears). */
typedef struct {
    lilac_mat_type type;
    int rows, cols, n_mat;
    int group;                        /* quantised: inputs per scale/bias; else 0 */
    const void *w;                    /* matrix 0, row 0 */
    const uint16_t *scales, *biases;  /* bf16 [rows, cols/group] per matrix; quantised only */
    size_t mat_stride;                /* bytes from matrix e to e+1 in w */
    size_t mat_stride_sb;             /* elements from matrix e to e+1 in scales/biases */
} lilac_matrix;

/* Bytes of one row of m's weights (packed codes for quantised types). */
size_t lilac_matrix_row_bytes(const lilac_matrix *m);
/* Total bytes of m's weights + scales + biases (what a GEMV streams). */
size_t lilac_matrix_bytes(const lilac_matrix *m);
/* Dequantises row r of matrix e into out[cols] (f32). */
void lilac_matrix_row_f32(const lilac_matrix *m, int e, int r, float *out);

typedef struct {
    int is_attn;
    const float *input_norm; /* [hidden], (1 + w) */
    const float *post_norm;  /* [hidden], (1 + w) */

    /* gated full attention (is_attn) */
    lilac_matrix q_proj;     /* [H*2*hd, hidden]: per head hd query rows then hd gate rows */
    lilac_matrix k_proj;     /* [Hkv*hd, hidden] */
    lilac_matrix v_proj;     /* [Hkv*hd, hidden] */
    lilac_matrix o_proj;     /* [hidden, H*hd] */
    const float *q_norm;     /* [hd], (1 + w) */
    const float *k_norm;     /* [hd], (1 + w) */

    /* Gated DeltaNet (!is_attn) */
    lilac_matrix in_qkv;     /* [2*Hk*dk + Hv*dv, hidden]: q | k | v */
    lilac_matrix in_z;       /* [Hv*dv, hidden] */
    lilac_matrix in_b;       /* [Hv, hidden] -> beta */
    lilac_matrix in_a;       /* [Hv, hidden] -> decay */
    lilac_matrix out_proj;   /* [hidden, Hv*dv] */
    const float *conv_w;     /* [conv_dim, K]: tap K-1 multiplies the current token */
    const float *A_log;      /* [Hv] */
    const float *dt_bias;    /* [Hv] */
    const float *lin_norm;   /* [dv], plain weight (not 1 + w) */

    /* MoE */
    lilac_matrix router;       /* [E, hidden] */
    lilac_matrix exp_gate;     /* E x [I, hidden] */
    lilac_matrix exp_up;       /* E x [I, hidden] */
    lilac_matrix exp_down;     /* E x [hidden, I] */
    lilac_matrix sh_gate;      /* [Is, hidden] */
    lilac_matrix sh_up;        /* [Is, hidden] */
    lilac_matrix sh_down;      /* [hidden, Is] */
    lilac_matrix sh_gate_proj; /* [1, hidden]: sigmoid gate of the shared expert */
} lilac_layer;

typedef enum { LILAC_LAYOUT_MLX, LILAC_LAYOUT_HF } lilac_layout;

typedef struct {
    lilac_config cfg;
    lilac_layout layout;
    lilac_matrix embed;      /* [vocab, hidden] */
    lilac_matrix lm_head;    /* [vocab, hidden] */
    const float *final_norm; /* [hidden], (1 + w) */
    lilac_layer *layers;     /* [n_layers] */
    size_t weight_bytes;     /* bytes of all matrices (weights + scales + biases) */

    int synthetic;           /* matrices have shapes but no data (w == NULL): a
                                device backend fills them with random values */
    lilac_tensors tensors;   /* the mapped files the views point into */
    float *arena;            /* owned: the small f32 parameters */
    size_t arena_used, arena_cap;
} lilac_model;

/* A model of config c's exact shapes with no weight data (MLX layout: 4-bit
 * matrices, 8-bit router and shared-expert gate, group 64), for benchmarks
 * that generate weights on the device.  Small parameters get fixed, sane
 * values (norms 1, decay terms in their usual range). */
lilac_status lilac_model_synthetic(const lilac_config *c, lilac_model *m, lilac_error *e);

/* Bytes of every matrix (weights + scales + biases): weight_bytes above. */
size_t lilac_model_weight_bytes(const lilac_model *m);

/* Loads and validates DIR (config.json + safetensors). */
lilac_status lilac_model_load(const char *dir, lilac_model *m, lilac_error *e);
void lilac_model_free(lilac_model *m);

#endif
