/* fake_constraint.h — test helper: a lilac_constraint over the tiny model's
 * 512 ids that allows the multiples of 3 below 300 and records the ids it
 * accepts, in order.  Its knobs make the mask fail, end generation, or
 * refuse an id.  Shared by test_constrained.c (CPU) and
 * test_gpu_constrained.c (the GPU sampler against the host loop). */
#ifndef LILAC_TEST_FAKE_CONSTRAINT_H
#define LILAC_TEST_FAKE_CONSTRAINT_H

#include <stdint.h>
#include <string.h>

#include "lilac.h"

#define FAKE_VOCAB 512
#define FAKE_WORDS ((FAKE_VOCAB + 31) / 32)
#define FAKE_MAXN 256

typedef struct {
    int calls;      /* mask calls so far */
    int none_after; /* the mask says LILAC_MASK_NONE once this many ids are accepted (-1: never) */
    int fail_at;    /* the mask fails (LILAC_MASK_ERROR) at this call (-1: never) */
    int refuse_at;  /* accept refuses the id at this position (-1: never) */
    int n;          /* ids accepted */
    int32_t seen[FAKE_MAXN];
} fake;

static inline int allowed(int32_t id) { return id % 3 == 0 && id < 300; }

static inline int f_mask(void *ctx, uint32_t *bits) {
    fake *f = ctx;
    if (f->calls++ == f->fail_at) return LILAC_MASK_ERROR;
    if (f->none_after >= 0 && f->n >= f->none_after) return LILAC_MASK_NONE;
    memset(bits, 0, FAKE_WORDS * sizeof *bits);
    for (int i = 0; i < FAKE_VOCAB; i++)
        if (allowed(i)) bits[i >> 5] |= 1u << (i & 31);
    return LILAC_MASK_SOME;
}

static inline int f_accept(void *ctx, int32_t id) {
    fake *f = ctx;
    if (f->n == f->refuse_at) return -1;
    if (f->n < FAKE_MAXN) f->seen[f->n++] = id;
    return 0;
}

/* A fake with every knob off. */
static inline fake fake_new(void) {
    fake f;
    memset(&f, 0, sizeof f);
    f.none_after = f.fail_at = f.refuse_at = -1;
    return f;
}

#endif
