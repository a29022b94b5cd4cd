/* topk_test.cu — workshop for the decode routing's top-K (issue 14).
 *
 * Why: inside lc_moe_slots (decode/moe_slots.cu) the routed clusters spend
 * ~2.9 us of a ~16.6 us kernel in moe_route.cuh's topk_warp (global-timer
 * stamps, H200, docs/PERFORMANCE.md), and the router kernels end with the
 * same code.  A form on redux.sync shortened those stamps to 2.27 us but not
 * the decode step, so before the next change this measures the top-K alone,
 * in clock64 cycles per call of one warp with the 256 logits in shared
 * memory, warm (the mean of later calls) and cold (the first call of the
 * launch: instruction cache and all), for:
 *   0 engine     moe_route.cuh's topk_warp (since 2026-12-04 variant 4's form)
 *   1 redux      a round = __reduce_max_sync of the lanes' best keys, then
 *                __reduce_min_sync of the ids holding it (tried 2026-12-03)
 *   2 engine-q   the engine's form before (moe_route.cuh's topk_round_shfl,
 *                5 dependent shuffle pairs a round), the K divisions after
 *                the rounds (each v / sum kept)
 *   3 redux-q    1 with the divisions after the rounds
 *   4 sorted     moe_route.cuh's topk_sorted8 (each lane sorts its 8
 *                (p, id) once, a round is __reduce_max_sync of the heads,
 *                __reduce_min_sync of the ids holding it and the winner's
 *                shift), divisions after: the engine's rounds outside it
 *   5 sorted-b   4 with the id reduction only on a tie (a ballot says
 *                whether one lane holds the max; the winner stores its id)
 *   6 prelude    the max, the exps and the sum alone (what 0-5 all pay
 *                before their rounds; not checked)
 *   7 merge      4's sorted lanes, then 5 butterfly levels instead of the
 *                rounds, each keeping the top 8 of a lane pair's lists
 *                (merge_lanes); H100, 2026-12-06: 3904 cycles against the
 *                sorted rounds' 2366 (the 16 shuffles a level cost more
 *                than the rounds' two reductions), so not the engine's
 *   8 tk9        the engine's topk_warp with pick_packed (LILAC_DECODE_TRY
 *                tk9): a round is one __reduce_max_sync of keys carrying
 *                their ids, exact unless 9 rounds meet a tie in the keys'
 *                high parts (then the rounds of 4: the tie sets take it);
 *                topk_packed_sim.py checks the same rounds on the host
 *   9-11 split   moe_route.cuh's topk_split8 (LILAC_DECODE_TRY eslot):
 *                start() through rank j (0, 3, 7), then finish(): the
 *                exact rounds in two parts
 * Every variant must give variant 0's ids and weights bit for bit, on random
 * logits, logits with exact ties, and a set with -inf entries (checked on
 * the host).  H200, 2026-12-04 (warm cycles a call): the shuffle-pair
 * engine 4731, redux 3932, 2: 4289, 3: 3852, sorted 2323, sorted-b 3064,
 * prelude 641; the engine with variant 4's form 2454.
 *   sh bench/kernels/build_topk.sh && build/kernels/topk_test [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend/cuda/decode/moe_route.cuh"
#include "workshop.h"

constexpr int E = 256, K = 8, EPL = E / 32, WARPS = 8, NV = 12;

__device__ __forceinline__ uint32_t order_key(float f) {
    const uint32_t u = __float_as_uint(f);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}
__device__ __forceinline__ float from_order_key(uint32_t k) { return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k); }

/* The softmax numerators p (exp(l - max), -1 for none) and their sum, as topk_warp */
__device__ __forceinline__ float softmax_p(const float *lg, float (&p)[EPL], bool redux) {
    const int lane = threadIdx.x & 31;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < EPL; i++) p[i] = lg[lane + 32 * i], mx = fmaxf(mx, p[i]);
    mx = redux ? from_order_key(__reduce_max_sync(0xffffffffu, order_key(mx))) : warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < EPL; i++) sum += (p[i] = expf(p[i] - mx));
    return warp_sum(sum);
}

/* variants 1 and 3's state: keys (bits of p + 1, 0 once taken), the lane's best */
struct keys {
    uint32_t k[EPL], best;
    int bi;
    __device__ __forceinline__ void init(const float (&p)[EPL]) {
#pragma unroll
        for (int i = 0; i < EPL; i++) k[i] = __float_as_uint(p[i]) + 1u;
        rescan();
    }
    __device__ __forceinline__ void rescan() {
        best = 0, bi = 0;
#pragma unroll
        for (int i = 0; i < EPL; i++)
            if (k[i] > best) best = k[i], bi = i;
    }
    __device__ __forceinline__ void pick(float &v, int &idx) {
        const int lane = threadIdx.x & 31;
        const uint32_t m = __reduce_max_sync(0xffffffffu, best);
        idx = (int)__reduce_min_sync(0xffffffffu, best == m ? (uint32_t)(lane + 32 * bi) : 0xffffffffu);
        v = __uint_as_float(m - 1u);
        if (lane == (idx & 31)) {
#pragma unroll
            for (int i = 0; i < EPL; i++)
                if (i == idx >> 5) k[i] = 0;
            rescan();
        }
    }
};

/* variant 5's round on moe_route.cuh's sorted lanes: the id reduction only
 * when a ballot finds the maximum in more than one lane; the value (uniform),
 * the winner's id to ids[kk] */
__device__ __forceinline__ float pick_ballot(topk_sorted8 &s, int32_t *ids, int kk) {
    const uint32_t m = __reduce_max_sync(0xffffffffu, s.k[0]);
    const unsigned b = __ballot_sync(0xffffffffu, s.k[0] == m);
    const bool win = (b & (b - 1)) == 0
                         ? s.k[0] == m
                         : s.id[0] == (int)__reduce_min_sync(0xffffffffu, s.k[0] == m ? (uint32_t)s.id[0] : 0xffffffffu);
    if (win) {
        ids[kk] = s.id[0];
        s.shift();
    }
    return __uint_as_float(m - 1u);
}

/* variant 7: the top 8 of all lanes' sorted lists in every lane, by 5
 * butterfly levels: a level keeps max(A[i], B[7 - i]) of the lane's and its
 * partner's lists (the top 8 of both, a bitonic sequence) and sorts it by 3
 * half cleaners.  The order (p descending, ties to the lower id) is total
 * and the lists disjoint, so the same ids in the same order as the rounds. */
__device__ __forceinline__ void merge_lanes(topk_sorted8 &s) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t pk[8];
        int pi[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            pk[i] = __shfl_xor_sync(0xffffffffu, s.k[i], o);
            pi[i] = __shfl_xor_sync(0xffffffffu, s.id[i], o);
        }
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (pk[7 - i] > s.k[i] || (pk[7 - i] == s.k[i] && pi[7 - i] < s.id[i])) s.k[i] = pk[7 - i], s.id[i] = pi[7 - i];
        s.cas(0, 4), s.cas(1, 5), s.cas(2, 6), s.cas(3, 7);
        s.cas(0, 2), s.cas(1, 3), s.cas(4, 6), s.cas(5, 7);
        s.cas(0, 1), s.cas(2, 3), s.cas(4, 5), s.cas(6, 7);
    }
}

template <int VAR>
__device__ __forceinline__ void topk(const float *lg, int32_t *ids, float *w) {
    if constexpr (VAR >= 9) {
        constexpr int j = VAR == 9 ? 0 : VAR == 10 ? 3 : 7;
        topk_split8 ts;
        ts.start(lg, j, ids);
        ts.finish(j, K, ids, w);
        return;
    } else if constexpr (VAR == 0 || VAR == 8) {
        float sg;
        topk_warp<EPL, true, VAR == 8>(lg, E, K, ids, w, &sg);
        return;
    } else {
        const int lane = threadIdx.x & 31;
        float p[EPL];
        const float sum = softmax_p(lg, p, VAR != 2);
        if constexpr (VAR == 6) {
            if (lane < K) w[lane] = p[0] + sum, ids[lane] = lane; /* keeps the prelude; not a routing */
            return;
        } else if constexpr (VAR == 4 || VAR == 5 || VAR == 7) {
            topk_sorted8 sk;
            sk.init(p);
            float vk[K];
            if constexpr (VAR == 7) {
                merge_lanes(sk);
#pragma unroll
                for (int k = 0; k < K; k++) {
                    vk[k] = __uint_as_float(sk.k[k] - 1u);
                    if (lane == k) ids[k] = sk.id[k];
                }
            } else {
#pragma unroll
                for (int k = 0; k < K; k++) vk[k] = VAR == 5 ? pick_ballot(sk, ids, k) : sk.pick(ids, k);
            }
            float wsum = 0.0f, mine = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) { /* the engine's quotients, summed in its order */
                const float q = vk[k] / sum;
                wsum += q;
                if (lane == k) mine = q;
            }
            if (lane < K) w[lane] = mine / wsum;
            return;
        }
        keys ks;
        if constexpr (VAR == 1 || VAR == 3) ks.init(p);
        float wsum = 0.0f, mine = 0.0f, vk[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            float v;
            int idx;
            if constexpr (VAR == 2) topk_round_shfl<EPL>(p, v, idx);
            else ks.pick(v, idx);
            if (lane == 0) ids[k] = idx;
            if constexpr (VAR == 1) {
                wsum += v / sum;
                if (lane == k) mine = v / sum;
            } else {
                vk[k] = v;
            }
        }
        if constexpr (VAR != 1) { /* the same quotients, summed in the same order */
#pragma unroll
            for (int k = 0; k < K; k++) {
                const float q = vk[k] / sum;
                wsum += q;
                if (lane == k) mine = q;
            }
        }
        if (lane < K) w[lane] = mine / wsum;
    }
}

/* One block of WARPS warps (as lc_moe_slots: every warp routes); calls
 * `reps` times on set (r % nsets) of the logits; warp 0 lane 0 records the
 * cycles of its first call and the sum over the others; every call's ids and
 * weights of warp 0 go to out (per set, the last write wins). */
template <int VAR>
__global__ void __launch_bounds__(WARPS * 32) topk_kernel(const float *__restrict__ lgs, int nsets, int reps, int32_t *ids_out,
                                                          float *w_out, long long *cyc) {
    __shared__ float lg[2][E + 1];
    __shared__ int32_t si[WARPS][K];
    __shared__ float sw[WARPS][K];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    long long first = 0, rest = 0;
    for (int r = 0; r < reps; r++) {
        const int set = r % nsets;
        float *l = lg[r & 1];
        for (int e = threadIdx.x; e <= E; e += blockDim.x) l[e] = e < E ? lgs[(size_t)set * E + e] : 0.0f;
        __syncthreads();
        const long long t0 = clock64();
        topk<VAR>(l, si[warp], sw[warp]);
        __syncwarp();
        const long long t1 = clock64();
        if (r == 0) first = t1 - t0;
        else rest += t1 - t0;
        if (warp == 0 && lane < K) ids_out[set * K + lane] = si[0][lane], w_out[set * K + lane] = sw[0][lane];
    }
    if (threadIdx.x == 0) cyc[0] = first, cyc[1] = rest;
}

static void launch(int var, const float *lgs, int nsets, int reps, int32_t *ids, float *w, long long *cyc) {
    switch (var) {
    case 0: topk_kernel<0><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 1: topk_kernel<1><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 2: topk_kernel<2><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 3: topk_kernel<3><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 4: topk_kernel<4><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 5: topk_kernel<5><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 7: topk_kernel<7><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 8: topk_kernel<8><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 9: topk_kernel<9><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 10: topk_kernel<10><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    case 11: topk_kernel<11><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    default: topk_kernel<6><<<1, WARPS * 32>>>(lgs, nsets, reps, ids, w, cyc); break;
    }
    CK(cudaGetLastError());
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int nsets = quick ? 8 : 64, reps = quick ? 16 : 4096;
    /* sets: random logits (the router's spread), every fourth with exact ties
     * (values on a coarse grid), the last with -inf entries */
    std::vector<float> h((size_t)nsets * E);
    uint64_t x = 12345;
    for (int s = 0; s < nsets; s++)
        for (int e = 0; e < E; e++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const float u = (float)((x >> 40) & 0xffffff) / 16777216.0f;
            float v = 4.0f * u - 2.0f;
            if (s % 4 == 1) v = floorf(v * 4.0f) / 4.0f; /* 16 distinct values: ties in the top 8 */
            if (s == nsets - 1 && e % 3 == 0) v = -INFINITY;
            h[(size_t)s * E + e] = v;
        }
    float *d_lg, *d_w;
    int32_t *d_ids;
    long long *d_cyc;
    CK(cudaMalloc(&d_lg, h.size() * 4));
    CK(cudaMalloc(&d_w, (size_t)nsets * K * 4));
    CK(cudaMalloc(&d_ids, (size_t)nsets * K * 4));
    CK(cudaMalloc(&d_cyc, 2 * sizeof(long long)));
    CK(cudaMemcpy(d_lg, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    int clk = 0;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0)); /* kHz */
    const char *names[NV] = {"engine (shuffle pairs)", "redux",           "engine, divisions after", "redux, divisions after",
                             "sorted lanes, 2 redux",  "sorted, ballot", "prelude alone (no check)", "sorted, butterfly merge",
                             "engine tk9 (one redux a round)", "split at rank 0 (eslot)", "split at rank 3 (eslot)",
                             "split at rank 7 (eslot)"};
    std::vector<int32_t> ref_ids;
    std::vector<float> ref_w;
    int failures = 0;
    printf("top-%d of %d logits, one warp of %d routing, %d calls (%d sets); SM clock %.0f MHz\n", K, E, WARPS, reps, nsets,
           clk / 1e3);
    printf("  %-28s %10s %10s %10s %10s  %s\n", "variant", "cold cyc", "warm cyc", "cold us", "warm us", "vs engine");
    for (int v = 0; v < NV; v++) {
        launch(v, d_lg, nsets, reps, d_ids, d_w, d_cyc);
        CK(cudaDeviceSynchronize());
        std::vector<int32_t> ids((size_t)nsets * K);
        std::vector<float> w((size_t)nsets * K);
        long long cyc[2];
        CK(cudaMemcpy(ids.data(), d_ids, ids.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(w.data(), d_w, w.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(cyc, d_cyc, sizeof cyc, cudaMemcpyDeviceToHost));
        int differ = 0;
        if (v == 0) ref_ids = ids, ref_w = w;
        else if (v != 6)
            for (size_t i = 0; i < ids.size(); i++) differ += ids[i] != ref_ids[i] || memcmp(&w[i], &ref_w[i], 4) != 0;
        /* the reference's own sanity: distinct ids, weights summing to 1 */
        for (int s = 0; v == 0 && s < nsets; s++) {
            double t = 0;
            for (int k = 0; k < K; k++) {
                t += w[(size_t)s * K + k];
                for (int j = 0; j < k; j++) differ += ids[(size_t)s * K + j] == ids[(size_t)s * K + k];
            }
            differ += fabs(t - 1.0) > 1e-5;
        }
        failures += differ != 0;
        const double warm = reps > 1 ? (double)cyc[1] / (reps - 1) : 0;
        printf("  %-28s %10lld %10.0f %10.2f %10.2f  %s\n", names[v], cyc[0], warm, cyc[0] * 1e3 / clk, warm * 1e3 / clk,
               differ ? "DIFFER" : v == 6 ? "-" : v ? "identical" : "(reference)");
    }
    cudaFree(d_lg), cudaFree(d_w), cudaFree(d_ids), cudaFree(d_cyc);
    printf("%s: %d failure(s)\n", failures ? "FAILED" : "all ok", failures);
    return failures ? 1 : 0;
}
