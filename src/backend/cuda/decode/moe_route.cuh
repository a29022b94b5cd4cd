/* moe_route.cuh — the decode router's device pieces, shared by moe.cu's
 * router kernels and moe_slots.cu's fused MoE kernel: one router row's logit
 * (qdot chunks against the block's swizzled x) and the softmax / top-K of
 * one token's logits in one warp.  Both kernels must route alike: the same
 * sums in the same order give the same experts. */
#ifndef LILAC_CUDA_DECODE_MOE_ROUTE_CUH
#define LILAC_CUDA_DECODE_MOE_ROUTE_CUH

#include "backend/cuda/qdot.cuh"

/* The softmax and top-K of one token's E logits in one warp (EPL per lane,
 * lane l holding experts l, l+32, ...): ids[k] the k-th largest p = exp(l -
 * max) (ties to the lowest id, as the CPU's moe.c), w[k] its share of the K,
 * sgate the shared expert's gate from logit E.  No block barriers.  SMEM: lg
 * is in shared memory (the cluster routers), else in global memory (L2).
 *
 * With 8 logits a lane (E = 256) each lane first sorts its (p, id) pairs
 * (Batcher's 19 comparators), so a round is the lanes' heads through one
 * __reduce_max_sync, the ids holding that max through __reduce_min_sync,
 * and the winner's shift; the other sizes (and sm_7x) rescan per round with
 * shuffle pairs.  Both give the same ids and the same weights bit for bit
 * (bench/kernels/topk_test.cu checks it, with ties and -inf logits): the
 * same p, sum and quotients, summed in the same order. */
struct topk_sorted8 {
    uint32_t k[8]; /* bits of p + 1 (p >= 0), 0 for none; descending */
    int id[8];     /* ties: the lower id first */
    /* the lane's p (lane l: experts l, l + 32, ...; below 0: none), sorted */
    __device__ __forceinline__ void init(const float (&p)[8]) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int i = 0; i < 8; i++) k[i] = p[i] >= 0.0f ? __float_as_uint(p[i]) + 1u : 0u, id[i] = lane + 32 * i;
        sort();
    }
    __device__ __forceinline__ void shift() { /* the head taken */
#pragma unroll
        for (int i = 0; i < 7; i++) k[i] = k[i + 1], id[i] = id[i + 1];
        k[7] = 0;
    }
    __device__ __forceinline__ void cas(int a, int b) {
        const bool sw = k[b] > k[a] || (k[b] == k[a] && id[b] < id[a]);
        const uint32_t ka = k[a], kb = k[b];
        const int ia = id[a], ib = id[b];
        k[a] = sw ? kb : ka, k[b] = sw ? ka : kb, id[a] = sw ? ib : ia, id[b] = sw ? ia : ib;
    }
    __device__ __forceinline__ void sort() {
        cas(0, 1), cas(2, 3), cas(4, 5), cas(6, 7);
        cas(0, 2), cas(1, 3), cas(4, 6), cas(5, 7);
        cas(1, 2), cas(5, 6);
        cas(0, 4), cas(1, 5), cas(2, 6), cas(3, 7);
        cas(2, 4), cas(3, 5);
        cas(1, 2), cas(3, 4), cas(5, 6);
    }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800 /* redux.sync; declared for the host pass */
    /* one round: the largest p left (uniform); the winning lane stores its id */
    __device__ __forceinline__ float pick(int32_t *ids, int r) {
        const uint32_t m = __reduce_max_sync(0xffffffffu, k[0]);
        if (id[0] == (int)__reduce_min_sync(0xffffffffu, k[0] == m ? (uint32_t)id[0] : 0xffffffffu)) {
            ids[r] = id[0];
            shift();
        }
        return __uint_as_float(m - 1u);
    }
    /* K <= 8 rounds with one reduction each ("tk9", 2026-12-07): a head's key
     * with its id in the low 8 bits, (k & ~255) | (255 - id), is unique, so
     * the maximum names the winner (id = 255 - its low byte, lane = id % 32)
     * and no id reduction follows.  The order it gives is k's wherever the
     * high parts differ; each lane's list is sorted by k, so maxima with equal
     * high parts come out in a row.  Hence after one more round: if the K + 1
     * maxima's high parts strictly decrease, ids[0..K) and v are exactly
     * pick's (the same ids, the same p); else it returns false (two p within
     * ~2^-15 of each other, or the zero p of -inf logits) and the caller runs pick's
     * rounds on a fresh copy.  E = 256 (ids below 256). */
    __device__ __forceinline__ bool pick_packed(int32_t *ids, int K, float (&v)[8]) {
        const int lane = threadIdx.x & 31;
        uint32_t prev = 0;
        bool strict = true;
#pragma unroll
        for (int r = 0; r <= 8; r++) {
            if (r > K) break;
            const uint32_t pk = (k[0] & ~255u) | (uint32_t)(255 - id[0]);
            const uint32_t m = __reduce_max_sync(0xffffffffu, pk);
            if (r > 0) strict = strict && (m >> 8) < prev;
            prev = m >> 8;
            if (r == K) break;
            const uint32_t kw = k[0];
            if (pk == m) shift();
            const int wid = 255 - (int)(m & 255u);
            v[r] = __uint_as_float(__shfl_sync(0xffffffffu, kw, wid & 31) - 1u);
            if (lane == 0) ids[r] = wid;
        }
        return strict;
    }
#endif
};

/* One round of the other sizes: the largest p of the lanes' EPL (ties to
 * the lowest id) by 5 dependent shuffle pairs, marked taken (-2). */
template <int EPL>
__device__ __forceinline__ void topk_round_shfl(float (&p)[EPL], float &v, int &idx) {
    const int lane = threadIdx.x & 31;
    v = -1.0f, idx = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < EPL; i++)
        if (p[i] > v) v = p[i], idx = lane + 32 * i; /* lowest id wins ties within a lane */
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
        if (v2 > v || (v2 == v && i2 < idx)) v = v2, idx = i2;
    }
#pragma unroll
    for (int i = 0; i < EPL; i++)
        if (lane + 32 * i == idx) p[i] = -2.0f; /* taken */
}

template <int EPL, bool SMEM = false, bool PACKED = false>
__device__ void topk_warp(const float *lg, int E, int K, int32_t *__restrict__ ids, float *__restrict__ w,
                          float *__restrict__ sgate) {
    const int lane = threadIdx.x & 31;
    float p[EPL];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < EPL; i++) {
        const int e = lane + 32 * i;
        p[i] = e < E ? (SMEM ? lg[e] : __ldcg(lg + e)) : -INFINITY;
        mx = fmaxf(mx, p[i]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < EPL; i++) {
        if (lane + 32 * i < E) sum += (p[i] = expf(p[i] - mx));
        else p[i] = -1.0f; /* never selected */
    }
    sum = warp_sum(sum);
    float wsum = 0.0f, mine = 0.0f;
    bool sorted = false;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (EPL == 8) {
        sorted = K <= 8;
        if (sorted) {
            topk_sorted8 s;
            s.init(p);
            float v[8];
            bool done = false;
            if constexpr (PACKED) {
                if (E == 256) done = s.pick_packed(ids, K, v);
                if (!done) s.init(p); /* a tie in the high parts: the exact rounds */
            }
            if (!done)
#pragma unroll
                for (int r = 0; r < 8; r++)
                    if (r < K) v[r] = s.pick(ids, r);
#pragma unroll
            for (int r = 0; r < 8; r++) /* the divisions off the rounds' chain */
                if (r < K) {
                    const float q = v[r] / sum;
                    wsum += q;
                    if (lane == r) mine = q;
                }
        }
    }
#endif
    if (!sorted) {
        for (int k = 0; k < K; k++) {
            float v;
            int idx;
            topk_round_shfl<EPL>(p, v, idx);
            wsum += v / sum;
            if (lane == k) mine = v / sum;
            if (lane == 0) ids[k] = idx;
        }
    }
    if (lane < K) w[lane] = mine / wsum;
    if (lane == 0) sgate[0] = sigmoid_f(SMEM ? lg[E] : __ldcg(lg + E));
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
/* topk_warp<8, true> (E = 256 logits in shared memory, K <= 8, the exact
 * rounds) in two parts, for a caller that needs only rank j's expert before
 * it can go on ("eslot", moe_slots.cu): start() takes the prelude and the
 * rounds 0 .. j, finish() the other rounds and the K weights.  The same
 * sums in the same order as topk_warp's, so the same ids and weights bit
 * for bit (and tk9's, whose rounds give pick's wherever it keeps them).
 * One warp, j uniform; no block barriers. */
struct topk_split8 {
    topk_sorted8 s;
    float v[8], sum;
    __device__ __forceinline__ void start(const float *lg, int j, int32_t *ids) {
        const int lane = threadIdx.x & 31;
        float p[8];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < 8; i++) p[i] = lg[lane + 32 * i], mx = fmaxf(mx, p[i]);
        mx = warp_max(mx);
        sum = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) sum += (p[i] = expf(p[i] - mx));
        sum = warp_sum(sum);
        s.init(p);
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (r <= j) v[r] = s.pick(ids, r);
    }
    __device__ __forceinline__ void finish(int j, int K, int32_t *ids, float *w) {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (r > j && r < K) v[r] = s.pick(ids, r);
        float wsum = 0.0f, mine = 0.0f;
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (r < K) {
                const float q = v[r] / sum;
                wsum += q;
                if (lane == r) mine = q;
            }
        if (lane < K) w[lane] = mine / wsum;
    }
};
#endif

/* topk_warp for E + 1 logits, its registers per lane chosen by E (<= 1024) */
template <bool SMEM>
__device__ __forceinline__ void route(const float *lg, int E, int K, int32_t *__restrict__ ids, float *__restrict__ w,
                                      float *__restrict__ sgate) {
    if (E <= 32) topk_warp<1, SMEM>(lg, E, K, ids, w, sgate);
    else if (E <= 64) topk_warp<2, SMEM>(lg, E, K, ids, w, sgate);
    else if (E <= 128) topk_warp<4, SMEM>(lg, E, K, ids, w, sgate);
    else if (E <= 256) topk_warp<8, SMEM>(lg, E, K, ids, w, sgate);
    else if (E <= 512) topk_warp<16, SMEM>(lg, E, K, ids, w, sgate);
    else topk_warp<32, SMEM>(lg, E, K, ids, w, sgate);
}

/* NR router rows' logits from the lane's fetched chunks and the block's x in
 * shared memory (qdot.cuh's dot_rows: each chunk of x read once for the NR
 * rows, as moe_slots.cu's warps take 2), each summed over the row's LPR
 * lanes (0 where !row[p]).  SUMMED: without x's chunk sums (dot_rows). */
template <int BITS, int CPL, int LPR, int NR, bool SUMMED = false>
__device__ __forceinline__ void router_rows(const typename qdot<BITS, CPL, LPR>::chunk (&c)[NR], const bool (&row)[NR],
                                            int sub, const float4 *xs4, const float *xcs, float (&out)[NR]) {
    dot_rows<BITS, CPL, LPR, NR, SUMMED>(c, row, sub, xs4, xcs, out);
#pragma unroll
    for (int p = 0; p < NR; p++) out[p] = qdot<BITS, CPL, LPR>::reduce(out[p]);
}

/* One router row's logit (router_rows of one row) */
template <int BITS, int CPL, int LPR, bool SUMMED = false>
__device__ __forceinline__ float router_row(const typename qdot<BITS, CPL, LPR>::chunk &c, bool row, int sub,
                                            const float4 *xs4, const float *xcs) {
    const typename qdot<BITS, CPL, LPR>::chunk cs[1] = {c};
    const bool rows[1] = {row};
    float out[1];
    router_rows<BITS, CPL, LPR, 1, SUMMED>(cs, rows, sub, xs4, xcs, out);
    return out[0];
}

#endif
