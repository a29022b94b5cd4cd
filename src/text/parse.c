/* parse.c — the incremental output parser (rules and guarantees in parse.h).
 *
 * How it stays independent of the fragment boundaries: all input that is not
 * yet decided stays in `in` (from `pos` on), and each state looks only at
 * those bytes.  A state either decides from the bytes it has, or — when more
 * bytes could change the decision and the output has not ended — waits
 * without consuming anything.  At finish the same states run with `final`
 * set, where "could change" is false, so every decision is a function of
 * the whole text alone.
 *
 * Text of the two kinds goes through a `sink`, which drops newlines or
 * whitespace at the start of a stretch, holds back a trailing run of
 * separator bytes (newlines before "</think>", whitespace before a tool
 * call) and an incomplete UTF-8 character, and records what it emits as the
 * final result, so the deltas and the result cannot disagree. */
#include "text/parse.h"

#include <stdlib.h>
#include <string.h>

#include "text/parse_schema.h"
#include "text/pyjson.h"
#include "text/utf8.h"
#include "util/buf.h"

#define WS " \t\r\n"
#define MAX_NAME 256 /* bytes of a function or parameter name */
#define MAX_GAP 64   /* whitespace between <tool_call> and <function= */

static const char T_THINK[] = "<think>", T_THINK_END[] = "</think>", T_CALL[] = "<tool_call>",
                  T_CALL_END[] = "</tool_call>", T_FUNC[] = "<function=", T_FUNC_END[] = "</function>",
                  T_PARAM[] = "<parameter=", T_PARAM_END[] = "</parameter>";
#define LEN(tag) (sizeof(tag) - 1)

typedef enum {
    S_START,    /* no think block opened by the prompt: looking for a leading <think> */
    S_REASON,   /* inside the think block */
    S_CONTENT,  /* content, looking for <tool_call> */
    S_BODY,     /* in a committed call: expecting <parameter=, </function> or </tool_call> */
    S_VALUE,    /* in a parameter value, looking for </parameter> */
    S_CALL_END, /* after </function>: expecting </tool_call> */
} state;

typedef struct {
    lilac_delta_kind kind;
    lilac_buf out;    /* everything emitted: the final result */
    lilac_buf tail;   /* received, not emitted: a held separator run or a partial UTF-8 character */
    const char *drop; /* bytes dropped at the start of the coming text (NULL: none) */
    const char *hold; /* bytes whose trailing run is held back (NULL: none) */
} sink;

struct lilac_parser {
    json_t *tools; /* the request's tools array (a reference), or NULL */
    unsigned flags;
    uint64_t rng; /* splitmix64 state for call ids */
    state st;
    lilac_buf in; /* undecided input is in.data[pos .. in.len) */
    size_t pos;
    size_t val_off, scan; /* S_VALUE: where the value starts and where the search resumes, from pos */
    sink reason, content;
    json_t *calls;        /* the tool_calls array */
    const json_t *props;  /* the current call's parameters.properties, or NULL */
    lilac_buf args;       /* the current call's arguments so far */
    int nparams;          /* parameters in args */
    lilac_buf key;        /* the current parameter's name, NUL-terminated */
    int finished, oom;
    lilac_delta_fn cb;    /* set for the duration of feed/finish */
    void *ctx;
};

/* ---- reporting ---------------------------------------------------------- */

static void report(lilac_parser *p, lilac_delta_kind kind, int index, const char *text, size_t len,
                   const char *id, const char *name) {
    if (!p->cb) return;
    lilac_delta d = {kind, index, text, len, id, name};
    p->cb(p->ctx, &d);
}

static int in_set(char c, const char *set) { return set && c && strchr(set, c); }

/* Length of the trailing run of bytes from set. */
static size_t trailing_run(const char *s, size_t n, const char *set) {
    size_t k = 0;
    while (k < n && in_set(s[n - 1 - k], set)) k++;
    return k;
}

/* Length of an incomplete UTF-8 sequence at the end (0 when the text ends on
 * a character boundary or the bytes are not UTF-8 anyway). */
static size_t utf8_partial(const char *s, size_t n) {
    for (size_t i = 1; i <= 3 && i <= n; i++) {
        unsigned char c = (unsigned char)s[n - i];
        if ((c & 0xC0) == 0x80) continue;
        if (c < 0xC0) return 0;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        return need > i ? i : 0;
    }
    return 0;
}

/* Emits all of the sink's tail but its last keep bytes. */
static void sink_release(lilac_parser *p, sink *s, size_t keep) {
    size_t n = s->tail.len - keep;
    if (!n) return;
    size_t old = s->out.len;
    lilac_buf_append(&s->out, s->tail.data, n);
    if (s->out.oom) {
        p->oom = 1;
        return;
    }
    report(p, s->kind, -1, s->out.data + old, n, NULL, NULL);
    memmove(s->tail.data, s->tail.data + n, keep);
    s->tail.len = keep;
    s->tail.data[keep] = 0;
}

static void sink_put(lilac_parser *p, sink *s, const char *t, size_t n) {
    if (s->drop) {
        while (n && in_set(*t, s->drop)) t++, n--;
        if (!n) return;
        s->drop = NULL;
    }
    if (!n) return;
    lilac_buf_append(&s->tail, t, n);
    if (s->tail.oom) {
        p->oom = 1;
        return;
    }
    size_t keep = trailing_run(s->tail.data, s->tail.len, s->hold);
    if (!keep) keep = utf8_partial(s->tail.data, s->tail.len);
    sink_release(p, s, keep);
}

/* The end of a stretch: emits what is held, except a trailing separator run
 * when drop_run. */
static void sink_flush(lilac_parser *p, sink *s, int drop_run) {
    sink_release(p, s, drop_run ? trailing_run(s->tail.data, s->tail.len, s->hold) : 0);
    lilac_buf_clear(&s->tail);
}

/* ---- tool calls --------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void make_id(lilac_parser *p, char id[30]) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    memcpy(id, "call_", 5);
    for (int i = 0; i < 24; i++) id[5 + i] = alnum[splitmix64(&p->rng) % 62];
    id[29] = 0;
}

static int call_index(const lilac_parser *p) { return (int)json_array_size(p->calls) - 1; }

/* Appends to the current call's arguments what was written into p->args
 * since old, and reports it. */
static void args_added(lilac_parser *p, size_t old) {
    if (p->args.oom) {
        p->oom = 1;
        return;
    }
    report(p, LILAC_DELTA_TOOL_ARGS, call_index(p), p->args.data + old, p->args.len - old, NULL, NULL);
}

/* Starts call number ncalls: the content before it ends, its id is drawn.
 * jname is a new reference to the function name, which it takes. */
static void commit_call(lilac_parser *p, json_t *jname, const json_t *props) {
    /* Whitespace right before the call is a separator: dropped when nothing
     * precedes it, kept (held) in case more text follows the calls. */
    sink *c = &p->content;
    if (trailing_run(c->tail.data, c->tail.len, c->hold) < c->tail.len) sink_flush(p, c, 0);
    else if (c->out.len == 0) lilac_buf_clear(&c->tail);

    char id[30];
    make_id(p, id);
    json_t *fn = json_object(), *call = json_object();
    if (!fn || !call) json_decref(jname);
    if (!fn || !call || json_object_set_new(fn, "name", jname) ||
        json_object_set_new(fn, "arguments", json_string("")) || json_object_set_new(call, "id", json_string(id)) ||
        json_object_set_new(call, "type", json_string("function")) || json_object_set(call, "function", fn) ||
        json_array_append(p->calls, call)) {
        p->oom = 1;
    }
    json_decref(fn);
    json_decref(call);
    if (p->oom) return;
    p->props = props;
    p->nparams = 0;
    lilac_buf_clear(&p->args);
    report(p, LILAC_DELTA_TOOL_START, call_index(p), NULL, 0, id, json_string_value(jname));
}

static void close_call(lilac_parser *p) {
    size_t old = p->args.len;
    lilac_buf_puts(&p->args, p->nparams ? "}" : "{}");
    args_added(p, old);
    json_t *fn = json_object_get(json_array_get(p->calls, json_array_size(p->calls) - 1), "function");
    if (p->oom || json_object_set_new(fn, "arguments", json_stringn(p->args.data, p->args.len)))
        p->oom = 1;
    p->content.drop = WS; /* whitespace after a call separates it from what follows */
}

static void add_param(lilac_parser *p, const char *v, size_t n) {
    /* The value sits between "<parameter=K>\n" and "\n</parameter>". */
    if (n && v[0] == '\n') v++, n--;
    if (n && v[n - 1] == '\n') n--;
    /* jansson holds only UTF-8: a broken byte becomes U+FFFD, as Python's
     * decoding with errors="replace" would have made it */
    lilac_buf fixed = LILAC_BUF_INIT;
    if (lilac_utf8_valid_prefix(v, n) < n) {
        lilac_utf8_lossy(v, n, &fixed);
        v = fixed.data;
        n = fixed.len;
    }
    unsigned types = p->props ? lilac_parse_schema_types(json_object_get(p->props, p->key.data)) : 0;
    json_t *val = fixed.oom ? NULL : lilac_parse_typed_value(v, n, types);
    lilac_buf_free(&fixed);
    if (!val) {
        p->oom = 1;
        return;
    }
    size_t old = p->args.len;
    lilac_buf_puts(&p->args, p->nparams ? ", " : "{");
    lilac_pyjson_dump_string(p->key.data, p->key.len, &p->args);
    lilac_buf_puts(&p->args, ": ");
    lilac_pyjson_dump(val, &p->args);
    json_decref(val);
    p->nparams++;
    args_added(p, old);
}

/* ---- states ------------------------------------------------------------- */

static const char *at(const lilac_parser *p) { return p->in.data + p->pos; }
static size_t avail(const lilac_parser *p) { return p->in.len - p->pos; }

/* 1 if s starts with tag, -1 if s is a proper prefix of it, 0 otherwise. */
static int starts_with(const char *s, size_t n, const char *tag) {
    size_t k = strlen(tag);
    if (n >= k) return memcmp(s, tag, k) == 0;
    return memcmp(s, tag, n) == 0 ? -1 : 0;
}

/* The longest proper prefix of tag that ends s (a tag that may be cut off). */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t k = strlen(tag) - 1;
    for (k = k < n ? k : n; k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0) return k;
    return 0;
}

static size_t skip_ws(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && in_set(s[i], WS)) i++;
    return i;
}

/* Reads "TAG NAME>" at s: 1 and the name's extent when complete, -1 when s
 * ends first, 0 when the name is empty, too long or holds a byte in bad. */
static int read_name(const char *s, size_t n, size_t taglen, const char *bad, size_t *name_end) {
    size_t j = taglen;
    for (; j < n && s[j] != '>'; j++)
        if (!s[j] || strchr(bad, s[j]) || j - taglen >= MAX_NAME) return 0;
    if (j == n) return -1;
    *name_end = j;
    return j > taglen;
}

static int st_start(lilac_parser *p, int final) {
    const char *s = at(p);
    size_t n = avail(p), i = skip_ws(s, n);
    int r = starts_with(s + i, n - i, T_THINK);
    if (!final && (i == n || r < 0)) return 0;
    if (r > 0) {
        p->pos += i + LEN(T_THINK);
        p->st = S_REASON;
    } else {
        p->st = S_CONTENT; /* the leading whitespace is content too */
    }
    return 1;
}

static int st_reason(lilac_parser *p, int final) {
    const char *s = at(p);
    size_t n = avail(p);
    const char *f = memmem(s, n, T_THINK_END, LEN(T_THINK_END));
    if (f) {
        sink_put(p, &p->reason, s, (size_t)(f - s));
        sink_flush(p, &p->reason, 1);
        p->pos += (size_t)(f - s) + LEN(T_THINK_END);
        p->st = S_CONTENT;
        p->content.drop = "\n";
        return 1;
    }
    size_t k = final ? 0 : partial_tag(s, n, T_THINK_END);
    if (n == k) return 0;
    sink_put(p, &p->reason, s, n - k);
    p->pos += n - k;
    return 1;
}

/* At "<tool_call>": 1 when a call was committed (and consumed), 0 when this
 * is not a call, -1 when more input is needed to tell. */
static int open_call(lilac_parser *p, int final) {
    const char *s = at(p);
    size_t n = avail(p), i = LEN(T_CALL), j = i;
    while (j < n && in_set(s[j], WS))
        if (j++ - i >= MAX_GAP) return 0;
    int r = starts_with(s + j, n - j, T_FUNC);
    if (r == 0 && j < n) return 0;
    if (r <= 0) return final ? 0 : -1;
    size_t name_end;
    r = read_name(s + j, n - j, LEN(T_FUNC), WS "<", &name_end);
    if (r < 0) return final ? 0 : -1;
    if (r == 0) return 0;
    const char *name = s + j + LEN(T_FUNC);
    size_t name_len = name_end - LEN(T_FUNC);
    const json_t *props = NULL;
    if (p->tools && !lilac_parse_find_tool(p->tools, name, name_len, &props)) return 0;
    json_t *jname = json_stringn(name, name_len); /* NULL: not UTF-8 (possible without tools) */
    if (!jname) return 0;
    p->pos += j + name_end + 1;
    commit_call(p, jname, props);
    p->st = S_BODY;
    return 1;
}

static int st_content(lilac_parser *p, int final) {
    const char *s = at(p);
    size_t n = avail(p);
    if (!(p->flags & LILAC_PARSE_TOOLS)) {
        sink_put(p, &p->content, s, n);
        p->pos += n;
        return n > 0;
    }
    const char *f = memmem(s, n, T_CALL, LEN(T_CALL));
    size_t plain = f ? (size_t)(f - s) : n - (final ? 0 : partial_tag(s, n, T_CALL));
    if (plain) {
        sink_put(p, &p->content, s, plain);
        p->pos += plain;
        return 1;
    }
    if (!f) return 0;
    int r = open_call(p, final);
    if (r < 0) return 0;
    if (r == 0) { /* not a tool call: the tag is text, and the scan goes on after it */
        sink_put(p, &p->content, s, LEN(T_CALL));
        p->pos += LEN(T_CALL);
    }
    return 1;
}

/* A committed call cannot go on: it ends with the parameters it has, and the
 * unconsumed rest is content. */
static int call_broken(lilac_parser *p) {
    close_call(p);
    p->st = S_CONTENT;
    return 1;
}

static int st_body(lilac_parser *p, int final) {
    size_t i = skip_ws(at(p), avail(p));
    p->pos += i; /* whitespace between the tags of a call is layout */
    const char *s = at(p);
    size_t n = avail(p);
    if (n == 0) {
        if (!final) return i > 0;
        close_call(p); /* the output ended after a complete parameter */
        p->st = S_CONTENT;
        return 1;
    }
    int rp = starts_with(s, n, T_PARAM), rf = starts_with(s, n, T_FUNC_END), rc = starts_with(s, n, T_CALL_END);
    if (rf > 0) {
        p->pos += LEN(T_FUNC_END);
        close_call(p);
        p->st = S_CALL_END;
        return 1;
    }
    if (rc > 0) { /* "</function>" left out: the call is complete all the same */
        p->pos += LEN(T_CALL_END);
        close_call(p);
        p->st = S_CONTENT;
        return 1;
    }
    if (rp > 0) {
        size_t name_end;
        int r = read_name(s, n, LEN(T_PARAM), "<\n", &name_end);
        if (r < 0 && !final) return i > 0;
        if (r <= 0) return call_broken(p);
        lilac_buf_clear(&p->key);
        lilac_utf8_lossy(s + LEN(T_PARAM), name_end - LEN(T_PARAM), &p->key);
        p->val_off = p->scan = name_end + 1;
        p->st = S_VALUE;
        return 1;
    }
    if (!final && (rp < 0 || rf < 0 || rc < 0)) return i > 0;
    return call_broken(p);
}

static int st_value(lilac_parser *p, int final) {
    const char *s = at(p);
    size_t n = avail(p);
    const char *f = n > p->scan ? memmem(s + p->scan, n - p->scan, T_PARAM_END, LEN(T_PARAM_END)) : NULL;
    if (!f) {
        if (final) return call_broken(p); /* the value never ended: it is content */
        /* resume where a "</parameter>" cut off by the fragment could start */
        if (n >= LEN(T_PARAM_END) && n - (LEN(T_PARAM_END) - 1) > p->scan) p->scan = n - (LEN(T_PARAM_END) - 1);
        return 0;
    }
    add_param(p, s + p->val_off, (size_t)(f - s) - p->val_off);
    p->pos += (size_t)(f - s) + LEN(T_PARAM_END);
    p->st = S_BODY;
    return 1;
}

static int st_call_end(lilac_parser *p, int final) {
    size_t i = skip_ws(at(p), avail(p));
    p->pos += i;
    const char *s = at(p);
    size_t n = avail(p);
    int r = starts_with(s, n, T_CALL_END);
    if (!final && (n == 0 || r < 0)) return i > 0;
    if (r > 0) p->pos += LEN(T_CALL_END);
    p->st = S_CONTENT; /* without "</tool_call>" what follows is content */
    return 1;
}

static void run(lilac_parser *p, int final) {
    int progress = 1;
    while (progress && !p->oom) {
        switch (p->st) {
        case S_START: progress = st_start(p, final); break;
        case S_REASON: progress = st_reason(p, final); break;
        case S_CONTENT: progress = st_content(p, final); break;
        case S_BODY: progress = st_body(p, final); break;
        case S_VALUE: progress = st_value(p, final); break;
        case S_CALL_END: progress = st_call_end(p, final); break;
        }
    }
    /* Drop the consumed bytes; offsets kept relative to pos stay valid. */
    if (p->pos) {
        memmove(p->in.data, p->in.data + p->pos, p->in.len - p->pos);
        p->in.len -= p->pos;
        p->in.data[p->in.len] = 0;
        p->pos = 0;
    }
}

/* ---- API ---------------------------------------------------------------- */

lilac_status lilac_parser_new(json_t *tools, unsigned flags, uint64_t seed, lilac_parser **out,
                              lilac_error *e) {
    *out = NULL;
    if (tools && !json_is_array(tools))
        return lilac_fail(e, LILAC_EINVAL, "output parser: tools is a JSON %s, not an array",
                          json_is_object(tools) ? "object" : "scalar");
    lilac_parser *p = calloc(1, sizeof *p);
    if (p) lilac_buf_append(&p->in, "", 0); /* in.data is never NULL: the scans pass it to memmem */
    if (!p || p->in.oom || !(p->calls = json_array())) {
        if (p) lilac_buf_free(&p->in);
        free(p);
        return lilac_fail(e, LILAC_ENOMEM, "output parser: out of memory");
    }
    p->tools = json_incref(tools);
    p->flags = flags;
    p->rng = seed;
    p->st = (flags & LILAC_PARSE_THINK_OPEN) ? S_REASON : S_START;
    p->reason.kind = LILAC_DELTA_REASONING;
    p->reason.drop = "\n";
    p->reason.hold = "\n";
    p->content.kind = LILAC_DELTA_CONTENT;
    p->content.hold = (flags & LILAC_PARSE_TOOLS) ? WS : NULL;
    *out = p;
    return LILAC_OK;
}

void lilac_parser_free(lilac_parser *p) {
    if (!p) return;
    json_decref(p->tools);
    json_decref(p->calls);
    lilac_buf_free(&p->in);
    lilac_buf_free(&p->reason.out);
    lilac_buf_free(&p->reason.tail);
    lilac_buf_free(&p->content.out);
    lilac_buf_free(&p->content.tail);
    lilac_buf_free(&p->args);
    lilac_buf_free(&p->key);
    free(p);
}

static lilac_status status(lilac_parser *p, lilac_error *e) {
    p->cb = NULL;
    p->ctx = NULL;
    if (p->oom || p->in.oom || p->key.oom)
        return lilac_fail(e, LILAC_ENOMEM, "output parser: out of memory (%zu bytes of output)", p->in.len);
    return LILAC_OK;
}

lilac_status lilac_parser_feed(lilac_parser *p, const char *text, size_t n, lilac_delta_fn cb, void *ctx,
                               lilac_error *e) {
    if (p->finished) return lilac_fail(e, LILAC_EINVAL, "output parser: text fed after finish");
    if (n && !text) return lilac_fail(e, LILAC_EINVAL, "output parser: %zu bytes fed from NULL", n);
    if (p->oom) return status(p, e);
    lilac_buf_append(&p->in, text, n);
    if (p->in.oom) return status(p, e);
    p->cb = cb;
    p->ctx = ctx;
    run(p, 0);
    return status(p, e);
}

lilac_status lilac_parser_finish(lilac_parser *p, lilac_delta_fn cb, void *ctx, lilac_error *e) {
    if (p->finished) return LILAC_OK;
    if (p->oom) return status(p, e);
    p->cb = cb;
    p->ctx = ctx;
    run(p, 1);
    sink_flush(p, &p->reason, 1);
    sink_flush(p, &p->content, json_array_size(p->calls) > 0);
    p->finished = 1;
    return status(p, e);
}

const char *lilac_parser_content(const lilac_parser *p, size_t *len) {
    if (len) *len = p->content.out.len;
    return p->content.out.len ? p->content.out.data : NULL;
}

const char *lilac_parser_reasoning(const lilac_parser *p, size_t *len) {
    if (len) *len = p->reason.out.len;
    return p->reason.out.len ? p->reason.out.data : NULL;
}

json_t *lilac_parser_tool_calls(const lilac_parser *p) { return p->calls; }

size_t lilac_parser_ntool_calls(const lilac_parser *p) { return json_array_size(p->calls); }
