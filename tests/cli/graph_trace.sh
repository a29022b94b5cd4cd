#!/bin/sh
# graph_trace.sh — tools/graph_trace.py on a hand-made nsys kernel trace whose
# figures are known: three steps (embed, gemv, down), the last two averaged;
# durations, per-step time, the gap before each kernel (one overlap), how far
# each moves the step's end ("adds"), the grid in the key (cupti_trace.c's
# columns), the memcpy rows left out, and exit 2 on a trace without a
# complete step.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "  ok   $1"; }
bad() { echo "  FAIL $1"; fails=$((fails + 1)); }
T=$TMP/trace.csv
{
    echo '"Start (ns)","Duration (ns)","CorrId","GrdX","Name"'
    # step 1 (0..), step 2 (10000..), step 3 (20000..), then a 4th embed that closes step 3
    for s in 0 10000 20000; do
        echo "$s,1000,1,1,\"embed_kernel(lc_qmat, const int *, float *, const lc_ctrl *)\""
        echo "$((s + 1500)),4000,2,1,\"void (anonymous namespace)::gemv_tq::tq_gemv<2048, 4, 2, 3>(lc_qmat, const float *)\""
        echo "$((s + 5000)),3000,3,1,\"void (anonymous namespace)::gemv_stream::stream_down<8>(lc_qmat)\""
        echo "$((s + 8500)),500,4,1,\"[CUDA memcpy Device-to-Host]\""
    done
    echo "30000,1000,9,1,\"embed_kernel(lc_qmat, const int *, float *, const lc_ctrl *)\""
} >"$T"
out=$(python3 tools/graph_trace.py "$T" --steps 2 2>&1)
rc=$?
[ $rc -eq 0 ] && ok "runs on a trace" || bad "exit $rc: $out"
echo "$out" | grep -q "^2 steps of 3 kernels: 0.010 ms per step" && ok "two steps of three kernels, 10 us each" || bad "step line: $out"
echo "$out" | grep -E "^tq_gemv<2048, 4, 2, 3> +1.0 +4.00 +4.0 +0.50 +4.50 +4.5$" >/dev/null && ok "tq_gemv: 4 us, 0.5 us after the embedding" || bad "tq_gemv row: $out"
echo "$out" | grep -E "^stream_down<8> +1.0 +3.00 +3.0 +-0.50 +2.50 +2.5$" >/dev/null && ok "stream_down overlaps its predecessor by 0.5 us" || bad "stream_down row: $out"
echo "$out" | grep -E "^embed_kernel +1.0 +1.00 +1.0 +- +0.00 +0.0$" >/dev/null && ok "the step's first kernel has no gap" || bad "embed row: $out"
echo "$out" | grep -q "memcpy" && bad "memcpy rows counted" || ok "memcpy rows left out"
echo "$out" | grep -q "sum of kernel durations: 8.0 us" && ok "sum of durations" || bad "sum: $out"
echo "$out" | grep -q "sum of adds: 7.0 us" && ok "sum of adds" || bad "adds: $out"
# the grid joins the key: the same kernel on two grids is two rows
C=$TMP/cupti.csv
{
    echo 'Start (ns),Duration (ns),GrdX,GrdY,GrdZ,BlkX,Graph node,Name'
    for s in 0 10000 20000; do
        echo "$s,1000,1,1,1,256,7,\"embed_kernel(lc_qmat, const int *)\""
        echo "$((s + 1500)),2000,32,9,1,256,8,\"void tq_gate_up<4, false>(lc_qmat, lc_qmat)\""
        echo "$((s + 4000)),2000,32,1,1,256,9,\"void tq_gate_up<4, false>(lc_qmat, lc_qmat)\""
    done
} >"$C"
out=$(python3 tools/graph_trace.py "$C" --steps 2 2>&1)
echo "$out" | grep -E "^tq_gate_up<4, false> \[32x9\] +1.0 +2.00" >/dev/null && echo "$out" | grep -E "^tq_gate_up<4, false> \[32\] +1.0 +2.00" >/dev/null &&
    ok "one kernel on two grids: two rows" || bad "grid rows: $out"
# CUPTI's mangled names are demangled (when c++filt is installed)
if command -v c++filt >/dev/null 2>&1; then
    sed 's/"void tq_gate_up<4, false>(lc_qmat, lc_qmat)"/_ZN7gemv_tq10tq_gate_upEv/' "$C" >"$TMP/mangled.csv"
    out=$(python3 tools/graph_trace.py "$TMP/mangled.csv" --steps 2 2>&1)
    echo "$out" | grep -E "^tq_gate_up \[32x9\] +1.0 +2.00" >/dev/null && ok "mangled names demangled" || bad "demangle: $out"
else
    echo "  SKIP mangled names: no c++filt here"
fi
python3 tools/graph_trace.py "$T" --step-start nothing_matches >"$TMP/o2" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "no complete step" "$TMP/o2" && ok "no complete step: exit 2 with a reason" || bad "no-step case: rc $rc $(cat "$TMP/o2")"
[ $fails -eq 0 ]
