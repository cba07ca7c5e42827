# ARM boards (Raspberry Pi 3/4/5, Zero 2): the library, the CLI and the unit
# tests cross-built for aarch64 and 32-bit armv7 and run under qemu-user on
# pinned CPUs. Included by the top Makefile; see docs/arm-boards.md.
#
#   make arm64 / armv7   cross builds in $(BUILD)/arm64, $(BUILD)/armv7
#   make test-arm        kernel tests, golden logits on a subset of models and
#                        the quick unit tests, per CPU (part of make test)
#   make test-arm-full   every unit and CLI test on every CPU (~an hour)
#
# CPUs: cortex-a53 (Pi 3, Zero 2; no dotprod: must choose "neon" and refuse
# "neon-dotprod"), cortex-a76 (Pi 5; dotprod: "neon-dotprod"), and cortex-a7
# in 32-bit mode (armv7 NEON, Raspberry Pi OS 32-bit). qemu is always given
# -cpu: its default accepts every instruction and would hide a SIGILL.

ARM64_CC     ?= aarch64-linux-gnu-gcc
ARMV7_CC     ?= arm-linux-gnueabihf-gcc
ARMV7_CFLAGS ?= -O2 -g -mcpu=cortex-a7 -mfpu=neon-vfpv4
ARM64_BUILD  := $(BUILD)/arm64
ARMV7_BUILD  := $(BUILD)/armv7
QEMU_ARM64   := qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu
QEMU_ARMV7   := qemu-arm -L /usr/arm-linux-gnueabihf -cpu

# What make test runs under emulation (TCG runs 15-25x slower than native):
# unit tests except these slow ones (over 5 s each emulated; 6+ minutes together;
# the model-level ones among them, kv_ring, embedding and arena_limits, run
# the same C as on x86 over kernels test_simd_neon_wasm checks here; prompt and
# prefix tuning's finite differences took 5 minutes each per CPU under qemu)
ARM_SLOW_UNIT   := test_hf_tokenizer test_lora_apply test_quant test_quant_golden test_tokenizer_speed \
                   test_train_fd test_train_dpo test_train_plan test_kv_ring test_embedding test_arena_limits \
                   test_train_prompt test_train_prefix
# golden models: every weight-type family and both architectures on the Pi 5
# path; fewer on the others (the kernel test already checks every type
# bit for bit on every level). Each family of the architecture table once,
# the cheapest golden of each, in its main comparison only (GOLDEN_PASSES=main;
# test-arm-full runs them all): measured under qemu on a loaded 2-core host,
# CPU seconds on the a76 / armv7: gemma3-f16 26 / 22, gemma2-q4_k_m 6.7 / 7.7,
# llama3-rope-q4_k_m 6.0 / 7.2, qwen3-f16 4.0 / 2.9, phi3-longrope-f32 1.5 / 1.6
# (gemma3-f16 with its three passes: 90 on the a76)
ARM_GOLDEN_FAMILIES := syn-llama3-rope-q4_k_m syn-qwen3-f16 syn-gemma2-q4_k_m syn-phi3-longrope-f32
ARM_GOLDEN_A76  := stories260K llama-2-tiny-random syn-llama-gqa-q4_0 syn-llama-gqa-q8_0 syn-llama-gqa-q5_1 \
                   syn-llama-gqa-q2_k syn-llama-gqa-q4_k_m syn-llama-gqa-bf16 syn-qwen2-q4_k_m \
                   $(ARM_GOLDEN_FAMILIES) syn-gemma3-f16
ARM_GOLDEN_A53  := stories260K syn-llama-gqa-q4_0 syn-llama-gqa-q4_k_m syn-qwen2-q8_0
ARM_GOLDEN_ARMV7 := stories260K llama-2-tiny-random syn-llama-gqa-q4_0 syn-llama-gqa-q4_k_m $(ARM_GOLDEN_FAMILIES)
ARM_CLI         := test_golden_logits test_run_greedy
ARM_CLI_ARMV7   := $(ARM_CLI) test_bad_input

arm_unit = $(UNIT_SRC:tests/unit/%.c=$(1)/tests/%)
arm_quick_unit = $(filter-out $(ARM_SLOW_UNIT),$(UNIT_SRC:tests/unit/%.c=%))

# Without a cross compiler or qemu-user the ARM runs cannot happen: fail,
# naming them (scripts/install-deps.sh installs them).
cross_missing = $(strip $(foreach t,$(1),$(if $(shell command -v $(t) 2>/dev/null),,$(t))))
ARM64_MISSING := $(call cross_missing,$(firstword $(ARM64_CC)) qemu-aarch64)
ARMV7_MISSING := $(call cross_missing,$(firstword $(ARMV7_CC)) qemu-arm)
ARM_APT := gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross qemu-user

.PHONY: arm64 armv7 test-arm test-arm-a53 test-arm-a76 test-arm-armv7 test-arm-full
arm64:
	@$(MAKE) -s --no-print-directory CC=$(ARM64_CC) BUILD=$(ARM64_BUILD) lib cli $(call arm_unit,$(ARM64_BUILD))
armv7:
	@$(MAKE) -s --no-print-directory CC=$(ARMV7_CC) CFLAGS="$(ARMV7_CFLAGS)" BUILD=$(ARMV7_BUILD) lib cli \
	  $(call arm_unit,$(ARMV7_BUILD))

# arm_run LABEL BUILD RUNNER OPTIONS: run_target.sh with the native test tools
arm_run = TOOLS=$(abspath $(BUILD)/tests/tools) WISP_SHARED=$(SHARED) tests/cross/run_target.sh $(4) $(1) \
	  $(abspath $(2)) -- $(3)

test-arm: test-arm-a53 test-arm-a76 test-arm-armv7

ifneq ($(ARM64_MISSING),)
test-arm-a53 test-arm-a76:
	@echo "FAIL: $@: $(ARM64_MISSING) not found (apt-get install $(ARM_APT))"; exit 1
else
# The same binaries as on the a76: only the level choice differs here.
test-arm-a53: arm64 $(TOOL_BIN)
	@GOLDEN_PASSES=main GOLDEN_MODELS="$(ARM_GOLDEN_A53)" $(call arm_run,cortex-a53,$(ARM64_BUILD),$(QEMU_ARM64) cortex-a53,\
	  --kernels neon --unavailable neon-dotprod --unit-tests test_simd_neon_wasm --cli-tests "$(ARM_CLI)")

test-arm-a76: arm64 $(TOOL_BIN)
	@GOLDEN_PASSES=main GOLDEN_MODELS="$(ARM_GOLDEN_A76)" $(call arm_run,cortex-a76,$(ARM64_BUILD),$(QEMU_ARM64) cortex-a76,\
	  --kernels neon-dotprod --unit-tests "$(arm_quick_unit)" --cli-tests "$(ARM_CLI)")
endif

ifneq ($(ARMV7_MISSING),)
test-arm-armv7:
	@echo "FAIL: $@: $(ARMV7_MISSING) not found (apt-get install $(ARM_APT))"; exit 1
else
test-arm-armv7: armv7 $(TOOL_BIN)
	@GOLDEN_PASSES=main GOLDEN_MODELS="$(ARM_GOLDEN_ARMV7)" $(call arm_run,armv7-cortex-a7,$(ARMV7_BUILD),$(QEMU_ARMV7) cortex-a7,\
	  --kernels neon --unavailable neon-dotprod --unit-tests "$(arm_quick_unit)" --cli-tests "$(ARM_CLI_ARMV7)")
endif

test-arm-full: arm64 armv7 $(TOOL_BIN)
	@$(call arm_run,cortex-a53,$(ARM64_BUILD),$(QEMU_ARM64) cortex-a53,--kernels neon --unavailable neon-dotprod)
	@$(call arm_run,cortex-a76,$(ARM64_BUILD),$(QEMU_ARM64) cortex-a76,--kernels neon-dotprod)
	@$(call arm_run,armv7-cortex-a7,$(ARMV7_BUILD),$(QEMU_ARMV7) cortex-a7,--kernels neon --unavailable neon-dotprod)
