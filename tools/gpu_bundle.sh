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
# --xz: also build/gb.tar.xz (tar | xz -9: about 6 MB with the tests where
# the .tgz is 31, as the kernel images repeat long runs of bytes that xz's
# window finds and gzip's 32 KB one does not; ~1 min here), which
# bench/kernels/run_session.sh unpacks instead of .gpubundle.tgz: carry it
# alone, or beside a baseline's build/gbbase.tar.xz (gpu_bundle_rev.sh --xz).
set -e
tests=$(ls tests/unit/test_gpu_*.c | sed "s|tests/unit/\(.*\)\.c|build/gpu/tests/\1|")
xz=
for a in "$@"; do
    case $a in
    --lilac-only) tests= ;;
    --xz) xz=1 ;;
    *) echo "gpu_bundle.sh: unknown option $a (--lilac-only, --xz)" >&2; exit 2 ;;
    esac
done
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
if [ -n "$xz" ]; then
    mkdir -p build
    tar -cf - .gpubundle | xz -9 -T2 > build/gb.tar.xz
    du -sh build/gb.tar.xz
fi
