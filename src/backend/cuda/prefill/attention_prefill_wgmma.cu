/* attention_prefill_wgmma.cu — the attention kernel of the prefill
 * (attention_prefill.cu) on Hopper warpgroup MMA (sm_90a), FA3-style: same
 * inputs (the prep's bf16 q hi + lo, pre-scaled to log2 units), same output
 * (O / l times the sigmoid gate), same precision class as MODE 3 there (Q
 * and P split into bf16 hi + lo: four MMAs per product, ~2^-16 relative).
 * The default on sm_90a; LILAC_ATTN_PREFILL=fa2 restores the mma.sync kernel
 * (attention_prefill.cu).
 *
 * A block is one (16 tokens, kv head): the 8 query heads of the kv head are
 * packed with the tokens into 128 rows (row = 8 token + head), as in the
 * mma.sync kernel, so each K/V tile is read once for all 8 heads.  Three
 * warpgroups:
 *   WG 0, producer (24 registers): streams K and V tiles of 64 keys through
 *     a ring of NSLOT half-tiles (K of tile j, V of tile j, K of j + 1, ...)
 *     with cp.async; full[s] completes when its 128 threads' copies landed,
 *     empty[s] when the 8 consumer warps are done with the slot.  Keys past
 *     the block's last token are zero-filled (never NaN into P V).
 *   WG 1, 2, consumers (240 registers): WG c owns rows 64c .. 64c + 63
 *     (tokens t0 + 8c ..) with Q hi, lo in shared memory for the block's
 *     life, and per tile
 *       S [64 x 64]  = Qhi K^T + Qlo K^T: 2 x 16 wgmma m64n64k16, A and B
 *                      from shared memory (K-major, 128-byte swizzle);
 *       P = 2^(S - m) split hi + lo in registers, online softmax per row
 *                      (a row lies in one quad: no shared-memory exchange);
 *       O [64 x 256] += Phi V + Plo V: 2 x 4 wgmma m64n256k16, A = P from
 *                      registers, B = V N-major from shared memory.
 *     O is 128 fp32 registers a thread, S 32, P hi + lo 32.  The GEMMs of
 *     a step are PV of tile j then S of tile j + 1, issued back to back
 *     (V's slot is freed once PV is done, before S is), so the tensor
 *     cores run both while the warpgroup waits; the softmax
 *     of tile j + 1 then runs while the other consumer's GEMMs do
 *     (PP: two named barriers make the warpgroups issue their GEMMs in
 *     turn, FA3's ping-pong, so the softmaxes interleave for sure).
 *
 * Shared memory (1024-aligned): Q [hi, lo][wg][4 panels][64 rows][128 B],
 * K/V slots [NSLOT][4 panels][64 keys][128 B]; a panel is 64 of the 256
 * dims, its rows 128 bytes with 16-byte chunks XOR-swizzled by (row & 7):
 * the canonical 128B-swizzle atom (8 rows x 128 B).  The same bytes serve
 * K as a K-major B operand (S) and V as an N-major B operand (P V: K rows =
 * keys, N = dims; SBO 1024 per 8 keys, LBO one panel per 64 dims).
 * 128 KB of Q + 3 x 32 KB of K/V: 224 KB.
 *
 * Causal mask as the mma.sync kernel: only tiles reaching past the block's
 * first token are masked; tiles past its last token are never loaded.
 *
 * Registers: a block launches with THREADS x 168 (all that
 * __launch_bounds__(THREADS, 1) allows), and setmaxnreg moves registers only
 * within that pool, so the producer's release must cover both consumer
 * warpgroups' request: 128 (168 - 24) = 256 (240 - 168), FA3's split for
 * three warpgroups.  (With 32 for the producer, 1024 registers short, the
 * second consumer warpgroup's setmaxnreg.inc waited forever: the hang.)
 *
 * -DLC_WGMMA_WATCHDOG (sh bench/kernels/build_attn.sh -DLC_WGMMA_WATCHDOG):
 * every mbarrier wait is bounded (mbar_wait_watchdog, mma.cuh) and each warp
 * records in shared memory where it last blocked (mbarrier, named barrier,
 * setmaxnreg), the producer waits for the consumers' last releases before it
 * exits, so any deadlock holds up some mbarrier wait, whose watchdog prints
 * the block, the wait and every warp's last blocking point, then traps.
 * (Its printf is a call: ptxas serialises the wgmmas there, so that build is
 * slower; it is for finding a hang, not for timing.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/prefill/attention_math.cuh"

#ifdef LC_WGMMA_WATCHDOG
/* set by the first watchdog that fires (outside LC_HAVE_WGMMA and the anonymous
 * namespace: the host pass registers it and sees no use) */
__device__ unsigned int lc_attn_wgmma_wd_fired = 0;
#endif

namespace {

constexpr int R = 8;                    /* query heads per kv head */
constexpr int HD = 256;                 /* head dim */
constexpr int TOK = 16;                 /* tokens per block (128 rows) */
constexpr int BN = 64;                  /* keys per tile */
constexpr int NSLOT = 3;                /* K/V half-tiles in the ring */
constexpr int PANEL = BN * 128;         /* one 64-dim panel of a K or V tile: 8 KB */
constexpr int HALF = 4 * PANEL;         /* one K or V tile: 32 KB */
constexpr int QPANEL = 64 * 128;        /* one 64-dim panel of a warpgroup's Q part */
constexpr int QWG = 4 * QPANEL;         /* a warpgroup's Q hi (or lo): 32 KB */
constexpr int KV_OFF = 4 * QWG, BAR_OFF = KV_OFF + NSLOT * HALF; /* Q at 0 */
#ifdef LC_WGMMA_WATCHDOG
constexpr size_t WD_BYTES = 64; /* a word per warp: where it last blocked */
#else
constexpr size_t WD_BYTES = 0;
#endif
constexpr size_t SMEM = 1024 + BAR_OFF + 2 * NSLOT * 8 + WD_BYTES; /* + alignment slack, + mbarriers */
constexpr int THREADS = 384;
static_assert(QPANEL == PANEL, "Q and K panels share the k-step offsets");
/* setmaxnreg (see the header): the pool is THREADS x REG_LAUNCH; the producer warpgroup
 * drops to REG_LOAD, the two consumer warpgroups rise to REG_MMA */
#ifdef LC_ATTN_WGMMA_REG_LOAD /* only to reproduce the hang under the watchdog: 32 was the bug */
constexpr int REG_LOAD = LC_ATTN_WGMMA_REG_LOAD;
constexpr bool REG_CHECK = false;
#else
constexpr int REG_LOAD = 24;
constexpr bool REG_CHECK = true;
#endif
constexpr int REG_LAUNCH = 65536 / THREADS / 8 * 8, REG_MMA = 240;
static_assert(!REG_CHECK || 128 * REG_LOAD + 256 * REG_MMA <= THREADS * REG_LAUNCH,
              "setmaxnreg.inc would wait forever for registers the producer does not release");
static_assert(SMEM <= 227 * 1024, "more shared memory than sm_90 opts in to");

#ifdef LC_HAVE_WGMMA
constexpr int BAR_Q = 1;                /* + wg: its Q has landed (128 threads) */
constexpr int BAR_PP = 3;               /* + wg: warpgroup wg may issue its GEMMs (256 threads) */


#ifdef LC_WGMMA_WATCHDOG
/* where a warp last blocked: what << 28 | arg << 24 | step (the half-tile or tile) */
enum { WD_RUN, WD_EMPTY, WD_FULL, WD_BAR, WD_NREG, WD_DRAIN, WD_DONE };
#define WD(what, arg, step)                                                                                          \
    do {                                                                                                             \
        if ((tid & 31) == 0)                                                                                         \
            *(volatile uint32_t *)&wd[tid >> 5] = (uint32_t)(what) << 28 | (uint32_t)((arg) & 15) << 24 |           \
                                                  ((uint32_t)(step) & 0xffffffu);                                     \
    } while (0)
/* the first warp (lane 0) in the grid whose wait timed out prints; the rest park */
__device__ __noinline__ bool wd_report(const uint32_t *wd, int what, int slot, int parity, int step, int gk, int t0,
                                       int pos, int ntiles) {
    if ((threadIdx.x & 31) != 0 || atomicCAS(&lc_attn_wgmma_wd_fired, 0u, 1u) != 0u) return false;
    const char *const names[] = {"running", "wait empty", "wait full", "bar.sync", "setmaxnreg.inc", "drain: wait empty",
                                 "done"};
    printf("LC_WGMMA_WATCHDOG attn_prefill_wgmma_kernel: block %d (kv head %d, tokens %d.., pos %d, %d tiles), "
           "warp %d: %s[%d] parity %d (half-tile %d) never completed\n",
           (int)blockIdx.x, gk, t0, pos, ntiles, (int)(threadIdx.x >> 5), names[what], slot, parity, step);
    for (int i = 0; i < THREADS / 32; i++) {
        const uint32_t v = ((const volatile uint32_t *)wd)[i];
        printf("  warp %2d (%s): last %s, id/slot %u, step %u\n", i, i < 4 ? "producer" : i < 8 ? "consumer WG 0" : "consumer WG 1",
               (v >> 28) < 7 ? names[v >> 28] : "?", (v >> 24) & 15, v & 0xffffffu);
    }
    return true;
}
#define WAIT(bar, parity, what, slot, step)                                                                          \
    do {                                                                                                             \
        const int par_ = (parity);                                                                                   \
        WD(what, slot, step);                                                                                        \
        mbar_wait_watchdog(bar, par_, [&] { return wd_report(wd, what, slot, par_, step, gk, t0, pos, ntiles); });    \
        WD(WD_RUN, slot, step);                                                                                      \
    } while (0)
#else
#define WD(what, arg, step) ((void)0)
#define WAIT(bar, parity, what, slot, step) mbar_wait(bar, parity)
#endif
#endif

/* grid (ceil(T/TOK) * Hkv), block THREADS, dynamic smem SMEM.
 * qb: qh [T, H, HD] then ql [T, H, HD] bf16 from the prep; out [T, H*HD] fp32. */
template <bool PP>
__global__ void __launch_bounds__(THREADS, 1)
    attn_prefill_wgmma_kernel(lc_attn_params p, const uint16_t *__restrict__ qb, int T, const uint16_t *__restrict__ kc,
                              const uint16_t *__restrict__ vc, const float *__restrict__ proj, int ldp,
                              float *__restrict__ out, const lc_ctrl *ctrl) {
#ifdef LC_HAVE_WGMMA
    lc_pdl_wait();
    lc_pdl_launch_dependents();
    if (LC_STOPPED(ctrl)) return;
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + BAR_OFF), *empty = full + NSLOT;
#ifdef LC_WGMMA_WATCHDOG
    uint32_t *wd = reinterpret_cast<uint32_t *>(empty + NSLOT);
    if (threadIdx.x < THREADS / 32) wd[threadIdx.x] = 0;
#endif

    const int tid = threadIdx.x;
    const int Hkv = p.Hkv, nblk = (T + TOK - 1) / TOK;
    const int gk = (int)blockIdx.x % Hkv, t0 = (nblk - 1 - (int)blockIdx.x / Hkv) * TOK; /* latest tokens first */
    const int pos = ctrl->pos;
    const int nkeys = pos + min(t0 + TOK, T); /* keys visible to the block's last token */
    const int ntiles = (nkeys + BN - 1) / BN;
    if (tid == 0) {
        for (int s = 0; s < NSLOT; s++) mbar_init(&full[s], 128), mbar_init(&empty[s], 8 * LC_WARP_ARRIVALS);
    }
    __syncthreads();

    if (tid < 128) {
        /* ---- producer: half-tile h (K of tile h/2 if h is even, else V) into slot h % NSLOT.
         * Warp w copies keys 4 it + w; lane q the 16 bytes 8q .. 8q+7 of the row (panel q/8). */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REG_LOAD));
        const int rsub = tid >> 5, q = tid & 31;
        const size_t kv_stride = (size_t)Hkv * HD;
        for (int h = 0; h < 2 * ntiles; h++) {
            const int slot = h % NSLOT;
            WAIT(&empty[slot], ((h / NSLOT) & 1) ^ 1, WD_EMPTY, slot, h);
            const uint16_t *src = ((h & 1) ? vc : kc) + gk * HD + 8 * q;
            uint8_t *dst = smem + KV_OFF + slot * HALF + (q >> 3) * PANEL;
            const int key0 = (h >> 1) * BN;
#pragma unroll 4
            for (int it = 0; it < BN / 4; it++) {
                const int r = 4 * it + rsub, key = key0 + r;
                const bool ok = key < nkeys;
                cp_async16(dst + r * 128 + (((q & 7) ^ (r & 7)) << 4), src + (size_t)(ok ? key : 0) * kv_stride, ok);
            }
            cp_async_mbar_arrive(&full[slot]);
        }
#ifdef LC_WGMMA_WATCHDOG
        /* the consumers' releases of the last NSLOT half-tiles: a consumer stuck anywhere holds one up */
        for (int h = max(0, 2 * ntiles - NSLOT); h < 2 * ntiles; h++) WAIT(&empty[h % NSLOT], (h / NSLOT) & 1, WD_DRAIN, h % NSLOT, h);
        WD(WD_DONE, 0, 0);
#endif
        cp_async_commit(); /* wait_group waits for committed groups only */
        cp_async_wait<0>();
        return;
    }

    /* ---- consumers */
    WD(WD_NREG, 0, 0);
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REG_MMA));
    WD(WD_RUN, 0, 0);
    const int ct = tid - 128, wg = ct >> 7, w = (ct >> 5) & 3, lane = ct & 31, g = lane >> 2, cq = lane & 3;

    /* Q rows of this warpgroup (row r = 8 token + head): warp w copies rows 4 it + w, lane the
     * 16 bytes 8 lane .. of the row; hi and lo 2 QWG apart */
    {
        uint8_t *qd = smem + wg * QWG + (lane >> 3) * QPANEL;
        const size_t lo = (size_t)T * p.H * HD;
#pragma unroll 4
        for (int it = 0; it < 16; it++) {
            const int r = 4 * it + w, t = t0 + 8 * wg + (r >> 3);
            const bool ok = t < T;
            const uint16_t *src = qb + ((size_t)(ok ? t : 0) * p.H + gk * R + (r & 7)) * HD + 8 * lane;
            uint8_t *dst = qd + r * 128 + (((lane & 7) ^ (r & 7)) << 4);
            cp_async16(dst, src, ok);
            cp_async16(dst + 2 * QWG, src + lo, ok);
        }
        cp_async_commit();
        cp_async_wait<0>();
        fence_proxy_async();
        WD(WD_BAR, BAR_Q + wg, 0);
        named_bar_sync(BAR_Q + wg, 128);
    }

    /* descriptors; offsets below in 16-byte units */
    const uint64_t dq = wgmma_desc_k128(smem + wg * QWG);
    const uint64_t dk0 = wgmma_desc_k128(smem + KV_OFF);
    const uint64_t dv0 = wgmma_desc_mn128(smem + KV_OFF, PANEL);
    constexpr uint32_t QLO16 = 2 * QWG / 16, HALF16 = HALF / 16, PANEL16 = PANEL / 16;

    /* this thread's rows: 16 w + g (+ 8): token t0 + 8 wg + 2 w (+ 1), head g */
    const int lim0 = pos + t0 + 8 * wg + 2 * w; /* last key visible to row h is lim0 + h */
    const int jfull = (pos + t0 + 1) / BN;      /* tiles before this one are visible to every row */

    float o[128], s[32], m[2], l[2];
    uint32_t ph[4][4], pl[4][4];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.0f;
    m[0] = m[1] = -INFINITY, l[0] = l[1] = 0.0f;

    /* S = Q K^T of tile j (waits for its K); a batch of its own: the wait is a loop, and
     * no branch may sit between a wgmma.fence and its wgmmas (ptxas serialises them) */
    auto issue_s = [&](int j) {
        const int h = 2 * j, slot = h % NSLOT;
        WAIT(&full[slot], (h / NSLOT) & 1, WD_FULL, slot, h);
        fence_proxy_async();
        wgmma_fence();
        const uint64_t dk = dk0 + (uint64_t)(slot * HALF16);
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const uint32_t off = (kk >> 2) * PANEL16 + (kk & 3) * 2; /* panel, then 32 bytes per k-step */
            wgmma_ss_64x64x16_bf16(s, dq + off, dk + off, kk > 0);
            wgmma_ss_64x64x16_bf16(s, dq + QLO16 + off, dk + off, 1);
        }
        wgmma_commit();
    };
    /* O += P V of tile j (waits for its V) */
    auto issue_pv = [&](int j) {
        const int h = 2 * j + 1, slot = h % NSLOT;
        WAIT(&full[slot], (h / NSLOT) & 1, WD_FULL, slot, h);
        fence_proxy_async();
        wgmma_fence();
        const uint64_t dv = dv0 + (uint64_t)(slot * HALF16);
#pragma unroll
        for (int ks = 0; ks < BN / 16; ks++) {
            wgmma_rs_64x256x16_bf16_nmaj(o, ph[ks], dv + ks * (16 * 128 / 16)); /* 16 keys = 2 KB on */
            wgmma_rs_64x256x16_bf16_nmaj(o, pl[ks], dv + ks * (16 * 128 / 16));
        }
        wgmma_commit();
    };
    /* the slot of half-tile h is free once this warp's wgmmas that read it are done */
    auto release = [&](int h) {
        mbar_arrive_warp(&empty[h % NSLOT]);
    };
    auto fence_regs = [&]() {
#pragma unroll
        for (int i = 0; i < 128; i++) reg_fence(o[i]);
#pragma unroll
        for (int i = 0; i < 32; i++) reg_fence(s[i]);
#pragma unroll
        for (int k = 0; k < 4; k++)
#pragma unroll
            for (int e = 0; e < 4; e++) reg_fence(ph[k][e]), reg_fence(pl[k][e]);
    };

    /* ping-pong: WG 1 hands WG 0 the first turn; each hands the other a turn after issuing */
    if (PP && wg == 1) named_bar_arrive(BAR_PP + 0, 256);
    if (PP) WD(WD_BAR, BAR_PP + wg, 0);
    if (PP) named_bar_sync(BAR_PP + wg, 256);
    issue_s(0);
    if (PP) named_bar_arrive(BAR_PP + (wg ^ 1), 256);
    wgmma_wait<0>();
    fence_regs();
    release(0);

    for (int j = 0; j < ntiles; j++) {
        /* ---- causal mask (tiles reaching past the first token only) ---- */
        if (j >= jfull) {
            const int kb = j * BN + 2 * cq;
#pragma unroll
            for (int jj = 0; jj < 8; jj++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (kb + 8 * jj + (e & 1) > lim0 + (e >> 1)) s[4 * jj + e] = -INFINITY;
        }
        /* ---- online softmax: s[4 jj + 2 h + e] is row h, key 8 jj + 2 cq + e ---- */
        float mx[2], base[2], corr[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float x = fmaxf(s[2 * h], s[2 * h + 1]);
#pragma unroll
            for (int jj = 1; jj < 8; jj++) x = fmaxf(x, fmaxf(s[4 * jj + 2 * h], s[4 * jj + 2 * h + 1]));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
            mx[h] = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
            const float mn = fmaxf(m[h], mx[h]);
            base[h] = mn == -INFINITY ? 0.0f : mn; /* a row with no visible key yet keeps p = 0 */
            corr[h] = ex2(m[h] - base[h]);
            m[h] = mn;
        }
        /* P = 2^(S - m) as A fragments: k-step ks = keys 16 ks ..; register 2 (jj & 1) + h */
#pragma unroll
        for (int jj = 0; jj < 8; jj++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float x0 = ex2(s[4 * jj + 2 * h] - base[h]), x1 = ex2(s[4 * jj + 2 * h + 1] - base[h]);
                const uint32_t hi = pack_bf16(x0, x1);
                ph[jj >> 1][2 * (jj & 1) + h] = hi;
                pl[jj >> 1][2 * (jj & 1) + h] = pack_bf16(x0 - bf_lo(hi), x1 - bf_hi(hi));
                rs[h] += x0 + x1;
            }
#pragma unroll
        for (int h = 0; h < 2; h++) l[h] = l[h] * corr[h] + rs[h];
        if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f))
#pragma unroll
            for (int n = 0; n < 32; n++) {
                o[4 * n] *= corr[0], o[4 * n + 1] *= corr[0];
                o[4 * n + 2] *= corr[1], o[4 * n + 3] *= corr[1];
            }

        /* ---- P V of tile j, then S of tile j + 1; V's slot is freed as soon as P V is
         * done, so the producer refills it (with K of tile j + 2) while S runs ---- */
        if (PP) WD(WD_BAR, BAR_PP + wg, 2 * j + 1);
        if (PP) named_bar_sync(BAR_PP + wg, 256);
        issue_pv(j);
        if (j + 1 < ntiles) {
            issue_s(j + 1);
            if (PP) named_bar_arrive(BAR_PP + (wg ^ 1), 256);
            wgmma_wait<1>();
            release(2 * j + 1);
            wgmma_wait<0>();
            fence_regs();
            release(2 * j + 2);
        } else {
            if (PP && wg == 0) named_bar_arrive(BAR_PP + 1, 256); /* WG 0 syncs no more: WG 1 does not arrive */
            wgmma_wait<0>();
            fence_regs();
            release(2 * j + 1);
        }
    }

    WD(WD_DONE, 0, 0);
    /* ---- l over the row's quad, then out = O / l * sigmoid(gate) ---- */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int t = t0 + 8 * wg + 2 * w + h, head = gk * R + g;
        if (t >= T) continue;
        const float *gate = proj + (size_t)t * ldp + head * 2 * HD + HD;
        float *dst = out + ((size_t)t * p.H + head) * HD;
#pragma unroll
        for (int n = 0; n < 32; n++) {
            const int d = 8 * n + 2 * cq;
            float2 r;
            r.x = o[4 * n + 2 * h] / l[h] * sigmoid_f(gate[d]);
            r.y = o[4 * n + 2 * h + 1] / l[h] * sigmoid_f(gate[d + 1]);
            *reinterpret_cast<float2 *>(dst + d) = r;
        }
    }
#endif
}

template <bool PP>
cudaError_t launch(const lc_attn_params *p, const uint16_t *qb, int T, const uint16_t *kc, const uint16_t *vc,
                   const float *proj, int ldp, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    static bool attr_set = false; /* once per instance: the opt-in to large shared memory */
    if (!attr_set) {
        cudaError_t err =
            cudaFuncSetAttribute(attn_prefill_wgmma_kernel<PP>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM);
        if (err) return err;
        /* the register pool setmaxnreg redistributes (see the header): a build with fewer
         * registers at launch would hang in setmaxnreg.inc, so refuse it */
        cudaFuncAttributes fa;
        if ((err = cudaFuncGetAttributes(&fa, attn_prefill_wgmma_kernel<PP>))) return err;
        if (REG_CHECK && (fa.numRegs + 7) / 8 * 8 * THREADS < 128 * REG_LOAD + 256 * REG_MMA)
            return cudaErrorInvalidConfiguration;
        attr_set = true;
    }
    const int nblk = (T + TOK - 1) / TOK;
    return lc_launch(attn_prefill_wgmma_kernel<PP>, dim3(nblk * p->Hkv), dim3(THREADS), SMEM, st, *p, qb, T, kc, vc, proj,
                     ldp, out, ctrl);
}

} // namespace

/* sm_90 with the opt-in shared memory, and the shapes the kernel is built for */
extern "C" int lc_attn_prefill_wgmma_supported(const lc_attn_params *p) {
    static int dev_ok = -1;
    if (dev_ok < 0) {
        int dev = 0, major = 0, optin = 0;
        dev_ok = !cudaGetDevice(&dev) && !cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) &&
                 !cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) && major == 9 &&
                 (size_t)optin >= SMEM;
    }
    return dev_ok && p->H == R * p->Hkv && p->hd == HD;
}

extern "C" cudaError_t lc_attn_prefill_wgmma(const lc_attn_params *p, const uint16_t *qb, int T, const uint16_t *kc,
                                             const uint16_t *vc, const float *proj, int ldp, float *out, const lc_ctrl *ctrl,
                                             int pingpong, cudaStream_t st) {
    if (!lc_attn_prefill_wgmma_supported(p) || T < 1) return cudaErrorInvalidValue;
    return pingpong ? launch<true>(p, qb, T, kc, vc, proj, ldp, out, ctrl, st)
                    : launch<false>(p, qb, T, kc, vc, proj, ldp, out, ctrl, st);
}
