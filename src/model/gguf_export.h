/* gguf_export.h — a lilac model directory as a GGUF of llama.cpp's
 * `qwen35moe` architecture (lilac export-gguf). */
#ifndef LILAC_MODEL_GGUF_EXPORT_H
#define LILAC_MODEL_GGUF_EXPORT_H

#include "lilac.h"
#include "util/err.h"

typedef struct {
    int f32;                 /* every tensor as F32 (dequantised) */
    lilac_progress_fn progress;
    void *progress_ctx;
} lilac_gguf_export_opts;

typedef struct {
    int n_tensors, n_q4_0, n_q4_1, n_f32;
    long long q4_1_inexact_groups; /* groups whose scale or bias is not exact in fp16 (Q4_1 only) */
    int file_type;                 /* llama.cpp's general.file_type: 0 all F32, 2 mostly Q4_0, 3 mostly Q4_1 */
} lilac_gguf_export_report;

/* Loads and validates DIR (lilac_model_load) and writes OUT.  4-bit
 * matrices become Q4_0 when every group's bias is exactly -8 x its scale
 * (two Q4_0 blocks of 32 per group of 64, the same codes), else Q4_1 (d =
 * scale, m = bias); everything else is F32. */
lilac_status lilac_gguf_export(const char *dir, const char *out, const lilac_gguf_export_opts *o,
                               lilac_gguf_export_report *rep, lilac_error *e);

#endif
