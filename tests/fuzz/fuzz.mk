# libFuzzer harnesses (clang-14, ASan + UBSan) for every parser of outside
# input. `make fuzz FUZZ_SECONDS=N` runs each for N seconds (default 60);
# `make test-fuzz-smoke` (part of `make test`) runs each for
# FUZZ_SMOKE_SECONDS (default 10). Corpora and findings stay in $(BUILD)/fuzz.

FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/%)
# the run script makes its small seeds (tiny models, adapters, PEFT folders) with these
FUZZ_SEED_TOOLS := $(BUILD)/wisp $(BUILD)/tests/tools/tiny_model $(BUILD)/tests/tools/lora_fixture
FUZZ_ENV     = WISP_SHARED=$(SHARED) TOOLS=$(BUILD)/tests/tools WISP=$(BUILD)/wisp

.PHONY: fuzz fuzz-build test-fuzz-smoke

# the library itself, instrumented for coverage and sanitized; the SIMD
# kernels are not (no parser is in them, and clang takes over ten minutes to
# instrument the AVX-512 file; the kernel tests run them under ASan)
$(FUZZ_DIR)/libwisp.a: $(LIB_SRC)
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) \
	  CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" SIMD_CFLAGS="-O1 -g" lib

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_DIR)/libwisp.a
	$(FUZZ_CC) $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -I. -Icore -Iadapters -Isimd $< \
	  $(FUZZ_DIR)/libwisp.a -lm -o $@

fuzz-build: $(FUZZ_BIN) $(FUZZ_SEED_TOOLS)

fuzz: fuzz-build
	@$(FUZZ_ENV) tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(notdir $(FUZZ_BIN))

test-fuzz-smoke: fuzz-build
	@$(FUZZ_ENV) tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SMOKE_SECONDS) $(notdir $(FUZZ_BIN))
