/* cuda_internal.h — host-side structures of the CUDA backend.
 *
 * Weights are uploaded once, in MLX's packed layout (codes, then bf16 scales
 * and biases per 64-input group), with the projections that share an input
 * fused by rows at load: GDN qkv|z|b|a, attention q|k|v, router|shared gate,
 * shared-expert gate|up.  The small f32 parameters follow them.  Activations
 * live in scratch buffers sized for one prefill chunk; a state owns its KV
 * cache, DeltaNet state, control block and decode graph. */
#ifndef LILAC_CUDA_INTERNAL_H
#define LILAC_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"

#define LC_CHECK(expr)                                                                                        \
    do {                                                                                                      \
        cudaError_t err_ = (expr);                                                                            \
        if (err_ != cudaSuccess)                                                                              \
            return lilac_fail(e, LILAC_EBACKEND, "CUDA: %s failed: %s (%s:%d)", #expr, cudaGetErrorString(err_), \
                              __FILE__, __LINE__);                                                            \
    } while (0)

#define LC_NSPLIT 128  /* key ranges per kv head in the generic decode attention (lc_attn) */
#define LC_LOGIT_ROWS 64 /* rows of logits computed per lm_head GEMM in all-logits mode */
#define LC_MAX_STOP 16

/* Kernel classes of the decode-step profile, and of the prefill profile. */
enum { PROF_START = -1, PROF_NORM, PROF_GEMV, PROF_MOE, PROF_GDN, PROF_ATTN, PROF_HEAD, PROF_NCLASS };
enum { PP_EXPERT, PP_DENSE, PP_GDN, PP_ATTN, PP_ROUTE, PP_OTHER, PP_NCLASS };
#define CUDA_PROF_MAX 1024
typedef struct {
    cudaEvent_t ev[CUDA_PROF_MAX];
    int cls[CUDA_PROF_MAX];
    int n;
} cuda_prof;
void cuda_prof_mark(cuda_prof *p, int cls, cudaStream_t st);

typedef struct {
    int is_attn;
    lc_qmat in_proj;   /* GDN: [2Kd + 2Vd + 2Hv] rows q|k|v|z|b|a;  attention: [H*2hd + 2*Hkv*hd] q|gate..|k|v */
    lc_qmat out_proj;  /* [D, Vd] or [D, H*hd] */
    lc_qmat router;    /* [E + 1, D] 8-bit: router rows, then the shared-expert gate */
    lc_qmat gate, up, down;      /* routed experts, stacked */
    lc_qmat sh_gu;     /* [2 Is, D]: shared gate rows then up rows */
    lc_qmat sh_gate, sh_up;      /* views of sh_gu */
    lc_qmat sh_down;   /* [D, Is] */
    float *input_norm, *post_norm; /* [D] */
    float *q_norm, *k_norm;        /* [hd] */
    lc_gdn_params gdn;             /* dims + device pointers of conv_w, A_log, dt_bias, norm_w */
    lc_attn_params attn;           /* dims + device pointers of the norms and rope table */
} cuda_layer;

struct lilac_backend {
    const lilac_model *m;
    int device;
    char name[384];
    cudaStream_t st;
    int T;             /* max tokens per forward */
    int attn_splits;   /* key ranges per kv head in decode attention: one block per SM */
    cuda_layer *layers;
    lc_qmat embed, lm_head;
    float *final_norm, *rope_inv;
    void **allocs;     /* every device allocation, freed at close */
    int nallocs, capallocs;
    size_t device_bytes;
    lilac_progress_fn progress; /* weight upload progress (may be NULL) */
    void *progress_ctx;
    uint64_t uploaded;          /* weight bytes uploaded so far */

    /* scratch, [T, ...] */
    int32_t *ids;      /* [T] */
    float *h, *xn;     /* [T, D] */
    int ldp;           /* row stride of proj */
    float *proj;       /* [T, ldp] */
    float *mix;        /* [T, max(Vd, H*hd)] GDN scan or attention output */
    float *qbuf;       /* [T, H*hd] */
    float *part;       /* attention partials */
    float *rl;         /* [T, E + 1] router logits */
    int32_t *topi;     /* [T, K] */
    float *topw;       /* [T, K] */
    float *sgate;      /* [T] */
    float *act;        /* [max(T*K, K+1), I] */
    float *eo;         /* [T*K + T, D] expert outputs per slot (shared expert's last); decode: lc_moe_slots' shares */
    float *sgu;        /* [T, 2 Is] */
    float *sact;       /* [T, Is] */
    float *sout;       /* [T, D] */
    lc_moe_sort sort;  /* the SIMT prefill path's routing (LILAC_PREFILL=simt) */
    lc_xpack xp;       /* [T, max(D, mixw)] packed GEMM input (prefill) */
    lc_xpack ap;       /* [T*K + T, I] packed expert activations (prefill; fp16 when f16) */
    lc_xpack xh;       /* [T, D] fp16 pack of the MoE input beside xp's bf16 one (router) when f16 */
    int f16;           /* the sm_90a fp16 GEMMs (prefill/gemm_wgmma.cu) for 4-bit weights */
    lc_moe_route route;/* prefill routing: routed + shared-expert slots */
    float *gdn_scratch;/* chunked DeltaNet prefill (NULL when its kernel does not fit the shapes) */
    size_t gdn_scratch_bytes;
    int prefill_simt;  /* LILAC_PREFILL=simt: the old SIMT prefill, for A/B timing */
    cuda_prof *pprof;  /* prefill profile when on (lilac_engine_prefill_profile) */
    double pp_ms[8];   /* accumulated ms per prefill kernel class */
    int pp_kernels, pp_on;
    float *logits;     /* [LC_LOGIT_ROWS, V] */
    float *amax_part;  /* [1024] */
    unsigned *amax_done;
    unsigned long long *pick_key; /* [2] lc_lm_head_greedy's best key and block count (zero between steps) */
    unsigned *moe_done; /* last-block counter of the fused router */
    int32_t *stop_ids; /* [LC_MAX_STOP] */
    float *host_logits;/* pinned [LC_LOGIT_ROWS, V] */
    int32_t *host_ids; /* pinned [T] */
    lc_sampler samp;   /* device sampler: parameters, penalty counts, scratch, logprob ring */
    uint8_t *host_seen;/* [V] prompt ids as a bitmap, uploaded at a generation's start */
    lc_tokinfo *host_lp; /* pinned [LC_LP_RING] logprobs read back per step */
    /* constrained generation: the allowed ids of the next token ((V + 31) / 32
     * words), made by the host in one of two pinned buffers (the other holds
     * the last one uploaded) and uploaded on st_copy while the layers run */
    uint32_t *mask;      /* device */
    uint32_t *host_mask[2];
    cudaStream_t st_copy;
    cudaEvent_t ev_mask, ev_token; /* mask uploaded; token read back */
    /* state save/load (state_io.c): two staging buffers, made on first use */
    unsigned char *io_stage[2];
    int io_pinned[2];
    cudaEvent_t io_ev[2]; /* the copy into (save) or out of (load) io_stage[i] is done */
};

struct lilac_state {
    int pos, cap;       /* host mirror of ctrl->pos */
    uint16_t **kc, **vc;/* per attention layer: [cap, Hkv, hd] bf16 */
    float **conv;       /* per DeltaNet layer: [2][K-1, C], the buffer in use picked by ctrl->conv_flip */
    float **rec;        /* per DeltaNet layer: [Hv, dk, dv] */
    lc_ctrl *ctrl;      /* device */
    int32_t *out;       /* device ring [cap + 1] of generated ids */
    int32_t *host_out;  /* pinned [cap + 1] */
    lc_ctrl *host_ctrl; /* pinned */
    cudaGraphExec_t graph; /* the decode step, captured on first use */
    int graph_stops;    /* stop-id count the graph was captured with */
    int graph_mode;     /* CUDA_STEP_* flags the graph was captured with */
    /* constrained generation's split step (cuda_capture_split), keyed the same way */
    cudaGraphExec_t graph_feed, graph_pick;
    int feed_stops, feed_mode, pick_stops, pick_mode;
};

/* How a decode step chooses its token: argmax, or the sampler (with the
 * logprob kernels when CUDA_STEP_LOGPROBS).  Part of the graph's key; the
 * sampling parameters are not (they live in device memory). */
enum { CUDA_STEP_ARGMAX = 0, CUDA_STEP_SAMPLE = 1, CUDA_STEP_LOGPROBS = 2 };
/* What a captured graph holds: the whole decode step, or one half of it. */
enum { CUDA_GRAPH_STEP, CUDA_GRAPH_FEED, CUDA_GRAPH_PICK };


/* forward_prefill.c: the decoder layers for T > 1 tokens (ids in device memory) */
lilac_status cuda_enqueue_prefill(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                  lilac_error *e);
/* cuda_forward.c: forward entry, tracing, device generation */
void cuda_ctrace(lilac_backend *b, const char *name, int layer, const float *dev, int rows, int cols, int ld);
/* forward_decode.c: the decoder layers of one decode step (T = 1), the step, its graph */
lilac_status cuda_enqueue_layers(lilac_backend *b, lilac_state *s, const int32_t *d_ids, int T, cuda_prof *prof,
                                 lilac_error *e);
/* The decode step ending in argmax (as benchmarked), or in the given mode. */
lilac_status cuda_enqueue_step(lilac_backend *b, lilac_state *s, int n_stop, cuda_prof *prof, lilac_error *e);
lilac_status cuda_capture_step(lilac_backend *b, lilac_state *s, int n_stop, lilac_error *e);
lilac_status cuda_enqueue_step_mode(lilac_backend *b, lilac_state *s, int n_stop, int mode, cuda_prof *prof, lilac_error *e);
lilac_status cuda_capture_step_mode(lilac_backend *b, lilac_state *s, int n_stop, int mode, lilac_error *e);
/* Constrained generation: the step as feed (layers + lm_head on ctrl->token,
 * pos += 1) and pick (the next token under the mask b->mask) graphs. */
lilac_status cuda_capture_split(lilac_backend *b, lilac_state *s, int n_stop, int mode, lilac_error *e);
lilac_status cuda_forward(lilac_backend *b, lilac_state *s, const int32_t *ids, int n, const lilac_forward_out *out,
                          lilac_error *e);
lilac_status cuda_generate(lilac_backend *b, lilac_state *s, const lilac_gen_params *p, const int32_t *prompt, int n_prompt,
                           const float *logits_in, lilac_token_cb cb, void *ctx, int32_t *out, int *n_gen, int *n_fed,
                           lilac_finish *why, float *logits_out, lilac_error *e);
/* state_io.c: the payload of a state at pos to w, or from r (the caller
 * checks pos against the capacity and resets the state when a load fails) */
lilac_status cuda_state_save_io(lilac_backend *b, const lilac_state *s, lilac_write_fn w, void *ctx, lilac_error *e);
lilac_status cuda_state_load_io(lilac_backend *b, lilac_state *s, int pos, lilac_read_fn r, void *ctx, lilac_error *e);
void cuda_state_io_free(lilac_backend *b);
/* cuda_bench.c */
lilac_status cuda_state_fill_random(lilac_backend *b, lilac_state *s, int n, uint64_t seed, lilac_error *e);
lilac_status cuda_profile(lilac_backend *b, lilac_state *s, lilac_profile *p, lilac_error *e);

#endif
