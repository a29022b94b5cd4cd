/* qgemm_test.cu — workshop for the prefill tensor-core GEMMs
 * (src/backend/cuda/prefill/gemm_mma.cu, pack.cu, moe_route.cu): each
 * against a naive fp32 GPU reference (one thread per output, exact
 * dequantisation), then timed at the model's real shapes.
 *   sh bench/kernels/build_qgemm.sh && build/kernels/qgemm_test
 * LILAC_QGEMM_SPLIT=1 times the hi-only variant.  Every 4-bit case runs on
 * both paths: the bf16 kernels (gemm_mma.cu) and the sm_90a fp16 ones
 * (gemm_wgmma.cu, "f16"); LILAC_QH_OCC=1 runs the latter's 64-token
 * kernels one block per SM. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <algorithm>

#include "backend/cuda/cuda_ops.h"
#include "workshop.h"

static int failures = 0;

static lc_qmat make_qmat(int rows, int cols, int bits, int n_mat, uint64_t seed) {
    lc_qmat m = {};
    m.rows = rows, m.cols = cols, m.bits = bits, m.n_mat = n_mat;
    const size_t wn = (size_t)n_mat * rows * cols * bits / 32, gn = (size_t)n_mat * rows * cols / 64;
    uint32_t *w;
    uint16_t *s, *b;
    CK(cudaMalloc(&w, wn * 4));
    CK(cudaMalloc(&s, gn * 2));
    CK(cudaMalloc(&b, gn * 2));
    const float s0 = bits == 4 ? 0.02f / 4.6f : 0.02f / 73.9f, mid = bits == 4 ? 7.5f : 127.5f;
    CK(lc_fill_u32(w, wn, seed, 0));
    CK(lc_fill_bf16(s, gn, seed + 1, 0.9f * s0, 1.1f * s0, 0));
    CK(lc_fill_bf16(b, gn, seed + 2, -mid * 1.1f * s0, -mid * 0.9f * s0, 0));
    m.w = w, m.s = s, m.b = b;
    return m;
}

__device__ float bf(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* y[t, r] = sum_c x[xrow(t), c] * (s q + b) for matrix mat */
__device__ float naive_dot(const lc_qmat &W, int mat, int r, const float *x) {
    const size_t row = (size_t)mat * W.rows + r;
    const uint32_t *w = W.w + row * (W.cols * W.bits / 32);
    float acc = 0.0f;
    for (int c = 0; c < W.cols; c++) {
        const int per = 32 / W.bits;
        const uint32_t q = (w[c / per] >> (W.bits * (c % per))) & ((1u << W.bits) - 1);
        const size_t g = row * (W.cols / 64) + c / 64;
        acc = fmaf(bf(W.s[g]) * (float)q + bf(W.b[g]), x[c], acc);
    }
    return acc;
}

__global__ void naive_gemm(lc_qmat W, const float *X, int T, float *Y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (r < W.rows) Y[(size_t)t * W.rows + r] = naive_dot(W, 0, r, X + (size_t)t * W.cols);
}

__device__ float silu(float x) { return x / (1.0f + expf(-x)); }

/* act[t, k, i] for the routed experts, and the shared expert at k = K */
__global__ void naive_gate_up(lc_qmat G, lc_qmat U, lc_qmat SG, lc_qmat SU, const int32_t *ids, int K, const float *X,
                              float *act) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y, k = blockIdx.z;
    if (i >= G.rows) return;
    const float *x = X + (size_t)t * G.cols;
    float g, u;
    if (k < K) {
        const int e = ids[t * K + k];
        g = naive_dot(G, e, i, x), u = naive_dot(U, e, i, x);
    } else {
        g = naive_dot(SG, 0, i, x), u = naive_dot(SU, 0, i, x);
    }
    act[((size_t)t * (K + 1) + k) * G.rows + i] = silu(g) * u;
}

__global__ void naive_down(lc_qmat Dn, lc_qmat SD, const int32_t *ids, const float *w, const float *sg, int K,
                           const float *act, float *h) {
    const int d = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (d >= Dn.rows) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++)
        acc += w[t * K + k] * naive_dot(Dn, ids[t * K + k], d, act + ((size_t)t * (K + 1) + k) * Dn.cols);
    acc += sg[t] * naive_dot(SD, 0, d, act + ((size_t)t * (K + 1) + K) * Dn.cols);
    h[(size_t)t * Dn.rows + d] += acc;
}

static void compare(const char *what, const float *dref, const float *dgot, size_t n) {
    std::vector<float> a(n), b(n);
    CK(cudaMemcpy(a.data(), dref, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), dgot, n * 4, cudaMemcpyDeviceToHost));
    double md = 0, mref = 0, se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (!(d <= md)) md = d;
        mref = fmax(mref, fabs(a[i]));
        se += d * d, sr += (double)a[i] * a[i];
    }
    const double rel = sqrt(se / (sr > 0 ? sr : 1));
    const bool ok = rel < 2e-3 && md <= 1e-2 * mref;
    printf("  %-40s max |d| %.3g (max |ref| %.3g), rms rel %.3g  %s\n", what, md, mref, rel, ok ? "ok" : "FAIL");
    if (!ok) failures++;
}

static float *rand_f32(size_t n, uint64_t seed, float lo, float hi) {
    float *p;
    CK(cudaMalloc(&p, n * 4));
    CK(lc_fill_f32(p, n, seed, lo, hi, 0));
    return p;
}

static bool g_f16 = false; /* run the fp16 (gemm_wgmma.cu) path */

static lc_xpack make_pack(int rows, int ld, float xs = 1.0f) {
    lc_xpack p = {};
    p.ld = ld;
    p.f16 = g_f16, p.xs = xs;
    CK(cudaMalloc(&p.hi, (size_t)rows * ld * 2));
    CK(cudaMalloc(&p.lo, (size_t)rows * ld * 2));
    CK(cudaMalloc(&p.gs, (size_t)rows * ld / 64 * 4));
    CK(cudaMalloc(&p.sh, (size_t)rows * 64 * 2));
    CK(cudaMalloc(&p.sl, (size_t)rows * 64 * 2));
    return p;
}

template <typename F>
static float time_ms(F f, int reps = 10) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    f();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        CK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void dense_case(int rows, int cols, int bits, int T, bool check, bool exact = false) {
    lc_qmat W = make_qmat(rows, cols, bits, 1, 100 + rows + cols);
    float *X = rand_f32((size_t)T * cols, 7, -1.0f, 1.0f), *Y, *R;
    CK(cudaMalloc(&Y, (size_t)T * rows * 4));
    CK(cudaMalloc(&R, (size_t)T * rows * 4));
    lc_xpack p = make_pack(T, cols);
    if (exact) CK(cudaMalloc(&p.lo2, (size_t)T * cols * 2));
    CK(lc_pack(X, cols, T, cols, nullptr, 0.0f, &p, 0));
    auto gemm = [&] {
        return exact ? lc_qgemm_exact(&W, &p, T, Y, rows, 0)
                     : g_f16 ? lc_qgemm_h(&W, &p, T, Y, rows, 0, 0) : lc_qgemm(&W, &p, T, Y, rows, 0, 0);
    };
    CK(gemm());
    char name[96];
    if (check) {
        naive_gemm<<<dim3((rows + 127) / 128, T), 128>>>(W, X, T, R);
        CK(cudaGetLastError());
        snprintf(name, sizeof name, "dense %dx%d %d-bit T=%d%s", rows, cols, bits, T,
                 exact ? " exact" : g_f16 ? " f16" : "");
        compare(name, R, Y, (size_t)T * rows);
    }
    const float ms = time_ms([&] { gemm(); });
    const float msp = time_ms([&] { lc_pack(X, cols, T, cols, nullptr, 0.0f, &p, 0); });
    printf("  time dense %5d x %5d %d-bit T=%5d%s: %.3f ms, %.0f TFLOP/s (pack %.3f ms)\n", rows, cols, bits, T,
           g_f16 ? " f16" : "    ", ms, 2.0 * rows * cols * T / (ms * 1e-3) / 1e12, msp);
    cudaFree(X), cudaFree(Y), cudaFree(R), cudaFree(p.hi), cudaFree(p.lo), cudaFree(p.gs);
    cudaFree((void *)W.w), cudaFree((void *)W.s), cudaFree((void *)W.b);
}

static void moe_case(int T, int D, int I, int E, int K, bool check) {
    lc_qmat G = make_qmat(I, D, 4, E, 11), U = make_qmat(I, D, 4, E, 22), Dn = make_qmat(D, I, 4, E, 33);
    lc_qmat SG = make_qmat(I, D, 4, 1, 44), SU = make_qmat(I, D, 4, 1, 55), SD = make_qmat(D, I, 4, 1, 66);
    float *X = rand_f32((size_t)T * D, 9, -1.0f, 1.0f);
    /* random distinct experts per token, skewed so counts are uneven */
    std::vector<int32_t> ids(T * K);
    std::vector<float> w(T * K), sg(T);
    uint64_t x = 5;
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < K; k++) {
            int e;
            bool dup;
            do {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                const double u = (double)(x >> 11) / 9007199254740992.0;
                e = (int)(E * u * u); /* skew toward low ids */
                dup = false;
                for (int j = 0; j < k; j++) dup |= ids[t * K + j] == e;
            } while (dup);
            ids[t * K + k] = e;
            w[t * K + k] = 1.0f / K;
        }
        sg[t] = 0.5f;
    }
    int32_t *dids;
    float *dw, *dsg, *h, *href, *act, *eo;
    CK(cudaMalloc(&dids, T * K * 4));
    CK(cudaMalloc(&dw, T * K * 4));
    CK(cudaMalloc(&dsg, T * 4));
    CK(cudaMemcpy(dids, ids.data(), T * K * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, w.data(), T * K * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dsg, sg.data(), T * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&h, (size_t)T * D * 4));
    CK(cudaMalloc(&href, (size_t)T * D * 4));
    CK(cudaMemset(h, 0, (size_t)T * D * 4));
    CK(cudaMemset(href, 0, (size_t)T * D * 4));
    CK(cudaMalloc(&eo, (size_t)(T * K + T) * D * 4));
    lc_moe_route r = {};
    CK(cudaMalloc(&r.count, (E + 1) * 4));
    CK(cudaMalloc(&r.offset, (E + 2) * 4));
    CK(cudaMalloc(&r.cursor, (E + 1) * 4));
    CK(cudaMalloc(&r.slot_tok, (size_t)(T * K + T) * 4));
    CK(cudaMalloc(&r.slot_of, (size_t)T * K * 4));
    CK(cudaMalloc(&r.tiles, (size_t)(T * K / LC_MOE_TILE + T / LC_MOE_TILE + E + 2) * 4));
    CK(cudaMalloc(&r.ntiles, 4));
    lc_xpack xp = make_pack(T, D), ap = make_pack(T * K + T, I, 1.0f / 16);
    auto gate_up = [&] {
        return g_f16 ? lc_moe_h_gate_up(&G, &U, &SG, &SU, &r, T, K, &xp, &ap, 0)
                     : lc_moe_mma_gate_up(&G, &U, &SG, &SU, &r, T, K, &xp, &ap, 0);
    };
    auto down = [&] {
        return g_f16 ? lc_moe_h_down(&Dn, &SD, &r, T, K, &ap, eo, 0) : lc_moe_mma_down(&Dn, &SD, &r, T, K, &ap, eo, 0);
    };
    r.tile = g_f16 ? lc_moe_h_tile() : LC_MOE_TILE;
    auto run = [&] {
        CK(lc_pack(X, D, T, D, nullptr, 0.0f, &xp, 0));
        CK(lc_moe_route_sort(dids, T, E, K, &r, 0));
        CK(gate_up());
        CK(down());
        CK(lc_moe_route_combine(eo, &r, dw, dsg, T, K, D, h, 0));
    };
    run();
    if (check) {
        CK(cudaMalloc(&act, (size_t)T * (K + 1) * I * 4));
        naive_gate_up<<<dim3((I + 127) / 128, T, K + 1), 128>>>(G, U, SG, SU, dids, K, X, act);
        naive_down<<<dim3((D + 127) / 128, T), 128>>>(Dn, SD, dids, dw, dsg, K, act, href);
        CK(cudaGetLastError());
        char name[96];
        snprintf(name, sizeof name, "moe T=%d D=%d I=%d E=%d%s", T, D, I, E, g_f16 ? " f16" : "");
        compare(name, href, h, (size_t)T * D);
        /* run to run: bitwise */
        std::vector<float> a((size_t)T * D), b((size_t)T * D);
        CK(cudaMemset(h, 0, (size_t)T * D * 4));
        run();
        CK(cudaMemcpy(a.data(), h, a.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemset(h, 0, (size_t)T * D * 4));
        run();
        CK(cudaMemcpy(b.data(), h, b.size() * 4, cudaMemcpyDeviceToHost));
        const bool same = memcmp(a.data(), b.data(), a.size() * 4) == 0;
        printf("  %-40s %s\n", "moe run to run bitwise", same ? "ok" : "FAIL");
        if (!same) failures++;
        cudaFree(act);
    }
    const double fl = 2.0 * 3 * I * D * (double)T * (K + 1);
    const float ms_gu = time_ms([&] { gate_up(); });
    const float ms_dn = time_ms([&] { down(); });
    const float ms_rt = time_ms([&] { lc_moe_route_sort(dids, T, E, K, &r, 0); });
    const float ms_cb = time_ms([&] { lc_moe_route_combine(eo, &r, dw, dsg, T, K, D, h, 0); });
    printf("  time moe T=%d%s: gate/up %.3f ms (%.0f TFLOP/s), down %.3f ms (%.0f TFLOP/s), sort %.3f ms, combine %.3f ms\n", T,
           g_f16 ? " f16" : "", ms_gu, fl * 2 / 3 / (ms_gu * 1e-3) / 1e12, ms_dn, fl / 3 / (ms_dn * 1e-3) / 1e12, ms_rt, ms_cb);
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0; /* correctness only (for compute-sanitizer) */
    if (argc > 1 && strcmp(argv[1], "--small") == 0) { /* small fp16 cases only (racecheck is slow) */
        g_f16 = true;
        dense_case(200, 512, 4, 37, true);
        dense_case(300, 1024, 4, 150, true);
        moe_case(77, 512, 512, 16, 8, true);
        printf("%s (%d failures)\n", failures ? "FAIL" : "all ok", failures);
        return failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "--one") == 0) { /* one fp16 dense and one MoE case at 4K, for ncu */
        g_f16 = true;
        dense_case(12352, 2048, 4, 4096, false);
        moe_case(4096, 2048, 512, 256, 8, false);
        return 0;
    }
    printf("correctness (naive fp32 reference on the GPU):\n");
    dense_case(200, 128, 4, 37, true);       /* ragged rows and tokens, tiny-like width */
    dense_case(257, 2048, 8, 100, true);     /* router: 8-bit, 257 rows */
    dense_case(257, 2048, 8, 100, true, true); /* the router as prefill runs it: all three planes */
    for (int f = 0; f < 2; f++) {
        g_f16 = f;
        if (f) dense_case(200, 512, 4, 37, true); /* ragged; the fp16 path needs cols % 512 */
        dense_case(12352, 2048, 4, 130, true);   /* GDN in_proj */
        dense_case(2048, 4096, 4, 65, true);     /* out_proj */
        dense_case(9216, 2048, 4, 300, true);    /* attention q|k|v, several token blocks */
        if (!f) moe_case(77, 128, 64, 16, 8, true); /* tiny shapes */
        if (!f) moe_case(77, 256, 128, 16, 8, true); /* small shapes */
        if (f) moe_case(77, 512, 512, 16, 8, true);  /* small shapes the fp16 path takes */
        moe_case(300, 2048, 512, 256, 8, true);  /* real shapes */
    }
    g_f16 = false;
    if (quick) {
        printf("%s (%d failures)\n", failures ? "FAIL" : "all ok", failures);
        return failures ? 1 : 0;
    }
    printf("timing (real shapes, 4K-token chunk):\n");
    dense_case(257, 2048, 8, 4096, false, true);
    for (int f = 0; f < 2; f++) {
        g_f16 = f;
        dense_case(12352, 2048, 4, 4096, false);
        dense_case(9216, 2048, 4, 4096, false);
        dense_case(2048, 4096, 4, 4096, false);
        moe_case(4096, 2048, 512, 256, 8, false);
        moe_case(512, 2048, 512, 256, 8, false);
    }
    printf("%s (%d failures)\n", failures ? "FAIL" : "all ok", failures);
    return failures ? 1 : 0;
}
