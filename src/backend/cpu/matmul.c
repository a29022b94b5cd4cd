/* matmul.c — Y = X W^T for every weight type, one dequantised row at a time.
 *
 * Each weight row is expanded to fp32 once into a per-thread buffer and then
 * dotted with all T input rows, so a prefill chunk reads each weight once
 * (the CPU's version of "reuse each weight tile across many rows").  On
 * x86-64 CPUs with AVX2 the quantised types take matmul_avx2.c, which gives
 * bit-identical results. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/vec.h"

void cpu_row_f32(const lilac_matrix *W, int e, int r, float *out) {
    if (!cpu_row_f32_avx2(W, e, r, out)) lilac_matrix_row_f32(W, e, r, out);
}

void cpu_matmul_rows_generic(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                             float *rowbuf) {
    const int n = W->cols;
    for (int r = r0; r < r1; r++) {
        lilac_matrix_row_f32(W, e, r, rowbuf);
        for (int t = 0; t < T; t++) Y[(size_t)t * ldy + r] = vec_dot(rowbuf, X + (size_t)t * ldx, n);
    }
}

void cpu_matmul_rows(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                     float *rowbuf) {
    if (!cpu_matmul_rows_avx2(W, e, r0, r1, X, ldx, T, Y, ldy, rowbuf))
        cpu_matmul_rows_generic(W, e, r0, r1, X, ldx, T, Y, ldy, rowbuf);
}

typedef struct {
    lilac_backend *b;
    const lilac_matrix *W;
    int e, ldx, T, ldy, rows_per_task;
    const float *X;
    float *Y;
} mm_job;

static void mm_task(void *ctx, int i, int tid) {
    mm_job *j = ctx;
    int r0 = i * j->rows_per_task, r1 = r0 + j->rows_per_task;
    if (r1 > j->W->rows) r1 = j->W->rows;
    cpu_matmul_rows(j->W, j->e, r0, r1, j->X, j->ldx, j->T, j->Y, j->ldy, j->b->rowbuf + (size_t)tid * j->b->maxcols);
}

void cpu_matmul(lilac_backend *b, const lilac_matrix *W, int e, const float *X, int ldx, int T, float *Y, int ldy) {
    /* About 8 tasks per thread balances uneven progress without making tasks
     * so small that the counter dominates. */
    int rpt = W->rows / (b->nthreads * 8);
    if (rpt < 4) rpt = 4;
    mm_job j = {b, W, e, ldx, T, ldy, rpt, X, Y};
    lilac_pool_for(b->pool, (W->rows + rpt - 1) / rpt, mm_task, &j);
}
