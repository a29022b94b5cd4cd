#!/bin/sh
# build_persist.sh — the persistent chain workshop (persist_chain_test.cu) and the engine
# kernels it takes its reference from (decode/gemv.cu, decode/moe.cu; fill.cu for the
# synthetic weights).  Prints registers and spills of the persistent variants and of the
# engine's two chain kernels (full ptxas log: build/kernels/persist_chain_test.ptxas).
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v -Xcompiler -Wall,-Wextra ${NVFLAGS:-} \
    src/backend/cuda/decode/gemv.cu src/backend/cuda/decode/moe.cu bench/kernels/persist_chain_test.cu src/backend/cuda/fill.cu \
    -o build/kernels/persist_chain_test 2> build/kernels/persist_chain_test.ptxas || { cat build/kernels/persist_chain_test.ptxas; exit 1; }
# compiler warnings (not ptxas' info lines) are shown
grep -v -E '^ptxas info|^ptxas +info|bytes stack frame|^$' build/kernels/persist_chain_test.ptxas || true
# one line per kernel: registers, spill stores/loads, name
sh bench/kernels/ptxas_regs.sh build/kernels/persist_chain_test.ptxas 'chain_kernel|tq_chain|ring_stage|persist_gemv<2, 4, 3, false>|stream_gemv<4, 2, 2, false>'
