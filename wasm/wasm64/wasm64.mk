# The wasm64 (Memory64) build of the engine, for models whose file plus arena
# pass wasm32's 4 GiB: $(BUILD)/web/dist/wisp-engine-64.wasm and
# wisp-engine-64-mt.wasm, loaded by web/src/engine64.mjs where the JS engine
# runs Memory64 (Chromium 133 and later, Node 24 and later). Included by
# wasm/emscripten/emscripten.mk.
#
# Debian's Emscripten (3.1.6, LLVM 14) cannot make it: LLVM 14's wasm64
# backend stops at every SIMD lane extract ("Cannot select:
# extract_vector_elt ... Constant:i64<0>"). So it is clang-19 and wasm-ld-19
# without Emscripten: the same engine sources, with Emscripten's own musl
# headers and its math and string sources compiled for wasm64 (the wasm32
# builds link the same musl, so both compute the same floats),
# compiler-rt's wasm64 builtins, and wasm/wasm64/heap.c for malloc. Two
# variants, as wasm32 has: one thread, and threads (wasm/wasm64/pool.c).

WASM64_CC   ?= clang-19
WASM64_LD   ?= wasm-ld-19
WASM64_AR   ?= llvm-ar-19
EM_ROOT     := /usr/share/emscripten
WASM64_SYSROOT := $(EM_ROOT)/cache/sysroot
WASM64_MUSL := $(EM_ROOT)/system/lib/libc/musl
WASM64_RT   := $(wildcard /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm64.a)
WASM64_DIR  := $(BUILD)/wasm64
WASM64_TARGET := --target=wasm64-unknown-emscripten --sysroot=$(WASM64_SYSROOT)
# hidden by default: only the ABI's functions (API, visibility default) are exported
WASM64_CFLAGS := $(WASM64_TARGET) $(CSTD) $(WARN) -O3 -msimd128 -fvisibility=hidden -DWISP_WASM64 -I. -Icore -Iadapters -Isimd
WASM64_SRC  := $(WASM_SRC) wasm/wasm64/heap.c
# musl's math and string functions, as Emscripten's libc has them (strsignal
# needs the signal tables, which nothing here uses)
WASM64_LIBC_SRC := $(sort $(wildcard $(WASM64_MUSL)/src/math/*.c) $(filter-out %/strsignal.c,$(wildcard $(WASM64_MUSL)/src/string/*.c)))
WASM64_MUSL_FLAGS := -O2 -w -fvisibility=hidden -I$(WASM64_MUSL)/src/internal -I$(WASM64_MUSL)/src/include -I$(WASM64_MUSL)/arch/emscripten
# 16 GiB: the most V8 gives a 64-bit memory; the stack as the wasm32 builds'
WASM64_LDFLAGS := -m wasm64 --no-entry --export-dynamic --strip-all -z stack-size=1048576 --max-memory=17179869184
WASM64_ENGINE := $(WEB_OUT)/dist/wisp-engine-64.wasm
# The threaded variant: atomics and a shared memory that JS makes and every
# worker's instance imports; each worker sets its own stack (__stack_pointer)
# and runs wasm/wasm64/pool.c's loop. Browsers give it only to cross-origin
# isolated pages, as the wasm32 threaded build.
WASM64_MT_ENGINE := $(WEB_OUT)/dist/wisp-engine-64-mt.wasm
WASM64_MISSING := $(strip $(foreach t,$(WASM64_CC) $(WASM64_LD) $(WASM64_AR),$(if $(shell command -v $(t) 2>/dev/null),,$(t))) \
                    $(if $(WASM64_RT),,libclang_rt.builtins-wasm64.a) $(if $(wildcard $(WASM64_MUSL)/src/math/expf.c),,emscripten's musl sources))
WASM64_APT := clang-19 lld-19 llvm-19 libclang-rt-19-dev-wasm64 emscripten

.PHONY: wasm64
wasm64: $(WASM64_ENGINE) $(WASM64_MT_ENGINE)

# One variant of the build: $(1) its folder under $(WASM64_DIR), $(2) the
# module, $(3) extra compiler flags, $(4) extra sources, $(5) extra linker flags.
define wasm64_variant
$(WASM64_DIR)/$(1)/obj/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(WASM64_CC) $$(WASM64_CFLAGS) $(3) -MMD -MP -c $$< -o $$@

$(WASM64_DIR)/$(1)/musl/%.o: $$(WASM64_MUSL)/src/%.c
	@mkdir -p $$(dir $$@)
	@$$(WASM64_CC) $$(WASM64_TARGET) $$(WASM64_MUSL_FLAGS) $(3) -c $$< -o $$@

$(WASM64_DIR)/$(1)/libc.a: $$(WASM64_LIBC_SRC:$$(WASM64_MUSL)/src/%.c=$(WASM64_DIR)/$(1)/musl/%.o)
	@rm -f $$@
	@$$(WASM64_AR) rcs $$@ $$^

$(2): $$(addprefix $(WASM64_DIR)/$(1)/obj/,$$(WASM64_SRC:.c=.o) $(4:.c=.o)) $(WASM64_DIR)/$(1)/libc.a
	@mkdir -p $$(dir $$@)
	$$(WASM64_LD) $$(WASM64_LDFLAGS) $(5) $$(filter %.o,$$^) $(WASM64_DIR)/$(1)/libc.a $$(WASM64_RT) -o $$@
endef

ifeq ($(WASM64_MISSING),)
$(eval $(call wasm64_variant,single,$(WASM64_ENGINE),,,))
$(eval $(call wasm64_variant,threaded,$(WASM64_MT_ENGINE),-matomics -mbulk-memory -DWISP_WASM64_THREADS,wasm/wasm64/pool.c,--shared-memory --import-memory --export=__stack_pointer))
else
$(WASM64_ENGINE) $(WASM64_MT_ENGINE):
	@echo "FAIL: the wasm64 engine needs $(WASM64_MISSING) (apt-get install $(WASM64_APT))"; exit 1
endif

-include $(shell find $(WASM64_DIR) -name '*.d' 2>/dev/null)

# make bench-relaxed-dot: would relaxed SIMD's 8-bit dot product speed up
# wasm decode? web/bench/relaxed_dot.c's two copies of a Q4_0 decode loop,
# timed in Node 24 and Chromium (not part of make test). Made with clang-19
# too: Emscripten 3.1.6 emits relaxed SIMD's pre-standard opcodes.
RELAXED_DOT := $(WASM64_DIR)/relaxed_dot.wasm
NODE24 = $(WEB_DEPS)/node_modules/$(firstword $(subst @, ,$(NODE24_PKG)))/bin/node
.PHONY: bench-relaxed-dot
$(RELAXED_DOT): web/bench/relaxed_dot.c
	@mkdir -p $(dir $@)
	$(WASM64_CC) --target=wasm32 $(CSTD) $(WARN) -O3 -msimd128 -mrelaxed-simd -c $< -o $@.o
	$(WASM64_LD) --no-entry --export-dynamic $@.o -o $@
bench-relaxed-dot: $(RELAXED_DOT) web-deps
	$(NODE24) web/bench/relaxed_dot.mjs $(RELAXED_DOT) $(WEB_DEPS)/node_modules/playwright-core
