/* grammar_format.c — the string formats lilac writes (JSON Schema "format"),
 * as the text inside the quotes.  Each is a subset of the format that every
 * checker accepts:
 *   date       YYYY-MM-DD, a real calendar day (no 29 February)
 *   time       HH:MM:SS, optional .fraction, then Z or +HH:MM / -HH:MM
 *   date-time  date "T" time (RFC 3339)
 *   uuid       8-4-4-4-12 lowercase hex digits
 *   ipv4       dotted quad, each part 0..255 without leading zeros
 *   email      local@domain.tld: one or two dot-separated words of letters,
 *              digits and _ + -, then a hostname of 2+ labels
 *   hostname   dot-separated labels of letters, digits and inner hyphens
 *              (their lengths are not bounded: a counted repetition costs a
 *              classification per count, see grammar_mask.c)
 * Other formats are annotations: the string is written unconstrained. */
#include <string.h>

#include "text/grammar_impl.h"
#include "text/grammar_json.h"

static void digit(lg_grammar *g, lg_seq *s, int lo, int hi) {
    lg_class c;
    lg_class_digits(&c, lo, hi);
    lg_seq_class(g, s, &c, 0);
}

/* Two-digit numbers lo..hi (lo, hi in 0..99) as alternatives of a new rule. */
static int two_digits(lg_grammar *g, int lo, int hi) {
    int r = lg_rule(g, "2d");
    lg_seq s = {0};
    for (int t = lo / 10; t <= hi / 10; t++) {
        int a = t == lo / 10 ? lo % 10 : 0, b = t == hi / 10 ? hi % 10 : 9;
        digit(g, &s, t, t);
        digit(g, &s, a, b);
        lg_alt(g, r, &s);
    }
    lg_seq_free(&s);
    return r;
}

static int date(lg_grammar *g) {
    int r = lg_rule(g, "date");
    static const char *const m31[] = {"01", "03", "05", "07", "08", "10", "12"};
    static const char *const m30[] = {"04", "06", "09", "11"};
    int d31 = two_digits(g, 1, 31), d30 = two_digits(g, 1, 30), d28 = two_digits(g, 1, 28);
    lg_seq s = {0};
    for (int k = 0; k < 12; k++) {
        const char *m = k < 7 ? m31[k] : k < 11 ? m30[k - 7] : "02";
        for (int i = 0; i < 4; i++) digit(g, &s, 0, 9);
        lg_seq_str(g, &s, "-");
        lg_seq_str(g, &s, m);
        lg_seq_str(g, &s, "-");
        lg_seq_rule(g, &s, k < 7 ? d31 : k < 11 ? d30 : d28);
        lg_alt(g, r, &s);
    }
    lg_seq_free(&s);
    return r;
}

static int time_of_day(lg_grammar *g) {
    int hh = two_digits(g, 0, 23), mm = two_digits(g, 0, 59);
    lg_class d;
    lg_class_digits(&d, 0, 9);
    int frac = lg_rep_class(g, &d, 1, 9, "tfrac");
    int fr = lg_rule(g, "tfraction");
    lg_alt_empty(g, fr);
    lg_seq s = {0};
    lg_seq_str(g, &s, ".");
    lg_seq_rule(g, &s, frac);
    lg_alt(g, fr, &s);
    int tz = lg_rule(g, "tz");
    lg_alt_str(g, tz, "Z");
    for (int k = 0; k < 2; k++) {
        lg_seq_str(g, &s, k ? "-" : "+");
        lg_seq_rule(g, &s, hh);
        lg_seq_str(g, &s, ":");
        lg_seq_rule(g, &s, mm);
        lg_alt(g, tz, &s);
    }
    int r = lg_rule(g, "time");
    lg_seq_rule(g, &s, hh);
    lg_seq_str(g, &s, ":");
    lg_seq_rule(g, &s, mm);
    lg_seq_str(g, &s, ":");
    lg_seq_rule(g, &s, mm);
    lg_seq_rule(g, &s, fr);
    lg_seq_rule(g, &s, tz);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

static int uuid(lg_grammar *g) {
    lg_class h;
    lg_class_digits(&h, 0, 9);
    lg_class_add(&h, 'a', 'f');
    int r = lg_rule(g, "uuid");
    lg_seq s = {0};
    static const int group[] = {8, 4, 4, 4, 12};
    for (int k = 0; k < 5; k++) {
        if (k) lg_seq_str(g, &s, "-");
        for (int i = 0; i < group[k]; i++) lg_seq_class(g, &s, &h, 0);
    }
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

static int ipv4(lg_grammar *g) {
    int octet = lg_rule(g, "octet");
    lg_seq s = {0};
    digit(g, &s, 0, 9); /* 0-9 */
    lg_alt(g, octet, &s);
    digit(g, &s, 1, 9); /* 10-99 */
    digit(g, &s, 0, 9);
    lg_alt(g, octet, &s);
    lg_seq_str(g, &s, "1"); /* 100-199 */
    digit(g, &s, 0, 9);
    digit(g, &s, 0, 9);
    lg_alt(g, octet, &s);
    lg_seq_str(g, &s, "2"); /* 200-249 */
    digit(g, &s, 0, 4);
    digit(g, &s, 0, 9);
    lg_alt(g, octet, &s);
    lg_seq_str(g, &s, "25"); /* 250-255 */
    digit(g, &s, 0, 5);
    lg_alt(g, octet, &s);
    int r = lg_rule(g, "ipv4");
    for (int k = 0; k < 4; k++) {
        if (k) lg_seq_str(g, &s, ".");
        lg_seq_rule(g, &s, octet);
    }
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

/* label ::= [a-zA-Z0-9] ( [a-zA-Z0-9-]* [a-zA-Z0-9] )?, as a right-recursive rule */
static int label(lg_grammar *g) {
    lg_class an, anh;
    lg_class_clear(&an);
    lg_class_add(&an, 'a', 'z');
    lg_class_add(&an, 'A', 'Z');
    lg_class_add(&an, '0', '9');
    anh = an;
    lg_class_add(&anh, '-', '-');
    int r = lg_rule(g, "label"), more = lg_rule(g, "labelmore");
    lg_seq s = {0};
    lg_seq_class(g, &s, &an, 0);
    lg_seq_rule(g, &s, more);
    lg_alt(g, r, &s);
    lg_alt_empty(g, more);
    lg_seq_class(g, &s, &anh, 1);
    lg_seq_class(g, &s, &an, 0);
    lg_alt(g, more, &s);
    lg_seq_free(&s);
    return r;
}

/* label ("." label)*, with at least min_labels labels (1 or 2) */
static int hostname(lg_grammar *g, int min_labels) {
    int l = label(g), rest = lg_rule(g, "hostrest"), r = lg_rule(g, "hostname");
    lg_seq s = {0};
    lg_alt_empty(g, rest);
    lg_seq_str(g, &s, ".");
    lg_seq_rule(g, &s, l);
    lg_seq_rule(g, &s, rest);
    lg_alt(g, rest, &s);
    lg_seq_rule(g, &s, l);
    if (min_labels >= 2) {
        lg_seq_str(g, &s, ".");
        lg_seq_rule(g, &s, l);
    }
    lg_seq_rule(g, &s, rest);
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

static int email(lg_grammar *g) {
    lg_class c;
    lg_class_clear(&c);
    lg_class_add(&c, 'a', 'z');
    lg_class_add(&c, 'A', 'Z');
    lg_class_add(&c, '0', '9');
    lg_class_add(&c, '_', '_');
    lg_class_add(&c, '+', '+');
    lg_class_add(&c, '-', '-');
    int word = lg_rep_class(g, &c, 1, -1, "localword");
    int local = lg_rule(g, "local");
    lg_seq s = {0};
    lg_seq_rule(g, &s, word);
    lg_alt(g, local, &s);
    lg_seq_rule(g, &s, word);
    lg_seq_str(g, &s, ".");
    lg_seq_rule(g, &s, word);
    lg_alt(g, local, &s);
    int r = lg_rule(g, "email");
    lg_seq_rule(g, &s, local);
    lg_seq_str(g, &s, "@");
    lg_seq_rule(g, &s, hostname(g, 2));
    lg_alt(g, r, &s);
    lg_seq_free(&s);
    return r;
}

int lg_format(lg_grammar *g, const char *f) {
    if (!strcmp(f, "date")) return date(g);
    if (!strcmp(f, "time")) return time_of_day(g);
    if (!strcmp(f, "date-time")) {
        int r = lg_rule(g, "datetime");
        lg_seq s = {0};
        lg_seq_rule(g, &s, date(g));
        lg_seq_str(g, &s, "T");
        lg_seq_rule(g, &s, time_of_day(g));
        lg_alt(g, r, &s);
        lg_seq_free(&s);
        return r;
    }
    if (!strcmp(f, "uuid")) return uuid(g);
    if (!strcmp(f, "ipv4")) return ipv4(g);
    if (!strcmp(f, "email")) return email(g);
    if (!strcmp(f, "hostname")) return hostname(g, 1);
    return -1;
}
