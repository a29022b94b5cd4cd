#!/bin/sh
# build_qgemm.sh — the prefill GEMM workshop (qgemm_test.cu) against the kernels it tests.
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo ${NVFLAGS:-} \
    bench/kernels/qgemm_test.cu src/backend/cuda/prefill/gemm_mma.cu src/backend/cuda/prefill/gemm_wgmma.cu src/backend/cuda/prefill/pack.cu \
    src/backend/cuda/prefill/moe_route.cu src/backend/cuda/fill.cu -o build/kernels/qgemm_test
