# wisp — build, test and benchmark entry points. `make help` lists them.

CC      ?= cc
BUILD   ?= build
SHARED  ?= $(abspath ../shared)
OPT     ?= -O2
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CSTD    := -std=c11
# 64-bit file offsets on 32-bit targets (armv7): multi-GB models, and readdir
# of directories whose entries carry 64-bit cookies
DEFS    := -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS = $(CSTD) $(WARN) $(DEFS) $(CFLAGS) $(EXTRA_CFLAGS) -I. -Icore -Iadapters -Isimd
SIMD_CFLAGS ?= $(CFLAGS)
LDLIBS  := -lm -lpthread

CORE_SRC     := $(sort $(wildcard core/*.c))
SIMD_SRC     := $(sort $(wildcard simd/*.c))
ADAPTERS_SRC := $(sort $(wildcard adapters/*.c))
CLI_SRC      := $(sort $(wildcard cli/*.c))
LIB_SRC      := $(CORE_SRC) $(SIMD_SRC) $(ADAPTERS_SRC)
LIB_OBJ      := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ      := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TESTLIB_SRC  := $(sort $(wildcard tests/lib/*.c))
TESTLIB_OBJ  := $(TESTLIB_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC     := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN     := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC     := $(sort $(wildcard tests/tools/*.c))
TOOL_BIN     := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/tools/%)

SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

.PHONY: all lib cli tests test test-unit test-cli asan demo clean help
all: lib cli

help:
	@echo "make              build libwisp.a and the CLI at $(BUILD)/wisp"
	@echo "make demo         generate, fine-tune a LoRA, generate again (MODEL=, DATA= to use your own)"
	@echo "make test         run every test (unit, golden, CLI, cross-target, sanitizers, valgrind, fuzz smoke)"
	@echo "make test-quick   the native unit and CLI tests, with make test's summary"
	@echo "make test-unit    unit and golden tests only (native)"
	@echo "make test-cli     end-to-end tests of the wisp command"
	@echo "make test-clean-checkout  every build target the READMEs show, on a fresh clone"
	@echo "make test-sanitize  unit + CLI tests built with ASan+UBSan; test-valgrind: under valgrind memcheck"
	@echo "make test-sanitize-full, test-valgrind-full  the same with the slowest tests too (make test leaves them out)"
	@echo "make coverage     line and branch coverage per folder of the native unit and CLI tests (gcov)"
	@echo "make fuzz         libFuzzer on every parser (FUZZ_SECONDS=60 each); test-fuzz-smoke: 10 s each"
	@echo "make test-matrix-full  every truncation/corruption case of every model and adapter file"
	@echo "make web          the npm package (wasm) in $(BUILD)/web; test-web, bench-web, demo-web"
	@echo "make bench-relaxed-dot  wasm decode loop: SIMD128 16-bit dot vs relaxed SIMD 8-bit dot (Node 24, Chromium)"
	@echo "make embedded     bare-metal firmware (Cortex-M4/M7, RISC-V) at $(BUILD)/embedded/"
	@echo "make test-embedded  run the firmware under QEMU against the native engine; budget table"
	@echo "make test-arm     aarch64/armv7 builds under qemu (Pi 3/4/5 CPUs); test-arm-full runs every test"
	@echo "make test-wasm    the WASI build under node; test-wasm-full runs every CLI test"
	@echo "make demo-finetune  fine-tune stories260K on Shakespeare; figures and text before/after"
	@echo "make bench-train  LoRA training tokens/s and memory vs PyTorch (part of make bench)"
	@echo "make bench-infer  prefill/decode vs llama.cpp on made models, roofline (part of make bench)"
	@echo "make bench-decode-bandwidth  decode's products alone vs the read test, round by round (THREADS, ROUNDS, TYPE)"
	@echo "make clean        remove $(BUILD)/"
	@echo "SHARED=path       reference folder (default ../shared)"

lib: $(BUILD)/libwisp.a
cli: $(BUILD)/wisp

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# SIMD_CFLAGS: the kernels' own flags, when a build wants them other than
# CFLAGS (the fuzzers' library leaves them uninstrumented, see tests/fuzz/fuzz.mk)
$(BUILD)/obj/simd/%.o: simd/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(DEFS) $(SIMD_CFLAGS) $(EXTRA_CFLAGS) -I. -Icore -Iadapters -Isimd -MMD -MP -c $< -o $@

$(BUILD)/obj/tests/lib/%.o: tests/lib/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/lib -DWISP_DEFAULT_SHARED='"$(SHARED)"' -MMD -MP -c $< -o $@

$(BUILD)/libwisp.a: $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/wisp: $(CLI_OBJ) $(BUILD)/libwisp.a
	$(CC) $(ALL_CFLAGS) $(CLI_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(TESTLIB_OBJ) $(BUILD)/libwisp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/lib -Icli -MMD -MP $< $(TESTLIB_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/tests/tools/%: tests/tools/%.c $(TESTLIB_OBJ) $(BUILD)/libwisp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/lib -Iadapters -MMD -MP $< $(TESTLIB_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

tests: $(UNIT_BIN) $(TOOL_BIN)
# only ever prerequisites of pattern rules: keep make from deleting them as intermediates
.SECONDARY: $(TESTLIB_OBJ)

test-unit: tests
	@tests/run_unit.sh $(BUILD) $(UNIT_BIN)

# The CLI built with ASan+UBSan, for the hostile-input tests: in the folder
# and with the flags of test-sanitize's build (tests/hardening.mk), which so
# compiles the library once for both.
asan:
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CFLAGS="-O1 -g $(SANITIZE)" LDFLAGS="$(SANITIZE)" cli

test-cli: all $(TOOL_BIN) asan
	@WISP=$(abspath $(BUILD)/wisp) WISP_ASAN=$(abspath $(SAN_BUILD)/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) WISP_SHARED=$(SHARED) \
	  WORK=$(abspath $(BUILD)/tests/cli) tests/run_cli.sh

# make test runs every part even after one failed (valgrind first: it is the
# longest serial run, about 10 minutes, so with -j2 everything else runs beside
# it), then adds up what each recorded into the closing line "N passed, N
# failed, N skipped" (tests/run_part.sh, tests/summary.sh). What every part
# needs is built first, once, so parts running side by side never build the
# same file. Before anything, test-deps installs what the suite needs or stops
# naming it. make test-quick: the native unit and CLI tests only.
TEST_PARTS   := test-valgrind test-unit test-cli test-sanitize test-web test-embedded test-arm test-wasm test-fuzz-smoke \
                test-clean-checkout
QUICK_PARTS  := test-unit test-cli
TEST_RESULTS := $(BUILD)/test-results
run_parts = +@rm -rf $(TEST_RESULTS); \
	tests/run_part.sh --build $(TEST_RESULTS) build $(MAKE) --no-print-directory all tests asan; \
	$(MAKE) --no-print-directory $(1:%=part-%); \
	tests/summary.sh $(TEST_RESULTS)

.PHONY: test-quick test-deps
# the shared test data (else a stop naming what is missing), the packages
# (installed when root with apt, else a stop naming them and the command), then
# the web tests' npm tools
test-deps:
	@scripts/need-shared.sh $(SHARED)
	@scripts/install-deps.sh
	@$(MAKE) --no-print-directory web-deps
test: test-deps
	$(call run_parts,$(TEST_PARTS))
# test-web, test-arm and test-wasm build these from fresh folders of their own,
# so make test's clean checkout leaves them out (alone, it builds them all)
test: export CLEAN_SKIP = web arm64 armv7
test-quick:
	@scripts/need-shared.sh $(SHARED)
	$(call run_parts,$(QUICK_PARTS))
part-%:
	@tests/run_part.sh $(TEST_RESULTS) $* $(MAKE) --no-print-directory $*

# every build target the READMEs show, on a fresh clone (tests/clean_checkout.sh)
.PHONY: test-clean-checkout
test-clean-checkout:
	@MAKE_CMD="$(MAKE)" SHARED=$(SHARED) tests/clean_checkout.sh

demo: all
	@scripts/demo.sh $(MODEL) $(DATA)

clean:
	rm -rf $(BUILD)

include tests/fuzz/fuzz.mk
include tests/hardening.mk
include tests/coverage.mk
include embedded/embedded.mk
include bench/train.mk
include bench/infer.mk
include wasm/emscripten/emscripten.mk
include tests/arm/arm.mk
include wasm/wasi.mk

-include $(shell find $(BUILD)/obj $(BUILD)/tests -maxdepth 4 -name '*.d' 2>/dev/null)
