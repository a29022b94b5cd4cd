#!/bin/sh
# hardening.sh — the command line refuses what it cannot do, in one line
# (issue 11): media parts in `render`, empty or lenient values (ids, layers,
# served model name, context, API key), thread counts over the cores; and
# what it says (help, version, seeds, the embedded Qwen3.6 config).
LILAC=${LILAC:-./lilac}
TINY=tests/fixtures/tiny
fails=0
ok() { echo "  ok   $1"; }
bad() { echo "  FAIL $1"; fails=$((fails + 1)); }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# Each bad input: non-zero exit and exactly one line starting with "error:"
# that contains WANT.
expect_error() {
    name=$1
    want=$2
    shift 2
    out=$(timeout 60 "$@" 2>&1 >/dev/null)
    rc=$?
    lines=$(printf '%s\n' "$out" | wc -l | tr -d ' ')
    case "$out" in
        error:*"$want"*) [ $rc -ne 0 ] && [ "$lines" = 1 ] && ok "$name" || bad "$name (rc=$rc, $lines lines): $out" ;;
        *) bad "$name (rc=$rc): $out" ;;
    esac
}

# --- render: non-text content parts are refused, naming the part
printf '%s' '{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "http://x/a.png"}}]}]}' > "$TMP/img.json"
expect_error "render refuses an image part" "messages[0].content[1].type" $LILAC render "$TMP/img.json"
printf '%s' '{"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA"}}]}]}' > "$TMP/audio.json"
expect_error "render refuses an audio part" "messages[0].content[0].type: 'input_audio'" $LILAC render "$TMP/audio.json"
out=$($LILAC render --allow-media "$TMP/img.json" 2>&1)
case "$out" in *"<|vision_start|><|image_pad|><|vision_end|>"*) ok "render --allow-media renders the template's placeholder" ;;
    *) bad "render --allow-media: $out" ;; esac
printf '%s' '{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}]}' > "$TMP/text.json"
out=$($LILAC render "$TMP/text.json" 2>&1)
case "$out" in *"<|im_start|>user
ab<|im_end|>"*) ok "render still takes text parts" ;; *) bad "render text parts: $out" ;; esac

# --- serve: an empty API key is an error, whichever way it comes; the
# start-up line says whether a key is required
expect_error "serve --api-key ''" "--api-key is empty" $LILAC serve --model $TINY --port 0 --api-key ""
expect_error "serve --api-key '' with LILAC_API_KEY set" "--api-key is empty" env LILAC_API_KEY=k $LILAC serve --model $TINY --port 0 --api-key=
expect_error "LILAC_API_KEY=''" "LILAC_API_KEY is set but empty" env LILAC_API_KEY= $LILAC serve --model $TINY --port 0
# start_serve LOG ARGS...: starts a server, waits for its "listening" line, and stops it
start_serve() {
    log=$1
    shift
    "$@" > "$log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q "listening on" "$log" && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
    kill -TERM $pid 2>/dev/null
    wait $pid
}
start_serve "$TMP/s1.log" env LILAC_API_KEY=k $LILAC serve --model $TINY --port 0
grep -q 'API key required on /v1/\* .*from \$LILAC_API_KEY' "$TMP/s1.log" && ok "start-up line: key required (from the environment)" || bad "start-up line: $(cat "$TMP/s1.log")"
start_serve "$TMP/s2.log" env -u LILAC_API_KEY $LILAC serve --model $TINY --port 0
grep -q "no API key: any client" "$TMP/s2.log" && ok "start-up line: no key" || bad "start-up line: $(cat "$TMP/s2.log")"

# --- --threads: clamped to the cores available, said once; the default by measurement
P=427,120,6,421,448,371,353,238
want=$($LILAC --threads 1 generate --model $TINY --ids $P -n 8 --print-ids --ignore-eos 2>/dev/null)
out=$(taskset -c 0 $LILAC --threads 64 generate --model $TINY --ids $P -n 8 --print-ids --ignore-eos 2>"$TMP/err")
[ "$out" = "$want" ] && [ "$(cat "$TMP/err")" = "note: --threads 64 is more than the 1 core available; using 1" ] &&
    ok "--threads 64 on one core: clamped to 1, said once" || bad "--threads clamp: $out / $(cat "$TMP/err")"
taskset -c 0,1 $LILAC --version | grep -q "^cpu: 2 cores available, 1 worker thread by default" &&
    ok "default threads on 2 cores: 1" || bad "--version on 2 cores: $(taskset -c 0,1 $LILAC --version)"

# --- strict input: what used to be accepted and then misread
expect_error "detokenize 1,,2" "IDS: entry 2 is empty" $LILAC detokenize --model $TINY 1,,2
expect_error "detokenize 1,2," "IDS: entry 3 is empty" $LILAC detokenize --model $TINY 1,2,
expect_error "detokenize ,1" "IDS: entry 1 is empty" $LILAC detokenize --model $TINY ,1
expect_error "detokenize names IDS, not --ids" "IDS: entry 2 ('x')" $LILAC detokenize --model $TINY 1,x
expect_error "generate --ids 1,,2" "--ids: entry 2 is empty" $LILAC generate --model $TINY --ids 1,,2 -n 1
out=$($LILAC detokenize --model $TINY " 39, 354 ,319" 2>&1)
[ "$out" = "Hello" ] && ok "spaces around commas are fine" || bad "detokenize with spaces: $out"
expect_error "synth --layers 0" "--layers: '0' is not an integer in [1, 256]" $LILAC synth --layers 0 --out "$TMP/s0"
expect_error "synth --layers 99" "synth: --layers 99: the config has 40 decoder layers" $LILAC synth --layers 99 --out "$TMP/s99"
[ ! -e "$TMP/s0" ] && [ ! -e "$TMP/s99" ] && ok "a refused synth writes nothing" || bad "synth wrote $(ls "$TMP")"
expect_error "serve --served-model-name ''" "--served-model-name must be 1 to 255 bytes" $LILAC serve --model $TINY --served-model-name ''
expect_error "serve --ctx 1" "--ctx: '1' is not an integer in [32," $LILAC serve --model $TINY --ctx 1

# --- wording
$LILAC --help | grep -q "generate .*continue token ids, a text prompt or a chat message (greedy, or sampled)" &&
    ok "lilac --help: generate is not only greedy" || bad "lilac --help: $($LILAC --help | grep generate)"
if $LILAC --version | grep -q "^backends: cpu, cuda" && ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
    $LILAC --version | grep -q "^gpu: none: no NVIDIA driver found" && ok "--version without a driver: no driver found" ||
        bad "--version without a driver: $($LILAC --version | grep gpu)"
else
    echo "  skip --version without a driver (a driver is installed, or no CUDA backend)"
fi

# --- sampling seeds: random unless --seed, as the server
a=$($LILAC generate --model $TINY --prompt x -n 16 --temperature 1 --print-ids 2>&1)
b=$($LILAC generate --model $TINY --prompt x -n 16 --temperature 1 --print-ids 2>&1)
c=$($LILAC generate --model $TINY --prompt x -n 16 --temperature 1 --print-ids 2>&1)
[ "$a" != "$b" ] || [ "$a" != "$c" ] && ok "sampling without --seed differs from run to run" || bad "unseeded runs all equal: $a"
a=$($LILAC generate --model $TINY --prompt x -n 16 --temperature 1 --seed 0 --print-ids 2>&1)
b=$($LILAC generate --model $TINY --prompt x -n 16 --temperature 1 --seed 0 --print-ids 2>&1)
[ "$a" = "$b" ] && ok "--seed 0 is reproducible" || bad "--seed 0: $a vs $b"

# --- the real Qwen3.6 config is built in: synthetic models work from any directory
here=$(pwd)
case "$LILAC" in /*) L=$LILAC ;; *) L=$here/$LILAC ;; esac
# (on the CPU, bench --synthetic stops at the backend before it loads the
# config; synth below shows the built-in config is read outside the tree)
out=$(cd "$TMP" && "$L" --backend cpu bench --synthetic -n 1 2>&1)
case "$out" in *config.json*) bad "bench --synthetic from $TMP looks for a config file: $out" ;;
    *"needs the CUDA backend"*) ok "bench --synthetic outside the repository fails only for want of a GPU" ;;
    *) bad "bench --synthetic from $TMP: $out" ;; esac
out=$(cd "$TMP" && "$L" synth --out "$TMP/sx" --layers 99 2>&1)
case "$out" in *"the config has 40 decoder layers"*) ok "synth reads the built-in config outside the repository" ;;
    *) bad "synth from $TMP: $out" ;; esac
mkdir -p "$TMP/gen" && sh tools/embed_file.sh tests/fixtures/qwen36-config/config.json "$TMP/gen/qwen36_config.inc" lilac_qwen36_config &&
    cmp -s "$TMP/gen/qwen36_config.inc" src/model/qwen36_config.inc && ok "src/model/qwen36_config.inc matches the fixture" ||
    bad "src/model/qwen36_config.inc is stale: run make"

[ $fails -eq 0 ] || { echo "hardening.sh: $fails failed"; exit 1; }
echo "hardening.sh: all passed"
