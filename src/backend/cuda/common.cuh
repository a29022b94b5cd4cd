/* common.cuh — device helpers shared by the kernel files. */
#ifndef LILAC_CUDA_COMMON_CUH
#define LILAC_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "backend/cuda/cuda_ops.h"

/* Programmatic dependent launch (Hopper): a kernel launched with lc_launch()
 * may start while its predecessor drains.  The rules every kernel keeps:
 *   - lc_pdl_launch_dependents() only after lc_pdl_wait(), so when a kernel
 *     starts, every kernel before its predecessor has completed;
 *   - before lc_pdl_wait() it may read weights and data written by kernels
 *     before its predecessor (the KV cache, the DeltaNet state, the router's
 *     ids in MoE down), through L2 (__ldcg) when that data is rewritten every
 *     step; never what its predecessor writes, and it writes nothing;
 *   - a load that must follow a conditional lc_pdl_wait() needs a compiler
 *     barrier after the condition (the compiler may hoist it otherwise).
 * Both are no-ops without PDL. */
__device__ __forceinline__ void lc_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void lc_pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/* lc_pdl_wait for the layer kernels, with the stop flag (LC_STOPPED) read
 * before the wait: one L2 round trip less between the wait and the kernel's
 * first loads.  Only the token choice (argmax, sample) and the control
 * kernels write ctrl->stop, and no layer kernel directly follows one of
 * those (a step's first kernel, the embedding, does, and keeps LC_STOPPED
 * after its wait), so by the rules above the writer has completed when a
 * layer kernel starts and the flag read before the wait is the one after. */
__device__ __forceinline__ bool lc_pdl_wait_stop(const lc_ctrl *ctrl) {
    const bool stop = ctrl != nullptr && __ldcg(&ctrl->stop) != 0;
    lc_pdl_wait();
    return stop;
}

/* Launches kernel with programmatic stream serialization allowed (see above). */
template <typename... KArgs, typename... Args>
static cudaError_t lc_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
    return err ? err : cudaGetLastError();
}

/* How decode attention splits n keys: nch chunks of `chunk` keys, `per`
 * chunks per key range, `used` ranges holding keys (at most nsplit).  One
 * definition for the kernel that fills the ranges (attention_decode.cu) and
 * the one that merges them (attention.cu). */
struct lc_kv_split {
    int nch, per, used;
};
__device__ __forceinline__ lc_kv_split lc_kv_split_of(int n, int chunk, int nsplit) {
    lc_kv_split s;
    s.nch = (n + chunk - 1) / chunk;
    s.per = (s.nch + nsplit - 1) / nsplit;
    s.used = (s.nch + s.per - 1) / s.per;
    return s;
}

/* Kernels of the decode graph return at once after a stop id was generated,
 * so replays queued ahead of the host leave the state untouched. */
#define LC_STOPPED(ctrl) ((ctrl) != nullptr && (ctrl)->stop)

/* Constrained decoding: whether id i is set in an allowed-id bitset (bit
 * i % 32 of word i / 32); a NULL mask allows every id. */
__device__ __forceinline__ bool lc_allowed(const uint32_t *__restrict__ allow, int i) {
    return allow == nullptr || ((__ldg(allow + (i >> 5)) >> (i & 31)) & 1u);
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result.  scratch: 32 floats of shared memory. */
__device__ __forceinline__ float block_sum(float v, float *scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = lane < nw ? scratch[lane] : 0.0f;
    return warp_sum(r);
}

__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One quantised row: codes, scales, biases of row r of matrix e. */
__device__ __forceinline__ const uint32_t *qrow_w(const lc_qmat &m, int e, int r) {
    return m.w + ((size_t)e * m.rows + r) * (size_t)(m.cols * m.bits / 32);
}
__device__ __forceinline__ size_t qrow_sb(const lc_qmat &m, int e, int r) {
    return ((size_t)e * m.rows + r) * (size_t)(m.cols / LC_GROUP);
}

#endif
