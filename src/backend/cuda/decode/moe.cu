/* moe.cu — the sparse MoE block at batch 1 (spec §7): routing on the GPU
 * (softmax over all experts, top-K with ties to the lowest id, renormalised),
 * the routed experts' and the shared expert's gate/up with SwiGLU in one
 * kernel, and their down projections with the routing weights, the sigmoid
 * gate of the shared expert and the residual add in another.  Expert ids
 * never leave the GPU.  At the 4-bit shapes where bench/kernels/gemv_test
 * measured them faster, gate/up and down run gemv_tq.cuh's kernels
 * (moe_stream_ok below; LILAC_GEMV=engine keeps these kernels, =stream
 * gemv_stream.cuh's).  At the model's own shapes the decode step runs
 * moe_slots.cu's one kernel instead (LILAC_MOE=split keeps these three);
 * the router's device pieces (moe_route.cuh) are shared with it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/decode/gemv_tq.cuh"
#include "backend/cuda/decode/moe_route.cuh"

namespace {

constexpr int WARPS = 8;

/* Softmax over the E router logits of one token, top K (ties to the lowest
 * id), renormalised; sgate = sigmoid of logit E (the shared expert's gate).
 * Called by a whole block of at most 1024 threads; logits are read through
 * L2 (__ldcg) because other blocks of the same launch may have written them. */
__device__ void topk_rows(const float *lg, int E, int K, int32_t *__restrict__ ids, float *__restrict__ w,
                          float *__restrict__ sgate) {
    __shared__ float p[1024];
    __shared__ float bv[32];
    __shared__ int bi[32];
    __shared__ float scratch[32];
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
    float mx = -INFINITY;
    for (int e = tid; e < E; e += blockDim.x) mx = fmaxf(mx, __ldcg(lg + e));
    mx = warp_max(mx);
    if (lane == 0) scratch[wid] = mx;
    __syncthreads();
    mx = -INFINITY;
    for (int i = 0; i < nw; i++) mx = fmaxf(mx, scratch[i]);
    __syncthreads();
    float sum = 0.0f;
    for (int e = tid; e < E; e += blockDim.x) sum += (p[e] = expf(__ldcg(lg + e) - mx));
    sum = block_sum(sum, scratch);
    float wsum = 0.0f;
    for (int k = 0; k < K; k++) {
        /* block argmax over the remaining experts, ties to the lowest id */
        float v = -1.0f;
        int idx = 0x7fffffff;
        for (int e = tid; e < E; e += blockDim.x)
            if (p[e] > v || (p[e] == v && e < idx)) v = p[e], idx = e;
        for (int o = 16; o > 0; o >>= 1) {
            float v2 = __shfl_xor_sync(0xffffffffu, v, o);
            int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
            if (v2 > v || (v2 == v && i2 < idx)) v = v2, idx = i2;
        }
        if (lane == 0) bv[wid] = v, bi[wid] = idx;
        __syncthreads();
        v = bv[0], idx = bi[0];
        for (int i = 1; i < nw; i++)
            if (bv[i] > v || (bv[i] == v && bi[i] < idx)) v = bv[i], idx = bi[i];
        if (tid == 0) {
            ids[k] = idx;
            w[k] = v / sum;
            p[idx] = -2.0f; /* taken */
        }
        wsum += v / sum;
        __syncthreads();
    }
    if (tid < K) w[tid] /= wsum;
    if (tid == 0) sgate[0] = sigmoid_f(__ldcg(lg + E));
}

/* Block per token (prefill). */
__global__ void topk_kernel(const float *__restrict__ logits, int E, int K, int32_t *__restrict__ ids,
                            float *__restrict__ w, float *__restrict__ sgate, const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    const int t = blockIdx.x;
    topk_rows(logits + (size_t)t * (E + 1), E, K, ids + (size_t)t * K, w + (size_t)t * K, sgate + t);
}

/* Decode: post-attention RMSNorm, router|shared-gate GEMV (rows E+1), and —
 * in the last block to finish — the top-K routing, in one launch.  Block 0
 * writes the normalised input for the expert kernels. */
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(WARPS * 32) router_kernel(lc_qmat R, const float *__restrict__ h,
                                                            const float *__restrict__ norm_w, float eps,
                                                            float *__restrict__ xn, float *__restrict__ logits, int K,
                                                            int32_t *__restrict__ ids, float *__restrict__ w,
                                                            float *__restrict__ sgate, unsigned *done, const lc_ctrl *ctrl) {
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR, EPC = Q::EPC, COLS = Q::COLS;
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[COLS / EPC];
    __shared__ float scratch[32];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % LPR;
    const int r = (blockIdx.x * WARPS + warp) * RPW + lane / LPR;
    typename Q::chunk c;
    if (r < R.rows) Q::fetch(R, 0, r, sub, c); /* weights: before the predecessor finishes */
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    load_x_smem<COLS, EPC>(h, norm_w, eps, xn, xs4, xcs, scratch);
    const float acc = router_row<BITS, CPL, LPR>(c, r < R.rows, sub, xs4, xcs);
    if (r < R.rows && sub == 0) logits[r] = acc;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last || warp) return;
    __threadfence();
    route<false>(logits, R.rows - 1, K, ids, w, sgate);
    if (lane == 0) *done = 0;
}

/* The same router as one cluster of RC blocks of RW warps (the default on
 * sm_90; LILAC_ROUTER=block keeps router_kernel): the logits go into block 0's
 * shared memory (distributed shared memory) and one cluster barrier stands
 * where router_kernel has a fence, a global atomic and the last block's
 * reads back through L2; then block 0's warp 0 routes from shared memory.
 * Every block passes both barriers (the start barrier before the first
 * store into block 0, the one before block 0 reads), stopped or not (a
 * block leaving early would strand the others).  Rows r = (rank RW + warp)
 * RPW + lane / LPR + pass RC RW RPW, all passes' weights requested before
 * the wait. */
/* 16 x 9 warps: two passes over 257 rows, and a block (288 threads, <= 96
 * registers) fits beside gemv_ring.cuh's half-SM block of the kernel before,
 * so the router's weights are requested while out_proj runs, as now.  16
 * blocks is a non-portable cluster size (sm_90 allows it on request). */
constexpr int RC = 16, RW = 9;
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(RW * 32, 2) router_cluster_kernel(lc_qmat R, const float *__restrict__ h,
                                                                 const float *__restrict__ norm_w, float eps,
                                                                 float *__restrict__ xn, float *__restrict__ logits,
                                                                 int K, int32_t *__restrict__ ids, float *__restrict__ w,
                                                                 float *__restrict__ sgate, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR, EPC = Q::EPC, COLS = Q::COLS, PASS = 2, STEP = RC * RW * RPW;
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[COLS / EPC];
    __shared__ float scratch[32];
    __shared__ float lg[1025]; /* block 0's: every block's logits (R.rows <= 1025: the launcher checks) */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % LPR;
    const uint32_t rank = cluster_rank();
    const int r0 = ((int)rank * RW + warp) * RPW + lane / LPR;
    typename Q::chunk c[PASS];
#pragma unroll
    for (int p = 0; p < PASS; p++)
        if (r0 + p * STEP < R.rows) Q::fetch(R, 0, r0 + p * STEP, sub, c[p]); /* weights: before the predecessor finishes */
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    /* block 0's shared memory is written only once every block of the
     * cluster has started (the start barrier; its wait comes after the dots,
     * so it costs nothing there) */
    cluster_arrive_relaxed();
    float acc[PASS];
    if (!stopped) {
        load_x_smem<COLS, EPC>(h, norm_w, eps, rank == 0 ? xn : nullptr, xs4, xcs, scratch);
        bool row[PASS];
#pragma unroll
        for (int p = 0; p < PASS; p++) row[p] = r0 + p * STEP < R.rows;
        router_rows<BITS, CPL, LPR, PASS>(c, row, sub, xs4, xcs, acc);
    }
    cluster_wait();
    if (!stopped)
#pragma unroll
        for (int p = 0; p < PASS; p++) {
            const int r = r0 + p * STEP;
            if (r < R.rows && sub == 0) logits[r] = acc[p], st_cluster(lg + r, 0, acc[p]);
        }
    cluster_arrive(); /* release: the peer stores above before block 0's reads */
    cluster_wait();
    if (stopped || rank != 0 || warp) return;
    route<true>(lg, R.rows - 1, K, ids, w, sgate);
#else
    __trap(); /* never launched below sm_90 (router_cluster_ok) */
#endif
}

/* grid (ceil(I / rows_per_block), K + 1): slot j < K is routed expert
 * ids[j], slot K the shared expert; act[j, r] = silu(g . x) * (u . x).  The
 * activations sit in shared memory (see load_x_smem); a warp issues the
 * loads of GU rows of both matrices before computing. */
constexpr int GU = 2, GU_WARPS = 4;
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(GU_WARPS * 32, 4) gate_up_kernel(lc_qmat gate, lc_qmat up, lc_qmat sgate_m, lc_qmat sup_m,
                                                                   const int32_t *__restrict__ ids, int K,
                                                                   const float *__restrict__ x, float *__restrict__ act,
                                                                   int rows_per_block, const lc_ctrl *ctrl) {
    /* the routed slots need the router's ids (the predecessor); the shared
     * expert's weights are requested while the router drains */
    const bool shared_slot = blockIdx.y == K;
    if (!shared_slot) lc_pdl_wait();
    /* A compiler barrier on every path: otherwise the load of ids[j] below,
     * needed only when the wait ran, may be made unconditional and hoisted
     * above the conditional wait (it was: stale ids, wrong experts). */
    asm volatile("" ::: "memory");
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR, EPC = Q::EPC, COLS = Q::COLS;
    __shared__ float4 xs4[COLS / 4];
    __shared__ float xcs[COLS / EPC];
    __shared__ float scratch[32];
    const int j = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane % LPR;
    const lc_qmat G = shared_slot ? sgate_m : gate, U = shared_slot ? sup_m : up; /* by value: no local copies */
    const int e = shared_slot ? 0 : __ldcg(ids + j), I = G.rows;
    const int r0 = blockIdx.x * rows_per_block;
    typename Q::chunk cg[GU], cu[GU];
    int r[GU];
    bool ok[GU];
    auto fetch_group = [&](int g) {
#pragma unroll
        for (int u = 0; u < GU; u++) {
            r[u] = r0 + (g + u) * RPW + lane / LPR;
            ok[u] = r[u] < I && (g + u) * RPW + lane / LPR < rows_per_block;
            if (ok[u]) Q::fetch(G, e, r[u], sub, cg[u]), Q::fetch(U, e, r[u], sub, cu[u]);
        }
    };
    int g = warp * GU;
    fetch_group(g); /* in flight while the activations arrive */
    /* routed slots: no wait (their ids are from before the predecessor) */
    const bool stopped = shared_slot ? lc_pdl_wait_stop(ctrl) : LC_STOPPED(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    load_x_smem<COLS, EPC>(x, nullptr, 0.0f, nullptr, xs4, xcs, scratch);
    for (; g * RPW < rows_per_block; g += GU_WARPS * GU) {
        float ag[GU], au[GU];
#pragma unroll
        for (int u = 0; u < GU; u++) ag[u] = au[u] = 0.0f;
#pragma unroll
        for (int jj = 0; jj < CPL; jj++) {
            float xv[EPC];
            const float xsum = x_chunk<COLS, EPC>(xs4, xcs, sub + LPR * jj, xv);
#pragma unroll
            for (int u = 0; u < GU; u++)
                if (ok[u]) {
                    ag[u] = chunk_fma<BITS>(cg[u].q[jj], xv, cg[u].s[jj], cg[u].b[jj], xsum, ag[u]);
                    au[u] = chunk_fma<BITS>(cu[u].q[jj], xv, cu[u].s[jj], cu[u].b[jj], xsum, au[u]);
                }
        }
        int rr[GU];
        bool okk[GU];
#pragma unroll
        for (int u = 0; u < GU; u++) rr[u] = r[u], okk[u] = ok[u];
        fetch_group(g + GU_WARPS * GU);
#pragma unroll
        for (int u = 0; u < GU; u++) {
            const float a = Q::reduce(ag[u]), b = Q::reduce(au[u]);
            if (okk[u] && sub == 0) act[(size_t)j * I + rr[u]] = silu_f(a) * b;
        }
    }
}

/* Rows d: h[d] += sum_j w[j] down_{ids[j]}[d] . act[j] + sgate * shdown[d] . act[K].
 * The K+1 activation vectors sit in shared memory, swizzled so that the
 * lanes of a row reading the same float4 of their chunks hit distinct banks;
 * a lane issues the loads of all K+1 experts' codes before any arithmetic. */
constexpr int DOWN_WARPS = 4, KMAX = 8;
template <int BITS, int CPL, int LPR>
__global__ void __launch_bounds__(DOWN_WARPS * 32) down_kernel(lc_qmat down, lc_qmat sdown, const int32_t *__restrict__ ids,
                                                               const float *__restrict__ wts, const float *__restrict__ sgate,
                                                               const float *__restrict__ act, float *__restrict__ h,
                                                               const lc_ctrl *ctrl) {
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int RPW = 32 / LPR, EPC = Q::EPC, F4 = EPC / 4, NCH = CPL * LPR, J = KMAX + 1;
    __shared__ float4 xs4[J * NCH * F4]; /* [j][q][chunk] */
    __shared__ float csum[J * NCH];      /* [j][chunk] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, sub = lane % LPR;
    const int r = (blockIdx.x * DOWN_WARPS + warp) * RPW + lane / LPR;
    const bool ok = r < down.rows;
    /* Every expert's codes in flight before the activations arrive, and
     * before the predecessor (gate/up) has finished: the expert ids come from
     * the router two kernels back, complete by the time this kernel starts
     * (gate/up let it start only after its own wait), read through L2. */
    typename Q::chunk ch[J];
#pragma unroll
    for (int j = 0; j < J; j++)
        if (ok) {
            const int e = j == KMAX ? 0 : __ldcg(ids + j);
            Q::fetch(j == KMAX ? sdown : down, (unsigned)e < (unsigned)down.n_mat ? e : 0, r, sub, ch[j]);
        }
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
#pragma unroll 4
    for (int g = tid; g < J * NCH * F4; g += blockDim.x) {
        const int j = g / (NCH * F4), rem = g % (NCH * F4), c = rem / F4, qq = rem % F4;
        xs4[j * NCH * F4 + qq * NCH + c] = reinterpret_cast<const float4 *>(act)[g];
    }
    __syncthreads();
    for (int g = tid; g < J * NCH; g += blockDim.x) {
        const int j = g / NCH, c = g % NCH;
        float sum = 0.0f;
        for (int qq = 0; qq < F4; qq++) {
            const float4 v = xs4[j * NCH * F4 + qq * NCH + c];
            sum += (v.x + v.y) + (v.z + v.w);
        }
        csum[g] = sum;
    }
    __syncthreads();
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < J; j++) {
        float acc = 0.0f;
        if (ok) {
#pragma unroll
            for (int jj = 0; jj < CPL; jj++) {
                const int c = sub + LPR * jj;
                float xv[EPC];
#pragma unroll
                for (int qq = 0; qq < F4; qq++) {
                    const float4 v = xs4[j * NCH * F4 + qq * NCH + c];
                    xv[4 * qq] = v.x, xv[4 * qq + 1] = v.y, xv[4 * qq + 2] = v.z, xv[4 * qq + 3] = v.w;
                }
                acc = chunk_fma<BITS>(ch[j].q[jj], xv, ch[j].s[jj], ch[j].b[jj], csum[j * NCH + c], acc);
            }
        }
        acc = Q::reduce(acc);
        total = fmaf(j == KMAX ? sgate[0] : wts[j], acc, total);
    }
    if (ok && sub == 0) h[r] += total;
}

template <int BITS, int CPL, int LPR>
cudaError_t launch_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sg, const lc_qmat *su, const int32_t *ids,
                           int K, const float *x, float *act, const lc_ctrl *ctrl, cudaStream_t st) {
    constexpr int RPW = 32 / LPR;
    /* 4 warps x 2 passes: (K+1) * I / 16 blocks fit the SMs in one wave */
    const int rpb = GU_WARPS * RPW * GU * 2;
    dim3 grid((gate->rows + rpb - 1) / rpb, K + 1);
    return lc_launch(gate_up_kernel<BITS, CPL, LPR>, grid, dim3(GU_WARPS * 32), 0, st, *gate, *up, *sg, *su, ids, K, x, act,
                     rpb, ctrl);
}

template <int BITS, int CPL, int LPR>
cudaError_t launch_down(const lc_qmat *down, const lc_qmat *sdown, const int32_t *ids, const float *w, const float *sgate,
                        int K, const float *act, float *h, const lc_ctrl *ctrl, cudaStream_t st) {
    constexpr int RPW = 32 / LPR;
    if constexpr (qdot<BITS, CPL, LPR>::COLS > 1024) { /* the activations must fit in static shared memory */
        return cudaErrorInvalidValue;
    } else {
        if (K != KMAX) return cudaErrorInvalidValue;
        const int grid = (down->rows + DOWN_WARPS * RPW - 1) / (DOWN_WARPS * RPW);
        return lc_launch(down_kernel<BITS, CPL, LPR>, dim3(grid), dim3(DOWN_WARPS * 32), 0, st, *down, *sdown, ids, w,
                         sgate, act, h, ctrl);
    }
}

/* router_cluster_kernel where it can run (LILAC_ROUTER=block, read once,
 * keeps router_kernel): a kernel built for sm_90+ (not JIT from older PTX),
 * the rows within its two passes, and a cluster of RC blocks fitting
 * (probed once per device: also asked inside graph capture).  H200, lilac
 * bench --decode 4096,32768,131072 -n 256 (2026-12-03): router_kernel
 * 661.8 / 598.9 / 461.3 tokens/s, this kernel 674.5 / 614.9 / 470.8 (one
 * binary at bdf1bae); with the start barrier (this tree, median of 3)
 * 670.5 / 613.5 / 469.7.  Traced in the graph (tools/cupti_trace.c) it
 * moves the step's end on by 5.86 us a layer against router_kernel's 6.65. */
template <int BITS, int CPL, int LPR>
static bool router_cluster_ok(const lc_qmat *R) {
    static int want = -1;
    if (want < 0) {
        const char *s = getenv("LILAC_ROUTER");
        want = !(s && strcmp(s, "block") == 0);
    }
    if (!want || R->rows > 2 * RC * RW * (32 / LPR) || R->rows > 1025) return false;
    static signed char ok[64]; /* 0 unknown, 1 yes, -1 no; per device */
    int dev = 0;
    if (cudaGetDevice(&dev)) return false;
    signed char *o = &ok[dev & 63];
    if (*o == 0) {
        void (*k)(lc_qmat, const float *, const float *, float, float *, float *, int, int32_t *, float *, float *,
                  const lc_ctrl *) = router_cluster_kernel<BITS, CPL, LPR>;
        *o = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
                     cluster_fits(k, RC, RC, RW * 32)
                 ? 1
                 : -1;
        (void)cudaGetLastError(); /* a refused attribute leaves no error behind */
    }
    return *o > 0;
}

template <int BITS, int CPL, int LPR>
cudaError_t launch_router(const lc_qmat *R, const float *h, const float *norm_w, float eps, float *xn, float *logits, int K,
                          int32_t *ids, float *w, float *sgate, unsigned *done, const lc_ctrl *ctrl, cudaStream_t st) {
    if (router_cluster_ok<BITS, CPL, LPR>(R)) /* one cluster */
        return cluster_launch(router_cluster_kernel<BITS, CPL, LPR>, RC, dim3(RC), dim3(RW * 32), 0, st, *R, h, norm_w, eps, xn,
                              logits, K, ids, w, sgate, ctrl);
    constexpr int RPW = 32 / LPR;
    const int grid = (R->rows + WARPS * RPW - 1) / (WARPS * RPW);
    return lc_launch(router_kernel<BITS, CPL, LPR>, dim3(grid), dim3(WARPS * 32), 0, st, *R, h, norm_w, eps, xn, logits,
                     K, ids, w, sgate, done, ctrl);
}

} // namespace

extern "C" cudaError_t lc_moe_router(const lc_qmat *R, const float *h, const float *norm_w, float eps, float *xn,
                                     float *logits, int K, int32_t *ids, float *w, float *sgate, unsigned *done,
                                     const lc_ctrl *ctrl, cudaStream_t st) {
    if (R->rows - 1 > 1024 || K > 32) return cudaErrorInvalidValue;
#define CALL_(B, C, L) return launch_router<B, C, L>(R, h, norm_w, eps, xn, logits, K, ids, w, sgate, done, ctrl, st);
    LC_QDOT_DISPATCH(R->bits, R->cols, CALL_);
#undef CALL_
}

extern "C" cudaError_t lc_moe_topk(const float *logits, int T, int E, int K, int32_t *ids, float *w, float *sgate,
                                   const lc_ctrl *ctrl, cudaStream_t st) {
    if (E > 1024 || K > E || K > 32) return cudaErrorInvalidValue;
    topk_kernel<<<T, 256, 0, st>>>(logits, E, K, ids, w, sgate, ctrl);
    return cudaGetLastError();
}

/* Whether the streaming kernels serve these matrices: the choice is on, all
 * 4-bit with `cols` inputs and at most max_rows rows, 16-byte aligned. */
static bool moe_stream_ok(const lc_qmat *const *ms, int n, int cols, int max_rows) {
    if (lc_gemv_kernels() == LC_GEMV_ENGINE) return false;
    for (int i = 0; i < n; i++)
        if (ms[i]->bits != 4 || ms[i]->cols != cols || ms[i]->rows > max_rows ||
            (((uintptr_t)ms[i]->w | (uintptr_t)ms[i]->s | (uintptr_t)ms[i]->b) & 15))
            return false;
    return true;
}

/* From the H200 graph timings of gemv_test (8 routed + shared, 2048 hidden,
 * 512 inner; qdot -> stream -> tq, one call): gate/up 10.22 -> 8.77 -> 6.40
 * us on the integer tensor cores (gemv_tq.cuh, NSP=4; LILAC_GEMV=stream
 * keeps the stream kernel); down 5.55 -> 4.60 (stream, 8 warps, no-allocate
 * loads) -> 3.94 us (tq_down RB=1, 6dc239e; decode at 4K 529.3 -> 567.1
 * tokens/s with it, lilac bench, same binary).  Other shapes keep the kernels
 * above. */
/* LILAC_GATE_UP=xw (read once, opt-in): tq_gate_up with each warp making
 * its own slice's digits (gemv_ring.cuh's prologue, which took decode at 4K
 * from 642.0 to 661.1 tokens/s there).  H200, lilac bench --decode 4096
 * (bdf1bae, one binary): 667.1 tokens/s against 661.8 with router_kernel,
 * but 670.2 against 674.5 with the cluster router, so not the default. */
static bool gate_up_xw(void) {
    static int v = -1;
    if (v < 0) {
        const char *s = getenv("LILAC_GATE_UP");
        v = s && strcmp(s, "xw") == 0;
    }
    return v > 0;
}

extern "C" cudaError_t lc_moe_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                                      const int32_t *ids, int K, const float *x, float *act, const lc_ctrl *ctrl,
                                      cudaStream_t st) {
    if (sh_gate->rows != gate->rows) return cudaErrorInvalidValue; /* act rows share one stride */
    const lc_qmat *ms[] = {gate, up, sh_gate, sh_up};
    if (moe_stream_ok(ms, 4, 2048, 1024) && up->rows == gate->rows && sh_up->rows == gate->rows)
        return lc_gemv_kernels() == LC_GEMV_STREAM || gate->rows % 16
                   ? gemv_stream::launch_stream_gate_up<1>(*gate, *up, *sh_gate, *sh_up, ids, K, x, act, ctrl, st)
               : gate_up_xw() ? gemv_tq::launch_gate_up<4, true>(*gate, *up, *sh_gate, *sh_up, ids, K, x, act, ctrl, st)
                              : gemv_tq::launch_gate_up<4>(*gate, *up, *sh_gate, *sh_up, ids, K, x, act, ctrl, st);
#define CALL_(B, C, L) return launch_gate_up<B, C, L>(gate, up, sh_gate, sh_up, ids, K, x, act, ctrl, st);
    LC_QDOT_DISPATCH(gate->bits, gate->cols, CALL_);
#undef CALL_
}

extern "C" cudaError_t lc_moe_down(const lc_qmat *down, const lc_qmat *sh_down, const int32_t *ids, const float *w,
                                   const float *sgate, int K, const float *act, float *h, const lc_ctrl *ctrl,
                                   cudaStream_t st) {
    const lc_qmat *ms[] = {down, sh_down};
    if (K == KMAX && moe_stream_ok(ms, 2, 512, 4096) && sh_down->rows == down->rows)
        return lc_gemv_kernels() != LC_GEMV_STREAM && down->rows % 16 == 0
                   ? gemv_tq::launch_down<1>(*down, *sh_down, ids, w, sgate, act, h, ctrl, st)
                   : gemv_stream::launch_stream_down<8>(*down, *sh_down, ids, w, sgate, act, h, ctrl, st);
#define CALL_(B, C, L) return launch_down<B, C, L>(down, sh_down, ids, w, sgate, K, act, h, ctrl, st);
    LC_QDOT_DISPATCH(down->bits, down->cols, CALL_);
#undef CALL_
}
