#!/bin/sh
# install-deps.sh — makes sure the Debian packages lilac builds against are
# present.  Installs them with apt-get when run as root (or with passwordless
# sudo); otherwise prints the exact command and fails.
set -e
PKGS="libmicrohttpd-dev libjansson-dev libpcre2-dev libutf8proc-dev curl python3 python3-venv"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
# python3/venv may come from elsewhere (pyenv); only insist when absent.
if echo "$missing" | grep -q python3 && command -v python3 >/dev/null 2>&1 && python3 -c 'import venv' 2>/dev/null; then
    missing=$(echo "$missing" | tr ' ' '\n' | grep -v '^python3' | tr '\n' ' ')
    [ -z "$(echo "$missing" | tr -d ' ')" ] && exit 0
fi
echo "lilac: installing missing packages:$missing" >&2
if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "lilac: please run: sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq $missing >&2
