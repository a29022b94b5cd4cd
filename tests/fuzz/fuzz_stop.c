/* fuzz_stop.c — libFuzzer target: the stop-string matcher on stop strings
 * and text from the input, fed in pieces whose sizes come from the input.
 * Checks the invariants (aborting on a violation): the released text is
 * always a prefix of the text so far; on a stop, a stop string starts right
 * after the released text; without one, every byte is released in the end
 * and the whole text holds no stop string; the held text stays shorter than
 * the longest stop string.
 * Input: n_stop (low 2 bits + 1), then per stop string a length byte (low 3
 * bits) and its bytes, then a piece-size byte before each piece of text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/stop_match.h"

#define MAXS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t at = 0;
    if (size < 1) return 0;
    char *str[MAXS];
    size_t len[MAXS], max = 0;
    int n = (data[at++] & 3) + 1;
    for (int k = 0; k < n; k++) {
        len[k] = at < size ? (data[at++] & 7) : 0;
        if (at + len[k] > size) len[k] = size - at;
        str[k] = (char *)data + at; /* borrowed; never written */
        at += len[k];
        max = len[k] > max ? len[k] : max;
    }
    const srv_stops st = {str, len, n, max};
    lilac_buf hold = LILAC_BUF_INIT, text = LILAC_BUF_INIT; /* held; everything fed */
    size_t released = 0;
    int stopped = 0;
    while (at < size && !stopped) {
        size_t piece = (data[at++] & 15) + 1;
        if (at + piece > size) piece = size - at;
        lilac_buf_append(&text, (const char *)data + at, piece);
        const size_t k = srv_stop_push(&st, &hold, (const char *)data + at, piece, &stopped);
        at += piece;
        if (k > hold.len || released + k > text.len || memcmp(hold.data, text.data + released, k) != 0) abort();
        released += k;
        if (stopped) {
            /* a stop string starts where the release ends */
            int found = 0;
            for (int s = 0; s < n; s++)
                found |= len[s] && released + len[s] <= text.len && !memcmp(text.data + released, str[s], len[s]);
            if (!found) abort();
        }
        srv_stop_consume(&hold, k, stopped);
        if (!stopped && hold.len > 0 && hold.len >= max) abort(); /* held: a proper prefix of a stop string */
    }
    if (!stopped) { /* the end of the output releases what was held */
        if (released + hold.len != text.len) abort();
        if (srv_stop_find(&st, text.data, text.len) >= 0) abort();
    }
    lilac_buf_free(&hold);
    lilac_buf_free(&text);
    return 0;
}
