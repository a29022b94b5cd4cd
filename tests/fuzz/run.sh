#!/bin/sh
# run.sh BUILD SECONDS — runs every fuzz target for SECONDS each, seeded with
# the fixtures; any crash, leak or sanitizer report fails the run.
BUILD=$1
SECS=${2:-20}
fail=0
for f in "$BUILD"/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    corpus=$(mktemp -d)
    case $name in
        fuzz_safetensors) cp tests/fixtures/tiny/golden.safetensors "$corpus/" ;;
        fuzz_config) cp tests/fixtures/tiny/config.json "$corpus/a"; cp tests/fixtures/qwen36-config/config.json "$corpus/b" ;;
        fuzz_chat) printf '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f", "arguments": "{\\"a\\": 1}"}}]}, {"role": "tool", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}]}' > "$corpus/a" ;;
        fuzz_parse) printf '\003\005reasoning\n</think>\n\ntext<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>' > "$corpus/a" ;;
        fuzz_tokenizer) printf 'Hello, world! <|im_start|>user\n caf\303\251 123' > "$corpus/a" ;;
        fuzz_messages) printf '{"max_tokens": 8, "system": [{"type": "text", "text": "s"}], "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}, {"type": "text", "text": "a"}, {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]}, {"type": "text", "text": "more"}]}], "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"}, "thinking": {"type": "enabled", "budget_tokens": 1024}, "stop_sequences": ["x"]}' > "$corpus/a" ;;
        fuzz_gguf) printf 'GGUF\003\000\000\000\001\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000\001\000\000\000\000\000\000\000k\004\000\000\000\007\000\000\000\001\000\000\000\000\000\000\000t\001\000\000\000\040\000\000\000\000\000\000\000\002\000\000\000\000\000\000\000\000\000\000\000' > "$corpus/a"; head -c 64 /dev/zero >> "$corpus/a" ;;
        fuzz_snapshot) LILAC_SNAP_SEED="$corpus/a" "$f" -runs=0 "$corpus" > /dev/null 2>&1 ;;
        fuzz_schema) printf '\000{"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}, "n": {"type": "integer", "minimum": -3, "maximum": 12}, "l": {"type": "array", "items": {"enum": ["x", 1, null]}, "maxItems": 2}, "d": {"type": "string", "format": "date"}, "r": {"$ref": "#/$defs/t"}}, "required": ["a"], "$defs": {"t": {"anyOf": [{"type": "boolean"}, {"$ref": "#/$defs/t"}]}}}' > "$corpus/a"
                     printf '\003[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"p": {"type": "string"}, "q": {"type": ["integer", "null"]}}, "required": ["p"]}}}]' > "$corpus/b" ;;
        fuzz_chat_store) LILAC_CHAT_SEED="$corpus" "$f" -runs=0 "$corpus" > /dev/null 2>&1 ;;
        fuzz_stop) printf '\001\003END\004Hello E\005ND of\002 it' > "$corpus/a" ;;
    esac
    maxlen=65536
    [ "$name" = fuzz_snapshot ] && maxlen=393216 # a whole tiny-model snapshot of 48 positions (~290 KB)
    echo "== $name ($SECS s)"
    if "$f" -max_total_time="$SECS" -max_len=$maxlen -rss_limit_mb=2048 "$corpus" > "$corpus.log" 2>&1; then
        tail -n 1 "$corpus.log"
    else
        tail -n 30 "$corpus.log"
        echo "FAIL: $name"
        fail=1
    fi
    rm -rf "$corpus" "$corpus.log"
done
exit $fail
