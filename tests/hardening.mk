# Hardening runs (included by the top Makefile):
#   make test-sanitize      every unit and CLI test, everything built with ASan+UBSan
#   make test-valgrind      the unit tests and the core CLI tests under valgrind memcheck
#                           (part of make test; test-valgrind-full adds the slowest unit tests)
#   make test-matrix-full   the whole truncation/corruption matrix (test-cli samples it)
# and the crash-injection library the crash-safety test preloads.

SAN_BUILD := $(BUILD)/sanitize
# leaks are findings too; a sanitizer report must fail the test that caused it
SAN_ENV   := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99:strict_string_checks=1:detect_stack_use_after_return=1 \
             UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=98
VG_BUILD  := $(BUILD)
# valgrind 3.19 cannot decode AVX-512 (and hides it from CPUID): pin AVX2 so the
# same kernels run whatever the host offers
VG_KERNELS ?= avx2
# (add --track-origins=yes to find where an uninitialised value came from: twice as slow)
VG_CMD    := valgrind -q --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite
# CLI tests that exercise the core paths (load, generate, golden logits, plan, adapters,
# a training pass, hostile files); the rest re-run the same code. (test_finetune's
# runs take minutes each under valgrind: lora-grad's forward and backward pass and
# the unit tests' training steps cover that code.)
VG_CLI    := test_run_greedy test_golden_logits test_plan_exact test_bad_input test_lora_grad test_merge_lora
# unit tests of 1-6 minutes each under valgrind (12 together) whose code the
# quicker ones run too: finite differences and training plans (test_train_ops,
# test_finetune), golden dequantization (test_quant), arena sweeps (every test)
VG_SLOW_UNIT := test_train_fd test_train_plan test_quant_golden test_arena_limits

.PHONY: test-sanitize test-valgrind test-valgrind-full test-matrix-full

$(BUILD)/tests/tools/kill_at.so: tests/tools/preload/kill_at.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -D_GNU_SOURCE -O1 -g -shared -fPIC $< -o $@ -ldl

tests: $(BUILD)/tests/tools/kill_at.so
test-cli: $(BUILD)/tests/tools/kill_at.so

test-sanitize:
	@$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CFLAGS="-O1 -g $(SANITIZE)" LDFLAGS="$(SANITIZE)" all tests
	@$(SAN_ENV) tests/run_unit.sh $(SAN_BUILD) $(UNIT_SRC:tests/unit/%.c=$(SAN_BUILD)/tests/%)
	@$(SAN_ENV) WISP=$(abspath $(SAN_BUILD)/wisp) WISP_ASAN=$(abspath $(SAN_BUILD)/wisp) \
	  TOOLS=$(abspath $(SAN_BUILD)/tests/tools) WISP_SHARED=$(SHARED) WORK=$(abspath $(SAN_BUILD)/tests/cli) tests/run_cli.sh

vg_run = @command -v valgrind >/dev/null || { echo "FAIL: $@: valgrind not found (apt-get install valgrind)"; exit 1; }; \
	  WISP_KERNELS=$(VG_KERNELS) VALGRIND="$(VG_CMD)" tests/run_valgrind.sh $(abspath $(VG_BUILD)) $(SHARED) "$(VG_CLI)" $(1)

test-valgrind: all tests
	@echo "unit tests left out under valgrind (test-valgrind-full runs them): $(VG_SLOW_UNIT)"
	$(call vg_run,$(filter-out $(VG_SLOW_UNIT:%=$(BUILD)/tests/%),$(UNIT_BIN)))

test-valgrind-full: all tests
	$(call vg_run,$(UNIT_BIN))

test-matrix-full: all $(TOOL_BIN) asan
	@MATRIX_FULL=1 WISP=$(abspath $(BUILD)/wisp) WISP_ASAN=$(abspath $(BUILD)/asan/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) \
	  WISP_SHARED=$(SHARED) WORK=$(abspath $(BUILD)/tests/cli-full) tests/run_each.sh "matrix (full)" \
	  $(abspath $(BUILD)/tests/cli-full) tests/cli/test_matrix.sh
