#!/bin/sh
# cupti_trace.sh — tools/cupti_trace.c (the in-graph kernel tracer used by
# bench/kernels/run_session.sh cupti) builds warning-free against the CUDA
# toolkit's CUPTI and exports the driver's injection entry point.  Tracing
# itself needs a GPU (the lent machine runs it); here it says SKIP without
# CUPTI's header and library.
CUDA=${CUDA_HOME:-/usr/local/cuda}
INC=$(dirname "$(ls "$CUDA"/include/cupti.h "$CUDA"/extras/CUPTI/include/cupti.h 2>/dev/null | head -1)")
LIB=$(dirname "$(ls "$CUDA"/lib64/libcupti.so "$CUDA"/lib/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
if [ ! -f "$INC/cupti.h" ] || [ ! -f "$LIB/libcupti.so" ]; then
    echo "  SKIP cupti_trace: no CUPTI under $CUDA"
    exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
if gcc -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -I"$INC" tools/cupti_trace.c -o "$TMP/t.so" -L"$LIB" -lcupti 2>"$TMP/err"; then
    echo "  ok   builds with -Wall -Wextra -Werror"
else
    echo "  FAIL build: $(cat "$TMP/err")"
    fails=1
fi
if [ -f "$TMP/t.so" ] && nm -D --defined-only "$TMP/t.so" | grep -q " T InitializeInjection$"; then
    echo "  ok   exports InitializeInjection"
else
    echo "  FAIL no InitializeInjection symbol"
    fails=1
fi
[ $fails -eq 0 ]
