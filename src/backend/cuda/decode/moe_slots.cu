/* moe_slots.cu — the decode MoE block (spec §7) as one kernel: a cluster of
 * blocks per expert slot (8 routed + the shared expert; 8 blocks by default,
 * 16 before 2026-12-06: see the end of this comment) routes, runs the
 * slot's gate/up with SwiGLU and its down, and stores the slot's weighted
 * share of the output; a small kernel adds the nine shares to h in slot
 * order (deterministic).  moe.cu's three kernels (router, gate/up, down) are
 * the fallback for other shapes and LILAC_MOE=split.
 *
 * Why (docs/PERFORMANCE.md, "where the step goes inside the graph"): the
 * three kernels add 18 us a layer to the decode step for 3.8 us of bytes,
 * each mostly the dependent chain after its predecessor's end (the release,
 * the trip of ids / activations through L2, the block prologue).  Here the
 * joins stay inside a cluster, in distributed shared memory:
 *   - routing: every routed cluster computes all 256 expert logits, 256 / CS
 *     per block, with the router's weights requested before the predecessor
 *     ends, and broadcasts them to its CS blocks; then each block routes
 *     (moe_route.cuh's topk_warp: the router kernels' sums and order, so the
 *     same experts; one warp, or each warp by itself without topk1) and
 *     takes its slot's expert.  The shared slot skips routing (its gate/up
 *     codes are requested before the wait) and computes only the shared
 *     expert's gate row.
 *   - gate/up -> down: block `rank` computes act rows [AR rank, AR rank +
 *     AR) from two tasks a warp (gemv_ring.cuh's tiles: u8 codes x s8 digits
 *     of x on mma.m16n8k32), sends them to the cluster's blocks, and once
 *     all 512 have arrived computes down rows [DR rank, DR rank + DR) from
 *     the task requested while the gate/up ran (shape_of: CS, AR, DR).
 * x enters as digits of h * norm_w per warp slice (the RMSNorm factor,
 * which the router's block load computes, multiplies the sums).
 *
 * H200, inside the decode graph at 4K (tools/cupti_trace.c, 2026-12-03):
 * this kernel adds 16.6 us a layer and the sum 0.9, where router, gate/up
 * and down added 6.1-6.4 + 6.6 + 5.6; decode 688.2 against 669.4 tokens/s
 * at 4K, 622.0 / 609.2 at 32K, 476.5 / 467.5 at 128K (lilac bench, one
 * binary, median of 3; docs/PERFORMANCE.md).  Where the 16.6 go
 * (bench/kernels/moe_cluster_test's stamps, routed slots): 2.1-2.3 us from
 * the release to x, 5.5-6.5 to the routed ids (of which the warp's top-K
 * ~2.9), then 0.3 + 1.0-1.2 gate/up, 0.8-0.9 the exchange, 1.4 the down.
 * The top-K on sorted lanes (moe_route.cuh, 2026-12-04) took its stamp to
 * 1.56 us and decode to 719.3 / 648.0 / 490.6 tokens/s.
 *
 * h comes in one L2 trip: each thread loads its float4s of h once and
 * stages h * norm_w where the router's x goes; each warp takes its slice's
 * digits from there, then RMSNorm(h) * norm_w overwrites it (prep_x_warp
 * and load_x_smem took two trips; H100, 2026-12-05, with the attention
 * combine's and the DeltaNet step's changes of that day: decode 4K 698.1
 * against 661.2 tokens/s; docs/PERFORMANCE.md).
 *
 * Both exchanges go by st.async on per-block mbarriers (cluster.cuh), a
 * block waiting only for the bytes it receives, not on the cluster
 * barrier's release (MEMBAR.ALL.GPU): H100, 2026-12-06, decode 723.6
 * against 714.4 tokens/s at 4K, 646.5 / 639.4 at 32K.  compute-sanitizer's
 * synccheck faults on st.async in clusters of 16 (memcheck and racecheck
 * pass; bench/kernels/st_async_test shows it on the bare pattern, at 16
 * blocks only), so synccheck runs the barrier form: LILAC_DECODE_TRY=none
 * (cuda_ops.h; the same floats).
 *
 * Clusters of 8 blocks of 16 warps, one block an SM (shape_of; "c8"), and
 * the top-K by one warp a block ("topk1"), the default since 2026-12-06.
 * The H100 places only 7 clusters of 16 one block an SM (GPCs), so 4 of the
 * 9 clusters shared 16 SMs pairwise and ended ~4.8 us after the others
 * while 20 SMs idled (moe_cluster_test's per-cluster stamps); 9 clusters of
 * 8 get SMs of their own.  Their 16 warps would each route by themselves,
 * twice an SM's work of the 8-warp form, so one warp routes and a block
 * barrier shares its choice.  H100, one binary, decode 760.3 against 740.0
 * tokens/s at 4K, 670.7 / 655.5 at 32K, 466.6 / 459.8 at 128K
 * (docs/PERFORMANCE.md).
 *
 * From h to the router's dots a routed block meets at two block barriers,
 * not five (the comment at "x:" below; the same floats): H100, 2026-12-07,
 * decode 785.3 against 776.5 tokens/s at 4K, 691.3 / 683.7 at 32K, 476.3 /
 * 473.3 at 128K (docs/PERFORMANCE.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/decode/gemv_ring.cuh"
#include "backend/cuda/decode/moe_route.cuh"

namespace {

using gemv_ring::NSP;
using gemv_ring::S;
using gemv_ring::TASK;
using gemv_stream::cp_commit;
using gemv_stream::cp_wait;
using gemv_tq::SLOTS;
using RQ = qdot<8, 4, 32>; /* the router: 8-bit rows of 2048, a warp a row */

constexpr int I = 512, D = 2048, E = 256, KR = 8, J = KR + 1; /* expert inner, hidden, experts, top-K, slots */
constexpr int BFW = (NSP + 1) * 2 * SLOTS; /* one warp's digits of a 512-input slice and the zero span (uint4) */

/* A slot's cluster of CS blocks of NW warps.  Block `rank` computes act rows
 * [AR rank, AR rank + AR): RBS row blocks x {gate, up} x 4 K slices, TG
 * tasks a warp (warp w: matrix (w / 4) % 2, slice w % 4, row blocks from
 * TG (w / 8)), then down rows [DR rank, DR rank + DR), TD tasks a warp, all
 * through the warp's 2-slot ring.  CS = 16, NW = 8 (TG 2, TD 1; two blocks
 * an SM) or CS = 8, NW = 16 (the same warps, one block an SM). */
template <int CS, int NW>
struct shape_of {
    static constexpr int NT = NW * 32;                            /* threads */
    static constexpr int AR = I / CS, RBS = AR / 16, DR = D / CS; /* act rows, their row blocks, down rows */
    static constexpr int TG = RBS * 8 / NW, TD = DR / (16 * NW);  /* gate/up and down tasks a warp */
    static constexpr int RP = E / (CS * NW);                      /* router rows a warp */
    static_assert(NW % 8 == 0 && TG >= 2 && TG * NW == RBS * 8 && TD * 16 * NW == DR && RP * CS * NW == E, "the tasks a warp");
    /* dynamic shared memory, in bytes from the start */
    static constexpr size_t O_BF = (size_t)NW * S * TASK;         /* rings: 2 tasks a warp */
    static constexpr size_t O_XS4 = O_BF + (size_t)NW * BFW * 16; /* the router's x, swizzled (float4) */
    static constexpr size_t O_XS = O_XS4 + (size_t)D * 4;         /* per warp: its digits' group scales */
    static constexpr size_t O_GU = O_XS + NW * 8 * 4;             /* gate/up sums [mat][row block][slice][16] */
    static constexpr size_t O_ACT = O_GU + 2 * RBS * 4 * 16 * 4;  /* the slot's 512 activations */
    static constexpr size_t O_SCR = O_ACT + I * 4;                /* block reductions */
    static constexpr size_t O_LG = O_SCR + 32 * 4;                /* the 256 expert logits (+ one unused) */
    static constexpr size_t O_SEL = O_LG + (E + 4) * 4;           /* per warp: the top-K ids and weights */
    static constexpr size_t O_MB = (O_SEL + (size_t)NW * KR * 8 + 16 + 7) / 8 * 8; /* XCHG: the two exchanges' mbarriers */
    static constexpr size_t SMEM = O_MB + 2 * 8;
    static_assert(O_BF >= D * 4, "a routed block's RMSNorm(h) * norm_w in its rings");
};

/* LC_MOE_SLOTS_STAMPS (the workshop's build only): thread 0 of each block
 * records the global timer at eight points of the last launch */
#ifdef LC_MOE_SLOTS_STAMPS
__device__ unsigned long long slots_stamps[J * 16][13]; /* clusters of up to 16; [12]: the block's SM */
#define STAMP(i)                                                                                                               \
    do {                                                                                                                       \
        if (threadIdx.x == 0) {                                                                                                \
            unsigned long long t_;                                                                                             \
            unsigned sm_;                                                                                                      \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                                                            \
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));                                                                  \
            slots_stamps[blockIdx.x][i] = t_;                                                                                  \
            slots_stamps[blockIdx.x][12] = sm_;                                                                                \
        }                                                                                                                      \
    } while (0)
#else
#define STAMP(i) (void)0
#endif

/* grid J x CS blocks in clusters of CS; cluster j < KR: slot j of the
 * routing, cluster KR: the shared expert.  P[j][d] = w_j down_j . act_j
 * (sgate for the shared slot).  ids / w / sgate: the routing, for traces.
 * XCHG: the exchanges by st.async (the default; false under
 * LILAC_DECODE_TRY=none).  CS, NW: see shape_of.  T1: the top-K by warp 0
 * alone, then a block barrier (else by every warp, no barrier).  ES (with
 * T1; "eslot"): warp 0 takes the top-K's rounds only up to rank j before
 * that barrier, the block requests its expert's codes, and warp 0 takes the
 * other rounds and the weights while they travel (moe_route.cuh's
 * topk_split8; the weight is read after gate/up's barrier). */
template <bool XCHG, int CS, int NW, bool T1, bool TK9, bool ES = false>
__global__ void __launch_bounds__(NW * 32, NW == 8 ? 2 : 1)
    moe_slots_kernel(lc_qmat R, lc_qmat gate, lc_qmat up, lc_qmat sg, lc_qmat su, lc_qmat down, lc_qmat sdown,
                     const float *__restrict__ h, const float *__restrict__ norm_w, float eps, float *__restrict__ P,
                     int32_t *__restrict__ ids, float *__restrict__ w, float *__restrict__ sgate, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    using L = shape_of<CS, NW>;
    constexpr int AR = L::AR, RBS = L::RBS, DR = L::DR, RP = L::RP, TG = L::TG, TD = L::TD;
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + L::O_BF);
    float4 *xs4 = reinterpret_cast<float4 *>(smem + L::O_XS4);
    float *xs = reinterpret_cast<float *>(smem + L::O_XS), *gu = reinterpret_cast<float *>(smem + L::O_GU);
    float *act = reinterpret_cast<float *>(smem + L::O_ACT);
    float *scratch = reinterpret_cast<float *>(smem + L::O_SCR), *lg = reinterpret_cast<float *>(smem + L::O_LG);
    int32_t *sel_i = reinterpret_cast<int32_t *>(smem + L::O_SEL);
    float *sel_w = reinterpret_cast<float *>(sel_i + NW * KR), *sgs = sel_w + NW * KR;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int j = blockIdx.x / CS, mat = (warp / 4) & 1, k = warp % 4, rb0 = TG * (warp / 8); /* row blocks rb0 .. rb0 + TG - 1 */
    const uint32_t rank = cluster_rank();
    const bool shared_slot = j == KR;
    unsigned char *slot0 = smem + (size_t)warp * S * TASK, *slot1 = slot0 + TASK;
    /* the warp's tasks: i < TG gate/up rows g_row + 16 i of slice k, then down rows d_row + 16 (i - TG); task i in slot i % 2 */
    const uint32_t *g_w = nullptr, *d_w = nullptr;
    const uint16_t *g_s = nullptr, *g_b = nullptr, *d_s = nullptr, *d_b = nullptr;
    size_t g_row = 0, d_row = 0;
    auto issue = [&](int i) { /* past the last task: an empty group, so that cp_wait counts alike */
        unsigned char *sl = (i & 1) ? slot1 : slot0;
        if (i < TG) gemv_ring::copy_task<D>(sl, g_w, g_s, g_b, g_row + 16 * i, k);
        else if (i < TG + TD) gemv_ring::copy_task<I>(sl, d_w, d_s, d_b, d_row + 16 * (i - TG), 0);
        cp_commit();
    };
    uint64_t *xbar = reinterpret_cast<uint64_t *>(smem + L::O_MB); /* XCHG: [0] the logits, [1] the activations */
    STAMP(0);
    if constexpr (XCHG) { /* before the start barrier, which publishes them to the peers (the block barrier orders the
                             * init before the expect_tx and the arrives for racecheck, which does not see the cluster
                             * barrier as one) */
        if (threadIdx.x == 0) {
            if (!shared_slot) mbar_init(xbar, 1 + NW); /* + one storer of the own logits a warp */
            mbar_init(xbar + 1, 1 + AR);                  /* + the act rows' threads */
            mbar_fence_init();
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (!shared_slot) mbar_expect_tx(xbar, (E - E / CS) * 4);
            mbar_expect_tx(xbar + 1, (I - AR) * 4);
        }
    }
    x_share<D, 256> xsh; /* the first 256 threads' float4s of h and norm_w (load_x_smem's, in its order whatever NW) */
    xsh.load_norm(norm_w);

    /* before the predecessor ends: the router rows' codes (routed slots), or
     * the shared expert's gate row and its first two gate/up tasks */
    RQ::chunk rc[RP];
    if (!shared_slot) {
#pragma unroll
        for (int p = 0; p < RP; p++) RQ::fetch(R, 0, (int)rank * NW + warp + p * CS * NW, lane, rc[p]);
    } else {
        if (warp == 0) RQ::fetch(R, 0, E, lane, rc[0]);
        g_w = mat ? su.w : sg.w; /* by field, not by reference (see gemv_tq.cuh) */
        g_s = mat ? su.s : sg.s, g_b = mat ? su.b : sg.b;
        g_row = (size_t)rank * AR + 16 * rb0;
        d_w = sdown.w, d_s = sdown.s, d_b = sdown.b;
        d_row = (size_t)rank * DR + warp * TD * 16;
        issue(0);
        issue(1);
    }
    const bool stopped = lc_pdl_wait_stop(ctrl);
    STAMP(1);
    lc_pdl_launch_dependents();
    if (stopped) { /* every block of every cluster: no barrier is left waiting */
        cp_wait<0>();
        return;
    }
    cluster_arrive_relaxed(); /* the start barrier: peers' shared memory is written only once every block has started */
    if (threadIdx.x == 0) lg[E] = 0.0f; /* topk_warp reads a gate logit there (unused); x's barriers publish it */

    /* x: the warp's K slice of h * norm_w as digits (gate/up), and the
     * block's RMSNorm(h) * norm_w for the router rows.  h in one trip: the
     * block's float4s, their products with norm_w staged in xs4, from which
     * each warp takes its slice's digits (the values prep_x_warp computes).
     * One barrier publishes the products and the warps' sums of x^2
     * (block_sum's order; scratch is first written here).  A routed block
     * puts RMSNorm(h) * norm_w in its rings (empty until the experts are
     * known), routes after one more barrier, and takes its digits while the
     * logits travel; the shared slot, whose rings are in flight, takes its
     * digits first, then overwrites the products (two barriers).  The
     * router rows add x's chunk sums themselves (SUMMED: store's order, no
     * sums' table and its two barriers).  Five barriers before 2026-12-07. */
    uint4 *bw = bf + warp * BFW;
    float *xw = xs + warp * 8;
    {
        const float ss = warp_sum(xsh.load(h, norm_w, true));
        if (lane == 0) scratch[warp] = ss;
    }
    xsh.template stage<RQ::EPC>(xs4);
    __syncthreads();
    const float rr = rsqrtf(warp_sum(lane < NW ? scratch[lane] : 0.0f) / (float)D + eps);
    auto digits = [&]() {
        float v[2][8];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int q = k * 128 + 2 * (lane + 32 * i); /* float4 of h: task lane + 32 i of slice k */
            const float4 a = xs4[x_share<D>::slot(q, RQ::EPC)], b = xs4[x_share<D>::slot(q + 1, RQ::EPC)];
            v[i][0] = a.x, v[i][1] = a.y, v[i][2] = a.z, v[i][3] = a.w;
            v[i][4] = b.x, v[i][5] = b.y, v[i][6] = b.z, v[i][7] = b.w;
        }
        return gemv_tq::digits_warp<4 * 128>(v, bw, xw);
    };
    float dn = 0.0f, acc[RP];
    if (!shared_slot) {
        float4 *xn4 = reinterpret_cast<float4 *>(smem); /* the rings' first 8 KB */
        xsh.template put<RQ::EPC>(rr, true, nullptr, xn4);
        __syncthreads();
        STAMP(2);
        bool all[RP];
#pragma unroll
        for (int p = 0; p < RP; p++) all[p] = true;
        router_rows<8, 4, 32, RP, true>(rc, all, lane, xn4, nullptr, acc);
    } else {
        dn = digits();
        __syncthreads(); /* every warp has its slice before the products are overwritten */
        xsh.template put<RQ::EPC>(rr, true, nullptr, xs4);
        __syncthreads();
        STAMP(2);
        if (warp == 0) {
            const float sl = router_row<8, 4, 32, true>(rc[0], true, lane, xs4, nullptr);
            if (lane == 0) sgs[0] = sigmoid_f(sl);
        }
    }
    STAMP(8);
    cluster_wait(); /* the start barrier */
    STAMP(9);

    float wj = 0.0f;
    if (!shared_slot) {
        /* the logits to every block, then the block routes (warp 0 with topk1, else each warp by itself) */
        if constexpr (XCHG) {
#pragma unroll
            for (int p = 0; p < RP; p++) {
                float *dst = lg + rank * NW + warp + p * CS * NW;
                if (lane == (int)rank) *dst = acc[p];
                else if (lane < CS) st_async(dst, (uint32_t)lane, xbar, acc[p]);
            }
            if (lane == (int)rank) mbar_arrive(xbar);
            dn = digits(); /* while the logits travel */
            mbar_wait(xbar, 0);
        } else {
#pragma unroll
            for (int p = 0; p < RP; p++)
                if (lane < CS) st_cluster(lg + rank * NW + warp + p * CS * NW, (uint32_t)lane, acc[p]);
            cluster_arrive(); /* release: the peers' logits before any block reads them */
            dn = digits();
            cluster_wait();
        }
        STAMP(10);
        int32_t *si = sel_i + (T1 ? 0 : warp * KR);
        float *sw = sel_w + (T1 ? 0 : warp * KR);
        topk_split8 es; /* ES: warp 0's top-K between its two parts */
        static_assert(!ES || (T1 && E == 256 && KR <= 8), "eslot: one routing warp, 8 logits a lane");
        if constexpr (ES) {
            if (warp == 0) es.start(lg, j, si); /* rank j first; the rest after the codes are requested (below) */
        } else if (!T1 || warp == 0) {
            topk_warp<E / 32, true, TK9>(lg, E, KR, si, sw, scratch + warp);
        }
        if constexpr (T1) __syncthreads();
        else __syncwarp();
        STAMP(11);
        int e = si[j];
        if constexpr (!ES) {
            wj = sw[j];
            if (j == 0 && rank == 0 && warp == 0 && lane < KR) ids[lane] = sel_i[lane], w[lane] = sel_w[lane];
        }
        const int ed = (unsigned)e < (unsigned)down.n_mat ? e : 0;
        e = (unsigned)e < (unsigned)gate.n_mat ? e : 0;
        g_w = mat ? up.w : gate.w;
        g_s = mat ? up.s : gate.s, g_b = mat ? up.b : gate.b;
        g_row = (size_t)e * I + rank * AR + 16 * rb0;
        d_w = down.w, d_s = down.s, d_b = down.b;
        d_row = (size_t)ed * D + rank * DR + warp * TD * 16;
        issue(0);
        issue(1);
        if constexpr (ES)
            if (warp == 0) { /* the other ranks and the weights while the codes travel (read after gate/up's barrier) */
                es.finish(j, KR, si, sw);
                __syncwarp();
                if (j == 0 && rank == 0 && lane < KR) ids[lane] = si[lane], w[lane] = sw[lane];
            }
    }
    STAMP(3);

    /* gate/up: TG tasks a warp, each slot refilled once read (the down tasks follow the gate/up ones) */
    uint4 xb[NSP][2];
    gemv_tq::tile<512, NSP>::x_frags(bw, 0, g, c, xb);
    float ya, yb;
    {
        gemv_tq::tile<D, NSP> tl;
#pragma unroll
        for (int t = 0; t < TG; t++) {
            cp_wait<1>(); /* task t (task t + 1 may be in flight) */
            __syncwarp(); /* the scale and bias rows came through other lanes' copies */
            if (t == 0) STAMP(4);
            gemv_ring::tile_from<D>(tl, (t & 1) ? slot1 : slot0, g, c);
            __syncwarp(); /* every lane has read the slot before it is refilled */
            issue(t + 2);
            tl.dot_x(xb, xw, dn, 0, g, c, ya, yb);
            float *q = gu + ((mat * RBS + rb0 + t) * 4 + k) * 16;
            if (c == 0) q[g] = rr * ya, q[g + 8] = rr * yb;
        }
    }
    __syncthreads();
    STAMP(5);
    if constexpr (ES)
        if (!shared_slot) wj = sel_w[j]; /* warp 0 wrote it before this barrier */
    if (threadIdx.x < AR) { /* act row rank AR + threadIdx.x: K slices summed in order, to every block */
        const int rb = threadIdx.x / 16, r = threadIdx.x % 16;
        float gs = 0.0f, us = 0.0f;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) gs += gu[((0 * RBS + rb) * 4 + kk) * 16 + r], us += gu[((1 * RBS + rb) * 4 + kk) * 16 + r];
        const float a = silu_f(gs) * us;
        if constexpr (XCHG) {
            act[rank * AR + threadIdx.x] = a;
            for (int q = 0; q < CS; q++)
                if (q != (int)rank) st_async(act + rank * AR + threadIdx.x, (uint32_t)q, xbar + 1, a);
            mbar_arrive(xbar + 1);
        } else {
            for (int q = 0; q < CS; q++) st_cluster(act + rank * AR + threadIdx.x, (uint32_t)q, a);
        }
    }
    if constexpr (XCHG) {
        mbar_wait(xbar + 1, 0); /* every block's act has arrived (and none writes here again) */
    } else {
        cluster_arrive(); /* release: every block's act before any block reads it */
        cluster_wait();
    }
    STAMP(6);

    /* down: all 512 activations as digits (each warp its own copy), TD tasks from the ring */
    const float dd = gemv_tq::prep_x_warp<I>(act, bw, xw);
    __syncwarp();
    gemv_tq::tile<I, NSP>::x_frags(bw, 0, g, c, xb);
    if (shared_slot) {
        wj = sgs[0];
        if (rank == 0 && threadIdx.x == 0) sgate[0] = wj;
    }
    cp_wait<0>();
    __syncwarp();
#pragma unroll
    for (int d = 0; d < TD; d++) {
        gemv_tq::tile<I, NSP> td;
        gemv_ring::tile_from<I>(td, ((TG + d) & 1) ? slot1 : slot0, g, c);
        td.dot_x(xb, xw, dd, 0, g, c, ya, yb);
        if (c == 0) {
            float *p = P + (size_t)j * D + rank * DR + (warp * TD + d) * 16;
            p[g] = wj * ya, p[g + 8] = wj * yb;
        }
    }
    STAMP(7);
#else
    __trap(); /* never launched below sm_90 (slots_ok) */
#endif
}

/* h[d] += sum_j P[j][d], slots in order */
__global__ void moe_slots_combine_kernel(const float *__restrict__ P, float *__restrict__ h, int early, const lc_ctrl *ctrl) {
    if (early) lc_pdl_launch_dependents(); /* before the wait (see the launcher) */
    const bool stopped = lc_pdl_wait_stop(ctrl);
    if (!early) lc_pdl_launch_dependents();
    if (stopped) return;
    const int d = blockIdx.x * blockDim.x + threadIdx.x;
    float v[J];
#pragma unroll
    for (int q = 0; q < J; q++) v[q] = P[(size_t)q * D + d];
    float t = 0.0f;
#pragma unroll
    for (int q = 0; q < J; q++) t += v[q];
    h[d] += t;
}

bool aligned(const lc_qmat *m) { return (((uintptr_t)m->w | (uintptr_t)m->s | (uintptr_t)m->b) & 15) == 0; }
bool shape(const lc_qmat *m, int bits, int rows, int cols) {
    return m->bits == bits && m->rows == rows && m->cols == cols && aligned(m);
}

/* The kernel's forms are LILAC_DECODE_TRY's bits that concern it: xchg,
 * c8 (clusters of 8 blocks of 16 warps, else 16 of 8), topk1, tk9 (the
 * top-K rounds of one reduction each) and eslot (with topk1 only; its
 * exact rounds replace tk9's); a form F (bits 0-2 those of xchg, c8 and
 * topk1, bit 3 tk9, bit 4 eslot) indexes the tables of fits and launchers
 * below, whose eslot entries without topk1 (never formed) repeat the
 * form without eslot. */
constexpr int FORMS = 31, F_TK9 = 8, F_ES = 16;
static_assert((LC_TRY_XCHG | LC_TRY_C8 | LC_TRY_TOPK1) == 7, "the forms' low bits are LILAC_DECODE_TRY's");
int form() {
    const int t = lc_decode_try();
    if ((t & LC_TRY_ESLOT) && (t & LC_TRY_TOPK1)) return (t & 7) | F_ES;
    return (t & 7) | (t & LC_TRY_TK9 ? F_TK9 : 0);
}
int form_bits(int f) { return (f & 7) | (f & F_TK9 ? LC_TRY_TK9 : 0) | (f & F_ES ? LC_TRY_ESLOT : 0); }
constexpr int form_cs(int f) { return (f & LC_TRY_C8) ? 8 : 16; }
template <int F0>
struct form_of {
    static constexpr int F = (F0 & F_ES) && !(F0 & LC_TRY_TOPK1) ? F0 & ~F_ES : F0; /* eslot needs topk1 */
    static constexpr int CS = form_cs(F), NW = 128 / CS;
    using L = shape_of<CS, NW>;
    static constexpr auto kernel() {
        return moe_slots_kernel<(F & LC_TRY_XCHG) != 0, CS, NW, (F & LC_TRY_TOPK1) != 0, (F & (F_TK9 | F_ES)) == F_TK9,
                                (F & F_ES) != 0>;
    }
};

/* A form's attributes (its shared memory, the non-portable cluster) and
 * whether one cluster fits, once per device and form. */
template <int F>
bool fit_f() {
    using M = form_of<F>;
    static signed char ok[64]; /* 0 unknown, 1 yes, -1 no */
    int dev = 0;
    if (cudaGetDevice(&dev)) return false;
    signed char *o = &ok[dev & 63];
    if (*o == 0) {
        *o = cudaFuncSetAttribute(M::kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)M::L::SMEM) == cudaSuccess &&
                     cudaFuncSetAttribute(M::kernel(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess &&
                     cluster_count(M::kernel(), M::CS, J * M::CS, M::L::NT, M::L::SMEM) >= 1
                 ? 1
                 : -1;
        (void)cudaGetLastError(); /* a refused attribute leaves no error behind */
    }
    return *o > 0;
}
#define FORM_TABLE_(T)                                                                                                         \
    {T<0>,  T<1>,  T<2>,  T<3>,  T<4>,  T<5>,  T<6>,  T<7>,  T<8>,  T<9>,  T<10>, T<11>, T<12>, T<13>, T<14>, T<15>,            \
     T<16>, T<17>, T<18>, T<19>, T<20>, T<21>, T<22>, T<23>, T<24>, T<25>, T<26>, T<27>, T<28>, T<29>, T<30>, T<31>}
bool slots_fit(int f) {
    static bool (*const fit[FORMS + 1])() = FORM_TABLE_(fit_f);
    return fit[f & FORMS]();
}

struct slots_args {
    lc_qmat R, gate, up, sg, su, down, sdown;
    const float *h, *norm_w;
    float *P, *w, *sgate;
    float eps;
    int32_t *ids;
    const lc_ctrl *ctrl;
};
template <int F>
cudaError_t launch_f(const slots_args &a, cudaStream_t st) {
    using M = form_of<F>;
    return cluster_launch(M::kernel(), M::CS, dim3(J * M::CS), dim3(M::L::NT), M::L::SMEM, st, a.R, a.gate, a.up, a.sg, a.su,
                          a.down, a.sdown, a.h, a.norm_w, a.eps, a.P, a.ids, a.w, a.sgate, a.ctrl);
}

} // namespace

/* LILAC_MOE=split keeps moe.cu's three kernels (read at each call: the
 * step is enqueued once per captured graph, and tests switch it) */
extern "C" int lc_moe_slots_ok(const lc_qmat *R, const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate,
                               const lc_qmat *sh_up, const lc_qmat *down, const lc_qmat *sh_down, int K) {
    const char *s = getenv("LILAC_MOE");
    return !(s && strcmp(s, "split") == 0) && lc_gemv_kernels() != LC_GEMV_ENGINE && lc_gemv_kernels() != LC_GEMV_STREAM && K == KR &&
           shape(R, 8, E + 1, D) && R->n_mat == 1 && shape(gate, 4, I, D) && shape(up, 4, I, D) && gate->n_mat == up->n_mat &&
           shape(sh_gate, 4, I, D) && shape(sh_up, 4, I, D) && shape(down, 4, D, I) && down->n_mat == gate->n_mat &&
           shape(sh_down, 4, D, I) && slots_fit(form());
}

extern "C" cudaError_t lc_moe_slots(const lc_qmat *R, const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate,
                                    const lc_qmat *sh_up, const lc_qmat *down, const lc_qmat *sh_down, float *h,
                                    const float *norm_w, float eps, float *P, int32_t *ids, float *w, float *sgate,
                                    const lc_ctrl *ctrl, cudaStream_t st) {
    if (!lc_moe_slots_ok(R, gate, up, sh_gate, sh_up, down, sh_down, KR)) return cudaErrorNotSupported;
    const slots_args a = {*R, *gate, *up, *sh_gate, *sh_up, *down, *sh_down, h, norm_w, P, w, sgate, eps, ids, ctrl};
    const int f = form();
    lc_decode_try_note(form_bits(f));
    static cudaError_t (*const launch[FORMS + 1])(const slots_args &, cudaStream_t) = FORM_TABLE_(launch_f);
    return launch[f & FORMS](a, st);
}

#ifdef LC_MOE_SLOTS_STAMPS
/* the last launch's stamps: [J * 16][13] nanoseconds ([12]: the SM), of
 * J * cs blocks; returns cs, the form's cluster size (0: none) */
extern "C" int lc_moe_slots_stamps(unsigned long long *out) {
    if (cudaMemcpyFromSymbol(out, slots_stamps, sizeof slots_stamps) != cudaSuccess) return 0;
    return form_cs(form());
}
#endif

/* early: the combine lets its successor launch before it waits (the one
 * exception to common.cuh's order), for a successor that reads only weights
 * before its own wait (a layer's in_proj or q|k|v): its codes stream while
 * the MoE kernel runs, as they did behind tq_down, and h it reads after the
 * wait, which this kernel's completion (after the MoE kernel's) releases.
 * The decode step's last combine lets the lm_head launch early only in its
 * ring form (lm_head.cu, LILAC_DECODE_TRY's hearly): tq_gemv's lm_head
 * launched that early measured 104.8 instead of 82.4 us inside the graph
 * (H200); the ring's blocks take ~156 KB, so only the SMs the MoE kernel
 * leaves hold them early, and they stream their first tasks there. */
extern "C" cudaError_t lc_moe_slots_combine(const float *P, float *h, int early, const lc_ctrl *ctrl, cudaStream_t st) {
    return gemv_stream::launch_k(moe_slots_combine_kernel, dim3(D / 256), dim3(256), 0, st, true, P, h, early, ctrl);
}
