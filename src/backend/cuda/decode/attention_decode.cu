/* attention_decode.cu — batch-1 decode attention on tensor cores, with the
 * q/k norms, partial RoPE and the KV append fused in (spec §5).
 *
 * One block per (kv head, key range); the R = 8 query heads sharing the kv
 * head are the N = 8 columns of mma.m16n8k16, so every K/V row is read once:
 *     S^T [keys x heads] = K [keys x hd] . Q^T          (A = K from smem)
 *     O^T [hd x heads]  += V^T [hd x keys] . P^T        (A = V^T by ldmatrix.trans)
 * Q and P are split into bf16 hi + lo parts (two MMAs each), which keeps the
 * products within ~2^-16 of fp32 — the KV cache itself is bf16 and exact.
 * Scores are kept in log2 units (Q is pre-scaled by log2(e)/sqrt(hd)).
 *
 * K/V stream through a STAGES-deep cp.async pipeline of 64-key chunks; the
 * first chunks are requested before the predecessor kernel finishes (only
 * the row at pos is new, and it is patched into shared memory).  Each of the
 * 4 warps scores 16 keys of a chunk, then owns hd/4 dims of P.V.
 *
 * The split of the context follows its length on the device: with n keys in
 * nch = ceil(n/64) chunks, each block takes ceil(nch/nsplit) chunks, so short
 * contexts use few blocks and long ones every SM (lc_attn_combine with
 * chunk = 64 derives the same count).  Partials use lc_attn's layout, with
 * the running max in natural-log units. */
#include <math.h>
#include <stdio.h>

#include "backend/cuda/common.cuh"

namespace {

constexpr int R = 8, NW = 4, CK = LC_ATTN_CHUNK; /* heads per kv head, warps, keys per chunk */

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
/* d += a . b  (m16n8k16, bf16 in, f32 accumulate) */
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#ifdef LC_ATTN_TIMING /* phase timestamps of two blocks, printed: a debugging aid */
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define TSTAMP(i) (tst[i] = gtime())
#else
#define TSTAMP(i) ((void)0)
#endif

/* PL consecutive floats, 16 bytes at a time when PL allows (p is then 16-byte aligned) */
template <int PL>
__device__ __forceinline__ void load_vec(const float *p, float (&x)[PL]) {
    if constexpr (PL % 4 == 0) {
#pragma unroll
        for (int j = 0; j < PL; j += 4) {
            const float4 a = *reinterpret_cast<const float4 *>(p + j);
            x[j] = a.x, x[j + 1] = a.y, x[j + 2] = a.z, x[j + 3] = a.w;
        }
    } else {
#pragma unroll
        for (int j = 0; j < PL; j++) x[j] = p[j];
    }
}

/* x ~= hi + lo with both bf16; lo carries the next 8 bits of mantissa. */
__device__ __forceinline__ void split_bf16(float x, uint16_t &hi, uint16_t &lo) {
    hi = f32_to_bf16(x);
    lo = f32_to_bf16(x - bf16_to_f32(hi));
}
__device__ __forceinline__ void pack_hi_lo(float a, float b, uint32_t &hi, uint32_t &lo) {
    uint16_t ah, al, bh, bl;
    split_bf16(a, ah, al);
    split_bf16(b, bh, bl);
    hi = (uint32_t)ah | (uint32_t)bh << 16; /* the lower k index in the lower half */
    lo = (uint32_t)al | (uint32_t)bl << 16;
}

template <int HD, int STAGES_>
struct cfg {
    static constexpr int G = HD / 8;                 /* 16-byte granules per K/V row */
    static constexpr int SWZ = (G < 8 ? G : 8) - 1;  /* granule j of row r sits at j ^ (r & SWZ) */
    static constexpr int STAGES = STAGES_;
    static constexpr int TILE = CK * HD;             /* bf16 per K (or V) chunk */
    static constexpr int KS = HD / 16;               /* k-steps of S = K Q^T */
    static constexpr int MT = HD / 16;               /* m-tiles of O^T */
    static constexpr int MPW = (MT + NW - 1) / NW;   /* m-tiles per warp */
    static constexpr int PSTRIDE = CK + 8;           /* P row stride (bf16): conflict-free B loads */
    static constexpr size_t SMEM = (size_t)STAGES * 2 * TILE * 2 + 2 * R * PSTRIDE * 2 + (size_t)R * HD * 4 +
                                   2 * HD * 2 + NW * R * 4 * 2 + 2 * HD * 4;
};

__device__ __forceinline__ int swz(int row, int gran, int mask) { return gran ^ (row & mask); }

/* grid (Hkv, nsplit), block NW warps, dynamic smem cfg<HD, STAGES>::SMEM. */
template <int HD, int STAGES>
__global__ void __launch_bounds__(NW * 32, 1)
    attn_decode_kernel(lc_attn_params p, const float *__restrict__ proj, uint16_t *__restrict__ kc,
                       uint16_t *__restrict__ vc, float *__restrict__ part, const lc_ctrl *ctrl) {
    using C = cfg<HD, STAGES>;
    extern __shared__ __align__(128) uint8_t smem[];
    uint16_t *kv = reinterpret_cast<uint16_t *>(smem);                  /* [STAGES][K tile, V tile] */
    uint16_t *ps_hi = kv + C::STAGES * 2 * C::TILE;                      /* [R][PSTRIDE] */
    uint16_t *ps_lo = ps_hi + R * C::PSTRIDE;
    float *qs = reinterpret_cast<float *>(ps_lo + R * C::PSTRIDE);      /* [R][HD] normed q */
    uint16_t *knew = reinterpret_cast<uint16_t *>(qs + R * HD);          /* [HD] new k row, then v row */
    float *red = reinterpret_cast<float *>(knew + 2 * HD);              /* [NW][R] maxima, then sums */
    float *kf = red + 2 * NW * R;                                        /* [HD] new k, normed */
    float *rcs = kf + HD, *rsn = rcs + HD / 2;                           /* RoPE table at pos */

#ifdef LC_ATTN_TIMING
    unsigned long long tst[6] = {0};
#endif
    TSTAMP(0);
    const int g = blockIdx.x, split = blockIdx.y, nsplit = gridDim.y;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, gq = lane >> 2, t4 = lane & 3;
    const int pos = ctrl->pos, n = pos + 1;
    const lc_kv_split sp = lc_kv_split_of(n, CK, nsplit);
    const int nch = sp.nch, c0 = split * sp.per, c1 = min(nch, c0 + sp.per);
    if (c0 >= c1) { /* the context is short: this range is empty and the combine skips it */
        lc_pdl_wait();
        lc_pdl_launch_dependents();
        return;
    }
    const size_t row_stride = (size_t)p.Hkv * HD; /* bf16 between consecutive positions */

    /* thread tid copies granules tid, tid + NW*32, ... of a chunk's K and V */
    auto load_chunk = [&](int c, int stage) {
        uint16_t *ks = kv + (size_t)stage * 2 * C::TILE, *vs = ks + C::TILE;
        const int base = c * CK;
        for (int i = tid; i < CK * C::G; i += NW * 32) {
            const int r = i / C::G, j = i % C::G, key = base + r;
            const bool ok = key < n;
            const size_t src = ((size_t)(ok ? key : 0) * p.Hkv + g) * HD + j * 8;
            const int dst = r * HD + swz(r, j, C::SWZ) * 8;
            cp_async16(smem_addr(ks + dst), kc + src, ok);
            cp_async16(smem_addr(vs + dst), vc + src, ok);
        }
    };
    /* the cache rows before pos are final: request them while the predecessor
     * drains, with the norm weights and the RoPE table at pos */
#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (c0 + s < c1) load_chunk(c0 + s, s);
        cp_commit();
    }
    constexpr int PL = HD / 32; /* contiguous values per lane in the norms */
    const int half = p.rd / 2;
    float qn[PL], kn[PL];
    load_vec<PL>(p.q_norm + lane * PL, qn);
    load_vec<PL>(p.k_norm + lane * PL, kn);
    if (tid < half) sincosf((float)pos * p.rope_inv[tid], &rsn[tid], &rcs[tid]);

    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) {
        cp_wait<0>();
        return;
    }
    TSTAMP(1);

    /* q of this kv head's R heads (and, in the block holding pos, the new k):
     * RMSNorm per head into qs / kf, then RoPE in place.  Warp w takes heads
     * w and w + NW (and warp 0 the new k); all loads are issued first. */
    const bool owns_pos = c1 == nch; /* this block's last chunk holds the new row */
    {
        constexpr int NH = (R + 1 + NW - 1) / NW;
        constexpr int VPT = (HD + NW * 32 - 1) / (NW * 32);
        const float *kv_src = proj + (size_t)p.H * 2 * HD;
        float x[NH][PL], v[VPT];
#pragma unroll
        for (int k = 0; k < NH; k++) {
            const int h = w + k * NW;
            if (h < R) load_vec<PL>(proj + (size_t)(g * R + h) * 2 * HD + lane * PL, x[k]);
            else if (h == R && owns_pos) load_vec<PL>(kv_src + g * HD + lane * PL, x[k]);
        }
#pragma unroll
        for (int i = 0; i < VPT; i++) {
            const int d = tid + i * NW * 32;
            if (owns_pos && d < HD) v[i] = kv_src[(p.Hkv + g) * HD + d];
        }
#pragma unroll
        for (int k = 0; k < NH; k++) {
            const int h = w + k * NW;
            if (h > R || (h == R && !owns_pos)) continue;
            float ss = 0.0f;
#pragma unroll
            for (int j = 0; j < PL; j++) ss += x[k][j] * x[k][j];
            const float rr = rsqrtf(warp_sum(ss) / (float)HD + p.eps);
            float *dst = h < R ? qs + h * HD : kf;
#pragma unroll
            for (int j = 0; j < PL; j++) dst[lane * PL + j] = x[k][j] * rr * (h < R ? qn[j] : kn[j]);
        }
#pragma unroll
        for (int i = 0; i < VPT; i++) { /* v is appended as it is */
            const int d = tid + i * NW * 32;
            if (owns_pos && d < HD) {
                const uint16_t vb = f32_to_bf16(v[i]);
                knew[HD + d] = vb;
                vc[(size_t)pos * row_stride + g * HD + d] = vb;
            }
        }
        __syncthreads();
        for (int i = tid; i < (R + 1) * half; i += NW * 32) {
            const int h = i / half, j = i % half;
            if (h == R && !owns_pos) break;
            float *y = h < R ? qs + h * HD : kf;
            const float a = y[j], b = y[j + half];
            y[j] = a * rcs[j] - b * rsn[j];
            y[j + half] = b * rcs[j] + a * rsn[j];
        }
        __syncthreads();
        if (owns_pos)
            for (int d = tid; d < HD; d += NW * 32) {
                const uint16_t kb = f32_to_bf16(kf[d]);
                knew[d] = kb;
                kc[(size_t)pos * row_stride + g * HD + d] = kb;
            }
    }

    /* Q^T fragments (B operand, n = head gq, k = dims), scaled to log2 units */
    uint32_t qh[C::KS][2], ql[C::KS][2];
    {
        const float scale = rsqrtf((float)HD) * 1.4426950408889634f;
        const float *q = qs + gq * HD;
#pragma unroll
        for (int ks = 0; ks < C::KS; ks++) {
            const int d = ks * 16 + 2 * t4;
            pack_hi_lo(q[d] * scale, q[d + 1] * scale, qh[ks][0], ql[ks][0]);
            pack_hi_lo(q[d + 8] * scale, q[d + 9] * scale, qh[ks][1], ql[ks][1]);
        }
    }

    TSTAMP(2);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* heads 2*t4, 2*t4 + 1 (log2 units) */
    float o[C::MPW][4];
#pragma unroll
    for (int i = 0; i < C::MPW; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

    for (int c = c0; c < c1; c++) {
        const int it = c - c0, stage = it % C::STAGES;
        cp_wait<C::STAGES - 2>();
        __syncthreads(); /* chunk c has landed; the stage refilled below is no longer read */
        if (c + C::STAGES - 1 < c1) load_chunk(c + C::STAGES - 1, (it + C::STAGES - 1) % C::STAGES);
        cp_commit();
        const uint16_t *ks = kv + (size_t)stage * 2 * C::TILE, *vs = ks + C::TILE;
        if (owns_pos && c == nch - 1) { /* the new row replaces what the cache held at pos */
            const int r = pos - c * CK;
            for (int j = tid; j < 2 * C::G; j += NW * 32) {
                const int jj = j % C::G;
                uint16_t *dst = (j < C::G ? (uint16_t *)ks : (uint16_t *)vs) + r * HD + swz(r, jj, C::SWZ) * 8;
                *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(knew + (j < C::G ? 0 : HD) + jj * 8);
            }
            __syncthreads();
        }

        /* S^T for keys 16w..16w+15 of the chunk: two accumulators per part to shorten the chains */
        float sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0};
        {
            const int key = 16 * w + (lane & 7) + ((lane >> 3) & 1) * 8, hi = lane >> 4;
#pragma unroll
            for (int kk = 0; kk < C::KS; kk++) {
                uint32_t a[4];
                ldsm_x4(smem_addr(ks + key * HD + swz(key, kk * 2 + hi, C::SWZ) * 8), a);
                if (kk & 1) {
                    mma(sb, a, qh[kk][0], qh[kk][1]);
                    mma(sa, a, ql[kk][0], ql[kk][1]);
                } else {
                    mma(sa, a, qh[kk][0], qh[kk][1]);
                    mma(sb, a, ql[kk][0], ql[kk][1]);
                }
            }
        }
        float s[4];
        const int kbase = c * CK + 16 * w + gq;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int key = kbase + (i >= 2 ? 8 : 0);
            s[i] = key < n ? sa[i] + sb[i] : -INFINITY;
        }
        /* chunk maxima per head: over the warp's keys, then over the warps */
        float mx0 = fmaxf(s[0], s[2]), mx1 = fmaxf(s[1], s[3]);
#pragma unroll
        for (int off = 4; off < 32; off <<= 1) {
            mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
            mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
        }
        if (gq == 0) red[w * R + 2 * t4] = mx0, red[w * R + 2 * t4 + 1] = mx1;
        __syncthreads();
        float mn[2], corr[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            float cm = red[2 * t4 + j];
#pragma unroll
            for (int ww = 1; ww < NW; ww++) cm = fmaxf(cm, red[ww * R + 2 * t4 + j]);
            mn[j] = fmaxf(m[j], cm);
            corr[j] = exp2f(m[j] - mn[j]);
            m[j] = mn[j];
        }
        float pr[4];
#pragma unroll
        for (int i = 0; i < 4; i++) pr[i] = exp2f(s[i] - mn[i & 1]);
        l[0] = l[0] * corr[0] + pr[0] + pr[2];
        l[1] = l[1] * corr[1] + pr[1] + pr[3];
        {
            const int k0 = 16 * w + gq;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint16_t h16, l16;
                split_bf16(pr[i], h16, l16);
                const int at = (2 * t4 + (i & 1)) * C::PSTRIDE + k0 + (i >= 2 ? 8 : 0);
                ps_hi[at] = h16, ps_lo[at] = l16;
            }
        }
#pragma unroll
        for (int i = 0; i < C::MPW; i++) o[i][0] *= corr[0], o[i][1] *= corr[1], o[i][2] *= corr[0], o[i][3] *= corr[1];
        __syncthreads();

        /* O^T += V^T P^T over the chunk's 64 keys, m-tiles w, w + NW, ... */
#pragma unroll
        for (int kk = 0; kk < CK / 16; kk++) {
            const uint32_t *ph = reinterpret_cast<const uint32_t *>(ps_hi + gq * C::PSTRIDE + kk * 16 + 2 * t4);
            const uint32_t *pl = reinterpret_cast<const uint32_t *>(ps_lo + gq * C::PSTRIDE + kk * 16 + 2 * t4);
            const uint32_t bh0 = ph[0], bh1 = ph[4], bl0 = pl[0], bl1 = pl[4];
            const int key = kk * 16 + (lane & 7) + (lane >> 4) * 8, hi = (lane >> 3) & 1;
#pragma unroll
            for (int i = 0; i < C::MPW; i++) {
                const int mt = w + i * NW;
                if (mt < C::MT) {
                    uint32_t a[4];
                    ldsm_x4_t(smem_addr(vs + key * HD + swz(key, mt * 2 + hi, C::SWZ) * 8), a);
                    mma(o[i], a, bh0, bh1);
                    mma(o[i], a, bl0, bl1);
                }
            }
        }
    }
    cp_wait<0>();
    TSTAMP(3);

    /* l: over the lanes sharing a head, then over the warps */
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) {
        l[0] += __shfl_xor_sync(0xffffffffu, l[0], off);
        l[1] += __shfl_xor_sync(0xffffffffu, l[1], off);
    }
    __syncthreads();
    if (gq == 0) red[NW * R + w * R + 2 * t4] = l[0], red[NW * R + w * R + 2 * t4 + 1] = l[1];
    __syncthreads();
    float *out = part + ((size_t)g * nsplit + split) * R * (HD + 2);
#pragma unroll
    for (int i = 0; i < C::MPW; i++) {
        const int mt = w + i * NW;
        if (mt < C::MT)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int head = 2 * t4 + (k & 1), d = mt * 16 + gq + (k >= 2 ? 8 : 0);
                out[head * (HD + 2) + d] = o[i][k];
            }
    }
    if (tid < R) {
        float lsum = 0.0f;
        for (int ww = 0; ww < NW; ww++) lsum += red[NW * R + ww * R + tid];
        out[tid * (HD + 2) + HD + 1] = lsum;
    }
    if (w == 0 && gq == 0) { /* every lane holds m of heads 2*t4, 2*t4+1; the combine wants natural-log units */
        out[(2 * t4) * (HD + 2) + HD] = m[0] * 0.6931471805599453f;
        out[(2 * t4 + 1) * (HD + 2) + HD] = m[1] * 0.6931471805599453f;
    }
#ifdef LC_ATTN_TIMING
    TSTAMP(4);
    if (tid == 0 && g == 0 && (split == 0 || owns_pos))
        printf("attn_decode split %d/%d chunks %d..%d: wait %llu prologue %llu loop %llu tail %llu ns\n", split, nsplit, c0, c1,
               tst[1] - tst[0], tst[2] - tst[1], tst[3] - tst[2], tst[4] - tst[3]);
#endif
}

/* Pipeline depth: 3 stages where shared memory allows (Hopper: 227 KB per
 * block), else 2 (A100: 163 KB); 0 when even 2 do not fit. */
template <int HD>
int stages_that_fit() {
    static int optin = -1;
    if (optin < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            optin = 0;
    }
    return cfg<HD, 3>::SMEM <= (size_t)optin ? 3 : cfg<HD, 2>::SMEM <= (size_t)optin ? 2 : 0;
}

template <int HD, int STAGES>
cudaError_t launch_stages(const lc_attn_params *p, const float *proj, uint16_t *kc, uint16_t *vc, int nsplit, float *part,
                          const lc_ctrl *ctrl, cudaStream_t st) {
    static bool attr_set = false; /* once per instance: the opt-in to large shared memory */
    if (!attr_set) {
        cudaError_t err = cudaFuncSetAttribute(attn_decode_kernel<HD, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)cfg<HD, STAGES>::SMEM);
        if (err) return err;
        attr_set = true;
    }
    return lc_launch(attn_decode_kernel<HD, STAGES>, dim3(p->Hkv, nsplit), dim3(NW * 32), cfg<HD, STAGES>::SMEM, st, *p,
                     proj, kc, vc, part, ctrl);
}

template <int HD>
cudaError_t launch(const lc_attn_params *p, const float *proj, uint16_t *kc, uint16_t *vc, int nsplit, float *part,
                   const lc_ctrl *ctrl, cudaStream_t st) {
    switch (stages_that_fit<HD>()) {
    case 3: return launch_stages<HD, 3>(p, proj, kc, vc, nsplit, part, ctrl, st);
    case 2: return launch_stages<HD, 2>(p, proj, kc, vc, nsplit, part, ctrl, st);
    default: return cudaErrorInvalidValue;
    }
}

int fits(int hd) {
    switch (hd) {
    case 32: return stages_that_fit<32>();
    case 64: return stages_that_fit<64>();
    case 128: return stages_that_fit<128>();
    case 256: return stages_that_fit<256>();
    default: return 0;
    }
}

} // namespace

extern "C" int lc_attn_decode_supported(const lc_attn_params *p) {
    return p->H == R * p->Hkv && p->rd <= p->hd && p->rd % 2 == 0 && fits(p->hd) > 0;
}

extern "C" cudaError_t lc_attn_decode(const lc_attn_params *p, const float *proj, uint16_t *kc, uint16_t *vc, int nsplit,
                                      float *part, const lc_ctrl *ctrl, cudaStream_t st) {
    if (!lc_attn_decode_supported(p) || nsplit < 1) return cudaErrorInvalidValue;
    switch (p->hd) {
    case 32: return launch<32>(p, proj, kc, vc, nsplit, part, ctrl, st);
    case 64: return launch<64>(p, proj, kc, vc, nsplit, part, ctrl, st);
    case 128: return launch<128>(p, proj, kc, vc, nsplit, part, ctrl, st);
    case 256: return launch<256>(p, proj, kc, vc, nsplit, part, ctrl, st);
    default: return cudaErrorInvalidValue;
    }
}
