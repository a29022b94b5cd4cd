/* synth_write.h — writing a random model of real shapes to disk, in the MLX
 * 4-bit layout mlx-community ships (for tests that compare backends on the
 * full model width without the real weights). */
#ifndef LILAC_MODEL_SYNTH_WRITE_H
#define LILAC_MODEL_SYNTH_WRITE_H

#include <stdint.h>

#include "lilac.h"
#include "util/err.h"

/* Reads SRC_DIR/config.json, keeps its first n_layers decoder layers (0 =
 * all; more than the config has is an error), and writes OUT_DIR/config.json and OUT_DIR/model.safetensors with
 * random weights from seed.  Weight standard deviations: 0.02 for
 * projections and experts, 0.1 for the router and lm_head (decisive routing
 * and spread-out logits, so backends can be compared by top-1). */
lilac_status lilac_synth_write(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed, lilac_error *e);
/* The same, reporting the bytes of model.safetensors written so far
 * (progress may be NULL). */
lilac_status lilac_synth_write_progress(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed,
                                        lilac_progress_fn progress, void *progress_ctx, lilac_error *e);

/* The same; gguf_exact makes every 4-bit group's bias exactly -8 x its
 * scale (bf16), so each group of 64 is two llama.cpp Q4_0 blocks with the
 * same codes (the 8-bit router and shared-expert gate are unchanged). */
lilac_status lilac_synth_write_ex(const char *src_dir, int n_layers, const char *out_dir, uint64_t seed, int gguf_exact,
                                  lilac_progress_fn progress, void *progress_ctx, lilac_error *e);

#endif
