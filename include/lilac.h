/* lilac.h — the public API of lilac, a single-model inference engine for
 * Qwen3.6-35B-A3B.
 *
 * The CLI and the server include only this header.  It exposes opaque
 * engines (weights + backend) and sessions (one sequence's state: the KV cache
 * of the attention layers and the conv + recurrent state of the DeltaNet
 * layers), and the status convention shared by the whole library:
 *
 *   every function that can fail returns lilac_status (LILAC_OK == 0) and, on
 *   failure, writes one human-readable line into the caller's lilac_error.
 *
 * Ownership: the _open and _new functions return objects the caller frees with
 * the matching _close or _free; freeing NULL is a no-op.
 */
#ifndef LILAC_H
#define LILAC_H

#include <stddef.h>
#include <stdint.h>

#define LILAC_VERSION "0.1.0"

typedef enum {
    LILAC_OK = 0,
    LILAC_EIO,          /* a file could not be opened, read or mapped */
    LILAC_EFORMAT,      /* a file or body is malformed */
    LILAC_EINVAL,       /* an argument or value is out of range */
    LILAC_ENOMEM,       /* an allocation failed */
    LILAC_EUNSUPPORTED, /* valid, but not something lilac implements */
    LILAC_EBACKEND,     /* the compute backend failed (CUDA error, no device) */
    LILAC_ECANCELLED,   /* the caller asked to stop */
} lilac_status;

typedef struct {
    lilac_status code;
    char msg[512];
} lilac_error;

const char *lilac_status_name(lilac_status s);

/* ---------------------------------------------------------------------------
 * Engine: a loaded model bound to a compute backend.
 * ------------------------------------------------------------------------- */

typedef struct lilac_engine lilac_engine;
typedef struct lilac_session lilac_session;

typedef struct {
    const char *model_dir; /* config.json + safetensors (+ tokenizer files) */
    const char *backend;   /* "auto" (default: CUDA when a GPU is present), "cpu", "cuda" */
    int threads;           /* CPU worker threads; 0 = one per core */
    int chunk;             /* prefill chunk in tokens; 0 = the backend's default */
} lilac_engine_opts;

typedef struct {
    int vocab_size, hidden, n_layers, n_attn_layers, max_pos;
    int n_eos;
    const int32_t *eos;    /* end-of-sequence ids from config.json */
    const char *backend;   /* "cpu" or "cuda" */
    const char *device;    /* e.g. "NVIDIA H200" */
    const char *layout;    /* "mlx" or "hf" */
    size_t weight_bytes;   /* bytes of all weight matrices as stored */
    int chunk;             /* prefill chunk in tokens */
} lilac_engine_info;

lilac_status lilac_engine_open(const lilac_engine_opts *o, lilac_engine **out, lilac_error *e);
void lilac_engine_close(lilac_engine *g);
void lilac_engine_get_info(const lilac_engine *g, lilac_engine_info *info);

/* ---------------------------------------------------------------------------
 * Sessions: one token sequence and its model state.  A session only grows:
 * tokens are appended by feed() and generate(); reset() empties it.
 * ------------------------------------------------------------------------- */

/* A session for up to max_ctx tokens (0 = the model's max_position_embeddings). */
lilac_status lilac_session_new(lilac_engine *g, int max_ctx, lilac_session **out, lilac_error *e);
void lilac_session_free(lilac_session *s);
void lilac_session_reset(lilac_session *s);
int lilac_session_len(const lilac_session *s);
int lilac_session_capacity(const lilac_session *s);
const int32_t *lilac_session_tokens(const lilac_session *s);
/* Bytes one session of max_ctx tokens occupies on its backend. */
size_t lilac_session_bytes(const lilac_engine *g, int max_ctx);

/* Appends n tokens (prefilled in chunks).  logits may be NULL; otherwise it
 * receives [n, vocab] logits of every position when all is set, or the
 * [vocab] logits of the last position. */
lilac_status lilac_session_feed(lilac_session *s, const int32_t *ids, int n, float *logits, int all, lilac_error *e);
/* Debug form of feed(): also writes the residual streams, [n_layers + 1, n,
 * hidden] in Hugging Face's output_hidden_states convention (CPU backend only;
 * the whole input goes in one chunk). */
lilac_status lilac_session_feed_hidden(lilac_session *s, const int32_t *ids, int n, float *logits_all, float *hidden,
                                       lilac_error *e);
/* dst becomes an exact copy of src (state and tokens). */
lilac_status lilac_session_copy(lilac_session *dst, const lilac_session *src, lilac_error *e);

/* Greedy generation: appends up to n tokens after the fed prompt, stopping
 * after an end-of-sequence id when stop_at_eos is set.  out receives the new
 * ids; *n_out their count.  The session must hold at least one token. */
lilac_status lilac_session_generate_greedy(lilac_session *s, int n, int stop_at_eos, int32_t *out, int *n_out,
                                           lilac_error *e);

#endif
