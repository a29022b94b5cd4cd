/* bench_stats.c — length lists, statistics of repeats, nvidia-smi facts
 * for `lilac bench` (see bench_stats.h). */
#include "cli/bench_stats.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int bench_default_lengths[10] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};

int bench_parse_length_list(const char *opt, const char *list, int *out, int cap, lilac_error *e) {
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p)) return lilac_fail(e, LILAC_EINVAL, "%s: bad length at \"%s\"", opt, p), -1;
        long v = strtol(p, &end, 10);
        if (v <= 0) return lilac_fail(e, LILAC_EINVAL, "%s: bad length at \"%s\"", opt, p), -1;
        if (*end == 'K' || *end == 'k') {
            if (v > (1 << 24)) return lilac_fail(e, LILAC_EINVAL, "%s: %ldK tokens is too many", opt, v), -1;
            v *= 1024, end++;
        }
        if (v > (1 << 24)) return lilac_fail(e, LILAC_EINVAL, "%s: %ld tokens is too many", opt, v), -1;
        if (n == cap) return lilac_fail(e, LILAC_EINVAL, "%s: more than %d lengths", opt, cap), -1;
        out[n++] = (int)v;
        if (*end == ',' && end[1]) end++;
        else if (*end) return lilac_fail(e, LILAC_EINVAL, "%s: unexpected \"%s\"", opt, end), -1;
        p = end;
    }
    if (!n) return lilac_fail(e, LILAC_EINVAL, "%s: no lengths", opt), -1;
    return n;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stat bench_stats(const double *v, int n) {
    bench_stat s = {0, 0, 0, n};
    if (n <= 0) return s;
    double tmp[BENCH_MAX_REPEATS];
    double *w = n <= BENCH_MAX_REPEATS ? tmp : malloc((size_t)n * sizeof *w);
    if (!w) return s;
    memcpy(w, v, (size_t)n * sizeof *w);
    qsort(w, (size_t)n, sizeof *w, cmp_double);
    s.min = w[0], s.max = w[n - 1];
    s.median = n % 2 ? w[n / 2] : 0.5 * (w[n / 2 - 1] + w[n / 2]);
    if (w != tmp) free(w);
    return s;
}

/* Copies the field [b, e) of a CSV line into dst, spaces trimmed. */
static void field(char *dst, size_t cap, const char *b, const char *e) {
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    size_t n = (size_t)(e - b) < cap - 1 ? (size_t)(e - b) : cap - 1;
    memcpy(dst, b, n);
    dst[n] = 0;
}

static int clock_of(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 100000) return -1;
    return (int)v;
}

int bench_parse_smi_line(const char *line, bench_gpu_facts *f) {
    const char *b[4], *e[4];
    const char *p = line;
    for (int i = 0; i < 4; i++) {
        b[i] = p;
        const char *c = i < 3 ? strchr(p, ',') : p + strcspn(p, "\r\n");
        if (!c) return -1;
        e[i] = c;
        p = c + 1;
    }
    if (memchr(b[3], ',', (size_t)(e[3] - b[3]))) return -1; /* a fifth field */
    char c0[32], c1[32];
    field(f->name, sizeof f->name, b[0], e[0]);
    field(f->driver, sizeof f->driver, b[1], e[1]);
    field(c0, sizeof c0, b[2], e[2]);
    field(c1, sizeof c1, b[3], e[3]);
    f->sm_clock_mhz = clock_of(c0);
    f->sm_clock_max_mhz = clock_of(c1);
    return f->name[0] ? 0 : -1;
}

void bench_query_gpu(bench_gpu_facts *f) {
    snprintf(f->name, sizeof f->name, "unknown");
    snprintf(f->driver, sizeof f->driver, "unknown");
    f->sm_clock_mhz = f->sm_clock_max_mhz = -1;
    FILE *p = popen("nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader,nounits "
                    "-i 0 2>/dev/null",
                    "r");
    if (!p) return;
    char line[512];
    bench_gpu_facts g;
    if (fgets(line, sizeof line, p) && bench_parse_smi_line(line, &g) == 0) *f = g;
    pclose(p);
}
