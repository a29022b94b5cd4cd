#!/bin/sh
# build_gdn_step.sh — the decode DeltaNet step workshop (gdn_step_test.cu) against
# decode/gdn_step.cu (both forms): build/kernels/gdn_step_test.  Run from the
# repository root.  Prints registers and spills of both forms (full ptxas log:
# build/kernels/gdn_step_test.ptxas).
set -e
# one line per kernel: registers, spill stores/loads, name (the engine's K=4, dk=128 block form and the split forms)
sh bench/kernels/nvcc_workshop.sh gdn_step_test 'gdn_kernel<4, 128>|gdn_split_kernel' \
    bench/kernels/gdn_step_test.cu src/backend/cuda/decode/gdn_step.cu src/backend/cuda/decode_try.c
echo "built build/kernels/gdn_step_test (run: build/kernels/gdn_step_test [--quick])"
