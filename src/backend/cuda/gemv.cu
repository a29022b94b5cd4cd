/* gemv.cu — batch-1 quantised matrix-vector products (decode projections,
 * lm_head).  One warp owns 32/LPR rows at a time; the block's 8 warps walk
 * the block's rows; the activations stay in registers (see qdot.cuh). */
#include "backend/cuda/qdot.cuh"

namespace {

constexpr int WARPS = 8;

constexpr int UNROLL = 4; /* rows whose loads a warp issues before computing */

// y[r] = residual[r] + W_mat[r, :] . x  for rows [blockIdx.x * rows_per_block, ...)
// With norm_w, x is RMSNorm(x) * norm_w, computed by every warp (and
// written to xn_out by the first warp when xn_out is set).
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(WARPS * 32, CPL <= 2 ? 2 : 1) gemv_kernel(lc_qmat W, int mat, const float *__restrict__ x,
                                                          const float *__restrict__ norm_w, float eps,
                                                          float *__restrict__ xn_out, float *__restrict__ y,
                                                          const float *__restrict__ residual, int rows_per_block,
                                                          const lc_ctrl *ctrl) {
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR;                /* rows a warp computes at once */
    constexpr int U = CPL >= 2 ? 2 : UNROLL;     /* keep long rows within the register budget */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % LPR;
    const int r0 = blockIdx.x * rows_per_block;
    typename Q::chunk c[U];
    int r[U];
    bool ok[U];
    auto fetch_group = [&](int g) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int local = (g + u) * RPW + lane / LPR;
            r[u] = r0 + local;
            ok[u] = r[u] < W.rows && local < rows_per_block;
            if (ok[u]) Q::fetch(W, mat, r[u], sub, c[u]);
        }
    };
    int g = warp * U;
    fetch_group(g); /* weights never change: load them before the predecessor finishes */
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    Q q;
    if (norm_w) q.load_x_rms(x, norm_w, eps, sub, blockIdx.x == 0 && warp == 0 ? xn_out : nullptr);
    else q.load_x(x, sub);
    for (; g * RPW < rows_per_block; g += WARPS * U) {
        float acc[U];
        int rr[U];
        bool okk[U];
#pragma unroll
        for (int u = 0; u < U; u++) acc[u] = ok[u] ? q.dot(c[u]) : 0.0f, rr[u] = r[u], okk[u] = ok[u];
        fetch_group(g + WARPS * U); /* the next rows' loads overlap this group's reductions */
#pragma unroll
        for (int u = 0; u < U; u++) {
            const float a = Q::reduce(acc[u]);
            if (okk[u] && sub == 0) y[rr[u]] = residual ? residual[rr[u]] + a : a;
        }
    }
}

// Split-K form for long rows (4096 inputs: attention o_proj, DeltaNet
// out_proj): the two warps of a pair take the two halves of each row, so a
// lane keeps half the activations in registers, occupancy doubles, and the
// halves' sums meet in shared memory.  Q covers half a row.
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(WARPS * 32, 2) gemv_ks_kernel(lc_qmat W, int mat, const float *__restrict__ x,
                                                                float *__restrict__ y, const float *__restrict__ residual,
                                                                int rows_per_block, const lc_ctrl *ctrl) {
    using Q = qdot<BITS, CPL, LPR>;
    static_assert(LPR == 32, "split-K rows take whole warps");
    constexpr int U = 2, PAIRS = WARPS / 2;
    __shared__ float part[PAIRS][U];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, pair = warp >> 1, half = warp & 1;
    const int c0 = half * (Q::COLS / Q::EPC);
    const int r0 = blockIdx.x * rows_per_block;
    typename Q::chunk c[U];
    int r[U];
    bool ok[U];
    auto fetch_group = [&](int g) {
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int local = g + u;
            r[u] = r0 + local;
            ok[u] = r[u] < W.rows && local < rows_per_block;
            if (ok[u]) Q::fetch(W, mat, r[u], lane, c[u], c0);
        }
    };
    int g = pair * U;
    fetch_group(g);
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    Q q;
    q.load_x(x + half * Q::COLS, lane);
    for (; g < rows_per_block; g += PAIRS * U) {
        float acc[U];
        int rr[U];
        bool okk[U];
#pragma unroll
        for (int u = 0; u < U; u++) acc[u] = ok[u] ? q.dot(c[u]) : 0.0f, rr[u] = r[u], okk[u] = ok[u];
        fetch_group(g + PAIRS * U);
#pragma unroll
        for (int u = 0; u < U; u++) acc[u] = Q::reduce(acc[u]);
        if (half && lane == 0)
#pragma unroll
            for (int u = 0; u < U; u++) part[pair][u] = acc[u];
        __syncthreads();
        if (!half && lane == 0)
#pragma unroll
            for (int u = 0; u < U; u++)
                if (okk[u]) y[rr[u]] = (residual ? residual[rr[u]] : 0.0f) + acc[u] + part[pair][u];
        __syncthreads();
    }
}

template <int BITS, int CPL, int LPR>
cudaError_t launch_ks(const lc_qmat *W, int mat, const float *x, float *y, const float *residual, const lc_ctrl *ctrl,
                      cudaStream_t st) {
    constexpr int STEP = (WARPS / 2) * 2; /* pairs x rows per pair and pass */
    int rpb = (W->rows + 263) / 264;
    rpb = (rpb + STEP - 1) / STEP * STEP;
    const int grid = (W->rows + rpb - 1) / rpb;
    return lc_launch(gemv_ks_kernel<BITS, CPL, LPR>, dim3(grid), dim3(WARPS * 32), 0, st, *W, mat, x, y, residual, rpb, ctrl);
}

template <int BITS, int CPL, int LPR>
cudaError_t launch(const lc_qmat *W, int mat, const float *x, const float *norm_w, float eps, float *xn_out, float *y,
                   const float *residual, const lc_ctrl *ctrl, cudaStream_t st) {
    /* 4096-input rows without a fused norm: halves on warp pairs */
    if constexpr (BITS == 4 && CPL == 4 && LPR == 32)
        if (!norm_w) return launch_ks<4, 2, 32>(W, mat, x, y, residual, ctrl, st);
    constexpr int RPW = 32 / LPR, STEP = WARPS * RPW;
    /* About two blocks per SM of a 132-SM part, rows in whole warp passes;
     * small matrices get one row per warp so more SMs pull their bytes. */
    int rpb = (W->rows + 263) / 264;
    rpb = (rpb + STEP - 1) / STEP * STEP;
    const int grid = (W->rows + rpb - 1) / rpb;
    return lc_launch(gemv_kernel<BITS, CPL, LPR>, dim3(grid), dim3(WARPS * 32), 0, st, *W, mat, x, norm_w, eps, xn_out, y,
                     residual, rpb, ctrl);
}

} // namespace

static cudaError_t supported(int bits, int cols) {
#define OK_(B, C, L) return cudaSuccess;
    LC_QDOT_DISPATCH(bits, cols, OK_);
#undef OK_
}

extern "C" int lc_gemv_supported(int bits, int cols) { return supported(bits, cols) == cudaSuccess; }

extern "C" cudaError_t lc_gemv(const lc_qmat *W, int mat, const float *x, float *y, const float *residual,
                               const lc_ctrl *ctrl, cudaStream_t st) {
#define CALL_(B, C, L) return launch<B, C, L>(W, mat, x, nullptr, 0.0f, nullptr, y, residual, ctrl, st);
    LC_QDOT_DISPATCH(W->bits, W->cols, CALL_);
#undef CALL_
}

extern "C" cudaError_t lc_gemv_rms(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *y,
                                   float *xn_out, const lc_ctrl *ctrl, cudaStream_t st) {
#define CALL_(B, C, L) return launch<B, C, L>(W, 0, h, norm_w, eps, xn_out, y, nullptr, ctrl, st);
    LC_QDOT_DISPATCH(W->bits, W->cols, CALL_);
#undef CALL_
}
