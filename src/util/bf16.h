/* bf16.h — bfloat16 <-> float conversions (round to nearest even). */
#ifndef LILAC_UTIL_BF16_H
#define LILAC_UTIL_BF16_H

#include <stdint.h>
#include <string.h>

static inline float lilac_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t lilac_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif
