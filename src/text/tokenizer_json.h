/* tokenizer_json.h — a small, strict, streaming JSON reader for the big
 * sections of tokenizer.json (vocab: 150-250K string/int pairs; merges: as
 * many strings or string pairs).
 *
 * Why not jansson: building a jansson tree of the 11 MB Qwen3 file takes
 * ~500 ms here, over the load budget; this reader walks the text once without
 * building anything (~10x faster).  It validates everything it passes over
 * (RFC 8259 grammar, UTF-8 inside strings, escapes, nesting depth), so a bad
 * file is an error naming the byte offset and line, never a crash.  Small
 * sections are handed to jansson through lilac_tj_skip()'s span. */
#ifndef LILAC_TEXT_TOKENIZER_JSON_H
#define LILAC_TEXT_TOKENIZER_JSON_H

#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

typedef struct {
    const char *s;    /* the document, s[n] need not be readable */
    size_t n;
    size_t i;         /* cursor */
    const char *path; /* for messages */
    lilac_error *e;
} lilac_tj;

/* Fails with "PATH: line L, byte B: MSG". */
lilac_status lilac_tj_fail(lilac_tj *r, const char *msg);

/* Skips whitespace; returns the next byte, or -1 at the end. */
int lilac_tj_peek(lilac_tj *r);
/* Consumes c (after whitespace) or fails with "expected 'c' WHAT". */
lilac_status lilac_tj_expect(lilac_tj *r, char c, const char *what);

/* Reads a string (cursor at its quote, whitespace allowed) and appends its
 * decoded UTF-8 to out (which is cleared first). */
lilac_status lilac_tj_string(lilac_tj *r, lilac_buf *out);
/* Reads an integer (no fraction or exponent) within [lo, hi]. */
lilac_status lilac_tj_int(lilac_tj *r, long long lo, long long hi, long long *v);
/* Skips one value of any type, validating it; [*start, *end) is its text. */
lilac_status lilac_tj_skip(lilac_tj *r, size_t *start, size_t *end);

/* Object/array walking: call _begin at '{' or '['; then _next returns 1 when
 * another member/element follows (after consuming the ',' if needed), 0 at
 * the closing bracket (consumed), or -1 on error. */
lilac_status lilac_tj_begin(lilac_tj *r, char open);
int lilac_tj_next(lilac_tj *r, char close, int *first);

/* Reads an object key and its ':' into key. */
lilac_status lilac_tj_key(lilac_tj *r, lilac_buf *key);

#endif
