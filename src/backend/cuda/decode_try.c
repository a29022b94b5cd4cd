/* decode_try.c — LILAC_DECODE_TRY: which decode kernel variants run
 * (cuda_ops.h's LC_TRY_* bits; unset = LC_TRY_DEFAULT, "none" = none).
 * Read at each call: the decode step is enqueued once per captured graph,
 * and the tests switch the variable between sessions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ops.h"

static const struct {
    const char *name;
    int bit;
} names[] = {
    {"xchg", LC_TRY_XCHG},
    {"c8", LC_TRY_C8},
    {"topk1", LC_TRY_TOPK1},
    {"pick", LC_TRY_PICK},
    {"tk9", LC_TRY_TK9},
    {"hring", LC_TRY_HRING},
    {"hearly", LC_TRY_HEARLY},
    {"eslot", LC_TRY_ESLOT},
    {"all", LC_TRY_ALL},
    {"none", 0},
};

/* The bits of a comma list; an unknown name is reported once and ignored. */
static int parse(const char *s) {
    static int warned;
    int bits = 0;
    while (*s) {
        const size_t n = strcspn(s, ",");
        int found = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && strncmp(s, names[i].name, n) == 0) bits |= names[i].bit, found = 1;
        if (!found && n > 0 && !warned) {
            fprintf(stderr, "lilac: LILAC_DECODE_TRY: unknown variant '%.*s' ignored (xchg, c8, topk1, pick, tk9, hring, hearly, eslot, all, none)\n",
                    (int)(n < 64 ? n : 64), s);
            warned = 1;
        }
        s += n;
        if (*s == ',') s++;
    }
    return bits;
}

int lc_decode_try(void) {
    const char *s = getenv("LILAC_DECODE_TRY");
    return s && *s ? parse(s) : LC_TRY_DEFAULT;
}

int lc_decode_try_default(void) { return LC_TRY_DEFAULT; }

/* Launches are enqueued by one thread at a time (a backend's stream). */
static int g_used;
void lc_decode_try_note(int bits) { g_used |= bits; }
int lc_decode_try_used(int reset) {
    const int u = g_used;
    if (reset) g_used = 0;
    return u;
}
