/* bench_stats.h — the pure parts of `lilac bench`'s sweeps: length lists,
 * the statistics of repeated measurements, and the GPU facts nvidia-smi
 * reports.  No engine here, so all of it is unit-tested on any machine. */
#ifndef LILAC_CLI_BENCH_STATS_H
#define LILAC_CLI_BENCH_STATS_H

#include "util/err.h"

#define BENCH_MAX_LENGTHS 16
#define BENCH_MAX_REPEATS 100

/* The ten lengths of the default sweep: 256, 512, 1K, ..., 128K (K = 1024). */
extern const int bench_default_lengths[10];

/* Parses "512,4096,32K" (K = 1024, each in 1..2^24) into out; returns the
 * count or -1 with an error that names opt (e.g. "--decode"). */
int bench_parse_length_list(const char *opt, const char *list, int *out, int cap, lilac_error *e);

typedef struct {
    double median, min, max; /* median: the middle value, or the mean of the two middle values */
    int n;
} bench_stat;

/* Statistics of v[0..n) (n >= 1; v is not modified). */
bench_stat bench_stats(const double *v, int n);

typedef struct {
    char name[128];
    char driver[64];
    int sm_clock_mhz;     /* current SM clock; -1 = unknown */
    int sm_clock_max_mhz; /* -1 = unknown */
} bench_gpu_facts;

/* Parses one line of `nvidia-smi --query-gpu=name,driver_version,clocks.sm,
 * clocks.max.sm --format=csv,noheader,nounits` ("NVIDIA H200, 570.86.15,
 * 1980, 1980").  Returns 0, or -1 when the line does not have four fields;
 * a clock that is not a number (e.g. "[N/A]") becomes -1. */
int bench_parse_smi_line(const char *line, bench_gpu_facts *f);
/* Runs nvidia-smi for GPU 0; on any failure the facts say "unknown". */
void bench_query_gpu(bench_gpu_facts *f);

#endif
