/* grammar_req.c — a request's constrained decoding: response_format
 * (json_object, json_schema) and tool_choice (required, a named function)
 * compiled into one grammar per request, handed to the engine as the job's
 * constraint.  Runs on HTTP threads; the grammar's token classifications are
 * then made on the engine thread as generation reaches them.
 *
 * What the answer (the text after </think>, when thinking is on; the
 * reasoning itself is free) may be:
 *   tool_choice required / named      one or more <tool_call> blocks (one
 *                                     with parallel_tool_calls: false) of
 *                                     the allowed tools, whose parameters
 *                                     satisfy each tool's schema; a
 *                                     response_format does not apply then
 *   response_format json_object       a JSON object
 *   response_format json_schema       JSON valid under the schema
 *     ... with tools and tool_choice auto: that JSON, or tool calls
 * then an end token.  "strict" is accepted either way: lilac always writes
 * what the schema allows (it does not relax it, nor demand OpenAI's strict
 * subset). */
#include <stdio.h>
#include <string.h>

#include "server/server.h"

int srv_check_response_format(json_t *rf, srv_err *err) {
    const char *t = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !t) return srv_errf(err, 400, "response_format", "'response_format' must be {\"type\": ...}");
    if (!strcmp(t, "text") || !strcmp(t, "json_object")) return 0;
    if (strcmp(t, "json_schema"))
        return srv_errf(err, 400, "response_format",
                        "response_format \"%s\" is not supported (\"text\", \"json_object\" or \"json_schema\")", t);
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js))
        return srv_errf(err, 400, "response_format", "'response_format.json_schema' must be an object with a 'schema'");
    json_t *name = json_object_get(js, "name"), *strict = json_object_get(js, "strict"), *sc = json_object_get(js, "schema");
    if (name && !json_is_string(name)) return srv_errf(err, 400, "response_format", "'response_format.json_schema.name' must be a string");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict))
        return srv_errf(err, 400, "response_format", "'response_format.json_schema.strict' must be a boolean");
    if (!sc || (!json_is_object(sc) && !json_is_boolean(sc)))
        return srv_errf(err, 400, "response_format", "'response_format.json_schema.schema' must be a JSON Schema (an object)");
    return 0;
}

/* The value the format asks for, or -1 with e set; *none when the format is "text". */
static int format_rule(lg_grammar *g, const json_t *rf, lilac_error *e) {
    const char *t = json_string_value(json_object_get(rf, "type"));
    if (!strcmp(t, "json_object")) return lg_json_object_any(g);
    const json_t *sc = json_object_get(json_object_get(rf, "json_schema"), "schema");
    return lg_json_schema(g, sc, "response_format.json_schema.schema", e);
}

int srv_req_grammar(const srv_ctx *srv, const srv_grammar_req *r, srv_job *j, srv_err *err) {
    const char *ft = r->format ? json_string_value(json_object_get(r->format, "type")) : NULL;
    int want_format = ft && strcmp(ft, "text") != 0;
    if (!want_format && !r->calls) return 0;
    if (!srv->gvocab) return srv_errf(err, 500, NULL, "constrained decoding is not available");
    lg_grammar *g = lg_new();
    if (!g) return srv_errf(err, 500, NULL, "out of memory");
    lilac_error e = {0};
    lg_tokens tk = {srv->tool_call_open, srv->tool_call_close};
    int value = -1;
    const char *param = "response_format";
    if (r->calls) {
        param = "tools";
        value = lg_tool_calls(g, r->calls, r->parallel, &tk, "tools", &e);
    } else {
        value = format_rule(g, r->format, &e);
        if (value >= 0 && r->tools) { /* tool_choice auto: a call is still an answer */
            int calls = lg_tool_calls(g, r->tools, r->parallel, &tk, "tools", &e);
            if (calls < 0) {
                value = -1;
                param = "tools";
            } else {
                int either = lg_rule(g, "answer");
                lg_alt_rule(g, either, value);
                lg_alt_rule(g, either, calls);
                value = either;
            }
        }
    }
    lilac_status st = value < 0 ? (e.code ? e.code : LILAC_ENOMEM) : LILAC_OK;
    /* after </think> the model writes "\n\n" (so does the reasoning budget's close) */
    if (!st && (st = lg_finalize(g, r->think_open ? lg_answer_root(g, value) : value, &e)))
        lilac_fail_prefix(&e, "%s", r->calls || r->tools ? "tools / response_format" : "response_format.json_schema.schema");
    if (st) {
        lg_free(g);
        if (st == LILAC_ENOMEM) return srv_errf(err, 500, NULL, "out of memory compiling the grammar");
        return srv_errf(err, 400, param, "%s", e.msg);
    }
    if (lg_constraint_new(g, srv->gvocab, srv->end_ids, srv->n_end_ids, r->think_open, srv->think_close, &j->constraint, &e))
        return srv_errf(err, 500, NULL, "out of memory starting the grammar");
    j->gen.constraint = lg_constraint_get(j->constraint);
    return 0;
}
