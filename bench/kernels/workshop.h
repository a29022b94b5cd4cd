/* workshop.h — host helpers of the GPU kernel workshops (bench/kernels/):
 * error checks, synthetic 4-bit matrices like the engine's, their host copies
 * and an fp64 reference dot, random vectors, a CUDA-graph timer and the
 * device-to-device copy bandwidth the timings are compared with.  Link
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

#endif
