/* trace.h — debugging aid: with LILAC_TRACE=1 in the environment, backends
 * print a one-line summary (count, sum, sum of |x|, first values) of named
 * intermediate buffers, so two backends' runs of the same input can be
 * diffed line by line to find the first operation that disagrees. */
#ifndef LILAC_UTIL_TRACE_H
#define LILAC_UTIL_TRACE_H

#include <stddef.h>

int lilac_trace_on(void);
/* Prints "trace NAME[layer]: n=.. sum=.. abs=.. [x0 x1 x2 x3]" to stderr. */
void lilac_trace(const char *name, int layer, const float *x, size_t n);

#endif
