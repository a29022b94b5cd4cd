/* cluster.cuh — thread-block cluster helpers (sm_90): the cluster barrier
 * in its split arrive / wait form and stores into a peer block's shared
 * memory (distributed shared memory), for the DeltaNet kernels that share a
 * value head's row sums across the blocks of a cluster (prefill/gdn_chunk.cu,
 * decode/gdn_step.cu) and the MoE router's cluster form (decode/moe.cu),
 * and on the host the probe and the launch of a cluster kernel.  The device
 * helpers are empty below sm_90: the kernels that use them are built empty
 * there. */
#ifndef LILAC_CUDA_CLUSTER_CUH
#define LILAC_CUDA_CLUSTER_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
/* arrive without ordering: only says this block has started */
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
/* v into the word of block `rank`'s shared memory that corresponds to local */
__device__ __forceinline__ void st_cluster(const float *local, uint32_t rank, float v) {
    uint32_t a;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32(local)), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(a), "f"(v) : "memory");
}

/* ---- exchanges on mbarriers: st.async with a byte count, no cluster barrier ----
 * A receiving block initialises an mbarrier and says how many bytes it
 * expects from its peers (mbar_expect_tx, by the initialising thread), both
 * before the cluster's start barrier (mbar_fence_init, then the arrive);
 * peers store with st_async, which counts the bytes on the receiver's
 * barrier; the block's own share is stored plainly and each thread that
 * stored some arrives (mbar_arrive: a release, so the arrivals are 1 + the
 * local storers); every thread of the receiver waits for phase 0
 * (mbar_wait).  Unlike a release arrive on the cluster barrier
 * (MEMBAR.ALL.GPU in the SASS) nothing waits for the sender's other memory
 * operations, and each block waits only for what it receives.  (st.async
 * names a peer's shared memory; the own share does not depend on it
 * accepting the block's own.) */
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
/* the inits visible to the cluster's other blocks (paired with the acquire of cluster_wait) */
__device__ __forceinline__ void mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
/* the arrival, and `bytes` more to come */
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}
/* one arrival (release: this thread's earlier shared-memory stores before any waiter's reads) */
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
/* v into the word of block `rank` that corresponds to local, counted on that block's bar */
__device__ __forceinline__ void st_async(const float *local, uint32_t rank, const uint64_t *bar, float v) {
    uint32_t a, m;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32(local)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(smem_u32(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(a), "f"(v), "r"(m)
                 : "memory");
}
/* until the barrier's phase `parity` completed.  Acquire at cluster scope:
 * the peers' st.async complete with release at cluster scope (the PTX
 * memory model pairs them so; CCCL's st.async example waits the same way).
 * Like cluster_wait it invalidates L1 (CCTL.IVALL); what the exchange saves
 * is the sender's MEMBAR.ALL.GPU and the wait for the slowest block. */
__device__ __forceinline__ void mbar_wait(const uint64_t *bar, uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "LC_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra LC_MBAR_WAIT;\n"
                 "}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
}
#endif

/* Host side.  How many clusters of ns blocks of `threads` threads (smem
 * bytes of dynamic shared memory each) of kernel can be resident at once on
 * the current device, in a grid of `grid` blocks; 0 where none can, and for
 * a kernel not built for sm_90+ (JIT from older PTX on a newer GPU it would
 * be the trap: ptxVersion).  A refused query leaves no error behind. */
template <typename... A>
static int cluster_count(void (*kernel)(A...), unsigned ns, unsigned grid, unsigned threads, size_t smem = 0) {
    cudaFuncAttributes fa;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = ns, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(grid), cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem, cfg.attrs = at, cfg.numAttrs = 1;
    int nc = 0;
    if (cudaFuncGetAttributes(&fa, kernel) != cudaSuccess || fa.ptxVersion < 90 || fa.binaryVersion < 90 ||
        cudaOccupancyMaxActiveClusters(&nc, kernel, &cfg) != cudaSuccess)
        nc = 0;
    (void)cudaGetLastError();
    return nc;
}

/* Whether at least one such cluster fits (cluster_count).  Callers cache the
 * answer (they are also asked inside graph capture). */
template <typename... A>
static bool cluster_fits(void (*kernel)(A...), unsigned ns, unsigned grid, unsigned threads) {
    return cluster_count(kernel, ns, grid, threads) >= 1;
}

/* Launches kernel in clusters of ns blocks with smem bytes of dynamic shared
 * memory, with programmatic stream serialization allowed (PDL, as common.cuh's
 * lc_launch, whose argument order this follows). */
template <typename... KArgs, typename... Args>
static cudaError_t cluster_launch(void (*kernel)(KArgs...), unsigned ns, dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                                  Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = st;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    at[1].id = cudaLaunchAttributeClusterDimension;
    at[1].val.clusterDim.x = ns, at[1].val.clusterDim.y = 1, at[1].val.clusterDim.z = 1;
    cfg.attrs = at, cfg.numAttrs = 2;
    const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
    return err ? err : cudaGetLastError();
}

#endif
