#!/bin/sh
# build_topk.sh — the routing top-K workshop (topk_test.cu: moe_route.cuh's
# topk_warp against its variants): build/kernels/topk_test.  Run from the
# repository root.  Prints registers and spills (full ptxas log:
# build/kernels/topk_test.ptxas).
set -e
sh bench/kernels/nvcc_workshop.sh topk_test 'topk_kernel' bench/kernels/topk_test.cu
echo "built build/kernels/topk_test (run: build/kernels/topk_test [--quick])"
