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

/* Progress of long work inside the library (engine_open: "reading weights",
 * "uploading to the GPU"): done of total bytes so far; called often, from
 * the opening thread. */
typedef void (*lilac_progress_fn)(void *ctx, const char *stage, uint64_t done, uint64_t total);

typedef struct {
    const char *model_dir; /* config.json + safetensors (+ tokenizer files) */
    const char *backend;   /* "auto" (default: CUDA when a GPU is present), "cpu", "cuda" */
    int threads;           /* CPU worker threads; 0 = the default (1 on <= 2 cores, else one per core) */
    int chunk;             /* prefill chunk in tokens; 0 = the backend's default */
    int synthetic;         /* benchmarks: model_dir only supplies config.json; the
                              weights are random, generated on the device */
    lilac_progress_fn progress; /* optional */
    void *progress_ctx;
} lilac_engine_opts;

typedef struct {
    int vocab_size, hidden, n_layers, n_attn_layers, max_pos;
    int n_experts, n_experts_per_tok, moe_inter;
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
/* The device's memory in use (by any process) and in all, in bytes;
 * LILAC_EUNSUPPORTED on backends without device memory (the CPU). */
lilac_status lilac_engine_device_memory(const lilac_engine *g, size_t *used, size_t *total);

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

/* ---------------------------------------------------------------------------
 * Snapshot files (src/engine/snapshot.c): a session's tokens, its last
 * logits and its backend state up to its position, for the prefix cache to
 * survive a restart.  Layout, all in the host's (little-endian) byte order:
 *
 *   header, LILAC_SNAP_HEADER bytes:
 *      0  "LILACSNP"              8  u32 format version (LILAC_SNAP_VERSION)
 *     12  u32 header bytes       16  u64 model identity (config numbers, layout,
 *                                    tensor names/dtypes/shapes, weight file sizes)
 *     24  char[16] backend state layout ("cpu-f32-1", "cuda-bf16-1"), NUL-padded
 *     40  u32 tokens n           44  u32 logits (= vocab)   48  u32 has logits (0/1)
 *     52  u32 caller's flags     56  u64 state payload bytes
 *     64  u64 file bytes         72  24 reserved bytes, zero
 *   tokens   i32[n]
 *   logits   f32[vocab]  (after the last token)
 *   state    the backend's payload (backend.h)
 *   checksum u64 XXH64 (seed 0) of every byte before it
 *
 * A reader rejects, with one line naming the file and what is wrong, any
 * snapshot whose header disagrees with this engine (magic, version, model,
 * backend layout, sizes), whose length is not the header's, or whose
 * checksum fails; then the session is left empty (position 0), never half
 * loaded.  Snapshots are not portable across backends.
 * ------------------------------------------------------------------------- */

#define LILAC_SNAP_VERSION 1
#define LILAC_SNAP_HEADER 96

/* Byte streams: move n bytes to a sink or from a source; nonzero (with e
 * filled) stops the transfer. */
typedef lilac_status (*lilac_write_fn)(void *ctx, const void *p, size_t n, lilac_error *e);
typedef lilac_status (*lilac_read_fn)(void *ctx, void *p, size_t n, lilac_error *e);

/* What a snapshot's header says (lilac_snapshot_peek_file). */
typedef struct {
    int n_tokens;
    uint32_t flags;
    uint64_t file_bytes;
} lilac_snap_info;

/* The model identity snapshots carry. */
uint64_t lilac_engine_model_id(const lilac_engine *g);
/* Bytes of the snapshot file of a session holding n tokens. */
uint64_t lilac_snapshot_bytes(const lilac_engine *g, int n);
/* Writes s (which must hold at least one token) as a snapshot through w;
 * flags are the caller's (returned by load). */
lilac_status lilac_session_save(const lilac_session *s, uint32_t flags, lilac_write_fn w, void *ctx, lilac_error *e);
/* Reads a snapshot through r into s (which it replaces); `where` names the
 * source in errors.  On failure s is empty. */
lilac_status lilac_session_load(lilac_session *s, lilac_read_fn r, void *ctx, const char *where, uint32_t *flags,
                                lilac_error *e);
/* The same on files.  save_file writes PATH.tmp, syncs it and renames it
 * over PATH, so PATH is never a half-written snapshot. */
lilac_status lilac_session_save_file(const lilac_session *s, const char *path, uint32_t flags, lilac_error *e);
lilac_status lilac_session_load_file(lilac_session *s, const char *path, uint32_t *flags, lilac_error *e);
/* Writes a snapshot image (the n bytes lilac_session_save produced, kept in
 * memory) to PATH the same way; loading it checks it as any file. */
lilac_status lilac_snapshot_write_file(const void *img, size_t n, const char *path, lilac_error *e);
/* Checks PATH's header and length against g and reads its tokens (*tokens
 * malloc'd, freed by the caller), without reading the state or the checksum
 * (load_file checks those). */
lilac_status lilac_snapshot_peek_file(const lilac_engine *g, const char *path, lilac_snap_info *info, int32_t **tokens,
                                      lilac_error *e);

/* ---------------------------------------------------------------------------
 * Generation: sampling parameters, per-token callback, finish reasons.
 * ------------------------------------------------------------------------- */

#define LILAC_MAX_TOP_LOGPROBS 20
#define LILAC_MAX_THINK_END 8 /* tokens in a reasoning budget's closing sequence */

typedef struct {
    float temperature;        /* 0 = greedy (argmax, ties to the lowest id) */
    int top_k;                /* keep the k most likely tokens; 0 = off */
    float top_p;              /* nucleus mass in (0, 1]; 1 = off */
    float min_p;              /* drop tokens below min_p * p(best); 0 = off */
    float presence_penalty;   /* OpenAI: -= presence_penalty once per generated token id */
    float frequency_penalty;  /* OpenAI: -= frequency_penalty * count in the generated text */
    float repetition_penalty; /* HF/vLLM over prompt + generated ids: logit/r if > 0 else logit*r; 1 = off */
    uint64_t seed;            /* the random stream; equal seeds give equal samples */
} lilac_sampling;

/* Greedy, no penalties (temperature 0, top_p 1, repetition_penalty 1). */
lilac_sampling lilac_sampling_greedy(void);

/* Constrained decoding: the caller's automaton decides which ids may come
 * next (src/text/grammar.h builds one from a grammar).  Before each sampled
 * token the engine calls mask(), which writes the allowed ids as bits (bit
 * i % 32 of word i / 32, (vocab + 31) / 32 words) and returns one of
 * LILAC_MASK_*; disallowed logits become -inf before penalties, temperature
 * and the top-k/top-p/min-p cut (greedy and sampled alike; logprobs stay the
 * model's).  accept() is told every generated id, sampled or fed by the
 * engine (the reasoning budget's closing tokens), in order; nonzero means
 * the id was not allowed, and generation fails.  Where the mask is applied:
 * the CPU backend in the host loop (sample.c); the CUDA backend in its
 * device sampler, the mask uploaded per token while the layers run
 * (LILAC_MASK=host in the environment forces the host loop there too). */
enum {
    LILAC_MASK_ERROR = -1, /* the constraint failed: generation fails */
    LILAC_MASK_NONE = 0,   /* nothing may follow: generation ends (LILAC_FINISH_EOS) */
    LILAC_MASK_SOME = 1,   /* bits says which ids */
    LILAC_MASK_ALL = 2,    /* any id (bits untouched) */
};

typedef struct {
    int (*mask)(void *ctx, uint32_t *bits);
    int (*accept)(void *ctx, int32_t id);
    void *ctx;
} lilac_constraint;

typedef struct {
    int max_tokens;           /* at most this many new tokens */
    lilac_sampling sampling;
    int stop_at_eos;          /* stop after generating an end-of-sequence id */
    const int32_t *stop_ids;  /* extra ids that end generation (like eos) */
    int n_stop_ids;
    int top_logprobs;         /* 0..LILAC_MAX_TOP_LOGPROBS alternatives per token */
    int logprobs;             /* fill lilac_token_info.logprob (and the alternatives) */
    /* Reasoning budget, for a prompt that ends inside an open think block.
     * Off unless n_think_end > 0.  Then, once think_budget (>= 0) tokens have
     * been generated without think_close (the id that ends the reasoning,
     * </think>) among them, the engine feeds the closing sequence
     * think_end[0..n_think_end) itself ("\n</think>\n\n"), hands those
     * tokens to the callback as generated ones (lilac_token_info.forced),
     * and generation goes on with the answer.  They count in max_tokens.  A
     * model that writes think_close itself within the budget is left alone. */
    int think_budget;
    int32_t think_close;
    const int32_t *think_end;
    int n_think_end;
    /* The last n_prior_gen tokens of the session belong to the answer being
     * generated (a generation resumed after the engine fed tokens itself):
     * the frequency and presence penalties count them as generated text.
     * 0 for a new generation. */
    int n_prior_gen;
    const lilac_constraint *constraint; /* NULL: unconstrained */
} lilac_gen_params;

typedef struct {
    int32_t id;
    int index;                /* 0 for the first generated token */
    float logprob;            /* log p(id) under the model (raw logits), when logprobs */
    int n_top;
    int32_t top_ids[LILAC_MAX_TOP_LOGPROBS];
    float top_logprobs[LILAC_MAX_TOP_LOGPROBS];
    int forced;               /* fed by the engine (the reasoning budget's closing
                                 sequence), not sampled; logprob is still the model's */
} lilac_token_info;

typedef enum {
    LILAC_FINISH_LENGTH,      /* max_tokens reached, or the session is full */
    LILAC_FINISH_EOS,         /* an end-of-sequence or stop id was generated */
    LILAC_FINISH_CALLBACK,    /* the callback asked to stop (stop string, cancel) */
} lilac_finish;

/* Called once per generated token, in order; return nonzero to stop. */
typedef int (*lilac_token_cb)(void *ctx, const lilac_token_info *t);

/* Generates after the session's tokens (the prompt must have been fed).
 * Every generated token but the last is fed back, so on return the session
 * holds prompt + generated[0..n-1) and can continue or be snapshotted
 * (forced tokens of the reasoning budget count as generated).
 * *n_out receives the number of tokens generated, *why the reason it ended.
 * cb may be NULL. */
lilac_status lilac_session_generate(lilac_session *s, const lilac_gen_params *p, lilac_token_cb cb, void *ctx, int *n_out,
                                    lilac_finish *why, lilac_error *e);

/* ---------------------------------------------------------------------------
 * Benchmarks (device backends).
 * ------------------------------------------------------------------------- */

#define LILAC_PROFILE_CLASSES 8

typedef struct {
    double copy_gbps;       /* measured device copy bandwidth, bytes read + written per second / 1e9 */
    double step_ms;         /* one decode step, replayed as a graph (median) */
    double bytes_per_step;  /* bytes a decode step must move: weights, KV, recurrent state */
    int kernels;            /* kernels in one decode step */
    int nclass;
    const char *class_name[LILAC_PROFILE_CLASSES];
    double class_ms[LILAC_PROFILE_CLASSES]; /* per kernel class, kernels timed one by one */
} lilac_profile;

/* Makes s hold n positions of random KV entries and recurrent state, as if a
 * prompt of n tokens had been read (decode cost does not depend on the
 * values), then feeds one token so the session has logits.  Benchmarks only. */
lilac_status lilac_session_fill_random(lilac_session *s, int n, uint64_t seed, lilac_error *e);
/* Times one decode step of s by kernel class (advances s by a few tokens). */
lilac_status lilac_session_profile(lilac_session *s, lilac_profile *p, lilac_error *e);

/* While on, the backend times every prefill chunk's kernels by class;
 * turning it off fills p (if not NULL) with the sums since it was turned on
 * (step_ms, copy_gbps and bytes_per_step are 0).  Benchmarks only. */
lilac_status lilac_engine_prefill_profile(lilac_engine *g, int on, lilac_profile *p, lilac_error *e);

/* Greedy generation of up to n tokens into out (a convenience over
 * lilac_session_generate). */
lilac_status lilac_session_generate_greedy(lilac_session *s, int n, int stop_at_eos, int32_t *out, int *n_out,
                                           lilac_error *e);

#endif
