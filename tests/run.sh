#!/bin/sh
# run.sh BUILD LILAC [gpu] — runs every test of lilac and summarises.
#   unit tests:   BUILD/tests/test_*          (C, tests/unit/)
#   CLI tests:    tests/cli/*.sh              (shell, against the LILAC binary)
#   server tests: tests/server/run.sh         (real HTTP clients against `lilac serve`)
# With "gpu", runs only the GPU tests (BUILD/tests/test_gpu_*).
BUILD=$1
LILAC=$2
MODE=${3:-all}
export LILAC BUILD
fail=0
passed=0
failed_names=""
run() {
    name=$1
    shift
    echo "== $name"
    if "$@"; then
        passed=$((passed + 1))
    else
        fail=$((fail + 1))
        failed_names="$failed_names $name"
    fi
}
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d) continue ;; esac
    n=$(basename "$t")
    case "$MODE:$n" in
        gpu:test_gpu_*|all:*) run "$n" "$t" ;;
    esac
done
if [ "$MODE" = all ]; then
    for t in tests/cli/*.sh; do
        [ -f "$t" ] || continue
        run "cli/$(basename "$t")" sh "$t"
    done
    if [ -f tests/server/run.sh ]; then
        run "server" sh tests/server/run.sh
    fi
fi
echo
if [ $fail -ne 0 ]; then
    echo "TESTS FAILED: $fail suite(s):$failed_names ($passed passed)"
    exit 1
fi
echo "ALL TESTS PASSED ($passed suites)"
