/* bench_prefill.c — the measurements of `lilac bench`: prefill speed and
 * time to first token for each prompt length (with the backend's split of
 * the prefill time by kernel class), and decode speed at a context length,
 * each repeated.  Reporting is cmd_bench.c's; statistics bench_stats.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench_prefill.h"
#include "cli/bench_stats.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int first_cb(void *ctx, const lilac_token_info *t) {
    (void)t;
    *(double *)ctx = now_s();
    return 1; /* one token is enough */
}

static int count_cb(void *ctx, const lilac_token_info *t) {
    (void)t;
    ++*(int *)ctx;
    return 0;
}

/* n random ids below vocab, the same for every call with the same seed. */
static int32_t *random_ids(int n, int vocab, uint64_t x) {
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids) return NULL;
    for (int i = 0; i < n; i++)
        x = x * 6364136223846793005ull + 1442695040888963407ull, ids[i] = (int32_t)((x >> 33) % (uint64_t)vocab);
    return ids;
}

/* One prompt of n random ids into a fresh session: prefill seconds, and the
 * time to the first generated token. */
static lilac_status one(lilac_engine *eng, const int32_t *ids, int n, double *prefill_s, double *ttft_s, double *dev_used,
                        lilac_error *e) {
    lilac_session *s = NULL;
    lilac_status st = lilac_session_new(eng, n + 8, &s, e);
    if (st) return st;
    double t0 = now_s(), t_first = 0;
    st = lilac_session_feed(s, ids, n, NULL, 0, e);
    *prefill_s = now_s() - t0;
    /* the backend allocates its prefill scratch once, so what is in use now
     * (weights, scratch, this session) is the peak of this prompt */
    size_t used = 0, total = 0;
    *dev_used = lilac_engine_device_memory(eng, &used, &total) == LILAC_OK ? (double)used : 0;
    *ttft_s = 0;
    if (!st) {
        lilac_gen_params p = {0};
        p.max_tokens = 1;
        p.sampling = lilac_sampling_greedy();
        int got = 0;
        lilac_finish why;
        st = lilac_session_generate(s, &p, first_cb, &t_first, &got, &why, e);
        *ttft_s = t_first > 0 ? t_first - t0 : 0;
    }
    lilac_session_free(s);
    return st;
}

lilac_status bench_prefill(lilac_engine *eng, const int *lens, int nlen, int repeats, int quiet, bench_prefill_result *res,
                           lilac_error *e) {
    if (repeats < 1 || repeats > BENCH_MAX_REPEATS)
        return lilac_fail(e, LILAC_EINVAL, "bench: %d repeats is outside [1, %d]", repeats, BENCH_MAX_REPEATS);
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    int max = 0;
    for (int i = 0; i < nlen; i++) max = lens[i] > max ? lens[i] : max;
    int32_t *ids = random_ids(max, info.vocab_size, 42);
    if (!ids) return lilac_fail(e, LILAC_ENOMEM, "prefill ids: %d tokens", max);
    /* an untimed prompt first (first-use costs) */
    double ws, wt, wm;
    lilac_status st = one(eng, ids, max < 256 ? max : 256, &ws, &wt, &wm, e);
    for (int i = 0; i < nlen && !st; i++) {
        bench_prefill_result *r = &res[i];
        memset(r, 0, sizeof *r);
        r->tokens = lens[i];
        double tps[BENCH_MAX_REPEATS];
        for (int k = 0; k < repeats && !st; k++) {
            /* the kernel-class split of the first run only: profiling costs time */
            const int profiled = k == 0 && lilac_engine_prefill_profile(eng, 1, NULL, e) == LILAC_OK;
            double used = 0;
            st = one(eng, ids, lens[i], &r->run_prefill_s[k], &r->run_ttft_s[k], &used, e);
            if (used > r->dev_used_bytes) r->dev_used_bytes = used;
            if (profiled && lilac_engine_prefill_profile(eng, 0, &r->prof, e) == LILAC_OK) r->have_prof = 1;
            if (st) break;
            tps[k] = lens[i] / r->run_prefill_s[k];
            r->runs = k + 1;
            if (!quiet)
                fprintf(stderr, "bench: prefill %d tokens, run %d/%d: %.3f s (%.0f tokens/s), first token after %.3f s\n",
                        lens[i], k + 1, repeats, r->run_prefill_s[k], tps[k], r->run_ttft_s[k]);
        }
        if (st) break;
        r->tps = bench_stats(tps, r->runs);
        r->ttft = bench_stats(r->run_ttft_s, r->runs);
        bench_stat ps = bench_stats(r->run_prefill_s, r->runs);
        r->prefill_s = ps.median, r->ttft_s = r->ttft.median;
    }
    free(ids);
    return st;
}

lilac_status bench_decode(lilac_engine *eng, int ctx, const bench_decode_opts *o, bench_decode_result *r, lilac_error *e) {
    memset(r, 0, sizeof *r);
    r->context = ctx, r->tokens = o->tokens;
    if (o->repeats < 1 || o->repeats > BENCH_MAX_REPEATS)
        return lilac_fail(e, LILAC_EINVAL, "bench: %d repeats is outside [1, %d]", o->repeats, BENCH_MAX_REPEATS);
    if (o->tokens < 1) return lilac_fail(e, LILAC_EINVAL, "bench: %d decode tokens", o->tokens);
    lilac_engine_info info;
    lilac_engine_get_info(eng, &info);
    const int steps = o->warmup > o->tokens ? o->warmup : o->tokens;
    const long cap = (long)ctx + 1 + steps + 64; /* + the profiler's few steps */
    if (info.max_pos > 0 && cap > info.max_pos)
        return lilac_fail(e, LILAC_EINVAL, "bench: decode at context %d needs %ld positions; the model has %d", ctx, cap,
                          info.max_pos);
    lilac_session *base = NULL, *s = NULL;
    lilac_status st = lilac_session_new(eng, (int)cap, &base, e);
    if (!st) st = lilac_session_new(eng, (int)cap, &s, e);
    if (st) goto done;
    const double t0 = now_s();
    if (o->real_context) {
        int32_t *ids = random_ids(ctx, info.vocab_size, 7);
        if (!ids) {
            st = lilac_fail(e, LILAC_ENOMEM, "context ids: %d tokens", ctx);
            goto done;
        }
        st = lilac_session_feed(base, ids, ctx, NULL, 0, e);
        free(ids);
    } else {
        st = lilac_session_fill_random(base, ctx, 1234, e);
        if (st == LILAC_EUNSUPPORTED)
            st = lilac_fail(e, LILAC_EUNSUPPORTED,
                            "bench: decode at a context: the %s backend cannot fill a context with random state; "
                            "add --real-context to prefill it for real, or run on a GPU",
                            info.backend);
    }
    if (st) goto done;
    if (!o->quiet)
        fprintf(stderr, "bench: context of %d tokens %s in %.3f s\n", ctx, o->real_context ? "prefilled" : "filled",
                now_s() - t0);
    lilac_gen_params p = {0};
    p.sampling = lilac_sampling_greedy();
    lilac_finish why;
    int got = 0;
    if (o->warmup) {
        if ((st = lilac_session_copy(s, base, e))) goto done;
        p.max_tokens = o->warmup;
        int cnt = 0;
        if ((st = lilac_session_generate(s, &p, count_cb, &cnt, &got, &why, e))) goto done;
    }
    for (int k = 0; k < o->repeats; k++) {
        if ((st = lilac_session_copy(s, base, e))) goto done;
        p.max_tokens = o->tokens;
        int cnt = 0;
        const double t1 = now_s();
        if ((st = lilac_session_generate(s, &p, count_cb, &cnt, &got, &why, e))) goto done;
        const double dt = now_s() - t1;
        if (got < 1) {
            st = lilac_fail(e, LILAC_EBACKEND, "bench: decode at context %d generated no tokens", ctx);
            goto done;
        }
        r->run_tps[k] = got / dt;
        r->tokens = got;
        r->runs = k + 1;
        if (!o->quiet)
            fprintf(stderr, "bench: decode at context %d, run %d/%d: %d tokens in %.3f s (%.1f tokens/s)\n", ctx, k + 1,
                    o->repeats, got, dt, r->run_tps[k]);
    }
    r->tps = bench_stats(r->run_tps, r->runs);
    double ms[BENCH_MAX_REPEATS];
    for (int k = 0; k < r->runs; k++) ms[k] = 1e3 / r->run_tps[k];
    r->ms = bench_stats(ms, r->runs);
    if (o->profile) {
        if (lilac_session_profile(s, &r->prof, e) == LILAC_OK) r->have_prof = 1;
        else if (!o->quiet) fprintf(stderr, "note: no decode profile: %s\n", e->msg);
    }
done:
    lilac_session_free(s);
    lilac_session_free(base);
    return st;
}
