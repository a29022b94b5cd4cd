/* gdn_step.cu — Gated DeltaNet (spec §6) in one kernel per layer: conv, gates,
 * delta rule with the fp32 state held on-chip, gated RMSNorm.  Two forms: a
 * block per value head (any shape, any T), and for decode a value head split
 * over a cluster of blocks (sm_90, dk = dv = 128, K = 4; the default for
 * calls of up to 64 tokens: step_form below). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/decode/gdn_token.cuh"

namespace {

/* Block per value head h, in one launch per layer: the causal conv of the
 * channels the head reads (q and k of its key head, its own v), SiLU, the q/k
 * l2 norms, beta and the decay, the delta rule, and the gated RMSNorm, token
 * by token over the T tokens given.
 *
 * The state matrix is spread over the block: SPLIT = DK/32 adjacent threads
 * per column v, 32 entries each, in registers for the whole run; their
 * partial dot products meet through shuffles.
 *
 * The conv window is double-buffered (ctrl->conv_flip, toggled once per
 * forward): every block reads buffer flip, and each channel's owner writes
 * buffer !flip — the two value heads that share a key head both read its
 * q/k window, so one writing it in place would race with the other. */
template <int K, int DK>
__global__ void __launch_bounds__(512) gdn_kernel(lc_gdn_params p, const float *__restrict__ proj, int ldp, int T,
                                                  float *__restrict__ conv_state, float *__restrict__ state,
                                                  float *__restrict__ out, const lc_ctrl *ctrl) {
    constexpr int SPLIT = DK / 32, HK = 32;
    __shared__ float qs[DK], ks[DK], vs[1024], gate[2], scratch[32];
    const int h = blockIdx.x, tid = threadIdx.x, dv = p.dv, r = p.Hv / p.Hk, kh = h / r;
    const int Kd = p.Hk * DK, C = 2 * Kd + p.Hv * dv, Vd = p.Hv * dv;

    /* this thread's conv channel, if any */
    const bool is_q = tid < DK, is_k = !is_q && tid < 2 * DK, is_v = !is_q && !is_k && tid < 2 * DK + dv;
    const int ch = is_q ? kh * DK + tid : is_k ? Kd + kh * DK + (tid - DK) : 2 * Kd + h * dv + (tid - 2 * DK);
    const bool conv = is_q || is_k || is_v;
    const bool writer = is_v || h % r == 0; /* one writer per q/k channel */
    const int flip = ctrl->conv_flip;
    const float *rd = conv_state + (size_t)flip * (K - 1) * C;
    float *wr = conv_state + (size_t)(1 - flip) * (K - 1) * C;
    float win[K - 1], w[K];
#pragma unroll
    for (int j = 0; j < K; j++) w[j] = conv ? p.conv_w[(size_t)ch * K + j] : 0.0f;
#pragma unroll
    for (int j = 0; j < K - 1; j++) win[j] = conv ? rd[(size_t)j * C + ch] : 0.0f;

    /* this thread's share of the state: column v, rows part*32 .. part*32+31 */
    const int v = tid / SPLIT, part = tid % SPLIT;
    const bool col = v < dv;
    float *S = state + (size_t)h * DK * dv + (size_t)part * HK * dv;
    float s[HK];
#pragma unroll
    for (int k = 0; k < HK; k++) s[k] = col ? S[(size_t)k * dv + v] : 0.0f;
    const float nw = col ? p.norm_w[v] : 0.0f, qscale = rsqrtf((float)DK);
    /* Everything above (weights, the conv window and the state, last written
     * by this layer's previous step) was loaded while the predecessor, the
     * projection that writes proj, drained. */
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;

    for (int t = 0; t < T; t++) {
        const float *row = proj + (size_t)t * ldp;
        float y = 0.0f;
        if (conv) {
            const float x = row[ch];
            float acc = w[K - 1] * x;
#pragma unroll
            for (int j = 0; j < K - 1; j++) acc = fmaf(w[j], win[j], acc);
#pragma unroll
            for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
            win[K - 2] = x;
            y = silu_f(acc);
        }
        const float sq = block_sum(is_q ? y * y : 0.0f, scratch);
        const float sk = block_sum(is_k ? y * y : 0.0f, scratch);
        if (is_q) qs[tid] = y * rsqrtf(sq + 1e-6f) * qscale;
        if (is_k) ks[tid - DK] = y * rsqrtf(sk + 1e-6f);
        if (is_v) vs[tid - 2 * DK] = y;
        if (tid == 0) {
            gate[0] = sigmoid_f(row[C + Vd + h]);
            const float a = row[C + Vd + p.Hv + h] + p.dt_bias[h];
            const float sp = a > 20.0f ? a : log1pf(expf(a)); /* torch softplus, threshold 20 */
            gate[1] = expf(-expf(p.A_log[h]) * sp);
        }
        __syncthreads();
        const float beta = gate[0], decay = gate[1];
        const float *kk = ks + part * HK, *qq = qs + part * HK;
        float kv = 0.0f;
#pragma unroll
        for (int k = 0; k < HK; k++) s[k] *= decay, kv = fmaf(s[k], kk[k], kv);
#pragma unroll
        for (int o = 1; o < SPLIT; o <<= 1) kv += __shfl_xor_sync(0xffffffffu, kv, o);
        const float delta = ((col ? vs[v] : 0.0f) - kv) * beta;
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < HK; k++) s[k] = fmaf(kk[k], delta, s[k]), o = fmaf(s[k], qq[k], o);
#pragma unroll
        for (int x = 1; x < SPLIT; x <<= 1) o += __shfl_xor_sync(0xffffffffu, o, x);
        const float ss = block_sum(part || !col ? 0.0f : o * o, scratch);
        if (!part && col) {
            const float z = row[C + h * dv + v];
            out[(size_t)t * Vd + h * dv + v] = o * rsqrtf(ss / (float)dv + p.eps) * nw * silu_f(z);
        }
        __syncthreads(); /* qs/ks/vs/gate are rewritten next token */
    }
    if (conv && writer)
#pragma unroll
        for (int j = 0; j < K - 1; j++) wr[(size_t)j * C + ch] = win[j];
    if (col)
#pragma unroll
        for (int k = 0; k < HK; k++) S[(size_t)k * dv + v] = s[k];
}

/* ---- split form: each value head over a cluster of NS blocks --------------------------
 * The block form fills Hv (32) SMs with 64 KB of state each and a serial tail
 * (three block sums, the gates on one thread); here value head h is a cluster
 * of NS blocks, block `rank` owning state columns [rank*NC, rank*NC + NC).
 * Every block recomputes the conv + SiLU of its key head's q and k (256
 * channels) and of its own v columns; the gates are computed by every thread
 * alongside the conv sums; the q/k l2 norms are applied as scalars after the
 * dot products (so the raw q, k go to shared memory under the same barrier as
 * their sums); the gated RMSNorm's sum of o^2 over the head's 128 columns is
 * exchanged through distributed shared memory: each warp stores its partial
 * into every block of the cluster, one cluster barrier, each sums locally.
 * For decode (T = 1) the partials go by st.async on an mbarrier instead,
 * so a block waits only for the bytes it receives; the window and state
 * stores drain during the exchange.  (H100, 2026-12-05: 705.3 against
 * 698.1 tokens/s at 4K with the cluster barrier; docs/PERFORMANCE.md.)
 *
 * State mapping: P = THREADS/NC adjacent lanes per column, part p holding rows
 * p, p+P, p+2P, ... (a fixed register index reads consecutive rows, so the
 * k/q reads from shared memory are conflict-free); their partial dots meet
 * through shuffles.  sm_90 only (clusters); dk = dv = 128, K = 4. */
namespace gdn_split {

constexpr int KC = 4, D = 128, THREADS = 256;

template <int NS>
__global__ void __launch_bounds__(THREADS) gdn_split_kernel(lc_gdn_params p, const float *__restrict__ proj, int ldp,
                                                            int T, float *__restrict__ conv_state,
                                                            float *__restrict__ state, float *__restrict__ out,
                                                            const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int NC = D / NS, P = THREADS / NC, R = D / P; /* columns per block, threads per column, rows per thread */
    constexpr int NW = THREADS / 32;
    __shared__ uint64_t xbar; /* T = 1: the exchange's mbarrier */
    static_assert(P <= 32 && (P & (P - 1)) == 0, "a column's threads must be adjacent lanes of one warp");
    __shared__ float qk[2 * D];                           /* conv + SiLU of q | k, not yet normalised */
    __shared__ __align__(16) float sq_w[NW];              /* per-warp sums of squares: warps 0-3 q, 4-7 k */
    __shared__ __align__(16) float oo[2][NS * NW];        /* per-warp sums of o^2 of the cluster, by token parity */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int rank = (int)cluster_rank(), h = blockIdx.x / NS, r = p.Hv / p.Hk, kh = h / r;
    const int Kd = p.Hk * D, C = 2 * Kd + p.Hv * D, Vd = p.Hv * D;
    const int c = tid / P, part = tid % P, v = rank * NC + c; /* this thread's state column (of the head) */
    const int chqk = tid < D ? kh * D + tid : Kd + kh * D + (tid - D), chv = 2 * Kd + h * D + v;
    /* one writer per window channel: q/k by split 0 of the key head's first value head, v by part 0 */
    const bool wqk = h % r == 0 && rank == 0, wv = part == 0;
    const int flip = ctrl->conv_flip;
    const float *rd = conv_state + (size_t)flip * (KC - 1) * C;
    float *wr = conv_state + (size_t)(1 - flip) * (KC - 1) * C;
    float w_qk[KC], w_v[KC], win_qk[KC - 1], win_v[KC - 1];
#pragma unroll
    for (int j = 0; j < KC; j++) w_qk[j] = p.conv_w[(size_t)chqk * KC + j], w_v[j] = p.conv_w[(size_t)chv * KC + j];
    /* the window and the state are rewritten every step: read through L2 (common.cuh's PDL rules) */
#pragma unroll
    for (int j = 0; j < KC - 1; j++)
        win_qk[j] = __ldcg(rd + (size_t)j * C + chqk), win_v[j] = __ldcg(rd + (size_t)j * C + chv);
    float *S = state + (size_t)h * D * D + v;
    float s[R];
#pragma unroll
    for (int i = 0; i < R; i++) s[i] = __ldcg(S + (size_t)(part + P * i) * D);
    const float nw = p.norm_w[v], dtb = p.dt_bias[h], eA = expf(p.A_log[h]), qscale = rsqrtf((float)D);
    /* all of the above was loaded while the predecessor drained (as in the block form) */
    /* decode (T = 1): the exchange by st.async on an mbarrier; its init
     * precedes the start barrier, which publishes it to the peers (the
     * block barrier orders it before thread 0's expect_tx and the other
     * warps' arrives for racecheck, which does not see the cluster barrier
     * as one) */
    const bool xchg = T == 1;
    if (xchg) {
        if (tid == 0) {
            mbar_init(&xbar, 1 + NW); /* + the storer of the own share in each warp */
            mbar_fence_init();
        }
        __syncthreads();
        if (tid == 0) mbar_expect_tx(&xbar, (NS - 1) * NW * 4);
    }
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    cluster_arrive_relaxed(); /* peers' shared memory is written only once every block has started */
    /* the window and the state, once final */
    auto store_tail = [&]() {
        if (wqk)
#pragma unroll
            for (int j = 0; j < KC - 1; j++) wr[(size_t)j * C + chqk] = win_qk[j];
        if (wv)
#pragma unroll
            for (int j = 0; j < KC - 1; j++) wr[(size_t)j * C + chv] = win_v[j];
#pragma unroll
        for (int i = 0; i < R; i++) S[(size_t)(part + P * i) * D] = s[i];
    };

    for (int t = 0; t < T; t++) {
        const float *row = proj + (size_t)t * ldp;
        const float xqk = row[chqk], xv = row[chv], z = row[C + h * D + v];
        const float b = row[C + Vd + h], a = row[C + Vd + p.Hv + h] + dtb;
        float o2;
        const float o =
            gdn_token::token<KC, D, P, R>(xqk, xv, b, a, w_qk, w_v, win_qk, win_v, s, qk, sq_w, eA, qscale, part, &o2);
        if (t == 0) cluster_wait(); /* the start barrier */
        float *slot = oo[t & 1];
        if (xchg) { /* the only token: no rewrite of qk and sq_w to guard */
            if (lane == rank) {
                slot[rank * NW + warp] = o2;
                mbar_arrive(&xbar);
            } else if (lane < NS) {
                st_async(slot + rank * NW + warp, (uint32_t)lane, &xbar, o2);
            }
            store_tail(); /* drains while the shares arrive */
            mbar_wait(&xbar, 0);
        } else {
            if (lane < NS) st_cluster(slot + rank * NW + warp, (uint32_t)lane, o2);
            /* also the block barrier before qk and sq_w are rewritten: every read above precedes the arrive */
            cluster_arrive();
            if (t == T - 1) store_tail(); /* the arrive's release does not wait for these: they drain while the cluster meets */
            cluster_wait();
        }
        if (wv) out[(size_t)t * Vd + h * D + v] = gdn_token::head_out<NS * NW, D>(slot, o, p.eps, nw, z);
    }
    if (T == 0) cluster_wait(); /* pair the start arrive */
    if (T == 0) store_tail();
#else
    __trap(); /* launched only where the kernel was built for sm_90 (see split_ok) */
#endif
}

} // namespace gdn_split

} // namespace

/* Which form lc_gdn runs: 0 = block per head, NS (2, 4, 8) = split over
 * clusters of NS blocks.  LILAC_GDN_STEP (read once): "split4" (or "split")
 * / "split8" = clusters of 4 / 8, "block" = the block form; unset or anything else =
 * clusters of 2 where the split form is supported.  Clusters of 2 since
 * 2026-12-06: the GPU places 64 of them one block an SM, while only 30 of
 * the 32 clusters of 4 get SMs of their own (H100: gdn_step_test 3.56
 * against 5.06 us a layer, decode at 4K 738.0 against 722.5 tokens/s;
 * docs/PERFORMANCE.md).  H200, 6dc239e: gdn_step_test 6.21
 * (block) / 5.52 (split4) / 9.25 (split8) us per layer, decode at 4K 529.4 /
 * 543.4 / 509.9 tokens/s (lilac bench, LILAC_GDN_STEP=block|split|split8).
 * lc_gdn_step_force overrides (the workshop). */
static int g_step = -1;
static int step_form(void) {
    if (g_step < 0) {
        const char *s = getenv("LILAC_GDN_STEP");
        g_step = s && strcmp(s, "block") == 0    ? 0
                 : s && strcmp(s, "split8") == 0 ? 8
                 : s && (strcmp(s, "split4") == 0 || strcmp(s, "split") == 0) ? 4
                                                 : 2;
    }
    return g_step;
}
extern "C" void lc_gdn_step_force(int form) { g_step = form == 0 || form == 2 || form == 4 || form == 8 ? form : -1; }

/* Calls of at most this many tokens take the split form (decode, short
 * chunks); longer ones keep the block form, the reference the chunked prefill
 * is checked against, whose per-token cost was never compared with it. */
#define SPLIT_MAX_T 64

using split_fn = void (*)(lc_gdn_params, const float *, int, int, float *, float *, float *, const lc_ctrl *);
static split_fn split_kernel(int ns) {
    return ns == 8 ? gdn_split::gdn_split_kernel<8> : ns == 2 ? gdn_split::gdn_split_kernel<2> : gdn_split::gdn_split_kernel<4>;
}

/* Whether the split form with clusters of ns can run here: the shape it is
 * written for and cluster.cuh's cluster_fits, probed once per device and
 * variant. */
static bool split_ok(const lc_gdn_params *p, int ns) {
    if (p->K != gdn_split::KC || p->dk != gdn_split::D || p->dv != gdn_split::D || p->Hk < 1 || p->Hv % p->Hk)
        return false;
    static signed char ok[64][3]; /* 0 unknown, 1 yes, -1 no; [device][ns 2, 4, 8] */
    int dev = 0;
    if (cudaGetDevice(&dev)) return false;
    signed char *o = &ok[dev & 63][ns == 2 ? 0 : ns == 4 ? 1 : 2];
    if (*o == 0) *o = cluster_fits(split_kernel(ns), (unsigned)ns, (unsigned)(p->Hv * ns), gdn_split::THREADS) ? 1 : -1;
    return *o > 0;
}

/* The split form: Hv clusters of ns blocks, with PDL as lc_launch */
static cudaError_t launch_split(int ns, const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state,
                                float *state, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    return cluster_launch(split_kernel(ns), (unsigned)ns, dim3(p->Hv * ns), dim3(gdn_split::THREADS), 0, st, *p, proj, ldp, T,
                          conv_state, state, out, ctrl);
}

/* The form lc_gdn runs for p and T: 0 = block, else the cluster size */
extern "C" int lc_gdn_step_form(const lc_gdn_params *p, int T) {
    const int form = step_form();
    return form && T >= 1 && T <= SPLIT_MAX_T && split_ok(p, form) ? form : 0;
}

extern "C" cudaError_t lc_gdn(const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state, float *state,
                              float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    if (p == NULL || ctrl == NULL) return cudaErrorInvalidValue;
    const int form = lc_gdn_step_form(p, T);
    if (form) return launch_split(form, p, proj, ldp, T, conv_state, state, out, ctrl, st);
    /* threads: the larger of the state's SPLIT*dv and the conv's 2*dk + dv, in warps */
    const int split = p->dk / 32, need = p->dv * split > 2 * p->dk + p->dv ? p->dv * split : 2 * p->dk + p->dv;
    const int threads = (need + 31) / 32 * 32;
    if (threads > 512 || p->dv > 1024 || ctrl == NULL) return cudaErrorInvalidValue;
#define GDN_(KK, DK) return lc_launch(gdn_kernel<KK, DK>, dim3(p->Hv), dim3(threads), 0, st, *p, proj, ldp, T, conv_state, state, out, ctrl)
    switch (p->K * 1000 + p->dk) {
    case 2032: GDN_(2, 32);
    case 3032: GDN_(3, 32);
    case 4032: GDN_(4, 32);
    case 2064: GDN_(2, 64);
    case 3064: GDN_(3, 64);
    case 4064: GDN_(4, 64);
    case 2128: GDN_(2, 128);
    case 3128: GDN_(3, 128);
    case 4128: GDN_(4, 128);
    }
#undef GDN_
    return cudaErrorInvalidValue;
}
