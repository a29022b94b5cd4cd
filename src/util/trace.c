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

void lilac_trace(const char *name, int layer, const float *x, size_t n) {
    double s = 0, a = 0;
    for (size_t i = 0; i < n; i++) s += x[i], a += fabs(x[i]);
    fprintf(stderr, "trace %-12s[%2d]: n=%-7zu sum=%-14.6g abs=%-14.6g [", name, layer, n, s, a);
    for (size_t i = 0; i < n && i < 4; i++) fprintf(stderr, "%s%.6g", i ? " " : "", x[i]);
    fprintf(stderr, "]\n");
}
