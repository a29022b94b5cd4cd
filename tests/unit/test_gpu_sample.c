/* test_gpu_sample.c — sampling and logprobs on the GPU against the host
 * sampler's rules (src/engine/sample.h).
 *
 * Kernel level (lc_sample on fixed logits of the real 248,320 vocabulary):
 * empirical frequencies of many draws against the exact probabilities the
 * host rules give (chi-square), for temperature, top_k, top_p, min_p and
 * combinations; nothing outside the kept set ever drawn; top_k ties to the
 * lower id; candidate lists too long for shared memory; the same ids as the
 * host sampler where both walk the candidates in id order; greedy with
 * penalties equal to the host's; seeds; logprobs equal to lilac_logprobs;
 * constrained decoding's allowed-id mask against lilac_sampler_pick_masked
 * (and its cost per token).
 * Engine level (tests/fixtures/tiny on the CUDA backend): device generation
 * against a host replay on the GPU's own logits.  Prints the sampler's time
 * per token.  Skips, saying so, without a GPU (or without CUDA in the build);
 * `make test-gpu` turns skips into failures. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "engine/sample.h"
#include "lilac.h"

#define TINY "tests/fixtures/tiny"

#ifdef LILAC_CUDA
#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"

enum { VBIG = 248320, DRAWS = 20000 };

/* ---- the host's rules, as exact probabilities ---------------------------- */

static int by_rank(const void *a, const void *b, void *ctx) {
    const float *w = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (w[x] > w[y]) return -1;
    if (w[x] < w[y]) return 1;
    return (x > y) - (x < y);
}

/* prob[i] of drawing i under p (no penalties), following sample.c step by step */
static void exact_probs(const float *logits, int V, const lilac_sampling *p, double *prob) {
    float *w = malloc((size_t)V * sizeof *w);
    int32_t *idx = malloc((size_t)V * sizeof *idx);
    const float inv_t = 1.0f / p->temperature;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) {
        w[i] = logits[i] * inv_t;
        if (w[i] > mx) mx = w[i];
    }
    const float floor_w = p->min_p > 0 ? mx + logf(p->min_p) : -INFINITY;
    int n = 0;
    for (int i = 0; i < V; i++)
        if (w[i] >= floor_w) idx[n++] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, by_rank, w);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    double z = 0;
    for (int j = 0; j < n; j++) z += exp((double)w[idx[j]] - mx);
    if (p->top_p > 0 && p->top_p < 1) {
        double acc = 0;
        int cut = n;
        for (int j = 0; j < n; j++) {
            acc += exp((double)w[idx[j]] - mx) / z;
            if (acc >= p->top_p) {
                cut = j + 1;
                break;
            }
        }
        n = cut;
        z = 0;
        for (int j = 0; j < n; j++) z += exp((double)w[idx[j]] - mx);
    }
    memset(prob, 0, (size_t)V * sizeof *prob);
    for (int j = 0; j < n; j++) prob[idx[j]] = exp((double)w[idx[j]] - mx) / z;
    free(w);
    free(idx);
}

/* Pearson chi-square of counts against prob (N draws), tokens pooled in id
 * order into groups of expected count >= 20; *outside: draws of tokens the
 * rules exclude. */
static double chi_square(const int *counts, const double *prob, int V, int N, int *df, long *outside) {
    double c2 = 0, ge = 0;
    long go = 0;
    int groups = 0;
    *outside = 0;
    for (int i = 0; i < V; i++) {
        if (prob[i] == 0) {
            *outside += counts[i];
            continue;
        }
        ge += prob[i] * N, go += counts[i];
        if (ge >= 20) {
            c2 += (go - ge) * (go - ge) / ge, groups++;
            ge = 0, go = 0;
        }
    }
    if (ge > 0) c2 += (go - ge) * (go - ge) / (ge > 1 ? ge : 1), groups++;
    *df = groups > 1 ? groups - 1 : 1;
    return c2;
}

/* ---- the device side ------------------------------------------------------ */

typedef struct {
    int V;
    void *base;
    lc_sampler s;
    float *logits;  /* [V] */
    lc_ctrl *ctrl;
    int32_t *out;   /* [DRAWS] */
    uint32_t *allow;/* constrained decoding's mask, when a test sets it (else NULL) */
    cudaStream_t st;
} dev;

static int dev_open(dev *d, int V) {
    memset(d, 0, sizeof *d);
    d->V = V;
    if (cudaStreamCreateWithFlags(&d->st, cudaStreamNonBlocking) || cudaMalloc(&d->base, lc_sampler_bytes(V)) ||
        cudaMalloc((void **)&d->logits, (size_t)V * 4) || cudaMalloc((void **)&d->ctrl, sizeof(lc_ctrl)) ||
        cudaMalloc((void **)&d->out, DRAWS * 4) || cudaMemsetAsync(d->ctrl, 0, sizeof(lc_ctrl), d->st))
        return 0;
    lc_sampler_carve(d->base, V, &d->s);
    return lc_sampler_clear(&d->s, d->st) == cudaSuccess && cudaStreamSynchronize(d->st) == cudaSuccess;
}

static void dev_close(dev *d) {
    cudaFree(d->base);
    cudaFree(d->logits);
    cudaFree(d->ctrl);
    cudaFree(d->out);
    if (d->st) cudaStreamDestroy(d->st);
}

static lc_samp_params params_of(const lilac_sampling *sp, int n_top) {
    lc_samp_params o;
    memset(&o, 0, sizeof o);
    o.greedy = !(sp->temperature > 0);
    o.inv_t = o.greedy ? 1.0f : 1.0f / sp->temperature;
    o.log_min_p = sp->min_p > 0 ? logf(sp->min_p) : -INFINITY;
    o.top_k = sp->top_k;
    o.top_p = sp->top_p;
    o.rep = sp->repetition_penalty;
    o.freq = sp->frequency_penalty;
    o.pres = sp->presence_penalty;
    o.n_top = n_top;
    lilac_rng r;
    lilac_rng_seed(&r, sp->seed);
    memcpy(o.rng, r.s, sizeof o.rng);
    return o;
}

static lilac_sampling samp(float t, int k, float top_p, float min_p, uint64_t seed) {
    lilac_sampling p = lilac_sampling_greedy();
    p.temperature = t, p.top_k = k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
    return p;
}

/* n consecutive tokens from the same logits (one stream of draws); seen:
 * [V] or NULL.  Returns the device time per token in microseconds. */
static double draw_many(dev *d, const lilac_sampling *sp, const uint8_t *seen, int lp, int n_top, int n, int32_t *ids) {
    lc_samp_params prm = params_of(sp, n_top);
    cudaEvent_t a, z;
    cudaEventCreate(&a);
    cudaEventCreate(&z);
    int ok = lc_sampler_begin(&d->s, &prm, seen, d->st) == cudaSuccess && lc_ctrl_begin(d->ctrl, n, d->st) == cudaSuccess &&
             cudaEventRecord(a, d->st) == cudaSuccess;
    for (int i = 0; ok && i < n; i++) ok = lc_sample(d->logits, &d->s, lp, d->out, NULL, 0, 0, d->allow, d->ctrl, d->st) == cudaSuccess;
    ok = ok && cudaEventRecord(z, d->st) == cudaSuccess && lc_ctrl_end(d->ctrl, d->st) == cudaSuccess;
    ok = ok && cudaMemcpyAsync(ids, d->out, (size_t)n * 4, cudaMemcpyDeviceToHost, d->st) == cudaSuccess;
    cudaError_t err = cudaStreamSynchronize(d->st);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    CHECK(ok && err == cudaSuccess, "device sampling failed: %s", cudaGetErrorString(err ? err : cudaGetLastError()));
    return 1000.0 * ms / n;
}

/* Host to device on the test's stream, then waits for it: a plain cudaMemcpy
 * runs on the legacy stream, which kernels on a non-blocking stream do not
 * wait for, and from pageable memory it may return before its DMA lands
 * (a masked argmax once read the previous mask that way). */
static int to_dev(dev *d, void *dst, const void *src, size_t n) {
    return cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, d->st) == cudaSuccess &&
           cudaStreamSynchronize(d->st) == cudaSuccess;
}

static void upload(dev *d, const float *lg) { CHECK(to_dev(d, d->logits, lg, (size_t)d->V * 4), "upload"); }

static uint64_t lcg(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 11;
}
static double unif(uint64_t *x) { return (double)lcg(x) * 0x1p-53; }

/* A bulk of N(-4, 1.5) logits and 64 head tokens at 12, 11.75, ... spread
 * over the vocabulary: top_k, top_p and min_p all cut somewhere in the head
 * or the bulk depending on the temperature. */
static int32_t head_id(int j) { return (int32_t)(((int64_t)j * 3877 + 101) % VBIG); }
static void shaped_logits(float *lg) {
    uint64_t x = 12345;
    for (int i = 0; i < VBIG; i++) {
        double u = unif(&x) + unif(&x) + unif(&x) + unif(&x) - 2.0; /* ~N(0, 1/3) */
        lg[i] = (float)(-4.0 + 1.5 * sqrt(3.0) * u);
    }
    for (int j = 0; j < 64; j++) lg[head_id(j)] = 12.0f - 0.25f * j;
}

static float *big_logits;
static double *big_prob;
static int *big_count;
static int32_t *big_ids;
static dev D;

/* Draws DRAWS tokens under sp and checks them against the exact distribution. */
static void check_distribution(const char *what, const float *lg, const lilac_sampling *sp) {
    exact_probs(lg, VBIG, sp, big_prob);
    double us = draw_many(&D, sp, NULL, 0, 0, DRAWS, big_ids);
    memset(big_count, 0, VBIG * sizeof *big_count);
    int bad = 0;
    for (int i = 0; i < DRAWS; i++) {
        if (big_ids[i] < 0 || big_ids[i] >= VBIG) bad++;
        else big_count[big_ids[i]]++;
    }
    int df, kept = 0;
    long outside;
    double c2 = chi_square(big_count, big_prob, VBIG, DRAWS, &df, &outside);
    for (int i = 0; i < VBIG; i++) kept += big_prob[i] > 0;
    const double limit = df + 6 * sqrt(2.0 * df) + 10; /* far in the tail: p < 1e-6 */
    printf("    %-34s kept %6d, chi2 %7.1f (df %4d, limit %6.1f), %.1f us/token\n", what, kept, c2, df, limit, us);
    CHECK(bad == 0, "%s: %d ids outside the vocabulary", what, bad);
    CHECK(outside == 0, "%s: %ld draws of tokens the rules exclude", what, outside);
    CHECK(c2 < limit, "%s: chi-square %.1f with %d degrees of freedom", what, c2, df);
}

static void test_distributions(void) {
    lilac_sampling p;
    p = samp(1.0f, 0, 1.0f, 0, 1);
    check_distribution("temperature 1", big_logits, &p);
    p = samp(1.6f, 0, 1.0f, 0, 2);
    check_distribution("temperature 1.6", big_logits, &p);
    p = samp(0.7f, 20, 1.0f, 0, 3);
    check_distribution("T 0.7, top_k 20", big_logits, &p);
    p = samp(1.0f, 0, 0.9f, 0, 4);
    check_distribution("T 1, top_p 0.9", big_logits, &p);
    p = samp(2.5f, 0, 0.95f, 0, 5);
    check_distribution("T 2.5, top_p 0.95 (bulk)", big_logits, &p);
    p = samp(1.3f, 0, 1.0f, 0.05f, 6);
    check_distribution("T 1.3, min_p 0.05", big_logits, &p);
    p = samp(0.8f, 40, 0.8f, 0.02f, 7);
    check_distribution("T 0.8, top_k 40, top_p 0.8, min_p", big_logits, &p);
    p = samp(3.0f, 3000, 0.99f, 0, 8);
    check_distribution("T 3, top_k 3000, top_p 0.99", big_logits, &p);
}

/* top_k cuts through three equal logits: the lower ids are kept. */
static void test_topk_ties(void) {
    float *lg = malloc(VBIG * sizeof *lg);
    memcpy(lg, big_logits, VBIG * sizeof *lg);
    /* ranks 4, 5, 6 tie; give the tie to ids in an order unlike the ranks */
    const int32_t tie[3] = {head_id(6), head_id(4), head_id(5)};
    for (int j = 0; j < 3; j++) lg[tie[j]] = 11.0f;
    upload(&D, lg);
    lilac_sampling p = samp(1.0f, 5, 1.0f, 0, 11);
    check_distribution("top_k 5 through a 3-way tie", lg, &p);
    int32_t lo = tie[0], hi = tie[0];
    for (int j = 1; j < 3; j++) lo = tie[j] < lo ? tie[j] : lo, hi = tie[j] > hi ? tie[j] : hi;
    CHECK(big_count[lo] > 0, "the lowest tied id %d was never drawn", lo);
    CHECK(big_count[hi] == 0, "the highest tied id %d was drawn %d times (top_k keeps the lower ids)", hi, big_count[hi]);
    p = samp(1.0f, 1, 1.0f, 0, 12);
    lg[head_id(0)] = lg[head_id(1)] = 20.0f; /* top_k 1 through a tie: always the lower id */
    upload(&D, lg);
    draw_many(&D, &p, NULL, 0, 0, 100, big_ids);
    int same = 0;
    for (int i = 0; i < 100; i++) same += big_ids[i] == head_id(0);
    CHECK(same == 100, "top_k 1 with a tie at the top: %d of 100 draws were the lower id %d", same, head_id(0));
    upload(&D, big_logits);
    free(lg);
}

/* 12,416 equal logits (every 20th id) over a floor of -40: the cuts land
 * inside a run longer than the shared-memory sort, so the radix path runs. */
static void test_long_lists(void) {
    float *lg = malloc(VBIG * sizeof *lg);
    for (int i = 0; i < VBIG; i++) lg[i] = i % 20 == 3 ? 0.0f : -40.0f;
    upload(&D, lg);
    lilac_sampling p = samp(1.0f, 5000, 1.0f, 0, 21);
    check_distribution("long list: top_k 5000 in a tie", lg, &p);
    p = samp(1.0f, 0, 0.3f, 0, 22);
    check_distribution("long list: top_p 0.3 in a tie", lg, &p);
    p = samp(1.0f, 5000, 0.5f, 0, 23);
    check_distribution("long list: top_k 5000, top_p 0.5", lg, &p);
    /* increasing logits: the logprob candidates span many blocks */
    for (int i = 0; i < VBIG; i++) lg[i] = (float)i * 1e-4f - 10.0f;
    upload(&D, lg);
    p = samp(1.0f, 50, 1.0f, 0, 24);
    check_distribution("increasing logits, top_k 50", lg, &p);
    upload(&D, big_logits);
    free(lg);
}

/* Without top_k and top_p the host walks the kept tokens in id order, as the
 * device does: the same seed gives the same ids (up to float rounding at an
 * interval's edge, a chance of ~1e-8 per draw). */
static void test_same_ids_as_host(void) {
    const lilac_sampling ps[3] = {samp(1.0f, 0, 1.0f, 0, 31), samp(0.6f, 0, 1.0f, 0.001f, 32), samp(1.9f, 0, 1.0f, 0.2f, 33)};
    lilac_sampler hs;
    lilac_error e;
    REQUIRE(lilac_sampler_init(&hs, VBIG, &e) == LILAC_OK, "%s", e.msg);
    const int n = 4000;
    for (int k = 0; k < 3; k++) {
        draw_many(&D, &ps[k], NULL, 0, 0, n, big_ids);
        lilac_sampler_begin(&hs, &ps[k], NULL, 0);
        int differ = 0;
        for (int i = 0; i < n; i++) {
            int32_t h = lilac_sampler_pick(&hs, &ps[k], big_logits);
            lilac_sampler_accept(&hs, h);
            differ += h != big_ids[i];
        }
        CHECK(differ <= 1, "T %g min_p %g: %d of %d ids differ from the host sampler", ps[k].temperature, ps[k].min_p, differ, n);
    }
    lilac_sampler_free(&hs);
}

/* Deterministic modes with penalties: exactly the host sampler's ids. */
static void test_penalties(void) {
    lilac_sampler hs;
    lilac_error e;
    REQUIRE(lilac_sampler_init(&hs, VBIG, &e) == LILAC_OK, "%s", e.msg);
    int32_t prompt[32];
    for (int j = 0; j < 32; j++) prompt[j] = head_id(2 * j); /* the even head tokens were "seen" */
    uint8_t *seen = calloc(VBIG, 1);
    for (int j = 0; j < 32; j++) seen[prompt[j]] = 1;
    lilac_sampling ps[3] = {samp(0, 0, 1.0f, 0, 41), samp(1.0f, 1, 1.0f, 0, 42), samp(0.5f, 1, 0.5f, 0.1f, 43)};
    for (int k = 0; k < 3; k++) ps[k].repetition_penalty = 1.3f, ps[k].frequency_penalty = 0.4f, ps[k].presence_penalty = 0.2f;
    ps[2].repetition_penalty = 0.8f; /* < 1 raises seen tokens */
    const int n = 300;
    for (int k = 0; k < 3; k++) {
        double us = draw_many(&D, &ps[k], seen, 0, 0, n, big_ids);
        lilac_sampler_begin(&hs, &ps[k], prompt, 32);
        int differ = 0, distinct = 0;
        for (int i = 0; i < n; i++) {
            int32_t h = lilac_sampler_pick(&hs, &ps[k], big_logits);
            lilac_sampler_accept(&hs, h);
            differ += h != big_ids[i];
            int j = 0;
            while (j < i && big_ids[j] != big_ids[i]) j++;
            distinct += j == i;
        }
        printf("    penalties, T %g top_k %d: %d distinct ids in %d steps, %.1f us/token\n", ps[k].temperature, ps[k].top_k,
               distinct, n, us);
        CHECK(differ == 0, "T %g top_k %d with penalties: %d of %d ids differ from the host sampler", ps[k].temperature,
              ps[k].top_k, differ, n);
        CHECK(distinct > 5, "the penalties should move the argmax around (%d distinct ids)", distinct);
    }
    free(seen);
    lilac_sampler_free(&hs);
}

static void test_seeds(void) {
    enum { N = 500 };
    int32_t a[N], b[N], c[N];
    lilac_sampling p = samp(1.2f, 50, 0.95f, 0, 77);
    draw_many(&D, &p, NULL, 0, 0, N, a);
    draw_many(&D, &p, NULL, 0, 0, N, b);
    p.seed = 78;
    draw_many(&D, &p, NULL, 0, 0, N, c);
    CHECK(!memcmp(a, b, sizeof a), "equal seeds gave different ids");
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == c[i];
    CHECK(same < N / 2, "seeds 77 and 78 agree on %d of %d ids", same, N);
}

/* The logprob slot of one step against lilac_logprobs. */
static void check_logprobs(const char *what, const float *lg, int n_top) {
    lilac_sampling p = samp(0.9f, 30, 0.9f, 0, 91);
    int32_t id = -1;
    draw_many(&D, &p, NULL, 1, n_top, 1, &id);
    lc_tokinfo ti;
    CHECK(cudaMemcpy(&ti, D.s.lp, sizeof ti, cudaMemcpyDeviceToHost) == cudaSuccess, "read the logprob slot");
    lilac_token_info t = {0};
    lilac_logprobs(lg, VBIG, id, n_top, &t, big_ids);
    CHECK(fabsf(ti.logprob - t.logprob) < 1e-4f, "%s: logprob of %d: device %g, host %g", what, id, ti.logprob, t.logprob);
    CHECK(ti.n_top == t.n_top, "%s: %d alternatives, host %d", what, ti.n_top, t.n_top);
    for (int j = 0; j < t.n_top && j < ti.n_top; j++) {
        CHECK(ti.top_ids[j] == t.top_ids[j], "%s: alternative %d is %d, host %d", what, j, ti.top_ids[j], t.top_ids[j]);
        CHECK(fabsf(ti.top_logprobs[j] - t.top_logprobs[j]) < 1e-4f, "%s: alternative %d: %g, host %g", what, j,
              ti.top_logprobs[j], t.top_logprobs[j]);
    }
}

static void test_logprobs(void) {
    check_logprobs("shaped logits, 20 alternatives", big_logits, 20);
    check_logprobs("shaped logits, 5 alternatives", big_logits, 5);
    check_logprobs("shaped logits, logprob only", big_logits, 0);
    float *lg = malloc(VBIG * sizeof *lg);
    for (int i = 0; i < VBIG; i++) lg[i] = (float)i * 1e-4f - 10.0f; /* the best 20 fill whole blocks */
    upload(&D, lg);
    check_logprobs("increasing logits (long list)", lg, 20);
    for (int i = 0; i < VBIG; i++) lg[i] = (float)(i % 7); /* ties everywhere */
    upload(&D, lg);
    check_logprobs("ties", lg, 20);
    upload(&D, big_logits);
    free(lg);
}

/* Device time per token of launches captured in a graph, as in the decode
 * graph (PDL edges included): 100 tokens per graph, 10 replays after one
 * to warm up.  argmax != 0 times lc_argmax instead of the sampler. */
static double time_graph(const lilac_sampling *sp, int lp, int n_top, int argmax) {
    enum { PER = 100, REPS = 10 };
    lc_samp_params prm = params_of(sp, n_top);
    float *part = NULL;
    unsigned *done = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaEvent_t a = NULL, z = NULL;
    double us = -1;
    int ok = cudaMalloc((void **)&part, 1024 * 4) == cudaSuccess && cudaMalloc((void **)&done, 4) == cudaSuccess &&
             cudaMemsetAsync(done, 0, 4, D.st) == cudaSuccess && lc_sampler_begin(&D.s, &prm, NULL, D.st) == cudaSuccess &&
             lc_ctrl_begin(D.ctrl, DRAWS, D.st) == cudaSuccess && cudaStreamSynchronize(D.st) == cudaSuccess;
    ok = ok && cudaStreamBeginCapture(D.st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        for (int i = 0; ok && i < PER; i++)
            ok = (argmax ? lc_argmax(D.logits, VBIG, part, done, D.out, NULL, 0, 0, D.allow, D.ctrl, D.st)
                         : lc_sample(D.logits, &D.s, lp, D.out, NULL, 0, 0, D.allow, D.ctrl, D.st)) == cudaSuccess;
        ok = cudaStreamEndCapture(D.st, &g) == cudaSuccess && ok;
    }
    ok = ok && cudaGraphInstantiate(&x, g, 0) == cudaSuccess && cudaEventCreate(&a) == cudaSuccess &&
         cudaEventCreate(&z) == cudaSuccess && cudaGraphLaunch(x, D.st) == cudaSuccess &&
         cudaEventRecord(a, D.st) == cudaSuccess;
    for (int r = 0; ok && r < REPS; r++) ok = cudaGraphLaunch(x, D.st) == cudaSuccess;
    ok = ok && cudaEventRecord(z, D.st) == cudaSuccess && cudaStreamSynchronize(D.st) == cudaSuccess;
    float ms = 0;
    if (ok && cudaEventElapsedTime(&ms, a, z) == cudaSuccess) us = 1000.0 * ms / (PER * REPS);
    CHECK(ok, "timing graph: %s", cudaGetErrorString(cudaGetLastError()));
    lc_ctrl_end(D.ctrl, D.st);
    cudaStreamSynchronize(D.st);
    if (a) cudaEventDestroy(a);
    if (z) cudaEventDestroy(z);
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
    cudaFree(part);
    cudaFree(done);
    return us;
}

/* Time per token of each mode on the 248K vocabulary (printed, not asserted). */
static void test_timing(void) {
    struct {
        const char *what;
        lilac_sampling p;
        int lp, n_top;
    } m[] = {
        {"greedy + penalties", samp(0, 0, 1.0f, 0, 1), 0, 0},
        {"temperature only", samp(0.8f, 0, 1.0f, 0, 1), 0, 0},
        {"top_k 20, top_p 0.8 (Qwen)", samp(0.7f, 20, 0.8f, 0, 1), 0, 0},
        {"top_p 0.95", samp(1.0f, 0, 0.95f, 0, 1), 0, 0},
        {"min_p 0.05", samp(1.0f, 0, 1.0f, 0.05f, 1), 0, 0},
        {"top_k 3000, top_p 0.99, T 3", samp(3.0f, 3000, 0.99f, 0, 1), 0, 0},
        {"top_k 20, top_p 0.8 + 20 logprobs", samp(0.7f, 20, 0.8f, 0, 1), 1, 20},
    };
    m[0].p.repetition_penalty = 1.1f, m[0].p.frequency_penalty = 0.1f;
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++)
        printf("    sampler time, %-34s %6.1f us/token\n", m[k].what, time_graph(&m[k].p, m[k].lp, m[k].n_top, 0));
    lilac_sampling g = lilac_sampling_greedy();
    printf("    argmax (greedy decode, for scale)                %6.1f us/token\n", time_graph(&g, 0, 0, 1));
    /* the long-list path, on 12,416 tied logits */
    float *lg = malloc(VBIG * sizeof *lg);
    for (int i = 0; i < VBIG; i++) lg[i] = i % 20 == 3 ? 0.0f : -40.0f;
    upload(&D, lg);
    lilac_sampling t = samp(1.0f, 5000, 0.5f, 0, 1);
    printf("    sampler time, %-34s %6.1f us/token\n", "long list (12K ties), top_k + top_p", time_graph(&t, 0, 0, 0));
    upload(&D, big_logits);
    free(lg);
}

/* ---- constrained decoding: the allowed-id mask ---------------------------- */

/* Allows every 7th id and the odd head tokens (the even ones, the best
 * logits, are masked out), or, with few, only 100 ids of the bulk. */
static void make_mask(uint32_t *bits, int few) {
    memset(bits, 0, (VBIG + 31) / 32 * sizeof *bits);
    for (int i = 0; i < VBIG; i++)
        if (few ? i % 2477 == 5 : i % 7 == 0) bits[i >> 5] |= 1u << (i & 31);
    for (int j = 0; j < 64; j++) {
        const int32_t h = head_id(j);
        if (few || j % 2 == 0) bits[h >> 5] &= ~(1u << (h & 31));
        else bits[h >> 5] |= 1u << (h & 31);
    }
}

static int bit(const uint32_t *bits, int i) { return bits[i >> 5] >> (i & 31) & 1; }

/* The mask applied in the device sampler and argmax: the host sampler's
 * lilac_sampler_pick_masked ids where both are deterministic or walk the
 * candidates in id order, the host rules' kept set (on the masked logits)
 * otherwise, the raw logits' logprobs, and top_k beyond the allowed count. */
static void test_masked(void) {
    const size_t words = (VBIG + 31) / 32;
    uint32_t *bits = malloc(words * sizeof *bits);
    float *masked = malloc(VBIG * sizeof *masked);
    lilac_sampler hs;
    lilac_error e;
    REQUIRE(bits && masked && lilac_sampler_init(&hs, VBIG, &e) == LILAC_OK, "host buffers");
    REQUIRE(cudaMalloc((void **)&D.allow, words * sizeof *bits) == cudaSuccess, "device mask");
    for (int few = 0; few < 2; few++) {
        make_mask(bits, few);
        CHECK(to_dev(&D, D.allow, bits, words * sizeof *bits), "mask upload");
        for (int i = 0; i < VBIG; i++) masked[i] = bit(bits, i) ? big_logits[i] : -INFINITY;
        /* masked argmax = the host's greedy pick */
        float *part = NULL;
        unsigned *done = NULL;
        int32_t id = -1;
        lilac_sampling g = lilac_sampling_greedy();
        int ok = cudaMalloc((void **)&part, 2048 * 4) == cudaSuccess && cudaMalloc((void **)&done, 4) == cudaSuccess &&
                 cudaMemsetAsync(done, 0, 4, D.st) == cudaSuccess && lc_ctrl_begin(D.ctrl, 1, D.st) == cudaSuccess &&
                 lc_argmax(D.logits, VBIG, part, done, D.out, NULL, 0, 0, D.allow, D.ctrl, D.st) == cudaSuccess &&
                 lc_ctrl_end(D.ctrl, D.st) == cudaSuccess &&
                 cudaMemcpyAsync(&id, D.out, 4, cudaMemcpyDeviceToHost, D.st) == cudaSuccess &&
                 cudaStreamSynchronize(D.st) == cudaSuccess;
        cudaFree(part);
        cudaFree(done);
        lilac_sampler_begin(&hs, &g, NULL, 0);
        const int32_t want = lilac_sampler_pick_masked(&hs, &g, big_logits, bits);
        CHECK(ok && id == want && bit(bits, id), "mask %d: masked argmax %d, host %d", few, id, want);
        /* deterministic or id-order modes: the same ids as the host */
        lilac_sampling ps[4] = {samp(0, 0, 1.0f, 0, 51), samp(1.0f, 0, 1.0f, 0, 52), samp(0.7f, 0, 1.0f, 0.01f, 53),
                                samp(0.5f, 1, 1.0f, 0, 54)};
        ps[0].repetition_penalty = 1.3f, ps[0].frequency_penalty = 0.4f;
        ps[3].presence_penalty = 0.6f;
        const int n = 1000;
        for (int k = 0; k < 4; k++) {
            draw_many(&D, &ps[k], NULL, 0, 0, n, big_ids);
            lilac_sampler_begin(&hs, &ps[k], NULL, 0);
            int differ = 0, outside = 0;
            for (int i = 0; i < n; i++) {
                const int32_t h = lilac_sampler_pick_masked(&hs, &ps[k], big_logits, bits);
                lilac_sampler_accept(&hs, h);
                differ += h != big_ids[i];
                outside += big_ids[i] < 0 || big_ids[i] >= VBIG || !bit(bits, big_ids[i]);
            }
            CHECK(outside == 0, "mask %d, mode %d: %d draws outside the mask", few, k, outside);
            CHECK(differ <= 1, "mask %d, mode %d: %d of %d ids differ from the host's masked sampler", few, k, differ, n);
        }
        /* top_k / top_p: the distribution of the host's rules on the masked logits */
        lilac_sampling pk = samp(1.0f, 40, 0.9f, 0, 55), pbig = samp(1.0f, 500, 1.0f, 0, 56);
        check_distribution(few ? "100 allowed: top_k 40, top_p 0.9" : "masked: top_k 40, top_p 0.9", masked, &pk);
        check_distribution(few ? "100 allowed: top_k 500 (more)" : "masked: top_k 500", masked, &pbig);
        /* logprobs stay the raw logits' */
        lilac_sampling pl = samp(1.0f, 0, 1.0f, 0, 57);
        draw_many(&D, &pl, NULL, 1, 20, 1, &id);
        lc_tokinfo ti;
        CHECK(cudaMemcpy(&ti, D.s.lp, sizeof ti, cudaMemcpyDeviceToHost) == cudaSuccess, "read the logprob slot");
        lilac_token_info t = {0};
        lilac_logprobs(big_logits, VBIG, id, 20, &t, big_ids);
        CHECK(bit(bits, id) && fabsf(ti.logprob - t.logprob) < 1e-4f && ti.n_top == 20 && ti.top_ids[0] == t.top_ids[0] &&
                  !bit(bits, ti.top_ids[0]),
              "mask %d: logprobs of the raw logits (%g vs %g; best alternative %d, host %d)", few, ti.logprob, t.logprob,
              ti.top_ids[0], t.top_ids[0]);
    }
    /* the mask's time per token: the sampler and argmax with and without it */
    lilac_sampling tq = samp(0.7f, 20, 0.8f, 0, 1), gq = lilac_sampling_greedy();
    uint32_t *keep = D.allow;
    D.allow = NULL;
    const double s0 = time_graph(&tq, 0, 0, 0), a0 = time_graph(&gq, 0, 0, 1);
    D.allow = keep;
    const double s1 = time_graph(&tq, 0, 0, 0), a1 = time_graph(&gq, 0, 0, 1);
    printf("    masked: sampler (top_k 20, top_p 0.8) %.1f -> %.1f us/token, argmax %.1f -> %.1f us/token\n", s0, s1, a0, a1);
    cudaFree(D.allow);
    D.allow = NULL;
    lilac_sampler_free(&hs);
    free(bits);
    free(masked);
}

/* A few draws in every path, for the sanitizers (tools/gpu_check.sh sample). */
static void test_smoke(void) {
    float *lg = malloc(VBIG * sizeof *lg);
    for (int i = 0; i < VBIG; i++) lg[i] = i % 20 == 3 ? 0.0f : -40.0f;
    struct {
        const float *lg;
        lilac_sampling p;
        int lp;
    } m[] = {
        {big_logits, samp(1.0f, 0, 1.0f, 0, 1), 0},      {big_logits, samp(0.7f, 20, 0.8f, 0, 2), 1},
        {big_logits, samp(1.0f, 0, 0.9f, 0.05f, 3), 0},  {lg, samp(1.0f, 5000, 0.5f, 0, 4), 1},
        {big_logits, samp(0, 0, 1.0f, 0, 5), 1},
    };
    m[4].p.repetition_penalty = 1.2f, m[4].p.presence_penalty = 0.5f;
    for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
        upload(&D, m[k].lg);
        exact_probs(m[k].lg, VBIG, &m[k].p, big_prob);
        int32_t ids[8];
        draw_many(&D, &m[k].p, NULL, m[k].lp, m[k].lp ? 20 : 0, 8, ids);
        for (int i = 0; i < 8; i++)
            CHECK(ids[i] >= 0 && ids[i] < VBIG && (m[k].p.temperature == 0 || big_prob[ids[i]] > 0), "mode %zu: drew %d", k,
                  ids[i]);
    }
    upload(&D, big_logits);
    free(lg);
}

/* ---- engine level on the tiny fixture ----------------------------------- */

enum { NGEN = 24 };
static const int32_t tiny_prompt[] = {1, 17, 42, 99, 256, 300, 7, 7, 7, 480, 11, 64};
#define NP ((int)(sizeof tiny_prompt / sizeof tiny_prompt[0]))

typedef struct {
    lilac_token_info t[NGEN];
    int n;
} infos;

static int collect(void *ctx, const lilac_token_info *t) {
    infos *x = ctx;
    if (t->index < NGEN) x->t[t->index] = *t;
    x->n = t->index + 1;
    return 0;
}

static lilac_engine *tiny_engine(void) {
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cuda"};
    lilac_engine *g = NULL;
    lilac_error e = {0};
    if (lilac_engine_open(&o, &g, &e)) CHECK(0, "%s", e.msg);
    return g;
}

static int device_generate(lilac_session *s, const lilac_gen_params *p, infos *x) {
    lilac_error e = {0};
    lilac_finish why;
    int n = 0;
    memset(x, 0, sizeof *x);
    lilac_session_reset(s);
    if (lilac_session_feed(s, tiny_prompt, NP, NULL, 0, &e) || lilac_session_generate(s, p, collect, x, &n, &why, &e)) {
        CHECK(0, "generate: %s", e.msg);
        return 0;
    }
    CHECK(n == p->max_tokens && x->n == n, "generated %d (%d delivered) of %d", n, x->n, p->max_tokens);
    return n == p->max_tokens;
}

/* Feeds the device's ids one by one on s and checks each against the host
 * rules applied to the GPU's own logits: equal ids for deterministic modes,
 * kept-set membership otherwise, and the logprobs. */
static void replay(lilac_engine *g, lilac_session *s, const lilac_gen_params *p, const infos *x, int deterministic) {
    lilac_engine_info info;
    lilac_engine_get_info(g, &info);
    const int V = info.vocab_size;
    float *lg = malloc((size_t)V * sizeof *lg);
    double *prob = malloc((size_t)V * sizeof *prob);
    int32_t *scratch = malloc((size_t)V * sizeof *scratch);
    lilac_sampler hs;
    lilac_error e = {0};
    CHECK(lilac_sampler_init(&hs, V, &e) == LILAC_OK, "%s", e.msg);
    lilac_session_reset(s);
    CHECK(!lilac_session_feed(s, tiny_prompt, NP, lg, 0, &e), "%s", e.msg);
    lilac_sampler_begin(&hs, &p->sampling, tiny_prompt, NP);
    int bad = 0;
    for (int i = 0; i < x->n && !bad; i++) {
        const int32_t id = x->t[i].id;
        if (deterministic) {
            int32_t h = lilac_sampler_pick(&hs, &p->sampling, lg);
            if (h != id) bad = 1;
            CHECK(h == id, "token %d: device %d, host sampler %d", i, id, h);
        } else {
            exact_probs(lg, V, &p->sampling, prob);
            if (!(prob[id] > 0)) bad = 1;
            CHECK(prob[id] > 0, "token %d: device drew %d, which the rules exclude", i, id);
        }
        if (p->logprobs || p->top_logprobs) {
            lilac_token_info t = {0};
            lilac_logprobs(lg, V, id, p->top_logprobs, &t, scratch);
            CHECK(fabsf(t.logprob - x->t[i].logprob) < 1e-4f, "token %d: logprob %g, host %g", i, x->t[i].logprob, t.logprob);
            CHECK(t.n_top == x->t[i].n_top, "token %d: %d alternatives, host %d", i, x->t[i].n_top, t.n_top);
            for (int j = 0; j < t.n_top; j++)
                CHECK(t.top_ids[j] == x->t[i].top_ids[j] && fabsf(t.top_logprobs[j] - x->t[i].top_logprobs[j]) < 1e-4f,
                      "token %d alternative %d: %d (%g), host %d (%g)", i, j, x->t[i].top_ids[j], x->t[i].top_logprobs[j],
                      t.top_ids[j], t.top_logprobs[j]);
        }
        lilac_sampler_accept(&hs, id);
        if (i + 1 < x->n) CHECK(!lilac_session_feed(s, &id, 1, lg, 0, &e), "%s", e.msg);
    }
    lilac_sampler_free(&hs);
    free(lg);
    free(prob);
    free(scratch);
}

static lilac_gen_params gen_params(lilac_sampling sp) {
    lilac_gen_params p = {0};
    p.max_tokens = NGEN;
    p.sampling = sp;
    return p;
}

static void test_engine(void) {
    lilac_engine *g = tiny_engine();
    if (!g) return;
    lilac_session *s = NULL, *r = NULL;
    lilac_error e = {0};
    if (lilac_session_new(g, NP + NGEN + 8, &s, &e) || lilac_session_new(g, NP + NGEN + 8, &r, &e)) {
        CHECK(0, "%s", e.msg);
        goto done;
    }
    infos x, y, z;
    /* greedy (the argmax graph), then with penalties (the sampler's graph) */
    lilac_gen_params greedy = gen_params(lilac_sampling_greedy());
    if (device_generate(s, &greedy, &x)) replay(g, r, &greedy, &x, 1);
    lilac_gen_params pen = gen_params(samp(0, 0, 1.0f, 0, 5));
    pen.sampling.repetition_penalty = 1.3f, pen.sampling.frequency_penalty = 0.5f, pen.sampling.presence_penalty = 0.3f;
    if (device_generate(s, &pen, &y)) replay(g, r, &pen, &y, 1);
    int differ = 0;
    for (int i = 0; i < NGEN; i++) differ += x.t[i].id != y.t[i].id;
    printf("    tiny: the penalties changed %d of %d greedy ids\n", differ, NGEN);
    /* top_k 1 at temperature 1, with penalties and logprobs */
    lilac_gen_params k1 = pen;
    k1.sampling.temperature = 1.0f, k1.sampling.top_k = 1, k1.top_logprobs = 5;
    if (device_generate(s, &k1, &z)) replay(g, r, &k1, &z, 1);
    /* greedy again on the same state: the argmax graph is recaptured */
    if (device_generate(s, &greedy, &y))
        for (int i = 0; i < NGEN; i++) CHECK(x.t[i].id == y.t[i].id, "greedy after sampling differs at %d", i);
    /* sampled: every id in the kept set of the host rules; logprobs */
    lilac_gen_params sp = gen_params(samp(1.0f, 5, 0.9f, 0, 7));
    sp.logprobs = 1, sp.top_logprobs = 3;
    if (device_generate(s, &sp, &x)) replay(g, r, &sp, &x, 0);
    /* seeds */
    lilac_gen_params hot = gen_params(samp(1.5f, 0, 1.0f, 0, 7));
    if (device_generate(s, &hot, &x) && device_generate(s, &hot, &y)) {
        int same = 0;
        for (int i = 0; i < NGEN; i++) same += x.t[i].id == y.t[i].id;
        CHECK(same == NGEN, "seed 7 twice: %d of %d ids agree", same, NGEN);
        replay(g, r, &hot, &x, 0);
    }
    hot.sampling.seed = 8;
    if (device_generate(s, &hot, &y)) {
        int same = 0;
        for (int i = 0; i < NGEN; i++) same += x.t[i].id == y.t[i].id;
        CHECK(same < NGEN, "seeds 7 and 8 gave the same %d ids", NGEN);
    }
    /* logprobs under greedy go through the sampler's graph too */
    lilac_gen_params glp = greedy;
    glp.logprobs = 1, glp.top_logprobs = 20;
    if (device_generate(s, &glp, &y)) {
        replay(g, r, &glp, &y, 1);
        lilac_gen_params g0 = greedy;
        infos w;
        if (device_generate(s, &g0, &w))
            for (int i = 0; i < NGEN; i++) CHECK(w.t[i].id == y.t[i].id, "greedy with logprobs differs at %d", i);
    }
done:
    lilac_session_free(s);
    lilac_session_free(r);
    lilac_engine_close(g);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_error e = {0};
    if (!lilac_backend_pick("cuda", &e)) {
        SKIP("%s", e.msg);
        return check_done("gpu_sample");
    }
    if (!dev_open(&D, VBIG)) {
        CHECK(0, "device buffers: %s", cudaGetErrorString(cudaGetLastError()));
        return check_done("gpu_sample");
    }
    big_logits = malloc(VBIG * sizeof *big_logits);
    big_prob = malloc(VBIG * sizeof *big_prob);
    big_count = malloc(VBIG * sizeof *big_count);
    big_ids = malloc((VBIG > DRAWS ? VBIG : DRAWS) * sizeof *big_ids);
    shaped_logits(big_logits);
    upload(&D, big_logits);
    RUN(test_smoke);
    RUN(test_distributions);
    RUN(test_topk_ties);
    RUN(test_long_lists);
    RUN(test_same_ids_as_host);
    RUN(test_penalties);
    RUN(test_seeds);
    RUN(test_logprobs);
    RUN(test_timing);
    RUN(test_masked);
    RUN(test_engine);
    dev_close(&D);
    free(big_logits);
    free(big_prob);
    free(big_count);
    free(big_ids);
    return check_done("gpu_sample");
}

#else

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    SKIP("built without the CUDA backend (CUDA=0 or no nvcc)");
    return check_done("gpu_sample");
}

#endif
