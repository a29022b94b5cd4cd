/* attention_prefill.cu — causal prefill attention on tensor cores (spec §5),
 * for T >= 1 tokens at positions ctrl->pos .. ctrl->pos + T - 1 that may
 * follow earlier chunks in the cache.  Owns two kernels:
 *
 *   prep: q/k RMSNorm, partial RoPE and the KV append, with exactly the
 *     arithmetic of lc_attn_prep (the cache bytes are identical); q goes to
 *     the caller's qbuf ([T, H, hd] fp32 scratch, reused as bf16 qh [T, H, hd]
 *     then ql [T, H, hd]), pre-scaled by log2(e)/sqrt(hd), with ql the bf16
 *     remainder when Q is split (hi + lo carries ~16 bits of mantissa);
 *   attn: FA2-style causal GQA attention of the chunk over the cache
 *     [0, pos + T), then the sigmoid output gate (as lc_attn_combine).
 *
 * attn: one block per (16 tokens, kv head).  The 8 query heads of the kv head
 * are packed with the tokens into the M dimension (row r = token r/8, head
 * r%8: 128 rows), so each K/V tile is read once for all 8 heads.  8 warps:
 * warp w owns rows 32*(w>>1) .. +31 and half wn = w&1:
 *     S [32 rows x 32 keys]  = Q K^T over keys 32wn..32wn+31 of the 64-key tile
 *     O [32 rows x 128 dims] += P [32 x 64] V over dims 128wn..128wn+127
 * with mma.m16n8k16 (bf16 in, fp32 accumulate; operands by ldmatrix).  The
 * two warps sharing rows exchange their row maxima and their halves of P
 * through shared memory; each uses its own half of P from registers.  This
 * split keeps O at 128 registers a thread and does ~20 FLOP per byte read
 * from shared memory (16 rows x 64 keys x 256 dims a warp would do 14.5):
 * at hd 256 shared-memory bandwidth, not the tensor cores, bounds mma.sync.
 *
 * Q stays in shared memory for the block's life; K and V stream through a
 * ring of NSLOT half-tiles (K of tile j, then V of tile j, ...) filled by
 * cp.async, NSLOT - 1 half-tiles ahead.  Softmax is online in registers in
 * log2 units; only the tiles holding keys past the block's first token are
 * masked, tiles past its last token are never loaded.  Blocks are issued
 * heaviest (latest tokens) first.
 *
 * MODE (compile time): bit 0 splits Q into bf16 hi + lo (two MMAs for S),
 * bit 1 splits P the same way (two MMAs for P V).  MODE 3 keeps products
 * within ~2^-16 of fp32 (the KV cache itself is bf16): outputs within ~1e-5
 * of fp32 attention; MODE 1 (Q split) ~1e-3; MODE 0 (plain bf16, half the
 * MMAs of MODE 3) ~7e-3, on outputs of magnitude <= 1.  LC_ATTN_PREFILL_MODE
 * picks the one lc_attn_prefill uses.
 *
 * Q, K and V rows are 512-byte lines whose 16-byte granules are XOR-swizzled
 * by (row & 7) (P: 128-byte lines, the same), so every ldmatrix and cp.async
 * is free of bank conflicts.
 *
 * LILAC_ATTN_PREFILL=fa3 (read once) runs the attention on Hopper wgmma
 * instead (attention_prefill_wgmma.cu, FA3-style, MODE 3's precision; fa3np:
 * the same without its warpgroup ping-pong); fa2 or unset: this kernel.
 * The prep is the same for both.
 *
 * Not here: decode (attention_decode.cu), the SIMT path (attention.cu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/prefill/attention_math.cuh"

#ifndef LC_ATTN_PREFILL_MODE
#define LC_ATTN_PREFILL_MODE 3
#endif


namespace {

constexpr int R = 8;                 /* query heads per kv head */
constexpr int HD = 256;              /* head dim */
constexpr int TOK = 16;              /* tokens per block */
constexpr int BM = TOK * R;          /* rows per block */
constexpr int BN = 64;               /* keys per tile */
constexpr int NW = 8, NT = NW * 32;  /* warps, threads */
constexpr int ROWB = HD * 2;         /* bytes per Q/K/V row */
constexpr int HALF = BN * ROWB;      /* bytes per K (or V) tile: 32 KB */
constexpr int QB = BM * ROWB;        /* bytes per Q part: 64 KB */
constexpr int PB = BM * BN * 2;      /* bytes per P part: 16 KB */
constexpr float LOG2E = 1.4426950408889634f;

template <int MODE, int NSLOT>
struct pcfg {
    static constexpr bool QS = (MODE & 1) != 0, PS = (MODE & 2) != 0;
    static constexpr int Q_OFF = 0, P_OFF = Q_OFF + (QS ? 2 : 1) * QB, KV_OFF = P_OFF + (PS ? 2 : 1) * PB;
    static constexpr int RED_OFF = KV_OFF + NSLOT * HALF;
    static constexpr size_t SMEM = RED_OFF + 2 * BM * sizeof(float); /* + red [2][BM] */
};
constexpr size_t SMEM_MAX = 227 * 1024; /* Hopper's opt-in limit per block: deeper rings are not built */

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
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
/* barrier of the two warps sharing rows (ids 1..4; 0 is __syncthreads) */
__device__ __forceinline__ void pair_sync(int id) { asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory"); }

/* d += a . b  (m16n8k16, bf16 in, f32 accumulate) */
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}


/* ---- prep ---------------------------------------------------------------------------- */

/* grid (T, Hkv), block HD threads: the R q heads and the k/v head g of token t.
 * Thread d holds dim d of every row.  The sums of squares, the norm and the
 * RoPE are lc_attn_prep's expressions, in its order (a warp_sum per warp,
 * then the 8 warp partials in warp_sum's tree order), so the cache bytes and
 * the fp32 q match it exactly.  qh [T, H, HD] bf16 of q * log2(e)/sqrt(HD),
 * then (qsplit) ql [T, H, HD], the bf16 remainder. */
__global__ void __launch_bounds__(HD) prefill_prep_kernel(lc_attn_params p, const float *__restrict__ proj, int ldp, int T,
                                                          uint16_t *__restrict__ qh, int qsplit, uint16_t *__restrict__ kc,
                                                          uint16_t *__restrict__ vc, const lc_ctrl *ctrl) {
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    constexpr int NR = R + 1; /* rows: 8 q heads, then k */
    __shared__ float part[NR][HD / 32];
    __shared__ float xs[NR][HD];
    const int t = blockIdx.x, g = blockIdx.y, d = threadIdx.x, lane = d & 31, w = d >> 5, hd = p.hd;
    const int pos = ctrl->pos + t;
    const float *row = proj + (size_t)t * ldp;
    float y[NR];
#pragma unroll
    for (int h = 0; h < NR; h++) y[h] = h < R ? row[(g * R + h) * 2 * hd + d] : row[p.H * 2 * hd + g * hd + d];
    const float v = row[p.H * 2 * hd + p.Hkv * hd + g * hd + d];
#pragma unroll
    for (int h = 0; h < NR; h++) {
        const float s = warp_sum(y[h] * y[h]);
        if (lane == 0) part[h][w] = s;
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < NR; h++) {
        const float *q = part[h];
        const float ss = ((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7]));
        y[h] = y[h] * rsqrtf(ss / (float)hd + p.eps) * (h < R ? p.q_norm[d] : p.k_norm[d]);
        xs[h][d] = y[h];
    }
    __syncthreads();
    const int half = p.rd / 2;
    if (d < p.rd) {
        const int j = d < half ? d : d - half;
        float sn, cs;
        sincosf((float)pos * p.rope_inv[j], &sn, &cs);
#pragma unroll
        for (int h = 0; h < NR; h++) y[h] = d < half ? y[h] * cs - xs[h][d + half] * sn : y[h] * cs + xs[h][d - half] * sn;
    }
    const float qscale = rsqrtf((float)HD) * LOG2E;
    const size_t qlo = (size_t)T * p.H * HD;
#pragma unroll
    for (int h = 0; h < R; h++) {
        const float x = y[h] * qscale;
        const uint16_t hi = f32_to_bf16(x);
        const size_t at = ((size_t)t * p.H + g * R + h) * HD + d;
        qh[at] = hi;
        if (qsplit) qh[qlo + at] = f32_to_bf16(x - bf16_to_f32(hi));
    }
    const size_t at = ((size_t)pos * p.Hkv + g) * hd + d;
    kc[at] = f32_to_bf16(y[R]);
    vc[at] = f32_to_bf16(v);
}

/* ---- attention ----------------------------------------------------------------------- */

/* grid (ceil(T/TOK) * Hkv), block NT threads, dynamic smem pcfg::SMEM.
 * qb: qh [T, H, HD] (+ ql) bf16 from the prep; out [T, H*HD] fp32. */
template <int MODE, int NSLOT>
__global__ void __launch_bounds__(NT, 1)
    attn_prefill_kernel(lc_attn_params p, const uint16_t *__restrict__ qb, int T, const uint16_t *__restrict__ kc,
                        const uint16_t *__restrict__ vc, const float *__restrict__ proj, int ldp, float *__restrict__ out,
                        const lc_ctrl *ctrl) {
    using C = pcfg<MODE, NSLOT>;
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    extern __shared__ __align__(128) uint8_t smem[];
    const uint32_t s0 = smem_addr(smem);
    const uint32_t sQ = s0 + C::Q_OFF, sP = s0 + C::P_OFF, sKV = s0 + C::KV_OFF;
    float *red = reinterpret_cast<float *>(smem + C::RED_OFF); /* [2][BM]: per-half row maxima, then row sums */

    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, wm = w >> 1, wn = w & 1, gq = lane >> 2, t4 = lane & 3;
    const int Hkv = p.Hkv, nblk = (T + TOK - 1) / TOK;
    const int g = blockIdx.x % Hkv, t0 = (nblk - 1 - (int)blockIdx.x / Hkv) * TOK; /* latest tokens first */
    const int pos = ctrl->pos;
    const int nkeys = pos + min(t0 + TOK, T);        /* keys visible to the block's last token */
    const int ntiles = (nkeys + BN - 1) / BN;
    const int jfull = (pos + t0 + 1) / BN;           /* tiles before this one are visible to every row */
    const int lim0 = pos + t0 + 4 * wm;              /* last key of this thread's row i is lim0 + i */
    const size_t kv_stride = (size_t)Hkv * HD;       /* bf16 between positions */

    /* Q: warp w copies head w of tokens t0 + k into row 8k + w (granule = lane) */
    {
        const int sw = (lane ^ w) * 16;
#pragma unroll
        for (int k = 0; k < TOK; k++) {
            const int t = t0 + k;
            const bool ok = t < T;
            const size_t src = ((size_t)(ok ? t : 0) * p.H + g * R + w) * HD + lane * 8;
            const uint32_t dst = sQ + (8 * k + w) * ROWB + sw;
            cp_async16(dst, qb + src, ok);
            if constexpr (C::QS) cp_async16(dst + QB, qb + (size_t)T * p.H * HD + src, ok);
        }
    }
    /* half-tile i (K of tile i/2 if i is even, else V) into slot i % NSLOT; keys past nkeys are zero */
    auto issue = [&](int i) {
        if (i >= 2 * ntiles) return;
        const uint16_t *src = (i & 1) ? vc : kc;
        const uint32_t dst = sKV + (i % NSLOT) * HALF + w * ROWB + (lane ^ w) * 16;
        const int key0 = (i >> 1) * BN + w;
#pragma unroll
        for (int k = 0; k < BN / NW; k++) {
            const int key = key0 + 8 * k;
            const bool ok = key < nkeys;
            cp_async16(dst + 8 * k * ROWB, src + (size_t)(ok ? key : 0) * kv_stride + g * HD + lane * 8, ok);
        }
    };
#pragma unroll
    for (int i = 0; i < NSLOT - 1; i++) {
        issue(i);
        cp_commit();
    }
    /* waits for half-tile i, then refills the slot everyone has finished with */
    auto step = [&](int i) {
        cp_wait<NSLOT - 2>();
        __syncthreads();
        issue(i + NSLOT - 1);
        cp_commit();
    };

    /* per-thread ldmatrix offsets; a row's swizzle is (row & 7) = (lane & 7) in every operand */
    const int r7 = lane & 7, b3 = (lane >> 3) & 1, b4 = lane >> 4;
    uint32_t qa[4], ka[4], va[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        qa[c] = sQ + (32 * wm + (lane & 15)) * ROWB + ((2 * c + b4) ^ r7) * 16;
        ka[c] = (32 * wn + r7 + 8 * b4) * ROWB + ((2 * c + b3) ^ r7) * 16;
        va[c] = (r7 + 8 * b3) * ROWB + 16 * wn * 16 + ((2 * c + b4) ^ r7) * 16;
    }
    const int own_v = 32 * wn * ROWB, oth_v = 32 * (1 - wn) * ROWB; /* key halves of a V tile */
    uint32_t pr[2], pw[4];                                           /* partner's P (ldmatrix), own P (stores) */
#pragma unroll
    for (int s = 0; s < 2; s++) pr[s] = sP + (32 * wm + (lane & 15)) * BN * 2 + ((4 * (1 - wn) + 2 * s + b4) ^ r7) * 16;
#pragma unroll
    for (int nt = 0; nt < 4; nt++) pw[nt] = sP + (32 * wm + gq) * BN * 2 + ((4 * wn + nt) ^ gq) * 16 + t4 * 4;
    int rowi[4]; /* block row of this thread's row i = 2 mt + half: token 4 wm + i, head gq */
#pragma unroll
    for (int i = 0; i < 4; i++) rowi[i] = 32 * wm + 8 * i + gq;

    float o[2][16][4], m[4], l[4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 16; nt++) o[mt][nt][0] = o[mt][nt][1] = o[mt][nt][2] = o[mt][nt][3] = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) m[i] = -INFINITY, l[i] = 0.0f;

    for (int j = 0; j < ntiles; j++) {
        /* ---- S = Q K^T for keys 32wn .. 32wn+31 of tile j ---- */
        step(2 * j);
        const uint32_t ks = sKV + ((2 * j) % NSLOT) * HALF;
        float s[2][4][4];
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int c = kk & 3, off = (kk >> 2) * 128;
            uint32_t a[2][4], al[2][4], b[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                ldsm_x4(qa[c] + mt * 16 * ROWB + off, a[mt]);
                if constexpr (C::QS) ldsm_x4(qa[c] + QB + mt * 16 * ROWB + off, al[mt]);
            }
#pragma unroll
            for (int kp = 0; kp < 2; kp++) ldsm_x4(ks + ka[c] + kp * 16 * ROWB + off, b[kp]);
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int kp = 0; kp < 2; kp++) {
                    mma(s[mt][2 * kp], a[mt], b[kp][0], b[kp][1]);
                    mma(s[mt][2 * kp + 1], a[mt], b[kp][2], b[kp][3]);
                    if constexpr (C::QS) {
                        mma(s[mt][2 * kp], al[mt], b[kp][0], b[kp][1]);
                        mma(s[mt][2 * kp + 1], al[mt], b[kp][2], b[kp][3]);
                    }
                }
        }
        /* ---- causal mask (tiles reaching past the first token only) ---- */
        if (j >= jfull) {
            const int kb = j * BN + 32 * wn + 2 * t4;
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (kb + 8 * nt + (e & 1) > lim0 + 2 * mt + (e >> 1)) s[mt][nt][e] = -INFINITY;
        }
        /* ---- online softmax: row maxima over both halves ---- */
        float mx[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int mt = i >> 1, e = 2 * (i & 1);
            float x = fmaxf(s[mt][0][e], s[mt][0][e + 1]);
#pragma unroll
            for (int nt = 1; nt < 4; nt++) x = fmaxf(x, fmaxf(s[mt][nt][e], s[mt][nt][e + 1]));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
            mx[i] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
        }
        if (t4 == 0)
#pragma unroll
            for (int i = 0; i < 4; i++) red[wn * BM + rowi[i]] = mx[i];
        pair_sync(1 + wm);
        float base[4], corr[4];
        bool rescale = false;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float mn = fmaxf(m[i], fmaxf(mx[i], red[(1 - wn) * BM + rowi[i]]));
            base[i] = mn == -INFINITY ? 0.0f : mn; /* a row with no visible key yet keeps p = 0 */
            corr[i] = ex2(m[i] - base[i]);
            rescale |= corr[i] != 1.0f;
            m[i] = mn;
        }
        /* P = exp2(S - m): own half into registers as A fragments (k-step ks2 = keys
         * 16 ks2 .. of this half), and into shared memory for the partner */
        uint32_t ph[2][2][4], pl[2][2][4];
        float rs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int hf = 0; hf < 2; hf++) {
                    const int i = 2 * mt + hf;
                    const float x0 = ex2(s[mt][nt][2 * hf] - base[i]), x1 = ex2(s[mt][nt][2 * hf + 1] - base[i]);
                    const uint32_t h = pack_bf16(x0, x1);
                    uint32_t lo = 0;
                    if constexpr (C::PS) {
                        lo = pack_bf16(x0 - bf_lo(h), x1 - bf_hi(h));
                        rs[i] += x0 + x1;
                    } else {
                        rs[i] += bf_lo(h) + bf_hi(h); /* the weights P V uses, so they sum to l */
                    }
                    /* A fragment: a0/a1 = rows gq/gq+8 of keys 2t4.., a2/a3 = keys 8+2t4.. */
                    ph[mt][nt >> 1][(nt & 1) * 2 + hf] = h;
                    pl[mt][nt >> 1][(nt & 1) * 2 + hf] = lo;
                    const uint32_t at = pw[nt] + (16 * mt + 8 * hf) * BN * 2;
                    sts32(at, h);
                    if constexpr (C::PS) sts32(at + PB, lo);
                }
#pragma unroll
        for (int i = 0; i < 4; i++) l[i] = l[i] * corr[i] + rs[i];
        if (__any_sync(0xffffffffu, rescale))
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
                for (int nt = 0; nt < 16; nt++) {
                    o[mt][nt][0] *= corr[2 * mt], o[mt][nt][1] *= corr[2 * mt];
                    o[mt][nt][2] *= corr[2 * mt + 1], o[mt][nt][3] *= corr[2 * mt + 1];
                }

        /* ---- O += P V: own keys from registers, the partner's from shared memory ---- */
        step(2 * j + 1);
        const uint32_t vs = sKV + ((2 * j + 1) % NSLOT) * HALF;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const uint32_t vh = vs + (half ? oth_v : own_v);
#pragma unroll
            for (int ks2 = 0; ks2 < 2; ks2++) {
                uint32_t a[2][4], al[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    if (half) {
                        ldsm_x4(pr[ks2] + mt * 16 * BN * 2, a[mt]);
                        if constexpr (C::PS) ldsm_x4(pr[ks2] + PB + mt * 16 * BN * 2, al[mt]);
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; e++) a[mt][e] = ph[mt][ks2][e], al[mt][e] = pl[mt][ks2][e];
                    }
                }
#pragma unroll
                for (int dp = 0; dp < 8; dp++) {
                    uint32_t b[4];
                    ldsm_x4_t(vh + va[dp & 3] + ks2 * 16 * ROWB + (dp >> 2) * 128, b);
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        mma(o[mt][2 * dp], a[mt], b[0], b[1]);
                        mma(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                        if constexpr (C::PS) {
                            mma(o[mt][2 * dp], al[mt], b[0], b[1]);
                            mma(o[mt][2 * dp + 1], al[mt], b[2], b[3]);
                        }
                    }
                }
            }
        }
    }
    cp_wait<0>();

    /* ---- l over the row's lanes and both halves, then out = O / l * sigmoid(gate) ---- */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
    if (t4 == 0) /* the partner read this half's last maxima before the final step() */
#pragma unroll
        for (int i = 0; i < 4; i++) red[wn * BM + rowi[i]] = l[i];
    pair_sync(1 + wm);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int t = t0 + 4 * wm + i, h = g * R + gq, mt = i >> 1, e = 2 * (i & 1);
        if (t >= T) continue;
        const float den = l[i] + red[(1 - wn) * BM + rowi[i]];
        const float *gate = proj + (size_t)t * ldp + h * 2 * HD + HD;
        float *dst = out + ((size_t)t * p.H + h) * HD;
#pragma unroll
        for (int nt = 0; nt < 16; nt++) {
            const int d = 128 * wn + 8 * nt + 2 * t4;
            float2 r;
            r.x = o[mt][nt][e] / den * sigmoid_f(gate[d]);
            r.y = o[mt][nt][e + 1] / den * sigmoid_f(gate[d + 1]);
            *reinterpret_cast<float2 *>(dst + d) = r;
        }
    }
}

/* ---- launch ---------------------------------------------------------------------------- */

int optin_smem() {
    static int optin = -1;
    if (optin < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            optin = 0;
    }
    return optin;
}

/* Ring depth: 4 half-tiles (two tiles in flight) where shared memory allows,
 * else 2 (K of the next tile loads during P V, V during S); 0: does not fit. */
template <int MODE>
int slots_that_fit() {
    const size_t optin = (size_t)optin_smem();
    if (pcfg<MODE, 4>::SMEM <= SMEM_MAX && pcfg<MODE, 4>::SMEM <= optin) return 4;
    return pcfg<MODE, 2>::SMEM <= optin ? 2 : 0;
}

cudaError_t launch_prep(const lc_attn_params *p, const float *proj, int ldp, int T, uint16_t *qb, int qsplit,
                        uint16_t *kc, uint16_t *vc, const lc_ctrl *ctrl, cudaStream_t st) {
    return lc_launch(prefill_prep_kernel, dim3(T, p->Hkv), dim3(HD), 0, st, *p, proj, ldp, T, qb, qsplit, kc, vc, ctrl);
}

template <int MODE, int NSLOT>
cudaError_t launch_attn_slots(const lc_attn_params *p, const uint16_t *qb, int T, const uint16_t *kc, const uint16_t *vc,
                              const float *proj, int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    using C = pcfg<MODE, NSLOT>;
    static bool attr_set = false; /* once per instance: the opt-in to large shared memory */
    if (!attr_set) {
        cudaError_t err = cudaFuncSetAttribute(attn_prefill_kernel<MODE, NSLOT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               (int)C::SMEM);
        if (err) return err;
        attr_set = true;
    }
    const int nblk = (T + TOK - 1) / TOK;
    return lc_launch(attn_prefill_kernel<MODE, NSLOT>, dim3(nblk * p->Hkv), dim3(NT), C::SMEM, st, *p, qb, T, kc, vc, proj,
                     ldp, out, ctrl);
}

template <int MODE>
cudaError_t launch_attn(const lc_attn_params *p, const uint16_t *qb, int T, const uint16_t *kc, const uint16_t *vc,
                        const float *proj, int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    const int slots = slots_that_fit<MODE>();
    if constexpr (pcfg<MODE, 4>::SMEM <= SMEM_MAX)
        if (slots == 4) return launch_attn_slots<MODE, 4>(p, qb, T, kc, vc, proj, ldp, out, ctrl, st);
    if (slots == 2) return launch_attn_slots<MODE, 2>(p, qb, T, kc, vc, proj, ldp, out, ctrl, st);
    return cudaErrorInvalidValue;
}

template <int MODE>
int prefill_supported(const lc_attn_params *p) {
    return p->H == R * p->Hkv && p->hd == HD && p->rd <= p->hd && p->rd % 2 == 0 && slots_that_fit<MODE>() > 0;
}

/* LILAC_ATTN_PREFILL: fa2 = 0 (this file's mma.sync kernel), fa3np = 1 (the
 * wgmma kernel, the default), fa3 = 2 (the wgmma kernel with ping-pong).  On
 * the H200 (2026-12-01) fa3np measured 0.603 against fa2's 0.807 ms at pos 0
 * with 4,096 tokens, 6.735 against 9.339 at pos 28,672 (fa3 0.618 / 6.967). */
int wgmma_choice() {
    static int v = -1;
    if (v < 0) {
        const char *s = getenv("LILAC_ATTN_PREFILL");
        v = s && !strcmp(s, "fa2") ? 0 : s && !strcmp(s, "fa3") ? 2 : 1;
    }
    return v;
}

/* qbuf [T, H, hd] fp32 is reused as qh [T, H, hd] bf16 then ql [T, H, hd] bf16 (same bytes).
 * WG: -1 as LILAC_ATTN_PREFILL says (the wgmma kernel only for MODE 3, where it runs), 0 the
 * mma.sync kernel, 1 / 2 the wgmma one without / with ping-pong. */
template <int MODE>
cudaError_t prefill(const lc_attn_params *p, const float *proj, int ldp, int T, uint16_t *kc, uint16_t *vc, float *qbuf,
                    float *out, const lc_ctrl *ctrl, cudaStream_t st, int wg = -1) {
    if (!prefill_supported<MODE>(p) || T < 1) return cudaErrorInvalidValue;
    if (wg < 0) wg = MODE == 3 && lc_attn_prefill_wgmma_supported(p) ? wgmma_choice() : 0;
    uint16_t *qb = reinterpret_cast<uint16_t *>(qbuf);
    cudaError_t err = launch_prep(p, proj, ldp, T, qb, wg ? 1 : MODE & 1, kc, vc, ctrl, st);
    if (err) return err;
    if (wg) return lc_attn_prefill_wgmma(p, qb, T, kc, vc, proj, ldp, out, ctrl, wg == 2, st);
    return launch_attn<MODE>(p, qb, T, kc, vc, proj, ldp, out, ctrl, st);
}

} // namespace

extern "C" int lc_attn_prefill_supported(const lc_attn_params *p) { return prefill_supported<LC_ATTN_PREFILL_MODE>(p); }

extern "C" cudaError_t lc_attn_prefill(const lc_attn_params *p, const float *proj, int ldp, int T, uint16_t *kc, uint16_t *vc,
                                       float *qbuf, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    return prefill<LC_ATTN_PREFILL_MODE>(p, proj, ldp, T, kc, vc, qbuf, out, ctrl, st);
}
