/* attention.cu — gated full attention (spec §5): q/k norm + partial RoPE +
 * KV append, then causal attention split over key ranges (flash-decoding),
 * then a combine that merges the ranges and applies the sigmoid gate.
 *
 * GQA packing: a block serves the R = H/Hkv query heads that share one kv
 * head, one warp per query head, so every K/V row is read once per block.
 * Softmax is online (running max and sum per head), key tiles of 64. */
#include <math.h>

#include "backend/cuda/common.cuh"

namespace {

constexpr int R = 8;   /* query heads per kv head (Qwen3.6: 16/2) */
constexpr int KT = 64; /* keys per tile */

/* grid (T, H + Hkv), block hd threads */
__global__ void prep_kernel(lc_attn_params p, const float *__restrict__ proj, int ldp, float *__restrict__ qbuf,
                            uint16_t *__restrict__ kc, uint16_t *__restrict__ vc, const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    extern __shared__ float xs[];
    __shared__ float scratch[32];
    const int t = blockIdx.x, head = blockIdx.y, d = threadIdx.x, hd = p.hd, pos = ctrl->pos + t;
    const float *row = proj + (size_t)t * ldp;
    const bool is_q = head < p.H;
    const int g = head - p.H;
    const float x = is_q ? row[head * 2 * hd + d] : row[p.H * 2 * hd + g * hd + d];
    const float ss = block_sum(x * x, scratch);
    float y = x * rsqrtf(ss / (float)hd + p.eps) * (is_q ? p.q_norm[d] : p.k_norm[d]);
    xs[d] = y;
    __syncthreads();
    const int half = p.rd / 2;
    if (d < p.rd) {
        const int j = d < half ? d : d - half;
        float sn, cs;
        sincosf((float)pos * p.rope_inv[j], &sn, &cs);
        y = d < half ? y * cs - xs[d + half] * sn : y * cs + xs[d - half] * sn;
    }
    if (is_q) {
        qbuf[((size_t)t * p.H + head) * hd + d] = y;
    } else {
        const size_t at = ((size_t)pos * p.Hkv + g) * hd + d;
        kc[at] = f32_to_bf16(y);
        vc[at] = f32_to_bf16(row[p.H * 2 * hd + p.Hkv * hd + g * hd + d]);
    }
}

/* grid (T, Hkv, nsplit), block R warps.  Partial for (t, g, split, head i):
 * [hd] unnormalised output, then the running max and sum. */
template <int HD>
__global__ void __launch_bounds__(R * 32) attn_kernel(lc_attn_params p, const float *__restrict__ qbuf,
                                                      const uint16_t *__restrict__ kc, const uint16_t *__restrict__ vc,
                                                      int nsplit, float *__restrict__ part, const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    constexpr int PL = HD / 32; /* dims per lane */
    __shared__ float qs[R][HD];
    __shared__ float sc[R][KT];
    const int t = blockIdx.x, g = blockIdx.y, split = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int n = ctrl->pos + t + 1; /* keys 0..pos+t are visible */
    const int per = (n + nsplit - 1) / nsplit, k0 = split * per, k1 = min(n, k0 + per);
    const float scale = rsqrtf((float)HD);
    for (int i = threadIdx.x; i < R * HD; i += blockDim.x)
        qs[i / HD][i % HD] = qbuf[((size_t)t * p.H + g * R + i / HD) * HD + i % HD] * scale;
    float m = -INFINITY, l = 0.0f, acc[PL];
#pragma unroll
    for (int j = 0; j < PL; j++) acc[j] = 0.0f;
    __syncthreads();
    float qr[R][PL]; /* this lane's slice of every head's query, reused for every key */
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int j = 0; j < PL; j++) qr[i][j] = qs[i][lane * PL + j];
    for (int base = k0; base < k1; base += KT) {
        const int nk = min(KT, k1 - base);
        /* scores: warp w takes keys w, w+R, ...; lanes split the head dim */
        for (int kk = w; kk < nk; kk += R) {
            const uint16_t *kr = kc + ((size_t)(base + kk) * p.Hkv + g) * HD + lane * PL;
            float kf[PL];
#pragma unroll
            for (int j = 0; j < PL; j++) kf[j] = bf16_to_f32(kr[j]);
#pragma unroll
            for (int i = 0; i < R; i++) {
                float d = 0.0f;
#pragma unroll
                for (int j = 0; j < PL; j++) d = fmaf(qr[i][j], kf[j], d);
                d = warp_sum(d);
                if (lane == 0) sc[i][kk] = d;
            }
        }
        __syncthreads();
        /* warp w = query head g*R + w: online softmax over this tile, then P V */
        float tmax = -INFINITY;
        for (int kk = lane; kk < nk; kk += 32) tmax = fmaxf(tmax, sc[w][kk]);
        tmax = warp_max(tmax);
        const float mnew = fmaxf(m, tmax), corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int j = 0; j < PL; j++) acc[j] *= corr;
        for (int kk = 0; kk < nk; kk++) {
            const float pk = expf(sc[w][kk] - mnew);
            l += pk;
            const uint16_t *vr = vc + ((size_t)(base + kk) * p.Hkv + g) * HD + lane * PL;
#pragma unroll
            for (int j = 0; j < PL; j++) acc[j] = fmaf(pk, bf16_to_f32(vr[j]), acc[j]);
        }
        m = mnew;
        __syncthreads();
    }
    float *out = part + ((((size_t)t * p.Hkv + g) * nsplit + split) * R + w) * (HD + 2);
#pragma unroll
    for (int j = 0; j < PL; j++) out[lane * PL + j] = acc[j];
    if (lane == 0) out[HD] = m, out[HD + 1] = l;
}

/* grid (T, H), block hd threads */
__global__ void combine_kernel(lc_attn_params p, const float *__restrict__ part, int nsplit, const float *__restrict__ proj,
                               int ldp, float *__restrict__ out, const lc_ctrl *ctrl) {
    if (LC_STOPPED(ctrl)) return;
    const int t = blockIdx.x, h = blockIdx.y, d = threadIdx.x, hd = p.hd, g = h / R, i = h % R;
    const float *base = part + (((size_t)t * p.Hkv + g) * nsplit * R + i) * (hd + 2);
    const size_t stride = (size_t)R * (hd + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, base[s * stride + hd]);
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float *q = base + s * stride;
        if (q[hd] == -INFINITY) continue; /* an empty key range */
        const float f = expf(q[hd] - M);
        num = fmaf(f, q[d], num);
        den = fmaf(f, q[hd + 1], den);
    }
    const float gate = proj[(size_t)t * ldp + h * 2 * hd + hd + d];
    out[((size_t)t * p.H + h) * hd + d] = num / den * sigmoid_f(gate);
}

} // namespace

extern "C" cudaError_t lc_attn_prep(const lc_attn_params *p, const float *proj, int ldp, int T, float *qbuf,
                                    uint16_t *kc, uint16_t *vc, const lc_ctrl *ctrl, cudaStream_t st) {
    if (p->hd % 32 || p->hd > 1024 || p->rd > p->hd) return cudaErrorInvalidValue;
    prep_kernel<<<dim3(T, p->H + p->Hkv), p->hd, p->hd * sizeof(float), st>>>(*p, proj, ldp, qbuf, kc, vc, ctrl);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_attn(const lc_attn_params *p, const float *qbuf, const uint16_t *kc, const uint16_t *vc, int T,
                               int nsplit, float *part, const lc_ctrl *ctrl, cudaStream_t st) {
    if (p->H != R * p->Hkv) return cudaErrorInvalidValue;
    dim3 grid(T, p->Hkv, nsplit);
    switch (p->hd) {
    case 32: attn_kernel<32><<<grid, R * 32, 0, st>>>(*p, qbuf, kc, vc, nsplit, part, ctrl); break;
    case 64: attn_kernel<64><<<grid, R * 32, 0, st>>>(*p, qbuf, kc, vc, nsplit, part, ctrl); break;
    case 128: attn_kernel<128><<<grid, R * 32, 0, st>>>(*p, qbuf, kc, vc, nsplit, part, ctrl); break;
    case 256: attn_kernel<256><<<grid, R * 32, 0, st>>>(*p, qbuf, kc, vc, nsplit, part, ctrl); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t lc_attn_combine(const lc_attn_params *p, const float *part, int T, int nsplit, const float *proj,
                                       int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    combine_kernel<<<dim3(T, p->H), p->hd, 0, st>>>(*p, part, nsplit, proj, ldp, out, ctrl);
    return cudaGetLastError();
}
