/* buf.c — growable byte buffer. */
#include "util/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(lilac_buf *b, size_t extra) {
    if (b->oom) return 0;
    if (extra > (size_t)-1 / 2 - b->len) {
        b->oom = 1;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void lilac_buf_append(lilac_buf *b, const void *p, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void lilac_buf_puts(lilac_buf *b, const char *s) { lilac_buf_append(b, s, strlen(s)); }

void lilac_buf_putc(lilac_buf *b, char c) { lilac_buf_append(b, &c, 1); }

void lilac_buf_printf(lilac_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void lilac_buf_clear(lilac_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void lilac_buf_free(lilac_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

char *lilac_buf_take(lilac_buf *b) {
    if (b->oom) {
        lilac_buf_free(b);
        return NULL;
    }
    char *s = b->data ? b->data : calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}
