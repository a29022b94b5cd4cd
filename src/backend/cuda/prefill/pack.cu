/* pack.cu — fp32 activations into the tensor-core GEMMs' input format
 * (lc_xpack, cuda_ops.h): bf16 hi + lo (+ lo2), or fp16 hi + lo of x * xs
 * (f16), 16-column blocks permuted into the fragment order, per-64 group
 * sums; the input RMSNorm optionally fused.  One pass can fill two packs of
 * the same rows (the router's bf16 and the experts' fp16) and take the dot
 * of each normalised row with one quantised weight row (the shared-expert
 * gate, the router's last row: as a GEMM row it cost a third tile). */
#include "backend/cuda/common.cuh"

#include <cuda_fp16.h>

namespace {

/* Position k of a packed 16-block holds column perm(k) of the block:
 * 0 4 1 5 2 6 3 7, 8 12 9 13 10 14 11 15.  A constant expression, so the
 * block's 16 values stay in registers. */
__device__ constexpr int perm(int k) { return (k & 8) | (k & 1) << 2 | (k & 7) >> 1; }

/* Block per row; thread j owns 16-column blocks j, j + 256, ... */
__device__ __forceinline__ void store16(uint16_t *dst, const uint32_t (&v)[8]) {
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    d[0] = make_uint4(v[0], v[1], v[2], v[3]), d[1] = make_uint4(v[4], v[5], v[6], v[7]);
}

/* One permuted 16-block v of row t into pack p at column block b. */
__device__ __forceinline__ void put_block(const lc_xpack &p, int t, int b, const float (&v)[16], float sum) {
    uint32_t hi[8], lo[8], lo2[8];
    const size_t at = (size_t)t * p.ld + b * 16;
    if (p.f16) {
        const float xs = p.xs ? p.xs : 1.0f;
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            const float a = v[perm(k)] * xs, c = v[perm(k + 1)] * xs;
            const __half ha = __float2half_rn(a), hc = __float2half_rn(c);
            const __half la = __float2half_rn(a - __half2float(ha)), lc = __float2half_rn(c - __half2float(hc));
            hi[k / 2] = (uint32_t)__half_as_ushort(ha) | (uint32_t)__half_as_ushort(hc) << 16;
            lo[k / 2] = (uint32_t)__half_as_ushort(la) | (uint32_t)__half_as_ushort(lc) << 16;
        }
        store16(p.hi + at, hi), store16(p.lo + at, lo);
    } else {
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            /* each remainder is exact in fp32, so hi + lo + lo2 == x */
            const float a = v[perm(k)], c = v[perm(k + 1)];
            const uint16_t ha = f32_to_bf16(a), hc = f32_to_bf16(c);
            const float ra = a - bf16_to_f32(ha), rc = c - bf16_to_f32(hc);
            const uint16_t la = f32_to_bf16(ra), lc = f32_to_bf16(rc);
            hi[k / 2] = ha | (uint32_t)hc << 16;
            lo[k / 2] = la | (uint32_t)lc << 16;
            lo2[k / 2] = f32_to_bf16(ra - bf16_to_f32(la)) | (uint32_t)f32_to_bf16(rc - bf16_to_f32(lc)) << 16;
        }
        store16(p.hi + at, hi), store16(p.lo + at, lo);
        if (p.lo2) store16(p.lo2 + at, lo2);
    }
    if ((b & 3) == 0) {
        p.gs[(size_t)t * (p.ld / 64) + b / 4] = sum;
        if (p.f16) { /* gs / 16 as fp16 hi, lo (gemm_wgmma.cu's bias GEMM) */
            const __half h = __float2half_rn(sum * (1.0f / 16));
            p.sh[(size_t)t * 64 + b / 4] = __half_as_ushort(h);
            p.sl[(size_t)t * 64 + b / 4] = __half_as_ushort(__float2half_rn(sum * (1.0f / 16) - __half2float(h)));
        }
    }
}

/* sum over the 16 columns of block b of v[i] * W[0, b*16 + i] (W 4- or 8-bit,
 * affine per 64): s * sum(v q) + bias * sum(v), the group's terms in fp32. */
__device__ __forceinline__ float dot16(const lc_qmat &g, int b, const float (&v)[16]) {
    const int bits = g.bits, per = 32 / bits;
    const uint32_t mask = (1u << bits) - 1;
    const uint32_t *w = g.w + (size_t)b * 16 * bits / 32;
    float qv = 0.0f, sv = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const uint32_t q = (w[i / per] >> (bits * (i % per))) & mask;
        qv = fmaf(v[i], (float)q, qv);
        sv += v[i];
    }
    const int grp = b * 16 / LC_GROUP;
    return bf16_to_f32(g.s[grp]) * qv + bf16_to_f32(g.b[grp]) * sv;
}

__device__ __forceinline__ void load16(const float *row, int b, float (&v)[16]) {
#pragma unroll
    for (int i = 0; i < 16; i += 4) {
        const float4 q = reinterpret_cast<const float4 *>(row + b * 16)[i / 4];
        v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
    }
}

__global__ void __launch_bounds__(256) pack_kernel(const float *__restrict__ x, int ldx, int C, const float *__restrict__ nw,
                                                   float eps, lc_xpack p, lc_xpack q, lc_qmat g, float *__restrict__ gy,
                                                   int gld) {
    __shared__ float scratch[32];
    const int t = blockIdx.x, nb = C / 16;
    const float *row = x + (size_t)t * ldx;
    if (nb <= (int)blockDim.x) {
        /* one 16-block per thread (the launch's usual shape): the row is read
         * once and stays in registers through the norm */
        const int b = threadIdx.x;
        const bool on = b < nb;
        float v[16], sum = 0.0f, scale = 1.0f;
        if (on) load16(row, b, v);
        else
#pragma unroll
            for (int i = 0; i < 16; i++) v[i] = 0.0f;
        if (nw) {
            float ss = 0.0f;
#pragma unroll
            for (int i = 0; i < 16; i++) ss += v[i] * v[i];
            scale = rsqrtf(block_sum(ss, scratch) / (float)C + eps);
        }
#pragma unroll
        for (int i = 0; i < 16; i++) {
            if (nw && on) v[i] = v[i] * scale * nw[b * 16 + i];
            sum += v[i];
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (gy) {
            const float d = block_sum(on ? dot16(g, b, v) : 0.0f, scratch);
            if (threadIdx.x == 0) gy[(size_t)t * gld] = d;
        }
        if (!on) return;
        put_block(p, t, b, v, sum);
        if (q.hi) put_block(q, t, b, v, sum);
        return;
    }
    float scale = 1.0f;
    if (nw) {
        float ss = 0.0f;
        for (int i = threadIdx.x; i < C / 4; i += blockDim.x) {
            const float4 v = reinterpret_cast<const float4 *>(row)[i];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        scale = rsqrtf(block_sum(ss, scratch) / (float)C + eps);
    }
    /* blocks are walked in rounds of blockDim.x so the 4 blocks of a group
     * sit in 4 adjacent lanes (C is a multiple of 64) */
    float dot = 0.0f;
    for (int b0 = 0; b0 < nb; b0 += blockDim.x) {
        const int b = b0 + threadIdx.x;
        const bool on = b < nb;
        float v[16], sum = 0.0f;
        if (on) {
            load16(row, b, v);
#pragma unroll
            for (int i = 0; i < 16; i++) {
                if (nw) v[i] = v[i] * scale * nw[b * 16 + i];
                sum += v[i];
            }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (!on) continue;
        if (gy) dot += dot16(g, b, v);
        put_block(p, t, b, v, sum);
        if (q.hi) put_block(q, t, b, v, sum);
    }
    if (gy) {
        dot = block_sum(dot, scratch);
        if (threadIdx.x == 0) gy[(size_t)t * gld] = dot;
    }
}

/* A thread per 16-column block up to 256 (C <= 4096), in whole warps. */
int pack_threads(int C) {
    const int nb = C / 16, w = (nb + 31) / 32 * 32;
    return w < 256 ? w : 256;
}

} // namespace

extern "C" cudaError_t lc_pack(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                               cudaStream_t st) {
    if (C % 64 || ldx % 4 || C > p->ld || T <= 0) return cudaErrorInvalidValue;
    const lc_xpack none = {};
    pack_kernel<<<T, pack_threads(C), 0, st>>>(x, ldx, C, norm_w, eps, *p, none, lc_qmat{}, nullptr, 0);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_pack2(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                                const lc_xpack *q, cudaStream_t st) {
    if (C % 64 || ldx % 4 || C > p->ld || C > q->ld || T <= 0) return cudaErrorInvalidValue;
    pack_kernel<<<T, pack_threads(C), 0, st>>>(x, ldx, C, norm_w, eps, *p, *q, lc_qmat{}, nullptr, 0);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_pack_dot(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                                   const lc_xpack *q, const lc_qmat *g, float *y, int ldy, cudaStream_t st) {
    if (C % 64 || ldx % 4 || C > p->ld || (q && C > q->ld) || T <= 0 || g->cols != C || g->rows < 1 ||
        (g->bits != 4 && g->bits != 8))
        return cudaErrorInvalidValue;
    const lc_xpack none = {};
    pack_kernel<<<T, pack_threads(C), 0, st>>>(x, ldx, C, norm_w, eps, *p, q ? *q : none, *g, y, ldy);
    return cudaGetLastError();
}
