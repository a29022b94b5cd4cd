/* fill.cu — deterministic random fills (synthetic weights, tests), generated
 * on the device so a 19 GB synthetic model never crosses PCIe. */
#include "backend/cuda/common.cuh"

namespace {

__device__ __forceinline__ uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void fill_u32_kernel(uint32_t *p, size_t n, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (uint32_t)mix(seed ^ (i * 0x2545f4914f6cdd1dull));
}

__global__ void fill_bf16_kernel(uint16_t *p, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (float)(mix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (1.0f / 16777216.0f);
        p[i] = f32_to_bf16(lo + (hi - lo) * u);
    }
}

__global__ void fill_f32_kernel(float *p, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (float)(mix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 40) * (1.0f / 16777216.0f);
        p[i] = lo + (hi - lo) * u;
    }
}

unsigned grid_for(size_t n) {
    size_t g = (n + 255) / 256;
    return (unsigned)(g > 65536 ? 65536 : (g ? g : 1));
}

} // namespace

extern "C" cudaError_t lc_fill_u32(uint32_t *p, size_t n, uint64_t seed, cudaStream_t st) {
    fill_u32_kernel<<<grid_for(n), 256, 0, st>>>(p, n, seed);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_fill_bf16(uint16_t *p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t st) {
    fill_bf16_kernel<<<grid_for(n), 256, 0, st>>>(p, n, seed, lo, hi);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_fill_f32(float *p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t st) {
    fill_f32_kernel<<<grid_for(n), 256, 0, st>>>(p, n, seed, lo, hi);
    return cudaGetLastError();
}
