/* test_anthropic.c — the Anthropic content blocks and stream events
 * (src/server/anthropic_resp.c) built from the output parser's deltas, for
 * output the tiny model never writes: reasoning, text and tool calls.
 *
 * A model output is fed to a real parser in pieces of every size from 1 to
 * 7 bytes; the body must be the same each time (thinking, text, tool_use
 * with the input parsed and typed by the schema, stop_reason tool_use), and
 * the stream's events must follow the grammar and add up to the body. */
#include <jansson.h>

#include "check.h"
#include "server/server.h"

static const char *OUTPUT = "Let me add.\n</think>\n\nSure, adding.\n<tool_call>\n<function=add>\n<parameter=a>\n2\n"
                            "</parameter>\n<parameter=b>\n3.5\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
                            "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>";

/* A JSON string's text, or "" for anything else. */
static const char *js(const json_t *v) { return json_is_string(v) ? json_string_value(v) : ""; }

static void on_delta(void *ctx, const lilac_delta *d) { srv_anth_delta(ctx, d); }

static json_t *tools(void) {
    return json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", "
                      "\"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {\"type\": \"number\"}}}}},"
                      "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                      "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}]",
                      0, NULL);
}

/* Runs OUTPUT through a job in pieces of `piece` bytes; returns the body
 * (malloc'd) and, when streaming, the SSE text in *sse. */
static char *run(srv_ctx *srv, int piece, int stream, char **sse) {
    srv_job *j = srv_job_new(srv, SRV_CHAT);
    j->api = SRV_API_ANTHROPIC;
    j->stream = stream;
    j->blocks = json_array();
    snprintf(j->id, sizeof j->id, "msg_test");
    json_t *t = tools();
    lilac_error e = {0};
    CHECK(lilac_parser_new(t, LILAC_PARSE_THINK_OPEN | LILAC_PARSE_TOOLS, 7, &j->parser, &e) == LILAC_OK, "%s", e.msg);
    json_decref(t);
    if (stream) srv_anth_stream_start(j);
    size_t n = strlen(OUTPUT);
    for (size_t off = 0; off < n; off += (size_t)piece) {
        size_t m = n - off < (size_t)piece ? n - off : (size_t)piece;
        lilac_parser_feed(j->parser, OUTPUT + off, m, on_delta, j, &e);
    }
    lilac_parser_finish(j->parser, on_delta, j, &e);
    j->why = LILAC_FINISH_EOS;
    j->n_prompt = 10, j->cached = 4, j->n_gen = 42;
    srv_anth_end(j);
    char *body = srv_anth_body(j);
    if (sse) *sse = strdup(j->sse.data ? j->sse.data : "");
    srv_job_release(j);
    return body;
}

static void test_body(void) {
    srv_ctx srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_name, sizeof srv.model_name, "tiny");
    char *first = run(&srv, 1, 0, NULL);
    json_t *b = json_loads(first, 0, NULL);
    REQUIRE(b, "body is JSON: %s", first);
    json_t *c = json_object_get(b, "content");
    CHECK(json_array_size(c) == 4, "4 blocks: %s", first);
    const char *types[] = {"thinking", "text", "tool_use", "tool_use"};
    for (size_t i = 0; i < 4; i++)
        CHECK(!strcmp(js(json_object_get(json_array_get(c, i), "type")), types[i]), "block %zu: %s", i,
              first);
    CHECK(!strcmp(js(json_object_get(json_array_get(c, 0), "thinking")), "Let me add."), "%s", first);
    CHECK(!strcmp(js(json_object_get(json_array_get(c, 1), "text")), "Sure, adding."), "%s", first);
    json_t *t0 = json_array_get(c, 2), *t1 = json_array_get(c, 3);
    json_t *want0 = json_loads("{\"a\": 2, \"b\": 3.5}", 0, NULL), *want1 = json_loads("{\"city\": \"Oslo\"}", 0, NULL);
    CHECK(json_equal(json_object_get(t0, "input"), want0), "input of add: %s", first);
    CHECK(json_equal(json_object_get(t1, "input"), want1), "input of get_weather: %s", first);
    CHECK(!strcmp(js(json_object_get(t0, "name")), "add"), "%s", first);
    const char *id0 = json_string_value(json_object_get(t0, "id")), *id1 = json_string_value(json_object_get(t1, "id"));
    CHECK(id0 && id1 && !strncmp(id0, "toolu_", 6) && strlen(id0) == 30 && strcmp(id0, id1), "ids %s %s", id0, id1);
    CHECK(!strcmp(js(json_object_get(b, "stop_reason")), "tool_use"), "%s", first);
    json_t *u = json_object_get(b, "usage");
    CHECK(json_integer_value(json_object_get(u, "input_tokens")) == 6 &&
              json_integer_value(json_object_get(u, "cache_read_input_tokens")) == 4 &&
              json_integer_value(json_object_get(u, "output_tokens")) == 42,
          "usage %s", first);
    for (int piece = 2; piece <= 7; piece++) {
        char *other = run(&srv, piece, 0, NULL);
        json_t *o = json_loads(other, 0, NULL);
        CHECK(json_equal(o, b), "pieces of %d bytes give %s, not %s", piece, other, first);
        json_decref(o);
        free(other);
    }
    json_decref(want0);
    json_decref(want1);
    json_decref(b);
    free(first);
}

/* The events of the stream, checked against the grammar, assembled into
 * blocks that must equal the body's. */
static void test_stream(void) {
    srv_ctx srv;
    memset(&srv, 0, sizeof srv);
    snprintf(srv.model_name, sizeof srv.model_name, "tiny");
    for (int piece = 1; piece <= 7; piece += 3) {
        char *sse = NULL;
        char *body = run(&srv, piece, 1, &sse);
        json_t *blocks = json_array(), *open = NULL;
        lilac_buf args = LILAC_BUF_INIT;
        int k = 0, ok = 1, index = 0;
        const char *order_head[] = {"message_start", "ping"};
        char *save = NULL;
        char *last2[2] = {NULL, NULL};
        for (char *fr = strtok_r(sse, "\n", &save); fr; fr = strtok_r(NULL, "\n", &save), k++) {
            /* lines alternate: "event: NAME", "data: JSON" */
            if (strncmp(fr, "event: ", 7)) {
                ok = 0;
                break;
            }
            char *name = fr + 7, *data = strtok_r(NULL, "\n", &save);
            if (!data || strncmp(data, "data: ", 6)) {
                ok = 0;
                break;
            }
            json_t *ev = json_loads(data + 6, 0, NULL);
            CHECK(ev && !strcmp(js(json_object_get(ev, "type")), name), "event %s: %s", name, data);
            if (k < 2) CHECK(!strcmp(name, order_head[k]), "event %d is %s", k, name);
            if (!strcmp(name, "content_block_start")) {
                CHECK(!open && json_integer_value(json_object_get(ev, "index")) == index, "start at %d", index);
                open = json_deep_copy(json_object_get(ev, "content_block"));
                lilac_buf_clear(&args);
            } else if (!strcmp(name, "content_block_delta")) {
                json_t *d = json_object_get(ev, "delta");
                const char *dt = js(json_object_get(d, "type"));
                const char *bt = js(json_object_get(open, "type"));
                CHECK(open && json_integer_value(json_object_get(ev, "index")) == index, "delta at %d", index);
                if (!strcmp(dt, "input_json_delta")) {
                    CHECK(!strcmp(bt, "tool_use"), "input_json_delta in a %s block", bt);
                    lilac_buf_puts(&args, js(json_object_get(d, "partial_json")));
                } else {
                    const char *key = !strcmp(dt, "thinking_delta") ? "thinking" : "text";
                    CHECK(!strcmp(bt, key), "%s in a %s block", dt, bt);
                    lilac_buf b2 = LILAC_BUF_INIT;
                    lilac_buf_puts(&b2, js(json_object_get(open, key)));
                    lilac_buf_puts(&b2, js(json_object_get(d, key)));
                    json_object_set_new(open, key, json_string(b2.data));
                    lilac_buf_free(&b2);
                }
            } else if (!strcmp(name, "content_block_stop")) {
                CHECK(open && json_integer_value(json_object_get(ev, "index")) == index, "stop at %d", index);
                if (open && !strcmp(js(json_object_get(open, "type")), "tool_use"))
                    json_object_set_new(open, "input", json_loads(args.data ? args.data : "", 0, NULL));
                json_array_append_new(blocks, open);
                open = NULL;
                index++;
            }
            free(last2[0]);
            last2[0] = last2[1];
            last2[1] = strdup(name);
            json_decref(ev);
        }
        CHECK(ok, "SSE framing (pieces %d): %s", piece, sse);
        CHECK(last2[0] && last2[1] && !strcmp(last2[0], "message_delta") && !strcmp(last2[1], "message_stop"),
              "ends with message_delta, message_stop");
        json_t *b = json_loads(body, 0, NULL);
        CHECK(json_equal(blocks, json_object_get(b, "content")), "stream blocks == body blocks (pieces %d)\n%s\n%s", piece,
              json_dumps(blocks, JSON_COMPACT), body);
        json_decref(b);
        json_decref(blocks);
        json_decref(open);
        lilac_buf_free(&args);
        free(last2[0]);
        free(last2[1]);
        free(sse);
        free(body);
    }
}

static void test_errors(void) {
    srv_err e;
    const struct {
        int status;
        const char *type;
    } cases[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {404, "not_found_error"},
                 {413, "request_too_large"},     {429, "rate_limit_error"},     {500, "api_error"},
                 {503, "overloaded_error"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        srv_errf(&e, cases[i].status, "x", "what: %d", cases[i].status);
        char *s = srv_anth_error(&e);
        json_t *o = json_loads(s, 0, NULL);
        CHECK(o && json_object_size(o) == 2 && !strcmp(js(json_object_get(o, "type")), "error"), "%s", s);
        json_t *er = json_object_get(o, "error");
        CHECK(!strcmp(js(json_object_get(er, "type")), cases[i].type), "%d: %s", cases[i].status, s);
        CHECK(!strncmp(js(json_object_get(er, "message")), "what: ", 6), "%s", s);
        json_decref(o);
        free(s);
    }
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_body);
    RUN(test_stream);
    RUN(test_errors);
    return check_done("anthropic");
}
