/* gemv_test.cu — workshop for the batch-1 decode GEMVs (issue 14): the
 * engine's kernels (decode/gemv.cu, moe.cu, through their launchers) beside
 * candidate designs, at the real decode shapes, in one run:
 *   0 "engine"   the engine's launchers: the qdot kernels (LILAC_GEMV=engine)
 *                and the default choice by shape (which runs some of the
 *                designs below, e.g. persist R=4 S=3 for in_proj / lm_head);
 *   1 "stream"   every weight load of a warp issued at entry (R rows per
 *                warp, 16 B codes per load, ld.global.nc.L1::no_allocate),
 *                a grid of one pass per warp, so (nearly) all of a matrix is
 *                in flight at once; x staged once per block in shared memory;
 *   2 "persist"  a persistent grid (one 16-warp block per SM), each warp
 *                walking row tiles through an S-stage cp.async ring in shared
 *                memory, the next tiles' codes in flight during the current
 *                tile's math; x (K <= 2048) kept in registers for all tiles;
 *   3 "early"    stream or persist with griddepcontrol.launch_dependents at
 *                entry (not after the wait) and, for stream, an L2 bulk
 *                prefetch of the block's slice before the register loads.
 * The designs live in decode/gemv_stream.cuh (one copy, shared with the
 * engine).  Every variant uses the engine's layout (lc_qmat: MLX codes, bf16 scales and
 * biases per 64 inputs, rows fused at load, no repack) and dequantisation
 * (qdot.cuh: one packed bf16 FMA per pair of codes) and is checked against a
 * CPU fp64 reference.  Timing: a CUDA graph of N back-to-back launches (PDL
 * attribute on, as in the decode graph), weights rotated over copies that
 * together exceed L2; µs per launch, GB/s, % of a measured 1 GiB D2D copy.
 * Then a graph of 40 in_proj -> out_proj pairs (each consuming the other's
 * output) to see what the kernel boundaries cost.
 *   sh bench/kernels/build_gemv.sh && build/kernels/gemv_test [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "backend/cuda/decode/gemv_tq.cuh"
#include "workshop.h"

static int g_quick = 0, g_failures = 0, g_sms = 132;
static double g_copy_gbs = 0;

/* ---- the variants: the kernels of decode/gemv_stream.cuh ------------------ */
/* The engine runs some of these instances (gemv.cu / moe.cu pick them by
 * shape: the "auto" rows); the others, and the EARLY designs, are only here. */
using namespace gemv_stream;

template <int CPL, int R, int MINB, bool EARLY>
static void run_stream(const lc_qmat &W, const float *x, const float *nw, float *y, const float *res, cudaStream_t st,
                       bool pdl) {
    CK((launch_stream<CPL, R, MINB, EARLY>(W, 0, x, nw, 1e-6f, nullptr, y, res, nullptr, st, pdl)));
}

template <int CPL, int R, int S, bool EARLY>
static void run_persist(const lc_qmat &W, const float *x, const float *nw, float *y, const float *res, cudaStream_t st,
                        bool pdl) {
    CK((launch_persist<CPL, R, S, EARLY>(W, 0, x, nw, 1e-6f, nullptr, y, res, nullptr, st, pdl)));
}

/* ---- host: data, reference, timing --------------------------------------- */

/* rows checked every `stride` (lm_head: a subset keeps the CPU reference short) */
struct check {
    double maxd, maxref;
    bool ok;
};
static check compare(const std::vector<double> &ref, const std::vector<float> &got, int stride) {
    check c = {0, 0, true};
    for (size_t i = 0; i < ref.size(); i += stride) {
        const double d = fabs(ref[i] - got[i]);
        if (!(d <= c.maxd)) c.maxd = d;
        c.maxref = fmax(c.maxref, fabs(ref[i]));
    }
    /* fp32 sums over <= 4608 products of fp32 x and exact weights */
    c.ok = c.maxd <= 2e-5 * c.maxref + 1e-6;
    return c;
}


static void row(const char *name, double us, double bytes, check c) {
    const double gbs = bytes / (us * 1e-6) / 1e9;
    printf("  %-34s %9.2f %9.0f %7.1f%%  %10.3g  %s\n", name, us, gbs, 100.0 * gbs / g_copy_gbs, c.maxd,
           c.ok ? "PASS" : "FAIL");
    if (!c.ok) g_failures++;
}
static void header(const char *what, double mb, int copies) {
    printf("\n%s — %.2f MB per launch, %d weight copies rotated\n", what, mb, copies);
    printf("  %-34s %9s %9s %8s  %10s\n", "variant", "us", "GB/s", "% copy", "max |err|");
}

/* ---- dense shapes ------------------------------------------------------- */
struct dense {
    std::vector<lc_qmat> W; /* copies */
    const float *x, *nw, *res;
    float *y;
    void (*k)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    bool pdl;
    int kernels; /* lc_gemv's choice for the engine rows */
};
static void dense_engine(int rep, cudaStream_t st, void *p) {
    dense *d = (dense *)p;
    const lc_qmat &W = d->W[rep % d->W.size()];
    lc_gemv_set_kernels(d->kernels);
    CK(d->nw ? lc_gemv_rms(&W, d->x, d->nw, 1e-6f, d->y, nullptr, nullptr, st) : lc_gemv(&W, 0, d->x, d->y, d->res, nullptr, st));
}
static void dense_var(int rep, cudaStream_t st, void *p) {
    dense *d = (dense *)p;
    d->k(d->W[rep % d->W.size()], d->x, d->nw, d->y, d->res, st, d->pdl);
}

struct variant {
    const char *name;
    void (*k)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
};

static int copies_for(size_t bytes) {
    const size_t want = (size_t)400 << 20; /* well beyond the 60 MB L2 */
    int n = (int)((want + bytes - 1) / bytes);
    return n < 1 ? 1 : n;
}

static void bench_dense(const char *what, int rows, int cols, bool norm, bool residual, const variant *vs, int nv) {
    const int stride = rows > 100000 ? 16 : 1;
    lc_qmat m0 = make_qmat(rows, cols, 1, 1000 + rows);
    const int copies = g_quick ? 2 : copies_for(qbytes(m0));
    dense d = {};
    d.W.push_back(m0);
    for (int i = 1; i < copies; i++) d.W.push_back(make_qmat(rows, cols, 1, 5000 + 7 * i + rows));
    std::vector<float> hx = rnd(cols, 11, -1.f, 1.f), hn = rnd(cols, 12, 0.5f, 1.5f), hr = rnd(rows, 13, -1.f, 1.f);
    d.x = up_f32(hx), d.nw = norm ? up_f32(hn) : nullptr, d.res = residual ? up_f32(hr) : nullptr;
    CK(cudaMalloc(&d.y, (size_t)rows * 4));
    /* reference on copy 0 */
    hmat h;
    to_host(m0, 0, h);
    std::vector<double> xd(cols), ref(rows, 0.0);
    double ss = 0;
    for (int c = 0; c < cols; c++) ss += (double)hx[c] * hx[c];
    const double rr = norm ? 1.0 / sqrt(ss / cols + 1e-6) : 1.0;
    for (int c = 0; c < cols; c++) xd[c] = norm ? hx[c] * rr * hn[c] : hx[c];
    for (int r = 0; r < rows; r += stride) ref[r] = (residual ? hr[r] : 0.0) + ref_dot(h, cols, r, xd.data());
    header(what, qbytes(m0) / 1e6, copies);
    const int n = g_quick ? 2 : 40;
    /* v = -3: the choice by shape without gemv_ring.cuh (LILAC_GEMV=tq), -2: the qdot
     * kernels (LILAC_GEMV=engine), -1: lc_gemv's choice by shape */
    for (int v = -3; v < nv; v++) {
        d.k = v < 0 ? nullptr : vs[v].k, d.pdl = true;
        d.kernels = v == -3 ? LC_GEMV_TQ : v == -2 ? LC_GEMV_ENGINE : LC_GEMV_AUTO;
        void (*fn)(int, cudaStream_t, void *) = v < 0 ? dense_engine : dense_var;
        CK(cudaMemset(d.y, 0, (size_t)rows * 4));
        fn(0, 0, &d);
        CK(cudaDeviceSynchronize());
        const check c = compare(ref, dl(d.y, rows), stride);
        const double us = time_graph(fn, &d, n, g_quick ? 1 : 20);
        row(v == -3   ? "0 engine tq (LILAC_GEMV=tq)"
            : v == -2 ? "0 engine (LILAC_GEMV=engine)"
            : v == -1 ? "0 engine default (by shape)"
                      : vs[v].name,
            us,
            (double)qbytes(m0), c);
    }
    for (auto &w : d.W) free_qmat(w);
    cudaFree((void *)d.x), cudaFree((void *)d.nw), cudaFree((void *)d.res), cudaFree(d.y);
}

/* ---- MoE ------------------------------------------------------------------ */
/* E_TEST experts stacked (the engine's layout; more than the model's 256 so
 * random ids rarely find an expert still in L2); the shared expert rotated. */
constexpr int E_TEST = 768, KX = MOE_K, D_ = MOE_D, I_ = MOE_I;
struct moe : moe_inputs {
    float *act, *actin;
    int var;
};
static void moe_gu(int rep, cudaStream_t st, void *p) {
    moe *m = (moe *)p;
    lc_qmat sg, su;
    moe_views(m->sgu[rep % m->sgu.size()], sg, su);
    const int32_t *ids = m->ids + (rep % m->nsets) * KX;
    if (m->var <= 1) {
        lc_gemv_set_kernels(m->var == 0 ? LC_GEMV_ENGINE : LC_GEMV_AUTO);
        CK(lc_moe_gate_up(&m->gate, &m->up, &sg, &su, ids, KX, m->x, m->act, nullptr, st));
    } else if (m->var == 2) CK(launch_stream_gate_up<1>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st));
    else if (m->var == 3) CK(launch_stream_gate_up<2>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st));
    else if (m->var == 4) CK(gemv_tq::launch_gate_up<4>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st));
    else if (m->var == 5) CK(gemv_tq::launch_gate_up<8>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st));
    else CK((gemv_tq::launch_gate_up<4, true>(m->gate, m->up, sg, su, ids, KX, m->x, m->act, nullptr, st)));
}
static void moe_dn(int rep, cudaStream_t st, void *p) {
    moe *m = (moe *)p;
    const lc_qmat &sd = m->sdown[rep % m->sdown.size()];
    const int32_t *ids = m->ids + (rep % m->nsets) * KX;
    if (m->var <= 1) {
        lc_gemv_set_kernels(m->var == 0 ? LC_GEMV_ENGINE : LC_GEMV_AUTO);
        CK(lc_moe_down(&m->down, &sd, ids, m->w, m->sg, KX, m->actin, m->h, nullptr, st));
    } else if (m->var == 2) CK(launch_stream_down<4>(m->down, sd, ids, m->w, m->sg, m->actin, m->h, nullptr, st));
    else if (m->var == 3) CK(launch_stream_down<8>(m->down, sd, ids, m->w, m->sg, m->actin, m->h, nullptr, st));
    else if (m->var == 4) CK(gemv_tq::launch_down<1>(m->down, sd, ids, m->w, m->sg, m->actin, m->h, nullptr, st));
    else CK(gemv_tq::launch_down<2>(m->down, sd, ids, m->w, m->sg, m->actin, m->h, nullptr, st));
}

static void bench_moe() {
    moe m = {};
    const int ne = g_quick ? 16 : E_TEST, copies = g_quick ? 2 : 64;
    moe_inputs_make(m, ne, copies, g_quick ? 2 : 64);
    CK(cudaMalloc(&m.act, (size_t)(KX + 1) * I_ * 4));
    /* reference for set 0, copy 0: act, then h += down (from act as the float the down kernels take) */
    std::vector<double> aref, href;
    moe_reference(m, true, aref, href);
    std::vector<float> actf(aref.begin(), aref.end());
    m.actin = up_f32(actf);
    const double gub = (KX + 1) * 2.0 * I_ * D_ * 0.5625, dnb = (KX + 1) * (double)I_ * D_ * 0.5625;
    const int n = g_quick ? 2 : 40;
    const char *gun[] = {"0 engine (LILAC_GEMV=engine)", "0 engine default (by shape)", "1 stream R=1 (8 loads/lane)",
                         "1 stream R=2 (16 loads/lane)", "4 tq int8 NSP=4 (8 warps)", "4 tq int8 NSP=8 (4 warps)",
                         "4 tq NSP=4, each warp its x slice"};
    header("MoE gate/up + SwiGLU, 8 routed + shared, 2x512x2048 each", gub / 1e6, copies);
    for (int v = 0; v < (int)(sizeof gun / sizeof *gun); v++) {
        m.var = v;
        CK(cudaMemset(m.act, 0, (size_t)(KX + 1) * I_ * 4));
        moe_gu(0, 0, &m);
        CK(cudaDeviceSynchronize());
        const check c = compare(aref, dl(m.act, (KX + 1) * I_), 1);
        row(gun[v], time_graph(moe_gu, &m, n, g_quick ? 1 : 20), gub, c);
    }
    const char *dnn[] = {"0 engine (LILAC_GEMV=engine)", "0 engine default (by shape)", "1 stream 4 warps", "1 stream 8 warps",
                         "4 tq down RB=1 (9 warps)", "4 tq down RB=2 (18 warps)"};
    header("MoE down + combine + residual, 9 x 2048x512", dnb / 1e6, copies);
    for (int v = 0; v < 6; v++) {
        m.var = v;
        CK(cudaMemcpy(m.h, m.hh.data(), D_ * 4, cudaMemcpyHostToDevice));
        moe_dn(0, 0, &m);
        CK(cudaDeviceSynchronize());
        const check c = compare(href, dl(m.h, D_), 1);
        row(dnn[v], time_graph(moe_dn, &m, n, g_quick ? 1 : 20), dnb, c); /* h accumulates during timing: only time is read */
    }
    moe_inputs_free(m);
    cudaFree(m.act), cudaFree(m.actin);
}

/* ---- chain: in_proj (norm) -> out_proj (+residual), 40 pairs ------------- */
struct chain {
    std::vector<lc_qmat> in, out;
    float *h, *proj, *nw;
    int var; /* index into the chain variant table (0-2: lc_gemv with LILAC_GEMV=engine, auto, tq) */
};
struct chain_variant {
    const char *name;
    void (*kin)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    void (*kout)(const lc_qmat &, const float *, const float *, float *, const float *, cudaStream_t, bool);
    bool pdl;
};
static const chain_variant *g_cv;
static void chain_pair(int rep, cudaStream_t st, void *p) {
    chain *c = (chain *)p;
    const lc_qmat &Wi = c->in[rep % c->in.size()], &Wo = c->out[rep % c->out.size()];
    if (c->var <= 2) {
        lc_gemv_set_kernels(c->var == 0 ? LC_GEMV_ENGINE : c->var == 1 ? LC_GEMV_AUTO : LC_GEMV_TQ);
        CK(lc_gemv_rms(&Wi, c->h, c->nw, 1e-6f, c->proj, nullptr, nullptr, st));
        CK(lc_gemv(&Wo, 0, c->proj, c->h, c->h, nullptr, st));
    } else {
        const chain_variant &v = g_cv[c->var];
        v.kin(Wi, c->h, c->nw, c->proj, nullptr, st, v.pdl);
        v.kout(Wo, c->proj, nullptr, c->h, c->h, st, v.pdl);
    }
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) g_quick = 1;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    printf("gemv_test on %s, %d SMs, L2 %d MB%s\n", prop.name, g_sms, prop.l2CacheSize >> 20, g_quick ? " (--quick)" : "");
    {   /* copy bandwidth: read + write of a 1 GiB cudaMemcpy */
        const size_t n = g_quick ? ((size_t)64 << 20) : ((size_t)1 << 30);
        g_copy_gbs = copy_gbs(n, g_quick ? 1 : 5);
        printf("device-to-device copy: %.0f GB/s (read + write of %zu MiB)\n", g_copy_gbs, n >> 20);
    }
    printf("timing: graph of %d back-to-back launches (PDL on), best of %d replays; error vs CPU fp64\n", g_quick ? 2 : 40,
           g_quick ? 1 : 20);

    const variant v2048[] = {
        {"1 stream R=2 (4 loads/lane)", run_stream<2, 2, 3, false>},
        {"1 stream R=4 (8 loads/lane)", run_stream<2, 4, 2, false>},
        {"1 stream R=8 (16 loads/lane)", run_stream<2, 8, 1, false>},
        {"2 persist R=2 S=4 x in regs", run_persist<2, 2, 4, false>},
        {"2 persist R=4 S=3 x in regs", run_persist<2, 4, 3, false>},
        {"3 early+L2 stream R=4", run_stream<2, 4, 2, true>},
        {"3 early persist R=2 S=4", run_persist<2, 2, 4, true>},
    };
    const variant v4096[] = {
        {"1 stream R=1 (4 loads/lane)", run_stream<4, 1, 2, false>},
        {"1 stream R=2 (8 loads/lane)", run_stream<4, 2, 2, false>},
        {"1 stream R=4 (16 loads/lane)", run_stream<4, 4, 1, false>},
        {"2 persist R=1 S=4 x in smem", run_persist<4, 1, 4, false>},
        {"3 early+L2 stream R=2", run_stream<4, 2, 2, true>},
    };
    const int n2 = sizeof v2048 / sizeof *v2048, n4 = sizeof v4096 / sizeof *v4096;
    bench_dense("GDN in_proj qkv|z|b|a, 12352 x 2048, fused RMSNorm", 12352, 2048, true, false, v2048, n2);
    bench_dense("attention q(+gate)|k|v, 9216 x 2048, fused RMSNorm", 9216, 2048, true, false, v2048, n2);
    bench_dense("out_proj / o_proj + residual, 2048 x 4096", 2048, 4096, false, true, v4096, n4);
    bench_dense("lm_head, 248320 x 2048, fused final norm (every 16th row checked)", 248320, 2048, true, false, v2048, n2);
    bench_moe();

    {   /* the chain */
        chain c = {};
        const int pairs = g_quick ? 2 : 40;
        for (int i = 0; i < (g_quick ? 2 : 20); i++) c.in.push_back(make_qmat(12352, 2048, 1, 900 + i)), c.out.push_back(make_qmat(2048, 4096, 1, 950 + i));
        c.h = up_f32(rnd(2048, 31, -1.f, 1.f)), c.nw = up_f32(rnd(2048, 32, 0.5f, 1.5f));
        CK(cudaMalloc(&c.proj, 12352 * 4));
        const chain_variant cv[] = {
            {"0 engine (LILAC_GEMV=engine)", nullptr, nullptr, true},
            {"0 engine default (by shape)", nullptr, nullptr, true},
            {"0 engine tq (LILAC_GEMV=tq)", nullptr, nullptr, true},
            {"1 stream R=4 / R=2, no PDL", run_stream<2, 4, 2, false>, run_stream<4, 2, 2, false>, false},
            {"1 stream R=4 / R=2, PDL", run_stream<2, 4, 2, false>, run_stream<4, 2, 2, false>, true},
            {"2 persist / stream R=2, PDL", run_persist<2, 2, 4, false>, run_stream<4, 2, 2, false>, true},
            {"3 early+L2 stream, PDL", run_stream<2, 4, 2, true>, run_stream<4, 2, 2, true>, true},
            {"3 early persist / early+L2 stream", run_persist<2, 2, 4, true>, run_stream<4, 2, 2, true>, true},
        };
        g_cv = cv;
        const double mb = (qbytes(c.in[0]) + qbytes(c.out[0])) / 1e6;
        printf("\nchain: graph of %d x (in_proj 12352x2048 + norm -> out_proj 2048x4096 + residual), %.2f MB per pair\n", pairs, mb);
        printf("  %-34s %9s %9s %8s\n", "variant", "us/pair", "GB/s", "% copy");
        for (int v = 0; v < (int)(sizeof cv / sizeof *cv); v++) {
            c.var = v;
            const double us = time_graph(chain_pair, &c, pairs, g_quick ? 1 : 20);
            const double gbs = mb * 1e6 / (us * 1e-6) / 1e9;
            printf("  %-34s %9.2f %9.0f %7.1f%%\n", cv[v].name, us, gbs, 100.0 * gbs / g_copy_gbs);
        }
        printf("  (boundary cost ~ us/pair minus the two kernels' times in the tables above, which already include\n"
               "   back-to-back overlap of the same kernel; an empty-kernel graph node costs ~0.5 us)\n");
        for (auto &w : c.in) free_qmat(w);
        for (auto &w : c.out) free_qmat(w);
        cudaFree(c.h), cudaFree(c.nw), cudaFree(c.proj);
    }
    CK(cudaDeviceSynchronize());
    printf("\n%s: %d failure(s)\n", g_failures ? "FAIL" : "all passed", g_failures);
    return g_failures ? 1 : 0;
}
