/* chat_req.c — request-shape checks and the flat view for the chat renderer
 * (see chat_req.h).
 *
 * Choices where the Jinja template would do something nonsensical with input
 * that real clients never send; each is a request error here instead:
 *  - a content-list item that is not an object: Jinja would run substring
 *    tests ('image' in "some text") on a string and fail with a TypeError on
 *    numbers;
 *  - a text part whose "text" is not a string: Jinja would print Python's
 *    str() of it ("None", "True", "{'a': 1}");
 *  - `tools` that is neither an array nor null: Jinja would iterate a string
 *    character by character and silently skip an object or a number;
 *  - assistant `tool_calls` that is neither an array nor null: same reason;
 *  - a tool call that is not an object, a `function` that is not an object,
 *    a name that is missing or not a string, `arguments` that is null, not
 *    an object, or a string that is not a JSON object: Jinja fails with an
 *    UndefinedError/TypeError (or renders `<function=` + a number);
 *  - a top-level add_generation_prompt that is not a boolean (the OpenAI
 *    schema, and vLLM's pydantic model, say boolean).
 * Non-string reasoning_content is not an error: the template ignores it and
 * falls back to reasoning written inline in the content. */
#include "text/chat_req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* Python truthiness of a JSON value, which is what a Jinja `{% if x %}` tests. */
static int truthy(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return json_object_size(v) > 0;
    case JSON_ARRAY: return json_array_size(v) > 0;
    case JSON_STRING: return json_string_length(v) > 0;
    case JSON_INTEGER: return json_integer_value(v) != 0;
    case JSON_REAL: return json_real_value(v) != 0.0;
    case JSON_TRUE: return 1;
    case JSON_FALSE:
    case JSON_NULL: return 0;
    }
    return 0;
}

static int str_is(const json_t *s, const char *lit) {
    size_t n = strlen(lit);
    return json_is_string(s) && json_string_length(s) == n && memcmp(json_string_value(s), lit, n) == 0;
}

lilac_chat_part lilac_chat_part_kind(const json_t *item) {
    const json_t *type = json_object_get(item, "type");
    if (json_object_get(item, "image") || json_object_get(item, "image_url") || str_is(type, "image"))
        return LILAC_CHAT_PART_IMAGE;
    if (json_object_get(item, "video") || str_is(type, "video")) return LILAC_CHAT_PART_VIDEO;
    if (json_object_get(item, "text")) return LILAC_CHAT_PART_TEXT;
    return LILAC_CHAT_PART_UNKNOWN;
}

static lilac_status check_content(const json_t *content, size_t mi, lilac_error *e) {
    if (!json_is_array(content)) return LILAC_OK; /* other types: the template decides */
    for (size_t k = 0; k < json_array_size(content); k++) {
        const json_t *item = json_array_get(content, k);
        if (!json_is_object(item))
            return lilac_fail(e, LILAC_CHAT_EREQUEST,
                              "messages[%zu].content[%zu]: a content part must be an object (got %s)", mi,
                              k, type_name(item));
        if (lilac_chat_part_kind(item) == LILAC_CHAT_PART_TEXT) {
            const json_t *text = json_object_get(item, "text");
            if (!json_is_string(text))
                return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages[%zu].content[%zu].text: must be a string (got %s)",
                                  mi, k, type_name(text));
        }
    }
    return LILAC_OK;
}

lilac_status lilac_chat_check_text_only(const json_t *request, char *where, size_t cap, lilac_error *e) {
    if (where && cap) where[0] = 0;
    const json_t *msgs = json_object_get(request, "messages");
    for (size_t mi = 0; mi < json_array_size(msgs); mi++) {
        const json_t *content = json_object_get(json_array_get(msgs, mi), "content");
        for (size_t k = 0; k < json_array_size(content); k++) {
            const json_t *item = json_array_get(content, k);
            if (!json_is_object(item)) continue; /* a shape error: lilac_chat_render names it */
            const json_t *type = json_object_get(item, "type");
            lilac_chat_part kind = lilac_chat_part_kind(item);
            if (kind == LILAC_CHAT_PART_TEXT && (!type || str_is(type, "text"))) continue;
            if (where && cap) snprintf(where, cap, "messages[%zu].content[%zu].type", mi, k);
            const char *what = kind == LILAC_CHAT_PART_IMAGE   ? "an image"
                               : kind == LILAC_CHAT_PART_VIDEO ? "a video"
                                                               : "a non-text part";
            if (json_is_string(type))
                return lilac_fail(e, LILAC_CHAT_EREQUEST,
                                  "messages[%zu].content[%zu].type: '%.40s' parts are not supported: lilac serves "
                                  "the text model only (no vision or audio input); send text parts",
                                  mi, k, json_string_value(type));
            return lilac_fail(e, LILAC_CHAT_EREQUEST,
                              "messages[%zu].content[%zu].type: %s is not supported: lilac serves the text model "
                              "only (no vision or audio input); send text parts",
                              mi, k, what);
        }
    }
    return LILAC_OK;
}

/* One entry of an assistant's tool_calls: {"function": {name, arguments}}
 * or a bare {name, arguments}, as the template accepts both. */
static lilac_status parse_call(const json_t *tc, size_t mi, size_t ci, lilac_chat_call *call, lilac_error *e) {
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", mi, ci);
    if (!json_is_object(tc))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s: must be an object (got %s)", where, type_name(tc));
    const json_t *fn = json_object_get(tc, "function");
    if (fn) { /* `tool_call.function is defined` holds even for null */
        if (!json_is_object(fn))
            return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.function: must be an object (got %s)", where, type_name(fn));
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].function", mi, ci);
    } else {
        fn = tc;
    }
    const json_t *name = json_object_get(fn, "name");
    if (!name) return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.name: missing", where);
    if (!json_is_string(name))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.name: must be a string (got %s)", where, type_name(name));
    call->name.p = json_string_value(name);
    call->name.n = json_string_length(name);

    json_t *args = json_object_get(fn, "arguments");
    if (!args) return LILAC_OK; /* `arguments is defined` is false: no parameters */
    if (json_is_string(args)) {
        /* OpenAI clients send a JSON string; vLLM json.loads it before the
         * template sees it.  jansson keeps key order (and, like Python, a
         * repeated key keeps its first position with the last value). */
        json_error_t jerr;
        json_t *parsed = json_loadb(json_string_value(args), json_string_length(args),
                                    JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        if (!parsed)
            return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.arguments: not valid JSON: %s (at byte %d)", where,
                              jerr.text, jerr.position);
        if (!json_is_object(parsed)) {
            const char *t = type_name(parsed);
            json_decref(parsed);
            return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.arguments: must be a JSON object (got %s)", where, t);
        }
        call->args = parsed;
        return LILAC_OK;
    }
    if (!json_is_object(args))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "%s.arguments: must be an object or a JSON string (got %s)",
                          where, type_name(args));
    call->args = json_incref(args);
    return LILAC_OK;
}

static lilac_status parse_message(const json_t *m, size_t mi, lilac_chat_msg *msg, lilac_error *e) {
    if (!json_is_object(m))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages[%zu]: must be an object (got %s)", mi, type_name(m));
    const json_t *role = json_object_get(m, "role");
    if (!role) return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages[%zu].role: missing", mi);
    if (!json_is_string(role))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages[%zu].role: must be a string (got %s)", mi,
                          type_name(role));
    msg->role = str_is(role, "system")      ? LILAC_CHAT_SYSTEM
                : str_is(role, "user")      ? LILAC_CHAT_USER
                : str_is(role, "assistant") ? LILAC_CHAT_ASSISTANT
                : str_is(role, "tool")      ? LILAC_CHAT_TOOL
                                            : LILAC_CHAT_OTHER;
    msg->content = json_object_get(m, "content");
    lilac_status st = check_content(msg->content, mi, e);
    if (st) return st;
    if (msg->role != LILAC_CHAT_ASSISTANT) return LILAC_OK; /* only assistant turns read the rest */

    const json_t *rc = json_object_get(m, "reasoning_content");
    msg->reasoning = json_is_string(rc) ? rc : NULL;
    const json_t *calls = json_object_get(m, "tool_calls");
    if (!calls || json_is_null(calls)) return LILAC_OK;
    if (!json_is_array(calls))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages[%zu].tool_calls: must be an array or null (got %s)", mi,
                          type_name(calls));
    size_t n = json_array_size(calls);
    if (!n) return LILAC_OK;
    msg->calls = calloc(n, sizeof *msg->calls);
    if (!msg->calls) return lilac_fail(e, LILAC_ENOMEM, "out of memory for %zu tool calls", n);
    msg->n_calls = n;
    for (size_t ci = 0; ci < n; ci++) {
        st = parse_call(json_array_get(calls, ci), mi, ci, &msg->calls[ci], e);
        if (st) return st;
    }
    return LILAC_OK;
}

static lilac_status parse_options(const json_t *req, lilac_chat_req *r, lilac_error *e) {
    const json_t *tools = json_object_get(req, "tools");
    if (tools && !json_is_null(tools) && !json_is_array(tools))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "tools: must be an array or null (got %s)", type_name(tools));
    r->tools = json_array_size(tools) > 0 ? tools : NULL;

    const json_t *agp = json_object_get(req, "add_generation_prompt");
    if (agp && !json_is_boolean(agp))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "add_generation_prompt: must be a boolean (got %s)",
                          type_name(agp));
    r->add_generation_prompt = agp ? json_is_true(agp) : 1;

    const json_t *kw = json_object_get(req, "chat_template_kwargs");
    if (!kw || json_is_null(kw)) return LILAC_OK;
    if (!json_is_object(kw))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "chat_template_kwargs: must be an object (got %s)", type_name(kw));
    if (json_object_get(kw, "messages") || json_object_get(kw, "tools"))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "chat_template_kwargs.%s: not accepted; give it at the top level",
                          json_object_get(kw, "messages") ? "messages" : "tools");
    const json_t *v;
    if ((v = json_object_get(kw, "add_generation_prompt"))) r->add_generation_prompt = truthy(v);
    r->thinking_off = json_is_false(json_object_get(kw, "enable_thinking"));
    r->preserve_thinking = json_is_true(json_object_get(kw, "preserve_thinking"));
    r->add_vision_id = (v = json_object_get(kw, "add_vision_id")) ? truthy(v) : 0;
    return LILAC_OK;
}

lilac_status lilac_chat_req_parse(const json_t *request, lilac_chat_req *r, lilac_error *e) {
    memset(r, 0, sizeof *r);
    if (!json_is_object(request))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "request: must be a JSON object (got %s)",
                          request ? type_name(request) : "nothing");
    const json_t *msgs = json_object_get(request, "messages");
    if (!msgs) return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages: missing");
    if (!json_is_array(msgs))
        return lilac_fail(e, LILAC_CHAT_EREQUEST, "messages: must be an array (got %s)", type_name(msgs));
    lilac_status st = parse_options(request, r, e);
    if (st) return st;
    size_t n = json_array_size(msgs);
    if (n) {
        r->msgs = calloc(n, sizeof *r->msgs);
        if (!r->msgs) return lilac_fail(e, LILAC_ENOMEM, "out of memory for %zu messages", n);
    }
    r->n_msgs = n;
    for (size_t i = 0; i < n; i++) {
        st = parse_message(json_array_get(msgs, i), i, &r->msgs[i], e);
        if (st) return st;
    }
    return LILAC_OK;
}

void lilac_chat_req_free(lilac_chat_req *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_msgs; i++) {
        for (size_t c = 0; c < r->msgs[i].n_calls; c++) json_decref(r->msgs[i].calls[c].args);
        free(r->msgs[i].calls);
    }
    free(r->msgs);
    memset(r, 0, sizeof *r);
}
