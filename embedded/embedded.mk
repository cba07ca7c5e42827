# Bare-metal firmware: Cortex-M under qemu-system-arm, RISC-V under
# qemu-system-riscv64. Included from the top Makefile; see embedded/README.md.
#
#   make embedded          build/embedded/infer-m4.elf, infer-m7.elf, infer-rv64.elf,
#                          train-m7.elf, and the kernel-check firmwares
#   make test-embedded     run them under QEMU, compare with the native engine,
#                          print the budget table

EMB              := $(BUILD)/embedded
EMB_MODEL_SRC    ?= $(SHARED)/models/stories260K.gguf
# Weight type the model is converted to at build time by `wisp quantize`
# (f32: the file is used as is). Q8_0 rows must split into 32-element blocks:
# ffn_down's 172-wide rows fall back to F16.
EMB_MODEL_TYPE   ?= q8_0
# Inference settings: KV positions, tokens per forward step (prefill), the
# longest prompt the tokenizer scratch is planned for, tokens generated.
EMB_CTX          ?= 288
EMB_BATCH        ?= 8
EMB_TEXT_BYTES   ?= 64
EMB_N_PREDICT    ?= 200
# Classification firmware (grammar-constrained): its context, the grammar
# (the same text as FW_GRAMMAR in embedded/firmware/classify.c) and the
# matcher/walk limits (stacks,nodes,work,states,steps) sized for an MCU.
EMB_CLASSIFY_CTX    ?= 64
EMB_CLASSIFY_GRAMMAR := root ::= " positive" | " negative" | " neutral"
EMB_CLASSIFY_LIMITS ?= 64,512,512,256,2048
# Training firmware: the first EMB_TRAIN_TEXT_BYTES of tinyshakespeare in
# flash, windows of EMB_TRAIN_SEQ tokens, LoRA rank EMB_TRAIN_RANK on
# EMB_TRAIN_TARGETS with activation checkpointing, EMB_TRAIN_STEPS AdamW
# steps at a constant EMB_TRAIN_LR (the same settings drive `wisp finetune`
# in the test).
EMB_TRAIN_DATA_SRC  ?= $(SHARED)/data/tinyshakespeare.txt
EMB_TRAIN_TEXT_BYTES ?= 256
EMB_TRAIN_SEQ       ?= 16
EMB_TRAIN_RANK      ?= 4
EMB_TRAIN_TARGETS   ?= attn_q,attn_v
EMB_TRAIN_STEPS     ?= 24
EMB_TRAIN_LR        ?= 1e-2
EMB_TRAIN_SEED      ?= 42
EMB_TRAIN_LOSS_CHUNK ?= 4
EMB_TRAIN_TEXT      := $(EMB)/model/train-text-$(EMB_TRAIN_TEXT_BYTES).txt
# Budgets: flash of every firmware, SRAM of the inference and training
# firmware, and the stack reserved at the bottom of SRAM.
EMB_FLASH        := 2M
EMB_INFER_RAM    := 256K
EMB_TRAIN_RAM    := 512K
EMB_STACK        ?= 8K
EMB_TRAIN_STACK  ?= 16K

EMB_ARM_CC       ?= arm-none-eabi-gcc
EMB_RV_CC        ?= riscv64-unknown-elf-gcc
EMB_ARM_NM       ?= arm-none-eabi-nm
EMB_RV_NM        ?= riscv64-unknown-elf-nm

# -std=c11 and -ffp-contract=off: no a*b+c fused into an FMA, so the reference
# kernels give the same bits as on the host (core/quant.h).
EMB_CFLAGS := $(CSTD) $(WARN) -O2 -g -ffp-contract=off -ffunction-sections -fdata-sections \
              -Icore -Isimd -Iadapters -Iembedded/common -Itests/lib

# Per target: compiler, architecture flags, platform folder, platform sources.
EMB_m4_CC    := $(EMB_ARM_CC)
EMB_m4_ARCH  := -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard -mthumb
EMB_m7_CC    := $(EMB_ARM_CC)
EMB_m7_ARCH  := -mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=hard -mthumb
EMB_m33_CC   := $(EMB_ARM_CC)
EMB_m33_ARCH := -mcpu=cortex-m33 -mfpu=fpv5-sp-d16 -mfloat-abi=hard -mthumb
EMB_rv64_CC  := $(EMB_RV_CC)
EMB_rv64_ARCH := -march=rv64imafdc -mabi=lp64d -mcmodel=medany --specs=picolibc.specs
EMB_ARM_PLATFORM := embedded/cortexm/startup.c
EMB_RV_PLATFORM  := embedded/riscv/start.S embedded/riscv/platform.c
EMB_m4_PLATFORM  := $(EMB_ARM_PLATFORM)
EMB_m7_PLATFORM  := $(EMB_ARM_PLATFORM)
EMB_m33_PLATFORM := $(EMB_ARM_PLATFORM)
EMB_rv64_PLATFORM := $(EMB_RV_PLATFORM)
EMB_m4_LD    := embedded/cortexm/link.ld
EMB_m7_LD    := embedded/cortexm/link.ld
EMB_m33_LD   := embedded/cortexm/link.ld
EMB_rv64_LD  := embedded/riscv/link.ld
# Where each board's code and SRAM start (the MPS2 AN505 image runs the
# Cortex-M33 from its secure aliases).
EMB_m4_MAP   := --defsym=__wisp_flash_origin=0x00000000 --defsym=__wisp_ram_origin=0x20000000
EMB_m7_MAP   := $(EMB_m4_MAP)
EMB_m33_MAP  := --defsym=__wisp_flash_origin=0x10000000 --defsym=__wisp_ram_origin=0x38000000
EMB_rv64_MAP := --defsym=__wisp_flash_origin=0x80000000 --defsym=__wisp_ram_origin=0x80200000

EMB_LIB_SRC    := $(CORE_SRC) simd/cortexm_dsp.c $(ADAPTERS_SRC)
EMB_COMMON_SRC := $(sort $(wildcard embedded/common/*.c))

ifeq ($(EMB_MODEL_TYPE),f32)
EMB_MODEL := $(EMB_MODEL_SRC)
else
EMB_MODEL := $(EMB)/model/$(basename $(notdir $(EMB_MODEL_SRC)))-$(EMB_MODEL_TYPE).gguf
endif

.PHONY: embedded test-embedded embedded-max-ctx embedded-clean
embedded: $(EMB)/infer-m4.elf $(EMB)/infer-m7.elf $(EMB)/infer-rv64.elf $(EMB)/train-m7.elf $(EMB)/classify-m4.elf \
          $(EMB)/kernel-check-m4.elf $(EMB)/kernel-check-m7.elf $(EMB)/kernel-check-m33.elf \
          $(EMB)/tools/libinsn.so $(EMB)/tools/lora_diff

# ---- host side: the model, the plan headers, the tools ------------------------

# Regenerated on every build (it is cheap) but only replaced when its content
# changes, so settings changes rebuild exactly what depends on them.
$(EMB)/gen/ctx$(EMB_CTX)/infer_plan.h: $(BUILD)/wisp $(EMB_MODEL) FORCE
	@mkdir -p $(dir $@)
	@$(BUILD)/wisp plan -m $(EMB_MODEL) --ctx $(EMB_CTX) --batch $(EMB_BATCH) --kv-type f16 -t 1 \
	    --text-bytes $(EMB_TEXT_BYTES) --c-header > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "wrote $@"; fi

# Replaced only when the bytes change, so a rebuilt `wisp` relinks nothing
# (quantizing again is cheap).
ifneq ($(EMB_MODEL_TYPE),f32)
$(EMB_MODEL): $(EMB_MODEL_SRC) $(BUILD)/wisp
	@mkdir -p $(dir $@)
	$(BUILD)/wisp quantize $(EMB_MODEL_SRC) $@.tmp.gguf $(EMB_MODEL_TYPE) -t 1 2>$@.log || { cat $@.log; exit 1; }
	@if cmp -s $@.tmp.gguf $@; then rm -f $@.tmp.gguf; else mv $@.tmp.gguf $@; fi
endif

$(EMB_TRAIN_TEXT): $(EMB_TRAIN_DATA_SRC)
	@mkdir -p $(dir $@)
	head -c $(EMB_TRAIN_TEXT_BYTES) $< > $@

$(EMB)/gen/classify/classify_plan.h: $(BUILD)/wisp $(EMB_MODEL) FORCE
	@mkdir -p $(dir $@)
	@$(BUILD)/wisp plan -m $(EMB_MODEL) --ctx $(EMB_CLASSIFY_CTX) --batch $(EMB_BATCH) --kv-type f16 -t 1 \
	    --text-bytes $(EMB_TEXT_BYTES) --c-header --grammar '$(EMB_CLASSIFY_GRAMMAR)' \
	    --grammar-limits $(EMB_CLASSIFY_LIMITS) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "wrote $@"; fi

$(EMB)/gen/train/train_plan.h: $(BUILD)/wisp $(EMB_MODEL) FORCE
	@mkdir -p $(dir $@)
	@$(BUILD)/wisp plan -m $(EMB_MODEL) --train --ctx $(EMB_TRAIN_SEQ) --batch 1 --rank $(EMB_TRAIN_RANK) \
	    --targets $(EMB_TRAIN_TARGETS) --checkpointing --loss-chunk $(EMB_TRAIN_LOSS_CHUNK) --kv-type f16 -t 1 \
	    --text-bytes 16 --c-header > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "wrote $@"; fi

# The inference firmware with a prompt- or prefix-tuning adapter:
#   make EMB_ADAPTER=DIR build/embedded/<board>/infer-adapter.elf
# DIR is a PEFT folder (`wisp finetune --method prompt|prefix` writes one);
# its two files go into flash and `wisp plan --c-header --lora DIR` plans the
# blocks that read them. EMB_ADAPTER_SHRINK=1 declares the parse block one
# byte below the plan (the test checks that this fails); EMB_ADAPTER_PROMPT is
# the text it continues. The folder, the shrink and the prompt are build
# settings no file records, so these always rebuild.
EMB_ADAPTER        ?=
EMB_ADAPTER_SHRINK ?= 0
EMB_ADAPTER_PROMPT ?= First Citizen:
$(EMB)/gen/adapter/infer_plan.h: $(BUILD)/wisp $(EMB_MODEL) FORCE
	@test -n "$(EMB_ADAPTER)" || { echo "set EMB_ADAPTER to a PEFT prompt- or prefix-tuning folder"; exit 1; }
	@mkdir -p $(dir $@)
	@$(BUILD)/wisp plan -m $(EMB_MODEL) --ctx $(EMB_CTX) --batch $(EMB_BATCH) --kv-type f16 -t 1 \
	    --text-bytes $(EMB_TEXT_BYTES) --c-header --lora $(EMB_ADAPTER) > $@.tmp
	@mv $@.tmp $@

$(EMB)/tools/lora_diff: embedded/tools/lora_diff.c $(BUILD)/libwisp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $< $(BUILD)/libwisp.a -lm -o $@

$(EMB)/tools/libinsn.so: embedded/tools/qemu_insn_plugin.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 -shared -fPIC $< -o $@

FORCE:

# ---- per-target objects, library and firmware ----------------------------------
# $(1) = target (m4, m7, m33, rv64)
define EMB_TARGET
EMB_$(1)_OBJ := $(EMB)/$(1)/obj
EMB_$(1)_FLAGS := $$(EMB_CFLAGS) $$(EMB_$(1)_ARCH)

$$(EMB_$(1)_OBJ)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_FLAGS) -MMD -MP -c $$< -o $$@

$$(EMB_$(1)_OBJ)/%.o: %.S
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_ARCH) -MMD -MP -c $$< -o $$@

$(EMB)/$(1)/libwisp.a: $$(EMB_LIB_SRC:%.c=$$(EMB_$(1)_OBJ)/%.o)
	@rm -f $$@
	$$(EMB_$(1)_CC:gcc=ar) rcs $$@ $$^

EMB_$(1)_RUNTIME := $$(patsubst %.S,$$(EMB_$(1)_OBJ)/%.o,$$(patsubst %.c,$$(EMB_$(1)_OBJ)/%.o,$$(EMB_$(1)_PLATFORM) $$(EMB_COMMON_SRC)))

# Files linked into flash: the model (wisp_model_start/end) and the
# training text (wisp_text_start/end).
$$(EMB_$(1)_OBJ)/model.o: embedded/common/blob.S $$(EMB_MODEL)
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_ARCH) -DBLOB_NAME=wisp_model -DBLOB_FILE='"$$(abspath $$(EMB_MODEL))"' -c $$< -o $$@

$$(EMB_$(1)_OBJ)/text.o: embedded/common/blob.S $(EMB_TRAIN_TEXT)
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_ARCH) -DBLOB_NAME=wisp_text -DBLOB_FILE='"$$(abspath $(EMB_TRAIN_TEXT))"' -c $$< -o $$@

# The inference firmware for the context length EMB_CTX: infer-ctxN.elf
# (a context is a build setting, so each gets its own header and object).
$$(EMB_$(1)_OBJ)/infer-ctx$(EMB_CTX).o: embedded/firmware/infer.c $(EMB)/gen/ctx$(EMB_CTX)/infer_plan.h
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_FLAGS) -I$(EMB)/gen/ctx$(EMB_CTX) -DFW_NAME='"infer-$(1)"' \
	    -DFW_N_PREDICT=$(EMB_N_PREDICT) -MMD -MP -c $$< -o $$@

$(EMB)/$(1)/infer-ctx$(EMB_CTX).elf: $$(EMB_$(1)_OBJ)/infer-ctx$(EMB_CTX).o $$(EMB_$(1)_OBJ)/model.o $$(EMB_$(1)_RUNTIME) \
                            $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

# ... and with the adapter of EMB_ADAPTER (see above).
$$(EMB_$(1)_OBJ)/infer-adapter.o: embedded/firmware/infer.c $(EMB)/gen/adapter/infer_plan.h FORCE
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_FLAGS) -I$(EMB)/gen/adapter -DFW_NAME='"infer-adapter-$(1)"' \
	    -DFW_N_PREDICT=$(EMB_N_PREDICT) -DFW_ADAPTER_SHRINK=$(EMB_ADAPTER_SHRINK) \
	    -DFW_PROMPT='"$(EMB_ADAPTER_PROMPT)"' -c $$< -o $$@

$$(EMB_$(1)_OBJ)/adapter_config.o: embedded/common/blob.S FORCE
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_ARCH) -DBLOB_NAME=wisp_adapter_config \
	    -DBLOB_FILE='"$$(abspath $(EMB_ADAPTER))/adapter_config.json"' -c $$< -o $$@

$$(EMB_$(1)_OBJ)/adapter_tensors.o: embedded/common/blob.S FORCE
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_ARCH) -DBLOB_NAME=wisp_adapter_tensors \
	    -DBLOB_FILE='"$$(abspath $(EMB_ADAPTER))/adapter_model.safetensors"' -c $$< -o $$@

$(EMB)/$(1)/infer-adapter.elf: $$(EMB_$(1)_OBJ)/infer-adapter.o $$(EMB_$(1)_OBJ)/model.o \
                               $$(EMB_$(1)_OBJ)/adapter_config.o $$(EMB_$(1)_OBJ)/adapter_tensors.o \
                               $$(EMB_$(1)_RUNTIME) $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

# The grammar-constrained classification firmware (256 KB of SRAM).
$$(EMB_$(1)_OBJ)/classify.o: embedded/firmware/classify.c $(EMB)/gen/classify/classify_plan.h
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_FLAGS) -I$(EMB)/gen/classify -DFW_NAME='"classify-$(1)"' -MMD -MP -c $$< -o $$@

$(EMB)/$(1)/classify.elf: $$(EMB_$(1)_OBJ)/classify.o $$(EMB_$(1)_OBJ)/model.o $$(EMB_$(1)_RUNTIME) \
                          $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

# The training firmware (512 KB of SRAM).
$$(EMB_$(1)_OBJ)/train.o: embedded/firmware/train.c $(EMB)/gen/train/train_plan.h
	@mkdir -p $$(dir $$@)
	$$(EMB_$(1)_CC) $$(EMB_$(1)_FLAGS) -I$(EMB)/gen/train -DFW_NAME='"train-$(1)"' -DFW_TRAIN_STEPS=$(EMB_TRAIN_STEPS) \
	    -DFW_TRAIN_LR=$(EMB_TRAIN_LR)f -DFW_TRAIN_SEED=$(EMB_TRAIN_SEED) -MMD -MP -c $$< -o $$@

$(EMB)/$(1)/train.elf: $$(EMB_$(1)_OBJ)/train.o $$(EMB_$(1)_OBJ)/model.o $$(EMB_$(1)_OBJ)/text.o $$(EMB_$(1)_RUNTIME) \
                       $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_TRAIN_RAM),$$(filter %.o %.a,$$^),$(EMB_TRAIN_STACK))

$(EMB)/$(1)/kernel-check.elf: $$(EMB_$(1)_OBJ)/embedded/firmware/kernel_check.o $$(EMB_$(1)_OBJ)/tests/lib/kernel_checks.o \
                              $$(EMB_$(1)_RUNTIME) \
                              $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

# A firmware that faults: `make test-embedded` checks it reports and exits 99.
$(EMB)/$(1)/fault-probe.elf: $$(EMB_$(1)_OBJ)/embedded/tests/fault_probe.o $$(EMB_$(1)_RUNTIME) \
                             $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

# A firmware that calls malloc: `make test-embedded` checks this link FAILS.
$(EMB)/$(1)/heap-probe.elf: $$(EMB_$(1)_OBJ)/embedded/tests/heap_probe.o $$(EMB_$(1)_RUNTIME) \
                            $(EMB)/$(1)/libwisp.a $$(EMB_$(1)_LD)
	$$(call EMB_LINK,$(1),$(EMB_INFER_RAM),$$(filter %.o %.a,$$^))

-include $$(shell find $$(EMB_$(1)_OBJ) -name '*.d' 2>/dev/null)
endef

# Link $(3) for target $(1) with an SRAM budget of $(2) and a stack of $(4)
# (default EMB_STACK), then prove there is no heap: the budgets are MEMORY
# regions (an overflow fails the link), the scripts define no heap symbols (so
# sbrk/malloc cannot link), and nm checks that no allocator slipped in anyway.
define EMB_LINK
	$(EMB_$(1)_CC) $(EMB_$(1)_ARCH) -nostartfiles -Wl,--gc-sections -Wl,-Map=$@.map \
	    -Wl,--defsym=__wisp_flash_bytes=$(EMB_FLASH) -Wl,--defsym=__wisp_ram_bytes=$(2) \
	    -Wl,--defsym=__wisp_stack_bytes=$(or $(4),$(EMB_STACK)) $(addprefix -Wl$(comma),$(EMB_$(1)_MAP)) \
	    -T $(EMB_$(1)_LD) $(3) -lm -o $@
	@if $(if $(filter rv64,$(1)),$(EMB_RV_NM),$(EMB_ARM_NM)) $@ | \
	    grep -Eq ' [TtWw] (malloc|_malloc_r|calloc|realloc|free|_free_r|sbrk|_sbrk|_sbrk_r)$$'; then \
	    echo "error: $@ links a heap allocator; firmware must not allocate"; rm -f $@; exit 1; fi
endef
comma := ,

$(foreach t,m4 m7 m33 rv64,$(eval $(call EMB_TARGET,$(t))))

# ---- the fixed output paths ---------------------------------------------------
$(EMB)/infer-%.elf: $(EMB)/%/infer-ctx$(EMB_CTX).elf
	cp $< $@

$(EMB)/classify-%.elf: $(EMB)/%/classify.elf
	cp $< $@

$(EMB)/train-%.elf: $(EMB)/%/train.elf
	cp $< $@

$(EMB)/kernel-check-%.elf: $(EMB)/%/kernel-check.elf
	cp $< $@

$(EMB)/fault-probe-%.elf: $(EMB)/%/fault-probe.elf
	cp $< $@

# The script builds and runs every board; a missing toolchain or emulator
# fails, named (scripts/install-deps.sh installs them).
test-embedded: $(BUILD)/wisp
	@EMB=$(EMB) WISP=$(BUILD)/wisp WISP_SHARED=$(SHARED) EMB_MODEL=$(EMB_MODEL) EMB_CTX=$(EMB_CTX) \
	  EMB_CLASSIFY_CTX=$(EMB_CLASSIFY_CTX) EMB_CLASSIFY_GRAMMAR='$(EMB_CLASSIFY_GRAMMAR)' \
	  EMB_N_PREDICT=$(EMB_N_PREDICT) EMB_TRAIN_TEXT=$(EMB_TRAIN_TEXT) EMB_TRAIN_SEQ=$(EMB_TRAIN_SEQ) \
	  EMB_TRAIN_RANK=$(EMB_TRAIN_RANK) EMB_TRAIN_TARGETS=$(EMB_TRAIN_TARGETS) EMB_TRAIN_STEPS=$(EMB_TRAIN_STEPS) \
	  EMB_TRAIN_LR=$(EMB_TRAIN_LR) EMB_TRAIN_SEED=$(EMB_TRAIN_SEED) MAKE_CMD="$(MAKE) --no-print-directory" \
	  embedded/scripts/test_embedded.sh

embedded-max-ctx: $(BUILD)/wisp
	@EMB=$(EMB) EMB_CTX=$(EMB_CTX) MAKE_CMD="$(MAKE) --no-print-directory" embedded/scripts/max_ctx.sh

embedded-clean:
	rm -rf $(EMB)
