/* backend.h — the boundary between the engine and a compute backend.
 *
 * A backend runs the model on some device.  The engine (src/engine/) drives it
 * through this small table of functions: bind the weights once, create
 * session states, run a chunk of tokens on a state, copy states (snapshots for
 * the prefix cache), and optionally generate on the device.  Backends are
 * chosen at run time by name; there is no #ifdef for backends anywhere else.
 *
 * A state holds one sequence: the KV cache of every attention layer, the conv
 * window and recurrent matrix of every DeltaNet layer, and its position (the
 * number of tokens it has seen).  Tokens are only ever appended; recurrent
 * state cannot be rewound, so snapshots are whole copies. */
#ifndef LILAC_BACKEND_BACKEND_H
#define LILAC_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lilac.h"
#include "model/model.h"
#include "util/err.h"

typedef struct lilac_backend lilac_backend; /* per implementation */
typedef struct lilac_state lilac_state;     /* per implementation */

typedef struct {
    int threads;   /* CPU worker threads (0 = one per core) */
    int max_chunk; /* most tokens one forward() call will be given */
    lilac_progress_fn progress; /* optional: weight upload, in bytes of model.weight_bytes */
    void *progress_ctx;
} lilac_backend_opts;

/* What forward() writes besides advancing the state.  Any pointer may be NULL. */
typedef struct {
    float *logits;   /* all_logits ? [n, vocab] : [vocab] for the last token */
    int all_logits;
    float *hidden;   /* debug, CPU only: [n_layers + 1, n, hidden] as Hugging Face's
                        output_hidden_states (embedding, residual after each layer
                        but the last, final-normed output of the last) */
} lilac_forward_out;

typedef struct lilac_backend_ops {
    const char *name;
    int default_chunk; /* prefill chunk when the user gives none (0: 512) */
    /* Binds (or uploads) the model, which must outlive the backend. */
    lilac_status (*open)(const lilac_model *m, const lilac_backend_opts *o, lilac_backend **out, lilac_error *e);
    void (*close)(lilac_backend *b);
    /* A state for up to max_ctx tokens, at position 0. */
    lilac_status (*state_new)(lilac_backend *b, int max_ctx, lilac_state **out, lilac_error *e);
    void (*state_free)(lilac_backend *b, lilac_state *s);
    void (*state_reset)(lilac_backend *b, lilac_state *s);
    int (*state_pos)(const lilac_state *s);
    int (*state_capacity)(const lilac_state *s);
    /* dst becomes a copy of src (dst's capacity must hold src's position). */
    lilac_status (*state_copy)(lilac_backend *b, lilac_state *dst, const lilac_state *src, lilac_error *e);
    /* Serialisation (snapshot files, src/engine/snapshot.c).  The payload is
     * the state's contents up to its position, in the backend's own layout,
     * named by state_format (snapshots are not portable across backends):
     *   cpu  "cpu-f32-1":   per attention layer K then V, [pos, Hkv, hd] f32;
     *                       per DeltaNet layer the conv window [K-1, C] f32,
     *                       then the recurrent matrices [Hv, dk, dv] f32.
     *   cuda "cuda-bf16-1": the control block (lc_ctrl: pos, conv_flip, ...);
     *                       per attention layer K then V, [pos, Hkv, hd] bf16;
     *                       per DeltaNet layer both conv buffers [2][K-1, C]
     *                       f32, then the recurrent matrices [Hv, dk, dv] f32.
     * KV rows past pos are never written (they are never read).  state_save
     * hands the payload to w (lilac.h) in pieces, in order; state_payload_bytes(pos) is
     * their total.  state_load reads exactly that many bytes through r into
     * s, which becomes a state at pos (pos <= its capacity); on any failure s
     * is reset to position 0.  The bytes are not validated here: the caller
     * checks a checksum (and resets s when it fails). */
    const char *state_format;
    size_t (*state_payload_bytes)(const lilac_backend *b, int pos);
    lilac_status (*state_save)(lilac_backend *b, const lilac_state *s, lilac_write_fn w, void *ctx, lilac_error *e);
    lilac_status (*state_load)(lilac_backend *b, lilac_state *s, int pos, lilac_read_fn r, void *ctx, lilac_error *e);
    /* Bytes a state of capacity max_ctx occupies. */
    size_t (*state_bytes)(const lilac_backend *b, int max_ctx);
    /* Runs tokens ids[0..n) at positions pos..pos+n-1 (n <= max_chunk) and
     * advances the state. */
    lilac_status (*forward)(lilac_backend *b, lilac_state *s, const int32_t *ids, int n, const lilac_forward_out *out,
                            lilac_error *e);
    /* Optional (NULL when absent): a human-readable description of the device. */
    const char *(*device_name)(const lilac_backend *b);
    /* Optional (NULL when absent): the device's memory in use (by any
     * process) and in all, in bytes; nonzero when it cannot tell. */
    int (*device_memory)(const lilac_backend *b, size_t *used, size_t *total);
    /* Optional (NULL when absent): generation on the device, with no
     * per-token round trip.  logits_in holds the logits after the state's
     * last token (host copy); the first new token is chosen from them.  New
     * tokens go to out[0..*n_gen) and, in order, through cb; the first *n_fed
     * of them were fed to the state (more than the engine strictly needs
     * when the host stopped a device that ran ahead); logits_out receives
     * the logits after the last fed token.  prompt[0..n_prompt) are the
     * state's tokens (the repetition penalty's "seen" ids).  Returns
     * LILAC_EUNSUPPORTED, having done nothing, when p asks for what the
     * device path does not do; the engine then runs its host loop over
     * forward().
     * Constrained decoding (p->constraint set; the engine passes it unless
     * LILAC_MASK=host): the backend calls the constraint exactly as the
     * engine's host loop does — mask() before each token into its own
     * buffer, accept() with each chosen id before the next mask() — and
     * applies the mask as lilac_sampler_pick_masked does (disallowed ids
     * -inf before penalties, temperature and cuts; logprobs from the raw
     * logits).  LILAC_MASK_NONE ends the run (LILAC_FINISH_EOS),
     * LILAC_MASK_ERROR and a refused id fail it (LILAC_EINVAL,
     * "constrained decoding: ..."), LILAC_MASK_ALL is no mask.  A backend
     * that cannot take a constraint returns LILAC_EUNSUPPORTED. */
    lilac_status (*generate)(lilac_backend *b, lilac_state *s, const lilac_gen_params *p, const int32_t *prompt,
                             int n_prompt, const float *logits_in, lilac_token_cb cb, void *ctx, int32_t *out, int *n_gen,
                             int *n_fed, lilac_finish *why, float *logits_out, lilac_error *e);
    /* Optional, benchmarks only: s holds n positions of random KV entries
     * and recurrent state (see lilac_session_fill_random). */
    lilac_status (*state_fill_random)(lilac_backend *b, lilac_state *s, int n, uint64_t seed, lilac_error *e);
    /* Optional, benchmarks only: per-kernel-class timing of a decode step. */
    lilac_status (*profile)(lilac_backend *b, lilac_state *s, lilac_profile *p, lilac_error *e);
    /* Optional, benchmarks only: while on, forward() times the kernels of
     * every prefill chunk by class; turning it off copies the sums since it
     * was turned on into p (when p is not NULL). */
    lilac_status (*prefill_profile)(lilac_backend *b, int on, lilac_profile *p, lilac_error *e);
} lilac_backend_ops;

extern const lilac_backend_ops lilac_cpu_backend;

/* Returns the backend for "cpu", "cuda" or "auto" (CUDA when compiled in and a
 * GPU is present, else CPU), or NULL with an error when it is not available. */
const lilac_backend_ops *lilac_backend_pick(const char *name, lilac_error *e);
/* One line about the GPU this process sees (name, memory, driver), or why none. */
void lilac_backend_describe_gpu(char *out, size_t cap);
/* Comma-separated names of the backends compiled into this binary. */
const char *lilac_backends_compiled(void);

#endif
