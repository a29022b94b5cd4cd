#!/bin/sh
# chat.sh — `lilac chat` through a pseudo-terminal (tests/cli/chat_pty.py:
# multi-turn, cached-token reuse, /reset, cancel, line editing, /save and
# /load, non-tty input) and the progress bar of a long prefill.
LILAC=${LILAC:-./lilac}
exec python3 tests/cli/chat_pty.py "$LILAC"
