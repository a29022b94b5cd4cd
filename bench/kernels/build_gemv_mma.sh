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
awk '/Compiling entry function/ { n = $0; sub(/.*function ./, "", n); sub(/. for .sm_.*/, "", n) }
     /spill stores/ { sp = $0; sub(/.*frame, /, "", sp) }
     /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r); printf "  %4s regs  %-46s %s\n", r, sp, n }' \
    build/kernels/gemv_mma_test.ptxas | c++filt | sed 's/(anonymous namespace):://g; s/gemv_stream:://; s/(lc_qmat.*//' |
    grep -E 'tc_gemv|tq_gemv|stream_gemv<(2, 4|4, 2)|persist_gemv<2, 4, 3' | awk '!seen[$0]++' || true
