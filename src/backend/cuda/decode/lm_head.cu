/* lm_head.cu — the decode step's lm_head with the greedy pick fused in
 * (issue 14: "the lm_head ... with the argmax or sampler fused"):
 *   logits = W . RMSNorm(h) * norm_w, then the id of the largest logit (ties
 *   to the lowest id, NaN never chosen) as argmax_kernel (sample.cu) picks it.
 * The GEMV is gemv_tq.cuh's tq_gemv at the lm_head's shape (NSP 8, RB 4: the
 * logits bit for bit the same); each block then folds its 64 logits into
 * one order key (the sampler's key_of: value, then the lower id) and takes
 * the maximum into one word by atomicMax; the block that finishes last (a
 * counter) emits the id.  No argmax kernel: its launch, its wait for the
 * lm_head's last block and its 1 MB read of the logits go (5.1 us a step on
 * an H200 at 34aa1e9, docs/PERFORMANCE.md).  Greedy without a mask only:
 * constrained decoding and the sampler keep their kernels. */
#include "backend/cuda/decode/gemv_tq.cuh"
#include "backend/cuda/sample/greedy.cuh"
#include "backend/cuda/sample/sample_select.cuh"

namespace {

using namespace gemv_tq;

constexpr int K = 2048, NSP = 8, RB = 4, MINB = 2; /* launch_gemv<2048, 8, 4, 2>: gemv.cu's choice for the lm_head */
constexpr int KS = K / (128 * NSP), NW = RB * KS, NT = NW * 32, NSPAN = K / 128, G = K / 64;
static_assert(RB * 16 == 64, "two warps hold the block's logits");

struct pick_args {
    u64 *key;          /* [0]: the best key so far (0: none), [1]: blocks done; both 0 between steps */
    int32_t *out;      /* the output ring */
    const int32_t *stop_ids;
    int n_stop, advance_pos;
    lc_ctrl *ctrl;
};

/* The best key taken (back to zero for the next step) and its id emitted
 * as argmax_kernel emits it; one thread, once every block's key is in */
__device__ __forceinline__ void emit_best(const pick_args &pa) {
    const u64 k = atomicExch(pa.key, 0ull);
    lc_greedy_emit(k ? lcs::id_of(k) : 0, pa.out, pa.stop_ids, pa.n_stop, pa.advance_pos, pa.ctrl); /* 0: all NaN */
}

/* COUNT: the block that counts last emits the id ("pick"); else every
 * block only takes the maximum (a reduction, no fence, no count: "pickr")
 * and emit_kernel, the next launch, emits it. */
template <bool COUNT>
__global__ void __launch_bounds__(NT, MINB)
    lm_head_greedy_kernel(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps,
                          float *__restrict__ y, pick_args pa) {
    __shared__ uint4 bf[(NSPAN + 1) * 2 * SLOTS];
    __shared__ __align__(16) float xs[G]; /* read as float2 */
    __shared__ float red[NW * 16], scratch[32];
    __shared__ u64 best[2];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int ks = warp % KS, r0 = (blockIdx.x * RB + warp / KS) * 16;
    tile<K, NSP> tl;
    tl.load(W.w + (size_t)r0 * (K / 8), W.s + (size_t)r0 * G, W.b + (size_t)r0 * G, ks, g, c);
    /* every block reads the same flag (only a token choice writes it, and
     * the last block's emit comes after every block's read): all count, or none */
    const bool stopped = lc_pdl_wait_stop(pa.ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    const float down = prep_x<K, NT>(x, norm_w, eps, bf, xs, scratch);
    float ya, yb;
    tl.dot(bf, xs, down, ks, g, c, ya, yb);
    const float a = store_rows<RB, KS>(red, ya, yb, y, nullptr); /* tq_gemv's stores, the same floats */
    if (threadIdx.x < RB * 16) { /* warps 0 and 1 hold the block's logits */
        const int r = blockIdx.x * RB * 16 + threadIdx.x;
        const u64 kb = lcs::warp_reduce(a == a ? lcs::key_of(a, r) : 0ull, lcs::op_max_u64()); /* NaN: never chosen */
        if (lane == 0) best[warp] = kb;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const u64 kb = best[0] > best[1] ? best[0] : best[1];
        if (kb) atomicMax(pa.key, kb);
        if constexpr (!COUNT) return;
        __threadfence(); /* the key before the count */
        if (atomicAdd(pa.key + 1, 1ull) == gridDim.x - 1) {
            __threadfence();
            pa.key[1] = 0;
            emit_best(pa);
        }
    }
}

/* pickr's emit, after the lm_head's grid has completed (its keys visible) */
__global__ void __launch_bounds__(32) emit_kernel(pick_args pa) {
    const bool stopped = lc_pdl_wait_stop(pa.ctrl);
    lc_pdl_launch_dependents();
    if (!stopped && threadIdx.x == 0) emit_best(pa);
}

} // namespace

/* where gemv.cu's pick_dense runs launch_gemv<2048, 8, 4, 2>: the same logits */
extern "C" int lc_lm_head_greedy_ok(const lc_qmat *W) { return W->n_mat == 1 && lc_gemv_tq_head(W); }

extern "C" cudaError_t lc_lm_head_greedy(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits,
                                         unsigned long long *key, int32_t *out, const int32_t *stop_ids, int n_stop,
                                         int advance_pos, int count, lc_ctrl *ctrl, cudaStream_t st) {
    if (!lc_lm_head_greedy_ok(W)) return cudaErrorNotSupported;
    const pick_args pa = {key, out, stop_ids, n_stop, advance_pos, ctrl};
    const dim3 grid(W->rows / (16 * RB));
    if (count) return launch_k(lm_head_greedy_kernel<true>, grid, dim3(NT), 0, st, true, *W, h, norm_w, eps, logits, pa);
    const cudaError_t err = launch_k(lm_head_greedy_kernel<false>, grid, dim3(NT), 0, st, true, *W, h, norm_w, eps, logits, pa);
    return err ? err : launch_k(emit_kernel, dim3(1), dim3(32), 0, st, true, pa);
}
