/* test_parse.c — the output parser (src/text/parse.h): reasoning, content and
 * Qwen XML tool calls, fed whole, byte by byte and at random split points.
 *
 * Every case is parsed whole first and checked against the expected result;
 * then it is parsed again split byte by byte and at random points (fixed
 * seeds), and each run must give the identical result (ids included).  Every
 * run also checks that the streamed deltas concatenate to the final result,
 * that tool-call starts come in index order before their arguments, and that
 * no text delta splits a UTF-8 character. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "text/parse.h"
#include "util/buf.h"

#define MAXC 8

static const char *TOOLS_JSON =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
    " \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"typed\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"s\": {\"type\": \"string\"}, \"s2\": {\"type\": \"string\"},"
    " \"i\": {\"type\": \"integer\"}, \"i2\": {\"type\": \"integer\"},"
    " \"n\": {\"type\": \"number\"}, \"n2\": {\"type\": \"number\"},"
    " \"b\": {\"type\": \"boolean\"}, \"b2\": {\"type\": \"boolean\"}, \"z\": {\"type\": \"null\"},"
    " \"a\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}, \"o\": {\"type\": \"object\"},"
    " \"oi\": {\"type\": [\"integer\", \"null\"]},"
    " \"u\": {\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]},"
    " \"u2\": {\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"string\"}]},"
    " \"e\": {\"enum\": [\"x\", \"y\"]}, \"text\": {\"type\": \"string\"}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"no_args\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {}}}}]";

static json_t *tools_json(void) {
    json_error_t err;
    json_t *t = json_loads(TOOLS_JSON, 0, &err);
    if (!t) {
        fprintf(stderr, "test tools JSON: %s at %d\n", err.text, err.position);
        exit(2);
    }
    return t;
}

/* ---- collecting the deltas --------------------------------------------- */

typedef struct {
    lilac_buf reasoning, content, args[MAXC];
    char id[MAXC][40], name[MAXC][300];
    int ncalls;
    int order_errors; /* deltas out of order or malformed */
    int utf8_errors;  /* text deltas that split a UTF-8 character */
    int check_utf8;
} collector;

static int splits_utf8(const char *s, size_t n) {
    if (n && ((unsigned char)s[0] & 0xC0) == 0x80) return 1;
    for (size_t i = 1; i <= 3 && i <= n; i++) {
        unsigned char c = (unsigned char)s[n - i];
        if ((c & 0xC0) == 0x80) continue;
        if (c < 0xC0) return 0;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        return need > i;
    }
    return 0;
}

static void on_delta(void *ctx, const lilac_delta *d) {
    collector *c = ctx;
    switch (d->kind) {
    case LILAC_DELTA_REASONING:
    case LILAC_DELTA_CONTENT:
        if (d->index != -1 || !d->text || d->len == 0 || d->text[d->len] != 0) c->order_errors++;
        if (c->check_utf8 && splits_utf8(d->text, d->len)) c->utf8_errors++;
        lilac_buf_append(d->kind == LILAC_DELTA_REASONING ? &c->reasoning : &c->content, d->text, d->len);
        break;
    case LILAC_DELTA_TOOL_START:
        if (d->index != c->ncalls || c->ncalls >= MAXC || !d->id || !d->name) {
            c->order_errors++;
            break;
        }
        snprintf(c->id[c->ncalls], sizeof c->id[0], "%s", d->id);
        snprintf(c->name[c->ncalls], sizeof c->name[0], "%s", d->name);
        c->ncalls++;
        break;
    case LILAC_DELTA_TOOL_ARGS:
        if (d->index != c->ncalls - 1 || d->index < 0 || d->len == 0 || d->text[d->len] != 0) {
            c->order_errors++;
            break;
        }
        lilac_buf_append(&c->args[d->index], d->text, d->len);
        break;
    }
}

static void collector_free(collector *c) {
    lilac_buf_free(&c->reasoning);
    lilac_buf_free(&c->content);
    for (int i = 0; i < MAXC; i++) lilac_buf_free(&c->args[i]);
}

static int buf_is(const lilac_buf *b, const char *s, size_t n) {
    return b->len == n && (n == 0 || memcmp(b->data, s, n) == 0);
}

/* ---- running a parse ---------------------------------------------------- */

typedef struct {
    char *reasoning, *content; /* NULL when the parser says none */
    char *calls;               /* the tool_calls array, compact JSON */
    size_t ncalls;
} outcome;

static void outcome_free(outcome *o) {
    free(o->reasoning);
    free(o->content);
    free(o->calls);
}

static uint32_t xorshift(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

enum { WHOLE, BYTES, RANDOM };

/* Parses text in pieces (mode; rs seeds RANDOM), checks the deltas against
 * the final result, and returns the final result. */
static outcome parse_split(json_t *tools, unsigned flags, uint64_t seed, const char *text, size_t n, int mode,
                           uint32_t rs, int check_utf8, const char *label) {
    outcome o = {0};
    lilac_parser *p = NULL;
    lilac_error e = {0};
    CHECK(lilac_parser_new(tools, flags, seed, &p, &e) == LILAC_OK, "%s: new: %s", label, e.msg);
    if (!p) return o;
    collector c = {0};
    c.check_utf8 = check_utf8;
    size_t off = 0;
    while (off < n) {
        size_t k = n - off;
        if (mode == BYTES) k = 1;
        if (mode == RANDOM) {
            uint32_t r = xorshift(&rs);
            k = r % 13; /* 0..12: empty feeds happen too */
            if (k > n - off) k = n - off;
        }
        CHECK(lilac_parser_feed(p, text + off, k, on_delta, &c, &e) == LILAC_OK, "%s: feed: %s", label, e.msg);
        off += k;
    }
    CHECK(lilac_parser_finish(p, on_delta, &c, &e) == LILAC_OK, "%s: finish: %s", label, e.msg);

    size_t rlen, clen;
    const char *r = lilac_parser_reasoning(p, &rlen), *ct = lilac_parser_content(p, &clen);
    CHECK((r == NULL) == (rlen == 0), "%s: reasoning NULL iff empty", label);
    CHECK((ct == NULL) == (clen == 0), "%s: content NULL iff empty", label);
    CHECK(buf_is(&c.reasoning, r, rlen), "%s: reasoning deltas '%s' != result '%s'", label,
          c.reasoning.data ? c.reasoning.data : "", r ? r : "");
    CHECK(buf_is(&c.content, ct, clen), "%s: content deltas '%s' != result '%s'", label,
          c.content.data ? c.content.data : "", ct ? ct : "");
    CHECK(c.order_errors == 0, "%s: %d malformed or out-of-order deltas", label, c.order_errors);
    CHECK(c.utf8_errors == 0, "%s: %d text deltas split a UTF-8 character", label, c.utf8_errors);

    json_t *calls = lilac_parser_tool_calls(p);
    CHECK(json_is_array(calls), "%s: tool_calls is an array", label);
    CHECK(lilac_parser_ntool_calls(p) == json_array_size(calls), "%s: ntool_calls", label);
    CHECK((size_t)c.ncalls == json_array_size(calls), "%s: %d streamed calls, %zu final", label, c.ncalls,
          json_array_size(calls));
    for (size_t i = 0; i < json_array_size(calls) && i < MAXC; i++) {
        json_t *call = json_array_get(calls, i), *fn = json_object_get(call, "function");
        const char *id = json_string_value(json_object_get(call, "id"));
        const char *nm = json_string_value(json_object_get(fn, "name"));
        json_t *args = json_object_get(fn, "arguments");
        CHECK(id && strcmp(id, c.id[i]) == 0, "%s: call %zu id", label, i);
        CHECK(nm && strcmp(nm, c.name[i]) == 0, "%s: call %zu name", label, i);
        CHECK(strcmp(json_string_value(json_object_get(call, "type")), "function") == 0, "%s: type", label);
        CHECK(json_is_string(args) && buf_is(&c.args[i], json_string_value(args), json_string_length(args)),
              "%s: call %zu argument deltas '%s' != '%s'", label, i, c.args[i].data ? c.args[i].data : "",
              json_string_value(args));
        /* the id is call_ + 24 letters and digits */
        int id_ok = id && strlen(id) == 29 && strncmp(id, "call_", 5) == 0;
        for (int j = 5; id_ok && j < 29; j++)
            id_ok = (id[j] >= 'a' && id[j] <= 'z') || (id[j] >= 'A' && id[j] <= 'Z') || (id[j] >= '0' && id[j] <= '9');
        CHECK(id_ok, "%s: call id '%s'", label, id ? id : "(null)");
    }
    o.reasoning = r ? strndup(r, rlen) : NULL;
    o.content = ct ? strndup(ct, clen) : NULL;
    o.calls = json_dumps(calls, JSON_COMPACT);
    o.ncalls = json_array_size(calls);
    collector_free(&c);
    lilac_parser_free(p);
    return o;
}

static int same(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }
#define SHOW(s) ((s) ? (s) : "(null)")

/* Parses whole, then byte by byte and at random splits; all must agree.
 * Returns the whole-text outcome. */
static outcome parse_all(json_t *tools, unsigned flags, const char *text, size_t n, int check_utf8,
                         const char *label) {
    outcome whole = parse_split(tools, flags, 42, text, n, WHOLE, 0, check_utf8, label);
    for (int run = 0; run < 26; run++) {
        outcome o = parse_split(tools, flags, 42, text, n, run == 0 ? BYTES : RANDOM, 0x9E3779B9u * (uint32_t)run + 1,
                                check_utf8, label);
        CHECK(same(o.reasoning, whole.reasoning), "%s: split run %d: reasoning '%s' vs whole '%s'", label, run,
              SHOW(o.reasoning), SHOW(whole.reasoning));
        CHECK(same(o.content, whole.content), "%s: split run %d: content '%s' vs whole '%s'", label, run,
              SHOW(o.content), SHOW(whole.content));
        CHECK(same(o.calls, whole.calls), "%s: split run %d: calls %s vs whole %s", label, run, SHOW(o.calls),
              SHOW(whole.calls));
        outcome_free(&o);
    }
    return whole;
}

/* ---- the cases ---------------------------------------------------------- */

typedef struct {
    const char *label;
    unsigned flags;
    int tools; /* 1: TOOLS_JSON, 0: NULL */
    const char *text;
    const char *reasoning; /* expected; NULL: none */
    const char *content;
    int ncalls; /* the rows without calls spell out NOCALLS */
    const char *name[3];
    const char *args[3];
} tcase;

#define NOCALLS 0, {NULL}, {NULL}
#define THINK LILAC_PARSE_THINK_OPEN
#define TOOLS LILAC_PARSE_TOOLS

#define WEATHER_CALL                                                                                        \
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"     \
    "</parameter>\n</function>\n</tool_call>"
#define WEATHER_ARGS "{\"city\": \"Paris\", \"days\": 2}"
#define TOKYO_CALL "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n</function>\n</tool_call>"

static void check_case(const tcase *t) {
    json_t *tools = t->tools ? tools_json() : NULL;
    outcome o = parse_all(tools, t->flags, t->text, strlen(t->text), 1, t->label);
    CHECK(same(o.reasoning, t->reasoning), "%s: reasoning '%s', expected '%s'", t->label, SHOW(o.reasoning),
          SHOW(t->reasoning));
    CHECK(same(o.content, t->content), "%s: content '%s', expected '%s'", t->label, SHOW(o.content),
          SHOW(t->content));
    CHECK(o.ncalls == (size_t)t->ncalls, "%s: %zu tool calls, expected %d: %s", t->label, o.ncalls, t->ncalls,
          SHOW(o.calls));
    json_t *calls = json_loads(o.calls ? o.calls : "[]", 0, NULL);
    for (int i = 0; i < t->ncalls && i < (int)json_array_size(calls); i++) {
        json_t *fn = json_object_get(json_array_get(calls, (size_t)i), "function");
        const char *nm = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        CHECK(same(nm, t->name[i]), "%s: call %d name '%s', expected '%s'", t->label, i, SHOW(nm), t->name[i]);
        CHECK(same(args, t->args[i]), "%s: call %d arguments\n  got      %s\n  expected %s", t->label, i, SHOW(args),
              t->args[i]);
    }
    json_decref(calls);
    json_decref(tools);
    outcome_free(&o);
}

static void run_cases(const tcase *cases, size_t n) {
    for (size_t i = 0; i < n; i++) check_case(&cases[i]);
}

static void test_plain_and_reasoning(void) {
    static const tcase cases[] = {
        {"plain", TOOLS, 1, "Hello, world! 1 < 2 and <b>bold</b> <tool>.", NULL,
         "Hello, world! 1 < 2 and <b>bold</b> <tool>.", NOCALLS},
        {"plain, nothing parsed", 0, 0, "Hello\n\n", NULL, "Hello\n\n", NOCALLS},
        {"plain keeps its whitespace", TOOLS, 1, "\n  Hi\n\n", NULL, "\n  Hi\n\n", NOCALLS},
        {"unicode", TOOLS | THINK, 1, "r\xC3\xA9sum\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\n</think>\n\n\xF0\x9F\x8E\x89 \xC3\xA9t\xC3\xA9",
         "r\xC3\xA9sum\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x8E\x89 \xC3\xA9t\xC3\xA9", NOCALLS},
        {"reasoning then answer", THINK | TOOLS, 1, "The user asks 2+2.\nIt is 4.\n</think>\n\nThe answer is 4.",
         "The user asks 2+2.\nIt is 4.", "The answer is 4.", NOCALLS},
        {"newlines around reasoning stripped", THINK, 0, "\n\nThinking...\n\n</think>\n\n\nAnswer\n", "Thinking...",
         "Answer\n", NOCALLS},
        {"only newlines in the think block", THINK | TOOLS, 1, "\n\n</think>\n\nHi", NULL, "Hi", NOCALLS},
        {"empty output", THINK | TOOLS, 1, "", NULL, NULL, NOCALLS},
        {"empty output, no think", TOOLS, 1, "", NULL, NULL, NOCALLS},
        {"thinking off: </think> is content", TOOLS, 1, "Just the answer.\n</think>\nstill content", NULL,
         "Just the answer.\n</think>\nstill content", NOCALLS},
        {"output opens its own think block", TOOLS, 1, "<think>\nhmm\n</think>\n\nHi there", "hmm", "Hi there", NOCALLS},
        {"own think block after newlines", 0, 0, "\n\n<think>\nhmm\n</think>\n\nHi", "hmm", "Hi", NOCALLS},
        {"<thinking> is not <think>", TOOLS, 1, "<thinking>x</thinking>", NULL, "<thinking>x</thinking>", NOCALLS},
        {"<think> later in the text is content", 0, 0, "Hi <think>x</think> there", NULL,
         "Hi <think>x</think> there", NOCALLS},
        {"a second </think> is content", THINK, 0, "a\n</think>\n\nb</think>c", "a", "b</think>c", NOCALLS},
        {"output ends inside reasoning", THINK | TOOLS, 1, "Let me think about\nthis carefully\n", "Let me think about\nthis carefully",
         NULL, NOCALLS},
        {"output ends inside its own think block", TOOLS, 1, "<think>\nstill going", "still going", NULL, NOCALLS},
        {"output ends inside </think>", THINK | TOOLS, 1, "abc\n</thi", "abc\n</thi", NULL, NOCALLS},
        {"reasoning with tags of other kinds", THINK, 0, "a <b> </thinker> </think", "a <b> </thinker> </think", NULL, NOCALLS},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_tool_calls(void) {
    static const tcase cases[] = {
        {"one call after reasoning", THINK | TOOLS, 1, "I should check the weather.\n</think>\n\n" WEATHER_CALL,
         "I should check the weather.", NULL, 1, {"get_weather"}, {WEATHER_ARGS}},
        {"parallel calls", TOOLS, 1, WEATHER_CALL "\n" TOKYO_CALL "\n", NULL, NULL, 2, {"get_weather", "get_weather"},
         {WEATHER_ARGS, "{\"city\": \"Tokyo\"}"}},
        {"three calls, blank lines between", THINK | TOOLS, 1,
         "\n</think>\n\n" TOKYO_CALL "\n\n" WEATHER_CALL "\n\n<tool_call>\n<function=no_args>\n</function>\n</tool_call>",
         NULL, NULL, 3, {"get_weather", "get_weather", "no_args"}, {"{\"city\": \"Tokyo\"}", WEATHER_ARGS, "{}"}},
        {"call after visible text", TOOLS, 1, "Let me look that up.\n\n" WEATHER_CALL, NULL, "Let me look that up.", 1,
         {"get_weather"}, {WEATHER_ARGS}},
        {"text after the calls", TOOLS, 1, "Checking.\n\n" TOKYO_CALL "\n\nDone.\n", NULL, "Checking.\n\nDone.", 1,
         {"get_weather"}, {"{\"city\": \"Tokyo\"}"}},
        {"no parameters", TOOLS, 1, "<tool_call>\n<function=no_args>\n</function>\n</tool_call>", NULL, NULL, 1,
         {"no_args"}, {"{}"}},
        {"loose whitespace between tags", TOOLS, 1,
         "<tool_call>  <function=get_weather> <parameter=city>Rome</parameter>\t</function>  </tool_call>", NULL, NULL,
         1, {"get_weather"}, {"{\"city\": \"Rome\"}"}},
        {"no tools given: any name, untyped", TOOLS, 0,
         "<tool_call>\n<function=anything>\n<parameter=x>\n5\n</parameter>\n<parameter=y>\nhi\n</parameter>\n"
         "<parameter=z>\n[true]\n</parameter>\n</function>\n</tool_call>",
         NULL, NULL, 1, {"anything"}, {"{\"x\": 5, \"y\": \"hi\", \"z\": [true]}"}},
        {"repeated key is kept twice", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n"
         "</function>\n</tool_call>",
         NULL, NULL, 1, {"get_weather"}, {"{\"city\": \"A\", \"city\": \"B\"}"}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_parameter_types(void) {
    static const tcase cases[] = {
        {"typed values", TOOLS, 1,
         "<tool_call>\n<function=typed>\n"
         "<parameter=s>\n42\n</parameter>\n"
         "<parameter=i>\n7\n</parameter>\n"
         "<parameter=n>\n3.5\n</parameter>\n"
         "<parameter=b>\ntrue\n</parameter>\n"
         "<parameter=z>\nnull\n</parameter>\n"
         "<parameter=a>\n[1, 2, 3]\n</parameter>\n"
         "<parameter=o>\n{\"k\": {\"x\": [1,\"two\"]}, \"e\": \"\xC3\xA9\"}\n</parameter>\n"
         "<parameter=oi>\nnull\n</parameter>\n"
         "<parameter=u>\n12\n</parameter>\n"
         "<parameter=e>\nx\n</parameter>\n"
         "<parameter=text>\nline one\nline <two> & \"three\"\n<parameter=fake>not a tag</fake>\n  indented\tend\n"
         "</parameter>\n"
         "</function>\n</tool_call>",
         NULL, NULL, 1, {"typed"},
         {"{\"s\": \"42\", \"i\": 7, \"n\": 3.5, \"b\": true, \"z\": null, \"a\": [1, 2, 3], \"o\": {\"k\": {\"x\": "
          "[1, \"two\"]}, \"e\": \"\xC3\xA9\"}, \"oi\": null, \"u\": 12, \"e\": \"x\", \"text\": \"line one\\nline "
          "<two> & \\\"three\\\"\\n<parameter=fake>not a tag</fake>\\n  indented\\tend\"}"}},
        {"fallbacks", TOOLS, 1,
         "<tool_call>\n<function=typed>\n"
         "<parameter=i>\nseven\n</parameter>\n"
         "<parameter=n>\n2\n</parameter>\n"
         "<parameter=b>\nTrue\n</parameter>\n"
         "<parameter=a>\n[1, 2\n</parameter>\n"
         "<parameter=o>\nnot json\n</parameter>\n"
         "<parameter=oi>\n5\n</parameter>\n"
         "<parameter=u>\nabc\n</parameter>\n"
         "<parameter=u2>\n\"q\"\n</parameter>\n"
         "<parameter=extra>\n5\n</parameter>\n"
         "<parameter=extra2>\nhello\n</parameter>\n"
         "<parameter=extra3>\n{\"a\":1}\n</parameter>\n"
         "<parameter=extra4>\n\"quoted\"\n</parameter>\n"
         "<parameter=s>\n\n</parameter>\n"
         "<parameter=s2>abc</parameter>\n"
         "<parameter=n2>\n1e5\n</parameter>\n"
         "<parameter=i2>\n-0\n</parameter>\n"
         "<parameter=b2>\nmaybe\n</parameter>\n"
         "</function>\n</tool_call>",
         NULL, NULL, 1, {"typed"},
         {"{\"i\": \"seven\", \"n\": 2, \"b\": true, \"a\": \"[1, 2\", \"o\": \"not json\", \"oi\": 5, \"u\": \"abc\", "
          "\"u2\": \"\\\"q\\\"\", \"extra\": 5, \"extra2\": \"hello\", \"extra3\": {\"a\": 1}, \"extra4\": "
          "\"\\\"quoted\\\"\", \"s\": \"\", \"s2\": \"abc\", \"n2\": 100000.0, \"i2\": 0, \"b2\": \"maybe\"}"}},
        {"string that looks like JSON stays a string", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\n{\"a\": [1]}\n</parameter>\n<parameter=days>\n"
         "\"3\"\n</parameter>\n</function>\n</tool_call>",
         NULL, NULL, 1, {"get_weather"}, {"{\"city\": \"{\\\"a\\\": [1]}\", \"days\": \"3\"}"}},
        {"multi-line value with closing-tag lookalikes", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nif a < b:\n    print(\"</param>\")\n</function\n"
         "\n</parameter>\n</function>\n</tool_call>",
         NULL, NULL, 1, {"get_weather"},
         {"{\"city\": \"if a < b:\\n    print(\\\"</param>\\\")\\n</function\\n\"}"}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_malformed(void) {
    static const tcase cases[] = {
        {"unterminated <tool_call>", TOOLS, 1, "Sure.\n<tool_call>", NULL, "Sure.\n<tool_call>", NOCALLS},
        {"unterminated <tool_call> after reasoning", THINK | TOOLS, 1, "x\n</think>\n\n<tool_call>\n", "x",
         "<tool_call>\n", NOCALLS},
        {"unterminated <function=", TOOLS, 1, "Sure.\n<tool_call>\n<function=get_wea", NULL,
         "Sure.\n<tool_call>\n<function=get_wea", NOCALLS},
        {"cut inside <tool_", TOOLS, 1, "Sure. <tool_", NULL, "Sure. <tool_", NOCALLS},
        {"JSON inside <tool_call>", TOOLS, 1,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NULL,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", NOCALLS},
        {"unknown function", TOOLS, 1,
         "Launching.\n\n<tool_call>\n<function=launch_rockets>\n<parameter=target>\nmoon\n</parameter>\n</function>\n"
         "</tool_call>",
         NULL,
         "Launching.\n\n<tool_call>\n<function=launch_rockets>\n<parameter=target>\nmoon\n</parameter>\n</function>\n"
         "</tool_call>", NOCALLS},
        {"empty function name", TOOLS, 1, "<tool_call>\n<function=>\n</function>\n</tool_call>", NULL,
         "<tool_call>\n<function=>\n</function>\n</tool_call>", NOCALLS},
        {"garbage before <function=", TOOLS, 1,
         "<tool_call>\nOK let me call it\n<function=get_weather>\n</function>\n</tool_call>", NULL,
         "<tool_call>\nOK let me call it\n<function=get_weather>\n</function>\n</tool_call>", NOCALLS},
        {"garbage between parameters", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\nand also\n<parameter=days>\n2\n"
         "</parameter>\n</function>\n</tool_call>",
         NULL, "and also\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>", 1, {"get_weather"},
         {"{\"city\": \"Paris\"}"}},
        {"unterminated parameter value", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar\xC3\xA9", NULL, "<parameter=city>\nPar\xC3\xA9", 1,
         {"get_weather"}, {"{}"}},
        {"unterminated second parameter", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</param",
         NULL, "<parameter=days>\n2\n</param", 1, {"get_weather"}, {"{\"city\": \"Paris\"}"}},
        {"unterminated parameter name", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city\nParis\n</parameter>\n</function>\n</tool_call>", NULL,
         "<parameter=city\nParis\n</parameter>\n</function>\n</tool_call>", 1, {"get_weather"}, {"{}"}},
        {"output ends in a parameter name", TOOLS, 1, "<tool_call>\n<function=get_weather>\n<parameter=ci", NULL,
         "<parameter=ci", 1, {"get_weather"}, {"{}"}},
        {"missing </function>", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>", NULL, NULL, 1,
         {"get_weather"}, {"{\"city\": \"Paris\"}"}},
        {"output ends after a parameter", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n", NULL, NULL, 1,
         {"get_weather"}, {"{\"city\": \"Paris\"}"}},
        {"output ends after </function>", TOOLS, 1, "<tool_call>\n<function=no_args>\n</function>", NULL, NULL, 1,
         {"no_args"}, {"{}"}},
        {"text instead of </tool_call>", TOOLS, 1, "<tool_call>\n<function=no_args>\n</function>\nthen text", NULL,
         "then text", 1, {"no_args"}, {"{}"}},
        {"<tool_call> inside reasoning", THINK | TOOLS, 1,
         "Maybe " WEATHER_CALL "\n</think>\n\nIt is sunny.", "Maybe " WEATHER_CALL, "It is sunny.", NOCALLS},
        {"parsing disabled", 0, 1, "Here: " WEATHER_CALL, NULL, "Here: " WEATHER_CALL, NOCALLS},
        {"parsing disabled after reasoning", THINK, 1, "r\n</think>\n\n" WEATHER_CALL "\n", "r", WEATHER_CALL "\n", NOCALLS},
        {"a broken call, then a real one", TOOLS, 1,
         "<tool_call>oops <tool_call>\n<function=no_args>\n</function>\n</tool_call>", NULL, "<tool_call>oops", 1,
         {"no_args"}, {"{}"}},
        {"a call inside an unterminated value", TOOLS, 1,
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nx <tool_call>\n<function=no_args>\n</function>\n"
         "</tool_call>",
         NULL, "<parameter=city>\nx", 2, {"get_weather", "no_args"}, {"{}", "{}"}},
        {"bare <function= is content", TOOLS, 1, "<function=get_weather>\n</function>", NULL,
         "<function=get_weather>\n</function>", NOCALLS},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* Names and whitespace runs beyond the limits are not calls (and the
 * parser does not wait for them forever). */
static void test_limits(void) {
    json_t *tools = tools_json();
    lilac_buf t = LILAC_BUF_INIT;
    lilac_buf_puts(&t, "<tool_call>\n<function=");
    for (int i = 0; i < 300; i++) lilac_buf_putc(&t, 'a');
    lilac_buf_puts(&t, ">\n</function>\n</tool_call>");
    outcome o = parse_all(NULL, TOOLS, t.data, t.len, 1, "long function name");
    CHECK(o.ncalls == 0 && same(o.content, t.data), "long function name: %zu calls", o.ncalls);
    outcome_free(&o);

    lilac_buf_clear(&t);
    lilac_buf_puts(&t, "<tool_call>");
    for (int i = 0; i < 100; i++) lilac_buf_putc(&t, '\n');
    lilac_buf_puts(&t, "<function=no_args>\n</function>\n</tool_call>");
    o = parse_all(tools, TOOLS, t.data, t.len, 1, "long gap");
    CHECK(o.ncalls == 0 && same(o.content, t.data), "long gap: %zu calls", o.ncalls);
    outcome_free(&o);

    /* 64 newlines are still a call */
    lilac_buf_clear(&t);
    lilac_buf_puts(&t, "<tool_call>");
    for (int i = 0; i < 64; i++) lilac_buf_putc(&t, '\n');
    lilac_buf_puts(&t, "<function=no_args>\n</function>\n</tool_call>");
    o = parse_all(tools, TOOLS, t.data, t.len, 1, "64-byte gap");
    CHECK(o.ncalls == 1 && o.content == NULL, "64-byte gap: %zu calls", o.ncalls);
    outcome_free(&o);

    /* a long value is fine */
    lilac_buf_clear(&t);
    lilac_buf_puts(&t, "<tool_call>\n<function=get_weather>\n<parameter=city>\n");
    for (int i = 0; i < 5000; i++) lilac_buf_puts(&t, i % 7 ? "ab<" : "\n");
    lilac_buf_puts(&t, "\n</parameter>\n</function>\n</tool_call>");
    o = parse_all(tools, TOOLS, t.data, t.len, 1, "long value");
    CHECK(o.ncalls == 1 && o.content == NULL, "long value: %zu calls", o.ncalls);
    outcome_free(&o);

    lilac_buf_free(&t);
    json_decref(tools);
}

/* Bytes that are not UTF-8 pass through content verbatim (not dropped, no
 * crash); in arguments, which must be JSON, they become U+FFFD. */
static void test_invalid_utf8(void) {
    json_t *tools = tools_json();
    static const char text[] = "a\xFF\xC3 b\x80<tool_call>\n<function=get_weather>\n<parameter=city>\n\xE6\x97"
                               "\n</parameter>\n</function>\n</tool_call>\xC3";
    outcome o = parse_all(tools, TOOLS, text, sizeof text - 1, 0, "invalid UTF-8");
    CHECK(same(o.content, "a\xFF\xC3 b\x80\xC3"), "invalid UTF-8: content '%s'", SHOW(o.content));
    CHECK(o.ncalls == 1 && o.calls && strstr(o.calls, "{\\\"city\\\": \\\"\xEF\xBF\xBD\\\"}"),
          "invalid UTF-8: calls %s", SHOW(o.calls));
    outcome_free(&o);
    /* NUL bytes are text too */
    static const char nul[] = "x\0y";
    lilac_parser *p = NULL;
    CHECK(lilac_parser_new(NULL, TOOLS, 1, &p, NULL) == LILAC_OK, "new");
    lilac_parser_feed(p, nul, 3, NULL, NULL, NULL);
    lilac_parser_finish(p, NULL, NULL, NULL);
    size_t len = 0;
    const char *c = lilac_parser_content(p, &len);
    CHECK(c && len == 3 && memcmp(c, nul, 3) == 0, "NUL kept: len %zu", len);
    lilac_parser_free(p);
    json_decref(tools);
}

/* Random soup of tag pieces and text: whatever the parser makes of it must
 * not depend on the split, the deltas must match the result, and when no
 * call and no think block came out, the content is the input, byte for byte. */
static void test_random_soup(void) {
    static const char *const pieces[] = {
        "<tool_call>", "</tool_call>", "<function=get_weather>", "<function=no_args>", "<function=nope>",
        "<parameter=city>", "<parameter=days>", "</parameter>", "</function>", "<think>", "</think>", "\n", "\n\n",
        " ", "Paris", "2", "{\"a\": 1}", "<", "</", "<tool_", "\xC3\xA9", "\xE6\x97\xA5", "x",
        TOKYO_CALL, TOKYO_CALL "\n", "<tool_call>\n<function=get_weather>\n", "<parameter=city>\nRome\n</parameter>\n",
    };
    const size_t npieces = sizeof pieces / sizeof pieces[0];
    json_t *tools = tools_json();
    uint32_t rs = 12345;
    lilac_buf t = LILAC_BUF_INIT;
    char label[64];
    int with_calls = 0, with_both = 0; /* the soup must exercise calls and broken calls */
    for (int iter = 0; iter < 150; iter++) {
        lilac_buf_clear(&t);
        int len = (int)(xorshift(&rs) % 40);
        for (int i = 0; i < len; i++) lilac_buf_puts(&t, pieces[xorshift(&rs) % npieces]);
        unsigned flags = xorshift(&rs) % 4;
        snprintf(label, sizeof label, "soup %d (flags %u)", iter, flags);
        outcome o = parse_all(iter % 3 ? tools : NULL, flags, t.data ? t.data : "", t.len, 1, label);
        const char *s = t.data ? t.data : "";
        size_t lead = strspn(s, " \t\r\n");
        int think = (flags & THINK) || strncmp(s + lead, "<think>", 7) == 0;
        with_calls += o.ncalls > 0;
        with_both += o.ncalls > 0 && o.content && strstr(o.content, "<tool_call>");
        if (!think && o.ncalls == 0)
            CHECK(same(o.content, t.len ? s : NULL), "%s: content '%s' is not the input '%s'", label,
                  SHOW(o.content), s);
        outcome_free(&o);
    }
    CHECK(with_calls >= 30 && with_both >= 5, "soup: %d outputs with calls, %d also with '<tool_call>' content",
          with_calls, with_both);
    lilac_buf_free(&t);
    json_decref(tools);
}

/* ---- streaming behaviour ------------------------------------------------ */

typedef struct {
    char log[4096]; /* one line per delta: R:text, C:text, S:index:name, A:index:text */
} tracer;

static void on_trace(void *ctx, const lilac_delta *d) {
    tracer *t = ctx;
    size_t n = strlen(t->log);
    switch (d->kind) {
    case LILAC_DELTA_REASONING: snprintf(t->log + n, sizeof t->log - n, "R:%s|", d->text); break;
    case LILAC_DELTA_CONTENT: snprintf(t->log + n, sizeof t->log - n, "C:%s|", d->text); break;
    case LILAC_DELTA_TOOL_START: snprintf(t->log + n, sizeof t->log - n, "S:%d:%s|", d->index, d->name); break;
    case LILAC_DELTA_TOOL_ARGS: snprintf(t->log + n, sizeof t->log - n, "A:%d:%s|", d->index, d->text); break;
    }
}

/* Feeds one fragment and checks exactly which deltas it produced. */
static void step(lilac_parser *p, tracer *t, const char *frag, const char *expect) {
    t->log[0] = 0;
    lilac_error e = {0};
    CHECK(lilac_parser_feed(p, frag, strlen(frag), on_trace, t, &e) == LILAC_OK, "feed: %s", e.msg);
    CHECK(strcmp(t->log, expect) == 0, "after '%s': deltas '%s', expected '%s'", frag, t->log, expect);
}

static void test_streaming_promptness(void) {
    json_t *tools = tools_json();
    lilac_parser *p = NULL;
    tracer t;
    CHECK(lilac_parser_new(tools, THINK | TOOLS, 7, &p, NULL) == LILAC_OK, "new");
    step(p, &t, "\nThe user", "R:The user|");
    step(p, &t, " wants\n", "R: wants|");          /* the newline may be the one before </think> */
    step(p, &t, "weather.\n</thi", "R:\nweather.|"); /* "</thi" may be a tag */
    step(p, &t, "nk>\n\n", "");
    step(p, &t, "Let me check", "C:Let me check|");
    step(p, &t, ". <tool_", "C:.|"); /* the space may separate a call, "<tool_" may be one */
    step(p, &t, "call>\n<function=get_", "");
    step(p, &t, "weather>\n", "S:0:get_weather|");
    step(p, &t, "<parameter=city>\nPar", "");
    step(p, &t, "is\n</parameter>\n", "A:0:{\"city\": \"Paris\"|");
    step(p, &t, "<parameter=days>\n2\n</parameter>\n", "A:0:, \"days\": 2|");
    step(p, &t, "</function>", "A:0:}|");
    step(p, &t, "\n</tool_call>\n<tool_call>\n<function=no_args>\n</function>", "S:1:no_args|A:1:{}|");
    t.log[0] = 0;
    CHECK(lilac_parser_finish(p, on_trace, &t, NULL) == LILAC_OK, "finish");
    CHECK(strcmp(t.log, "") == 0, "finish deltas '%s'", t.log);
    CHECK(lilac_parser_ntool_calls(p) == 2, "2 calls");
    CHECK(same(lilac_parser_content(p, NULL), "Let me check."), "content '%s'", SHOW(lilac_parser_content(p, NULL)));
    CHECK(same(lilac_parser_reasoning(p, NULL), "The user wants\nweather."), "reasoning");
    lilac_parser_free(p);

    /* Without tool parsing nothing waits, not even whitespace or "<tool_". */
    CHECK(lilac_parser_new(NULL, 0, 7, &p, NULL) == LILAC_OK, "new");
    step(p, &t, "x", "C:x|");
    step(p, &t, " <tool_", "C: <tool_|");
    step(p, &t, "\n", "C:\n|");
    lilac_parser_free(p);
    json_decref(tools);
}

static void test_ids(void) {
    json_t *tools = tools_json();
    const char *text = TOKYO_CALL "\n" TOKYO_CALL;
    outcome a = parse_split(tools, TOOLS, 1, text, strlen(text), WHOLE, 0, 1, "ids a");
    outcome b = parse_split(tools, TOOLS, 1, text, strlen(text), BYTES, 0, 1, "ids b");
    outcome c = parse_split(tools, TOOLS, 2, text, strlen(text), WHOLE, 0, 1, "ids c");
    CHECK(same(a.calls, b.calls), "same seed, same ids");
    CHECK(!same(a.calls, c.calls), "another seed, other ids");
    json_t *calls = json_loads(a.calls, 0, NULL);
    const char *id0 = json_string_value(json_object_get(json_array_get(calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(calls, 1), "id"));
    CHECK(id0 && id1 && strcmp(id0, id1) != 0, "two calls, two ids");
    json_decref(calls);
    outcome_free(&a);
    outcome_free(&b);
    outcome_free(&c);
    json_decref(tools);
}

static void test_api_errors(void) {
    lilac_parser *p = NULL;
    lilac_error e = {0};
    json_t *obj = json_object();
    CHECK(lilac_parser_new(obj, TOOLS, 1, &p, &e) == LILAC_EINVAL && !p, "tools must be an array");
    CHECK(strstr(e.msg, "not an array") != NULL, "message: %s", e.msg);
    json_decref(obj);
    CHECK(lilac_parser_new(NULL, TOOLS, 1, &p, &e) == LILAC_OK, "new");
    CHECK(lilac_parser_feed(p, NULL, 0, NULL, NULL, &e) == LILAC_OK, "empty feed");
    CHECK(lilac_parser_feed(p, NULL, 3, NULL, NULL, &e) == LILAC_EINVAL, "NULL text");
    CHECK(lilac_parser_finish(p, NULL, NULL, &e) == LILAC_OK, "finish");
    CHECK(lilac_parser_finish(p, NULL, NULL, &e) == LILAC_OK, "finish twice");
    CHECK(lilac_parser_feed(p, "x", 1, NULL, NULL, &e) == LILAC_EINVAL, "feed after finish");
    CHECK(strstr(e.msg, "after finish") != NULL, "message: %s", e.msg);
    CHECK(lilac_parser_content(p, NULL) == NULL && lilac_parser_reasoning(p, NULL) == NULL, "nothing");
    lilac_parser_free(p);
    lilac_parser_free(NULL);
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_plain_and_reasoning);
    RUN(test_tool_calls);
    RUN(test_parameter_types);
    RUN(test_malformed);
    RUN(test_limits);
    RUN(test_invalid_utf8);
    RUN(test_random_soup);
    RUN(test_streaming_promptness);
    RUN(test_ids);
    RUN(test_api_errors);
    return check_done("parse");
}
