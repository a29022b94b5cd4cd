/* pack.cu — fp32 activations into the tensor-core GEMMs' input format
 * (lc_xpack, cuda_ops.h): bf16 hi + lo (+ lo2), 16-column blocks permuted into the
 * fragment order, per-64 group sums; the input RMSNorm optionally fused. */
#include "backend/cuda/common.cuh"

namespace {

/* Position kk of a packed 16-block holds column PERM[kk] of the block. */
__device__ __constant__ int PERM[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

/* Block per row; thread j owns 16-column blocks j, j + 256, ... */
__global__ void __launch_bounds__(256) pack_kernel(const float *__restrict__ x, int ldx, int C, const float *__restrict__ nw,
                                                   float eps, lc_xpack p) {
    __shared__ float scratch[32];
    const int t = blockIdx.x, nb = C / 16;
    const float *row = x + (size_t)t * ldx;
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
    for (int b0 = 0; b0 < nb; b0 += blockDim.x) {
        const int b = b0 + threadIdx.x;
        const bool on = b < nb;
        float v[16], sum = 0.0f;
        if (on) {
#pragma unroll
            for (int i = 0; i < 16; i += 4) {
                const float4 q = reinterpret_cast<const float4 *>(row + b * 16)[i / 4];
                v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
            }
#pragma unroll
            for (int i = 0; i < 16; i++) {
                if (nw) v[i] = v[i] * scale * nw[b * 16 + i];
                sum += v[i];
            }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (!on) continue;
        uint32_t hi[8], lo[8], lo2[8];
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            /* each remainder is exact in fp32, so hi + lo + lo2 == x */
            const float a = v[PERM[k]], c = v[PERM[k + 1]];
            const uint16_t ha = f32_to_bf16(a), hc = f32_to_bf16(c);
            const float ra = a - bf16_to_f32(ha), rc = c - bf16_to_f32(hc);
            const uint16_t la = f32_to_bf16(ra), lc = f32_to_bf16(rc);
            hi[k / 2] = ha | (uint32_t)hc << 16;
            lo[k / 2] = la | (uint32_t)lc << 16;
            lo2[k / 2] = f32_to_bf16(ra - bf16_to_f32(la)) | (uint32_t)f32_to_bf16(rc - bf16_to_f32(lc)) << 16;
        }
        uint4 *ph = reinterpret_cast<uint4 *>(p.hi + (size_t)t * p.ld + b * 16);
        uint4 *pl = reinterpret_cast<uint4 *>(p.lo + (size_t)t * p.ld + b * 16);
        ph[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]), ph[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
        pl[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]), pl[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
        if (p.lo2) {
            uint4 *p2 = reinterpret_cast<uint4 *>(p.lo2 + (size_t)t * p.ld + b * 16);
            p2[0] = make_uint4(lo2[0], lo2[1], lo2[2], lo2[3]), p2[1] = make_uint4(lo2[4], lo2[5], lo2[6], lo2[7]);
        }
        if ((b & 3) == 0) p.gs[(size_t)t * (p.ld / 64) + b / 4] = sum;
    }
}

} // namespace

extern "C" cudaError_t lc_pack(const float *x, int ldx, int T, int C, const float *norm_w, float eps, const lc_xpack *p,
                               cudaStream_t st) {
    if (C % 64 || ldx % 4 || C > p->ld || T <= 0) return cudaErrorInvalidValue;
    pack_kernel<<<T, 256, 0, st>>>(x, ldx, C, norm_w, eps, *p);
    return cudaGetLastError();
}
