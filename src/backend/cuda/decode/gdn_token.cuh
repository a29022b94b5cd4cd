/* gdn_token.cuh — one token of the split DeltaNet decode step, for the two
 * kernel that runs it, gdn_step.cu's gdn_split_kernel (a fused in_proj +
 * step kernel shared it until it measured slower, 2026-12-05).  A value
 * head's state columns are spread over a cluster's blocks, P adjacent
 * lanes per column, R rows per thread (gdn_step.cu says how).
 *   token():   the conv of the thread's q|k channel and v column, the q/k
 *              sums of squares, the gates, the delta rule on the thread's
 *              state rows; returns o (this column's output before the
 *              gated norm) and *o2, the warp's share of the head's sum o^2,
 *              which the head's blocks exchange;
 *   head_out(): the gated RMSNorm once the exchanged sums are in slot. */
#ifndef LILAC_CUDA_DECODE_GDN_TOKEN_CUH
#define LILAC_CUDA_DECODE_GDN_TOKEN_CUH

#include "backend/cuda/common.cuh"

namespace {
namespace gdn_token {

/* qk [2 D], sq_w [8] (warps 0-3 q, 4-7 k): shared memory, written here
 * before one block barrier; a = the raw a + dt_bias */
template <int KC, int D, int P, int R>
__device__ __forceinline__ float token(float xqk, float xv, float b, float a, const float (&w_qk)[KC], const float (&w_v)[KC],
                                       float (&win_qk)[KC - 1], float (&win_v)[KC - 1], float (&s)[R], float *qk, float *sq_w,
                                       float eA, float qscale, int part, float *o2_out) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float aq = w_qk[KC - 1] * xqk, av = w_v[KC - 1] * xv;
#pragma unroll
    for (int j = 0; j < KC - 1; j++) aq = fmaf(w_qk[j], win_qk[j], aq), av = fmaf(w_v[j], win_v[j], av);
#pragma unroll
    for (int j = 0; j + 1 < KC - 1; j++) win_qk[j] = win_qk[j + 1], win_v[j] = win_v[j + 1];
    win_qk[KC - 2] = xqk, win_v[KC - 2] = xv;
    const float yqk = silu_f(aq), yv = silu_f(av);
    qk[tid] = yqk;
    const float sw = warp_sum(yqk * yqk);
    if (lane == 0) sq_w[warp] = sw;
    /* the gates, on every thread while the sums travel (no broadcast needed) */
    const float beta = sigmoid_f(b);
    const float sp = a > 20.0f ? a : log1pf(expf(a)); /* torch softplus, threshold 20 */
    const float decay = expf(-eA * sp);
    __syncthreads();
    /* kv = (decay S)^T k with k = rk * y_k: the dot on the raw state and raw k, scaled after */
    float kv = 0.0f;
#pragma unroll
    for (int i = 0; i < R; i++) kv = fmaf(s[i], qk[D + part + P * i], kv);
#pragma unroll
    for (int o = 1; o < P; o <<= 1) kv += __shfl_xor_sync(0xffffffffu, kv, o);
    const float4 q4 = *reinterpret_cast<const float4 *>(sq_w), k4 = *reinterpret_cast<const float4 *>(sq_w + 4);
    const float rq = rsqrtf((q4.x + q4.y) + (q4.z + q4.w) + 1e-6f) * qscale;
    const float rk = rsqrtf((k4.x + k4.y) + (k4.z + k4.w) + 1e-6f);
    const float delta = (yv - kv * decay * rk) * beta, dk = delta * rk;
    float o = 0.0f;
#pragma unroll
    for (int i = 0; i < R; i++) s[i] = fmaf(qk[D + part + P * i], dk, s[i] * decay), o = fmaf(s[i], qk[part + P * i], o);
#pragma unroll
    for (int x = 1; x < P; x <<= 1) o += __shfl_xor_sync(0xffffffffu, o, x);
    o *= rq;
    /* o^2 over this warp's columns (each column's P lanes hold the same o) */
    float o2 = o * o;
#pragma unroll
    for (int x = P; x < 32; x <<= 1) o2 += __shfl_xor_sync(0xffffffffu, o2, x);
    *o2_out = o2;
    return o;
}

/* slot: the N per-warp sums of o^2 of the head (N a multiple of 4) */
template <int N, int D>
__device__ __forceinline__ float head_out(const float *slot, float o, float eps, float nw, float z) {
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 f = *reinterpret_cast<const float4 *>(slot + i);
        ss += (f.x + f.y) + (f.z + f.w);
    }
    return o * rsqrtf(ss / (float)D + eps) * nw * silu_f(z);
}

} // namespace gdn_token
} // namespace

#endif
