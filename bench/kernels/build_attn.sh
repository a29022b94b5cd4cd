#!/bin/sh
# build_attn.sh — builds the prefill attention workshop test,
# build/kernels/attn_prefill_test (with the wgmma kernel of
# attention_prefill_wgmma.cu; sm_90a; cudart linked statically, so the
# binary runs on a bare CUDA image), and prints the registers / spills ptxas
# reports for its kernels.  Run from anywhere; extra arguments go to nvcc
# (e.g. -DLC_ATTN_PREFILL_MODE=0 to make MODE 0 the launcher's default;
# -DLC_WGMMA_WATCHDOG to make a deadlock of the wgmma kernel trap with where
# each warp stood, see attention_prefill_wgmma.cu).  ATTN_BIN names the
# binary (default build/kernels/attn_prefill_test), e.g.
#   ATTN_BIN=build/kernels/attn_prefill_test_wd sh bench/kernels/build_attn.sh -DLC_WGMMA_WATCHDOG
set -e
cd "$(dirname "$0")/../.."
BIN=${ATTN_BIN:-build/kernels/attn_prefill_test}
mkdir -p build/kernels "$(dirname "$BIN")"
nvcc -O3 -std=c++17 -arch=sm_90a -Isrc -Iinclude -lineinfo \
    -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -Xptxas -v "$@" \
    bench/kernels/attn_prefill_test.cu src/backend/cuda/prefill/attention_prefill_wgmma.cu src/backend/cuda/attention.cu src/backend/cuda/decode_try.c \
    -o "$BIN" 2> "$BIN.ptxas.txt" ||
    { cat "$BIN.ptxas.txt"; exit 1; }
# warnings (anything but ptxas info lines) are shown, then per-kernel resources
grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$BIN.ptxas.txt" || true
awk '/Compiling entry function/ { k = $0; sub(/^[^\x27]*\x27/, "", k); sub(/\x27.*/, "", k) }
     /bytes stack frame/ { st = $0; sub(/^ */, "", st) }
     /Used [0-9]+ registers/ { if (k ~ /prefill/) {
         n = "prefill_prep_kernel"
         if (match(k, /attn_prefill_kernelILi[0-9]+ELi[0-9]+E/)) { a = substr(k, RSTART, RLENGTH); gsub(/[^0-9]+/, " ", a); split(a, v, " "); n = "attn_prefill_kernel<MODE " v[1] ", NSLOT " v[2] ">" }
         if (k ~ /attn_prefill_wgmma_kernelILb1E/) n = "attn_prefill_wgmma_kernel<PP> (fa3)"
         if (k ~ /attn_prefill_wgmma_kernelILb0E/) n = "attn_prefill_wgmma_kernel<no PP> (fa3np)"
         r = $0; sub(/^ *ptxas info *: */, "", r); printf "  %-40s %s; %s\n", n, r, st } }' \
    "$BIN.ptxas.txt"
echo "built $BIN"
