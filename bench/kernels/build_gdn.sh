#!/bin/sh
# Builds the chunked Gated DeltaNet prefill workshop test (bench/kernels/gdn_chunk_test.cu)
# against the sequential reference kernel: build/kernels/gdn_chunk_test.
# Run from the repository root; EXTRA="-Xptxas -v" shows registers and spills.
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -lineinfo $EXTRA \
    bench/kernels/gdn_chunk_test.cu src/backend/cuda/prefill/gdn_chunk.cu src/backend/cuda/decode/gdn_step.cu src/backend/cuda/decode_try.c \
    -o build/kernels/gdn_chunk_test
echo "built build/kernels/gdn_chunk_test (run: build/kernels/gdn_chunk_test [--no-timing | --small]; under racecheck use --small)"
