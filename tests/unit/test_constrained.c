/* test_constrained.c — the engine's side of constrained decoding
 * (lilac_gen_params.constraint) on the tiny model, CPU backend: only allowed
 * ids come out (greedy and sampled, penalties on), greedy picks the best
 * allowed id, LILAC_MASK_NONE ends generation as an end id would, a
 * constraint error fails it, and accept() sees every id in order, the
 * reasoning budget's forced closing tokens included; then a real grammar
 * (a JSON Schema) drives the model to a complete, matching answer. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_constraint.h"
#include "session_fed.h"
#include "lilac.h"
#include "text/grammar.h"

#define TINY "tests/fixtures/tiny"
#define V FAKE_VOCAB

static lilac_engine *eng;
static const int32_t PROMPT[] = {10, 20, 30, 40, 50};

static lilac_session *fed(void) { return session_fed(eng, 512, PROMPT, 5); }

typedef struct {
    int n;
    int32_t id[256];
    int forced[256];
} got_t;

static int collect(void *ctx, const lilac_token_info *t) {
    got_t *g = ctx;
    if (g->n < 256) g->id[g->n] = t->id, g->forced[g->n] = t->forced, g->n++;
    return 0;
}

static void test_mask_applies(void) {
    for (int sampled = 0; sampled < 2; sampled++) {
        lilac_session *s = fed();
        if (!s) return;
        fake f = fake_new();
        lilac_constraint c = {f_mask, f_accept, &f};
        lilac_gen_params p = {0};
        p.max_tokens = 40;
        p.sampling = lilac_sampling_greedy();
        if (sampled) {
            p.sampling.temperature = 1.5f;
            p.sampling.top_k = 50;
            p.sampling.top_p = 0.9f;
            p.sampling.frequency_penalty = 1.0f;
            p.sampling.repetition_penalty = 1.2f;
            p.sampling.seed = 9;
        }
        p.constraint = &c;
        got_t g = {0};
        int n = 0;
        lilac_finish why;
        lilac_error e = {0};
        lilac_status st = lilac_session_generate(s, &p, collect, &g, &n, &why, &e);
        CHECK(st == LILAC_OK && n == 40 && why == LILAC_FINISH_LENGTH, "40 tokens: %s", e.msg);
        int ok = 1;
        for (int i = 0; i < g.n; i++) ok &= allowed(g.id[i]) && f.seen[i] == g.id[i];
        CHECK(ok && f.n == 40, "%s: every id allowed and accepted in order", sampled ? "sampled" : "greedy");
        if (!sampled) {
            /* greedy: the first id is the best allowed one of the prompt's logits */
            lilac_session *r = fed();
            float lg[V];
            lilac_error e2 = {0};
            lilac_session_reset(r);
            lilac_session_feed(r, PROMPT, 5, lg, 0, &e2);
            int best = 0;
            for (int i = 0; i < V; i++)
                if (allowed(i) && lg[i] > lg[best]) best = i;
            CHECK(g.id[0] == best, "greedy takes the best allowed id (%d, got %d)", best, g.id[0]);
            lilac_session_free(r);
        }
        lilac_session_free(s);
    }
}

static void test_none_and_error(void) {
    lilac_session *s = fed();
    if (!s) return;
    fake f = fake_new();
    f.none_after = 5;
    lilac_constraint c = {f_mask, f_accept, &f};
    lilac_gen_params p = {0};
    p.max_tokens = 40;
    p.sampling = lilac_sampling_greedy();
    p.constraint = &c;
    got_t g = {0};
    int n = 0;
    lilac_finish why;
    lilac_error e = {0};
    lilac_status st = lilac_session_generate(s, &p, collect, &g, &n, &why, &e);
    CHECK(st == LILAC_OK && n == 5 && why == LILAC_FINISH_EOS, "MASK_NONE ends after 5 tokens as an end id (n %d)", n);
    CHECK(lilac_session_len(s) == 5 + 4, "the state holds the prompt and all but the last token (%d)", lilac_session_len(s));
    lilac_session_free(s);
    s = fed();
    fake f2 = fake_new();
    f2.fail_at = 3;
    c.ctx = &f2;
    st = lilac_session_generate(s, &p, collect, &g, &n, &why, &e);
    CHECK(st == LILAC_EINVAL && strstr(e.msg, "constrained decoding"), "a failing constraint fails generation: %s", e.msg);
    lilac_session_free(s);
}

static void test_budget_forced_tokens(void) {
    lilac_session *s = fed();
    if (!s) return;
    static const int32_t close_seq[] = {9, 504, 12}; /* stand for "\n", "</think>", "\n\n": multiples of 3 */
    fake f = fake_new();
    lilac_constraint c = {f_mask, f_accept, &f};
    lilac_gen_params p = {0};
    p.max_tokens = 20;
    p.sampling = lilac_sampling_greedy();
    p.think_budget = 4;
    p.think_close = 504;
    p.think_end = close_seq;
    p.n_think_end = 3;
    p.constraint = &c;
    got_t g = {0};
    int n = 0;
    lilac_finish why;
    lilac_error e = {0};
    lilac_status st = lilac_session_generate(s, &p, collect, &g, &n, &why, &e);
    CHECK(st == LILAC_OK && n == 20, "20 tokens: %s", e.msg);
    CHECK(g.forced[4] && g.forced[5] && g.forced[6] && g.id[5] == 504, "the budget's closing tokens come 5th to 7th");
    int ok = f.n == n;
    for (int i = 0; i < n && ok; i++) ok = f.seen[i] == g.id[i];
    CHECK(ok, "accept saw every id, the forced ones included, in order (%d of %d)", f.n, n);
    lilac_session_free(s);
}

/* LILAC_MASK=host (forcing the host loop where a backend could apply the
 * mask on its device) changes nothing on the CPU backend, which has only the
 * host loop: the same ids, sampled, with and without it. */
static void test_mask_knob(void) {
    int32_t ids[2][30];
    for (int host = 0; host < 2; host++) {
        lilac_session *s = fed();
        if (!s) return;
        fake f = fake_new();
        lilac_constraint c = {f_mask, f_accept, &f};
        lilac_gen_params p = {0};
        p.max_tokens = 30;
        p.sampling = lilac_sampling_greedy();
        p.sampling.temperature = 1.3f;
        p.sampling.seed = 4;
        p.constraint = &c;
        got_t g = {0};
        int n = 0;
        lilac_finish why;
        lilac_error e = {0};
        if (host) setenv("LILAC_MASK", "host", 1);
        lilac_status st = lilac_session_generate(s, &p, collect, &g, &n, &why, &e);
        if (host) unsetenv("LILAC_MASK");
        CHECK(st == LILAC_OK && n == 30, "LILAC_MASK=%s: %s", host ? "host" : "(unset)", e.msg);
        for (int i = 0; i < 30; i++) ids[host][i] = i < g.n ? g.id[i] : -1;
        lilac_session_free(s);
    }
    CHECK(memcmp(ids[0], ids[1], sizeof ids[0]) == 0, "LILAC_MASK=host changed the CPU backend's output");
}

/* A real grammar over the tiny tokenizer: the greedy answer completes and matches. */
static void test_schema_answer(void) {
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    lilac_status st = lilac_tokenizer_load(TINY, &t, &e);
    REQUIRE(st == LILAC_OK, "tokenizer: %s", e.msg);
    lg_vocab *v = NULL;
    st = lg_vocab_new(t, V, &v, &e);
    REQUIRE(st == LILAC_OK, "vocab: %s", e.msg);
    json_t *schema = json_loads("{\"type\": \"object\", \"properties\": {\"ok\": {\"type\": \"boolean\"}, \"n\": {\"enum\": "
                                "[1, 22, 333]}}, \"required\": [\"ok\", \"n\"], \"additionalProperties\": false}",
                                0, NULL);
    lg_grammar *g = lg_new();
    int r = lg_json_schema(g, schema, "schema", &e);
    st = r >= 0 ? lg_finalize(g, r, &e) : LILAC_EINVAL;
    CHECK(st == LILAC_OK, "schema: %s", e.msg);
    int32_t end = lilac_tokenizer_id(t, "<|im_end|>");
    lg_constraint *k = NULL;
    if (!st) st = lg_constraint_new(g, v, &end, 1, 0, -1, &k, &e);
    else lg_free(g);
    lilac_session *s = st ? NULL : fed();
    for (int seed = 0; s && seed < 3; seed++) {
        lilac_session_reset(s);
        lilac_session_feed(s, PROMPT, 5, NULL, 0, &e);
        lg_constraint_free(k);
        g = lg_new();
        r = lg_json_schema(g, schema, "schema", &e);
        lg_finalize(g, r, &e);
        lg_constraint_new(g, v, &end, 1, 0, -1, &k, &e);
        lilac_gen_params p = {0};
        p.max_tokens = 200;
        p.sampling = lilac_sampling_greedy();
        p.sampling.temperature = seed ? 1.2f : 0;
        p.sampling.seed = (uint64_t)seed;
        p.stop_at_eos = 1;
        p.stop_ids = &end;
        p.n_stop_ids = 1;
        p.constraint = lg_constraint_get(k);
        got_t gt = {0};
        int n = 0;
        lilac_finish why;
        st = lilac_session_generate(s, &p, collect, &gt, &n, &why, &e);
        CHECK(st == LILAC_OK && why == LILAC_FINISH_EOS && gt.id[n - 1] == end, "seed %d: the answer ends with the end id", seed);
        lilac_buf b = LILAC_BUF_INIT;
        lilac_tokenizer_decode(t, gt.id, (size_t)(n - 1), 0, &b, &e);
        json_t *val = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
        json_t *nv = json_object_get(val, "n");
        CHECK(json_is_boolean(json_object_get(val, "ok")) && json_is_integer(nv) && json_object_size(val) == 2 &&
                  (json_integer_value(nv) == 1 || json_integer_value(nv) == 22 || json_integer_value(nv) == 333),
              "seed %d: the answer matches the schema: %s", seed, b.data ? b.data : "");
        json_decref(val);
        lilac_buf_free(&b);
    }
    lilac_session_free(s);
    lg_constraint_free(k);
    json_decref(schema);
    lg_vocab_free(v);
    lilac_tokenizer_free(t);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    lilac_engine_opts o = {.model_dir = TINY, .backend = "cpu", .threads = 1};
    lilac_error e = {0};
    if (lilac_engine_open(&o, &eng, &e)) {
        CHECK(0, "open %s: %s", TINY, e.msg);
        return check_done("constrained");
    }
    if (check_selected("mask")) test_mask_applies();
    if (check_selected("none")) test_none_and_error();
    if (check_selected("budget")) test_budget_forced_tokens();
    if (check_selected("schema")) test_schema_answer();
    if (check_selected("knob")) test_mask_knob();
    lilac_engine_close(eng);
    return check_done("constrained");
}
