/* utf8.h — UTF-8 validation, lossy repair and an incremental (streaming)
 * assembler that never emits a partial character.
 *
 * The repair rule is the one of Rust's String::from_utf8_lossy and Python's
 * bytes.decode("utf-8", errors="replace") (Unicode's "maximal subpart"
 * practice): every maximal prefix of a would-be valid sequence that cannot be
 * completed becomes one U+FFFD, and decoding resumes at the next byte.
 * Surrogates (ED A0..BF ..), overlong forms (C0, C1, E0 80..9F, F0 80..8F)
 * and code points above U+10FFFF are invalid.
 *
 * The streaming assembler applies exactly that rule as bytes arrive, holding
 * back only a trailing sequence that is still incomplete-but-valid, so the
 * concatenation of everything it emits equals lilac_utf8_lossy() of all the
 * bytes pushed, however they were split. */
#ifndef LILAC_TEXT_UTF8_H
#define LILAC_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Examines the sequence at p[0..n) (n >= 1).  Returns 1 when it starts with a
 * complete valid character of *len bytes; 0 when it starts with an invalid
 * maximal subpart of *len bytes (1..3), to be replaced by one U+FFFD; -1 when
 * p[0..n) is a valid but unfinished prefix (more bytes could complete it). */
int lilac_utf8_next(const unsigned char *p, size_t n, size_t *len);

/* Length of the longest prefix of p[0..n) that is valid UTF-8 (n when all is). */
size_t lilac_utf8_valid_prefix(const void *p, size_t n);

/* Appends p[0..n) to out with every invalid part replaced by U+FFFD (EF BF BD). */
void lilac_utf8_lossy(const void *p, size_t n, lilac_buf *out);

/* Decodes the valid character at p[0..n) into a code point; returns its
 * length, or 0 if p does not start with a complete valid character. */
size_t lilac_utf8_decode(const void *p, size_t n, uint32_t *cp);

/* The streaming assembler: holds at most 3 bytes of an unfinished character. */
typedef struct {
    unsigned char pend[4];
    int npend;
} lilac_utf8_stream;

#define LILAC_UTF8_STREAM_INIT {{0, 0, 0, 0}, 0}

/* Appends to out the text that p[0..n) completes (repaired as above). */
void lilac_utf8_stream_push(lilac_utf8_stream *s, const void *p, size_t n, lilac_buf *out);

/* End of input: a held-back unfinished sequence becomes one U+FFFD, as the
 * lossy rule does for a truncated character at the end of a string.  The
 * stream is empty afterwards and may be reused. */
void lilac_utf8_stream_finish(lilac_utf8_stream *s, lilac_buf *out);

#endif
