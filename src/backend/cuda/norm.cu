/* norm.cu — embedding lookup, RMSNorm, elementwise helpers. */
#include "backend/cuda/common.cuh"

namespace {

// h[t] = dequantised row ids[t] of E; block per token
__global__ void embed_kernel(lc_qmat E, const int32_t *__restrict__ ids, float *__restrict__ h, const lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    const int t = blockIdx.x, D = E.cols;
    const int id = ids[t];
    const uint32_t *w = qrow_w(E, 0, id);
    const size_t sb = qrow_sb(E, 0, id);
    const int per = 32 / E.bits;
#pragma unroll 8
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
        uint32_t q = (w[i / per] >> ((i % per) * E.bits)) & ((1u << E.bits) - 1);
        h[(size_t)t * D + i] = bf16_to_f32(E.s[sb + i / LC_GROUP]) * (float)q + bf16_to_f32(E.b[sb + i / LC_GROUP]);
    }
}

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w; block per row
__global__ void rmsnorm_kernel(const float *__restrict__ x, const float *__restrict__ w, float *__restrict__ y, int D,
                               float eps, const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    __shared__ float scratch[32];
    const float *xr = x + (size_t)blockIdx.x * D;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, scratch);
    const float r = rsqrtf(ss / (float)D + eps);
    for (int i = threadIdx.x; i < D; i += blockDim.x) y[(size_t)blockIdx.x * D + i] = xr[i] * r * w[i];
}

__global__ void swiglu_kernel(const float *__restrict__ gu, int I, float *__restrict__ y, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    size_t t = i / I, j = i % I;
    y[i] = silu_f(gu[t * 2 * I + j]) * gu[t * 2 * I + I + j];
}

} // namespace

extern "C" cudaError_t lc_embed(const lc_qmat *E, const int32_t *ids, int T, float *h, const lc_ctrl *ctrl,
                                cudaStream_t st) {
    return lc_launch(embed_kernel, dim3(T), dim3(256), 0, st, *E, ids, h, ctrl);
}

extern "C" cudaError_t lc_rmsnorm(const float *x, const float *w, float *y, int T, int D, float eps, const lc_ctrl *ctrl,
                                  cudaStream_t st) {
    rmsnorm_kernel<<<T, D >= 1024 ? 1024 : ((D + 31) / 32) * 32, 0, st>>>(x, w, y, D, eps, ctrl);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_swiglu(const float *gu, int T, int I, float *y, cudaStream_t st) {
    size_t n = (size_t)T * I;
    swiglu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(gu, I, y, n);
    return cudaGetLastError();
}
