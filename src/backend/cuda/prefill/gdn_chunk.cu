/* gdn_chunk.cu — Gated DeltaNet prefill (spec §6) in chunks of 64 tokens with
 * the WY/UT transform, on tensor cores.  Same inputs, outputs and state
 * semantics as lc_gdn (decode/gdn_step.cu, the token-sequential reference):
 * conv window double-buffered by ctrl->conv_flip (read buffer flip, write
 * buffer !flip), state [Hv, dk, dv] fp32 updated in place, out [T, Hv*dv].
 * Owns only the prefill form; decode keeps lc_gdn.
 *
 * Per value head h, chunk of tokens i = 0..63 with state S0 at its start
 * (G_i = inclusive cumulative log-decay, beta_i, k/q l2-normalised):
 *   A   = strictly lower  beta_i e^{G_i-G_j} k_i.k_j,   T = (I + A)^-1
 *   P   = lower incl diag e^{G_i-G_j} q_i.k_j
 *   Y   = beta V - diag(beta e^G) K S0         (the delta rule's errors vs S0)
 *   D   = T Y                                   (the delta rule's true errors)
 *   O   = diag(e^G) Q S0 + P D
 *   S   = e^{G_63} S0 + K^T diag(e^{G_63-G}) D
 * which is the recurrence of gdn_step.cu unrolled over the chunk.  Every
 * exponent is <= 0, and padded tokens (past T) get k = q = v = beta = 0 and
 * log-decay 0, so a partial chunk needs no further masking.
 *
 * Two kernels per pass of at most SEG = 1024 tokens (SEG bounds the scratch):
 *   gdn_prep_kernel   block per (chunk, key head), all chunks in parallel:
 *                     conv + SiLU + l2 norms of q and k, gates of both value
 *                     heads, K K^T and Q K^T, T by forward substitution, P;
 *                     writes q/k, T/P as bf16 hi/lo planes in the swizzled
 *                     shared-memory layout the next kernel copies verbatim.
 *   gdn_recur_kernel  4 blocks per value head, each owning 32 state columns
 *                     in registers, walking the chunks: the v conv of its
 *                     columns, the products above, and the gated RMSNorm,
 *                     whose row sums of squares the 4 blocks exchange either
 *                     as plain blocks of a cooperative launch, through
 *                     self-validating words in global memory (the default
 *                     where all 4 Hv blocks fit at once: 128 blocks in one
 *                     wave on 132 SMs), or as a cluster of 4 through
 *                     distributed shared memory (fallback: on an H200 only
 *                     30 of the 32 clusters fit at once, GPC granularity,
 *                     so that form runs in two waves).
 * Products run on mma.sync m16n8k16 bf16 with each fp32 operand split into
 * hi + lo bf16 (hi*hi + hi*lo + lo*hi, fp32 accumulate: ~16 bits of
 * mantissa; a single bf16/fp16 product loses 5-50x more, measured in a CPU
 * emulation of this algorithm).  Needs sm_90 (clusters). */
#include "backend/cuda/cluster.cuh"
#include "backend/cuda/common.cuh"


namespace {

constexpr int BT = 64, DK = 128, DV = 128, KC = 4; /* chunk, head dims, conv taps */
constexpr int NV = 32, NCB = DV / NV;             /* state columns per recurrence block; blocks per head (cluster) */
constexpr int SEG = 1024; /* tokens per pass: bounds the scratch (~32 MiB, L2-sized); prep grid = one wave */
constexpr int THREADS = 256;
constexpr int QK_PLANE = BT * DK;      /* bf16 elements of one q or k plane [64][128] */
constexpr int TP_PLANE = BT * BT;      /* bf16 elements of one T or P plane [64][64] */
constexpr int GT = 256;                /* floats of gates per (value head, chunk) */
constexpr int SPAD = NV + 8;           /* row stride (bf16) of the small [rows][32] planes: conflict-free ldmatrix */

/* Scratch, per pass (cstride = chunks per pass):
 *   qk [Hk][cstride][4][64*128] bf16: q hi, q lo, k hi, k lo (swizzled, swz128)
 *   tp [Hv][cstride][4][64*64]  bf16: T hi, T lo, P hi, P lo (swizzled, swz64)
 *   gt [Hv][cstride][256] fp32: beta[64], e^G[64], e^(G63-G)[64], e^G63, 0...
 *   xg [Hv][cstride][4 blocks][64] u64: row sums of o^2 as {seq, fp32} (plain
 *      form), cleared by gdn_prep_kernel; chunk c's words carry seq c + 1 */

/* Device helpers: sm_90 only (the kernels are empty in the sm_80 build the Makefile also makes). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
/* XOR swizzle of 16-byte groups by row: the 8 rows an ldmatrix reads hit 8 different bank groups. */
__device__ __forceinline__ int swz128(int r, int c) { return r * 128 + ((((c >> 3) ^ r) & 7) | (c >> 3 & 8)) * 8 + (c & 7); }
__device__ __forceinline__ int swz64(int r, int c) { return r * 64 + (((c >> 3) ^ r) & 7) * 8 + (c & 7); }

__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p))
                 : "memory");
}
__device__ __forceinline__ void mma_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* c += a b with a = ah + al, b = bh + bl (the lo*lo term is below fp32 rounding of the sum) */
__device__ __forceinline__ void mma3(float c[4], const uint32_t ah[4], const uint32_t al[4], uint32_t bh0, uint32_t bh1,
                                     uint32_t bl0, uint32_t bl1) {
    mma_bf16(c, al, bh0, bh1);
    mma_bf16(c, ah, bl0, bl1);
    mma_bf16(c, ah, bh0, bh1);
}

/* (x0, x1) -> bf16x2 hi and lo words, x0 in the low half (the lower column). */
__device__ __forceinline__ uint32_t pack_bf16x2(float x0, float x1) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
    return r;
}
__device__ __forceinline__ void split2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    hi = pack_bf16x2(x0, x1);
    lo = pack_bf16x2(x0 - __uint_as_float(hi << 16), x1 - __uint_as_float(hi & 0xffff0000u));
}

__device__ __forceinline__ void cp16(void *s, const void *g) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(s)), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }


/* The row sums of o^2 between the blocks of a value head without a cluster:
 * 64-bit words {seq, value} written and polled at gpu scope; a word is valid
 * when its seq matches, so no fence or flag is needed (single-copy atomic). */
__device__ __forceinline__ void st_xw(unsigned long long *p, float v, uint32_t seq) {
    const unsigned long long x = ((unsigned long long)seq << 32) | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(x) : "memory");
}
__device__ __forceinline__ unsigned long long ld_xw(const unsigned long long *p) {
    unsigned long long x;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(x) : "l"(p) : "memory");
    return x;
}

/* One reduce-scatter step of a butterfly sum across the warp: lanes keep half of
 * the array (the upper half when lane & o) and add the partner's copy of it. */
template <int HALF> __device__ __forceinline__ void rs_step(float *a, int lane, int o) {
    const bool up = lane & o;
#pragma unroll
    for (int k = 0; k < HALF; k++) {
        const float send = up ? a[k] : a[k + HALF], keep = up ? a[k + HALF] : a[k];
        a[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
}

#endif

/* ---- kernel 1: chunk-parallel part ------------------------------------------------------- */
constexpr int PREP_KK = 4 * QK_PLANE * 2;           /* byte offsets in dynamic shared memory */
constexpr int PREP_QK = PREP_KK + BT * 65 * 4;
constexpr int PREP_RED = PREP_QK + BT * 65 * 4;
constexpr int PREP_RS = PREP_RED + 8 * BT * 4;
constexpr int PREP_G = PREP_RS + 2 * BT * 4;
constexpr int PREP_B = PREP_G + 2 * BT * 4;
constexpr int PREP_WT = PREP_B + 2 * BT * 4;
constexpr int PREP_SMEM = PREP_WT + 16 * 4;
constexpr int PREP_AT = 0;                          /* A^T [2][64][68] fp32, over the dead q/k planes */
constexpr int PREP_TS = PREP_AT + 2 * BT * 68 * 4;  /* T [2][64][65] fp32, over the dead K K^T */
static_assert(PREP_TS + 2 * BT * 65 * 4 <= PREP_QK, "T must not overlap Q K^T, still read while T is built");

/* Block (c, j): tokens t0 = t_base + 64c .. t0 + n - 1 of key head j and its
 * value heads 2j, 2j+1.  Thread tid owns conv channel q[tid] (tid < 128) or
 * k[tid - 128] of the key head and its 64 tokens in registers. */
__global__ void __launch_bounds__(THREADS, 2)
    gdn_prep_kernel(lc_gdn_params p, const float *__restrict__ proj, int ldp, int T, int t_base, int ntok, int cstride,
                    float *__restrict__ conv_state, uint16_t *__restrict__ qkg, uint16_t *__restrict__ tpg,
                    float *__restrict__ gtg, unsigned long long *__restrict__ xg, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char sm[];
    uint16_t *planes = reinterpret_cast<uint16_t *>(sm);
    float *kks = reinterpret_cast<float *>(sm + PREP_KK), *qks = reinterpret_cast<float *>(sm + PREP_QK);
    float *red = reinterpret_cast<float *>(sm + PREP_RED), *rsm = reinterpret_cast<float *>(sm + PREP_RS);
    float *Gs = reinterpret_cast<float *>(sm + PREP_G), *bs = reinterpret_cast<float *>(sm + PREP_B);
    float *wtot = reinterpret_cast<float *>(sm + PREP_WT);
    float *At = reinterpret_cast<float *>(sm + PREP_AT), *Ts = reinterpret_cast<float *>(sm + PREP_TS);

    const int c = blockIdx.x, j = blockIdx.y, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int Kd = p.Hk * DK, C = 2 * Kd + p.Hv * DV, Vd = p.Hv * DV;
    const int t0 = t_base + c * BT, tend = t_base + ntok, n = min(BT, tend - t0);
    const bool isk = tid >= DK;
    const int cl = tid & (DK - 1), ch = (isk ? Kd : 0) + j * DK + cl;
    float wc[KC];
#pragma unroll
    for (int q = 0; q < KC; q++) wc[q] = p.conv_w[(size_t)ch * KC + q];
    lc_pdl_wait();
    if (LC_STOPPED(ctrl)) return;
    const int flip = ctrl->conv_flip;
    const float *rd = conv_state + (size_t)flip * (KC - 1) * C;
    /* clear this chunk's row-sum exchange words of value heads 2j, 2j+1 (seq 0 is
     * never valid; the previous pass's recurrence has completed: lc_pdl_wait) */
    {
        const int hh = tid >> 7, e = tid & 127;
        reinterpret_cast<uint4 *>(xg + ((size_t)(2 * j + hh) * cstride + c) * NCB * BT)[e] = make_uint4(0, 0, 0, 0);
    }

    /* conv + SiLU, exactly as gdn_step.cu: the window is x_{t-3..t-1}, from the
     * state buffer before the call's first token */
    float y[BT];
#pragma unroll
    for (int i = 0; i < BT; i++) y[i] = i < n ? proj[(size_t)(t0 + i) * ldp + ch] : 0.0f;
    float w0, w1, w2;
    {
        float hx[3];
#pragma unroll
        for (int m = 0; m < 3; m++) {
            const int tt = t0 - 3 + m;
            hx[m] = tt < 0 ? rd[(size_t)(tt + 3) * C + ch] : proj[(size_t)tt * ldp + ch];
        }
        w0 = hx[0], w1 = hx[1], w2 = hx[2];
    }
#pragma unroll
    for (int i = 0; i < BT; i++) {
        const float x = y[i];
        float acc = wc[KC - 1] * x;
        acc = fmaf(wc[0], w0, acc);
        acc = fmaf(wc[1], w1, acc);
        acc = fmaf(wc[2], w2, acc);
        w0 = w1, w1 = w2, w2 = x;
        y[i] = i < n ? silu_f(acc) : 0.0f;
    }

    /* per-token sums of squares over the warp's 32 channels: lane L ends with tokens 2L, 2L+1 */
    {
        float a[32];
        const bool up = lane & 16;
#pragma unroll
        for (int k = 0; k < 32; k++) {
            const float send = up ? y[k] : y[k + 32], keep = up ? y[k + 32] : y[k];
            a[k] = keep * keep + __shfl_xor_sync(0xffffffffu, send * send, 16);
        }
        rs_step<16>(a, lane, 8);
        rs_step<8>(a, lane, 4);
        rs_step<4>(a, lane, 2);
        rs_step<2>(a, lane, 1);
        red[w * BT + 2 * lane] = a[0];
        red[w * BT + 2 * lane + 1] = a[1];
    }
    __syncthreads();
    if (tid < 2 * BT) {
        const int grp = tid >> 6, i = tid & 63;
        float s = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; q++) s += red[(grp * 4 + q) * BT + i];
        rsm[tid] = rsqrtf(s + 1e-6f);
    }
    __syncthreads();
    {
        const float qscale = rsqrtf((float)DK);
        const float *rs = rsm + (isk ? BT : 0);
        uint16_t *ph = planes + (isk ? 2 : 0) * QK_PLANE, *pl = ph + QK_PLANE;
#pragma unroll
        for (int i = 0; i < BT; i++) {
            float v = y[i] * rs[i];
            if (!isk) v *= qscale;
            const uint16_t hb = f32_to_bf16(v);
            ph[swz128(i, cl)] = hb;
            pl[swz128(i, cl)] = f32_to_bf16(v - bf16_to_f32(hb));
        }
    }

    /* gates of value heads 2j, 2j+1 (threads 0..127: head tid>>6, token tid&63),
     * then the inclusive cumulative log-decay by warp scans.  Full-block barriers:
     * threads 128..255 have nothing to do before the planes go out and wait anyway,
     * and compute-sanitizer's racecheck counts a named 128-thread barrier as a
     * block barrier (it then reported the later K K^T and T reads as races). */
    const int ghh = tid >> 6, gi = tid & 63, gh = 2 * j + ghh;
    float gsum = 0.0f, gbeta = 0.0f;
    if (tid < 2 * BT) {
        float lg = 0.0f;
        if (gi < n) {
            const float *row = proj + (size_t)(t0 + gi) * ldp;
            gbeta = sigmoid_f(row[C + Vd + gh]);
            const float a = row[C + Vd + p.Hv + gh] + p.dt_bias[gh];
            const float sp = a > 20.0f ? a : log1pf(expf(a)); /* torch softplus, threshold 20 */
            lg = -expf(p.A_log[gh]) * sp;
        }
        gsum = lg;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, gsum, o);
            if (lane >= o) gsum += u;
        }
        if (lane == 31) wtot[w] = gsum;
    }
    __syncthreads();
    if (tid < 2 * BT) {
        if (w & 1) gsum += wtot[w - 1];
        Gs[tid] = gsum;
        bs[tid] = gbeta;
    }
    __syncthreads();
    if (tid < 2 * BT) {
        const float gl = Gs[ghh * BT + BT - 1];
        float *gt = gtg + ((size_t)gh * cstride + c) * GT;
        gt[gi] = gbeta;
        gt[BT + gi] = expf(gsum);
        gt[2 * BT + gi] = expf(gl - gsum);
        gt[3 * BT + gi] = gi == 0 ? expf(gl) : 0.0f;
    }
    __syncthreads();

    /* the q/k planes go out verbatim (the recurrence copies them into the same layout) */
    {
        const uint4 *src = reinterpret_cast<const uint4 *>(planes);
        uint4 *dst = reinterpret_cast<uint4 *>(qkg + ((size_t)j * cstride + c) * 4 * QK_PLANE);
#pragma unroll 4
        for (int e = tid; e < 4 * QK_PLANE / 8; e += THREADS) dst[e] = src[e];
    }

    /* K K^T (warps 0-3) and Q K^T (warps 4-7), rows 16mt..16mt+15, columns up to the diagonal */
    {
        const int mat = w >> 2, mt = w & 3, g = lane >> 2, t = lane & 3, mi = lane >> 3, rr = lane & 7;
        const uint16_t *Ah = planes + (mat ? 0 : 2) * QK_PLANE, *Bh = planes + 2 * QK_PLANE;
        float *dst = mat ? qks : kks;
        for (int np = 0; np <= mt; np++) {
            float acc[2][4] = {};
#pragma unroll
            for (int kk = 0; kk < DK / 16; kk++) {
                uint32_t ah[4], al[4], bh[4], bl[4];
                const int ao = swz128(16 * mt + (mi & 1) * 8 + rr, 16 * kk + (mi >> 1) * 8);
                const int bo = swz128(16 * np + (mi >> 1) * 8 + rr, 16 * kk + (mi & 1) * 8);
                ldsm4(ah, Ah + ao);
                ldsm4(al, Ah + QK_PLANE + ao);
                ldsm4(bh, Bh + bo);
                ldsm4(bl, Bh + QK_PLANE + bo);
                mma3(acc[0], ah, al, bh[0], bh[1], bl[0], bl[1]);
                mma3(acc[1], ah, al, bh[2], bh[3], bl[2], bl[3]);
            }
#pragma unroll
            for (int nn = 0; nn < 2; nn++) {
                const int col = 16 * np + 8 * nn + 2 * t, row = 16 * mt + g;
                dst[row * 65 + col] = acc[nn][0];
                dst[row * 65 + col + 1] = acc[nn][1];
                dst[(row + 8) * 65 + col] = acc[nn][2];
                dst[(row + 8) * 65 + col + 1] = acc[nn][3];
            }
        }
    }
    __syncthreads(); /* planes dead from here: A^T and T reuse them */

    /* A^T[hh][l][i] = A_il = beta_i e^{G_i - G_l} k_i.k_l for l < i */
    for (int e = tid; e < 2 * BT * BT; e += THREADS) {
        const int hh = e >> 12, l = (e >> 6) & 63, i = e & 63;
        float a = 0.0f;
        if (l < i) a = bs[hh * BT + i] * expf(Gs[hh * BT + i] - Gs[hh * BT + l]) * kks[i * 65 + l];
        At[(hh * BT + l) * 68 + i] = a;
    }
    __syncthreads();

    if (tid < 2 * BT) {
        /* T = (I + A)^-1, column jc of head hh: right-looking substitution,
         * x[i] -= A_il x[l] once x[l] is final (no barriers, A^T rows broadcast) */
        const int hh = tid >> 6, jc = tid & 63;
        const float *Ah = At + hh * BT * 68;
        float x[BT];
#pragma unroll
        for (int i = 0; i < BT; i++) x[i] = i == jc ? 1.0f : 0.0f;
#pragma unroll
        for (int l = 0; l < BT - 1; l++) {
            const float xl = x[l];
#pragma unroll
            for (int i4 = (l + 1) / 4; i4 < BT / 4; i4++) {
                const float4 a = *reinterpret_cast<const float4 *>(Ah + l * 68 + 4 * i4);
                if (4 * i4 + 0 > l) x[4 * i4 + 0] = fmaf(-a.x, xl, x[4 * i4 + 0]);
                if (4 * i4 + 1 > l) x[4 * i4 + 1] = fmaf(-a.y, xl, x[4 * i4 + 1]);
                if (4 * i4 + 2 > l) x[4 * i4 + 2] = fmaf(-a.z, xl, x[4 * i4 + 2]);
                if (4 * i4 + 3 > l) x[4 * i4 + 3] = fmaf(-a.w, xl, x[4 * i4 + 3]);
            }
        }
#pragma unroll
        for (int i = 0; i < BT; i++) Ts[(hh * BT + i) * 65 + jc] = x[i];
    } else {
        /* P (lower incl. diagonal) straight to the scratch, 8 columns per item */
        for (int e = tid - 2 * BT; e < 2 * BT * 8; e += THREADS - 2 * BT) {
            const int hh = e >> 9, i = (e >> 3) & 63, m = e & 7, h = 2 * j + hh;
            float v[8];
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const int jj = 8 * m + q;
                v[q] = jj <= i ? expf(Gs[hh * BT + i] - Gs[hh * BT + jj]) * qks[i * 65 + jj] : 0.0f;
            }
            uint4 hi, lo;
            split2(v[0], v[1], hi.x, lo.x);
            split2(v[2], v[3], hi.y, lo.y);
            split2(v[4], v[5], hi.z, lo.z);
            split2(v[6], v[7], hi.w, lo.w);
            uint16_t *d = tpg + ((size_t)h * cstride + c) * 4 * TP_PLANE + swz64(i, 8 * m);
            *reinterpret_cast<uint4 *>(d + 2 * TP_PLANE) = hi;
            *reinterpret_cast<uint4 *>(d + 3 * TP_PLANE) = lo;
        }
    }
    __syncthreads();
    for (int e = tid; e < 2 * BT * 8; e += THREADS) {
        const int hh = e >> 9, i = (e >> 3) & 63, m = e & 7, h = 2 * j + hh;
        const float *v = Ts + (hh * BT + i) * 65 + 8 * m;
        uint4 hi, lo;
        split2(v[0], v[1], hi.x, lo.x);
        split2(v[2], v[3], hi.y, lo.y);
        split2(v[4], v[5], hi.z, lo.z);
        split2(v[6], v[7], hi.w, lo.w);
        uint16_t *d = tpg + ((size_t)h * cstride + c) * 4 * TP_PLANE + swz64(i, 8 * m);
        *reinterpret_cast<uint4 *>(d) = hi;
        *reinterpret_cast<uint4 *>(d + TP_PLANE) = lo;
    }

    /* the new q/k window (x_{T-3..T-1}, older rows from the old window when T < 3),
     * by the block holding the call's last token; the value heads' own blocks of
     * the recurrence write the v channels */
    if (t0 + n == T) {
        float *wr = conv_state + (size_t)(1 - flip) * (KC - 1) * C;
#pragma unroll
        for (int r = 0; r < KC - 1; r++) {
            const int tt = T - (KC - 1) + r;
            wr[(size_t)r * C + ch] = tt < 0 ? rd[(size_t)(tt + KC - 1) * C + ch] : proj[(size_t)tt * ldp + ch];
        }
    }
    /* late trigger: the recurrence's blocks would only sit on SMs this grid still needs */
    lc_pdl_launch_dependents();
#endif
}

/* ---- kernel 2: the recurrence over chunks ------------------------------------------------ */
constexpr int RC_QK = 0;                                /* [2 stages][4 planes][64*128] bf16 */
constexpr int RC_TB = RC_QK + 2 * 4 * QK_PLANE * 2;     /* T hi, lo [64*64] bf16 */
constexpr int RC_PB = RC_TB + 2 * TP_PLANE * 2;         /* P hi, lo */
constexpr int RC_SB = RC_PB + 2 * TP_PLANE * 2;         /* S hi, lo [128][SPAD] bf16 */
constexpr int RC_YB = RC_SB + 2 * DK * SPAD * 2;        /* Y hi, lo [64][SPAD] */
constexpr int RC_DB = RC_YB + 2 * BT * SPAD * 2;        /* D hi, lo */
constexpr int RC_DTB = RC_DB + 2 * BT * SPAD * 2;       /* D scaled by e^{G63-G} hi, lo */
constexpr int RC_VS = RC_DTB + 2 * BT * SPAD * 2;       /* v after conv + SiLU [64][32] fp32 */
constexpr int RC_GT = RC_VS + BT * NV * 4;              /* gates [2 stages][256] fp32 */
constexpr int RC_PART = RC_GT + 2 * GT * 4;             /* row sums of o^2 [2][4 blocks][64] fp32 */
constexpr int RC_SMEM = RC_PART + 2 * NCB * BT * 4;
static_assert(RC_SMEM <= 232448, "recurrence shared memory exceeds 227 KB");
static_assert(NCB == 4 && THREADS == 256, "sums_xw and the exchange clearing in gdn_prep_kernel assume 4 blocks of 256 threads");


#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
/* cp.async of chunk c's q/k planes and gates into stage c & 1 */
__device__ __forceinline__ void issue_qk(unsigned char *sm, const uint16_t *qkg, const float *gtg, int j, int h,
                                         int cstride, int c) {
    const int tid = threadIdx.x;
    const uint16_t *src = qkg + ((size_t)j * cstride + c) * 4 * QK_PLANE;
    unsigned char *dst = sm + RC_QK + (c & 1) * 4 * QK_PLANE * 2;
#pragma unroll
    for (int k = 0; k < 4 * QK_PLANE * 2 / 16 / THREADS; k++) {
        const int e = k * THREADS + tid;
        cp16(dst + e * 16, src + e * 8);
    }
    if (tid < GT / 4) cp16(sm + RC_GT + (c & 1) * GT * 4 + tid * 16, gtg + ((size_t)h * cstride + c) * GT + tid * 4);
}
/* cp.async of chunk c's T (which = 0) or P (which = 1) planes */
__device__ __forceinline__ void issue_tp(unsigned char *sm, const uint16_t *tpg, int h, int cstride, int c, int which) {
    const int tid = threadIdx.x;
    const uint16_t *src = tpg + (((size_t)h * cstride + c) * 4 + 2 * which) * TP_PLANE;
    unsigned char *dst = sm + (which ? RC_PB : RC_TB);
#pragma unroll
    for (int k = 0; k < 2 * TP_PLANE * 2 / 16 / THREADS; k++) {
        const int e = k * THREADS + tid;
        cp16(dst + e * 16, src + e * 8);
    }
}

/* Raw v inputs x_{t-3} .. x_{t+7} of this thread's 8 rows (8 * (tid >> 5) ..) of the
 * chunk at t0, column channel ch; the window before the call's first token. */
__device__ __forceinline__ void vload(const float *proj, int ldp, const float *rd, int C, int ch, int t0, int tend,
                                      float xr[11]) {
    const int tb = t0 + 8 * (threadIdx.x >> 5) - (KC - 1);
#pragma unroll
    for (int m = 0; m < 11; m++) {
        const int tt = tb + m;
        xr[m] = tt < 0 ? rd[(size_t)(tt + KC - 1) * C + ch] : tt < tend ? proj[(size_t)tt * ldp + ch] : 0.0f;
    }
}
/* conv + SiLU in gdn_step.cu's order; padded rows are 0 */
__device__ __forceinline__ void vconv(const float wv[KC], const float xr[11], int t0, int tend, float *vs) {
    const int rg = threadIdx.x >> 5, col = threadIdx.x & 31;
#pragma unroll
    for (int m = 0; m < 8; m++) {
        const int r = 8 * rg + m;
        float acc = wv[KC - 1] * xr[m + 3];
        acc = fmaf(wv[0], xr[m], acc);
        acc = fmaf(wv[1], xr[m + 1], acc);
        acc = fmaf(wv[2], xr[m + 2], acc);
        vs[r * NV + col] = t0 + r < tend ? silu_f(acc) : 0.0f;
    }
}

/* S (accumulator layout: rows 16w+g, +8; columns 8nt+2t, +1) -> bf16 hi/lo planes [128][SPAD] */
__device__ __forceinline__ void store_s(uint16_t *SB, const float s[4][4]) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        const int r0 = 16 * w + g, col = 8 * nt + 2 * t;
        uint32_t hi, lo;
        split2(s[nt][0], s[nt][1], hi, lo);
        *reinterpret_cast<uint32_t *>(SB + r0 * SPAD + col) = hi;
        *reinterpret_cast<uint32_t *>(SB + DK * SPAD + r0 * SPAD + col) = lo;
        split2(s[nt][2], s[nt][3], hi, lo);
        *reinterpret_cast<uint32_t *>(SB + (r0 + 8) * SPAD + col) = hi;
        *reinterpret_cast<uint32_t *>(SB + DK * SPAD + (r0 + 8) * SPAD + col) = lo;
    }
}

/* z of the rows 16w+g, +8 and columns 8nt+2t, +1 (warps 0-3) of the chunk at t0 */
__device__ __forceinline__ void zload(const float *proj, int ldp, int zcol, int t0, int tend, float zr[4][4]) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int r0 = t0 + 16 * w + g, r1 = r0 + 8;
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        const int col = zcol + 8 * nt + 2 * t;
        zr[nt][0] = r0 < tend ? proj[(size_t)r0 * ldp + col] : 0.0f;
        zr[nt][1] = r0 < tend ? proj[(size_t)r0 * ldp + col + 1] : 0.0f;
        zr[nt][2] = r1 < tend ? proj[(size_t)r1 * ldp + col] : 0.0f;
        zr[nt][3] = r1 < tend ? proj[(size_t)r1 * ldp + col + 1] : 0.0f;
    }
}
/* The row sums of squares of rows 16w+g, +8 over all 4 column blocks: from
 * part [4][64] in shared memory (cluster form) ... */
__device__ __forceinline__ void sums_part(const float *part, float &s0, float &s1) {
    const int i0 = 16 * (threadIdx.x >> 5) + ((threadIdx.x & 31) >> 2), i1 = i0 + 8;
    s0 = part[i0] + part[BT + i0] + part[2 * BT + i0] + part[3 * BT + i0];
    s1 = part[i1] + part[BT + i1] + part[2 * BT + i1] + part[3 * BT + i1];
}
/* ... or from the exchange words xc [4][64] of the chunk (global form): x holds
 * words loaded earlier; those not yet valid (seq) are polled until they are */
__device__ __forceinline__ void xw_load(const unsigned long long *xc, unsigned long long x[8]) {
    const int i0 = 16 * (threadIdx.x >> 5) + ((threadIdx.x & 31) >> 2);
#pragma unroll
    for (int q = 0; q < NCB; q++) x[2 * q] = ld_xw(xc + q * BT + i0), x[2 * q + 1] = ld_xw(xc + q * BT + i0 + 8);
}
__device__ __forceinline__ void sums_xw(const unsigned long long *xc, unsigned long long x[8], uint32_t seq, float &s0,
                                        float &s1) {
    const int i0 = 16 * (threadIdx.x >> 5) + ((threadIdx.x & 31) >> 2);
#pragma unroll
    for (int q = 0; q < 2 * NCB; q++)
        while ((uint32_t)(x[q] >> 32) != seq) x[q] = ld_xw(xc + (q >> 1) * BT + i0 + 8 * (q & 1));
    s0 = __uint_as_float((uint32_t)x[0]) + __uint_as_float((uint32_t)x[2]) + __uint_as_float((uint32_t)x[4]) +
         __uint_as_float((uint32_t)x[6]);
    s1 = __uint_as_float((uint32_t)x[1]) + __uint_as_float((uint32_t)x[3]) + __uint_as_float((uint32_t)x[5]) +
         __uint_as_float((uint32_t)x[7]);
}
/* gated RMSNorm of o (same rows/columns as zload), given the rows' sums of squares s0, s1 */
__device__ __forceinline__ void finalize(float *out, int Vd, int ocol, int t0, int tend, const float o[4][4],
                                         const float zr[4][4], const float nw[4][2], float s0, float s1, float eps) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int i0 = 16 * w + g, i1 = i0 + 8;
    const float n0 = rsqrtf(s0 / (float)DV + eps), n1 = rsqrtf(s1 / (float)DV + eps);
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        const int col = ocol + 8 * nt + 2 * t;
        if (t0 + i0 < tend)
            *reinterpret_cast<float2 *>(out + (size_t)(t0 + i0) * Vd + col) =
                make_float2(o[nt][0] * n0 * nw[nt][0] * silu_f(zr[nt][0]), o[nt][1] * n0 * nw[nt][1] * silu_f(zr[nt][1]));
        if (t0 + i1 < tend)
            *reinterpret_cast<float2 *>(out + (size_t)(t0 + i1) * Vd + col) =
                make_float2(o[nt][2] * n1 * nw[nt][0] * silu_f(zr[nt][2]), o[nt][3] * n1 * nw[nt][1] * silu_f(zr[nt][3]));
    }
}

#endif

/* Cluster (4 blocks) per value head h; block cb owns state columns
 * [32cb, 32cb+32) in registers (warp w: rows 16w..16w+15) for the whole pass.
 * Per chunk, with barriers S1..S4:
 *   S1  A: X = [Q; K] S0 (warps 0-3 Q rows -> O, warps 4-7 K rows -> Y)
 *       finalize the previous chunk's output (its row sums arrived meanwhile)
 *   S2  B: D = T Y
 *   S3  C: S = e^{G63} S0 + K^T D~ (all warps), O += P D (warps 0-3);
 *       row sums of o^2 -> every block of the cluster; new S -> planes; next v
 *   S4  refill the buffers just freed.
 * cp.async groups, in issue order: qk0 T0 P0 qk1 | per chunk c: T(c+1) after
 * S3, P(c+1) qk(c+2) after S4 (empty groups past the end), so S1/S2/S3 wait
 * for all but the newest 3/2/1 groups. */
template <bool CL>
__global__ void __launch_bounds__(THREADS, 1)
    gdn_recur_kernel(lc_gdn_params p, const float *__restrict__ proj, int ldp, int T, int t_base, int ntok, int cstride,
                     float *__restrict__ conv_state, float *__restrict__ state, float *__restrict__ out,
                     const uint16_t *__restrict__ qkg, const uint16_t *__restrict__ tpg, const float *__restrict__ gtg,
                     unsigned long long *__restrict__ xg, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char sm[];
    uint16_t *SB = reinterpret_cast<uint16_t *>(sm + RC_SB), *YB = reinterpret_cast<uint16_t *>(sm + RC_YB);
    uint16_t *DB = reinterpret_cast<uint16_t *>(sm + RC_DB), *DTB = reinterpret_cast<uint16_t *>(sm + RC_DTB);
    const uint16_t *TB = reinterpret_cast<const uint16_t *>(sm + RC_TB), *PB = reinterpret_cast<const uint16_t *>(sm + RC_PB);
    float *VS = reinterpret_cast<float *>(sm + RC_VS), *PART = reinterpret_cast<float *>(sm + RC_PART);

    const int cb = blockIdx.x, h = blockIdx.y, j = h / 2, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int g = lane >> 2, t = lane & 3, mi = lane >> 3, rr = lane & 7;
    const int Kd = p.Hk * DK, C = 2 * Kd + p.Hv * DV, Vd = p.Hv * DV;
    const int tend = t_base + ntok, nch = (ntok + BT - 1) / BT, col0 = cb * NV;
    const int vch = 2 * Kd + h * DV + col0 + (tid & 31);
    float wv[KC];
#pragma unroll
    for (int q = 0; q < KC; q++) wv[q] = p.conv_w[(size_t)vch * KC + q];
    float nw[4][2];
#pragma unroll
    for (int nt = 0; nt < 4; nt++) nw[nt][0] = p.norm_w[col0 + 8 * nt + 2 * t], nw[nt][1] = p.norm_w[col0 + 8 * nt + 2 * t + 1];
    /* the state (last written by this layer's previous call, before the predecessor) */
    float *Sg = state + (size_t)h * DK * DV;
    float s[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        const int r0 = 16 * w + g, col = col0 + 8 * nt + 2 * t;
        const float2 a = *reinterpret_cast<const float2 *>(Sg + (size_t)r0 * DV + col);
        const float2 b = *reinterpret_cast<const float2 *>(Sg + (size_t)(r0 + 8) * DV + col);
        s[nt][0] = a.x, s[nt][1] = a.y, s[nt][2] = b.x, s[nt][3] = b.y;
    }
    lc_pdl_wait();
    if (LC_STOPPED(ctrl)) return;
    const int flip = ctrl->conv_flip;
    const float *rd = conv_state + (size_t)flip * (KC - 1) * C;
    /* peers must be running before their shared memory is written */
    if (CL) {
        cluster_arrive();
        cluster_wait();
    }
    unsigned long long *xh = xg + (size_t)h * cstride * NCB * BT; /* this head's exchange words [chunk][4][64] */

    issue_qk(sm, qkg, gtg, j, h, cstride, 0);
    cp_commit();
    issue_tp(sm, tpg, h, cstride, 0, 0);
    cp_commit();
    issue_tp(sm, tpg, h, cstride, 0, 1);
    cp_commit();
    if (nch > 1) issue_qk(sm, qkg, gtg, j, h, cstride, 1);
    cp_commit();
    {
        float xr[11];
        vload(proj, ldp, rd, C, vch, t_base, tend, xr);
        vconv(wv, xr, t_base, tend, VS);
    }
    store_s(SB, s);

    float op[4][4] = {}; /* the previous chunk's o (warps 0-3) until its row sums are in */
    for (int c = 0; c < nch; c++) {
        const int buf = c & 1, t0 = t_base + c * BT;
        const float *gts = reinterpret_cast<const float *>(sm + RC_GT) + buf * GT;
        const uint16_t *qk = reinterpret_cast<const uint16_t *>(sm + RC_QK) + buf * 4 * QK_PLANE;
        float xr[11];
        if (c + 1 < nch) vload(proj, ldp, rd, C, vch, t0 + BT, tend, xr);
        float zr[4][4];
        if (w < 4 && c > 0) zload(proj, ldp, C + h * DV + col0, t0 - BT, tend, zr);
        unsigned long long xw[8]; /* the previous chunk's row sums, polled after A */
        if (!CL && w < 4 && c > 0) xw_load(xh + (size_t)(c - 1) * NCB * BT, xw);
        cp_wait<3>();
        __syncthreads(); /* S1 */

        /* A: X = [Q; K] S0, warp w rows 16(w&3).. of Q (w < 4) or K */
        float x[4][4] = {};
        {
            const uint16_t *ap = qk + (w < 4 ? 0 : 2) * QK_PLANE;
            const int arow = (w & 3) * 16 + (mi & 1) * 8 + rr;
#pragma unroll
            for (int kk = 0; kk < DK / 16; kk++) {
                uint32_t ah[4], al[4];
                const int ao = swz128(arow, 16 * kk + (mi >> 1) * 8);
                ldsm4(ah, ap + ao);
                ldsm4(al, ap + QK_PLANE + ao);
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t bh[4], bl[4];
                    const int so = (16 * kk + (mi & 1) * 8 + rr) * SPAD + 16 * np + (mi >> 1) * 8;
                    ldsm4t(bh, SB + so);
                    ldsm4t(bl, SB + DK * SPAD + so);
                    mma3(x[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
                    mma3(x[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
                }
            }
        }
        float oc[4][4];
        {
            const int i0 = 16 * (w & 3) + g, i1 = i0 + 8;
            const float e0 = gts[BT + i0], e1 = gts[BT + i1];
            if (w >= 4) { /* Y = beta (v - e^G K S0) */
                const float b0 = gts[i0], b1 = gts[i1];
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    const int col = 8 * nt + 2 * t;
                    uint32_t hi, lo;
                    split2(b0 * (VS[i0 * NV + col] - e0 * x[nt][0]), b0 * (VS[i0 * NV + col + 1] - e0 * x[nt][1]), hi, lo);
                    *reinterpret_cast<uint32_t *>(YB + i0 * SPAD + col) = hi;
                    *reinterpret_cast<uint32_t *>(YB + BT * SPAD + i0 * SPAD + col) = lo;
                    split2(b1 * (VS[i1 * NV + col] - e1 * x[nt][2]), b1 * (VS[i1 * NV + col + 1] - e1 * x[nt][3]), hi, lo);
                    *reinterpret_cast<uint32_t *>(YB + i1 * SPAD + col) = hi;
                    *reinterpret_cast<uint32_t *>(YB + BT * SPAD + i1 * SPAD + col) = lo;
                }
            }
#pragma unroll
            for (int nt = 0; nt < 4; nt++) /* O starts as e^G Q S0 (used by warps 0-3 only) */
                oc[nt][0] = e0 * x[nt][0], oc[nt][1] = e0 * x[nt][1], oc[nt][2] = e1 * x[nt][2], oc[nt][3] = e1 * x[nt][3];
        }
        if (c > 0) { /* the previous chunk's row sums are in: its output */
            if (CL) cluster_wait();
            if (w < 4) {
                float s0, s1;
                if (CL) sums_part(PART + ((c - 1) & 1) * NCB * BT, s0, s1);
                else sums_xw(xh + (size_t)(c - 1) * NCB * BT, xw, (uint32_t)c, s0, s1);
                finalize(out, Vd, h * DV + col0, t0 - BT, tend, op, zr, nw, s0, s1, p.eps);
            }
        }
        cp_wait<2>();
        __syncthreads(); /* S2 */

        /* B: D = T Y, warp w rows 16(w&3).., columns 16(w>>2)..; T is lower triangular */
        {
            const int mt = w & 3, n0 = 16 * (w >> 2);
            float d[2][4] = {};
            for (int kk = 0; kk <= mt; kk++) {
                uint32_t ah[4], al[4], bh[4], bl[4];
                const int ao = swz64(16 * mt + (mi & 1) * 8 + rr, 16 * kk + (mi >> 1) * 8);
                const int yo = (16 * kk + (mi & 1) * 8 + rr) * SPAD + n0 + (mi >> 1) * 8;
                ldsm4(ah, TB + ao);
                ldsm4(al, TB + TP_PLANE + ao);
                ldsm4t(bh, YB + yo);
                ldsm4t(bl, YB + BT * SPAD + yo);
                mma3(d[0], ah, al, bh[0], bh[1], bl[0], bl[1]);
                mma3(d[1], ah, al, bh[2], bh[3], bl[2], bl[3]);
            }
            const int i0 = 16 * mt + g, i1 = i0 + 8;
            const float e0 = gts[2 * BT + i0], e1 = gts[2 * BT + i1];
#pragma unroll
            for (int nn = 0; nn < 2; nn++) {
                const int col = n0 + 8 * nn + 2 * t;
                uint32_t hi, lo;
                split2(d[nn][0], d[nn][1], hi, lo);
                *reinterpret_cast<uint32_t *>(DB + i0 * SPAD + col) = hi;
                *reinterpret_cast<uint32_t *>(DB + BT * SPAD + i0 * SPAD + col) = lo;
                split2(d[nn][2], d[nn][3], hi, lo);
                *reinterpret_cast<uint32_t *>(DB + i1 * SPAD + col) = hi;
                *reinterpret_cast<uint32_t *>(DB + BT * SPAD + i1 * SPAD + col) = lo;
                split2(e0 * d[nn][0], e0 * d[nn][1], hi, lo);
                *reinterpret_cast<uint32_t *>(DTB + i0 * SPAD + col) = hi;
                *reinterpret_cast<uint32_t *>(DTB + BT * SPAD + i0 * SPAD + col) = lo;
                split2(e1 * d[nn][2], e1 * d[nn][3], hi, lo);
                *reinterpret_cast<uint32_t *>(DTB + i1 * SPAD + col) = hi;
                *reinterpret_cast<uint32_t *>(DTB + BT * SPAD + i1 * SPAD + col) = lo;
            }
        }
        cp_wait<1>();
        __syncthreads(); /* S3: T free */
        if (c + 1 < nch) issue_tp(sm, tpg, h, cstride, c + 1, 0);
        cp_commit();

        /* C: S = e^{G63} S0 + K^T D~ (warp w: state rows 16w..), O += P D (warps 0-3) */
        {
            const float dl = gts[3 * BT];
#pragma unroll
            for (int nt = 0; nt < 4; nt++) s[nt][0] *= dl, s[nt][1] *= dl, s[nt][2] *= dl, s[nt][3] *= dl;
            const uint16_t *kp = qk + 2 * QK_PLANE;
#pragma unroll
            for (int kk = 0; kk < BT / 16; kk++) {
                uint32_t ah[4], al[4];
                const int ao = swz128(16 * kk + (mi >> 1) * 8 + rr, 16 * w + (mi & 1) * 8);
                ldsm4t(ah, kp + ao);
                ldsm4t(al, kp + QK_PLANE + ao);
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    uint32_t bh[4], bl[4];
                    const int yo = (16 * kk + (mi & 1) * 8 + rr) * SPAD + 16 * np + (mi >> 1) * 8;
                    ldsm4t(bh, DTB + yo);
                    ldsm4t(bl, DTB + BT * SPAD + yo);
                    mma3(s[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
                    mma3(s[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
                }
            }
            if (w < 4) {
                for (int kk = 0; kk <= w; kk++) { /* P is lower triangular */
                    uint32_t ah[4], al[4];
                    const int ao = swz64(16 * w + (mi & 1) * 8 + rr, 16 * kk + (mi >> 1) * 8);
                    ldsm4(ah, PB + ao);
                    ldsm4(al, PB + TP_PLANE + ao);
#pragma unroll
                    for (int np = 0; np < 2; np++) {
                        uint32_t bh[4], bl[4];
                        const int yo = (16 * kk + (mi & 1) * 8 + rr) * SPAD + 16 * np + (mi >> 1) * 8;
                        ldsm4t(bh, DB + yo);
                        ldsm4t(bl, DB + BT * SPAD + yo);
                        mma3(oc[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
                        mma3(oc[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
                    }
                }
                /* row sums of o^2 over this block's 32 columns; lane t sends both rows to block t */
                float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    r0 = fmaf(oc[nt][0], oc[nt][0], fmaf(oc[nt][1], oc[nt][1], r0));
                    r1 = fmaf(oc[nt][2], oc[nt][2], fmaf(oc[nt][3], oc[nt][3], r1));
                }
                r0 += __shfl_xor_sync(0xffffffffu, r0, 1);
                r0 += __shfl_xor_sync(0xffffffffu, r0, 2);
                r1 += __shfl_xor_sync(0xffffffffu, r1, 1);
                r1 += __shfl_xor_sync(0xffffffffu, r1, 2);
                if (CL) {
                    float *pp = PART + buf * NCB * BT + cb * BT + 16 * w + g;
                    st_cluster(pp, (uint32_t)t, r0);
                    st_cluster(pp + 8, (uint32_t)t, r1);
                } else if (t == 0) { /* chunk c's words carry seq c + 1 */
                    unsigned long long *xp = xh + ((size_t)c * NCB + cb) * BT + 16 * w + g;
                    st_xw(xp, r0, (uint32_t)c + 1);
                    st_xw(xp + 8, r1, (uint32_t)c + 1);
                }
#pragma unroll
                for (int nt = 0; nt < 4; nt++)
                    op[nt][0] = oc[nt][0], op[nt][1] = oc[nt][1], op[nt][2] = oc[nt][2], op[nt][3] = oc[nt][3];
            }
        }
        if (CL) cluster_arrive();
        store_s(SB, s);                                      /* S planes were last read before S2 */
        if (c + 1 < nch) vconv(wv, xr, t0 + BT, tend, VS); /* VS too */
        __syncthreads(); /* S4: P and this stage's q/k free */
        if (c + 1 < nch) issue_tp(sm, tpg, h, cstride, c + 1, 1);
        cp_commit();
        if (c + 2 < nch) issue_qk(sm, qkg, gtg, j, h, cstride, c + 2);
        cp_commit();
    }
    if (CL) cluster_wait();
    if (w < 4) {
        float zr[4][4];
        const int t0 = t_base + (nch - 1) * BT;
        unsigned long long xw[8];
        if (!CL) xw_load(xh + (size_t)(nch - 1) * NCB * BT, xw);
        zload(proj, ldp, C + h * DV + col0, t0, tend, zr);
        float s0, s1;
        if (CL) sums_part(PART + ((nch - 1) & 1) * NCB * BT, s0, s1);
        else sums_xw(xh + (size_t)(nch - 1) * NCB * BT, xw, (uint32_t)nch, s0, s1);
        finalize(out, Vd, h * DV + col0, t0, tend, op, zr, nw, s0, s1, p.eps);
    }
#pragma unroll
    for (int nt = 0; nt < 4; nt++) {
        const int r0 = 16 * w + g, col = col0 + 8 * nt + 2 * t;
        *reinterpret_cast<float2 *>(Sg + (size_t)r0 * DV + col) = make_float2(s[nt][0], s[nt][1]);
        *reinterpret_cast<float2 *>(Sg + (size_t)(r0 + 8) * DV + col) = make_float2(s[nt][2], s[nt][3]);
    }
    /* the new v window of this block's 32 channels (x_{T-3..T-1}) */
    if (tend == T && tid < (KC - 1) * NV) {
        const int r = tid >> 5, tt = T - (KC - 1) + r;
        float *wr = conv_state + (size_t)(1 - flip) * (KC - 1) * C;
        wr[(size_t)r * C + vch] = tt < 0 ? rd[(size_t)(tt + KC - 1) * C + vch] : proj[(size_t)tt * ldp + vch];
    }
    lc_pdl_launch_dependents();
#endif
}

/* cudaLaunchKernelEx with PDL (when pdl), a cluster of cx blocks along x (when
 * cx > 1) and the cooperative attribute (when coop: all blocks co-resident) */
template <typename... KArgs, typename... Args>
static cudaError_t launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, unsigned cx, bool coop,
                             bool pdl, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute attr[3];
    int n = 0;
    if (pdl) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cx > 1) {
        attr[n].id = cudaLaunchAttributeClusterDimension;
        attr[n].val.clusterDim.x = cx;
        attr[n].val.clusterDim.y = 1;
        attr[n++].val.clusterDim.z = 1;
    }
    if (coop) {
        attr[n].id = cudaLaunchAttributeCooperative;
        attr[n++].val.cooperative = 1;
    }
    cfg.attrs = attr;
    cfg.numAttrs = n;
    cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
    return err ? err : cudaGetLastError();
}

int chunks_per_pass(int T) { return T < SEG ? (T + BT - 1) / BT : SEG / BT; }

/* Recurrence form: 0 = clusters of 4 (row sums through distributed shared
 * memory), 1 = plain blocks, cooperative launch with PDL, 2 = the same without
 * PDL (row sums through global memory; needs all 4 Hv blocks co-resident, which
 * the cooperative launch guarantees).  Chosen per device on first use. */
int recur_mode[64];
bool recur_mode_set[64];
int last_mode = -1;
float *prof_ms = nullptr; /* diagnostic: when set, per-pass kernel times (prep, recurrence) */
int prof_n = 0;
int prof_heads = 0; /* diagnostic: when > 0, the recurrence runs only value heads 0..prof_heads-1 (timing only) */

} // namespace

extern "C" int lc_gdn_prefill_supported(const lc_gdn_params *p) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) return 0;
    return major >= 9 && p->K == KC && p->dk == DK && p->dv == DV && p->Hk >= 1 && p->Hv == 2 * p->Hk;
}

extern "C" size_t lc_gdn_prefill_scratch(const lc_gdn_params *p, int T) {
    if (p == NULL || T < 1) return 0;
    const size_t per_chunk = (size_t)p->Hk * 4 * QK_PLANE * 2 + (size_t)p->Hv * (4 * TP_PLANE * 2 + GT * 4 + NCB * BT * 8);
    return (size_t)chunks_per_pass(T) * per_chunk;
}

extern "C" cudaError_t lc_gdn_prefill(const lc_gdn_params *p, const float *proj, int ldp, int T, float *conv_state,
                                      float *state, float *out, float *scratch, size_t scratch_bytes, const lc_ctrl *ctrl,
                                      cudaStream_t st) {
    if (p == NULL || ctrl == NULL || T < 1 || p->K != KC || p->dk != DK || p->dv != DV || p->Hk < 1 ||
        p->Hv != 2 * p->Hk || scratch == NULL || scratch_bytes < lc_gdn_prefill_scratch(p, T) ||
        ((uintptr_t)scratch & 15) != 0)
        return cudaErrorInvalidValue;
    int dev = 0, major = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (!err) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err) return err;
    if (major < 9) return cudaErrorNotSupported; /* clusters: the caller keeps lc_gdn */
    err = cudaFuncSetAttribute(gdn_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PREP_SMEM);
    if (!err) err = cudaFuncSetAttribute(gdn_recur_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, RC_SMEM);
    if (!err) err = cudaFuncSetAttribute(gdn_recur_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, RC_SMEM);
    if (err) return err;
    const int slot = dev & 63;
    if (!recur_mode_set[slot]) { /* plain blocks when all of them fit at once and cooperative launches exist */
        int sms = 0, coop = 0, nb = 0;
        err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (!err) err = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
        if (!err) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, gdn_recur_kernel<false>, THREADS, RC_SMEM);
        if (err) return err;
        recur_mode[slot] = coop && nb * sms >= NCB * p->Hv ? 1 : 0;
        recur_mode_set[slot] = true;
    }
    const int cstride = chunks_per_pass(T);
    uint16_t *qk = reinterpret_cast<uint16_t *>(scratch);
    uint16_t *tp = qk + (size_t)p->Hk * cstride * 4 * QK_PLANE;
    float *gt = reinterpret_cast<float *>(tp + (size_t)p->Hv * cstride * 4 * TP_PLANE);
    unsigned long long *xg = reinterpret_cast<unsigned long long *>(gt + (size_t)p->Hv * cstride * GT);
    cudaEvent_t ev[3] = {};
    if (prof_ms)
        for (int e = 0; e < 3 && !err; e++) err = cudaEventCreate(&ev[e]);
    int pass = 0;
    for (int t_base = 0; t_base < T && !err; t_base += SEG, pass++) {
        const int ntok = T - t_base < SEG ? T - t_base : SEG, nch = (ntok + BT - 1) / BT;
        if (prof_ms) err = cudaEventRecord(ev[0], st);
        if (!err)
            err = lc_launch(gdn_prep_kernel, dim3(nch, p->Hk), dim3(THREADS), PREP_SMEM, st, *p, proj, ldp, T, t_base,
                            ntok, cstride, conv_state, qk, tp, gt, xg, ctrl);
        if (!err && prof_ms) err = cudaEventRecord(ev[1], st);
        const int hv = prof_heads > 0 && prof_heads < p->Hv ? prof_heads : p->Hv;
        while (!err) {
            const int mode = recur_mode[slot];
            if (mode == 0)
                err = launch_ex(gdn_recur_kernel<true>, dim3(NCB, hv), dim3(THREADS), RC_SMEM, NCB, false, true, st, *p,
                                proj, ldp, T, t_base, ntok, cstride, conv_state, state, out, (const uint16_t *)qk,
                                (const uint16_t *)tp, (const float *)gt, xg, ctrl);
            else
                err = launch_ex(gdn_recur_kernel<false>, dim3(NCB, hv), dim3(THREADS), RC_SMEM, 1, true, mode == 1,
                                st, *p, proj, ldp, T, t_base, ntok, cstride, conv_state, state, out,
                                (const uint16_t *)qk, (const uint16_t *)tp, (const float *)gt, xg, ctrl);
            last_mode = mode;
            if (!err || mode == 0) break;
            /* the cooperative launch was refused (a launch-time error, nothing queued): next form */
            (void)cudaGetLastError();
            recur_mode[slot] = mode == 1 ? 2 : 0;
            err = cudaSuccess;
        }
        if (!err && prof_ms) {
            err = cudaEventRecord(ev[2], st);
            if (!err) err = cudaEventSynchronize(ev[2]);
            float a = 0, b = 0;
            if (!err) err = cudaEventElapsedTime(&a, ev[0], ev[1]);
            if (!err) err = cudaEventElapsedTime(&b, ev[1], ev[2]);
            if (!err && 2 * pass + 1 < prof_n) prof_ms[2 * pass] = a, prof_ms[2 * pass + 1] = b;
        }
    }
    if (prof_ms)
        for (int e = 0; e < 3; e++)
            if (ev[e]) cudaEventDestroy(ev[e]);
    return err;
}

/* How many 4-block recurrence clusters fit on the device at once: fewer than Hv
 * (32) means a second wave and twice the time (cluster form only).  For the
 * workshop test. */
extern "C" int lc_gdn_prefill_max_clusters(void) {
    if (cudaFuncSetAttribute(gdn_recur_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, RC_SMEM)) return -1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(NCB, 32);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = RC_SMEM;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = NCB;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int n = 0;
    return cudaOccupancyMaxActiveClusters(&n, gdn_recur_kernel<true>, &cfg) ? -1 : n;
}

/* Diagnostics for the workshop test: the recurrence form the last call used
 * (see recur_mode; -1 before any call), how many recurrence blocks fit at once
 * in the plain form, and per-kernel timing (ms[2 pass] = prep, ms[2 pass + 1] =
 * recurrence of each pass, synchronising after every pass; NULL turns it off). */
extern "C" int lc_gdn_prefill_recur_mode(void) { return last_mode; }
extern "C" int lc_gdn_prefill_max_plain_blocks(void) {
    int dev = 0, sms = 0, nb = 0;
    if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
        cudaFuncSetAttribute(gdn_recur_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, RC_SMEM) ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, gdn_recur_kernel<false>, THREADS, RC_SMEM))
        return -1;
    return nb * sms;
}
extern "C" void lc_gdn_prefill_profile(float *ms, int n) { prof_ms = ms, prof_n = n; }
/* diagnostic: the recurrence of the next calls runs only value heads 0..nh-1
 * (their results stay right, the other heads are not computed); 0 = all */
extern "C" void lc_gdn_prefill_profile_heads(int nh) { prof_heads = nh; }
/* forces the recurrence form on the current device (0, 1, 2 as recur_mode; < 0: choose again) */
extern "C" void lc_gdn_prefill_force_mode(int mode) {
    int dev = 0;
    if (cudaGetDevice(&dev)) return;
    recur_mode[dev & 63] = mode < 0 ? 0 : mode;
    recur_mode_set[dev & 63] = mode >= 0;
}
