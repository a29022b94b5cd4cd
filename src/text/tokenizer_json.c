/* tokenizer_json.c — the streaming JSON reader of tokenizer.json's large
 * sections (see tokenizer_json.h for why it exists). */
#include "text/tokenizer_json.h"

#include <stdio.h>
#include <string.h>

#include "text/utf8.h"

#define MAX_DEPTH 128

lilac_status lilac_tj_fail(lilac_tj *r, const char *msg) {
    size_t line = 1, at = r->i < r->n ? r->i : r->n;
    for (size_t k = 0; k < at; k++) line += r->s[k] == '\n';
    return lilac_fail(r->e, LILAC_EFORMAT, "%s: line %zu, byte %zu: %s", r->path, line, at, msg);
}

int lilac_tj_peek(lilac_tj *r) {
    while (r->i < r->n) {
        char c = r->s[r->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return (unsigned char)c;
        r->i++;
    }
    return -1;
}

lilac_status lilac_tj_expect(lilac_tj *r, char c, const char *what) {
    if (lilac_tj_peek(r) != (unsigned char)c) {
        char msg[160];
        snprintf(msg, sizeof msg, "expected '%c' %s", c, what);
        return lilac_tj_fail(r, r->i >= r->n ? "unexpected end of file (truncated?)" : msg);
    }
    r->i++;
    return LILAC_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(lilac_tj *r, unsigned *v) {
    if (r->n - r->i < 4) return 0;
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(r->s[r->i + (size_t)k]);
        if (h < 0) return 0;
        x = x << 4 | (unsigned)h;
    }
    r->i += 4;
    *v = x;
    return 1;
}

static void put_utf8(lilac_buf *out, unsigned cp) {
    char b[4];
    size_t n;
    if (cp < 0x80)
        b[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)),
        n = 3;
    else
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    lilac_buf_append(out, b, n);
}

/* Parses a string at the cursor; appends to out when out != NULL. */
static lilac_status string_at(lilac_tj *r, lilac_buf *out) {
    if (lilac_tj_peek(r) != '"')
        return lilac_tj_fail(r, r->i >= r->n ? "unexpected end of file (truncated?)" : "expected a string");
    r->i++;
    const unsigned char *s = (const unsigned char *)r->s;
    for (;;) {
        size_t start = r->i;
        while (r->i < r->n && s[r->i] >= 0x20 && s[r->i] != '"' && s[r->i] != '\\' && s[r->i] < 0x80) r->i++;
        while (r->i < r->n && s[r->i] >= 0x80) { /* non-ASCII must be valid UTF-8 */
            size_t len;
            if (lilac_utf8_next(s + r->i, r->n - r->i, &len) != 1)
                return lilac_tj_fail(r, "invalid UTF-8 inside a string");
            r->i += len;
            while (r->i < r->n && s[r->i] >= 0x20 && s[r->i] != '"' && s[r->i] != '\\' && s[r->i] < 0x80) r->i++;
        }
        if (out && r->i > start) lilac_buf_append(out, s + start, r->i - start);
        if (r->i >= r->n) return lilac_tj_fail(r, "unterminated string (truncated file?)");
        unsigned char c = s[r->i];
        if (c == '"') {
            r->i++;
            return LILAC_OK;
        }
        if (c < 0x20) return lilac_tj_fail(r, "control character inside a string");
        /* backslash */
        r->i++;
        if (r->i >= r->n) return lilac_tj_fail(r, "unterminated escape");
        char esc = r->s[r->i++], lit;
        switch (esc) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!read_hex4(r, &cp)) return lilac_tj_fail(r, "bad \\u escape");
            if (cp >= 0xDC00 && cp <= 0xDFFF) return lilac_tj_fail(r, "lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (r->n - r->i < 2 || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u')
                    return lilac_tj_fail(r, "high surrogate not followed by a low surrogate");
                r->i += 2;
                if (!read_hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return lilac_tj_fail(r, "high surrogate not followed by a low surrogate");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out) put_utf8(out, cp);
            continue;
        }
        default: return lilac_tj_fail(r, "unknown escape in string");
        }
        if (out) lilac_buf_append(out, &lit, 1);
    }
}

lilac_status lilac_tj_string(lilac_tj *r, lilac_buf *out) {
    lilac_buf_clear(out);
    lilac_status st = string_at(r, out);
    if (st == LILAC_OK && out->oom) return lilac_fail(r->e, LILAC_ENOMEM, "%s: out of memory", r->path);
    if (st == LILAC_OK && !out->data) lilac_buf_append(out, "", 0); /* never NULL data */
    return st;
}

/* Validates a number's grammar; sets *is_int when it has no fraction/exponent. */
static lilac_status number_at(lilac_tj *r, int *is_int) {
    const char *s = r->s;
    size_t i = r->i;
    *is_int = 1;
    if (i < r->n && s[i] == '-') i++;
    if (i >= r->n || s[i] < '0' || s[i] > '9') {
        r->i = i;
        return lilac_tj_fail(r, "bad number");
    }
    if (s[i] == '0')
        i++;
    else
        while (i < r->n && s[i] >= '0' && s[i] <= '9') i++;
    if (i < r->n && s[i] == '.') {
        *is_int = 0;
        i++;
        if (i >= r->n || s[i] < '0' || s[i] > '9') {
            r->i = i;
            return lilac_tj_fail(r, "bad number");
        }
        while (i < r->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < r->n && (s[i] == 'e' || s[i] == 'E')) {
        *is_int = 0;
        i++;
        if (i < r->n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= r->n || s[i] < '0' || s[i] > '9') {
            r->i = i;
            return lilac_tj_fail(r, "bad number");
        }
        while (i < r->n && s[i] >= '0' && s[i] <= '9') i++;
    }
    r->i = i;
    return LILAC_OK;
}

lilac_status lilac_tj_int(lilac_tj *r, long long lo, long long hi, long long *v) {
    int c = lilac_tj_peek(r);
    if (c != '-' && (c < '0' || c > '9')) return lilac_tj_fail(r, "expected an integer");
    size_t start = r->i;
    int is_int;
    lilac_status st = number_at(r, &is_int);
    if (st) return st;
    if (!is_int || r->i - start > 18) {
        r->i = start;
        return lilac_tj_fail(r, "expected an integer of at most 18 digits");
    }
    long long x = 0;
    int neg = r->s[start] == '-';
    for (size_t k = start + (size_t)neg; k < r->i; k++) x = x * 10 + (r->s[k] - '0');
    if (neg) x = -x;
    if (x < lo || x > hi) {
        char msg[128];
        r->i = start;
        snprintf(msg, sizeof msg, "integer %lld out of range [%lld, %lld]", x, lo, hi);
        return lilac_tj_fail(r, msg);
    }
    *v = x;
    return LILAC_OK;
}

static lilac_status literal(lilac_tj *r, const char *word) {
    size_t n = strlen(word);
    if (r->n - r->i < n || memcmp(r->s + r->i, word, n) != 0) return lilac_tj_fail(r, "expected a value");
    r->i += n;
    return LILAC_OK;
}

lilac_status lilac_tj_begin(lilac_tj *r, char open) {
    return lilac_tj_expect(r, open, open == '{' ? "(an object)" : "(an array)");
}

int lilac_tj_next(lilac_tj *r, char close, int *first) {
    int c = lilac_tj_peek(r);
    if (c == (unsigned char)close) {
        r->i++;
        return 0;
    }
    if (*first) {
        *first = 0;
        if (c < 0) {
            lilac_tj_fail(r, "unexpected end of file (truncated?)");
            return -1;
        }
        return 1;
    }
    if (c == ',') {
        r->i++;
        return 1;
    }
    lilac_tj_fail(r, c < 0          ? "unexpected end of file (truncated?)"
                     : close == '}' ? "expected ',' or '}'"
                                    : "expected ',' or ']'");
    return -1;
}

lilac_status lilac_tj_key(lilac_tj *r, lilac_buf *key) {
    lilac_status st = lilac_tj_string(r, key);
    if (st) return st;
    return lilac_tj_expect(r, ':', "after an object key");
}

static lilac_status skip_at(lilac_tj *r, int depth) {
    if (depth > MAX_DEPTH) return lilac_tj_fail(r, "nesting too deep");
    int c = lilac_tj_peek(r), first = 1, more;
    lilac_status st;
    switch (c) {
    case -1: return lilac_tj_fail(r, "unexpected end of file (truncated?)");
    case '"': return string_at(r, NULL);
    case '{':
        r->i++;
        while ((more = lilac_tj_next(r, '}', &first)) == 1) {
            if ((st = string_at(r, NULL)) || (st = lilac_tj_expect(r, ':', "after an object key")) ||
                (st = skip_at(r, depth + 1)))
                return st;
        }
        return more < 0 ? r->e ? r->e->code : LILAC_EFORMAT : LILAC_OK;
    case '[':
        r->i++;
        while ((more = lilac_tj_next(r, ']', &first)) == 1)
            if ((st = skip_at(r, depth + 1))) return st;
        return more < 0 ? r->e ? r->e->code : LILAC_EFORMAT : LILAC_OK;
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    default: {
        int is_int;
        if (c == '-' || (c >= '0' && c <= '9')) return number_at(r, &is_int);
        return lilac_tj_fail(r, "expected a value");
    }
    }
}

lilac_status lilac_tj_skip(lilac_tj *r, size_t *start, size_t *end) {
    lilac_tj_peek(r);
    size_t s0 = r->i;
    lilac_status st = skip_at(r, 0);
    if (start) *start = s0;
    if (end) *end = r->i;
    return st;
}
