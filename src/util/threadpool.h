/* threadpool.h — a fixed pool of pthreads for data-parallel loops.
 *
 * lilac_pool_for(pool, n, fn, ctx) calls fn(ctx, i, tid) for every i in [0, n)
 * across the pool's threads (the caller is one of them) and returns when all
 * are done.  Work is handed out one index at a time through an atomic counter,
 * so callers pick n to be the number of useful, similarly sized pieces
 * (row blocks, heads, experts).  One loop at a time per pool.
 */
#ifndef LILAC_UTIL_THREADPOOL_H
#define LILAC_UTIL_THREADPOOL_H

#include "util/err.h"

typedef struct lilac_pool lilac_pool;
typedef void (*lilac_pool_fn)(void *ctx, int i, int tid);

/* threads <= 0 means one per online CPU. */
lilac_status lilac_pool_new(int threads, lilac_pool **out, lilac_error *e);
void lilac_pool_free(lilac_pool *p);
int lilac_pool_threads(const lilac_pool *p);
void lilac_pool_for(lilac_pool *p, int n, lilac_pool_fn fn, void *ctx);

#endif
