#!/bin/sh
# engine.sh — the score and generate commands on the tiny fixture, and their
# one-line errors on bad input.
LILAC=${LILAC:-./lilac}
TINY=tests/fixtures/tiny
fails=0
ok() { echo "  ok   $1"; }
bad() { echo "  FAIL $1"; fails=$((fails + 1)); }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

PROMPT=427,120,6,421,448,371,353,238,61,7,497,287,500,212,200,298,428,351,302,233,430,134,275,393,278,34,34,183,503,183,50,387,291,415,331,493,345,289,488,40,407,198,12,374,493,30,50,364
GOLDEN="[262, 116, 426, 344, 166, 344, 115, 263, 149, 344, 236, 3, 44, 3, 394, 285, 330, 203, 344, 356, 44, 503, 491, 344]"

out=$($LILAC generate --model $TINY --ids $PROMPT -n 24 --print-ids --ignore-eos 2>&1)
[ "$out" = "$GOLDEN" ] && ok "generate reproduces the golden ids (MLX)" || bad "generate (MLX): $out"
out=$($LILAC --threads 1 generate --model $TINY/hf --ids $PROMPT -n 24 --print-ids --ignore-eos 2>&1)
[ "$out" = "$GOLDEN" ] && ok "generate reproduces the golden ids (HF, 1 thread)" || bad "generate (HF): $out"

echo "$PROMPT" | tr ',' '\n' > "$TMP/ids.txt"
out=$($LILAC score --model $TINY --ids @"$TMP/ids.txt" --logits-out "$TMP/l.bin" --chunk 5 2>&1)
case "$out" in '{"tokens": 48, "nll": '*'"top1": ['*']}') ok "score prints the JSON summary" ;; *) bad "score: $out" ;; esac
size=$(wc -c < "$TMP/l.bin" | tr -d ' ')
[ "$size" = $((48 * 512 * 4)) ] && ok "--logits-out writes [T, vocab] float32" || bad "logits file is $size bytes"
out2=$($LILAC score --model $TINY --ids $PROMPT 2>&1)
[ "$out" = "$out2" ] && ok "score is the same for @FILE and a comma list, chunk 5 and 512" || bad "score differs: $out2"

# Text prompts: --prompt equals --ids of its tokens; --chat renders the template first.
ids=$($LILAC tokenize --model $TINY "The quick brown fox" | tr -d '[] ')
a=$($LILAC generate --model $TINY --prompt "The quick brown fox" -n 6 --print-ids 2>&1)
b=$($LILAC generate --model $TINY --ids "$ids" -n 6 --print-ids 2>&1)
[ -n "$ids" ] && [ "$a" = "$b" ] && ok "--prompt continues exactly like --ids of its tokens" || bad "--prompt: $a vs $b"
printf '{"messages": [{"role": "user", "content": "Hi"}]}' > "$TMP/req.json"
$LILAC render --model $TINY "$TMP/req.json" > "$TMP/prompt.txt"
ids=$($LILAC tokenize --model $TINY --file "$TMP/prompt.txt" | tr -d '[] ')
a=$($LILAC generate --model $TINY --chat "Hi" -n 6 --print-ids 2>&1)
b=$($LILAC generate --model $TINY --ids "$ids" -n 6 --print-ids 2>&1)
[ "$a" = "$b" ] && ok "--chat continues the rendered chat template" || bad "--chat: $a vs $b"
out=$($LILAC generate --model $TINY --chat "Hi" -n 6 2>&1)
[ -n "$out" ] && ok "generate prints text with a tokenizer" || bad "generate text: empty"
a=$($LILAC generate --model $TINY --prompt "x" -n 8 --temperature 0.9 --seed 7 --print-ids 2>&1)
b=$($LILAC generate --model $TINY --prompt "x" -n 8 --temperature 0.9 --seed 7 --print-ids 2>&1)
[ "$a" = "$b" ] && ok "sampling with a seed is reproducible" || bad "seeded sampling: $a vs $b"

# Each bad input: non-zero exit and exactly one line starting with "error:".
expect_error() {
    name=$1
    shift
    out=$("$@" 2>&1 >/dev/null)
    rc=$?
    lines=$(printf '%s\n' "$out" | wc -l | tr -d ' ')
    case "$out" in
        error:*) [ $rc -ne 0 ] && [ "$lines" = 1 ] && ok "$name" || bad "$name (rc=$rc, $lines lines): $out" ;;
        *) bad "$name (rc=$rc): $out" ;;
    esac
}
expect_error "missing --model" $LILAC score --ids 1,2
expect_error "model directory does not exist" $LILAC score --model /nonexistent --ids 1,2
expect_error "ids not integers" $LILAC score --model $TINY --ids 1,x,3
expect_error "empty id list" $LILAC score --model $TINY --ids ""
expect_error "id outside the vocabulary" $LILAC generate --model $TINY --ids 1,512 -n 2
expect_error "negative id" $LILAC generate --model $TINY --ids 1,-3 -n 2
expect_error "id file missing" $LILAC score --model $TINY --ids @"$TMP/none.txt"
expect_error "chunk out of range" $LILAC score --model $TINY --ids 1,2 --chunk 0
expect_error "unknown option" $LILAC score --model $TINY --ids 1 --bogus
expect_error "unknown command" $LILAC frobnicate
expect_error "bad --backend" $LILAC --backend tpu score --model $TINY --ids 1
expect_error "bad --threads" $LILAC --threads many score --model $TINY --ids 1
printf 'not json' > "$TMP/config.json"
expect_error "corrupt config.json" $LILAC score --model "$TMP" --ids 1
expect_error "two prompt kinds" $LILAC generate --model $TINY --ids 1 --prompt x
expect_error "top-p out of range" $LILAC generate --model $TINY --ids 1 --top-p 2

for c in score generate; do
    $LILAC $c --help | grep -q -- "--model" && ok "$c --help lists its options" || bad "$c --help"
done
$LILAC --help | grep -q "generate" && ok "lilac --help lists the commands" || bad "lilac --help"
$LILAC --version | grep -q "backends: cpu" && ok "--version lists the backends" || bad "--version"

[ $fails -eq 0 ] || { echo "engine.sh: $fails failed"; exit 1; }
echo "engine.sh: all passed"
