/* gemv_test.cu — workshop for the batch-1 decode GEMVs (issue 14): the
 * engine's kernels (decode/gemv.cu, moe.cu, through their launchers) beside
 * candidate designs, at the real decode shapes, in one run:
 *   0 "engine"   the current kernels;
 *   1 "stream"   every weight load of a warp issued at entry (R rows per
 *                warp, 16 B codes per load, ld.global.nc.L1::no_allocate),
 *                a grid of one pass per warp, so (nearly) all of a matrix is
 *                in flight at once; x staged once per block in shared memory;
 *   2 "persist"  a persistent grid (one 16-warp block per SM), each warp
 *                walking row tiles through an S-stage cp.async ring in shared
 *                memory, the next tiles' codes in flight during the current
 *                tile's math; x (K <= 2048) kept in registers for all tiles;
 *   3 "early"    stream or persist with griddepcontrol.launch_dependents at
 *                entry (not after the wait) and, for stream, an L2 bulk
 *                prefetch of the block's slice before the register loads.
 * Every variant uses the engine's layout (lc_qmat: MLX codes, bf16 scales and
 * biases per 64 inputs, rows fused at load, no repack) and dequantisation
 * (qdot.cuh: one packed bf16 FMA per pair of codes) and is checked against a
 * CPU fp64 reference.  Timing: a CUDA graph of N back-to-back launches (PDL
 * attribute on, as in the decode graph), weights rotated over copies that
 * together exceed L2; µs per launch, GB/s, % of a measured 1 GiB D2D copy.
 * Then a graph of 40 in_proj -> out_proj pairs (each consuming the other's
 * output) to see what the kernel boundaries cost.
 *   sh bench/kernels/build_gemv.sh && build/kernels/gemv_test [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend/cuda/qdot.cuh"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t err_ = (x);                                                                \
        if (err_) {                                                                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static int g_quick = 0, g_failures = 0, g_sms = 132;
static double g_copy_gbs = 0;

/* ---- shared device pieces ------------------------------------------------- */

/* 16 B of codes, streamed: read once, so not kept in L1. volatile keeps it
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
__device__ __forceinline__ void prefetch_l2(const void *p, unsigned bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/* Launch with or without programmatic stream serialization. */
template <typename... KArgs, typename... Args>
static void launch_k(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, bool pdl, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr, cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
}

/* ---- variant 1: stream ---------------------------------------------------- */
/* 4-bit, LPR = 32: lane l takes chunks l + 32 j (j < CPL) of each of its
 * warp's R rows; all R*CPL 16 B loads are issued before anything waits.
 * y[r] = residual[r] + W[r] . x, x optionally RMSNorm(x) * norm_w. */
constexpr int SW = 8; /* warps per stream block */
template <int CPL, int R, int MINB, bool EARLY>
__global__ void __launch_bounds__(SW * 32, MINB) stream_gemv(lc_qmat W, const float *__restrict__ x,
                                                            const float *__restrict__ norm_w, float eps,
                                                            float *__restrict__ y, const float *__restrict__ residual) {
    constexpr int COLS = 32 * 32 * CPL, NCH = 32 * CPL, G = COLS / LC_GROUP;
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[NCH];
    __shared__ float scratch[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int rb = blockIdx.x * SW * R, r0 = rb + warp * R;
    if (EARLY) {
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
    lc_pdl_wait();
    if (!EARLY) lc_pdl_launch_dependents();
    load_x_smem<COLS, 32>(x, norm_w, eps, nullptr, xs4, xcs, scratch);
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
static void run_stream(const lc_qmat &W, const float *x, const float *nw, float *y, const float *res, cudaStream_t st,
                       bool pdl) {
    const int grid = (W.rows + SW * R - 1) / (SW * R);
    launch_k(stream_gemv<CPL, R, MINB, EARLY>, dim3(grid), dim3(SW * 32), 0, st, pdl, W, x, nw, 1e-6f, y, res);
}

/* ---- variant 2: persist --------------------------------------------------- */
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
template <int CPL, int R, int S, bool EARLY>
__global__ void __launch_bounds__(PW * 32, 1) persist_gemv(lc_qmat W, const float *__restrict__ x,
                                                          const float *__restrict__ norm_w, float eps,
                                                          float *__restrict__ y, const float *__restrict__ residual) {
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
    if (EARLY) lc_pdl_launch_dependents();
#pragma unroll
    for (int i = 0; i < S - 1; i++) issue(i, gw + i * nw); /* weights only: before the wait */
    lc_pdl_wait();
    if (!EARLY) lc_pdl_launch_dependents();
    load_x_smem<COLS, 32>(x, norm_w, eps, nullptr, xs4, xcs, scratch);
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

template <int CPL, int R, int S, bool EARLY>
static void run_persist(const lc_qmat &W, const float *x, const float *nw, float *y, const float *res, cudaStream_t st,
                        bool pdl) {
    static bool set = false;
    const size_t smem = persist_smem<CPL, R, S>();
    if (!set) {
        CK(cudaFuncSetAttribute(persist_gemv<CPL, R, S, EARLY>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        set = true;
    }
    launch_k(persist_gemv<CPL, R, S, EARLY>, dim3(g_sms), dim3(PW * 32), smem, st, pdl, W, x, nw, 1e-6f, y, res);
}

/* ---- variant 1 for the MoE ---------------------------------------------- */
/* gate/up: grid (I / (SW R), K + 1), slot K the shared expert; a warp owns R
 * rows of gate and the same R rows of up, all loads issued at entry (after
 * the ids, for routed slots).  act[j, r] = silu(g . x) * (u . x). */
template <int R>
__global__ void __launch_bounds__(SW * 32) stream_gate_up(lc_qmat gate, lc_qmat up, lc_qmat sgm, lc_qmat sum_,
                                                         const int32_t *__restrict__ ids, int K,
                                                         const float *__restrict__ x, float *__restrict__ act) {
    constexpr int CPL = 2, COLS = 2048;
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
        for (int u = 0; u < R; u++) {
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
    if (shared_slot) lc_pdl_wait();
    lc_pdl_launch_dependents();
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

/* down (K = 512): 16 lanes per row, 2 rows per warp, SW warps; each lane
 * streams its chunk of all 9 experts at entry.  As moe.cu's down kernel but
 * 8 warps per block and no-allocate loads. */
template <int DW>
__global__ void __launch_bounds__(DW * 32) stream_down(lc_qmat down, lc_qmat sdown, const int32_t *__restrict__ ids,
                                                      const float *__restrict__ wts, const float *__restrict__ sgate,
                                                      const float *__restrict__ act, float *__restrict__ h) {
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
    lc_pdl_wait();
    lc_pdl_launch_dependents();
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

/* ---- host: data, reference, timing --------------------------------------- */

struct hmat { /* host copy of one stacked matrix */
    std::vector<uint32_t> w;
    std::vector<uint16_t> s, b;
};

static lc_qmat make_qmat(int rows, int cols, int n_mat, uint64_t seed) {
    lc_qmat m = {};
    m.rows = rows, m.cols = cols, m.bits = 4, m.n_mat = n_mat;
    const size_t wn = (size_t)n_mat * rows * cols / 8, gn = (size_t)n_mat * rows * cols / 64;
    uint32_t *w;
    uint16_t *s, *b;
    CK(cudaMalloc(&w, wn * 4));
    CK(cudaMalloc(&s, gn * 2));
    CK(cudaMalloc(&b, gn * 2));
    /* the engine's synthetic weights (cuda_backend.c): std ~0.02 */
    const float s0 = 0.02f / 4.6f, mid = 7.5f;
    CK(lc_fill_u32(w, wn, seed, 0));
    CK(lc_fill_bf16(s, gn, seed + 1, 0.9f * s0, 1.1f * s0, 0));
    CK(lc_fill_bf16(b, gn, seed + 2, -mid * 1.1f * s0, -mid * 0.9f * s0, 0));
    m.w = w, m.s = s, m.b = b;
    return m;
}
static void free_qmat(lc_qmat &m) {
    cudaFree((void *)m.w), cudaFree((void *)m.s), cudaFree((void *)m.b);
}
static size_t qbytes(const lc_qmat &m) { return (size_t)m.rows * m.cols / 2 + (size_t)m.rows * m.cols / 64 * 4; }

/* rows [e*rows, (e+1)*rows) of matrix e into h */
static void to_host(const lc_qmat &m, int e, hmat &h) {
    const size_t wpr = m.cols / 8, gpr = m.cols / 64, off = (size_t)e * m.rows;
    h.w.resize(wpr * m.rows), h.s.resize(gpr * m.rows), h.b.resize(gpr * m.rows);
    CK(cudaMemcpy(h.w.data(), m.w + off * wpr, h.w.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.s.data(), m.s + off * gpr, h.s.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.b.data(), m.b + off * gpr, h.b.size() * 2, cudaMemcpyDeviceToHost));
}
static double bfh(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double ref_dot(const hmat &h, int cols, int r, const double *x) {
    const uint32_t *w = h.w.data() + (size_t)r * cols / 8;
    double acc = 0;
    for (int g = 0; g < cols / 64; g++) {
        const double s = bfh(h.s[(size_t)r * cols / 64 + g]), b = bfh(h.b[(size_t)r * cols / 64 + g]);
        for (int c = g * 64; c < g * 64 + 64; c++) acc += (s * ((w[c / 8] >> (4 * (c % 8))) & 15u) + b) * x[c];
    }
    return acc;
}

static std::vector<float> dl(const float *d, size_t n) {
    std::vector<float> v(n);
    CK(cudaMemcpy(v.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return v;
}
static float *up_f32(const std::vector<float> &v) {
    float *d;
    CK(cudaMalloc(&d, v.size() * 4));
    CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
static std::vector<float> rnd(size_t n, uint64_t seed, float lo, float hi) {
    std::vector<float> v(n);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = lo + (hi - lo) * (float)((x >> 40) * (1.0 / 16777216.0));
    }
    return v;
}

/* rows checked every `stride` (lm_head: a subset keeps the CPU reference short) */
struct check {
    double maxd, maxref;
    bool ok;
};
static check compare(const std::vector<double> &ref, const std::vector<float> &got, int stride) {
    check c = {0, 0, true};
    for (size_t i = 0; i < ref.size(); i += stride) {
        const double d = fabs(ref[i] - got[i]);
        if (!(d <= c.maxd)) c.maxd = d;
        c.maxref = fmax(c.maxref, fabs(ref[i]));
    }
    /* fp32 sums over <= 4608 products of fp32 x and exact weights */
    c.ok = c.maxd <= 2e-5 * c.maxref + 1e-6;
    return c;
}


/* µs per launch in a graph of n back-to-back launches, best of `trials` replays */
static double time_graph(void (*fn)(int, cudaStream_t, void *), void *ctx, int n) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) fn(i, st, ctx);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaGraphLaunch(ge, st)); /* warm-up */
    CK(cudaStreamSynchronize(st));
    const int trials = g_quick ? 1 : 20;
    double best = 1e30;
    for (int t = 0; t < trials; t++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = fmin(best, ms * 1e3 / n);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(st));
    return best;
}

static void row(const char *name, double us, double bytes, check c) {
    const double gbs = bytes / (us * 1e-6) / 1e9;
    printf("  %-34s %9.2f %9.0f %7.1f%%  %10.3g  %s\n", name, us, gbs, 100.0 * gbs / g_copy_gbs, c.maxd,
           c.ok ? "PASS" : "FAIL");
    if (!c.ok) g_failures++;
}
static void header(const char *what, double mb, int copies) {
    printf("\n%s — %.2f MB per launch, %d weight copies rotated\n", what, mb, copies);
    printf("  %-34s %9s %9s %8s  %10s\n", "variant", "us", "GB/s", "% copy", "max |err|");
}

/* ---- dense shapes ------------------------------------------------------- */
struct dense {
    std::vector<lc_qmat> W; /* copies */
    const float *x, *nw, *res;
    float *y;
    void (*k)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    bool pdl;
};
static void dense_engine(int rep, cudaStream_t st, void *p) {
    dense *d = (dense *)p;
    const lc_qmat &W = d->W[rep % d->W.size()];
    CK(d->nw ? lc_gemv_rms(&W, d->x, d->nw, 1e-6f, d->y, nullptr, nullptr, st) : lc_gemv(&W, 0, d->x, d->y, d->res, nullptr, st));
}
static void dense_var(int rep, cudaStream_t st, void *p) {
    dense *d = (dense *)p;
    d->k(d->W[rep % d->W.size()], d->x, d->nw, d->y, d->res, st, d->pdl);
}

struct variant {
    const char *name;
    void (*k)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
};

static int copies_for(size_t bytes) {
    const size_t want = (size_t)400 << 20; /* well beyond the 60 MB L2 */
    int n = (int)((want + bytes - 1) / bytes);
    return n < 1 ? 1 : n;
}

static void bench_dense(const char *what, int rows, int cols, bool norm, bool residual, const variant *vs, int nv) {
    const int stride = rows > 100000 ? 16 : 1;
    lc_qmat m0 = make_qmat(rows, cols, 1, 1000 + rows);
    const int copies = g_quick ? 2 : copies_for(qbytes(m0));
    dense d = {};
    d.W.push_back(m0);
    for (int i = 1; i < copies; i++) d.W.push_back(make_qmat(rows, cols, 1, 5000 + 7 * i + rows));
    std::vector<float> hx = rnd(cols, 11, -1.f, 1.f), hn = rnd(cols, 12, 0.5f, 1.5f), hr = rnd(rows, 13, -1.f, 1.f);
    d.x = up_f32(hx), d.nw = norm ? up_f32(hn) : nullptr, d.res = residual ? up_f32(hr) : nullptr;
    CK(cudaMalloc(&d.y, (size_t)rows * 4));
    /* reference on copy 0 */
    hmat h;
    to_host(m0, 0, h);
    std::vector<double> xd(cols), ref(rows, 0.0);
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)hx[c] * hx[c];
    const double rr = norm ? 1.0 / sqrt(ss / cols + 1e-6) : 1.0;
    for (int c = 0; c < cols; c++) xd[c] = norm ? hx[c] * rr * hn[c] : hx[c];
    for (int r = 0; r < rows; r += stride) ref[r] = (residual ? hr[r] : 0.0) + ref_dot(h, cols, r, xd.data());
    header(what, qbytes(m0) / 1e6, copies);
    const int n = g_quick ? 2 : 40;
    for (int v = -1; v < nv; v++) {
        d.k = v < 0 ? nullptr : vs[v].k, d.pdl = true;
        void (*fn)(int, cudaStream_t, void *) = v < 0 ? dense_engine : dense_var;
        CK(cudaMemset(d.y, 0, (size_t)rows * 4));
        fn(0, 0, &d);
        CK(cudaDeviceSynchronize());
        const check c = compare(ref, dl(d.y, rows), stride);
        const double us = time_graph(fn, &d, n);
        row(v < 0 ? "0 engine (lc_gemv / lc_gemv_rms)" : vs[v].name, us, (double)qbytes(m0), c);
    }
    for (auto &w : d.W) free_qmat(w);
    cudaFree((void *)d.x), cudaFree((void *)d.nw), cudaFree((void *)d.res), cudaFree(d.y);
}

/* ---- MoE ------------------------------------------------------------------ */
/* E_TEST experts stacked (the engine's layout; more than the model's 256 so
 * random ids rarely find an expert still in L2); the shared expert rotated. */
constexpr int E_TEST = 768, KX = 8, D_ = 2048, I_ = 512;
struct moe {
    lc_qmat gate, up, down;
    std::vector<lc_qmat> sgu, sdown; /* copies; sh_gate / sh_up are views of sgu */
    int32_t *ids;                     /* [nsets][8] */
    int nsets;
    float *x, *act, *w, *sg, *h, *actin;
    int var;
};
static void views(const lc_qmat &sgu, lc_qmat &sg, lc_qmat &su) {
    sg = sgu, sg.rows = I_;
    su = sg;
    su.w += (size_t)I_ * D_ / 8, su.s += (size_t)I_ * D_ / 64, su.b += (size_t)I_ * D_ / 64;
}
static void moe_gu(int rep, cudaStream_t st, void *p) {
    moe *m = (moe *)p;
    lc_qmat sg, su;
    views(m->sgu[rep % m->sgu.size()], sg, su);
    const int32_t *ids = m->ids + (rep % m->nsets) * KX;
    if (m->var == 0) CK(lc_moe_gate_up(&m->gate, &m->up, &sg, &su, ids, KX, m->x, m->act, nullptr, st));
    else if (m->var == 1) launch_k(stream_gate_up<1>, dim3(I_ / SW, KX + 1), dim3(SW * 32), 0, st, true, m->gate, m->up, sg, su, ids, KX, (const float *)m->x, m->act);
    else launch_k(stream_gate_up<2>, dim3(I_ / (2 * SW), KX + 1), dim3(SW * 32), 0, st, true, m->gate, m->up, sg, su, ids, KX, (const float *)m->x, m->act);
}
static void moe_dn(int rep, cudaStream_t st, void *p) {
    moe *m = (moe *)p;
    const lc_qmat &sd = m->sdown[rep % m->sdown.size()];
    const int32_t *ids = m->ids + (rep % m->nsets) * KX;
    if (m->var == 0) CK(lc_moe_down(&m->down, &sd, ids, m->w, m->sg, KX, m->actin, m->h, nullptr, st));
    else if (m->var == 1) launch_k(stream_down<4>, dim3(D_ / 8), dim3(128), 0, st, true, m->down, sd, ids, (const float *)m->w, (const float *)m->sg, (const float *)m->actin, m->h);
    else launch_k(stream_down<8>, dim3(D_ / 16), dim3(256), 0, st, true, m->down, sd, ids, (const float *)m->w, (const float *)m->sg, (const float *)m->actin, m->h);
}

static void bench_moe() {
    moe m = {};
    const int ne = g_quick ? 16 : E_TEST;
    m.gate = make_qmat(I_, D_, ne, 77), m.up = make_qmat(I_, D_, ne, 88), m.down = make_qmat(D_, I_, ne, 99);
    const int copies = g_quick ? 2 : 64;
    for (int i = 0; i < copies; i++) m.sgu.push_back(make_qmat(2 * I_, D_, 1, 300 + 3 * i)), m.sdown.push_back(make_qmat(D_, I_, 1, 301 + 3 * i));
    /* random distinct ids per set */
    m.nsets = g_quick ? 2 : 64;
    std::vector<int32_t> hid(m.nsets * KX);
    uint64_t z = 12345;
    for (int s = 0; s < m.nsets; s++)
        for (int k = 0; k < KX; k++) {
            int e;
            bool dup;
            do {
                z ^= z << 13, z ^= z >> 7, z ^= z << 17;
                e = (int)(z % ne), dup = false;
                for (int i = 0; i < k; i++) dup |= hid[s * KX + i] == e;
            } while (dup);
            hid[s * KX + k] = e;
        }
    CK(cudaMalloc(&m.ids, hid.size() * 4));
    CK(cudaMemcpy(m.ids, hid.data(), hid.size() * 4, cudaMemcpyHostToDevice));
    std::vector<float> hx = rnd(D_, 21, -1.f, 1.f), hw = rnd(KX, 22, 0.05f, 0.2f), hh = rnd(D_, 24, -1.f, 1.f);
    const float hsg = 0.6f;
    m.x = up_f32(hx), m.w = up_f32(hw), m.sg = up_f32(std::vector<float>(1, hsg)), m.h = up_f32(hh);
    CK(cudaMalloc(&m.act, (size_t)(KX + 1) * I_ * 4));
    /* reference for set 0, copy 0: act, then h += down */
    std::vector<double> xd(hx.begin(), hx.end()), aref((KX + 1) * I_);
    for (int j = 0; j <= KX; j++) {
        hmat g, u;
        if (j < KX) to_host(m.gate, hid[j], g), to_host(m.up, hid[j], u);
        else {
            lc_qmat sg, su;
            views(m.sgu[0], sg, su);
            to_host(sg, 0, g), to_host(su, 0, u);
        }
        for (int r = 0; r < I_; r++) {
            const double a = ref_dot(g, D_, r, xd.data()), b = ref_dot(u, D_, r, xd.data());
            aref[j * I_ + r] = a / (1.0 + exp(-a)) * b;
        }
    }
    std::vector<float> actf(aref.begin(), aref.end());
    m.actin = up_f32(actf);
    std::vector<double> href(D_);
    for (int d = 0; d < D_; d++) href[d] = hh[d];
    for (int j = 0; j <= KX; j++) {
        hmat dn;
        to_host(j < KX ? m.down : m.sdown[0], j < KX ? hid[j] : 0, dn);
        std::vector<double> ad(actf.begin() + j * I_, actf.begin() + (j + 1) * I_);
        const double wj = j < KX ? hw[j] : hsg;
        for (int d = 0; d < D_; d++) href[d] += wj * ref_dot(dn, I_, d, ad.data());
    }
    const double gub = (KX + 1) * 2.0 * I_ * D_ * 0.5625, dnb = (KX + 1) * (double)I_ * D_ * 0.5625;
    const int n = g_quick ? 2 : 40;
    const char *gun[] = {"0 engine (lc_moe_gate_up)", "1 stream R=1 (8 loads/lane)", "1 stream R=2 (16 loads/lane)"};
    header("MoE gate/up + SwiGLU, 8 routed + shared, 2x512x2048 each", gub / 1e6, copies);
    for (int v = 0; v < 3; v++) {
        m.var = v;
        CK(cudaMemset(m.act, 0, (size_t)(KX + 1) * I_ * 4));
        moe_gu(0, 0, &m);
        CK(cudaDeviceSynchronize());
        const check c = compare(aref, dl(m.act, (KX + 1) * I_), 1);
        row(gun[v], time_graph(moe_gu, &m, n), gub, c);
    }
    const char *dnn[] = {"0 engine (lc_moe_down)", "1 stream 4 warps", "1 stream 8 warps"};
    header("MoE down + combine + residual, 9 x 2048x512", dnb / 1e6, copies);
    for (int v = 0; v < 3; v++) {
        m.var = v;
        CK(cudaMemcpy(m.h, hh.data(), D_ * 4, cudaMemcpyHostToDevice));
        moe_dn(0, 0, &m);
        CK(cudaDeviceSynchronize());
        const check c = compare(href, dl(m.h, D_), 1);
        row(dnn[v], time_graph(moe_dn, &m, n), dnb, c); /* h accumulates during timing: only time is read */
    }
    free_qmat(m.gate), free_qmat(m.up), free_qmat(m.down);
    for (int i = 0; i < copies; i++) free_qmat(m.sgu[i]), free_qmat(m.sdown[i]);
    cudaFree(m.ids), cudaFree(m.x), cudaFree(m.w), cudaFree(m.sg), cudaFree(m.h), cudaFree(m.act), cudaFree(m.actin);
}

/* ---- chain: in_proj (norm) -> out_proj (+residual), 40 pairs ------------- */
struct chain {
    std::vector<lc_qmat> in, out;
    float *h, *proj, *nw;
    int var; /* 0 engine, else index into the chain variant table */
};
struct chain_variant {
    const char *name;
    void (*kin)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    void (*kout)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    bool pdl;
};
static const chain_variant *g_cv;
static void chain_pair(int rep, cudaStream_t st, void *p) {
    chain *c = (chain *)p;
    const lc_qmat &Wi = c->in[rep % c->in.size()], &Wo = c->out[rep % c->out.size()];
    if (c->var == 0) {
        CK(lc_gemv_rms(&Wi, c->h, c->nw, 1e-6f, c->proj, nullptr, nullptr, st));
        CK(lc_gemv(&Wo, 0, c->proj, c->h, c->h, nullptr, st));
    } else {
        const chain_variant &v = g_cv[c->var];
        v.kin(Wi, c->h, c->nw, c->proj, nullptr, st, v.pdl);
        v.kout(Wo, c->proj, nullptr, c->h, c->h, st, v.pdl);
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) g_quick = 1;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    printf("gemv_test on %s, %d SMs, L2 %d MB%s\n", prop.name, g_sms, prop.l2CacheSize >> 20, g_quick ? " (--quick)" : "");
    {   /* copy bandwidth: read + write of a 1 GiB cudaMemcpy */
        const size_t n = g_quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
        CK(cudaMemset(a, 1, n));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
        float best = 1e30f;
        for (int t = 0; t < (g_quick ? 1 : 5); t++) {
            CK(cudaEventRecord(e0));
            CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            best = fminf(best, ms);
        }
        g_copy_gbs = 2.0 * n / (best * 1e-3) / 1e9;
        printf("device-to-device copy: %.0f GB/s (read + write of %zu MiB)\n", g_copy_gbs, n >> 20);
        cudaFree(a), cudaFree(b);
    }
    printf("timing: graph of %d back-to-back launches (PDL on), best of %d replays; error vs CPU fp64\n", g_quick ? 2 : 40,
           g_quick ? 1 : 20);

    const variant v2048[] = {
        {"1 stream R=2 (4 loads/lane)", run_stream<2, 2, 3, false>},
        {"1 stream R=4 (8 loads/lane)", run_stream<2, 4, 2, false>},
        {"1 stream R=8 (16 loads/lane)", run_stream<2, 8, 1, false>},
        {"2 persist R=2 S=4 x in regs", run_persist<2, 2, 4, false>},
        {"2 persist R=4 S=3 x in regs", run_persist<2, 4, 3, false>},
        {"3 early+L2 stream R=4", run_stream<2, 4, 2, true>},
        {"3 early persist R=2 S=4", run_persist<2, 2, 4, true>},
    };
    const variant v4096[] = {
        {"1 stream R=1 (4 loads/lane)", run_stream<4, 1, 2, false>},
        {"1 stream R=2 (8 loads/lane)", run_stream<4, 2, 2, false>},
        {"1 stream R=4 (16 loads/lane)", run_stream<4, 4, 1, false>},
        {"2 persist R=1 S=4 x in smem", run_persist<4, 1, 4, false>},
        {"3 early+L2 stream R=2", run_stream<4, 2, 2, true>},
    };
    const int n2 = sizeof v2048 / sizeof *v2048, n4 = sizeof v4096 / sizeof *v4096;
    bench_dense("GDN in_proj qkv|z|b|a, 12352 x 2048, fused RMSNorm", 12352, 2048, true, false, v2048, n2);
    bench_dense("attention q(+gate)|k|v, 9216 x 2048, fused RMSNorm", 9216, 2048, true, false, v2048, n2);
    bench_dense("out_proj / o_proj + residual, 2048 x 4096", 2048, 4096, false, true, v4096, n4);
    bench_dense("lm_head, 248320 x 2048, fused final norm (every 16th row checked)", 248320, 2048, true, false, v2048, n2);
    bench_moe();

    {   /* the chain */
        chain c = {};
        const int pairs = g_quick ? 2 : 40;
        for (int i = 0; i < (g_quick ? 2 : 20); i++) c.in.push_back(make_qmat(12352, 2048, 1, 900 + i)), c.out.push_back(make_qmat(2048, 4096, 1, 950 + i));
        c.h = up_f32(rnd(2048, 31, -1.f, 1.f)), c.nw = up_f32(rnd(2048, 32, 0.5f, 1.5f));
        CK(cudaMalloc(&c.proj, 12352 * 4));
        const chain_variant cv[] = {
            {"0 engine (PDL)", nullptr, nullptr, true},
            {"1 stream R=4 / R=2, no PDL", run_stream<2, 4, 2, false>, run_stream<4, 2, 2, false>, false},
            {"1 stream R=4 / R=2, PDL", run_stream<2, 4, 2, false>, run_stream<4, 2, 2, false>, true},
            {"2 persist / stream R=2, PDL", run_persist<2, 2, 4, false>, run_stream<4, 2, 2, false>, true},
            {"3 early+L2 stream, PDL", run_stream<2, 4, 2, true>, run_stream<4, 2, 2, true>, true},
            {"3 early persist / early+L2 stream", run_persist<2, 2, 4, true>, run_stream<4, 2, 2, true>, true},
        };
        g_cv = cv;
        const double mb = (qbytes(c.in[0]) + qbytes(c.out[0])) / 1e6;
        printf("\nchain: graph of %d x (in_proj 12352x2048 + norm -> out_proj 2048x4096 + residual), %.2f MB per pair\n", pairs, mb);
        printf("  %-34s %9s %9s %8s\n", "variant", "us/pair", "GB/s", "% copy");
        for (int v = 0; v < (int)(sizeof cv / sizeof *cv); v++) {
            c.var = v;
            const double us = time_graph(chain_pair, &c, pairs);
            const double gbs = mb * 1e6 / (us * 1e-6) / 1e9;
            printf("  %-34s %9.2f %9.0f %7.1f%%\n", cv[v].name, us, gbs, 100.0 * gbs / g_copy_gbs);
        }
        printf("  (boundary cost ~ us/pair minus the two kernels' times in the tables above, which already include\n"
               "   back-to-back overlap of the same kernel; an empty-kernel graph node costs ~0.5 us)\n");
        for (auto &w : c.in) free_qmat(w);
        for (auto &w : c.out) free_qmat(w);
        cudaFree(c.h), cudaFree(c.nw), cudaFree(c.proj);
    }
    CK(cudaDeviceSynchronize());
    printf("\n%s: %d failure(s)\n", g_failures ? "FAIL" : "all passed", g_failures);
    return g_failures ? 1 : 0;
}
