/* gemm_mma.cu — quantised GEMMs for prefill on tensor cores: the dense
 * projections, and the grouped MoE expert GEMMs (gate/up with SwiGLU, down)
 * walking lc_moe_route's work items.
 *
 * The weights stay in MLX's layout (4- or 8-bit codes, bf16 scale and bias
 * per 64 inputs).  A block computes 128 weight rows x 64 tokens; its k loop
 * steps one quantisation group (64 inputs) at a time through a 3-stage
 * cp.async pipeline of raw codes and packed activations (lc_xpack).  Codes
 * become exact bf16 integers q in registers (one lop3 + one fma per pair),
 * the mma sums q x over the group in fp32, and the group's affine terms are
 * applied once per group in fp32:
 *     sum (s q + b) x  =  s * sum q x  +  b * sum x,
 * so the only rounding against the fp32 reference is that of x (hi + lo:
 * ~16 bits; SPLIT = 3 adds lo2 and is exact; SPLIT = 1 uses hi alone,
 * which measured far too coarse: mean KL 0.07 at the real width).
 *
 * Fragment order: the mma's A fragment takes elements (2c, 2c+1, 2c+8,
 * 2c+9) of a 16-column block for lane c of a quad; MLX's nibble pairing
 * (w & 0x000f000f) yields elements (c, c+4) and (8+c, 12+c) instead, so the
 * activations are stored permuted (pack.cu) and the sum is unchanged.
 *
 * Warps: 4 along the rows x 2 along the tokens; a warp owns 32 rows (two
 * m16 tiles) x 32 tokens (four n8 tiles), so each dequantised A fragment
 * feeds 4 (x SPLIT) mmas.  For gate/up the two m16 tiles are a gate tile and
 * the up tile of the same rows, so SwiGLU is applied in registers. */
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"

#include <stdlib.h>
#include <string.h>

namespace {

constexpr int BM = 128, BN = 64, BK = 64, THREADS = 256, STAGES = 3;
enum { PLAIN = 0, SWIGLU = 1 };

template <int BITS>
struct tile_geom {
    static constexpr int WROW = BITS * BK / 8 + 16;   /* bytes per code row in shared memory (padded: no bank conflicts) */
    static constexpr int W_BYTES = BM * WROW;
    static constexpr int X_BYTES = BN * BK * 2;       /* one bf16 plane */
    template <int SPLIT>
    __host__ __device__ static constexpr int stage_bytes() { return W_BYTES + SPLIT * X_BYTES + BN * 4; }
};

/* What a block works on: weight matrix (and its second half for SwiGLU),
 * its first row, the input rows and where the outputs go. */
struct qg_job {
    lc_qmat A, A2;            /* A2: the up projection (SWIGLU) */
    int mat;                  /* matrix index within A's stack */
    int r0;                   /* first output row */
    int nt;                   /* valid tokens (<= BN) */
    const int32_t *xrow;      /* input row of token i = xrow[i] (or x0 + i when NULL) */
    int x0, y0;               /* first input row / first output row (tokens) */
};

struct qg_args {
    lc_qmat A, A2, S, S2;     /* weights; S, S2: the shared expert (grouped) */
    lc_xpack x, y;            /* input pack; output pack (SWIGLU) */
    float *Y;                 /* output [., ldy] (PLAIN) */
    int ldy, accumulate, T, E;
    const int32_t *slot_tok, *offset, *tiles, *ntiles; /* grouped: lc_moe_route */
};

template <bool GROUPED, int MODE>
__device__ __forceinline__ bool job_of(const qg_args &a, qg_job &j) {
    const int rows_per_block = MODE == SWIGLU ? BM / 2 : BM;
    j.r0 = blockIdx.x * rows_per_block;
    if (!GROUPED) {
        j.A = a.A, j.A2 = a.A2, j.mat = 0;
        j.x0 = j.y0 = blockIdx.y * BN;
        j.nt = min(BN, a.T - j.x0);
        j.xrow = nullptr;
        return j.r0 < a.A.rows;
    }
    if ((int)blockIdx.y >= *a.ntiles) return false;
    const int item = a.tiles[blockIdx.y], e = item >> 20, p0 = item & 0xfffff;
    const bool sh = e == a.E;
    j.A = sh ? a.S : a.A, j.A2 = sh ? a.S2 : a.A2, j.mat = sh ? 0 : e;
    j.nt = min(BN, a.offset[e + 1] - p0);
    j.y0 = p0;
    /* gate/up gather the slots' tokens; down reads the slots' own rows */
    j.xrow = MODE == SWIGLU ? a.slot_tok + p0 : nullptr;
    j.x0 = p0;
    return j.r0 < j.A.rows;
}

template <int BITS, int SPLIT, int MODE, bool GROUPED>
__global__ void __launch_bounds__(THREADS, 2) qgemm_kernel(qg_args a) {
    using G = tile_geom<BITS>;
    constexpr int SB = G::template stage_bytes<SPLIT>();
    extern __shared__ __align__(16) uint8_t smem[];
    qg_job j;
    if (!job_of<GROUPED, MODE>(a, j)) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
    const int g = lane >> 2, c = lane & 3;
    const int K = j.A.cols, NG = K / BK;
    const int wpr = K * BITS / 32;                     /* code words per row */
    uint16_t *ss = reinterpret_cast<uint16_t *>(smem + STAGES * SB); /* [BM][NG] scales */
    uint16_t *bs = ss + BM * NG;                                     /* [BM][NG] biases */

    /* Row i of the block's weight tile: gate rows then up rows for SWIGLU. */
    auto wrow = [&](int i, const uint32_t *&w, size_t &sb, bool &ok) {
        const lc_qmat &M = (MODE == SWIGLU && i >= BM / 2) ? j.A2 : j.A;
        const int r = j.r0 + (MODE == SWIGLU ? (i & (BM / 2 - 1)) : i);
        ok = r < M.rows;
        const int rr = ok ? r : 0;
        w = qrow_w(M, j.mat, rr);
        sb = qrow_sb(M, j.mat, rr);
        (void)M;
    };
    /* scales and biases of every group for the block's rows, once */
    for (int i = tid; i < BM * NG; i += THREADS) {
        const int r = i / NG, gi = i % NG;
        const uint32_t *w;
        size_t sb;
        bool ok;
        wrow(r, w, sb, ok);
        const lc_qmat &M = (MODE == SWIGLU && r >= BM / 2) ? j.A2 : j.A;
        ss[i] = ok ? M.s[sb + gi] : 0;
        bs[i] = ok ? M.b[sb + gi] : 0;
    }

    /* per-thread load assignments */
    auto load_stage = [&](int kg, int slot) {
        uint8_t *st = smem + slot * SB;
        /* codes: BM rows x (BITS * 8) bytes, in 16-byte chunks */
        constexpr int CPR = BITS * BK / 8 / 16; /* chunks per row: 2 (4-bit) or 4 (8-bit) */
        for (int i = tid; i < BM * CPR; i += THREADS) {
            const int r = i / CPR, ch = i % CPR;
            const uint32_t *w;
            size_t sb;
            bool ok;
            wrow(r, w, sb, ok);
            cp_async16(st + r * G::WROW + ch * 16, w + kg * (BK * BITS / 32) + ch * 4, ok);
        }
        /* activations: BN rows x 128 bytes per plane, chunks swizzled by row */
        uint8_t *xs = st + G::W_BYTES;
        for (int i = tid; i < SPLIT * BN * 8; i += THREADS) {
            const int pl = i / (BN * 8), r = (i / 8) % BN, ch = i % 8;
            const bool ok = r < j.nt;
            const int xr = ok ? (j.xrow ? j.xrow[r] : j.x0 + r) : 0;
            const uint16_t *plane = pl == 0 ? a.x.hi : pl == 1 ? a.x.lo : a.x.lo2;
            const uint16_t *src = plane + (size_t)xr * a.x.ld + kg * BK + ch * 8;
            cp_async16(xs + pl * G::X_BYTES + r * 128 + ((ch ^ (r & 7)) * 16), src, ok);
        }
        float *gss = reinterpret_cast<float *>(st + G::W_BYTES + SPLIT * G::X_BYTES);
        if (tid < BN) {
            const bool ok = tid < j.nt;
            const int xr = ok ? (j.xrow ? j.xrow[tid] : j.x0 + tid) : 0;
            cp_async4(gss + tid, a.x.gs + (size_t)xr * (a.x.ld / 64) + kg, ok);
        }
    };

    (void)wpr;
    float acc[2][4][4];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int n = 0; n < 4; n++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[m][n][q] = 0.0f;

    /* smem row of this warp's m16 tile m */
    const int mrow0 = MODE == SWIGLU ? 16 * wm : 32 * wm;
    const int mstep = MODE == SWIGLU ? BM / 2 : 16;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < NG) load_stage(s, s);
        cp_async_commit();
    }
    for (int kg = 0; kg < NG; kg++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kg + STAGES - 1 < NG) load_stage(kg + STAGES - 1, (kg + STAGES - 1) % STAGES);
        cp_async_commit();
        const uint8_t *st = smem + (kg % STAGES) * SB;
        const uint8_t *xs = st + G::W_BYTES;
        const float *gss = reinterpret_cast<const float *>(st + G::W_BYTES + SPLIT * G::X_BYTES);
        float part[2][4][4];
#pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            uint32_t af[2][4];
#pragma unroll
            for (int m = 0; m < 2; m++) {
                const int ra = mrow0 + m * mstep + g;
                if (BITS == 4) {
                    const uint2 wa = *reinterpret_cast<const uint2 *>(st + ra * G::WROW + ks * 8);
                    const uint2 wb = *reinterpret_cast<const uint2 *>(st + (ra + 8) * G::WROW + ks * 8);
                    af[m][0] = q4x2_bf16(wa.x >> (4 * c));
                    af[m][1] = q4x2_bf16(wb.x >> (4 * c));
                    af[m][2] = q4x2_bf16(wa.y >> (4 * c));
                    af[m][3] = q4x2_bf16(wb.y >> (4 * c));
                } else {
                    const uint4 wa = *reinterpret_cast<const uint4 *>(st + ra * G::WROW + ks * 16);
                    const uint4 wb = *reinterpret_cast<const uint4 *>(st + (ra + 8) * G::WROW + ks * 16);
                    af[m][0] = q8x2_bf16(wa.x >> (8 * c), wa.y >> (8 * c));
                    af[m][1] = q8x2_bf16(wb.x >> (8 * c), wb.y >> (8 * c));
                    af[m][2] = q8x2_bf16(wa.z >> (8 * c), wa.w >> (8 * c));
                    af[m][3] = q8x2_bf16(wb.z >> (8 * c), wb.w >> (8 * c));
                }
            }
#pragma unroll
            for (int pl = 0; pl < SPLIT; pl++)
#pragma unroll
                for (int np = 0; np < 2; np++) {
                    const int r = wn * 32 + np * 16 + ((lane >> 4) << 3) + (lane & 7);
                    const int ch = ks * 2 + ((lane >> 3) & 1);
                    uint32_t b[4];
                    ldmatrix_x4(b, xs + pl * G::X_BYTES + r * 128 + ((ch ^ (r & 7)) * 16));
#pragma unroll
                    for (int m = 0; m < 2; m++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            float(&d)[4] = part[m][np * 2 + h];
                            if (ks == 0 && pl == 0) {
                                const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                                mma_16816(d, af[m], b[2 * h], b[2 * h + 1], z);
                            } else {
                                mma_16816(d, af[m], b[2 * h], b[2 * h + 1], d);
                            }
                        }
                }
        }
        /* the group's affine terms: acc += s * part + b * sum(x) */
#pragma unroll
        for (int m = 0; m < 2; m++) {
            const int ra = mrow0 + m * mstep + g;
            /* the mma summed centred codes (q - centre): b + centre * s pairs with sum x */
            constexpr float CTR = BITS == 4 ? LC_Q4_CENTER : LC_Q8_CENTER;
            const float sa = bf16_to_f32(ss[ra * NG + kg]), sb = bf16_to_f32(ss[(ra + 8) * NG + kg]);
            const float ba = fmaf(CTR, sa, bf16_to_f32(bs[ra * NG + kg])), bb = fmaf(CTR, sb, bf16_to_f32(bs[(ra + 8) * NG + kg]));
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const float2 gx = *reinterpret_cast<const float2 *>(gss + wn * 32 + n * 8 + 2 * c);
                float(&d)[4] = acc[m][n];
                const float(&p)[4] = part[m][n];
                d[0] = fmaf(sa, p[0], fmaf(ba, gx.x, d[0]));
                d[1] = fmaf(sa, p[1], fmaf(ba, gx.y, d[1]));
                d[2] = fmaf(sb, p[2], fmaf(bb, gx.x, d[2]));
                d[3] = fmaf(sb, p[3], fmaf(bb, gx.y, d[3]));
            }
        }
    }
    cp_async_wait<0>();
    __syncthreads(); /* the pipeline's shared memory is reused for the output tile */

    if (MODE == PLAIN) {
        /* stage [BN tokens][BM rows] in shared memory, then write rows of Y coalesced */
        constexpr int CS = BM + 4;
        float *cs = reinterpret_cast<float *>(smem);
#pragma unroll
        for (int m = 0; m < 2; m++)
#pragma unroll
            for (int n = 0; n < 4; n++) {
                const int r = mrow0 + m * 16 + g, t = wn * 32 + n * 8 + 2 * c;
                cs[t * CS + r] = acc[m][n][0];
                cs[(t + 1) * CS + r] = acc[m][n][1];
                cs[t * CS + r + 8] = acc[m][n][2];
                cs[(t + 1) * CS + r + 8] = acc[m][n][3];
            }
        __syncthreads();
        const int nr = min(BM, j.A.rows - j.r0);
        for (int i = tid; i < BN * BM; i += THREADS) {
            const int t = i / BM, r = i % BM;
            if (t >= j.nt || r >= nr) continue;
            float *y = a.Y + (size_t)(j.y0 + t) * a.ldy + j.r0 + r;
            const float v = cs[t * CS + r];
            *y = a.accumulate ? *y + v : v;
        }
    } else {
        /* silu(gate) * up for [BN tokens][64 rows], then packed like lc_pack:
         * the block's 64 rows are exactly one group of the next GEMM's inputs */
        constexpr int CS = BM / 2 + 4;
        float *cs = reinterpret_cast<float *>(smem);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            const int r = mrow0 + g, t = wn * 32 + n * 8 + 2 * c;
            cs[t * CS + r] = silu_f(acc[0][n][0]) * acc[1][n][0];
            cs[(t + 1) * CS + r] = silu_f(acc[0][n][1]) * acc[1][n][1];
            cs[t * CS + r + 8] = silu_f(acc[0][n][2]) * acc[1][n][2];
            cs[(t + 1) * CS + r + 8] = silu_f(acc[0][n][3]) * acc[1][n][3];
        }
        __syncthreads();
        /* thread = (token, 16-block): 64 tokens x 4 blocks */
        const int t = tid >> 2, blk = tid & 3;
        const float *v = cs + t * CS + blk * 16;
        float sum = 0.0f;
        uint32_t hi[8], lo[8];
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            const int c0 = (k & 8) + ((k & 7) >> 1); /* the fragment order, as in pack.cu */
            const float x0 = v[c0], x1 = v[c0 + 4];
            sum += x0 + x1;
            const uint16_t h0 = f32_to_bf16(x0), h1 = f32_to_bf16(x1);
            hi[k / 2] = h0 | (uint32_t)h1 << 16;
            lo[k / 2] = f32_to_bf16(x0 - bf16_to_f32(h0)) | (uint32_t)f32_to_bf16(x1 - bf16_to_f32(h1)) << 16;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t < j.nt) {
            const size_t row = (size_t)(j.y0 + t) * a.y.ld + j.r0 + blk * 16;
            uint4 *ph = reinterpret_cast<uint4 *>(a.y.hi + row), *pl = reinterpret_cast<uint4 *>(a.y.lo + row);
            ph[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]), ph[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
            pl[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]), pl[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
            if (blk == 0) a.y.gs[(size_t)(j.y0 + t) * (a.y.ld / 64) + j.r0 / 64] = sum;
        }
    }
}

/* ---- the same GEMMs on Hopper's warpgroup mma ----------------------------------
 * Two warpgroups, each 64 weight rows x the 64 tokens (PLAIN: rows 0-63 and
 * 64-127 of the tile; SWIGLU: gate rows, then the same rows of up).  Per
 * group of 64 inputs a warpgroup dequantises its 4 A fragments into
 * registers, issues 4 x SPLIT wgmma m64n64k16 (B = an activation plane in
 * shared memory, swizzled as the descriptor expects), waits, and folds the
 * group's affine terms in fp32 as above.  Two blocks per SM overlap one
 * block's fold with the other's mmas. */
template <int BITS>
struct wg_geom {
    static constexpr int X_BYTES = BN * BK * 2;                 /* one bf16 plane, 1024-aligned */
    static constexpr int WROW = tile_geom<BITS>::WROW;
    static constexpr int W_BYTES = BM * WROW;
    template <int SPLIT>
    __host__ __device__ static constexpr int stage_bytes() {
        return (SPLIT * X_BYTES + W_BYTES + BN * 4 + 1023) / 1024 * 1024;
    }
};

template <int BITS, int SPLIT, int MODE, bool GROUPED>
__global__ void __launch_bounds__(THREADS, 2) qgemm_wg_kernel(qg_args a) {
#ifdef LC_HAVE_WGMMA
    using G = wg_geom<BITS>;
    constexpr int SB = G::template stage_bytes<SPLIT>();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    qg_job j;
    if (!job_of<GROUPED, MODE>(a, j)) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;
    const int g = lane >> 2, c = lane & 3;
    const int K = j.A.cols, NG = K / BK;
    uint16_t *ss = reinterpret_cast<uint16_t *>(smem + STAGES * SB); /* [BM][NG] scales */
    uint16_t *bs = ss + BM * NG;                                     /* [BM][NG] biases */

    auto wrow = [&](int i, const uint32_t *&w, size_t &sb, bool &ok) {
        const lc_qmat &M = (MODE == SWIGLU && i >= BM / 2) ? j.A2 : j.A;
        const int r = j.r0 + (MODE == SWIGLU ? (i & (BM / 2 - 1)) : i);
        ok = r < M.rows;
        const int rr = ok ? r : 0;
        w = qrow_w(M, j.mat, rr);
        sb = qrow_sb(M, j.mat, rr);
    };
    for (int i = tid; i < BM * NG; i += THREADS) {
        const int r = i / NG, gi = i % NG;
        const uint32_t *w;
        size_t sb;
        bool ok;
        wrow(r, w, sb, ok);
        const lc_qmat &M = (MODE == SWIGLU && r >= BM / 2) ? j.A2 : j.A;
        ss[i] = ok ? M.s[sb + gi] : 0;
        bs[i] = ok ? M.b[sb + gi] : 0;
    }
    /* Each thread's copies are the same in every group but for the k
     * offset: rows, planes and swizzled destinations are resolved once. */
    constexpr int CPR = BITS * BK / 8 / 16;          /* 16-byte chunks per code row */
    constexpr int XQ = SPLIT * BN * 8 / THREADS;     /* activation chunks per thread */
    constexpr int WQ = BM * CPR / THREADS;           /* code chunks per thread */
    static_assert(XQ * THREADS == SPLIT * BN * 8 && WQ * THREADS == BM * CPR, "copies divide evenly");
    const uint16_t *xsrc[XQ];
    uint32_t xdst[XQ];
    bool xok[XQ];
#pragma unroll
    for (int q = 0; q < XQ; q++) {
        const int i = tid + q * THREADS, pl = i / (BN * 8), r = (i / 8) % BN, ch = i % 8;
        xok[q] = r < j.nt;
        const int xr = xok[q] ? (j.xrow ? j.xrow[r] : j.x0 + r) : 0;
        const uint16_t *plane = pl == 0 ? a.x.hi : pl == 1 ? a.x.lo : a.x.lo2;
        xsrc[q] = plane + (size_t)xr * a.x.ld + ch * 8;
        xdst[q] = pl * G::X_BYTES + r * 128 + ((ch ^ (r & 7)) * 16);
    }
    const uint32_t *wsrc[WQ];
    uint32_t wdst[WQ];
    bool wok[WQ];
#pragma unroll
    for (int q = 0; q < WQ; q++) {
        const int i = tid + q * THREADS, r = i / CPR, ch = i % CPR;
        size_t sb;
        wrow(r, wsrc[q], sb, wok[q]);
        wsrc[q] += ch * 4;
        wdst[q] = SPLIT * G::X_BYTES + r * G::WROW + ch * 16;
    }
    const bool gok = tid < j.nt;
    const float *gsrc = a.x.gs + (size_t)(gok ? (j.xrow ? j.xrow[tid] : j.x0 + tid) : 0) * (a.x.ld / 64);
    auto load_stage = [&](int kg, int slot) {
        uint8_t *st = smem + slot * SB;
#pragma unroll
        for (int q = 0; q < XQ; q++) cp_async16(st + xdst[q], xsrc[q] + kg * BK, xok[q]);
#pragma unroll
        for (int q = 0; q < WQ; q++) cp_async16(st + wdst[q], wsrc[q] + kg * (BK * BITS / 32), wok[q]);
        if (tid < BN) cp_async4(st + SPLIT * G::X_BYTES + G::W_BYTES + tid * 4, gsrc + kg, gok);
    };

    float acc[32], part[32];
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = 0.0f, part[i] = 0.0f;
    const int ra = wg * 64 + wq * 16 + g; /* this thread's rows of the tile: ra, ra + 8 */

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < NG) load_stage(s, s);
        cp_async_commit();
    }
    for (int kg = 0; kg < NG; kg++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (kg + STAGES - 1 < NG) load_stage(kg + STAGES - 1, (kg + STAGES - 1) % STAGES);
        cp_async_commit();
        const uint8_t *st = smem + (kg % STAGES) * SB;
        const uint8_t *ws = st + SPLIT * G::X_BYTES;
        const float *gss = reinterpret_cast<const float *>(ws + G::W_BYTES);
        uint32_t af[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            if (BITS == 4) {
                const uint2 wa = *reinterpret_cast<const uint2 *>(ws + ra * G::WROW + ks * 8);
                const uint2 wb = *reinterpret_cast<const uint2 *>(ws + (ra + 8) * G::WROW + ks * 8);
                af[ks][0] = q4x2_bf16(wa.x >> (4 * c));
                af[ks][1] = q4x2_bf16(wb.x >> (4 * c));
                af[ks][2] = q4x2_bf16(wa.y >> (4 * c));
                af[ks][3] = q4x2_bf16(wb.y >> (4 * c));
            } else {
                const uint4 wa = *reinterpret_cast<const uint4 *>(ws + ra * G::WROW + ks * 16);
                const uint4 wb = *reinterpret_cast<const uint4 *>(ws + (ra + 8) * G::WROW + ks * 16);
                af[ks][0] = q8x2_bf16(wa.x >> (8 * c), wa.y >> (8 * c));
                af[ks][1] = q8x2_bf16(wb.x >> (8 * c), wb.y >> (8 * c));
                af[ks][2] = q8x2_bf16(wa.z >> (8 * c), wa.w >> (8 * c));
                af[ks][3] = q8x2_bf16(wb.z >> (8 * c), wb.w >> (8 * c));
            }
        }
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int pl = 0; pl < SPLIT; pl++)
                wgmma_64x64x16(part, af[ks], wgmma_desc_k128(st + pl * G::X_BYTES + ks * 32), ks | pl);
        wgmma_commit();
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 32; i++) reg_fence(part[i]);
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int q = 0; q < 4; q++) reg_fence(af[ks][q]);
        constexpr float CTR = BITS == 4 ? LC_Q4_CENTER : LC_Q8_CENTER;
        const float sa = bf16_to_f32(ss[ra * NG + kg]), sb = bf16_to_f32(ss[(ra + 8) * NG + kg]);
        const float ba = fmaf(CTR, sa, bf16_to_f32(bs[ra * NG + kg])), bb = fmaf(CTR, sb, bf16_to_f32(bs[(ra + 8) * NG + kg]));
#pragma unroll
        for (int n = 0; n < 8; n++) {
            const float2 gx = *reinterpret_cast<const float2 *>(gss + n * 8 + 2 * c);
            acc[4 * n + 0] = fmaf(sa, part[4 * n + 0], fmaf(ba, gx.x, acc[4 * n + 0]));
            acc[4 * n + 1] = fmaf(sa, part[4 * n + 1], fmaf(ba, gx.y, acc[4 * n + 1]));
            acc[4 * n + 2] = fmaf(sb, part[4 * n + 2], fmaf(bb, gx.x, acc[4 * n + 2]));
            acc[4 * n + 3] = fmaf(sb, part[4 * n + 3], fmaf(bb, gx.y, acc[4 * n + 3]));
        }
    }
    cp_async_wait<0>();
    __syncthreads();

    /* the tile [BN tokens][BM rows] in shared memory (rows ra, ra + 8) */
    constexpr int CS = BM + 4;
    float *cs = reinterpret_cast<float *>(smem);
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int t = n * 8 + 2 * c;
        cs[t * CS + ra] = acc[4 * n + 0];
        cs[(t + 1) * CS + ra] = acc[4 * n + 1];
        cs[t * CS + ra + 8] = acc[4 * n + 2];
        cs[(t + 1) * CS + ra + 8] = acc[4 * n + 3];
    }
    __syncthreads();
    if (MODE == PLAIN) {
        const int nr = min(BM, j.A.rows - j.r0);
        for (int i = tid; i < BN * BM; i += THREADS) {
            const int t = i / BM, r = i % BM;
            if (t >= j.nt || r >= nr) continue;
            float *y = a.Y + (size_t)(j.y0 + t) * a.ldy + j.r0 + r;
            const float v = cs[t * CS + r];
            *y = a.accumulate ? *y + v : v;
        }
    } else {
        /* silu(gate) * up, packed: thread = (token, 16-block of the 64 rows) */
        const int t = tid >> 2, blk = tid & 3;
        const float *gr = cs + t * CS + blk * 16, *ur = gr + BM / 2;
        float sum = 0.0f;
        uint32_t hi[8], lo[8];
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            const int c0 = (k & 8) + ((k & 7) >> 1); /* the fragment order, as in pack.cu */
            const float x0 = silu_f(gr[c0]) * ur[c0], x1 = silu_f(gr[c0 + 4]) * ur[c0 + 4];
            sum += x0 + x1;
            const uint16_t h0 = f32_to_bf16(x0), h1 = f32_to_bf16(x1);
            hi[k / 2] = h0 | (uint32_t)h1 << 16;
            lo[k / 2] = f32_to_bf16(x0 - bf16_to_f32(h0)) | (uint32_t)f32_to_bf16(x1 - bf16_to_f32(h1)) << 16;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t < j.nt) {
            const size_t row = (size_t)(j.y0 + t) * a.y.ld + j.r0 + blk * 16;
            uint4 *ph = reinterpret_cast<uint4 *>(a.y.hi + row), *pl = reinterpret_cast<uint4 *>(a.y.lo + row);
            ph[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]), ph[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
            pl[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]), pl[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
            if (blk == 0) a.y.gs[(size_t)(j.y0 + t) * (a.y.ld / 64) + j.r0 / 64] = sum;
        }
    }
#endif
}

/* The wgmma kernels need sm_90a; LILAC_QGEMM=mma keeps the mma.sync ones. */
bool use_wgmma() {
    static int on = -1;
    if (on < 0) {
        int dev = 0, major = 0;
        const char *s = getenv("LILAC_QGEMM");
        on = !(s && strcmp(s, "mma") == 0) && !cudaGetDevice(&dev) &&
             !cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) && major == 9;
    }
    return on;
}

template <int BITS, int SPLIT, int MODE, bool GROUPED>
cudaError_t launch(const qg_args &a, dim3 grid, int K, cudaStream_t st) {
    using G = tile_geom<BITS>;
    const int NG = K / BK;
    if (use_wgmma()) {
        const size_t pipe = (size_t)STAGES * wg_geom<BITS>::template stage_bytes<SPLIT>();
        const size_t out = (size_t)BN * (BM + 4) * 4;
        const size_t smem = 1024 + (pipe > out ? pipe : out) + (size_t)BM * NG * 4;
        auto k = qgemm_wg_kernel<BITS, SPLIT, MODE, GROUPED>;
        cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err) return err;
        k<<<grid, THREADS, smem, st>>>(a);
        return cudaGetLastError();
    }
    const size_t pipe = (size_t)STAGES * G::template stage_bytes<SPLIT>();
    const size_t out = MODE == PLAIN ? (size_t)BN * (BM + 4) * 4 : (size_t)BN * (BM / 2 + 4) * 4;
    const size_t smem = (pipe > out ? pipe : out) + (size_t)BM * NG * 4;
    auto k = qgemm_kernel<BITS, SPLIT, MODE, GROUPED>;
    cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (err) return err;
    k<<<grid, THREADS, smem, st>>>(a);
    return cudaGetLastError();
}

/* LILAC_QGEMM_SPLIT=1 drops the lo plane (faster, bf16 activations). */
int split_mode() {
    static int mode = -1;
    if (mode < 0) {
        const char *s = getenv("LILAC_QGEMM_SPLIT");
        mode = s && s[0] == '1' ? 1 : 2;
    }
    return mode;
}

} // namespace

extern "C" int lc_qgemm_supported(const lc_qmat *W) {
    return (W->bits == 4 || W->bits == 8) && W->cols % BK == 0 && W->cols >= BK && W->cols <= 8192;
}

extern "C" cudaError_t lc_qgemm_exact(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, cudaStream_t st) {
    if (!lc_qgemm_supported(W) || W->bits != 8 || !X->lo2 || T <= 0 || W->cols > X->ld) return cudaErrorInvalidValue;
    qg_args a = {};
    a.A = a.A2 = *W;
    a.x = *X;
    a.Y = Y, a.ldy = ldy, a.T = T;
    return launch<8, 3, PLAIN, false>(a, dim3((W->rows + BM - 1) / BM, (T + BN - 1) / BN), W->cols, st);
}

extern "C" cudaError_t lc_qgemm(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, int accumulate,
                                cudaStream_t st) {
    if (X->f16) return lc_qgemm_h(W, X, T, Y, ldy, accumulate, st); /* an fp16 pack: the sm_90a kernels */
    if (!lc_qgemm_supported(W) || T <= 0 || W->cols > X->ld) return cudaErrorInvalidValue;
    qg_args a = {};
    a.A = a.A2 = *W;
    a.x = *X;
    a.Y = Y, a.ldy = ldy, a.accumulate = accumulate, a.T = T;
    dim3 grid((W->rows + BM - 1) / BM, (T + BN - 1) / BN);
    const bool s2 = split_mode() == 2;
    if (W->bits == 4)
        return s2 ? launch<4, 2, PLAIN, false>(a, grid, W->cols, st) : launch<4, 1, PLAIN, false>(a, grid, W->cols, st);
    return s2 ? launch<8, 2, PLAIN, false>(a, grid, W->cols, st) : launch<8, 1, PLAIN, false>(a, grid, W->cols, st);
}

static int max_items(int T, int K, int E) { return (T * K) / LC_MOE_TILE + T / LC_MOE_TILE + E + 2; }

extern "C" cudaError_t lc_moe_mma_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate,
                                          const lc_qmat *sh_up, const lc_moe_route *r, int T, int K, const lc_xpack *x,
                                          const lc_xpack *act, cudaStream_t st) {
    if ((r->tile && r->tile != LC_MOE_TILE) || gate->bits != 4 || sh_gate->bits != 4 || !lc_qgemm_supported(gate) ||
        gate->rows % 64 || gate->rows != act->ld ||
        sh_gate->rows != gate->rows || sh_gate->cols != gate->cols || gate->cols > x->ld)
        return cudaErrorInvalidValue;
    qg_args a = {};
    a.A = *gate, a.A2 = *up, a.S = *sh_gate, a.S2 = *sh_up;
    a.x = *x, a.y = *act, a.T = T, a.E = gate->n_mat;
    a.slot_tok = r->slot_tok, a.offset = r->offset, a.tiles = r->tiles, a.ntiles = r->ntiles;
    dim3 grid(gate->rows / (BM / 2), max_items(T, K, gate->n_mat));
    return split_mode() == 2 ? launch<4, 2, SWIGLU, true>(a, grid, gate->cols, st)
                             : launch<4, 1, SWIGLU, true>(a, grid, gate->cols, st);
}

extern "C" cudaError_t lc_moe_mma_down(const lc_qmat *down, const lc_qmat *sh_down, const lc_moe_route *r, int T, int K,
                                       const lc_xpack *act, float *eo, cudaStream_t st) {
    if ((r->tile && r->tile != LC_MOE_TILE) || down->bits != 4 || !lc_qgemm_supported(down) ||
        sh_down->cols != down->cols || sh_down->rows != down->rows ||
        down->cols > act->ld)
        return cudaErrorInvalidValue;
    qg_args a = {};
    a.A = a.A2 = *down, a.S = a.S2 = *sh_down;
    a.x = *act, a.Y = eo, a.ldy = down->rows, a.T = T, a.E = down->n_mat;
    a.slot_tok = r->slot_tok, a.offset = r->offset, a.tiles = r->tiles, a.ntiles = r->ntiles;
    dim3 grid((down->rows + BM - 1) / BM, max_items(T, K, down->n_mat));
    return split_mode() == 2 ? launch<4, 2, PLAIN, true>(a, grid, down->cols, st)
                             : launch<4, 1, PLAIN, true>(a, grid, down->cols, st);
}
