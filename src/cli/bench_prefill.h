/* bench_prefill.h — prefill and decode timing for `lilac bench`'s sweeps. */
#ifndef LILAC_CLI_BENCH_PREFILL_H
#define LILAC_CLI_BENCH_PREFILL_H

#include "cli/bench_stats.h"
#include "lilac.h"
#include "util/err.h"

typedef struct {
    int tokens;
    int runs;
    double run_prefill_s[BENCH_MAX_REPEATS]; /* feeding the prompt (all chunks), wall clock */
    double run_ttft_s[BENCH_MAX_REPEATS];    /* prompt fed and the first token generated */
    bench_stat tps;                          /* prompt tokens / prefill seconds over the runs */
    bench_stat ttft;                         /* seconds */
    double prefill_s, ttft_s;                /* medians */
    int have_prof;
    lilac_profile prof; /* ms per kernel class over the first run's chunks */
    double dev_used_bytes; /* device memory in use with the prompt's session alive (0: not reported) */
} bench_prefill_result;

typedef struct {
    int context;  /* positions in the state before the timed steps */
    int tokens;   /* tokens timed per run */
    int runs;
    double run_tps[BENCH_MAX_REPEATS];
    bench_stat tps;    /* tokens/s */
    bench_stat ms;     /* ms per token */
    int have_prof;
    lilac_profile prof; /* one step by kernel class (after the runs) */
} bench_decode_result;

/* Times a prompt of random ids of each length into a fresh session, repeats
 * times each (a line per run on stderr unless quiet). */
lilac_status bench_prefill(lilac_engine *eng, const int *lens, int nlen, int repeats, int quiet, bench_prefill_result *res,
                           lilac_error *e);

typedef struct {
    int tokens, warmup, repeats;
    int real_context; /* prefill the context with random ids instead of lilac_session_fill_random */
    int profile;      /* also profile one step by kernel class */
    int quiet;
} bench_decode_opts;

/* Decode speed at a context of ctx positions: the context is built once
 * (filled or prefilled) and kept as a snapshot; each run restores it and
 * times o->tokens greedy steps (after o->warmup untimed ones, first run). */
lilac_status bench_decode(lilac_engine *eng, int ctx, const bench_decode_opts *o, bench_decode_result *r, lilac_error *e);

#endif
