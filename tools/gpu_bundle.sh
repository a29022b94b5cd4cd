#!/bin/sh
# gpu_bundle.sh — builds lilac here for the GPU machine (which has the CUDA
# toolkit but none of our Debian libraries) and gathers what the run needs in
# .gpubundle/: the binary, the GPU test binaries, and the shared libraries
# the binary links that a bare CUDA image may lack, then packs it into
# .gpubundle.tgz.  Carry .gpubundle.tgz; gpu_check.sh unpacks it and sets
# LD_LIBRARY_PATH=.gpubundle/lib.
#
# --lilac-only: the binary and its libraries, no tests (about 9 MB instead of
# 26 gzipped: room for bench/peer.sh's llama.cpp tarball in the same call).
set -e
tests=$(ls tests/unit/test_gpu_*.c | sed "s|tests/unit/\(.*\)\.c|build/gpu/tests/\1|")
[ "${1:-}" = --lilac-only ] && tests=
# shellcheck disable=SC2086 # tests: a list of targets
make -j2 BUILD=build/gpu STATIC_DEPS=1 CUDA_ARCH='-gencode arch=compute_90a,code=sm_90a' build/gpu/lilac $tests >/dev/null
rm -rf .gpubundle
mkdir -p .gpubundle/lib .gpubundle/tests
cp build/gpu/lilac .gpubundle/
for t in $tests; do cp "$t" .gpubundle/tests/; done
ldd build/gpu/lilac | awk '/=> \// {print $3}' | grep -v -E 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux' |
    while read -r lib; do cp -L "$lib" .gpubundle/lib/; done
strip --strip-debug .gpubundle/lilac .gpubundle/tests/* 2>/dev/null || true
# The working tree and the carried files share a 64 MiB limit: carry the
# gzipped bundle (about a quarter of the size); gpu_check.sh unpacks it.
tar -czf .gpubundle.tgz .gpubundle
du -sh .gpubundle .gpubundle.tgz
