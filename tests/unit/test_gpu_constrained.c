/* test_gpu_constrained.c — constrained decoding on the CUDA backend's device
 * path (the mask applied in the GPU sampler, cuda_forward.c run_masked)
 * against the references, on the tiny fixture:
 *   - a fake constraint (multiples of 3 below 300): greedy and sampled
 *     (penalties, top_k, top_p) give only allowed ids, accept() sees them in
 *     order, greedy takes the best allowed id of the GPU's logits;
 *   - the device path against the host loop on the same GPU (LILAC_MASK=host):
 *     the same ids for greedy, for greedy with penalties and for seeded
 *     sampling without top_k/top_p (the samplers walk candidates in the same
 *     order there, test_gpu_sample.c), the same logprobs;
 *   - LILAC_MASK_NONE ends the run, a constraint error or a refused id fails it,
 *     and the session's tokens match its state afterwards;
 *   - the reasoning budget with a constraint (forced closing tokens);
 *   - a real JSON Schema grammar, thinking off and on: the answer parses and
 *     matches the schema; greedy equals the CPU backend's constrained greedy
 *     (up to ties within the GPU's logit error); seeded sampling equals the
 *     host loop on the GPU.
 * Prints the time per token of the three paths.  Skips, saying so, without a
 * usable GPU; `make test-gpu` turns skips into failures.  LILAC_TEST_BACKEND=cpu
 * runs the same checks with the CPU backend in the GPU's place (a check of
 * the test itself: there both paths are the host loop). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_constraint.h"
#include "lilac.h"
#include "text/grammar.h"
#include "text/tokenizer.h"

#define TINY "tests/fixtures/tiny"
#define V FAKE_VOCAB
#define W FAKE_WORDS
#define MAXN FAKE_MAXN

static lilac_engine *gpu, *cpu;
static lilac_tokenizer *tok;
static lg_vocab *voc;
static const int32_t PROMPT[] = {10, 20, 30, 40, 50, 7, 7, 300, 481, 99};
#define NP ((int)(sizeof PROMPT / sizeof PROMPT[0]))
static const char *SCHEMA = "{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}, \"n\": {\"enum\": "
                            "[1, 22, 333]}, \"s\": {\"type\": \"string\", \"maxLength\": 12}}, \"required\": [\"ok\", \"n\", "
                            "\"s\"], \"additionalProperties\": false}";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- running a generation ------------------------------------------------- */

typedef struct {
    int n;
    lilac_token_info t[MAXN];
} got_t;

static int collect(void *ctx, const lilac_token_info *t) {
    got_t *g = ctx;
    if (g->n < MAXN) g->t[g->n++] = *t;
    return 0;
}

typedef struct {
    lilac_status st;
    lilac_finish why;
    int n;
    got_t got;
    int len;                /* session length afterwards */
    int tokens_ok;          /* the session's tokens are the prompt + the generated ids */
    double s;               /* wall time of the generation */
    char msg[sizeof(((lilac_error *)0)->msg)];
} result;

/* Runs p on a fresh session of g fed PROMPT; host: LILAC_MASK=host. */
static void run(lilac_engine *g, const lilac_gen_params *p, int host, result *r) {
    memset(r, 0, sizeof *r);
    lilac_session *s = NULL;
    lilac_error e = {0};
    if (lilac_session_new(g, 512, &s, &e) || lilac_session_feed(s, PROMPT, NP, NULL, 0, &e)) {
        CHECK(0, "session: %s", e.msg);
        r->st = LILAC_EBACKEND;
        lilac_session_free(s);
        return;
    }
    if (host) setenv("LILAC_MASK", "host", 1);
    double t0 = now_s();
    r->st = lilac_session_generate(s, p, collect, &r->got, &r->n, &r->why, &e);
    r->s = now_s() - t0;
    if (host) unsetenv("LILAC_MASK");
    snprintf(r->msg, sizeof r->msg, "%s", e.msg);
    r->len = lilac_session_len(s);
    const int32_t *tk = lilac_session_tokens(s);
    r->tokens_ok = r->len >= NP && memcmp(tk, PROMPT, sizeof PROMPT) == 0;
    for (int i = NP; r->tokens_ok && i < r->len; i++) r->tokens_ok = i - NP < r->got.n && tk[i] == r->got.t[i - NP].id;
    lilac_session_free(s);
}

static int same_ids(const result *a, const result *b, int *first_diff) {
    *first_diff = -1;
    int n = a->got.n < b->got.n ? a->got.n : b->got.n;
    for (int i = 0; i < n; i++)
        if (a->got.t[i].id != b->got.t[i].id) {
            *first_diff = i;
            return 0;
        }
    if (a->got.n != b->got.n) *first_diff = n;
    return a->got.n == b->got.n;
}

static lilac_gen_params params(int max_tokens, float temperature, uint64_t seed) {
    lilac_gen_params p = {0};
    p.max_tokens = max_tokens;
    p.sampling = lilac_sampling_greedy();
    p.sampling.temperature = temperature;
    p.sampling.seed = seed;
    return p;
}

/* ---- the fake constraint on the device ----------------------------------- */

static void check_fake_run(const char *what, const result *r, const fake *f, int n_expect) {
    CHECK(r->st == LILAC_OK && r->n == n_expect && r->why == LILAC_FINISH_LENGTH, "%s: %d of %d tokens: %s", what, r->n,
          n_expect, r->msg);
    int ok = f->n == r->got.n;
    for (int i = 0; ok && i < r->got.n; i++) ok = allowed(r->got.t[i].id) && f->seen[i] == r->got.t[i].id;
    CHECK(ok, "%s: every id allowed and accepted in order (%d accepted, %d generated)", what, f->n, r->got.n);
    CHECK(r->tokens_ok, "%s: the session's tokens are the prompt and the generated ids", what);
}

static void test_gpu_mask_fake(void) {
    enum { N = 40 };
    struct {
        const char *what;
        float t;
        int top_k;
        float top_p, rep, freq;
        int exact; /* device and host loop must give the same ids */
    } m[] = {
        {"greedy", 0, 0, 1.0f, 1.0f, 0, 1},
        {"greedy + penalties", 0, 0, 1.0f, 1.3f, 0.7f, 1},
        {"T 1.5", 1.5f, 0, 1.0f, 1.0f, 0, 1},
        {"T 0.8, min_p 0.05, penalties", 0.8f, 0, 1.0f, 1.2f, 0.5f, 1},
        {"T 1.5, top_k 50, top_p 0.9, penalties", 1.5f, 50, 0.9f, 1.2f, 1.0f, 0},
        {"T 1, top_k 200 (more than allowed)", 1.0f, 200, 1.0f, 1.0f, 0, 0},
    };
    for (size_t k = 0; k < sizeof m / sizeof *m; k++) {
        lilac_gen_params p = params(N, m[k].t, 9 + k);
        p.sampling.top_k = m[k].top_k, p.sampling.top_p = m[k].top_p;
        p.sampling.repetition_penalty = m[k].rep, p.sampling.frequency_penalty = m[k].freq;
        if (k == 3) p.sampling.min_p = 0.05f;
        fake fd = fake_new(), fh = fake_new();
        lilac_constraint cd = {f_mask, f_accept, &fd}, ch = {f_mask, f_accept, &fh};
        result rd, rh;
        p.constraint = &cd;
        run(gpu, &p, 0, &rd);
        p.constraint = &ch;
        run(gpu, &p, 1, &rh);
        check_fake_run(m[k].what, &rd, &fd, N);
        check_fake_run(m[k].what, &rh, &fh, N);
        CHECK(fd.calls >= N && fd.calls <= N + 1, "%s: %d mask calls for %d tokens", m[k].what, fd.calls, N);
        int d;
        if (m[k].exact)
            CHECK(same_ids(&rd, &rh, &d), "%s: the device path and the host loop differ at token %d: %d vs %d", m[k].what, d,
                  d >= 0 && d < rd.got.n ? rd.got.t[d].id : -1, d >= 0 && d < rh.got.n ? rh.got.t[d].id : -1);
        else
            printf("    %-40s device and host loop agree: %s\n", m[k].what, same_ids(&rd, &rh, &d) ? "yes" : "no (allowed)");
    }
    /* greedy takes the best allowed id of the GPU's prompt logits */
    float lg[V];
    lilac_session *s = NULL;
    lilac_error e = {0};
    if (!lilac_session_new(gpu, 64, &s, &e) && !lilac_session_feed(s, PROMPT, NP, lg, 0, &e)) {
        int best = 0;
        for (int i = 0; i < V; i++)
            if (allowed(i) && (!allowed(best) || lg[i] > lg[best])) best = i;
        fake f = fake_new();
        lilac_constraint c = {f_mask, f_accept, &f};
        lilac_gen_params p = params(1, 0, 0);
        p.constraint = &c;
        result r;
        run(gpu, &p, 0, &r);
        CHECK(r.got.n == 1 && r.got.t[0].id == best, "greedy takes the best allowed id (%d, got %d)", best,
              r.got.n ? r.got.t[0].id : -1);
    } else {
        CHECK(0, "prompt logits: %s", e.msg);
    }
    lilac_session_free(s);
}

/* Logprobs stay the model's (raw logits) under the mask, as on the host. */
static void test_gpu_mask_logprobs(void) {
    for (int sampled = 0; sampled < 2; sampled++) {
        lilac_gen_params p = params(24, sampled ? 1.1f : 0, 5);
        p.logprobs = 1, p.top_logprobs = 5;
        fake fd = fake_new(), fh = fake_new();
        lilac_constraint cd = {f_mask, f_accept, &fd}, ch = {f_mask, f_accept, &fh};
        result rd, rh;
        p.constraint = &cd;
        run(gpu, &p, 0, &rd);
        p.constraint = &ch;
        run(gpu, &p, 1, &rh);
        int d = -1;
        CHECK(rd.st == LILAC_OK && rh.st == LILAC_OK && same_ids(&rd, &rh, &d), "logprobs %s: ids differ at %d (%s / %s)",
              sampled ? "sampled" : "greedy", d, rd.msg, rh.msg);
        int bad = 0, some_disallowed_top = 0;
        for (int i = 0; i < rd.got.n && i < rh.got.n; i++) {
            const lilac_token_info *a = &rd.got.t[i], *b = &rh.got.t[i];
            bad += fabsf(a->logprob - b->logprob) > 1e-4f || a->n_top != b->n_top;
            for (int j = 0; j < a->n_top && j < b->n_top; j++) {
                bad += a->top_ids[j] != b->top_ids[j] || fabsf(a->top_logprobs[j] - b->top_logprobs[j]) > 1e-4f;
                some_disallowed_top |= !allowed(a->top_ids[j]);
            }
        }
        CHECK(bad == 0, "logprobs %s: %d differences between the device path and the host loop", sampled ? "sampled" : "greedy",
              bad);
        CHECK(some_disallowed_top, "the alternatives are the model's (some outside the mask), not the masked distribution's");
    }
}

static void test_gpu_mask_none_error(void) {
    /* MASK_NONE after 5 accepted tokens: ends as an end id would */
    fake f = fake_new();
    f.none_after = 5;
    lilac_constraint c = {f_mask, f_accept, &f};
    lilac_gen_params p = params(40, 0, 0);
    p.constraint = &c;
    result r;
    run(gpu, &p, 0, &r);
    CHECK(r.st == LILAC_OK && r.n == 5 && r.why == LILAC_FINISH_EOS, "MASK_NONE ends after 5 tokens (n %d, %s)", r.n, r.msg);
    /* the device fed the last token before the host learnt the grammar was complete */
    CHECK((r.len == NP + 4 || r.len == NP + 5) && r.tokens_ok, "the state holds the prompt and 4 or 5 tokens (%d), as its tokens say",
          r.len - NP);
    /* MASK_NONE before the first token */
    fake f0 = fake_new();
    f0.none_after = 0;
    c.ctx = &f0;
    run(gpu, &p, 0, &r);
    CHECK(r.st == LILAC_OK && r.n == 0 && r.why == LILAC_FINISH_EOS && r.len == NP, "MASK_NONE at once: no token (n %d)", r.n);
    /* a failing constraint */
    fake f2 = fake_new();
    f2.fail_at = 3;
    c.ctx = &f2;
    run(gpu, &p, 0, &r);
    CHECK(r.st == LILAC_EINVAL && strstr(r.msg, "constrained decoding"), "a failing constraint fails generation: %s", r.msg);
    CHECK(r.tokens_ok, "after a failure the session's tokens still match its state");
    /* a refused id */
    fake f3 = fake_new();
    f3.refuse_at = 2;
    c.ctx = &f3;
    run(gpu, &p, 0, &r);
    CHECK(r.st == LILAC_EINVAL && strstr(r.msg, "not allowed"), "a refused id fails generation: %s", r.msg);
    /* a stop id ends a constrained run at its first occurrence (the greedy run's third id) */
    fake f4 = fake_new();
    c.ctx = &f4;
    lilac_gen_params q = params(40, 0, 0);
    q.constraint = &c;
    run(gpu, &q, 0, &r);
    if (r.got.n >= 3) {
        int32_t stop = r.got.t[2].id;
        fake f5 = fake_new();
        c.ctx = &f5;
        q.stop_ids = &stop;
        q.n_stop_ids = 1;
        result rs;
        run(gpu, &q, 0, &rs);
        int first = 0;
        while (first < r.got.n && r.got.t[first].id != stop) first++;
        CHECK(rs.st == LILAC_OK && rs.why == LILAC_FINISH_EOS && rs.n == first + 1 && rs.len == NP + first && rs.tokens_ok,
              "a stop id ends the run at its first occurrence (%d tokens, expected %d; state %d)", rs.n, first + 1, rs.len - NP);
    }
}

static void test_gpu_mask_budget(void) {
    static const int32_t close_seq[] = {9, 504, 12}; /* multiples of 3: allowed by the fake */
    result r[2];
    fake f[2] = {fake_new(), fake_new()};
    for (int host = 0; host < 2; host++) {
        lilac_constraint c = {f_mask, f_accept, &f[host]};
        lilac_gen_params p = params(20, 0, 0);
        p.think_budget = 4;
        p.think_close = 504;
        p.think_end = close_seq;
        p.n_think_end = 3;
        p.constraint = &c;
        run(gpu, &p, host, &r[host]);
        CHECK(r[host].st == LILAC_OK && r[host].n == 20, "%s: 20 tokens: %s", host ? "host" : "device", r[host].msg);
        CHECK(r[host].got.n == 20 && r[host].got.t[4].forced && r[host].got.t[5].forced && r[host].got.t[6].forced &&
                  r[host].got.t[5].id == 504,
              "%s: the budget's closing tokens come 5th to 7th", host ? "host" : "device");
        int ok = f[host].n == r[host].n;
        for (int i = 0; i < r[host].got.n && ok; i++) ok = f[host].seen[i] == r[host].got.t[i].id;
        CHECK(ok, "%s: accept saw every id, the forced ones included, in order", host ? "host" : "device");
        CHECK(r[host].tokens_ok, "%s: the session's tokens match", host ? "host" : "device");
    }
    int d;
    CHECK(same_ids(&r[0], &r[1], &d), "budget: the device path and the host loop differ at %d", d);
}

/* ---- a real grammar --------------------------------------------------------- */

static int32_t END_ID;

static lg_constraint *schema_constraint(int think) {
    lilac_error e = {0};
    json_t *schema = json_loads(SCHEMA, 0, NULL);
    lg_grammar *g = lg_new();
    int r = lg_json_schema(g, schema, "schema", &e);
    json_decref(schema);
    lilac_status st = r >= 0 ? lg_finalize(g, lg_answer_root(g, r), &e) : LILAC_EINVAL;
    lg_constraint *k = NULL;
    if (st) {
        lg_free(g);
    } else {
        st = lg_constraint_new(g, voc, &END_ID, 1, think, think ? 504 : -1, &k, &e);
    }
    CHECK(st == LILAC_OK, "schema constraint: %s", e.msg);
    return k;
}

/* Code points in a UTF-8 string. */
static size_t utf8_chars(const char *p) {
    size_t n = 0;
    for (; p && *p; p++) n += ((unsigned char)*p & 0xc0) != 0x80;
    return n;
}

/* The answer after any reasoning block (up to </think>), without the end id. */
static int answer_valid(const result *r, char *text, size_t cap) {
    int from = 0, to = r->got.n;
    for (int i = 0; i < r->got.n; i++)
        if (r->got.t[i].id == 504) from = i + 1;
    if (to > from && r->got.t[to - 1].id == END_ID) to--;
    int32_t ids[MAXN];
    for (int i = from; i < to; i++) ids[i - from] = r->got.t[i].id;
    lilac_buf b = LILAC_BUF_INIT;
    lilac_error e = {0};
    lilac_tokenizer_decode(tok, ids, (size_t)(to - from), 0, &b, &e);
    snprintf(text, cap, "%s", b.data ? b.data : "");
    json_t *val = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
    lilac_buf_free(&b);
    json_t *nv = json_object_get(val, "n"), *sv = json_object_get(val, "s");
    long long n = json_is_integer(nv) ? json_integer_value(nv) : -1;
    int ok = json_is_object(val) && json_object_size(val) == 3 && json_is_boolean(json_object_get(val, "ok")) &&
             (n == 1 || n == 22 || n == 333) && json_is_string(sv) && utf8_chars(json_string_value(sv)) <= 12;
    json_decref(val);
    return ok;
}

/* Generation under the schema on an engine; host: LILAC_MASK=host. */
static void run_schema(lilac_engine *g, float temperature, uint64_t seed, int think, int host, result *r) {
    lg_constraint *k = schema_constraint(think);
    memset(r, 0, sizeof *r);
    if (!k) {
        r->st = LILAC_EINVAL;
        return;
    }
    static const int32_t close_seq[] = {9, 504};
    lilac_gen_params p = params(200, temperature, seed);
    p.stop_at_eos = 1;
    p.stop_ids = &END_ID;
    p.n_stop_ids = 1;
    p.constraint = lg_constraint_get(k);
    if (think) {
        p.think_budget = 8;
        p.think_close = 504;
        p.think_end = close_seq;
        p.n_think_end = 2;
    }
    run(g, &p, host, r);
    lg_constraint_free(k);
}

/* The CPU's best two allowed logits after prefix[0..n) of a schema run are
 * within eps (a tie the GPU's logit error may break the other way). */
static int near_tie(const result *r, int n, int think, float eps) {
    lg_constraint *k = schema_constraint(think);
    if (!k) return 0;
    const lilac_constraint *c = lg_constraint_get(k);
    uint32_t bits[W];
    int mk = LILAC_MASK_ALL;
    for (int i = 0; i < n; i++) {
        c->mask(c->ctx, bits);
        c->accept(c->ctx, r->got.t[i].id);
    }
    mk = c->mask(c->ctx, bits);
    int32_t ids[NP + MAXN];
    memcpy(ids, PROMPT, sizeof PROMPT);
    for (int i = 0; i < n; i++) ids[NP + i] = r->got.t[i].id;
    float lg[V];
    lilac_session *s = NULL;
    lilac_error e = {0};
    int tie = 0;
    if (!lilac_session_new(cpu, 512, &s, &e) && !lilac_session_feed(s, ids, NP + n, lg, 0, &e)) {
        float a = -INFINITY, b = -INFINITY;
        for (int i = 0; i < V; i++) {
            if (mk == LILAC_MASK_SOME && !(bits[i >> 5] >> (i & 31) & 1)) continue;
            if (lg[i] > a) b = a, a = lg[i];
            else if (lg[i] > b) b = lg[i];
        }
        tie = a - b < eps;
        printf("    CPU/GPU diverge at token %d: the best two allowed CPU logits are %.4g apart\n", n, a - b);
    }
    lilac_session_free(s);
    lg_constraint_free(k);
    return tie;
}

static void test_gpu_schema(void) {
    char text[1024];
    for (int think = 0; think < 2; think++) {
        /* greedy: device path = CPU backend (host loop) */
        result rd, rc, rh;
        run_schema(gpu, 0, 0, think, 0, &rd);
        run_schema(cpu, 0, 0, think, 0, &rc);
        run_schema(gpu, 0, 0, think, 1, &rh);
        CHECK(rd.st == LILAC_OK && rd.why == LILAC_FINISH_EOS, "think %d greedy: the answer completes (%s)", think, rd.msg);
        CHECK(answer_valid(&rd, text, sizeof text), "think %d greedy: the answer matches the schema: %s", think, text);
        for (char *q = text; *q; q++) *q = *q == '\n' || *q == '\t' ? ' ' : *q;
        printf("    think %d, greedy (%d tokens): %s\n", think, rd.n, text);
        CHECK(rd.tokens_ok && rc.tokens_ok && rh.tokens_ok, "think %d: the sessions' tokens match", think);
        int d;
        CHECK(same_ids(&rd, &rh, &d), "think %d greedy: the device path and the GPU host loop differ at %d", think, d);
        if (!same_ids(&rd, &rc, &d))
            CHECK(near_tie(&rc, d, think, 4e-2f), "think %d greedy: the GPU and the CPU differ at token %d (not a near tie)",
                  think, d);
        /* sampled with seeds: device path = host loop on the GPU; valid */
        for (uint64_t seed = 1; seed <= 3; seed++) {
            run_schema(gpu, 1.2f, seed, think, 0, &rd);
            run_schema(gpu, 1.2f, seed, think, 1, &rh);
            CHECK(rd.st == LILAC_OK && rh.st == LILAC_OK, "think %d seed %d: %s / %s", think, (int)seed, rd.msg, rh.msg);
            CHECK(same_ids(&rd, &rh, &d), "think %d seed %d: the device path and the host loop differ at %d", think, (int)seed, d);
            if (rd.why == LILAC_FINISH_EOS)
                CHECK(answer_valid(&rd, text, sizeof text), "think %d seed %d: the answer matches the schema: %s", think,
                      (int)seed, text);
            else
                printf("    think %d seed %d: ran out of tokens (%d) before the answer completed\n", think, (int)seed, rd.n);
        }
    }
}

/* Time per token: unconstrained device loop, constrained device path, host loop. */
static void test_gpu_mask_timing(void) {
    enum { N = 200 };
    result ru, rd, rh;
    lilac_gen_params p = params(N, 0.8f, 3);
    run(gpu, &p, 0, &ru);
    fake fd = fake_new(), fh = fake_new();
    lilac_constraint cd = {f_mask, f_accept, &fd}, ch = {f_mask, f_accept, &fh};
    p.constraint = &cd;
    run(gpu, &p, 0, &rd);
    p.constraint = &ch;
    run(gpu, &p, 1, &rh);
    CHECK(ru.n == N && rd.n == N && rh.n == N, "timing runs: %d, %d, %d of %d tokens", ru.n, rd.n, rh.n, N);
    printf("    tiny, %d sampled tokens: unconstrained %.1f us/token, masked on the device %.1f, host loop %.1f\n", N,
           ru.s / N * 1e6, rd.s / N * 1e6, rh.s / N * 1e6);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_error e = {0};
    const char *be = getenv("LILAC_TEST_BACKEND");
    lilac_engine_opts o = {.model_dir = TINY, .backend = be && *be ? be : "cuda", .threads = 1};
    if (lilac_engine_open(&o, &gpu, &e)) {
        SKIP("%s", e.msg);
        return check_done("gpu_constrained");
    }
    lilac_engine_opts oc = {.model_dir = TINY, .backend = "cpu", .threads = 1};
    if (lilac_engine_open(&oc, &cpu, &e) || lilac_tokenizer_load(TINY, &tok, &e) || lg_vocab_new(tok, V, &voc, &e)) {
        CHECK(0, "setup: %s", e.msg);
        return check_done("gpu_constrained");
    }
    END_ID = lilac_tokenizer_id(tok, "<|im_end|>");
    RUN(test_gpu_mask_fake);
    RUN(test_gpu_mask_logprobs);
    RUN(test_gpu_mask_none_error);
    RUN(test_gpu_mask_budget);
    RUN(test_gpu_schema);
    RUN(test_gpu_mask_timing);
    lg_vocab_free(voc);
    lilac_tokenizer_free(tok);
    lilac_engine_close(cpu);
    lilac_engine_close(gpu);
    return check_done("gpu_constrained");
}
