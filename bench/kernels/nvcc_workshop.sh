#!/bin/sh
# nvcc_workshop.sh NAME PATTERN NVCC_ARGS... — the build the workshops share:
# build/kernels/NAME from NVCC_ARGS (sources, defines) with the workshop
# flags (sm_90a, -Xptxas -v, -Wall -Wextra, then $NVFLAGS), the ptxas log
# in build/kernels/NAME.ptxas (printed if nvcc fails), its warnings, and
# ptxas_regs.sh's line per kernel matching PATTERN.  Run from the
# repository root, as the build_*.sh scripts that call it are.
set -e
name=$1 pattern=$2
shift 2
mkdir -p build/kernels
log=build/kernels/$name.ptxas
# shellcheck disable=SC2086 # NVFLAGS: a list of flags
nvcc -O3 -std=c++17 -Iinclude -Isrc -gencode arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v "$@" ${NVFLAGS:-} \
    -Xcompiler -Wall,-Wextra -o "build/kernels/$name" 2> "$log" || { cat "$log"; exit 1; }
grep -E "warning" "$log" || true
sh bench/kernels/ptxas_regs.sh "$log" "$pattern"
