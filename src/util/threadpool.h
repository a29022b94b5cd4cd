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

/* The CPUs this process may run on: its affinity mask, capped by a cgroup v2
 * CPU quota (/sys/fs/cgroup/cpu.max) when there is one; at least 1. */
int lilac_cores_available(void);

/* The default worker count: 1 when at most 2 cores are available (measured on
 * a 2-core machine: one thread decodes the tiny model 2x faster than two and
 * the real width no slower, docs/PERFORMANCE.md), else one per core. */
int lilac_pool_default_threads(void);

/* threads <= 0 means lilac_pool_default_threads().  More threads than cores
 * are allowed here (tests exercise the hand-offs); the command line clamps. */
lilac_status lilac_pool_new(int threads, lilac_pool **out, lilac_error *e);
void lilac_pool_free(lilac_pool *p);
int lilac_pool_threads(const lilac_pool *p);
void lilac_pool_for(lilac_pool *p, int n, lilac_pool_fn fn, void *ctx);

#endif
