/* matmul_avx2.c — the quantised rows of cpu_matmul_rows with AVX2, chosen at
 * run time on x86-64 CPUs that have it.
 *
 * The results are bit-identical to the portable path (matmul.c): each weight
 * is dequantised as s * q + b (a multiply, then an add: no FMA), and the dot
 * product keeps vec_dot's 8 partial sums — lane j of one 8-wide accumulator
 * holds elements j, j+8, ... in the same order — with the same final
 * reduction.  What changes is the work per code: 8 codes are unpacked by one
 * variable shift, and with one input row (decode) the dequantised row is
 * never written to memory. */
#include "backend/cpu/cpu.h"
#include "util/bf16.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* vec_dot's final reduction of its 8 partial sums. */
AVX2 static inline float reduce8(__m256 acc) {
    float s[8];
    _mm256_storeu_ps(s, acc);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* 8 consecutive codes (starting at code k0 of the row) as floats. */
AVX2 static inline __m256 codes8(const uint32_t *q, int bits, int k0) {
    if (bits == 4) {
        const __m256i w = _mm256_set1_epi32((int)q[k0 / 8]);
        const __m256i sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(w, sh), _mm256_set1_epi32(0xf)));
    }
    const __m128i b8 = _mm_loadl_epi64((const __m128i *)((const uint8_t *)q + k0));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8));
}

/* Row r of W (matrix e), dequantised into out[cols] or, when out is NULL,
 * dotted with x; returns the dot. */
AVX2 static float row_q(const lilac_matrix *W, int e, int r, const float *x, float *out) {
    const int bits = W->type == LILAC_MAT_Q4 ? 4 : 8, G = W->group, n = W->cols;
    const uint32_t *q = (const uint32_t *)((const unsigned char *)W->w + (size_t)e * W->mat_stride +
                                           (size_t)r * lilac_matrix_row_bytes(W));
    const size_t sb = (size_t)e * W->mat_stride_sb + (size_t)r * (size_t)(n / G);
    __m256 acc = _mm256_setzero_ps();
    for (int g = 0; g < n / G; g++) {
        const __m256 s = _mm256_set1_ps(lilac_bf16_to_f32(W->scales[sb + (size_t)g]));
        const __m256 b = _mm256_set1_ps(lilac_bf16_to_f32(W->biases[sb + (size_t)g]));
        for (int k = g * G; k < (g + 1) * G; k += 8) {
            const __m256 w = _mm256_add_ps(_mm256_mul_ps(s, codes8(q, bits, k)), b);
            if (out) _mm256_storeu_ps(out + k, w);
            else acc = _mm256_add_ps(acc, _mm256_mul_ps(w, _mm256_loadu_ps(x + k)));
        }
    }
    return out ? 0.0f : reduce8(acc);
}

AVX2 static float dot_avx2(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    return reduce8(acc);
}

/* (__builtin_cpu_supports reads a table the runtime fills before main: cheap,
 * and no cached flag shared by the pool's threads) */
static int suits(const lilac_matrix *W) {
    return __builtin_cpu_supports("avx2") && (W->type == LILAC_MAT_Q4 || W->type == LILAC_MAT_Q8) && W->group % 8 == 0 &&
           W->cols % W->group == 0;
}

int cpu_row_f32_avx2(const lilac_matrix *W, int e, int r, float *out) {
    if (!suits(W)) return 0;
    row_q(W, e, r, NULL, out);
    return 1;
}

int cpu_matmul_rows_avx2(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                         float *rowbuf) {
    if (!suits(W)) return 0;
    for (int r = r0; r < r1; r++) {
        if (T == 1) {
            Y[r] = row_q(W, e, r, X, NULL);
        } else {
            row_q(W, e, r, NULL, rowbuf);
            for (int t = 0; t < T; t++) Y[(size_t)t * ldy + r] = dot_avx2(rowbuf, X + (size_t)t * ldx, W->cols);
        }
    }
    return 1;
}

#else

int cpu_row_f32_avx2(const lilac_matrix *W, int e, int r, float *out) {
    (void)W, (void)e, (void)r, (void)out;
    return 0;
}

int cpu_matmul_rows_avx2(const lilac_matrix *W, int e, int r0, int r1, const float *X, int ldx, int T, float *Y, int ldy,
                         float *rowbuf) {
    (void)W, (void)e, (void)r0, (void)r1, (void)X, (void)ldx, (void)T, (void)Y, (void)ldy, (void)rowbuf;
    return 0;
}

#endif
