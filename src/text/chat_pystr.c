/* chat_pystr.c — Python str semantics for the chat template (see chat_pystr.h). */
#include "text/chat_pystr.h"

#include <string.h>

int lilac_pystr_isspace(uint32_t cp) {
    /* The complete list of code points with str.isspace() == True
     * (bidirectional class WS, B or S, or category Zs). */
    if (cp <= 0x20) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
    if (cp < 0x85) return 0;
    switch (cp) {
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
        return 1;
    }
    return cp >= 0x2000 && cp <= 0x200a;
}

/* Decodes the code point starting at p (n bytes available).  Returns its
 * length in bytes, or 0 when the bytes there are not valid UTF-8. */
static size_t decode(const unsigned char *p, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned char c = p[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

lilac_strview lilac_pystr_strip(lilac_strview s) {
    const unsigned char *p = (const unsigned char *)s.p;
    size_t lo = 0, hi = s.n;
    while (lo < hi) {
        uint32_t cp;
        size_t k = decode(p + lo, hi - lo, &cp);
        if (!k || !lilac_pystr_isspace(cp)) break;
        lo += k;
    }
    while (hi > lo) {
        /* back up to the lead byte of the last code point (at most 3
         * continuation bytes), then require it to decode to exactly hi */
        size_t start = hi - 1;
        while (start > lo && hi - start < 4 && (p[start] & 0xc0) == 0x80) start--;
        uint32_t cp;
        size_t k = decode(p + start, hi - start, &cp);
        if (k != hi - start || !lilac_pystr_isspace(cp)) break;
        hi = start;
    }
    lilac_strview r = {s.p + lo, hi - lo};
    return r;
}

lilac_strview lilac_pystr_rstrip_char(lilac_strview s, char ch) {
    while (s.n && s.p[s.n - 1] == ch) s.n--;
    return s;
}

lilac_strview lilac_pystr_lstrip_char(lilac_strview s, char ch) {
    while (s.n && s.p[0] == ch) s.p++, s.n--;
    return s;
}

/* Offset of the first occurrence of needle at or after `from`, or -1. */
static long find(lilac_strview s, size_t from, const char *needle, size_t m) {
    if (from > s.n) return -1;
    const char *hit = memmem(s.p + from, s.n - from, needle, m);
    return hit ? (long)(hit - s.p) : -1;
}

int lilac_pystr_contains(lilac_strview s, const char *needle) {
    return find(s, 0, needle, strlen(needle)) >= 0;
}

int lilac_pystr_startswith(lilac_strview s, const char *prefix) {
    size_t m = strlen(prefix);
    return s.n >= m && memcmp(s.p, prefix, m) == 0;
}

int lilac_pystr_endswith(lilac_strview s, const char *suffix) {
    size_t m = strlen(suffix);
    return s.n >= m && memcmp(s.p + s.n - m, suffix, m) == 0;
}

lilac_strview lilac_pystr_split_first(lilac_strview s, const char *sep) {
    long at = find(s, 0, sep, strlen(sep));
    if (at >= 0) s.n = (size_t)at;
    return s;
}

lilac_strview lilac_pystr_split_last(lilac_strview s, const char *sep) {
    size_t m = strlen(sep), after = 0;
    long at;
    /* Python's split walks left to right and resumes after each match, so
     * the last piece starts after the last non-overlapping match. */
    while (m && (at = find(s, after, sep, m)) >= 0) after = (size_t)at + m;
    lilac_strview r = {s.p + after, s.n - after};
    return r;
}
