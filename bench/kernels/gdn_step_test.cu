/* gdn_step_test.cu — workshop for the decode Gated DeltaNet step (issue 14):
 * lc_gdn's split form (a value head over a cluster of 2, 4 or 8 blocks,
 * decode/gdn_step.cu) against its block form (a block per value head, the
 * executable spec) and a CPU fp64 reference of spec §6, on the real shape
 * (16 key / 32 value heads, dim 128, conv 4).
 *
 *   sh bench/kernels/build_gdn_step.sh && build/kernels/gdn_step_test [--quick]
 *
 * Correctness, every form from the same state and conv window:
 *   - 8 consecutive T=1 steps (state and window carried, conv_flip toggled
 *     between calls as lc_ctrl_advance does once per forward), every step's
 *     output compared;
 *   - single calls of T = 2, 3, 4, 5 and 64 (the split form's longest), and
 *     a mixed sequence 1, 3, 1, 5 with flips;
 *   printing max |d| / max |ref| of out and state and the conv window
 *   mismatches (window values are copies: bitwise) against the CPU and
 *   against the block form, plus output rows written past T (sentinel).
 * Tolerances (vs CPU and vs the block form): out 1e-4, state 1e-4, conv
 * window exact.  fp32 with 128-term dots gives ~1e-6; a layout or indexing
 * bug gives O(1).
 * Timing (not in --quick): per form, a CUDA graph of 30 back-to-back T=1
 * launches (PDL attribute on, as in the decode graph) over 30 layers' own
 * state and window (60 MiB of state, beyond L2), best of 20 replays: us per
 * launch and GB/s of state read + write.
 * --quick: 3 steps, T = 3 and the mixed sequence only, no timing (for
 * compute-sanitizer).  Exit status 0 = all ok, 1 = failure or CUDA error. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "workshop.h"

static const int HK = 16, HV = 32, D = 128, KC = 4;
static const int KD = HK * D, C = 2 * KD + HV * D, VD = HV * D, WIDTH = C + VD + 2 * HV, LDP = WIDTH + 64;
static const int TMAX = 64, ROWS = 96; /* longest call; proj rows generated */
static const int NFORM = 4, FORMS[NFORM] = {0, 4, 8, 2};
static const char *FORM_NAME[NFORM] = {"block", "split4", "split8", "split2"};
static const float SENTINEL = 12345.0f;
static const double TOL_OUT = 1e-4, TOL_STATE = 1e-4;

/* ---- random numbers (the same on every machine) ------------------------------------------ */
static uint64_t rng_s = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    rng_s ^= rng_s << 13, rng_s ^= rng_s >> 7, rng_s ^= rng_s << 17;
    return ((rng_s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double nrand(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

/* ---- the CPU reference: spec §6, token by token, in double --------------------------------- */
struct host_params {
    std::vector<float> conv_w, A_log, dt_bias, norm_w;
    float eps;
};
struct ref_state {
    std::vector<double> S;  /* [HV][D][D] */
    std::vector<float> win; /* [2][KC-1][C]: copies of inputs, exact */
};

static double silu(double x) { return x / (1 + exp(-x)); }

/* one call of T tokens on proj rows [T][LDP], window read from buffer flip and written to 1 - flip */
static void cpu_call(const host_params &hp, const float *proj, int T, int flip, ref_state &rs, double *out) {
    std::vector<double> win((size_t)(KC - 1) * C), y(C), q(KD), k(KD);
    for (int j = 0; j < KC - 1; j++)
        for (int ch = 0; ch < C; ch++) win[(size_t)j * C + ch] = rs.win[((size_t)flip * (KC - 1) + j) * C + ch];
    for (int t = 0; t < T; t++) {
        const float *row = proj + (size_t)t * LDP;
        for (int ch = 0; ch < C; ch++) { /* causal conv: w[ch, KC-1] multiplies the current token */
            double acc = hp.conv_w[(size_t)ch * KC + KC - 1] * (double)row[ch];
            for (int j = 0; j < KC - 1; j++) acc += hp.conv_w[(size_t)ch * KC + j] * win[(size_t)j * C + ch];
            for (int j = 0; j + 1 < KC - 1; j++) win[(size_t)j * C + ch] = win[(size_t)(j + 1) * C + ch];
            win[(size_t)(KC - 2) * C + ch] = row[ch];
            y[ch] = silu(acc);
        }
        for (int j = 0; j < HK; j++) { /* l2 norms, eps inside the rsqrt of the sum; q / sqrt(dk) */
            double sq = 0, sk = 0;
            for (int c = 0; c < D; c++) sq += y[j * D + c] * y[j * D + c], sk += y[KD + j * D + c] * y[KD + j * D + c];
            const double rq = 1 / sqrt(sq + 1e-6) / sqrt((double)D), rk = 1 / sqrt(sk + 1e-6);
            for (int c = 0; c < D; c++) q[j * D + c] = y[j * D + c] * rq, k[j * D + c] = y[KD + j * D + c] * rk;
        }
        for (int h = 0; h < HV; h++) {
            const int j = h / (HV / HK);
            const double beta = 1 / (1 + exp(-(double)row[C + VD + h]));
            const double a = (double)row[C + VD + HV + h] + hp.dt_bias[h];
            const double sp = a > 20 ? a : log1p(exp(a));
            const double decay = exp(-exp((double)hp.A_log[h]) * sp);
            double *S = rs.S.data() + (size_t)h * D * D, o[D], ss = 0;
            for (int v = 0; v < D; v++) {
                double kv = 0;
                for (int r = 0; r < D; r++) S[r * D + v] *= decay, kv += S[r * D + v] * k[j * D + r];
                const double delta = (y[2 * KD + h * D + v] - kv) * beta;
                o[v] = 0;
                for (int r = 0; r < D; r++) S[r * D + v] += k[j * D + r] * delta, o[v] += S[r * D + v] * q[j * D + r];
                ss += o[v] * o[v];
            }
            const double rms = 1 / sqrt(ss / D + hp.eps);
            for (int v = 0; v < D; v++)
                out[(size_t)t * VD + h * D + v] = o[v] * rms * hp.norm_w[v] * silu((double)row[C + h * D + v]);
        }
    }
    for (int j = 0; j < KC - 1; j++)
        for (int ch = 0; ch < C; ch++)
            rs.win[((size_t)(1 - flip) * (KC - 1) + j) * C + ch] = (float)win[(size_t)j * C + ch];
}

/* ---- comparisons --------------------------------------------------------------------------- */
struct cmp {
    double max_abs, max_ref;
    long nan;
};
template <typename R> static void accum(cmp &c, const float *a, const R *ref, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite((double)ref[i])) {
            c.nan++;
            continue;
        }
        c.max_abs = std::max(c.max_abs, fabs((double)a[i] - (double)ref[i]));
        c.max_ref = std::max(c.max_ref, fabs((double)ref[i]));
    }
}
static double rel(const cmp &c) { return c.max_ref > 0 ? c.max_abs / c.max_ref : c.max_abs; }

/* ---- device buffers of one form ------------------------------------------------------------ */
struct form_bufs {
    float *state, *conv, *out;
    lc_ctrl *ctrl;
};
static void set_flip(lc_ctrl *d, int flip) {
    lc_ctrl c;
    memset(&c, 0, sizeof c);
    c.conv_flip = flip;
    CK(cudaMemcpy(d, &c, sizeof c, cudaMemcpyHostToDevice));
}
__global__ void fill_const(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

static int g_fail = 0;

/* runs the calls Ts[0..ncall) on consecutive proj rows (flip toggled after each) with every
 * form and the CPU from state st0 and window conv0; compares every output row, the final
 * state and both window buffers */
static void run_case(const char *name, const lc_gdn_params *p, const host_params &hp, const float *d_proj,
                     const std::vector<float> &hproj, form_bufs *fb, const std::vector<float> &st0,
                     const std::vector<float> &conv0, const int *Ts, int ncall, int flip0) {
    int total = 0;
    for (int i = 0; i < ncall; i++) total += Ts[i];
    const size_t orows = (size_t)total + 1; /* one row past the end: must keep the sentinel */
    ref_state rs;
    rs.S.assign(st0.begin(), st0.end());
    rs.win = conv0;
    std::vector<double> ref(orows * VD, 0.0);
    {
        int flip = flip0, row = 0;
        for (int i = 0; i < ncall; i++) {
            cpu_call(hp, hproj.data() + (size_t)row * LDP, Ts[i], flip, rs, ref.data() + (size_t)row * VD);
            row += Ts[i], flip ^= 1;
        }
    }
    std::vector<float> out[NFORM], st[NFORM], cv[NFORM];
    for (int f = 0; f < NFORM; f++) {
        form_bufs &b = fb[f];
        CK(cudaMemcpy(b.state, st0.data(), st0.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(b.conv, conv0.data(), conv0.size() * 4, cudaMemcpyHostToDevice));
        fill_const<<<256, 256>>>(b.out, orows * VD, SENTINEL);
        CK(cudaGetLastError());
        lc_gdn_step_force(FORMS[f]);
        int flip = flip0, row = 0;
        for (int i = 0; i < ncall; i++) {
            const int used = lc_gdn_step_form(p, Ts[i]);
            if (used != FORMS[f]) {
                printf("%-12s %-6s: T=%d ran form %d, not %d (not supported here?)  FAIL\n", name, FORM_NAME[f], Ts[i],
                       used, FORMS[f]);
                g_fail++;
            }
            set_flip(b.ctrl, flip);
            CK(lc_gdn(p, d_proj + (size_t)row * LDP, LDP, Ts[i], b.conv, b.state, b.out + (size_t)row * VD, b.ctrl, 0));
            CK(cudaDeviceSynchronize());
            row += Ts[i], flip ^= 1; /* as lc_ctrl_advance does once per forward */
        }
        out[f] = dl(b.out, orows * VD), st[f] = dl(b.state, st0.size()), cv[f] = dl(b.conv, conv0.size());
    }
    lc_gdn_step_force(-1);
    const size_t nout = (size_t)total * VD;
    for (int f = 0; f < NFORM; f++) {
        cmp oc = {0, 0, 0}, sc = {0, 0, 0}, ob = {0, 0, 0}, sb = {0, 0, 0};
        accum(oc, out[f].data(), ref.data(), nout);
        accum(sc, st[f].data(), rs.S.data(), rs.S.size());
        long conv_cpu = 0, conv_blk = 0, past = 0;
        for (size_t i = 0; i < cv[f].size(); i++)
            conv_cpu += memcmp(&cv[f][i], &rs.win[i], 4) != 0, conv_blk += memcmp(&cv[f][i], &cv[0][i], 4) != 0;
        for (size_t i = nout; i < orows * VD; i++) past += out[f][i] != SENTINEL;
        bool ok = oc.nan == 0 && sc.nan == 0 && rel(oc) <= TOL_OUT && rel(sc) <= TOL_STATE && conv_cpu == 0 && past == 0;
        printf("%-12s %-6s vs cpu: out %.2e state %.2e (max|ref| %.2f, %.2f) conv %ld nan %ld", name, FORM_NAME[f], rel(oc),
               rel(sc), oc.max_ref, sc.max_ref, conv_cpu, oc.nan + sc.nan);
        if (f) {
            accum(ob, out[f].data(), out[0].data(), nout);
            accum(sb, st[f].data(), st[0].data(), st[f].size());
            ok = ok && ob.nan == 0 && sb.nan == 0 && rel(ob) <= TOL_OUT && rel(sb) <= TOL_STATE && conv_blk == 0;
            printf(" | vs block: out %.2e state %.2e conv %ld", rel(ob), rel(sb), conv_blk);
        }
        printf(" | written past T %ld  %s\n", past, ok ? "ok" : "FAIL");
        g_fail += !ok;
    }
}

/* ---- timing ---------------------------------------------------------------------------------- */
static const int LAYERS = 30;
struct time_ctx {
    const lc_gdn_params *p;
    const float *proj;
    float *state[LAYERS], *conv[LAYERS], *out;
    lc_ctrl *ctrl;
};
static void step_launch(int i, cudaStream_t st, void *vc) {
    time_ctx *c = (time_ctx *)vc;
    CK(lc_gdn(c->p, c->proj, LDP, 1, c->conv[i % LAYERS], c->state[i % LAYERS], c->out, c->ctrl, st));
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs, L2 %d MiB)%s\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, quick ? "  [--quick]" : "");

    /* weights as gdn_chunk_test: odd value heads decay weakly (the state carries), even ones strongly */
    host_params hp;
    hp.conv_w.resize((size_t)C * KC), hp.A_log.resize(HV), hp.dt_bias.resize(HV), hp.norm_w.resize(D);
    hp.eps = 1e-6f;
    for (auto &v : hp.conv_w) v = (float)(urand() - 0.5);
    for (int h = 0; h < HV; h++) {
        hp.A_log[h] = (float)log(1.0 + 15.0 * urand());
        hp.dt_bias[h] = h & 1 ? -4.0f : (float)(0.1 * nrand());
        if (h & 1) hp.A_log[h] = (float)log(0.5 + 1.5 * urand());
    }
    for (auto &v : hp.norm_w) v = (float)(1.0 + 0.1 * nrand());
    float *d_conv_w = up_f32(hp.conv_w), *d_A_log = up_f32(hp.A_log), *d_dt = up_f32(hp.dt_bias), *d_nw = up_f32(hp.norm_w);
    const lc_gdn_params p = {HK, HV, D, D, KC, hp.eps, d_conv_w, d_A_log, d_dt, d_nw};

    /* proj rows ~N(0,1) in every used column (a few gate inputs past softplus's threshold);
     * the row padding is NaN, so a read past a row's width poisons the output */
    std::vector<float> hproj((size_t)ROWS * LDP);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < LDP; c++) hproj[(size_t)r * LDP + c] = c < WIDTH ? (float)nrand() : NAN;
    for (int r = 0; r < ROWS; r += 7) hproj[(size_t)r * LDP + C + VD + HV + (r % HV)] = 25.0f;
    float *d_proj = up_f32(hproj);

    /* initial state ~0.1 N(0,1), conv windows ~N(0,1) (both buffers) */
    std::vector<float> st0((size_t)HV * D * D), conv0((size_t)2 * (KC - 1) * C);
    for (auto &v : st0) v = (float)(0.1 * nrand());
    for (auto &v : conv0) v = (float)nrand();

    form_bufs fb[NFORM];
    for (int f = 0; f < NFORM; f++) {
        CK(cudaMalloc(&fb[f].state, st0.size() * 4));
        CK(cudaMalloc(&fb[f].conv, conv0.size() * 4));
        CK(cudaMalloc(&fb[f].out, (size_t)(ROWS + 1) * VD * 4));
        CK(cudaMalloc(&fb[f].ctrl, sizeof(lc_ctrl)));
    }
    lc_gdn_step_force(-1);
    printf("default form at T=1: %d, at T=64: %d, at T=65: %d (0 = block, 2/4/8 = split over clusters of 2/4/8)\n",
           lc_gdn_step_form(&p, 1), lc_gdn_step_form(&p, 64), lc_gdn_step_form(&p, 65));

    /* T=1 steps, state and window carried, flip toggled */
    const int nstep = quick ? 3 : 8, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    char name[32];
    snprintf(name, sizeof name, "T=1 x%d", nstep);
    run_case(name, &p, hp, d_proj, hproj, fb, st0, conv0, ones, nstep, 0);
    const int mixed[4] = {1, 3, 1, 5};
    run_case("T=1+3+1+5", &p, hp, d_proj, hproj, fb, st0, conv0, mixed, 4, 1);
    for (int T = quick ? 3 : 2; T <= (quick ? 3 : 5); T++) {
        snprintf(name, sizeof name, "T=%d", T);
        run_case(name, &p, hp, d_proj, hproj, fb, st0, conv0, &T, 1, T & 1);
    }
    if (!quick) run_case("T=64", &p, hp, d_proj, hproj, fb, st0, conv0, &TMAX, 1, 0);

    if (!quick) {
        time_ctx tc;
        tc.p = &p, tc.proj = d_proj, tc.out = fb[0].out, tc.ctrl = fb[0].ctrl;
        set_flip(tc.ctrl, 0);
        for (int l = 0; l < LAYERS; l++) {
            CK(cudaMalloc(&tc.state[l], st0.size() * 4));
            CK(cudaMalloc(&tc.conv[l], conv0.size() * 4));
            CK(cudaMemcpy(tc.state[l], st0.data(), st0.size() * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(tc.conv[l], conv0.data(), conv0.size() * 4, cudaMemcpyHostToDevice));
        }
        const double bytes = 2.0 * st0.size() * 4; /* state read + write per launch */
        printf("timing: graph of %d T=1 launches over %d layers (%.0f MiB of state), best of 20 replays; "
               "D2D copy %.0f GB/s\n",
               LAYERS, LAYERS, LAYERS * st0.size() * 4 / 1048576.0, copy_gbs((size_t)LAYERS * st0.size() * 4, 10));
        double base = 0;
        for (int f = 0; f < NFORM; f++) {
            lc_gdn_step_force(FORMS[f]);
            if (lc_gdn_step_form(&p, 1) != FORMS[f]) {
                printf("  %-6s not supported here: not timed\n", FORM_NAME[f]);
                continue;
            }
            const double us = time_graph(step_launch, &tc, LAYERS, 20);
            if (f == 0) base = us;
            printf("  %-6s %7.2f us per launch  %6.0f GB/s  (x30 layers %.1f us per token)%s", FORM_NAME[f], us,
                   bytes / (us * 1e-6) / 1e9, 30 * us, f ? "" : "\n");
            if (f) printf("  %.2fx vs block\n", base / us);
        }
        lc_gdn_step_force(-1);
        CK(cudaGetLastError());
        for (int l = 0; l < LAYERS; l++) cudaFree(tc.state[l]), cudaFree(tc.conv[l]);
    }
    CK(cudaDeviceSynchronize());
    printf("%s: %d failure(s)\n", g_fail ? "FAIL" : "all ok", g_fail);
    return g_fail ? 1 : 0;
}
