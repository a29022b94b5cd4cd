/* attention_math.cuh — the scalar helpers both prefill attention kernels
 * (attention_prefill.cu, attention_prefill_wgmma.cu) use for the online
 * softmax and the bf16 hi + lo splits. */
#pragma once

#include <stdint.h>

/* bf16x2 of (x0, x1), x0 in the low half (the lower k index), round to nearest even */
__device__ __forceinline__ uint32_t pack_bf16(float x0, float x1) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(x1), "f"(x0));
    return d;
}
/* 2^x, flushing subnormal results to 0 (weights below 2^-126 of the row maximum) */
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float bf_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
