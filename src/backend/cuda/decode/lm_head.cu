/* lm_head.cu — the decode step's lm_head, with the greedy pick fused in
 * (issue 14: "the lm_head ... with the argmax or sampler fused"):
 *   logits = W . RMSNorm(h) * norm_w, then the id of the largest logit (ties
 *   to the lowest id, NaN never chosen) as argmax_kernel (sample.cu) picks it.
 * Two forms, the logits bit for bit tq_gemv's at the lm_head's shape (NSP 8,
 * RB 4) in both:
 *   - the ring (the default, LILAC_DECODE_TRY's "hring"): one block an SM
 *     streams its row blocks through per-warp cp.async rings (gemv_ring.cuh's
 *     tasks, two making one of tq_gemv's tiles); also the sampler's logits;
 *   - tq_gemv's body, one block per 64 rows (3,880 for the real vocabulary).
 * With the pick each block folds its logits into one order key (the
 * sampler's key_of: value, then the lower id), takes the maximum into one
 * word by atomicMax, and the block that counts last emits the id.  No
 * argmax kernel: its launch, its wait for the lm_head's last block and its
 * 1 MB read of the logits go (5.1 us a step on an H200 at 34aa1e9,
 * docs/PERFORMANCE.md).  Greedy without a mask only: constrained decoding
 * and the sampler keep their kernels. */
#include "backend/cuda/decode/gemv_ring.cuh"
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

/* A block's best key into the step's (atomicMax); the block that counts
 * last takes it back to zero for the next step and emits its id as
 * argmax_kernel emits it.  Thread 0 of each block, once. */
__device__ __forceinline__ void take_best(const pick_args &pa, u64 kb) {
    if (kb) atomicMax(pa.key, kb);
    __threadfence(); /* the key before the count */
    if (atomicAdd(pa.key + 1, 1ull) == gridDim.x - 1) {
        __threadfence();
        pa.key[1] = 0;
        const u64 k = atomicExch(pa.key, 0ull);
        lc_greedy_emit(k ? lcs::id_of(k) : 0, pa.out, pa.stop_ids, pa.n_stop, pa.advance_pos, pa.ctrl); /* 0: all NaN */
    }
}

/* A logit's order key (the sampler's key_of); 0 for NaN, which is never chosen */
__device__ __forceinline__ u64 row_key(float v, int r) { return v == v ? lcs::key_of(v, r) : 0ull; }

/* Tasks a and b of a ring (gemv_ring.cuh: spans 4 m .. of one K slice
 * each, consecutive slices) as one NSP = 8 tile: tq_gemv's tile of slice
 * h when a and b are slices 2h and 2h + 1 */
__device__ __forceinline__ void tile_pair(tile<K, NSP> &tl, const unsigned char *a, const unsigned char *b, int g, int c) {
    tile<K, NSP / 2> q;
    gemv_ring::tile_from<K>(q, a, g, c);
#pragma unroll
    for (int m = 0; m < NSP / 2; m++) tl.qa[m] = q.qa[m], tl.qb[m] = q.qb[m], tl.sa[m] = q.sa[m], tl.sb[m] = q.sb[m];
    tl.ba[0] = q.ba[0], tl.bb[0] = q.bb[0];
    gemv_ring::tile_from<K>(q, b, g, c);
#pragma unroll
    for (int m = 0; m < NSP / 2; m++)
        tl.qa[NSP / 2 + m] = q.qa[m], tl.qb[NSP / 2 + m] = q.qb[m], tl.sa[NSP / 2 + m] = q.sa[m], tl.sb[NSP / 2 + m] = q.sb[m];
    tl.ba[1] = q.ba[0], tl.bb[1] = q.bb[0];
}

/* The block that counts last emits the id.  One block per 64 rows: 3,880
 * blocks for the real vocabulary, each with this tail. */
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
        const u64 kb = lcs::warp_reduce(row_key(a, r), lcs::op_max_u64());
        if (lane == 0) best[warp] = kb;
    }
    __syncthreads();
    if (threadIdx.x == 0) take_best(pa, best[0] > best[1] ? best[0] : best[1]);
}

/* "hring": the same logits from one block per SM.  Each of its 8 warps
 * streams whole row blocks (16 rows x 2,048 inputs: 4 ring tasks of
 * gemv_ring.cuh, 512 inputs each) through a ring of S task slots by
 * cp.async, S tasks requested before the wait, and computes them as
 * tq_gemv's two NSP = 8 tiles (tasks 2h and 2h + 1 make tile h), summed
 * as store_rows sums them: the logits bit for bit tq_gemv's (prep_x with
 * the same NT, the same dots, the same order).  Why: tq_gemv's blocks load
 * their codes into registers only at their start and each ends with a
 * block barrier and, with the pick, the atomic tail; here a warp's next
 * tasks are in flight while it computes, and 132 blocks take the tail
 * instead of 3,880.  H100, inside the graph (cupti, 2026-12-07): 101.3
 * against 105.6 us a step (286 MB: 2.8 TB/s). */
template <int S>
__global__ void __launch_bounds__(NT, 1)
    lm_head_ring_kernel(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps,
                        float *__restrict__ y, pick_args pa) {
    static_assert(S % 2 == 0 && NW == 8, "tasks in pairs; prep_x as tq_gemv's 8 warps");
    extern __shared__ __align__(16) unsigned char rings[];
    __shared__ uint4 bf[(NSPAN + 1) * 2 * SLOTS];
    __shared__ __align__(16) float xs[G]; /* read as float2 */
    __shared__ float scratch[32];
    __shared__ u64 best[NW];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int nrb = W.rows / 16, gw = blockIdx.x * NW + warp, nwg = gridDim.x * NW; /* warp gw: row blocks gw + i nwg */
    const int nt = gw < nrb ? ((nrb - 1 - gw) / nwg + 1) * 4 : 0;
    unsigned char *ring = rings + (size_t)warp * S * gemv_ring::TASK;
    int issued = 0;
    auto issue = [&]() { /* past the last task: an empty group, so that cp_wait counts alike */
        if (issued < nt) {
            gemv_ring::copy_task<K>(ring + (issued % S) * gemv_ring::TASK, W.w, W.s, W.b,
                                    (size_t)(gw + (issued / 4) * nwg) * 16, issued % 4);
            issued++;
        }
        gemv_stream::cp_commit();
    };
#pragma unroll
    for (int i = 0; i < S; i++) issue(); /* weights: before the predecessor finishes */
    const bool stopped = lc_pdl_wait_stop(pa.ctrl);
    lc_pdl_launch_dependents();
    if (stopped) {
        gemv_stream::cp_wait<0>(); /* no copy lands in a block that has left */
        return;
    }
    const float down = prep_x<K, NT>(x, norm_w, eps, bf, xs, scratch);
    u64 kb = 0;
    for (int t = 0; t < nt; t += 4) {
        const int r = (gw + (t / 4) * nwg) * 16 + g;
        float a = 0.0f, b = 0.0f; /* store_rows' order: 0 + slice 0 + slice 1 */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            gemv_stream::cp_wait<S - 2>(); /* tasks t + 2h and t + 2h + 1 */
            __syncwarp();                  /* the scale and bias rows came through other lanes' copies */
            tile<K, NSP> tl;
            tile_pair(tl, ring + ((t + 2 * h) % S) * gemv_ring::TASK, ring + ((t + 2 * h + 1) % S) * gemv_ring::TASK, g, c);
            __syncwarp(); /* every lane has read both slots before they are refilled */
            issue();
            issue();
            float ya, yb;
            tl.dot(bf, xs, down, h, g, c, ya, yb);
            a += ya, b += yb;
        }
        if (c == 0) {
            y[r] = a, y[r + 8] = b;
            if (pa.key) kb = max(kb, max(row_key(a, r), row_key(b, r + 8)));
        }
    }
    gemv_stream::cp_wait<0>();
    if (!pa.key) return;
    kb = lcs::warp_reduce(kb, lcs::op_max_u64());
    if (lane == 0) best[warp] = kb;
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll
        for (int w = 1; w < NW; w++) kb = max(kb, best[w]);
        take_best(pa, kb);
    }
}

constexpr int RING_S = 4; /* task slots a warp: 8 x 4 x 4.6 KB of rings a block */
constexpr size_t RING_SMEM = (size_t)NW * RING_S * gemv_ring::TASK;

} // namespace

/* where gemv.cu's pick_dense runs launch_gemv<2048, 8, 4, 2>: the same logits */
extern "C" int lc_lm_head_greedy_ok(const lc_qmat *W) { return W->n_mat == 1 && lc_gemv_tq_head(W); }

/* Whether the ring form fits: its rings in one block an SM, W of the greedy form's shape */
static bool ring_fits(const lc_qmat *W) {
    static int set = 0; /* 1 yes, -1 no */
    if (!set) {
        /* the rings, x's digits (bf) and 2 KB for the kernel's other static arrays (xs, scratch, best: 704 B) */
        set = RING_SMEM + sizeof(uint4) * (NSPAN + 1) * 2 * SLOTS + 2048 <=
                          (size_t)gemv_stream::device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>() &&
                      cudaFuncSetAttribute(lm_head_ring_kernel<RING_S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)RING_SMEM) == cudaSuccess
                  ? 1
                  : -1;
        (void)cudaGetLastError(); /* a refused attribute leaves no error behind */
    }
    return set > 0 && lc_lm_head_greedy_ok(W);
}

static cudaError_t launch_ring(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits,
                               const pick_args &pa, cudaStream_t st) {
    return launch_k(lm_head_ring_kernel<RING_S>, dim3(gemv_stream::sm_count()), dim3(NT), RING_SMEM, st, true, *W, h, norm_w,
                    eps, logits, pa);
}

extern "C" int lc_lm_head_ring_on(const lc_qmat *W, int try_bits) { return (try_bits & LC_TRY_HRING) && ring_fits(W); }

extern "C" cudaError_t lc_lm_head_greedy(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits,
                                         unsigned long long *key, int32_t *out, const int32_t *stop_ids, int n_stop,
                                         int advance_pos, int ring, lc_ctrl *ctrl, cudaStream_t st) {
    if (!lc_lm_head_greedy_ok(W) || (ring && !ring_fits(W))) return cudaErrorNotSupported;
    const pick_args pa = {key, out, stop_ids, n_stop, advance_pos, ctrl};
    if (ring) return launch_ring(W, h, norm_w, eps, logits, pa, st);
    return launch_k(lm_head_greedy_kernel, dim3(W->rows / (16 * RB)), dim3(NT), 0, st, true, *W, h, norm_w, eps, logits, pa);
}

/* The logits alone (the sampler's step, a prefill's last row): the ring form
 * under LILAC_DECODE_TRY's hring where it fits, else lc_gemv_rms */
extern "C" cudaError_t lc_lm_head(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *logits,
                                  const lc_ctrl *ctrl, cudaStream_t st) {
    if (!lc_lm_head_ring_on(W, lc_decode_try())) return lc_gemv_rms(W, h, norm_w, eps, logits, nullptr, ctrl, st);
    lc_decode_try_note(LC_TRY_HRING);
    const pick_args pa = {nullptr, nullptr, nullptr, 0, 0, const_cast<lc_ctrl *>(ctrl)}; /* no pick: ctrl only read */
    return launch_ring(W, h, norm_w, eps, logits, pa, st);
}
