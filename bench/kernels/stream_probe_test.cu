/* stream_probe_test.cu — how fast N SMs pull B bytes each from HBM into
 * shared memory, by copy mechanism (issue 14: the MoE kernel's 72 SMs
 * stream a slot's 1.77 MB at ~35 GB/s an SM; is that the SM's limit for
 * 16-byte cp.async, and do bulk copies lift it?).
 *
 * One block of 512 threads per SM (the shared memory asked keeps a second
 * block off), each block copying its own contiguous B bytes at an offset
 * that moves through a 4 GB buffer from launch to launch (cold in L2).
 * Thread 0 stamps the global timer at entry and once every byte has landed;
 * printed: per block (end - start) mean and max, the launch's span (last end
 * - first start), and the bytes over the span.
 *   cp16     cp.async.cg 16 B a thread, a warp instruction 512 contiguous B
 *   cp16l2   the same with the L2::256B prefetch hint (the engine's, 585e5d7 to afa372f)
 *   ldg      ld.global.nc.v4 into registers, 8 in flight a thread
 *   bulkN    cp.async.bulk of N bytes a copy (one thread a copy), all on
 *            one mbarrier
 *   task     the ring tasks' pattern (gemv_ring.cuh copy_task's codes):
 *            rows of 1,024 B, a task 16 rows x a 256 B slice, a warp
 *            instruction 8 rows x 64 B; taskl2 with the L2::256B hint
 *   pair     the same tasks, an instruction 2 rows x 256 B; pairl2 hinted
 * H200, 2026-12-06 (docs/PERFORMANCE.md): 144 KB an SM on 72 SMs lands in
 * 2.89 us a block by cp16 (51 GB/s an SM, 3.4 TB/s in all), 3.08-3.12 by
 * bulk copies of 1-16 KB, 3.57 by ldg; on 132 SMs 4.70 (3.8 TB/s) and
 * 4.92-4.97; on 8 SMs 1.50 and 1.62-1.66.  The copy mechanism does not
 * lift an SM's rate.
 * Usage: stream_probe_test [--quick] */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "workshop.h" /* CK */

constexpr int NT = 512, SMEM = 160 * 1024;

__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ uint32_t s32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(void *d, const void *g, bool hint) {
    if (hint) asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(s32(d)), "l"(g) : "memory");
    else asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s32(d)), "l"(g) : "memory");
}

/* MODE 0 cp16, 1 cp16l2, 2 ldg, 3 bulk of CH bytes, 4 the ring tasks' pattern and 5 two rows an instruction
 * (CH = 1: with the L2::256B hint) */
template <int MODE, int CH>
__global__ void __launch_bounds__(NT, 1) probe(const unsigned char *__restrict__ src, int bytes, unsigned long long *stamps,
                                                unsigned *sink) {
    extern __shared__ __align__(128) unsigned char sm[];
    uint64_t *bar = reinterpret_cast<uint64_t *>(sm + SMEM - 64);
    const unsigned char *g = src + (size_t)blockIdx.x * bytes;
    const unsigned long long t0 = gtimer();
    if constexpr (MODE == 0 || MODE == 1) {
        for (int i = threadIdx.x; i < bytes / 16; i += NT) cp16(sm + 16 * i, g + 16 * i, MODE == 1);
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        __syncthreads();
    } else if constexpr (MODE == 4 || MODE == 5) {
        /* the bytes as rows of 1,024 B (gate/up: 2,048 4-bit inputs); a task is 16 rows x the 256 B of K slice k
         * (gemv_ring.cuh's copy_task, codes only), tasks t = warp, warp + 16, ... with row block t / 4, slice t % 4 */
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g8 = lane >> 2, c = lane & 3;
        for (int t = warp; t < bytes / 4096; t += NT / 32) {
            const unsigned char *row0 = g + (size_t)(t / 4) * 16 * 1024 + (t % 4) * 256;
            unsigned char *d = sm + (size_t)t * 4096;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                if constexpr (MODE == 4) { /* 8 rows x 64 B an instruction: lane (g, c) rows g, g + 8, spans m */
                    const int h = i / 4, m = i % 4;
                    cp16(d + m * 1024 + (g8 + 8 * h) * 64 + c * 16, row0 + (g8 + 8 * h) * 1024 + m * 64 + c * 16, CH == 1);
                } else { /* 2 rows x 256 B an instruction */
                    const int r = 2 * i + (lane >> 4);
                    cp16(d + r * 256 + (lane & 15) * 16, row0 + r * 1024 + (lane & 15) * 16, CH == 1);
                }
            }
        }
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
        __syncthreads();
    } else if constexpr (MODE == 2) {
        uint32_t acc = 0;
        const uint4 *p = reinterpret_cast<const uint4 *>(g);
        const int n = bytes / 16;
        for (int i = threadIdx.x; i < n; i += 8 * NT) {
            uint4 v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int q = i + u * NT;
                if (q < n) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                                        : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                                        : "l"(p + q));
                else v[u] = make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < 8; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
        if (acc == 0x12345679u) sink[0] = acc; /* keeps the loads */
        __syncthreads();
    } else {
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(s32(bar)) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncthreads();
        if (threadIdx.x == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(s32(bar)), "r"(bytes) : "memory");
        __syncthreads();
        for (int i = threadIdx.x; i < bytes / CH; i += NT)
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                             s32(sm + (size_t)CH * i)),
                         "l"(g + (size_t)CH * i), "r"(CH), "r"(s32(bar))
                         : "memory");
        asm volatile("{\n.reg .pred p;\nW:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra W;\n}\n" ::"r"(s32(bar))
                     : "memory");
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stamps[2 * blockIdx.x] = t0, stamps[2 * blockIdx.x + 1] = gtimer();
        if (sm[17] == 0x5a && sm[bytes - 3] == 0xa5) sink[1] = 1; /* reads what landed */
    }
}

struct mode {
    const char *name;
    int ch; /* a bulk copy's bytes (16: not bulk) */
    void (*k)(const unsigned char *, int, unsigned long long *, unsigned *);
};

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    const int nsm = pr.multiProcessorCount;
    printf("%s, %d SMs, L2 %d MB\n", pr.name, nsm, pr.l2CacheSize >> 20);
    const size_t buf_bytes = quick ? (256u << 20) : (4ull << 30);
    unsigned char *buf;
    unsigned long long *st;
    unsigned *sink;
    CK(cudaMalloc(&buf, buf_bytes));
    CK(cudaMemset(buf, 1, buf_bytes));
    CK(cudaMalloc(&st, 2 * 1024 * sizeof(unsigned long long)));
    CK(cudaMalloc(&sink, 64));
    const mode modes[] = {{"cp16", 16, probe<0, 16>},       {"cp16l2", 16, probe<1, 16>},     {"ldg", 16, probe<2, 16>},
                          {"bulk1k", 1024, probe<3, 1024>}, {"bulk2k", 2048, probe<3, 2048>}, {"bulk4k", 4096, probe<3, 4096>},
                          {"bulk8k", 8192, probe<3, 8192>}, {"bulk16k", 16384, probe<3, 16384>},
                          {"task", 16384, probe<4, 0>},     {"taskl2", 16384, probe<4, 1>},   {"pair", 16384, probe<5, 0>},
                          {"pairl2", 16384, probe<5, 1>}};
    for (const mode &m : modes) CK(cudaFuncSetAttribute(m.k, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    const int sms[] = {8, 36, 72, 108, nsm};
    const int sizes[] = {36864, 73728, 147456};
    const int reps = quick ? 2 : 12;
    size_t off = 0;
    printf("%-8s %4s %7s | %9s %9s %9s | %8s %9s\n", "mode", "SMs", "KB/SM", "blk mean", "blk max", "span us", "TB/s", "GB/s/SM");
    for (const mode &m : modes)
        for (int n : sms)
            for (int b : sizes) {
                if (b % m.ch) continue; /* a bulk form copies whole pieces */
                std::vector<double> mean, mx, span;
                for (int r = 0; r < reps + 1; r++) {
                    const size_t need = (size_t)n * b;
                    if (off + need > buf_bytes) off = 0;
                    m.k<<<n, NT, SMEM>>>(buf + off, b, st, sink);
                    CK(cudaGetLastError());
                    off += (need + 4095) / 4096 * 4096;
                    std::vector<unsigned long long> h(2 * n);
                    CK(cudaMemcpy(h.data(), st, h.size() * 8, cudaMemcpyDeviceToHost));
                    if (r == 0) continue; /* the first launch warms the code */
                    unsigned long long lo = ~0ull, hi = 0;
                    double s = 0, x = 0;
                    for (int i = 0; i < n; i++) {
                        const double d = (double)(h[2 * i + 1] - h[2 * i]);
                        s += d, x = std::max(x, d);
                        lo = std::min(lo, h[2 * i]), hi = std::max(hi, h[2 * i + 1]);
                    }
                    mean.push_back(s / n / 1e3), mx.push_back(x / 1e3), span.push_back((hi - lo) / 1e3);
                }
                auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
                const double sp = med(span), bm = med(mean);
                printf("%-8s %4d %7d | %9.2f %9.2f %9.2f | %8.2f %9.1f\n", m.name, n, b / 1024, bm, med(mx), sp,
                       (double)n * b / sp / 1e6, (double)b / bm / 1e3);
            }
    CK(cudaDeviceSynchronize());
    printf("all ok\n");
    return 0;
}
