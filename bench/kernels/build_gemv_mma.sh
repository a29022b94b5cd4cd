#!/bin/sh
# build_gemv_mma.sh — the tensor-core decode GEMV workshop (gemv_mma_test.cu), linked with the
# engine's GEMVs it compares against (decode/gemv.cu, decode/moe.cu; fill.cu for the synthetic
# weights).  Prints registers and spills of the workshop's kernels and of the SIMT kernels the
# engine picks for these shapes (full ptxas log: build/kernels/gemv_mma_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v \
    -Xcompiler -Wall,-Wextra ${NVFLAGS:-} \
    src/backend/cuda/decode/gemv.cu src/backend/cuda/decode/moe.cu bench/kernels/gemv_mma_test.cu src/backend/cuda/fill.cu \
    -o build/kernels/gemv_mma_test 2> build/kernels/gemv_mma_test.ptxas || { cat build/kernels/gemv_mma_test.ptxas; exit 1; }
grep -E 'warning|error' build/kernels/gemv_mma_test.ptxas | grep -v 'ptxas info' || true
sh bench/kernels/ptxas_regs.sh build/kernels/gemv_mma_test.ptxas 'tc_gemv|tq_gemv|stream_gemv<(2, 4|4, 2)|persist_gemv<2, 4, 3'
# SASS per warp tile of the tensor-core kernels (all unrolled: static = dynamic counts): the
# instructions from the barrier that ends the x preparation to the one before the split-K sum,
# per 1,024 weights (a warp's tile is 16 rows x 128 NSP inputs), and the preparation's share
# before it (per thread, once per block); needs cuobjdump (with nvdisasm) on the PATH.
if command -v cuobjdump > /dev/null 2>&1; then
    cuobjdump -sass build/kernels/gemv_mma_test | awk '
        function flush() { if (name != "" && nm > 0) printf "  %-34s mma %3d  tile %4d = %5.1f / 1024 weights   before it %4d\n",
                                   name, nm, last - first - 1, (last - first - 1) * 1024.0 / (16 * 128 * nsp), first }
        /Function :/ { flush(); name = ""; nm = 0; n = 0; nb = 0
                       if (match($0, /t[cq]_gemvILi[0-9]+ELi[0-9]+ELi[0-9]+/)) {
                           s = substr($0, RSTART, RLENGTH); split(s, p, /ILi|ELi/); nsp = p[3]
                           name = substr(s, 1, 7) "<" p[2] "," p[3] "," p[4] ">" } }
        /^ +\/\*[0-9a-f]+\*\/ / { n++; if ($0 ~ / BAR\./) { bar[++nb] = n; if (nm > 0 && last == 0) last = n }
                                  if ($0 ~ /[HI]MMA\./) { if (nm == 0) { first = bar[nb]; last = 0 } nm++; last = 0 } }
        END { flush() }'
fi
