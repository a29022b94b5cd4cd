#!/bin/sh
# gguf_llama.sh — lilac's GGUF export run by llama.cpp (tools/gguf_check.py):
# F32 export logits vs the HF golden, Q4 exports dequantised by ggml vs the
# F32 export.  Needs a llama.cpp build: LLAMA_CPP_SRC (the source tree, for
# the headers) and LLAMA_CPP_LIB (the directory of libllama.so); says SKIP
# without them.  A CPU build is enough, e.g. from llama-cpp-python 0.3.36's
# sdist (vendor/llama.cpp):
#   cmake -S vendor/llama.cpp -B build -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
#         -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_COMMON=OFF \
#         -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=ON && cmake --build build --target llama -j2
#   LLAMA_CPP_SRC=vendor/llama.cpp LLAMA_CPP_LIB=build/bin make test
LILAC=${LILAC:-./lilac}
if [ -z "$LLAMA_CPP_SRC" ] || [ -z "$LLAMA_CPP_LIB" ] || [ ! -f "$LLAMA_CPP_SRC/include/llama.h" ] ||
    [ ! -e "$LLAMA_CPP_LIB/libllama.so" ]; then
    echo "  SKIP: llama.cpp is not built here (set LLAMA_CPP_SRC and LLAMA_CPP_LIB; see this file's header)"
    exit 0
fi
python3 tools/gguf_check.py --llama-src "$LLAMA_CPP_SRC" --llama-lib "$LLAMA_CPP_LIB" --lilac "$LILAC"
