/* grammar_num.c — numeric ranges as grammar rules (JSON Schema's minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum).
 *
 * Integers: the exact set [lo, hi], written without leading zeros, split by
 * digit count and then by the classic digit-prefix decomposition (a range of
 * n-digit numbers becomes a few sequences of digit classes).
 * Numbers: a subset of the bounded interval that a grammar can state simply:
 * the integers inside it, and "n.ddd" only where every fraction stays inside
 * ([n, n+1) for n >= 0, (-(n+1), -n] for "-n.ddd"); no exponent.  Bounds
 * whose interval holds no such value (e.g. [0.1, 0.2]) are refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "text/grammar_impl.h"
#include "text/grammar_json.h"

#define MAX_DIGITS 18
static const long long BIG = 999999999999999999LL; /* 18 nines */

/* Alternatives of rule r for the n-digit numbers in [a, b] (digit strings
 * of the same length n), each after the sequence prefix. */
static void digits_rec(lg_grammar *g, int r, const lg_seq *prefix, const char *a, const char *b, int n) {
    lg_seq s = {0};
    lg_class c;
    if (n == 0) {
        lg_seq_append(g, &s, prefix);
        lg_alt(g, r, &s);
        lg_seq_free(&s);
        return;
    }
    if (a[0] == b[0]) {
        lg_seq_append(g, &s, prefix);
        lg_class_digits(&c, a[0] - '0', a[0] - '0');
        lg_seq_class(g, &s, &c, 0);
        digits_rec(g, r, &s, a + 1, b + 1, n - 1);
        lg_seq_free(&s);
        return;
    }
    char rest[MAX_DIGITS + 1];
    int a_low = 1, b_high = 1; /* a's rest all 0s, b's rest all 9s */
    for (int i = 1; i < n; i++) {
        a_low &= a[i] == '0';
        b_high &= b[i] == '9';
    }
    int from = a[0] - '0', to = b[0] - '0';
    if (!a_low) { /* a[0], then [a[1:], 99..9] */
        lg_seq_append(g, &s, prefix);
        lg_class_digits(&c, from, from);
        lg_seq_class(g, &s, &c, 0);
        memset(rest, '9', (size_t)(n - 1));
        digits_rec(g, r, &s, a + 1, rest, n - 1);
        s.n = 0;
        from++;
    }
    int last = b_high ? to : to - 1;
    if (from <= last) { /* [from-last], then any n-1 digits */
        lg_seq_append(g, &s, prefix);
        lg_class_digits(&c, from, last);
        lg_seq_class(g, &s, &c, 0);
        lg_class_digits(&c, 0, 9);
        for (int i = 1; i < n; i++) lg_seq_class(g, &s, &c, 0);
        lg_alt(g, r, &s);
    }
    if (!b_high) { /* b[0], then [00..0, b[1:]] */
        lg_seq_append(g, &s, prefix);
        lg_class_digits(&c, to, to);
        lg_seq_class(g, &s, &c, 0);
        memset(rest, '0', (size_t)(n - 1));
        digits_rec(g, r, &s, rest, b + 1, n - 1);
    }
    lg_seq_free(&s);
}

/* Alternatives of r for the non-negative integers in [a, b], after prefix ("" or "-"). */
static void nonneg(lg_grammar *g, int r, const char *prefix, long long a, long long b) {
    long long p10 = 1;
    for (int n = 1; n <= MAX_DIGITS && a <= b; n++, p10 *= 10) {
        long long lo = n == 1 ? 0 : p10, hi = n == MAX_DIGITS ? BIG : p10 * 10 - 1;
        if (b < lo || a > hi) continue;
        long long x = a > lo ? a : lo, y = b < hi ? b : hi;
        char xa[MAX_DIGITS + 2], ya[MAX_DIGITS + 2];
        snprintf(xa, sizeof xa, "%0*lld", n, x);
        snprintf(ya, sizeof ya, "%0*lld", n, y);
        lg_seq pre = {0};
        lg_seq_str(g, &pre, prefix);
        digits_rec(g, r, &pre, xa, ya, n);
        lg_seq_free(&pre);
    }
}

int lg_int_range(lg_grammar *g, long long lo, long long hi, lilac_error *e) {
    if (lo < -BIG) lo = -BIG;
    if (hi > BIG) hi = BIG;
    if (lo > hi) return lilac_fail(e, LILAC_EINVAL, "no integer lies in the bounds"), -1;
    int r = lg_rule(g, "intrange");
    if (lo < 0) nonneg(g, r, "-", hi < 0 ? -hi : 1, -lo); /* negatives, as "-" and their magnitude */
    if (hi >= 0) nonneg(g, r, "", lo > 0 ? lo : 0, hi);
    return r;
}

int lg_num_range(lg_grammar *g, double lo, int lo_excl, int has_lo, double hi, int hi_excl, int has_hi, lilac_error *e) {
    const double lim = 1e15;
    if (!has_lo || lo < -lim) lo = -lim, lo_excl = 0;
    if (!has_hi || hi > lim) hi = lim, hi_excl = 0;
    /* integers n with lo <= n <= hi (strict where exclusive) */
    double ilo = lo_excl ? floor(lo) + 1 : ceil(lo), ihi = hi_excl ? ceil(hi) - 1 : floor(hi);
    /* "n.d+" (n >= 0) lies in [n, n+1): needs n >= lo (> when exclusive) and n + 1 <= hi */
    double plo = ilo > 0 ? ilo : 0, phi = floor(hi) - 1;
    /* "-n.d+" lies in (-(n+1), -n]: needs -n <= hi (< when exclusive) and -(n+1) >= lo */
    double nlo = hi_excl ? floor(-hi) + 1 : ceil(-hi), nhi = floor(-lo) - 1;
    if (nlo < 0) nlo = 0;
    int have_int = ilo <= ihi, have_pos = plo <= phi, have_neg = nlo <= nhi;
    if (!have_int && !have_pos && !have_neg)
        return lilac_fail(e, LILAC_EINVAL, "lilac cannot write a number inside these bounds (no integer, and no "
                                           "whole unit interval, lies between them)"), -1;
    int r = lg_rule(g, "numrange");
    if (have_int) lg_alt_rule(g, r, lg_int_range(g, (long long)ilo, (long long)ihi, e));
    int frac = lg_json_fraction(g);
    if (have_pos) {
        int ip = lg_int_range(g, (long long)plo, (long long)phi, e);
        lg_seq s = {0};
        lg_seq_rule(g, &s, ip);
        lg_seq_rule(g, &s, frac);
        lg_alt(g, r, &s);
        lg_seq_free(&s);
    }
    if (have_neg) {
        int in = lg_int_range(g, (long long)nlo, (long long)nhi, e);
        lg_seq s = {0};
        lg_seq_str(g, &s, "-");
        lg_seq_rule(g, &s, in);
        lg_seq_rule(g, &s, frac);
        lg_alt(g, r, &s);
        lg_seq_free(&s);
    }
    return r;
}
