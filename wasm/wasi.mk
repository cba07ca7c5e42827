# The CLI, the library and the unit tests built for WASI (wasm32-wasi with
# SIMD128) and run under node's WASI: `make test-wasm`. Included by the top
# Makefile. The Emscripten build for browsers is wasm/emscripten/.
#
#   make wasi            $(BUILD)/wasi/wisp (a WASI command module) and the unit tests
#   make test-wasm       unit and CLI suites under node (part of make test)
#   make test-wasm-full  the same with every CLI test
#
# WASI has no threads (the CLI's pool is serial there, see cli/thread_pool.h),
# no mmap (files are read into memory) and no process ids (wasi-libc's getpid
# emulation names temporary files).

# Debian's clang-14 with wasi-libc; llvm-ar writes the symbol index wasm-ld needs
WASI_CC      ?= $(firstword $(shell command -v clang-14 clang 2>/dev/null) clang) --target=wasm32-wasi
WASI_AR      ?= $(firstword $(shell command -v llvm-ar-14 llvm-ar 2>/dev/null) llvm-ar)
WASI_BUILD   := $(BUILD)/wasi
WASI_CFLAGS  := -O3 -msimd128 -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS
# stack as on Linux (the default is 64 KiB); no -s: wasm-opt would drop SIMD
WASI_LDFLAGS := -Wl,-z,stack-size=8388608 -Wl,--strip-debug
WASI_LDLIBS  := -lm -lwasi-emulated-getpid -lwasi-emulated-signal -lwasi-emulated-process-clocks
# --no-turbo-fast-api-calls: node 20's fast wasm->C++ calls into node:wasi
# crash (SIGSEGV, exit 139) after a compacting GC, which a module that grew
# its memory by tens of MB triggers; see wasm/run-wasi.mjs for the evidence
WASI_RUN     := node --no-warnings --no-turbo-fast-api-calls $(abspath wasm/run-wasi.mjs)
# unit tests that cannot exist on WASI, and why
WASI_NO_UNIT := test_arena_discipline
WASI_NO_UNIT_WHY := counts allocations by interposing glibc's malloc
WASI_UNIT_BIN := $(filter-out $(WASI_NO_UNIT:%=$(WASI_BUILD)/tests/%),$(UNIT_SRC:tests/unit/%.c=$(WASI_BUILD)/tests/%))
# CLI tests make test runs under node (test-wasm-full runs them all)
WASI_QUICK_CLI := test_golden_logits test_run_greedy test_bad_input test_plan_exact test_convert_llama2c

# Without the WASI toolchain or node the runs cannot happen: fail, naming
# them (scripts/install-deps.sh installs them).
WASI_MISSING := $(strip $(foreach t,$(firstword $(WASI_CC)) $(WASI_AR) node,$(if $(shell command -v $(t) 2>/dev/null),,$(t))) \
                  $(if $(wildcard /usr/include/wasm32-wasi/stdio.h),,wasi-libc))
WASI_APT := clang-14 lld-14 llvm-14 wasi-libc libclang-rt-14-dev-wasm32 nodejs

.PHONY: wasi test-wasm test-wasm-full
wasi:
	@$(MAKE) -s --no-print-directory CC="$(WASI_CC)" AR="$(WASI_AR)" CFLAGS="$(WASI_CFLAGS)" \
	  LDFLAGS="$(WASI_LDFLAGS)" LDLIBS="$(WASI_LDLIBS)" BUILD=$(WASI_BUILD) $(WASI_BUILD)/wisp $(WASI_UNIT_BIN)

wasi_run = TOOLS=$(abspath $(BUILD)/tests/tools) WISP_SHARED=$(SHARED) tests/cross/run_target.sh \
	  --kernels wasm-simd128 --no-unit "$(WASI_NO_UNIT)=$(WASI_NO_UNIT_WHY)" $(1) wasi $(abspath $(WASI_BUILD)) -- $(WASI_RUN)

ifneq ($(WASI_MISSING),)
test-wasm:
	@echo "FAIL: test-wasm: $(WASI_MISSING) not found (apt-get install $(WASI_APT))"; exit 1
else
test-wasm: wasi $(TOOL_BIN)
	@$(call wasi_run,--cli-tests "$(WASI_QUICK_CLI)")
endif

test-wasm-full: wasi $(TOOL_BIN)
	@$(call wasi_run,)
