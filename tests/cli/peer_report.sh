#!/bin/sh
# peer_report.sh — tools/peer_report.py (bench/peer.sh's report step) on
# hand-made rounds whose medians and ratios are known: the table, the mean
# ratio, the lengths where lilac is slower, the round-by-round figures, the
# llama.cpp version taken from a prebuilt's BUILDINFO when llama-bench says
# "unknown", and a refusal when there are no rounds.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0
ok() { echo "  ok   $1"; }
bad() { echo "  FAIL $1"; fails=$((fails + 1)); }
R=$TMP/.peer/results
# three rounds; lilac prefill at 256 is 100, 300, 200 (median 200) against llama 100: ratio 2;
# decode at 256 is 50 against llama 100 each round: ratio 0.5 (lilac slower)
for n in 1 2 3; do
    mkdir -p "$R/round$n"
    case $n in 1) lp=100 ;; 2) lp=300 ;; 3) lp=200 ;; esac
    cat >"$R/round$n/lilac.json" <<JSON
{"date": "2026-12-01T00:00:00Z", "lilac": {"version": "0.1.0", "commit": "abc123"},
 "device": {"name": "Test GPU", "driver": "1.0", "sm_clock_mhz_start": 100, "sm_clock_mhz_max": 200},
 "prefill": {"results": [{"tokens": 256, "tokens_per_s": {"median": $lp}}, {"tokens": 512, "tokens_per_s": {"median": 900}}]},
 "decode": {"results": [{"context": 256, "tokens_per_s": {"median": 50}}]}}
JSON
    cat >"$R/round$n/llama_prefill.json" <<JSON
[{"build_commit": "unknown", "build_number": 0, "backends": "CUDA", "flash_attn": 1, "n_gpu_layers": 99,
  "n_batch": 2048, "n_ubatch": 512, "type_k": "f16", "type_v": "f16", "n_prompt": 256, "n_gen": 0, "avg_ts": 100},
 {"build_commit": "unknown", "n_prompt": 512, "n_gen": 0, "avg_ts": 300}]
JSON
    cat >"$R/round$n/llama_decode.json" <<JSON
[{"build_commit": "unknown", "n_prompt": 0, "n_gen": 64, "n_depth": 256, "avg_ts": 100}]
JSON
done
mkdir -p "$TMP/.peer/llama-build"
echo "llama.cpp 0c1e57098 (test), CUDA sm_90, built today, this run's build 1 s" >"$TMP/.peer/llama-build/BUILDINFO"
if python3 tools/peer_report.py "$R" >"$TMP/log" 2>&1; then ok "report runs"; else bad "report failed: $(cat "$TMP/log")"; fi
M=$R/peer.md
grep -q '^| 256 | 200.0 | 100.0 | 2.00 |$' "$M" && ok "prefill median over rounds and ratio" || bad "prefill row: $(grep '^| 256' "$M")"
grep -q '^| 512 | 900.0 | 300.0 | 3.00 |$' "$M" && ok "second length" || bad "512 row: $(grep '^| 512' "$M")"
grep -q 'Mean ratio over 2 lengths: 2.50; lilac slower at: none.' "$M" && ok "prefill mean ratio, none slower" || bad "prefill summary"
grep -q 'Mean ratio over 1 lengths: 0.50; lilac slower at: 256.' "$M" && ok "decode: the slower length named" || bad "decode summary: $(grep 'Mean ratio' "$M")"
grep -q '^| prefill | 256 | 100.0, 300.0, 200.0 | 100.0, 100.0, 100.0 |$' "$M" && ok "every round's figures" || bad "rounds row"
grep -q 'llama.cpp: llama.cpp 0c1e57098 (test), CUDA sm_90, built today (llama-bench reports build unknown' "$M" &&
    ok "version from BUILDINFO when llama-bench says unknown" || bad "llama.cpp line: $(grep 'llama.cpp:' "$M")"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['rounds'] == 3 and len(d['table']) == 3" "$R/peer.json" &&
    ok "peer.json" || bad "peer.json"
mkdir -p "$TMP/empty"
if python3 tools/peer_report.py "$TMP/empty" >"$TMP/log2" 2>&1; then bad "no rounds accepted"
else grep -q "no round" "$TMP/log2" && ok "no rounds: refused, saying so" || bad "no rounds message: $(cat "$TMP/log2")"; fi
exit $fails
