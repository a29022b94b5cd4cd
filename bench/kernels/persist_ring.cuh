/* persist_ring.cuh — persist_chain_test's variant F: the integer tensor-core
 * tiles of decode/gemv_tq.cuh fed from a shared-memory ring per warp that
 * runs ahead across stages (issue 14, design (a)).
 *
 * Why: B (SIMT tiles, ring ahead) was issue-bound at ~6 instructions per
 * weight; E (tq tiles, codes in registers) has the instructions but only the
 * next stage's first tile in flight during a stage wait.  F keeps up to S
 * tasks per warp in flight whatever the stage: while a block waits for the
 * others to finish stage s (the counter) and turns its x into digits, the
 * weights of stages s, s + 1, ... keep landing in its ring, because weights
 * never depend on activations.  With S tasks of 4,608 B per warp the ring
 * holds about one in_proj -> out_proj pair per SM (18.95 MB / 132 SMs =
 * 144 KB), so HBM can stream the next pair during this one's waits.
 *
 * A task: 16 rows x 512 inputs (NSP = 4 spans of 128) of one matrix, the
 * warp's tq tile, copied and read as decode/gemv_ring.cuh does (which took
 * this design into the engine): codes [span m][row][64 B], then the 16 rows'
 * 8 scales and 8 biases (read by other lanes: __syncwarp after the wait).
 * Block b owns row blocks [b NRB / G, (b + 1) NRB / G) of a stage; their
 * KS slices are dealt round-robin to the W warps (W % KS == 0, so warp w
 * always has slice w % KS); partial sums meet in shared memory and are
 * summed in slice order (deterministic), as C and E do.
 * Included by persist_chain_test.cu after its chain_args, arrive, wait_count
 * and store<IN>. */
#ifndef LILAC_BENCH_PERSIST_RING_CUH
#define LILAC_BENCH_PERSIST_RING_CUH

namespace tqr {
/* the engine's task (decode/gemv_ring.cuh): 16 rows x 512 inputs, its cp.async copy and its read */
using gemv_ring::CODES;
using gemv_ring::NSP;
using gemv_ring::TASK;
/* BULK (variant H): the ring filled by the TMA (cp.async.bulk, one mbarrier
 * per slot), so the copies wait in the TMA unit, not in the SM's load queue
 * ahead of x and the residual; code rows 320 B apart (256 used: a
 * quarter-warp's two rows fall on disjoint banks). */
constexpr int ROWB = 320;
constexpr int CODES_B = 16 * ROWB;
template <bool BULK>
__host__ __device__ constexpr int slot_bytes() {
    return BULK ? CODES_B + 2 * 16 * 16 : TASK;
}
constexpr int BF_WORDS = (DIN / 128 + 1) * 2 * gemv_tq::SLOTS; /* x's digits, room for 4,096 inputs */

/* A stage type: K inputs, ROWS outputs */
template <int K_, int ROWS>
struct sg {
    static constexpr int K = K_, KS = K / (128 * NSP), NRB = ROWS / 16;
    static_assert(ROWS % 16 == 0 && K % (128 * NSP) == 0, "whole tasks");
    static __host__ __device__ int rb_max(int grid) { return (NRB + grid - 1) / grid; }
};
using SI = sg<D, NIN>;  /* in_proj: 4 slices of 772 row blocks */
using SO = sg<DIN, D>;  /* out_proj: 8 slices of 128 row blocks */

struct own {
    int rb0, rb1, n; /* the block's row blocks, this warp's task count */
};
template <class St, int W>
__device__ __forceinline__ own own_of(int warp) {
    static_assert(W % St::KS == 0, "a warp keeps one slice per stage");
    own o;
    o.rb0 = (int)((long long)blockIdx.x * St::NRB / gridDim.x);
    o.rb1 = (int)((long long)(blockIdx.x + 1) * St::NRB / gridDim.x);
    const int nt = (o.rb1 - o.rb0) * St::KS;
    o.n = nt > warp ? (nt - 1 - warp) / W + 1 : 0;
    return o;
}

/* One warp's ring: tasks issued in the order they are consumed, stage by
 * stage, into slot issued % S; one cp.async group per issue_next (empty or
 * not), so cp_wait<S - 1> finds the oldest one complete. */
template <int W, int S, bool BULK = false>
struct ring {
    static constexpr int SB = slot_bytes<BULK>();
    unsigned char *base;
    uint64_t *bar; /* BULK: S mbarriers */
    own oi, oo;
    int nst, ps, pi, issued, used;

    __device__ void skip_empty() {
        while (ps < nst && pi >= (ps & 1 ? oo.n : oi.n)) ps++, pi = 0;
    }
    /* This warp's ring in smem (the rings, then BULK's mbarriers) over
     * stages first .. stages - 1, its first S tasks requested. */
    __device__ void start(unsigned char *smem, const chain_args &a, int first, int stages) {
        const int warp = threadIdx.x >> 5;
        base = smem + (size_t)warp * S * SB;
        bar = reinterpret_cast<uint64_t *>(smem + (size_t)W * S * SB) + warp * S;
        if (BULK) {
#ifdef __CUDA_ARCH__
            if ((threadIdx.x & 31) < S) mbar_init(bar + (threadIdx.x & 31), 1);
#endif
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); /* visible to the TMA */
            __syncwarp();
        }
        oi = own_of<SI, W>(warp), oo = own_of<SO, W>(warp);
        nst = stages, ps = first, pi = 0, issued = 0, used = 0;
        skip_empty();
        for (int i = 0; i < S; i++) issue_next(a);
    }
    template <class St>
    __device__ void issue(const lc_qmat &Wm, int e, int rb, int k, unsigned char *slot, uint64_t *b) {
        const int lane = threadIdx.x & 31;
        const int r = rb * 16;
        if constexpr (BULK) { /* lanes 0-15: a row's 256 B of codes; 16-31: a row's scales and biases */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* this warp's reads of the slot come first */
            if (lane == 0) mbar_expect(b, 16 * 256 + 2 * 16 * 16);
            __syncwarp(); /* the expected bytes are counted before any copy can land */
            const int row = lane & 15;
            if (lane < 16) {
                bulk_copy(slot + row * ROWB, reinterpret_cast<const unsigned char *>(qrow_w(Wm, e, r + row)) + k * NSP * 64, 256, b);
            } else {
                const size_t o = qrow_sb(Wm, e, r + row) + k * NSP * 2;
                bulk_copy(slot + CODES_B + row * 16, Wm.s + o, 16, b);
                bulk_copy(slot + CODES_B + 256 + row * 16, Wm.b + o, 16, b);
            }
        } else {
            gemv_ring::copy_task<St::K>(slot, Wm.w, Wm.s, Wm.b, (size_t)e * Wm.rows + r, k);
        }
    }
    __device__ void issue_next(const chain_args &a) {
        if (ps < nst) {
            const int warp = threadIdx.x >> 5, t = warp + pi * W, e = (ps >> 1) % a.win.n_mat;
            unsigned char *slot = base + (issued % S) * SB;
            uint64_t *b = BULK ? bar + issued % S : nullptr;
            if (ps & 1) issue<SO>(a.wout, e, oo.rb0 + t / SO::KS, t % SO::KS, slot, b);
            else issue<SI>(a.win, e, oi.rb0 + t / SI::KS, t % SI::KS, slot, b);
            issued++, pi++;
            skip_empty();
        }
        if (!BULK) cp_commit();
    }
    __device__ const unsigned char *next_full() {
        const int slot = used % S;
        if constexpr (BULK) {
#ifdef __CUDA_ARCH__ /* mma.cuh declares the mbarrier helpers in the device pass only */
            mbar_wait(bar + slot, (used / S) & 1);
#endif
        } else {
            cp_wait<S - 1>();
            __syncwarp(); /* the scale and bias rows came through other lanes' copies */
        }
        used++;
        return base + slot * SB;
    }
};

/* The slot's task as the tile gemv_tq::tile<K, NSP>::dot reads: the
 * engine's read (gemv_ring::tile_from), or BULK's padded rows */
template <int K, bool BULK>
__device__ __forceinline__ void tile_from(gemv_tq::tile<K, NSP> &tl, const unsigned char *slot, int g, int c) {
    if constexpr (!BULK) {
        gemv_ring::tile_from<K>(tl, slot, g, c);
    } else {
#pragma unroll
        for (int m = 0; m < NSP; m++) {
            tl.qa[m] = *reinterpret_cast<const uint4 *>(slot + g * ROWB + m * 64 + c * 16);
            tl.qb[m] = *reinterpret_cast<const uint4 *>(slot + (g + 8) * ROWB + m * 64 + c * 16);
        }
        const uint32_t *sa = reinterpret_cast<const uint32_t *>(slot + CODES_B + g * 16); /* row g; + 32: row g + 8 */
#pragma unroll
        for (int m = 0; m < NSP; m++) tl.sa[m] = sa[m], tl.sb[m] = sa[32 + m];
        tl.ba[0] = sa[64 + c], tl.bb[0] = sa[96 + c]; /* the biases: word c (NSP = 4, one per lane) */
    }
}

__device__ __forceinline__ unsigned long long globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* One stage in one block: (SYNC) wait for stage s - 1 everywhere, x into
 * digits, this warp's tasks (each slot refilled as soon as it is read), the
 * slices summed in order, (SYNC) publish.  With a.trace, thread 0 stamps
 * the global timer at entry, after the wait, after x, after the tasks and
 * at the end: trace[(s G + block) 5 + i]. */
template <class St, bool IN, bool SYNC, int W, int S, bool BULK>
__device__ __forceinline__ void stage(const chain_args &a, ring<W, S, BULK> &rg, int s, uint4 *bf, float *xs, float *scratch,
                                      float *part) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3, k = warp % St::KS;
    const own o = IN ? rg.oi : rg.oo;
    unsigned long long *tr = a.trace && threadIdx.x == 0 ? a.trace + ((size_t)s * gridDim.x + blockIdx.x) * 5 : nullptr;
    if (tr) tr[0] = globaltimer();
    if (SYNC && s > 0 && threadIdx.x == 0) wait_count(a.counter, a.base + (unsigned)s * gridDim.x);
    __syncthreads();
    if (tr) tr[1] = globaltimer();
    const int nrow = (o.rb1 - o.rb0) * 16;
    /* out_proj's residual h, requested before x's digits (one row a thread
     * where the block's rows fit its threads, else at the store) */
    const float resid = !IN && threadIdx.x < nrow && nrow <= W * 32 ? __ldcg(a.h + o.rb0 * 16 + threadIdx.x) : 0.0f;
    const float down = gemv_tq::prep_x<St::K, W * 32, true>(IN ? a.h : a.proj, IN ? a.nw : nullptr, a.eps, bf, xs, scratch);
    if (tr) tr[2] = globaltimer();
    const int pr = St::rb_max(gridDim.x) * 16; /* floats per slice in part */
    uint4 xb[NSP][2]; /* the warp's slice of x, once for all its tasks */
    if (o.n) gemv_tq::tile<St::K, NSP>::x_frags(bf, k, g, c, xb);
    for (int i = 0; i < o.n; i++) {
        const int rb = o.rb0 + (warp + i * W) / St::KS;
        gemv_tq::tile<St::K, NSP> tl;
        tile_from<St::K, BULK>(tl, rg.next_full(), g, c);
        __syncwarp(); /* every lane has read the slot before it is refilled */
        rg.issue_next(a);
        float ya, yb;
        tl.dot_x(xb, xs, down, k, g, c, ya, yb);
        if (c == 0) part[k * pr + (rb - o.rb0) * 16 + g] = ya, part[k * pr + (rb - o.rb0) * 16 + g + 8] = yb;
    }
    __syncthreads();
    if (tr) tr[3] = globaltimer();
    for (int t = threadIdx.x; t < nrow; t += W * 32) {
        float v = part[t];
#pragma unroll
        for (int kk = 1; kk < St::KS; kk++) v += part[kk * pr + t];
        if (!IN && nrow <= W * 32) a.h[o.rb0 * 16 + t] = resid + v;
        else store<IN>(a, o.rb0 * 16 + t, v);
    }
    __syncthreads(); /* the stores precede the arrive; bf and part are rewritten next stage */
    if (SYNC && threadIdx.x == 0) arrive(a.counter);
    if (tr) tr[4] = globaltimer();
}

/* the rings (and BULK's mbarriers, 8 B a slot) */
template <int W, int S, bool BULK = false>
__host__ __device__ constexpr size_t ring_bytes() {
    return (size_t)W * S * slot_bytes<BULK>() + (BULK ? (size_t)W * S * 8 : 0);
}
/* dynamic shared memory: rings, x's digits, group sums, scratch, split-K partials */
template <int W, int S, bool BULK = false>
static size_t smem_bytes(int grid) {
    const int pr = std::max(SI::KS * SI::rb_max(grid), SO::KS * SO::rb_max(grid)) * 16;
    return ring_bytes<W, S, BULK>() + BF_WORDS * 16 + (DIN / 64 + 32 + pr) * 4;
}
} // namespace tqr

template <int W, int S, bool BULK = false>
__global__ void __launch_bounds__(W * 32, 1) ring_chain_kernel(const __grid_constant__ chain_args a) {
    using namespace tqr;
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + ring_bytes<W, S, BULK>());
    float *xs = reinterpret_cast<float *>(bf + BF_WORDS), *scratch = xs + DIN / 64, *part = scratch + 32;
    ring<W, S, BULK> rg;
    rg.start(smem, a, 0, 2 * a.pairs); /* before anything waits */
    for (int p = 0; p < a.pairs; p++) {
        stage<SI, true, true>(a, rg, 2 * p, bf, xs, scratch, part);
        stage<SO, false, true>(a, rg, 2 * p + 1, bf, xs, scratch, part);
    }
    cp_wait<0>(); /* nothing is left in flight (the last groups are empty) */
}

/* G: F's stage as one kernel of a graph (stage s of the chain; PDL as the
 * engine's kernels: weights before the wait, the trigger after it).  One
 * block per SM taking under half of its registers and shared memory, so the
 * next kernel's blocks are resident, and their rings filling, while this one
 * runs: the ring running ahead across kernel boundaries without a
 * persistent launch. */
template <int W, int S, int MINB, bool BULK = false>
__global__ void __launch_bounds__(W * 32, MINB) ring_stage_kernel(const __grid_constant__ chain_args a, int s) {
    using namespace tqr;
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + ring_bytes<W, S, BULK>());
    float *xs = reinterpret_cast<float *>(bf + BF_WORDS), *scratch = xs + DIN / 64, *part = scratch + 32;
    ring<W, S, BULK> rg;
    rg.start(smem, a, s, s + 1); /* this stage's tasks only */
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (s & 1) stage<SO, false, false>(a, rg, s, bf, xs, scratch, part);
    else stage<SI, true, false>(a, rg, s, bf, xs, scratch, part);
    cp_wait<0>();
}

#endif
