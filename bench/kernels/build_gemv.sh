#!/bin/sh
# build_gemv.sh — the decode GEMV workshop (gemv_test.cu) against the kernels it compares
# (decode/gemv.cu, decode/moe.cu, decode/gemv_stream.cuh, decode/gemv_tq.cuh; fill.cu for the synthetic weights).
# Prints registers and spills of every kernel the workshop times, the engine's instances
# (gemv.cu / moe.cu) first (full ptxas log: build/kernels/gemv_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v ${NVFLAGS:-} \
    src/backend/cuda/decode/gemv.cu src/backend/cuda/decode/moe.cu bench/kernels/gemv_test.cu src/backend/cuda/fill.cu \
    -o build/kernels/gemv_test 2> build/kernels/gemv_test.ptxas || { cat build/kernels/gemv_test.ptxas; exit 1; }
# one line per kernel timed here: registers, spill stores/loads, name
sh bench/kernels/ptxas_regs.sh build/kernels/gemv_test.ptxas 'tq_|ring_gemv|stream_|persist_|gemv_kernel<4, (2, 32, 4|4, 32, 2)>|gate_up_kernel<4, 2, 32>|down_kernel<4, 1, 16>'
