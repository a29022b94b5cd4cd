/* gemv_stream.cuh — the decode GEMVs that keep more of a matrix in flight
 * than the qdot kernels of gemv.cu / moe.cu (issue 14; measured in
 * bench/kernels/gemv_test.cu, which includes this file for its variants):
 *   stream_gemv     every weight load of a warp (R rows, 16 B of codes per
 *                   lane and load, ld.global.nc.L1::no_allocate) issued at
 *                   entry, a grid of one pass per warp, so (nearly) all of
 *                   the matrix is requested at once; x staged once per block
 *                   in shared memory;
 *   persist_gemv    a persistent grid (one PW-warp block per SM), each warp
 *                   walking tiles of R rows through an S-stage cp.async ring
 *                   in shared memory, the next tiles' codes in flight during
 *                   the current tile's math; x kept in registers (K <= 2048);
 *   stream_gate_up  the MoE gate/up + SwiGLU as stream_gemv, one warp per R
 *                   rows of both matrices of one expert slot;
 *   stream_down     the MoE down + combine + residual, 8 warps per block,
 *                   all 9 experts' codes of a lane requested at entry.
 * All are 4-bit (MLX codes, bf16 scale and bias per 64 inputs, the engine's
 * lc_qmat layout, no repack) with qdot.cuh's dequantisation and the same
 * results as the kernels they replace up to summation order: residual add,
 * fused RMSNorm (block 0 writes xn_out when set), LC_STOPPED after the wait.
 * PDL (common.cuh): before lc_pdl_wait() only weights (and, in the MoE, the
 * router's ids, as moe.cu documents) are read and nothing is written;
 * lc_pdl_launch_dependents() follows the wait.  EARLY = true (the workshop's
 * "early" designs only, never launched by the engine) triggers at entry
 * instead, which breaks the first rule and is not used in the decode graph.
 * Which kernel runs for which shape is gemv.cu's / moe.cu's choice. */
#ifndef LILAC_CUDA_GEMV_STREAM_CUH
#define LILAC_CUDA_GEMV_STREAM_CUH

#include "backend/cuda/qdot.cuh"

/* TU-local (an unnamed namespace around the named one): gemv.cu, moe.cu and
 * the workshop each get their own instances, registered with their own module. */
namespace {
namespace gemv_stream {

/* 16 B of codes, streamed: read once, so not kept in L1.  volatile keeps it
 * ahead of griddepcontrol.wait (also volatile asm). */
__device__ __forceinline__ uint4 ld_stream(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
__device__ __forceinline__ void cp16(void *sdst, const void *g) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(sdst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void prefetch_l2(const void *p, unsigned bytes) { /* sm_90 */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

/* lc_launch with the PDL attribute optional (the workshop times both). */
template <typename... KArgs, typename... Args>
static cudaError_t launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, bool pdl,
                            Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr, cfg.numAttrs = pdl ? 1 : 0;
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
    return err ? err : cudaGetLastError();
}

/* An attribute of the current device, asked once per attribute used here:
 * the SMs (the persistent grid) and the opt-in shared memory per block. */
template <cudaDeviceAttr A>
inline int device_attr() {
    static int n = -1;
    if (n < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&v, A, dev)) return 0;
        n = v;
    }
    return n;
}
inline int sm_count() {
    const int n = device_attr<cudaDevAttrMultiProcessorCount>();
    return n > 0 ? n : 132;
}

/* Matrix `mat` of a stack as a matrix of its own (the dense kernels take no
 * index: its 64-bit offset arithmetic alone cost stream_gemv 32 bytes of
 * spills). */
inline lc_qmat mat_view(const lc_qmat &W, int mat) {
    lc_qmat v = lc_qmat_rows(&W, mat * W.rows, W.rows); /* the stack's rows run on from one matrix to the next */
    v.n_mat = 1;
    return v;
}

/* ---- stream --------------------------------------------------------------- */
/* 4-bit, LPR = 32: lane l takes chunks l + 32 j (j < CPL) of each of its
 * warp's R rows; all R*CPL 16 B loads are issued before anything waits.
 * y[r] = residual[r] + W_mat[r] . x (W_mat: a mat_view), x optionally RMSNorm(x) * norm_w. */
constexpr int SW = 8; /* warps per stream block */
template <int CPL, int R, int MINB, bool EARLY>
__global__ void __launch_bounds__(SW * 32, MINB) stream_gemv(lc_qmat W, const float *__restrict__ x,
                                                            const float *__restrict__ norm_w, float eps,
                                                            float *__restrict__ xn_out, float *__restrict__ y,
                                                            const float *__restrict__ residual, const lc_ctrl *ctrl) {
    constexpr int COLS = 32 * 32 * CPL, NCH = 32 * CPL, G = COLS / LC_GROUP;
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[NCH];
    __shared__ float scratch[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int rb = blockIdx.x * SW * R, r0 = rb + warp * R;
    if (EARLY) { /* workshop only (see the top of the file) */
        lc_pdl_launch_dependents();
        if (threadIdx.x == 0) { /* the block's slice in one request each: codes, scales, biases */
            const int n = min(SW * R, W.rows - rb);
            prefetch_l2(qrow_w(W, 0, rb), (unsigned)n * COLS / 2);
            prefetch_l2(W.s + qrow_sb(W, 0, rb), (unsigned)n * G * 2);
            prefetch_l2(W.b + qrow_sb(W, 0, rb), (unsigned)n * G * 2);
        }
    }
    uint4 q[R][CPL];
    uint16_t s[R][CPL], b[R][CPL];
#pragma unroll
    for (int u = 0; u < R; u++) {
        const int r = r0 + u;
        if (r < W.rows) {
            const uint4 *w = reinterpret_cast<const uint4 *>(qrow_w(W, 0, r));
            const size_t sb = qrow_sb(W, 0, r);
#pragma unroll
            for (int j = 0; j < CPL; j++) {
                const int k = lane + 32 * j;
                q[u][j] = ld_stream(w + k);
                s[u][j] = __ldg(W.s + sb + k / 2);
                b[u][j] = __ldg(W.b + sb + k / 2);
            }
        }
    }
    const bool stopped = lc_pdl_wait_stop(ctrl);
    if (!EARLY) lc_pdl_launch_dependents();
    if (stopped) return;
    load_x_smem<COLS, 32>(x, norm_w, eps, xn_out, xs4, xcs, scratch);
    float acc[R];
#pragma unroll
    for (int u = 0; u < R; u++) acc[u] = 0.0f;
#pragma unroll
    for (int j = 0; j < CPL; j++) {
        float xv[32];
        const float xsum = x_chunk<COLS, 32>(xs4, xcs, lane + 32 * j, xv);
#pragma unroll
        for (int u = 0; u < R; u++) acc[u] = chunk_fma<4>(q[u][j], xv, s[u][j], b[u][j], xsum, acc[u]);
    }
#pragma unroll
    for (int u = 0; u < R; u++) {
        const float a = warp_sum(acc[u]);
        const int r = r0 + u;
        if (lane == 0 && r < W.rows) y[r] = residual ? residual[r] + a : a;
    }
}

template <int CPL, int R, int MINB, bool EARLY>
static cudaError_t launch_stream(const lc_qmat &W, int mat, const float *x, const float *norm_w, float eps, float *xn_out,
                                 float *y, const float *residual, const lc_ctrl *ctrl, cudaStream_t st, bool pdl = true) {
    const int grid = (W.rows + SW * R - 1) / (SW * R);
    return launch_k(stream_gemv<CPL, R, MINB, EARLY>, dim3(grid), dim3(SW * 32), 0, st, pdl, mat_view(W, mat), x, norm_w, eps,
                    xn_out, y, residual, ctrl);
}

/* ---- persist -------------------------------------------------------------- */
/* One block of PW warps per SM; warp gw walks tiles gw, gw + nw, ... of R
 * rows.  Each warp owns an S-stage ring: codes [R][NCH] uint4, then scales
 * and biases [R][G] bf16, filled by cp.async (16 B per lane) S-1 tiles
 * ahead.  With XREG the lane's x chunks live in registers for all tiles. */
constexpr int PW = 16;
template <int CPL, int R>
struct ptile {
    static constexpr int COLS = 1024 * CPL, NCH = 32 * CPL, G = COLS / LC_GROUP, P = G / 8; /* 16 B pieces of s per row */
    static constexpr int BYTES = R * NCH * 16 + 2 * R * G * 2;
};
template <int CPL, int R, int S>
static size_t persist_smem() {
    using T = ptile<CPL, R>;
    return T::COLS * 4 + T::NCH * 4 + 128 + (size_t)PW * S * T::BYTES;
}
/* Whether the device can give a block that much shared memory (the H200: 227 KB). */
template <int CPL, int R, int S>
static bool persist_fits() {
    return persist_smem<CPL, R, S>() <= (size_t)device_attr<cudaDevAttrMaxSharedMemoryPerBlockOptin>();
}
template <int CPL, int R, int S, bool EARLY>
__global__ void __launch_bounds__(PW * 32, 1) persist_gemv(lc_qmat W, const float *__restrict__ x,
                                                          const float *__restrict__ norm_w, float eps,
                                                          float *__restrict__ xn_out, float *__restrict__ y,
                                                          const float *__restrict__ residual, const lc_ctrl *ctrl) {
    using T = ptile<CPL, R>;
    constexpr int COLS = T::COLS, NCH = T::NCH, G = T::G, P = T::P;
    constexpr bool XREG = CPL <= 2;
    extern __shared__ __align__(16) unsigned char smem[];
    float4 *xs4 = reinterpret_cast<float4 *>(smem);
    float *xcs = reinterpret_cast<float *>(smem + COLS * 4), *scratch = xcs + NCH;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned char *ring = smem + COLS * 4 + NCH * 4 + 128 + (size_t)warp * S * T::BYTES;
    const int nt = (W.rows + R - 1) / R, gw = blockIdx.x * PW + warp, nw = gridDim.x * PW;
    auto issue = [&](int stage, int tile) {
        if (tile < nt) {
            unsigned char *sp = ring + stage * T::BYTES;
            uint4 *sq = reinterpret_cast<uint4 *>(sp);
            uint16_t *ss = reinterpret_cast<uint16_t *>(sp + R * NCH * 16), *sbb = ss + R * G;
#pragma unroll
            for (int u = 0; u < R; u++) {
                const int r = tile * R + u;
                if (r < W.rows) {
                    const uint4 *w = reinterpret_cast<const uint4 *>(qrow_w(W, 0, r));
#pragma unroll
                    for (int j = 0; j < CPL; j++) cp16(sq + u * NCH + lane + 32 * j, w + lane + 32 * j);
                }
            }
            for (int i = lane; i < 2 * R * P; i += 32) {
                const int which = i / (R * P), rem = i % (R * P), u = rem / P, p = rem % P, r = tile * R + u;
                if (r < W.rows) cp16((which ? sbb : ss) + u * G + p * 8, (which ? W.b : W.s) + qrow_sb(W, 0, r) + p * 8);
            }
        }
        cp_commit(); /* empty groups too: the wait count stays uniform */
    };
    if (EARLY) lc_pdl_launch_dependents(); /* workshop only (see the top of the file) */
#pragma unroll
    for (int i = 0; i < S - 1; i++) issue(i, gw + i * nw); /* weights only: before the wait */
    const bool stopped = lc_pdl_wait_stop(ctrl);
    if (!EARLY) lc_pdl_launch_dependents();
    if (stopped) {
        cp_wait<0>(); /* no copy outstanding at exit */
        return;
    }
    load_x_smem<COLS, 32>(x, norm_w, eps, xn_out, xs4, xcs, scratch);
    float xr[XREG ? CPL : 1][32], xsr[CPL];
    if (XREG)
#pragma unroll
        for (int j = 0; j < CPL; j++) xsr[j] = x_chunk<COLS, 32>(xs4, xcs, lane + 32 * j, xr[XREG ? j : 0]);
    for (int it = 0;; it++) {
        const int tile = gw + it * nw;
        if (tile >= nt) break;
        issue((it + S - 1) % S, gw + (it + S - 1) * nw);
        cp_wait<S - 1>();
        __syncwarp();
        const unsigned char *sp = ring + (it % S) * T::BYTES;
        const uint4 *sq = reinterpret_cast<const uint4 *>(sp);
        const uint16_t *ss = reinterpret_cast<const uint16_t *>(sp + R * NCH * 16), *sbb = ss + R * G;
        float acc[R];
#pragma unroll
        for (int u = 0; u < R; u++) acc[u] = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const int c = lane + 32 * j;
            float xv_[XREG ? 1 : 32];
            float *xv = XREG ? xr[XREG ? j : 0] : xv_;
            const float xsum = XREG ? xsr[j] : x_chunk<COLS, 32>(xs4, xcs, c, xv_);
#pragma unroll
            for (int u = 0; u < R; u++) acc[u] = chunk_fma<4>(sq[u * NCH + c], xv, ss[u * G + c / 2], sbb[u * G + c / 2], xsum, acc[u]);
        }
        __syncwarp(); /* every lane is done with this stage before it is refilled */
#pragma unroll
        for (int u = 0; u < R; u++) {
            const float a = warp_sum(acc[u]);
            const int r = tile * R + u;
            if (lane == 0 && r < W.rows) y[r] = residual ? residual[r] + a : a;
        }
    }
    cp_wait<0>(); /* no copy outstanding at exit */
}

/* The attribute for the dynamic shared memory is set on the first launch of
 * each instance (host code, legal during stream capture). */
template <int CPL, int R, int S, bool EARLY>
static cudaError_t launch_persist(const lc_qmat &W, int mat, const float *x, const float *norm_w, float eps, float *xn_out,
                                  float *y, const float *residual, const lc_ctrl *ctrl, cudaStream_t st, bool pdl = true) {
    static bool set = false;
    const size_t smem = persist_smem<CPL, R, S>();
    if (!set) {
        const cudaError_t err =
            cudaFuncSetAttribute(persist_gemv<CPL, R, S, EARLY>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err) return err;
        set = true;
    }
    const int tiles = (W.rows + R - 1) / R, need = (tiles + PW - 1) / PW, sms = sm_count();
    return launch_k(persist_gemv<CPL, R, S, EARLY>, dim3(need < sms ? need : sms), dim3(PW * 32), smem, st, pdl,
                    mat_view(W, mat), x, norm_w, eps, xn_out, y, residual, ctrl);
}

/* ---- MoE gate/up ---------------------------------------------------------- */
/* grid (I / (SW R), K + 1), slot K the shared expert; a warp owns R rows of
 * gate and the same R rows of up, all loads issued at entry (after the ids,
 * for routed slots).  act[j, r] = silu(g . x) * (u . x).  2048 inputs. */
template <int R>
__global__ void __launch_bounds__(SW * 32) stream_gate_up(lc_qmat gate, lc_qmat up, lc_qmat sgm, lc_qmat sum_,
                                                         const int32_t *__restrict__ ids, int K,
                                                         const float *__restrict__ x, float *__restrict__ act,
                                                         const lc_ctrl *ctrl) {
    constexpr int CPL = 2, COLS = 2048;
    /* the routed slots need the router's ids (the predecessor); the shared
     * expert's weights are requested while the router drains */
    const bool shared_slot = blockIdx.y == K;
    if (!shared_slot) lc_pdl_wait();
    asm volatile("" ::: "memory"); /* ids[] after the conditional wait (see moe.cu) */
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[COLS / 32];
    __shared__ float scratch[32];
    const int j = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const lc_qmat Gm = shared_slot ? sgm : gate, Um = shared_slot ? sum_ : up;
    const int e = shared_slot ? 0 : __ldcg(ids + j), I = Gm.rows, r0 = (blockIdx.x * SW + warp) * R;
    uint4 q[2][R][CPL];
    uint16_t s[2][R][CPL], b[2][R][CPL];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int u = 0; u < R; u++)
            if (r0 + u < I) {
                const lc_qmat &M = m ? Um : Gm;
                const uint4 *w = reinterpret_cast<const uint4 *>(qrow_w(M, e, r0 + u));
                const size_t sb = qrow_sb(M, e, r0 + u);
#pragma unroll
                for (int c = 0; c < CPL; c++) {
                    const int k = lane + 32 * c;
                    q[m][u][c] = ld_stream(w + k);
                    s[m][u][c] = __ldg(M.s + sb + k / 2);
                    b[m][u][c] = __ldg(M.b + sb + k / 2);
                }
            }
    /* routed slots: no wait (their ids are from before the predecessor) */
    const bool stopped = shared_slot ? lc_pdl_wait_stop(ctrl) : LC_STOPPED(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    load_x_smem<COLS, 32>(x, nullptr, 0.0f, nullptr, xs4, xcs, scratch);
    float acc[2][R];
#pragma unroll
    for (int u = 0; u < R; u++) acc[0][u] = acc[1][u] = 0.0f;
#pragma unroll
    for (int c = 0; c < CPL; c++) {
        float xv[32];
        const float xsum = x_chunk<COLS, 32>(xs4, xcs, lane + 32 * c, xv);
#pragma unroll
        for (int m = 0; m < 2; m++)
#pragma unroll
            for (int u = 0; u < R; u++) acc[m][u] = chunk_fma<4>(q[m][u][c], xv, s[m][u][c], b[m][u][c], xsum, acc[m][u]);
    }
#pragma unroll
    for (int u = 0; u < R; u++) {
        const float g = warp_sum(acc[0][u]), v = warp_sum(acc[1][u]);
        if (lane == 0 && r0 + u < I) act[(size_t)j * I + r0 + u] = silu_f(g) * v;
    }
}

template <int R>
static cudaError_t launch_stream_gate_up(const lc_qmat &gate, const lc_qmat &up, const lc_qmat &sg, const lc_qmat &su,
                                         const int32_t *ids, int K, const float *x, float *act, const lc_ctrl *ctrl,
                                         cudaStream_t st, bool pdl = true) {
    const dim3 grid((gate.rows + SW * R - 1) / (SW * R), K + 1);
    return launch_k(stream_gate_up<R>, grid, dim3(SW * 32), 0, st, pdl, gate, up, sg, su, ids, K, x, act, ctrl);
}

/* ---- MoE down ------------------------------------------------------------- */
/* down (K = 8 routed + shared, 512 inputs): 16 lanes per row, 2 rows per
 * warp, DW warps; each lane streams its chunk of all 9 experts at entry (the
 * ids from the router two kernels back, complete when this kernel starts,
 * read through L2: see moe.cu's down_kernel, which this is with DW warps
 * and no-allocate loads).  h[d] += sum_j w[j] down_{ids[j]}[d] . act[j]
 * + sgate * sh_down[d] . act[K]. */
template <int DW>
__global__ void __launch_bounds__(DW * 32) stream_down(lc_qmat down, lc_qmat sdown, const int32_t *__restrict__ ids,
                                                      const float *__restrict__ wts, const float *__restrict__ sgate,
                                                      const float *__restrict__ act, float *__restrict__ h,
                                                      const lc_ctrl *ctrl) {
    constexpr int J = 9, NCH = 16, LPR = 16;
    __shared__ float4 xs4[J * NCH * 8];
    __shared__ float csum[J * NCH];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, sub = lane % LPR;
    const int r = (blockIdx.x * DW + warp) * 2 + lane / LPR;
    const bool ok = r < down.rows;
    uint4 q[J];
    uint16_t s[J], b[J];
#pragma unroll
    for (int j = 0; j < J; j++)
        if (ok) {
            const lc_qmat &M = j == J - 1 ? sdown : down;
            const int e = j == J - 1 ? 0 : __ldcg(ids + j);
            const int ee = (unsigned)e < (unsigned)M.n_mat ? e : 0;
            q[j] = ld_stream(reinterpret_cast<const uint4 *>(qrow_w(M, ee, r)) + sub);
            s[j] = __ldg(M.s + qrow_sb(M, ee, r) + sub / 2);
            b[j] = __ldg(M.b + qrow_sb(M, ee, r) + sub / 2);
        }
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    for (int g = tid; g < J * NCH * 8; g += blockDim.x) {
        const int j = g / (NCH * 8), rem = g % (NCH * 8), c = rem / 8, qq = rem % 8;
        xs4[j * NCH * 8 + qq * NCH + c] = reinterpret_cast<const float4 *>(act)[g];
    }
    __syncthreads();
    for (int g = tid; g < J * NCH; g += blockDim.x) {
        const int j = g / NCH, c = g % NCH;
        float sum = 0.0f;
        for (int qq = 0; qq < 8; qq++) {
            const float4 v = xs4[j * NCH * 8 + qq * NCH + c];
            sum += (v.x + v.y) + (v.z + v.w);
        }
        csum[g] = sum;
    }
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < J; j++) {
        float xv[32];
#pragma unroll
        for (int qq = 0; qq < 8; qq++) {
            const float4 v = xs4[j * NCH * 8 + qq * NCH + sub];
            xv[4 * qq] = v.x, xv[4 * qq + 1] = v.y, xv[4 * qq + 2] = v.z, xv[4 * qq + 3] = v.w;
        }
        float acc = ok ? chunk_fma<4>(q[j], xv, s[j], b[j], csum[j * NCH + sub], 0.0f) : 0.0f;
        for (int o = LPR / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        total = fmaf(j == J - 1 ? sgate[0] : wts[j], acc, total);
    }
    if (ok && sub == 0) h[r] += total;
}

template <int DW>
static cudaError_t launch_stream_down(const lc_qmat &down, const lc_qmat &sdown, const int32_t *ids, const float *w,
                                      const float *sgate, const float *act, float *h, const lc_ctrl *ctrl, cudaStream_t st,
                                      bool pdl = true) {
    const int grid = (down.rows + 2 * DW - 1) / (2 * DW);
    return launch_k(stream_down<DW>, dim3(grid), dim3(DW * 32), 0, st, pdl, down, sdown, ids, w, sgate, act, h, ctrl);
}

} // namespace gemv_stream
} // namespace

#endif
