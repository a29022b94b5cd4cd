/* test_budget.c — the reasoning budget of lilac_session_generate (lilac.h:
 * think_budget, think_close, think_end) on the tiny model, CPU backend.
 *
 * References are built by hand from the same engine: greedy generation
 * without a budget, and sessions fed with prompt + reasoning + closing
 * sequence then generated from.  The budgeted run must give exactly the
 * budget's tokens of the unbudgeted run, then the closing sequence (marked
 * forced, with the model's logprobs), then what the model writes after that
 * prefix; a model that closes by itself is left alone. */
#include <math.h>

#include "check.h"
#include "session_fed.h"
#include "lilac.h"

#define TINY "tests/fixtures/tiny"
#define V 512
#define MAXN 64

static lilac_engine *eng;
static const int32_t PROMPT[] = {10, 20, 30, 40, 50, 503}; /* ... <think> */
#define P ((int)(sizeof PROMPT / sizeof PROMPT[0]))
static const int32_t CLOSE_SEQ[] = {7, 504, 8}; /* stands for "\n", "</think>", "\n\n" */
#define K 3

typedef struct {
    int n;
    int32_t id[MAXN];
    int index[MAXN], forced[MAXN];
    float logprob[MAXN];
    int n_top[MAXN];
    int stop_at; /* return 1 at this index; -1 never */
} got_t;

static int collect(void *ctx, const lilac_token_info *t) {
    got_t *g = ctx;
    if (g->n < MAXN) {
        g->id[g->n] = t->id;
        g->index[g->n] = t->index;
        g->forced[g->n] = t->forced;
        g->logprob[g->n] = t->logprob;
        g->n_top[g->n] = t->n_top;
        g->n++;
    }
    return t->index == g->stop_at;
}

static lilac_session *fed(const int32_t *ids, int n) { return session_fed(eng, 256, ids, n); }

static lilac_gen_params greedy(int max_tokens) {
    lilac_gen_params p = {0};
    p.max_tokens = max_tokens;
    p.sampling = lilac_sampling_greedy();
    return p; /* stop_at_eos off: ignore_eos */
}

/* Greedy tokens after ids (n of them) into out. */
static void reference(const int32_t *ids, int n, const lilac_gen_params *p0, int max_tokens, int32_t *out) {
    lilac_session *s = fed(ids, n);
    if (!s) return;
    lilac_gen_params p = *p0;
    p.max_tokens = max_tokens;
    got_t g = {.stop_at = -1};
    int n_out = 0;
    lilac_finish why;
    lilac_error e = {0};
    CHECK(lilac_session_generate(s, &p, collect, &g, &n_out, &why, &e) == LILAC_OK, "%s", e.msg);
    CHECK(n_out == max_tokens, "reference: %d of %d tokens", n_out, max_tokens);
    memcpy(out, g.id, (size_t)max_tokens * sizeof *out);
    lilac_session_free(s);
}

/* Greedy with the frequency penalty written out here, independently of the
 * engine's penalty bookkeeping: the last n_gen of ids[0..n) count as
 * generated, then na tokens into out. */
static void manual_greedy(const int32_t *ids, int n, int n_gen, float freq, int na, int32_t *out) {
    lilac_session *s = NULL;
    lilac_error e = {0};
    float logits[V];
    int counts[V] = {0};
    for (int i = n - n_gen; i < n; i++) counts[ids[i]]++;
    if (lilac_session_new(eng, 256, &s, &e) || lilac_session_feed(s, ids, n, logits, 0, &e)) {
        CHECK(0, "session: %s", e.msg);
        lilac_session_free(s);
        return;
    }
    for (int k = 0; k < na; k++) {
        int best = 0;
        float bv = -INFINITY;
        for (int i = 0; i < V; i++) {
            float x = logits[i];
            if (counts[i]) x -= freq * (float)counts[i];
            if (x > bv) bv = x, best = i;
        }
        out[k] = best;
        counts[best]++;
        if (k + 1 < na && lilac_session_feed(s, &out[k], 1, logits, 0, &e)) CHECK(0, "feed: %s", e.msg);
    }
    lilac_session_free(s);
}

static void run_budget(const lilac_gen_params *p, got_t *g, int *n_out, lilac_finish *why, int *len_after) {
    lilac_session *s = fed(PROMPT, P);
    if (!s) return;
    lilac_error e = {0};
    CHECK(lilac_session_generate(s, p, collect, g, n_out, why, &e) == LILAC_OK, "%s", e.msg);
    *len_after = lilac_session_len(s);
    lilac_session_free(s);
}

static int contains(const int32_t *v, int n, int32_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

/* budget N: N model tokens, the closing sequence (forced), then the answer
 * the model writes after exactly that prefix */
static void check_forced(int N, int max_tokens, float freq) {
    lilac_gen_params base = greedy(max_tokens);
    base.sampling.frequency_penalty = freq;
    int32_t ref[MAXN];
    reference(PROMPT, P, &base, N > 0 ? N : 1, ref);
    REQUIRE(!contains(ref, N, 504), "the tiny model wrote the close id within the budget; pick another");
    lilac_gen_params p = base;
    p.think_budget = N;
    p.think_close = 504;
    p.think_end = CLOSE_SEQ;
    p.n_think_end = K;
    got_t g = {.stop_at = -1};
    int n = 0, len = 0;
    lilac_finish why = LILAC_FINISH_EOS;
    run_budget(&p, &g, &n, &why, &len);
    CHECK(n == max_tokens && g.n == n, "budget %d: %d tokens generated, %d seen, want %d", N, n, g.n, max_tokens);
    CHECK(why == LILAC_FINISH_LENGTH, "budget %d: finish %d", N, (int)why);
    CHECK(len == P + n - 1, "budget %d: the session holds %d tokens, want prompt + %d - 1", N, len, n);
    for (int i = 0; i < g.n; i++) CHECK(g.index[i] == i, "budget %d: token %d has index %d", N, i, g.index[i]);
    for (int i = 0; i < N && i < g.n; i++)
        CHECK(g.id[i] == ref[i] && !g.forced[i], "budget %d: reasoning token %d is %d (forced %d), want %d", N, i, g.id[i],
              g.forced[i], ref[i]);
    for (int i = 0; i < K && N + i < g.n; i++)
        CHECK(g.id[N + i] == CLOSE_SEQ[i] && g.forced[N + i], "budget %d: token %d is %d (forced %d), want forced %d", N,
              N + i, g.id[N + i], g.forced[N + i], CLOSE_SEQ[i]);
    /* the answer: as generated after prompt + reasoning + closing sequence,
     * with the penalties counting everything generated before it */
    int32_t pre[MAXN + 16], ans[MAXN];
    int np = 0;
    for (int i = 0; i < P; i++) pre[np++] = PROMPT[i];
    for (int i = 0; i < N; i++) pre[np++] = ref[i];
    for (int i = 0; i < K; i++) pre[np++] = CLOSE_SEQ[i];
    int na = max_tokens - N - K;
    manual_greedy(pre, np, N + K, freq, na, ans);
    for (int i = 0; i < na && N + K + i < g.n; i++)
        CHECK(g.id[N + K + i] == ans[i] && !g.forced[N + K + i], "budget %d: answer token %d is %d, want %d", N, i,
              g.id[N + K + i], ans[i]);
}

static void test_budget_forces_close(void) { check_forced(5, 20, 0); }
static void test_budget_zero(void) { check_forced(0, 12, 0); }
/* the answer's penalties count the reasoning and the closing sequence
 * (n_prior_gen), as one uninterrupted generation would */
static void test_budget_penalties(void) { check_forced(6, 20, 1.5f); }

/* the model writes the close id itself before the budget: nothing is forced */
static void test_budget_model_closes(void) {
    lilac_gen_params p = greedy(20);
    int32_t ref[MAXN];
    reference(PROMPT, P, &p, 20, ref);
    int j = 1;
    while (j < 20 && contains(ref, j, ref[j])) j++;
    REQUIRE(j < 10, "no fresh id early in the reference");
    p.think_budget = 12;
    p.think_close = ref[j]; /* first written at index j < budget */
    p.think_end = CLOSE_SEQ;
    p.n_think_end = K;
    got_t g = {.stop_at = -1};
    int n = 0, len = 0;
    lilac_finish why;
    run_budget(&p, &g, &n, &why, &len);
    CHECK(n == 20 && len == P + 19, "%d tokens, session %d", n, len);
    for (int i = 0; i < 20 && i < g.n; i++)
        CHECK(g.id[i] == ref[i] && !g.forced[i] && g.index[i] == i, "token %d is %d (forced %d, index %d), want %d", i,
              g.id[i], g.forced[i], g.index[i], ref[i]);
}

/* logprobs of the forced tokens are the model's: log-softmax of the logits
 * after the token before each */
static void test_budget_logprobs(void) {
    const int N = 4;
    lilac_gen_params p = greedy(10);
    p.logprobs = 1;
    p.top_logprobs = 3;
    int32_t ref[MAXN];
    reference(PROMPT, P, &p, N, ref);
    p.think_budget = N;
    p.think_close = 504;
    p.think_end = CLOSE_SEQ;
    p.n_think_end = K;
    got_t g = {.stop_at = -1};
    int n = 0, len = 0;
    lilac_finish why;
    run_budget(&p, &g, &n, &why, &len);
    REQUIRE(g.n == 10, "%d tokens", g.n);
    int32_t ids[MAXN];
    int m = 0;
    for (int i = 0; i < P; i++) ids[m++] = PROMPT[i];
    for (int i = 0; i < N; i++) ids[m++] = ref[i];
    for (int k = 0; k < K; k++) {
        float logits[V];
        lilac_error e = {0};
        int32_t last = ids[m - 1];
        /* logits after ids: re-feed the last one into a session one shorter */
        lilac_session *t = fed(ids, m - 1);
        CHECK(t && lilac_session_feed(t, &last, 1, logits, 0, &e) == LILAC_OK, "%s", e.msg);
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
        for (int i = 0; i < V; i++) sum += exp(logits[i] - mx);
        double want = logits[CLOSE_SEQ[k]] - mx - log(sum);
        CHECK(fabs(g.logprob[N + k] - want) < 1e-4, "closing token %d: logprob %g, want %g", k, g.logprob[N + k], want);
        CHECK(g.n_top[N + k] == 3, "closing token %d: %d alternatives", k, g.n_top[N + k]);
        lilac_session_free(t);
        ids[m++] = CLOSE_SEQ[k];
    }
}

/* max_tokens inside the closing sequence; a callback that stops on a forced token */
static void test_budget_cut(void) {
    const int N = 5;
    lilac_gen_params p = greedy(N + 2);
    p.think_budget = N;
    p.think_close = 504;
    p.think_end = CLOSE_SEQ;
    p.n_think_end = K;
    got_t g = {.stop_at = -1};
    int n = 0, len = 0;
    lilac_finish why = LILAC_FINISH_EOS;
    run_budget(&p, &g, &n, &why, &len);
    CHECK(n == N + 2 && why == LILAC_FINISH_LENGTH && len == P + N + 1, "max_tokens cut: %d tokens, finish %d, session %d",
          n, (int)why, len);
    CHECK(g.n == N + 2 && g.id[N] == CLOSE_SEQ[0] && g.id[N + 1] == CLOSE_SEQ[1] && g.forced[N + 1], "cut: the first two closing tokens");
    p.max_tokens = 30;
    got_t h = {.stop_at = N + 1};
    run_budget(&p, &h, &n, &why, &len);
    CHECK(n == N + 2 && why == LILAC_FINISH_CALLBACK && h.n == N + 2, "callback stop: %d tokens, finish %d", n, (int)why);
    /* the budget is larger than max_tokens: an ordinary run */
    p.max_tokens = 4;
    got_t q = {.stop_at = -1};
    run_budget(&p, &q, &n, &why, &len);
    CHECK(n == 4 && why == LILAC_FINISH_LENGTH && !q.forced[3], "budget > max_tokens: %d tokens, finish %d", n, (int)why);
}

static void test_budget_bad_params(void) {
    lilac_session *s = fed(PROMPT, P);
    if (!s) return;
    lilac_gen_params p = greedy(4);
    int32_t big[LILAC_MAX_THINK_END + 1] = {0};
    int n;
    lilac_finish why;
    lilac_error e = {0};
    p.think_end = big;
    p.n_think_end = LILAC_MAX_THINK_END + 1;
    CHECK(lilac_session_generate(s, &p, NULL, NULL, &n, &why, &e) == LILAC_EINVAL, "too long a closing sequence");
    p.n_think_end = 1;
    p.think_close = V;
    CHECK(lilac_session_generate(s, &p, NULL, NULL, &n, &why, &e) == LILAC_EINVAL && strstr(e.msg, "512"),
          "close id outside the vocabulary: %s", e.msg);
    p.think_close = 504;
    p.think_budget = -1;
    CHECK(lilac_session_generate(s, &p, NULL, NULL, &n, &why, &e) == LILAC_EINVAL, "negative budget");
    p.n_think_end = 0;
    p.n_prior_gen = P + 1;
    CHECK(lilac_session_generate(s, &p, NULL, NULL, &n, &why, &e) == LILAC_EINVAL && strstr(e.msg, "n_prior_gen"),
          "n_prior_gen beyond the session: %s", e.msg);
    lilac_session_free(s);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cpu", .threads = 2};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e)) {
        CHECK(0, "open %s: %s", TINY, e.msg);
        return check_done("budget");
    }
    RUN(test_budget_forces_close);
    RUN(test_budget_zero);
    RUN(test_budget_penalties);
    RUN(test_budget_model_closes);
    RUN(test_budget_logprobs);
    RUN(test_budget_cut);
    RUN(test_budget_bad_params);
    lilac_engine_close(eng);
    return check_done("budget");
}
