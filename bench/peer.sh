#!/bin/sh
# peer.sh — lilac side by side with llama.cpp on one GPU, the same weights
# (issue 10).  Steps, as arguments, in order:
#
#   pack        (here, with network) llama.cpp from the llama-cpp-python 0.3.36 sdist (vendors
#               llama.cpp 0c1e57098, which has qwen35moe), trimmed to what llama-bench needs,
#               -> .peer/llama.cpp.tgz; and the lilac GPU bundle (tools/gpu_bundle.sh)
#   buildhere   (here, no GPU: CUDA 13 toolkit, a long build on few cores, PEER_JOBS=2) what build
#               builds, with a CPU baseline any x86-64-v3 host runs (AVX2, no AVX-512) instead of
#               -march=native, RPATH $ORIGIN; stripped, with libgomp and llama.h/ggml.h
#               -> .peer/llama-cuda-sm90.tgz (cuBLAS and the CUDA runtime: the GPU machine's)
#   build       (GPU) llama-bench and libllama (shared) with CUDA for sm_90 -> .peer/llama-build/bin/;
#               with .peer/llama-cuda-sm90.tgz, unpacks it there instead and checks that
#               its libraries resolve (ldd), else adds the CUDA directory to LD_LIBRARY_PATH
#   model       (GPU) lilac synth --gguf-exact (full size, or PEER_LAYERS) -> .peer/model,
#               lilac export-gguf -> .peer/model.gguf (all Q4_0: the same codes and bytes)
#   round N     (GPU) one round: lilac's sweep and llama-bench's, in alternating order
#               (odd rounds lilac first), every length once; JSON under .peer/results/roundN
#   report      table (.peer/results/peer.md) and plot (peer.png) over the rounds
#   consistency teacher-forced logits of the same PEER_CONSIST_TOKENS ids (default 256) on the
#               model step's weights: lilac --backend cpu score (the fp32 reference), lilac
#               --backend cuda score (skipped, saying why, without a GPU), llama.cpp on the Q4_0
#               GGUF through tools/llama_logits (compiled by this step against libllama) on the GPU
#               (-ngl 99, when its build has one) and on the CPU alone; tools/consistency_report.py:
#               perplexity and its difference, top-1 agreement, KL, max |dlogit| per engine
#               -> .peer/results/consistency/consistency.md and .json (copied to $OUT/consistency)
#   all         build model round 1 round 2 round 3 report consistency
#
# Carry .peer/llama.cpp.tgz (or the prebuilt .peer/llama-cuda-sm90.tgz) and
# .gpubundle.tgz to the GPU machine; each GPU call may run one or more steps (a
# call is limited to 10 minutes: build, model and each round fit one call each;
# `model consistency` should fit one, estimated 5-8 minutes: docs/BENCHMARKS.md;
# the prebuilt build takes seconds and can share the model call).
# Knobs: PEER_LENGTHS (default the ten 256..128K), PEER_TOKENS (decode tokens,
# 64), PEER_LAYERS (synth layers, 0 = all; the consistency step needs >= 4, a
# full-attention layer, for llama.cpp), PEER_LLAMA_ARGS (default "-fa 1 -ngl
# 99"), PEER_LILAC_ARGS (extra bench options), PEER_ALTERNATE=length (alternate
# the engines at every length, not per round: a model load per measurement),
# PEER_CONSIST_TOKENS, PEER_CONSIST_SEED (the ids: a Park-Miller sequence mod
# the vocabulary, seed 1) or PEER_CONSIST_IDS=FILE (your own, whitespace-
# separated), PEER_CONSIST_F32=1 (also llama.cpp on the --f32 export, on the
# CPU: small PEER_LAYERS only, 4 bytes a weight), PEER_DIR (instead of .peer),
# PEER_SYNTH_CONFIG=DIR (synth another config.json's shapes, e.g. the tiny one),
# PEER_JOBS (buildhere's parallel jobs, 2).
# Off the GPU machine: LILAC=./lilac (instead of the bundle) and
# LLAMA_CPP_SRC / LLAMA_CPP_LIB (an existing llama.cpp build, as for
# tests/cli/gguf_llama.sh, instead of the build step's), e.g. on a CPU:
#   LILAC=./lilac LLAMA_CPP_SRC=DIR/llama.cpp LLAMA_CPP_LIB=DIR/build/bin PEER_LAYERS=4 \
#       sh bench/peer.sh model consistency
set -eu
cd "$(dirname "$0")/.."
P=${PEER_DIR:-.peer}
LENGTHS=${PEER_LENGTHS:-256,512,1024,2048,4096,8192,16384,32768,65536,131072}
TOKENS=${PEER_TOKENS:-64}
LLAMA_ARGS=${PEER_LLAMA_ARGS:--fa 1 -ngl 99}
LILAC_ARGS=${PEER_LILAC_ARGS:-}
SDIST=llama_cpp_python-0.3.36
B=.gpubundle
LLAMA_SRC=${LLAMA_CPP_SRC:-$P/src/llama.cpp}
LLAMA_LIB=${LLAMA_CPP_LIB:-$P/llama-build/bin}
die() { echo "peer.sh: $*" >&2; exit 1; }
lilac() {
    if [ -n "${LILAC:-}" ]; then "$LILAC" "$@"; return; fi
    [ -x $B/lilac ] || [ -f $B.tgz ] || die "no lilac: carry $B.tgz (sh tools/gpu_bundle.sh) or set LILAC=path/to/lilac"
    [ -x $B/lilac ] || tar -xzf $B.tgz
    LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} $B/lilac "$@"
}
PREBUILT=llama-cuda-sm90
# llama_cuda_libs: the CUDA directory (if any) that holds what the llama.cpp libraries
# need and the loader does not find on its own (a prebuilt build on another machine);
# nothing when they resolve, or when no directory known here makes them resolve
llama_cuda_libs() {
    if ! ldd "$LLAMA_LIB"/libggml-cuda.so 2>/dev/null | grep -q 'not found'; then return 0; fi
    # shellcheck disable=SC2046 # the wheels' directories: one word each
    for c in "${CUDA_HOME:-/usr/local/cuda}"/lib64 /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
        $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cu13", "lib") for p in nvidia.__path__))' 2>/dev/null); do
        if [ -e "$c/libcublas.so.13" ] &&
            ! LD_LIBRARY_PATH=$c${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$LLAMA_LIB"/libggml-cuda.so | grep -q 'not found'; then
            echo "$c"
            return 0
        fi
    done
}
llama_env() { # CMD...: with llama_cuda_libs on LD_LIBRARY_PATH when needed
    cl=$(llama_cuda_libs)
    if [ -n "$cl" ]; then LD_LIBRARY_PATH=$cl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; else "$@"; fi
}
llama_bench() { llama_env "$P"/llama-build/bin/llama-bench "$@"; }

pack_llama() { # the sdist (network only when $P has none) -> $P/src/llama.cpp, trimmed -> $P/llama.cpp.tgz
    mkdir -p "$P"/src
    if [ ! -f "$P"/$SDIST.tar.gz ]; then
        pip download llama-cpp-python==0.3.36 --no-binary :all: --no-deps -d "$P"
    fi
    rm -rf "$P"/src/llama.cpp
    tar -xzf "$P"/$SDIST.tar.gz -C "$P"/src $SDIST/vendor/llama.cpp
    mv "$P"/src/$SDIST/vendor/llama.cpp "$P"/src/llama.cpp
    rm -rf "$P"/src/$SDIST
    # llama-bench needs the library, ggml (CPU + CUDA), common and vendor/; the
    # models, docs, tests, examples and the other tools stay behind
    (cd "$P"/src/llama.cpp && rm -rf models docs tests examples benches media pocs gguf-py conversion scripts/*.py \
        ggml/src/ggml-vulkan ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-cann ggml/src/ggml-musa \
        ggml/src/ggml-metal ggml/src/ggml-webgpu ggml/src/ggml-zdnn ggml/src/ggml-hexagon &&
        find tools -mindepth 1 -maxdepth 1 ! -name llama-bench ! -name CMakeLists.txt -exec rm -rf {} + &&
        echo 'add_subdirectory(llama-bench)' > tools/CMakeLists.txt)
    tar -czf "$P"/llama.cpp.tgz -C "$P"/src llama.cpp
}

step_pack() {
    pack_llama
    sh tools/gpu_bundle.sh
    du -sh "$P"/llama.cpp.tgz .gpubundle.tgz
}

# llama_cmake BUILDDIR CUDA_ARCHITECTURES [cmake options]: llama-bench and libllama (shared: the consistency
# step's tools/llama_logits links the same libllama), CUDA for sm_90 only, flash attention
# kernels as the default build has them (GGML_CUDA_FA on, not FA_ALL_QUANTS), no BLAS, no
# NCCL (one GPU) and no OpenSSL (nothing is downloaded), so the libraries need no more than
# CUDA's runtime and cuBLAS
llama_cmake() { # BUILDDIR CUDA_ARCHITECTURES [cmake options]
    bd=$1 arch=$2
    shift 2
    [ -d "$P"/src/llama.cpp ] || { mkdir -p "$P"/src && tar -xzf "$P"/llama.cpp.tgz -C "$P"/src; }
    cmake -S "$P"/src/llama.cpp -B "$bd" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DGGML_CUDA_FA=ON -DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF -DGGML_BLAS=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON -DBUILD_SHARED_LIBS=ON "$@"
}

# prebuilt ($P/llama-cuda-sm90.tgz, from buildhere) or built here, into $P/llama-build
step_build() {
    if [ -f "$P"/$PREBUILT.tgz ]; then
        rm -rf "$P"/llama-build "${P:?}"/$PREBUILT
        tar -xzf "$P"/$PREBUILT.tgz -C "$P"
        mv "$P"/$PREBUILT "$P"/llama-build
        echo "peer: build: unpacked $P/$PREBUILT.tgz into $P/llama-build ($(head -n 1 "$P"/llama-build/BUILDINFO))"
        if ldd "$P"/llama-build/bin/llama-bench "$P"/llama-build/bin/*.so | grep 'not found' | sort -u | grep .; then
            cuda_libs=$(llama_cuda_libs)
            [ -n "$cuda_libs" ] || die "build: the prebuilt llama.cpp's libraries do not resolve (above; libcuda.so.1 is the driver's), nor with any CUDA directory known here"
            echo "peer: build: those resolve with LD_LIBRARY_PATH=$cuda_libs (set for every llama.cpp run here)"
        fi
    else
        llama_cmake "$P"/llama-build 90 -DGGML_NATIVE=ON >"$P"/llama-cmake.log
        cmake --build "$P"/llama-build --target llama-bench llama -j"$(nproc)" >"$P"/llama-build.log
    fi
    llama_bench --help >"$P"/llama-bench-help.txt 2>&1 || die "build: llama-bench --help failed: $(tail -n 3 "$P"/llama-bench-help.txt)"
    grep -v '^ *-' "$P"/llama-bench-help.txt | head -n 3
}

# buildhere (no GPU needed, a long build on few cores): the build step's llama.cpp for this
# machine's CUDA toolkit, with a CPU baseline any x86-64-v3 host runs (AVX2, FMA, F16C, BMI2;
# no AVX-512), RPATH $ORIGIN, CUDA architecture 90-real (the same sm_90 machine code as 90,
# without the compute_90 PTX beside it that only a newer GPU's driver would compile:
# about 20 MB of libggml-cuda's 60); stripped, with libgomp and the headers tools/llama_logits
# needs -> $P/llama-cuda-sm90.tgz, which the build step then unpacks instead of building
step_buildhere() {
    [ -f "$P"/llama.cpp.tgz ] || [ -d "$P"/src/llama.cpp ] || pack_llama
    bd=$P/llama-build-sm90
    t0=$(date +%s)
    # no driver here (no libcuda.so.1): link llama-bench against the toolkit's stub, which
    # libggml-cuda's libcuda.so.1 then resolves to at link time only (-rpath-link)
    mkdir -p "$bd"/stubs
    if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
        nvcc_dir=$(dirname "$(command -v nvcc)") || die "buildhere: no nvcc (the CUDA toolkit) on PATH"
        for stub in "$nvcc_dir"/../lib64/stubs/libcuda.so "$nvcc_dir"/../targets/x86_64-linux/lib/stubs/libcuda.so ""; do
            [ -z "$stub" ] || [ ! -f "$stub" ] || break
        done
        [ -n "$stub" ] || die "buildhere: no libcuda.so.1 and no stubs/libcuda.so next to $nvcc_dir"
        ln -sf "$(cd "$(dirname "$stub")" && pwd)/libcuda.so" "$bd"/stubs/libcuda.so.1
    fi
    stubs=$(cd "$bd"/stubs && pwd)
    # shellcheck disable=SC2016 # $ORIGIN: for the dynamic loader, not the shell
    llama_cmake "$bd" 90-real -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
        -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
        -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$stubs" \
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON \
        >"$P"/llama-cmake-sm90.log
    echo "peer: buildhere: building in $bd (log $P/llama-build-sm90.log)"
    cmake --build "$bd" --target llama-bench llama -j"${PEER_JOBS:-2}" >"$P"/llama-build-sm90.log 2>&1 ||
        die "buildhere: the build failed: tail $P/llama-build-sm90.log"
    t1=$(date +%s)
    d=$P/$PREBUILT
    rm -rf "$d"
    mkdir -p "$d"/bin "$d"/include "$d"/ggml/include
    cp "$bd"/bin/llama-bench "$d"/bin/
    # the libraries with their soname links (cp -P keeps a link a link)
    for f in "$bd"/bin/lib*.so*; do cp -P "$f" "$d"/bin/; done
    gomp=$(ldd "$bd"/bin/libggml-cpu.so | awk '/libgomp/ {print $3}')
    if [ -n "$gomp" ]; then cp -L "$gomp" "$d"/bin/; fi
    find "$d"/bin -type f -exec strip --strip-unneeded {} +
    cp "$P"/src/llama.cpp/include/*.h "$d"/include/
    cp "$P"/src/llama.cpp/ggml/include/*.h "$d"/ggml/include/
    {
        echo "llama.cpp 0c1e57098 (llama-cpp-python 0.3.36), CUDA sm_90, built $(date -u '+%Y-%m-%d %H:%M UTC'), this run's build $((t1 - t0)) s (less when $bd held objects)"
        echo "built on: $(uname -srm), $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores, -j${PEER_JOBS:-2}"
        echo "nvcc: $(nvcc --version | tail -n 1); cc: $(cc --version | head -n 1)"
        echo "glibc: $(ldd --version | head -n 1)"
        grep -E '^(CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES|BUILD_SHARED_LIBS|GGML_NATIVE|GGML_CUDA|GGML_CUDA_FA|GGML_CUDA_FA_ALL_QUANTS|GGML_CUDA_NCCL|GGML_BLAS|GGML_OPENMP|GGML_AVX|GGML_AVX2|GGML_AVX512|GGML_FMA|GGML_F16C|GGML_BMI2|CMAKE_INSTALL_RPATH):' \
            "$bd"/CMakeCache.txt
        echo "needs (ldd here; libgomp is carried):"
        ldd "$d"/bin/llama-bench "$d"/bin/libggml-cuda.so | awk '/=>/ {sub(/ \(0x[0-9a-f]*\)$/, ""); print " " $0}' | sort -u
    } >"$d"/BUILDINFO
    tar -czf "$P"/$PREBUILT.tgz -C "$P" $PREBUILT
    cat "$d"/BUILDINFO
    du -sh "$d" "$P"/$PREBUILT.tgz
    rm -rf "$d"
}

step_model() {
    # synth takes --layers N >= 1 (no flag: all); PEER_SYNTH_CONFIG: another config.json's shapes
    layers_opt=
    if [ "${PEER_LAYERS:-0}" != 0 ]; then layers_opt="--layers $PEER_LAYERS"; fi
    # shellcheck disable=SC2086 # layers_opt: zero or two words
    [ -f "$P"/model/model.safetensors ] || lilac synth --out "$P"/model --gguf-exact $layers_opt \
        ${PEER_SYNTH_CONFIG:+--config "$PEER_SYNTH_CONFIG"}
    lilac export-gguf "$P"/model "$P"/model.gguf 2>&1 | tee "$P"/export.log
    grep -q ' 0 Q4_1' "$P"/export.log || { echo "peer.sh: the export is not all Q4_0" >&2; exit 1; }
}

# shellcheck disable=SC2086 # LILAC_ARGS and LLAMA_ARGS are option lists: split on purpose
run_lilac() { # OUT.json [bench options]
    out=$1
    shift
    lilac bench --model "$P"/model -n "$TOKENS" --repeats 1 --no-profile --json "$out" $LILAC_ARGS "$@" >"${out%.json}.md"
}
# shellcheck disable=SC2086
run_llama() { # OUT.json prefill|decode LENGTHS
    if [ "$2" = prefill ]; then llama_bench -m "$P"/model.gguf $LLAMA_ARGS -p "$3" -n 0 -r 1 -o json >"$1"
    else llama_bench -m "$P"/model.gguf $LLAMA_ARGS -p 0 -n "$TOKENS" -d "$3" -r 1 -o json >"$1"; fi
}

step_round() {
    n=$1
    d=$P/results/round$n
    mkdir -p "$d"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >"$d/gpu_start.txt" || true
    if [ "${PEER_ALTERNATE:-round}" = length ]; then
        for L in $(echo "$LENGTHS" | tr ',' ' '); do
            echo "peer: round $n, length $L"
            if [ $((n % 2)) = 1 ]; then
                run_lilac "$d/lilac_p$L.json" --prefill "$L"; run_llama "$d/llama_p$L.json" prefill "$L"
                run_lilac "$d/lilac_d$L.json" --decode "$L"; run_llama "$d/llama_d$L.json" decode "$L"
            else
                run_llama "$d/llama_p$L.json" prefill "$L"; run_lilac "$d/lilac_p$L.json" --prefill "$L"
                run_llama "$d/llama_d$L.json" decode "$L"; run_lilac "$d/lilac_d$L.json" --decode "$L"
            fi
        done
    elif [ $((n % 2)) = 1 ]; then
        echo "peer: round $n: lilac, then llama.cpp"
        run_lilac "$d/lilac.json" --prefill "$LENGTHS" --decode "$LENGTHS"
        run_llama "$d/llama_prefill.json" prefill "$LENGTHS"
        run_llama "$d/llama_decode.json" decode "$LENGTHS"
    else
        echo "peer: round $n: llama.cpp, then lilac"
        run_llama "$d/llama_prefill.json" prefill "$LENGTHS"
        run_llama "$d/llama_decode.json" decode "$LENGTHS"
        run_lilac "$d/lilac.json" --prefill "$LENGTHS" --decode "$LENGTHS"
    fi
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader >"$d/gpu_end.txt" || true
}

step_report() {
    python3 tools/peer_report.py "$P"/results
    if [ -n "${OUT:-}" ]; then
        cp "$P"/results/peer.md "$P"/results/peer.json "$OUT"/
        if [ -f "$P"/results/peer.png ]; then cp "$P"/results/peer.png "$OUT"/; fi
    fi
}

# consistency: every engine's logits of the same ids, against lilac's fp32 CPU backend
build_llama_logits() { # -> $P/llama_logits, against $LLAMA_SRC (or the prebuilt's headers) / $LLAMA_LIB
    src=$LLAMA_SRC
    # the prebuilt build (build step, from $P/llama-cuda-sm90.tgz) carries the headers itself
    if [ -z "${LLAMA_CPP_SRC:-}" ] && [ ! -f "$src/include/llama.h" ] && [ -f "$P/llama-build/include/llama.h" ]; then
        src=$P/llama-build
    fi
    if ! { [ -f "$src/include/llama.h" ] && [ -e "$LLAMA_LIB/libllama.so" ]; }; then
        die "no llama.cpp build at LLAMA_CPP_SRC=$src, LLAMA_CPP_LIB=$LLAMA_LIB (run the build step, or set both)"
    fi
    cc -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I "$src/include" -I "$src/ggml/include" \
        tools/llama_logits.c -o "$P"/llama_logits -L "$LLAMA_LIB" -lllama -lggml -lggml-base \
        -Wl,-rpath,"$(cd "$LLAMA_LIB" && pwd)" || die "tools/llama_logits.c does not build against $LLAMA_LIB"
}

# timed NAME WHAT STDOUT CMD...: runs CMD (stdout to STDOUT, under $CD), appends NAME's
# line to runs.tsv: its logits file NAME.f32, the wall time, the command as run
timed() {
    name=$1 what=$2 stdout=$3
    shift 3
    echo "peer: consistency: $name: $* > $CD/$stdout"
    t0=$(date +%s.%N)
    "$@" >"$CD/$stdout" || die "consistency: $name failed ($(tail -n 3 "$CD/$stdout" | tr '\n' ' ')): $*"
    t1=$(date +%s.%N)
    [ -s "$CD/$name.f32" ] || die "consistency: $name wrote no $CD/$name.f32"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$name.f32" "$what" "$(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}')" \
        "$* > $CD/$stdout" >>"$CD/runs.tsv"
}

step_consistency() {
    CD=$P/results/consistency
    n=${PEER_CONSIST_TOKENS:-256}
    if ! { [ -f "$P"/model/config.json ] && [ -f "$P"/model.gguf ]; }; then
        die "consistency: no $P/model and $P/model.gguf: run the model step first"
    fi
    vocab=$(python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("text_config", c)["vocab_size"])' \
        "$P"/model/config.json) || die "consistency: no vocab_size in $P/model/config.json"
    if [ -n "${PEER_CONSIST_IDS:-}" ]; then
        awk '{ for (i = 1; i <= NF; i++) print $i }' "$PEER_CONSIST_IDS" >"$P"/ids.tmp ||
            die "consistency: cannot read $PEER_CONSIST_IDS"
        ids_from="from $PEER_CONSIST_IDS"
    else
        # Park-Miller: every product below 2^53, so any awk gives the same ids
        awk -v n="$n" -v x="${PEER_CONSIST_SEED:-1}" -v V="$vocab" \
            'BEGIN { for (i = 0; i < n; i++) { x = (x * 16807) % 2147483647; printf "%d\n", x % V } }' >"$P"/ids.tmp
        ids_from="Park-Miller x = 16807 x mod (2^31 - 1), seed ${PEER_CONSIST_SEED:-1}, id = x mod $vocab"
    fi
    rm -rf "$CD"
    mkdir -p "$CD"
    mv "$P"/ids.tmp "$CD/ids.txt"
    n=$(wc -l <"$CD/ids.txt" | tr -d ' ')
    [ "$n" -ge 2 ] || die "consistency: $n ids; need at least 2"
    [ "$n" -ge 192 ] || echo "peer: consistency: note: $n positions, fewer than the issue's 192"
    # a prebuilt llama.cpp may need the CUDA directory on the loader's path (for the link too)
    cl=$(llama_cuda_libs)
    if [ -n "$cl" ]; then
        LD_LIBRARY_PATH=$cl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export LD_LIBRARY_PATH
    fi
    build_llama_logits
    layers=$(python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c.get("text_config", c)["num_hidden_layers"])' \
        "$P"/model/config.json)
    # llama.cpp 0c1e57098 aborts (GGML_ASSERT(buffer) in llama_kv_cache::set_input_k_idxs) on a
    # qwen35moe model without a full-attention layer, e.g. PEER_LAYERS=2
    if ! python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); t = c.get("text_config", c)
sys.exit(0 if "full_attention" in t.get("layer_types", []) else 1)' "$P"/model/config.json; then
        die "consistency: $P/model ($layers layers) has no full-attention layer, which llama.cpp cannot run: PEER_LAYERS >= 4"
    fi
    gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | head -n 1)
    {
        echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
        echo "machine: $(uname -srm), $(nproc) cores available, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
        echo "cpu: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
        echo "gpu: ${gpu:-none (no nvidia-smi, or it found no GPU)}"
        echo "model: lilac synth --gguf-exact, $layers layers ($P/model), exported Q4_0 by lilac export-gguf ($P/model.gguf)"
        echo "ids: $n, $ids_from"
        echo "lilac: $(lilac --version | tr '\n' ';' | sed 's/;$//; s/;/; /g')"
        echo "llama.cpp: 0c1e57098 as vendored by llama-cpp-python 0.3.36 (LLAMA_CPP_LIB=$LLAMA_LIB); $("$P"/llama_logits info | grep '^device:' | sed 's/^device: //' | tr '\n' ';' | sed 's/;$//; s/;/, /g')"
        echo "llama.cpp system: $("$P"/llama_logits info | sed -n 's/^system: //p')"
        echo "lilac binary: ${LILAC:-$B/lilac (from $B.tgz)}; script: sh bench/peer.sh consistency; report: tools/consistency_report.py $CD"
    } >"$CD/env.txt"
    : >"$CD/runs.tsv"
    : >"$CD/skipped.tsv"
    timed cpu "lilac, CPU backend (fp32)" cpu.json lilac --backend cpu score --model "$P"/model --ids @"$CD/ids.txt" \
        --logits-out "$CD/cpu.f32"
    if ! lilac --version | grep -q '^backends:.*cuda'; then
        printf 'cuda\tthis lilac is built without the CUDA backend\n' >>"$CD/skipped.tsv"
        echo "peer: consistency: cuda: skipped (lilac built without CUDA)"
    elif lilac --version | grep -q '^gpu: none'; then
        printf 'cuda\tno GPU (%s)\n' "$(lilac --version | sed -n 's/^gpu: none: //p')" >>"$CD/skipped.tsv"
        echo "peer: consistency: cuda: skipped (no GPU)"
    else
        timed cuda "lilac, CUDA backend" cuda.json lilac --backend cuda score --model "$P"/model --ids @"$CD/ids.txt" \
            --logits-out "$CD/cuda.f32"
    fi
    if "$P"/llama_logits info | grep -q 'type=gpu'; then
        timed llama-cuda "llama.cpp, Q4_0 GGUF, all layers on the GPU" llama-cuda.out \
            "$P"/llama_logits logits "$P"/model.gguf @"$CD/ids.txt" "$CD/llama-cuda.f32" 99
    else
        printf 'llama-cuda\tthis llama.cpp build has no GPU device\n' >>"$CD/skipped.tsv"
        echo "peer: consistency: llama-cuda: skipped (no GPU device in the llama.cpp build)"
    fi
    timed llama-cpu "llama.cpp, Q4_0 GGUF, CPU only" llama-cpu.out \
        "$P"/llama_logits logits "$P"/model.gguf @"$CD/ids.txt" "$CD/llama-cpu.f32" 0
    if [ "${PEER_CONSIST_F32:-0}" = 1 ]; then
        # the same weights dequantised: llama.cpp without its 8-bit activations (4 bytes a
        # weight: about 17 GB at PEER_LAYERS=4, 140 GB at full size, so small models only)
        [ -f "$P"/model-f32.gguf ] || lilac export-gguf "$P"/model "$P"/model-f32.gguf --f32 -q ||
            die "consistency: the F32 export failed"
        timed llama-cpu-f32 "llama.cpp, F32 GGUF (the same weights dequantised), CPU only" llama-cpu-f32.out \
            "$P"/llama_logits logits "$P"/model-f32.gguf @"$CD/ids.txt" "$CD/llama-cpu-f32.f32" 0
    fi
    python3 tools/consistency_report.py "$CD" || die "consistency: the report failed"
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT/consistency"
        cp "$CD"/consistency.md "$CD"/env.txt "$CD"/runs.tsv "$CD"/skipped.tsv "$CD"/ids.txt \
            "$CD"/*.json "$OUT/consistency/"
    fi
}

[ $# -gt 0 ] || { sed -n '2,/^set -eu/p' "$0" | sed '$d'; exit 2; }
while [ $# -gt 0 ]; do
    s=$1
    shift
    case $s in
    pack) step_pack ;;
    build) step_build ;;
    buildhere) step_buildhere ;;
    model) step_model ;;
    round) [ $# -gt 0 ] || { echo "peer.sh: round N" >&2; exit 2; }; step_round "$1"; shift ;;
    report) step_report ;;
    consistency) step_consistency ;;
    all) step_build; step_model; step_round 1; step_round 2; step_round 3; step_report; step_consistency ;;
    *) echo "peer.sh: unknown step $s" >&2; exit 2 ;;
    esac
done
