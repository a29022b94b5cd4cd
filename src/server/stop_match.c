/* stop_match.c — the stop-string matcher (see stop_match.h): searching the
 * held text for complete stop strings and for a suffix that could still grow
 * into one.  The held text is at most the longest stop string minus one byte
 * plus one token's piece, so the plain quadratic scans are cheap. */
#include <string.h>

#include "server/stop_match.h"

long srv_stop_find(const srv_stops *st, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < st->n; k++)
            if (st->len[k] && st->len[k] <= n - i && memcmp(s + i, st->str[k], st->len[k]) == 0) return (long)i;
    return -1;
}

size_t srv_stop_releasable(const srv_stops *st, const char *s, size_t n) {
    /* a suffix of max bytes or more cannot be a proper prefix of any stop string */
    size_t from = n > st->max ? n - st->max : 0;
    for (size_t i = from; i < n; i++)
        for (int k = 0; k < st->n; k++)
            if (n - i < st->len[k] && memcmp(s + i, st->str[k], n - i) == 0) return i;
    return n;
}

size_t srv_stop_push(const srv_stops *st, lilac_buf *hold, const char *p, size_t n, int *stopped) {
    *stopped = 0;
    if (!n) return 0;
    lilac_buf_append(hold, p, n);
    if (!st->n) return hold->len;
    long at = srv_stop_find(st, hold->data, hold->len);
    if (at >= 0) {
        *stopped = 1;
        return (size_t)at;
    }
    return srv_stop_releasable(st, hold->data, hold->len);
}

void srv_stop_consume(lilac_buf *hold, size_t k, int stopped) {
    if (stopped || k >= hold->len) {
        lilac_buf_clear(hold);
        return;
    }
    if (!k) return;
    memmove(hold->data, hold->data + k, hold->len - k);
    hold->len -= k;
    hold->data[hold->len] = 0;
}
