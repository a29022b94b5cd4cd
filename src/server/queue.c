/* queue.c — the bounded FIFO of requests waiting for the engine thread.
 *
 * HTTP threads push; the engine thread pops one job at a time and marks it
 * running.  The bound counts waiting jobs only (not the running one): a push
 * beyond it is refused, and the HTTP thread answers 429.  A job whose client
 * leaves while it waits is unlinked at once, so it does not hold a place. */
#include <stdio.h>
#include <stdlib.h>

#include "server/server.h"

struct srv_queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail;
    int n, cap;
    srv_job *running;
    int stopped;
};

srv_queue *srv_queue_new(int cap) {
    srv_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->cap = cap;
    return q;
}

void srv_queue_free(srv_queue *q) {
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

static void unlink_job(srv_queue *q, srv_job *j) {
    if (j->prev) j->prev->next = j->next;
    else q->head = j->next;
    if (j->next) j->next->prev = j->prev;
    else q->tail = j->prev;
    j->next = j->prev = NULL;
    j->queued = 0;
    q->n--;
}

int srv_queue_push(srv_queue *q, srv_job *j) {
    pthread_mutex_lock(&q->mu);
    int r = q->stopped ? SRV_Q_STOPPED : q->n >= q->cap ? SRV_Q_FULL : SRV_Q_OK;
    if (r == SRV_Q_OK) {
        atomic_fetch_add(&j->refs, 1);
        j->prev = q->tail;
        j->next = NULL;
        if (q->tail) q->tail->next = j;
        else q->head = j;
        q->tail = j;
        j->queued = 1;
        q->n++;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

srv_job *srv_queue_pop(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->stopped) pthread_cond_wait(&q->cv, &q->mu);
    srv_job *j = q->head;
    if (j) unlink_job(q, j);
    q->running = j;
    pthread_mutex_unlock(&q->mu);
    return j;
}

void srv_queue_clear_running(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->running = NULL;
    pthread_mutex_unlock(&q->mu);
}

void srv_queue_cancel(srv_queue *q, srv_job *j) {
    atomic_store(&j->cancel, 1);
    pthread_mutex_lock(&q->mu);
    int was_waiting = j->queued;
    if (was_waiting) unlink_job(q, j);
    pthread_mutex_unlock(&q->mu);
    if (was_waiting) { /* the engine never saw it: finish it here and drop the queue's reference */
        if (!j->srv->o.quiet) fprintf(stderr, "lilac serve: %s cancelled: client closed (while queued)\n", j->id);
        srv_job_finish(j);
        srv_job_release(j);
    }
}

void srv_queue_stop(srv_queue *q) {
    srv_err err;
    srv_errf(&err, 503, NULL, "the server is shutting down");
    err.code = "shutting_down";
    pthread_mutex_lock(&q->mu);
    q->stopped = 1;
    srv_job *j;
    while ((j = q->head)) {
        unlink_job(q, j);
        srv_job_fail(j, &err);
        if (j->stream) srv_resp_stream_error(j, &err);
        srv_job_finish(j);
        srv_job_release(j);
    }
    /* 2 = cut short by the shutdown: the engine reports 503 if it was */
    if (q->running) atomic_store(&q->running->cancel, 2);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

int srv_queue_waiting(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    int n = q->n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int srv_queue_busy(srv_queue *q) {
    pthread_mutex_lock(&q->mu);
    int b = q->running != NULL;
    pthread_mutex_unlock(&q->mu);
    return b;
}
