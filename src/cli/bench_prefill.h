/* bench_prefill.h — prefill timing for `lilac bench --prefill LIST`. */
#ifndef LILAC_CLI_BENCH_PREFILL_H
#define LILAC_CLI_BENCH_PREFILL_H

#include "lilac.h"
#include "util/err.h"

typedef struct {
    int tokens;
    double prefill_s;  /* feeding the prompt (all chunks), wall clock */
    double ttft_s;     /* prompt fed and the first token generated */
    int have_prof;
    lilac_profile prof; /* ms per kernel class over the prompt's chunks */
} bench_prefill_result;

/* Parses "512,4096,32K" (K = 1024) into out; returns the count or -1. */
int bench_parse_lengths(const char *list, int *out, int cap, lilac_error *e);
/* Times a prompt of random ids of each length into a fresh session (a
 * line per length on stderr unless quiet). */
lilac_status bench_prefill(lilac_engine *eng, const int *lens, int nlen, int quiet, bench_prefill_result *res,
                           lilac_error *e);

#endif
