/* trace.c — see trace.h. */
#include "util/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int lilac_trace_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("LILAC_TRACE");
        on = v && *v && *v != '0';
    }
    return on;
}

/* LILAC_TRACE_DUMP=DIR also writes each array to DIR/<name>.<layer>.f32
 * (the last call wins), for element-wise diffs between backends. */
static void dump(const char *name, int layer, const float *x, size_t n) {
    const char *dir = getenv("LILAC_TRACE_DUMP");
    if (!dir || !*dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%d.f32", dir, name, layer);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(x, sizeof *x, n, f);
    fclose(f);
}

void lilac_trace(const char *name, int layer, const float *x, size_t n) {
    dump(name, layer, x, n);
    double s = 0, a = 0;
    for (size_t i = 0; i < n; i++) s += x[i], a += fabs(x[i]);
    fprintf(stderr, "trace %-12s[%2d]: n=%-7zu sum=%-14.6g abs=%-14.6g [", name, layer, n, s, a);
    for (size_t i = 0; i < n && i < 4; i++) fprintf(stderr, "%s%.6g", i ? " " : "", x[i]);
    fprintf(stderr, "]\n");
}
