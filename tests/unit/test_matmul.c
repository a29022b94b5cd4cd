/* test_matmul.c — the CPU backend's quantised matmul: the AVX2 rows
 * (matmul_avx2.c) give bit-identical results to the portable ones (matmul.c)
 * (and dequantised rows) on random 4-bit and 8-bit matrices, for one input row (decode, fused) and
 * several (prefill, dequantised row reused), including stacked matrices; and
 * the portable rows agree with a double-precision dequantise-and-dot.  Says
 * so when this CPU has no AVX2 (the comparison is then trivial). */
#include <stdint.h>

#include "backend/cpu/cpu.h"
#include "check.h"
#include "util/bf16.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float uni(float lo, float hi) { return lo + (hi - lo) * (float)(next32() & 0xffffff) / (float)0x1000000; }

typedef struct {
    lilac_matrix m;
    uint32_t *w;
    uint16_t *s, *b;
} qmat;

static qmat make(lilac_mat_type type, int n_mat, int rows, int cols) {
    qmat q = {0};
    const int bits = type == LILAC_MAT_Q4 ? 4 : 8, G = 64;
    const size_t words = (size_t)n_mat * rows * cols * bits / 32, groups = (size_t)n_mat * rows * (cols / G);
    q.w = malloc(words * 4), q.s = malloc(groups * 2), q.b = malloc(groups * 2);
    for (size_t i = 0; i < words; i++) q.w[i] = next32();
    for (size_t i = 0; i < groups; i++) q.s[i] = lilac_f32_to_bf16(uni(0.001f, 0.05f)), q.b[i] = lilac_f32_to_bf16(uni(-0.4f, 0.1f));
    q.m = (lilac_matrix){.type = type, .rows = rows, .cols = cols, .n_mat = n_mat, .group = G, .w = q.w, .scales = q.s,
                         .biases = q.b, .mat_stride = (size_t)rows * cols * bits / 8, .mat_stride_sb = (size_t)rows * (cols / G)};
    return q;
}

static void drop(qmat *q) { free(q->w), free(q->s), free(q->b); }

static void compare(lilac_mat_type type, int n_mat, int rows, int cols, int T) {
    qmat q = make(type, n_mat, rows, cols);
    float *X = malloc((size_t)T * cols * sizeof *X), *Ya = calloc((size_t)T * rows, sizeof(float)),
          *Yb = calloc((size_t)T * rows, sizeof(float)), *buf = malloc((size_t)cols * sizeof *buf);
    for (int i = 0; i < T * cols; i++) X[i] = uni(-2.0f, 2.0f);
    int same = 1;
    double worst = 0;
    for (int e = 0; e < n_mat; e++) {
        cpu_matmul_rows(&q.m, e, 0, rows, X, cols, T, Ya, rows, buf);
        cpu_matmul_rows_generic(&q.m, e, 0, rows, X, cols, T, Yb, rows, buf);
        same &= !memcmp(Ya, Yb, (size_t)T * rows * sizeof(float));
        for (int r = 0; r < rows; r += 5) { /* the dequantised rows themselves */
            float *ra = malloc((size_t)cols * sizeof *ra);
            cpu_row_f32(&q.m, e, r, ra);
            lilac_matrix_row_f32(&q.m, e, r, buf);
            same &= !memcmp(ra, buf, (size_t)cols * sizeof *ra);
            free(ra);
        }
        for (int t = 0; t < T; t++)
            for (int r = 0; r < rows; r++) { /* the portable rows against a double-precision reference */
                lilac_matrix_row_f32(&q.m, e, r, buf);
                double ref = 0, mag = 0;
                for (int c = 0; c < cols; c++) ref += (double)buf[c] * X[(size_t)t * cols + c], mag += fabs((double)buf[c] * X[(size_t)t * cols + c]);
                const double d = fabs(Yb[(size_t)t * rows + r] - ref) / (mag + 1e-30);
                worst = d > worst ? d : worst;
            }
    }
    CHECK(same, "%s, %d x %d (x%d), T=%d: the AVX2 rows differ from the portable ones", type == LILAC_MAT_Q4 ? "q4" : "q8",
          rows, cols, n_mat, T);
    CHECK(worst < 1e-5, "relative error %g against double precision", worst);
    free(X), free(Ya), free(Yb), free(buf);
    drop(&q);
}

static void test_avx2_equals_portable(void) {
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx2")) SKIP("this CPU has no AVX2: only the portable rows run");
#endif
    const lilac_mat_type types[2] = {LILAC_MAT_Q4, LILAC_MAT_Q8};
    for (int k = 0; k < 2; k++) {
        compare(types[k], 1, 37, 2048, 1);
        compare(types[k], 1, 16, 4096, 1);
        compare(types[k], 3, 24, 512, 1);
        compare(types[k], 1, 33, 2048, 3);
        compare(types[k], 2, 8, 64, 7);
    }
}

int main(int argc, char **argv) {
    CHECK_INIT(argc, argv);
    RUN(test_avx2_equals_portable);
    return check_done("matmul");
}
