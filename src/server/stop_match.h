/* stop_match.h — the stop-string matcher of the server's output: given a
 * request's stop strings and the generated text as it arrives in pieces (one
 * piece per token), it decides how much text can be released to the client
 * now, what must be held back because it could be the start of a stop string,
 * and whether (and where) a stop string ended the output.
 *
 * Pure byte logic: it knows nothing of tokens, UTF-8, jobs or SSE.  The held
 * text lives in a caller's lilac_buf (srv_job.hold); output.c releases what
 * this module says may go and sends it on.
 *
 * Semantics (per piece, which is how the server ends generation at a token):
 * after a piece is appended, if the held text contains a complete stop
 * string, the output ends at the earliest start of one (in the held text,
 * which is where every occurrence starts: released text never contains the
 * start of a possible stop string); nothing from there on is ever released.
 * Otherwise everything before the first byte from which the held text could
 * still grow into a stop string is released.  When the text ends without a
 * stop, the held rest is released too.  Empty stop strings match nothing (the
 * request parser rejects them). */
#ifndef LILAC_SERVER_STOP_MATCH_H
#define LILAC_SERVER_STOP_MATCH_H

#include <stddef.h>

#include "util/buf.h"

/* One request's stop strings (borrowed, not copied). */
typedef struct {
    char *const *str;  /* [n] stop strings (bytes; NUL not required) */
    const size_t *len; /* [n] their lengths in bytes */
    int n;             /* 0: no stop strings, all text is released at once */
    size_t max;        /* the longest len[k] (bounds how far back a partial match can start) */
} srv_stops;

/* Earliest position in s[0..n) where some non-empty stop string occurs in
 * full, or -1. */
long srv_stop_find(const srv_stops *st, const char *s, size_t n);

/* The smallest i such that s[i..n) is a proper, non-empty prefix of some stop
 * string (text from i on must wait for more), or n when no suffix of s is. */
size_t srv_stop_releasable(const srv_stops *st, const char *s, size_t n);

/* Appends the piece p[0..n) to the held text and decides.  Returns the number
 * of bytes at the start of hold->data that may be released now; *stopped
 * becomes 1 when a stop string completed (then the count is the text before
 * it, and the rest of hold is never to be released), else 0.  An empty piece
 * changes nothing and releases nothing. */
size_t srv_stop_push(const srv_stops *st, lilac_buf *hold, const char *p, size_t n, int *stopped);

/* Drops the first k bytes of hold (after the caller released them); after a
 * stop, all of it. */
void srv_stop_consume(lilac_buf *hold, size_t k, int stopped);

#endif
