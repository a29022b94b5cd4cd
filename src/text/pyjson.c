/* pyjson.c — Python-compatible JSON serialisation (see pyjson.h). */
#include "text/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lilac_pyjson_dump_string(const char *s, size_t n, lilac_buf *out) {
    static const char hex[] = "0123456789abcdef";
    lilac_buf_putc(out, '"');
    size_t run = 0; /* bytes copied verbatim since the last escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0', u[4] = hex[c >> 4], u[5] = hex[c & 15], u[6] = 0;
                esc = u;
            }
        }
        if (!esc) {
            run++;
            continue;
        }
        lilac_buf_append(out, s + i - run, run);
        run = 0;
        lilac_buf_puts(out, esc);
    }
    lilac_buf_append(out, s + n - run, run);
    lilac_buf_putc(out, '"');
}

/* Python's float repr: the shortest digit string that round-trips, written
 * in fixed notation when the decimal exponent is in [-4, 16) and in
 * scientific notation ("1e+16", "2.5e-07") otherwise. */
void lilac_pyjson_dump_real(double d, lilac_buf *out) {
    if (isnan(d)) {
        lilac_buf_puts(out, "NaN");
        return;
    }
    if (isinf(d)) {
        lilac_buf_puts(out, d > 0 ? "Infinity" : "-Infinity");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    /* tmp = [-]D[.DDD]e[+-]XX : split into sign, digits and exponent */
    const char *p = tmp;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--; /* strip trailing zeros */
    digits[nd] = 0;
    int exp10 = atoi(p + 1); /* value = 0.D1D2.. * 10^(exp10+1) */
    if (neg) lilac_buf_putc(out, '-');
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            lilac_buf_puts(out, "0.");
            for (int i = 0; i < -exp10 - 1; i++) lilac_buf_putc(out, '0');
            lilac_buf_append(out, digits, (size_t)nd);
        } else if (nd <= exp10 + 1) {
            lilac_buf_append(out, digits, (size_t)nd);
            for (int i = nd; i < exp10 + 1; i++) lilac_buf_putc(out, '0');
            lilac_buf_puts(out, ".0");
        } else {
            lilac_buf_append(out, digits, (size_t)exp10 + 1);
            lilac_buf_putc(out, '.');
            lilac_buf_append(out, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
        }
    } else {
        lilac_buf_putc(out, digits[0]);
        if (nd > 1) {
            lilac_buf_putc(out, '.');
            lilac_buf_append(out, digits + 1, (size_t)nd - 1);
        }
        lilac_buf_printf(out, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

void lilac_pyjson_dump(const json_t *v, lilac_buf *out) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        size_t klen;
        json_t *val;
        int first = 1;
        lilac_buf_putc(out, '{');
        /* keylen: keys may hold NUL characters when parsed with JSON_ALLOW_NUL */
        json_object_keylen_foreach((json_t *)v, key, klen, val) {
            if (!first) lilac_buf_puts(out, ", ");
            first = 0;
            lilac_pyjson_dump_string(key, klen, out);
            lilac_buf_puts(out, ": ");
            lilac_pyjson_dump(val, out);
        }
        lilac_buf_putc(out, '}');
        break;
    }
    case JSON_ARRAY: {
        lilac_buf_putc(out, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) lilac_buf_puts(out, ", ");
            lilac_pyjson_dump(json_array_get(v, i), out);
        }
        lilac_buf_putc(out, ']');
        break;
    }
    case JSON_STRING:
        lilac_pyjson_dump_string(json_string_value(v), json_string_length(v), out);
        break;
    case JSON_INTEGER:
        lilac_buf_printf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        lilac_pyjson_dump_real(json_real_value(v), out);
        break;
    case JSON_TRUE: lilac_buf_puts(out, "true"); break;
    case JSON_FALSE: lilac_buf_puts(out, "false"); break;
    case JSON_NULL: lilac_buf_puts(out, "null"); break;
    }
}
