#!/bin/sh
# run.sh — the server suite: real clients (the official `openai` Python
# package, and curl for raw HTTP/SSE) against `lilac serve` on the tiny
# fixture.  Run from the repository root (tests/run.sh does).
#
# Uses $LILAC (default ./lilac; `make test-asan` points it at the ASan build).
# Sets up .venv/ (gitignored) with `openai` and `anthropic` from PyPI on first
# use; if pip cannot install them, the suite FAILS — it is never skipped.
# `jsonschema` is installed the same way; without it the tests that validate
# constrained outputs say SKIP (the rest of test_grammar.py still runs).
# test_server.py starts its own servers on free ports and stops them with
# SIGTERM, checking that they exit 0 (under ASan: with no leaks).
set -u
LILAC=${LILAC:-./lilac}
VENV=.venv
PY=$VENV/bin/python

if ! command -v curl >/dev/null 2>&1; then
    echo "FAIL: curl is not installed (tools/install-deps.sh installs it)"
    exit 1
fi
if ! [ -x "$PY" ] || ! "$PY" -c 'import openai, anthropic' 2>/dev/null; then
    echo "server: setting up $VENV with the openai and anthropic packages (pip)"
    [ -x "$PY" ] || python3 -m venv "$VENV" || { echo "FAIL: python3 -m venv $VENV failed"; exit 1; }
    "$VENV/bin/pip" install -q --disable-pip-version-check openai anthropic ||
        { echo "FAIL: pip could not install the openai and anthropic packages (network to PyPI needed once)"; exit 1; }
    "$PY" -c 'import openai, anthropic' || { echo "FAIL: openai/anthropic do not import after install"; exit 1; }
fi
# jsonschema validates constrained outputs (test_grammar.py); without it those tests say SKIP
if ! "$PY" -c 'import jsonschema' 2>/dev/null; then
    "$VENV/bin/pip" install -q --disable-pip-version-check jsonschema ||
        echo "server: warning: pip could not install jsonschema; the structured-output tests will SKIP"
fi
exec "$PY" tests/server/test_server.py --lilac "$LILAC" "$@"
