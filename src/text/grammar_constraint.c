/* grammar_constraint.c — the engine's view of a grammar (lilac_constraint in
 * lilac.h): the free reasoning block first when thinking is on, then the
 * matcher's mask; accepted ids advance it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/grammar_impl.h"

struct lg_constraint {
    lilac_constraint c;
    lg_grammar *g;
    lg_matcher *m;
    const lg_vocab *v;
    int thinking;
    int32_t think_close;
    uint32_t *free_bits; /* every id but the end ids (the reasoning block) */
    long masks;
    double seconds;
    lilac_error err;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int c_mask(void *ctx, uint32_t *bits) {
    lg_constraint *c = ctx;
    if (c->thinking) {
        memcpy(bits, c->free_bits, (size_t)c->v->words * sizeof *bits);
        return LILAC_MASK_SOME;
    }
    double t0 = now_s();
    int n = lg_matcher_mask(c->m, bits, &c->err);
    c->seconds += now_s() - t0;
    c->masks++;
    return n < 0 ? LILAC_MASK_ERROR : n == 0 ? LILAC_MASK_NONE : LILAC_MASK_SOME;
}

static int c_accept(void *ctx, int32_t id) {
    lg_constraint *c = ctx;
    if (c->thinking) {
        if (id == c->think_close) c->thinking = 0;
        return 0;
    }
    if (lg_matcher_accept(c->m, id)) {
        lilac_fail(&c->err, LILAC_EINVAL, "token %d does not fit the grammar", id);
        return -1;
    }
    return 0;
}

lilac_status lg_constraint_new(lg_grammar *g, const lg_vocab *v, const int32_t *end_ids, int n_end, int think_open,
                               int32_t think_close, lg_constraint **out, lilac_error *e) {
    *out = NULL;
    lg_constraint *c = calloc(1, sizeof *c);
    if (!c) {
        lg_free(g);
        return lilac_fail(e, LILAC_ENOMEM, "constraint");
    }
    c->g = g;
    c->v = v;
    c->think_close = think_close;
    c->thinking = think_open && think_close >= 0;
    c->c.mask = c_mask;
    c->c.accept = c_accept;
    c->c.ctx = c;
    lilac_status st = lg_matcher_new(g, v, end_ids, n_end, &c->m, e);
    if (!st && !(c->free_bits = malloc((size_t)v->words * sizeof *c->free_bits)))
        st = lilac_fail(e, LILAC_ENOMEM, "constraint");
    if (st) {
        lg_constraint_free(c);
        return st;
    }
    memset(c->free_bits, 0xff, (size_t)v->words * sizeof *c->free_bits);
    if (v->V % 32) c->free_bits[v->words - 1] = (1u << (v->V % 32)) - 1;
    for (int k = 0; k < n_end; k++)
        if (end_ids[k] >= 0 && end_ids[k] < v->V) c->free_bits[end_ids[k] >> 5] &= ~(1u << (end_ids[k] & 31));
    *out = c;
    return LILAC_OK;
}

void lg_constraint_free(lg_constraint *c) {
    if (!c) return;
    lg_matcher_free(c->m);
    lg_free(c->g);
    free(c->free_bits);
    free(c);
}

const lilac_constraint *lg_constraint_get(lg_constraint *c) { return &c->c; }

void lg_constraint_stats(const lg_constraint *c, long *masks, double *seconds) {
    *masks = c->masks;
    *seconds = c->seconds;
}

const char *lg_constraint_error(const lg_constraint *c) { return c->err.msg; }
