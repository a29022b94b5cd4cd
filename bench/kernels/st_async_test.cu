/* st_async_test.cu — the exchange pattern of lc_moe_slots' xchg form
 * (cluster.cuh: st.async counted on the receiver's mbarrier) alone, for
 * compute-sanitizer.  synccheck faults inside lc_moe_slots<xchg> (clusters
 * of 16, 2026-12-05) while the DeltaNet step's identical pattern (clusters
 * of 4) passes; this runs one cluster size and one exchange per process, so
 * a sweep under synccheck says whether the size alone decides it.
 *
 *   st_async_test NS XCHG [INVAL]
 *     NS in {2, 4, 8, 16}; XCHG 1 = st.async on an mbarrier, 0 =
 *     st.shared::cluster + the cluster barrier (the default form); INVAL 1 =
 *     mbarrier.inval before the block exits
 * Each of 9 clusters of NS blocks (256 threads) exchanges 32 floats a block
 * (one a thread of warp 0, to every block of the cluster), as the MoE's
 * activation exchange does; every thread then checks all NS * 32 values.
 * Prints "ok" or the first wrong value; exit 1 on any error. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cluster.cuh"

namespace {

constexpr int THREADS = 256, AR = 32, NSMAX = 16, CLUSTERS = 9;

__device__ float value_of(int cluster, int rank, int i) { return (float)(cluster * 1000 + rank * 32 + i); }

template <bool XCHG>
__global__ void __launch_bounds__(THREADS) exchange_kernel(int inval, int *bad) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ float act[NSMAX * AR];
    __shared__ uint64_t bar;
    unsigned ns;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(ns));
    const uint32_t rank = cluster_rank();
    const int cl = (int)(blockIdx.x / ns), tid = threadIdx.x;
    if (XCHG) { /* lc_moe_slots' order: init and fence, block barrier, expect_tx */
        if (tid == 0) {
            mbar_init(&bar, 1 + AR);
            mbar_fence_init();
        }
        __syncthreads();
        if (tid == 0) mbar_expect_tx(&bar, (ns - 1) * AR * 4);
    }
    cluster_arrive_relaxed(); /* the start barrier */
    cluster_wait();
    if (tid < AR) {
        const float v = value_of(cl, (int)rank, tid);
        if (XCHG) {
            act[rank * AR + tid] = v;
            for (uint32_t q = 0; q < ns; q++)
                if (q != rank) st_async(act + rank * AR + tid, q, &bar, v);
            mbar_arrive(&bar);
        } else {
            for (uint32_t q = 0; q < ns; q++) st_cluster(act + rank * AR + tid, q, v);
        }
    }
    if (XCHG) {
        mbar_wait(&bar, 0);
    } else {
        cluster_arrive();
        cluster_wait();
    }
    for (int i = tid; i < (int)ns * AR; i += THREADS)
        if (act[i] != value_of(cl, i / AR, i % AR)) atomicAdd(bad, 1);
    if (XCHG && inval) { /* the mbarrier retired before its shared memory is reused (PTX: mbarrier.inval) */
        __syncthreads();
        if (tid == 0) asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(&bar)) : "memory");
    }
#else
    __trap();
#endif
}

template <bool XCHG>
cudaError_t run(unsigned ns, int inval, int *bad) {
    cudaError_t e = cudaFuncSetAttribute(exchange_kernel<XCHG>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e ? e : cluster_launch(exchange_kernel<XCHG>, ns, dim3(CLUSTERS * ns), dim3(THREADS), 0, 0, inval, bad);
}

} // namespace

int main(int argc, char **argv) {
    const int ns = argc > 1 ? atoi(argv[1]) : 16, xchg = argc > 2 ? atoi(argv[2]) : 1, inval = argc > 3 ? atoi(argv[3]) : 0;
    if (ns != 2 && ns != 4 && ns != 8 && ns != 16) {
        fprintf(stderr, "usage: st_async_test NS XCHG [INVAL] (NS 2, 4, 8 or 16)\n");
        return 2;
    }
    int *bad = nullptr, h = 0;
    cudaError_t e = cudaMalloc(&bad, sizeof(int));
    if (!e) e = cudaMemset(bad, 0, sizeof(int));
    for (int rep = 0; !e && rep < 4; rep++) e = xchg ? run<true>((unsigned)ns, inval, bad) : run<false>((unsigned)ns, inval, bad);
    if (!e) e = cudaDeviceSynchronize();
    if (!e) e = cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost);
    if (e) {
        printf("st_async_test ns=%d xchg=%d inval=%d: CUDA error %s\n", ns, xchg, inval, cudaGetErrorString(e));
        return 1;
    }
    printf("st_async_test ns=%d xchg=%d inval=%d: %s (%d wrong values)\n", ns, xchg, inval, h ? "FAIL" : "ok", h);
    return h != 0;
}
