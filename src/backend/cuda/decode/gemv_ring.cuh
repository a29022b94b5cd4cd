/* gemv_ring.cuh — the dense decode GEMV as one block per SM in under half of
 * the SM (issue 14; bench/kernels/persist_chain_test's variant G, measured
 * there against the tq kernels of gemv_tq.cuh):
 *   ring_gemv   y = residual + W . x, x optionally RMSNorm(x) * norm_w.
 * gemv_tq.cuh's tq_gemv fills the SMs with blocks that hold their codes in
 * registers (92% of the register file for the GDN in_proj), so the next
 * kernel of the decode graph finds no room until those blocks retire, and
 * its weights only start streaming then.  Here each SM runs one block of 8
 * warps at <= 128 registers (123) and ~97-99 KB of shared memory: the next
 * kernel's block is resident beside it (PDL) and its own weights are already
 * in flight while this one computes.  gemv.cu has the H200 timings.
 *
 * Tiles and numerics are gemv_tq.cuh's (u8 codes x s8 digits of x on
 * mma.m16n8k32, exact int32 sums): a task is one warp tile, 16 rows x 512
 * inputs (4 spans), copied by cp.async into a 2-slot ring per warp as
 * [span][row][64 B] (a quarter-warp reads 128 contiguous bytes) plus the 16
 * rows' 8 scales and 8 biases.  Block b owns row blocks [b NRB / G,
 * (b + 1) NRB / G); their KS = K / 512 slices are dealt round-robin to the
 * warps (8 % KS == 0: warp w keeps slice w % KS, turns that slice of x into
 * digits itself and loads its fragments once), partial sums meet in shared
 * memory and are summed in slice order (deterministic).  PDL as the other
 * GEMVs: the first two tasks of every warp are requested before
 * lc_pdl_wait(), nothing is written before it, and
 * lc_pdl_launch_dependents() follows it. */
#ifndef LILAC_CUDA_GEMV_RING_CUH
#define LILAC_CUDA_GEMV_RING_CUH

#include "backend/cuda/decode/gemv_tq.cuh"

namespace {
namespace gemv_ring {

using gemv_stream::cp16;
using gemv_stream::cp_commit;
using gemv_stream::cp_wait;

constexpr int NSP = 4, WARPS = 8, S = 2;        /* spans per task, warps, ring slots per warp */
constexpr int CODES = NSP * 16 * 64;            /* 4,096 B of codes a task */
constexpr int TASK = CODES + 2 * 16 * 16;       /* + 16 rows of 8 scales and of 8 biases */
constexpr int RB_MAX = 8;                       /* row blocks a block may own (the partial sums' room) */

/* Every warp turns its own K slice of x into digits (prep_x_warp: its own
 * scale, no block barrier before the tasks; the RMSNorm factor is applied
 * to the sums at the store).  H200, against the block's prep_x (one binary,
 * lilac bench): decode at 4K 661.1 against 642.0 tokens/s, of which ~16 us
 * a step was that A/B's lm_head on another kernel, so ~29 us a step. */
constexpr int BF_WORDS = WARPS * (NSP + 1) * 2 * gemv_tq::SLOTS; /* a slice and the zero span per warp */
template <int K>
constexpr size_t smem_bytes() { /* rings, x's digits and group sums, scratch, split-K partials */
    return (size_t)WARPS * S * TASK + BF_WORDS * 16 + (WARPS * 8 + 32 + (K / 512) * RB_MAX * 16) * 4;
}

/* One task into a slot: rows r .. r + 15 of a K-input matrix (codes w,
 * scales s, biases b at row 0), slice k.  Lane (g, c) copies the code pieces
 * it later reads; lanes 0-15 a row's scales, 16-31 its biases.  Plain
 * cp.async: with the L2::256B prefetch hint (585e5d7, +1.2% on an H100) an
 * H200 decoded 770.2 against 34aa1e9's 829.0 tokens/s at 4K in one call
 * (2026-12-06, docs/PERFORMANCE.md), so the hint went before an H200 had
 * run it alone. */
template <int K>
__device__ __forceinline__ void copy_task(unsigned char *slot, const uint32_t *w, const uint16_t *s, const uint16_t *b, size_t r,
                                          int k) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint4 *src = reinterpret_cast<const uint4 *>(w + (r + g + 8 * h) * (K / 8)) + k * NSP * 4 + c;
#pragma unroll
        for (int m = 0; m < NSP; m++) cp16(slot + m * 1024 + (g + 8 * h) * 64 + c * 16, src + 4 * m);
    }
    const int row = lane & 15;
    cp16(slot + CODES + (lane >> 4) * 256 + row * 16, (lane < 16 ? s : b) + (r + row) * (K / 64) + k * NSP * 2);
}

/* One warp's ring over its tasks of the block's row blocks (task t = rb
 * offset * KS + slice, t = warp, warp + WARPS, ...); one cp.async group per
 * issue (empty past the last task), so cp_wait<S - 1> finds the oldest complete. */
template <int K>
struct ring {
    static constexpr int KS = K / (128 * NSP);
    unsigned char *base;
    int rb0, n, issued, used;

    __device__ void issue(const lc_qmat &W) {
        if (issued < n) {
            const int t = (threadIdx.x >> 5) + issued * WARPS;
            copy_task<K>(base + (issued % S) * TASK, W.w, W.s, W.b, (size_t)(rb0 + t / KS) * 16, t % KS);
            issued++;
        }
        cp_commit();
    }
    __device__ const unsigned char *next_full() {
        cp_wait<S - 1>();
        __syncwarp(); /* the scale and bias rows came through other lanes' copies */
        return base + (used++ % S) * TASK;
    }
};

/* The slot's task as gemv_tq's tile */
template <int K>
__device__ __forceinline__ void tile_from(gemv_tq::tile<K, NSP> &tl, const unsigned char *slot, int g, int c) {
#pragma unroll
    for (int m = 0; m < NSP; m++) {
        tl.qa[m] = *reinterpret_cast<const uint4 *>(slot + m * 1024 + g * 64 + c * 16);
        tl.qb[m] = *reinterpret_cast<const uint4 *>(slot + m * 1024 + (g + 8) * 64 + c * 16);
    }
    const uint32_t *sa = reinterpret_cast<const uint32_t *>(slot + CODES + g * 16); /* row g; + 32: row g + 8 */
#pragma unroll
    for (int m = 0; m < NSP; m++) tl.sa[m] = sa[m], tl.sb[m] = sa[32 + m];
    tl.ba[0] = sa[64 + c], tl.bb[0] = sa[96 + c]; /* the biases: word c (NSP = 4, one per lane) */
}

/* W.cols == K, W.rows a multiple of 16 with at most RB_MAX row blocks per
 * block (the launcher checks); a single matrix (mat_view).  LATE (the
 * workshops only, bench/kernels/moe_cluster_test's early routing): no wait
 * before the work, for a kernel whose inputs were written before its
 * predecessor (which has waited), so that it runs beside that predecessor;
 * it waits for it before its stores and only then lets its successor
 * launch, so the successor may read the predecessor's output before its
 * own wait. */
template <int K, bool LATE = false>
__global__ void __launch_bounds__(WARPS * 32, 2)
    ring_gemv(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps, float *y,
              const float *residual, const lc_ctrl *ctrl) { /* y may be residual (h += W . x) */
    constexpr int KS = K / (128 * NSP), KW = 128 * NSP; /* slices, inputs per slice */
    static_assert(WARPS % KS == 0, "a warp keeps one slice");
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + WARPS * S * TASK);
    float *xs = reinterpret_cast<float *>(bf + BF_WORDS), *scratch = xs + WARPS * 8, *part = scratch + 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3, k = warp % KS;
    const int nrb = W.rows / 16;
    const int rb0 = (int)((long long)blockIdx.x * nrb / gridDim.x), rb1 = (int)((long long)(blockIdx.x + 1) * nrb / gridDim.x);
    const int nt = (rb1 - rb0) * KS, nrow = (rb1 - rb0) * 16;
    ring<K> rg;
    rg.base = smem + (size_t)warp * S * TASK, rg.rb0 = rb0, rg.issued = 0, rg.used = 0;
    rg.n = nt > warp ? (nt - 1 - warp) / WARPS + 1 : 0;
    for (int i = 0; i < S; i++) rg.issue(W); /* weights: before the predecessor finishes */
    bool stopped;
    if constexpr (!LATE) {
        stopped = lc_pdl_wait_stop(ctrl);
        lc_pdl_launch_dependents();
    } else {
        stopped = LC_STOPPED(ctrl);
    }
    if (stopped) {
        cp_wait<0>(); /* no copy lands in a block that has left */
        return;
    }
    /* the residual, requested before x's digits (rows <= threads: the launcher checks) */
    const float res = residual && threadIdx.x < nrow ? residual[rb0 * 16 + threadIdx.x] : 0.0f;
    /* the warp's slice of x as digits (its own buffer, group sums, scale), then as B fragments */
    uint4 *bw = bf + warp * (NSP + 1) * 2 * gemv_tq::SLOTS;
    float *xw = xs + warp * 8, ss;
    const float down = gemv_tq::prep_x_warp<KW>(x + k * KW, bw, xw, norm_w ? norm_w + k * KW : nullptr, &ss);
    if (norm_w && warp < KS && lane == 0) scratch[warp] = ss; /* one warp per slice */
    __syncwarp();
    uint4 xb[NSP][2];
    gemv_tq::tile<KW, NSP>::x_frags(bw, 0, g, c, xb);
    for (int i = 0; i < rg.n; i++) {
        const int rbo = (warp + i * WARPS) / KS;
        gemv_tq::tile<K, NSP> tl;
        tile_from<K>(tl, rg.next_full(), g, c);
        __syncwarp(); /* every lane has read the slot before it is refilled */
        rg.issue(W);
        float ya, yb;
        tl.dot_x(xb, xw, down, 0, g, c, ya, yb);
        if (c == 0) part[(k * RB_MAX + rbo) * 16 + g] = ya, part[(k * RB_MAX + rbo) * 16 + g + 8] = yb;
    }
    cp_wait<0>();
    __syncthreads();
    if constexpr (LATE) {
        lc_pdl_wait();
        lc_pdl_launch_dependents();
    }
    if (threadIdx.x < nrow) {
        float v = part[threadIdx.x]; /* slice 0, row block threadIdx.x / 16 */
#pragma unroll
        for (int kk = 1; kk < KS; kk++) v += part[kk * RB_MAX * 16 + threadIdx.x];
        if (norm_w) { /* RMSNorm(x) . w = rr (x * nw) . w */
            float sq = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) sq += scratch[kk];
            v *= rsqrtf(sq / (float)K + eps);
        }
        y[rb0 * 16 + threadIdx.x] = res + v;
    }
}

/* Whether ring_gemv takes W (K inputs) on this GPU: whole row blocks, at most
 * RB_MAX of them per SM, two blocks' shared memory per SM. */
template <int K>
static bool fits(const lc_qmat &W) {
    const int sms = gemv_stream::sm_count(), nrb = W.rows / 16;
    return W.cols == K && W.bits == 4 && W.rows % 16 == 0 && (nrb + sms - 1) / sms <= RB_MAX &&
           2 * (smem_bytes<K>() + 1024) <= (size_t)gemv_stream::device_attr<cudaDevAttrMaxSharedMemoryPerMultiprocessor>();
}

template <int K>
static cudaError_t launch(const lc_qmat &W, const float *x, const float *norm_w, float eps, float *y, const float *residual,
                          const lc_ctrl *ctrl, cudaStream_t st, bool pdl = true) {
    static bool set = false;
    if (!fits<K>(W)) return cudaErrorInvalidValue;
    if (!set) {
        const cudaError_t err = cudaFuncSetAttribute(ring_gemv<K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes<K>());
        if (err) return err;
        set = true;
    }
    return gemv_stream::launch_k(ring_gemv<K>, dim3(gemv_stream::sm_count()), dim3(WARPS * 32), smem_bytes<K>(), st, pdl, W, x,
                                 norm_w, eps, y, residual, ctrl);
}

} // namespace gemv_ring
} // namespace

#endif
