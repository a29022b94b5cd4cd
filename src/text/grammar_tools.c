/* grammar_tools.c — tool calls in Qwen3.6's XML format as a grammar, each
 * call exactly as the chat template writes one back:
 *
 *   <tool_call>\n<function=NAME>\n
 *   <parameter=KEY>\nVALUE\n</parameter>\n      (per parameter, schema order)
 *   </function>\n</tool_call>
 *
 * with "\n" between parallel calls.  <tool_call> and </tool_call> are the
 * added tokens themselves when the vocabulary has them.  Required
 * parameters always appear, optional ones may.  A VALUE is what the output
 * parser (text/parse.h) turns into the argument the schema asks for:
 *   - the parser reads a parameter as a raw string when the property's
 *     schema says only "string": then VALUE is raw text (no quotes, no
 *     escapes, never "</parameter>") of the string part of the schema (its
 *     enum, const or format);
 *   - otherwise the parser keeps JSON text of an allowed non-string type, and
 *     falls back to the raw text: VALUE is JSON of the schema's non-string
 *     part, or (when strings are allowed) raw text that cannot read as JSON
 *     of those types (it does not start with a blank or a character that
 *     starts one: digits and '-', '[', '{', t/f/n in either case).
 * A property with $ref or no type is "no type information" to the parser
 * (JSON when it parses, raw text otherwise) and is written the same way. */
#include <stdio.h>
#include <string.h>

#include "text/grammar_impl.h"
#include "text/grammar_json.h"
#include "text/parse_schema.h"

#define ALL_TYPES 127u

static void starts(lg_class *c, unsigned json_types) {
    lg_class_clear(c);
    lg_class_add(c, ' ', ' ');
    lg_class_add(c, '\t', '\t');
    lg_class_add(c, '\n', '\n');
    lg_class_add(c, '\r', '\r');
    if (json_types & (LILAC_PT_INTEGER | LILAC_PT_NUMBER)) lg_class_add(c, '0', '9'), lg_class_add(c, '-', '-');
    if (json_types & LILAC_PT_ARRAY) lg_class_add(c, '[', '[');
    if (json_types & LILAC_PT_OBJECT) lg_class_add(c, '{', '{');
    if (json_types & LILAC_PT_BOOLEAN) lg_class_add(c, 't', 't'), lg_class_add(c, 'T', 'T'), lg_class_add(c, 'f', 'f'),
        lg_class_add(c, 'F', 'F');
    if (json_types & LILAC_PT_NULL) lg_class_add(c, 'n', 'n'), lg_class_add(c, 'N', 'N');
}

/* The VALUE of one parameter (schema s inside root), -2 when none can be written. */
static int param_value(lg_grammar *g, const json_t *root, const json_t *s, const char *where, const char *path,
                       lilac_error *e) {
    unsigned T = lilac_parse_schema_types(s);
    unsigned J = T == 0 ? ALL_TYPES & ~(unsigned)LILAC_PT_STRING : T & ~(unsigned)LILAC_PT_STRING;
    if (J & LILAC_PT_NUMBER) J |= LILAC_PT_INTEGER;
    int raw_ok = T == 0 || (T & LILAC_PT_STRING);
    int r = lg_rule(g, "pvalue"), any = 0;
    if (T != LILAC_PT_STRING && J) {
        lg_filter f = {J, 0, {{0}, 0}};
        int v = lg_schema_rule(g, root, s, &f, where, path, e);
        if (v == -1) return -1;
        if (v >= 0) lg_alt_rule(g, r, v), any = 1;
    }
    if (raw_ok) {
        lg_filter f = {LILAC_PT_STRING, 1, {{0}, 0}};
        if (T != LILAC_PT_STRING) starts(&f.no_first, J);
        int v = lg_schema_rule(g, root, s, &f, where, path, e);
        if (v == -1) return -1;
        if (v >= 0) lg_alt_rule(g, r, v), any = 1;
    }
    return any ? r : -2;
}

static int bad_name(const char *s, const char *bad) {
    size_t n = strlen(s);
    if (n == 0 || n > 256) return 1;
    for (size_t i = 0; i < n; i++)
        if (strchr(bad, s[i]) || s[i] == '>') return 1;
    return 0;
}

/* One call of tool fn (the "function" object), index i in tools. */
static int one_call(lg_grammar *g, const json_t *fn, size_t i, const lg_tokens *tk, const char *where, lilac_error *e) {
    char w[200], path[64];
    const char *name = json_string_value(json_object_get(fn, "name"));
    snprintf(w, sizeof w, "%s[%zu].function.parameters", where, i);
    if (!name || bad_name(name, " \t\r\n<"))
        return lilac_fail(e, LILAC_EINVAL, "%s[%zu].function.name cannot be written in a tool call (empty, over 256 "
                                           "bytes, or with blanks, '<' or '>')", where, i), -1;
    const json_t *params = json_object_get(fn, "parameters");
    const json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    if (params && !json_is_object(params)) return lilac_fail(e, LILAC_EINVAL, "%s must be an object", w), -1;
    if (props && !json_is_object(props)) return lilac_fail(e, LILAC_EINVAL, "%s.properties must be an object", w), -1;
    if (req && !json_is_array(req)) return lilac_fail(e, LILAC_EINVAL, "%s.required must be an array", w), -1;
    /* the parameters: declared ones in order, then required ones not declared */
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0, n = 0;
    int kv[512];
    uint8_t must[512];
    if (np + nr > 512) return lilac_fail(e, LILAC_EINVAL, "%s: more than 512 parameters", w), -1;
    const char *keys[512];
    const json_t *schemas[512];
    size_t nk = 0;
    const char *key;
    json_t *ps;
    json_object_foreach((json_t *)props, key, ps) keys[nk] = key, schemas[nk++] = ps;
    for (size_t x = 0; x < nr; x++) {
        const json_t *rk = json_array_get(req, x);
        if (!json_is_string(rk)) return lilac_fail(e, LILAC_EINVAL, "%s.required must hold strings", w), -1;
        if (props && json_object_get(props, json_string_value(rk))) continue;
        keys[nk] = json_string_value(rk), schemas[nk++] = NULL; /* required, not declared: any value */
    }
    for (size_t k = 0; k < nk; k++) {
        const json_t *s = schemas[k] ? schemas[k] : json_true();
        key = keys[k];
        int required = 0;
        for (size_t x = 0; x < nr; x++) required |= !strcmp(json_string_value(json_array_get(req, x)), key);
        if (bad_name(key, "<\n"))
            return lilac_fail(e, LILAC_EINVAL, "%s: the parameter name '%.64s' cannot be written in a tool call (empty, "
                                               "over 256 bytes, or with a newline, '<' or '>')", w, key), -1;
        snprintf(path, sizeof path, "#/properties/%.40s", key);
        int v = param_value(g, params, s, w, schemas[k] ? path : "#", e);
        if (v == -1) return -1;
        if (v == -2) {
            if (required) return lilac_fail(e, LILAC_EINVAL, "%s: the required parameter '%.64s' admits no value", w, key), -1;
            continue;
        }
        kv[n] = lg_rule(g, "param");
        lg_seq q = {0};
        lg_seq_str(g, &q, "<parameter=");
        lg_seq_str(g, &q, key);
        lg_seq_str(g, &q, ">\n");
        lg_seq_rule(g, &q, v);
        lg_seq_str(g, &q, "\n</parameter>\n");
        lg_alt(g, kv[n], &q);
        lg_seq_free(&q);
        must[n++] = (uint8_t)required;
    }
    /* P(k) ::= kv_k P(k+1) | P(k+1) [optional]; P(n) ::= "" */
    int next = lg_rule(g, "params");
    lg_alt_empty(g, next);
    for (size_t k = n; k-- > 0;) {
        int p = lg_rule(g, "params");
        lg_seq q = {0};
        lg_seq_rule(g, &q, kv[k]);
        lg_seq_rule(g, &q, next);
        lg_alt(g, p, &q);
        lg_seq_free(&q);
        if (!must[k]) lg_alt_rule(g, p, next);
        next = p;
    }
    int r = lg_rule(g, "call");
    lg_seq q = {0};
    if (tk && tk->tool_call_open >= 0) lg_seq_token(g, &q, tk->tool_call_open);
    else lg_seq_str(g, &q, "<tool_call>");
    lg_seq_str(g, &q, "\n<function=");
    lg_seq_str(g, &q, name);
    lg_seq_str(g, &q, ">\n");
    lg_seq_rule(g, &q, next);
    lg_seq_str(g, &q, "</function>\n");
    if (tk && tk->tool_call_close >= 0) lg_seq_token(g, &q, tk->tool_call_close);
    else lg_seq_str(g, &q, "</tool_call>");
    lg_alt(g, r, &q);
    lg_seq_free(&q);
    return r;
}

int lg_tool_calls(lg_grammar *g, const json_t *tools, int parallel, const lg_tokens *tk, const char *where,
                  lilac_error *e) {
    if (!json_is_array(tools) || json_array_size(tools) == 0)
        return lilac_fail(e, LILAC_EINVAL, "%s: no tools to call", where), -1;
    int call = lg_rule(g, "anycall");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) fn = t;
        int c = one_call(g, fn, i, tk, where, e);
        if (c < 0) return -1;
        lg_alt_rule(g, call, c);
    }
    if (!parallel) return call;
    int calls = lg_rule(g, "calls");
    lg_alt_rule(g, calls, call);
    lg_seq q = {0};
    lg_seq_rule(g, &q, call);
    lg_seq_str(g, &q, "\n");
    lg_seq_rule(g, &q, calls);
    lg_alt(g, calls, &q);
    lg_seq_free(&q);
    return calls;
}
