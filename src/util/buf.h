/* buf.h — a growable byte buffer, always NUL-terminated.
 *
 * Appends never fail loudly: on allocation failure the buffer sets `oom` and
 * ignores further appends, so a caller checks once at the end. */
#ifndef LILAC_UTIL_BUF_H
#define LILAC_UTIL_BUF_H

#include <stddef.h>

typedef struct {
    char *data; /* NUL-terminated when len > 0 or after any append */
    size_t len;
    size_t cap;
    int oom;
} lilac_buf;

#define LILAC_BUF_INIT {NULL, 0, 0, 0}

void lilac_buf_append(lilac_buf *b, const void *p, size_t n);
void lilac_buf_puts(lilac_buf *b, const char *s);
void lilac_buf_putc(lilac_buf *b, char c);
void lilac_buf_printf(lilac_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lilac_buf_clear(lilac_buf *b); /* keeps the allocation */
void lilac_buf_free(lilac_buf *b);
/* Returns the contents as a malloc'd NUL-terminated string (never NULL unless
 * out of memory) and leaves the buffer empty.  The caller frees it. */
char *lilac_buf_take(lilac_buf *b);

#endif
