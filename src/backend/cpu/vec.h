/* vec.h — small fp32 vector helpers of the CPU backend.
 *
 * The dot product keeps 8 independent partial sums so the compiler can map
 * them onto SIMD lanes without reassociating (no -ffast-math needed). */
#ifndef LILAC_CPU_VEC_H
#define LILAC_CPU_VEC_H

#include <math.h>

static inline float vec_dot(const float *restrict a, const float *restrict b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* y += a * x */
static inline void vec_axpy(float *restrict y, float a, const float *restrict x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static inline float silu(float x) { return x / (1.0f + expf(-x)); }
static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
/* torch.nn.functional.softplus with beta 1, threshold 20 */
static inline float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* out = x * rsqrt(mean(x^2) + eps) * w   (w already holds 1 + w for zero-centred norms) */
static inline void rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

#endif
