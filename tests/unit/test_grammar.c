/* test_grammar.c — constrained decoding: the JSON Schema compiler (accepted
 * and refused schemas, error messages naming keyword and place), the byte
 * automaton (texts accepted and rejected), the tool-call grammar, and the
 * token mask against a brute-force check of every token (the tiny model's
 * vocabulary, and samples of the 151K Qwen3 one). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/sample.h"
#include "text/grammar.h"
#include "text/tokenizer.h"

static lg_grammar *compile(const char *schema, lilac_error *e) {
    json_error_t je;
    json_t *s = json_loads(schema, JSON_DECODE_ANY, &je);
    if (!s) {
        snprintf(e->msg, sizeof e->msg, "bad test JSON: %s", je.text);
        return NULL;
    }
    lg_grammar *g = lg_new();
    int r = lg_json_schema(g, s, "schema", e);
    json_decref(s);
    if (r < 0 || lg_finalize(g, lg_answer_root(g, r), e)) {
        lg_free(g);
        return NULL;
    }
    return g;
}

static int accepts(lg_grammar *g, const char *text) { return lg_match_text(g, text, strlen(text)); }

typedef struct {
    const char *schema;
    const char *yes[8];
    const char *no[8];
} text_case;

static const text_case cases[] = {
    {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\", "
     "\"minimum\": 0, \"maximum\": 150}}, \"required\": [\"name\"]}",
     {"{\"name\":\"Bob\"}", "{\"name\": \"Bob\", \"age\": 42}", "{\n  \"name\": \"caf\xc3\xa9\",\n  \"age\": 150\n}",
      "\n\n{\"name\":\"a\\n\\u00e9\\\"\"}", "{\"name\":\"\",\"age\":0}"},
     {"{\"age\": 1}", "{\"name\":\"x\",\"age\":151}", "{\"name\":\"x\",\"age\":-1}", "{\"name\":\"x\",}",
      "{\"age\":1,\"name\":\"x\"}", "{\"name\":\"x\"", "{\"name\":\"\xc3\"}", "{\"name\":\"x\",\"age\":01}"}},
    {"{\"enum\": [\"red\", \"green\", 3, null]}", {"\"red\"", "\"green\"", "3", "null"}, {"\"blue\"", "\"re\"", "4", "\"3\""}},
    {"{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"minItems\": 2, \"maxItems\": 3}",
     {"[true,false]", "[true, false, true]", "[ true ,\n false]"}, {"[]", "[true]", "[true,true,true,true]", "[1,2]"}},
    {"{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"object\", \"properties\": {\"k\": {\"const\": \"v\"}}, "
     "\"required\": [\"k\"], \"additionalProperties\": false}]}",
     {"-12", "0", "{\"k\":\"v\"}"}, {"{\"k\":\"w\"}", "{}", "1.5", "--1", "00"}},
    {"{\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 10}",
     {"1", "10", "9.99", "1.5", "3.14159"}, {"0", "10.5", "-1", "11", "1e3"}},
    {"{\"type\": \"integer\", \"minimum\": -25, \"maximum\": 1234}",
     {"-25", "-9", "0", "7", "99", "1000", "1234"}, {"-26", "1235", "2000", "-100", "01"}},
    {"{\"type\": \"string\", \"format\": \"date\"}", {"\"2024-01-31\"", "\"1999-02-28\"", "\"2030-11-30\""},
     {"\"2024-02-30\"", "\"2024-13-01\"", "\"2024-1-1\"", "\"2024-04-31\""}},
    {"{\"type\": \"string\", \"format\": \"date-time\"}", {"\"2024-01-31T23:59:59Z\"", "\"2024-01-31T00:00:00.123+05:30\""},
     {"\"2024-01-31T24:00:00Z\"", "\"2024-01-31 10:00:00Z\""}},
    {"{\"type\": \"string\", \"format\": \"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""},
     {"\"123e4567e89b12d3a456426614174000\"", "\"xyz\""}},
    {"{\"type\": \"string\", \"format\": \"ipv4\"}", {"\"192.168.0.1\"", "\"255.255.255.255\"", "\"0.0.0.0\""},
     {"\"256.1.1.1\"", "\"01.2.3.4\"", "\"1.2.3\""}},
    {"{\"type\": \"string\", \"format\": \"email\"}", {"\"a.b+c@example.com\""}, {"\"a@b\"", "\"@example.com\""}},
    {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, \"next\": "
     "{\"anyOf\": [{\"$ref\": \"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": [\"v\", \"next\"]}}, "
     "\"$ref\": \"#/$defs/node\"}",
     {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"}, {"{\"v\":1}", "{\"v\":1,\"next\":{}}"}},
    {"{\"type\": [\"string\", \"null\"]}", {"\"x\"", "null"}, {"1", "true"}},
    {"{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 4}", {"\"ab\"", "\"a\\nc\"", "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"", "\"\\u00e9bcd\""},
     {"\"a\"", "\"abcde\"", "\"\""}},
    {"{\"type\": \"string\", \"minLength\": 3}", {"\"abc\"", "\"abcdefghij\""}, {"\"ab\""}},
    {"{\"type\": \"string\", \"nullable\": true}", {"\"x\"", "null"}, {"1"}},
    {"{\"type\": \"object\", \"additionalProperties\": {\"type\": \"integer\"}}", {"{}", "{\"a\":1,\"b\":-2}"},
     {"{\"a\":\"x\"}"}},
    {"{}", {"1", "\"s\"", "[1,{\"a\":null}]", "{\"a\":[true]}", "-1.5e+10"}, {"", "nul", "[1,]", "'s'"}},
    {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}, \"c\": "
     "{\"type\": \"integer\"}}, \"required\": [\"b\"]}",
     {"{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"b\":2,\"c\":3}", "{\"a\":1,\"b\":2,\"c\":3}"},
     {"{}", "{\"a\":1}", "{\"a\":1,\"c\":3}", "{\"c\":3,\"b\":2}"}},
};

static void test_texts(void) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lilac_error e = {0};
        lg_grammar *g = compile(cases[k].schema, &e);
        CHECK(g, "case %zu compiles: %s", k, e.msg);
        if (!g) continue;
        for (int i = 0; i < 8 && cases[k].yes[i]; i++)
            CHECK(accepts(g, cases[k].yes[i]), "case %zu accepts %s", k, cases[k].yes[i]);
        for (int i = 0; i < 8 && cases[k].no[i]; i++)
            CHECK(!accepts(g, cases[k].no[i]), "case %zu rejects %s", k, cases[k].no[i]);
        lg_free(g);
    }
}

static void test_refusals(void) {
    static const struct {
        const char *schema, *msg;
    } bad[] = {
        {"{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\", \"pattern\": \"^a\"}}}",
         "schema: unsupported keyword 'pattern' at #/properties/x"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"string\", \"minLength\": 3, \"maxLength\": 2}}",
         "maxLength is below minLength at #/items"},
        {"{\"type\": \"array\", \"items\": {\"type\": \"string\", \"multipleOf\": 3}}",
         "unsupported keyword 'multipleOf' at #/items"},
        {"{\"anyOf\": [{\"type\": \"integer\"}, {\"uniqueItems\": true}]}", "unsupported keyword 'uniqueItems' at #/anyOf/1"},
        {"{\"$ref\": \"http://example.com/s.json\"}", "only local refs"},
        {"{\"$ref\": \"#/$defs/missing\"}", "does not name a schema"},
        {"{\"allOf\": [{\"type\": \"integer\"}, {\"minimum\": 1}]}", "'allOf' is supported only with a single schema"},
        {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 3}", "no integer lies in the bounds"},
        {"{\"type\": \"number\", \"minimum\": 0.1, \"maximum\": 0.2}", "cannot write a number inside these bounds"},
        {"{\"type\": \"strin\"}", "'type' must name JSON Schema types"},
        {"{\"enum\": []}", "'enum' must be a non-empty array"},
        {"{\"type\": \"string\", \"enum\": [1, 2]}", "admits no value"},
        {"false", "admits no value"},
        {"{\"type\": \"object\", \"properties\": {\"a\": false}, \"required\": [\"a\"]}",
         "the required property 'a' admits no value at #/properties/a"},
        {"{\"type\": \"object\", \"properties\": {\"n\": {\"$ref\": \"#\"}}, \"required\": [\"n\"]}", "admits no finite value"},
        {"{\"anyOf\": [{\"$ref\": \"#\"}, {\"type\": \"null\"}]}", "refers to itself"},
        {"{\"type\": \"array\", \"items\": [{\"type\": \"integer\"}]}", "as an array (a tuple) is not supported at #"},
        {"{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "maxItems is below minItems"},
        {"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": \"1\"}}}",
         "'minimum' must be a number at #/properties/a"},
        {"[1]", "a schema must be an object or a boolean at #"},
        {"{\"type\": \"object\", \"properties\": {\"a~b/c\": {\"not\": {}}}}", "unsupported keyword 'not' at #/properties/a~0b~1c"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        lilac_error e = {0};
        lg_grammar *g = compile(bad[k].schema, &e);
        CHECK(!g, "refuses %s", bad[k].schema);
        CHECK(strstr(e.msg, bad[k].msg), "%s: the message says '%s': got '%s'", bad[k].schema, bad[k].msg, e.msg);
        lg_free(g);
    }
    /* accepted: annotations and unknown keywords, $defs without use, draft-4 exclusive flags */
    static const char *const good[] = {
        "{\"title\": \"t\", \"description\": \"d\", \"type\": \"string\", \"default\": \"x\", \"examples\": [\"y\"], "
        "\"x-vendor\": 1, \"$schema\": \"http://json-schema.org/draft-07/schema#\"}",
        "{\"type\": \"integer\", \"minimum\": 0, \"exclusiveMinimum\": true}",
        "{\"type\": \"string\", \"format\": \"uri\"}",
        "{\"allOf\": [{\"type\": \"integer\"}], \"description\": \"one\"}",
        "true",
    };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        lilac_error e = {0};
        lg_grammar *g = compile(good[k], &e);
        CHECK(g, "accepts %s: %s", good[k], e.msg);
        lg_free(g);
    }
    lilac_error e = {0};
    lg_grammar *g = compile("{\"type\": \"integer\", \"minimum\": 0, \"exclusiveMinimum\": true}", &e);
    if (g) CHECK(!accepts(g, "0") && accepts(g, "1"), "draft 4 exclusiveMinimum: true excludes the bound");
    lg_free(g);
}

/* ------------------------------------------------------------ tool calls */

static lg_grammar *tools_grammar(const char *tools_json, int parallel, lilac_error *e) {
    json_t *t = json_loads(tools_json, 0, NULL);
    lg_grammar *g = lg_new();
    lg_tokens tk = {-1, -1};
    int r = t ? lg_tool_calls(g, t, parallel, &tk, "tools", e) : -1;
    json_decref(t);
    if (r < 0 || lg_finalize(g, lg_answer_root(g, r), e)) {
        lg_free(g);
        return NULL;
    }
    return g;
}

static const char *TOOLS =
    "[{\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"path\": {\"type\": \"string\"}, \"limit\": {\"type\": \"integer\", \"minimum\": 1}, "
    "\"mode\": {\"enum\": [\"text\", \"bytes\"]}, \"opt\": {\"type\": [\"string\", \"null\"]}}, \"required\": [\"path\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static void test_tools(void) {
    lilac_error e = {0};
    lg_grammar *g = tools_grammar(TOOLS, 1, &e);
    REQUIRE(g, "tools compile: %s", e.msg);
    const char *call1 = "<tool_call>\n<function=read_file>\n<parameter=path>\n/etc/hosts\n</parameter>\n</function>\n</tool_call>";
    CHECK(accepts(g, call1), "one call");
    CHECK(accepts(g, "\n\n<tool_call>\n<function=now>\n</function>\n</tool_call>"), "a call without parameters, after \\n\\n");
    CHECK(accepts(g, "<tool_call>\n<function=read_file>\n<parameter=path>\na <b> c\nd\n</parameter>\n<parameter=limit>\n10\n"
                     "</parameter>\n<parameter=mode>\nbytes\n</parameter>\n<parameter=opt>\nnull\n</parameter>\n</function>\n"
                     "</tool_call>\n<tool_call>\n<function=now>\n</function>\n</tool_call>"),
          "two calls, every parameter");
    CHECK(!accepts(g, "<tool_call>\n<function=read_file>\n</function>\n</tool_call>"), "a required parameter is missing");
    CHECK(!accepts(g, "<tool_call>\n<function=read_file>\n<parameter=path>\nx</parameter>y\n</parameter>\n</function>\n"
                      "</tool_call>"),
          "a raw value never holds </parameter>");
    CHECK(!accepts(g, "<tool_call>\n<function=read_file>\n<parameter=path>\nx\n</parameter>\n<parameter=limit>\n0\n"
                      "</parameter>\n</function>\n</tool_call>"),
          "limit below its minimum");
    CHECK(!accepts(g, "<tool_call>\n<function=read_file>\n<parameter=path>\nx\n</parameter>\n<parameter=opt>\nnothing\n"
                      "</parameter>\n</function>\n</tool_call>"),
          "a string or null value may not start with n (it could read as null)");
    CHECK(accepts(g, "<tool_call>\n<function=read_file>\n<parameter=path>\nx\n</parameter>\n<parameter=opt>\nabc\n"
                     "</parameter>\n</function>\n</tool_call>"),
          "a string or null value as raw text");
    CHECK(!accepts(g, "<tool_call>\n<function=write>\n</function>\n</tool_call>"), "an unknown function");
    CHECK(!accepts(g, "hello"), "no call");
    lg_free(g);
    g = tools_grammar(TOOLS, 0, &e);
    REQUIRE(g, "tools compile: %s", e.msg);
    CHECK(!accepts(g, "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=now>\n</function>\n"
                      "</tool_call>"),
          "one call only without parallel calls");
    lg_free(g);
    g = tools_grammar("[{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]", 1, &e);
    CHECK(!g && strstr(e.msg, "tools[0].function.name cannot be written"), "a name with a blank: %s", e.msg);
    g = tools_grammar("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                      "\"properties\": {\"q\": {\"type\": \"string\", \"pattern\": \"x\"}}}}}]",
                      1, &e);
    CHECK(!g && strstr(e.msg, "tools[0].function.parameters: unsupported keyword 'pattern' at #/properties/q"),
          "tool schema errors name the tool and the place: %s", e.msg);
}

/* -------------------------------------------------- mask vs brute force */

/* Would id be accepted after hist? (a fresh matcher replays the history) */
static int brute(lg_grammar *g, const lg_vocab *v, const int32_t *end, const int32_t *hist, int n, int32_t id) {
    lg_matcher *m = NULL;
    if (lg_matcher_new(g, v, end, 1, &m, NULL)) return -1;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = lg_matcher_accept(m, hist[i]) == 0;
    ok = ok && lg_matcher_accept(m, id) == 0;
    lg_matcher_free(m);
    return ok;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random walks through g; at each step the mask equals the brute-force
 * check on every id (sample ids: that many random ones instead). */
static void walk_compare(lg_grammar *g, const lg_vocab *v, int32_t end, int steps, int sample, const char *what) {
    const int V = lg_vocab_size(v), W = (V + 31) / 32;
    uint32_t *bits = malloc((size_t)W * 4);
    int32_t *hist = malloc((size_t)steps * sizeof *hist);
    int32_t *allowed = malloc((size_t)V * sizeof *allowed);
    lg_matcher *m = NULL;
    lilac_error e = {0};
    if (!bits || !hist || !allowed || lg_matcher_new(g, v, &end, 1, &m, &e)) {
        CHECK(0, "%s: setup: %s", what, e.msg);
        goto out;
    }
    int bad = 0;
    for (int step = 0; step < steps && bad < 5; step++) {
        int n = lg_matcher_mask(m, bits, &e);
        REQUIRE(n >= 0, "%s: mask: %s", what, e.msg);
        int na = 0;
        for (int id = 0; id < V; id++)
            if (bits[id >> 5] >> (id & 31) & 1) allowed[na++] = id;
        CHECK(na == n, "%s: the mask's count %d is its bits %d", what, n, na);
        for (int k = 0; k < (sample ? sample : V); k++) {
            int id = sample ? (int)(next_rand() % (uint64_t)V) : k;
            int want = brute(g, v, &end, hist, step, id), got = bits[id >> 5] >> (id & 31) & 1;
            if (want != got && bad++ < 5) CHECK(0, "%s: step %d: id %d: mask %d, brute force %d", what, step, id, got, want);
        }
        if (sample) /* every allowed id must be accepted */
            for (int k = 0; k < 200 && na; k++) {
                int id = allowed[next_rand() % (uint64_t)na];
                if (brute(g, v, &end, hist, step, id) != 1 && bad++ < 5)
                    CHECK(0, "%s: step %d: allowed id %d is rejected", what, step, id);
            }
        if (na == 0) break;
        /* prefer ending, and short tokens (the walk then visits more states) */
        int32_t pick = allowed[next_rand() % (uint64_t)na];
        if (bits[end >> 5] >> (end & 31) & 1) {
            if (next_rand() % 4 == 0) break;
            if (pick == end) break;
        }
        for (int tries = 0; tries < 3; tries++) {
            int32_t alt = allowed[next_rand() % (uint64_t)na];
            if (alt != end) pick = alt;
        }
        CHECK(lg_matcher_accept(m, pick) == 0, "%s: the picked id %d is accepted", what, pick);
        hist[step] = pick;
    }
out:
    lg_matcher_free(m);
    free(bits);
    free(hist);
    free(allowed);
}

static const char *const WALK_SCHEMAS[] = {
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\", "
    "\"minimum\": -5, \"maximum\": 500}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"bc\", \"d e\"]}, "
    "\"maxItems\": 3}, \"ok\": {\"type\": \"boolean\"}}, \"required\": [\"name\", \"ok\"]}",
    "{}",
    "{\"anyOf\": [{\"type\": \"number\"}, {\"type\": \"string\", \"format\": \"date-time\"}, {\"type\": \"array\", "
    "\"items\": {\"type\": \"string\"}}]}",
};

static void test_mask_tiny(void) {
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    lilac_status st = lilac_tokenizer_load("tests/fixtures/tiny", &t, &e); /* REQUIRE evaluates twice */
    REQUIRE(st == LILAC_OK, "tiny tokenizer: %s", e.msg);
    lg_vocab *v = NULL;
    st = lg_vocab_new(t, 512, &v, &e);
    REQUIRE(st == LILAC_OK, "vocab: %s", e.msg);
    int32_t end = lilac_tokenizer_id(t, "<|im_end|>");
    for (size_t k = 0; k < sizeof WALK_SCHEMAS / sizeof WALK_SCHEMAS[0]; k++)
        for (int run = 0; run < 4; run++) {
            lg_grammar *g = compile(WALK_SCHEMAS[k], &e);
            CHECK(g, "walk schema %zu: %s", k, e.msg);
            if (g) walk_compare(g, v, end, 60, 0, WALK_SCHEMAS[k]);
            lg_free(g);
        }
    lg_tokens tk = {lilac_tokenizer_id(t, "<tool_call>"), lilac_tokenizer_id(t, "</tool_call>")};
    json_t *tools = json_loads(TOOLS, 0, NULL);
    for (int run = 0; run < 4; run++) {
        lg_grammar *g = lg_new();
        int r = lg_tool_calls(g, tools, 1, &tk, "tools", &e);
        CHECK(r >= 0 && lg_finalize(g, lg_answer_root(g, r), &e) == LILAC_OK, "tools: %s", e.msg);
        walk_compare(g, v, end, 80, 0, "tool calls (tiny)");
        lg_free(g);
    }
    json_decref(tools);
    lg_vocab_free(v);
    lilac_tokenizer_free(t);
}

static void test_mask_qwen3(void) {
    lilac_tokenizer *t = NULL;
    lilac_error e = {0};
    if (lilac_tokenizer_load("tests/fixtures/tokenizer/qwen3", &t, &e) != LILAC_OK) {
        SKIP("the Qwen3 tokenizer fixture: %s", e.msg);
        return;
    }
    int V = lilac_tokenizer_n_ids(t);
    lg_vocab *v = NULL;
    lilac_status st = lg_vocab_new(t, V, &v, &e);
    REQUIRE(st == LILAC_OK, "vocab: %s", e.msg);
    int32_t end = lilac_tokenizer_id(t, "<|im_end|>");
    for (size_t k = 0; k < sizeof WALK_SCHEMAS / sizeof WALK_SCHEMAS[0]; k++) {
        lg_grammar *g = compile(WALK_SCHEMAS[k], &e);
        CHECK(g, "walk schema %zu: %s", k, e.msg);
        if (g) walk_compare(g, v, end, 14, 1500, WALK_SCHEMAS[k]);
        lg_free(g);
    }
    lg_vocab_free(v);
    lilac_tokenizer_free(t);
}

/* The sampler with a mask: only allowed ids come out, greedy or sampled. */
static void test_sampler_mask(void) {
    lilac_sampler s;
    lilac_error e;
    lilac_status st = lilac_sampler_init(&s, 70, &e);
    REQUIRE(st == LILAC_OK, "sampler");
    float lg[70];
    for (int i = 0; i < 70; i++) lg[i] = (float)(i % 7);
    uint32_t allow[3] = {0, 0, 0};
    allow[0] |= 1u << 3;  /* logit 3 */
    allow[2] |= 1u << 1;  /* id 65: logit 2 */
    lilac_sampling p = lilac_sampling_greedy();
    lilac_sampler_begin(&s, &p, NULL, 0);
    CHECK(lilac_sampler_pick_masked(&s, &p, lg, allow) == 3, "greedy takes the best allowed id");
    p.temperature = 1.5f;
    p.top_k = 2;
    p.top_p = 0.5f;
    p.repetition_penalty = 1.3f;
    p.seed = 7;
    lilac_sampler_begin(&s, &p, NULL, 0);
    int ok = 1;
    for (int i = 0; i < 200; i++) {
        int32_t id = lilac_sampler_pick_masked(&s, &p, lg, allow);
        ok &= id == 3 || id == 65;
        lilac_sampler_accept(&s, id);
    }
    CHECK(ok, "sampling draws only allowed ids");
    lilac_sampler_free(&s);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    if (check_selected("texts")) test_texts();
    if (check_selected("refusals")) test_refusals();
    if (check_selected("tools")) test_tools();
    if (check_selected("sampler")) test_sampler_mask();
    if (check_selected("mask_tiny")) test_mask_tiny();
    if (check_selected("mask_qwen3")) test_mask_qwen3();
    return check_done("grammar");
}
