/* qdot.cuh — the inner loop of every batch-1 quantised dot product.
 *
 * A row of an MLX affine matrix is read in 16-byte chunks (32 codes at 4 bits,
 * 16 at 8 bits).  LPR lanes share a row, each taking CPL chunks, so a warp
 * works on 32/LPR rows at once; the activations a lane needs are loaded
 * once into registers (xr) together with their per-chunk sums (xs), and
 * reused for every row the warp visits.  Per chunk:
 *     partial += scale * sum(q_i x_i) + bias * sum(x_i)
 * which is w = scale*q + bias summed without materialising w. */
#ifndef LILAC_CUDA_QDOT_CUH
#define LILAC_CUDA_QDOT_CUH

#include "backend/cuda/common.cuh"

template <int BITS, int CPL, int LPR>
struct qdot {
    static constexpr int EPC = 128 / BITS;           /* elements per 16-byte chunk */
    static constexpr int CPG = LC_GROUP / EPC;       /* chunks per group */
    static constexpr int COLS = EPC * CPL * LPR;     /* row length this instance serves */
    float xr[CPL][EPC];
    float xs[CPL];

    /* x: the activation vector (fp32, COLS values); sub = lane % LPR */
    __device__ __forceinline__ void load_x(const float *__restrict__ x, int sub) {
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const float4 *p = reinterpret_cast<const float4 *>(x + (size_t)(sub + LPR * j) * EPC);
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < EPC / 4; i++) {
                float4 v = p[i];
                xr[j][4 * i] = v.x, xr[j][4 * i + 1] = v.y, xr[j][4 * i + 2] = v.z, xr[j][4 * i + 3] = v.w;
                s += (v.x + v.y) + (v.z + v.w);
            }
            xs[j] = s;
        }
    }

    /* The same from h normalised on the fly: x = h * r * w (RMSNorm with the
     * block's r = rsqrt(mean(h^2) + eps)). */
    __device__ __forceinline__ void load_x_norm(const float *__restrict__ h, const float *__restrict__ w, float r, int sub) {
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const int base = (sub + LPR * j) * EPC;
            const float4 *p = reinterpret_cast<const float4 *>(h + base);
            const float4 *q = reinterpret_cast<const float4 *>(w + base);
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < EPC / 4; i++) {
                const float4 v = p[i], g = q[i];
                xr[j][4 * i] = v.x * r * g.x, xr[j][4 * i + 1] = v.y * r * g.y;
                xr[j][4 * i + 2] = v.z * r * g.z, xr[j][4 * i + 3] = v.w * r * g.w;
                s += (xr[j][4 * i] + xr[j][4 * i + 1]) + (xr[j][4 * i + 2] + xr[j][4 * i + 3]);
            }
            xs[j] = s;
        }
    }

    /* What a lane reads of one row: its CPL chunks of codes and their scale
     * and bias.  fetch() only issues loads, so several rows' loads can be in
     * flight before the first dot() needs them. */
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

    /* This lane's share of the row's dot product (summed over the row's LPR lanes by reduce()). */
    __device__ __forceinline__ float dot(const chunk &c) const {
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < CPL; j++) {
            const uint32_t words[4] = {c.q[j].x, c.q[j].y, c.q[j].z, c.q[j].w};
            float d = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; k++) {
#pragma unroll
                for (int i = 0; i < 32 / BITS; i++)
                    d = fmaf((float)((words[k] >> (BITS * i)) & ((1u << BITS) - 1)), xr[j][k * (32 / BITS) + i], d);
            }
            acc = fmaf(bf16_to_f32(c.s[j]), d, fmaf(bf16_to_f32(c.b[j]), xs[j], acc));
        }
        return acc;
    }

    __device__ __forceinline__ float row(const lc_qmat &m, int e, int r, int sub) const {
        chunk c;
        fetch(m, e, r, sub, c);
        return dot(c);
    }

    /* Sum over the LPR lanes of a row (xor shuffles stay inside aligned segments). */
    static __device__ __forceinline__ float reduce(float v) {
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        return v;
    }
};

/* r = rsqrt(mean(h[0..n)^2) + eps) over the block; optionally writes the
 * normalised vector (block 0 only).  scratch: 32 floats of shared memory. */
__device__ __forceinline__ float block_rms(const float *__restrict__ h, const float *__restrict__ w, int n, float eps,
                                           float *xn_out, float *scratch) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += h[i] * h[i];
    ss = block_sum(ss, scratch);
    const float r = rsqrtf(ss / (float)n + eps);
    if (xn_out && blockIdx.x == 0 && blockIdx.y == 0)
        for (int i = threadIdx.x; i < n; i += blockDim.x) xn_out[i] = h[i] * r * w[i];
    return r;
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
