#!/bin/sh
# ptxas_regs.sh LOG PATTERN — the build_*.sh scripts' summary of an
# `nvcc -Xptxas -v` log: one line per kernel whose demangled name matches
# PATTERN (grep -E), each once: registers, spill stores and loads, the name
# (without "(anonymous namespace)::" and the parameter list).
awk '/Compiling entry function/ { n = $0; sub(/.*function ./, "", n); sub(/. for .sm_.*/, "", n) }
     /spill stores/ { sp = $0; sub(/.*frame, /, "", sp) }
     /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r); printf "  %4s regs  %-46s %s\n", r, sp, n }' \
    "$1" | c++filt | sed 's/(anonymous namespace):://g; s/(.*//' | grep -E "$2" | awk '!seen[$0]++' || true
