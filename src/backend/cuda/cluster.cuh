/* cluster.cuh — thread-block cluster helpers (sm_90): the cluster barrier
 * in its split arrive / wait form and stores into a peer block's shared
 * memory (distributed shared memory), for the DeltaNet kernels that share a
 * value head's row sums across the blocks of a cluster (prefill/gdn_chunk.cu,
 * decode/gdn_step.cu).  Empty below sm_90: the kernels that use it are
 * built empty there. */
#ifndef LILAC_CUDA_CLUSTER_CUH
#define LILAC_CUDA_CLUSTER_CUH

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
#endif

#endif
