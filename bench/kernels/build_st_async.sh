#!/bin/sh
# build_st_async.sh — the st.async exchange alone (st_async_test.cu, for
# compute-sanitizer): build/kernels/st_async_test.  Run from the repository root.
set -e
mkdir -p build/kernels
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v ${NVFLAGS:-} \
    -Xcompiler -Wall,-Wextra bench/kernels/st_async_test.cu \
    -o build/kernels/st_async_test 2> build/kernels/st_async_test.ptxas || { cat build/kernels/st_async_test.ptxas; exit 1; }
grep -E "warning" build/kernels/st_async_test.ptxas || true
echo "built build/kernels/st_async_test (run: build/kernels/st_async_test NS XCHG [INVAL])"
