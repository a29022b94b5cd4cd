/* attn_prefill_test.cu — workshop test of the tensor-core prefill attention
 * (src/backend/cuda/prefill/attention_prefill.cu, included here so every
 * precision MODE can be run; and its Hopper wgmma kernel,
 * attention_prefill_wgmma.cu, with and without ping-pong, side by side:
 * "fa3" / "fa3np" below) against the SIMT path of attention.cu
 * (lc_attn_prep + lc_attn(nsplit = 1) + lc_attn_combine), and for the small
 * cases against an independent fp64 CPU reference.
 *
 * For each case (pos, T): random proj (its padding columns NaN, so a stray
 * read shows), a random bf16 cache for [0, pos) and NaN in [pos, pos + T)
 * (the prep must overwrite it); capacity pos + T exactly, so a read past the
 * chunk is out of bounds.  Checks: the K/V cache bytes equal lc_attn_prep's,
 * out is finite and within each mode's tolerance of the SIMT reference (and
 * of the CPU one).  Times (CUDA events, median of REPS after warm-up) the
 * whole launcher, the prep and the attention kernel alone, with TFLOP/s of
 * causal attention (4 hd H per visible key and query).
 *
 * Ends with a table of the attention kernel's time per case: mma.sync
 * MODE 3 against the wgmma kernels.
 *
 * Usage: attn_prefill_test [--quick] [--no-huge] [--modes LIST]
 *   --quick   only the small cases, one timed rep (for compute-sanitizer)
 *   --no-huge skip pos = 126976
 *   --modes   only these MODES ids, comma-separated (3, 1, 0; 12 fa3, 11 fa3np;
 *             the SIMT reference always runs)
 * stdout is line-buffered and each case and mode says so before it starts, so
 * a log cut by a timeout shows what hung (build with -DLC_WGMMA_WATCHDOG to
 * have the wgmma kernel's deadlocks trap with their location instead).
 * Exit status 1 on any correctness failure. */
#include "backend/cuda/prefill/attention_prefill.cu"
#include "backend/cuda/mma.cuh"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>

#define CK(x)                                                                                                       \
    do {                                                                                                            \
        cudaError_t e_ = (x);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                     \
            exit(2);                                                                                                \
        }                                                                                                           \
    } while (0)

static const int H = 16, HKV = 2, HDIM = 256, RD = 64;
static const int LDP = H * 2 * HDIM + 2 * HKV * HDIM + 4; /* + 4 padding columns (NaN) */

/* ---- deterministic random data (same generator on host and device) ---- */
__host__ __device__ static inline uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
__host__ __device__ static inline float urand(uint32_t seed, size_t i) {
    const uint32_t h = mix32((uint32_t)i ^ mix32((uint32_t)(i >> 32) ^ seed));
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}
__host__ __device__ static inline uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* proj [T, LDP]: q U(-1.7, 1.7), gate U(-4, 4), k U(-1.7, 1.7), v U(-1, 1), padding NaN */
__global__ void fill_proj(float *proj, int T, uint32_t seed) {
    const size_t n = (size_t)T * LDP;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % LDP);
        const float u = urand(seed, i);
        float v;
        if (c < H * 2 * HDIM) v = (c % (2 * HDIM)) < HDIM ? -1.7f + 3.4f * u : -4.0f + 8.0f * u;
        else if (c < H * 2 * HDIM + HKV * HDIM) v = -1.7f + 3.4f * u;
        else if (c < H * 2 * HDIM + 2 * HKV * HDIM) v = -1.0f + 2.0f * u;
        else v = __int_as_float(0x7fc00000);
        proj[i] = v;
    }
}
/* cache [cap, HKV, HDIM] bf16: U(-amp, amp) for positions < pos, NaN from pos on */
__global__ void fill_cache(uint16_t *c, int pos, int cap, float amp, uint32_t seed) {
    const size_t n = (size_t)cap * HKV * HDIM, valid = (size_t)pos * HKV * HDIM;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = i < valid ? f2bf(-amp + 2.0f * amp * urand(seed, i)) : (uint16_t)0x7fc0;
}
__global__ void count_diff(const uint16_t *a, const uint16_t *b, size_t n, unsigned long long *cnt) {
    unsigned long long k = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) k += a[i] != b[i];
    if (k) atomicAdd(cnt, k);
}
__global__ void fill_f32(float *x, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) x[i] = v;
}

static unsigned long long ndiff(const uint16_t *a, const uint16_t *b, size_t n) {
    static unsigned long long *d = nullptr;
    if (!d) CK(cudaMalloc(&d, sizeof(*d)));
    CK(cudaMemset(d, 0, sizeof(*d)));
    count_diff<<<1024, 256>>>(a, b, n, d);
    CK(cudaGetLastError());
    unsigned long long h = 0;
    CK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
    return h;
}

/* ---- host parameters ---- */
struct Host {
    std::vector<float> qn, kn, inv;
};

/* fp64 reference of out [T, H*HDIM] for one kv head range, keys from the GPU
 * cache (kc, vc: [cap, HKV, HDIM], after the prep) so only the attention
 * math is compared; also counts k rows whose bf16 differs from a fp64 prep. */
static void cpu_ref(const Host &hp, const float *proj, int T, int pos, const uint16_t *kc, const uint16_t *vc,
                    std::vector<float> &out, long *k_mismatch) {
    out.assign((size_t)T * H * HDIM, 0.0f);
    auto norm_rope = [&](const float *x, const float *w, int p, double *y) {
        double ss = 0;
        for (int d = 0; d < HDIM; d++) ss += (double)x[d] * x[d];
        const double r = 1.0 / sqrt(ss / HDIM + 1e-6);
        double t[HDIM];
        for (int d = 0; d < HDIM; d++) y[d] = t[d] = x[d] * r * w[d];
        for (int j = 0; j < RD / 2; j++) {
            const double a = (double)((float)p * hp.inv[j]), c = cos(a), s = sin(a);
            y[j] = t[j] * c - t[j + RD / 2] * s;
            y[j + RD / 2] = t[j + RD / 2] * c + t[j] * s;
        }
    };
    long km = 0;
    for (int t = 0; t < T; t++)
        for (int g = 0; g < HKV; g++) {
            double k[HDIM];
            norm_rope(proj + (size_t)t * LDP + H * 2 * HDIM + g * HDIM, hp.kn.data(), pos + t, k);
            for (int d = 0; d < HDIM; d++) km += f2bf((float)k[d]) != kc[((size_t)(pos + t) * HKV + g) * HDIM + d];
        }
    *k_mismatch = km;
    std::vector<double> s, o(HDIM);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const int g = h / (H / HKV), n = pos + t + 1;
            double q[HDIM];
            norm_rope(proj + (size_t)t * LDP + h * 2 * HDIM, hp.qn.data(), pos + t, q);
            s.resize(n);
            double mx = -1e300;
            for (int key = 0; key < n; key++) {
                const uint16_t *kr = kc + ((size_t)key * HKV + g) * HDIM;
                double a = 0;
                for (int d = 0; d < HDIM; d++) a += q[d] * bf2f(kr[d]);
                s[key] = a / 16.0;
                mx = std::max(mx, s[key]);
            }
            double den = 0;
            std::fill(o.begin(), o.end(), 0.0);
            for (int key = 0; key < n; key++) {
                const double pk = exp(s[key] - mx);
                den += pk;
                const uint16_t *vr = vc + ((size_t)key * HKV + g) * HDIM;
                for (int d = 0; d < HDIM; d++) o[d] += pk * bf2f(vr[d]);
            }
            for (int d = 0; d < HDIM; d++) {
                const double gate = proj[(size_t)t * LDP + h * 2 * HDIM + HDIM + d];
                out[((size_t)t * H + h) * HDIM + d] = (float)(o[d] / den / (1.0 + exp(-gate)));
            }
        }
}

struct Err {
    double max_abs, max_ref, max_rel, rms_rel;
    long nonfinite;
};
static Err compare(const float *a, const float *ref, size_t n) {
    Err e = {0, 0, 0, 0, 0};
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) {
            e.nonfinite++;
            continue;
        }
        const double d = fabs((double)a[i] - ref[i]), r = fabs((double)ref[i]);
        e.max_abs = std::max(e.max_abs, d);
        e.max_ref = std::max(e.max_ref, r);
        e.max_rel = std::max(e.max_rel, d / std::max(r, 1e-2));
        se += d * d, sr += r * r;
    }
    e.rms_rel = sr > 0 ? sqrt(se / sr) : 0;
    return e;
}

template <class F>
static float median_ms(F f, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float x = 0;
        CK(cudaEventElapsedTime(&x, a, b));
        ms.push_back(x);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

/* ids of the wgmma kernel's two forms (MODE 3's prep and precision) */
enum { FA3 = 12, FA3NP = 11 };

/* tolerances vs the fp32 SIMT path: max abs (|out| <= 1) and rms relative */
struct Mode {
    int id;
    const char *name;
    double tol_abs, tol_rms;
};
static const Mode MODES[] = {
    {3, "exact (Q,P hi+lo)", 5e-4, 1e-4},
    {1, "Q hi+lo, P bf16", 6e-3, 3e-3},
    {0, "plain bf16", 4e-2, 1e-2},
    {FA3, "fa3 wgmma pp", 5e-4, 1e-4},  /* MODE 3's precision on wgmma, ping-pong */
    {FA3NP, "fa3 wgmma no-pp", 5e-4, 1e-4},
};

/* whole: the launcher (lc_attn_prefill where LILAC_ATTN_PREFILL picks this
 * kernel); else part 0 the prep, part 1 the attention kernel alone */
template <int M>
static cudaError_t run_mode(bool whole, int part, const lc_attn_params *p, const float *proj, int T, uint16_t *kc,
                            uint16_t *vc, float *qbuf, float *out, const lc_ctrl *ctrl) {
    uint16_t *qb = reinterpret_cast<uint16_t *>(qbuf);
    const int wg = M == FA3 ? 2 : M == FA3NP ? 1 : 0; /* prefill<>'s choice of kernel */
    const bool launcher = wg ? LC_ATTN_PREFILL_MODE == 3 && wgmma_choice() == wg
                             : M == LC_ATTN_PREFILL_MODE && (wgmma_choice() == 0 || !lc_attn_prefill_wgmma_supported(p));
    if (whole) {
        if (launcher) return lc_attn_prefill(p, proj, LDP, T, kc, vc, qbuf, out, ctrl, 0);
        return prefill<wg ? 3 : M>(p, proj, LDP, T, kc, vc, qbuf, out, ctrl, 0, wg);
    }
    if (part == 0) return launch_prep(p, proj, LDP, T, qb, wg ? 1 : M & 1, kc, vc, ctrl, 0);
    if (wg) return lc_attn_prefill_wgmma(p, qb, T, kc, vc, proj, LDP, out, ctrl, wg == 2, 0);
    return launch_attn<wg ? 3 : M>(p, qb, T, kc, vc, proj, LDP, out, ctrl, 0);
}
static cudaError_t run(int mode, bool whole, int part, const lc_attn_params *p, const float *proj, int T, uint16_t *kc,
                       uint16_t *vc, float *qbuf, float *out, const lc_ctrl *ctrl) {
    switch (mode) {
    case 0: return run_mode<0>(whole, part, p, proj, T, kc, vc, qbuf, out, ctrl);
    case 1: return run_mode<1>(whole, part, p, proj, T, kc, vc, qbuf, out, ctrl);
    case 3: return run_mode<3>(whole, part, p, proj, T, kc, vc, qbuf, out, ctrl);
    case FA3: return run_mode<FA3>(whole, part, p, proj, T, kc, vc, qbuf, out, ctrl);
    case FA3NP: return run_mode<FA3NP>(whole, part, p, proj, T, kc, vc, qbuf, out, ctrl);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- wgmma self-test: the operand layouts attention_prefill_wgmma.cu uses, in
 * isolation, so a wrong descriptor shows as itself.  One warpgroup; a [64 rows
 * x 256 dims] bf16 matrix A (as Q) and X (as a K or V tile of 64 keys) go to
 * shared memory as 4 panels of 64 dims, rows of 128 bytes, 16-byte chunks
 * ^ (row & 7); then S = A X^T (16 wgmma m64n64k16, both operands K-major
 * from shared memory) and O = P X (4 wgmma m64n256k16, P [64 x 64] from
 * registers, X N-major), written row-major. */
__global__ void wgmma_selftest_kernel(const uint16_t *A, const uint16_t *X, const uint16_t *P, float *S, float *O) {
#ifdef LC_HAVE_WGMMA
    extern __shared__ __align__(16) uint8_t st_raw[];
    uint8_t *sm = st_raw + ((1024 - ((uint32_t)__cvta_generic_to_shared(st_raw) & 1023)) & 1023);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, cq = lane & 3;
    for (int i = tid; i < 64 * 32; i += 128) {
        const int r = i >> 5, c = i & 31;
        const uint32_t off = (c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4);
        *reinterpret_cast<uint4 *>(sm + off) = *reinterpret_cast<const uint4 *>(A + r * 256 + 8 * c);
        *reinterpret_cast<uint4 *>(sm + 32768 + off) = *reinterpret_cast<const uint4 *>(X + r * 256 + 8 * c);
    }
    fence_proxy_async();
    __syncthreads();
    const uint64_t da = wgmma_desc_k128(sm), dx = wgmma_desc_k128(sm + 32768), dv = wgmma_desc_mn128(sm + 32768, 8192);
    float s[32], o[128];
    uint32_t a[4][4];
#pragma unroll
    for (int i = 0; i < 128; i++) o[i] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < 4; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int row = 16 * w + g + 8 * (r & 1), key = 16 * ks + 8 * (r >> 1) + 2 * cq;
            a[ks][r] = (uint32_t)P[row * 64 + key] | (uint32_t)P[row * 64 + key + 1] << 16;
        }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 16; kk++) {
        const uint32_t off = (kk >> 2) * 512 + (kk & 3) * 2;
        wgmma_ss_64x64x16_bf16(s, da + off, dx + off, kk > 0);
    }
#pragma unroll
    for (int ks = 0; ks < 4; ks++) wgmma_rs_64x256x16_bf16_nmaj(o, a[ks], dv + ks * 128);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; i++) reg_fence(s[i]);
#pragma unroll
    for (int i = 0; i < 128; i++) reg_fence(o[i]);
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[k][r]);
#pragma unroll
    for (int i = 0; i < 32; i++) {
        const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * cq + (i & 1);
        S[row * 64 + col] = s[i];
    }
#pragma unroll
    for (int i = 0; i < 128; i++) {
        const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * cq + (i & 1);
        O[row * 256 + col] = o[i];
    }
#endif
}

/* 0 when S and O match a double reference to 1e-3 (fp32 sums of 256 / 64 bf16 products) */
static int wgmma_selftest() {
    std::vector<uint16_t> A(64 * 256), X(64 * 256), P(64 * 64);
    for (size_t i = 0; i < A.size(); i++) A[i] = f2bf(-1.0f + 2.0f * urand(71, i)), X[i] = f2bf(-1.0f + 2.0f * urand(72, i));
    for (size_t i = 0; i < P.size(); i++) P[i] = f2bf(urand(73, i));
    uint16_t *dA, *dX, *dP;
    float *dS, *dO;
    CK(cudaMalloc(&dA, A.size() * 2));
    CK(cudaMalloc(&dX, X.size() * 2));
    CK(cudaMalloc(&dP, P.size() * 2));
    CK(cudaMalloc(&dS, 64 * 64 * 4));
    CK(cudaMalloc(&dO, 64 * 256 * 4));
    CK(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dX, X.data(), X.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dP, P.data(), P.size() * 2, cudaMemcpyHostToDevice));
    const int smem = 1024 + 65536;
    CK(cudaFuncSetAttribute(wgmma_selftest_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    wgmma_selftest_kernel<<<1, 128, smem>>>(dA, dX, dP, dS, dO);
    CK(cudaGetLastError());
    std::vector<float> S(64 * 64), O(64 * 256);
    CK(cudaMemcpy(S.data(), dS, S.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
    double es = 0, eo = 0;
    for (int r = 0; r < 64; r++)
        for (int c = 0; c < 64; c++) {
            double ref = 0;
            for (int d = 0; d < 256; d++) ref += (double)bf2f(A[r * 256 + d]) * bf2f(X[c * 256 + d]);
            es = std::max(es, fabs(ref - S[r * 64 + c]));
        }
    for (int r = 0; r < 64; r++)
        for (int d = 0; d < 256; d++) {
            double ref = 0;
            for (int k = 0; k < 64; k++) ref += (double)bf2f(P[r * 64 + k]) * bf2f(X[k * 256 + d]);
            eo = std::max(eo, fabs(ref - O[r * 256 + d]));
        }
    const bool ok = es < 1e-3 && eo < 1e-3;
    printf("wgmma self-test: S = A X^T (SS, K-major) max err %.3g; O = P X (RS, X N-major) max err %.3g: %s\n", es, eo,
           ok ? "ok" : "FAIL");
    CK(cudaFree(dA));
    CK(cudaFree(dX));
    CK(cudaFree(dP));
    CK(cudaFree(dS));
    CK(cudaFree(dO));
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a log redirected to a file survives a kill up to its last line */
    bool quick = false, huge = true;
    const char *only = nullptr; /* --modes: ",12,11," */
    std::string only_buf;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--no-huge")) huge = false;
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc) only_buf = std::string(",") + argv[++i] + ",", only = only_buf.c_str();
        else {
            fprintf(stderr, "usage: %s [--quick] [--no-huge] [--modes ID,ID..]\n", argv[0]);
            return 2;
        }
    }
    auto selected = [&](int id) {
        char key[16];
        snprintf(key, sizeof(key), ",%d,", id);
        return !only || strstr(only, key) != nullptr;
    };
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %zu KB smem/block opt-in; default MODE %d; LILAC_ATTN_PREFILL=%s\n", prop.name,
           prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024, LC_ATTN_PREFILL_MODE,
           getenv("LILAC_ATTN_PREFILL") ? getenv("LILAC_ATTN_PREFILL") : "(unset: fa3np)");

    Host hp;
    hp.qn.resize(HDIM), hp.kn.resize(HDIM), hp.inv.resize(RD / 2);
    for (int d = 0; d < HDIM; d++) hp.qn[d] = 0.5f + 2.0f * urand(11, d), hp.kn[d] = 0.5f + 2.0f * urand(12, d);
    for (int j = 0; j < RD / 2; j++) hp.inv[j] = (float)(1.0 / pow(1e7, 2.0 * j / RD));
    float *d_qn, *d_kn, *d_inv;
    CK(cudaMalloc(&d_qn, HDIM * 4));
    CK(cudaMalloc(&d_kn, HDIM * 4));
    CK(cudaMalloc(&d_inv, RD / 2 * 4));
    CK(cudaMemcpy(d_qn, hp.qn.data(), HDIM * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_kn, hp.kn.data(), HDIM * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_inv, hp.inv.data(), RD / 2 * 4, cudaMemcpyHostToDevice));
    lc_attn_params p = {};
    p.H = H, p.Hkv = HKV, p.hd = HDIM, p.rd = RD, p.eps = 1e-6f, p.q_norm = d_qn, p.k_norm = d_kn, p.rope_inv = d_inv;
    lc_ctrl *d_ctrl;
    CK(cudaMalloc(&d_ctrl, sizeof(lc_ctrl)));

    const int cases[][2] = {{0, 64},       {0, 333},     {100, 517},    {1000, 1},      {64, 16},     {4000, 33},
                            {190, 77},     {0, 4096},    {4096, 4096},  {28672, 4096},  {126976, 4096}};
    const int ncases = sizeof(cases) / sizeof(cases[0]);
    const int REPS = quick ? 1 : 10, WARM = quick ? 0 : 2;
    int failures = 0;
    const bool fa3_ok = lc_attn_prefill_wgmma_supported(&p);
    if (!fa3_ok) printf("fa3 (wgmma) kernels not supported on this device: skipped\n");
    else if (selected(FA3) || selected(FA3NP)) printf("wgmma self-test: start\n"), failures += wgmma_selftest();
    struct Row {
        int pos, T;
        double flop;
        float ms[5]; /* attention kernel alone, per MODES entry (0: not run) */
    };
    std::vector<Row> rows;
    for (int ci = 0; ci < ncases; ci++) {
        const int pos = cases[ci][0], T = cases[ci][1], cap = pos + T;
        const bool small = (double)T * (pos + T) <= 1e6;
        if (quick && !small) continue;
        if (!huge && pos >= 126976) continue;
        p.cap = cap;
        const size_t ncache = (size_t)cap * HKV * HDIM, nout = (size_t)T * H * HDIM;
        const size_t cbytes = ncache * 2;
        float *proj, *qbuf, *part, *outr, *out;
        uint16_t *kc0, *vc0, *kcr, *vcr, *kc, *vc;
        CK(cudaMalloc(&proj, (size_t)T * LDP * 4));
        CK(cudaMalloc(&qbuf, nout * 4));
        CK(cudaMalloc(&part, (size_t)T * HKV * 8 * (HDIM + 2) * 4));
        CK(cudaMalloc(&outr, nout * 4));
        CK(cudaMalloc(&out, nout * 4));
        CK(cudaMalloc(&kc0, cbytes));
        CK(cudaMalloc(&vc0, cbytes));
        CK(cudaMalloc(&kcr, cbytes));
        CK(cudaMalloc(&vcr, cbytes));
        CK(cudaMalloc(&kc, cbytes));
        CK(cudaMalloc(&vc, cbytes));
        fill_proj<<<1024, 256>>>(proj, T, 1000 + ci);
        fill_cache<<<1024, 256>>>(kc0, pos, cap, 2.7f, 2000 + ci);
        fill_cache<<<1024, 256>>>(vc0, pos, cap, 1.0f, 3000 + ci);
        CK(cudaGetLastError());
        lc_ctrl hc = {};
        hc.pos = pos;
        CK(cudaMemcpy(d_ctrl, &hc, sizeof(hc), cudaMemcpyHostToDevice));
        const double flop = 4.0 * HDIM * H * ((double)T * pos + (double)T * (T + 1) / 2);
        printf("\n== pos %d, T %d (%.3f TFLOP)\n", pos, T, flop * 1e-12);

        /* SIMT reference */
        auto ref = [&]() {
            CK(cudaMemcpyAsync(kcr, kc0, cbytes, cudaMemcpyDeviceToDevice));
            CK(cudaMemcpyAsync(vcr, vc0, cbytes, cudaMemcpyDeviceToDevice));
            CK(lc_attn_prep(&p, proj, LDP, T, qbuf, kcr, vcr, d_ctrl, 0));
            CK(lc_attn(&p, qbuf, kcr, vcr, T, 1, part, d_ctrl, 0));
            CK(lc_attn_combine(&p, part, T, 1, 0, proj, LDP, outr, d_ctrl, 0));
        };
        if (small) ref(); /* warm-up (module load) where it is cheap */
        const float ref_ms = median_ms(ref, 1);
        CK(cudaDeviceSynchronize());
        printf("  SIMT reference (prep + attn + combine, with 2 cache copies): %.3f ms, %.1f TFLOP/s\n", ref_ms,
               flop / (ref_ms * 1e-3) * 1e-12);
        std::vector<float> h_outr(nout), h_out(nout), h_cpu;
        CK(cudaMemcpy(h_outr.data(), outr, nout * 4, cudaMemcpyDeviceToHost));
        {
            const Err e = compare(h_outr.data(), h_outr.data(), nout);
            if (e.nonfinite) printf("  FAIL: the SIMT reference has %ld non-finite outputs\n", e.nonfinite), failures++;
        }
        if (small) {
            std::vector<float> h_proj((size_t)T * LDP);
            std::vector<uint16_t> h_kc(ncache), h_vc(ncache);
            CK(cudaMemcpy(h_proj.data(), proj, h_proj.size() * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h_kc.data(), kcr, cbytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(h_vc.data(), vcr, cbytes, cudaMemcpyDeviceToHost));
            long km = 0;
            cpu_ref(hp, h_proj.data(), T, pos, h_kc.data(), h_vc.data(), h_cpu, &km);
            const Err e = compare(h_outr.data(), h_cpu.data(), nout);
            printf("  SIMT vs CPU fp64: max abs %.3g (max|ref| %.3g), max rel %.3g, rms rel %.3g; new k bf16 != fp64 prep: "
                   "%ld of %ld (info)\n",
                   e.max_abs, e.max_ref, e.max_rel, e.rms_rel, km, (long)T * HKV * HDIM);
            if (e.nonfinite || e.max_abs > 1e-4) printf("  FAIL: SIMT reference vs CPU\n"), failures++;
        }

        Row row = {pos, T, flop, {0, 0, 0, 0, 0}};
        for (int mi = 0; mi < (int)(sizeof(MODES) / sizeof(MODES[0])); mi++) {
            const Mode &md = MODES[mi];
            if ((md.id >= FA3NP && !fa3_ok) || !selected(md.id)) continue;
            printf("  MODE %d %-18s start\n", md.id, md.name);
            CK(cudaMemcpy(kc, kc0, cbytes, cudaMemcpyDeviceToDevice));
            CK(cudaMemcpy(vc, vc0, cbytes, cudaMemcpyDeviceToDevice));
            fill_f32<<<1024, 256>>>(out, nout, nanf(""));
            CK(cudaGetLastError());
            if (ci == 0) { /* a stopped state: nothing is written */
                hc.stop = 1;
                CK(cudaMemcpy(d_ctrl, &hc, sizeof(hc), cudaMemcpyHostToDevice));
                CK(run(md.id, true, 0, &p, proj, T, kc, vc, qbuf, out, d_ctrl));
                CK(cudaDeviceSynchronize());
                hc.stop = 0;
                CK(cudaMemcpy(d_ctrl, &hc, sizeof(hc), cudaMemcpyHostToDevice));
                const unsigned long long dk = ndiff(kc, kc0, ncache), dv = ndiff(vc, vc0, ncache);
                CK(cudaMemcpy(h_out.data(), out, nout * 4, cudaMemcpyDeviceToHost));
                long written = 0;
                for (size_t i = 0; i < nout; i++) written += !isnan(h_out[i]);
                if (dk || dv || written) printf("  FAIL: mode %d wrote with ctrl->stop set\n", md.id), failures++;
            }
            CK(run(md.id, true, 0, &p, proj, T, kc, vc, qbuf, out, d_ctrl));
            CK(cudaDeviceSynchronize());
            const unsigned long long dk = ndiff(kc, kcr, ncache), dv = ndiff(vc, vcr, ncache);
            CK(cudaMemcpy(h_out.data(), out, nout * 4, cudaMemcpyDeviceToHost));
            const Err e = compare(h_out.data(), h_outr.data(), nout);
            bool ok = !dk && !dv && !e.nonfinite && e.max_abs <= md.tol_abs && e.rms_rel <= md.tol_rms;
            printf("  MODE %d %-18s vs SIMT: max abs %.3g (max|ref| %.3g), max rel %.3g, rms rel %.3g, non-finite %ld; "
                   "cache bytes differing K %llu V %llu\n",
                   md.id, md.name, e.max_abs, e.max_ref, e.max_rel, e.rms_rel, e.nonfinite, dk, dv);
            if (small) {
                const Err c = compare(h_out.data(), h_cpu.data(), nout);
                printf("  MODE %d %-18s vs CPU:  max abs %.3g, max rel %.3g, rms rel %.3g\n", md.id, md.name, c.max_abs,
                       c.max_rel, c.rms_rel);
                ok = ok && c.max_abs <= md.tol_abs && c.rms_rel <= md.tol_rms;
            }
            if (!ok) printf("  FAIL: MODE %d (tolerance max abs %.1e, rms rel %.1e; cache must match)\n", md.id, md.tol_abs,
                            md.tol_rms), failures++;

            for (int w = 0; w < WARM; w++) CK(run(md.id, true, 0, &p, proj, T, kc, vc, qbuf, out, d_ctrl));
            const float t_all = median_ms([&]() { CK(run(md.id, true, 0, &p, proj, T, kc, vc, qbuf, out, d_ctrl)); }, REPS);
            const float t_prep = median_ms([&]() { CK(run(md.id, false, 0, &p, proj, T, kc, vc, qbuf, out, d_ctrl)); }, REPS);
            const float t_attn = median_ms([&]() { CK(run(md.id, false, 1, &p, proj, T, kc, vc, qbuf, out, d_ctrl)); }, REPS);
            printf("  MODE %d %-18s time: %.4f ms (prep %.4f + attn %.4f), %.1f TFLOP/s overall, %.1f attention kernel\n",
                   md.id, md.name, t_all, t_prep, t_attn, flop / (t_all * 1e-3) * 1e-12, flop / (t_attn * 1e-3) * 1e-12);
            row.ms[mi] = t_attn;
        }
        rows.push_back(row);
        CK(cudaFree(proj));
        CK(cudaFree(qbuf));
        CK(cudaFree(part));
        CK(cudaFree(outr));
        CK(cudaFree(out));
        CK(cudaFree(kc0));
        CK(cudaFree(vc0));
        CK(cudaFree(kcr));
        CK(cudaFree(vcr));
        CK(cudaFree(kc));
        CK(cudaFree(vc));
    }
    printf("\nattention kernel alone, ms (TFLOP/s of causal attention):\n  %-16s", "pos, T");
    for (const Mode &md : MODES) printf(" | %-20s", md.name);
    printf(" | fa3 / MODE 3\n");
    for (const Row &r : rows) {
        char pt[32];
        snprintf(pt, sizeof(pt), "%d, %d", r.pos, r.T);
        printf("  %-16s", pt);
        for (int mi = 0; mi < 5; mi++)
            if (r.ms[mi] > 0) printf(" | %8.4f (%6.1f)   ", r.ms[mi], r.flop / (r.ms[mi] * 1e-3) * 1e-12);
            else printf(" | %-20s", "-");
        if (r.ms[0] > 0 && r.ms[3] > 0) printf(" | %.2fx", r.ms[0] / r.ms[3]);
        printf("\n");
    }
    printf("\n%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
