/* test_forward.c — the CPU forward pass against the Hugging Face reference
 * (tests/fixtures/tiny/golden.safetensors, fp32 transformers), for both
 * checkpoint layouts: logits, greedy generation, per-layer residual streams,
 * chunked prefill vs decode, and session snapshots. */
#include <math.h>

#include "check.h"
#include "lilac.h"
#include "model/safetensors.h"

#define TINY "tests/fixtures/tiny"
#define TINY_HF "tests/fixtures/tiny/hf"

static lilac_tensors golden;
static const int32_t *prompt, *generated;
static const float *g_logits, *g_hidden;
static int P, N, V = 512, D = 128, L = 8;
static int32_t all_ids[128];

static int load_golden(void) {
    lilac_error e;
    if (lilac_st_add_file(&golden, TINY "/golden.safetensors", &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 0;
    }
    const lilac_tensor *p = lilac_st_find(&golden, "prompt_ids"), *g = lilac_st_find(&golden, "generated_ids");
    const lilac_tensor *lg = lilac_st_find(&golden, "logits"), *hs = lilac_st_find(&golden, "hidden_states");
    if (!p || !g || !lg || !hs) return 0;
    prompt = p->data, generated = g->data, g_logits = lg->data, g_hidden = hs->data;
    P = (int)p->shape[0], N = (int)g->shape[0];
    V = (int)lg->shape[1], L = (int)hs->shape[0] - 1, D = (int)hs->shape[2];
    for (int i = 0; i < P; i++) all_ids[i] = prompt[i];
    for (int i = 0; i < N; i++) all_ids[P + i] = generated[i];
    return P + N <= 128;
}

static lilac_engine *open_engine(const char *dir, int chunk) {
    lilac_engine_opts o = {.model_dir = dir, .backend = "cpu", .threads = 2, .chunk = chunk};
    lilac_engine *g = NULL;
    lilac_error e = {0};
    CHECK(lilac_engine_open(&o, &g, &e) == LILAC_OK, "open %s: %s", dir, e.msg);
    return g;
}

static float max_abs_diff(const float *a, const float *b, size_t n, size_t *at) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) m = d, *at = i; /* NaN counts as a difference */
    }
    return m;
}

/* Teacher-forced logits of prompt+generated in chunks of `chunk`. */
static float *score(const char *dir, int chunk) {
    lilac_engine *g = open_engine(dir, chunk);
    if (!g) return NULL;
    int T = P + N;
    float *logits = malloc((size_t)T * V * sizeof(float));
    lilac_session *s = NULL;
    lilac_error e = {0};
    CHECK(lilac_session_new(g, T, &s, &e) == LILAC_OK, "%s", e.msg);
    CHECK(s && lilac_session_feed(s, all_ids, T, logits, 1, &e) == LILAC_OK, "feed: %s", e.msg);
    lilac_session_free(s);
    lilac_engine_close(g);
    return logits;
}

static void check_golden_logits(const char *dir) {
    float *lg = score(dir, 0);
    if (!lg) return;
    for (int t = 0; t < P + N; t++) {
        size_t at = 0;
        float d = max_abs_diff(lg + (size_t)t * V, g_logits + (size_t)t * V, (size_t)V, &at);
        CHECK(d <= 1e-3f, "%s: position %d: |logit - golden| = %g at token %zu", dir, t, d, at);
    }
    free(lg);
}

static void test_logits_mlx(void) { check_golden_logits(TINY); }
static void test_logits_hf(void) { check_golden_logits(TINY_HF); }

static void check_generate(const char *dir) {
    lilac_engine *g = open_engine(dir, 0);
    if (!g) return;
    lilac_session *s = NULL;
    lilac_error e = {0};
    int32_t out[64];
    int got = 0;
    CHECK(lilac_session_new(g, P + N, &s, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_feed(s, prompt, P, NULL, 0, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_generate_greedy(s, N, 0, out, &got, &e) == LILAC_OK, "%s", e.msg);
    CHECK(got == N, "%s: generated %d of %d", dir, got, N);
    for (int i = 0; i < got && i < N; i++) CHECK(out[i] == generated[i], "%s: token %d is %d, golden %d", dir, i, out[i], generated[i]);
    lilac_session_free(s);
    lilac_engine_close(g);
}

static void test_generate_mlx(void) { check_generate(TINY); }
static void test_generate_hf(void) { check_generate(TINY_HF); }

/* One chunk, chunks of 1, 7 and 16, and prefill-then-decode agree to 1e-4. */
static void test_chunking(void) {
    const int T = P + N;
    float *ref = score(TINY, 0);
    int chunks[] = {1, 7, 16};
    for (size_t i = 0; ref && i < sizeof chunks / sizeof chunks[0]; i++) {
        float *lg = score(TINY, chunks[i]);
        size_t at = 0;
        if (lg) CHECK(max_abs_diff(ref, lg, (size_t)T * V, &at) <= 1e-4f, "chunk %d differs by %g at %zu", chunks[i],
                      max_abs_diff(ref, lg, (size_t)T * V, &at), at);
        free(lg);
    }
    /* prefill the prompt, then decode the generated ids one at a time */
    lilac_engine *g = open_engine(TINY, 0);
    lilac_session *s = NULL;
    lilac_error e = {0};
    float *row = malloc((size_t)V * sizeof(float));
    if (g && ref && lilac_session_new(g, T, &s, &e) == LILAC_OK) {
        CHECK(lilac_session_feed(s, prompt, P, row, 0, &e) == LILAC_OK, "%s", e.msg);
        size_t at = 0;
        CHECK(max_abs_diff(row, ref + (size_t)(P - 1) * V, (size_t)V, &at) <= 1e-4f, "prefill last row");
        for (int i = 0; i < N; i++) {
            CHECK(lilac_session_feed(s, &generated[i], 1, row, 0, &e) == LILAC_OK, "%s", e.msg);
            float d = max_abs_diff(row, ref + (size_t)(P + i) * V, (size_t)V, &at);
            CHECK(d <= 1e-4f, "decode step %d differs from prefill by %g", i, d);
        }
        CHECK(lilac_session_len(s) == T, "session length %d", lilac_session_len(s));
    }
    free(row);
    lilac_session_free(s);
    lilac_engine_close(g);
    free(ref);
}

/* Residual streams after each layer match HF's output_hidden_states; a
 * failure names the first layer that diverges. */
static void test_hidden_states(void) {
    const int T = P + N;
    lilac_engine *g = open_engine(TINY, 128);
    lilac_session *s = NULL;
    lilac_error e = {0};
    float *hid = malloc((size_t)(L + 1) * T * D * sizeof(float)), *lg = malloc((size_t)T * V * sizeof(float));
    if (g && lilac_session_new(g, T, &s, &e) == LILAC_OK &&
        lilac_session_feed_hidden(s, all_ids, T, lg, hid, &e) == LILAC_OK) {
        /* fp32 against fp32: within 1e-4 of each stream's own scale (the
         * residual stream grows to ~50, the final norm is ~7). */
        int first_bad = -1;
        float worst = 0, tol = 0;
        for (int l = 0; l <= L; l++) {
            size_t at = 0, n = (size_t)T * D;
            const float *ref = g_hidden + (size_t)l * n;
            float scale = 1.0f;
            for (size_t i = 0; i < n; i++) scale = fabsf(ref[i]) > scale ? fabsf(ref[i]) : scale;
            float d = max_abs_diff(hid + (size_t)l * n, ref, n, &at);
            if (d > 1e-4f * scale && first_bad < 0) first_bad = l, worst = d, tol = 1e-4f * scale;
        }
        CHECK(first_bad < 0, "residual stream diverges first at hidden_states[%d] (%s) by %g (tolerance %g)", first_bad,
              first_bad == 0 ? "embedding" : first_bad == L ? "final norm" : "after a decoder layer", worst, tol);
    } else {
        CHECK(0, "hidden capture: %s", e.msg);
    }
    free(hid);
    free(lg);
    lilac_session_free(s);
    lilac_engine_close(g);
}

/* A snapshot taken after the prompt reproduces the same continuation. */
static void test_snapshot(void) {
    lilac_engine *g = open_engine(TINY, 0);
    if (!g) return;
    lilac_session *a = NULL, *b = NULL;
    lilac_error e = {0};
    int32_t x[32], y[32];
    int nx = 0, ny = 0;
    CHECK(lilac_session_new(g, 128, &a, &e) == LILAC_OK && lilac_session_new(g, 128, &b, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_feed(a, prompt, P, NULL, 0, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_copy(b, a, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_generate_greedy(a, 12, 0, x, &nx, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_generate_greedy(b, 12, 0, y, &ny, &e) == LILAC_OK, "%s", e.msg);
    CHECK(nx == 12 && ny == 12 && memcmp(x, y, sizeof(int32_t) * 12) == 0, "snapshot continuation differs");
    CHECK(memcmp(lilac_session_tokens(b), prompt, (size_t)P * sizeof(int32_t)) == 0, "copied tokens");
    /* reset and replay gives the same again */
    lilac_session_reset(a);
    CHECK(lilac_session_len(a) == 0, "reset");
    CHECK(lilac_session_feed(a, prompt, P, NULL, 0, &e) == LILAC_OK, "%s", e.msg);
    CHECK(lilac_session_generate_greedy(a, 12, 0, x, &nx, &e) == LILAC_OK && memcmp(x, y, sizeof(int32_t) * 12) == 0,
          "after reset");
    lilac_session_free(a);
    lilac_session_free(b);
    lilac_engine_close(g);
}

/* Ids outside the vocabulary, empty input and a full context are errors. */
static void test_bad_tokens(void) {
    lilac_engine *g = open_engine(TINY, 0);
    if (!g) return;
    lilac_session *s = NULL;
    lilac_error e = {0};
    CHECK(lilac_session_new(g, 8, &s, &e) == LILAC_OK, "%s", e.msg);
    int32_t bad[2] = {1, 512}, neg[1] = {-1}, ok[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(lilac_session_feed(s, bad, 2, NULL, 0, &e) != LILAC_OK && strstr(e.msg, "outside the vocabulary"), "%s", e.msg);
    CHECK(lilac_session_feed(s, neg, 1, NULL, 0, &e) != LILAC_OK && strstr(e.msg, "-1"), "%s", e.msg);
    CHECK(lilac_session_feed(s, ok, 0, NULL, 0, &e) != LILAC_OK, "empty feed accepted");
    CHECK(lilac_session_feed(s, ok, 9, NULL, 0, &e) != LILAC_OK && strstr(e.msg, "do not fit"), "%s", e.msg);
    CHECK(lilac_session_len(s) == 0, "rejected input advanced the session");
    int32_t out[4];
    int n = 0;
    CHECK(lilac_session_generate_greedy(s, 4, 0, out, &n, &e) != LILAC_OK, "generate without a prompt");
    lilac_session_free(s);
    CHECK(lilac_session_new(g, -5, &s, &e) != LILAC_OK, "negative context accepted");
    lilac_engine_close(g);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    if (!load_golden()) return fprintf(stderr, "cannot read the golden fixture\n"), 1;
    RUN(test_logits_mlx);
    RUN(test_logits_hf);
    RUN(test_generate_mlx);
    RUN(test_generate_hf);
    RUN(test_chunking);
    RUN(test_hidden_states);
    RUN(test_snapshot);
    RUN(test_bad_tokens);
    lilac_st_close(&golden);
    return check_done("forward");
}
