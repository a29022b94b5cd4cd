#!/bin/sh
# bench.sh — `lilac bench` without a GPU: the sweeps' usage errors, the clean
# refusal of the GPU-only parts on the CPU backend (one line naming the cause,
# exit 1), and a small explicit sweep on the tiny fixture (--real-context)
# whose markdown tables and JSON carry every length and every run.
LILAC=${LILAC:-./lilac}
TINY=tests/fixtures/tiny
fails=0
ok() { echo "  ok   $1"; }
bad() { echo "  FAIL $1"; fails=$((fails + 1)); }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# status NAME WANT GREP CMD... : exit status WANT and a one-line error on stderr matching GREP
status() {
    name=$1 want=$2 pat=$3
    shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    lines=$(grep -c '^error: ' "$TMP/err")
    if [ "$got" = "$want" ] && grep -q -- "$pat" "$TMP/err" && [ "$lines" = 1 ]; then ok "$name"
    else bad "$name: exit $got (want $want), stderr: $(cat "$TMP/err")"; fi
}
CPU="$LILAC --backend cpu bench -q"
status "no model" 2 "give --synthetic or --model" $CPU
status "--ctx with --decode" 2 "give one of them" $CPU --model $TINY --ctx 64 --decode 64
status "bad --decode list" 2 "--decode: unexpected" $CPU --model $TINY --decode 64,4x
status "bad --prefill list" 2 "--prefill: bad length" $CPU --model $TINY --prefill ,64
status "--repeats 0" 2 "repeats" $CPU --model $TINY --prefill 64 --repeats 0
status "nothing to time" 2 "nothing to time" $CPU --model $TINY --no-decode --no-prefill
status "--synthetic on the CPU" 1 "needs the CUDA backend" $CPU --synthetic
status "default sweep on the CPU" 1 "is a GPU benchmark" $CPU --model $TINY
status "decode on the CPU without --real-context" 1 "needs --real-context" $CPU --model $TINY --decode 64
status "a context beyond the model" 1 "the model has" $CPU --model $TINY --decode 300000 --real-context --no-prefill
status "unwritable --json" 1 "cannot write the JSON" $CPU --model $TINY --prefill 8 --repeats 1 --json "$TMP/no/such/dir/x.json"

# a small sweep on the CPU: every length in the tables and in the JSON (a
# kernel knob set, which the report names)
LILAC_DECODE_TRY=xchg $CPU --model $TINY --prefill 16,32 --decode 8,24 --real-context -n 3 --warmup 1 --repeats 3 \
    --json "$TMP/b.json" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] && ok "explicit sweep on the CPU runs" || bad "explicit sweep: exit $rc: $(cat "$TMP/err")"
grep -q '^| 16 | ' "$TMP/out" && grep -q '^| 32 | ' "$TMP/out" && ok "prefill table rows" || bad "prefill table: $(cat "$TMP/out")"
grep -q '^| 8 | ' "$TMP/out" && grep -q '^| 24 | ' "$TMP/out" && ok "decode table rows" || bad "decode table: $(cat "$TMP/out")"
grep -q '^- lilac: .*commit [0-9a-z]' "$TMP/out" && ok "the report names the commit" || bad "no commit line"
grep -q '^- knobs: .*LILAC_DECODE_TRY=xchg' "$TMP/out" && ok "the report names the knobs set" || bad "knobs: $(grep knobs "$TMP/out")"
python3 - "$TMP/b.json" <<'PY' && ok "JSON: lengths, runs, median within min..max" || bad "JSON check"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["repeats"] == 3 and d["lilac"]["commit"], d["lilac"]
assert "LILAC_DECODE_TRY=xchg" in d["knobs"], d["knobs"]
assert [r["tokens"] for r in d["prefill"]["results"]] == [16, 32]
assert [r["context"] for r in d["decode"]["results"]] == [8, 24]
assert d["decode"]["real_context"] is True and d["decode"]["tokens"] == 3
for r in d["prefill"]["results"]:
    assert len(r["prefill_s_runs"]) == 3 and len(r["ttft_s_runs"]) == 3
    t = r["tokens_per_s"]; assert t["min"] <= t["median"] <= t["max"] and t["min"] > 0
    assert all(f >= p for f, p in zip(r["ttft_s_runs"], r["prefill_s_runs"])), "TTFT includes the prefill"
for r in d["decode"]["results"]:
    assert len(r["tokens_per_s_runs"]) == 3 and r["tokens"] == 3
    t = r["tokens_per_s"]; assert t["min"] <= t["median"] <= t["max"] and t["min"] > 0
    assert abs(r["ms_per_token"]["median"] - 1e3 / t["median"]) < 1e-6 * r["ms_per_token"]["median"] + 1e-9
PY
n=$(grep -c '^bench: decode at context .* run [123]/3' "$TMP/err")
[ "$n" = 0 ] && ok "-q: no progress lines" || bad "-q printed $n progress lines"
$LILAC --backend cpu bench --model $TINY --prefill 16 --decode 8 --real-context -n 2 --repeats 2 >/dev/null 2>"$TMP/err"
n=$(grep -c '^bench: \(decode at context 8\|prefill 16 tokens\), run [12]/2' "$TMP/err")
[ "$n" = 4 ] && ok "a progress line per run" || bad "progress lines: $n: $(cat "$TMP/err")"
"$LILAC" bench --help | grep -q -- '--real-context' && ok "bench --help lists the sweep options" || bad "bench --help"

# bench grammar: the CPU tables, then the GPU part (on the tiny model when a
# GPU is here, else one clean "skipped" line); --no-gpu and --backend cpu leave it out
"$LILAC" bench grammar --model $TINY -n 100 --gpu-tokens 16 --gpu-ctx 32 >"$TMP/g" 2>"$TMP/err"
rc=$?
if [ $rc = 0 ] && grep -q '^| all steps |' "$TMP/g" && grep -q '^## The mask on the GPU' "$TMP/g" &&
    { grep -q '^- skipped: no CUDA device (' "$TMP/g" || grep -q '^| \*\*mask cost' "$TMP/g"; }; then
    ok "bench grammar: CPU tables and the GPU part ($(grep -c '^- skipped' "$TMP/g") skipped)"
else bad "bench grammar: exit $rc: $(cat "$TMP/g" "$TMP/err")"; fi
"$LILAC" bench grammar --model $TINY -n 20 --no-gpu >"$TMP/g" 2>&1 && ! grep -q 'mask on the GPU' "$TMP/g" &&
    ok "bench grammar --no-gpu" || bad "bench grammar --no-gpu: $(cat "$TMP/g")"
"$LILAC" --backend cpu bench grammar --model $TINY -n 20 >"$TMP/g" 2>&1 && grep -q '^- skipped: --backend cpu' "$TMP/g" &&
    ok "bench grammar --backend cpu skips the GPU part" || bad "bench grammar --backend cpu: $(cat "$TMP/g")"
[ $fails = 0 ]
