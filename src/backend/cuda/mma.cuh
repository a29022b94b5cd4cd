/* mma.cuh — warp-level tensor-core and async-copy primitives (sm_80+):
 * mma.sync m16n8k16 bf16 -> fp32, ldmatrix, cp.async.  Thin wrappers over
 * the PTX so kernels read as the math they do. */
#ifndef LILAC_CUDA_MMA_CUH
#define LILAC_CUDA_MMA_CUH

#include <stdint.h>

/* d = a * b + c for one 16x16 (row-major A) by 16x8 (column-major B) tile. */
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const float (&c)[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
}

/* Four 8x8 bf16 matrices from shared memory; lane l gives the address of row
 * l % 8 of matrix l / 8, and receives its fragment of each in r[0..3]. */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *smem) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

/* 16 (or 4) bytes global -> shared without a register round trip; when
 * !full the destination is zero-filled and nothing is read. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool full) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(gmem), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, bool full) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(a), "l"(gmem), "r"(full ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* Two 4-bit codes (bits 0-3 and 16-19 of w) as the bf16 pair (q0 - 8,
 * q1 - 8), exactly: 0x4300 | q is the bf16 of 128 + q (a 7-bit mantissa
 * holds it), and subtracting 136 is exact too.  Centred codes keep the
 * affine fold s * sum (q - 8) x + (b + 8 s) * sum x free of cancellation
 * (b is near -7.5 s in typical groups). */
__device__ __forceinline__ uint32_t q4x2_bf16(uint32_t w) {
    const uint32_t v = (w & 0x000f000fu) | 0x43004300u;
    uint32_t r; /* v * 1 - 136 (fma: bf16x2 sub needs sm_90) */
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(v), "r"(0x3f803f80u), "r"(0xc308c308u));
    return r;
}
#define LC_Q4_CENTER 8.0f

/* Two 8-bit codes (the low bytes of lo and hi), centred (q - 128), as an
 * exact bf16 pair. */
#define LC_Q8_CENTER 128.0f
__device__ __forceinline__ uint32_t q8x2_bf16(uint32_t lo, uint32_t hi) {
    const float a = __uint_as_float(0x4b000000u | (lo & 0xffu)) - 8388736.0f;
    const float b = __uint_as_float(0x4b000000u | (hi & 0xffu)) - 8388736.0f;
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    return r;
}

/* ---- Hopper warpgroup mma (sm_90a) ------------------------------------------
 * wgmma m64n64k16, A (64 x 16 bf16) from registers in the mma.m16n8k16 A
 * fragment layout (warp w of the warpgroup holds rows 16w..16w+15), B (64
 * tokens x 16 k) from shared memory through a descriptor, fp32 accumulators
 * d[32] laid out like eight m16n8 C fragments (n8 block j in d[4j..4j+3]). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LC_HAVE_WGMMA 1
#endif

/* Descriptor of a K-major bf16 tile in shared memory with 128-byte rows
 * swizzled as (16-byte chunk) ^ (row % 8), 1024-byte aligned: 8-row core
 * groups 1024 bytes apart (SBO), swizzle mode 1 (128B). */
__device__ __forceinline__ uint64_t wgmma_desc_k128(const void *smem) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3ffff) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

__device__ __forceinline__ void wgmma_fence() {
#ifdef LC_HAVE_WGMMA
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef LC_HAVE_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef LC_HAVE_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
/* Pins a register's reads and writes after the preceding asm (a wait). */
__device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* d (+)= A * B: accumulate = 0 overwrites d. */
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
#ifdef LC_HAVE_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
#endif
}


/* d += A * B with fp16 operands (A: 64 x 16 from registers, fragment layout
 * as above; B: N tokens x 16 k from shared memory), always accumulating. */
__device__ __forceinline__ void wgmma_64x64x16_f16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
#ifdef LC_HAVE_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#endif
}

__device__ __forceinline__ void wgmma_64x128x16_f16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
#ifdef LC_HAVE_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
                 "{%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
#endif
}


/* d (+)= A * B, bf16 in, fp32 accumulate; A (64 x 16) and B (64 x 16) both
 * K-major in shared memory (descriptors as wgmma_desc_k128); accumulate = 0
 * overwrites d. */
__device__ __forceinline__ void wgmma_ss_64x64x16_bf16(float (&d)[32], uint64_t da, uint64_t db, int accumulate) {
#ifdef LC_HAVE_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(accumulate));
#endif
}

/* d += A * B, bf16 in, fp32 accumulate; A (64 x 16) from registers in the
 * fragment layout of wgmma_64x64x16, B (16 x 256) N-major in shared memory
 * (K rows with N contiguous: wgmma_desc_mn128).  d[128]: 32 n8 blocks as in
 * wgmma_64x64x16 (block j in d[4j..4j+3]). */
__device__ __forceinline__ void wgmma_rs_64x256x16_bf16_nmaj(float (&d)[128], const uint32_t (&a)[4], uint64_t db) {
#ifdef LC_HAVE_WGMMA
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                 "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
                 "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
                 "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
                 "}, {%128,%129,%130,%131}, %132, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
#endif
}

/* Descriptor of an N-major (or M-major) bf16 operand with 128-byte swizzle:
 * 8 K-rows x 64 elements (128 bytes, chunks ^ (row % 8)) per 1024-byte-aligned
 * atom; the next 8 K-rows 1024 bytes on (SBO), the next 64 elements of N
 * lbo bytes on (LBO). */
__device__ __forceinline__ uint64_t wgmma_desc_mn128(const void *smem, uint32_t lbo) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a & 0x3ffff) >> 4) | (uint64_t)((lbo >> 4) & 0x3fff) << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

/* Generic-proxy shared-memory writes (st.shared, cp.async) made visible to
 * wgmma's reads, which go through the async proxy. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* ---- mbarriers and named barriers (sm_90) ------------------------------------ */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(b)), "r"(count)
                 : "memory");
}
/* Returns once the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *b, int parity) {
    asm volatile("{\n.reg .pred p;\nLC_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra LC_WAIT;\n}\n" ::"r"((uint32_t)__cvta_generic_to_shared(b)),
                 "r"(parity)
                 : "memory");
}
/* One poll of the same: true once the phase of parity `parity` has completed
 * (try_wait may suspend the thread for a system-dependent while first). */
__device__ __forceinline__ bool mbar_try_wait(uint64_t *b, int parity) {
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"((uint32_t)__cvta_generic_to_shared(b)), "r"(parity)
                 : "memory");
    return ok != 0;
}

/* mbar_wait with a watchdog, for kernels built with -DLC_WGMMA_WATCHDOG: after
 * LC_WGMMA_WATCHDOG_POLLS failed polls or LC_WGMMA_WATCHDOG_NS nanoseconds
 * (%globaltimer), whichever first, report() runs; where it returns true (the
 * one thread that prints where it stood) the kernel traps, the others park, so
 * a deadlock ends as a launch error with its location instead of a hang.
 * Without the macro it is mbar_wait (report is not called). */
#ifdef LC_WGMMA_WATCHDOG
#ifndef LC_WGMMA_WATCHDOG_POLLS
#define LC_WGMMA_WATCHDOG_POLLS (1u << 26)
#endif
#ifndef LC_WGMMA_WATCHDOG_NS
#define LC_WGMMA_WATCHDOG_NS 4000000000ull
#endif
__device__ __forceinline__ uint64_t lc_globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
template <class F>
__device__ __forceinline__ void mbar_wait_watchdog(uint64_t *b, int parity, F &&report) {
    const uint64_t t0 = lc_globaltimer();
    for (uint32_t n = 1; !mbar_try_wait(b, parity); n++)
        if (n >= LC_WGMMA_WATCHDOG_POLLS || lc_globaltimer() - t0 >= LC_WGMMA_WATCHDOG_NS) {
            if (report()) __trap();
            for (;;) __nanosleep(1u << 20);
        }
}
#else
template <class F>
__device__ __forceinline__ void mbar_wait_watchdog(uint64_t *b, int parity, F &&) {
    mbar_wait(b, parity);
}
#endif
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"((uint32_t)__cvta_generic_to_shared(b)) : "memory");
}
/* A warp's release of b once its lanes' reads are done: lane 0 arrives after
 * a __syncwarp (b counts LC_WARP_ARRIVALS = 1 per warp).  -DLC_VISIBLE_HANDOFF
 * has every lane arrive instead (32 per warp), which compute-sanitizer's
 * racecheck follows; it does not see the __syncwarp's ordering. */
#ifdef LC_VISIBLE_HANDOFF
#define LC_WARP_ARRIVALS 32
#else
#define LC_WARP_ARRIVALS 1
#endif
__device__ __forceinline__ void mbar_arrive_warp(uint64_t *b) {
#ifdef LC_VISIBLE_HANDOFF
    mbar_arrive(b);
#else
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive(b);
#endif
}
/* Arrives on b when this thread's earlier cp.asyncs have landed (counted in b's init).
 * -DLC_VISIBLE_HANDOFF waits for them and arrives plainly instead (slower: the
 * copies no longer overlap the next stage's issue), a handoff that
 * compute-sanitizer's racecheck can follow, to tell its reports on the
 * copy-tracking arrive from real races. */
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t *b) {
#ifdef LC_VISIBLE_HANDOFF
    asm volatile("cp.async.wait_all;" ::: "memory");
    mbar_arrive(b);
#else
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"((uint32_t)__cvta_generic_to_shared(b))
                 : "memory");
#endif
}
#endif
/* Named barrier id (1..15; 0 is __syncthreads) over n threads: sync waits,
 * arrive only counts (a producer's signal to threads that sync).  bar.sync
 * has no polling form, so no watchdog of its own: a kernel built with
 * LC_WGMMA_WATCHDOG records where each warp blocks, and the watchdog of an
 * mbarrier wait that the stuck warps hold up prints it. */
__device__ __forceinline__ void named_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}

#endif
