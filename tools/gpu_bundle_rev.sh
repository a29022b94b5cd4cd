#!/bin/sh
# gpu_bundle_rev.sh REV [--xz] — lilac alone as built at commit REV (a
# baseline), bundled as `gpu_bundle.sh --lilac-only` does but under
# .gpubundle-base/, packed into .gpubundle-base.tgz (--xz: into
# build/gbbase.tar.xz, a fifth of the size), so one GPU call can run it
# beside the working tree's bundle (`run_session.sh abdec` or `abtry`).
# Builds in a temporary git worktree; the working tree is not touched.
set -e
[ $# -eq 1 ] || { [ $# -eq 2 ] && [ "$2" = --xz ]; } || { echo "usage: $0 REV [--xz]" >&2; exit 2; }
rev=$(git rev-parse --verify --short "$1^{commit}")
root=$(git rev-parse --show-toplevel)
wt=$(mktemp -d /tmp/lilac-base.XXXXXX)
trap 'git -C "$root" worktree remove --force "$wt" 2>/dev/null; rm -rf "$wt"' EXIT
git worktree add -q --detach "$wt" "$rev"
(cd "$wt" && sh tools/gpu_bundle.sh --lilac-only > /dev/null && mv .gpubundle .gpubundle-base && tar -czf .gpubundle-base.tgz .gpubundle-base)
if [ "${2:-}" = --xz ]; then
    mkdir -p "$root/build"
    (cd "$wt" && tar -cf - .gpubundle-base | xz -9 -T2) > "$root/build/gbbase.tar.xz"
    echo "$root/build/gbbase.tar.xz: lilac at $rev ($(du -h "$root/build/gbbase.tar.xz" | cut -f1))"
else
    mv "$wt/.gpubundle-base.tgz" "$root/.gpubundle-base.tgz"
    echo "$root/.gpubundle-base.tgz: lilac at $rev ($(du -h "$root/.gpubundle-base.tgz" | cut -f1))"
fi
