/* test_gpu_backend.c — the CUDA backend against the references: the HF
 * golden logits and ids of the tiny fixture, the CPU backend on a random
 * model of the real width (4 layers, 256 experts), prefill vs decode,
 * device generation vs the host loop, snapshots.  Skips, saying so, when
 * this machine has no usable GPU; `make test-gpu` turns skips into failures. */
#include <math.h>
#include <sys/stat.h>
#include <time.h>

#include "check.h"
#include "lilac.h"
#include "model/safetensors.h"
#include "model/synth_write.h"

/* the CUDA backend's record of the LILAC_DECODE_TRY variants launched
 * and its default set (cuda_ops.h); builds without CUDA run none */
#if LILAC_CUDA
int lc_decode_try_used(int reset);
int lc_decode_try_default(void);
static int try_used(int reset) { return lc_decode_try_used(reset); }
static int try_default(void) { return lc_decode_try_default(); }
#else
static int try_used(int reset) {
    (void)reset;
    return 0;
}
static int try_default(void) { return 0; }
#endif

/* cuda_ops.h's LC_TRY_PICK (the lm_head picks the greedy id), LC_TRY_HRING (its ring form), LC_TRY_HEARLY,
 * LC_TRY_ESLOT (the MoE kernel's experts requested per top-K rank) */
enum { LC_TRY_PICK_BIT = 8, LC_TRY_HRING_BIT = 32, LC_TRY_HEARLY_BIT = 64, LC_TRY_ESLOT_BIT = 128 };

#define TINY "tests/fixtures/tiny"

static lilac_tensors golden;
static const int32_t *prompt, *generated;
static const float *g_logits, *g_margin;
static int P, N, V;
static int32_t all_ids[128];

static lilac_engine *open_engine(const char *dir, const char *backend, int chunk, lilac_error *e) {
    lilac_engine_opts o = {.model_dir = dir, .backend = backend, .threads = 0, .chunk = chunk};
    lilac_engine *g = NULL;
    if (lilac_engine_open(&o, &g, e)) return NULL;
    return g;
}

static float *score(lilac_engine *g, const int32_t *ids, int T) {
    int Vv;
    lilac_engine_info info;
    lilac_engine_get_info(g, &info);
    Vv = info.vocab_size;
    float *lg = malloc((size_t)T * Vv * sizeof(float));
    lilac_session *s = NULL;
    lilac_error e = {0};
    if (lilac_session_new(g, T + 8, &s, &e) || lilac_session_feed(s, ids, T, lg, 1, &e)) {
        CHECK(0, "score: %s", e.msg);
        free(lg);
        lg = NULL;
    }
    lilac_session_free(s);
    return lg;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d;
    }
    return m;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* KL(p_ref || p) of two logit rows */
static double kl(const float *ref, const float *x, int n) {
    double mr = ref[0], mx = x[0];
    for (int i = 1; i < n; i++) mr = ref[i] > mr ? ref[i] : mr, mx = x[i] > mx ? x[i] : mx;
    double zr = 0, zx = 0;
    for (int i = 0; i < n; i++) zr += exp(ref[i] - mr), zx += exp(x[i] - mx);
    double k = 0;
    for (int i = 0; i < n; i++) {
        double lp = ref[i] - mr - log(zr), lq = x[i] - mx - log(zx);
        k += exp(lp) * (lp - lq);
    }
    return k;
}

static double tiny_err; /* measured max |logit - golden| of the GPU on the tiny model */

static void test_gpu_golden_logits(void) {
    lilac_error e = {0};
    lilac_engine *g = open_engine(TINY, "cuda", 0, &e);
    CHECK(g != NULL, "%s", e.msg);
    if (!g) return;
    float *lg = score(g, all_ids, P + N);
    if (lg) {
        tiny_err = max_diff(lg, g_logits, (size_t)(P + N) * V);
        int agree = 0;
        for (int t = 0; t < P + N; t++) agree += argmax(lg + (size_t)t * V, V) == argmax(g_logits + (size_t)t * V, V);
        printf("    tiny: max |logit - HF golden| = %.3g, top-1 agreement %d/%d\n", tiny_err, agree, P + N);
        CHECK(tiny_err < 2e-2, "GPU logits differ from the golden by %g", tiny_err);
        for (int t = 0; t < P + N; t++)
            if (g_margin[t] > 2 * tiny_err)
                CHECK(argmax(lg + (size_t)t * V, V) == argmax(g_logits + (size_t)t * V, V), "top-1 differs at %d (margin %g)", t,
                      g_margin[t]);
    }
    free(lg);
    lilac_engine_close(g);
}

static int collect(void *ctx, const lilac_token_info *t) {
    ((int32_t *)ctx)[t->index] = t->id;
    return 0;
}

/* Greedy on the device: with_logprobs = 0 ends each graph step in argmax,
 * 1 in the sampler (greedy, with the logprob kernels). */
static void gen(lilac_engine *g, int with_logprobs, int32_t *out, int *n) {
    lilac_session *s = NULL;
    lilac_error e = {0};
    lilac_gen_params p = {0};
    p.max_tokens = N;
    p.sampling = lilac_sampling_greedy();
    p.logprobs = with_logprobs;
    lilac_finish why;
    *n = 0;
    if (lilac_session_new(g, P + N + 8, &s, &e) || lilac_session_feed(s, prompt, P, NULL, 0, &e) ||
        lilac_session_generate(s, &p, collect, out, n, &why, &e))
        CHECK(0, "generate: %s", e.msg);
    CHECK(lilac_session_len(s) == P + *n - 1, "session length %d after %d tokens", lilac_session_len(s), *n);
    lilac_session_free(s);
}

/* Greedy on the host: one forward per token, argmax of the returned logits. */
static void gen_host(lilac_engine *g, int32_t *out, int *n) {
    lilac_session *s = NULL;
    lilac_error e = {0};
    float *row = malloc((size_t)V * sizeof(float));
    *n = 0;
    int ok = row && !lilac_session_new(g, P + N + 8, &s, &e) && !lilac_session_feed(s, prompt, P, row, 0, &e);
    for (int i = 0; ok && i < N; i++) {
        out[(*n)++] = argmax(row, V);
        if (i + 1 < N) ok = !lilac_session_feed(s, &out[i], 1, row, 0, &e);
    }
    CHECK(ok, "host loop: %s", e.msg);
    lilac_session_free(s);
    free(row);
}

static void test_gpu_generate(void) {
    lilac_error e = {0};
    lilac_engine *g = open_engine(TINY, "cuda", 0, &e);
    REQUIRE(g != NULL, "%s", e.msg);
    int32_t dev[64], samp[64], host[64];
    int nd = 0, ns = 0, nh = 0;
    gen(g, 0, dev, &nd);
    gen(g, 1, samp, &ns);
    gen_host(g, host, &nh);
    CHECK(nd == N && ns == N && nh == N, "generated %d, %d and %d of %d", nd, ns, nh, N);
    for (int i = 0; i < N && i < nd && i < ns && i < nh; i++) {
        CHECK(dev[i] == host[i], "device loop and host loop differ at %d: %d vs %d", i, dev[i], host[i]);
        CHECK(dev[i] == samp[i], "argmax and greedy sampler graphs differ at %d: %d vs %d", i, dev[i], samp[i]);
        if (g_margin[P + i] > 2 * tiny_err)
            CHECK(dev[i] == generated[i], "token %d: %d, golden %d (margin %g)", i, dev[i], generated[i], g_margin[P + i]);
        else if (dev[i] != generated[i])
            printf("    token %d differs from the golden within its margin %g\n", i, g_margin[P + i]);
        if (dev[i] != generated[i]) break; /* the continuations diverge from here on */
    }
    lilac_engine_close(g);
}

/* Prefill in one chunk, in chunks of 7, and token by token (the decode path) agree. */
static void test_gpu_chunks(void) {
    lilac_error e = {0};
    float *ref = NULL;
    int chunks[] = {0, 7, 1};
    for (int k = 0; k < 3; k++) {
        lilac_engine *g = open_engine(TINY, "cuda", chunks[k], &e);
        REQUIRE(g != NULL, "%s", e.msg);
        float *lg = score(g, all_ids, P + N);
        if (lg && ref) {
            double d = max_diff(ref, lg, (size_t)(P + N) * V);
            printf("    chunk %d vs one chunk: max |diff| %.3g\n", chunks[k], d);
            CHECK(d < 5e-3, "chunk %d differs by %g", chunks[k], d); /* GEMV vs GEMM order, bf16 KV */
        }
        if (!ref) ref = lg;
        else free(lg);
        lilac_engine_close(g);
    }
    free(ref);
}

static void test_gpu_snapshot(void) {
    lilac_error e = {0};
    lilac_engine *g = open_engine(TINY, "cuda", 0, &e);
    REQUIRE(g != NULL, "%s", e.msg);
    lilac_session *a = NULL, *b = NULL;
    int32_t x[32], y[32];
    int nx = 0, ny = 0;
    CHECK(!lilac_session_new(g, 128, &a, &e) && !lilac_session_new(g, 128, &b, &e), "%s", e.msg);
    CHECK(!lilac_session_feed(a, prompt, P, NULL, 0, &e), "%s", e.msg);
    CHECK(!lilac_session_copy(b, a, &e), "%s", e.msg);
    CHECK(!lilac_session_generate_greedy(a, 16, 0, x, &nx, &e) && !lilac_session_generate_greedy(b, 16, 0, y, &ny, &e), "%s",
          e.msg);
    CHECK(nx == 16 && ny == 16 && !memcmp(x, y, sizeof(int32_t) * 16), "restored snapshot continues differently");
    /* a session continued after generation equals one fed the same tokens */
    lilac_session_reset(b);
    int32_t more[64];
    memcpy(more, prompt, (size_t)P * sizeof(int32_t));
    memcpy(more + P, x, 15 * sizeof(int32_t));
    CHECK(!lilac_session_feed(b, more, P + 15, NULL, 0, &e), "%s", e.msg);
    CHECK(lilac_session_len(a) == lilac_session_len(b), "lengths %d %d", lilac_session_len(a), lilac_session_len(b));
    int32_t ca[8], cb[8];
    int na = 0, nb = 0;
    int32_t tok = x[15];
    CHECK(!lilac_session_feed(a, &tok, 1, NULL, 0, &e) && !lilac_session_feed(b, &tok, 1, NULL, 0, &e), "%s", e.msg);
    CHECK(!lilac_session_generate_greedy(a, 8, 0, ca, &na, &e) && !lilac_session_generate_greedy(b, 8, 0, cb, &nb, &e), "%s",
          e.msg);
    CHECK(na == 8 && nb == 8 && !memcmp(ca, cb, sizeof ca), "generation then feed differs from feeding the same tokens");
    lilac_session_free(a);
    lilac_session_free(b);
    lilac_engine_close(g);
}

/* The real width: 4 layers (3 DeltaNet + 1 attention), 256 experts, 248K
 * vocabulary, random weights; CPU and GPU score the same 256 positions. */
/* Whether the default decode repeats its logits bit for bit across
 * sessions (test_gpu_vs_cpu_real_width finds out; the candidates' bitwise
 * checks rest on it) */
static int g_default_repeats = 1;

static void test_gpu_vs_cpu_real_width(void) {
    const char *dir = "/tmp/lilac-synth-4l";
    lilac_error e = {0};
    struct stat sb;
    char marker[256];
    snprintf(marker, sizeof marker, "%s/model.safetensors", dir);
    if (stat(marker, &sb) != 0) {
        clock_t t = clock();
        CHECK(lilac_synth_write("tests/fixtures/qwen36-config", 4, dir, 7, &e) == LILAC_OK, "%s", e.msg);
        printf("    wrote %s in %.1f s\n", dir, (double)(clock() - t) / CLOCKS_PER_SEC);
    }
    enum { T = 256 };
    int32_t ids[T];
    uint64_t x = 99;
    for (int i = 0; i < T; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)((x >> 33) % 248044);
    lilac_engine *gc = open_engine(dir, "cpu", 64, &e);
    CHECK(gc != NULL, "cpu: %s", e.msg);
    lilac_engine *gg = open_engine(dir, "cuda", 0, &e);
    CHECK(gg != NULL, "cuda: %s", e.msg);
    if (!gc || !gg) {
        lilac_engine_close(gc);
        lilac_engine_close(gg);
        return;
    }
    lilac_engine_info info;
    lilac_engine_get_info(gg, &info);
    const int Vr = info.vocab_size;
    float *a = score(gc, ids, T), *b = score(gg, ids, T);
    if (a && b) {
        int agree = 0;
        double mk = 0, md = max_diff(a, b, (size_t)T * Vr);
        for (int t = 0; t < T; t++) {
            agree += argmax(a + (size_t)t * Vr, Vr) == argmax(b + (size_t)t * Vr, Vr);
            mk += kl(a + (size_t)t * Vr, b + (size_t)t * Vr, Vr);
        }
        printf("    real width, %d positions: top-1 agreement %.2f%%, max |dlogit| %.3g, mean KL %.3g\n", T,
               100.0 * agree / T, md, mk / T);
        CHECK(agree >= 0.99 * T, "top-1 agreement %d/%d", agree, T);
    }
    /* decode after prefill equals the prefill logits: the MoE as one kernel
     * (lc_moe_slots, the default at these shapes), as the router, gate/up
     * and down kernels (LILAC_MOE=split), and with each candidate variant
     * (LILAC_DECODE_TRY, cuda_ops.h) alone and all together, which must give
     * the default's logits bit for bit; both variables are read when a
     * session's step is enqueued */
    /* "" first: the default once more, which must repeat itself bit for bit
     * for the comparison to mean anything (else the variants are held to
     * the tolerance only, and the test says so) */
    /* "none": no variant (the forms the sanitizers that cannot follow a variant run) */
    static const char *const cands[] = {"",      "none",         "xchg",           "c8",  "topk1", "topk1,tk9", "hring",
                                        "hring,hearly", "topk1,eslot", "c8,topk1,eslot", "all"};
    /* the launches each must show (cuda_ops.h's LC_TRY_* bits): "" the default set, checked below; "pick" never
     * launches here (it is the greedy loop's: checked after) */
    /* eslot replaces tk9's rounds in the MoE kernel (so "all" launches no tk9) */
    static const int expect[] = {0, 0, 1, 2, 4, 4 | 16, LC_TRY_HRING_BIT, LC_TRY_HRING_BIT | LC_TRY_HEARLY_BIT,
                                 4 | LC_TRY_ESLOT_BIT, 6 | LC_TRY_ESLOT_BIT, 7 | LC_TRY_ESLOT_BIT};
    enum { NTRY = sizeof cands / sizeof cands[0] };
    float *rows0 = b ? malloc((size_t)16 * Vr * sizeof(float)) : NULL;
    for (int form = 0; rows0 && form < 2 + NTRY; form++) {
        lilac_session *s = NULL;
        float *row = malloc((size_t)Vr * sizeof(float));
        const char *cand = form >= 2 ? cands[form - 2] : NULL;
        if (form == 1) setenv("LILAC_MOE", "split", 1);
        if (cand && *cand) setenv("LILAC_DECODE_TRY", cand, 1);
        try_used(1);
        if (!lilac_session_new(gg, T + 8, &s, &e) && !lilac_session_feed(s, ids, T / 2, NULL, 0, &e)) {
            double worst = 0;
            int top = 0, n = 0, same = 0;
            for (int t = T / 2; t < T / 2 + 16; t++, n++) {
                if (lilac_session_feed(s, &ids[t], 1, row, 0, &e)) break;
                double d = max_diff(row, b + (size_t)t * Vr, (size_t)Vr);
                worst = d > worst ? d : worst;
                top += argmax(row, Vr) == argmax(b + (size_t)t * Vr, Vr);
                if (form == 0) memcpy(rows0 + (size_t)n * Vr, row, (size_t)Vr * sizeof(float));
                else same += memcmp(rows0 + (size_t)n * Vr, row, (size_t)Vr * sizeof(float)) == 0;
            }
            const int used = try_used(0);
            if (cand)
                printf("    decode after prefill, LILAC_DECODE_TRY=%s (ran 0x%x): %d/%d rows of logits bit for bit the "
                       "default's, max |dlogit| vs prefill %.3g\n",
                       *cand ? cand : "(unset, again)", used, same, n, worst);
            else
                printf("    decode after prefill vs prefill (MoE %s): max |dlogit| %.3g, top-1 %d/%d\n",
                       form ? "router + gate/up + down" : "one kernel", worst, top, n);
            CHECK(n == 16, "decode stopped after %d tokens: %s", n, e.msg);
            CHECK(worst < 5e-3, "decode after prefill differs by %g", worst);
            CHECK(top == n, "top-1 differs at %d of %d positions", n - top, n);
            if (cand && !*cand) {
                /* pick is the greedy loop's (checked after): the feed path never launches it */
                const int want = try_default() & ~LC_TRY_PICK_BIT;
                CHECK(used == want, "the default launched variants 0x%x, expected 0x%x", used, want);
                g_default_repeats = same == n;
                if (!g_default_repeats)
                    printf("    NOTE: the default decode does not repeat itself bit for bit (%d/%d rows): the variants are "
                           "held to the tolerance only\n", same, n);
            } else if (cand) {
                if (g_default_repeats) CHECK(same == n, "LILAC_DECODE_TRY=%s changed %d of %d rows", cand, n - same, n);
                /* every candidate applies at these shapes on sm_90: a silent fallback would test nothing */
                CHECK((used & expect[form - 2]) == expect[form - 2],
                      "LILAC_DECODE_TRY=%s: launched variants 0x%x, expected 0x%x", cand, used, expect[form - 2]);
                if (strcmp(cand, "none") == 0) CHECK(used == 0, "LILAC_DECODE_TRY=none launched variants 0x%x", used);
            }
        } else {
            CHECK(0, "%s", e.msg);
        }
        unsetenv("LILAC_MOE");
        unsetenv("LILAC_DECODE_TRY");
        free(row);
        lilac_session_free(s);
    }
    free(rows0);
    /* the greedy device loop with the pick in the lm_head (LILAC_DECODE_TRY
     * "pick": no argmax kernel; with "hring", the lm_head's ring form, and
     * "hearly", launched before the last MoE ends) against
     * the argmax kernel: the same ids, and the same stop at a stop id (the
     * fifth id of the first run) */
    {
        static const char *const picks[] = {"xchg,c8,topk1", "xchg,c8,topk1,pick", "xchg,c8,topk1,pick,hring",
                                            "xchg,c8,topk1,pick,hring,hearly"};
        enum { NG = 24, NF = 4 };
        int32_t got[NF][2][NG];
        int n_got[NF][2] = {{0}}, len[NF][2] = {{0}}, used[NF] = {0};
        for (int f = 0; f < NF; f++) {
            setenv("LILAC_DECODE_TRY", picks[f], 1);
            try_used(1);
            for (int run = 0; run < 2; run++) {
                lilac_session *s = NULL;
                lilac_gen_params p = {0};
                lilac_finish why;
                p.max_tokens = NG;
                p.sampling = lilac_sampling_greedy();
                p.stop_ids = &got[0][0][4];
                p.n_stop_ids = run; /* run 1: stop at the first run's fifth id */
                if (lilac_session_new(gg, T + NG + 8, &s, &e) || lilac_session_feed(s, ids, T / 2, NULL, 0, &e) ||
                    lilac_session_generate(s, &p, collect, got[f][run], &n_got[f][run], &why, &e))
                    CHECK(0, "greedy %s: %s", picks[f], e.msg);
                len[f][run] = s ? lilac_session_len(s) : -1; /* the device's stop: no step fed past the stop id */
                lilac_session_free(s);
            }
            used[f] = try_used(0);
            unsetenv("LILAC_DECODE_TRY");
        }
        int stop_at = 0; /* where the stop id first appears in the first run */
        while (stop_at < NG - 1 && got[0][0][stop_at] != got[0][0][4]) stop_at++;
        for (int f = 1; f < NF; f++) {
            int same = n_got[0][0] == n_got[f][0] && n_got[0][0] == NG;
            for (int i = 0; same && i < NG; i++) same = got[0][0][i] == got[f][0][i];
            printf("    greedy, %d tokens: %s %s the argmax kernel's ids (ran 0x%x / 0x%x); stopped after %d / %d "
                   "tokens at a stop id (expected %d), sessions of %d / %d tokens\n",
                   NG, picks[f], same ? "gives" : "DIFFERS from", used[0], used[f], n_got[0][1], n_got[f][1], stop_at + 1,
                   len[0][1], len[f][1]);
            CHECK(same, "the lm_head's pick (%s) gave other ids than the argmax kernel", picks[f]);
            CHECK((used[f] & LC_TRY_PICK_BIT) && !(used[0] & LC_TRY_PICK_BIT), "pick launched 0x%x / 0x%x", used[0], used[f]);
            CHECK(n_got[0][1] == stop_at + 1 && n_got[f][1] == stop_at + 1, "stop id: %d and %d tokens, expected %d",
                  n_got[0][1], n_got[f][1], stop_at + 1);
            CHECK(len[0][0] == len[f][0] && len[0][1] == len[f][1], "session lengths %d %d / %d %d", len[0][0], len[f][0],
                  len[0][1], len[f][1]);
        }
        CHECK(used[2] & LC_TRY_HRING_BIT, "hring launched 0x%x", used[2]);
        CHECK((used[3] & LC_TRY_HEARLY_BIT) && (used[3] & LC_TRY_HRING_BIT), "hring,hearly launched 0x%x", used[3]);
    }
    free(a);
    free(b);
    lilac_engine_close(gc);
    lilac_engine_close(gg);
}

/* Scores ids in uneven pieces (each prefilled in the engine's chunks). */
static float *score_pieces(lilac_engine *g, const int32_t *ids, int T, const int *pieces, int npieces, int V_) {
    float *lg = malloc((size_t)T * V_ * sizeof(float));
    lilac_session *s = NULL;
    lilac_error e = {0};
    int off = 0;
    if (lilac_session_new(g, T + 8, &s, &e)) CHECK(0, "%s", e.msg);
    for (int i = 0; s && i < npieces && off < T; i++) {
        const int n = pieces[i] < T - off ? pieces[i] : T - off;
        if (lilac_session_feed(s, ids + off, n, lg + (size_t)off * V_, 1, &e)) {
            CHECK(0, "piece %d: %s", i, e.msg);
            break;
        }
        off += n;
    }
    lilac_session_free(s);
    if (off != T) {
        free(lg);
        return NULL;
    }
    return lg;
}

/* The prefill path at the real width over a long prompt: 1,100 tokens fed in
 * uneven pieces (so chunks start mid-prompt, at odd offsets, across the
 * engine's chunk boundaries), CUDA against the fp32 CPU backend; and the
 * CUDA logits bitwise identical from run to run. */
static void test_gpu_prefill_real_width(void) {
    const char *dir = "/tmp/lilac-synth-4l"; /* written by test_gpu_vs_cpu_real_width */
    lilac_error e = {0};
    enum { T = 1100 };
    static const int pieces[] = {333, 517, 7, 1, 242};
    int32_t *ids = malloc(T * sizeof *ids);
    uint64_t x = 7;
    for (int i = 0; i < T; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)((x >> 33) % 248044);
    lilac_engine *gc = open_engine(dir, "cpu", 128, &e);
    CHECK(gc != NULL, "cpu: %s", e.msg);
    lilac_engine *gg = open_engine(dir, "cuda", 0, &e);
    CHECK(gg != NULL, "cuda: %s", e.msg);
    if (gc && gg) {
        lilac_engine_info info;
        lilac_engine_get_info(gg, &info);
        const int Vr = info.vocab_size;
        float *a = score(gc, ids, T);
        float *b = score_pieces(gg, ids, T, pieces, 5, Vr), *b2 = score_pieces(gg, ids, T, pieces, 5, Vr);
        if (a && b && b2) {
            int agree = 0;
            double mk = 0, md = max_diff(a, b, (size_t)T * Vr);
            for (int t = 0; t < T; t++) {
                agree += argmax(a + (size_t)t * Vr, Vr) == argmax(b + (size_t)t * Vr, Vr);
                mk += kl(a + (size_t)t * Vr, b + (size_t)t * Vr, Vr);
            }
            mk /= T;
            printf("    prefill, real width, %d positions in pieces of 333/517/7/1/242: top-1 %.2f%%, max |dlogit| %.3g, "
                   "mean KL %.3g\n", T, 100.0 * agree / T, md, mk);
            CHECK(agree >= 0.995 * T, "top-1 agreement %d/%d", agree, T);
            CHECK(mk <= 1e-4, "mean KL %g", mk);
            CHECK(memcmp(b, b2, (size_t)T * Vr * sizeof(float)) == 0, "two CUDA runs differ");
        }
        free(a);
        free(b);
        free(b2);
    }
    free(ids);
    lilac_engine_close(gc);
    lilac_engine_close(gg);
}

/* Decode attention at a long context (many 64-key chunks per block, the
 * cp.async pipeline wrapping around) against the prefill path, which uses the
 * generic attention kernel: the logits after L tokens fed as a prompt equal
 * those after L - 8 prompt tokens and 8 decode steps.  Run with the default
 * split (one block per SM) and with 3 ranges per kv head. */
static void test_gpu_long_context_decode(void) {
    const char *dir = "/tmp/lilac-synth-4l"; /* written by test_gpu_vs_cpu_real_width */
    enum { L = 9000, TAIL = 8 };
    static int32_t ids[L];
    uint64_t x = 5;
    for (int i = 0; i < L; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)((x >> 33) % 248044);
    /* the default ranges, 3 ranges (each block walks many chunks), and the
     * default ranges without the default variants (LILAC_DECODE_TRY=none:
     * the same logits as the first pass, bit for bit) */
    const char *splits[3] = {NULL, "3", NULL};
    float *ref = NULL, *row0 = NULL;
    for (int k = 0; k < 3; k++) {
        lilac_error e = {0};
        if (splits[k]) setenv("LILAC_ATTN_SPLITS", splits[k], 1);
        if (k == 2) setenv("LILAC_DECODE_TRY", "none", 1);
        lilac_engine *g = open_engine(dir, "cuda", 0, &e);
        unsetenv("LILAC_ATTN_SPLITS");
        CHECK(g != NULL, "cuda: %s", e.msg);
        if (!g) break;
        lilac_engine_info info;
        lilac_engine_get_info(g, &info);
        const int Vr = info.vocab_size;
        float *row = malloc((size_t)Vr * sizeof(float));
        lilac_session *s = NULL;
        if (!ref) { /* the reference: all L tokens as one prompt (prefill attention) */
            ref = malloc((size_t)Vr * sizeof(float));
            CHECK(!lilac_session_new(g, L + 8, &s, &e) && !lilac_session_feed(s, ids, L, ref, 0, &e), "%s", e.msg);
            lilac_session_free(s);
            s = NULL;
        }
        int ok = !lilac_session_new(g, L + 8, &s, &e) && !lilac_session_feed(s, ids, L - TAIL, NULL, 0, &e);
        for (int t = L - TAIL; ok && t < L; t++) ok = !lilac_session_feed(s, &ids[t], 1, row, 0, &e);
        CHECK(ok, "%s", e.msg);
        if (ok) {
            const double d = max_diff(row, ref, (size_t)Vr);
            printf("    %d-token context, decode vs prefill (%s ranges per kv head%s): max |dlogit| %.3g, top-1 %s\n", L,
                   splits[k] ? splits[k] : "default", k == 2 ? ", LILAC_DECODE_TRY=none" : "", d,
                   argmax(row, Vr) == argmax(ref, Vr) ? "equal" : "DIFFERS");
            CHECK(d < 1e-2, "long-context decode differs from prefill by %g", d);
            CHECK(argmax(row, Vr) == argmax(ref, Vr), "top-1 differs");
            if (k == 0) row0 = malloc((size_t)Vr * sizeof(float)), memcpy(row0, row, (size_t)Vr * sizeof(float));
            if (k == 2 && row0 && g_default_repeats)
                CHECK(memcmp(row0, row, (size_t)Vr * sizeof(float)) == 0, "LILAC_DECODE_TRY=none changed the logits");
        }
        unsetenv("LILAC_DECODE_TRY");
        lilac_session_free(s);
        free(row);
        lilac_engine_close(g);
    }
    free(ref);
    free(row0);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_error e = {0};
    lilac_engine *probe = open_engine(TINY, "cuda", 0, &e);
    if (!probe) {
        SKIP("%s", e.msg);
        return check_done("gpu_backend");
    }
    lilac_engine_close(probe);
    if (lilac_st_add_file(&golden, TINY "/golden.safetensors", &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    prompt = lilac_st_find(&golden, "prompt_ids")->data;
    generated = lilac_st_find(&golden, "generated_ids")->data;
    g_logits = lilac_st_find(&golden, "logits")->data;
    g_margin = lilac_st_find(&golden, "top1_margin")->data;
    P = (int)lilac_st_find(&golden, "prompt_ids")->shape[0];
    N = (int)lilac_st_find(&golden, "generated_ids")->shape[0];
    V = (int)lilac_st_find(&golden, "logits")->shape[1];
    for (int i = 0; i < P; i++) all_ids[i] = prompt[i];
    for (int i = 0; i < N; i++) all_ids[P + i] = generated[i];
    RUN(test_gpu_golden_logits);
    RUN(test_gpu_generate);
    RUN(test_gpu_chunks);
    RUN(test_gpu_snapshot);
    RUN(test_gpu_vs_cpu_real_width);
    RUN(test_gpu_long_context_decode);
    RUN(test_gpu_prefill_real_width);
    lilac_st_close(&golden);
    return check_done("gpu_backend");
}
