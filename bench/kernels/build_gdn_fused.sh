#!/bin/sh
# build_gdn_fused.sh — the fused DeltaNet layer workshop (gdn_fused_test.cu: in_proj
# and the decode step in one kernel against ring_gemv + the split step):
# build/kernels/gdn_fused_test.  Run from the repository root.  Prints registers
# and spills of the kernels it compares (full ptxas log:
# build/kernels/gdn_fused_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -DLILAC_CUDA=1 ${NVFLAGS:-} \
    -Xcompiler -Wall,-Wextra bench/kernels/gdn_fused_test.cu src/backend/cuda/decode/gdn_fused.cu \
    src/backend/cuda/decode/gdn_step.cu src/backend/cuda/decode/gemv.cu src/backend/cuda/fill.cu src/backend/cuda/decode_try.c \
    -o build/kernels/gdn_fused_test 2> build/kernels/gdn_fused_test.ptxas || { cat build/kernels/gdn_fused_test.ptxas; exit 1; }
grep -E "warning" build/kernels/gdn_fused_test.ptxas || true
sh bench/kernels/ptxas_regs.sh build/kernels/gdn_fused_test.ptxas 'gdn_fused_kernel|gdn_split_kernel<4, 0>|ring_gemv<2048, false>|ring_gemv<4096, false>'
echo "built build/kernels/gdn_fused_test (run: build/kernels/gdn_fused_test [--quick])"
