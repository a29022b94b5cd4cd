/* grammar_json.c — JSON text as grammar rules: whitespace, strings, numbers,
 * literals and "any value", shared within a grammar (made on first use).
 *
 * Choices that keep generation finite and the output parseable by strict
 * parsers (jansson, Python's json):
 *   - whitespace is "", " " or a newline and up to 20 spaces/tabs (compact,
 *     spaced and pretty-printed JSON; never an endless run of blanks);
 *   - strings are valid UTF-8 with JSON's escapes; \u escapes never name a
 *     surrogate (jansson rejects lone ones);
 *   - integers have at most 18 digits (they fit int64), numbers at most 15
 *     integer and 15 fraction digits and a 2-digit exponent (they fit a
 *     double);
 *   - "any value" nests at most LG_ANY_DEPTH objects/arrays deep.
 * A string's free text is a star followed by its tail (tail-called), so the
 * whole text up to the closing quote is one frame: the mask classifies it
 * once per grammar. */
#include <stdio.h>
#include <string.h>

#include "text/grammar_impl.h"
#include "text/grammar_json.h"

void lg_class_digits(lg_class *c, int lo, int hi) {
    lg_class_clear(c);
    lg_class_add(c, '0' + lo, '0' + hi);
}

int lg_rep_class(lg_grammar *g, const lg_class *c, int min, int max, const char *name) {
    /* R_k: k characters written; R_k ::= c R_{k+1} (k < max) | "" (k >= min) */
    if (max < 0) {
        int r = lg_rule(g, name);
        lg_seq s = {0};
        for (int i = 0; i < min; i++) lg_seq_class(g, &s, c, 0);
        lg_seq_class(g, &s, c, 1);
        lg_alt(g, r, &s);
        lg_seq_free(&s);
        return r;
    }
    int next = -1, r = -1;
    for (int k = max; k >= 0; k--) {
        r = lg_rule(g, name);
        lg_seq s = {0};
        if (k < max) {
            lg_seq_class(g, &s, c, 0);
            lg_seq_rule(g, &s, next);
            lg_alt(g, r, &s);
        }
        if (k >= min) lg_alt(g, r, &s);
        lg_seq_free(&s);
        next = r;
    }
    return r;
}

int lg_json_ws(lg_grammar *g) {
    if (g->shared[LG_SH_WS] >= 0) return g->shared[LG_SH_WS];
    lg_class c;
    lg_class_clear(&c);
    lg_class_add(&c, ' ', ' ');
    lg_class_add(&c, '\t', '\t');
    int ind = lg_rep_class(g, &c, 0, 20, "indent");
    int r = lg_rule(g, "ws");
    lg_alt_empty(g, r);
    lg_alt_str(g, r, " ");
    lg_seq s = {0};
    lg_seq_str(g, &s, "\n");
    lg_seq_rule(g, &s, ind);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return g->shared[LG_SH_WS] = r;
}

void lg_class_json_char(lg_class *c) {
    lg_class_clear(c);
    lg_class_add(c, 0x20, 0x7f);
    lg_class_del(c, '"', '"');
    lg_class_del(c, '\\', '\\');
    c->high = 1;
}

/* The string body after the opening quote: free text, escapes, the closing quote. */
static int strbody(lg_grammar *g) {
    if (g->shared[LG_SH_STRBODY] >= 0) return g->shared[LG_SH_STRBODY];
    int body = lg_rule(g, "strbody"), tail = lg_rule(g, "strtail");
    g->shared[LG_SH_STRBODY] = body;
    lg_class ch, esc, hex, hex_nd, d07;
    lg_class_json_char(&ch);
    lg_class_clear(&esc);
    const char *e = "\"\\/bfnrt";
    for (const char *p = e; *p; p++) lg_class_add(&esc, *p, *p);
    lg_class_clear(&hex);
    lg_class_add(&hex, '0', '9');
    lg_class_add(&hex, 'a', 'f');
    lg_class_add(&hex, 'A', 'F');
    hex_nd = hex; /* a first hex digit that cannot start a surrogate */
    lg_class_del(&hex_nd, 'd', 'd');
    lg_class_del(&hex_nd, 'D', 'D');
    lg_class_digits(&d07, 0, 7);
    lg_seq s = {0};
    lg_seq_class(g, &s, &ch, 1);
    lg_seq_rule(g, &s, tail);
    lg_alt(g, body, &s);
    lg_alt_str(g, tail, "\"");
    lg_seq_str(g, &s, "\\");
    lg_seq_class(g, &s, &esc, 0);
    lg_seq_rule(g, &s, body);
    lg_alt(g, tail, &s);
    lg_seq_str(g, &s, "\\u");
    lg_seq_class(g, &s, &hex_nd, 0);
    lg_seq_class(g, &s, &hex, 0);
    lg_seq_class(g, &s, &hex, 0);
    lg_seq_class(g, &s, &hex, 0);
    lg_seq_rule(g, &s, body);
    lg_alt(g, tail, &s);
    lg_seq_str(g, &s, "\\u");
    lg_class dd;
    lg_class_clear(&dd);
    lg_class_add(&dd, 'd', 'd');
    lg_class_add(&dd, 'D', 'D');
    lg_seq_class(g, &s, &dd, 0);
    lg_seq_class(g, &s, &d07, 0);
    lg_seq_class(g, &s, &hex, 0);
    lg_seq_class(g, &s, &hex, 0);
    lg_seq_rule(g, &s, body);
    lg_alt(g, tail, &s);
    lg_seq_free(&s);
    return body;
}

/* The text of a string of min..max characters (max < 0: no bound) after the
 * opening quote, the closing quote included: B_k for k characters written,
 *   B_k ::= "\"" [k >= min] | char B_{k+1} | escape B_{k+1}   [k < max]
 * and from min on without a bound, the free body (strbody).  One rule per
 * count, so the mask classifies each count once. */
int lg_json_string_len(lg_grammar *g, int min, int max) {
    int top = max >= 0 ? max : min, next = max >= 0 ? -1 : strbody(g), r = -1;
    lg_class ch, esc, hex, hex_nd, d07, dd;
    lg_class_json_char(&ch);
    lg_class_clear(&esc);
    for (const char *p = "\"\\/bfnrt"; *p; p++) lg_class_add(&esc, *p, *p);
    lg_class_clear(&hex);
    lg_class_add(&hex, '0', '9');
    lg_class_add(&hex, 'a', 'f');
    lg_class_add(&hex, 'A', 'F');
    hex_nd = hex;
    lg_class_del(&hex_nd, 'd', 'd');
    lg_class_del(&hex_nd, 'D', 'D');
    lg_class_digits(&d07, 0, 7);
    lg_class_clear(&dd);
    lg_class_add(&dd, 'd', 'd');
    lg_class_add(&dd, 'D', 'D');
    for (int k = top; k >= 0; k--) {
        if (k == top && max < 0) {
            r = next; /* B_min: the free body */
            continue;
        }
        r = lg_rule(g, "strlen");
        lg_seq s = {0};
        if (k >= min) lg_alt_str(g, r, "\"");
        if (k < top) {
            lg_seq_class(g, &s, &ch, 0);
            lg_seq_rule(g, &s, next);
            lg_alt(g, r, &s);
            lg_seq_str(g, &s, "\\");
            lg_seq_class(g, &s, &esc, 0);
            lg_seq_rule(g, &s, next);
            lg_alt(g, r, &s);
            lg_seq_str(g, &s, "\\u");
            lg_seq_class(g, &s, &hex_nd, 0);
            lg_seq_class(g, &s, &hex, 0);
            lg_seq_class(g, &s, &hex, 0);
            lg_seq_class(g, &s, &hex, 0);
            lg_seq_rule(g, &s, next);
            lg_alt(g, r, &s);
            lg_seq_str(g, &s, "\\u");
            lg_seq_class(g, &s, &dd, 0);
            lg_seq_class(g, &s, &d07, 0);
            lg_seq_class(g, &s, &hex, 0);
            lg_seq_class(g, &s, &hex, 0);
            lg_seq_rule(g, &s, next);
            lg_alt(g, r, &s);
        }
        lg_seq_free(&s);
        next = r;
    }
    int q = lg_rule(g, "string");
    lg_seq s = {0};
    lg_seq_str(g, &s, "\"");
    lg_seq_rule(g, &s, r);
    lg_alt(g, q, &s);
    lg_seq_free(&s);
    return q;
}

/* Raw parameter text of min..max characters: '<' is left out, so the text
 * never holds "</parameter>" whatever its length. */
int lg_raw_text_len(lg_grammar *g, int min, int max, const lg_class *no_first) {
    lg_class any;
    lg_class_clear(&any);
    lg_class_add(&any, 0x20, 0x7f);
    lg_class_add(&any, '\t', '\t');
    lg_class_add(&any, '\n', '\n');
    lg_class_add(&any, '\r', '\r');
    lg_class_del(&any, '<', '<');
    any.high = 1;
    int top = max >= 0 ? max : min, next = -1, r = -1;
    for (int k = top; k >= 0; k--) {
        lg_class c = any;
        if (k == 0 && no_first)
            for (int b = 0; b < 128; b++)
                if (lg_class_has(no_first, b)) lg_class_del(&c, b, b);
        r = lg_rule(g, "rawlen");
        lg_seq s = {0};
        if (k >= min) lg_alt_empty(g, r);
        if (k < top || max < 0) {
            lg_seq_class(g, &s, &c, 0);
            lg_seq_rule(g, &s, k < top ? next : r);
            lg_alt(g, r, &s);
        }
        lg_seq_free(&s);
        next = r;
    }
    return r;
}

int lg_json_string(lg_grammar *g) {
    if (g->shared[LG_SH_STRING] >= 0) return g->shared[LG_SH_STRING];
    int r = lg_rule(g, "string");
    g->shared[LG_SH_STRING] = r;
    lg_seq s = {0};
    lg_seq_str(g, &s, "\"");
    lg_seq_rule(g, &s, strbody(g));
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

/* [1-9][0-9]{0,more} | "0" */
static int unsigned_int(lg_grammar *g, int more, const char *name) {
    lg_class d, nz;
    lg_class_digits(&d, 0, 9);
    lg_class_digits(&nz, 1, 9);
    int rest = lg_rep_class(g, &d, 0, more, "digits");
    int r = lg_rule(g, name);
    lg_alt_str(g, r, "0");
    lg_seq s = {0};
    lg_seq_class(g, &s, &nz, 0);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

int lg_json_integer(lg_grammar *g) {
    if (g->shared[LG_SH_INTEGER] >= 0) return g->shared[LG_SH_INTEGER];
    int u = unsigned_int(g, 17, "uint");
    int r = lg_rule(g, "integer");
    lg_alt_rule(g, r, u);
    lg_seq s = {0};
    lg_seq_str(g, &s, "-");
    lg_seq_rule(g, &s, u);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return g->shared[LG_SH_INTEGER] = r;
}

int lg_json_fraction(lg_grammar *g) {
    lg_class d;
    lg_class_digits(&d, 0, 9);
    int digits = lg_rep_class(g, &d, 1, 15, "frac");
    int r = lg_rule(g, "fraction");
    lg_seq s = {0};
    lg_seq_str(g, &s, ".");
    lg_seq_rule(g, &s, digits);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

int lg_json_number(lg_grammar *g) {
    if (g->shared[LG_SH_NUMBER] >= 0) return g->shared[LG_SH_NUMBER];
    lg_class d, e, sign;
    lg_class_digits(&d, 0, 9);
    lg_class_clear(&e);
    lg_class_add(&e, 'e', 'e');
    lg_class_add(&e, 'E', 'E');
    lg_class_clear(&sign);
    lg_class_add(&sign, '+', '+');
    lg_class_add(&sign, '-', '-');
    int u = unsigned_int(g, 14, "uint15");
    int frac = lg_json_fraction(g);
    int exp_digits = lg_rep_class(g, &d, 1, 2, "exp");
    int ex = lg_rule(g, "exponent");
    lg_seq s = {0};
    lg_seq_class(g, &s, &e, 0);
    lg_seq_rule(g, &s, exp_digits);
    lg_alt(g, ex, &s);
    lg_seq_class(g, &s, &e, 0);
    lg_seq_class(g, &s, &sign, 0);
    lg_seq_rule(g, &s, exp_digits);
    lg_alt(g, ex, &s);
    int tail = lg_rule(g, "numtail"); /* fraction? exponent? */
    lg_alt_empty(g, tail);
    lg_alt_rule(g, tail, frac);
    lg_alt_rule(g, tail, ex);
    lg_seq_rule(g, &s, frac);
    lg_seq_rule(g, &s, ex);
    lg_alt(g, tail, &s);
    int r = lg_rule(g, "number");
    lg_seq_rule(g, &s, u);
    lg_seq_rule(g, &s, tail);
    lg_alt(g, r, &s);
    lg_seq_str(g, &s, "-");
    lg_seq_rule(g, &s, u);
    lg_seq_rule(g, &s, tail);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return g->shared[LG_SH_NUMBER] = r;
}

int lg_json_bool(lg_grammar *g) {
    if (g->shared[LG_SH_BOOL] >= 0) return g->shared[LG_SH_BOOL];
    int r = lg_rule(g, "boolean");
    lg_alt_str(g, r, "true");
    lg_alt_str(g, r, "false");
    return g->shared[LG_SH_BOOL] = r;
}

int lg_json_null(lg_grammar *g) {
    if (g->shared[LG_SH_NULL] >= 0) return g->shared[LG_SH_NULL];
    int r = lg_rule(g, "null");
    lg_alt_str(g, r, "null");
    return g->shared[LG_SH_NULL] = r;
}

/* "[" ws ( "]" | item rest ) with rest ::= ws "]" | ws "," ws item rest */
static int any_array(lg_grammar *g, int item) {
    int ws = lg_json_ws(g);
    int rest = lg_rule(g, "arest"), r = lg_rule(g, "array");
    lg_seq s = {0};
    lg_seq_rule(g, &s, ws);
    lg_seq_str(g, &s, "]");
    lg_alt(g, rest, &s);
    lg_seq_rule(g, &s, ws);
    lg_seq_str(g, &s, ",");
    lg_seq_rule(g, &s, ws);
    lg_seq_rule(g, &s, item);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, rest, &s);
    int body = lg_rule(g, "abody");
    lg_alt_str(g, body, "]");
    lg_seq_rule(g, &s, item);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, body, &s);
    lg_seq_str(g, &s, "[");
    lg_seq_rule(g, &s, ws);
    lg_seq_rule(g, &s, body);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

int lg_json_map(lg_grammar *g, int value) {
    int ws = lg_json_ws(g), str = lg_json_string(g);
    int member = lg_rule(g, "member"), rest = lg_rule(g, "orest"), body = lg_rule(g, "obody"), r = lg_rule(g, "object");
    lg_seq s = {0};
    lg_seq_rule(g, &s, str);
    lg_seq_rule(g, &s, ws);
    lg_seq_str(g, &s, ":");
    lg_seq_rule(g, &s, ws);
    lg_seq_rule(g, &s, value);
    lg_alt(g, member, &s);
    lg_seq_rule(g, &s, ws);
    lg_seq_str(g, &s, "}");
    lg_alt(g, rest, &s);
    lg_seq_rule(g, &s, ws);
    lg_seq_str(g, &s, ",");
    lg_seq_rule(g, &s, ws);
    lg_seq_rule(g, &s, member);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, rest, &s);
    lg_alt_str(g, body, "}");
    lg_seq_rule(g, &s, member);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, body, &s);
    lg_seq_str(g, &s, "{");
    lg_seq_rule(g, &s, ws);
    lg_seq_rule(g, &s, body);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

int lg_json_array_of(lg_grammar *g, int item) { return any_array(g, item); }

static int any_at(lg_grammar *g, int d);

static int any_object_at(lg_grammar *g, int d) {
    if (g->any_obj[d] >= 0) return g->any_obj[d];
    int inner = d < LG_ANY_DEPTH ? any_at(g, d + 1) : -1;
    return g->any_obj[d] = lg_json_map(g, inner >= 0 ? inner : any_at(g, LG_ANY_DEPTH));
}

/* Any value at nesting depth d: scalars, and containers while d < the limit. */
static int any_at(lg_grammar *g, int d) {
    if (g->any[d] >= 0) return g->any[d];
    char name[16];
    snprintf(name, sizeof name, "any%d", d);
    int r = lg_rule(g, name);
    g->any[d] = r;
    lg_alt_rule(g, r, lg_json_string(g));
    lg_alt_rule(g, r, lg_json_number(g));
    lg_alt_rule(g, r, lg_json_bool(g));
    lg_alt_rule(g, r, lg_json_null(g));
    if (d < LG_ANY_DEPTH) {
        lg_alt_rule(g, r, any_object_at(g, d));
        lg_alt_rule(g, r, any_array(g, any_at(g, d + 1)));
    }
    return r;
}

int lg_json_any(lg_grammar *g) { return any_at(g, 0); }
int lg_json_any_at(lg_grammar *g, int depth) { return any_at(g, depth < LG_ANY_DEPTH ? depth : LG_ANY_DEPTH); }
int lg_json_object_any(lg_grammar *g) { return any_object_at(g, 0); }

int lg_answer_root(lg_grammar *g, int value) {
    int r = lg_rule(g, "root");
    lg_alt_rule(g, r, value);
    lg_seq s = {0};
    lg_seq_str(g, &s, "\n");
    lg_seq_rule(g, &s, value);
    lg_alt(g, r, &s);
    lg_seq_str(g, &s, "\n\n");
    lg_seq_rule(g, &s, value);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}
