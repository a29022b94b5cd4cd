#!/bin/sh
# peer.sh — lilac side by side with llama.cpp on one GPU, the same weights
# (issue 10).  Steps, as arguments, in order:
#
#   pack        (here, with network) llama.cpp from the llama-cpp-python 0.3.36 sdist (vendors
#               llama.cpp 0c1e57098, which has qwen35moe), trimmed to what llama-bench needs,
#               -> .peer/llama.cpp.tgz; and the lilac GPU bundle (tools/gpu_bundle.sh)
#   build       (GPU) llama-bench with CUDA for sm_90 -> .peer/llama-build/bin/llama-bench
#   model       (GPU) lilac synth --gguf-exact (full size, or PEER_LAYERS) -> .peer/model,
#               lilac export-gguf -> .peer/model.gguf (all Q4_0: the same codes and bytes)
#   round N     (GPU) one round: lilac's sweep and llama-bench's, in alternating order
#               (odd rounds lilac first), every length once; JSON under .peer/results/roundN
#   report      table (.peer/results/peer.md) and plot (peer.png) over the rounds
#   all         build model round 1 round 2 round 3 report
#
# Carry .peer/llama.cpp.tgz and .gpubundle.tgz to the GPU machine; each GPU call
# may run one or more steps (a call is limited to 10 minutes: build, model and
# each round fit one call each).  Knobs: PEER_LENGTHS (default the ten
# 256..128K), PEER_TOKENS (decode tokens, 64), PEER_LAYERS (synth layers, 0 = all),
# PEER_LLAMA_ARGS (default "-fa 1 -ngl 99"), PEER_LILAC_ARGS (extra bench options),
# PEER_ALTERNATE=length (alternate the engines at every length, not per round:
# a model load per measurement).
set -eu
cd "$(dirname "$0")/.."
P=.peer
LENGTHS=${PEER_LENGTHS:-256,512,1024,2048,4096,8192,16384,32768,65536,131072}
TOKENS=${PEER_TOKENS:-64}
LLAMA_ARGS=${PEER_LLAMA_ARGS:--fa 1 -ngl 99}
LILAC_ARGS=${PEER_LILAC_ARGS:-}
SDIST=llama_cpp_python-0.3.36
B=.gpubundle
lilac() {
    [ -x $B/lilac ] || tar -xzf $B.tgz
    LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} $B/lilac "$@"
}
llama_bench() { $P/llama-build/bin/llama-bench "$@"; }

step_pack() {
    mkdir -p $P/src
    if [ ! -f $P/$SDIST.tar.gz ]; then
        pip download llama-cpp-python==0.3.36 --no-binary :all: --no-deps -d $P
    fi
    rm -rf $P/src/llama.cpp
    tar -xzf $P/$SDIST.tar.gz -C $P/src $SDIST/vendor/llama.cpp
    mv $P/src/$SDIST/vendor/llama.cpp $P/src/llama.cpp
    rm -rf $P/src/$SDIST
    # llama-bench needs the library, ggml (CPU + CUDA), common and vendor/; the
    # models, docs, tests, examples and the other tools stay behind
    (cd $P/src/llama.cpp && rm -rf models docs tests examples benches media pocs gguf-py conversion scripts/*.py \
        ggml/src/ggml-vulkan ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-cann ggml/src/ggml-musa \
        ggml/src/ggml-metal ggml/src/ggml-webgpu ggml/src/ggml-zdnn ggml/src/ggml-hexagon &&
        find tools -mindepth 1 -maxdepth 1 ! -name llama-bench ! -name CMakeLists.txt -exec rm -rf {} + &&
        echo 'add_subdirectory(llama-bench)' > tools/CMakeLists.txt)
    tar -czf $P/llama.cpp.tgz -C $P/src llama.cpp
    sh tools/gpu_bundle.sh
    du -sh $P/llama.cpp.tgz .gpubundle.tgz
}

step_build() {
    [ -d $P/src/llama.cpp ] || { mkdir -p $P/src && tar -xzf $P/llama.cpp.tgz -C $P/src; }
    cmake -S $P/src/llama.cpp -B $P/llama-build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON -DBUILD_SHARED_LIBS=OFF >$P/llama-cmake.log
    cmake --build $P/llama-build --target llama-bench -j"$(nproc)" >$P/llama-build.log
    llama_bench --help | head -n 3
}

step_model() {
    # synth takes --layers N >= 1 (no flag: all layers)
    layers_opt=
    if [ "${PEER_LAYERS:-0}" != 0 ]; then layers_opt="--layers $PEER_LAYERS"; fi
    # shellcheck disable=SC2086 # layers_opt: zero or two words
    [ -f $P/model/model.safetensors ] || lilac synth --out $P/model --gguf-exact $layers_opt
    lilac export-gguf $P/model $P/model.gguf 2>&1 | tee $P/export.log
    grep -q ' 0 Q4_1' $P/export.log || { echo "peer.sh: the export is not all Q4_0" >&2; exit 1; }
}

# shellcheck disable=SC2086 # LILAC_ARGS and LLAMA_ARGS are option lists: split on purpose
run_lilac() { # OUT.json [bench options]
    out=$1
    shift
    lilac bench --model $P/model -n "$TOKENS" --repeats 1 --no-profile --json "$out" $LILAC_ARGS "$@" >"${out%.json}.md"
}
# shellcheck disable=SC2086
run_llama() { # OUT.json prefill|decode LENGTHS
    if [ "$2" = prefill ]; then llama_bench -m $P/model.gguf $LLAMA_ARGS -p "$3" -n 0 -r 1 -o json >"$1"
    else llama_bench -m $P/model.gguf $LLAMA_ARGS -p 0 -n "$TOKENS" -d "$3" -r 1 -o json >"$1"; fi
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
    python3 tools/peer_report.py $P/results
    if [ -n "${OUT:-}" ]; then
        cp $P/results/peer.md $P/results/peer.json "$OUT"/
        if [ -f $P/results/peer.png ]; then cp $P/results/peer.png "$OUT"/; fi
    fi
}

[ $# -gt 0 ] || { sed -n '2,26p' "$0"; exit 2; }
while [ $# -gt 0 ]; do
    s=$1
    shift
    case $s in
    pack) step_pack ;;
    build) step_build ;;
    model) step_model ;;
    round) [ $# -gt 0 ] || { echo "peer.sh: round N" >&2; exit 2; }; step_round "$1"; shift ;;
    report) step_report ;;
    all) step_build; step_model; step_round 1; step_round 2; step_round 3; step_report ;;
    *) echo "peer.sh: unknown step $s" >&2; exit 2 ;;
    esac
done
