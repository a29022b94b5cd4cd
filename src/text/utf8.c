/* utf8.c — UTF-8 validation, lossy repair (U+FFFD per maximal invalid
 * subpart) and the streaming assembler.  The table of valid sequences is
 * Unicode's Table 3-7 (well-formed UTF-8 byte sequences). */
#include "text/utf8.h"

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

int lilac_utf8_next(const unsigned char *p, size_t n, size_t *len) {
    unsigned char c = p[0];
    if (c < 0x80) {
        *len = 1;
        return 1;
    }
    size_t need; /* continuation bytes after the lead */
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;           /* no overlongs */
    else if (c >= 0xE1 && c <= 0xEC) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F;           /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) need = 2;
    else if (c == 0xF0) need = 3, lo = 0x90;           /* no overlongs */
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F;           /* <= U+10FFFF */
    else {
        *len = 1; /* 80..C1, F5..FF never start a character */
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        if (k >= n) {
            *len = k;
            return -1;
        }
        unsigned char b = p[k];
        unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) {
            *len = k;
            return 0;
        }
    }
    *len = need + 1;
    return 1;
}

size_t lilac_utf8_valid_prefix(const void *vp, size_t n) {
    const unsigned char *p = vp;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs dominate real text: skip 8 bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w = (uint64_t)p[i] | (uint64_t)p[i + 1] << 8 | (uint64_t)p[i + 2] << 16 |
                         (uint64_t)p[i + 3] << 24 | (uint64_t)p[i + 4] << 32 |
                         (uint64_t)p[i + 5] << 40 | (uint64_t)p[i + 6] << 48 |
                         (uint64_t)p[i + 7] << 56;
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        if (lilac_utf8_next(p + i, n - i, &len) != 1) return i;
        i += len;
    }
    return n;
}

void lilac_utf8_lossy(const void *vp, size_t n, lilac_buf *out) {
    const unsigned char *p = vp;
    if (n == 0) return;
    size_t i = 0, start = 0; /* p[start..i) is valid and not yet appended */
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        int r = lilac_utf8_next(p + i, n - i, &len);
        if (r == 1) {
            i += len;
            continue;
        }
        lilac_buf_append(out, p + start, i - start);
        lilac_buf_append(out, REPLACEMENT, 3);
        i += r == 0 ? len : n - i; /* an unfinished tail is one maximal subpart */
        start = i;
    }
    lilac_buf_append(out, p + start, i - start);
}

size_t lilac_utf8_decode(const void *vp, size_t n, uint32_t *cp) {
    const unsigned char *p = vp;
    size_t len;
    if (n == 0 || lilac_utf8_next(p, n, &len) != 1) return 0;
    uint32_t c;
    switch (len) {
    case 1: c = p[0]; break;
    case 2: c = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F); break;
    case 3: c = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F); break;
    default:
        c = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
            (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    }
    *cp = c;
    return len;
}

void lilac_utf8_stream_push(lilac_utf8_stream *s, const void *vp, size_t n, lilac_buf *out) {
    const unsigned char *p = vp;
    if (n == 0) return; /* p may be NULL then */
    size_t i = 0;
    /* First finish (or reject) the held-back prefix one byte at a time. */
    while (s->npend > 0 && i < n) {
        s->pend[s->npend++] = p[i++];
        size_t len;
        int r = lilac_utf8_next(s->pend, (size_t)s->npend, &len);
        if (r == -1) continue;
        if (r == 1) {
            lilac_buf_append(out, s->pend, len);
        } else {
            /* The new byte broke the sequence: the held prefix is the invalid
             * maximal subpart, and the new byte starts afresh. */
            lilac_buf_append(out, REPLACEMENT, 3);
            i--;
        }
        s->npend = 0;
    }
    size_t start = i;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        int r = lilac_utf8_next(p + i, n - i, &len);
        if (r == 1) {
            i += len;
            continue;
        }
        lilac_buf_append(out, p + start, i - start);
        if (r == 0) {
            lilac_buf_append(out, REPLACEMENT, 3);
            i += len;
        } else {
            for (size_t k = i; k < n; k++) s->pend[s->npend++] = p[k]; /* at most 3 bytes */
            i = n;
        }
        start = i;
    }
    lilac_buf_append(out, p + start, i - start);
}

void lilac_utf8_stream_finish(lilac_utf8_stream *s, lilac_buf *out) {
    if (s->npend > 0) lilac_buf_append(out, REPLACEMENT, 3);
    s->npend = 0;
}
