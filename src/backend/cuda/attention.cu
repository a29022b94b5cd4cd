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
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
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

/* PL consecutive bf16 values as floats, with 16-byte loads when PL allows. */
template <int PL>
__device__ __forceinline__ void load_bf16(const uint16_t *__restrict__ p, float (&out)[PL]) {
    if constexpr (PL % 8 == 0) {
#pragma unroll
        for (int j = 0; j < PL; j += 8) {
            const uint4 v = *reinterpret_cast<const uint4 *>(p + j);
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; i++) out[j + 2 * i] = __uint_as_float(w[i] << 16), out[j + 2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int j = 0; j < PL; j++) out[j] = bf16_to_f32(p[j]);
    }
}

/* Sum over the warp of v[0..8) (one partial per query head) in 9 shuffles
 * instead of 40: halves of the vector are exchanged at each step, so lane l
 * ends holding the total of head ((l >> 4) & 1) * 4 + ((l >> 3) & 1) * 2 + ((l >> 2) & 1). */
__device__ __forceinline__ float reduce8(const float v[R], int lane) {
    float w4[4], w2[2];
    const bool b16 = lane & 16, b8 = lane & 8, b4 = lane & 4;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float send = b16 ? v[i] : v[i + 4];
        w4[i] = (b16 ? v[i + 4] : v[i]) + __shfl_xor_sync(0xffffffffu, send, 16);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const float send = b8 ? w4[i] : w4[i + 2];
        w2[i] = (b8 ? w4[i + 2] : w4[i]) + __shfl_xor_sync(0xffffffffu, send, 8);
    }
    const float send = b4 ? w2[0] : w2[1];
    float z = (b4 ? w2[1] : w2[0]) + __shfl_xor_sync(0xffffffffu, send, 4);
    z += __shfl_xor_sync(0xffffffffu, z, 2);
    z += __shfl_xor_sync(0xffffffffu, z, 1);
    return z;
}

/* grid (T, Hkv, nsplit), block R warps.  Partial for (t, g, split, head i):
 * [hd] unnormalised output, then the running max and sum.  Loads are issued
 * KG keys at a time so several K/V rows are in flight per warp. */
template <int HD>
__global__ void __launch_bounds__(R * 32) attn_kernel(lc_attn_params p, const float *__restrict__ qbuf,
                                                      const uint16_t *__restrict__ kc, const uint16_t *__restrict__ vc,
                                                      int nsplit, float *__restrict__ part, const lc_ctrl *ctrl) {
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    constexpr int PL = HD / 32, KG = 4; /* dims per lane, keys per load group */
    __shared__ float qs[R][HD];
    __shared__ float sc[R][KT];
    const int t = blockIdx.x, g = blockIdx.y, split = blockIdx.z, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int n = ctrl->pos + t + 1; /* keys 0..pos+t are visible */
    const int per = (n + nsplit - 1) / nsplit, k0 = split * per, k1 = min(n, k0 + per);
    const float scale = rsqrtf((float)HD);
    const int my_head = ((lane >> 4) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 2) & 1);
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
        for (int k = w; k < nk; k += R * KG) {
            float kf[KG][PL];
#pragma unroll
            for (int u = 0; u < KG; u++) {
                const int kk = k + u * R;
                load_bf16<PL>(kc + ((size_t)(base + (kk < nk ? kk : k)) * p.Hkv + g) * HD + lane * PL, kf[u]);
            }
#pragma unroll
            for (int u = 0; u < KG; u++) {
                const int kk = k + u * R;
                float d[R];
#pragma unroll
                for (int i = 0; i < R; i++) {
                    d[i] = 0.0f;
#pragma unroll
                    for (int j = 0; j < PL; j++) d[i] = fmaf(qr[i][j], kf[u][j], d[i]);
                }
                const float s = reduce8(d, lane);
                if ((lane & 3) == 0 && kk < nk) sc[my_head][kk] = s;
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
        for (int kk = 0; kk < nk; kk += KG) {
            float vf[KG][PL], pk[KG];
#pragma unroll
            for (int u = 0; u < KG; u++) {
                const int key = kk + u < nk ? kk + u : kk;
                load_bf16<PL>(vc + ((size_t)(base + key) * p.Hkv + g) * HD + lane * PL, vf[u]);
                pk[u] = kk + u < nk ? expf(sc[w][kk + u] - mnew) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < KG; u++) {
                l += pk[u];
#pragma unroll
                for (int j = 0; j < PL; j++) acc[j] = fmaf(pk[u], vf[u][j], acc[j]);
            }
        }
        m = mnew;
        __syncthreads();
    }
    float *out = part + ((((size_t)t * p.Hkv + g) * nsplit + split) * R + w) * (HD + 2);
#pragma unroll
    for (int j = 0; j < PL; j++) out[lane * PL + j] = acc[j];
    if (lane == 0) out[HD] = m, out[HD + 1] = l;
}

/* grid (T, H, hd / DS), block of CG groups x DS threads (DS dims per block,
 * so a decode step has 4 blocks per head pulling partials): the split weights
 * f_s = exp(m_s - M) are computed once into shared memory, then each group
 * sums a share of the splits' partial outputs (independent loads, many in
 * flight) and the groups' sums are added. */
constexpr int CG = 4, DS_MAX = 64;

/* The block's maximum of the threads' M (the ranges' maxima), for every
 * thread: scratch [32] and red [1] in shared memory; two barriers. */
__device__ __forceinline__ float splits_max(float M, float *scratch, float *red) {
    const int tid = threadIdx.x;
    M = warp_max(M);
    if ((tid & 31) == 0) scratch[tid >> 5] = M;
    __syncthreads();
    if (tid == 0) {
        float m = -INFINITY;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) m = fmaxf(m, scratch[w]);
        red[0] = m;
    }
    __syncthreads();
    return red[0];
}

__global__ void combine_kernel(lc_attn_params p, const float *__restrict__ part, int nsplit, int chunk,
                               const float *__restrict__ proj, int ldp, float *__restrict__ out, const lc_ctrl *ctrl) {
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    /* ranges holding keys: lc_attn_decode's split of the pos + 1 keys */
    const int used = chunk > 0 ? lc_kv_split_of(ctrl->pos + 1, chunk, nsplit).used : nsplit;
    extern __shared__ float sm[]; /* f[nsplit], then partial sums [CG][DS] */
    __shared__ float scratch[32], red[2];
    const int t = blockIdx.x, h = blockIdx.y, hd = p.hd, g = h / R, i = h % R, tid = threadIdx.x;
    const float *base = part + (((size_t)t * p.Hkv + g) * nsplit * R + i) * (hd + 2);
    const size_t stride = (size_t)R * (hd + 2);
    float *f = sm, *acc = sm + nsplit;
    float M = -INFINITY;
    for (int s = tid; s < used; s += blockDim.x) M = fmaxf(M, base[s * stride + hd]);
    M = splits_max(M, scratch, red);
    float den = 0.0f;
    for (int s = tid; s < used; s += blockDim.x) {
        const float ms = base[s * stride + hd];
        const float fs = ms == -INFINITY ? 0.0f : expf(ms - M); /* an empty key range weighs nothing */
        f[s] = fs;
        den += fs * base[s * stride + hd + 1];
    }
    den = block_sum(den, scratch);
    const int DS = hd < DS_MAX ? hd : DS_MAX, grp = tid / DS, dl = tid % DS, d = blockIdx.z * DS + dl;
    float a = 0.0f;
#pragma unroll 8
    for (int s = grp; s < used; s += CG) a = fmaf(f[s], base[s * stride + d], a);
    acc[grp * DS + dl] = a;
    __syncthreads();
    if (grp == 0) {
        float num = acc[dl];
        for (int k = 1; k < CG; k++) num += acc[k * DS + dl];
        const float gate = proj[(size_t)t * ldp + h * 2 * hd + hd + d];
        out[((size_t)t * p.H + h) * hd + d] = num / den * sigmoid_f(gate);
    }
}

/* The decode combine (T = 1, the ranges lc_attn_decode filled) with its
 * loads in one trip.  combine_kernel goes through L2 about seven times in a
 * row (ctrl->pos, the maxima, the maxima and sums again,
 * the partials in three batches, the gate after the last barrier); here the
 * key count (ctrl->pos, written by the token choice before the step: the
 * stop flag's rule, common.cuh) and the gate (written by the in_proj, two
 * kernels back) are read before the wait, and after it every load of a
 * thread is issued before the first reduction: range tid's maximum and sum,
 * and the partials of the group's ranges (at most MAXS / CG a thread).  The
 * same sums in the same order as combine_kernel.  (H100, 2026-12-05:
 * decode 4K 698.1 against 661.2 tokens/s with xstage, gdnstore and this
 * together against none of them; docs/PERFORMANCE.md.) */
constexpr int MAXS = 128; /* key ranges the early form holds (the launcher checks nsplit) */
__global__ void combine_early_kernel(lc_attn_params p, const float *__restrict__ part, int nsplit, int chunk,
                                     const float *__restrict__ proj, int ldp, float *__restrict__ out, const lc_ctrl *ctrl) {
    const int h = blockIdx.y, hd = p.hd, g = h / R, i = h % R, tid = threadIdx.x;
    const int DS = hd < DS_MAX ? hd : DS_MAX, grp = tid / DS, dl = tid % DS, d = blockIdx.z * DS + dl;
    const int used = lc_kv_split_of(__ldcg(&ctrl->pos) + 1, chunk, nsplit).used;
    const float gate = grp == 0 ? __ldcg(proj + (size_t)h * 2 * hd + hd + d) : 0.0f;
    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) return;
    extern __shared__ float sm[]; /* f[nsplit], then partial sums [CG][DS] */
    __shared__ float scratch[32], red[2];
    const float *base = part + ((size_t)g * nsplit * R + i) * (hd + 2);
    const size_t stride = (size_t)R * (hd + 2);
    float *f = sm, *acc = sm + nsplit;
    float ms = -INFINITY, ls = 0.0f, v[MAXS / CG];
    if (tid < used) ms = base[tid * stride + hd], ls = base[tid * stride + hd + 1];
#pragma unroll
    for (int q = 0; q < MAXS / CG; q++) {
        const int s = grp + CG * q;
        v[q] = s < used ? base[s * stride + d] : 0.0f;
    }
    const float M = splits_max(ms, scratch, red);
    float den = 0.0f;
    if (tid < used) {
        const float fs = ms == -INFINITY ? 0.0f : expf(ms - M); /* an empty key range weighs nothing */
        f[tid] = fs;
        den += fs * ls;
    }
    den = block_sum(den, scratch); /* its barriers also publish f */
    float a = 0.0f;
#pragma unroll
    for (int q = 0; q < MAXS / CG; q++) {
        const int s = grp + CG * q;
        if (s < used) a = fmaf(f[s], v[q], a);
    }
    acc[grp * DS + dl] = a;
    __syncthreads();
    if (grp == 0) {
        float num = acc[dl];
        for (int k = 1; k < CG; k++) num += acc[k * DS + dl];
        out[(size_t)h * hd + d] = num / den * sigmoid_f(gate);
    }
}

} // namespace

extern "C" cudaError_t lc_attn_prep(const lc_attn_params *p, const float *proj, int ldp, int T, float *qbuf,
                                    uint16_t *kc, uint16_t *vc, const lc_ctrl *ctrl, cudaStream_t st) {
    if (p->hd % 32 || p->hd > 1024 || p->rd > p->hd) return cudaErrorInvalidValue;
    return lc_launch(prep_kernel, dim3(T, p->H + p->Hkv), dim3(p->hd), p->hd * sizeof(float), st, *p, proj, ldp, qbuf, kc,
                     vc, ctrl);
}

extern "C" cudaError_t lc_attn(const lc_attn_params *p, const float *qbuf, const uint16_t *kc, const uint16_t *vc, int T,
                               int nsplit, float *part, const lc_ctrl *ctrl, cudaStream_t st) {
    if (p->H != R * p->Hkv) return cudaErrorInvalidValue;
    dim3 grid(T, p->Hkv, nsplit);
    switch (p->hd) {
    case 32: return lc_launch(attn_kernel<32>, grid, dim3(R * 32), 0, st, *p, qbuf, kc, vc, nsplit, part, ctrl);
    case 64: return lc_launch(attn_kernel<64>, grid, dim3(R * 32), 0, st, *p, qbuf, kc, vc, nsplit, part, ctrl);
    case 128: return lc_launch(attn_kernel<128>, grid, dim3(R * 32), 0, st, *p, qbuf, kc, vc, nsplit, part, ctrl);
    case 256: return lc_launch(attn_kernel<256>, grid, dim3(R * 32), 0, st, *p, qbuf, kc, vc, nsplit, part, ctrl);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t lc_attn_combine(const lc_attn_params *p, const float *part, int T, int nsplit, int chunk,
                                       const float *proj, int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    const int ds = p->hd < DS_MAX ? p->hd : DS_MAX;
    if (p->hd % ds || (chunk > 0 && T != 1)) return cudaErrorInvalidValue;
    const size_t sm = (size_t)(nsplit + CG * ds) * sizeof(float);
    if (chunk > 0 && nsplit <= MAXS && nsplit <= ds * CG)
        return lc_launch(combine_early_kernel, dim3(1, p->H, p->hd / ds), dim3(ds * CG), sm, st, *p, part, nsplit, chunk, proj,
                         ldp, out, ctrl);
    return lc_launch(combine_kernel, dim3(T, p->H, p->hd / ds), dim3(ds * CG), sm, st, *p, part, nsplit, chunk, proj, ldp, out,
                     ctrl);
}
