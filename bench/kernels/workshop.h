/* workshop.h — host helpers of the GPU kernel workshops (bench/kernels/):
 * error checks, synthetic 4-bit matrices like the engine's, their host copies
 * and an fp64 reference dot, random vectors, a CUDA-graph timer and the
 * device-to-device copy bandwidth the timings are compared with, and the
 * MoE workshops' inputs with their fp64 reference.  Link
 * src/backend/cuda/fill.cu (lc_fill_*). */
#ifndef LILAC_BENCH_WORKSHOP_H
#define LILAC_BENCH_WORKSHOP_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend/cuda/cuda_ops.h"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t err_ = (x);                                                                \
        if (err_) {                                                                            \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(err_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* n_mat stacked 4-bit matrices of the engine's synthetic weights
 * (cuda_backend.c: std ~0.02), random codes from seed */
static inline lc_qmat make_qmat(int rows, int cols, int n_mat, uint64_t seed) {
    lc_qmat m = {};
    m.rows = rows, m.cols = cols, m.bits = 4, m.n_mat = n_mat;
    const size_t wn = (size_t)n_mat * rows * cols / 8, gn = (size_t)n_mat * rows * cols / 64;
    uint32_t *w;
    uint16_t *s, *b;
    CK(cudaMalloc(&w, wn * 4));
    CK(cudaMalloc(&s, gn * 2));
    CK(cudaMalloc(&b, gn * 2));
    const float s0 = 0.02f / 4.6f, mid = 7.5f;
    CK(lc_fill_u32(w, wn, seed, 0));
    CK(lc_fill_bf16(s, gn, seed + 1, 0.9f * s0, 1.1f * s0, 0));
    CK(lc_fill_bf16(b, gn, seed + 2, -mid * 1.1f * s0, -mid * 0.9f * s0, 0));
    m.w = w, m.s = s, m.b = b;
    return m;
}
static inline void free_qmat(lc_qmat &m) { cudaFree((void *)m.w), cudaFree((void *)m.s), cudaFree((void *)m.b); }
/* bytes one matrix of the stack streams: codes plus bf16 scale and bias per 64 */
static inline size_t qbytes(const lc_qmat &m) { return (size_t)m.rows * m.cols / 2 + (size_t)m.rows * m.cols / 64 * 4; }

struct hmat { /* host copy of one matrix of a stack */
    std::vector<uint32_t> w;
    std::vector<uint16_t> s, b;
};
/* rows [e*rows, (e+1)*rows) of the stack: matrix e, into h */
static inline void to_host(const lc_qmat &m, int e, hmat &h) {
    const size_t wpr = m.cols / 8, gpr = m.cols / 64, off = (size_t)e * m.rows;
    h.w.resize(wpr * m.rows), h.s.resize(gpr * m.rows), h.b.resize(gpr * m.rows);
    CK(cudaMemcpy(h.w.data(), m.w + off * wpr, h.w.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.s.data(), m.s + off * gpr, h.s.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.b.data(), m.b + off * gpr, h.b.size() * 2, cudaMemcpyDeviceToHost));
}
static inline double bfh(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* row r of h dotted with x, in fp64 */
static inline double ref_dot(const hmat &h, int cols, int r, const double *x) {
    const uint32_t *w = h.w.data() + (size_t)r * cols / 8;
    double acc = 0;
    for (int g = 0; g < cols / 64; g++) {
        const double s = bfh(h.s[(size_t)r * cols / 64 + g]), b = bfh(h.b[(size_t)r * cols / 64 + g]);
        for (int c = g * 64; c < g * 64 + 64; c++) acc += (s * ((w[c / 8] >> (4 * (c % 8))) & 15u) + b) * x[c];
    }
    return acc;
}

/* nsets sets of k distinct ids below n (the MoE workshops' random routings;
 * xorshift from a fixed seed: the same sets on every machine) */
static inline std::vector<int32_t> distinct_ids(int nsets, int k, int n) {
    std::vector<int32_t> ids((size_t)nsets * k);
    uint64_t z = 12345;
    for (int s = 0; s < nsets; s++)
        for (int j = 0; j < k; j++) {
            int e;
            bool dup;
            do {
                z ^= z << 13, z ^= z >> 7, z ^= z << 17;
                e = (int)(z % n), dup = false;
                for (int i = 0; i < j; i++) dup |= ids[(size_t)s * k + i] == e;
            } while (dup);
            ids[(size_t)s * k + j] = e;
        }
    return ids;
}

static inline std::vector<float> dl(const float *d, size_t n) {
    std::vector<float> v(n);
    CK(cudaMemcpy(v.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return v;
}
static inline float *up_f32(const std::vector<float> &v) {
    float *d;
    CK(cudaMalloc(&d, v.size() * 4));
    CK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
}
/* n uniform values in [lo, hi) (xorshift from seed: the same on every machine) */
static inline std::vector<float> rnd(size_t n, uint64_t seed, float lo, float hi) {
    std::vector<float> v(n);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = lo + (hi - lo) * (float)((x >> 40) * (1.0 / 16777216.0));
    }
    return v;
}

/* µs per launch in a graph of n back-to-back launches of fn, best of `trials` replays */
static inline double time_graph(void (*fn)(int, cudaStream_t, void *), void *ctx, int n, int trials) {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; i++) fn(i, st, ctx);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaGraphLaunch(ge, st)); /* warm-up */
    CK(cudaStreamSynchronize(st));
    double best = 1e30;
    for (int t = 0; t < trials; t++) {
        CK(cudaEventRecord(a, st));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        best = fmin(best, ms * 1e3 / n);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(st));
    return best;
}

/* GB/s of a device-to-device cudaMemcpy of `bytes` (read + write), best of `trials` */
static inline double copy_gbs(size_t bytes, int trials) {
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    float best = 1e30f;
    for (int t = 0; t < trials; t++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        best = fminf(best, ms);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    cudaFree(a), cudaFree(b);
    return 2.0 * bytes / (best * 1e-3) / 1e9;
}

/* ---- the MoE workshops' inputs (gemv_test, moe_cluster_test) ---------------- */
constexpr int MOE_D = 2048, MOE_I = 512, MOE_K = 8; /* hidden, expert inner, routed slots */

/* sh_gate, sh_up: the halves of the shared expert's fused gate|up, as the engine views them */
static inline void moe_views(const lc_qmat &sgu, lc_qmat &sg, lc_qmat &su) {
    sg = lc_qmat_rows(&sgu, 0, MOE_I), su = lc_qmat_rows(&sgu, MOE_I, MOE_I);
}

/* ne stacked experts, `copies` shared experts (so that L2 never holds the
 * weights a repeat reads), nsets sets of MOE_K distinct ids, x, the routing
 * weights, the shared expert's gate and h, here (h*) and on the device */
struct moe_inputs {
    lc_qmat gate, up, down;
    std::vector<lc_qmat> sgu, sdown; /* copies; sh_gate / sh_up are views of sgu (moe_views) */
    std::vector<int32_t> hid;
    int32_t *ids; /* [nsets][MOE_K] */
    int nsets;
    std::vector<float> hx, hw, hh;
    float hsg;
    float *x, *w, *sg, *h;
};
static inline void moe_inputs_make(moe_inputs &m, int ne, int copies, int nsets) {
    m.gate = make_qmat(MOE_I, MOE_D, ne, 77), m.up = make_qmat(MOE_I, MOE_D, ne, 88), m.down = make_qmat(MOE_D, MOE_I, ne, 99);
    for (int i = 0; i < copies; i++)
        m.sgu.push_back(make_qmat(2 * MOE_I, MOE_D, 1, 300 + 3 * i)), m.sdown.push_back(make_qmat(MOE_D, MOE_I, 1, 301 + 3 * i));
    m.nsets = nsets;
    m.hid = distinct_ids(nsets, MOE_K, ne);
    CK(cudaMalloc(&m.ids, m.hid.size() * 4));
    CK(cudaMemcpy(m.ids, m.hid.data(), m.hid.size() * 4, cudaMemcpyHostToDevice));
    m.hx = rnd(MOE_D, 21, -1.f, 1.f), m.hw = rnd(MOE_K, 22, 0.05f, 0.2f), m.hh = rnd(MOE_D, 24, -1.f, 1.f), m.hsg = 0.6f;
    m.x = up_f32(m.hx), m.w = up_f32(m.hw), m.sg = up_f32(std::vector<float>(1, m.hsg)), m.h = up_f32(m.hh);
}
static inline void moe_inputs_free(moe_inputs &m) {
    free_qmat(m.gate), free_qmat(m.up), free_qmat(m.down);
    for (size_t i = 0; i < m.sgu.size(); i++) free_qmat(m.sgu[i]), free_qmat(m.sdown[i]);
    cudaFree(m.ids), cudaFree(m.x), cudaFree(m.w), cudaFree(m.sg), cudaFree(m.h);
}

/* fp64 reference for id set 0 and shared copy 0: act [MOE_K + 1][MOE_I] =
 * silu(g . x) (u . x), and href = h + sum_j w_j down_j . act_j (the shared
 * slot's weight hsg).  act_f32: the down's reference takes act rounded to
 * float, as the kernels do when act is their uploaded input (act itself
 * stays fp64). */
static inline void moe_reference(const moe_inputs &m, bool act_f32, std::vector<double> &act, std::vector<double> &href) {
    const std::vector<double> xd(m.hx.begin(), m.hx.end());
    act.assign((size_t)(MOE_K + 1) * MOE_I, 0.0), href.assign(m.hh.begin(), m.hh.end());
    for (int j = 0; j <= MOE_K; j++) {
        hmat gm, um, dm;
        if (j < MOE_K) to_host(m.gate, m.hid[j], gm), to_host(m.up, m.hid[j], um), to_host(m.down, m.hid[j], dm);
        else {
            lc_qmat sg, su;
            moe_views(m.sgu[0], sg, su);
            to_host(sg, 0, gm), to_host(su, 0, um), to_host(m.sdown[0], 0, dm);
        }
        double *a = act.data() + (size_t)j * MOE_I;
        std::vector<double> ad(MOE_I); /* the down's input */
        for (int r = 0; r < MOE_I; r++) {
            const double gv = ref_dot(gm, MOE_D, r, xd.data()), uv = ref_dot(um, MOE_D, r, xd.data());
            a[r] = gv / (1.0 + exp(-gv)) * uv;
            ad[r] = act_f32 ? (double)(float)a[r] : a[r];
        }
        const double wj = j < MOE_K ? m.hw[j] : m.hsg;
        for (int d = 0; d < MOE_D; d++) href[d] += wj * ref_dot(dm, MOE_I, d, ad.data());
    }
}

#endif
