# libFuzzer harnesses (clang-14, ASan + UBSan) for every parser of outside
# input. `make fuzz FUZZ_SECONDS=N` runs each for N seconds (default 60);
# `make test-fuzz-smoke` (part of `make test`) runs each briefly.

FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_DIR)/%)

.PHONY: fuzz fuzz-build test-fuzz-smoke

# the library itself, instrumented for coverage and sanitized
$(FUZZ_DIR)/libwisp.a: $(LIB_SRC)
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) \
	  CFLAGS="-O1 -g -fsanitize=fuzzer-no-link $(FUZZ_SAN)" lib

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_DIR)/libwisp.a
	$(FUZZ_CC) $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -I. -Icore -Iadapters -Isimd $< \
	  $(FUZZ_DIR)/libwisp.a -lm -o $@

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@WISP_SHARED=$(SHARED) tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(notdir $(FUZZ_BIN))

test-fuzz-smoke: fuzz-build
	@WISP_SHARED=$(SHARED) tests/fuzz/run.sh $(FUZZ_DIR) 8 $(notdir $(FUZZ_BIN))
