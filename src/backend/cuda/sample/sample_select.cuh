/* sample_select.cuh — device helpers shared by the sampler (sample_topk.cu)
 * and the logprobs (sample_logprobs.cu): the work block passed between their
 * kernels, launch geometry, order keys, fixed-point masses, block
 * reductions and scans, and exact selection on a candidate list (bitonic
 * sort in shared memory, or radix select when the list is long).
 *
 * Order: tokens are ranked by value descending, then id ascending (the host
 * sampler's before()).  key_of(w, id) is a 64-bit integer with exactly that
 * order (larger = better), unique per id, so "the k best" and "the prefix up
 * to the crossing token" are key thresholds.  Masses exp(w - max) are fixed
 * point integers (2^-44 units), so sums are exact and independent of the
 * order atomics land in: equal seeds give equal tokens. */
#ifndef LILAC_CUDA_SAMPLE_SELECT_CUH
#define LILAC_CUDA_SAMPLE_SELECT_CUH

#include <math.h>

#include "backend/cuda/common.cuh"

typedef unsigned long long u64;

namespace lcs {
constexpr int THREADS = 512;   /* every sampler kernel */
constexpr int SLICE_MIN = 2048;/* ids per block, at least (248K vocabulary: 122 blocks, one wave) */
constexpr int MAXB = 256;      /* blocks at most */
constexpr int BINS = 1024;     /* histogram of d = max - w, BIN_SCALE bins per nat; the last holds d >= 32 */
constexpr float BIN_SCALE = 32.0f;
constexpr int CAP = 1024;      /* candidates sorted in shared memory; longer lists are radix-selected */
constexpr double QSCALE = 0x1p44; /* mass units: V * 2^44 < 2^63 */
constexpr unsigned FULL = 0xffffffffu;
} // namespace lcs

/* Scalars and scratch passed from one sampler kernel to the next (device). */
struct lc_samp_work {
    unsigned done[8];   /* last-block counters, one per kernel, reset by that last block */
    int emitted;        /* this step's token is chosen (greedy, or a max that is not finite) */
    int sel;            /* top_k or top_p may cut: the histogram and gather kernels run */
    float M, floor_w;   /* max of w; the min_p floor (-inf when off) */
    u64 draw;           /* this step's xoshiro256** output */
    int k_active, p_active, c_lo, c_hi; /* plan: candidates are histogram bins [c_lo, c_hi] */
    u64 r;              /* top_k: how many of the candidates it keeps */
    u64 pre_mass;       /* mass of the bins before c_lo (all kept) */
    u64 Z0;             /* mass of every token above the min_p floor */
    u64 kcut;           /* the kept tokens are those with key >= kcut (0: all above the floor) */
    int n_cand;         /* candidates gathered into lc_sampler.cand */
    double lse;         /* logprobs: log-sum-exp of the raw logits */
    u64 kn;             /* logprobs: every one of the n best raw keys is >= kn */
    unsigned hist_n[lcs::BINS]; /* zero between steps */
    u64 hist_m[lcs::BINS];      /* zero between steps */
    u64 part[lcs::MAXB * 3];    /* per-block partials */
};

namespace lcs {

/* Blocks and ids per block for V tokens (slice is a multiple of THREADS). */
static inline void geometry(int V, int *nb, int *slice) {
    int n = (V + SLICE_MIN - 1) / SLICE_MIN;
    if (n > MAXB) n = MAXB;
    if (n < 1) n = 1;
    int sl = (V + n - 1) / n;
    sl = (sl + THREADS - 1) / THREADS * THREADS;
    *nb = (V + sl - 1) / sl;
    *slice = sl;
}

/* order-preserving map of a float to uint32 (-0 counts as +0, as before() does) */
__device__ __forceinline__ uint32_t ord(float w) {
    uint32_t u = __float_as_uint(w == 0.0f ? 0.0f : w);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unord(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
/* 0 is below every real key (it would be a NaN with id 2^32 - 1) */
__device__ __forceinline__ u64 key_of(float w, int id) { return ((u64)ord(w) << 32) | (uint32_t)~(uint32_t)id; }
__device__ __forceinline__ int id_of(u64 k) { return (int)~(uint32_t)k; }
__device__ __forceinline__ float w_of(u64 k) { return unord((uint32_t)(k >> 32)); }

/* exp(w - M) in units of 2^-44 (rounded), computed in double as the host
 * does; below ~e^-31 of the max a token's mass is 0 and it is never drawn */
__device__ __forceinline__ u64 mass(float w, float M) { return (u64)(exp((double)w - (double)M) * QSCALE + 0.5); }

/* histogram bin of w: monotone in max - w, so every bin is a contiguous run of the sorted order */
__device__ __forceinline__ int bin_of(float w, float M) {
    float f = __fsub_rn(M, w) * BIN_SCALE;
    return f < (float)(BINS - 1) ? (int)f : BINS - 1;
}

__device__ __forceinline__ uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (lilac_rng_next in src/engine/sample.c) */
__device__ __forceinline__ uint64_t rng_next(uint64_t *s) {
    uint64_t out = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl64(s[3], 45);
    return out;
}

/* This thread's ids [lo, hi) of the block's slice: contiguous runs of ipt. */
struct chunk {
    int lo, hi, ipt;
};
__device__ __forceinline__ chunk chunk_of(int blk, int slice, int V) {
    chunk c;
    c.ipt = slice / THREADS;
    c.lo = blk * slice + (int)threadIdx.x * c.ipt;
    c.hi = min(c.lo + c.ipt, V);
    return c;
}

/* ---- block reductions (blockDim.x == THREADS) ---- */
template <typename T, typename Op> __device__ __forceinline__ T warp_reduce(T v, Op op) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(FULL, v, o));
    return v;
}

/* Every thread gets op over the block; ident fills missing warps. */
template <typename T, typename Op> __device__ T block_reduce(T v, Op op, T ident) {
    __shared__ T sh[32];
    v = warp_reduce(v, op);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    T r = (threadIdx.x & 31) < THREADS / 32 ? sh[threadIdx.x & 31] : ident;
    return warp_reduce(r, op);
}

struct op_add_u64 {
    __device__ u64 operator()(u64 a, u64 b) const { return a + b; }
};
struct op_max_u64 {
    __device__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct op_min_u64 {
    __device__ u64 operator()(u64 a, u64 b) const { return a < b ? a : b; }
};
struct op_min_int {
    __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};
struct op_max_f {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct op_add_d {
    __device__ double operator()(double a, double b) const { return a + b; }
};

/* Exclusive prefix sum over the block in thread order; *total gets the sum. */
static __device__ u64 block_scan_excl(u64 v, u64 *total) {
    __shared__ u64 sh[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    u64 x = v;
    for (int o = 1; o < 32; o <<= 1) {
        u64 y = __shfl_up_sync(FULL, x, o);
        if (lane >= o) x += y;
    }
    __syncthreads();
    if (lane == 31) sh[w] = x;
    __syncthreads();
    if (w == 0) {
        u64 s = lane < THREADS / 32 ? sh[lane] : 0, t = s;
        for (int o = 1; o < 32; o <<= 1) {
            u64 y = __shfl_up_sync(FULL, t, o);
            if (lane >= o) t += y;
        }
        if (lane < THREADS / 32) sh[lane] = t - s; /* exclusive over warps */
        if (lane == 31) sh[31] = t;                /* THREADS / 32 < 32: lane 31 is spare */
    }
    __syncthreads();
    u64 r = sh[w] + x - v;
    *total = sh[31];
    __syncthreads();
    return r;
}

/* The last-block-finishes pattern: true in the block that finished last,
 * which then sees every block's global writes. */
__device__ __forceinline__ bool last_block(unsigned *done) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

/* Appends ids where take is true to list (counter *n), one atomic per warp.
 * Every lane of the warp must call it. */
__device__ __forceinline__ void append(bool take, int id, int32_t *list, int *n) {
    const unsigned bal = __ballot_sync(FULL, take);
    if (!bal) return;
    const int lane = threadIdx.x & 31, leader = __ffs(bal) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(n, __popc(bal));
    base = __shfl_sync(FULL, base, leader);
    if (take) list[base + __popc(bal & ((1u << lane) - 1))] = id;
}

/* Sorts keys[0..p) descending (p a power of two) in shared memory. */
static __device__ void bitonic_desc(u64 *keys, int p) {
    for (int k = 2; k <= p; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < p; i += THREADS) {
                const int x = i ^ j;
                if (x > i) {
                    const u64 a = keys[i], b = keys[x];
                    if (((i & k) == 0) ? a < b : a > b) keys[i] = b, keys[x] = a;
                }
            }
            __syncthreads();
        }
}

/* Loads the keys of list[0..n) (n <= CAP) into keys, padded with 0 to a
 * power of two, and sorts them best first; returns the padded length. */
template <typename KeyFn> __device__ int load_sorted(u64 *keys, const int32_t *list, int n, KeyFn key) {
    int p = 1;
    while (p < n) p <<= 1;
    for (int i = threadIdx.x; i < p; i += THREADS) keys[i] = i < n ? key(__ldcg(list + i)) : 0;
    __syncthreads();
    bitonic_desc(keys, p);
    return p;
}

/* Radix select on a list in global memory, one block: among the keys of
 * list[0..n) that are >= kmin, walks them best first accumulating
 * weight(key) and returns the key at which reach(sum so far) first holds,
 * or 0 when it never does.  8-bit digits from the highest byte in which the
 * candidates differ, until one candidate is left; keys are unique, so the
 * result is one element's key.  Each thread reads a contiguous run of the
 * list and adds runs of equal digits once, so ties and shared bytes do not
 * queue on one shared-memory address. */
template <typename KeyFn, typename WeightFn, typename ReachFn>
__device__ u64 list_select(const int32_t *list, int n, u64 kmin, KeyFn key, WeightFn weight, ReachFn reach) {
    __shared__ u64 hist[256];
    __shared__ unsigned cnt[256];
    __shared__ u64 s_above, s_key;
    __shared__ int s_digit;
    const int per = (n + THREADS - 1) / THREADS, i0 = min(n, (int)threadIdx.x * per), i1 = min(n, i0 + per);
    u64 lo = ~0ull, hi = 0;
    for (int i = i0; i < i1; i++) {
        const u64 k = key(__ldcg(list + i));
        if (k >= kmin) lo = min(lo, k), hi = max(hi, k);
    }
    lo = block_reduce(lo, op_min_u64(), ~0ull);
    hi = block_reduce(hi, op_max_u64(), 0ull);
    if (lo > hi) return 0; /* no candidate */
    int shift = lo == hi ? 0 : (63 - __clzll((long long)(lo ^ hi))) / 8 * 8;
    u64 mask = shift == 56 ? 0 : ~0ull << (shift + 8), prefix = lo & mask, above = 0;
    for (;; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += THREADS) hist[i] = 0, cnt[i] = 0;
        __syncthreads();
        int cd = -1;
        u64 cw = 0;
        unsigned cc = 0;
        for (int i = i0; i < i1; i++) {
            const u64 k = key(__ldcg(list + i));
            if (k < kmin || (k & mask) != prefix) continue;
            const int d = (int)((k >> shift) & 255);
            if (d != cd) {
                if (cc) atomicAdd(&hist[cd], cw), atomicAdd(&cnt[cd], cc);
                cd = d, cw = 0, cc = 0;
            }
            cw += weight(k), cc++;
        }
        if (cc) atomicAdd(&hist[cd], cw), atomicAdd(&cnt[cd], cc);
        __syncthreads();
        if (threadIdx.x < 32) {
            /* lane l owns digits 8l..8l+7; suffix sums from the top digit down */
            const int lane = threadIdx.x;
            u64 own = 0;
            for (int b = 0; b < 8; b++) own += hist[8 * lane + b];
            u64 suf = own; /* sum over lanes >= lane */
            for (int o = 1; o < 32; o <<= 1) {
                u64 y = __shfl_down_sync(FULL, suf, o);
                if (lane + o < 32) suf += y;
            }
            u64 cum = above + suf - own; /* weight of digits above this lane's */
            int best = -1;
            u64 before_best = 0;
            for (int b = 7; b >= 0; b--) {
                const u64 h = hist[8 * lane + b];
                if (best < 0 && reach(cum + h)) best = 8 * lane + b, before_best = cum;
                cum += h;
            }
            /* the highest digit that reaches wins */
            int top = best;
            for (int o = 16; o > 0; o >>= 1) top = max(top, __shfl_xor_sync(FULL, top, o));
            if (lane == 0) s_digit = top;
            if (best == top && top >= 0) s_above = before_best;
        }
        __syncthreads();
        const int d = s_digit;
        if (d < 0) return 0; /* only possible on the first pass: never reached */
        above = s_above;
        prefix |= (u64)d << shift;
        mask |= (u64)255 << shift;
        if (shift == 0) return prefix;
        if (cnt[d] == 1) { /* one candidate left: its key is the answer */
            for (int i = i0; i < i1; i++) {
                const u64 k = key(__ldcg(list + i));
                if (k >= kmin && (k & mask) == prefix) s_key = k;
            }
            __syncthreads();
            return s_key;
        }
        __syncthreads();
    }
}

} // namespace lcs

#endif
