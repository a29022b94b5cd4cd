/* threadpool.c — workers sleep on a condition variable between loops and pull
 * indices from an atomic counter during one. */
#include "util/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct lilac_pool {
    int nthreads; /* including the calling thread */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned long generation; /* bumped once per loop */
    int running;              /* workers still inside the current loop */
    int quit;
    /* the current loop */
    lilac_pool_fn fn;
    void *ctx;
    int n;
    atomic_int next;
};

struct worker_arg {
    lilac_pool *p;
    int tid;
};

static void run_items(lilac_pool *p, int tid) {
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        p->fn(p->ctx, i, tid);
    }
}

static void *worker(void *arg) {
    struct worker_arg wa = *(struct worker_arg *)arg;
    free(arg);
    lilac_pool *p = wa.p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_items(p, wa.tid);
        pthread_mutex_lock(&p->mu);
        if (--p->running == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int lilac_cores_available(void) {
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r"); /* "QUOTA PERIOD" or "max PERIOD" */
    if (f) {
        long long quota = 0, period = 0;
        if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
            long long q = (quota + period - 1) / period;
            if (q < n) n = (int)q;
        }
        fclose(f);
    }
    return n > 0 ? n : 1;
}

int lilac_pool_default_threads(void) {
    int n = lilac_cores_available();
    return n <= 2 ? 1 : n;
}

lilac_status lilac_pool_new(int threads, lilac_pool **out, lilac_error *e) {
    *out = NULL;
    if (threads <= 0) threads = lilac_pool_default_threads();
    if (threads > 1024) return lilac_fail(e, LILAC_EINVAL, "--threads %d is more than 1024", threads);
    lilac_pool *p = calloc(1, sizeof *p);
    if (!p) return lilac_fail(e, LILAC_ENOMEM, "thread pool");
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) {
        lilac_pool_free(p);
        return lilac_fail(e, LILAC_ENOMEM, "thread pool");
    }
    for (int t = 1; t < threads; t++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) {
            wa->p = p;
            wa->tid = t;
        }
        if (!wa || pthread_create(&p->threads[t], NULL, worker, wa) != 0) {
            free(wa);
            p->nthreads = t; /* join only those started */
            lilac_pool_free(p);
            return lilac_fail(e, LILAC_EINVAL, "cannot start thread %d", t);
        }
    }
    *out = p;
    return LILAC_OK;
}

void lilac_pool_free(lilac_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->nthreads; t++) pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

int lilac_pool_threads(const lilac_pool *p) { return p ? p->nthreads : 1; }

void lilac_pool_for(lilac_pool *p, int n, lilac_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    if (!p || p->nthreads == 1 || n == 1) {
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->running = p->nthreads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);

    run_items(p, 0);

    pthread_mutex_lock(&p->mu);
    while (p->running > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
