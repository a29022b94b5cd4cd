/* moe.c — the sparse MoE block for a chunk of T tokens (spec §7).
 *
 *   p = softmax(x Wr^T) over all experts;  top-K of p (ties -> lowest id),
 *   renormalised to sum 1;  y = sum_j p_j * down_e(silu(gate_e x) * up_e x)
 *   + sigmoid(x Wsg^T) * shared(x)
 * Routed work is grouped by expert: the (token, expert) slots are sorted by
 * expert so each expert's weight rows are dequantised once for all of its
 * tokens.  Slot outputs are combined per token in top-K order, so the result
 * does not depend on thread timing. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/vec.h"
#include "util/trace.h"

enum { ROWS_PER_TASK = 32 };

typedef struct {
    lilac_backend *b;
    const lilac_layer *ly;
    int T, rb_gate, rb_down; /* row blocks per expert for gate/up and for down */
} moe_job;

static void route_task(void *ctx, int t, int tid) {
    moe_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int E = c->n_experts, K = c->n_experts_per_tok;
    float *p = b->rlog + (size_t)t * E;
    float mx = p[0];
    for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    float sum = 0.0f;
    for (int e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
    for (int e = 0; e < E; e++) p[e] /= sum;
    int *ids = b->topi + (size_t)t * K;
    float *w = b->topw + (size_t)t * K, wsum = 0.0f;
    for (int k = 0; k < K; k++) { /* selection: K is small */
        int best = -1;
        for (int e = 0; e < E; e++) {
            int taken = 0;
            for (int q = 0; q < k; q++) taken |= ids[q] == e;
            if (!taken && (best < 0 || p[e] > p[best])) best = e;
        }
        ids[k] = best;
        w[k] = p[best];
        wsum += p[best];
    }
    for (int k = 0; k < K; k++) w[k] /= wsum;
    (void)tid;
}

/* (expert, block of I rows): SwiGLU activations of every slot of the expert. */
static void gate_up_task(void *ctx, int i, int tid) {
    moe_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int e = i / j->rb_gate, I = c->moe_inter, D = c->hidden;
    const int p0 = b->ecount[e], n = b->ecount[e + 1] - p0;
    if (!n) return;
    int r0 = (i % j->rb_gate) * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK;
    if (r1 > I) r1 = I;
    float *row = b->rowbuf + (size_t)tid * b->maxcols;
    for (int r = r0; r < r1; r++) {
        cpu_row_f32(&j->ly->exp_gate, e, r, row);
        for (int p = 0; p < n; p++) b->act[(size_t)(p0 + p) * I + r] = vec_dot(row, b->xg + (size_t)(p0 + p) * D, D);
        cpu_row_f32(&j->ly->exp_up, e, r, row);
        for (int p = 0; p < n; p++) {
            float *a = &b->act[(size_t)(p0 + p) * I + r];
            *a = silu(*a) * vec_dot(row, b->xg + (size_t)(p0 + p) * D, D);
        }
    }
}

/* (expert, block of D rows): down projection of every slot of the expert. */
static void down_task(void *ctx, int i, int tid) {
    moe_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int e = i / j->rb_down, I = c->moe_inter, D = c->hidden;
    const int p0 = b->ecount[e], n = b->ecount[e + 1] - p0;
    if (!n) return;
    int r0 = (i % j->rb_down) * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK;
    if (r1 > D) r1 = D;
    cpu_matmul_rows(&j->ly->exp_down, e, r0, r1, b->act + (size_t)p0 * I, I, n, b->eo + (size_t)p0 * D, D,
                    b->rowbuf + (size_t)tid * b->maxcols);
}

static void combine_task(void *ctx, int t, int tid) {
    moe_job *j = ctx;
    lilac_backend *b = j->b;
    const lilac_config *c = &b->m->cfg;
    const int D = c->hidden, K = c->n_experts_per_tok;
    float *y = b->blk + (size_t)t * D;
    memset(y, 0, (size_t)D * sizeof(float));
    for (int k = 0; k < K; k++)
        vec_axpy(y, b->topw[(size_t)t * K + k], b->eo + (size_t)b->slot_of[(size_t)t * K + k] * D, D);
    vec_axpy(y, sigmoidf(b->sgate[t]), b->sd + (size_t)t * D, D);
    (void)tid;
}

void cpu_moe(lilac_backend *b, int layer, int T) {
    const lilac_config *c = &b->m->cfg;
    const lilac_layer *ly = &b->m->layers[layer];
    const int D = c->hidden, E = c->n_experts, K = c->n_experts_per_tok, I = c->moe_inter, Is = c->shared_inter;
    moe_job j = {b, ly, T, (I + ROWS_PER_TASK - 1) / ROWS_PER_TASK, (D + ROWS_PER_TASK - 1) / ROWS_PER_TASK};

    cpu_matmul(b, &ly->router, 0, b->xn, D, T, b->rlog, E);
    const int tr = lilac_trace_on();
    if (tr) lilac_trace("moe_logits", layer, b->rlog, (size_t)T * E);
    lilac_pool_for(b->pool, T, route_task, &j);
    if (tr) lilac_trace("moe_w", layer, b->topw, (size_t)T * K);

    /* Counting sort of the T*K slots by expert (stable: slots of one expert
     * stay in token order). */
    memset(b->ecount, 0, (size_t)(E + 1) * sizeof(int));
    for (int s = 0; s < T * K; s++) b->ecount[b->topi[s] + 1]++;
    for (int e = 0; e < E; e++) b->ecount[e + 1] += b->ecount[e];
    memcpy(b->ecursor, b->ecount, (size_t)E * sizeof(int));
    for (int s = 0; s < T * K; s++) {
        int p = b->ecursor[b->topi[s]]++;
        b->slot_t[p] = s / K;
        b->slot_of[s] = p;
        memcpy(b->xg + (size_t)p * D, b->xn + (size_t)(s / K) * D, (size_t)D * sizeof(float));
    }

    lilac_pool_for(b->pool, E * j.rb_gate, gate_up_task, &j);
    lilac_pool_for(b->pool, E * j.rb_down, down_task, &j);

    /* Shared expert, always on, gated by its own sigmoid scalar. */
    cpu_matmul(b, &ly->sh_gate, 0, b->xn, D, T, b->sg, Is);
    cpu_matmul(b, &ly->sh_up, 0, b->xn, D, T, b->su, Is);
    for (size_t i = 0; i < (size_t)T * Is; i++) b->sg[i] = silu(b->sg[i]) * b->su[i];
    cpu_matmul(b, &ly->sh_down, 0, b->sg, Is, T, b->sd, D);
    cpu_matmul(b, &ly->sh_gate_proj, 0, b->xn, D, T, b->sgate, 1);

    if (tr) lilac_trace("moe_shared", layer, b->sd, (size_t)T * D), lilac_trace("moe_sgate", layer, b->sgate, (size_t)T);
    lilac_pool_for(b->pool, T, combine_task, &j);
}
