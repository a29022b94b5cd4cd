/* gdn_step.cu — Gated DeltaNet (spec §6) in one kernel per layer: conv, gates,
 * delta rule with the fp32 state held on-chip, gated RMSNorm. */
#include "backend/cuda/common.cuh"

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
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;

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

} // namespace

extern "C" cudaError_t lc_gdn(const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state, float *state,
                              float *out, const lc_ctrl *ctrl, cudaStream_t st) {
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
