/* gemv_tq.cuh — decode GEMVs on the integer tensor cores (issue 14): the
 * 4-bit codes as the u8 A operand of mma.sync m16n8k32, the activation x as
 * four signed 8-bit digits of a fixed-point copy in B, exact int32 sums.
 * The SIMT GEMVs (qdot.cuh) spend ~6 lane-instructions per weight and are
 * issue-bound; here the main loop is 23-27 SASS instructions per 1,024
 * weights and a warp (bench/kernels/gemv_mma_test.cu, which includes this
 * file, measured it against the other designs):
 *   tq_gemv      y = residual + W . x, x optionally RMSNorm(x) * norm_w;
 *   tq_gate_up   the MoE gate/up + SwiGLU of the 8 routed experts and the
 *                shared one (act[j, r] = silu(g_j[r] . x) * (u_j[r] . x));
 *   tq_down      the MoE down + combine + residual.
 * gemv.cu and moe.cu choose them by shape.
 *
 * ---- Numerics ----------------------------------------------------------------
 * x is scaled by 2^E (E per block: max|x| 2^E < 2^30), rounded to an int32
 * x_int and split into four balanced base-256 digits d_0..d_3 (int8, x_int =
 * sum d_p 256^p): the only rounding is x's, below 2^-31 max|x| per input,
 * far under fp32 rounding of the dot product.  Every product and sum of an
 * mma is exact (|sum| <= 64 * 15 * 128 per group); each group's integer sum
 * is converted once and scaled by the group's scale; y = sum s * (q . x) +
 * b * xsum (codes not centred: the integer sums have no rounding to protect).
 *
 * ---- Tiles -------------------------------------------------------------------
 * A warp owns one row block of 16 rows and a k-range of NSP spans (a span =
 * 128 inputs = 2 groups = 16 code words per row); KS = K / (128 NSP) warps
 * split a row block's k-range (split-K, reduced in shared memory); a block
 * holds RB row blocks.  Every code load of a warp (2 NSP x 16 B per lane) is
 * issued at entry, before griddepcontrol.wait (weights never change), so
 * nearly the whole matrix is requested at once.
 *
 * ---- Fragments (lane = 4 g + c) ---------------------------------------------
 * A (16 x 32 u8): a0 = A[g][4c..4c+3], a1 = A[g+8][4c..4c+3], a2 =
 * A[g][4c+16..4c+19], a3 = A[g+8][4c+16..4c+19].  Lane (g, c) loads words
 * 4c..4c+3 of rows g and g+8 in each span, so lanes c < 2 hold group 0 and
 * c >= 2 group 1; step t = 0..3 of a span uses word v = 4c + t: v & 0x0f0f0f0f
 * (codes v_0, v_2, v_4, v_6) is a0 and (v >> 4) & 0x0f0f0f0f (the odd codes)
 * a2, of row g's word; a1, a3 the same of row g+8's.  So logical k = 4c + i is
 * input 8v + 2i and 4c + 16 + i input 8v + 2i + 1.
 * B (32 x 8 s8): b0 = B[4c..4c+3][n = g], b1 = B[4c+16..4c+19][n = g];
 * columns 0..3 are digits 0..3 of group 0 (non-zero on lanes c < 2), 4..7
 * digits 0..3 of group 1 (c >= 2): 16 lanes hold data, the others read a
 * zeroed span with stride 0.
 * C: lane c has columns 2c, 2c+1 = digits 2(c&1), 2(c&1)+1 of group c / 2,
 * combined in int32 (acc0 + 256 acc1, exact: < 2^26); the lane's digit
 * weight 2^(16 (c&1) - E) multiplies its running sums once at the end. */
#ifndef LILAC_CUDA_GEMV_TQ_CUH
#define LILAC_CUDA_GEMV_TQ_CUH

#include "backend/cuda/decode/gemv_stream.cuh"

namespace {
namespace gemv_tq {

using gemv_stream::launch_k;
using gemv_stream::ld_stream;
using gemv_stream::mat_view;

constexpr int SLOTS = 16; /* lanes holding B data: 4 digits x 4 values of c */

__device__ __forceinline__ void mma_u8s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const int (&c)[4]) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]),
                   "r"(c[3]));
}

__device__ __forceinline__ float prmt_bf16(uint32_t w, uint32_t sel) { /* one bf16 half of w as a float */
    uint32_t r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel));
    return __uint_as_float(r);
}

__device__ __forceinline__ float block_max(float v, float *scratch) { /* as common.cuh's block_sum */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The fixed-point scale of x from max|x|: up = 2^E, returns down = 2^-E.
 * max|x| = 1.m 2^(be - 127) < 2^(be - 126): E = 156 - be keeps |x| 2^E < 2^30
 * (be >= 30 keeps 2^E and 2^-E normal; an all-zero x gives zero digits anyway). */
__device__ __forceinline__ float digit_scale(float amax, float &up) {
    const int be = max((int)(__float_as_uint(amax) >> 23), 30);
    up = __uint_as_float((uint32_t)(283 - be) << 23);
    return __uint_as_float((uint32_t)(be - 29) << 23);
}

/* Task t (inputs 8t..8t+7 = word t % 16 of span t / 16) as digits into
 * bf[span][j][slot] (uint4: steps 2j, 2j+1 of lane slot = digit * 4 + c) and
 * its group's sum into xs[t / 8].  Called by whole warps, tasks of a group
 * on 8 consecutive lanes (the sum's shuffles). */
__device__ __forceinline__ void put_task(const float (&v)[8], int t, float up, uint4 *bf, float *xs) {
    /* |x_int| < 2^30, so x_int + 0x80808080 fits 32 bits and its bytes are
     * d_p + 128 for the balanced digits d_p: xor 0x80 makes each byte d_p as
     * an s8.  Then a 4 x 4 byte transpose per parity: digit p of the even
     * inputs (0, 2, 4, 6) into d[p][0], of the odd into d[p][1]. */
    uint32_t dw[8], d[4][2];
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        sum += v[e];
        dw[e] = ((uint32_t)__float2int_rn(v[e] * up) + 0x80808080u) ^ 0x80808080u;
    }
#pragma unroll
    for (int o = 0; o < 2; o++) {
        const uint32_t t0 = __byte_perm(dw[o], dw[o + 2], 0x5140), t1 = __byte_perm(dw[o], dw[o + 2], 0x7362);
        const uint32_t t2 = __byte_perm(dw[o + 4], dw[o + 6], 0x5140), t3 = __byte_perm(dw[o + 4], dw[o + 6], 0x7362);
        d[0][o] = __byte_perm(t0, t2, 0x5410), d[1][o] = __byte_perm(t0, t2, 0x7632);
        d[2][o] = __byte_perm(t1, t3, 0x5410), d[3][o] = __byte_perm(t1, t3, 0x7632);
    }
    const int span = t / 16, wv = t % 16, c = wv / 4, st = wv % 4;
    uint32_t *dst = reinterpret_cast<uint32_t *>(bf + (span * 2 + st / 2) * SLOTS + c) + 2 * (st % 2);
#pragma unroll
    for (int p = 0; p < 4; p++) *reinterpret_cast<uint2 *>(dst + 4 * 4 * p) = make_uint2(d[p][0], d[p][1]);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    sum += __shfl_xor_sync(0xffffffffu, sum, 4);
    if (t % 8 == 0) xs[t / 8] = sum;
}

/* Task t's 8 inputs of x (8t .. 8t + 7).  The graph's kernels read x as
 * b397853 did (x was written by an earlier kernel; 6dc239e read it through
 * L2 only and decoded 529.3 tokens/s at 4K against 539.2, H200, lilac
 * bench); a persistent kernel, where other blocks of the same launch write
 * x, passes L2 = true (__ldcg: never a stale L1 line). */
template <bool L2>
__device__ __forceinline__ void load_task_x(const float *__restrict__ x, int t, float (&v)[8]) {
    const float4 *p = reinterpret_cast<const float4 *>(x) + 2 * t;
    const float4 a = L2 ? __ldcg(p) : p[0], b = L2 ? __ldcg(p + 1) : p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

/* The block's tasks of x (thread tid: tasks tid + i NT, i < PER, those below
 * K / 8), RMSNorm(x) * norm_w when norm_w is set (load_x_smem's order).  All
 * threads call it (with norm_w, a block sum). */
template <int K, int NT, int PER, bool L2 = false>
__device__ __forceinline__ void load_tasks(const float *__restrict__ x, const float *__restrict__ norm_w, float eps,
                                           float (&v)[PER][8], float *scratch) {
    constexpr int TASKS = K / 8;
    static_assert(PER == (TASKS + NT - 1) / NT && TASKS % 32 == 0 && NT % 32 == 0, "tasks must cover whole warps");
    const int tid = threadIdx.x;
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (tid + i * NT < TASKS) {
            load_task_x<L2>(x, tid + i * NT, v[i]);
#pragma unroll
            for (int e = 0; e < 8; e++) ss += v[i][e] * v[i][e];
        }
    const float rr = norm_w ? rsqrtf(block_sum(ss, scratch) / (float)K + eps) : 1.0f;
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int t = tid + i * NT;
        if (t < TASKS && norm_w) { /* warp-uniform */
            const float4 a = reinterpret_cast<const float4 *>(norm_w)[2 * t], b = reinterpret_cast<const float4 *>(norm_w)[2 * t + 1];
            const float w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
            for (int e = 0; e < 8; e++) v[i][e] = v[i][e] * rr * w[e];
        }
    }
}

/* x (RMSNorm(x) * norm_w with norm_w) as digits into bf (span K / 128 is
 * zeros) and the group sums xs[K / 64]; returns 2^-E.  One task = word v of
 * a span (8 inputs).  All threads call it (barriers). */
template <int K, int NT, bool L2 = false>
__device__ __forceinline__ float prep_x(const float *__restrict__ x, const float *__restrict__ norm_w, float eps, uint4 *bf,
                                        float *xs, float *scratch) {
    constexpr int TASKS = K / 8, PER = (TASKS + NT - 1) / NT, NSPAN = K / 128;
    const int tid = threadIdx.x;
    float v[PER][8];
    load_tasks<K, NT, PER, L2>(x, norm_w, eps, v, scratch);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; i++)
        if (tid + i * NT < TASKS)
#pragma unroll
            for (int e = 0; e < 8; e++) amax = fmaxf(amax, fabsf(v[i][e]));
    float up;
    const float down = digit_scale(block_max(amax, scratch), up);
    if (tid < 2 * SLOTS) bf[NSPAN * 2 * SLOTS + tid] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int t = tid + i * NT;
        if (t < TASKS) put_task(v[i], t, up, bf, xs); /* warp-uniform */
    }
    __syncthreads();
    return down;
}

/* A warp's K inputs (lane: tasks lane + 32 i) as digits with the warp's own
 * scale into bf (span K / 128 is zeros) and the group sums xs; returns 2^-E.
 * No barrier. */
template <int K>
__device__ __forceinline__ float digits_warp(const float (&v)[K / 8 / 32][8], uint4 *bf, float *xs) {
    constexpr int PER = K / 8 / 32, NSPAN = K / 128;
    static_assert(K % 256 == 0, "whole warps of tasks");
    const int lane = threadIdx.x & 31;
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; i++)
#pragma unroll
        for (int e = 0; e < 8; e++) amax = fmaxf(amax, fabsf(v[i][e]));
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float up;
    const float down = digit_scale(amax, up);
    bf[NSPAN * 2 * SLOTS + lane] = make_uint4(0, 0, 0, 0); /* 2 SLOTS = 32 words of zeros */
#pragma unroll
    for (int i = 0; i < PER; i++) put_task(v[i], lane + 32 * i, up, bf, xs);
    return down;
}

/* prep_x by one warp alone (its own x, its own scale): the MoE down's
 * experts each have their own activation, gemv_ring.cuh's warps their own K
 * slice.  With nw, the digits are of x * nw and *ss gets sum x^2 (the
 * caller applies the RMSNorm factor to the dot products).  No barrier: the
 * caller synchronises before bf and xs are read by other warps. */
template <int K>
__device__ __forceinline__ float prep_x_warp(const float *__restrict__ x, uint4 *bf, float *xs,
                                             const float *__restrict__ nw = nullptr, float *ss = nullptr) {
    constexpr int PER = K / 8 / 32;
    static_assert(K % 256 == 0, "whole warps of tasks");
    const int lane = threadIdx.x & 31;
    float v[PER][8], sq = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; i++) {
        load_task_x<false>(x, lane + 32 * i, v[i]);
        if (nw) {
            float w[8];
            load_task_x<false>(nw, lane + 32 * i, w);
#pragma unroll
            for (int e = 0; e < 8; e++) sq += v[i][e] * v[i][e], v[i][e] *= w[e];
        }
    }
    if (nw) {
        for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
        *ss = sq;
    }
    return digits_warp<K>(v, bf, xs);
}

/* A warp's share of a 16-row block: rows g and g + 8 over spans ks NSP ..
 * ks NSP + NSP - 1, codes, scales and the bias words this lane folds
 * (words m = c + 4 i: two groups each, so no lane folds them all). */
template <int K, int NSP>
struct tile {
    static constexpr int G = K / 64, NB = (NSP + 3) / 4;
    uint4 qa[NSP], qb[NSP];
    uint32_t sa[NSP], sb[NSP], ba[NB], bb[NB];

    /* No tile: defines every register on the paths that load none, so the
     * compiler need not keep an older tile alive across them (the persistent
     * chain of bench/kernels/persist_chain_test). */
    __device__ __forceinline__ void clear() {
#pragma unroll
        for (int m = 0; m < NSP; m++) qa[m] = qb[m] = make_uint4(0, 0, 0, 0), sa[m] = sb[m] = 0;
#pragma unroll
        for (int i = 0; i < NB; i++) ba[i] = bb[i] = 0;
    }

    /* w, s, b: row 0 of the 16-row block (codes, scales, biases) */
    __device__ __forceinline__ void load(const uint32_t *w, const uint16_t *s, const uint16_t *b, int ks, int g, int c) {
        const uint4 *wa = reinterpret_cast<const uint4 *>(w + (size_t)g * (K / 8)) + ks * NSP * 4 + c;
        const uint4 *wb = wa + 8 * (K / 32);
#pragma unroll
        for (int m = 0; m < NSP; m++) qa[m] = ld_stream(wa + 4 * m), qb[m] = ld_stream(wb + 4 * m);
        const uint32_t *pa = reinterpret_cast<const uint32_t *>(s + (size_t)g * G) + ks * NSP, *pb = pa + 8 * (G / 2);
        const uint32_t *qpa = reinterpret_cast<const uint32_t *>(b + (size_t)g * G) + ks * NSP, *qpb = qpa + 8 * (G / 2);
#pragma unroll
        for (int m = 0; m < NSP; m++) sa[m] = __ldg(pa + m), sb[m] = __ldg(pb + m);
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const int m = c + 4 * i < NSP ? c + 4 * i : 0; /* lanes past NSP fold nothing (dot) */
            ba[i] = __ldg(qpa + m), bb[i] = __ldg(qpb + m);
        }
    }

    /* The lane's B fragments of x's digits for K slice ks (steps 0-1 and 2-3
     * of each span): what dot_x reads, the same for every tile of the slice. */
    static __device__ __forceinline__ void x_frags(const uint4 *bf, int ks, int g, int c, uint4 (&xb)[NSP][2]) {
        constexpr int NSPAN = K / 128;
        const bool has_b = (g < 4) == (c < 2);
        /* lanes without data read the zero span with stride 0, at a 16 B column
         * of the banks that their quarter-warp's data lanes leave free */
        const uint4 *bp = bf + (has_b ? ks * NSP * 2 * SLOTS + (g % 4) * 4 + c : NSPAN * 2 * SLOTS + (g < 4 ? 2 : 0));
        const int bstride = has_b ? 2 * SLOTS : 0;
#pragma unroll
        for (int m = 0; m < NSP; m++) xb[m][0] = bp[m * bstride], xb[m][1] = bp[m * bstride + SLOTS];
    }

    /* The warp's partial dot products of rows g (ya) and g + 8 (yb), summed
     * over the 4 lanes of a row (valid in lanes c = 0). */
    __device__ __forceinline__ void dot(const uint4 *bf, const float *xs, float down, int ks, int g, int c, float &ya,
                                        float &yb) const {
        uint4 xb[NSP][2];
        x_frags(bf, ks, g, c, xb);
        dot_x(xb, xs, down, ks, g, c, ya, yb);
    }

    /* dot with the slice's fragments already in registers (x_frags) */
    __device__ __forceinline__ void dot_x(const uint4 (&xb)[NSP][2], const float *xs, float down, int ks, int g, int c,
                                          float &ya, float &yb) const {
        const uint32_t sel = c >= 2 ? 0x3244u : 0x1044u; /* the lane's group: the scale word's high half for c >= 2 */
        float a_ = 0.0f, b_ = 0.0f;
#pragma unroll
        for (int m = 0; m < NSP; m++) {
            const uint4 b01 = xb[m][0], b23 = xb[m][1];
            const uint32_t wa[4] = {qa[m].x, qa[m].y, qa[m].z, qa[m].w}, wb[4] = {qb[m].x, qb[m].y, qb[m].z, qb[m].w};
            const uint32_t bv[8] = {b01.x, b01.y, b01.z, b01.w, b23.x, b23.y, b23.z, b23.w};
            const int zero[4] = {0, 0, 0, 0};
            int acc[4];
#pragma unroll
            for (int t = 0; t < 4; t++) {
                const uint32_t a[4] = {wa[t] & 0x0f0f0f0fu, wb[t] & 0x0f0f0f0fu, (wa[t] >> 4) & 0x0f0f0f0fu,
                                       (wb[t] >> 4) & 0x0f0f0f0fu};
                if (t == 0) mma_u8s8(acc, a, bv[0], bv[1], zero);
                else mma_u8s8(acc, a, bv[2 * t], bv[2 * t + 1], acc);
            }
            a_ = fmaf((float)(acc[0] + 256 * acc[1]), prmt_bf16(sa[m], sel), a_);
            b_ = fmaf((float)(acc[2] + 256 * acc[3]), prmt_bf16(sb[m], sel), b_);
        }
        const float wl = (c & 1) ? down * 65536.0f : down; /* the lane's digit weight */
        a_ *= wl, b_ *= wl;
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const int m = c + 4 * i;
            if (m < NSP) {
                const float2 xg = *reinterpret_cast<const float2 *>(xs + 2 * (ks * NSP + m));
                a_ = fmaf(prmt_bf16(ba[i], 0x1044u), xg.x, a_);
                a_ = fmaf(prmt_bf16(ba[i], 0x3244u), xg.y, a_);
                b_ = fmaf(prmt_bf16(bb[i], 0x1044u), xg.x, b_);
                b_ = fmaf(prmt_bf16(bb[i], 0x3244u), xg.y, b_);
            }
        }
        a_ += __shfl_xor_sync(0xffffffffu, a_, 1), b_ += __shfl_xor_sync(0xffffffffu, b_, 1);
        a_ += __shfl_xor_sync(0xffffffffu, a_, 2), b_ += __shfl_xor_sync(0xffffffffu, b_, 2);
        ya = a_, yb = b_;
    }
};

/* The block's rows from its warps' partial dots (ya, yb of rows g, g + 8 in
 * lanes c = 0; warp = row block * KS + K slice): summed over the K slices in
 * order, y[r] = residual[r] + sum.  All threads call it (a barrier); thread
 * t < 16 RB returns the y it stored (row (blockIdx.x RB + t / 16) 16 + t %
 * 16: lm_head.cu's pick), the others 0. */
template <int RB, int KS>
__device__ __forceinline__ float store_rows(float *red, float ya, float yb, float *__restrict__ y,
                                            const float *__restrict__ residual) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2;
    if ((lane & 3) == 0) red[warp * 16 + g] = ya, red[warp * 16 + g + 8] = yb;
    __syncthreads();
    float v = 0.0f;
    if (threadIdx.x < RB * 16) { /* row block threadIdx.x / 16 */
        const int rbi = threadIdx.x / 16, rr = threadIdx.x % 16, r = (blockIdx.x * RB + rbi) * 16 + rr;
        float a = 0.0f;
#pragma unroll
        for (int k = 0; k < KS; k++) a += red[(rbi * KS + k) * 16 + rr];
        v = residual ? residual[r] + a : a;
        y[r] = v;
    }
    return v;
}

/* y[r] = residual[r] + W[r] . x, x optionally RMSNorm(x) * norm_w; W a single
 * matrix (mat_view), W.cols == K, W.rows a multiple of 16 RB (the launcher
 * checks).  PDL as gemv_stream.cuh: only weights before the wait. */
template <int K, int NSP, int RB, int MINB>
__global__ void __launch_bounds__(RB * (K / (128 * NSP)) * 32, MINB)
    tq_gemv(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps, float *__restrict__ y,
            const float *__restrict__ residual, const lc_ctrl *ctrl) {
    constexpr int KS = K / (128 * NSP), NW = RB * KS, NT = NW * 32, NSPAN = K / 128, G = K / 64;
    static_assert(K % (128 * NSP) == 0, "k-range must divide K");
    __shared__ uint4 bf[(NSPAN + 1) * 2 * SLOTS];
    __shared__ __align__(16) float xs[G]; /* read as float2 */
    __shared__ float red[NW * 16], scratch[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int ks = warp % KS, r0 = (blockIdx.x * RB + warp / KS) * 16;
    tile<K, NSP> tl;
    tl.load(W.w + (size_t)r0 * (K / 8), W.s + (size_t)r0 * G, W.b + (size_t)r0 * G, ks, g, c);
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    const float down = prep_x<K, NT>(x, norm_w, eps, bf, xs, scratch);
    float ya, yb;
    tl.dot(bf, xs, down, ks, g, c, ya, yb);
    store_rows<RB, KS>(red, ya, yb, y, residual);
}

template <int K, int NSP, int RB, int MINB>
static cudaError_t launch_gemv(const lc_qmat &W, const float *x, const float *norm_w, float eps, float *y,
                               const float *residual, const lc_ctrl *ctrl, cudaStream_t st, bool pdl = true) {
    constexpr int NT = RB * (K / (128 * NSP)) * 32;
    if (W.cols != K || W.bits != 4 || W.rows % (16 * RB)) return cudaErrorInvalidValue;
    return launch_k(tq_gemv<K, NSP, RB, MINB>, dim3(W.rows / (16 * RB)), dim3(NT), 0, st, pdl, W, x, norm_w, eps, y,
                    residual, ctrl);
}

/* MoE gate/up + SwiGLU, 2048 inputs: grid (I / 16, K + 1), slot K the shared
 * expert.  A block takes 16 rows of gate (warps 0..KS-1) and the same 16 rows
 * of up (warps KS..2KS-1) of its slot's expert; act[j, r] = silu(g) * u.  The
 * routed slots read the router's ids (the predecessor) after the wait, the
 * shared slot's codes are requested while the router drains (as
 * gemv_stream.cuh's stream_gate_up). */
template <int NSP, bool XW>
__global__ void __launch_bounds__(2 * (2048 / (128 * NSP)) * 32, XW ? 3 : 0) tq_gate_up(lc_qmat gate, lc_qmat up, lc_qmat sgm,
                                                                           lc_qmat sum_, const int32_t *__restrict__ ids,
                                                                           int K, const float *__restrict__ x,
                                                                           float *__restrict__ act, const lc_ctrl *ctrl) {
    constexpr int KD = 2048, KS = KD / (128 * NSP), NW = 2 * KS, NT = NW * 32, NSPAN = KD / 128, KW = 128 * NSP;
    /* XW: each warp its own slice's digits (a slice and the zero span), as
     * gemv_ring.cuh; held to 3 blocks an SM (80 registers), as the block form */
    __shared__ uint4 bf[XW ? NW * (NSP + 1) * 2 * SLOTS : (NSPAN + 1) * 2 * SLOTS];
    __shared__ __align__(16) float xs[XW ? NW * 2 * NSP : KD / 64];
    __shared__ float red[NW * 16], scratch[32];
    const bool shared_slot = blockIdx.y == K;
    if (!shared_slot) lc_pdl_wait();
    asm volatile("" ::: "memory"); /* ids[] after the conditional wait (see moe.cu) */
    const int j = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int ks = warp % KS, r0 = blockIdx.x * 16;
    /* the warp's matrix by field, not by reference: a reference to one of
     * four kernel parameters would copy them all to the stack */
    const bool is_gate = warp < KS;
    const uint32_t *mw = shared_slot ? (is_gate ? sgm.w : sum_.w) : (is_gate ? gate.w : up.w);
    const uint16_t *ms = shared_slot ? (is_gate ? sgm.s : sum_.s) : (is_gate ? gate.s : up.s);
    const uint16_t *mb = shared_slot ? (is_gate ? sgm.b : sum_.b) : (is_gate ? gate.b : up.b);
    int e = shared_slot ? 0 : __ldcg(ids + j);
    e = (unsigned)e < (unsigned)gate.n_mat ? e : 0; /* gate and up stack the same experts */
    const size_t row = (size_t)e * gate.rows + r0;  /* all four have I rows (the caller checks) */
    tile<KD, NSP> tl;
    tl.load(mw + row * (KD / 8), ms + row * (KD / 64), mb + row * (KD / 64), ks, g, c);
    /* routed slots: no wait (their ids are from before the predecessor) */
    const bool stopped = shared_slot ? lc_pdl_wait_stop(ctrl) : LC_STOPPED(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    float ya, yb;
    if constexpr (XW) { /* no block barrier before the dot */
        uint4 *bw = bf + warp * (NSP + 1) * 2 * SLOTS;
        float *xw = xs + warp * 2 * NSP;
        const float dn = prep_x_warp<KW>(x + ks * KW, bw, xw);
        __syncwarp();
        uint4 xb[NSP][2];
        tile<KW, NSP>::x_frags(bw, 0, g, c, xb);
        tl.dot_x(xb, xw, dn, 0, g, c, ya, yb);
    } else {
        const float down = prep_x<KD, NT>(x, nullptr, 0.0f, bf, xs, scratch);
        tl.dot(bf, xs, down, ks, g, c, ya, yb);
    }
    if (c == 0) red[warp * 16 + g] = ya, red[warp * 16 + g + 8] = yb;
    __syncthreads();
    if (threadIdx.x < 16) {
        float gs = 0.0f, us = 0.0f;
#pragma unroll
        for (int k = 0; k < KS; k++) gs += red[k * 16 + threadIdx.x], us += red[(KS + k) * 16 + threadIdx.x];
        act[(size_t)j * gate.rows + r0 + threadIdx.x] = silu_f(gs) * us;
    }
}

/* gate, up [n_mat][I][2048], sg, su [I][2048] (views of the shared expert's
 * fused gate|up); I a multiple of 16 (the caller checks the shapes). */
template <int NSP, bool XW = false>
static cudaError_t launch_gate_up(const lc_qmat &gate, const lc_qmat &up, const lc_qmat &sg, const lc_qmat &su,
                                  const int32_t *ids, int K, const float *x, float *act, const lc_ctrl *ctrl,
                                  cudaStream_t st, bool pdl = true) {
    if (gate.rows % 16) return cudaErrorInvalidValue;
    return launch_k(tq_gate_up<NSP, XW>, dim3(gate.rows / 16, K + 1), dim3(2 * (2048 / (128 * NSP)) * 32), 0, st, pdl,
                    gate, up, sg, su, ids, K, x, act, ctrl);
}

/* MoE down + combine + residual, 512 inputs: h[d] += sum_j w_j down_{ids[j]}[d] .
 * act[j] + sgate sh_down[d] . act[K] for K = 8 routed slots.  A block takes
 * RB row blocks of 16 rows; warp (rb, j) computes slot j's 16 rows over all
 * 512 inputs (4 spans, its codes requested at entry: the ids come from the
 * router two kernels back, complete when this kernel starts, as
 * gemv_stream.cuh's stream_down reads them), warp j < 9 turns act[j] into
 * digits with its own scale, and the combine sums the slots in order j = 0..8
 * (deterministic, as stream_down). */
template <int RB>
__global__ void __launch_bounds__(9 * RB * 32) tq_down(lc_qmat down, lc_qmat sdown, const int32_t *__restrict__ ids,
                                                       const float *__restrict__ wts, const float *__restrict__ sgate,
                                                       const float *__restrict__ act, float *__restrict__ h,
                                                       const lc_ctrl *ctrl) {
    constexpr int KD = 512, J = 9, NSPAN = KD / 128, G = KD / 64;
    __shared__ uint4 bf[J][(NSPAN + 1) * 2 * SLOTS];
    __shared__ __align__(16) float xs[J][G];
    __shared__ float dn[J], red[RB][J][16];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int j = warp % J, rb = warp / J, r0 = (blockIdx.x * RB + rb) * 16;
    const bool sh = j == J - 1;
    const uint32_t *mw = sh ? sdown.w : down.w;
    const uint16_t *ms = sh ? sdown.s : down.s, *mb = sh ? sdown.b : down.b;
    int e = sh ? 0 : __ldcg(ids + j);
    e = (unsigned)e < (unsigned)down.n_mat ? e : 0;
    const size_t row = (size_t)e * down.rows + r0; /* sdown has down's rows (the launcher checks) */
    tile<KD, NSPAN> tl;
    tl.load(mw + row * (KD / 8), ms + row * G, mb + row * G, 0, g, c);
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    if (warp < J) {
        const float d = prep_x_warp<KD>(act + (size_t)warp * KD, bf[warp], xs[warp]);
        if (lane == 0) dn[warp] = d;
    }
    __syncthreads();
    float ya, yb;
    tl.dot(bf[j], xs[j], dn[j], 0, g, c, ya, yb);
    if (c == 0) red[rb][j][g] = ya, red[rb][j][g + 8] = yb;
    __syncthreads();
    if (threadIdx.x < RB * 16) {
        const int rbi = threadIdx.x / 16, rr = threadIdx.x % 16;
        float total = 0.0f;
#pragma unroll
        for (int k = 0; k < J; k++) total = fmaf(k == J - 1 ? sgate[0] : wts[k], red[rbi][k][rr], total);
        h[(blockIdx.x * RB + rbi) * 16 + rr] += total;
    }
}

template <int RB>
static cudaError_t launch_down(const lc_qmat &down, const lc_qmat &sdown, const int32_t *ids, const float *w,
                               const float *sgate, const float *act, float *h, const lc_ctrl *ctrl, cudaStream_t st,
                               bool pdl = true) {
    if (down.cols != 512 || sdown.cols != 512 || down.bits != 4 || sdown.bits != 4 || sdown.rows != down.rows ||
        down.rows % (16 * RB))
        return cudaErrorInvalidValue;
    return launch_k(tq_down<RB>, dim3(down.rows / (16 * RB)), dim3(9 * RB * 32), 0, st, pdl, down, sdown, ids, w, sgate,
                    act, h, ctrl);
}

} // namespace gemv_tq
} // namespace

#endif
