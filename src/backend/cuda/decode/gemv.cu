/* gemv.cu — batch-1 quantised matrix-vector products (decode projections,
 * lm_head).  LPR lanes own a row (32/LPR rows per warp pass); the block's 8
 * warps walk the block's rows; the activations sit in shared memory.  At the
 * 4-bit shapes where bench/kernels/gemv_test and gemv_mma_test measured them
 * faster, the launchers run gemv_ring.cuh's, gemv_tq.cuh's or
 * gemv_stream.cuh's kernels instead (pick_dense below; LILAC_GEMV=engine
 * keeps these kernels everywhere, =stream leaves out gemv_tq.cuh and
 * gemv_ring.cuh, =tq gemv_ring.cuh). */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/decode/gemv_ring.cuh" /* gemv_tq.cuh, gemv_stream.cuh */

namespace {

constexpr int WARPS = 8;

// y[r] = residual[r] + W_mat[r, :] . x  for rows [blockIdx.x * rows_per_block, ...)
// With norm_w, x is RMSNorm(x) * norm_w (computed by every block; block 0
// also writes it to xn_out when set).
//
// The activations live in shared memory, read once per block (16 KB of L2
// traffic per block instead of per warp) and swizzled: float4 q of chunk c
// sits at q * NCH + c, so the lanes of a warp, which read the same q of
// consecutive chunks, hit distinct banks.  Registers go to codes: each warp
// has U rows' loads in flight, issued before the previous rows are reduced,
// and the first rows' before the predecessor kernel has finished (weights
// never change).
template <int BITS, int CPL, int LPR, int U>
__global__ void __launch_bounds__(WARPS * 32, 2) gemv_kernel(lc_qmat W, int mat, const float *__restrict__ x,
                                                             const float *__restrict__ norm_w, float eps,
                                                             float *__restrict__ xn_out, float *__restrict__ y,
                                                             const float *__restrict__ residual, int rows_per_block,
                                                             const lc_ctrl *ctrl) {
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int EPC = Q::EPC, COLS = Q::COLS;
    constexpr int RPW = 32 / LPR;            /* rows a warp computes at once */
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[COLS / EPC];
    __shared__ float scratch[32];
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
    fetch_group(g);
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;

    load_x_smem<COLS, EPC>(x, norm_w, eps, xn_out, xs4, xcs, scratch);

    for (; g * RPW < rows_per_block; g += WARPS * U) {
        float acc[U];
        dot_rows<BITS, CPL, LPR, U>(c, ok, sub, xs4, xcs, acc);
        int rr2[U];
        bool okk[U];
#pragma unroll
        for (int u = 0; u < U; u++) rr2[u] = r[u], okk[u] = ok[u];
        fetch_group(g + WARPS * U); /* the next rows' loads overlap this group's reductions */
#pragma unroll
        for (int u = 0; u < U; u++) {
            const float a = Q::reduce(acc[u]);
            if (okk[u] && sub == 0) y[rr2[u]] = residual ? residual[rr2[u]] + a : a;
        }
    }
}

template <int BITS, int CPL, int LPR>
cudaError_t launch(const lc_qmat *W, int mat, const float *x, const float *norm_w, float eps, float *xn_out, float *y,
                   const float *residual, const lc_ctrl *ctrl, cudaStream_t st) {
    constexpr int U = CPL >= 4 ? 2 : 4; /* codes in flight per warp within the register budget */
    constexpr int RPW = 32 / LPR, STEP = WARPS * RPW;
    /* About two blocks per SM of a 132-SM part, rows in whole warp passes;
     * small matrices get one row per warp so more SMs pull their bytes. */
    int rpb = (W->rows + 263) / 264;
    rpb = (rpb + STEP - 1) / STEP * STEP;
    const int grid = (W->rows + rpb - 1) / rpb;
    return lc_launch(gemv_kernel<BITS, CPL, LPR, U>, dim3(grid), dim3(WARPS * 32), 0, st, *W, mat, x, norm_w, eps, xn_out,
                     y, residual, rpb, ctrl);
}

} // namespace

static cudaError_t supported(int bits, int cols) {
#define OK_(B, C, L) return cudaSuccess;
    LC_QDOT_DISPATCH(bits, cols, OK_);
#undef OK_
}

extern "C" int lc_gemv_supported(int bits, int cols) { return supported(bits, cols) == cudaSuccess; }

/* LILAC_GEMV (read once): "engine" = the qdot kernels at every shape,
 * "stream" = no integer tensor-core kernels, "tq" = no gemv_ring.cuh; unset
 * or anything else = the choice by shape.
 * lc_gemv_set_kernels overrides. */
static int g_kernels = -1;
extern "C" int lc_gemv_kernels(void) {
    if (g_kernels < 0) {
        const char *s = getenv("LILAC_GEMV");
        g_kernels = !s                          ? LC_GEMV_AUTO
                    : strcmp(s, "engine") == 0 ? LC_GEMV_ENGINE
                    : strcmp(s, "stream") == 0 ? LC_GEMV_STREAM
                    : strcmp(s, "tq") == 0     ? LC_GEMV_TQ
                                               : LC_GEMV_AUTO;
    }
    return g_kernels;
}
extern "C" void lc_gemv_set_kernels(int k) {
    g_kernels = k == LC_GEMV_ENGINE || k == LC_GEMV_STREAM || k == LC_GEMV_TQ ? k : LC_GEMV_AUTO;
}

/* The tensor-core, streaming or persistent kernel for W, from the H200
 * graph timings of gemv_mma_test and gemv_test (40 launches with PDL,
 * weights beyond L2; qdot kernel -> stream/persist -> tq):
 *   first gemv_ring.cuh's one block per SM where it fits (LILAC_GEMV=tq
 *   leaves it out): in_proj 7.09 -> 6.04 us, q|k|v 6.59 -> 5.13, out_proj
 *   3.49 -> 2.93, the in_proj -> out_proj pair 12.88 -> 9.00 (the next
 *   kernel's weights stream beside it); decode at 4K 600.2 -> 648.9 tok/s
 *   (b878373), 661.1 with each warp making its own slice's digits;
 *   2048 inputs, < 100,000 rows (GDN in_proj 12352, attention q|k|v 9216):
 *        tq NSP=4 RB=2; in_proj 9.51 -> 8.69 -> 7.13 us, q|k|v 9.06 -> 7.59 -> 6.70
 *   2048 inputs, >= 100,000 rows (lm_head 248320): tq NSP=8 RB=4, 123.8 -> 97.0 -> 75.0 us
 *   4096 inputs, <= 4096 rows (out_proj / o_proj 2048): stream R=2, 5.25 -> 3.49 us
 *        (tq 3.86: the x prologue of 4,096 inputs per block outweighs the loop)
 * The tq kernels do not write xn_out; with it, and for other shapes (fewer
 * rows, other widths, 8 bits: the tiny fixture; GPUs without 225 KB of
 * shared memory per block) the qdot kernels run: returns false and launches
 * nothing. */
/* The tq, ring and persistent kernels read codes, scales and biases 16 bytes at a time */
static bool aligned16(const lc_qmat *W) { return (((uintptr_t)W->w | (uintptr_t)W->s | (uintptr_t)W->b) & 15) == 0; }

/* Whether pick_dense runs gemv_ring.cuh's kernel for matrix mat of W (without xn_out) */
static bool ring_picked(const lc_qmat *W, int mat) {
    if (lc_gemv_kernels() != LC_GEMV_AUTO || W->bits != 4 || !aligned16(W) ||
        !((W->cols == 2048 && W->rows >= 8192 && W->rows < 100000) || (W->cols == 4096 && W->rows <= 4096)))
        return false;
    const lc_qmat M = gemv_stream::mat_view(*W, mat);
    return W->cols == 2048 ? gemv_ring::fits<2048>(M) : gemv_ring::fits<4096>(M);
}

/* Whether pick_dense runs tq NSP=8 RB=4 (the lm_head's kernel) for W without xn_out: lm_head.cu's fused
 * greedy pick runs the same kernel body only where this holds, so its logits are these bit for bit */
static bool tq_head_picked(const lc_qmat *W) {
    const int kernels = lc_gemv_kernels();
    return (kernels == LC_GEMV_AUTO || kernels == LC_GEMV_TQ) && W->bits == 4 && aligned16(W) &&
           W->cols == 2048 && W->rows >= 100000 && W->rows % 64 == 0;
}
extern "C" int lc_gemv_tq_head(const lc_qmat *W) { return tq_head_picked(W); }

static bool pick_dense(const lc_qmat *W, int mat, const float *x, const float *norm_w, float eps, float *xn_out, float *y,
                       const float *residual, const lc_ctrl *ctrl, cudaStream_t st, cudaError_t *err) {
    using namespace gemv_stream;
    const int kernels = lc_gemv_kernels();
    if (kernels == LC_GEMV_ENGINE || W->bits != 4 || !aligned16(W))
        return false;
    if (!xn_out && ring_picked(W, mat)) {
        const lc_qmat M = mat_view(*W, mat);
        *err = W->cols == 2048 ? gemv_ring::launch<2048>(M, x, norm_w, eps, y, residual, ctrl, st)
                               : gemv_ring::launch<4096>(M, x, norm_w, eps, y, residual, ctrl, st);
        return true;
    }
    if ((kernels == LC_GEMV_AUTO || kernels == LC_GEMV_TQ) && W->cols == 2048 && !xn_out && W->rows >= 8192) {
        const lc_qmat M = mat_view(*W, mat);
        if (W->rows < 100000 && W->rows % 32 == 0) {
            *err = gemv_tq::launch_gemv<2048, 4, 2, 3>(M, x, norm_w, eps, y, residual, ctrl, st);
            return true;
        }
        if (tq_head_picked(W)) {
            *err = gemv_tq::launch_gemv<2048, 8, 4, 2>(M, x, norm_w, eps, y, residual, ctrl, st);
            return true;
        }
    }
    if (W->cols == 2048 && W->rows >= 8192 && persist_fits<2, 2, 4>() && persist_fits<2, 4, 3>()) {
        *err = W->rows < 10240 ? launch_persist<2, 2, 4, false>(*W, mat, x, norm_w, eps, xn_out, y, residual, ctrl, st)
                               : launch_persist<2, 4, 3, false>(*W, mat, x, norm_w, eps, xn_out, y, residual, ctrl, st);
        return true;
    }
    if (W->cols == 4096 && W->rows <= 4096) {
        *err = launch_stream<4, 2, 2, false>(*W, mat, x, norm_w, eps, xn_out, y, residual, ctrl, st);
        return true;
    }
    return false;
}

extern "C" cudaError_t lc_gemv(const lc_qmat *W, int mat, const float *x, float *y, const float *residual,
                               const lc_ctrl *ctrl, cudaStream_t st) {
    cudaError_t err;
    if (pick_dense(W, mat, x, nullptr, 0.0f, nullptr, y, residual, ctrl, st, &err)) return err;
#define CALL_(B, C, L) return launch<B, C, L>(W, mat, x, nullptr, 0.0f, nullptr, y, residual, ctrl, st);
    LC_QDOT_DISPATCH(W->bits, W->cols, CALL_);
#undef CALL_
}

extern "C" cudaError_t lc_gemv_rms(const lc_qmat *W, const float *h, const float *norm_w, float eps, float *y,
                                   float *xn_out, const lc_ctrl *ctrl, cudaStream_t st) {
    cudaError_t err;
    if (pick_dense(W, 0, h, norm_w, eps, xn_out, y, nullptr, ctrl, st, &err)) return err;
#define CALL_(B, C, L) return launch<B, C, L>(W, 0, h, norm_w, eps, xn_out, y, nullptr, ctrl, st);
    LC_QDOT_DISPATCH(W->bits, W->cols, CALL_);
#undef CALL_
}
