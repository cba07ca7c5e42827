# wisp — build, test and benchmark entry points. `make help` lists them.

CC      ?= cc
BUILD   ?= build
SHARED  ?= $(abspath ../shared)
OPT     ?= -O2
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CSTD    := -std=c11
DEFS    := -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS = $(CSTD) $(WARN) $(DEFS) $(CFLAGS) $(EXTRA_CFLAGS) -I. -Icore -Iadapters -Isimd
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
	@echo "make test         run every test (unit, golden, CLI, cross-target)"
	@echo "make test-unit    unit and golden tests only (native)"
	@echo "make test-cli     end-to-end tests of the wisp command"
	@echo "make embedded     bare-metal firmware (Cortex-M4/M7, RISC-V) at $(BUILD)/embedded/"
	@echo "make test-embedded  run the firmware under QEMU against the native engine; budget table"
	@echo "make clean        remove $(BUILD)/"
	@echo "SHARED=path       reference folder (default ../shared)"

lib: $(BUILD)/libwisp.a
cli: $(BUILD)/wisp

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

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
	$(CC) $(ALL_CFLAGS) -Itests/lib -MMD -MP $< $(TESTLIB_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/tests/tools/%: tests/tools/%.c $(TESTLIB_OBJ) $(BUILD)/libwisp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/lib -Iadapters -MMD -MP $< $(TESTLIB_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

tests: $(UNIT_BIN) $(TOOL_BIN)

test-unit: tests
	@tests/run_unit.sh $(BUILD) $(UNIT_BIN)

# The CLI built with ASan+UBSan, for the hostile-input tests.
asan:
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g $(SANITIZE)" LDFLAGS="$(SANITIZE)" cli

test-cli: all $(TOOL_BIN) asan
	@WISP=$(abspath $(BUILD)/wisp) WISP_ASAN=$(abspath $(BUILD)/asan/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) WISP_SHARED=$(SHARED) \
	  WORK=$(abspath $(BUILD)/tests/cli) tests/run_cli.sh

test: test-unit test-cli

demo: all
	@scripts/demo.sh $(MODEL) $(DATA)

clean:
	rm -rf $(BUILD)

include tests/fuzz/fuzz.mk
include embedded/embedded.mk

-include $(shell find $(BUILD)/obj $(BUILD)/tests -maxdepth 4 -name '*.d' 2>/dev/null)
