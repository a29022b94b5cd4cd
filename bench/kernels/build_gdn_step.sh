#!/bin/sh
# build_gdn_step.sh — the decode DeltaNet step workshop (gdn_step_test.cu) against
# decode/gdn_step.cu (both forms): build/kernels/gdn_step_test.  Run from the
# repository root.  Prints registers and spills of both forms (full ptxas log:
# build/kernels/gdn_step_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v ${NVFLAGS:-} \
    -Xcompiler -Wall,-Wextra bench/kernels/gdn_step_test.cu src/backend/cuda/decode/gdn_step.cu src/backend/cuda/decode_try.c \
    -o build/kernels/gdn_step_test 2> build/kernels/gdn_step_test.ptxas || { cat build/kernels/gdn_step_test.ptxas; exit 1; }
grep -E "warning" build/kernels/gdn_step_test.ptxas || true
# one line per kernel: registers, spill stores/loads, name (the engine's K=4, dk=128 block form and the split forms)
sh bench/kernels/ptxas_regs.sh build/kernels/gdn_step_test.ptxas 'gdn_kernel<4, 128>|gdn_split_kernel'
echo "built build/kernels/gdn_step_test (run: build/kernels/gdn_step_test [--quick])"
