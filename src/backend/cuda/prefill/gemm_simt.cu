/* gemm_simt.cu — quantised matrix products for prefill (many tokens at once), on
 * CUDA cores: each 64-row x 64-input weight tile is dequantised once into
 * shared memory and reused by 32 tokens.  A straightforward kernel (the fast
 * tensor-core prefill is separate work); also the grouped form used by the
 * MoE experts, where a block takes a run of slots routed to one expert.
 *
 *   plain:    Y[t, r]  (+)= sum_c X[t, c] W[r, c]
 *   grouped:  Y[p, r]   = sum_c X[tok(p), c] W_e(p)[r, c]   (p = sorted slot)
 *   dual:     Y[p, r]   = silu(gate . x) * (up . x)          (experts' SwiGLU) */
#include "backend/cuda/common.cuh"

namespace {

constexpr int TR = 64, TT = 32, TK = 64, THREADS = 256;
constexpr int WPAD = TR + 4, XPAD = TT + 4;

/* Dequantises rows [r0, r0+64) x inputs [k0, k0+64) of W_e into Ws[k][row]. */
__device__ __forceinline__ void load_w_tile(const lc_qmat &W, int e, int r0, int k0, float (*Ws)[WPAD]) {
    const int tid = threadIdx.x, lr = tid >> 2, q4 = tid & 3, r = r0 + lr;
    float v[16];
    if (r < W.rows) {
        const uint32_t *w = qrow_w(W, e, r);
        const size_t sb = qrow_sb(W, e, r) + k0 / LC_GROUP;
        const float s = bf16_to_f32(W.s[sb]), b = bf16_to_f32(W.b[sb]);
        if (W.bits == 4) {
            const uint2 q = *reinterpret_cast<const uint2 *>(w + k0 / 8 + q4 * 2);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                v[i] = s * (float)((q.x >> (4 * i)) & 15u) + b;
                v[8 + i] = s * (float)((q.y >> (4 * i)) & 15u) + b;
            }
        } else {
            const uint4 q = *reinterpret_cast<const uint4 *>(w + k0 / 4 + q4 * 4);
            const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int i = 0; i < 16; i++) v[i] = s * (float)((words[i / 4] >> (8 * (i % 4))) & 255u) + b;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < 16; i++) Ws[q4 * 16 + i][lr] = v[i];
}

/* Loads X rows (tokens) [0, nt) x inputs [k0, k0+64) into Xs[k][token];
 * xrow(i) gives the source row of local token i. */
template <typename XRow>
__device__ __forceinline__ void load_x_tile(const float *X, int ldx, int nt, int k0, XRow xrow, float (*Xs)[XPAD]) {
    const int tid = threadIdx.x, lt = tid >> 3, kk = (tid & 7) * 8;
    float4 a = make_float4(0, 0, 0, 0), b = a;
    if (lt < nt) {
        const float4 *p = reinterpret_cast<const float4 *>(X + (size_t)xrow(lt) * ldx + k0 + kk);
        a = p[0], b = p[1];
    }
    Xs[kk + 0][lt] = a.x, Xs[kk + 1][lt] = a.y, Xs[kk + 2][lt] = a.z, Xs[kk + 3][lt] = a.w;
    Xs[kk + 4][lt] = b.x, Xs[kk + 5][lt] = b.y, Xs[kk + 6][lt] = b.z, Xs[kk + 7][lt] = b.w;
}

/* One 64-row x 32-token tile; DUAL computes gate and up together. */
template <bool DUAL, typename XRow, typename Store>
__device__ __forceinline__ void tile(const lc_qmat &A, const lc_qmat &B, int e, int r0, const float *X, int ldx, int nt,
                                     XRow xrow, Store store) {
    __shared__ __align__(16) float Wa[TK][WPAD];
    __shared__ __align__(16) float Wb[DUAL ? TK : 1][WPAD];
    __shared__ __align__(16) float Xs[TK][XPAD];
    const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
    float acc[4][2] = {}, acc2[4][2] = {};
    for (int k0 = 0; k0 < A.cols; k0 += TK) {
        load_w_tile(A, e, r0, k0, Wa);
        if (DUAL) load_w_tile(B, e, r0, k0, reinterpret_cast<float(*)[WPAD]>(Wb));
        load_x_tile(X, ldx, nt, k0, xrow, Xs);
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TK; k++) {
            const float4 a = *reinterpret_cast<const float4 *>(&Wa[k][ty * 4]);
            const float2 x = *reinterpret_cast<const float2 *>(&Xs[k][tx * 2]);
            const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int i = 0; i < 4; i++) acc[i][0] = fmaf(av[i], x.x, acc[i][0]), acc[i][1] = fmaf(av[i], x.y, acc[i][1]);
            if (DUAL) {
                const float4 b = *reinterpret_cast<const float4 *>(&Wb[k][ty * 4]);
                const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc2[i][0] = fmaf(bv[i], x.x, acc2[i][0]), acc2[i][1] = fmaf(bv[i], x.y, acc2[i][1]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int r = r0 + ty * 4 + i, t = tx * 2 + j;
            if (r < A.rows && t < nt) store(t, r, DUAL ? silu_f(acc[i][j]) * acc2[i][j] : acc[i][j]);
        }
}

__global__ void __launch_bounds__(THREADS) gemm_kernel(lc_qmat W, int mat, const float *__restrict__ X, int ldx, int T,
                                                       float *__restrict__ Y, int ldy, int accumulate) {
    const int r0 = blockIdx.x * TR, t0 = blockIdx.y * TT, nt = min(TT, T - t0);
    tile<false>(W, W, mat, r0, X, ldx, nt, [=](int i) { return t0 + i; },
                [=](int t, int r, float v) {
                    float *y = Y + (size_t)(t0 + t) * ldy + r;
                    *y = accumulate ? *y + v : v;
                });
}

/* Work item i of a grouped product: expert e and its slots [p0, p0 + nt). */
__device__ __forceinline__ bool work_item(const lc_moe_sort &s, int i, int *e, int *p0, int *nt) {
    if (i >= *s.ntiles) return false;
    const int item = s.tiles[i];
    *e = item >> 20;
    *p0 = item & 0xfffff;
    *nt = min(TT, s.offset[*e + 1] - *p0);
    return true;
}

/* DUAL (gate/up): inputs are the slots' tokens, X = x [T, D].
 * !DUAL (down):   inputs are the slots themselves, X = act [T*K, I]. */
template <bool DUAL>
__global__ void __launch_bounds__(THREADS) grouped_kernel(lc_qmat A, lc_qmat B, lc_moe_sort s, const float *__restrict__ X,
                                                          int ldx, float *__restrict__ Y) {
    int e, p0, nt;
    if (!work_item(s, blockIdx.y, &e, &p0, &nt)) return;
    const int r0 = blockIdx.x * TR, ldy = A.rows;
    tile<DUAL>(A, B, e, r0, X, ldx, nt, [=](int i) { return DUAL ? s.slot_tok[p0 + i] : p0 + i; },
               [=](int t, int r, float v) { Y[(size_t)(p0 + t) * ldy + r] = v; });
}

/* ---- slot sorting ---- */

__global__ void count_kernel(const int32_t *__restrict__ ids, int n, int32_t *count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&count[ids[i]], 1);
}

/* One block, one thread per expert: offsets (exclusive scan), cursors, and
 * the list of (expert, first slot) work items of TT slots each. */
__global__ void scan_kernel(lc_moe_sort s, int E) {
    __shared__ int sc[1024], tc[1024];
    const int e = threadIdx.x;
    const int c = e < E ? s.count[e] : 0;
    sc[e] = c;
    tc[e] = (c + TT - 1) / TT;
    __syncthreads();
    for (int o = 1; o < blockDim.x; o <<= 1) { /* Hillis-Steele inclusive scans */
        int a = e >= o ? sc[e - o] : 0, b = e >= o ? tc[e - o] : 0;
        __syncthreads();
        sc[e] += a;
        tc[e] += b;
        __syncthreads();
    }
    if (e < E) {
        const int off = sc[e] - c, toff = tc[e] - (c + TT - 1) / TT;
        s.offset[e] = off;
        s.cursor[e] = off;
        for (int j = 0; j * TT < c; j++) s.tiles[toff + j] = (e << 20) | (off + j * TT);
        if (e == E - 1) {
            s.offset[E] = sc[e];
            *s.ntiles = tc[e];
        }
    }
}

__global__ void scatter_kernel(const int32_t *__restrict__ ids, int n, int K, lc_moe_sort s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int p = atomicAdd(&s.cursor[ids[i]], 1);
    s.slot_tok[p] = i / K;
    s.slot_of[i] = p;
}

__global__ void combine_kernel(const float *__restrict__ eo, lc_moe_sort s, const float *__restrict__ w,
                               const float *__restrict__ sgate, const float *__restrict__ shared, int K, int D,
                               float *__restrict__ h) {
    const int t = blockIdx.x;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) acc += w[t * K + k] * eo[(size_t)s.slot_of[t * K + k] * D + d];
        h[(size_t)t * D + d] += acc + sgate[t] * shared[(size_t)t * D + d];
    }
}

} // namespace

extern "C" cudaError_t lc_gemm(const lc_qmat *W, int mat, const float *X, int ldx, int T, float *Y, int ldy,
                               int accumulate, cudaStream_t st) {
    if (W->cols % TK || (ldx % 4) || T <= 0) return cudaErrorInvalidValue;
    dim3 grid((W->rows + TR - 1) / TR, (T + TT - 1) / TT);
    gemm_kernel<<<grid, THREADS, 0, st>>>(*W, mat, X, ldx, T, Y, ldy, accumulate);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_moe_sort_slots(const int32_t *ids, int T, int E, int K, const lc_moe_sort *s, cudaStream_t st) {
    if (E > 1024 || T * K >= (1 << 20) || E >= (1 << 11)) return cudaErrorInvalidValue;
    const int n = T * K;
    cudaError_t err = cudaMemsetAsync(s->count, 0, (size_t)E * sizeof(int32_t), st);
    if (err) return err;
    count_kernel<<<(n + 255) / 256, 256, 0, st>>>(ids, n, s->count);
    scan_kernel<<<1, ((E + 31) / 32) * 32, 0, st>>>(*s, E);
    scatter_kernel<<<(n + 255) / 256, 256, 0, st>>>(ids, n, K, *s);
    return cudaGetLastError();
}

static int max_tiles(int T, int K, int E) { return (T * K + TT - 1) / TT + E; }

extern "C" cudaError_t lc_moe_grouped_gate_up(const lc_qmat *gate, const lc_qmat *up, const lc_moe_sort *s, int T, int K,
                                              const float *x, float *act, cudaStream_t st) {
    if (gate->cols % TK) return cudaErrorInvalidValue;
    dim3 grid((gate->rows + TR - 1) / TR, max_tiles(T, K, gate->n_mat));
    grouped_kernel<true><<<grid, THREADS, 0, st>>>(*gate, *up, *s, x, gate->cols, act);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_moe_grouped_down(const lc_qmat *down, const lc_moe_sort *s, int T, int K, const float *act,
                                           float *eo, cudaStream_t st) {
    if (down->cols % TK) return cudaErrorInvalidValue;
    dim3 grid((down->rows + TR - 1) / TR, max_tiles(T, K, down->n_mat));
    grouped_kernel<false><<<grid, THREADS, 0, st>>>(*down, *down, *s, act, down->cols, eo);
    return cudaGetLastError();
}

extern "C" cudaError_t lc_moe_combine(const float *eo, const lc_moe_sort *s, const float *w, const float *sgate,
                                      const float *shared, int T, int K, int D, float *h, cudaStream_t st) {
    combine_kernel<<<T, 256, 0, st>>>(eo, *s, w, sgate, shared, K, D, h);
    return cudaGetLastError();
}
