/* gdn_fused.cu — a DeltaNet layer's in_proj and decode step as one kernel
 * (LILAC_DECODE_TRY=gdnfuse, cuda_ops.h; written 2026-12-05, not yet run).
 *
 * Why: at 4K the GDN layer's in_proj (ring_gemv, 14.2 MB) adds 5.9 us to the
 * decode step and the split DeltaNet step after it 6.4 us, for about 3.3 +
 * 1 us of bytes: the step waits for the whole projection to land in global
 * memory, then starts a latency-bound chain (conv, norms, the delta rule,
 * an exchange).  Here the projection rows a key head needs are computed by
 * the cluster that runs its recurrence, so the step starts from shared
 * memory as soon as those rows are done, and one kernel boundary of the
 * thirty a step goes.
 *
 * One cluster of CL = 8 blocks per key head kh (Hk = 16 clusters, 128
 * blocks of 8 warps); blocks 4 vh .. 4 vh + 3 run value head h = 2 kh + vh as
 * gdn_step.cu's split form (NS = 4 blocks of 32 state columns).  Block r
 * (sub = r % 4) computes 6 row blocks of 16 rows of in_proj, as ring_gemv
 * does (gemv_ring.cuh: tasks of 16 rows x 512 inputs in a two-slot cp.async
 * ring per warp, requested before the PDL wait; warp w keeps K slice w % 4
 * and makes that slice's digits itself):
 *   q|k row blocks 2r, 2r + 1 of the key head's 16 (q: 0-7, k: 8-15), sent
 *   to all 8 blocks; v and z row blocks of its own 32 columns, kept.
 * The key head's four b and a rows (two value heads each) are one gathered
 * tile whose K slice s is a fourth task of warp s in block s < 4; its
 * partial sums go to all 8 blocks, and each sums its head's slices in
 * ring_gemv's order.  Every value is the same float ring_gemv writes (each
 * row's sum depends on its own codes and x only, in the same order), and
 * the step's arithmetic is gdn_split_kernel's (T = 1), so the layer's output
 * is bit for bit the unfused pair's (test_gpu_backend checks the logits).
 *
 * Shapes: the model's (2048 inputs, dk = dv = 128, conv of 4, Hv = 2 Hk,
 * 4-bit in_proj of 2 Kd + 2 Vd + 2 Hv rows), sm_90 (clusters of 8);
 * lc_gdn_fused_ok says. */
#include <stdint.h>

#include "backend/cuda/cluster.cuh"
#include "backend/cuda/decode/gdn_token.cuh"
#include "backend/cuda/decode/gemv_ring.cuh"

namespace {
namespace gdn_fused {

using gemv_ring::NSP;
using gemv_ring::S;
using gemv_ring::TASK;
using gemv_ring::WARPS;
using gemv_stream::cp16;
using gemv_stream::cp_commit;
using gemv_stream::cp_wait;

constexpr int KIN = 2048, KS = KIN / (128 * NSP);                   /* inputs, K slices */
constexpr int KC = 4, D = 128, NS = 4, CL = 2 * NS;                 /* conv taps, head dim, blocks a value head, a cluster */
constexpr int THREADS = WARPS * 32, NC = D / NS, P = THREADS / NC, NW = WARPS;
constexpr int RBS = 6;                                              /* row blocks a block */
static_assert(KS == 4 && WARPS % KS == 0 && NC == 32 && P == 8, "gdn_split_kernel<4>'s mapping, ring_gemv's slices");

/* dynamic shared memory, in bytes from the start */
constexpr size_t O_BF = (size_t)WARPS * S * TASK;                   /* rings: 2 tasks a warp */
constexpr size_t O_XS = O_BF + (size_t)gemv_ring::BF_WORDS * 16;    /* per warp: its digits' group scales (8) */
constexpr size_t O_SCR = O_XS + WARPS * 8 * 4;                      /* the slices' sums of x^2, block reductions */
constexpr size_t O_PART = O_SCR + 32 * 4;                           /* [KS][RBS][16] the own row blocks' slice sums */
constexpr size_t O_BAP = O_PART + KS * RBS * 16 * 4;                /* [KS][4] b, b, a, a slice sums, from blocks 0-3 */
constexpr size_t O_QKIN = O_BAP + KS * 4 * 4;                       /* [256] the key head's q|k projections */
constexpr size_t O_VZ = O_QKIN + 2 * D * 4;                         /* [2][32] the own columns' v, z projections */
constexpr size_t O_QK = O_VZ + 2 * NC * 4;                          /* [256] conv + SiLU of q|k */
constexpr size_t O_SQ = O_QK + 2 * D * 4;                           /* [NW] per-warp sums of squares */
constexpr size_t O_OO = O_SQ + NW * 4;                              /* [NS * NW] per-warp sums of o^2 of the value head */
constexpr size_t SMEM = O_OO + NS * NW * 4;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* The gathered tile: rows b_{2kh}, b_{2kh+1}, a_{2kh}, a_{2kh+1} in slots
 * 0-3, slots 4-15 repeat b_{2kh} (read from L2 after the first: the tile's
 * sums for those slots are not used).  copy_task's layout and lanes. */
__device__ __forceinline__ void copy_gather(unsigned char *slot, const lc_qmat &W, int rb_row, int ra_row, int k) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    auto row_of = [&](int sl) { return sl < 2 ? rb_row + sl : sl < 4 ? ra_row + (sl - 2) : rb_row; };
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int sl = g + 8 * hh;
        const uint4 *src = reinterpret_cast<const uint4 *>(W.w + (size_t)row_of(sl) * (KIN / 8)) + k * NSP * 4 + c;
#pragma unroll
        for (int m = 0; m < NSP; m++) cp16(slot + m * 1024 + sl * 64 + c * 16, src + 4 * m);
    }
    const int sl = lane & 15;
    const uint16_t *sb = (lane < 16 ? W.s : W.b) + (size_t)row_of(sl) * (KIN / 64) + k * NSP * 2;
    cp16(slot + gemv_ring::CODES + (lane >> 4) * 256 + sl * 16, sb);
}
#endif

/* grid Hk * CL blocks in clusters of CL.  in_proj: q|k|v|z|b|a rows of
 * 2048 inputs (the RMSNorm of h with norm_w applied inside, as ring_gemv);
 * the rest as lc_gdn (T = 1).  out [Hv * D]. */
__global__ void __launch_bounds__(THREADS, 2)
    gdn_fused_kernel(lc_qmat W, const float *__restrict__ x, const float *__restrict__ norm_w, float eps, lc_gdn_params p,
                     float *__restrict__ conv_state, float *__restrict__ state, float *__restrict__ out, const lc_ctrl *ctrl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int KW = 128 * NSP, R = D / P; /* inputs a slice, state rows a thread */
    extern __shared__ __align__(16) unsigned char smem[];
    uint4 *bf = reinterpret_cast<uint4 *>(smem + O_BF);
    float *xs = reinterpret_cast<float *>(smem + O_XS), *scratch = reinterpret_cast<float *>(smem + O_SCR);
    float *part = reinterpret_cast<float *>(smem + O_PART), *bap = reinterpret_cast<float *>(smem + O_BAP);
    float *qk_in = reinterpret_cast<float *>(smem + O_QKIN), *vz = reinterpret_cast<float *>(smem + O_VZ);
    float *qk = reinterpret_cast<float *>(smem + O_QK), *sq_w = reinterpret_cast<float *>(smem + O_SQ);
    float *oo = reinterpret_cast<float *>(smem + O_OO);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c4 = lane & 3, k = warp % KS;
    const int rank = (int)cluster_rank(), kh = blockIdx.x / CL, vh = rank / NS, sub = rank % NS, h = 2 * kh + vh;
    const int Kd = p.Hk * D, C = 2 * Kd + p.Hv * D, Vd = p.Hv * D;

    /* ---- the in_proj tasks: rows of the block's 6 row blocks, slice k ----
     * warp w: row blocks w / 4 + 2 n (n = 0, 1, 2) of {q|k 2r, q|k 2r + 1,
     * v, v + 16, z, z + 16}; warp s < 4 of block s < 4 also slice s of the
     * b|a tile (n = 3) */
    auto row0 = [&](int i) { /* first row of the block's row block i */
        const int j = 2 * rank + (i & 1); /* q|k row block */
        return i < 2 ? (j < 8 ? kh * D + j * 16 : Kd + kh * D + (j - 8) * 16)
               : i < 4 ? 2 * Kd + h * D + sub * NC + (i - 2) * 16
                       : C + h * D + sub * NC + (i - 4) * 16;
    };
    const int ntask = 3 + (rank < KS && warp == rank ? 1 : 0);
    unsigned char *ring = smem + (size_t)warp * S * TASK;
    auto issue = [&](int n) {
        if (n < 3) gemv_ring::copy_task<KIN>(ring + (n % S) * TASK, W.w, W.s, W.b, (size_t)row0(warp / KS + 2 * n), k);
        else if (n < ntask) copy_gather(ring + (n % S) * TASK, W, C + Vd + 2 * kh, C + Vd + p.Hv + 2 * kh, k);
        cp_commit(); /* empty groups too: the wait count stays uniform */
    };
    issue(0); /* weights: before the predecessor finishes */
    issue(1);

    const bool stopped = lc_pdl_wait_stop(ctrl);
    lc_pdl_launch_dependents();
    if (stopped) {
        cp_wait<0>(); /* no copy lands in a block that has left */
        return;
    }
    cluster_arrive_relaxed(); /* the start barrier: peers' shared memory is written only once every block has started */
    if (p.l2_next.w != nullptr) l2_prefetch_qmat(p.l2_next, blockIdx.x, gridDim.x); /* LC_TRY_L2NEXT: the out_proj */

    /* ---- the projections (ring_gemv's arithmetic) ---- */
    uint4 *bw = bf + warp * (NSP + 1) * 2 * gemv_tq::SLOTS;
    float *xw = xs + warp * 8, ss;
    const float down = gemv_tq::prep_x_warp<KW>(x + k * KW, bw, xw, norm_w + k * KW, &ss);
    if (warp < KS && lane == 0) scratch[warp] = ss; /* one warp per slice */
    __syncwarp();
    uint4 xb[NSP][2];
    gemv_tq::tile<KW, NSP>::x_frags(bw, 0, g, c4, xb);
    float bay = 0.0f; /* n = 3: slot g's slice sum of the b|a tile (lanes c4 = 0, g < 4) */
    for (int n = 0; n < ntask; n++) {
        gemv_tq::tile<KIN, NSP> tl;
        cp_wait<S - 1>();
        __syncwarp(); /* the scale and bias rows came through other lanes' copies */
        gemv_ring::tile_from<KIN>(tl, ring + (n % S) * TASK, g, c4);
        __syncwarp(); /* every lane has read the slot before it is refilled */
        issue(n + 2);
        float ya, yb;
        tl.dot_x(xb, xw, down, 0, g, c4, ya, yb);
        if (n < 3) {
            const int i = warp / KS + 2 * n;
            if (c4 == 0) part[(k * RBS + i) * 16 + g] = ya, part[(k * RBS + i) * 16 + g + 8] = yb;
        } else {
            bay = ya;
        }
    }
    cp_wait<0>();
    /* ---- the step's inputs (gdn_split_kernel's), requested while the cluster meets: loaded
     * before the wait they would hold ~30 registers through the dot loop, and the out_proj
     * beside this kernel (PDL) needs the register file's other half ---- */
    const int cc = tid / P, part_ = tid % P, v = sub * NC + cc; /* this thread's state column (of the head) */
    const int chqk = tid < D ? kh * D + tid : Kd + kh * D + (tid - D), chv = 2 * Kd + h * D + v;
    const bool wqk = rank == 0, wv = part_ == 0; /* one writer per window channel */
    const int flip = ctrl->conv_flip;
    const float *rd = conv_state + (size_t)flip * (KC - 1) * C;
    float *wr = conv_state + (size_t)(1 - flip) * (KC - 1) * C;
    float w_qk[KC], w_v[KC], win_qk[KC - 1], win_v[KC - 1];
#pragma unroll
    for (int j = 0; j < KC; j++) w_qk[j] = p.conv_w[(size_t)chqk * KC + j], w_v[j] = p.conv_w[(size_t)chv * KC + j];
#pragma unroll
    for (int j = 0; j < KC - 1; j++)
        win_qk[j] = __ldcg(rd + (size_t)j * C + chqk), win_v[j] = __ldcg(rd + (size_t)j * C + chv);
    float *St = state + (size_t)h * D * D + v;
    float s[R];
#pragma unroll
    for (int i = 0; i < R; i++) s[i] = __ldcg(St + (size_t)(part_ + P * i) * D);
    const float nw = p.norm_w[v], dtb = p.dt_bias[h], eA = expf(p.A_log[h]), qscale = rsqrtf((float)D);

    __syncthreads();
    cluster_wait(); /* the start barrier */
    if (ntask == 4 && c4 == 0 && g < 4) /* slots 0-3 of the b|a tile, slice k = rank: to every block */
        for (int q = 0; q < CL; q++) st_cluster(bap + k * 4 + g, (uint32_t)q, bay);
    float sq = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) sq += scratch[kk];
    const float rr = rsqrtf(sq / (float)KIN + eps);
    if (tid < RBS * 16) { /* the block's rows: slices summed in order, as ring_gemv's y = residual (0) + v */
        float y = part[tid];
#pragma unroll
        for (int kk = 1; kk < KS; kk++) y += part[kk * RBS * 16 + tid];
        y = __fadd_rn(0.0f, __fmul_rn(y, rr)); /* not contracted: ring_gemv's FMUL, then its residual's FADD */
        const int i = tid / 16, r16 = tid % 16;
        if (i < 2) {
            const int j = 2 * rank + i;
            for (int q = 0; q < CL; q++) st_cluster(qk_in + j * 16 + r16, (uint32_t)q, y);
        } else {
            vz[(i - 2) * 16 + r16] = y; /* v: [0, 32), z: [32, 64) */
        }
    }
    cluster_arrive(); /* release: the q|k rows and the b|a sums before any block reads them */
    cluster_wait();

    /* ---- the step: gdn_split_kernel's token (gdn_token.cuh) ---- */
    float bsum = bap[vh], asum = bap[2 + vh];
#pragma unroll
    for (int kk = 1; kk < KS; kk++) bsum += bap[kk * 4 + vh], asum += bap[kk * 4 + 2 + vh];
    const float xqk = qk_in[tid], xv = vz[cc], z = vz[NC + cc];
    const float b = __fadd_rn(0.0f, __fmul_rn(bsum, rr)), a = __fadd_rn(0.0f, __fmul_rn(asum, rr)) + dtb;
    float o2;
    const float o = gdn_token::token<KC, D, P, R>(xqk, xv, b, a, w_qk, w_v, win_qk, win_v, s, qk, sq_w, eA, qscale, part_, &o2);
    if (lane < NS) st_cluster(oo + sub * NW + warp, (uint32_t)(vh * NS + lane), o2);
    cluster_arrive(); /* release: the value head's o^2 sums before its blocks read them */
    cluster_wait();
    if (wv) out[(size_t)h * D + v] = gdn_token::head_out<NS * NW, D>(oo, o, p.eps, nw, z);
    if (wqk)
#pragma unroll
        for (int j = 0; j < KC - 1; j++) wr[(size_t)j * C + chqk] = win_qk[j];
    if (wv)
#pragma unroll
        for (int j = 0; j < KC - 1; j++) wr[(size_t)j * C + chv] = win_v[j];
#pragma unroll
    for (int i = 0; i < R; i++) St[(size_t)(part_ + P * i) * D] = s[i];
#else
    __trap(); /* never launched below sm_90 (lc_gdn_fused_ok) */
#endif
}

/* The kernel's attributes and whether one cluster fits, once per device. */
bool fused_fit() {
    static signed char ok[64]; /* 0 unknown, 1 yes, -1 no */
    int dev = 0;
    if (cudaGetDevice(&dev)) return false;
    signed char *o = &ok[dev & 63];
    if (*o == 0) {
        *o = cudaFuncSetAttribute(gdn_fused_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM) == cudaSuccess &&
                     cluster_count(gdn_fused_kernel, CL, 16 * CL, THREADS, SMEM) >= 1
                 ? 1
                 : -1;
        (void)cudaGetLastError(); /* a refused attribute leaves no error behind */
    }
    return *o > 0;
}

} // namespace gdn_fused
} // namespace

extern "C" int lc_gdn_fused_ok(const lc_qmat *W, const lc_gdn_params *p) {
    using namespace gdn_fused;
    /* the unfused pair must be ring_gemv (4 bits, aligned: it checks) and the split step of 4, whose sums this kernel repeats */
    return lc_gemv_rms_ring(W) && lc_gdn_step_form(p, 1) == NS && p->K == KC && p->dk == D && p->dv == D && p->Hk >= 1 &&
           p->Hv == 2 * p->Hk && W->cols == KIN && W->n_mat == 1 && W->rows == 2 * p->Hk * D + 2 * p->Hv * D + 2 * p->Hv &&
           fused_fit();
}

extern "C" cudaError_t lc_gdn_fused(const lc_qmat *W, const float *h, const float *norm_w, float eps, const lc_gdn_params *p,
                                    float *conv_state, float *state, float *out, const lc_ctrl *ctrl, cudaStream_t st) {
    using namespace gdn_fused;
    if (!lc_gdn_fused_ok(W, p) || ctrl == NULL) return cudaErrorNotSupported;
    lc_gdn_params q = *p;
    if (!(lc_decode_try() & LC_TRY_L2NEXT)) q.l2_next.w = NULL;
    lc_decode_try_note(LC_TRY_GDN_FUSE | (q.l2_next.w ? LC_TRY_L2NEXT : 0));
    return cluster_launch(gdn_fused_kernel, CL, dim3(p->Hk * CL), dim3(THREADS), SMEM, st, *W, h, norm_w, eps, q, conv_state,
                          state, out, ctrl);
}
