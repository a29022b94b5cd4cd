#!/bin/sh
# build_cupti_trace.sh OUT.so — builds tools/cupti_trace.c (the in-graph kernel
# tracer) against the CUDA toolkit's CUPTI under ${CUDA_HOME:-/usr/local/cuda},
# warning-free (-Werror).  Prints the directory of libcupti.so (for
# LD_LIBRARY_PATH) on success; exits 3 when no CUPTI header or library is
# found, 1 when the build fails.  Used by bench/kernels/run_session.sh cupti
# and tests/cli/cupti_trace.sh.
out=${1:?usage: build_cupti_trace.sh OUT.so}
CUDA=${CUDA_HOME:-/usr/local/cuda}
INC=$(dirname "$(ls "$CUDA"/include/cupti.h "$CUDA"/extras/CUPTI/include/cupti.h 2>/dev/null | head -1)")
LIB=$(dirname "$(ls "$CUDA"/lib64/libcupti.so "$CUDA"/lib/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
if [ ! -f "$INC/cupti.h" ] || [ ! -f "$LIB/libcupti.so" ]; then
    echo "build_cupti_trace: no CUPTI under $CUDA" >&2
    exit 3
fi
gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -I"$INC" tools/cupti_trace.c -o "$out" -L"$LIB" -lcupti || exit 1
echo "$LIB"
