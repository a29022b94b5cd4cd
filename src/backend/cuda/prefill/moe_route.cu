/* moe_route.cu — the routing of a prefill chunk on the GPU, for the grouped
 * tensor-core expert GEMMs (gemm_mma.cu): per-expert counts, a scan into
 * offsets and the list of work items (at most r.tile slots of one
 * expert each), the scatter of (token, k) slots into expert order, and the
 * combine back into the residual.  The shared expert is expert E with one
 * slot per token (slots T*K + t), so it runs in the same launches.
 *
 * Slot order within an expert depends on atomics, but nothing computed for
 * a slot depends on its neighbours, and the combine sums each token's
 * experts in k order: results are identical from run to run. */
#include "backend/cuda/common.cuh"

namespace {

__global__ void count_kernel(const int32_t *__restrict__ ids, int n, int32_t *count) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&count[ids[i]], 1);
}

/* One block, thread e for expert e (e = E: the shared expert, T slots). */
__global__ void scan_kernel(lc_moe_route r, int E, int T) {
    __shared__ int sc[1024], tc[1024];
    const int e = threadIdx.x;
    const int c = e < E ? r.count[e] : e == E ? T : 0;
    const int W = r.tile ? r.tile : LC_MOE_TILE;
    const int nt = (c + W - 1) / W;
    sc[e] = c;
    tc[e] = nt;
    __syncthreads();
    for (int o = 1; o < (int)blockDim.x; o <<= 1) { /* Hillis-Steele inclusive scans */
        const int a = e >= o ? sc[e - o] : 0, b = e >= o ? tc[e - o] : 0;
        __syncthreads();
        sc[e] += a;
        tc[e] += b;
        __syncthreads();
    }
    if (e > E) return;
    const int off = sc[e] - c, toff = tc[e] - nt;
    r.offset[e] = off;
    r.cursor[e] = off;
    /* the shared expert's items first: the largest group starts early */
    const int first = e == E ? 0 : toff + (T + W - 1) / W;
    for (int i = 0; i < nt; i++) r.tiles[first + i] = (e << 20) | (off + i * W);
    if (e == E) {
        r.offset[E + 1] = sc[e];
        *r.ntiles = tc[e];
        r.count[E] = T;
    }
}

__global__ void scatter_kernel(const int32_t *__restrict__ ids, int T, int K, int E, lc_moe_route r) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T * K) {
        const int p = atomicAdd(&r.cursor[ids[i]], 1);
        r.slot_tok[p] = i / K;
        r.slot_of[i] = p;
    } else if (i < T * K + T) {
        r.slot_tok[i] = i - T * K; /* the shared expert's slots follow the routed ones */
    }
}

/* Block per token, float4 per thread. */
__global__ void combine_kernel(const float *__restrict__ eo, lc_moe_route r, const float *__restrict__ w,
                               const float *__restrict__ sgate, int T, int K, int D, float *__restrict__ h) {
    const int t = blockIdx.x;
    const float g = sgate[t];
    const float4 *sh = reinterpret_cast<const float4 *>(eo + (size_t)(T * K + t) * D);
    for (int d = threadIdx.x; d < D / 4; d += blockDim.x) {
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int k = 0; k < K; k++) {
            const float wk = w[t * K + k];
            const float4 v = reinterpret_cast<const float4 *>(eo + (size_t)r.slot_of[t * K + k] * D)[d];
            acc.x = fmaf(wk, v.x, acc.x), acc.y = fmaf(wk, v.y, acc.y);
            acc.z = fmaf(wk, v.z, acc.z), acc.w = fmaf(wk, v.w, acc.w);
        }
        const float4 s = sh[d];
        float4 *hp = reinterpret_cast<float4 *>(h + (size_t)t * D) + d;
        float4 o = *hp;
        o.x += acc.x + g * s.x, o.y += acc.y + g * s.y, o.z += acc.z + g * s.z, o.w += acc.w + g * s.w;
        *hp = o;
    }
}

} // namespace

extern "C" cudaError_t lc_moe_route_sort(const int32_t *ids, int T, int E, int K, const lc_moe_route *r, cudaStream_t st) {
    if (E + 1 > 1024 || (T * K + T) >= (1 << 20) || E + 1 >= (1 << 11)) return cudaErrorInvalidValue;
    const int n = T * K;
    cudaError_t err = cudaMemsetAsync(r->count, 0, (size_t)(E + 1) * sizeof(int32_t), st);
    if (err) return err;
    count_kernel<<<(n + 255) / 256, 256, 0, st>>>(ids, n, r->count);
    scan_kernel<<<1, ((E + 1 + 31) / 32) * 32, 0, st>>>(*r, E, T);
    scatter_kernel<<<(n + T + 255) / 256, 256, 0, st>>>(ids, T, K, E, *r);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_moe_route_combine(const float *eo, const lc_moe_route *r, const float *w, const float *sgate,
                                            int T, int K, int D, float *h, cudaStream_t st) {
    if (D % 4) return cudaErrorInvalidValue;
    combine_kernel<<<T, 256, 0, st>>>(eo, *r, w, sgate, T, K, D, h);
    return cudaGetLastError();
}
