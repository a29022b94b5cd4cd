#!/bin/sh
# build_st_async.sh — the st.async exchange alone (st_async_test.cu, for
# compute-sanitizer): build/kernels/st_async_test.  Run from the repository root.
set -e
sh bench/kernels/nvcc_workshop.sh st_async_test 'exchange_kernel' bench/kernels/st_async_test.cu
echo "built build/kernels/st_async_test (run: build/kernels/st_async_test NS XCHG [INVAL])"
