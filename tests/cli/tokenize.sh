#!/bin/sh
# tokenize.sh — `lilac tokenize` / `lilac detokenize` on the tiny fixture's
# tokenizer (ids from the Hugging Face tokenizers library, see
# tests/fixtures/tiny/tokenize_golden_dev.json), and their error exits.
LILAC=${LILAC:-./lilac}
MODEL=tests/fixtures/tiny
TMP=$(mktemp -d /tmp/lilac_tokenize_sh.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0
fail=0

ok() {
    pass=$((pass + 1))
}
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*" >&2
}
# expect NAME WANT GOT
expect() {
    if [ "$2" = "$3" ]; then ok; else bad "$1: want '$2', got '$3'"; fi
}
# status NAME WANT_RC (runs the rest of the line)
status() {
    name=$1
    want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" = "$want" ]; then ok; else bad "$name: exit $rc, want $want ($(cat "$TMP/err"))"; fi
}

expect "tokenize" "[39,354,319,11,306,269,75,67,0]" "$("$LILAC" tokenize --model $MODEL 'Hello, world!')"
expect "tokenize added tokens" "[480,343,261,481]" "$("$LILAC" tokenize --model $MODEL '<|im_start|>user<|im_end|>' | tr -d ' ')"
split=$("$LILAC" tokenize --model $MODEL --split-special '<|im_start|>')
case "$split" in
    "[27,91,321,62,355,274,83,91,29]") ok ;;
    "[480]") bad "--split-special still matched <|im_start|>" ;;
    *) bad "--split-special printed '$split'" ;;
esac
expect "tokenize empty" "[]" "$("$LILAC" tokenize --model $MODEL '')"

# exact bytes from a file, including a trailing newline and CRLF
printf 'line one\r\nline two\n' >"$TMP/text"
ids=$("$LILAC" tokenize --model $MODEL --file "$TMP/text")
"$LILAC" detokenize --model $MODEL "$(echo "$ids" | tr -d '[]')" >"$TMP/back"
if cmp -s "$TMP/text" "$TMP/back"; then ok; else bad "--file round trip changed the bytes"; fi

expect "detokenize" "Hello, world!" "$("$LILAC" detokenize --model $MODEL 39,354,319,11,306,269,75,67,0)"
printf '39 354 319\n11\t306 269 75 67 0\n' >"$TMP/ids"
expect "detokenize @FILE" "Hello, world!" "$("$LILAC" detokenize --model $MODEL "@$TMP/ids")"
expect "detokenize special" "user" "$("$LILAC" detokenize --model $MODEL --skip-special 480,343,261,481)"

# errors: an id out of range exits 1 and says which; usage errors exit 2
status "id out of range" 1 "$LILAC" detokenize --model $MODEL 39,99999
if grep -q 99999 "$TMP/err"; then ok; else bad "out-of-range message does not name the id: $(cat "$TMP/err")"; fi
status "negative id" 1 "$LILAC" detokenize --model $MODEL 39,-1
status "not an id" 1 "$LILAC" detokenize --model $MODEL 39,abc
status "missing tokenizer" 1 "$LILAC" tokenize --model "$TMP/nowhere" hi
if grep -q tokenizer.json "$TMP/err"; then ok; else bad "missing tokenizer message: $(cat "$TMP/err")"; fi
printf '{"model": {"type": "BPE", "vocab": {"a": 0}' >"$TMP/tokenizer.json"
status "truncated tokenizer.json" 1 "$LILAC" tokenize --model "$TMP" hi
status "no --model" 2 "$LILAC" tokenize hi
status "TEXT and --file" 2 "$LILAC" tokenize --model $MODEL --file "$TMP/text" hi
status "no ids" 2 "$LILAC" detokenize --model $MODEL
status "unknown option" 2 "$LILAC" tokenize --model $MODEL --bogus hi

# --help is built from the option tables
status "tokenize --help" 0 "$LILAC" tokenize --help
if grep -q -- "--file" "$TMP/out"; then ok; else bad "tokenize --help lacks --file"; fi
status "detokenize --help" 0 "$LILAC" detokenize --help
if grep -q -- "--skip-special" "$TMP/out"; then ok; else bad "detokenize --help lacks --skip-special"; fi
status "bench tokenizer --help" 0 "$LILAC" bench tokenizer --help
if grep -q -- "--seconds" "$TMP/out"; then ok; else bad "bench tokenizer --help lacks --seconds"; fi

echo "tokenize.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
