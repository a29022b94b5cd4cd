/* job.c — one request on its way through the server: creation, the shared
 * SSE buffer, finishing, and reference counting.  A job has two owners (the
 * HTTP thread that waits on it and the engine thread that runs it); the last
 * release frees it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int srv_errf(srv_err *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = status == 401 ? "authentication_error"
              : status == 429 ? "rate_limit_error"
              : status >= 500 ? "server_error"
                              : "invalid_request_error";
    e->code = NULL;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

srv_job *srv_job_new(const srv_ctx *srv, srv_kind kind) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->srv = srv;
    j->kind = kind;
    j->last_id = -1;
    j->stop_which = -1;
    j->blk_kind = -1;
    j->t_created = srv_now();
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    atomic_init(&j->cancel, 0);
    atomic_init(&j->refs, 1);
    return j;
}

void srv_job_release(srv_job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->stop_len);
    free((void *)j->gen.stop_ids);
    lilac_parser_free(j->parser);
    lg_constraint_free(j->constraint);
    lilac_buf_free(&j->piece);
    lilac_buf_free(&j->hold);
    lilac_buf_free(&j->text);
    lilac_buf_free(&j->sse);
    json_decref(j->lp_all);
    json_decref(j->lp_pend);
    json_decref(j->blocks);
    json_decref(j->blk);
    lilac_buf_free(&j->blk_text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_push_sse(srv_job *j, const char *p, size_t n) {
    pthread_mutex_lock(&j->mu);
    lilac_buf_append(&j->sse, p, n);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_finish(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_fail(srv_job *j, const srv_err *err) {
    pthread_mutex_lock(&j->mu);
    if (!j->failed) {
        j->failed = 1;
        j->err = *err;
    }
    pthread_mutex_unlock(&j->mu);
}
