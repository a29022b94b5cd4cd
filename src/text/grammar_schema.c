/* grammar_schema.c — JSON Schema to grammar rules.
 *
 * Supported (README "Structured outputs" lists the same):
 *   type (a name or a list; OpenAPI's nullable: true adds null), enum,
 *   const, properties, required, additionalProperties, items (one schema),
 *   minItems, maxItems, minLength, maxLength (a string longer than 4096
 *   characters is never written; in tool-call text a bounded string leaves
 *   out '<'), minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *   (numbers, or draft 4's booleans), format (grammar_format.c), anyOf,
 *   oneOf (written as anyOf: valid when the branches do not overlap), allOf
 *   of one schema, $ref to "#" or a JSON pointer inside the root ($defs,
 *   definitions), true/false schemas.
 * Decisions:
 *   - objects list their declared properties in schema order, each required
 *     one always and each optional one or not; undeclared properties are
 *     never written (that satisfies any additionalProperties); without
 *     "properties" an object is a map of any keys to additionalProperties'
 *     schema (any value when absent or true);
 *   - without "type" the keywords present decide (properties -> object,
 *     items -> array, bounds -> number, format -> string), else any value;
 *   - a maxItems above 256 writes at most 256 items;
 *   - annotations (title, description, default, examples, ...) and keywords
 *     JSON Schema does not define are ignored;
 *   - validation keywords lilac cannot enforce (pattern, multipleOf,
 *     uniqueItems, not, if/then/else,
 *     patternProperties, propertyNames, min/maxProperties, contains,
 *     prefixItems, dependent*, unevaluated*, ...) fail with their name and
 *     place, as does any schema no value satisfies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/grammar_impl.h"
#include "text/grammar_json.h"
#include "text/parse_schema.h"

#define MAX_NEST 48
#define MAX_ITEMS_WRITTEN 256
#define MAX_MIN_ITEMS 4096
#define MAX_STRING_LEN 4096
#define ALL_TYPES 127u

typedef struct {
    const json_t *s;
    unsigned types;
    int raw;
    lg_class no_first;
    int rule;
} memo_t;

typedef struct {
    lg_grammar *g;
    const json_t *root;
    const char *where;
    lilac_error *e;
    char path[600];
    memo_t *memo;
    int n_memo, cap_memo;
    int depth;
} ctx_t;

static const char *const unsupported[] = {
    "pattern", "multipleOf", "uniqueItems", "not", "if", "then", "else",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "contains", "minContains",
    "maxContains", "prefixItems", "additionalItems", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems", "contentSchema", "$dynamicRef", "$recursiveRef", "$anchor",
    "$dynamicAnchor", "$recursiveAnchor", NULL};

/* Keywords that constrain the value (everything else is an annotation). */
static const char *const validation[] = {"type", "enum", "const", "properties", "required", "additionalProperties",
                                         "items", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum", "format", "anyOf", "oneOf", "allOf", "$ref", "nullable",
                                         "minLength", "maxLength", NULL};

static int in_list(const char *k, const char *const *l) {
    for (; *l; l++)
        if (!strcmp(k, *l)) return 1;
    return 0;
}

static int fail(ctx_t *c, const char *fmt, const char *arg) {
    char m[256];
    snprintf(m, sizeof m, fmt, arg);
    lilac_fail(c->e, LILAC_EINVAL, "%s: %s at %s", c->where, m, c->path[0] ? c->path : "#");
    return -1;
}

/* Appends "/seg" (JSON pointer escaping) to the path; returns the old length. */
static size_t push_path(ctx_t *c, const char *seg) {
    size_t old = strlen(c->path), n = old;
    if (n == 0 && n + 1 < sizeof c->path) c->path[n++] = '#';
    if (n + 1 < sizeof c->path) c->path[n++] = '/';
    for (const char *p = seg; *p && n + 3 < sizeof c->path; p++) {
        if (*p == '~' || *p == '/') {
            c->path[n++] = '~';
            c->path[n++] = *p == '~' ? '0' : '1';
        } else {
            c->path[n++] = *p;
        }
    }
    c->path[n] = 0;
    return old;
}

static void pop_path(ctx_t *c, size_t old) { c->path[old] = 0; }

static int compile(ctx_t *c, const json_t *s, const lg_filter *f);

static int sub(ctx_t *c, const json_t *s, const lg_filter *f, const char *seg1, const char *seg2) {
    size_t old = push_path(c, seg1);
    if (seg2) push_path(c, seg2);
    int r = compile(c, s, f);
    pop_path(c, old);
    return r;
}

/* ------------------------------------------------------------------ values */

static int type_allowed(unsigned t, unsigned types) {
    return (t & types) || (t == LILAC_PT_INTEGER && (types & LILAC_PT_NUMBER));
}

static int raw_ok(const char *s, size_t n, const lg_filter *f) {
    if (memmem(s, n, "</parameter>", 12)) return 0;
    if (n && (unsigned char)s[0] < 128 && lg_class_has(&f->no_first, (unsigned char)s[0])) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && !strchr("\t\n\r", s[i])) return 0;
    return 1;
}

/* enum / const: the listed values that pass the filter, as literals. */
static int literals(ctx_t *c, const json_t *vals, int n, const lg_filter *f) {
    int r = lg_rule(c->g, "enum"), any = 0;
    for (int i = 0; i < n; i++) {
        const json_t *v = json_is_array(vals) ? json_array_get(vals, (size_t)i) : vals;
        if (!type_allowed(lilac_json_type(v), f->types)) continue;
        if (json_is_real(v) && !isfinite(json_real_value(v))) continue;
        if (f->raw) {
            if (!json_is_string(v) || !raw_ok(json_string_value(v), json_string_length(v), f)) continue;
            lg_seq s = {0};
            lg_seq_bytes(c->g, &s, json_string_value(v), json_string_length(v));
            lg_alt(c->g, r, &s);
            lg_seq_free(&s);
        } else {
            char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
            if (!t) return lilac_fail(c->e, LILAC_ENOMEM, "out of memory"), -1;
            lg_alt_str(c->g, r, t);
            free(t);
        }
        any = 1;
    }
    return any ? r : -2;
}

/* ------------------------------------------------------------------ numbers */

/* A bound keyword: 0 absent, 1 read into *x (excl: exclusive), -1 error. */
static int bound(ctx_t *c, const json_t *s, const char *key, const char *ex_key, double *x, int *excl) {
    const json_t *v = json_object_get(s, key), *ev = json_object_get(s, ex_key);
    *excl = 0;
    int have = 0;
    if (v) {
        if (!json_is_number(v)) return fail(c, "'%s' must be a number", key);
        *x = json_number_value(v);
        have = 1;
    }
    if (ev && json_is_boolean(ev)) { /* draft 4: a flag on the plain bound */
        if (json_is_true(ev)) *excl = 1;
    } else if (ev) {
        if (!json_is_number(ev)) return fail(c, "'%s' must be a number or a boolean", ex_key);
        double y = json_number_value(ev);
        if (!have || (key[1] == 'i' ? y >= *x : y <= *x)) *x = y, *excl = 1; /* the tighter bound wins */
        have = 1;
    }
    if (have && !isfinite(*x)) return fail(c, "'%s' must be finite", key);
    return have;
}

static int numeric(ctx_t *c, const json_t *s, int integer) {
    double lo = 0, hi = 0;
    int lx, hx;
    int hl = bound(c, s, "minimum", "exclusiveMinimum", &lo, &lx);
    if (hl < 0) return -1;
    int hh = bound(c, s, "maximum", "exclusiveMaximum", &hi, &hx);
    if (hh < 0) return -1;
    if (!hl && !hh) return integer ? lg_json_integer(c->g) : lg_json_number(c->g);
    lilac_error e2 = {0};
    int r;
    if (integer) {
        double a = !hl ? -1e19 : lx ? floor(lo) + 1 : ceil(lo), b = !hh ? 1e19 : hx ? ceil(hi) - 1 : floor(hi);
        long long A = a < -1e18 ? -1000000000000000000LL : (long long)a, B = b > 1e18 ? 1000000000000000000LL : (long long)b;
        r = lg_int_range(c->g, A, B, &e2);
    } else {
        r = lg_num_range(c->g, lo, lx, hl, hi, hx, hh, &e2);
    }
    if (r < 0) return fail(c, "%.200s", e2.msg);
    return r;
}

/* ------------------------------------------------------------------ strings */

static int count(ctx_t *c, const json_t *s, const char *key, long long *out);

static int string_rule(ctx_t *c, const json_t *s, const lg_filter *f) {
    const json_t *fmt = json_object_get(s, "format");
    if (fmt && !json_is_string(fmt)) return fail(c, "'%s' must be a string", "format");
    long long min = 0, max = -1;
    int hmin = count(c, s, "minLength", &min), hmax = count(c, s, "maxLength", &max);
    if (hmin < 0 || hmax < 0) return -1;
    if (hmin || hmax) {
        if (max >= 0 && max < min) return fail(c, "%s", "maxLength is below minLength");
        if (min > MAX_STRING_LEN) return fail(c, "minLength above %s is not supported", "4096");
        if (max > MAX_STRING_LEN) max = MAX_STRING_LEN; /* shorter strings satisfy it too */
        if (fmt && lg_format(c->g, json_string_value(fmt)) >= 0)
            return fail(c, "%s", "'format' with minLength/maxLength is not supported");
        if (f->raw) return lg_raw_text_len(c->g, (int)min, (int)max, &f->no_first);
        return lg_json_string_len(c->g, (int)min, (int)max);
    }
    int fr = -1;
    if (fmt) {
        /* a raw value that may not start with some characters cannot hold a format */
        int restricted = 0;
        for (int k = 0; k < 4; k++) restricted |= f->no_first.ascii[k] != 0;
        fr = lg_format(c->g, json_string_value(fmt));
        if (fr >= 0 && f->raw && restricted) return -2;
    }
    if (f->raw) return fr >= 0 ? fr : lg_raw_text(c->g, &f->no_first);
    if (fr < 0) return lg_json_string(c->g);
    int r = lg_rule(c->g, "fmtstring");
    lg_seq q = {0};
    lg_seq_str(c->g, &q, "\"");
    lg_seq_rule(c->g, &q, fr);
    lg_seq_str(c->g, &q, "\"");
    lg_alt(c->g, r, &q);
    lg_seq_free(&q);
    return r;
}

int lg_raw_text(lg_grammar *g, const lg_class *no_first) {
    int restricted = 0;
    for (int k = 0; k < 4 && no_first; k++) restricted |= no_first->ascii[k] != 0;
    if (!restricted && g->shared[LG_SH_RAW] >= 0) return g->shared[LG_SH_RAW];
    /* R_k: the text so far ends with the first k bytes of "</parameter>" (KMP
     * states; '<' occurs only first, so a mismatch falls back to R_1 on '<'
     * and to R_0 otherwise).  R_12 would be the whole tag: never reached. */
    static const char P[] = "</parameter>";
    int R[12];
    int first = -1;
    if (restricted || g->shared[LG_SH_RAW] < 0) {
        for (int k = 0; k < 12; k++) R[k] = lg_rule(g, k ? "rawk" : "raw");
        lg_class any;
        lg_class_clear(&any);
        lg_class_add(&any, 0x20, 0x7f);
        lg_class_add(&any, '\t', '\t');
        lg_class_add(&any, '\n', '\n');
        lg_class_add(&any, '\r', '\r');
        any.high = 1;
        lg_seq s = {0};
        for (int k = 0; k < 12; k++) {
            lg_class other = any;
            lg_class_del(&other, '<', '<');
            if (k) lg_class_del(&other, P[k], P[k]);
            lg_alt_empty(g, R[k]);
            lg_seq_class(g, &s, &other, 0);
            lg_seq_rule(g, &s, R[0]);
            lg_alt(g, R[k], &s);
            lg_seq_str(g, &s, "<");
            lg_seq_rule(g, &s, R[1]);
            lg_alt(g, R[k], &s);
            if (k > 0 && k < 11) {
                char ch[2] = {P[k], 0};
                lg_seq_str(g, &s, ch);
                lg_seq_rule(g, &s, R[k + 1]);
                lg_alt(g, R[k], &s);
            }
        }
        if (!restricted) {
            lg_seq_free(&s);
            return g->shared[LG_SH_RAW] = R[0];
        }
        first = lg_rule(g, "rawfirst");
        lg_class ok = any;
        lg_class_del(&ok, '<', '<');
        for (int b = 0; b < 128; b++)
            if (lg_class_has(no_first, b)) lg_class_del(&ok, b, b);
        lg_alt_empty(g, first);
        lg_seq_class(g, &s, &ok, 0);
        lg_seq_rule(g, &s, R[0]);
        lg_alt(g, first, &s);
        if (!lg_class_has(no_first, '<')) {
            lg_seq_str(g, &s, "<");
            lg_seq_rule(g, &s, R[1]);
            lg_alt(g, first, &s);
        }
        lg_seq_free(&s);
    }
    return first;
}

/* ------------------------------------------------------------------ objects */

static int object_rule(ctx_t *c, const json_t *s) {
    lg_grammar *g = c->g;
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required"),
                 *ap = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return fail(c, "'%s' must be an object", "properties");
    if (req && !json_is_array(req)) return fail(c, "'%s' must be an array of strings", "required");
    if (ap && !json_is_object(ap) && !json_is_boolean(ap))
        return fail(c, "'%s' must be a schema or a boolean", "additionalProperties");
    for (size_t i = 0; req && i < json_array_size(req); i++)
        if (!json_is_string(json_array_get(req, i))) return fail(c, "'%s' must be an array of strings", "required");
    /* the members: declared properties in order, then required names not declared */
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0, n = 0;
    const char **key = calloc(np + nr + 1, sizeof *key);
    int *val = calloc(np + nr + 1, sizeof *val);
    uint8_t *must = calloc(np + nr + 1, 1);
    int r = -1;
    if (!key || !val || !must) {
        lilac_fail(c->e, LILAC_ENOMEM, "out of memory");
        goto out;
    }
    const lg_filter all = {ALL_TYPES, 0, {{0}, 0}};
    const char *k;
    json_t *ps;
    json_object_foreach((json_t *)props, k, ps) {
        int required = 0;
        for (size_t i = 0; i < nr; i++) required |= !strcmp(json_string_value(json_array_get(req, i)), k);
        int v = sub(c, ps, &all, "properties", k);
        if (v == -1) goto out;
        if (v == -2) {
            if (required) {
                size_t old = push_path(c, "properties");
                push_path(c, k);
                fail(c, "the required property '%s' admits no value", k);
                pop_path(c, old);
                goto out;
            }
            continue;
        }
        key[n] = k;
        val[n] = v;
        must[n++] = (uint8_t)required;
    }
    for (size_t i = 0; i < nr; i++) {
        const char *rk = json_string_value(json_array_get(req, i));
        int seen = 0;
        for (size_t j = 0; j < n; j++) seen |= !strcmp(key[j], rk);
        if (seen || (props && json_object_get(props, rk))) continue;
        if (json_is_false(ap)) {
            fail(c, "the required property '%s' is not allowed by additionalProperties: false", rk);
            goto out;
        }
        int v = json_is_object(ap) ? sub(c, ap, &all, "additionalProperties", NULL) : lg_json_any(g);
        if (v < 0) {
            if (v == -2) fail(c, "the required property '%s' admits no value", rk);
            goto out;
        }
        key[n] = rk;
        val[n] = v;
        must[n++] = 1;
    }
    int ws = lg_json_ws(g);
    if (n == 0) {
        if (props || json_is_false(ap)) { /* only {} */
            r = lg_rule(g, "emptyobj");
            lg_seq q = {0};
            lg_seq_str(g, &q, "{");
            lg_seq_rule(g, &q, ws);
            lg_seq_str(g, &q, "}");
            lg_alt(g, r, &q);
            lg_seq_free(&q);
        } else if (json_is_object(ap) && json_object_size(ap)) {
            int v = sub(c, ap, &all, "additionalProperties", NULL);
            if (v == -1) goto out;
            r = v == -2 ? lg_rule(g, "emptyobj") : lg_json_map(g, v);
            if (v == -2) lg_alt_str(g, r, "{}");
        } else {
            r = lg_json_object_any(g);
        }
        goto out;
    }
    /* S(i): no member yet, candidates i..n-1; F(i): after a member.
     *   S(i) ::= "}" [none of i.. required] | kv_i F(i+1) | S(i+1) [i optional]
     *   F(i) ::= ws "}" [none of i.. required] | ws "," ws kv_i F(i+1) | F(i+1) [i optional] */
    int *S = malloc((n + 1) * sizeof *S), *F = malloc((n + 1) * sizeof *F), *kv = malloc(n * sizeof *kv);
    if (!S || !F || !kv) {
        free(S), free(F), free(kv);
        lilac_fail(c->e, LILAC_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        kv[i] = lg_rule(g, "kv");
        json_t *ks = json_string(key[i]);
        char *lit = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        lg_seq q = {0};
        lg_seq_str(g, &q, lit ? lit : "\"\"");
        free(lit);
        lg_seq_rule(g, &q, ws);
        lg_seq_str(g, &q, ":");
        lg_seq_rule(g, &q, ws);
        lg_seq_rule(g, &q, val[i]);
        lg_alt(g, kv[i], &q);
        lg_seq_free(&q);
    }
    for (size_t i = 0; i <= n; i++) S[i] = lg_rule(g, "objS"), F[i] = lg_rule(g, "objF");
    for (size_t i = n + 1; i-- > 0;) {
        int rest_required = 0;
        for (size_t j = i; j < n; j++) rest_required |= must[j];
        lg_seq q = {0};
        if (!rest_required) {
            lg_alt_str(g, S[i], "}");
            lg_seq_rule(g, &q, ws);
            lg_seq_str(g, &q, "}");
            lg_alt(g, F[i], &q);
        }
        if (i < n) {
            lg_seq_rule(g, &q, kv[i]);
            lg_seq_rule(g, &q, F[i + 1]);
            lg_alt(g, S[i], &q);
            lg_seq_rule(g, &q, ws);
            lg_seq_str(g, &q, ",");
            lg_seq_rule(g, &q, ws);
            lg_seq_rule(g, &q, kv[i]);
            lg_seq_rule(g, &q, F[i + 1]);
            lg_alt(g, F[i], &q);
            if (!must[i]) {
                lg_alt_rule(g, S[i], S[i + 1]);
                lg_alt_rule(g, F[i], F[i + 1]);
            }
        }
        lg_seq_free(&q);
    }
    r = lg_rule(g, "object");
    lg_seq q = {0};
    lg_seq_str(g, &q, "{");
    lg_seq_rule(g, &q, ws);
    lg_seq_rule(g, &q, S[0]);
    lg_alt(g, r, &q);
    lg_seq_free(&q);
    free(S), free(F), free(kv);
out:
    free(key);
    free(val);
    free(must);
    return r;
}

/* ------------------------------------------------------------------- arrays */

static int count(ctx_t *c, const json_t *s, const char *key, long long *out) {
    const json_t *v = json_object_get(s, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) return fail(c, "'%s' must be a non-negative integer", key);
    *out = json_integer_value(v);
    return 1;
}

static int array_rule(ctx_t *c, const json_t *s) {
    lg_grammar *g = c->g;
    const json_t *items = json_object_get(s, "items");
    if (items && json_is_array(items)) return fail(c, "'%s' as an array (a tuple) is not supported", "items");
    if (items && !json_is_object(items) && !json_is_boolean(items)) return fail(c, "'%s' must be a schema", "items");
    long long min = 0, max = -1;
    if (count(c, s, "minItems", &min) < 0 || count(c, s, "maxItems", &max) < 0) return -1;
    if (max >= 0 && max < min) return fail(c, "%s", "maxItems is below minItems");
    if (min > MAX_MIN_ITEMS) return fail(c, "minItems above %s is not supported", "4096");
    if (max > MAX_ITEMS_WRITTEN && max > min) max = min > MAX_ITEMS_WRITTEN ? min : MAX_ITEMS_WRITTEN;
    const lg_filter all = {ALL_TYPES, 0, {{0}, 0}};
    int item = items ? sub(c, items, &all, "items", NULL) : lg_json_any_at(g, 1);
    if (item == -1) return -1;
    int ws = lg_json_ws(g);
    int r = lg_rule(g, "array");
    lg_seq q = {0};
    if (item == -2) max = 0;
    if (item == -2 && min > 0) return fail(c, "%s", "the items admit no value, but minItems is above 0");
    /* A(k): k items written.  A(k) ::= ws "]" [k >= min] | ws "," ws item A(k+1) [k < max];
     * unbounded: A(min) loops on itself. */
    int top = max >= 0 ? (int)max : (int)(min > 1 ? min : 1);
    int *A = malloc(((size_t)top + 2) * sizeof *A);
    if (!A) return lilac_fail(c->e, LILAC_ENOMEM, "out of memory"), -1;
    for (int k = 1; k <= top; k++) A[k] = lg_rule(g, "items");
    for (int k = 1; k <= top; k++) {
        if (k >= min) {
            lg_seq_rule(g, &q, ws);
            lg_seq_str(g, &q, "]");
            lg_alt(g, A[k], &q);
        }
        if (max < 0 || k < max) {
            lg_seq_rule(g, &q, ws);
            lg_seq_str(g, &q, ",");
            lg_seq_rule(g, &q, ws);
            lg_seq_rule(g, &q, item);
            lg_seq_rule(g, &q, k < top ? A[k + 1] : A[top]);
            lg_alt(g, A[k], &q);
        }
    }
    int body = lg_rule(g, "abody");
    if (min == 0) lg_alt_str(g, body, "]");
    if (max != 0) {
        lg_seq_rule(g, &q, item);
        lg_seq_rule(g, &q, A[1]);
        lg_alt(g, body, &q);
    }
    lg_seq_str(g, &q, "[");
    lg_seq_rule(g, &q, ws);
    lg_seq_rule(g, &q, body);
    lg_alt(g, r, &q);
    lg_seq_free(&q);
    free(A);
    return r;
}

/* ------------------------------------------------------------------- $ref */

static const json_t *resolve(ctx_t *c, const char *ref) {
    if (ref[0] != '#') return NULL;
    const json_t *at = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/') return NULL;
    char seg[256];
    while (*p == '/' && at) {
        p++;
        size_t n = 0;
        for (; *p && *p != '/' && n + 1 < sizeof seg; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1')) seg[n++] = p[1] == '0' ? '~' : '/', p++;
            else seg[n++] = *p;
        }
        seg[n] = 0;
        if (json_is_object(at)) at = json_object_get(at, seg);
        else if (json_is_array(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = *seg && !*end && i >= 0 ? json_array_get(at, (size_t)i) : NULL;
        } else at = NULL;
    }
    return at;
}

static int ref_rule(ctx_t *c, const json_t *s, const lg_filter *f) {
    const char *ref = json_string_value(json_object_get(s, "$ref"));
    if (!ref) return fail(c, "'%s' must be a string", "$ref");
    const json_t *t = resolve(c, ref);
    if (!t) return fail(c, "'$ref' \"%s\" does not name a schema inside this one (only local refs are supported)", ref);
    for (int i = 0; i < c->n_memo; i++)
        if (c->memo[i].s == t && c->memo[i].types == f->types && c->memo[i].raw == f->raw &&
            lg_class_eq(&c->memo[i].no_first, &f->no_first))
            return c->memo[i].rule;
    if (c->n_memo == c->cap_memo) {
        int cap = c->cap_memo ? c->cap_memo * 2 : 16;
        memo_t *m = realloc(c->memo, (size_t)cap * sizeof *m);
        if (!m) return lilac_fail(c->e, LILAC_ENOMEM, "out of memory"), -1;
        c->memo = m;
        c->cap_memo = cap;
    }
    /* the rule exists before its body, so recursive schemas refer to it */
    int r = lg_rule(c->g, "ref");
    c->memo[c->n_memo++] = (memo_t){t, f->types, f->raw, f->no_first, r};
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref);
    int v = compile(c, t, f);
    memcpy(c->path, saved, sizeof saved);
    if (v == -1) return -1;
    if (v >= 0) lg_alt_rule(c->g, r, v); /* -2: r stays empty and finalize drops its uses */
    return r;
}

/* ---------------------------------------------------------------- schemas */

static unsigned type_bits(const char *t) {
    static const struct {
        const char *n;
        unsigned b;
    } k[] = {{"string", LILAC_PT_STRING}, {"integer", LILAC_PT_INTEGER}, {"number", LILAC_PT_NUMBER},
             {"boolean", LILAC_PT_BOOLEAN}, {"null", LILAC_PT_NULL}, {"array", LILAC_PT_ARRAY},
             {"object", LILAC_PT_OBJECT}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(t, k[i].n)) return k[i].b;
    return 0;
}

/* Any value of the allowed types. */
static int any_of_types(ctx_t *c, const lg_filter *f) {
    lg_grammar *g = c->g;
    if (f->raw) return lg_raw_text(g, &f->no_first);
    if ((f->types & ALL_TYPES) == ALL_TYPES) return lg_json_any(g);
    int r = lg_rule(g, "anyof");
    if (f->types & LILAC_PT_STRING) lg_alt_rule(g, r, lg_json_string(g));
    if (f->types & LILAC_PT_NUMBER) lg_alt_rule(g, r, lg_json_number(g));
    else if (f->types & LILAC_PT_INTEGER) lg_alt_rule(g, r, lg_json_integer(g));
    if (f->types & LILAC_PT_BOOLEAN) lg_alt_rule(g, r, lg_json_bool(g));
    if (f->types & LILAC_PT_NULL) lg_alt_rule(g, r, lg_json_null(g));
    if (f->types & LILAC_PT_OBJECT) lg_alt_rule(g, r, lg_json_object_any(g));
    if (f->types & LILAC_PT_ARRAY) lg_alt_rule(g, r, lg_json_array_of(g, lg_json_any_at(g, 1)));
    return r;
}

static int compile(ctx_t *c, const json_t *s, const lg_filter *f) {
    if (c->depth > MAX_NEST) return fail(c, "the schema nests deeper than %s levels", "48");
    if (json_is_true(s)) return any_of_types(c, f);
    if (json_is_false(s)) return -2;
    if (!json_is_object(s)) return fail(c, "%s", "a schema must be an object or a boolean");
    const char *k;
    json_t *v;
    int nval = 0;
    json_object_foreach((json_t *)s, k, v) {
        if (in_list(k, unsupported)) return fail(c, "unsupported keyword '%s'", k);
        nval += in_list(k, validation);
    }
    if (nval == 0) return any_of_types(c, f);
    c->depth++;
    int r = -1;
    const json_t *t;
    if ((t = json_object_get(s, "$ref"))) {
        if (nval > 1) {
            r = fail(c, "%s", "'$ref' beside other validation keywords is not supported");
        } else {
            r = ref_rule(c, s, f);
        }
        goto out;
    }
    if ((t = json_object_get(s, "allOf"))) {
        if (!json_is_array(t) || json_array_size(t) != 1 || nval > 1)
            r = fail(c, "%s", "'allOf' is supported only with a single schema and no other validation keywords");
        else
            r = sub(c, json_array_get(t, 0), f, "allOf", "0");
        goto out;
    }
    /* the types this schema allows, within the filter */
    lg_filter tf = *f;
    if ((t = json_object_get(s, "type"))) {
        unsigned bits = 0;
        if (json_is_string(t)) bits = type_bits(json_string_value(t));
        for (size_t i = 0; json_is_array(t) && i < json_array_size(t); i++) {
            unsigned b = json_is_string(json_array_get(t, i)) ? type_bits(json_string_value(json_array_get(t, i))) : 0;
            if (!b) {
                r = fail(c, "%s", "'type' must name JSON Schema types");
                goto out;
            }
            bits |= b;
        }
        if (!bits) {
            r = fail(c, "%s", "'type' must name JSON Schema types");
            goto out;
        }
        if (json_is_true(json_object_get(s, "nullable"))) bits |= LILAC_PT_NULL;
        if (bits & LILAC_PT_NUMBER) bits |= LILAC_PT_INTEGER;
        tf.types &= bits;
        if (!tf.types) {
            r = -2;
            goto out;
        }
    }
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++) {
        if (!(t = json_object_get(s, unions[u]))) continue;
        if (!json_is_array(t) || json_array_size(t) == 0) {
            r = fail(c, "'%s' must be a non-empty array of schemas", unions[u]);
            goto out;
        }
        if (nval > 1 + (json_object_get(s, "type") != NULL) + (json_object_get(s, "nullable") != NULL)) {
            r = fail(c, "'%s' beside other validation keywords (but 'type') is not supported", unions[u]);
            goto out;
        }
        r = lg_rule(c->g, unions[u]);
        int any = 0;
        for (size_t i = 0; i < json_array_size(t); i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            int b = sub(c, json_array_get(t, i), &tf, unions[u], idx);
            if (b == -1) {
                r = -1;
                goto out;
            }
            if (b >= 0) lg_alt_rule(c->g, r, b), any = 1;
        }
        if (!any) r = -2;
        goto out;
    }
    if ((t = json_object_get(s, "enum"))) {
        if (!json_is_array(t) || json_array_size(t) == 0) {
            r = fail(c, "'%s' must be a non-empty array", "enum");
            goto out;
        }
        r = literals(c, t, (int)json_array_size(t), &tf);
        goto out;
    }
    if ((t = json_object_get(s, "const"))) {
        r = literals(c, t, 1, &tf);
        goto out;
    }
    if (!json_object_get(s, "type")) { /* the keywords present decide */
        unsigned inf = 0;
        static const char *const skw[] = {"format", "minLength", "maxLength", NULL},
                                 *const okw[] = {"properties", "required", "additionalProperties", NULL},
                                 *const akw[] = {"items", "minItems", "maxItems", NULL},
                                 *const nkw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
        for (int i = 0; okw[i]; i++) inf |= json_object_get(s, okw[i]) ? LILAC_PT_OBJECT : 0;
        for (int i = 0; akw[i]; i++) inf |= json_object_get(s, akw[i]) ? LILAC_PT_ARRAY : 0;
        for (int i = 0; nkw[i]; i++) inf |= json_object_get(s, nkw[i]) ? LILAC_PT_NUMBER | LILAC_PT_INTEGER : 0;
        for (int i = 0; skw[i]; i++) inf |= json_object_get(s, skw[i]) ? LILAC_PT_STRING : 0;
        if (json_is_true(json_object_get(s, "nullable"))) inf |= LILAC_PT_NULL;
        if (inf) tf.types &= inf;
        if (!tf.types) {
            r = -2;
            goto out;
        }
        if (!inf) {
            r = any_of_types(c, &tf);
            goto out;
        }
    }
    if (tf.raw) tf.types &= LILAC_PT_STRING;
    r = lg_rule(c->g, "value");
    int any = 0, b;
    if (tf.types & LILAC_PT_STRING) {
        if ((b = string_rule(c, s, &tf)) == -1) goto fail;
        if (b >= 0) lg_alt_rule(c->g, r, b), any = 1;
    }
    if (tf.types & (LILAC_PT_NUMBER | LILAC_PT_INTEGER)) {
        if ((b = numeric(c, s, !(tf.types & LILAC_PT_NUMBER))) == -1) goto fail;
        lg_alt_rule(c->g, r, b), any = 1;
    }
    if (tf.types & LILAC_PT_BOOLEAN) lg_alt_rule(c->g, r, lg_json_bool(c->g)), any = 1;
    if (tf.types & LILAC_PT_NULL) lg_alt_rule(c->g, r, lg_json_null(c->g)), any = 1;
    if (tf.types & LILAC_PT_OBJECT) {
        if ((b = object_rule(c, s)) == -1) goto fail;
        lg_alt_rule(c->g, r, b), any = 1;
    }
    if (tf.types & LILAC_PT_ARRAY) {
        if ((b = array_rule(c, s)) == -1) goto fail;
        lg_alt_rule(c->g, r, b), any = 1;
    }
    if (!any) r = -2;
    goto out;
fail:
    r = -1;
out:
    c->depth--;
    return r;
}

int lg_schema_rule(lg_grammar *g, const json_t *root, const json_t *schema, const lg_filter *f, const char *where,
                   const char *path, lilac_error *e) {
    ctx_t c = {0};
    c.g = g;
    c.root = root;
    c.where = where;
    c.e = e;
    snprintf(c.path, sizeof c.path, "%s", path ? path : "");
    int r = compile(&c, schema, f);
    free(c.memo);
    if (r >= 0 && g->oom) return lilac_fail(e, LILAC_ENOMEM, "%s: the grammar is too large", where), -1;
    return r;
}

int lg_json_schema(lg_grammar *g, const json_t *schema, const char *where, lilac_error *e) {
    const lg_filter all = {ALL_TYPES, 0, {{0}, 0}};
    int r = lg_schema_rule(g, schema, schema, &all, where, "", e);
    if (r == -2) return lilac_fail(e, LILAC_EINVAL, "%s: the schema admits no value", where), -1;
    return r;
}
