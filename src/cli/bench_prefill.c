/* bench_prefill.c — `lilac bench --prefill LIST`: prefill speed and time to
 * first token for each prompt length in LIST, with the backend's split of
 * the prefill time by kernel class. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench_prefill.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int bench_parse_lengths(const char *list, int *out, int cap, lilac_error *e) {
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0) return lilac_fail(e, LILAC_EINVAL, "--prefill: bad length at \"%s\"", p), -1;
        if (*end == 'K' || *end == 'k') v *= 1024, end++;
        if (v > (1 << 24)) return lilac_fail(e, LILAC_EINVAL, "--prefill: %ld tokens is too many", v), -1;
        if (n == cap) return lilac_fail(e, LILAC_EINVAL, "--prefill: more than %d lengths", cap), -1;
        out[n++] = (int)v;
        if (*end == ',' && end[1]) end++;
        else if (*end) return lilac_fail(e, LILAC_EINVAL, "--prefill: unexpected \"%s\"", end), -1;
        p = end;
    }
    if (!n) return lilac_fail(e, LILAC_EINVAL, "--prefill: no lengths"), -1;
    return n;
}

static int first_cb(void *ctx, const lilac_token_info *t) {
    (void)t;
    *(double *)ctx = now_s();
    return 1; /* one token is enough */
}

/* One prompt of n random ids into a fresh session: prefill seconds, and the
 * time to the first generated token. */
static lilac_status one(lilac_engine *eng, const int32_t *ids, int n, bench_prefill_result *r, lilac_error *e) {
    lilac_session *s = NULL;
    lilac_status st = lilac_session_new(eng, n + 8, &s, e);
    if (st) return st;
    double t0 = now_s(), t_first = 0;
    st = lilac_session_feed(s, ids, n, NULL, 0, e);
    r->prefill_s = now_s() - t0;
    if (!st) {
        lilac_gen_params p = {0};
        p.max_tokens = 1;
        p.sampling = lilac_sampling_greedy();
        int got = 0;
        lilac_finish why;
        st = lilac_session_generate(s, &p, first_cb, &t_first, &got, &why, e);
        r->ttft_s = t_first > 0 ? t_first - t0 : 0;
    }
    lilac_session_free(s);
    return st;
}

lilac_status bench_prefill(lilac_engine *eng, const int *lens, int nlen, int quiet, bench_prefill_result *res,
                           lilac_error *e) {
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int max = 0;
    for (int i = 0; i < nlen; i++) max = lens[i] > max ? lens[i] : max;
    int32_t *ids = malloc((size_t)max * sizeof *ids);
    if (!ids) return lilac_fail(e, LILAC_ENOMEM, "prefill ids");
    uint64_t x = 42;
    for (int i = 0; i < max; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)((x >> 33) % (uint64_t)info.vocab_size);
    /* an untimed prompt first (first-use costs) */
    bench_prefill_result warm;
    lilac_status st = one(eng, ids, max < 256 ? max : 256, &warm, e);
    for (int i = 0; i < nlen && !st; i++) {
        bench_prefill_result *r = &res[i];
        memset(r, 0, sizeof *r);
        r->tokens = lens[i];
        const int profiled = lilac_engine_prefill_profile(eng, 1, NULL, e) == LILAC_OK;
        st = one(eng, ids, lens[i], r, e);
        if (profiled && lilac_engine_prefill_profile(eng, 0, &r->prof, e) == LILAC_OK) r->have_prof = 1;
        if (!st && !quiet)
            fprintf(stderr, "bench: prefill %d tokens: %.3f s (%.0f tokens/s), first token after %.3f s\n", lens[i],
                    r->prefill_s, lens[i] / r->prefill_s, r->ttft_s);
    }
    free(ids);
    return st;
}
