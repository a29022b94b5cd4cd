# lilac — `make` builds ./lilac; `make test` builds and runs every test.
#
#   make                 release build -> ./lilac (CUDA backend when nvcc is found)
#   make CUDA=0          CPU-only build
#   make test            every test (unit, CLI, server); GPU tests skip without a GPU
#   make test-asan       the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make test-gpu        the GPU tests (needs an NVIDIA GPU)
#   make run             starts the main job on the bundled tiny model
#
# Library code is everything under src/ except src/main.c; it is archived into
# $(BUILD)/liblilac.a, which the binary and the tests link.

.DEFAULT_GOAL := all
BUILD ?= build/release
SAN   ?= 0
CUDA  ?= auto
CUDA_HOME ?= /usr/local/cuda
# Hopper first (wgmma/TMA-capable sm_90a); sm_80 machine code for other GPUs of compute 8.x.
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_80,code=sm_80
NVCC  ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
ifeq ($(CUDA),auto)
  CUDA := $(if $(NVCC),1,0)
endif

CC      ?= cc
OPT     ?= -O2
WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
CFLAGS  := -std=c11 $(OPT) -g $(WARN) -D_GNU_SOURCE -pthread -Iinclude -Isrc -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  := -lmicrohttpd -ljansson -lpcre2-8 -lutf8proc -lm -pthread
LDFLAGS :=

ifeq ($(SAN),1)
  CFLAGS  := $(filter-out -O2 -O3,$(CFLAGS)) -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif

# STATIC_DEPS=1 links the small third-party libraries statically so the binary
# can be carried to a machine without them (the GPU machine); libmicrohttpd
# stays dynamic (its TLS stack has no static build in Debian).
ifeq ($(STATIC_DEPS),1)
  LDLIBS := -lmicrohttpd -Wl,-Bstatic -ljansson -lpcre2-8 -lutf8proc -Wl,-Bdynamic -lm -pthread
endif

SRC      := $(shell find src -name '*.c' ! -path src/main.c ! -path 'src/backend/cuda/*' | sort)
CU_SRC   := $(shell find src -name '*.cu' | sort)
CUDA_C_SRC := $(shell find src/backend/cuda -name '*.c' 2>/dev/null | sort)
OBJ      := $(SRC:%.c=$(BUILD)/%.o)
# The web chat page, embedded in the binary (tools/embed.sh writes it as C).
WEB_PAGE := src/server/web/chat.html
OBJ      += $(BUILD)/gen/web_page.o
# The commit of the build (tools/commit.sh; rewritten only when it changes).
OBJ      += $(BUILD)/gen/commit.o
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ifeq ($(CU_SRC),)
  CUDA := 0
endif
ifeq ($(CUDA),1)
  CU_OBJ    := $(CU_SRC:%.cu=$(BUILD)/%.o) $(CUDA_C_SRC:%.c=$(BUILD)/%.o)
  OBJ       += $(CU_OBJ)
  CFLAGS    += -DLILAC_CUDA=1 -I$(CUDA_HOME)/include
  NVCCFLAGS := -O3 -std=c++17 -Iinclude -Isrc -DLILAC_CUDA=1 -lineinfo \
               -Xcompiler -Wall,-Wextra,-Wno-unused-parameter -MMD -MP \
               $(CUDA_ARCH) $(EXTRA_NVCCFLAGS)
  LDLIBS    += -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
endif

DEPS_STAMP := build/.deps-ok

# Objects depend on the flags they were built with: a change of CUDA=, SAN=
# or OPT= rebuilds them instead of linking stale objects.
FLAGS_STAMP := $(BUILD)/.flags
FLAGS_NOW   := $(CC) $(CFLAGS) | $(NVCC) $(NVCCFLAGS) | $(CUDA)
$(shell mkdir -p $(BUILD) && { [ -f $(FLAGS_STAMP) ] && [ "$$(cat $(FLAGS_STAMP))" = '$(FLAGS_NOW)' ] || echo '$(FLAGS_NOW)' > $(FLAGS_STAMP); })

.PHONY: FORCE all deps test test-run test-asan test-gpu fuzz fuzz-run run clean

all: lilac

deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/install-deps.sh
	@sh tools/install-deps.sh
	@mkdir -p $(dir $@) && touch $@

# The real Qwen3.6-35B-A3B config.json, built into the binary (src/model/config.c
# includes it; the generated file is committed, and remade when the fixture changes).
src/model/qwen36_config.inc: tests/fixtures/qwen36-config/config.json tools/embed_file.sh
	sh tools/embed_file.sh $< $@ lilac_qwen36_config

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/gen/web_page.c: $(WEB_PAGE) tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh lilac_web_page $(WEB_PAGE) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/web_page.o: $(BUILD)/gen/web_page.c $(FLAGS_STAMP)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/gen/commit.c: FORCE
	@mkdir -p $(dir $@)
	@sh tools/commit.sh > $@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; }; rm -f $@.tmp

$(BUILD)/gen/commit.o: $(BUILD)/gen/commit.c $(FLAGS_STAMP)
	$(CC) $(CFLAGS) -c $< -o $@

FORCE:

$(BUILD)/liblilac.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/lilac: $(BUILD)/src/main.o $(BUILD)/liblilac.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liblilac.a tests/unit/check.h $(FLAGS_STAMP) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(BUILD)/liblilac.a $(LDFLAGS) $(LDLIBS)

# The release binary lives at the repository root.
lilac: $(BUILD)/lilac
	cp -f $< $@

test: lilac $(TEST_BIN)
	@sh tests/run.sh $(BUILD) ./lilac

# Sanitizer build: same tests, separate objects; CUDA is left out because
# ASan and the CUDA runtime do not share an address space peacefully.
test-asan:
	$(MAKE) BUILD=build/asan SAN=1 CUDA=0 test-run

test-run: $(BUILD)/lilac $(TEST_BIN)
	@sh tests/run.sh $(BUILD) $(BUILD)/lilac

# libFuzzer targets for the parsers (tests/fuzz/), clang with ASan + UBSan.
FUZZ_SECONDS ?= 20
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	$(MAKE) BUILD=build/fuzz CC=clang CUDA=0 OPT=-O1 \
	    EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" fuzz-run

fuzz-run: $(FUZZ_BIN)
	@sh tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/liblilac.a | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< $(BUILD)/liblilac.a $(LDLIBS)

test-gpu: lilac $(TEST_BIN)
	@LILAC_REQUIRE_GPU=1 sh tests/run.sh $(BUILD) ./lilac gpu

# The OpenAI-compatible server on the bundled tiny model (writes gibberish).
RUN_PORT ?= 8080
run: lilac
	@echo "lilac serve: http://127.0.0.1:$(RUN_PORT)/v1  (Ctrl-C stops it)"
	@echo "try:  curl http://127.0.0.1:$(RUN_PORT)/v1/chat/completions -H 'Content-Type: application/json' \\"
	@echo "        -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"max_tokens\": 16, \"chat_template_kwargs\": {\"enable_thinking\": false}}'"
	./lilac serve --model tests/fixtures/tiny --port $(RUN_PORT) --ctx 8192

clean:
	rm -rf build lilac

-include $(OBJ:.o=.d) $(BUILD)/src/main.d $(TEST_BIN:=.d)
