/* cuda_ops.h — the CUDA kernels' launch functions (extern "C"), shared by the
 * host code of the CUDA backend (C) and the kernel files (.cu).
 *
 * Conventions:
 *   - every launcher takes the stream last and returns cudaError_t from the
 *     launch (cudaGetLastError), so host code can chain `if (!err) err = ...`;
 *   - weights are MLX affine quantised matrices (4 or 8 bits, group 64)
 *     described by lc_qmat (device pointers);
 *   - activations are fp32, row-major [T, width]; the KV cache is bf16;
 *   - kernels that run inside the decode graph read the position and the
 *     stop flag from the state's lc_ctrl block in device memory, so one
 *     captured graph serves every step. */
#ifndef LILAC_CUDA_OPS_H
#define LILAC_CUDA_OPS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LC_GROUP 64 /* quantisation group (inputs per scale/bias) */

/* n_mat stacked matrices of [rows, cols] (n_mat = 1 for plain linears). */
typedef struct {
    const uint32_t *w; /* [n_mat][rows][cols * bits / 32] codes, lowest bits = first input */
    const uint16_t *s; /* [n_mat][rows][cols / 64] bf16 scales */
    const uint16_t *b; /* [n_mat][rows][cols / 64] bf16 biases */
    int rows, cols, bits, n_mat;
} lc_qmat;
/* Rows [r0, r0 + n) of a plain (n_mat 1) matrix, as a matrix of its own: the
 * views of fused matrices (the shared expert's gate|up, the router's
 * experts | shared-expert gate). */
static inline lc_qmat lc_qmat_rows(const lc_qmat *m, int r0, int n) {
    lc_qmat v = *m;
    v.w += (size_t)r0 * (size_t)(m->cols * m->bits / 32);
    v.s += (size_t)r0 * (size_t)(m->cols / LC_GROUP);
    v.b += (size_t)r0 * (size_t)(m->cols / LC_GROUP);
    v.rows = n;
    return v;
}

/* Per-state control block in device memory (one per session state). */
typedef struct {
    int pos;      /* tokens the state has seen = position of the next token fed */
    int step;     /* tokens generated on the device in the current loop */
    int stop;     /* set when a stop id was generated: later graph replays do nothing */
    int token;    /* the next token to feed (written by argmax / sampling) */
    int max_steps;/* capacity of the output ring */
    int conv_flip;/* which DeltaNet conv buffer holds the current window (toggled per forward) */
    int pad[2];
} lc_ctrl;

/* ---- embedding, norms, elementwise ---------------------------------------- */
/* h[t] = dequantised row ids[t] of E  (ids from device memory; T rows) */
cudaError_t lc_embed(const lc_qmat *E, const int32_t *ids, int T, float *h, const lc_ctrl *ctrl, cudaStream_t st);
/* y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w   (w holds 1 + weight) */
cudaError_t lc_rmsnorm(const float *x, const float *w, float *y, int T, int D, float eps, const lc_ctrl *ctrl,
                       cudaStream_t st);

/* ---- projections ------------------------------------------------------------ */
/* Batch-1 GEMV: y[r] = (residual ? residual[r] : 0) + sum_c W[r, c] x[c] for
 * matrix `mat` of W; rows [0, W->rows).  Supported (bits, cols) are listed by
 * lc_gemv_supported(). */
int lc_gemv_supported(int bits, int cols);
cudaError_t lc_gemv(const lc_qmat *W, int mat, const float *x, float *y, const float *residual, const lc_ctrl *ctrl,
                    cudaStream_t st);
/* The same on RMSNorm(h) * norm_w, normalised inside the kernel (no separate
 * norm launch); block 0 also writes the normalised vector to xn_out if set. */
cudaError_t lc_gemv_rms(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *y, float *xn_out,
                        const lc_ctrl *ctrl, cudaStream_t st);
/* The decode step's lm_head and greedy pick in one kernel: logits = the
 * lc_gemv_rms of W on h (the same floats), then lc_argmax's choice without
 * a mask (ties to the lowest id, NaN never chosen) written as lc_argmax
 * writes it.  key: two device words, zero before the first call (each call
 * leaves them zero).  ring: lm_head.cu's ring form (one block an SM, the
 * same logits; LILAC_DECODE_TRY's "hring"), else one block per 64 rows.
 * lc_lm_head_greedy_ok: whether W has the shape it takes (else
 * cudaErrorNotSupported and nothing launched); lc_lm_head_ring_on: whether
 * the decode step's lm_head runs the ring form (try_bits, LILAC_DECODE_TRY's
 * bits, hold "hring" and the form fits W).  lc_lm_head: the logits alone,
 * the ring form where lc_lm_head_ring_on, else lc_gemv_rms (the same floats). */
int lc_lm_head_greedy_ok(const lc_qmat *W);
int lc_lm_head_ring_on(const lc_qmat *W, int try_bits);
int lc_gemv_tq_head(const lc_qmat *W); /* gemv.cu: lc_gemv_rms runs the tq kernel lc_lm_head_greedy shares for W */
cudaError_t lc_lm_head_greedy(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits,
                              unsigned long long *key, int32_t *out, const int32_t *stop_ids, int n_stop, int advance_pos,
                              int ring, lc_ctrl *ctrl, cudaStream_t st);
cudaError_t lc_lm_head(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits, const lc_ctrl *ctrl,
                       cudaStream_t st);
/* Which kernels lc_gemv, lc_gemv_rms, lc_moe_gate_up and lc_moe_down run:
 * LC_GEMV_AUTO (default) the integer tensor-core ones of decode/gemv_tq.cuh,
 * the streaming / persistent ones of decode/gemv_stream.cuh, each at the
 * 4-bit shapes where it was measured fastest, the qdot kernels elsewhere;
 * LC_GEMV_STREAM (LILAC_GEMV=stream) the same without gemv_tq.cuh;
 * LC_GEMV_TQ (LILAC_GEMV=tq) the default without gemv_ring.cuh;
 * LC_GEMV_ENGINE (LILAC_GEMV=engine) the qdot kernels everywhere (the
 * variable is read once).  lc_gemv_set_kernels overrides the environment
 * (the workshops' A/B); the choice is made at launch, so a captured graph
 * keeps the kernels it was captured with. */
enum { LC_GEMV_AUTO = 0, LC_GEMV_ENGINE = 1, LC_GEMV_STREAM = 2, LC_GEMV_TQ = 3 };
int lc_gemv_kernels(void);
void lc_gemv_set_kernels(int kernels);
/* Decode kernel variants (docs/PERFORMANCE.md): LILAC_DECODE_TRY is a comma
 * list of the names below, "all", or "none"; unset or empty = the default
 * set, LC_TRY_DEFAULT.  Read at each call (a captured graph keeps what it
 * was captured with; tests switch it).  Each variant gives the same floats
 * as the form without it.  A candidate written before a GPU can judge it
 * lands here off by default; one that moves the step and passes the
 * sanitizers becomes the only form (xstage, combine, gdnstore and gdnxchg
 * did, 2026-12-06) or, where a tool needs the other form, the default; one
 * that loses goes. */
enum {
    LC_TRY_XCHG = 1,  /* "xchg": lc_moe_slots' two exchanges with st.async on mbarriers */
    LC_TRY_C8 = 2,    /* "c8": lc_moe_slots in clusters of 8 blocks of 16 warps, one block an SM (not 16 of 8) */
    LC_TRY_TOPK1 = 4, /* "topk1": lc_moe_slots' top-K by one warp a block, then a block barrier (not by every warp) */
    LC_TRY_PICK = 8,  /* "pick": the greedy step's lm_head picks the id itself (lc_lm_head_greedy), no argmax kernel */
    LC_TRY_TK9 = 16,  /* "tk9": lc_moe_slots' top-K rounds of one reduction each (moe_route.cuh's pick_packed) */
    /* "hring": the lm_head as lm_head.cu's ring form, one block an SM streaming its row blocks (the same logits; with
     * pick it picks).  H100, 2026-12-07: decode +0.0-0.3% at 4K over four calls, the lm_head adding 101.3 instead of
     * 105.6 us inside the graph (docs/PERFORMANCE.md).  "pickr" (a one-thread emit
     * kernel after 3,880 blocks that only take the maximum) went after its first run: 756.2 against 762.0 */
    LC_TRY_HRING = 32,
    /* "hearly": with hring, the last layer's slots' sum lets the lm_head launch before it waits, as every other
     * layer's sum lets the next in_proj (the ring's first tasks stream beside the MoE kernel; tq_gemv's lm_head
     * launched that early had lost, H200: 104.8 against 82.4 us).  H100, 2026-12-07, one call: hring + hearly 773.6 /
     * 773.5, hring 771.1 / 771.6, neither 769.4 / 768.9 tokens/s at 4K (docs/PERFORMANCE.md) */
    LC_TRY_HEARLY = 64,
    /* "eslot" (with topk1): lc_moe_slots' block of slot j requests its expert's codes once the top-K's ranks 0 .. j
     * are known, warp 0 taking the other ranks and the weights while they travel (moe_route.cuh's topk_split8, the
     * exact rounds: it replaces tk9 there).  Written 2026-12-07, again 2026-12-08 (the branch was lost); not yet run */
    LC_TRY_ESLOT = 128,
    LC_TRY_ALL = 255,
    /* "none" runs lc_moe_slots' first form (clusters of 16, every warp routing, cluster barriers), kept until an H200
     * has judged c8 and topk1 (2026-12-06: H100s only); synccheck passes the default (st.async in clusters of 8) and
     * none, and faults on xchg in clusters of 16 (bench/kernels/st_async_test).  pick and tk9 joined the default on
     * 2026-12-07 (H100: decode 763.0 against 750.2 tokens/s at 4K; docs/PERFORMANCE.md), hring and hearly the same
     * day; without them the tests keep the argmax kernel, tq_gemv's lm_head and the exact top-K rounds to compare with */
    LC_TRY_DEFAULT = LC_TRY_XCHG | LC_TRY_C8 | LC_TRY_TOPK1 | LC_TRY_PICK | LC_TRY_TK9 | LC_TRY_HRING | LC_TRY_HEARLY
};
int lc_decode_try(void);
int lc_decode_try_default(void); /* LC_TRY_DEFAULT, for the tests */
/* The launchers note the variants they launched (lc_decode_try_note); the
 * tests ask which ran since the last reset (lc_decode_try_used(1) resets):
 * a variant that does not apply falls back to the default silently. */
void lc_decode_try_note(int bits);
int lc_decode_try_used(int reset);
/* Tiled GEMM for T tokens: Y[t, r] (+)= sum_c X[t, c] W[r, c]; ldx/ldy are row
 * strides; accumulate adds into Y. */
cudaError_t lc_gemm(const lc_qmat *W, int mat, const float *X, int ldx, int T, float *Y, int ldy, int accumulate,
                    cudaStream_t st);

/* ---- prefill GEMMs on tensor cores (prefill/) -------------------------------------
 * Activations that feed a tensor-core GEMM are "packed" once: each row of
 * fp32 x [T, C] becomes two bf16 rows hi = bf16(x), lo = bf16(x - hi) (so
 * hi + lo carries ~16 bits), with every 16 columns stored in the order
 * 0,4,1,5,2,6,3,7, 8,12,9,13,10,14,11,15 (the order in which an mma
 * fragment takes MLX's 4-bit codes), plus gs [T, C/64] = the fp32 sum of x
 * over each 64-column group (for the affine bias: sum (s q + b) x =
 * s sum q x + b sum x, with q exact in bf16). */
typedef struct {
    uint16_t *hi, *lo; /* [rows, ld] bf16, permuted in 16s */
    float *gs;         /* [rows, ld / 64] */
    int ld;            /* row stride in elements (a multiple of 64) */
    uint16_t *lo2;     /* optional [rows, ld]: bf16(x - hi - lo), so hi + lo + lo2 = x exactly */
    int f16;           /* hi, lo hold fp16 hi + lo of x * xs instead (the sm_90a kernels; no lo2) */
    float xs;          /* f16: a power of two keeping x * xs in fp16's range (0 means 1); gs holds sums of x */
    uint16_t *sh, *sl; /* f16: [rows][64] fp16 hi, lo of gs / 16 (ld <= 4096), the bias GEMM's operand */
} lc_xpack;
/* p[t] = pack(x[t] (* rsqrt(mean(x[t]^2) + eps) * norm_w when norm_w)) for
 * t < T, columns [0, C) (C a multiple of 64); x has row stride ldx. */
cudaError_t lc_pack(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                    cudaStream_t st);
/* The same rows packed into p and q in one pass (e.g. bf16 and fp16). */
cudaError_t lc_pack2(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                     const lc_xpack *q, cudaStream_t st);
/* lc_pack (into p, and q when not NULL) plus y[t * ldy] = the fp32 dot of
 * the normalised row t with row 0 of g (4- or 8-bit, g->cols == C). */
cudaError_t lc_pack_dot(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                        const lc_xpack *q, const lc_qmat *g, float *y, int ldy, cudaStream_t st);
/* Y[t, r] (+)= sum_c X[t, c] W[r, c] on tensor cores, X packed (lc_pack);
 * W 4- or 8-bit, cols a multiple of 64 (lc_qgemm_supported). */
int lc_qgemm_supported(const lc_qmat *W);
cudaError_t lc_qgemm(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, int accumulate, cudaStream_t st);
/* The same with all three planes (X->lo2 set; 8-bit W): x exactly, so only
 * the fp32 summation order differs from the reference.  For the router,
 * whose top-8 can hinge on logits a few 1e-7 apart. */
cudaError_t lc_qgemm_exact(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, cudaStream_t st);
/* Routing for a grouped MoE pass: the T*K (token, expert) slots grouped by
 * expert, then T slots of the shared expert (expert E, slots T*K + t), and
 * the list of work items of at most LC_MOE_TILE slots of one expert. */
#define LC_MOE_TILE 64
typedef struct {
    int32_t *count;    /* [E + 1] */
    int32_t *offset;   /* [E + 2] first slot of each expert */
    int32_t *cursor;   /* [E + 1] */
    int32_t *slot_tok; /* [T*K + T] token of sorted slot p */
    int32_t *slot_of;  /* [T*K] sorted slot of (t, k) */
    int32_t *tiles;    /* [T*K/LC_MOE_TILE + T/LC_MOE_TILE + E + 2] packed (expert << 20 | first slot) */
    int32_t *ntiles;   /* [1] */
    int tile;          /* slots per work item: LC_MOE_TILE (0) or 128 (lc_moe_h_tile) */
} lc_moe_route;
cudaError_t lc_moe_route_sort(const int32_t *ids, int T, int E, int K, const lc_moe_route *r, cudaStream_t st);
/* act[p] = pack(silu(gate_e . x[tok(p)]) * (up_e . x[tok(p)])) for every
 * slot p, with (gate, up) the shared expert's for e = E; act is packed
 * (lc_xpack, ld = I). */
cudaError_t lc_moe_mma_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                               const lc_moe_route *r, int T, int K, const lc_xpack *x, const lc_xpack *act,
                               cudaStream_t st);
/* eo[p, d] = down_e(p)[d] . act[p] (sh_down for the shared slots) */
cudaError_t lc_moe_mma_down(const lc_qmat *down, const lc_qmat *sh_down, const lc_moe_route *r, int T, int K,
                            const lc_xpack *act, float *eo, cudaStream_t st);
/* h[t] += sum_k w[t,k] eo[slot_of(t,k)] + sgate[t] eo[T*K + t] */
cudaError_t lc_moe_route_combine(const float *eo, const lc_moe_route *r, const float *w, const float *sgate, int T, int K,
                                 int D, float *h, cudaStream_t st);

/* The sm_90a GEMMs on fp16 packs (prefill/gemm_wgmma.cu): 4-bit W only,
 * cols a multiple of 128.  lc_qgemm_h_check sets *ok when W's scales fit
 * the fp16 path (|s| < 32); it synchronises st (call it at load time). */
int lc_qgemm_h_supported(const lc_qmat *W);
cudaError_t lc_qgemm_h_check(const lc_qmat *W, int *ok, cudaStream_t st);
cudaError_t lc_qgemm_h(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, int accumulate, cudaStream_t st);
/* The work-item width (lc_moe_route.tile) the fp16 expert kernels take. */
int lc_moe_h_tile(void);
cudaError_t lc_moe_h_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                             const lc_moe_route *r, int T, int K, const lc_xpack *x, const lc_xpack *act, cudaStream_t st);
cudaError_t lc_moe_h_down(const lc_qmat *down, const lc_qmat *sh_down, const lc_moe_route *r, int T, int K,
                          const lc_xpack *act, float *eo, cudaStream_t st);

/* ---- Gated DeltaNet ----------------------------------------------------------- */
typedef struct {
    int Hk, Hv, dk, dv, K;   /* key heads, value heads, head dims, conv taps */
    float eps;               /* rms_norm_eps of the gated norm */
    const float *conv_w;     /* [C, K] */
    const float *A_log;      /* [Hv] */
    const float *dt_bias;    /* [Hv] */
    const float *norm_w;     /* [dv] */
} lc_gdn_params;
/* The DeltaNet mixer for T tokens on proj [T, ldp] (= q | k | v | z | b | a,
 * unchanged): causal conv + SiLU of the channels each value head reads
 * (window in conv_state [2][K-1, C], double-buffered by ctrl->conv_flip), q
 * and k l2-normalised (q also scaled by 1/sqrt(dk)), beta = sigmoid(b),
 * decay = exp(-exp(A_log) softplus(a + dt_bias)), the delta rule on state
 * [Hv, dk, dv] (fp32), and the gated RMSNorm; writes out [T, Hv*dv]. */
cudaError_t lc_gdn(const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state, float *state, float *out,
                   const lc_ctrl *ctrl, cudaStream_t st);
/* lc_gdn's form for p and T: 0 = a block per value head, 2, 4 or 8 = a value
 * head split over a cluster of that many blocks (decode/gdn_step.cu: T <= 64 on
 * sm_90, dk = dv = 128, K = 4; clusters of 2 by default, LILAC_GDN_STEP=block |
 * split4 | split8 for the others).  lc_gdn_step_force(form) overrides it (0, 2,
 * 4, 8; anything else = back to the default): the workshops. */
int lc_gdn_step_form(const lc_gdn_params *p, int T);
void lc_gdn_step_force(int form);
/* Prefill form of lc_gdn (prefill/gdn_chunk.cu): the same inputs, outputs
 * and state semantics, computed in chunks of 64 tokens with the WY/UT
 * transform on tensor cores (passes of at most 1,024 tokens).  Supported
 * for K = 4, dk = dv = 128, Hv = 2 Hk on sm_90 (lc_gdn_prefill_supported);
 * scratch: lc_gdn_prefill_scratch(p, T) bytes, 16-byte aligned. */
int lc_gdn_prefill_supported(const lc_gdn_params *p);
size_t lc_gdn_prefill_scratch(const lc_gdn_params *p, int T);
cudaError_t lc_gdn_prefill(const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state, float *state,
                           float *out, float *scratch, size_t scratch_bytes, const lc_ctrl *ctrl, cudaStream_t st);
int lc_gdn_prefill_max_clusters(void); /* diagnostic: recurrence clusters co-resident on this GPU (one wave needs Hv) */

/* ---- gated attention ------------------------------------------------------------ */
typedef struct {
    int H, Hkv, hd, rd;      /* query heads, kv heads, head dim, rotary dim */
    float eps;
    const float *q_norm, *k_norm; /* [hd], 1 + w */
    const float *rope_inv;   /* [rd/2] inverse frequencies */
    int cap;                 /* KV capacity (positions) */
} lc_attn_params;
/* proj [T, ldp] = q|gate per head (H*2*hd) | k (Hkv*hd) | v (Hkv*hd): norms q
 * and k, applies RoPE at positions ctrl->pos + t, writes q to qbuf [T, H, hd]
 * and k, v to the caches [cap, Hkv, hd] (bf16). */
cudaError_t lc_attn_prep(const lc_attn_params *p, const float *proj, int ldp, int T, float *qbuf, uint16_t *kc,
                         uint16_t *vc, const lc_ctrl *ctrl, cudaStream_t st);
/* Causal attention of T queries (positions ctrl->pos + t) over the cache,
 * split into nsplit key ranges per (token, kv head); partials go to part
 * ([T, Hkv, nsplit, r, hd + 2]) and lc_attn_combine merges them, applies the
 * sigmoid gate from proj and writes out [T, H*hd].  chunk = 0 merges all
 * nsplit ranges; chunk > 0 (decode) only those lc_attn_decode filled. */
cudaError_t lc_attn(const lc_attn_params *p, const float *qbuf, const uint16_t *kc, const uint16_t *vc, int T,
                    int nsplit, float *part, const lc_ctrl *ctrl, cudaStream_t st);
cudaError_t lc_attn_combine(const lc_attn_params *p, const float *part, int T, int nsplit, int chunk, const float *proj,
                            int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st);
/* Decode (T = 1) in one launch instead of prep + lc_attn: q/k norms, RoPE and
 * the KV append at ctrl->pos, then attention over the cache on tensor cores,
 * the n = pos + 1 keys split over at most nsplit ranges per kv head in whole
 * chunks of LC_ATTN_CHUNK keys (short contexts use fewer).  Then
 * lc_attn_combine(..., nsplit, LC_ATTN_CHUNK, ...).  Needs H = 8 Hkv and hd
 * in {32, 64, 128, 256} (lc_attn_decode_supported). */
#define LC_ATTN_CHUNK 64
int lc_attn_decode_supported(const lc_attn_params *p);
cudaError_t lc_attn_decode(const lc_attn_params *p, const float *proj, uint16_t *kc, uint16_t *vc, int nsplit, float *part,
                           const lc_ctrl *ctrl, cudaStream_t st);

/* Prefill (T >= 1 tokens at positions ctrl->pos .. ctrl->pos+T-1; prefill/
 * attention_prefill.cu): q/k RMSNorm, partial RoPE and the KV append (as
 * lc_attn_prep, the same cache bytes), then causal GQA attention of the T
 * queries over the cache [0, pos + T) on tensor cores (Q and P split hi +
 * lo), then the sigmoid output gate (as lc_attn_combine): out [T, H*hd]
 * fp32.  qbuf [T, H, hd] fp32 is scratch (bf16 q hi, then lo).  Needs
 * H = 8 Hkv and hd = 256 (lc_attn_prefill_supported). */
int lc_attn_prefill_supported(const lc_attn_params *p);
cudaError_t lc_attn_prefill(const lc_attn_params *p, const float *proj, int ldp, int T, uint16_t *kc, uint16_t *vc,
                            float *qbuf, float *out, const lc_ctrl *ctrl, cudaStream_t st);
/* The attention kernel of lc_attn_prefill on Hopper wgmma (prefill/
 * attention_prefill_wgmma.cu; LILAC_ATTN_PREFILL=fa3 picks it): qb is the
 * prep's bf16 q hi [T, H, hd] then lo; pingpong orders the two consumer
 * warpgroups' GEMMs.  Needs sm_90 (lc_attn_prefill_wgmma_supported). */
int lc_attn_prefill_wgmma_supported(const lc_attn_params *p);
cudaError_t lc_attn_prefill_wgmma(const lc_attn_params *p, const uint16_t *qb, int T, const uint16_t *kc, const uint16_t *vc,
                                  const float *proj, int ldp, float *out, const lc_ctrl *ctrl, int pingpong,
                                  cudaStream_t st);

/* ---- MoE ------------------------------------------------------------------------ */
/* logits [T, E+1] (router | shared gate) -> top-K ids and renormalised
 * weights [T, K], and sgate[t] = sigmoid(shared gate logit). */
cudaError_t lc_moe_topk(const float *logits, int T, int E, int K, int32_t *ids, float *w, float *sgate,
                        const lc_ctrl *ctrl, cudaStream_t st);
/* Decode (T = 1), one launch: xn = RMSNorm(h) * norm_w; logits [E+1] =
 * R . xn (router rows, then the shared-expert gate row); then, in the last
 * block, top-K ids/weights and sgate as lc_moe_topk.  done: a zeroed counter. */
cudaError_t lc_moe_router(const lc_qmat *R, const float *h, const float *norm_w, float eps, float *xn, float *logits,
                          int K, int32_t *ids, float *w, float *sgate, unsigned *done, const lc_ctrl *ctrl,
                          cudaStream_t st);
/* Decode (T = 1): act[j, i] = silu(gate_e . x) * (up_e . x) for the K routed
 * experts (e = ids[j]) and, at j = K, the shared expert (sh_gate, sh_up). */
cudaError_t lc_moe_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                           const int32_t *ids, int K, const float *x, float *act, const lc_ctrl *ctrl, cudaStream_t st);
/* Decode: h[d] += sum_j w[j] down_{ids[j]}[d] . act[j] + sgate * sh_down[d] . act[K] */
cudaError_t lc_moe_down(const lc_qmat *down, const lc_qmat *sh_down, const int32_t *ids, const float *w,
                        const float *sgate, int K, const float *act, float *h, const lc_ctrl *ctrl, cudaStream_t st);
/* Decode, the same three steps as one kernel (decode/moe_slots.cu: a
 * cluster per expert slot) at the model's shapes only (8-bit router of 257
 * rows over 2048, 4-bit experts 512 x 2048, K = 8; lc_moe_slots_ok says,
 * and LILAC_MOE=split turns it off): P [K + 1, 2048] gets each slot's
 * weighted output, ids / w / sgate the routing (traces); then
 * lc_moe_slots_combine: h += sum_j P[j] in slot order (early: its successor
 * may launch before it waits, for one that reads only weights before). */
int lc_moe_slots_ok(const lc_qmat *R, const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                    const lc_qmat *down, const lc_qmat *sh_down, int K);
cudaError_t lc_moe_slots(const lc_qmat *R, const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                         const lc_qmat *down, const lc_qmat *sh_down, float *h, const float *norm_w, float eps, float *P,
                         int32_t *ids, float *w, float *sgate, const lc_ctrl *ctrl, cudaStream_t st);
cudaError_t lc_moe_slots_combine(const float *P, float *h, int early, const lc_ctrl *ctrl, cudaStream_t st);
/* Prefill: groups the T*K (token, expert) slots by expert. */
typedef struct {
    int32_t *count;    /* [E] */
    int32_t *offset;   /* [E + 1] */
    int32_t *cursor;   /* [E] */
    int32_t *slot_tok; /* [T*K] token of sorted slot p */
    int32_t *slot_of;  /* [T*K] sorted slot of (t, k) */
    int32_t *tiles;    /* [T*K/16 + E] packed (expert, first slot) work items */
    int32_t *ntiles;   /* [1] */
} lc_moe_sort;
cudaError_t lc_moe_sort_slots(const int32_t *ids, int T, int E, int K, const lc_moe_sort *s, cudaStream_t st);
/* act[p, i] = silu(gate . x[tok(p)]) * (up . x[tok(p)]) for every sorted slot p */
cudaError_t lc_moe_grouped_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_moe_sort *s, int T, int K,
                                   const float *x, float *act, cudaStream_t st);
/* eo[p, d] = down_{e(p)}[d] . act[p] */
cudaError_t lc_moe_grouped_down(const lc_qmat *down, const lc_moe_sort *s, int T, int K, const float *act, float *eo,
                                cudaStream_t st);
/* h[t] += sum_k w[t,k] eo[slot_of(t,k)] + sgate[t] * shared[t] */
cudaError_t lc_moe_combine(const float *eo, const lc_moe_sort *s, const float *w, const float *sgate, const float *shared,
                           int T, int K, int D, float *h, cudaStream_t st);
/* y[t, i] = silu(gu[t, i]) * gu[t, I + i]   (shared expert, prefill) */
cudaError_t lc_swiglu(const float *gu, int T, int I, float *y, cudaStream_t st);

/* ---- sampling -------------------------------------------------------------------- */
/* Greedy: argmax of logits [V] (ties to the lowest id) -> ctrl->token and
 * out[ctrl->step]; marks ctrl->stop when the id is in stop_ids; then
 * advances ctrl->step and, when advance_pos, ctrl->pos. partial: [2 * 1024].
 * allow (device, (V + 31) / 32 words, or NULL): constrained decoding's
 * allowed ids (bit i % 32 of word i / 32); the others count as -inf. */
cudaError_t lc_argmax(const float *logits, int V, float *partial, unsigned *done, int32_t *out, const int32_t *stop_ids,
                      int n_stop, int advance_pos, const uint32_t *allow, lc_ctrl *ctrl, cudaStream_t st);

/* Sampling and logprobs on the device (sample_topk.cu, sample_logprobs.cu),
 * the same rules as the host sampler (src/engine/sample.h): penalties,
 * temperature (0 = argmax, ties to the lowest id), min_p, top_k (ties to the
 * lower id), top_p over the renormalised survivors, one xoshiro256** draw.
 * The distribution is the host's; the order in which the draw walks the
 * candidates is by id, not by probability, so sampled ids match the host's
 * exactly only when top_k and top_p are off. */
#define LC_LP_TOP 20  /* = LILAC_MAX_TOP_LOGPROBS */
#define LC_LP_RING 16 /* logprob slots: step s writes slot s % LC_LP_RING */

/* Written by the host before a generation (lc_sampler_begin); only rng
 * changes on the device, so one captured graph serves any parameters. */
typedef struct {
    int greedy;       /* temperature 0: argmax of the penalised logits, no draw */
    float inv_t;      /* 1.0f / temperature, rounded on the host as sample.c does */
    float log_min_p;  /* logf(min_p); -inf when min_p is 0 */
    int top_k;        /* 0 = off */
    float top_p;      /* 1 = off */
    float rep;        /* repetition penalty over seen ids; 1 = off */
    float freq, pres; /* frequency / presence penalties over generated ids; 0 = off */
    int n_top;        /* logprob alternatives, 0..LC_LP_TOP (at most the vocabulary) */
    int pad;
    uint64_t rng[4];  /* xoshiro256** state as lilac_rng_seed leaves it; one draw per sampled token */
} lc_samp_params;

/* One step's logprobs: log-softmax of the raw logits. */
typedef struct {
    float logprob;    /* of the chosen id */
    int n_top;
    int32_t top_ids[LC_LP_TOP];
    float top_logprobs[LC_LP_TOP];
} lc_tokinfo;

typedef struct lc_samp_work lc_samp_work; /* scalars passed between the sampler's kernels */

/* The sampler's device memory (one block, see lc_sampler_carve); one
 * generation at a time uses it. */
typedef struct {
    int V;
    lc_samp_params *params; /* [1] */
    lc_samp_work *work;     /* [1] */
    float *w;               /* [V] penalised, scaled logits of the current step */
    int32_t *counts;        /* [V] occurrences in the generated text */
    uint8_t *seen;          /* [V] 1 when the id is in the prompt or the generated text */
    int32_t *cand;          /* [V] candidate ids (selection scratch) */
    lc_tokinfo *lp;         /* [LC_LP_RING] logprobs, per step */
} lc_sampler;

/* Bytes of device memory a sampler for V tokens needs; carve lays it out
 * from base (cudaMalloc alignment); clear zeroes it once before first use. */
size_t lc_sampler_bytes(int V);
void lc_sampler_carve(void *base, int V, lc_sampler *s);
cudaError_t lc_sampler_clear(const lc_sampler *s, cudaStream_t st);
/* Starts a generation: uploads p, zeroes the counts, and sets seen from
 * seen_host ([V] bytes, host memory) or zeroes it when NULL. */
cudaError_t lc_sampler_begin(const lc_sampler *s, const lc_samp_params *p, const uint8_t *seen_host, cudaStream_t st);
/* Chooses the next id from logits [V] under s->params and, like lc_argmax,
 * writes it to ctrl->token and out[ctrl->step], sets ctrl->stop on a stop id
 * or a full ring, advances ctrl->step (and ctrl->pos when advance_pos), and
 * counts the id for the penalties.  allow (or NULL) as for lc_argmax: the
 * ids outside it are -inf before the penalties, temperature and cuts (the
 * host sampler's lilac_sampler_pick_masked).  With logprobs, slot ctrl->step %
 * LC_LP_RING of s->lp receives the step's logprobs.  Several launches; no
 * host work, so it can be captured in the decode graph. */
cudaError_t lc_sample(const float *logits, const lc_sampler *s, int logprobs, int32_t *out, const int32_t *stop_ids,
                      int n_stop, int advance_pos, const uint32_t *allow, lc_ctrl *ctrl, cudaStream_t st);
/* The logprob half of lc_sample (sample_logprobs.cu): log-sum-exp of the raw
 * logits and the n_top best ids into slot ctrl->step % LC_LP_RING; the
 * chosen id's logprob is written when it is chosen. */
cudaError_t lc_sample_logprobs(const float *logits, const lc_sampler *s, lc_ctrl *ctrl, cudaStream_t st);

/* Control block updates, in stream order: pos += n and conv_flip ^= 1 (after a forward);
 * begin a device generation (step = 0, stop = 0, ring capacity); end it
 * (stop = 0, so later forward passes run). */
cudaError_t lc_ctrl_advance(lc_ctrl *ctrl, int n, cudaStream_t st);
cudaError_t lc_ctrl_begin(lc_ctrl *ctrl, int max_steps, cudaStream_t st);
cudaError_t lc_ctrl_end(lc_ctrl *ctrl, cudaStream_t st);
/* After the decode layers fed ctrl->token (the split step of constrained
 * generation): pos += 1 and conv_flip ^= 1, unless ctrl->stop is set. */
cudaError_t lc_ctrl_fed(lc_ctrl *ctrl, cudaStream_t st);

/* Random fill for synthetic weights and tests: n 32-bit words / bf16 values. */
cudaError_t lc_fill_u32(uint32_t *p, size_t n, uint64_t seed, cudaStream_t st);
cudaError_t lc_fill_bf16(uint16_t *p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t st);
cudaError_t lc_fill_f32(float *p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
