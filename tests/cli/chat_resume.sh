#!/bin/sh
# chat_resume.sh — `lilac chat --cache-dir DIR` / `--resume`: a conversation
# and its snapshots kept across runs, the bad-file rules (tests/cli/chat_resume.py).
LILAC=${LILAC:-./lilac}
exec python3 tests/cli/chat_resume.py "$LILAC"
