/* qdot.cuh — the pieces of every batch-1 quantised dot product.
 *
 * A row of an MLX affine matrix is read in 16-byte chunks (32 codes at 4 bits,
 * 16 at 8 bits).  LPR lanes share a row, each taking CPL chunks, so a warp
 * works on 32/LPR rows at once.  The activations sit in shared memory
 * (load_x_smem), read chunk by chunk (x_chunk) with their sums.  Per chunk:
 *     partial += scale * sum(q_i x_i) + bias * sum(x_i)
 * which is w = scale*q + bias summed without materialising w (chunk_fma). */
#ifndef LILAC_CUDA_QDOT_CUH
#define LILAC_CUDA_QDOT_CUH

#include "backend/cuda/common.cuh"

template <int BITS, int CPL, int LPR>
struct qdot {
    static constexpr int EPC = 128 / BITS;           /* elements per 16-byte chunk */
    static constexpr int CPG = LC_GROUP / EPC;       /* chunks per group */
    static constexpr int COLS = EPC * CPL * LPR;     /* row length this instance serves */
    /* What a lane reads of one row: its CPL chunks of codes and their scale
     * and bias.  fetch() only issues loads, so several rows' loads can be in
     * flight before the first chunk_dot() needs them. */
    struct chunk {
        uint4 q[CPL];
        uint16_t s[CPL], b[CPL];
    };

    static __device__ __forceinline__ void fetch(const lc_qmat &m, int e, int r, int sub, chunk &c) {
        const uint4 *w = reinterpret_cast<const uint4 *>(qrow_w(m, e, r));
        const size_t sb = qrow_sb(m, e, r);
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const int k = sub + LPR * j;
            c.q[j] = __ldg(w + k);
            c.s[j] = __ldg(m.s + sb + k / CPG);
            c.b[j] = __ldg(m.b + sb + k / CPG);
        }
    }

    /* Sum over the LPR lanes of a row (xor shuffles stay inside aligned segments). */
    static __device__ __forceinline__ float reduce(float v) {
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
};

/* One 16-byte chunk of codes (EPC = 128/BITS of them) dotted with xv[EPC],
 * without the scale and bias.  4-bit codes become floats without
 * integer-to-float conversions (a quarter-rate instruction):
 * (w >> 4k) & 0x000f000f | 0x43004300 is a pair of bf16 values 128 + q (codes
 * k and k+4 of the word); one packed bf16 FMA takes 128 back from both
 * (exact: small integers), and a shift or a mask widens each to f32.
 * Folding the 128 into the bias instead would save that instruction but
 * makes the products ~17x larger than the result (measured: 3x the decode
 * vs prefill difference), so the codes stay centred here. */
template <int BITS>
__device__ __forceinline__ float chunk_dot(const uint4 q, const float *xv) {
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
    float d = 0.0f;
    if constexpr (BITS == 4) {
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t t = ((words[k] >> (4 * i)) & 0x000f000fu) | 0x43004300u;
                asm("fma.rn.bf16x2 %0, %0, %1, %2;" : "+r"(t) : "r"(0x3f803f80u), "r"(0xc300c300u)); /* t*1 - 128 */
                d = fmaf(__uint_as_float(t << 16), xv[k * 8 + i], d);
                d = fmaf(__uint_as_float(t & 0xffff0000u), xv[k * 8 + i + 4], d);
            }
    } else if constexpr (BITS == 8) {
        /* byte i of a word under 0x4B000000's exponent is the float 2^23 + q:
         * one byte permute and one add give q exactly, where (float)q is an
         * I2F, at an eighth of the FMA rate on sm_90 (the programming guide's
         * table; the router's 64 codes a lane and row): the same products.
         * H200, 2026-12-06: decode +0.2% at 4K with moe_route.cuh's
         * router_rows (docs/PERFORMANCE.md) */
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                d = fmaf(__uint_as_float(__byte_perm(words[k], 0x4B000000u, 0x7440u + i)) - 8388608.0f, xv[k * 4 + i], d);
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int i = 0; i < 32 / BITS; i++)
                d = fmaf((float)((words[k] >> (BITS * i)) & ((1u << BITS) - 1)), xv[k * (32 / BITS) + i], d);
    }
    return d;
}

/* acc + scale * sum(q_i x_i) + bias * xsum for one chunk (xsum = sum(x_i)),
 * scale and bias as stored (bf16). */
template <int BITS>
__device__ __forceinline__ float chunk_fma(const uint4 q, const float *xv, uint16_t scale, uint16_t bias, float xsum, float acc) {
    return fmaf(bf16_to_f32(scale), chunk_dot<BITS>(q, xv), fmaf(bf16_to_f32(bias), xsum, acc));
}

/* The activations of one block in shared memory, swizzled: float4 q of
 * chunk c (EPC values) at q * NCH + c, so lanes reading the same q of
 * consecutive chunks hit distinct banks; csum[c] is the sum of chunk c
 * (needed once per row for the bias term: summed once per block, not per row).  With norm_w the vector is
 * RMSNorm(x) * norm_w; block 0 also writes it to xn_out when set.  Every
 * thread of the block must call this (it has a barrier).  Returns the
 * RMSNorm factor (1 without norm_w).  x_share holds its pieces apart, for a
 * caller that loads norm_w early or uses x before it is normalised; with
 * NTH, only the block's first NTH threads hold float4s (strided by NTH), so
 * a larger block sums x^2 in the order of a block of NTH threads (moe_slots.cu's
 * two shapes give the same floats); NTH = 0: all blockDim.x threads. */
template <int COLS, int NTH = 0>
struct x_share { /* a thread's float4s k = threadIdx.x + i stride of x (v) and norm_w (wv), k < COLS / 4 */
    static constexpr int NV = COLS / 4, PER = (NV + 127) / 128; /* blocks have at least 128 threads */
    static __device__ __forceinline__ int stride() { return NTH ? NTH : (int)blockDim.x; }
    static __device__ __forceinline__ bool holds() { return NTH == 0 || (int)threadIdx.x < NTH; }
    float4 v[PER], wv[PER];

    __device__ __forceinline__ void load_norm(const float *__restrict__ norm_w) {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int k = threadIdx.x + i * stride();
            if (holds() && k < NV) wv[i] = reinterpret_cast<const float4 *>(norm_w)[k];
        }
    }
    /* x, and norm_w unless w_loaded (load_norm); returns the share of sum x^2 when norm_w is set (else 0) */
    __device__ __forceinline__ float load(const float *__restrict__ x, const float *__restrict__ norm_w, bool w_loaded = false) {
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int k = threadIdx.x + i * stride();
            if (holds() && k < NV) {
                v[i] = reinterpret_cast<const float4 *>(x)[k];
                if (norm_w) {
                    if (!w_loaded) wv[i] = reinterpret_cast<const float4 *>(norm_w)[k];
                    ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
                }
            }
        }
        return ss;
    }
    static __device__ __forceinline__ int slot(int k, int EPC) { return (k % (EPC / 4)) * (COLS / EPC) + k / (EPC / 4); }
    /* x * norm_w, not normalised, into the swizzled layout (moe_slots.cu's staged x) */
    template <int EPC>
    __device__ __forceinline__ void stage(float4 *xs4) const {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int k = threadIdx.x + i * stride();
            if (holds() && k < NV)
                xs4[slot(k, EPC)] = make_float4(v[i].x * wv[i].x, v[i].y * wv[i].y, v[i].z * wv[i].z, v[i].w * wv[i].w);
        }
    }
    /* x (times rr * norm_w when norm) into the swizzled layout; no barrier */
    template <int EPC>
    __device__ __forceinline__ void put(float rr, bool norm, float *xn_out, float4 *xs4) const {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int k = threadIdx.x + i * stride();
            if (holds() && k < NV) {
                float4 a = v[i];
                if (norm) a = make_float4(a.x * rr * wv[i].x, a.y * rr * wv[i].y, a.z * rr * wv[i].z, a.w * rr * wv[i].w);
                xs4[slot(k, EPC)] = a;
                if (xn_out && blockIdx.x == 0 && blockIdx.y == 0) reinterpret_cast<float4 *>(xn_out)[k] = a;
            }
        }
    }
    /* put, then the chunk sums: two barriers */
    template <int EPC>
    __device__ __forceinline__ void store(float rr, bool norm, float *xn_out, float4 *xs4, float *csum) const {
        constexpr int F4 = EPC / 4, NCH = COLS / EPC;
        put<EPC>(rr, norm, xn_out, xs4);
        __syncthreads();
        for (int c = threadIdx.x; c < NCH; c += blockDim.x) {
            float sum = 0.0f;
#pragma unroll
            for (int q = 0; q < F4; q++) {
                const float4 a = xs4[q * NCH + c];
                sum += (a.x + a.y) + (a.z + a.w);
            }
            csum[c] = sum;
        }
        __syncthreads();
    }
};

template <int COLS, int EPC>
__device__ __forceinline__ float load_x_smem(const float *__restrict__ x, const float *__restrict__ norm_w, float eps,
                                             float *xn_out, float4 *xs4, float *csum, float *scratch) {
    x_share<COLS> xv;
    const float ss = xv.load(x, norm_w);
    float rr = 1.0f;
    if (norm_w) rr = rsqrtf(block_sum(ss, scratch) / (float)COLS + eps);
    xv.template store<EPC>(rr, norm_w != nullptr, xn_out, xs4, csum);
    return rr;
}

/* Chunk ch of the swizzled activations into xv[EPC]; returns its sum:
 * csum[ch], or with SUMMED (no sums' table, xcs unused) the sum added here
 * in store's order, the same float, for a caller that skips store's
 * barriers (moe_slots.cu). */
template <int COLS, int EPC, bool SUMMED = false>
__device__ __forceinline__ float x_chunk(const float4 *xs4, const float *csum, int ch, float *xv) {
    constexpr int F4 = EPC / 4, NCH = COLS / EPC;
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < F4; q++) {
        const float4 a = xs4[q * NCH + ch];
        xv[4 * q] = a.x, xv[4 * q + 1] = a.y, xv[4 * q + 2] = a.z, xv[4 * q + 3] = a.w;
        if constexpr (SUMMED) sum += (a.x + a.y) + (a.z + a.w);
    }
    if constexpr (SUMMED) return sum;
    else return csum[ch];
}

/* NR rows' partial dots (this lane's chunks, not yet reduced over the row's
 * LPR lanes: qdot::reduce) against the swizzled activations; acc[p] stays 0
 * where !row[p].  Each chunk of x is read from shared memory once for all NR
 * rows, and every row's sum keeps the one-row order.  SUMMED: no sums' table
 * (xcs unused), each chunk's sum added here (x_chunk). */
template <int BITS, int CPL, int LPR, int NR, bool SUMMED = false>
__device__ __forceinline__ void dot_rows(const typename qdot<BITS, CPL, LPR>::chunk (&c)[NR], const bool (&row)[NR], int sub,
                                         const float4 *xs4, const float *xcs, float (&acc)[NR]) {
    using Q = qdot<BITS, CPL, LPR>;
#pragma unroll
    for (int p = 0; p < NR; p++) acc[p] = 0.0f;
#pragma unroll
    for (int j = 0; j < CPL; j++) {
        float xv[Q::EPC];
        const float xsum = x_chunk<Q::COLS, Q::EPC, SUMMED>(xs4, xcs, sub + LPR * j, xv);
#pragma unroll
        for (int p = 0; p < NR; p++)
            if (row[p]) acc[p] = chunk_fma<BITS>(c[p].q[j], xv, c[p].s[j], c[p].b[j], xsum, acc[p]);
    }
}

/* Calls F::template run<BITS, CPL, LPR>(args...) for the instance serving
 * (bits, cols); returns cudaErrorInvalidValue when none does. */
#define LC_QDOT_DISPATCH(bits, cols, CALL)                                                   \
    do {                                                                                     \
        if ((bits) == 4) {                                                                   \
            switch (cols) {                                                                  \
            case 64: { CALL(4, 1, 2); }                                                      \
            case 128: { CALL(4, 1, 4); }                                                     \
            case 256: { CALL(4, 1, 8); }                                                     \
            case 512: { CALL(4, 1, 16); }                                                    \
            case 1024: { CALL(4, 1, 32); }                                                   \
            case 2048: { CALL(4, 2, 32); }                                                   \
            case 4096: { CALL(4, 4, 32); }                                                   \
            }                                                                                \
        } else if ((bits) == 8) {                                                            \
            switch (cols) {                                                                  \
            case 64: { CALL(8, 1, 4); }                                                      \
            case 128: { CALL(8, 1, 8); }                                                     \
            case 256: { CALL(8, 1, 16); }                                                    \
            case 512: { CALL(8, 1, 32); }                                                    \
            case 1024: { CALL(8, 2, 32); }                                                   \
            case 2048: { CALL(8, 4, 32); }                                                   \
            }                                                                                \
        }                                                                                    \
        return cudaErrorInvalidValue;                                                        \
    } while (0)

#endif
