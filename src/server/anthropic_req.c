/* anthropic_req.c — reading an Anthropic Messages body (POST /v1/messages,
 * POST /v1/messages/count_tokens) into a job.  Runs on HTTP threads.
 *
 * The body is checked here in Anthropic's terms (errors name the field as
 * "messages.2.content.0.type"), then mapped to the OpenAI chat-completions
 * request it means and handed to srv_req_chat: the template, tokenization,
 * prefix-cache split points, sampling and the output parser are the chat
 * endpoint's, so the same conversation renders the same prompt tokens on both
 * routes.  The mapping:
 *   system (string or text blocks)    -> a system message (text parts)
 *   user text blocks                  -> a user message (text parts)
 *   user tool_result blocks           -> tool messages, in place (content:
 *                                        the string, or its text blocks joined)
 *   assistant text / thinking blocks  -> content (text parts) / reasoning_content
 *   assistant tool_use blocks         -> tool_calls with the input object
 *   tools [{name, description, input_schema}] -> function tools (parameters = input_schema)
 *   tool_choice auto/any/tool/none    -> "auto" / "required" / the named function / "none"
 *   thinking enabled, adaptive / disabled -> chat_template_kwargs.enable_thinking true / false
 *                                        (omitted: the template's default, thinking on);
 *                                        enabled's budget_tokens -> thinking_budget (enforced)
 *   stop_sequences -> stop; max_tokens, temperature, top_p, top_k, stream as they are;
 *   seed (not Anthropic's; the chat endpoint's) as it is.
 * Decisions: metadata, service_tier and other unknown fields are ignored;
 * image and document blocks, server tools and a final assistant message
 * (prefill) are refused; tool_choice any/tool constrain the output to tool
 * calls (as "required" / a named function do on the chat endpoint), and
 * disable_parallel_tool_use: true makes that one call (parallel_tool_calls
 * false). */
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "server/server.h"

static json_t *field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

static int bad(srv_err *err, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(srv_err *err, const char *param, const char *fmt, ...) {
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_errf(err, 400, param, "%s", msg);
}

static int is(json_t *s, const char *lit) { return json_is_string(s) && strcmp(json_string_value(s), lit) == 0; }

/* Text blocks (or a string) -> OpenAI text parts, appended to parts.  where
 * names the value for errors. */
static int text_parts(json_t *v, const char *where, json_t *parts, srv_err *err) {
    if (json_is_string(v)) {
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", v));
        return 0;
    }
    if (!json_is_array(v)) return bad(err, "system", "'%s' must be a string or an array of text blocks", where);
    size_t i;
    json_t *b;
    json_array_foreach(v, i, b) {
        json_t *t = json_object_get(b, "text");
        if (!json_is_object(b) || !is(json_object_get(b, "type"), "text") || !json_is_string(t)) {
            char w[96];
            snprintf(w, sizeof w, "%s.%zu", where, i);
            return bad(err, where, "'%s' must be a text block {\"type\": \"text\", \"text\": \"...\"}", w);
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", t));
    }
    return 0;
}

/* A tool_result's content -> one string (text blocks joined). */
static int tool_result_text(json_t *c, const char *where, lilac_buf *out, srv_err *err) {
    if (!c) return 0;
    if (json_is_string(c)) {
        lilac_buf_append(out, json_string_value(c), json_string_length(c));
        return 0;
    }
    if (!json_is_array(c)) return bad(err, "messages", "'%s.content' must be a string or an array of text blocks", where);
    size_t i;
    json_t *b;
    json_array_foreach(c, i, b) {
        json_t *t = json_object_get(b, "text");
        if (!json_is_object(b) || !json_is_string(t)) {
            char w[128];
            snprintf(w, sizeof w, "%s.content.%zu", where, i);
            return bad(err, "messages", "'%s' must be a text block (images in tool results are not supported)", w);
        }
        lilac_buf_append(out, json_string_value(t), json_string_length(t));
    }
    return 0;
}

static int user_message(json_t *content, size_t mi, json_t *out, srv_err *err) {
    char where[64];
    snprintf(where, sizeof where, "messages.%zu.content", mi);
    if (json_is_string(content)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "user", "content", content));
        return 0;
    }
    json_t *parts = NULL; /* the run of text blocks being collected */
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        char w[96];
        snprintf(w, sizeof w, "%s.%zu", where, i);
        json_t *ty = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(ty)) {
            json_decref(parts);
            return bad(err, "messages", "'%s' must be a content block with a \"type\"", w);
        }
        if (is(ty, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) {
                json_decref(parts);
                return bad(err, "messages", "'%s.text' must be a string", w);
            }
            if (!parts) parts = json_array();
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", t));
        } else if (is(ty, "tool_result")) {
            if (parts) json_array_append_new(out, json_pack("{s:s, s:o}", "role", "user", "content", parts));
            parts = NULL;
            json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) return bad(err, "messages", "'%s.tool_use_id' must be a string", w);
            lilac_buf txt = LILAC_BUF_INIT;
            if (tool_result_text(field(b, "content"), w, &txt, err)) {
                lilac_buf_free(&txt);
                return err->status;
            }
            json_t *m = json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content",
                                  srv_json_str(txt.data, txt.len));
            lilac_buf_free(&txt);
            json_array_append_new(out, m);
        } else {
            json_decref(parts);
            return bad(err, "messages", "'%s': %s blocks are not supported in user messages (text and tool_result are)",
                       w, json_string_value(ty));
        }
    }
    if (parts) json_array_append_new(out, json_pack("{s:s, s:o}", "role", "user", "content", parts));
    return 0;
}

static int assistant_message(json_t *content, size_t mi, json_t *out, srv_err *err) {
    if (json_is_string(content)) {
        json_array_append_new(out, json_pack("{s:s, s:O}", "role", "assistant", "content", content));
        return 0;
    }
    json_t *parts = json_array(), *calls = json_array();
    lilac_buf reasoning = LILAC_BUF_INIT;
    int have_reasoning = 0, r = 0;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        char w[96];
        snprintf(w, sizeof w, "messages.%zu.content.%zu", mi, i);
        json_t *ty = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(ty)) {
            r = bad(err, "messages", "'%s' must be a content block with a \"type\"", w);
            break;
        }
        if (is(ty, "text")) {
            json_t *t = json_object_get(b, "text");
            if (!json_is_string(t)) {
                r = bad(err, "messages", "'%s.text' must be a string", w);
                break;
            }
            json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", t));
        } else if (is(ty, "thinking")) {
            json_t *t = json_object_get(b, "thinking");
            if (!json_is_string(t)) {
                r = bad(err, "messages", "'%s.thinking' must be a string", w);
                break;
            }
            lilac_buf_append(&reasoning, json_string_value(t), json_string_length(t));
            have_reasoning = 1;
        } else if (is(ty, "redacted_thinking")) {
            continue; /* opaque: nothing the template could show */
        } else if (is(ty, "tool_use")) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"), *input = json_object_get(b, "input");
            if (!json_is_string(id) || !json_is_string(name) || json_string_length(name) == 0 || !json_is_object(input)) {
                r = bad(err, "messages", "'%s': a tool_use block needs \"id\" and \"name\" strings and an \"input\" object", w);
                break;
            }
            json_array_append_new(calls, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", id, "type", "function", "function",
                                                   "name", name, "arguments", input));
        } else {
            r = bad(err, "messages", "'%s': %s blocks are not supported in assistant messages", w, json_string_value(ty));
            break;
        }
    }
    if (!r) {
        json_t *m = json_pack("{s:s}", "role", "assistant");
        json_object_set(m, "content", json_array_size(parts) ? parts : json_null());
        if (have_reasoning) json_object_set_new(m, "reasoning_content", srv_json_str(reasoning.data, reasoning.len));
        if (json_array_size(calls)) json_object_set(m, "tool_calls", calls);
        json_array_append_new(out, m);
    }
    json_decref(parts);
    json_decref(calls);
    lilac_buf_free(&reasoning);
    return r;
}

static int map_messages(json_t *body, json_t *out, srv_err *err) {
    json_t *msgs = field(body, "messages"), *sys = field(body, "system");
    if (!msgs) return srv_errf(err, 400, "messages", "'messages' is required");
    if (!json_is_array(msgs)) return srv_errf(err, 400, "messages", "'messages' must be an array");
    if (json_array_size(msgs) == 0) return srv_errf(err, 400, "messages", "'messages' must not be empty");
    if (sys) {
        json_t *parts = json_array();
        if (text_parts(sys, "system", parts, err)) {
            json_decref(parts);
            return err->status;
        }
        json_array_append_new(out, json_pack("{s:s, s:o}", "role", "system", "content", parts));
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char w[48];
        snprintf(w, sizeof w, "messages.%zu", i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_object(m)) return bad(err, "messages", "'%s' must be an object", w);
        if (!is(role, "user") && !is(role, "assistant"))
            return bad(err, "messages", "'%s.role' must be \"user\" or \"assistant\"", w);
        if (!json_is_string(content) && !json_is_array(content))
            return bad(err, "messages", "'%s.content' must be a string or an array of content blocks", w);
        int r = is(role, "user") ? user_message(content, i, out, err) : assistant_message(content, i, out, err);
        if (r) return r;
        if (i + 1 == json_array_size(msgs) && is(role, "assistant"))
            return bad(err, "messages",
                       "'%s': the last message is an assistant turn; continuing it (prefill) is not supported", w);
    }
    return 0;
}

static int map_tools(json_t *body, json_t *req, srv_err *err) {
    json_t *tools = field(body, "tools");
    if (tools && !json_is_array(tools)) return srv_errf(err, 400, "tools", "'tools' must be an array");
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) { /* none when tools is NULL */
        char w[32];
        snprintf(w, sizeof w, "tools.%zu", i);
        json_t *ty = field(t, "type"), *name = json_object_get(t, "name"), *desc = field(t, "description"),
               *schema = json_object_get(t, "input_schema");
        int r = 0;
        if (!json_is_object(t)) r = bad(err, "tools", "'%s' must be an object", w);
        else if (ty && !is(ty, "custom"))
            r = bad(err, "tools", "'%s': server tools (type %s) are not supported; give name, description and input_schema", w,
                    json_is_string(ty) ? json_string_value(ty) : "?");
        else if (!json_is_string(name) || json_string_length(name) == 0)
            r = bad(err, "tools", "'%s.name' must be a non-empty string", w);
        else if (!json_is_object(schema)) r = bad(err, "tools", "'%s.input_schema' must be an object", w);
        else if (desc && !json_is_string(desc)) r = bad(err, "tools", "'%s.description' must be a string", w);
        if (r) {
            json_decref(out);
            return r;
        }
        json_t *fn = json_pack("{s:O}", "name", name);
        if (desc) json_object_set(fn, "description", desc);
        json_object_set(fn, "parameters", schema);
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    if (tools) json_object_set_new(req, "tools", out);
    else json_decref(out);

    json_t *tc = field(body, "tool_choice");
    if (!tc) return 0;
    json_t *ty = json_object_get(tc, "type"), *dp = field(tc, "disable_parallel_tool_use");
    if (!json_is_object(tc) || !json_is_string(ty))
        return srv_errf(err, 400, "tool_choice", "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
    if (dp && !json_is_boolean(dp))
        return srv_errf(err, 400, "tool_choice", "'tool_choice.disable_parallel_tool_use' must be a boolean");
    const char *s = json_string_value(ty);
    if (json_is_true(dp)) json_object_set_new(req, "parallel_tool_calls", json_false());
    if (!strcmp(s, "auto")) json_object_set_new(req, "tool_choice", json_string("auto"));
    else if (!strcmp(s, "none")) json_object_set_new(req, "tool_choice", json_string("none"));
    else if (!strcmp(s, "any")) json_object_set_new(req, "tool_choice", json_string("required"));
    else if (!strcmp(s, "tool")) {
        json_t *name = json_object_get(tc, "name");
        if (!json_is_string(name)) return srv_errf(err, 400, "tool_choice", "tool_choice {\"type\": \"tool\"} needs a \"name\"");
        json_object_set_new(req, "tool_choice", json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name));
    } else {
        return srv_errf(err, 400, "tool_choice", "tool_choice type \"%s\" is not one of auto, any, tool, none", s);
    }
    return 0;
}

static int map_number(json_t *body, const char *key, double lo, double hi, json_t *req, const char *okey, srv_err *err) {
    json_t *v = field(body, key);
    if (!v) return 0;
    double d = json_number_value(v);
    if (!json_is_number(v) || !isfinite(d) || d < lo || d > hi)
        return srv_errf(err, 400, key, "'%s' must be a number in [%g, %g]", key, lo, hi);
    json_object_set(req, okey, v);
    return 0;
}

/* The chat request the body means (a new reference), or NULL with err.  With
 * count_only, max_tokens is not required and sampling fields are not read. */
static json_t *map_body(json_t *body, int count_only, srv_err *err) {
    json_t *req = json_object(), *msgs = json_array(), *v;
    json_object_set_new(req, "messages", msgs);
    if (map_messages(body, msgs, err) || map_tools(body, req, err)) goto fail;
    if ((v = field(body, "model")) && !json_is_string(v)) {
        srv_errf(err, 400, "model", "'model' must be a string");
        goto fail;
    }
    if ((v = field(body, "thinking"))) {
        json_t *ty = json_object_get(v, "type"), *bt = json_object_get(v, "budget_tokens");
        if (!json_is_object(v) || (!is(ty, "enabled") && !is(ty, "disabled") && !is(ty, "adaptive"))) {
            srv_errf(err, 400, "thinking",
                     "'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"adaptive\"} or "
                     "{\"type\": \"disabled\"}");
            goto fail;
        }
        if (is(ty, "enabled") && (!json_is_integer(bt) || json_integer_value(bt) < 1 || json_integer_value(bt) > INT_MAX)) {
            srv_errf(err, 400, "thinking", "'thinking.budget_tokens' must be an integer in [1, %d]", INT_MAX);
            goto fail;
        }
        json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", is(ty, "enabled")));
        if (is(ty, "enabled")) json_object_set(req, "thinking_budget", bt); /* enforced by the engine */
    }
    if (count_only) return req;
    v = field(body, "max_tokens");
    if (!v) {
        srv_errf(err, 400, "max_tokens", "'max_tokens' is required");
        goto fail;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        srv_errf(err, 400, "max_tokens", "'max_tokens' must be a positive integer");
        goto fail;
    }
    json_object_set(req, "max_tokens", v);
    if (map_number(body, "temperature", 0, 1, req, "temperature", err) || map_number(body, "top_p", 0, 1, req, "top_p", err))
        goto fail;
    if ((v = field(body, "top_p")) && json_number_value(v) == 0) {
        srv_errf(err, 400, "top_p", "'top_p' must be in (0, 1]");
        goto fail;
    }
    if ((v = field(body, "seed"))) json_object_set(req, "seed", v); /* an extension, as on the chat endpoint */
    if ((v = field(body, "top_k"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX) {
            srv_errf(err, 400, "top_k", "'top_k' must be a non-negative integer");
            goto fail;
        }
        json_object_set(req, "top_k", v);
    }
    if ((v = field(body, "stop_sequences"))) {
        if (!json_is_array(v)) {
            srv_errf(err, 400, "stop_sequences", "'stop_sequences' must be an array of strings");
            goto fail;
        }
        if (json_array_size(v)) json_object_set(req, "stop", v);
    }
    if ((v = field(body, "stream"))) {
        if (!json_is_boolean(v)) {
            srv_errf(err, 400, "stream", "'stream' must be a boolean");
            goto fail;
        }
        json_object_set(req, "stream", v);
    }
    return req;
fail:
    json_decref(req);
    return NULL;
}

static void message_id(srv_job *j) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[24];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(rand() & 0xff);
    char s[25];
    for (int i = 0; i < 24; i++) s[i] = al[r[i] % 62];
    s[24] = 0;
    snprintf(j->id, sizeof j->id, "msg_%s", s);
}

int srv_req_messages(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err) {
    json_t *req = map_body(body, 0, err);
    if (!req) return err->status;
    int r = srv_req_chat(srv, req, j, err);
    json_decref(req);
    if (r && !strcmp(err->param, "stop")) snprintf(err->param, sizeof err->param, "stop_sequences");
    j->api = SRV_API_ANTHROPIC;
    message_id(j);
    if (!r && !(j->blocks = json_array())) r = srv_errf(err, 500, NULL, "out of memory");
    return r;
}

char *srv_req_count_tokens(const srv_ctx *srv, json_t *body, srv_err *err) {
    json_t *req = map_body(body, 1, err);
    if (!req) return NULL;
    srv_job *j = srv_job_new(srv, SRV_CHAT);
    if (!j) {
        json_decref(req);
        srv_errf(err, 500, NULL, "out of memory");
        return NULL;
    }
    int r = srv_req_chat(srv, req, j, err);
    json_decref(req);
    /* a prompt longer than --ctx still has a count */
    if (r && err->code && !strcmp(err->code, "context_length_exceeded") && j->n_prompt > 0) r = 0;
    char *s = NULL;
    if (!r) {
        json_t *o = json_pack("{s:i}", "input_tokens", j->n_prompt);
        s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!s) srv_errf(err, 500, NULL, "out of memory");
    }
    srv_job_release(j);
    return s;
}
