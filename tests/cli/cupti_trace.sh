#!/bin/sh
# cupti_trace.sh — tools/cupti_trace.c (the in-graph kernel tracer used by
# bench/kernels/run_session.sh cupti) builds warning-free against the CUDA
# toolkit's CUPTI (tools/build_cupti_trace.sh) and exports the driver's
# injection entry point.  Tracing itself needs a GPU (the lent machine runs
# it); here it says SKIP without CUPTI's header and library.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
sh tools/build_cupti_trace.sh "$TMP/t.so" >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 3 ]; then
    echo "  SKIP cupti_trace: $(cat "$TMP/err")"
    exit 0
fi
if [ $rc -eq 0 ]; then
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
