/* test_sample.c — host sampling: greedy, seeds, top-k/top-p/min-p sets,
 * penalties, the empirical distribution, and logprobs. */
#include <math.h>

#include "check.h"
#include "engine/sample.h"

static lilac_sampling base(float temp) {
    lilac_sampling p = lilac_sampling_greedy();
    p.temperature = temp;
    p.seed = 42;
    return p;
}

/* logits whose softmax is exactly probs */
static void logits_of(const double *probs, int n, float *out) {
    for (int i = 0; i < n; i++) out[i] = (float)log(probs[i]);
}

static void histogram(lilac_sampler *s, const lilac_sampling *p, const float *lg, int draws, int *h, int n) {
    memset(h, 0, (size_t)n * sizeof *h);
    lilac_sampler_begin(s, p, NULL, 0);
    for (int i = 0; i < draws; i++) h[lilac_sampler_pick(s, p, lg)]++;
}

/* The allowed-id mask (constrained decoding, the reference the GPU sampler
 * matches): disallowed ids never come out, whatever the penalties and cuts;
 * top_k larger than the allowed set keeps exactly the allowed ids, in their
 * renormalised proportions; min_p is relative to the best allowed id. */
static void test_masked(void) {
    const double probs[6] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
    float lg[6];
    logits_of(probs, 6, lg);
    lilac_sampler s;
    lilac_error e;
    REQUIRE(lilac_sampler_init(&s, 6, &e) == LILAC_OK, "%s", e.msg);
    const uint32_t allow = (1u << 1) | (1u << 3) | (1u << 4); /* not the best id 0 */
    lilac_sampling p = base(0);
    lilac_sampler_begin(&s, &p, NULL, 0);
    CHECK(lilac_sampler_pick_masked(&s, &p, lg, &allow) == 1, "greedy takes the best allowed id");
    p.repetition_penalty = 5.0f;
    int32_t seen = 1;
    lilac_sampler_begin(&s, &p, &seen, 1);
    CHECK(lilac_sampler_pick_masked(&s, &p, lg, &allow) == 3, "penalised, the best allowed id moves on, not to a masked one");
    int h[6] = {0};
    const int N = 100000;
    p = base(1.0f);
    p.top_k = 5; /* more than the 3 allowed */
    lilac_sampler_begin(&s, &p, NULL, 0);
    for (int i = 0; i < N; i++) h[lilac_sampler_pick_masked(&s, &p, lg, &allow)]++;
    CHECK(h[0] == 0 && h[2] == 0 && h[5] == 0, "masked ids drawn: %d %d %d", h[0], h[2], h[5]);
    const double z = probs[1] + probs[3] + probs[4];
    const int kept[3] = {1, 3, 4};
    for (int j = 0; j < 3; j++) {
        const int i = kept[j];
        double q = probs[i] / z, f = (double)h[i] / N, sd = sqrt(q * (1 - q) / N);
        CHECK(fabs(f - q) < 5 * sd, "token %d: frequency %.4f, renormalised p %.4f", i, f, q);
    }
    p.min_p = 0.5f; /* relative to id 1 (0.25): keeps ids >= 0.125, so not 3 (0.1) or 4 */
    lilac_sampler_begin(&s, &p, NULL, 0);
    int other = 0;
    for (int i = 0; i < 1000; i++) other += lilac_sampler_pick_masked(&s, &p, lg, &allow) != 1;
    CHECK(other == 0, "min_p against the best allowed id: %d draws of others", other);
    lilac_sampler_free(&s);
}

static void test_greedy(void) {
    lilac_sampler s;
    lilac_error e;
    CHECK(lilac_sampler_init(&s, 5, &e) == LILAC_OK, "%s", e.msg);
    float lg[5] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f};
    lilac_sampling p = base(0);
    lilac_sampler_begin(&s, &p, NULL, 0);
    CHECK(lilac_sampler_pick(&s, &p, lg) == 1, "argmax with a tie picks the lowest id");
    p = base(5.0f);
    p.top_k = 1;
    CHECK(lilac_sampler_pick(&s, &p, lg) == 1, "top_k 1 is greedy");
    p = base(1.0f);
    p.min_p = 1.0f;
    for (int i = 0; i < 50; i++) {
        int32_t id = lilac_sampler_pick(&s, &p, lg);
        CHECK(id == 1 || id == 3, "min_p 1 keeps only the tied best, got %d", id);
    }
    lilac_sampler_free(&s);
}

static void test_distribution(void) {
    const double probs[6] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
    float lg[6];
    logits_of(probs, 6, lg);
    lilac_sampler s;
    lilac_error e;
    lilac_sampler_init(&s, 6, &e);
    int h[6];
    const int N = 200000;
    lilac_sampling p = base(1.0f);
    histogram(&s, &p, lg, N, h, 6);
    for (int i = 0; i < 6; i++) {
        double f = (double)h[i] / N, sd = sqrt(probs[i] * (1 - probs[i]) / N);
        CHECK(fabs(f - probs[i]) < 5 * sd, "token %d: frequency %.4f, p %.4f", i, f, probs[i]);
    }
    /* top_k 2: only the two best, in ratio 0.4 : 0.25 */
    p.top_k = 2;
    histogram(&s, &p, lg, N, h, 6);
    CHECK(h[2] + h[3] + h[4] + h[5] == 0, "top_k 2 sampled outside the top 2");
    CHECK(fabs((double)h[0] / N - 0.4 / 0.65) < 0.01, "top_k renormalises: %.4f", (double)h[0] / N);
    /* top_p 0.5: 0.4 < 0.5 so the crossing token 1 is kept, nothing else */
    p.top_k = 0;
    p.top_p = 0.5f;
    histogram(&s, &p, lg, N, h, 6);
    CHECK(h[0] > 0 && h[1] > 0 && h[2] + h[3] + h[4] + h[5] == 0, "top_p 0.5 keeps {0, 1}");
    p.top_p = 0.78f; /* 0.4 + 0.25 < 0.78 <= 0.4 + 0.25 + 0.15 */
    histogram(&s, &p, lg, N, h, 6);
    CHECK(h[3] + h[4] + h[5] == 0 && h[2] > 0, "top_p 0.78 keeps {0, 1, 2}");
    /* min_p 0.3: p >= 0.12 survives -> {0, 1, 2} */
    p.top_p = 1;
    p.min_p = 0.3f;
    histogram(&s, &p, lg, N, h, 6);
    CHECK(h[3] + h[4] + h[5] == 0 && h[2] > 0, "min_p 0.3 keeps {0, 1, 2}");
    /* temperature sharpens: T 0.5 squares the probabilities */
    p = base(0.5f);
    histogram(&s, &p, lg, N, h, 6);
    double z = 0;
    for (int i = 0; i < 6; i++) z += probs[i] * probs[i];
    CHECK(fabs((double)h[0] / N - probs[0] * probs[0] / z) < 0.01, "temperature 0.5: %.4f vs %.4f", (double)h[0] / N,
          probs[0] * probs[0] / z);
    lilac_sampler_free(&s);
}

static void test_seed(void) {
    enum { V = 1000 };
    float lg[V];
    for (int i = 0; i < V; i++) lg[i] = (float)sin(i * 0.37) * 3;
    lilac_sampler s;
    lilac_error e;
    lilac_sampler_init(&s, V, &e);
    int32_t a[64], b[64], c[64];
    lilac_sampling p = base(1.0f);
    p.top_p = 0.9f;
    lilac_sampler_begin(&s, &p, NULL, 0);
    for (int i = 0; i < 64; i++) a[i] = lilac_sampler_pick(&s, &p, lg);
    lilac_sampler_begin(&s, &p, NULL, 0);
    for (int i = 0; i < 64; i++) b[i] = lilac_sampler_pick(&s, &p, lg);
    p.seed = 43;
    lilac_sampler_begin(&s, &p, NULL, 0);
    for (int i = 0; i < 64; i++) c[i] = lilac_sampler_pick(&s, &p, lg);
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same samples");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed, other samples");
    lilac_sampler_free(&s);
}

static void test_penalties(void) {
    lilac_sampler s;
    lilac_error e;
    lilac_sampler_init(&s, 4, &e);
    float lg[4] = {2.0f, 1.9f, -1.0f, -1.2f};
    int32_t prompt[1] = {0};
    lilac_sampling p = base(0);
    p.repetition_penalty = 1.2f; /* 2.0/1.2 = 1.67 < 1.9 */
    lilac_sampler_begin(&s, &p, prompt, 1);
    CHECK(lilac_sampler_pick(&s, &p, lg) == 1, "repetition penalty divides a positive logit of a prompt id");
    float lg2[4] = {-1.0f, -1.1f, -5, -5};
    int32_t prompt2[1] = {0};
    lilac_sampler_begin(&s, &p, prompt2, 1);
    CHECK(lilac_sampler_pick(&s, &p, lg2) == 1, "repetition penalty multiplies a negative logit");
    p = base(0);
    p.frequency_penalty = 0.06f;
    lilac_sampler_begin(&s, &p, prompt, 1); /* prompt ids do not count for frequency */
    CHECK(lilac_sampler_pick(&s, &p, lg) == 0, "frequency penalty ignores the prompt");
    lilac_sampler_accept(&s, 0);
    CHECK(lilac_sampler_pick(&s, &p, lg) == 0, "one occurrence: 2.0 - 0.06 > 1.9");
    lilac_sampler_accept(&s, 0);
    CHECK(lilac_sampler_pick(&s, &p, lg) == 1, "two occurrences: 2.0 - 0.12 < 1.9");
    p = base(0);
    p.presence_penalty = 0.2f;
    lilac_sampler_begin(&s, &p, NULL, 0);
    lilac_sampler_accept(&s, 0);
    CHECK(lilac_sampler_pick(&s, &p, lg) == 1, "presence penalty once generated");
    lilac_sampler_free(&s);
}

static void test_logprobs(void) {
    const double probs[5] = {0.1, 0.5, 0.2, 0.15, 0.05};
    float lg[5];
    for (int i = 0; i < 5; i++) lg[i] = (float)log(probs[i]) + 3.0f; /* shifted: softmax is unchanged */
    lilac_token_info t = {0};
    int32_t scratch[5];
    lilac_logprobs(lg, 5, 2, 3, &t, scratch);
    CHECK(fabs(t.logprob - log(0.2)) < 1e-5, "logprob %f", t.logprob);
    CHECK(t.n_top == 3 && t.top_ids[0] == 1 && t.top_ids[1] == 2 && t.top_ids[2] == 3, "top order %d %d %d", t.top_ids[0],
          t.top_ids[1], t.top_ids[2]);
    CHECK(fabs(t.top_logprobs[0] - log(0.5)) < 1e-5, "top logprob");
}

/* The full 248K vocabulary with top_p: selection in growing prefixes gives
 * exactly the set a full sort would. */
static void test_large_vocab(void) {
    enum { V = 248320 };
    float *lg = malloc(V * sizeof(float));
    uint64_t x = 7;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        lg[i] = (float)((x >> 40) % 1000) / 100.0f;
    }
    lilac_sampler s;
    lilac_error e;
    lilac_sampler_init(&s, V, &e);
    lilac_sampling p = base(0.7f);
    p.top_p = 0.9f;
    lilac_sampler_begin(&s, &p, NULL, 0);
    /* the smallest value that may be sampled, from a brute-force sort */
    float *sorted = malloc(V * sizeof(float));
    double z = 0, mx = 0;
    for (int i = 0; i < V; i++) mx = lg[i] / 0.7f > mx ? lg[i] / 0.7f : mx;
    for (int i = 0; i < V; i++) sorted[i] = lg[i] / 0.7f, z += exp(sorted[i] - mx);
    int cmpf(const void *a, const void *b);
    qsort(sorted, V, sizeof(float), cmpf);
    double acc = 0;
    float thresh = sorted[0];
    for (int i = 0; i < V; i++) {
        acc += exp(sorted[i] - mx) / z;
        if (acc >= 0.9) {
            thresh = sorted[i];
            break;
        }
    }
    for (int i = 0; i < 50; i++) {
        int32_t id = lilac_sampler_pick(&s, &p, lg);
        CHECK(lg[id] / 0.7f >= thresh - 1e-4f, "sampled %d below the top-p threshold", id);
    }
    free(sorted);
    free(lg);
    lilac_sampler_free(&s);
}

int cmpf(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_greedy);
    RUN(test_masked);
    RUN(test_distribution);
    RUN(test_seed);
    RUN(test_penalties);
    RUN(test_logprobs);
    RUN(test_large_vocab);
    return check_done("sample");
}
