#!/bin/sh
# build_topk.sh — the routing top-K workshop (topk_test.cu: moe_route.cuh's
# topk_warp against its variants): build/kernels/topk_test.  Run from the
# repository root.  Prints registers and spills (full ptxas log:
# build/kernels/topk_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v ${NVFLAGS:-} \
    -Xcompiler -Wall,-Wextra bench/kernels/topk_test.cu \
    -o build/kernels/topk_test 2> build/kernels/topk_test.ptxas || { cat build/kernels/topk_test.ptxas; exit 1; }
grep -E "warning" build/kernels/topk_test.ptxas || true
sh bench/kernels/ptxas_regs.sh build/kernels/topk_test.ptxas 'topk_kernel'
echo "built build/kernels/topk_test (run: build/kernels/topk_test [--quick])"
