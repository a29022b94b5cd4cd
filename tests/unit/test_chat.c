/* test_chat.c — the Qwen3.6 chat renderer (src/text/chat*.c) against the
 * real template's output.
 *
 * Golden data:
 *   tests/fixtures/templates/rendered_qwen3.6-35b-a3b.json  the team's 11
 *       scenarios (arguments already objects, options in "kwargs");
 *   tests/fixtures/templates/rendered_lilac_cases.json      our cases, made
 *       by tools/gen_chat_golden.py with the real template in transformers'
 *       Jinja environment: renderings, template errors (exact text) and
 *       request-shape errors (a substring naming what and where).
 * Also: the prefix-cache info (offsets, thinking flag) and the Python str
 * helpers (strip over every Unicode whitespace code point, split). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "text/chat.h"
#include "text/chat_pystr.h"

#define UPSTREAM "tests/fixtures/templates/rendered_qwen3.6-35b-a3b.json"
#define OURS "tests/fixtures/templates/rendered_lilac_cases.json"

static json_t *load(const char *path) {
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    if (!j) fprintf(stderr, "%s: line %d: %s\n", path, jerr.line, jerr.text);
    return j;
}

/* Compares a rendering with the expected bytes; on a mismatch prints where. */
static int same_bytes(const char *name, const char *got, size_t glen, const json_t *want) {
    const char *w = json_string_value(want);
    size_t wlen = json_string_length(want);
    if (glen == wlen && memcmp(got, w, wlen) == 0) return 1;
    size_t i = 0;
    while (i < glen && i < wlen && got[i] == w[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "  %s: differs at byte %zu (got %zu bytes, want %zu)\n    got:  %.*s|\n    want: %.*s|\n", name,
            i, glen, wlen, (int)(glen - from < 120 ? glen - from : 120), got + from,
            (int)(wlen - from < 120 ? wlen - from : 120), w + from);
    return 0;
}

/* The upstream fixture's {messages, kwargs} as a request body. */
static json_t *upstream_request(const json_t *scenario) {
    json_t *req = json_object();
    json_object_set(req, "messages", json_object_get(scenario, "messages"));
    json_t *kw = json_deep_copy(json_object_get(scenario, "kwargs"));
    json_t *v;
    if ((v = json_object_get(kw, "tools"))) json_object_set(req, "tools", v);
    if ((v = json_object_get(kw, "add_generation_prompt"))) json_object_set(req, "add_generation_prompt", v);
    json_object_del(kw, "tools");
    json_object_del(kw, "add_generation_prompt");
    json_object_set_new(req, "chat_template_kwargs", kw);
    return req;
}

static void test_upstream_fixture(void) {
    json_t *all = load(UPSTREAM);
    CHECK(all != NULL, "cannot read %s", UPSTREAM);
    if (!all) return;
    CHECK(json_object_size(all) == 11, "%zu scenarios", json_object_size(all));
    const char *name;
    json_t *sc;
    json_object_foreach(all, name, sc) {
        json_t *req = upstream_request(sc);
        lilac_buf out = LILAC_BUF_INIT;
        lilac_error e = {0};
        lilac_status st = lilac_chat_render(req, &out, NULL, &e);
        CHECK(st == LILAC_OK, "%s: %s", name, e.msg);
        if (!st) CHECK(same_bytes(name, out.data, out.len, json_object_get(sc, "rendered")), "%s", name);
        lilac_buf_free(&out);
        json_decref(req);
    }
    json_decref(all);
}

static void test_lilac_cases(void) {
    json_t *all = load(OURS);
    CHECK(all != NULL, "cannot read %s", OURS);
    if (!all) return;
    json_t *cases = json_object_get(all, "cases");
    size_t n = json_array_size(cases), nrender = 0, ntemplate = 0, nrequest = 0;
    CHECK(n >= 100, "only %zu cases", n);
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *req = json_object_get(c, "request");
        /* the buffer holds something already: it must be appended to on
         * success and left alone on failure */
        lilac_buf out = LILAC_BUF_INIT;
        lilac_buf_puts(&out, "KEEP");
        lilac_error e = {0};
        lilac_status st = lilac_chat_render(req, &out, NULL, &e);
        json_t *rendered = json_object_get(c, "rendered"), *err = json_object_get(c, "error"),
               *contains = json_object_get(c, "error_contains");
        CHECK(out.len >= 4 && memcmp(out.data, "KEEP", 4) == 0, "%s: the output buffer's start changed", name);
        if (rendered) {
            nrender++;
            CHECK(st == LILAC_OK, "%s: %s", name, e.msg);
            if (!st) CHECK(same_bytes(name, out.data + 4, out.len - 4, rendered), "%s", name);
        } else if (err) {
            ntemplate++;
            CHECK(st == LILAC_CHAT_ETEMPLATE, "%s: status %d (%s)", name, st, e.msg);
            CHECK(strcmp(e.msg, json_string_value(err)) == 0, "%s: got '%s', want '%s'", name, e.msg,
                  json_string_value(err));
            CHECK(out.len == 4, "%s: output written on error", name);
        } else {
            nrequest++;
            CHECK(st == LILAC_CHAT_EREQUEST, "%s: status %d (%s)", name, st, e.msg);
            CHECK(strstr(e.msg, json_string_value(contains)) != NULL, "%s: got '%s', want it to contain '%s'",
                  name, e.msg, json_string_value(contains));
            CHECK(out.len == 4, "%s: output written on error", name);
        }
        lilac_buf_free(&out);
    }
    CHECK(nrender >= 60 && ntemplate >= 20 && nrequest >= 30, "render %zu, template %zu, request %zu", nrender,
          ntemplate, nrequest);
    json_decref(all);
}

static const char *role_of(const json_t *msgs, size_t i) {
    return json_string_value(json_object_get(json_array_get(msgs, i), "role"));
}

/* The info of every rendered case obeys what the server relies on: each
 * message span starts where that message's text starts, the generation
 * prompt is exactly the tail after generation_offset, and the prompt up to
 * generation_offset is what the same request renders without a generation
 * prompt. */
static void test_info_invariants(void) {
    json_t *all = load(OURS);
    if (!all) return;
    json_t *cases = json_object_get(all, "cases");
    size_t checked = 0;
    for (size_t ci = 0; ci < json_array_size(cases); ci++) {
        json_t *c = json_array_get(cases, ci);
        json_t *want = json_object_get(c, "rendered");
        if (!want) continue;
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *req = json_object_get(c, "request");
        json_t *msgs = json_object_get(req, "messages");
        lilac_buf out = LILAC_BUF_INIT;
        lilac_error e = {0};
        lilac_chat_info info;
        if (lilac_chat_render(req, &out, &info, &e)) {
            CHECK(0, "%s: %s", name, e.msg);
            continue;
        }
        checked++;
        size_t n = info.n_messages;
        CHECK(n == json_array_size(msgs), "%s: %zu offsets", name, n);
        for (size_t i = 0; i < n; i++) {
            size_t off = info.message_offset[i];
            size_t end = i + 1 < n ? info.message_offset[i + 1] : info.generation_offset;
            CHECK(off <= end, "%s: message %zu: offsets go backwards", name, i);
            const char *at = out.data + off, *role = role_of(msgs, i);
            char head[64];
            if (strcmp(role, "tool") == 0) {
                int opens = i > 0 && strcmp(role_of(msgs, i - 1), "tool") != 0;
                snprintf(head, sizeof head, "%s\n<tool_response>\n", opens ? "<|im_start|>user" : "");
            } else {
                snprintf(head, sizeof head, "<|im_start|>%s\n", role);
            }
            CHECK(strncmp(at, head, strlen(head)) == 0, "%s: message %zu (%s) starts with '%.20s'", name, i, role,
                  at);
            if (i == 0 && strcmp(role, "system") == 0) CHECK(off == 0, "%s: leading system at %zu", name, off);
        }
        const char *tail = out.data + info.generation_offset;
        size_t tlen = out.len - info.generation_offset;
        if (!info.add_generation_prompt) {
            CHECK(tlen == 0, "%s: %zu bytes after generation_offset without a generation prompt", name, tlen);
            CHECK(!info.thinking, "%s: thinking without a generation prompt", name);
        } else if (info.thinking) {
            const char *g = "<|im_start|>assistant\n<think>\n";
            CHECK(tlen == strlen(g) && memcmp(tail, g, tlen) == 0, "%s: tail", name);
        } else {
            const char *g = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
            CHECK(tlen == strlen(g) && memcmp(tail, g, tlen) == 0, "%s: tail", name);
        }
        /* without a generation prompt: exactly the prefix */
        json_t *req2 = json_deep_copy(req);
        json_t *kw = json_object_get(req2, "chat_template_kwargs");
        if (!json_is_object(kw)) {
            kw = json_object();
            json_object_set_new(req2, "chat_template_kwargs", kw);
        }
        json_object_set_new(kw, "add_generation_prompt", json_false());
        lilac_buf out2 = LILAC_BUF_INIT;
        lilac_chat_info info2;
        CHECK(lilac_chat_render(req2, &out2, &info2, &e) == LILAC_OK, "%s: %s", name, e.msg);
        CHECK(out2.len == info.generation_offset && memcmp(out2.data, out.data, out2.len) == 0,
              "%s: no-generation-prompt rendering is not the prefix", name);
        CHECK(info2.n_messages == n && memcmp(info2.message_offset, info.message_offset, n * sizeof(size_t)) == 0,
              "%s: offsets differ without the generation prompt", name);
        lilac_chat_info_free(&info2);
        lilac_buf_free(&out2);
        json_decref(req2);
        lilac_chat_info_free(&info);
        CHECK(info.message_offset == NULL && info.n_messages == 0, "info not cleared");
        lilac_buf_free(&out);
    }
    CHECK(checked >= 60, "%zu rendered cases checked", checked);
    json_decref(all);
}

static json_t *parse(const char *text) {
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    if (!j) fprintf(stderr, "bad test JSON: %s\n", jerr.text);
    return j;
}

/* Renders `text` and fills info; returns the prompt (caller frees). */
static char *render_text(const char *text, lilac_chat_info *info, lilac_status *st, lilac_error *e) {
    json_t *req = parse(text);
    lilac_buf out = LILAC_BUF_INIT;
    *st = lilac_chat_render(req, &out, info, e);
    json_decref(req);
    return lilac_buf_take(&out);
}

static void test_info_specific(void) {
    lilac_chat_info info;
    lilac_error e = {0};
    lilac_status st;
    /* thinking on by default; no system message and no tools: message 0 at 0 */
    char *p = render_text("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", &info, &st, &e);
    CHECK(st == LILAC_OK, "%s", e.msg);
    CHECK(info.n_messages == 1 && info.message_offset[0] == 0, "offset %zu", info.message_offset[0]);
    CHECK(info.generation_offset == strlen("<|im_start|>user\nHi<|im_end|>\n"), "gen %zu", info.generation_offset);
    CHECK(info.thinking == 1 && info.add_generation_prompt == 1, "thinking %d", info.thinking);
    lilac_chat_info_free(&info);
    free(p);

    /* thinking off: the generation prompt closes the think block */
    p = render_text("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                    "\"chat_template_kwargs\":{\"enable_thinking\":false}}",
                    &info, &st, &e);
    CHECK(st == LILAC_OK && info.thinking == 0 && info.add_generation_prompt == 1, "thinking %d", info.thinking);
    lilac_chat_info_free(&info);
    free(p);

    /* no generation prompt: nothing open, generation_offset is the end */
    p = render_text("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}", &info,
                    &st, &e);
    CHECK(st == LILAC_OK && info.thinking == 0 && info.add_generation_prompt == 0, "flags");
    CHECK(p && info.generation_offset == strlen(p), "gen %zu", info.generation_offset);
    lilac_chat_info_free(&info);
    free(p);

    /* tools without a system message: message 0 starts after the tool block */
    p = render_text("{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":\"A\"},"
                    "{\"role\":\"tool\",\"content\":\"r\"}],\"tools\":[{\"type\":\"function\"}]}",
                    &info, &st, &e);
    CHECK(st == LILAC_OK, "%s", e.msg);
    if (!st) {
        const char *u = strstr(p, "<|im_start|>user\nHi");
        CHECK(u && info.message_offset[0] == (size_t)(u - p), "offset %zu", info.message_offset[0]);
        CHECK(strncmp(p + info.message_offset[1], "<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>", 51) == 0,
              "assistant at %zu", info.message_offset[1]);
        CHECK(strncmp(p + info.message_offset[2], "<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n",
                      61) == 0,
              "tool at %zu", info.message_offset[2]);
    }
    lilac_chat_info_free(&info);
    free(p);

    /* info is zeroed on failure */
    info.n_messages = 7;
    p = render_text("{\"messages\":[]}", &info, &st, &e);
    CHECK(st == LILAC_CHAT_ETEMPLATE && info.n_messages == 0 && info.message_offset == NULL, "st %d", st);
    free(p);
    lilac_chat_info_free(NULL);
}

/* A request with preserve_thinking, one tool, no generation prompt and the
 * first k of msgs. */
static void build_body(char *body, size_t cap, const char **msgs, size_t k) {
    size_t len = (size_t)snprintf(body, cap,
                                  "{\"chat_template_kwargs\":{\"preserve_thinking\":true},"
                                  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                                  "\"add_generation_prompt\":false,\"messages\":[");
    for (size_t i = 0; i < k && len < cap; i++)
        len += (size_t)snprintf(body + len, cap - len, "%s%s", i ? "," : "", msgs[i]);
    if (len < cap) snprintf(body + len, cap - len, "]}");
}

/* With preserve_thinking the prompt is append-only: the rendering of the
 * first k messages is the full prompt cut at message_offset[k].  This is the
 * property the prefix cache uses. */
static void test_prefix_append_only(void) {
    const char *msgs[] = {
        "{\"role\":\"system\",\"content\":\"S\"}",
        "{\"role\":\"user\",\"content\":\"Q1\"}",
        "{\"role\":\"assistant\",\"content\":\"A1\",\"reasoning_content\":\"R1\"}",
        "{\"role\":\"user\",\"content\":\"Q2 \\u3000\"}",
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}",
        "{\"role\":\"tool\",\"content\":\"one\"}",
        "{\"role\":\"tool\",\"content\":\"two\"}",
        "{\"role\":\"assistant\",\"content\":\"<think>R3</think>A3\"}",
        "{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}},{\"type\":\"text\",\"text\":\"Q3\"}]}",
        "{\"role\":\"assistant\",\"content\":\"A4\"}",
    };
    size_t n = sizeof msgs / sizeof msgs[0];
    char body[4096];
    lilac_error e = {0};
    lilac_status st;
    lilac_chat_info full;
    build_body(body, sizeof body, msgs, n);
    char *whole = render_text(body, &full, &st, &e);
    CHECK(st == LILAC_OK, "%s", e.msg);
    if (st) {
        free(whole);
        return;
    }
    for (size_t k = 2; k < n; k++) {
        /* a prefix that ends inside a run of tool messages closes the user
         * turn that the full prompt keeps open: not a cut point */
        if (strstr(msgs[k - 1], "\"tool\"") && strstr(msgs[k], "\"tool\"")) {
            lilac_chat_info part;
            build_body(body, sizeof body, msgs, k);
            char *p = render_text(body, &part, &st, &e);
            CHECK(st == LILAC_OK && strncmp(p + full.message_offset[k], "<|im_end|>", 10) == 0,
                  "k=%zu: a cut inside a tool run ends the user turn", k);
            lilac_chat_info_free(&part);
            free(p);
            continue;
        }
        build_body(body, sizeof body, msgs, k);
        lilac_chat_info part;
        char *p = render_text(body, &part, &st, &e);
        CHECK(st == LILAC_OK, "k=%zu: %s", k, e.msg);
        if (!st) {
            CHECK(strlen(p) == full.message_offset[k] && memcmp(p, whole, strlen(p)) == 0,
                  "k=%zu: the first %zu messages render to %zu bytes, offset says %zu", k, k, strlen(p),
                  full.message_offset[k]);
            CHECK(memcmp(part.message_offset, full.message_offset, k * sizeof(size_t)) == 0, "k=%zu offsets", k);
        }
        lilac_chat_info_free(&part);
        free(p);
    }
    lilac_chat_info_free(&full);
    free(whole);
}

static void test_bad_inputs(void) {
    lilac_buf out = LILAC_BUF_INIT;
    lilac_error e = {0};
    CHECK(lilac_chat_render(NULL, &out, NULL, &e) == LILAC_CHAT_EREQUEST, "%s", e.msg);
    CHECK(strstr(e.msg, "request") != NULL, "%s", e.msg);
    json_t *s = json_string("x");
    CHECK(lilac_chat_render(s, &out, NULL, &e) == LILAC_CHAT_EREQUEST, "%s", e.msg);
    json_decref(s);
    CHECK(out.len == 0, "output written");
    lilac_buf_free(&out);
}

static lilac_strview sv(const char *s) {
    lilac_strview v = {s, strlen(s)};
    return v;
}

static int view_is(lilac_strview v, const char *s) { return v.n == strlen(s) && memcmp(v.p, s, v.n) == 0; }

/* Writes cp (below U+10000) as NUL-terminated UTF-8. */
static void put_utf8(char *o, uint32_t cp) {
    size_t n = 0;
    if (cp < 0x80) {
        o[n++] = (char)cp;
    } else if (cp < 0x800) {
        o[n++] = (char)(0xc0 | cp >> 6);
        o[n++] = (char)(0x80 | (cp & 63));
    } else {
        o[n++] = (char)(0xe0 | cp >> 12);
        o[n++] = (char)(0x80 | ((cp >> 6) & 63));
        o[n++] = (char)(0x80 | (cp & 63));
    }
    o[n] = 0;
}

/* Media parts are refused (where names the part); text parts, malformed
 * parts (left to the renderer) and requests without lists pass. */
static void test_text_only(void) {
    static const struct {
        const char *json;
        const char *where; /* NULL: accepted */
    } cases[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", NULL},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"text\": \"b\"}]}]}", NULL},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [5, \"x\"]}]}", NULL},
        {"{\"messages\": \"x\"}", NULL},
        {"{}", NULL},
        {"{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": "
         "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"image_url\", \"image_url\": {\"url\": \"u\"}}]}]}",
         "messages[1].content[1].type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"image\": \"u\"}]}]}", "messages[0].content[0].type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"video\", \"video\": \"v\"}]}]}",
         "messages[0].content[0].type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"input_audio\", \"input_audio\": {}}]}]}",
         "messages[0].content[0].type"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"refusal\", \"text\": \"t\"}]}]}",
         "messages[0].content[0].type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t je;
        json_t *req = json_loads(cases[i].json, 0, &je);
        CHECK(req != NULL, "case %zu: %s", i, je.text);
        char where[64] = "unset";
        lilac_error e = {0};
        lilac_status st = lilac_chat_check_text_only(req, where, sizeof where, &e);
        if (!cases[i].where) {
            CHECK(st == LILAC_OK && where[0] == 0, "case %zu refused: %s", i, e.msg);
        } else {
            CHECK(st == LILAC_CHAT_EREQUEST, "case %zu accepted", i);
            CHECK(strcmp(where, cases[i].where) == 0, "case %zu: where '%s'", i, where);
            CHECK(strncmp(e.msg, cases[i].where, strlen(cases[i].where)) == 0 && strstr(e.msg, "not supported"),
                  "case %zu: %s", i, e.msg);
        }
        json_decref(req);
    }
}

static void test_pystr(void) {
    /* Python: [c for c in range(0x110000) if chr(c).isspace()] */
    static const uint32_t ws[] = {0x9,    0xa,    0xb,    0xc,    0xd,    0x1c,   0x1d,   0x1e,   0x1f,   0x20,
                                  0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                                  0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    size_t nws = sizeof ws / sizeof ws[0], count = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) count += (size_t)lilac_pystr_isspace(cp);
    CHECK(count == nws, "%zu whitespace code points, Python has %zu", count, nws);
    for (size_t i = 0; i < nws; i++) {
        CHECK(lilac_pystr_isspace(ws[i]), "U+%04X", ws[i]);
        char c[8], s[32];
        put_utf8(c, ws[i]);
        snprintf(s, sizeof s, "%s%sx%s%s", c, c, c, c);
        CHECK(view_is(lilac_pystr_strip(sv(s)), "x"), "strip U+%04X", ws[i]);
    }
    /* look-alikes that Python keeps */
    CHECK(view_is(lilac_pystr_strip(sv("\xe2\x80\x8bx\xef\xbb\xbf")), "\xe2\x80\x8bx\xef\xbb\xbf"), "ZWSP/BOM kept");
    const char *mvs = "\xe1\xa0\x8ex\xe2\x81\xa0"; /* U+180E x U+2060 */
    CHECK(view_is(lilac_pystr_strip(sv(mvs)), mvs), "U+180E/U+2060 kept");
    /* bytes that are not UTF-8 are not whitespace; a truncated U+3000 stays */
    CHECK(view_is(lilac_pystr_strip(sv(" \xff \xe3\x80")), "\xff \xe3\x80"), "invalid bytes");
    CHECK(view_is(lilac_pystr_strip(sv("\xc2\xa0")), ""), "nbsp only");
    CHECK(view_is(lilac_pystr_strip(sv("")), ""), "empty");
    CHECK(view_is(lilac_pystr_strip(sv("\x80\xe3\x80\x80")), "\x80"), "stray continuation then U+3000");

    CHECK(view_is(lilac_pystr_split_first(sv("a</think>b</think>c"), "</think>"), "a"), "split first");
    CHECK(view_is(lilac_pystr_split_first(sv("abc"), "</think>"), "abc"), "split first, none");
    CHECK(view_is(lilac_pystr_split_last(sv("a</think>b</think>c"), "</think>"), "c"), "split last");
    CHECK(view_is(lilac_pystr_split_last(sv("abc"), "<think>"), "abc"), "split last, none");
    CHECK(view_is(lilac_pystr_split_last(sv("aaa"), "aa"), "a"), "split last, non-overlapping like Python");
    CHECK(view_is(lilac_pystr_rstrip_char(sv("x\n\n"), '\n'), "x"), "rstrip");
    CHECK(view_is(lilac_pystr_lstrip_char(sv("\n\n x"), '\n'), " x"), "lstrip");
    CHECK(lilac_pystr_startswith(sv("<tool_response>x"), "<tool_response>"), "startswith");
    CHECK(!lilac_pystr_endswith(sv("x"), "</tool_response>"), "endswith short");
    CHECK(lilac_pystr_contains(sv("a</think>"), "</think>") && !lilac_pystr_contains(sv("</think"), "</think>"),
          "contains");
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_pystr);
    RUN(test_upstream_fixture);
    RUN(test_lilac_cases);
    RUN(test_info_invariants);
    RUN(test_info_specific);
    RUN(test_prefix_append_only);
    RUN(test_bad_inputs);
    RUN(test_text_only);
    return check_done("chat");
}
