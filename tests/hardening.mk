# Hardening runs (included by the top Makefile):
#   make test-sanitize      every unit and CLI test, everything built with ASan+UBSan
#                           (part of make test, which leaves the slowest CLI tests to
#                           test-sanitize-full)
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
# CLI tests that exercise the core paths (load, generate, golden logits, plan,
# hostile files); the rest re-run the same code. The adapter and training CLI
# tests (9 and 1.5 minutes under valgrind) are in test-valgrind-full: the unit
# tests' training steps (test_train_ops, test_train_chat) and adapter files
# (test_lora_gguf, test_peft) run under valgrind here, and all of it under ASan.
VG_CLI      := test_run_greedy test_golden_logits test_plan_exact test_bad_input
VG_SLOW_CLI := test_lora_grad test_merge_lora
# golden models under valgrind: llama's path (gemma3's three runs alone took
# 7 minutes); all of them run natively, under ASan and in test-valgrind-full
VG_GOLDEN := stories260K
# unit tests of 1-15 minutes each under valgrind (45 together) whose code the
# quicker ones run too: finite differences and training plans (test_train_ops,
# test_finetune), golden dequantization (test_quant), arena sweeps (every test),
# every kernel length (the golden logits and matmul tests run the same kernels);
# and the ring KV cache, LoRA application, embeddings and DPO's finite
# differences, which run natively, under ASan and on WASI; the quantizer round trips
# (2 minutes: the same blocks test_quant_golden checks), the tokenizer's speed test
# (a timing, meaningless under valgrind), and prompt and prefix tuning's finite
# differences over five models (13 minutes each under memcheck; they run natively,
# under ASan and on WASI)
VG_SLOW_UNIT := test_train_fd test_train_plan test_quant_golden test_arena_limits test_kv_ring test_simd_kernels \
                test_lora_apply test_train_dpo test_embedding test_quant test_tokenizer_speed \
                test_train_prompt test_train_prefix

.PHONY: test-sanitize test-sanitize-full test-valgrind test-valgrind-full test-matrix-full

$(BUILD)/tests/tools/kill_at.so: tests/tools/preload/kill_at.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -D_GNU_SOURCE -O1 -g -shared -fPIC $< -o $@ -ldl

tests: $(BUILD)/tests/tools/kill_at.so
test-cli: $(BUILD)/tests/tools/kill_at.so

# CLI tests make test leaves out under ASan (test-sanitize-full runs them): the
# crash-injection test kills processes at write points (nothing for ASan to
# see that the hostile-input tests do not), and the per-family fine-tuning
# runs (7 minutes under ASan) go through the training code that test_train_fd
# checks under ASan on every family (and test_finetune end to end on llama); the
# golden logits at every kernel level (5 minutes: test_simd_kernels checks every
# kernel under ASan), DPO end to end (4 minutes: test_train_dpo's loss and
# gradients run under ASan) and the 462 schema-guided generations (4 minutes:
# test_guided_mask_exact runs the guide's masks under ASan, test_chat_grammar
# a guided chat)
SAN_SLOW_CLI := test_crash_safety test_finetune_arch test_kernel_levels test_finetune_dpo test_guided_json
san_run = @$(MAKE) --no-print-directory BUILD=$(SAN_BUILD) CFLAGS="-O1 -g $(SANITIZE)" LDFLAGS="$(SANITIZE)" all tests && \
	$(SAN_ENV) tests/run_unit.sh $(SAN_BUILD) $(UNIT_SRC:tests/unit/%.c=$(SAN_BUILD)/tests/%) && \
	$(SAN_ENV) $(1) WISP=$(abspath $(SAN_BUILD)/wisp) WISP_ASAN=$(abspath $(SAN_BUILD)/wisp) \
	  TOOLS=$(abspath $(SAN_BUILD)/tests/tools) WISP_SHARED=$(SHARED) WORK=$(abspath $(SAN_BUILD)/tests/cli) tests/run_cli.sh

test-sanitize:
	$(call san_run,CLI_LEAVE_OUT="$(SAN_SLOW_CLI)")
test-sanitize-full:
	$(call san_run,)

# vg_run UNIT_BINARIES[,ENVIRONMENT]
vg_run = @command -v valgrind >/dev/null || { echo "FAIL: $@: valgrind not found (apt-get install valgrind)"; exit 1; }; \
	  $(2) WISP_KERNELS=$(VG_KERNELS) VALGRIND="$(VG_CMD)" tests/run_valgrind.sh $(abspath $(VG_BUILD)) $(SHARED) "$(VG_CLI) $(3)" $(1)

test-valgrind: all tests
	@echo "unit tests left out under valgrind (test-valgrind-full runs them): $(VG_SLOW_UNIT)"
	@echo "golden models under valgrind (test-valgrind-full runs all): $(VG_GOLDEN)"
	@echo "cli tests left out under valgrind (test-valgrind-full runs them): $(VG_SLOW_CLI)"
	$(call vg_run,$(filter-out $(VG_SLOW_UNIT:%=$(BUILD)/tests/%),$(UNIT_BIN)),GOLDEN_MODELS="$(VG_GOLDEN)")

test-valgrind-full: all tests
	$(call vg_run,$(UNIT_BIN),,$(VG_SLOW_CLI))

test-matrix-full: all $(TOOL_BIN) asan
	@MATRIX_FULL=1 WISP=$(abspath $(BUILD)/wisp) WISP_ASAN=$(abspath $(SAN_BUILD)/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) \
	  WISP_SHARED=$(SHARED) WORK=$(abspath $(BUILD)/tests/cli-full) tests/run_each.sh "matrix (full)" \
	  $(abspath $(BUILD)/tests/cli-full) tests/cli/test_matrix.sh
