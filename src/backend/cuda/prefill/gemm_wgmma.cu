/* gemm_wgmma.cu — the prefill GEMMs on Hopper (sm_90a): 4-bit weights
 * dequantised straight into fp16 wgmma operands, no per-group fold, the
 * warpgroup mma pipelined across groups and tiles.
 *
 * Why fp16: a 4-bit code times its bf16 scale, s (q - 8), has at most
 * 8 + 3 significant bits, so it is exact in fp16 (11 bits) for any
 * 2^-24 <= |s| < 4096 (lc_qgemm_h_check; smaller scales err by < 2^-25 per
 * weight).  The mma then sums s (q - 8) x over the whole k range in one fp32
 * accumulator.  The affine part, c = b + 8 s per row and group, pairs with
 * the group sums S of x: sum_g c S is a small GEMM over the groups that runs
 * on the same accumulator at each tile's end (fp16 hi/lo of 16 c and S / 16:
 * three products).  (The bf16 kernels of gemm_mma.cu must fold every
 * group's partial sum instead: a wait and 2 FMAs per output per group.)
 * Activations come as fp16 hi + lo of x * xs (lc_pack with f16 set: ~22 bits).
 *
 * A block is 2 warpgroups; each owns MT m64 tiles of weight rows x BN tokens
 * (wgmma m64nBNk16, A = dequantised codes from registers, B = an activation
 * plane from 128-byte-swizzled shared memory).  Blocks are persistent: each
 * walks tiles blockIdx.x, + gridDim.x, ..., and its cp.async pipeline runs
 * over the flattened (tile, group) sequence, so the next tile's first loads
 * are in flight during this tile's epilogue.  Per group: wait for its
 * stage, issue the load AHEAD groups in front, dequantise (3 instructions
 * per 2 codes), issue 2 x 4 wgmmas (hi, lo planes), then wait for the
 * previous group's wgmmas (wait_group 1), which frees its stage and A
 * registers.
 *
 * SWIGLU tiles interleave gate and up rows (8 of each per warp slab), so a
 * thread holds gate and up of the same output in one accumulator fragment
 * and SwiGLU happens in registers; the BM / 2 outputs of a tile are whole
 * groups of the down projection's input, packed in the epilogue. */
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"

#include <cuda_fp16.h>
#include <type_traits>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int BK = 64, THREADS = 256;
constexpr int WROW = 4 * BK / 8 + 16; /* bytes per code row in shared memory (padded: no bank conflicts) */
enum { PLAIN = 0, SWIGLU = 1 };

/* A block's shared memory: MT m64 tiles per warpgroup, so BM = 128 MT weight
 * rows; STAGES pipeline stages (4, or 3 when OCC = 2 blocks share an SM),
 * each an activation tile (hi, lo planes) and the codes of BM rows; the
 * bias GEMM's two group-sum planes; SWIGLU's output staging. */
template <int BN, int MT, int MODE, int OCC>
struct geom {
    static constexpr int STAGES = OCC == 2 ? 3 : 4;
    static constexpr int BM = 128 * MT;
    static constexpr int X_BYTES = BN * BK * 2; /* one fp16 plane */
    static constexpr int W_OFF = 2 * X_BYTES;
    static constexpr int STAGE = (W_OFF + BM * WROW + 1023) / 1024 * 1024;
    static constexpr int SW_CS = BM / 2 + 4; /* SWIGLU staging row stride (floats) */
    static constexpr size_t smem() {
        return 1024 + (size_t)STAGES * STAGE + 2 * X_BYTES + (MODE == SWIGLU ? (size_t)BN * SW_CS * 4 : 0);
    }
};

struct qh_args {
    lc_qmat A, A2, S, S2; /* weights; S, S2: the shared expert (grouped) */
    lc_xpack x, y;        /* input pack; output pack (SWIGLU) */
    float *Y;             /* output [., ldy] (PLAIN) */
    int ldy, accumulate, T, E;
    float out_scale;      /* 1 / x.xs */
    float x_xs;           /* x.xs (the bias GEMM's scale) */
    float y_xs;           /* SWIGLU: the factor the output pack's planes carry */
    int n_rb;             /* row blocks per item */
    int n_items;          /* dense: token blocks (grouped: *ntiles) */
    const int32_t *slot_tok, *offset, *tiles, *ntiles;
};

/* One tile: weight rows (and, for SWIGLU, the up matrix) x up to BN tokens. */
struct qh_job {
    const lc_qmat *A, *A2;
    int mat, r0, nt, x0, y0;
    const int32_t *xrow; /* input row of token i = xrow[i] (or x0 + i) */
};

template <int BN, int BM, int MODE, bool GROUPED>
__device__ __forceinline__ void job_of(const qh_args &a, int tile, qh_job &j) {
    const int rb = tile % a.n_rb, item = tile / a.n_rb;
    j.r0 = rb * (MODE == SWIGLU ? BM / 2 : BM);
    if (!GROUPED) {
        j.A = &a.A, j.A2 = &a.A2, j.mat = 0;
        j.x0 = j.y0 = item * BN;
        j.nt = min(BN, a.T - j.x0);
        j.xrow = nullptr;
        return;
    }
    const int it = a.tiles[item], e = it >> 20, p0 = it & 0xfffff;
    const bool sh = e == a.E;
    j.A = sh ? &a.S : &a.A, j.A2 = sh ? &a.S2 : &a.A2, j.mat = sh ? 0 : e;
    j.nt = min(BN, a.offset[e + 1] - p0);
    j.y0 = j.x0 = p0;
    j.xrow = MODE == SWIGLU ? a.slot_tok + p0 : nullptr; /* gate/up gather the slots' tokens */
}

/* Local code row L of a tile: its matrix and row.  SWIGLU: rows 8-15 of each
 * 16-row slab are the up rows of the gate rows 0-7. */
template <int MODE>
__device__ __forceinline__ void tile_row(const qh_job &j, int L, const lc_qmat *&M, int &r) {
    if (MODE == SWIGLU) {
        M = (L & 8) ? j.A2 : j.A;
        r = j.r0 + (L >> 4) * 8 + (L & 7);
    } else {
        M = j.A;
        r = j.r0 + L;
    }
}

#ifdef LC_HAVE_WGMMA /* the device helpers of the sm_90a pass */
/* The two 4-bit codes of lane c in w (bits 4c..4c+3 and 16+4c..), times s2
 * (two fp16 scales): s (q - 8) exactly.  Rotating w left by 6 - 4c puts
 * the codes in the top mantissa bits (6-9) of each half, and 0x4c00 | q << 6
 * is the fp16 of 16 + q; then (16 + q) s - 24 s rounds once, to the exact
 * s (q - 8) (n24 = -24 s: 3 s needs 10 bits, so it is exact too). */
__device__ __forceinline__ uint32_t q4x2_f16s(uint32_t w, int rot, uint32_t s2, uint32_t n24) {
    const uint32_t v = (__funnelshift_l(w, w, rot) & 0x03c003c0u) | 0x4c004c00u;
    uint32_t r;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(s2), "r"(n24));
    return r;
}

/* -24 s for both halves of s2. */
__device__ __forceinline__ uint32_t neg24_f16x2(uint32_t s2) {
    uint32_t r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(s2), "r"(0xce00ce00u)); /* fp16 -24 */
    return r;
}

/* A bf16 scale as two fp16 copies: exact for 2^-24 <= |s| < 65504 (below,
 * an error under 2^-25 per weight). */
__device__ __forceinline__ uint32_t scale_f16x2(uint16_t s) {
    const uint16_t u = __half_as_ushort(__float2half_rn(bf16_to_f32(s)));
    return (uint32_t)u | (uint32_t)u << 16;
}

/* x0, x1 as fp16 hi + lo pairs (hi = fp16(x), lo = fp16(x - hi)). */
__device__ __forceinline__ void split_f16x2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    const __half h0 = __float2half_rn(x0), h1 = __float2half_rn(x1);
    const __half l0 = __float2half_rn(x0 - __half2float(h0)), l1 = __float2half_rn(x1 - __half2float(h1));
    hi = (uint32_t)__half_as_ushort(h0) | (uint32_t)__half_as_ushort(h1) << 16;
    lo = (uint32_t)__half_as_ushort(l0) | (uint32_t)__half_as_ushort(l1) << 16;
}

template <int BN>
__device__ __forceinline__ void wgmma_f16(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t desc);
template <>
__device__ __forceinline__ void wgmma_f16<64>(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
    wgmma_64x64x16_f16(d, a, desc);
}
template <>
__device__ __forceinline__ void wgmma_f16<128>(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
    wgmma_64x128x16_f16(d, a, desc);
}
/* A 128-token tile holding at most 64 tokens (an expert's last item) multiplies
 * only its first 64 columns: the first 32 accumulators of an N = 128 fragment
 * are exactly an N = 64 fragment's. */
template <int BN>
__device__ __forceinline__ void wgmma_f16_part(float (&d)[BN / 2], const uint32_t (&a)[4], uint64_t desc, bool full) {
    if (BN == 128 && !full)
        wgmma_64x64x16_f16(*reinterpret_cast<float(*)[32]>(&d[0]), a, desc);
    else
        wgmma_f16<BN>(d, a, desc);
}

#endif

template <int BN, int MT, int MODE, bool GROUPED, int OCC>
__global__ void __launch_bounds__(THREADS, OCC) qgemm_h_kernel(qh_args a) {
#ifdef LC_HAVE_WGMMA
    using G = geom<BN, MT, MODE, OCC>;
    constexpr int BM = G::BM, NACC = BN / 2, STAGES = G::STAGES, AHEAD = STAGES - 2;
    constexpr int KKMAX = GROUPED ? 2 : 4; /* k16 steps of the bias GEMM: up to 32 (64) groups */
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    uint8_t *sbias = smem + STAGES * G::STAGE; /* the tile's group sums: fp16 hi, lo planes [BN][64] */
    float *stage_sw = reinterpret_cast<float *>(sbias + 2 * G::X_BYTES);

    const int n_items = GROUPED ? *a.ntiles : a.n_items;
    const int n_tiles = a.n_rb * n_items;
    if ((int)blockIdx.x >= n_tiles) return;
    const int my_tiles = (n_tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1;
    const int K = a.A.cols, NG = K / BK;
    const int NB16 = (NG + 15) / 16; /* k16 steps of the bias GEMM (groups padded to 16) */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;
    const int g = lane >> 2, c = lane & 3, rot = (6 - 4 * c) & 31;

    /* ---- the loader: its own cursor over (tile, group), AHEAD steps in front.
     * A thread copies the same rows and chunks in every group: destinations
     * are fixed, sources move by one group per step and change per tile. */
    constexpr int XR = BN * 8 / THREADS; /* token rows per thread per plane (8 chunks of 16 bytes per row) */
    constexpr int WR = BM * 2 / THREADS; /* code chunks per thread (2 per row) */
    const int xr0 = tid >> 3, xch = tid & 7;
    const uint16_t *xsrc[XR];
    bool xok[XR];
    const uint32_t *wsrc[WR];
    bool wok[WR];
    int ld_tl = 0, ld_kg = 0, ld_nt = 0, ld_x0 = 0;
    const int32_t *ld_xr = nullptr;
    auto ld_xrow = [&](int r) { return ld_xr ? ld_xr[r] : ld_x0 + r; };
    auto load_rows = [&](int tl) {
        qh_job j;
        job_of<BN, BM, MODE, GROUPED>(a, (int)blockIdx.x + tl * (int)gridDim.x, j);
        ld_nt = j.nt, ld_x0 = j.x0, ld_xr = j.xrow;
#pragma unroll
        for (int q = 0; q < XR; q++) {
            const int r = xr0 + q * (THREADS / 8);
            xok[q] = r < j.nt;
            const int xr = xok[q] ? (j.xrow ? j.xrow[r] : j.x0 + r) : 0;
            xsrc[q] = a.x.hi + (size_t)xr * a.x.ld + xch * 8;
        }
#pragma unroll
        for (int q = 0; q < WR; q++) {
            const lc_qmat *M;
            int r;
            tile_row<MODE>(j, (tid >> 1) + q * (THREADS / 2), M, r);
            wok[q] = r < M->rows;
            wsrc[q] = qrow_w(*M, j.mat, wok[q] ? r : 0) + (tid & 1) * 4;
        }
    };
    const size_t lo_off = a.x.lo - a.x.hi; /* the lo plane sits at a fixed distance */
    auto load = [&]() {
        if (ld_tl < my_tiles) {
            if (ld_kg == 0) load_rows(ld_tl);
            uint8_t *st = smem + ((ld_tl * NG + ld_kg) % STAGES) * G::STAGE;
#pragma unroll
            for (int q = 0; q < XR; q++) {
                const int r = xr0 + q * (THREADS / 8);
                const uint32_t dst = r * 128 + ((xch ^ (r & 7)) * 16);
                cp_async16(st + dst, xsrc[q] + ld_kg * BK, xok[q]);
                cp_async16(st + G::X_BYTES + dst, xsrc[q] + lo_off + ld_kg * BK, xok[q]);
            }
#pragma unroll
            for (int q = 0; q < WR; q++)
                cp_async16(st + G::W_OFF + ((tid >> 1) + q * (THREADS / 2)) * WROW + (tid & 1) * 16,
                           wsrc[q] + ld_kg * (BK * 4 / 32), wok[q]);
            /* the tile's group-sum planes, once the tile before it is done with them
             * (this load is issued while the consumer is at group 0 of ld_tl) */
            if (ld_kg == AHEAD) {
                for (int u = tid; u < BN * 2 * NB16; u += THREADS) {
                    const int r = u / (2 * NB16), ch = u % (2 * NB16);
                    const bool ok = r < ld_nt && ch * 8 < NG;
                    const int xr = ok ? ld_xrow(r) : 0;
                    const uint32_t dst = r * 128 + ((ch ^ (r & 7)) * 16);
                    cp_async16(sbias + dst, a.x.sh + (size_t)xr * 64 + ch * 8, ok);
                    cp_async16(sbias + G::X_BYTES + dst, a.x.sl + (size_t)xr * 64 + ch * 8, ok);
                }
            }
            if (++ld_kg == NG) ld_kg = 0, ld_tl++;
        }
        cp_async_commit();
    };

#pragma unroll
    for (int s = 0; s < AHEAD; s++) load();

    int step = 0;
    for (int tl = 0; tl < my_tiles; tl++) {
        qh_job j;
        job_of<BN, BM, MODE, GROUPED>(a, (int)blockIdx.x + tl * (int)gridDim.x, j);
        /* this thread's local rows: la[m], la[m] + 8 of its m64 tile m */
        int la[MT];
        const uint16_t *sp[MT][2], *bp[MT][2];
        uint16_t sv[MT][2];
#pragma unroll
        for (int m = 0; m < MT; m++) {
            la[m] = (wg * MT + m) * 64 + wq * 16 + g;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const lc_qmat *M;
                int r;
                tile_row<MODE>(j, la[m] + 8 * h, M, r);
                const size_t sb = qrow_sb(*M, j.mat, r < M->rows ? r : 0);
                sp[m][h] = M->s + sb, bp[m][h] = M->b + sb;
                sv[m][h] = sp[m][h][0];
            }
        }
        /* the bias GEMM's A operand, c = b + 8 s of this thread's rows at the
         * groups of its fragments (k16 step kk: groups 16 kk + 2c, 2c + 1, 2c + 8,
         * 2c + 9), fetched now and used at the tile's end */
        uint32_t cs[MT][KKMAX][4], cbv[MT][KKMAX][4]; /* [m][kk][q]: two bf16 s (b) of the q-th fragment register */
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int kk = 0; kk < KKMAX; kk++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int h = q & 1, g0 = kk * 16 + 2 * c + (q >> 1) * 8;
                    const bool ok = kk < NB16 && g0 < NG;
                    cs[m][kk][q] = ok ? *reinterpret_cast<const uint32_t *>(sp[m][h] + g0) : 0u;
                    cbv[m][kk][q] = ok ? *reinterpret_cast<const uint32_t *>(bp[m][h] + g0) : 0u;
                }

        float acc[MT][NACC];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int i = 0; i < NACC; i++) acc[m][i] = 0.0f;
        uint32_t af[2][MT][4][4];

        auto group = [&](int kg, uint32_t(&f)[MT][4][4]) {
            cp_async_wait<AHEAD - 1>();
            fence_proxy_async();
#ifndef LC_QH_NOSYNC /* workshop only: times the loop without its barrier (wrong results) */
            __syncthreads(); /* this group's stage landed; the stage loaded next is free */
#endif
            load();
            const uint8_t *st = smem + (step % STAGES) * G::STAGE;
            const uint8_t *ws = st + G::W_OFF;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const uint32_t sa = scale_f16x2(sv[m][0]), sb = scale_f16x2(sv[m][1]);
                const uint32_t na = neg24_f16x2(sa), nb = neg24_f16x2(sb);
                if (kg + 1 < NG) sv[m][0] = sp[m][0][kg + 1], sv[m][1] = sp[m][1][kg + 1];
#pragma unroll
                for (int ks = 0; ks < 4; ks++) {
                    const uint2 wa = *reinterpret_cast<const uint2 *>(ws + la[m] * WROW + ks * 8);
                    const uint2 wb = *reinterpret_cast<const uint2 *>(ws + (la[m] + 8) * WROW + ks * 8);
#ifdef LC_QH_NODEQ /* workshop only: times the pipeline without the dequantisation */
                    f[m][ks][0] = sa, f[m][ks][1] = sb, f[m][ks][2] = na, f[m][ks][3] = nb;
                    (void)wa, (void)wb;
#else
                    f[m][ks][0] = q4x2_f16s(wa.x, rot, sa, na);
                    f[m][ks][1] = q4x2_f16s(wb.x, rot, sb, nb);
                    f[m][ks][2] = q4x2_f16s(wa.y, rot, sa, na);
                    f[m][ks][3] = q4x2_f16s(wb.y, rot, sb, nb);
#endif
                }
            }
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++)
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    wgmma_f16<BN>(acc[m], f[m][ks], wgmma_desc_k128(st + ks * 32));
                    wgmma_f16<BN>(acc[m], f[m][ks], wgmma_desc_k128(st + G::X_BYTES + ks * 32));
                }
            wgmma_commit();
            wgmma_wait<1>();
            step++;
        };
        /* the bias term: acc += (16 xs c) (S / 16) with c = b + 8 s per row and
         * group, as a GEMM over the groups (3 products: hi hi, hi lo, lo hi) */
        auto bias = [&]() {
            const float alpha = 16.0f * a.x_xs;
#pragma unroll
            for (int kk = 0; kk < KKMAX; kk++) {
                if (kk >= NB16) break;
                uint32_t ch[MT][4], cl[MT][4];
#pragma unroll
                for (int m = 0; m < MT; m++)
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        const uint32_t sv2 = cs[m][kk][q], bv2 = cbv[m][kk][q];
                        const float c0 = alpha * fmaf(8.0f, bf16_to_f32(sv2 & 0xffff), bf16_to_f32(bv2 & 0xffff));
                        const float c1 = alpha * fmaf(8.0f, bf16_to_f32(sv2 >> 16), bf16_to_f32(bv2 >> 16));
                        split_f16x2(c0, c1, ch[m][q], cl[m][q]);
                    }
                wgmma_fence();
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    wgmma_f16<BN>(acc[m], ch[m], wgmma_desc_k128(sbias + kk * 32));
                    wgmma_f16<BN>(acc[m], ch[m], wgmma_desc_k128(sbias + G::X_BYTES + kk * 32));
                    wgmma_f16<BN>(acc[m], cl[m], wgmma_desc_k128(sbias + kk * 32));
                }
                wgmma_commit();
                wgmma_wait<0>(); /* ch, cl are rewritten next */
            }
        };
        for (int kg = 0; kg < NG; kg += 2) {
            group(kg, af[0]);
            group(kg + 1, af[1]);
        }
        bias(); /* the planes landed with group AHEAD's stage; every barrier since published them */
        wgmma_wait<0>();
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int i = 0; i < NACC; i++) reg_fence(acc[m][i]);

        /* ---- epilogue: y = acc / xs */
        if (MODE == PLAIN) {
            const int rows = j.A->rows;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const int ra = j.r0 + la[m], rb = ra + 8;
#pragma unroll
                for (int n = 0; n < BN / 8; n++) {
                    const int t = n * 8 + 2 * c;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        if (t + h >= j.nt) continue;
                        float *y = a.Y + (size_t)(j.y0 + t + h) * a.ldy;
                        const float v0 = acc[m][4 * n + h] * a.out_scale, v1 = acc[m][4 * n + 2 + h] * a.out_scale;
                        if (ra < rows) y[ra] = a.accumulate ? y[ra] + v0 : v0;
                        if (rb < rows) y[rb] = a.accumulate ? y[rb] + v1 : v1;
                    }
                }
            }
        } else {
            /* silu(gate) * up for output column o of token t, staged [t][o] */
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const int o = (la[m] >> 4) * 8 + g;
#pragma unroll
                for (int n = 0; n < BN / 8; n++) {
                    const int t = n * 8 + 2 * c;
#pragma unroll
                    for (int h = 0; h < 2; h++)
                        stage_sw[(t + h) * G::SW_CS + o] =
                            silu_f(acc[m][4 * n + h] * a.out_scale) * (acc[m][4 * n + 2 + h] * a.out_scale);
                }
            }
            __syncthreads();
            /* pack like lc_pack (f16): thread = (token, 16-block of the BM / 2 outputs) */
            constexpr int NB = BM / 2 / 16;
            for (int u = tid; u < BN * NB; u += THREADS) {
                const int t = u / NB, blk = u % NB;
                const float *v = stage_sw + t * G::SW_CS + blk * 16;
                float sum = 0.0f;
                uint32_t hi[8], lo[8];
#pragma unroll
                for (int k = 0; k < 16; k += 2) {
                    const int c0 = (k & 8) + ((k & 7) >> 1); /* the fragment order, as in pack.cu */
                    const float x0 = v[c0], x1 = v[c0 + 4];
                    sum += x0 + x1;
                    split_f16x2(x0 * a.y_xs, x1 * a.y_xs, hi[k / 2], lo[k / 2]);
                }
                /* the 4 blocks of a 64-output group sit in adjacent lanes (NB % 4 == 0) */
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                if (t < j.nt) {
                    const size_t row = (size_t)(j.y0 + t) * a.y.ld + j.r0 + blk * 16;
                    uint4 *ph = reinterpret_cast<uint4 *>(a.y.hi + row), *pl = reinterpret_cast<uint4 *>(a.y.lo + row);
                    ph[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]), ph[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
                    pl[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]), pl[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
                    if ((blk & 3) == 0) {
                        const size_t gi = (j.r0 + blk * 16) / 64;
                        a.y.gs[(size_t)(j.y0 + t) * (a.y.ld / 64) + gi] = sum;
                        uint32_t sh, sl;
                        split_f16x2(sum * (1.0f / 16), 0.0f, sh, sl);
                        a.y.sh[(size_t)(j.y0 + t) * 64 + gi] = (uint16_t)sh;
                        a.y.sl[(size_t)(j.y0 + t) * 64 + gi] = (uint16_t)sl;
                    }
                }
            }
            /* the staging area is next written after this tile's last
             * in-loop barrier has been passed again by every thread */
        }
    }
    cp_async_wait<0>();
#endif
}

/* ---- the warp-specialised form (LILAC_QH_DENSE=ws128, LILAC_QH_MOE=ws64) --------
 * Warpgroup 0 only copies (cp.async, 56 registers), warpgroups 1 and 2 only
 * dequantise and multiply (224 registers).  Stages change hands through
 * mbarriers: full[s] completes when the producer's 128 threads' copies of
 * the stage have landed, empty[s] when all 8 consumer warps' wgmmas that
 * read it are done; so the consumers never wait for each other (the block
 * barrier per group that the form above needs is gone), and the producer
 * runs STAGES groups ahead.  The group-sum planes are double-buffered by
 * tile parity and travel with each tile's first stage. */

constexpr int WS_THREADS = 384;

template <int BN, int MODE>
struct ws_geom {
    /* 4 stages, 3 where gate/up's 128-token staging would not fit beside them */
    static constexpr int STAGES = MODE == SWIGLU && BN == 128 ? 3 : 4;
    static constexpr int BM = 128;
    static constexpr int X_BYTES = BN * BK * 2;
    static constexpr int W_OFF = 2 * X_BYTES;
    static constexpr int STAGE = (W_OFF + BM * WROW + 1023) / 1024 * 1024;
    static constexpr int BIAS = 2 * X_BYTES; /* one tile's hi, lo group-sum planes */
    static constexpr int SW_CS = BM / 2 + 4;
    static constexpr size_t smem() {
        return 1024 + (size_t)STAGES * STAGE + 2 * BIAS + (MODE == SWIGLU ? (size_t)BN * SW_CS * 4 : 0) + 128;
    }
};

template <int BN, int MODE, bool GROUPED>
__global__ void __launch_bounds__(WS_THREADS, 1) qgemm_hws_kernel(qh_args a) {
#ifdef LC_HAVE_WGMMA
    using G = ws_geom<BN, MODE>;
    constexpr int BM = G::BM, NACC = BN / 2, STAGES = G::STAGES, PT = 128;
    constexpr int KKMAX = GROUPED ? 2 : 4;
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    uint8_t *sbias0 = smem + STAGES * G::STAGE; /* [2][hi, lo][BN][64] fp16 */
    float *stage_sw = reinterpret_cast<float *>(sbias0 + 2 * G::BIAS);
    uint64_t *full = reinterpret_cast<uint64_t *>(reinterpret_cast<uint8_t *>(stage_sw) +
                                                  (MODE == SWIGLU ? (size_t)BN * G::SW_CS * 4 : 0));
    uint64_t *empty = full + STAGES;

    const int n_items = GROUPED ? *a.ntiles : a.n_items;
    const int n_tiles = a.n_rb * n_items;
    if ((int)blockIdx.x >= n_tiles) return;
    const int my_tiles = (n_tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1;
    const int K = a.A.cols, NG = K / BK, steps = my_tiles * NG;
    const int NB16 = (NG + 15) / 16;
    const int tid = threadIdx.x;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) mbar_init(&full[s], PT), mbar_init(&empty[s], 8 * LC_WARP_ARRIVALS);
    }
    __syncthreads();

    if (tid < PT) {
        /* ---- producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
        constexpr int XR = BN * 8 / PT, WR = BM * 2 / PT;
        const int xr0 = tid >> 3, xch = tid & 7;
        const size_t lo_off = a.x.lo - a.x.hi;
        int xoff[XR];
        bool xok[XR];
        const uint32_t *wsrc[WR];
        bool wok[WR];
        for (int step = 0, tl = 0, kg = 0; step < steps; step++) {
            const int slot = step % STAGES;
            if (kg == 0) {
                qh_job j;
                job_of<BN, BM, MODE, GROUPED>(a, (int)blockIdx.x + tl * (int)gridDim.x, j);
#pragma unroll
                for (int q = 0; q < XR; q++) {
                    const int r = xr0 + q * (PT / 8);
                    xok[q] = r < j.nt;
                    xoff[q] = (xok[q] ? (j.xrow ? j.xrow[r] : j.x0 + r) : 0) * a.x.ld + xch * 8;
                }
#pragma unroll
                for (int q = 0; q < WR; q++) {
                    const lc_qmat *M;
                    int r;
                    tile_row<MODE>(j, (tid >> 1) + q * (PT / 2), M, r);
                    wok[q] = r < M->rows;
                    wsrc[q] = qrow_w(*M, j.mat, wok[q] ? r : 0) + (tid & 1) * 4;
                }
                mbar_wait(&empty[slot], ((step / STAGES) & 1) ^ 1);
                /* this tile's group-sum planes: buffer tl & 1 was last read by tile tl - 2 */
                uint8_t *sb = sbias0 + (tl & 1) * G::BIAS;
                for (int u = tid; u < BN * 2 * NB16; u += PT) {
                    const int r = u / (2 * NB16), ch = u % (2 * NB16);
                    const bool ok = r < j.nt && ch * 8 < NG;
                    const int xr = ok ? (j.xrow ? j.xrow[r] : j.x0 + r) : 0;
                    const uint32_t dst = r * 128 + ((ch ^ (r & 7)) * 16);
                    cp_async16(sb + dst, a.x.sh + (size_t)xr * 64 + ch * 8, ok);
                    cp_async16(sb + G::X_BYTES + dst, a.x.sl + (size_t)xr * 64 + ch * 8, ok);
                }
            } else {
                mbar_wait(&empty[slot], ((step / STAGES) & 1) ^ 1);
            }
            uint8_t *st = smem + slot * G::STAGE;
#pragma unroll
            for (int q = 0; q < XR; q++) {
                const int r = xr0 + q * (PT / 8);
                const uint32_t dst = r * 128 + ((xch ^ (r & 7)) * 16);
                cp_async16(st + dst, a.x.hi + xoff[q] + kg * BK, xok[q]);
                cp_async16(st + G::X_BYTES + dst, a.x.hi + lo_off + xoff[q] + kg * BK, xok[q]);
            }
#pragma unroll
            for (int q = 0; q < WR; q++)
                cp_async16(st + G::W_OFF + ((tid >> 1) + q * (PT / 2)) * WROW + (tid & 1) * 16, wsrc[q] + kg * (BK * 4 / 32),
                           wok[q]);
            cp_async_mbar_arrive(&full[slot]);
            if (++kg == NG) kg = 0, tl++;
        }
        cp_async_wait<0>();
        return;
    }

    /* ---- consumers */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    const int ct = tid - PT, lane = ct & 31, warp = ct >> 5, wg = warp >> 2, wq = warp & 3;
    const int g = lane >> 2, c = lane & 3, rot = (6 - 4 * c) & 31;
    const int la = wg * 64 + wq * 16 + g;
    /* A tile's prologue (its job, its rows' scale and bias pointers, the first
     * scales) is fetched while the tile before it runs: the loads it needs (an
     * expert's work item and offsets, then the scales) would otherwise stall
     * both warpgroups at every tile start with no wgmma in flight. */
    struct prologue {
        qh_job j;
        const uint16_t *sp[2], *bp[2];
        uint16_t sv[2];
    };
    auto fetch_prologue = [&](int tl, prologue &p) {
        job_of<BN, BM, MODE, GROUPED>(a, (int)blockIdx.x + tl * (int)gridDim.x, p.j);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const lc_qmat *M;
            int r;
            tile_row<MODE>(p.j, la + 8 * h, M, r);
            const size_t sb = qrow_sb(*M, p.j.mat, r < M->rows ? r : 0);
            p.sp[h] = M->s + sb, p.bp[h] = M->b + sb;
            p.sv[h] = p.sp[h][0];
        }
    };
    prologue next;
    fetch_prologue(0, next);
    int step = 0;
    for (int tl = 0; tl < my_tiles; tl++) {
        if (!GROUPED && tl > 0) fetch_prologue(tl, next); /* dense: its prologue has no load chain; fetched early it measured 3% slower */
        const qh_job j = next.j;
        const uint16_t *sp[2] = {next.sp[0], next.sp[1]}, *bp[2] = {next.bp[0], next.bp[1]};
        uint16_t sv[2] = {next.sv[0], next.sv[1]};
        uint32_t cs[KKMAX][4], cbv[KKMAX][4];
#pragma unroll
        for (int kk = 0; kk < KKMAX; kk++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int h = q & 1, g0 = kk * 16 + 2 * c + (q >> 1) * 8;
                const bool ok = kk < NB16 && g0 < NG;
                cs[kk][q] = ok ? *reinterpret_cast<const uint32_t *>(sp[h] + g0) : 0u;
                cbv[kk][q] = ok ? *reinterpret_cast<const uint32_t *>(bp[h] + g0) : 0u;
            }
        float acc[NACC];
#pragma unroll
        for (int i = 0; i < NACC; i++) acc[i] = 0.0f;
        uint32_t af[2][4][4];
        /* W: the tile has more than 64 tokens (all 128 columns), a compile-time
         * flag so that the loop holds no branch between its wgmmas */
        auto group = [&](int kg, uint32_t(&f)[4][4], auto W) {
            const int slot = step % STAGES;
            mbar_wait(&full[slot], (step / STAGES) & 1);
            fence_proxy_async();
            const uint8_t *st = smem + slot * G::STAGE;
            const uint8_t *ws = st + G::W_OFF;
            const uint32_t sa = scale_f16x2(sv[0]), sb = scale_f16x2(sv[1]);
            const uint32_t na = neg24_f16x2(sa), nb = neg24_f16x2(sb);
            if (kg + 1 < NG) sv[0] = sp[0][kg + 1], sv[1] = sp[1][kg + 1];
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const uint2 wa = *reinterpret_cast<const uint2 *>(ws + la * WROW + ks * 8);
                const uint2 wb = *reinterpret_cast<const uint2 *>(ws + (la + 8) * WROW + ks * 8);
                f[ks][0] = q4x2_f16s(wa.x, rot, sa, na);
                f[ks][1] = q4x2_f16s(wb.x, rot, sb, nb);
                f[ks][2] = q4x2_f16s(wa.y, rot, sa, na);
                f[ks][3] = q4x2_f16s(wb.y, rot, sb, nb);
            }
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                wgmma_f16_part<BN>(acc, f[ks], wgmma_desc_k128(st + ks * 32), decltype(W)::value);
                wgmma_f16_part<BN>(acc, f[ks], wgmma_desc_k128(st + G::X_BYTES + ks * 32), decltype(W)::value);
            }
            wgmma_commit();
            wgmma_wait<1>();
            /* the previous stage's wgmmas (this warp's share) are done: release it */
            if (step > 0) mbar_arrive_warp(&empty[(step - 1) % STAGES]);
            step++;
        };
        /* the bias term, on this tile's group-sum planes (they came with its first stage) */
        const uint8_t *sbias = sbias0 + (tl & 1) * G::BIAS;
        const float alpha = 16.0f * a.x_xs;
        /* experts: all its k16 steps in one commit (one wait per tile, not one per step) */
        auto bias_term = [&](auto W) {
            uint32_t ch[KKMAX][4], cl[KKMAX][4];
#pragma unroll
            for (int kk = 0; kk < KKMAX; kk++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const uint32_t s2 = cs[kk][q], b2 = cbv[kk][q];
                    split_f16x2(alpha * fmaf(8.0f, bf16_to_f32(s2 & 0xffff), bf16_to_f32(b2 & 0xffff)),
                                alpha * fmaf(8.0f, bf16_to_f32(s2 >> 16), bf16_to_f32(b2 >> 16)), ch[kk][q], cl[kk][q]);
                }
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < KKMAX; kk++) {
                if (kk >= NB16) break;
                wgmma_f16_part<BN>(acc, ch[kk], wgmma_desc_k128(sbias + kk * 32), decltype(W)::value);
                wgmma_f16_part<BN>(acc, ch[kk], wgmma_desc_k128(sbias + G::X_BYTES + kk * 32), decltype(W)::value);
                wgmma_f16_part<BN>(acc, cl[kk], wgmma_desc_k128(sbias + kk * 32), decltype(W)::value);
                if (!GROUPED) wgmma_commit(), wgmma_wait<0>(); /* dense: as before the early prologue (see above) */
            }
            wgmma_commit();
            wgmma_wait<0>();
        };
        auto tile = [&](auto W) {
            for (int kg = 0; kg < NG; kg += 2) {
                group(kg, af[0], W);
                if (GROUPED && kg == 0 && tl + 1 < my_tiles) fetch_prologue(tl + 1, next); /* with group 0's wgmmas in flight */
                group(kg + 1, af[1], W);
            }
            bias_term(W);
        };
        /* dense tiles are all full but the last: no narrow copy of the loop for them */
        if (!GROUPED || BN != 128 || j.nt > 64)
            tile(std::true_type{});
        else
            tile(std::false_type{});
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < NACC; i++) reg_fence(acc[i]);

        if (MODE == PLAIN) {
            const int rows = j.A->rows, ra = j.r0 + la, rb = ra + 8;
#pragma unroll
            for (int n = 0; n < BN / 8; n++) {
                const int t = n * 8 + 2 * c;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    if (t + h >= j.nt) continue;
                    float *y = a.Y + (size_t)(j.y0 + t + h) * a.ldy;
                    const float v0 = acc[4 * n + h] * a.out_scale, v1 = acc[4 * n + 2 + h] * a.out_scale;
                    if (ra < rows) y[ra] = a.accumulate ? y[ra] + v0 : v0;
                    if (rb < rows) y[rb] = a.accumulate ? y[rb] + v1 : v1;
                }
            }
        } else {
            const int o = (la >> 4) * 8 + g;
#pragma unroll
            for (int n = 0; n < BN / 8; n++) {
                const int t = n * 8 + 2 * c;
#pragma unroll
                for (int h = 0; h < 2; h++)
                    stage_sw[(t + h) * G::SW_CS + o] = silu_f(acc[4 * n + h] * a.out_scale) * (acc[4 * n + 2 + h] * a.out_scale);
            }
            asm volatile("bar.sync 1, 256;" ::: "memory"); /* the consumers only */
            constexpr int NB = BM / 2 / 16;
            for (int u = ct; u < BN * NB; u += 256) {
                const int t = u / NB, blk = u % NB;
                const float *v = stage_sw + t * G::SW_CS + blk * 16;
                float sum = 0.0f;
                uint32_t hi[8], lo[8];
#pragma unroll
                for (int k = 0; k < 16; k += 2) {
                    const int c0 = (k & 8) + ((k & 7) >> 1);
                    const float x0 = v[c0], x1 = v[c0 + 4];
                    sum += x0 + x1;
                    split_f16x2(x0 * a.y_xs, x1 * a.y_xs, hi[k / 2], lo[k / 2]);
                }
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                if (t < j.nt) {
                    const size_t row = (size_t)(j.y0 + t) * a.y.ld + j.r0 + blk * 16;
                    uint4 *ph = reinterpret_cast<uint4 *>(a.y.hi + row), *pl = reinterpret_cast<uint4 *>(a.y.lo + row);
                    ph[0] = make_uint4(hi[0], hi[1], hi[2], hi[3]), ph[1] = make_uint4(hi[4], hi[5], hi[6], hi[7]);
                    pl[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]), pl[1] = make_uint4(lo[4], lo[5], lo[6], lo[7]);
                    if ((blk & 3) == 0) {
                        const size_t gi = (j.r0 + blk * 16) / 64;
                        a.y.gs[(size_t)(j.y0 + t) * (a.y.ld / 64) + gi] = sum;
                        uint32_t sh, sl;
                        split_f16x2(sum * (1.0f / 16), 0.0f, sh, sl);
                        a.y.sh[(size_t)(j.y0 + t) * 64 + gi] = (uint16_t)sh;
                        a.y.sl[(size_t)(j.y0 + t) * 64 + gi] = (uint16_t)sl;
                    }
                }
            }
            asm volatile("bar.sync 1, 256;" ::: "memory"); /* staging free for the next tile */
        }
    }
#endif
}

int sm_count() {
    static int n = 0;
    if (!n) {
        int dev = 0;
        if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) || n <= 0) n = 132;
    }
    return n;
}

template <int BN, int MT, int MODE, bool GROUPED, int OCC = 1>
cudaError_t launch_one(qh_args a, int n_items_max, cudaStream_t st) {
    using G = geom<BN, MT, MODE, OCC>;
    if (a.A.cols > (GROUPED ? 32 : 64) * BK) return cudaErrorInvalidValue; /* the kernel's KKMAX */
    auto k = qgemm_h_kernel<BN, MT, MODE, GROUPED, OCC>;
    cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)G::smem());
    if (err) return err;
    const int rows = MODE == SWIGLU ? 2 * a.A.rows : a.A.rows; /* SWIGLU: gate and up rows */
    a.n_rb = (rows + G::BM - 1) / G::BM;
    if (!GROUPED) a.n_items = (a.T + BN - 1) / BN;
    const int tiles = a.n_rb * (GROUPED ? n_items_max : a.n_items);
    const int grid = tiles < OCC * sm_count() ? tiles : OCC * sm_count();
    k<<<grid, THREADS, G::smem(), st>>>(a);
    return cudaGetLastError();
}

template <int BN, int MODE, bool GROUPED>
cudaError_t launch_ws(qh_args a, int n_items_max, cudaStream_t st) {
    using G = ws_geom<BN, MODE>;
    if (a.A.cols > (GROUPED ? 32 : 64) * BK) return cudaErrorInvalidValue; /* the kernel's KKMAX */
    auto k = qgemm_hws_kernel<BN, MODE, GROUPED>;
    cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)G::smem());
    if (err) return err;
    const int rows = MODE == SWIGLU ? 2 * a.A.rows : a.A.rows;
    a.n_rb = (rows + G::BM - 1) / G::BM;
    if (!GROUPED) a.n_items = (a.T + BN - 1) / BN;
    const int tiles = a.n_rb * (GROUPED ? n_items_max : a.n_items);
    const int grid = tiles < sm_count() ? tiles : sm_count();
    k<<<grid, WS_THREADS, G::smem(), st>>>(a);
    return cudaGetLastError();
}

/* The tile shape, BN tokens x 128 MT rows (o2: two blocks per SM; ws: the
 * warp-specialised kernel): LILAC_QH_DENSE = ws128 (default), ws64, 128x1,
 * 128x2, 64x2 or 64x1o2; LILAC_QH_MOE = 64x1o2 (default), 64x1, 64x2, ws64
 * (items of 64 slots), 128x1 or ws128 (items of 128). */
enum { S128x1, S128x2, S64x1, S64x2, S64x1o2, SWS128, SWS64 };
int shape_of(const char *env, int dflt) {
    const char *s = getenv(env);
    static const char *const names[] = {"128x1", "128x2", "64x1", "64x2", "64x1o2", "ws128", "ws64"};
    for (int i = 0; s && i < 7; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return dflt;
}

__global__ void scale_max_kernel(const uint16_t *s, size_t n, unsigned *out) {
    unsigned m = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        m = max(m, (unsigned)(s[i] & 0x7fffu)); /* |bf16| orders like its bits */
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(out, m);
}

} // namespace

/* cols: groups in whole 16-byte chunks of the sum planes (8 groups), at
 * most 64 (one swizzled row), and more groups than the loader's lead. */
extern "C" int lc_qgemm_h_supported(const lc_qmat *W) {
    return W->bits == 4 && W->cols % (8 * BK) == 0 && W->cols <= 64 * BK;
}

extern "C" cudaError_t lc_qgemm_h_check(const lc_qmat *W, int *ok, cudaStream_t st) {
    *ok = 0;
    if (!lc_qgemm_h_supported(W)) return cudaSuccess;
    unsigned *d, h[2] = {0, 0};
    cudaError_t err = cudaMalloc(&d, 8);
    if (err) return err;
    const size_t n = (size_t)W->n_mat * W->rows * (W->cols / LC_GROUP);
    if (!(err = cudaMemsetAsync(d, 0, 8, st))) {
        scale_max_kernel<<<256, 256, 0, st>>>(W->s, n, d);
        scale_max_kernel<<<256, 256, 0, st>>>(W->b, n, d + 1);
        if (!(err = cudaGetLastError()) && !(err = cudaMemcpyAsync(h, d, 8, cudaMemcpyDeviceToHost, st)))
            err = cudaStreamSynchronize(st);
    }
    cudaFree(d);
    /* fp16 must hold s (q - 8) and the bias GEMM's 16 (b + 8 s): |b| + 8 |s| < 4000 */
    float ms, mb;
    const uint32_t us = h[0] << 16, ub = h[1] << 16;
    memcpy(&ms, &us, 4), memcpy(&mb, &ub, 4);
    if (!err) *ok = mb + 8.0f * ms < 4000.0f;
    return err;
}

extern "C" cudaError_t lc_qgemm_h(const lc_qmat *W, const lc_xpack *X, int T, float *Y, int ldy, int accumulate,
                                  cudaStream_t st) {
    if (!lc_qgemm_h_supported(W) || !X->f16 || T <= 0 || W->cols > X->ld) return cudaErrorInvalidValue;
    qh_args a = {};
    a.A = a.A2 = *W;
    a.x = *X;
    a.Y = Y, a.ldy = ldy, a.accumulate = accumulate, a.T = T;
    a.x_xs = X->xs ? X->xs : 1.0f;
    a.out_scale = 1.0f / a.x_xs;
    static int shape = -1;
    if (shape < 0) shape = shape_of("LILAC_QH_DENSE", SWS128);
    switch (shape) {
    case S128x2: return launch_one<128, 2, PLAIN, false>(a, 0, st);
    case S64x2: return launch_one<64, 2, PLAIN, false>(a, 0, st);
    case S64x1o2: return launch_one<64, 1, PLAIN, false, 2>(a, 0, st);
    case SWS128: return launch_ws<128, PLAIN, false>(a, 0, st);
    case SWS64: return launch_ws<64, PLAIN, false>(a, 0, st);
    default: return launch_one<128, 1, PLAIN, false>(a, 0, st);
    }
}

static int max_items(int T, int K, int E) { return (T * K) / LC_MOE_TILE + T / LC_MOE_TILE + E + 2; }

static int moe_shape(void) {
    static int shape = -1;
    if (shape < 0) shape = shape_of("LILAC_QH_MOE", S64x1o2);
    return shape;
}

extern "C" int lc_moe_h_tile(void) { return moe_shape() == S128x1 || moe_shape() == SWS128 ? 128 : LC_MOE_TILE; }

extern "C" cudaError_t lc_moe_h_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_qmat *sh_gate, const lc_qmat *sh_up,
                                        const lc_moe_route *r, int T, int K, const lc_xpack *x, const lc_xpack *act,
                                        cudaStream_t st) {
    if (!lc_qgemm_h_supported(gate) || gate->rows % 128 || gate->rows != act->ld || sh_gate->rows != gate->rows ||
        sh_gate->cols != gate->cols || gate->cols > x->ld || !x->f16 || !act->f16)
        return cudaErrorInvalidValue;
    qh_args a = {};
    a.A = *gate, a.A2 = *up, a.S = *sh_gate, a.S2 = *sh_up;
    a.x = *x, a.y = *act, a.T = T, a.E = gate->n_mat;
    a.x_xs = x->xs ? x->xs : 1.0f;
    a.out_scale = 1.0f / a.x_xs;
    a.y_xs = act->xs ? act->xs : 1.0f;
    a.slot_tok = r->slot_tok, a.offset = r->offset, a.tiles = r->tiles, a.ntiles = r->ntiles;
    const int mi = max_items(T, K, gate->n_mat);
    if (r->tile != lc_moe_h_tile()) return cudaErrorInvalidValue;
    switch (moe_shape()) {
    case S128x1: return launch_one<128, 1, SWIGLU, true>(a, mi, st);
    case S64x2: return launch_one<64, 2, SWIGLU, true>(a, mi, st);
    case S64x1o2: return launch_one<64, 1, SWIGLU, true, 2>(a, mi, st);
    case SWS64: return launch_ws<64, SWIGLU, true>(a, mi, st);
    case SWS128: return launch_ws<128, SWIGLU, true>(a, mi, st);
    default: return launch_one<64, 1, SWIGLU, true>(a, mi, st);
    }
}

extern "C" cudaError_t lc_moe_h_down(const lc_qmat *down, const lc_qmat *sh_down, const lc_moe_route *r, int T, int K,
                                     const lc_xpack *act, float *eo, cudaStream_t st) {
    if (!lc_qgemm_h_supported(down) || sh_down->cols != down->cols || sh_down->rows != down->rows ||
        down->cols > act->ld || !act->f16)
        return cudaErrorInvalidValue;
    qh_args a = {};
    a.A = a.A2 = *down, a.S = a.S2 = *sh_down;
    a.x = *act, a.Y = eo, a.ldy = down->rows, a.T = T, a.E = down->n_mat;
    a.x_xs = act->xs ? act->xs : 1.0f;
    a.out_scale = 1.0f / a.x_xs;
    a.slot_tok = r->slot_tok, a.offset = r->offset, a.tiles = r->tiles, a.ntiles = r->ntiles;
    const int mi = max_items(T, K, down->n_mat);
    if (r->tile != lc_moe_h_tile()) return cudaErrorInvalidValue;
    switch (moe_shape()) {
    case S128x1: return launch_one<128, 1, PLAIN, true>(a, mi, st);
    case S64x2: return launch_one<64, 2, PLAIN, true>(a, mi, st);
    case S64x1o2: return launch_one<64, 1, PLAIN, true, 2>(a, mi, st);
    case SWS64: return launch_ws<64, PLAIN, true>(a, mi, st);
    case SWS128: return launch_ws<128, PLAIN, true>(a, mi, st);
    default: return launch_one<64, 1, PLAIN, true>(a, mi, st);
    }
}
