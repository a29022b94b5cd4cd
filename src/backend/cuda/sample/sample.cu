/* sample.cu — choosing the next token on the GPU.
 *
 * Greedy: argmax over the vocabulary in two levels (per-block maxima, then
 * the last block to finish reduces them: no second launch), ties to the
 * lowest id; with an allowed-id mask (constrained decoding) the other ids
 * count as -inf, as the host sampler makes them.  The chosen id is written straight into the state's control
 * block as the next token to feed and into the output ring the host reads
 * asynchronously. */
#include <math.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/sample/greedy.cuh"

namespace {

constexpr int THREADS = 256, MAX_BLOCKS = 512;

__device__ __forceinline__ void better(float &v, int &i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
}

__device__ __forceinline__ void block_argmax(float &v, int &i) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = v, si[w] = i;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x >> 5) ? sv[lane] : -INFINITY;
        i = lane < (int)(blockDim.x >> 5) ? si[lane] : 0x7fffffff;
        for (int o = 16; o > 0; o >>= 1) better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    }
}

__global__ void __launch_bounds__(THREADS) argmax_kernel(const float *__restrict__ logits, int V, float *partial,
                                                         unsigned *done, int32_t *out, const int32_t *stop_ids,
                                                         int n_stop, int advance_pos, const uint32_t *__restrict__ allow,
                                                         lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    __shared__ bool last;
    float v = -INFINITY;
    int idx = 0x7fffffff;
    for (int i = blockIdx.x * THREADS + threadIdx.x; i < V; i += gridDim.x * THREADS)
        better(v, idx, lc_allowed(allow, i) ? logits[i] : -INFINITY, i);
    block_argmax(v, idx);
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = v;
        partial[2 * blockIdx.x + 1] = __int_as_float(idx);
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    v = -INFINITY, idx = 0x7fffffff;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += THREADS)
        better(v, idx, ((volatile float *)partial)[2 * b], __float_as_int(((volatile float *)partial)[2 * b + 1]));
    block_argmax(v, idx);
    if (threadIdx.x == 0) {
        if (idx == 0x7fffffff) idx = 0; /* all NaN: a defined answer */
        lc_greedy_emit(idx, out, stop_ids, n_stop, advance_pos, ctrl);
        *done = 0;
    }
}

} // namespace

extern "C" cudaError_t lc_argmax(const float *logits, int V, float *partial, unsigned *done, int32_t *out,
                                 const int32_t *stop_ids, int n_stop, int advance_pos, const uint32_t *allow, lc_ctrl *ctrl,
                                 cudaStream_t st) {
    int blocks = (V + THREADS - 1) / THREADS;
    if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
    return lc_launch(argmax_kernel, dim3(blocks), dim3(THREADS), 0, st, logits, V, partial, done, out, stop_ids, n_stop,
                     advance_pos, allow, ctrl);
}

namespace {
__global__ void ctrl_advance_kernel(lc_ctrl *ctrl, int n) {
    ctrl->pos += n;
    ctrl->conv_flip ^= 1;
}
__global__ void ctrl_begin_kernel(lc_ctrl *ctrl, int max_steps) {
    ctrl->step = 0;
    ctrl->stop = 0;
    ctrl->max_steps = max_steps;
}
__global__ void ctrl_end_kernel(lc_ctrl *ctrl) { ctrl->stop = 0; }
__global__ void ctrl_fed_kernel(lc_ctrl *ctrl) {
    if (ctrl->stop) return; /* the layers did nothing either */
    ctrl->pos++;
    ctrl->conv_flip ^= 1;
}
} // namespace

extern "C" cudaError_t lc_ctrl_advance(lc_ctrl *ctrl, int n, cudaStream_t st) {
    ctrl_advance_kernel<<<1, 1, 0, st>>>(ctrl, n);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_ctrl_begin(lc_ctrl *ctrl, int max_steps, cudaStream_t st) {
    ctrl_begin_kernel<<<1, 1, 0, st>>>(ctrl, max_steps);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_ctrl_fed(lc_ctrl *ctrl, cudaStream_t st) {
    ctrl_fed_kernel<<<1, 1, 0, st>>>(ctrl);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_ctrl_end(lc_ctrl *ctrl, cudaStream_t st) {
    ctrl_end_kernel<<<1, 1, 0, st>>>(ctrl);
    return cudaGetLastError();
}
