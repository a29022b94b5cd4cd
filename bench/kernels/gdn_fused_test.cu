/* gdn_fused_test.cu — the fused DeltaNet layer (decode/gdn_fused.cu: in_proj and
 * the decode step in one kernel, LILAC_DECODE_TRY=gdnfuse) against the
 * engine's pair (lc_gemv_rms, which runs ring_gemv at this shape, then
 * lc_gdn's split step), at the model's shapes (Hk 16, Hv 32, dk = dv = 128,
 * conv of 4, in_proj 12,352 x 2,048).
 *
 *   sh bench/kernels/build_gdn_fused.sh && build/kernels/gdn_fused_test [--quick]
 *
 * Correctness: from the same state and conv window, STEPS consecutive steps
 * (a new h each, conv_flip toggled between them as lc_ctrl_advance does):
 * the output, the state and both window buffers must equal the pair's bit
 * for bit; the first mismatch of each is printed (value head and column,
 * state entry, window channel), so a wrong row mapping shows where.
 * Timing (not in --quick): CUDA graphs of LAYERS back-to-back layers, each
 * with its own in_proj, state and window (beyond L2) and the out_proj after
 * it as in the engine (ring_gemv<4096>, h += W_o . out: the next layer's h),
 * PDL on, best of 20 replays: µs a layer for the pair + out_proj and for the
 * fused kernel + out_proj.
 * --quick: 3 steps, no timing (for compute-sanitizer).  Exit status 0 = all
 * equal, 1 = a mismatch, a skip (the fused form not supported here) or a
 * CUDA error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "workshop.h"

static const int HK = 16, HV = 32, D = 128, KC = 4, HID = 2048;
static const int KD = HK * D, C = 2 * KD + HV * D, VD = HV * D, ROWS = C + VD + 2 * HV;
static const int LAYERS = 30;

struct layer {
    lc_qmat in_proj, out_proj;
    float *conv, *state; /* [2][KC-1][C], [HV][D][D] */
};

static void set_flip(lc_ctrl *d, int flip) {
    lc_ctrl c;
    memset(&c, 0, sizeof c);
    c.conv_flip = flip;
    CK(cudaMemcpy(d, &c, sizeof c, cudaMemcpyHostToDevice));
}

/* the first index where a and b differ bitwise, or -1 */
static long first_diff(const std::vector<float> &a, const std::vector<float> &b) {
    for (size_t i = 0; i < a.size(); i++)
        if (memcmp(&a[i], &b[i], 4) != 0) return (long)i;
    return -1;
}

struct bench_ctx {
    std::vector<layer> *L;
    lc_gdn_params p;
    const float *norm_w;
    float *h, *proj, *out;
    lc_ctrl *ctrl;
    bool fused;
};
static void layer_fn(int i, cudaStream_t st, void *v) {
    bench_ctx *c = (bench_ctx *)v;
    layer &l = (*c->L)[i % c->L->size()];
    if (c->fused) {
        CK(lc_gdn_fused(&l.in_proj, c->h, c->norm_w, 1e-6f, &c->p, l.conv, l.state, c->out, c->ctrl, st));
    } else {
        CK(lc_gemv_rms(&l.in_proj, c->h, c->norm_w, 1e-6f, c->proj, NULL, c->ctrl, st));
        CK(lc_gdn(&c->p, c->proj, ROWS, 1, l.conv, l.state, c->out, c->ctrl, st));
    }
    CK(lc_gemv(&l.out_proj, 0, c->out, c->h, c->h, c->ctrl, st));
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int steps = quick ? 3 : 8;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("gdn_fused_test: %s, %d SMs, L2 %d MB%s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
           quick ? "  [--quick]" : "");

    /* the layer's parameters (shared by every layer: the timing streams the weights, not these) */
    float *conv_w = up_f32(rnd((size_t)C * KC, 11, -0.5f, 0.5f)), *A_log = up_f32(rnd(HV, 12, -1.0f, 1.0f));
    float *dt_bias = up_f32(rnd(HV, 13, -1.0f, 1.0f)), *gnorm = up_f32(rnd(D, 14, 0.5f, 1.5f));
    float *norm_w = up_f32(rnd(HID, 15, 0.5f, 1.5f));
    const lc_gdn_params p = {HK, HV, D, D, KC, 1e-6f, conv_w, A_log, dt_bias, gnorm, {}};
    lc_ctrl *ctrl;
    CK(cudaMalloc(&ctrl, sizeof(lc_ctrl)));
    set_flip(ctrl, 0);
    std::vector<layer> L(quick ? 1 : LAYERS);
    for (size_t i = 0; i < L.size(); i++) {
        L[i].in_proj = make_qmat(ROWS, HID, 1, 100 + 4 * i);
        L[i].out_proj = make_qmat(HID, VD, 1, 101 + 4 * i);
        L[i].conv = up_f32(rnd((size_t)2 * (KC - 1) * C, 102 + 4 * i, -0.5f, 0.5f));
        L[i].state = up_f32(rnd((size_t)HV * D * D, 103 + 4 * i, -0.05f, 0.05f));
    }
    if (!lc_gdn_fused_ok(&L[0].in_proj, &p)) {
        printf("SKIP: lc_gdn_fused_ok says no (not sm_90, the in_proj not on ring_gemv, or the step not split in 4)\n");
        return 1;
    }
    float *h, *proj, *outA, *outB, *convB, *stateB;
    CK(cudaMalloc(&h, HID * 4));
    CK(cudaMalloc(&proj, (size_t)ROWS * 4));
    CK(cudaMalloc(&outA, VD * 4));
    CK(cudaMalloc(&outB, VD * 4));
    const size_t nconv = (size_t)2 * (KC - 1) * C, nstate = (size_t)HV * D * D;
    CK(cudaMalloc(&convB, nconv * 4));
    CK(cudaMalloc(&stateB, nstate * 4));
    CK(cudaMemcpy(convB, L[0].conv, nconv * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(stateB, L[0].state, nstate * 4, cudaMemcpyDeviceToDevice));

    /* ---- correctness: the pair (A, in layer 0's buffers) and the fused kernel (B) ---- */
    int fails = 0;
    for (int s = 0; s < steps; s++) {
        const std::vector<float> hs = rnd(HID, 1000 + s, -1.0f, 1.0f);
        set_flip(ctrl, s & 1);
        CK(cudaMemcpy(h, hs.data(), HID * 4, cudaMemcpyHostToDevice));
        CK(lc_gemv_rms(&L[0].in_proj, h, norm_w, 1e-6f, proj, NULL, ctrl, 0));
        CK(lc_gdn(&p, proj, ROWS, 1, L[0].conv, L[0].state, outA, ctrl, 0));
        CK(lc_gdn_fused(&L[0].in_proj, h, norm_w, 1e-6f, &p, convB, stateB, outB, ctrl, 0));
        CK(cudaDeviceSynchronize());
        const std::vector<float> oa = dl(outA, VD), ob = dl(outB, VD), sa = dl(L[0].state, nstate), sb = dl(stateB, nstate);
        const std::vector<float> ca = dl(L[0].conv, nconv), cb = dl(convB, nconv);
        const long od = first_diff(oa, ob), sd = first_diff(sa, sb), cd = first_diff(ca, cb);
        if (od < 0 && sd < 0 && cd < 0) {
            printf("step %d: output, state and window bit for bit the pair's\n", s);
            continue;
        }
        fails++;
        if (od >= 0)
            printf("step %d: output differs first at value head %ld column %ld: %.9g (pair) vs %.9g (fused)  FAIL\n", s, od / D,
                   od % D, oa[od], ob[od]);
        if (sd >= 0)
            printf("step %d: state differs first at head %ld row %ld column %ld: %.9g vs %.9g  FAIL\n", s, sd / (D * D),
                   sd / D % D, sd % D, sa[sd], sb[sd]);
        if (cd >= 0)
            printf("step %d: window differs first at buffer %ld tap %ld channel %ld: %.9g vs %.9g  FAIL\n", s,
                   cd / ((KC - 1) * (long)C), cd / C % (KC - 1), cd % C, ca[cd], cb[cd]);
    }

    /* ---- timing: the pair or the fused kernel, each followed by the out_proj, LAYERS layers a graph ---- */
    if (!quick && fails == 0) {
        set_flip(ctrl, 0);
        bench_ctx c = {&L, p, norm_w, h, proj, outA, ctrl, false};
        const double pair = time_graph(layer_fn, &c, LAYERS, 20);
        c.fused = true;
        const double fused = time_graph(layer_fn, &c, LAYERS, 20);
        c.fused = false;
        const double pair2 = time_graph(layer_fn, &c, LAYERS, 20);
        printf("us a layer (with its out_proj), %d layers a graph, best of 20: pair %.2f / %.2f (before / after), fused %.2f\n",
               LAYERS, pair, pair2, fused);
    }
    printf("%s\n", fails ? "FAIL" : "all ok");
    return fails ? 1 : 0;
}
