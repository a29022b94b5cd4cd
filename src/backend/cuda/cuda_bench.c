/* cuda_bench.c — benchmark-only parts of the CUDA backend: a random context
 * of any length without a prefill, and the per-kernel-class profile of one
 * decode step against the measured copy bandwidth. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"

lilac_status cuda_state_fill_random(lilac_backend *b, lilac_state *s, int n, uint64_t seed, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    if (n > s->cap) return lilac_fail(e, LILAC_EINVAL, "%d positions exceed the state's %d", n, s->cap);
    const size_t kv = (size_t)n * c->n_kv_heads * c->head_dim;
    for (int i = 0; i < c->n_attn_layers; i++) {
        LC_CHECK(lc_fill_bf16(s->kc[i], kv, seed + 2 * i, -1.0f, 1.0f, b->st));
        LC_CHECK(lc_fill_bf16(s->vc[i], kv, seed + 2 * i + 1, -1.0f, 1.0f, b->st));
    }
    for (int i = 0; i < c->n_lin_layers; i++) {
        LC_CHECK(lc_fill_f32(s->conv[i], 2 * (size_t)(c->conv_kernel - 1) * c->conv_dim, seed + 1000 + i, -0.5f, 0.5f, b->st));
        LC_CHECK(lc_fill_f32(s->rec[i], (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim, seed + 2000 + i, -0.05f,
                             0.05f, b->st));
    }
    lc_ctrl h = {0};
    h.pos = n;
    LC_CHECK(cudaMemcpyAsync(s->ctrl, &h, sizeof h, cudaMemcpyHostToDevice, b->st));
    LC_CHECK(cudaStreamSynchronize(b->st));
    s->pos = n;
    return LILAC_OK;
}

static double qbytes(const lc_qmat *m) {
    return (double)m->rows * m->n_mat * ((double)m->cols * m->bits / 8 + (double)m->cols / LC_GROUP * 4);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static lilac_status copy_bandwidth(lilac_backend *b, double *gbps, lilac_error *e) {
    const size_t n = (size_t)1 << 30;
    void *src = NULL, *dst = NULL;
    if (cudaMalloc(&src, n) != cudaSuccess || cudaMalloc(&dst, n) != cudaSuccess) {
        cudaFree(src);
        cudaGetLastError();
        *gbps = 0;
        return LILAC_OK; /* not enough memory left: report 0 rather than fail */
    }
    cudaEvent_t a, z;
    cudaEventCreate(&a);
    cudaEventCreate(&z);
    cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, b->st);
    cudaEventRecord(a, b->st);
    for (int i = 0; i < 10; i++) cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, b->st);
    cudaEventRecord(z, b->st);
    cudaError_t err = cudaEventSynchronize(z);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    cudaFree(src);
    cudaFree(dst);
    LC_CHECK(err);
    *gbps = 2.0 * n * 10 / (ms * 1e-3) / 1e9; /* bytes read + written */
    return LILAC_OK;
}

lilac_status cuda_profile(lilac_backend *b, lilac_state *s, lilac_profile *p, lilac_error *e) {
    const lilac_config *c = &b->m->cfg;
    enum { WARM = 3, REPS = 21 };
    if (s->pos + 2 * (WARM + REPS) + 4 > s->cap)
        return lilac_fail(e, LILAC_EINVAL, "profile needs %d free positions in the session", 2 * (WARM + REPS) + 4);
    lilac_status st = copy_bandwidth(b, &p->copy_gbps, e);
    if (st) return st;

    /* bytes one step must move: every weight it reads, the KV cache, the
     * recurrent state read and written */
    double bytes = qbytes(&b->lm_head) + (double)c->hidden * 0.5625;
    for (int l = 0; l < c->n_layers; l++) {
        const cuda_layer *cl = &b->layers[l];
        bytes += qbytes(&cl->in_proj) + qbytes(&cl->out_proj) + qbytes(&cl->router) + qbytes(&cl->sh_gu) + qbytes(&cl->sh_down);
        bytes += (qbytes(&cl->gate) + qbytes(&cl->up) + qbytes(&cl->down)) * c->n_experts_per_tok / c->n_experts;
    }
    bytes += (double)c->n_attn_layers * 2 * s->pos * c->n_kv_heads * c->head_dim * 2;
    bytes += (double)c->n_lin_layers * 2 * c->lin_v_heads * c->lin_k_dim * c->lin_v_dim * 4;
    p->bytes_per_step = bytes;

    /* graph replays, each timed on its own */
    if ((st = cuda_capture_step(b, s, 0, e))) return st;
    LC_CHECK(lc_ctrl_begin(s->ctrl, s->cap + 1, b->st));
    cudaEvent_t ev[REPS + 1];
    for (int i = 0; i <= REPS; i++) LC_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < WARM; i++) LC_CHECK(cudaGraphLaunch(s->graph, b->st));
    LC_CHECK(cudaEventRecord(ev[0], b->st));
    for (int i = 0; i < REPS; i++) {
        LC_CHECK(cudaGraphLaunch(s->graph, b->st));
        LC_CHECK(cudaEventRecord(ev[i + 1], b->st));
    }
    LC_CHECK(cudaEventSynchronize(ev[REPS]));
    double t[REPS];
    for (int i = 0; i < REPS; i++) {
        float ms;
        cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
        t[i] = ms;
    }
    for (int i = 0; i <= REPS; i++) cudaEventDestroy(ev[i]);
    qsort(t, REPS, sizeof *t, cmp_double);
    p->step_ms = t[REPS / 2];

    /* the same kernels launched one by one, an event after each */
    cuda_prof *prof = calloc(1, sizeof *prof);
    if (!prof) return lilac_fail(e, LILAC_ENOMEM, "profile");
    for (int i = 0; i < CUDA_PROF_MAX; i++) cudaEventCreate(&prof->ev[i]);
    for (int rep = 0; rep < 2 && !st; rep++) { /* the first run warms up */
        prof->n = 0;
        st = cuda_enqueue_step(b, s, 0, prof, e);
        if (!st && cudaStreamSynchronize(b->st) != cudaSuccess) st = lilac_fail(e, LILAC_EBACKEND, "CUDA: profile run failed");
    }
    if (!st) {
        static const char *names[PROF_NCLASS] = {"norms + embedding", "projection GEMVs", "MoE (router, experts)",
                                                 "DeltaNet (conv, scan)", "attention", "lm_head + argmax"};
        p->nclass = PROF_NCLASS;
        for (int k = 0; k < PROF_NCLASS; k++) p->class_name[k] = names[k];
        for (int i = 1; i < prof->n; i++) {
            float ms = 0;
            cudaEventElapsedTime(&ms, prof->ev[i - 1], prof->ev[i]);
            p->class_ms[prof->cls[i]] += ms;
        }
        p->kernels = prof->n - 1;
    }
    LC_CHECK(lc_ctrl_end(s->ctrl, b->st));
    for (int i = 0; i < CUDA_PROF_MAX; i++) cudaEventDestroy(prof->ev[i]);
    free(prof);
    /* replays advanced the state: keep the host mirror in step */
    lc_ctrl h;
    LC_CHECK(cudaMemcpyAsync(&h, s->ctrl, sizeof h, cudaMemcpyDeviceToHost, b->st)); /* after lc_ctrl_end, on its stream */
    LC_CHECK(cudaStreamSynchronize(b->st));
    s->pos = h.pos;
    return st;
}
