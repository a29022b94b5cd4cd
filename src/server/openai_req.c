/* openai_req.c — reading an OpenAI request body into a job: field types and
 * ranges (400 with the field named in `param`), sampling defaults, stop
 * strings, tools and tool_choice, the chat template, tokenization, and the
 * context-length check.  Runs on HTTP threads.
 *
 * Decisions (README "Server"):
 *   - `model` may be any string; responses carry the served name.
 *   - omitted sampling fields take generation_config.json's values (as vLLM
 *     does), else OpenAI's defaults (temperature 1, top_p 1).
 *   - fields lilac cannot honour are refused, not ignored: n > 1, best_of > 1,
 *     echo, suffix, logit_bias, response_format types other than text,
 *     json_object and json_schema, continue_final_message, the deprecated
 *     functions / function_call, non-boolean chat_template_kwargs flags,
 *     non-text content parts.  Unknown fields are ignored.
 *   - response_format json_object / json_schema and tool_choice required /
 *     a named function constrain decoding (grammar_req.c).
 *   - thinking_budget N (default --reasoning-budget): after N reasoning
 *     tokens the engine feeds "\n</think>\n\n" itself and the answer
 *     follows; 0 renders the prompt with enable_thinking false.
 *   - tool_choice "required" and a named function: the output is tool calls
 *     (constrained); a named choice makes only that function's calls count.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/server.h"
#include "text/chat.h"

#define MAX_STOP 16
#define MAX_STOP_BYTES 1024
#define GEN_PROMPT "<|im_start|>assistant\n"

/* ------------------------------------------------------------ field access */

/* The value of key, or NULL when absent or null (OpenAI treats null as omitted). */
static json_t *field(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_null(v) ? NULL : v;
}

static int bad_type(srv_err *err, const char *key, const char *what) {
    return srv_errf(err, 400, key, "'%s' must be %s", key, what);
}

/* A number in [lo, hi] (lo excluded when lo_open). 0 = absent, 1 = read, -1 = error. */
static int get_num(json_t *o, const char *key, double lo, double hi, int lo_open, double *out, srv_err *err) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_number(v)) return bad_type(err, key, "a number"), -1;
    double d = json_number_value(v);
    if (!isfinite(d) || d > hi || d < lo || (lo_open && d == lo)) {
        srv_errf(err, 400, key, "'%s' is %g; it must be in %c%g, %g]", key, d, lo_open ? '(' : '[', lo, hi);
        return -1;
    }
    *out = d;
    return 1;
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, srv_err *err) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_integer(v)) return bad_type(err, key, "an integer"), -1;
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_errf(err, 400, key, "'%s' is %lld; it must be in [%lld, %lld]", key, x, lo, hi);
        return -1;
    }
    *out = x;
    return 1;
}

static int get_bool(json_t *o, const char *key, int *out, srv_err *err) {
    json_t *v = field(o, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return bad_type(err, key, "a boolean"), -1;
    *out = json_is_true(v);
    return 1;
}

static uint64_t random64(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
    }
    return x;
}

static void make_id(srv_job *j, const char *prefix) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t a = random64(), b = random64();
    char r[25];
    for (int i = 0; i < 24; i++) {
        uint64_t *x = i < 12 ? &a : &b;
        r[i] = al[*x % 62];
        *x /= 62;
    }
    r[24] = 0;
    snprintf(j->id, sizeof j->id, "%s%s", prefix, r);
    j->created = (long long)time(NULL);
}

/* ------------------------------------------------------ the common fields */

static int parse_stop(json_t *body, srv_job *j, srv_err *err) {
    json_t *v = field(body, "stop");
    if (!v) return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v)) return bad_type(err, "stop", "a string or an array of strings");
    if (n > MAX_STOP) return srv_errf(err, 400, "stop", "at most %d stop strings are supported, got %zu", MAX_STOP, n);
    if (n == 0) return 0;
    j->stop = calloc(n, sizeof *j->stop);
    j->stop_len = calloc(n, sizeof *j->stop_len);
    if (!j->stop || !j->stop_len) return srv_errf(err, 500, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) return srv_errf(err, 400, "stop", "stop[%zu] must be a string", i);
        size_t len = json_string_length(s);
        if (len == 0) return srv_errf(err, 400, "stop", "stop strings must not be empty");
        if (len > MAX_STOP_BYTES) return srv_errf(err, 400, "stop", "stop strings are limited to %d bytes", MAX_STOP_BYTES);
        if (!(j->stop[i] = malloc(len + 1))) return srv_errf(err, 500, NULL, "out of memory");
        memcpy(j->stop[i], json_string_value(s), len + 1);
        j->stop_len[i] = len;
        j->n_stop++;
        if (len > j->stop_max) j->stop_max = len;
    }
    return 0;
}

/* Fields shared by both endpoints.  *max_tokens receives the requested
 * limit, or -1 when none was given. */
static int parse_common(const srv_ctx *srv, json_t *body, srv_job *j, long long *max_tokens, srv_err *err) {
    json_t *v;
    if ((v = field(body, "model")) && !json_is_string(v)) return bad_type(err, "model", "a string");
    long long n = 1;
    if (get_int(body, "n", LLONG_MIN, LLONG_MAX, &n, err) < 0) return err->status;
    if (n != 1) return srv_errf(err, 400, "n", "only n = 1 is supported (got %lld)", n);
    if (get_int(body, "best_of", LLONG_MIN, LLONG_MAX, &n, err) < 0) return err->status;
    if (n != 1) return srv_errf(err, 400, "best_of", "only best_of = 1 is supported (got %lld)", n);
    if (get_bool(body, "stream", &j->stream, err) < 0) return err->status;
    if ((v = field(body, "stream_options"))) {
        if (!json_is_object(v)) return bad_type(err, "stream_options", "an object");
        if (!j->stream) return srv_errf(err, 400, "stream_options", "'stream_options' is only allowed with stream: true");
        if (get_bool(v, "include_usage", &j->include_usage, err) < 0) {
            snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            return err->status;
        }
    }
    *max_tokens = -1;
    const char *mt = j->kind == SRV_CHAT && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (get_int(body, mt, 1, LLONG_MAX, max_tokens, err) < 0) return err->status;

    lilac_sampling *s = &j->gen.sampling;
    *s = srv->defaults.s;
    double d;
    long long k;
    if (get_num(body, "temperature", 0, 2, 0, &d, err) < 0) return err->status;
    else if (field(body, "temperature")) s->temperature = (float)d;
    if (get_num(body, "top_p", 0, 1, 1, &d, err) < 0) return err->status;
    else if (field(body, "top_p")) s->top_p = (float)d;
    if (get_int(body, "top_k", -1, INT_MAX, &k, err) < 0) return err->status;
    else if (field(body, "top_k")) s->top_k = k < 0 ? 0 : (int)k; /* -1 = off, as in vLLM */
    if (get_num(body, "min_p", 0, 1, 0, &d, err) < 0) return err->status;
    else if (field(body, "min_p")) s->min_p = (float)d;
    if (get_num(body, "presence_penalty", -2, 2, 0, &d, err) < 0) return err->status;
    else if (field(body, "presence_penalty")) s->presence_penalty = (float)d;
    if (get_num(body, "frequency_penalty", -2, 2, 0, &d, err) < 0) return err->status;
    else if (field(body, "frequency_penalty")) s->frequency_penalty = (float)d;
    if (get_num(body, "repetition_penalty", 0, 10, 1, &d, err) < 0) return err->status;
    else if (field(body, "repetition_penalty")) s->repetition_penalty = (float)d;
    if (get_int(body, "seed", LLONG_MIN, LLONG_MAX, &k, err) < 0) return err->status;
    s->seed = field(body, "seed") ? (uint64_t)k : random64();

    if (parse_stop(body, j, err)) return err->status;
    int ignore_eos = 0;
    if (get_bool(body, "ignore_eos", &ignore_eos, err) < 0) return err->status;
    j->gen.stop_at_eos = !ignore_eos;
    if (!ignore_eos && srv->n_stop_ids) {
        int32_t *ids = malloc((size_t)srv->n_stop_ids * sizeof *ids);
        if (!ids) return srv_errf(err, 500, NULL, "out of memory");
        memcpy(ids, srv->stop_ids, (size_t)srv->n_stop_ids * sizeof *ids);
        j->gen.stop_ids = ids;
        j->gen.n_stop_ids = srv->n_stop_ids;
    }
    if ((v = field(body, "logit_bias")) && (!json_is_object(v) || json_object_size(v) > 0))
        return srv_errf(err, 400, "logit_bias", "'logit_bias' is not supported");
    return 0;
}

/* The prompt fits, and max_tokens with it (vLLM's rule: prompt + max_tokens <= context). */
static int check_context(const srv_ctx *srv, srv_job *j, long long max_tokens, srv_err *err) {
    int ctx = srv->o.ctx;
    if (j->n_prompt >= ctx || (max_tokens > 0 && max_tokens > (long long)(ctx - j->n_prompt))) {
        const char *what = j->kind == SRV_COMPLETION ? "prompt" : "messages";
        if (max_tokens > 0)
            srv_errf(err, 400, what,
                     "This model's maximum context length is %d tokens. However, you requested %lld tokens (%d in the "
                     "%s, %lld in the completion). Please reduce the length of the %s or completion.",
                     ctx, max_tokens > LLONG_MAX - j->n_prompt ? LLONG_MAX : j->n_prompt + max_tokens, j->n_prompt,
                     what, max_tokens, what);
        else
            srv_errf(err, 400, what,
                     "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                     "(no room for a completion). Please reduce the length of the %s.",
                     ctx, what, j->n_prompt, what);
        err->code = "context_length_exceeded";
        return err->status;
    }
    j->gen.max_tokens = max_tokens > 0 ? (int)max_tokens : ctx - j->n_prompt;
    return 0;
}

static int logprob_fields(json_t *body, srv_job *j, srv_err *err) {
    long long k = 0;
    if (j->kind == SRV_CHAT) {
        if (get_bool(body, "logprobs", &j->logprobs, err) < 0) return err->status;
        if (get_int(body, "top_logprobs", 0, LILAC_MAX_TOP_LOGPROBS, &k, err) < 0) return err->status;
        if (k > 0 && !j->logprobs)
            return srv_errf(err, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    } else {
        /* legacy completions: logprobs is the number of alternatives (0..20) */
        int r = get_int(body, "logprobs", 0, LILAC_MAX_TOP_LOGPROBS, &k, err);
        if (r < 0) return err->status;
        j->logprobs = r > 0;
    }
    j->top_logprobs = (int)k;
    j->gen.logprobs = j->logprobs;
    j->gen.top_logprobs = (int)k;
    return 0;
}

/* ------------------------------------------------------------ tokenization */

static int encode(const srv_ctx *srv, const char *p, size_t n, lilac_ids *ids, srv_err *err) {
    lilac_error e = {0};
    if (n && lilac_tokenizer_encode(srv->tok, p, n, 0, ids, &e)) {
        fprintf(stderr, "lilac serve: tokenizer: %s\n", e.msg);
        return srv_errf(err, 500, NULL, "internal error while tokenizing the prompt");
    }
    return 0;
}

/* Position b splits the prompt into two tokenization units when text[b..]
 * starts with an added token and no added token spans b: added tokens are
 * matched before anything else, so the tokens of the whole are the tokens of
 * the halves. */
static int safe_split(const srv_ctx *srv, const char *p, size_t n, size_t b) {
    if (b == 0 || b >= n) return 0;
    int starts = 0;
    for (int i = 0; i < srv->n_added; i++) {
        size_t L = srv->added_len[i];
        const char *a = srv->added[i];
        if (L <= n - b && memcmp(p + b, a, L) == 0) starts = 1;
        for (size_t k = 1; k < L; k++) /* a[0..k) before b, a[k..L) after it */
            if (k <= b && L - k <= n - b && memcmp(p + b - k, a, k) == 0 && memcmp(p + b, a + k, L - k) == 0) return 0;
    }
    return starts;
}

/* Tokenizes the prompt; at each safe split point (byte offsets bs[0..nb),
 * ascending) in separate pieces, so that the token index of the split is
 * known: those become the job's anchor snapshot points. */
static int tokenize_prompt(const srv_ctx *srv, const char *p, size_t n, const size_t *bs, int nb, srv_job *j,
                           srv_err *err) {
    lilac_ids ids = LILAC_IDS_INIT;
    size_t from = 0;
    for (int i = 0; i < nb; i++) {
        if (bs[i] <= from || !safe_split(srv, p, n, bs[i])) continue;
        if (encode(srv, p + from, bs[i] - from, &ids, err)) goto fail;
        if (ids.len > 0 && j->n_split < SRV_MAX_SPLIT) j->split[j->n_split++] = (int)ids.len;
        from = bs[i];
    }
    if (encode(srv, p + from, n - from, &ids, err)) goto fail;
    if (ids.len > INT_MAX / 2) {
        srv_errf(err, 400, NULL, "the prompt is too long");
        goto fail;
    }
    j->prompt = ids.v;
    j->n_prompt = (int)ids.len;
    return 0;
fail:
    lilac_ids_free(&ids);
    return err->status;
}

/* ------------------------------------------------------------------- chat */

static int check_tools(json_t *tools, srv_err *err) {
    if (!json_is_array(tools)) return bad_type(err, "tools", "an array");
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *ty = json_object_get(t, "type"), *fn = json_object_get(t, "function");
        if (!json_is_object(t)) return srv_errf(err, 400, "tools", "tools[%zu] must be an object", i);
        if (!json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0)
            return srv_errf(err, 400, "tools", "tools[%zu].type must be \"function\"", i);
        if (!json_is_object(fn)) return srv_errf(err, 400, "tools", "tools[%zu].function must be an object", i);
        json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
        if (!json_is_string(name) || json_string_length(name) == 0)
            return srv_errf(err, 400, "tools", "tools[%zu].function.name must be a non-empty string", i);
        if (params && !json_is_object(params))
            return srv_errf(err, 400, "tools", "tools[%zu].function.parameters must be an object", i);
    }
    return 0;
}

static json_t *find_tool(json_t *tools, const char *name) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        const char *n = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (n && strcmp(n, name) == 0) return t;
    }
    return NULL;
}

/* Decides which tools the parser recognises: *parse_tools is NULL for none
 * (a new reference otherwise); *forced: the output must be calls to them. */
static int tool_choice(json_t *body, json_t *tools, json_t **parse_tools, int *forced, srv_err *err) {
    *parse_tools = NULL;
    *forced = 0;
    json_t *tc = field(body, "tool_choice");
    int have = tools && json_array_size(tools) > 0;
    if (!tc || (json_is_string(tc) && strcmp(json_string_value(tc), "auto") == 0)) {
        if (have) *parse_tools = json_incref(tools);
        return 0;
    }
    if (json_is_string(tc)) {
        const char *s = json_string_value(tc);
        if (strcmp(s, "none") == 0) return 0;
        if (strcmp(s, "required") == 0) {
            if (!have) return srv_errf(err, 400, "tool_choice", "tool_choice \"required\" needs a non-empty 'tools'");
            *parse_tools = json_incref(tools);
            *forced = 1;
            return 0;
        }
        return srv_errf(err, 400, "tool_choice", "tool_choice \"%s\" is not one of \"none\", \"auto\", \"required\"", s);
    }
    json_t *fn = json_object_get(tc, "function");
    const char *name = json_string_value(json_object_get(fn, "name"));
    json_t *ty = json_object_get(tc, "type");
    if (!json_is_object(tc) || !json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0 || !name)
        return srv_errf(err, 400, "tool_choice",
                        "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                        "\"function\": {\"name\": ...}}");
    json_t *t = have ? find_tool(tools, name) : NULL;
    if (!t) return srv_errf(err, 400, "tool_choice", "tool_choice names function '%s', which is not in 'tools'", name);
    *parse_tools = json_pack("[O]", t);
    *forced = 1;
    return 0;
}

/* The body as the renderer should see it: role "developer" becomes
 * "system" (OpenAI's newer name for it; the template knows only system);
 * with no_think, chat_template_kwargs.enable_thinking is false (a thinking
 * budget of 0). */
static json_t *renderable(json_t *body, int no_think) {
    json_t *msgs = json_object_get(body, "messages");
    int dev = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *r = json_string_value(json_object_get(m, "role"));
        dev |= r && strcmp(r, "developer") == 0;
    }
    if (!dev && !no_think) return json_incref(body);
    json_t *copy = json_copy(body), *nm = json_array();
    if (!copy || !nm) {
        json_decref(copy);
        json_decref(nm);
        return NULL;
    }
    if (no_think) {
        json_t *kw = json_object_get(body, "chat_template_kwargs");
        json_t *k2 = json_is_object(kw) ? json_copy(kw) : json_object();
        if (!k2 || json_object_set_new(k2, "enable_thinking", json_false()) ||
            json_object_set_new(copy, "chat_template_kwargs", k2)) {
            json_decref(copy);
            json_decref(nm);
            return NULL;
        }
    }
    json_array_foreach(msgs, i, m) {
        const char *r = json_string_value(json_object_get(m, "role"));
        if (r && strcmp(r, "developer") == 0) {
            json_t *c = json_copy(m);
            json_object_set_new(c, "role", json_string("system"));
            json_array_append_new(nm, c);
        } else {
            json_array_append(nm, m);
        }
    }
    json_object_set_new(copy, "messages", nm);
    return copy;
}

int srv_req_chat(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err) {
    make_id(j, "chatcmpl-");
    json_t *v;
    if (!(v = field(body, "messages"))) return srv_errf(err, 400, "messages", "'messages' is required");
    if (!json_is_array(v)) return bad_type(err, "messages", "an array");
    if (json_array_size(v) == 0) return srv_errf(err, 400, "messages", "'messages' must not be empty");
    long long max_tokens;
    if (parse_common(srv, body, j, &max_tokens, err) || logprob_fields(body, j, err)) return err->status;
    json_t *tools = field(body, "tools");
    if (tools && check_tools(tools, err)) return err->status;
    int parallel = 1;
    if (get_bool(body, "parallel_tool_calls", &parallel, err) < 0) return err->status;
    json_t *rf = field(body, "response_format");
    if (rf && srv_check_response_format(rf, err)) return err->status;
    if ((v = field(body, "chat_template_kwargs"))) {
        if (!json_is_object(v)) return bad_type(err, "chat_template_kwargs", "an object");
        /* the template tests these with `is false` / `is true` / truthiness:
         * "no" would count as true, so only booleans are taken */
        static const char *const kw_bool[] = {"enable_thinking", "preserve_thinking", "add_generation_prompt",
                                              "add_vision_id"};
        for (size_t k = 0; k < sizeof kw_bool / sizeof kw_bool[0]; k++) {
            json_t *x = field(v, kw_bool[k]);
            if (x && !json_is_boolean(x)) {
                srv_errf(err, 400, NULL, "'chat_template_kwargs.%s' must be a boolean (true or false)", kw_bool[k]);
                snprintf(err->param, sizeof err->param, "chat_template_kwargs.%s", kw_bool[k]);
                return err->status;
            }
        }
    }
    /* The deprecated function-calling fields: accepting them would answer in
     * tool_calls, which a client that sends them does not read. */
    if (field(body, "functions"))
        return srv_errf(err, 400, "functions",
                        "'functions' (deprecated) is not supported; send 'tools': [{\"type\": \"function\", "
                        "\"function\": {...}}] instead");
    if (field(body, "function_call"))
        return srv_errf(err, 400, "function_call",
                        "'function_call' (deprecated) is not supported; send 'tool_choice' with 'tools' instead");
    if ((v = field(body, "echo")) && !json_is_false(v))
        return srv_errf(err, 400, "echo", "'echo' is not supported on chat completions");
    if ((v = field(body, "add_generation_prompt")) && !json_is_boolean(v))
        return bad_type(err, "add_generation_prompt", "a boolean");
    if ((v = field(body, "continue_final_message")) && !json_is_false(v))
        return srv_errf(err, 400, "continue_final_message", "'continue_final_message' is not supported");
    lilac_error e = {0};
    char where[64];
    if (lilac_chat_check_text_only(body, where, sizeof where, &e)) return srv_errf(err, 400, where, "%s", e.msg);
    /* thinking_budget (Qwen's API name; /v1/messages maps budget_tokens to
     * it): omitted = the server's --reasoning-budget; 0 = thinking off */
    long long budget = srv->o.reasoning_budget;
    if (get_int(body, "thinking_budget", 0, INT_MAX, &budget, err) < 0) return err->status;
    if (budget > 0 && srv->think_close < 0)
        return srv_errf(err, 400, "thinking_budget", "'thinking_budget' needs a </think> token, which this tokenizer lacks");
    json_t *parse_tools = NULL;
    int forced = 0;
    if (tool_choice(body, tools, &parse_tools, &forced, err)) return err->status;

    json_t *rq = renderable(body, budget == 0);
    lilac_buf prompt = LILAC_BUF_INIT;
    lilac_chat_info info;
    lilac_status st = rq ? lilac_chat_render(rq, &prompt, &info, &e) : LILAC_ENOMEM;
    json_decref(rq);
    if (st) {
        json_decref(parse_tools);
        lilac_buf_free(&prompt);
        if (st == LILAC_CHAT_EREQUEST) return srv_errf(err, 400, "messages", "%s", e.msg);
        if (st == LILAC_CHAT_ETEMPLATE) return srv_errf(err, 400, "messages", "chat template error: %s", e.msg);
        fprintf(stderr, "lilac serve: render: %s\n", e.msg);
        return srv_errf(err, 500, NULL, "internal error while rendering the prompt");
    }
    /* Anchor snapshot points.  (1) The end of the system turn (system
     * message and/or tool declarations), which every conversation with the
     * same system prompt and tools shares.  (2) The start of the final user
     * message: what a client that edits or regenerates its last message
     * sends again (the history before it renders the same).  (3) Just after
     * the final "<|im_start|>assistant\n", the part of the generation prompt
     * that later turns re-render the same way even when they drop this
     * turn's reasoning.  (2) and (3) only after a user message: in a
     * tool-calling loop (after a tool message) the end of the previous
     * prompt already prefixes this one. */
    size_t bs[3];
    int nb = 0;
    json_t *msgs = json_object_get(body, "messages");
    size_t nm = json_array_size(msgs);
    const char *first_role = json_string_value(json_object_get(json_array_get(msgs, 0), "role"));
    const char *last_role = json_string_value(json_object_get(json_array_get(msgs, nm - 1), "role"));
    int has_system = first_role && (strcmp(first_role, "system") == 0 || strcmp(first_role, "developer") == 0);
    if (info.n_messages == nm && has_system && nm > 1) bs[nb++] = info.message_offset[1];
    else if (info.n_messages == nm && !has_system && tools && json_array_size(tools) > 0) bs[nb++] = info.message_offset[0];
    size_t gl = strlen(GEN_PROMPT);
    int last_user = last_role && strcmp(last_role, "user") == 0;
    if (last_user && info.n_messages == nm && nm > 1 && info.message_offset[nm - 1] > (nb ? bs[nb - 1] : 0))
        bs[nb++] = info.message_offset[nm - 1];
    if (info.add_generation_prompt && last_user &&
        info.generation_offset + gl <= prompt.len &&
        memcmp(prompt.data + info.generation_offset, GEN_PROMPT, gl) == 0)
        bs[nb++] = info.generation_offset + gl;
    unsigned flags = (info.thinking ? LILAC_PARSE_THINK_OPEN : 0) | (parse_tools ? LILAC_PARSE_TOOLS : 0);
    j->chat_snapshot_end = info.add_generation_prompt;
    j->think_open = info.thinking;
    if (budget > 0 && info.thinking) {
        j->gen.think_budget = (int)budget;
        j->gen.think_close = srv->think_close;
        j->gen.think_end = srv->think_end; /* the server's, not the job's */
        j->gen.n_think_end = srv->n_think_end;
    }
    lilac_chat_info_free(&info);
    const srv_grammar_req gr = {rf, forced ? parse_tools : NULL, forced ? NULL : parse_tools, parallel, j->think_open};
    int r = prompt.oom ? srv_errf(err, 500, NULL, "out of memory") : srv_req_grammar(srv, &gr, j, err);
    if (!r) r = tokenize_prompt(srv, prompt.data, prompt.len, bs, nb, j, err);
    lilac_buf_free(&prompt);
    if (!r && lilac_parser_new(parse_tools, flags, j->gen.sampling.seed ^ 0x5eed5eed5eed5eedull, &j->parser, &e))
        r = srv_errf(err, 500, NULL, "internal error: %s", e.msg);
    json_decref(parse_tools);
    if (r) return r;
    return check_context(srv, j, max_tokens, err);
}

/* ------------------------------------------------------------ completions */

int srv_req_completion(const srv_ctx *srv, json_t *body, srv_job *j, srv_err *err) {
    make_id(j, "cmpl-");
    json_t *p = field(body, "prompt"), *v;
    if (!p) return srv_errf(err, 400, "prompt", "'prompt' is required");
    long long max_tokens;
    if (parse_common(srv, body, j, &max_tokens, err) || logprob_fields(body, j, err)) return err->status;
    if ((v = field(body, "echo")) && !json_is_false(v)) return srv_errf(err, 400, "echo", "'echo' is not supported");
    if ((v = field(body, "suffix"))) return srv_errf(err, 400, "suffix", "'suffix' is not supported");
    json_t *rf = field(body, "response_format");
    const srv_grammar_req gr = {rf, NULL, NULL, 1, 0};
    if (rf && (srv_check_response_format(rf, err) || srv_req_grammar(srv, &gr, j, err))) return err->status;
    /* a batch of one is the same as its element */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    else if (json_is_array(p) && json_array_size(p) > 1 && !json_is_integer(json_array_get(p, 0)))
        return srv_errf(err, 400, "prompt", "only one prompt per request is supported");
    if (json_is_string(p)) {
        if (tokenize_prompt(srv, json_string_value(p), json_string_length(p), NULL, 0, j, err)) return err->status;
    } else if (json_is_array(p)) {
        size_t n = json_array_size(p);
        if (n > (size_t)srv->o.ctx) n = (size_t)srv->o.ctx + 1; /* enough to fail the context check */
        j->prompt = malloc((n ? n : 1) * sizeof *j->prompt);
        if (!j->prompt) return srv_errf(err, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(p, i);
            json_int_t id = json_integer_value(x);
            if (!json_is_integer(x) || id < 0 || id >= srv->info.vocab_size)
                return srv_errf(err, 400, "prompt", "prompt[%zu] must be a token id in [0, %d)", i, srv->info.vocab_size);
            j->prompt[i] = (int32_t)id;
        }
        j->n_prompt = (int)n;
    } else {
        return bad_type(err, "prompt", "a string, an array of token ids, or an array of one of those");
    }
    if (j->n_prompt == 0) return srv_errf(err, 400, "prompt", "the prompt is empty (no tokens)");
    if (max_tokens < 0) { /* OpenAI's legacy default, which vLLM keeps too */
        max_tokens = 16;
        if (j->n_prompt + max_tokens > srv->o.ctx && j->n_prompt < srv->o.ctx) max_tokens = srv->o.ctx - j->n_prompt;
    }
    return check_context(srv, j, max_tokens, err);
}
