/* gemv_mma_test.cu — workshop: batch-1 decode GEMV on the tensor cores.
 *
 * The SIMT GEMVs (qdot.cuh chunk_dot) spend ~6 lane-instructions per weight
 * and are issue-bound at ~1/3 of HBM bandwidth.  Here the dot products run on
 * mma.sync m16n8k16 (bf16 in, fp32 accumulate) with the weights as A,
 * dequantised in registers exactly, and the activation x as B, split into
 * three exact bf16 planes so the result keeps fp32-class accuracy:
 *
 *   x = hi + lo + lo2,  hi = bf16(x), lo = bf16(x - hi), lo2 = bf16(x - hi - lo)
 *
 * (each remainder is exact in fp32 and the last fits in 8 bits, so the sum is
 * exactly x).  Products of a 4-bit code and a bf16 are exact in fp32; one mma
 * sums 16 of them per plane and row.
 *
 * ---- Tiles -----------------------------------------------------------------
 * A warp owns one row block of 16 rows and a k-range of NSP "spans"; a span is
 * 128 inputs = 2 quantisation groups = 16 code words per row.  KS = K / (128
 * NSP) warps split the k-range of a row block (split-K, reduced in shared
 * memory); a block holds RB row blocks, RB * KS warps.  Every code load of a
 * warp (2 NSP x 16 B per lane, NSP KB per warp) is issued at entry, before
 * griddepcontrol.wait, as stream_gemv (decode/gemv_stream.cuh) does, so
 * (nearly) the whole matrix is requested at once.
 *
 * ---- Fragment mapping (lane = 4 g + c, g = lane / 4, c = lane % 4) ---------
 * A fragment of m16n8k16 (row-major A, 16 x 16): a0 = A[g][2c, 2c+1],
 * a1 = A[g+8][2c, 2c+1], a2 = A[g][2c+8, 2c+9], a3 = A[g+8][2c+8, 2c+9]
 * (lower k in the lower half of each register).
 * Loads: lane (g, c) reads 16 B = words 4c..4c+3 of the span's 16 words, of
 * row g (qa) and of row g+8 (qb).  So lanes c = 0, 1 hold group 0 of the span
 * (words 0..7), lanes c = 2, 3 group 1 (words 8..15).
 * Dequantisation: for word v (codes v_0..v_7, v_0 in the lowest nibble),
 * ((v >> 4i) & 0x000f000f) | 0x43004300 is the bf16 pair (128 + v_i,
 * 128 + v_{i+4}); one fma.rn.bf16x2 (t * 1 - 136) gives (v_i - 8, v_{i+4} - 8)
 * exactly (centred codes, as mma.cuh's q4x2_bf16: keeps the affine fold free
 * of cancellation).
 * A span takes 8 mma steps t = 0..7.  Step t uses word v = 4c + t/2 (component
 * t/2 of the lane's uint4) and pairs i = 2 (t % 2), i + 1:
 *     a0 = pair i of row g's word,  a2 = pair i + 1 of row g's word,
 *     a1, a3 = the same of row g+8's word.
 * So logical k (2c, 2c+1, 2c+8, 2c+9) of step t are the span's inputs
 * (8v + i, 8v + i + 4, 8v + i + 1, 8v + i + 5): a function of c and t only,
 * as the mma needs (every row of A and B must agree on what k means), and
 * over t = 2m, 2m + 1 word v's eight inputs are each used once.
 * B fragment (col-major B, 16 x 8): b0 = B[2c, 2c+1][n = g], b1 = B[2c+8,
 * 2c+9][n = g].  Because lanes c = 0, 1 carry group 0 and c = 2, 3 group 1,
 * one mma can keep the two groups apart in its columns:
 *     n = 0, 1, 2: planes hi, lo, lo2 of x on group 0's k slots (c < 2), 0 on group 1's;
 *     n = 3, 4, 5: planes hi, lo, lo2 of x on group 1's k slots (c >= 2), 0 on group 0's;
 *     n = 6, 7:    zero.
 * So lanes with g < 3 and c < 2, or 3 <= g < 6 and c >= 2, hold plane g % 3
 * of x at their step's inputs; the other 20 lanes hold zeros.  For the span
 * the lane's b0, b1 of steps 2q, 2q + 1 are the plane at word v = 4c + q:
 * (x_0 | x_4, x_1 | x_5, x_2 | x_6, x_3 | x_7) — one 16 B shared-memory load.
 * C fragment: c0, c1 = C[g][2c, 2c+1], c2, c3 = C[g+8][2c, 2c+1].  After
 * the 8 steps of a span (a fresh accumulator each span), column n of row r is
 * sum over the group of (q - 8) * plane: lane c = 0 has group 0's hi, lo;
 * c = 1 group 0's lo2 and group 1's hi; c = 2 group 1's lo, lo2; c = 3 zeros.
 * Each lane scales its own two columns by their group's scale (selected
 * once per lane with a prmt selector) into fp32 running sums for rows g and
 * g+8; lanes are summed (two xor shuffles) once per warp at the end.
 *
 * ---- Affine terms ------------------------------------------------------------
 * y[r] = sum_groups ( s * sum (q - 8) x + (b + 8 s) * xsum ), xsum the group's
 * sum of x (once per block, in shared memory).  Lane c takes the bias term of
 * its span words m = c, c + 4, ... (two groups each), so no lane does it all.
 *
 * The block prepares x once: RMSNorm(x) * norm_w (in_proj, lm_head), the
 * three planes in fragment order (only the 12 lanes with data are stored;
 * the others read a zeroed 768 B block with a zero stride), the group sums.
 *
 * A second design, tq_gemv (below, same tiles), runs the integer mma instead:
 * u8 codes times four s8 digits of a fixed-point x, exact int32 sums, 3
 * instructions of dequantisation per 8 codes instead of 11.
 *
 * Compared here: the engine's default kernel for each shape (lc_gemv /
 * lc_gemv_rms, LC_GEMV_AUTO) and several (NSP, RB) choices, each checked
 * against a CPU fp64 reference (max |d| / max |ref| <= 1e-5).  Timing as
 * gemv_test.cu: a CUDA graph of 40 back-to-back launches (PDL on), weights
 * rotated over copies that exceed L2, best of 20 replays.
 *   sh bench/kernels/build_gemv_mma.sh && build/kernels/gemv_mma_test [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend/cuda/decode/gemv_tq.cuh"
#include "backend/cuda/mma.cuh"
#include "workshop.h"

static int g_quick = 0, g_failures = 0;
static double g_copy_gbs = 0;

using namespace gemv_stream;

/* ---- the kernel --------------------------------------------------------------- */
namespace tc {

constexpr int SLOTS = 12; /* lanes holding B data: 3 planes x 4 values of c */

/* (v >> SH) & 0x000f000f | 0x43004300 minus 136: the bf16 pair (code - 8) of
 * nibbles SH/4 and SH/4 + 4 of v (see the top of the file).  The mask and
 * the exponent go through one lop3 with the exponent in a register (a SASS
 * LOP3 takes one immediate: written in C, the and and the or become two). */
template <int SH>
__device__ __forceinline__ uint32_t deq(uint32_t v) {
    uint32_t t;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(t) : "r"(v >> SH), "n"(0x000f000f), "r"(0x43004300u)); /* (a & b) | c */
    asm("fma.rn.bf16x2 %0, %0, %1, %2;" : "+r"(t) : "r"(0x3f803f80u), "r"(0xc308c308u));
    return t;
}

/* One 8-step span: codes qa (row g), qb (row g+8) of the lane, B fragments
 * bq[q] (steps 2q, 2q+1); returns the C fragment. */
__device__ __forceinline__ void span_mma(float (&acc)[4], const uint4 qa, const uint4 qb, const uint4 (&bq)[4]) {
    const uint32_t wa[4] = {qa.x, qa.y, qa.z, qa.w}, wb[4] = {qb.x, qb.y, qb.z, qb.w};
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint32_t a_lo[4] = {deq<0>(wa[q]), deq<0>(wb[q]), deq<4>(wa[q]), deq<4>(wb[q])};   /* step 2q:   i = 0 */
        const uint32_t a_hi[4] = {deq<8>(wa[q]), deq<8>(wb[q]), deq<12>(wa[q]), deq<12>(wb[q])}; /* step 2q+1: i = 2 */
        if (q == 0) mma_16816(acc, a_lo, bq[q].x, bq[q].y, zero);
        else mma_16816(acc, a_lo, bq[q].x, bq[q].y, acc);
        mma_16816(acc, a_hi, bq[q].z, bq[q].w, acc);
    }
}

__device__ __forceinline__ float prmt_bf16(uint32_t w, uint32_t sel) { /* one half of w as a float */
    uint32_t r;
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(r) : "r"(w), "r"(sel));
    return __uint_as_float(r);
}

/* x (RMSNorm(x) * norm_w with norm_w) into the B planes bf[span][q][slot]
 * (uint4, slot = plane * 4 + c; span NSPAN is zeros, read by the lanes that
 * hold no data) and the group sums xs[K / 64].  One task = 8 consecutive
 * inputs = word v of a span.  All threads call it (barriers). */
template <int K, int NT>
__device__ __forceinline__ void prep_x(const float *__restrict__ x, const float *__restrict__ norm_w, float eps, uint4 *bf,
                                       float *xs, float *scratch) {
    constexpr int TASKS = K / 8, PER = (TASKS + NT - 1) / NT, NSPAN = K / 128;
    const int tid = threadIdx.x;
    float v[PER][8];
    gemv_tq::load_tasks<K, NT, PER>(x, norm_w, eps, v, scratch); /* tq's load and norm */
    if (tid < 4 * SLOTS) bf[NSPAN * 4 * SLOTS + tid] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int t = tid + i * NT;
        if (t < TASKS) { /* warp-uniform (TASKS and NT are multiples of 32) */
            uint32_t h[3][8];
            float sum = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; e++) {
                float r = v[i][e];
                sum += r;
#pragma unroll
                for (int p = 0; p < 3; p++) {
                    h[p][e] = f32_to_bf16(r);
                    r -= bf16_to_f32((uint16_t)h[p][e]); /* exact */
                }
            }
            const int span = t / 16, wv = t % 16, c = wv / 4, q = wv % 4;
#pragma unroll
            for (int p = 0; p < 3; p++)
                bf[(span * 4 + q) * SLOTS + p * 4 + c] =
                    make_uint4(h[p][0] | h[p][4] << 16, h[p][1] | h[p][5] << 16, h[p][2] | h[p][6] << 16, h[p][3] | h[p][7] << 16);
            /* group sum: the 8 tasks of a group are 8 consecutive lanes */
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            sum += __shfl_xor_sync(0xffffffffu, sum, 4);
            if (t % 8 == 0) xs[t / 8] = sum;
        }
    }
    __syncthreads();
}

/* y[r] = residual[r] + W[r] . x, x optionally RMSNorm(x) * norm_w; W.cols == K,
 * W.rows a multiple of 16 * RB (the launcher checks). */
template <int K, int NSP, int RB, int MINB>
__global__ void __launch_bounds__(RB * (K / (128 * NSP)) * 32, MINB)
    tc_gemv(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps, float *__restrict__ y,
            const float *__restrict__ residual) {
    constexpr int KS = K / (128 * NSP), NW = RB * KS, NT = NW * 32, NSPAN = K / 128, G = K / 64, NB = (NSP + 3) / 4;
    static_assert(K % (128 * NSP) == 0, "k-range must divide K");
    __shared__ uint4 bf[(NSPAN + 1) * 4 * SLOTS];
    __shared__ __align__(16) float xs[G]; /* read as float2 */
    __shared__ float red[NW * 16], scratch[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
    const int ks = warp % KS, r0 = ((blockIdx.x * RB) + warp / KS) * 16 + g;

    /* codes of rows g, g+8 (16 B per span each), the scales of the k-range
     * (word m = the span's two groups), the bias words this lane folds */
    uint4 qa[NSP], qb[NSP];
    uint32_t sa[NSP], sb[NSP], ba[NB], bb[NB], s2a[NB], s2b[NB];
    {
        const uint4 *wa = reinterpret_cast<const uint4 *>(W.w + (size_t)r0 * (K / 8)) + ks * NSP * 4 + c;
        const uint4 *wb = wa + 8 * (K / 32);
#pragma unroll
        for (int m = 0; m < NSP; m++) qa[m] = ld_stream(wa + 4 * m), qb[m] = ld_stream(wb + 4 * m);
        const uint32_t *pa = reinterpret_cast<const uint32_t *>(W.s + (size_t)r0 * G) + ks * NSP;
        const uint32_t *pb = pa + 8 * (G / 2);
        const uint32_t *qpa = reinterpret_cast<const uint32_t *>(W.b + (size_t)r0 * G) + ks * NSP;
        const uint32_t *qpb = qpa + 8 * (G / 2);
#pragma unroll
        for (int m = 0; m < NSP; m++) sa[m] = __ldg(pa + m), sb[m] = __ldg(pb + m);
#pragma unroll
        for (int i = 0; i < NB; i++) {
            const int m = c + 4 * i < NSP ? c + 4 * i : 0; /* lanes past NSP fold nothing (below) */
            ba[i] = __ldg(qpa + m), bb[i] = __ldg(qpb + m), s2a[i] = __ldg(pa + m), s2b[i] = __ldg(pb + m);
        }
    }
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    prep_x<K, NT>(x, norm_w, eps, bf, xs, scratch);

    /* B planes: lanes without data read the zero block with stride 0 */
    const bool has_b = g < 6 && (g < 3) == (c < 2);
    const uint4 *bp = bf + (has_b ? ks * NSP * 4 * SLOTS + (g % 3) * 4 + c : NSPAN * 4 * SLOTS);
    const int bstride = has_b ? 4 * SLOTS : 0;
    /* column 2c takes group 0 of the span unless c >= 2, column 2c+1 unless c >= 1 */
    const uint32_t selA = c >= 2 ? 0x3244u : 0x1044u, selB = c >= 1 ? 0x3244u : 0x1044u;
    float ya = 0.0f, yb = 0.0f;
#pragma unroll
    for (int m = 0; m < NSP; m++) {
        uint4 bq[4];
#pragma unroll
        for (int q = 0; q < 4; q++) bq[q] = bp[m * bstride + q * SLOTS];
        float acc[4];
        span_mma(acc, qa[m], qb[m], bq);
        ya = fmaf(acc[0], prmt_bf16(sa[m], selA), ya);
        ya = fmaf(acc[1], prmt_bf16(sa[m], selB), ya);
        yb = fmaf(acc[2], prmt_bf16(sb[m], selA), yb);
        yb = fmaf(acc[3], prmt_bf16(sb[m], selB), yb);
    }
    /* bias terms of words m = c + 4i: (b + 8 s) * xsum for both groups */
#pragma unroll
    for (int i = 0; i < NB; i++) {
        const int m = c + 4 * i;
        if (m < NSP) {
            const float2 xg = *reinterpret_cast<const float2 *>(xs + 2 * (ks * NSP + m));
            ya = fmaf(fmaf(8.0f, prmt_bf16(s2a[i], 0x1044u), prmt_bf16(ba[i], 0x1044u)), xg.x, ya);
            ya = fmaf(fmaf(8.0f, prmt_bf16(s2a[i], 0x3244u), prmt_bf16(ba[i], 0x3244u)), xg.y, ya);
            yb = fmaf(fmaf(8.0f, prmt_bf16(s2b[i], 0x1044u), prmt_bf16(bb[i], 0x1044u)), xg.x, yb);
            yb = fmaf(fmaf(8.0f, prmt_bf16(s2b[i], 0x3244u), prmt_bf16(bb[i], 0x3244u)), xg.y, yb);
        }
    }
    ya += __shfl_xor_sync(0xffffffffu, ya, 1), yb += __shfl_xor_sync(0xffffffffu, yb, 1);
    ya += __shfl_xor_sync(0xffffffffu, ya, 2), yb += __shfl_xor_sync(0xffffffffu, yb, 2);
    gemv_tq::store_rows<RB, KS>(red, ya, yb, y, residual); /* as tq_gemv's split-K sum */
}

template <int K, int NSP, int RB, int MINB>
static cudaError_t launch(const lc_qmat &W, const float *x, const float *norm_w, float eps, float *y, const float *residual,
                          cudaStream_t st, bool pdl = true) {
    constexpr int NT = RB * (K / (128 * NSP)) * 32;
    if (W.cols != K || W.bits != 4 || W.rows % (16 * RB)) return cudaErrorInvalidValue;
    return launch_k(tc_gemv<K, NSP, RB, MINB>, dim3(W.rows / (16 * RB)), dim3(NT), 0, st, pdl, W, x, norm_w, eps, y,
                    residual);
}

} // namespace tc

/* ---- the integer variant: the engine's gemv_tq.cuh (the design notes are
 * there): u8 codes x four s8 digits of a fixed-point x, exact int32 sums,
 * 3 instructions of dequantisation per 8 codes instead of 11. */
template <int K, int NSP, int RB, int MINB>
static cudaError_t tq_launch(const lc_qmat &W, const float *x, const float *norm_w, float eps, float *y,
                             const float *residual, cudaStream_t st, bool pdl) {
    return gemv_tq::launch_gemv<K, NSP, RB, MINB>(W, x, norm_w, eps, y, residual, nullptr, st, pdl);
}

/* ---- host: data, reference, timing (as gemv_test.cu) -------------------------- */

/* max |d| / max |ref| over the rows checked (every `stride`-th) */
static double rel_err(const std::vector<double> &ref, const float *dy, int stride) {
    std::vector<float> got(ref.size());
    CK(cudaMemcpy(got.data(), dy, got.size() * 4, cudaMemcpyDeviceToHost));
    double maxd = 0, maxref = 0;
    for (size_t i = 0; i < ref.size(); i += stride) {
        const double d = fabs(ref[i] - got[i]);
        if (!(d <= maxd)) maxd = d; /* NaN sticks */
        maxref = fmax(maxref, fabs(ref[i]));
    }
    return maxd / maxref;
}

/* ---- one shape: the engine's default beside the tensor-core variants ---------- */
typedef cudaError_t (*kfn)(const lc_qmat &, const float *, const float *, float, float *, const float *, cudaStream_t, bool);
struct variant {
    const char *name;
    kfn k; /* nullptr: the engine's lc_gemv / lc_gemv_rms, LC_GEMV_AUTO */
};
struct dense {
    std::vector<lc_qmat> W; /* copies, rotated */
    const float *x, *nw, *res;
    float *y;
    kfn k;
};
static void dense_run(int rep, cudaStream_t st, void *p) {
    dense *d = (dense *)p;
    const lc_qmat &W = d->W[rep % d->W.size()];
    if (d->k) CK(d->k(W, d->x, d->nw, 1e-6f, d->y, d->res, st, true));
    else CK(d->nw ? lc_gemv_rms(&W, d->x, d->nw, 1e-6f, d->y, nullptr, nullptr, st) : lc_gemv(&W, 0, d->x, d->y, d->res, nullptr, st));
}

static void bench(const char *what, int rows, int cols, bool norm, bool residual, const variant *vs, int nv) {
    const int stride = rows > 100000 ? 16 : 1;
    const int qrows = g_quick && rows > 100000 ? 16384 : rows; /* --quick: a slice of lm_head */
    lc_qmat m0 = make_qmat(qrows, cols, 1, 1000 + rows);
    const size_t want = (size_t)400 << 20; /* well beyond the 60 MB L2 */
    const int copies = g_quick ? 1 : (int)((want + qbytes(m0) - 1) / qbytes(m0));
    dense d = {};
    d.W.push_back(m0);
    for (int i = 1; i < copies; i++) d.W.push_back(make_qmat(qrows, cols, 1, 5000 + 7 * i + rows));
    std::vector<float> hx = rnd(cols, 11, -1.f, 1.f), hn = rnd(cols, 12, 0.5f, 1.5f), hr = rnd(qrows, 13, -1.f, 1.f);
    d.x = up_f32(hx), d.nw = norm ? up_f32(hn) : nullptr, d.res = residual ? up_f32(hr) : nullptr;
    CK(cudaMalloc(&d.y, (size_t)qrows * 4));
    hmat h;
    to_host(m0, 0, h);
    std::vector<double> xd(cols), ref(qrows, 0.0);
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)hx[c] * hx[c];
    const double rr = norm ? 1.0 / sqrt(ss / cols + 1e-6) : 1.0;
    for (int c = 0; c < cols; c++) xd[c] = norm ? hx[c] * rr * hn[c] : hx[c];
    for (int r = 0; r < qrows; r += stride) ref[r] = (residual ? hr[r] : 0.0) + ref_dot(h, cols, r, xd.data());
    printf("\n%s — %.2f MB per launch, %d weight copies rotated\n", what, qbytes(m0) / 1e6, copies);
    printf("  %-36s %9s %9s %8s  %10s\n", "variant", "us", "GB/s", "% copy", "rel err");
    for (int v = 0; v < nv; v++) {
        d.k = vs[v].k;
        lc_gemv_set_kernels(LC_GEMV_AUTO);
        CK(cudaMemset(d.y, 0, (size_t)qrows * 4));
        dense_run(0, 0, &d);
        CK(cudaDeviceSynchronize());
        const double e = rel_err(ref, d.y, stride);
        const bool ok = e <= 1e-5;
        const double us = time_graph(dense_run, &d, g_quick ? 2 : 40, g_quick ? 1 : 20), gbs = qbytes(m0) / (us * 1e-6) / 1e9;
        printf("  %-36s %9.2f %9.0f %7.1f%%  %10.3g  %s\n", vs[v].name, us, gbs, 100.0 * gbs / g_copy_gbs, e, ok ? "PASS" : "FAIL");
        if (!ok) g_failures++;
    }
    for (auto &w : d.W) free_qmat(w);
    cudaFree((void *)d.x), cudaFree((void *)d.nw), cudaFree((void *)d.res), cudaFree(d.y);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) g_quick = 1;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gemv_mma_test on %s, %d SMs, L2 %d MB%s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
           g_quick ? " (--quick)" : "");
    g_copy_gbs = copy_gbs(g_quick ? ((size_t)64 << 20) : ((size_t)1 << 30), g_quick ? 1 : 5); /* read + write of 1 GiB */
    printf("device-to-device copy: %.0f GB/s\n", g_copy_gbs);
    printf("timing: graph of %d back-to-back launches (PDL on), best of %d replays; rel err = max|d| / max|ref| vs CPU fp64\n",
           g_quick ? 2 : 40, g_quick ? 1 : 20);

    /* NSP spans of 128 inputs per warp (NSP KB of codes in flight per warp), RB row blocks of 16 per block */
    const variant v2048[] = {
        {"engine default (by shape)", nullptr},
        {"tc NSP=4 RB=2 (8 warps)", tc::launch<2048, 4, 2, 3>},
        {"tc NSP=4 RB=4 (16 warps)", tc::launch<2048, 4, 4, 1>},
        {"tc NSP=8 RB=4 (8 warps, 8 KB/warp)", tc::launch<2048, 8, 4, 2>},
        {"tc NSP=2 RB=2 (16 warps, 2 KB/warp)", tc::launch<2048, 2, 2, 2>},
        {"tq int8 NSP=4 RB=2 (8 warps)", tq_launch<2048, 4, 2, 3>},
        {"tq int8 NSP=4 RB=4 (16 warps)", tq_launch<2048, 4, 4, 1>},
        {"tq int8 NSP=8 RB=4 (8 warps, 8 KB/warp)", tq_launch<2048, 8, 4, 2>},
    };
    const variant v4096[] = {
        {"engine default (by shape)", nullptr},
        {"tc NSP=4 RB=1 (8 warps)", tc::launch<4096, 4, 1, 2>},
        {"tc NSP=2 RB=1 (16 warps)", tc::launch<4096, 2, 1, 2>},
        {"tc NSP=1 RB=1 (32 warps)", tc::launch<4096, 1, 1, 1>},
        {"tc NSP=8 RB=2 (8 warps, 64 blocks)", tc::launch<4096, 8, 2, 2>},
        {"tq int8 NSP=4 RB=1 (8 warps)", tq_launch<4096, 4, 1, 2>},
        {"tq int8 NSP=2 RB=1 (16 warps)", tq_launch<4096, 2, 1, 2>},
    };
    const int n2 = sizeof v2048 / sizeof *v2048, n4 = sizeof v4096 / sizeof *v4096;
    bench("GDN in_proj qkv|z|b|a, 12352 x 2048, fused RMSNorm", 12352, 2048, true, false, v2048, n2);
    bench("attention q|k|v, 9216 x 2048, fused RMSNorm", 9216, 2048, true, false, v2048, n2);
    bench("out_proj + residual, 2048 x 4096", 2048, 4096, false, true, v4096, n4);
    bench("lm_head, 248320 x 2048, fused final norm (every 16th row checked)", 248320, 2048, true, false, v2048, n2);
    CK(cudaDeviceSynchronize());
    printf("\n%s: %d failure(s)\n", g_failures ? "FAIL" : "all passed", g_failures);
    return g_failures ? 1 : 0;
}
