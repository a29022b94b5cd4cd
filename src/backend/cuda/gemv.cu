/* gemv.cu — batch-1 quantised matrix-vector products (decode projections,
 * lm_head).  One warp owns 32/LPR rows at a time; the block's 8 warps walk
 * the block's rows; the activations stay in registers (see qdot.cuh). */
#include "backend/cuda/qdot.cuh"

namespace {

constexpr int WARPS = 8;

constexpr int UNROLL = 4; /* rows whose loads a warp issues before computing */

// y[r] = residual[r] + W_mat[r, :] . x  for rows [blockIdx.x * rows_per_block, ...)
// With norm_w, x is RMSNorm(x) * norm_w, computed by every block (and
// written to xn_out by block 0 when xn_out is set).
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(WARPS * 32) gemv_kernel(lc_qmat W, int mat, const float *__restrict__ x,
                                                          const float *__restrict__ norm_w, float eps,
                                                          float *__restrict__ xn_out, float *__restrict__ y,
                                                          const float *__restrict__ residual, int rows_per_block,
                                                          const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR; /* rows a warp computes at once */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % LPR;
    Q q;
    if (norm_w) {
        __shared__ float scratch[32];
        q.load_x_norm(x, norm_w, block_rms(x, norm_w, Q::COLS, eps, xn_out, scratch), sub);
    } else {
        q.load_x(x, sub);
    }
    const int r0 = blockIdx.x * rows_per_block;
    for (int g = warp * UNROLL; g * RPW < rows_per_block; g += WARPS * UNROLL) {
        typename Q::chunk c[UNROLL];
        int r[UNROLL];
        bool ok[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int local = (g + u) * RPW + lane / LPR;
            r[u] = r0 + local;
            ok[u] = r[u] < W.rows && local < rows_per_block;
            if (ok[u]) Q::fetch(W, mat, r[u], sub, c[u]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            float acc = ok[u] ? q.dot(c[u]) : 0.0f;
            acc = Q::reduce(acc);
            if (ok[u] && sub == 0) y[r[u]] = residual ? residual[r[u]] + acc : acc;
        }
    }
}

template <int BITS, int CPL, int LPR>
cudaError_t launch(const lc_qmat *W, int mat, const float *x, const float *norm_w, float eps, float *xn_out, float *y,
                   const float *residual, const lc_ctrl *ctrl, cudaStream_t st) {
    constexpr int RPW = 32 / LPR, STEP = WARPS * RPW;
    /* About two blocks per SM of a 132-SM part, rows in whole warp passes;
     * small matrices get one row per warp so more SMs pull their bytes. */
    int rpb = (W->rows + 263) / 264;
    rpb = (rpb + STEP - 1) / STEP * STEP;
    const int grid = (W->rows + rpb - 1) / rpb;
    gemv_kernel<BITS, CPL, LPR><<<grid, WARPS * 32, 0, st>>>(*W, mat, x, norm_w, eps, xn_out, y, residual, rpb, ctrl);
    return cudaGetLastError();
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
