/* moe_cluster_test.cu — workshop for issue 14's next MoE design: the gate/up
 * and the down of one expert slot in one cluster, joined through
 * distributed shared memory instead of a kernel boundary and a trip of the
 * activations through L2.
 *
 * Why (docs/PERFORMANCE.md, "where the step goes inside the graph"): the MoE
 * adds 18 us a layer to the decode step for 3.8 us of bytes; tq_gate_up adds
 * 6.5 and tq_down 5.6, each mostly the chain after its predecessor's end.
 * An expert's activation is 512 floats, so one cluster can own a slot:
 *
 *   moe_cluster_kernel  grid 9 slots x CS blocks, clusters of CS (one slot
 *       each; slot 8 the shared expert).  Block `rank` computes act rows
 *       [32 rank, 32 rank + 32) (2 row blocks of gate and of up: warp w takes
 *       matrix w / 4, K slice w % 4, both row blocks), sends its 32 values
 *       to every block of the cluster (st.shared::cluster), one cluster
 *       barrier, then computes down rows [128 rank, 128 rank + 128) (warp w
 *       row block w, all 512 inputs) and stores w_j (down_j . act_j) into
 *       P[j] (the slot's share of the combine).  Tiles and numerics are
 *       gemv_tq.cuh's (u8 codes x s8 digits of x on mma.m16n8k32, exact int32
 *       sums), fed by gemv_ring.cuh's 2-slot cp.async ring per warp: both
 *       gate/up tasks are requested as soon as the slot's expert id is read,
 *       the down task as soon as the first slot frees (before the exchange).
 *       ~97 KB of shared memory, <= 128 registers: two blocks an SM, so the
 *       144 blocks fit 132 SMs in one wave.
 *   combine_kernel  h[d] += sum_j P[j][d] in slot order (deterministic).
 *       In the engine this would move into the next kernel's prologue,
 *       which reads h anyway (one trip through L2 for ten vectors instead of
 *       one), so the workshop times the pair with and without it.
 *
 * First, the engine's router (decode/moe.cu's lc_moe_router: the cluster
 * router by default, LILAC_ROUTER=block the other) against an fp64
 * reference of the routing (norm, 8-bit router and shared gate, softmax,
 * top-8 with ties to the lowest id, renormalised weights, sigmoid gate), so
 * that `--quick` under the sanitizers covers it too.
 *
 * Checked against an fp64 CPU reference (act from x, then h + sum_j w_j
 * down_j . act_j), and timed as gemv_test times: CUDA graphs of 40 repeats
 * with PDL, 768 experts stacked and 64 id sets so that L2 never holds the
 * routed weights, the shared expert rotated over 64 copies; µs per repeat
 * against the engine's tq_gate_up + tq_down.
 *
 * Then the whole MoE with routing from h: the engine's lc_moe_router +
 * lc_moe_gate_up + lc_moe_down against its one-kernel form lc_moe_slots +
 * lc_moe_slots_combine (decode/moe_slots.cu: this workshop's cluster with
 * the router inside), the latter checked against the former (same ids, h
 * within 1e-4 of max |h|), and the phases of lc_moe_slots' last launch
 * from its global-timer stamps (build_moe_cluster.sh compiles moe_slots.cu
 * with LC_MOE_SLOTS_STAMPS), per cluster too, with each block's SM.  First
 * of all it prints how many clusters of 2-16 blocks the GPU holds at one
 * and at two blocks an SM (the GPCs decide: 7 of 16 at one on the H100).
 * Runs: docs/PERFORMANCE.md.
 *
 * Last, a layer's out_proj and MoE: the engine's out_proj -> lc_moe_slots
 * -> sum against the early routing (namespace early: the ids chosen from h
 * and the mixer's output beside out_proj, the experts' codes requested
 * before their kernel's wait), checked against each other (same ids, h
 * within 1e-4 of max |h|).  Written 2026-12-03 after the session's device
 * time was spent: compiled, not yet run.
 *   sh bench/kernels/build_moe_cluster.sh && build/kernels/moe_cluster_test [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/decode/gemv_ring.cuh"
#include "backend/cuda/decode/moe_route.cuh"
#include "workshop.h"

static int g_quick = 0, g_failures = 0;
static double g_copy_gbs = 0;

namespace moe_cluster {

using gemv_ring::NSP;
using gemv_ring::S;
using gemv_ring::TASK;
using gemv_ring::WARPS;
using gemv_stream::cp_commit;
using gemv_stream::cp_wait;
using gemv_tq::SLOTS;

constexpr int CS = 16, I = 512, D = 2048, J = 9;     /* blocks per slot, expert inner, hidden, slots */
constexpr int AR = I / CS, DR = D / CS;                /* act rows and down rows per block */
static_assert(AR == 32 && DR == WARPS * 16 && WARPS == 8, "block = 2 act row blocks x {gate, up} x 4 K slices; 8 down row blocks");
constexpr int BFW = (NSP + 1) * 2 * SLOTS;             /* one warp's digits of a 512-input slice and the zero span */
constexpr size_t SMEM = (size_t)WARPS * S * TASK + (size_t)WARPS * BFW * 16 +
                        (WARPS * 8 + 2 * 2 * 4 * 16 + I + 4) * sizeof(float); /* rings, digits, group sums, gate/up sums, act, sum h^2 */

/* slot j: expert ids[j] of gate/up/down (j < 8) or the shared expert (j = 8).
 * PRE (the early routing, namespace early below): ids and the logits z
 * [257] were written before the predecessor (which waited for them), so
 * every slot's codes are requested before the wait; x is RMSNorm(h) *
 * norm_w made here (digits of h * norm_w, the factor on the sums), and the
 * weights are the renormalised softmax of rr z over the 8 ids (the shared
 * slot: sigmoid(rr z[256])).  Else x is normalised already, wts / sgate
 * the router's. */
template <bool PRE>
__global__ void __launch_bounds__(WARPS * 32, 2)
    moe_cluster_kernel(lc_qmat gate, lc_qmat up, lc_qmat sg, lc_qmat su, lc_qmat down, lc_qmat sdown,
                       const int32_t *__restrict__ ids, const float *__restrict__ wts, const float *__restrict__ sgate,
                       const float *__restrict__ x, float *__restrict__ P, const float *__restrict__ z,
                       const float *__restrict__ nw, float eps, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + WARPS * S * TASK);
    float *xs = reinterpret_cast<float *>(bf + WARPS * BFW), *gu = xs + WARPS * 8, *act = gu + 2 * 2 * 4 * 16, *ssq = act + I;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int j = blockIdx.x / CS, mat = warp / 4, k = warp % 4;
    const uint32_t rank = cluster_rank();
    const bool shared_slot = j == J - 1;
    if (!PRE && !shared_slot) lc_pdl_wait(); /* the routed slots need the router's ids */
    asm volatile("" ::: "memory");           /* ids[] after the conditional wait (see moe.cu) */
    int e = shared_slot ? 0 : __ldcg(ids + j);
    e = (unsigned)e < (unsigned)gate.n_mat ? e : 0;
    /* the warp's matrix by field, not by reference (see gemv_tq.cuh) */
    const uint32_t *mw = shared_slot ? (mat ? su.w : sg.w) : (mat ? up.w : gate.w);
    const uint16_t *ms = shared_slot ? (mat ? su.s : sg.s) : (mat ? up.s : gate.s);
    const uint16_t *mb = shared_slot ? (mat ? su.b : sg.b) : (mat ? up.b : gate.b);
    const size_t arow = (size_t)e * I + rank * AR, drow = (size_t)e * D + rank * DR + warp * 16;
    unsigned char *slot0 = smem + (size_t)warp * S * TASK, *slot1 = slot0 + TASK;
    gemv_ring::copy_task<D>(slot0, mw, ms, mb, arow, k);
    cp_commit();
    gemv_ring::copy_task<D>(slot1, mw, ms, mb, arow + 16, k);
    cp_commit();
    if (PRE || shared_slot) lc_pdl_wait(); /* codes requested while the predecessor drained */
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) { /* every block of every cluster (ctrl is the same for all): no barrier is left waiting */
        cp_wait<0>();
        return;
    }
    cluster_arrive_relaxed(); /* the start barrier: peers' act is written only once every block has started */

    /* gate/up: the warp's K slice of x as digits, then its two tasks */
    uint4 *bw = bf + warp * BFW;
    float *xw = xs + warp * 8;
    float ss = 0.0f;
    float dn = PRE ? gemv_tq::prep_x_warp<4 * 128>(x + k * 512, bw, xw, nw + k * 512, &ss)
                   : gemv_tq::prep_x_warp<4 * 128>(x + k * 512, bw, xw);
    if (PRE && mat == 0 && lane == 0) ssq[k] = ss; /* slice k's sum of h^2 (warps 0-3 hold the four slices) */
    __syncwarp();
    uint4 xb[NSP][2];
    gemv_tq::tile<512, NSP>::x_frags(bw, 0, g, c, xb);
    float ya, yb;
    {
        gemv_tq::tile<D, NSP> tl;
        cp_wait<1>();
        __syncwarp(); /* the scale and bias rows came through other lanes' copies */
        gemv_ring::tile_from<D>(tl, slot0, g, c);
        __syncwarp(); /* every lane has read slot 0 before the down task refills it */
        const uint32_t *dw = shared_slot ? sdown.w : down.w;
        const uint16_t *ds = shared_slot ? sdown.s : down.s, *db = shared_slot ? sdown.b : down.b;
        gemv_ring::copy_task<I>(slot0, dw, ds, db, drow, 0);
        cp_commit();
        tl.dot_x(xb, xw, dn, 0, g, c, ya, yb);
        if (c == 0) gu[((mat * 2 + 0) * 4 + k) * 16 + g] = ya, gu[((mat * 2 + 0) * 4 + k) * 16 + g + 8] = yb;
        cp_wait<1>();
        __syncwarp();
        gemv_ring::tile_from<D>(tl, slot1, g, c);
        tl.dot_x(xb, xw, dn, 0, g, c, ya, yb);
        if (c == 0) gu[((mat * 2 + 1) * 4 + k) * 16 + g] = ya, gu[((mat * 2 + 1) * 4 + k) * 16 + g + 8] = yb;
    }
    __syncthreads();
    const float rr = PRE ? rsqrtf((ssq[0] + ssq[1] + ssq[2] + ssq[3]) / (float)D + eps) : 1.0f;
    float a = 0.0f;
    if (threadIdx.x < AR) { /* act row rank AR + threadIdx.x: K slices summed in order */
        const int rb = threadIdx.x / 16, r = threadIdx.x % 16;
        float gs = 0.0f, us = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) gs += gu[((0 * 2 + rb) * 4 + kk) * 16 + r], us += gu[((1 * 2 + rb) * 4 + kk) * 16 + r];
        gs *= rr, us *= rr;
        a = silu_f(gs) * us;
    }
    cluster_wait(); /* the start barrier */
    if (threadIdx.x < AR)
        for (int q = 0; q < CS; q++) st_cluster(act + rank * AR + threadIdx.x, (uint32_t)q, a);
    cluster_arrive(); /* release: every block's act before any block reads it */
    cluster_wait();

    /* down: all 512 activations as digits (each warp its own copy), the task in slot 0 */
    dn = gemv_tq::prep_x_warp<I>(act, bw, xw);
    __syncwarp();
    gemv_tq::tile<I, NSP>::x_frags(bw, 0, g, c, xb);
    gemv_tq::tile<I, NSP> td;
    cp_wait<0>();
    __syncwarp();
    gemv_ring::tile_from<I>(td, slot0, g, c);
    td.dot_x(xb, xw, dn, 0, g, c, ya, yb);
    float wj;
    if (!PRE) wj = shared_slot ? sgate[0] : wts[j];
    else if (shared_slot) wj = sigmoid_f(rr * z[256]);
    else { /* exp(rr z_j) / sum over the 8 of exp(rr z_k), from the largest */
        const float zl = lane < 8 ? rr * z[ids[lane] & 255] : -INFINITY, zm = warp_max(zl);
        const float ez = lane < 8 ? expf(zl - zm) : 0.0f, den = warp_sum(ez);
        wj = __shfl_sync(0xffffffffu, ez, j) / den;
    }
    if (c == 0) {
        float *p = P + (size_t)j * D + rank * DR + warp * 16;
        p[g] = wj * ya, p[g + 8] = wj * yb;
    }
#else
    __trap();
#endif
}

/* h[d] += sum_j P[j][d], slots in order */
__global__ void combine_kernel(const float *__restrict__ P, float *__restrict__ h, const lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    float v[J];
#pragma unroll
    for (int jj = 0; jj < J; jj++) v[jj] = P[(size_t)jj * D + d];
    float t = 0.0f;
#pragma unroll
    for (int jj = 0; jj < J; jj++) t += v[jj];
    h[d] += t;
}

/* The kernel's attributes: its shared memory, the non-portable cluster size 16 */
template <bool PRE = false>
static cudaError_t set_attributes() {
    const cudaError_t err = cudaFuncSetAttribute(moe_cluster_kernel<PRE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM);
    return err ? err : cudaFuncSetAttribute(moe_cluster_kernel<PRE>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

static cudaError_t launch(const lc_qmat &gate, const lc_qmat &up, const lc_qmat &sg, const lc_qmat &su, const lc_qmat &down,
                          const lc_qmat &sdown, const int32_t *ids, const float *w, const float *sgate, const float *x,
                          float *P, cudaStream_t st) {
    static bool set = false;
    if (!set) {
        const cudaError_t err = set_attributes();
        if (err) return err;
        set = true;
    }
    return cluster_launch(moe_cluster_kernel<false>, CS, dim3(J * CS), dim3(WARPS * 32), SMEM, st, gate, up, sg, su, down, sdown,
                          ids, w, sgate, x, P, (const float *)nullptr, (const float *)nullptr, 0.0f, (const lc_ctrl *)nullptr);
}

/* How many clusters of CS blocks with SMEM bytes can be resident at once */
static int max_clusters() {
    return set_attributes() ? 0 : cluster_count(moe_cluster_kernel<false>, CS, J * CS, WARPS * 32, SMEM);
}

} // namespace moe_cluster

/* ---- the early routing (docs/PERFORMANCE.md, "What limits the step now", 1) ----
 * The top-K's order does not depend on the RMSNorm factor, and the router is
 * linear: R diag(nw) (h + W_o m) = R diag(nw) h + M m, M = R diag(nw) W_o.
 * So route_z_kernel chooses the ids from h before out_proj and the mixer's
 * output m, and out_proj (ring_gemv<4096, true>: no wait before its work)
 * runs beside it; out_proj waits for it before its stores, so the expert
 * kernel (moe_cluster_kernel<true>) reads the ids before its own wait and
 * requests every slot's codes while out_proj drains.  The chain of a layer:
 *   route_z -> out_proj (late wait) -> moe_cluster<true> -> combine
 * against the engine's
 *   out_proj -> lc_moe_slots -> lc_moe_slots_combine. */
namespace early {

using moe_cluster::D;
using moe_cluster::WARPS;
constexpr int ZROWS = 257, ZQ = 4, MC = 4096; /* router rows (256 experts + shared gate), warps a row, mixer width */

/* M[r][c] = sum_d R[r][d] nw[d] Wo[d][c] (dequantised, fp64 sums): once per (router, out_proj) pair */
__global__ void make_M_kernel(lc_qmat R, lc_qmat Wo, const float *__restrict__ nw, float *__restrict__ M) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (c >= MC) return;
    double acc = 0;
    for (int d = 0; d < D; d++) {
        const uint32_t rq = (R.w[((size_t)r * D + d) / 4] >> (8 * (d % 4))) & 255u;
        const size_t rg = (size_t)r * (D / 64) + d / 64;
        const double rv = (double)bf16_to_f32(R.s[rg]) * rq + bf16_to_f32(R.b[rg]);
        const uint32_t wq = (Wo.w[((size_t)d * MC + c) / 8] >> (4 * (c % 8))) & 15u;
        const size_t wg = (size_t)d * (MC / 64) + c / 64;
        const double wv = (double)bf16_to_f32(Wo.s[wg]) * wq + bf16_to_f32(Wo.b[wg]);
        acc += rv * nw[d] * wv;
    }
    M[(size_t)r * MC + c] = (float)acc;
}

/* z[r] = R[r] . (nw * h) + M[r] . m for the 257 rows, four warps a row (a
 * quarter of both dots each), weights requested before the wait; the last
 * block to finish routes over z[0..255] (topk_warp: the order of
 * softmax(z), which is that of softmax(rr z)) into ids.  grid
 * ceil(257 ZQ / WARPS). */
__global__ void __launch_bounds__(WARPS * 32) route_z_kernel(lc_qmat R, const float *__restrict__ M, const float *__restrict__ h,
                                                           const float *__restrict__ nw, const float *__restrict__ m, float *z,
                                                           int32_t *ids, float *zw, float *zsg, unsigned *done) {
    __shared__ float part[WARPS];
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gw = blockIdx.x * WARPS + warp, r = gw / ZQ, q = gw % ZQ;
    const bool row = r < ZROWS;
    uint4 rq = make_uint4(0, 0, 0, 0);
    float rs = 0.0f, rb = 0.0f;
    float4 mv[8];
    const int ch = q * 32 + lane; /* the lane's 16 router inputs: 16 ch .. 16 ch + 15, group ch / 4 */
    if (row) {
        rq = __ldg(reinterpret_cast<const uint4 *>(R.w) + (size_t)r * (D / 16) + ch);
        rs = bf16_to_f32(R.s[(size_t)r * (D / 64) + ch / 4]), rb = bf16_to_f32(R.b[(size_t)r * (D / 64) + ch / 4]);
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        mv[i] = row ? __ldg(reinterpret_cast<const float4 *>(M + (size_t)r * MC) + q * 256 + lane + 32 * i) : make_float4(0, 0, 0, 0);
    lc_pdl_wait();
    lc_pdl_launch_dependents(); /* out_proj may start now: it reads only what was written before this kernel */
    float acc = 0.0f;
    if (row) {
        float qx = 0.0f, xsum = 0.0f;
        const uint32_t wd[4] = {rq.x, rq.y, rq.z, rq.w};
#pragma unroll
        for (int t = 0; t < 16; t++) {
            const int col = 16 * ch + t;
            const float xv = h[col] * nw[col];
            qx += (float)((wd[t / 4] >> (8 * (t % 4))) & 255u) * xv, xsum += xv;
        }
        acc = rs * qx + rb * xsum;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const float4 a = mv[i], b = reinterpret_cast<const float4 *>(m)[q * 256 + lane + 32 * i];
            acc += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
        }
    }
    acc = warp_sum(acc);
    if (lane == 0) part[warp] = acc;
    __syncthreads();
    if (row && q == 0 && lane == 0) z[r] = ((part[warp] + part[warp + 1]) + part[warp + 2]) + part[warp + 3];
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || warp) return;
    __threadfence();
    topk_warp<8, false>(z, 256, 8, ids, zw, zsg);
    if (lane == 0) *done = 0;
}

static int grid() { return (ZROWS * ZQ + WARPS - 1) / WARPS; }

} // namespace early

/* ---- host ------------------------------------------------------------------- */
constexpr int E_TEST = 768, KX = MOE_K, D_ = MOE_D, I_ = MOE_I;
static_assert(D_ == moe_cluster::D && I_ == moe_cluster::I, "the workshop's shapes");

/* The engine's router on random 8-bit weights of the real shape (256
 * experts + the shared gate over 2048 inputs), `trials` inputs: ids equal to
 * the fp64 reference's, in order, weights and gate within 1e-5.  Where two
 * of the first nine logits lie within 1e-4 of each other the fp32 sums may
 * order them either way: such an input is reported and not counted. */
/* An 8-bit router of the real shape (256 experts + the shared gate over
 * 2048 inputs) with random codes whose logits spread like a trained one's */
static lc_qmat make_router() {
    constexpr int R = 257;
    lc_qmat m = {};
    m.rows = R, m.cols = D_, m.bits = 8, m.n_mat = 1;
    const size_t wn = (size_t)R * D_ / 4, gn = (size_t)R * D_ / 64;
    uint32_t *w;
    uint16_t *sc, *bi;
    CK(cudaMalloc(&w, wn * 4));
    CK(cudaMalloc(&sc, gn * 2));
    CK(cudaMalloc(&bi, gn * 2));
    const float s0 = 0.05f / 73.6f;
    CK(lc_fill_u32(w, wn, 4242, 0));
    CK(lc_fill_bf16(sc, gn, 4243, 0.9f * s0, 1.1f * s0, 0));
    CK(lc_fill_bf16(bi, gn, 4244, -127.5f * 1.1f * s0, -127.5f * 0.9f * s0, 0));
    m.w = w, m.s = sc, m.b = bi;
    return m;
}

static void check_router(int trials) {
    constexpr int E = 256, R = E + 1, K = KX;
    const lc_qmat m = make_router();
    const size_t wn = (size_t)R * D_ / 4, gn = (size_t)R * D_ / 64;
    uint32_t *w = (uint32_t *)m.w;
    uint16_t *sc = (uint16_t *)m.s, *bi = (uint16_t *)m.b;
    std::vector<uint32_t> hw(wn);
    std::vector<uint16_t> hs(gn), hb(gn);
    CK(cudaMemcpy(hw.data(), w, wn * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), sc, gn * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), bi, gn * 2, cudaMemcpyDeviceToHost));
    float *xn, *logits, *wts, *sgate, *dh, *dnw;
    int32_t *ids;
    unsigned *done;
    CK(cudaMalloc(&xn, D_ * 4));
    CK(cudaMalloc(&logits, R * 4));
    CK(cudaMalloc(&wts, K * 4));
    CK(cudaMalloc(&sgate, 4));
    CK(cudaMalloc(&ids, K * 4));
    CK(cudaMalloc(&done, 4));
    CK(cudaMemset(done, 0, 4));
    const std::vector<float> nw = rnd(D_, 77, 0.5f, 1.5f);
    dnw = up_f32(nw);
    int bad = 0, skipped = 0;
    double worst = 0;
    for (int t = 0; t < trials; t++) {
        const std::vector<float> h = rnd(D_, 1000 + t, -2.f, 2.f);
        dh = up_f32(h);
        CK(lc_moe_router(&m, dh, dnw, 1e-6f, xn, logits, K, ids, wts, sgate, done, nullptr, 0));
        CK(cudaDeviceSynchronize());
        int32_t gi[K];
        float gw[K], gs;
        CK(cudaMemcpy(gi, ids, sizeof gi, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gw, wts, sizeof gw, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&gs, sgate, 4, cudaMemcpyDeviceToHost));
        cudaFree(dh);
        /* reference */
        double ss = 0;
        for (int d = 0; d < D_; d++) ss += (double)h[d] * h[d];
        const double rr = 1.0 / sqrt(ss / D_ + 1e-6);
        std::vector<double> lg(R);
        for (int e = 0; e < R; e++) {
            double acc = 0;
            for (int d = 0; d < D_; d++) {
                const double q = (hw[((size_t)e * D_ + d) / 4] >> (8 * (d % 4))) & 255u;
                const size_t gi_ = (size_t)e * (D_ / 64) + d / 64;
                acc += (bfh(hs[gi_]) * q + bfh(hb[gi_])) * (h[d] * rr * nw[d]);
            }
            lg[e] = acc;
        }
        double mx = -1e300;
        for (int e = 0; e < E; e++) mx = fmax(mx, lg[e]);
        std::vector<double> p(E);
        double sum = 0;
        for (int e = 0; e < E; e++) sum += (p[e] = exp(lg[e] - mx));
        std::vector<int> order(E);
        for (int e = 0; e < E; e++) order[e] = e;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
        bool tie = false; /* fp32 sums may order logits closer than this either way */
        for (int k = 0; k < K; k++) tie |= lg[order[k]] - lg[order[k + 1]] < 1e-4;
        if (tie) {
            skipped++;
            continue;
        }
        double wsum = 0;
        for (int k = 0; k < K; k++) wsum += p[order[k]] / sum;
        bool ok = true;
        for (int k = 0; k < K; k++) {
            ok &= gi[k] == order[k];
            worst = fmax(worst, fabs(gw[k] - p[order[k]] / sum / wsum));
        }
        worst = fmax(worst, fabs(gs - 1.0 / (1.0 + exp(-lg[E]))));
        bad += !ok;
    }
    const bool pass = bad == 0 && worst < 1e-5;
    g_failures += !pass;
    printf("router (lc_moe_router, %s): %d inputs, ids %s (%d differ, %d near-ties skipped), max |dw| %.3g  %s\n",
           getenv("LILAC_ROUTER") ? getenv("LILAC_ROUTER") : "default", trials, bad ? "DIFFER" : "equal", bad, skipped,
           worst, pass ? "PASS" : "FAIL");
    cudaFree(w), cudaFree(sc), cudaFree(bi), cudaFree(xn), cudaFree(logits), cudaFree(wts), cudaFree(sgate), cudaFree(ids),
        cudaFree(done), cudaFree(dnw);
}

struct moe : moe_inputs {
    float *act, *P;
    int var; /* 0 engine tq_gate_up + tq_down, 1 cluster + combine, 2 cluster alone,
              * 3 the engine's router + gate/up + down (lc_moe_router, _gate_up, _down: routing from h),
              * 4 the engine's one-kernel MoE (lc_moe_slots + lc_moe_slots_combine) */
    lc_qmat R;                                   /* the router (variants 3, 4) */
    float *nw, *xn, *logits, *rw, *rsg;          /* post-attention norm; the routing's outputs */
    int32_t *rids;
    unsigned *done;
    /* variants 5 (the engine's out_proj + lc_moe_slots + combine) and 6 (the early routing) */
    std::vector<lc_qmat> wo; /* out_proj copies, 2048 x 4096 */
    std::vector<float *> M;  /* their M = R diag(nw) Wo */
    float *mix, *z, *zw, *zsg;
    unsigned *zdone;
};

/* ring_gemv<4096, true> (out_proj without the wait before its work) */
static cudaError_t launch_late_out_proj(const lc_qmat &W, const float *x, float *h, cudaStream_t st) {
    static bool set = false;
    constexpr size_t smem = gemv_ring::smem_bytes<4096>();
    if (!set) {
        const cudaError_t err = cudaFuncSetAttribute(gemv_ring::ring_gemv<4096, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err) return err;
        set = true;
    }
    return gemv_stream::launch_k(gemv_ring::ring_gemv<4096, true>, dim3(gemv_stream::sm_count()), dim3(gemv_ring::WARPS * 32), smem,
                                 st, true, W, x, (const float *)nullptr, 0.0f, h, (const float *)h, (const lc_ctrl *)nullptr);
}

static cudaError_t launch_pre(const moe *m, const lc_qmat &sg, const lc_qmat &su, const lc_qmat &sd, cudaStream_t st) {
    using namespace moe_cluster;
    static bool set = false;
    if (!set) {
        const cudaError_t err = set_attributes<true>();
        if (err) return err;
        set = true;
    }
    return cluster_launch(moe_cluster_kernel<true>, CS, dim3(J * CS), dim3(WARPS * 32), SMEM, st, m->gate, m->up, sg, su, m->down, sd,
                          (const int32_t *)m->rids, (const float *)nullptr, (const float *)nullptr, (const float *)m->h, m->P,
                          (const float *)m->z, (const float *)m->nw, 1e-6f, (const lc_ctrl *)nullptr);
}
static void rep_fn(int rep, cudaStream_t st, void *p) {
    moe *m = (moe *)p;
    lc_qmat sg, su;
    moe_views(m->sgu[rep % m->sgu.size()], sg, su);
    const lc_qmat &sd = m->sdown[rep % m->sdown.size()];
    const int32_t *ids = m->ids + (rep % m->nsets) * KX;
    if (m->var == 3) {
        CK(lc_moe_router(&m->R, m->h, m->nw, 1e-6f, m->xn, m->logits, KX, m->rids, m->rw, m->rsg, m->done, nullptr, st));
        CK(lc_moe_gate_up(&m->gate, &m->up, &sg, &su, m->rids, KX, m->xn, m->act, nullptr, st));
        CK(lc_moe_down(&m->down, &sd, m->rids, m->rw, m->rsg, KX, m->act, m->h, nullptr, st));
        return;
    }
    if (m->var == 5 || m->var == 6) {
        const size_t c = rep % m->wo.size();
        if (m->var == 5) {
            CK(lc_gemv(&m->wo[c], 0, m->mix, m->h, m->h, nullptr, st));
            CK(lc_moe_slots(&m->R, &m->gate, &m->up, &sg, &su, &m->down, &sd, m->h, m->nw, 1e-6f, m->P, m->rids, m->rw, m->rsg,
                            nullptr, st));
            CK(lc_moe_slots_combine(m->P, m->h, 1, nullptr, st));
            return;
        }
        CK(gemv_stream::launch_k(early::route_z_kernel, dim3(early::grid()), dim3(early::WARPS * 32), 0, st, true, m->R,
                                 (const float *)m->M[c], (const float *)m->h, (const float *)m->nw, (const float *)m->mix, m->z,
                                 m->rids, m->zw, m->zsg, m->zdone));
        CK(launch_late_out_proj(m->wo[c], m->mix, m->h, st));
        CK(launch_pre(m, sg, su, sd, st));
        CK(gemv_stream::launch_k(moe_cluster::combine_kernel, dim3(D_ / 256), dim3(256), 0, st, true, (const float *)m->P, m->h,
                                 (const lc_ctrl *)nullptr));
        return;
    }
    if (m->var == 4) {
        CK(lc_moe_slots(&m->R, &m->gate, &m->up, &sg, &su, &m->down, &sd, m->h, m->nw, 1e-6f, m->P, m->rids, m->rw, m->rsg,
                        nullptr, st));
        CK(lc_moe_slots_combine(m->P, m->h, 0, nullptr, st));
        return;
    }
    if (m->var == 0) {
        CK(gemv_tq::launch_gate_up<4>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st));
        CK(gemv_tq::launch_down<1>(m->down, sd, ids, m->w, m->sg, m->act, m->h, nullptr, st));
        return;
    }
    CK(moe_cluster::launch(m->gate, m->up, sg, su, m->down, sd, ids, m->w, m->sg, m->x, m->P, st));
    if (m->var == 1) CK(gemv_stream::launch_k(moe_cluster::combine_kernel, dim3(D_ / 256), dim3(256), 0, st, true, m->P, m->h,
                                              (const lc_ctrl *)nullptr));
}

/* Variants v0 (the reference) and v0 + 1 of the MoE with routing from h,
 * each from the same h: the second must route alike (the same ids) and give
 * h within 1e-4 of max |h|; both timed (h accumulates during timing: only
 * the time is read) */
static void compare_pair(moe &m, int v0, const char *const names[2], int width, int n) {
    std::vector<float> h0;
    int32_t id0[KX];
    for (int v = v0; v < v0 + 2; v++) {
        m.var = v;
        CK(cudaMemcpy(m.h, m.hh.data(), D_ * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(m.rids, 0xff, KX * 4));
        rep_fn(0, 0, &m);
        CK(cudaDeviceSynchronize());
        const std::vector<float> got = dl(m.h, D_);
        int32_t id[KX];
        CK(cudaMemcpy(id, m.rids, sizeof id, cudaMemcpyDeviceToHost));
        bool ok = true;
        double maxd = 0, maxh = 0;
        if (v == v0) h0 = got, memcpy(id0, id, sizeof id);
        else {
            for (int q = 0; q < KX; q++) ok &= id[q] == id0[q];
            for (int d = 0; d < D_; d++) maxd = fmax(maxd, fabs((double)h0[d] - got[d])), maxh = fmax(maxh, fabs((double)h0[d]));
            ok &= maxd <= 1e-4 * maxh;
        }
        g_failures += !ok;
        const double us = time_graph(rep_fn, &m, n, g_quick ? 1 : 20);
        printf("  %-*s %9.2f   ids %d %d %d ... %s  max |dh| %.3g  %s\n", width, names[v - v0], us, id[0], id[1], id[2],
               v == v0 ? "(reference)" : ok ? "equal" : "DIFFER", maxd, ok ? "PASS" : "FAIL");
    }
}

/* moe_slots.cu's phase stamps of the last launch (built with LC_MOE_SLOTS_STAMPS):
 * per phase, the mean time from the block's previous stamp, routed and shared
 * slots apart, and the span from the first release to the last store */
extern "C" int lc_moe_slots_stamps(unsigned long long *out);
static void print_stamps() {
    static unsigned long long t[9 * 16][13];
    const int cs = lc_moe_slots_stamps(&t[0][0]), nb = 9 * cs, nr = 8 * cs; /* cluster size; blocks, routed blocks */
    if (!cs) {
        (void)cudaGetLastError();
        return;
    }
    const char *ph[] = {"entry -> release (waiting on the predecessor)", "release -> x ready (digits, norm)",
                        "x -> routed, tasks issued", "issued -> first gate/up task in", "gate/up done (block barrier)",
                        "act exchanged", "down and store"};
    unsigned long long r0 = ~0ull, end = 0;
    for (int b = 0; b < nb; b++) r0 = t[b][1] < r0 ? t[b][1] : r0, end = t[b][7] > end ? t[b][7] : end;
    printf("  lc_moe_slots phases, last launch (us, mean over blocks: routed slots / shared slot):\n");
    for (int p = 1; p < 8; p++) {
        double a = 0, b = 0;
        for (int q = 0; q < nb; q++) (q < nr ? a : b) += (double)(t[q][p] - t[q][p - 1]) / 1e3;
        printf("    %-48s %6.2f / %6.2f\n", ph[p - 1], a / nr, b / cs);
    }
    const char *rp[] = {"x -> router dots done", "-> start barrier passed", "-> logits exchanged", "-> top-K done", "-> tasks issued"};
    const int ri[] = {2, 8, 9, 10, 11, 3};
    for (int p = 0; p < 5; p++) {
        double a = 0;
        for (int q = 0; q < nr; q++) a += (double)(t[q][ri[p + 1]] - t[q][ri[p]]) / 1e3;
        printf("      routed: %-40s %6.2f\n", rp[p], a / nr);
    }
    double lr = 0; /* the last routed block's ids */
    for (int q = 0; q < nr; q++) lr = fmax(lr, (double)(t[q][3] - r0) / 1e3);
    printf("    first release -> last store: %.2f us; first release -> last block routed: %.2f us\n", (double)(end - r0) / 1e3, lr);
    /* where the tail comes from: per cluster, from the first release (us), and the blocks that share their SM */
    int on_sm[1024] = {0};
    for (int b = 0; b < nb; b++) on_sm[t[b][12] & 1023]++;
    printf("    per cluster (from the first release, us): entry min..max, release max, routed max, act max, end min..max, blocks "
           "sharing an SM; SMs\n");
    for (int c = 0; c < 9; c++) {
        double e0 = 1e9, e1 = -1e9, rl = 0, ro = 0, ac = 0, n0 = 1e9, n1 = 0;
        int shared = 0;
        char sms[256];
        int o = 0;
        for (int q = c * cs; q < c * cs + cs; q++) {
            const double e = ((double)t[q][0] - (double)r0) / 1e3;
            e0 = fmin(e0, e), e1 = fmax(e1, e);
            rl = fmax(rl, ((double)t[q][1] - (double)r0) / 1e3), ro = fmax(ro, ((double)t[q][3] - (double)r0) / 1e3);
            ac = fmax(ac, ((double)t[q][6] - (double)r0) / 1e3);
            n0 = fmin(n0, ((double)t[q][7] - (double)r0) / 1e3), n1 = fmax(n1, ((double)t[q][7] - (double)r0) / 1e3);
            shared += on_sm[t[q][12] & 1023] > 1;
            o += snprintf(sms + o, sizeof sms - (size_t)o, "%s%llu", q == c * cs ? "" : ",", t[q][12]);
        }
        printf("    %d%s  %5.2f..%5.2f  %5.2f  %5.2f  %5.2f  %5.2f..%5.2f  %2d  %s\n", c, c == 8 ? "s" : " ", e0, e1, rl, ro, ac,
               n0, n1, shared, sms);
    }
}

/* how the GPU places clusters of 16: how many fit with one block an SM (the GPCs with 16 SMs or more) and two */
__global__ void probe_kernel(int *p) {
    if (p) p[0] = 0;
}
static void print_cluster_fit() {
    CK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CK(cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    for (int ns = 2; ns <= 16; ns *= 2) {
        const int one = cluster_count(probe_kernel, ns, 8 * ns, 256, 200 * 1024);
        const int two = cluster_count(probe_kernel, ns, 8 * ns, 256, 100 * 1024);
        printf("clusters of %2d resident at once: %3d at one block an SM (%3d SMs), %3d at two\n", ns, one, one * ns, two);
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) g_quick |= strcmp(argv[i], "--quick") == 0;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    printf("%s, %d SMs; moe_cluster_kernel: %zu B shared memory a block, clusters of %d: %d can be resident\n", pr.name,
           pr.multiProcessorCount, moe_cluster::SMEM, moe_cluster::CS, moe_cluster::max_clusters());
    g_copy_gbs = copy_gbs((size_t)1 << 30, 5);
    printf("D2D copy %.0f GB/s\n", g_copy_gbs);
    if (moe_cluster::max_clusters() < moe_cluster::J)
        printf("note: fewer than %d clusters resident at once: the kernel runs in more than one wave\n", moe_cluster::J);

    print_cluster_fit();
    check_router(g_quick ? 2 : 16);

    moe m = {};
    const int ne = g_quick ? 256 : E_TEST; /* variants 3 and 4 route among 256 */
    moe_inputs_make(m, ne, g_quick ? 2 : 64, g_quick ? 2 : 64);
    CK(cudaMalloc(&m.act, (size_t)(KX + 1) * I_ * 4));
    CK(cudaMalloc(&m.P, (size_t)moe_cluster::J * D_ * 4));
    m.R = make_router();
    m.nw = up_f32(rnd(D_, 77, 0.5f, 1.5f));
    CK(cudaMalloc(&m.xn, D_ * 4));
    CK(cudaMalloc(&m.logits, 257 * 4));
    CK(cudaMalloc(&m.rw, KX * 4));
    CK(cudaMalloc(&m.rsg, 4));
    CK(cudaMalloc(&m.rids, KX * 4));
    CK(cudaMalloc(&m.done, 4));
    CK(cudaMemset(m.done, 0, 4));

    /* reference for set 0, copy 0: act (fp64), then h + sum_j w_j down_j . act_j */
    std::vector<double> aref, href;
    moe_reference(m, false, aref, href);
    const double bytes = (KX + 1) * 3.0 * I_ * D_ * 0.5625;
    printf("\nMoE experts (8 routed + shared: gate/up, SwiGLU, down, combine, residual) — %.2f MB a repeat\n", bytes / 1e6);
    printf("  %-44s %9s %9s %8s  %10s\n", "variant", "us", "GB/s", "% copy", "max |err|");
    const char *names[] = {"engine: tq_gate_up + tq_down", "cluster of 16 per slot + combine", "cluster of 16 per slot alone"};
    const int n = g_quick ? 2 : 40;
    for (int v = 0; v < 3; v++) {
        m.var = v;
        CK(cudaMemcpy(m.h, m.hh.data(), D_ * 4, cudaMemcpyHostToDevice));
        rep_fn(0, 0, &m);
        CK(cudaDeviceSynchronize());
        std::vector<float> got = dl(m.h, D_);
        if (v == 2) { /* the combine on the host: the kernel's shares are what is checked */
            const std::vector<float> P = dl(m.P, (size_t)moe_cluster::J * D_);
            for (int d = 0; d < D_; d++) {
                float t = 0.0f;
                for (int j = 0; j < moe_cluster::J; j++) t += P[(size_t)j * D_ + d];
                got[d] = m.hh[d] + t;
            }
        }
        double maxd = 0, maxref = 0;
        for (int d = 0; d < D_; d++) maxd = fmax(maxd, fabs(href[d] - got[d])), maxref = fmax(maxref, fabs(href[d]));
        const bool ok = maxd <= 2e-5 * maxref + 1e-6;
        g_failures += !ok;
        const double us = time_graph(rep_fn, &m, n, g_quick ? 1 : 20); /* h accumulates during timing: only time is read */
        const double gbs = bytes / (us * 1e-6) / 1e9;
        printf("  %-44s %9.2f %9.0f %7.1f%%  %10.3g  %s\n", names[v], us, gbs, 100.0 * gbs / g_copy_gbs, maxd,
               ok ? "PASS" : "FAIL");
    }

    /* the whole MoE with routing from h: the engine's three kernels against its
     * one-kernel form, each from the same h; the one-kernel form is checked
     * against the three (same routing, sums within 1e-4 of max |h|) */
    if (!lc_moe_slots_ok(&m.R, &m.gate, &m.up, &m.gate, &m.up, &m.down, &m.down, KX)) {
        printf("lc_moe_slots: not available here (lc_moe_slots_ok): skipped\n");
    } else {
        printf("\nMoE with routing from h (router 8-bit 257 x 2048, one copy) — %.2f MB a repeat\n", (bytes + 257.0 * D_ * 1.0625) / 1e6);
        const char *en[] = {"engine: router + tq_gate_up + tq_down", "engine: lc_moe_slots + combine"};
        compare_pair(m, 3, en, 44, n);
        print_stamps();
    }

    /* a layer's out_proj and MoE: the engine's chain against the early routing
     * (ids from h before out_proj and the mixer's output through M), each from
     * the same h; same ids, h within 1e-4 of max |h| */
    {
        const int nc = g_quick ? 2 : 16; /* out_proj copies: 75 MB, beyond L2 */
        for (int i = 0; i < nc; i++) {
            m.wo.push_back(make_qmat(D_, early::MC, 1, 500 + 7 * i));
            float *M;
            CK(cudaMalloc(&M, (size_t)early::ZROWS * early::MC * 4));
            early::make_M_kernel<<<dim3(early::MC / 256, early::ZROWS), 256>>>(m.R, m.wo.back(), m.nw, M);
            CK(cudaGetLastError());
            m.M.push_back(M);
        }
        m.mix = up_f32(rnd(early::MC, 31, -0.5f, 0.5f));
        CK(cudaMalloc(&m.z, early::ZROWS * 4));
        CK(cudaMalloc(&m.zw, KX * 4));
        CK(cudaMalloc(&m.zsg, 4));
        CK(cudaMalloc(&m.zdone, 4));
        CK(cudaMemset(m.zdone, 0, 4));
        CK(cudaDeviceSynchronize());
        printf("\nout_proj + MoE of a layer (out_proj 2048 x 4096, %d copies; M fp32 257 x 4096 a copy)\n", nc);
        const char *ln[] = {"engine: out_proj -> lc_moe_slots -> sum", "early: route_z | out_proj (late wait) -> experts -> sum"};
        compare_pair(m, 5, ln, 56, n);
        for (int i = 0; i < nc; i++) free_qmat(m.wo[i]), cudaFree(m.M[i]);
        cudaFree(m.mix), cudaFree(m.z), cudaFree(m.zw), cudaFree(m.zsg), cudaFree(m.zdone);
    }
    moe_inputs_free(m);
    cudaFree(m.act), cudaFree(m.P);
    printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "all ok", g_failures);
    return g_failures ? 1 : 0;
}
