/* gdn.cu — Gated DeltaNet: the causal conv with its gates, and the
 * delta-rule scan with the gated RMSNorm (spec §6).
 *
 * Both run token by token over the T tokens they are given (T = 1 in
 * decode): the conv is per channel, the scan per value head with the fp32
 * state held in registers for the whole run — thread v of a head's block
 * owns column v of the [dk, dv] state, so reading with k and writing k delta^T
 * need no reduction across threads. */
#include "backend/cuda/common.cuh"

namespace {

/* Block per key head: its q and k channels and the v channels of the value
 * heads that read it.  K (taps) is a template parameter so the window stays
 * in registers. */
template <int K>
__global__ void conv_kernel(lc_gdn_params p, float *__restrict__ proj, int ldp, int T, float *__restrict__ conv_state,
                            const lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    __shared__ float scratch[32];
    const int kh = blockIdx.x, i = threadIdx.x, r = p.Hv / p.Hk;
    const int Kd = p.Hk * p.dk, C = 2 * Kd + p.Hv * p.dv, Vd = p.Hv * p.dv;
    const bool is_q = i < p.dk, is_k = !is_q && i < 2 * p.dk;
    const int ch = is_q ? kh * p.dk + i : is_k ? Kd + kh * p.dk + (i - p.dk) : 2 * Kd + kh * r * p.dv + (i - 2 * p.dk);
    const bool active = i < 2 * p.dk + r * p.dv;
    float win[K - 1], w[K];
#pragma unroll
    for (int j = 0; j < K; j++) w[j] = active ? p.conv_w[(size_t)ch * K + j] : 0.0f;
#pragma unroll
    for (int j = 0; j < K - 1; j++) win[j] = active ? conv_state[(size_t)j * C + ch] : 0.0f;
    const float qscale = rsqrtf((float)p.dk);
    for (int t = 0; t < T; t++) {
        float *row = proj + (size_t)t * ldp;
        const float x = active ? row[ch] : 0.0f;
        float acc = w[K - 1] * x;
#pragma unroll
        for (int j = 0; j < K - 1; j++) acc = fmaf(w[j], win[j], acc);
#pragma unroll
        for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
        win[K - 2] = x;
        const float y = silu_f(acc);
        const float sq = block_sum(is_q ? y * y : 0.0f, scratch);
        const float sk = block_sum(is_k ? y * y : 0.0f, scratch);
        if (active) row[ch] = is_q ? y * rsqrtf(sq + 1e-6f) * qscale : is_k ? y * rsqrtf(sk + 1e-6f) : y;
        if (i < r) {
            const int h = kh * r + i;
            float *bb = row + C + Vd + h, *aa = row + C + Vd + p.Hv + h;
            *bb = sigmoid_f(*bb);
            const float x2 = *aa + p.dt_bias[h];
            const float sp = x2 > 20.0f ? x2 : log1pf(expf(x2)); /* torch softplus, threshold 20 */
            *aa = -expf(p.A_log[h]) * sp;
        }
    }
    if (active)
#pragma unroll
        for (int j = 0; j < K - 1; j++) conv_state[(size_t)j * C + ch] = win[j];
}

/* Block per value head; SPLIT = DK/32 adjacent threads per state column v,
 * each holding 32 of the column's DK entries (their partial dot products
 * are joined with shuffles), which keeps the state in registers. */
template <int DK>
__global__ void __launch_bounds__(512) scan_kernel(lc_gdn_params p, const float *__restrict__ proj, int ldp, int T, float *__restrict__ state,
                            float *__restrict__ out, const lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    constexpr int SPLIT = DK / 32, HK = 32;
    __shared__ float qs[DK], ks[DK], scratch[32];
    const int h = blockIdx.x, v = threadIdx.x / SPLIT, part = threadIdx.x % SPLIT, dv = p.dv, kh = h / (p.Hv / p.Hk);
    const int Kd = p.Hk * DK, C = 2 * Kd + p.Hv * dv, Vd = p.Hv * dv;
    float *S = state + (size_t)h * DK * dv + (size_t)part * HK * dv;
    float s[HK];
#pragma unroll
    for (int k = 0; k < HK; k++) s[k] = S[(size_t)k * dv + v];
    const float nw = p.norm_w[v];
    for (int t = 0; t < T; t++) {
        const float *row = proj + (size_t)t * ldp;
        for (int k = threadIdx.x; k < DK; k += blockDim.x) qs[k] = row[kh * DK + k], ks[k] = row[Kd + kh * DK + k];
        __syncthreads();
        const float beta = row[C + Vd + h], decay = expf(row[C + Vd + p.Hv + h]);
        const float *kk = ks + part * HK, *qq = qs + part * HK;
        float kv = 0.0f;
#pragma unroll
        for (int k = 0; k < HK; k++) s[k] *= decay, kv = fmaf(s[k], kk[k], kv);
#pragma unroll
        for (int o = 1; o < SPLIT; o <<= 1) kv += __shfl_xor_sync(0xffffffffu, kv, o);
        const float delta = (row[2 * Kd + h * dv + v] - kv) * beta;
        float o = 0.0f;
#pragma unroll
        for (int k = 0; k < HK; k++) s[k] = fmaf(kk[k], delta, s[k]), o = fmaf(s[k], qq[k], o);
#pragma unroll
        for (int x = 1; x < SPLIT; x <<= 1) o += __shfl_xor_sync(0xffffffffu, o, x);
        const float ss = block_sum(part ? 0.0f : o * o, scratch);
        if (!part) {
            const float z = row[C + h * dv + v];
            out[(size_t)t * Vd + h * dv + v] = o * rsqrtf(ss / (float)dv + p.eps) * nw * silu_f(z);
        }
        __syncthreads(); /* qs/ks are rewritten next token */
    }
#pragma unroll
    for (int k = 0; k < HK; k++) S[(size_t)k * dv + v] = s[k];
}

} // namespace

extern "C" cudaError_t lc_gdn_conv(const lc_gdn_params *p, float *proj, int ldp, int T, float *conv_state,
                                   const lc_ctrl *ctrl, cudaStream_t st) {
    const int threads = ((2 * p->dk + (p->Hv / p->Hk) * p->dv + 31) / 32) * 32;
    if (threads > 1024) return cudaErrorInvalidValue;
    switch (p->K) {
    case 2: return lc_launch(conv_kernel<2>, dim3(p->Hk), dim3(threads), 0, st, *p, proj, ldp, T, conv_state, ctrl);
    case 3: return lc_launch(conv_kernel<3>, dim3(p->Hk), dim3(threads), 0, st, *p, proj, ldp, T, conv_state, ctrl);
    case 4: return lc_launch(conv_kernel<4>, dim3(p->Hk), dim3(threads), 0, st, *p, proj, ldp, T, conv_state, ctrl);
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t lc_gdn_scan(const lc_gdn_params *p, const float *proj, int ldp, int T, float *state, float *out,
                                   const lc_ctrl *ctrl, cudaStream_t st) {
    /* SPLIT * dv threads, a whole number of warps, at most 1024 */
    if (p->dv % 32 || p->dv * (p->dk / 32) > 1024) return cudaErrorInvalidValue;
    const int threads = p->dv * (p->dk / 32);
    switch (p->dk) {
    case 32: return lc_launch(scan_kernel<32>, dim3(p->Hv), dim3(threads), 0, st, *p, proj, ldp, T, state, out, ctrl);
    case 64: return lc_launch(scan_kernel<64>, dim3(p->Hv), dim3(threads), 0, st, *p, proj, ldp, T, state, out, ctrl);
    case 128: return lc_launch(scan_kernel<128>, dim3(p->Hv), dim3(threads), 0, st, *p, proj, ldp, T, state, out, ctrl);
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
