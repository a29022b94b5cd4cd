/* moe_route.cuh — the decode router's device pieces, shared by moe.cu's
 * router kernels and moe_slots.cu's fused MoE kernel: one router row's logit
 * (qdot chunks against the block's swizzled x) and the softmax / top-K of
 * one token's logits in one warp.  Both kernels must route alike: the same
 * sums in the same order give the same experts. */
#ifndef LILAC_CUDA_DECODE_MOE_ROUTE_CUH
#define LILAC_CUDA_DECODE_MOE_ROUTE_CUH

#include "backend/cuda/qdot.cuh"

/* The same for one warp with the E logits in registers (EPL per lane, lane
 * l holding experts l, l+32, ...): no block barriers, so the fused router's
 * last block finishes the routing in a few hundred cycles.  SMEM: lg is in
 * shared memory (the cluster router), else in global memory through L2. */
template <int EPL, bool SMEM = false>
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
    for (int k = 0; k < K; k++) {
        float v = -1.0f;
        int idx = 0x7fffffff;
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
        wsum += v / sum;
        if (lane == k) mine = v / sum;
        if (lane == 0) ids[k] = idx;
    }
    if (lane < K) w[lane] = mine / wsum;
    if (lane == 0) sgate[0] = sigmoid_f(SMEM ? lg[E] : __ldcg(lg + E));
}

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

/* One router row's logit from its lane's fetched chunk and the block's x in
 * shared memory, summed over the row's LPR lanes (0 past the last row). */
template <int BITS, int CPL, int LPR>
__device__ __forceinline__ float router_row(const typename qdot<BITS, CPL, LPR>::chunk &c, bool row, int sub,
                                            const float4 *xs4, const float *xcs) {
    using Q = qdot<BITS, CPL, LPR>;
    constexpr int EPC = Q::EPC, COLS = Q::COLS;
    float acc = 0.0f;
    if (row)
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            float xv[EPC];
            const float xsum = x_chunk<COLS, EPC>(xs4, xcs, sub + LPR * j, xv);
            acc = chunk_fma<BITS>(c.q[j], xv, c.s[j], c.b[j], xsum, acc);
        }
    return Q::reduce(acc);
}

#endif
