# Inference speed against llama.cpp (issues 3, 15 and 21), included by the Makefile.
# Minutes long and needs npm (it installs a peer) and cmake (it builds the other), so not part of `make test`.
#   make bench-infer                 the full table (REPS=5, GEN=64, THREADS="1 2", MODELS=all)
#   make bench-infer MODELS=1b       the 1B rows only (MODELS=small: the SmolLM2-135M rows)
#   make bench-infer MODELS=smollm2-135m-q4_0 THREADS=1 REPS=3 PEERS=native   one row, one peer
#   make bench-loaded                decode under background load (two busy loops, then a memory copy)
#   make bench-decode-bandwidth      decode's products alone against the read test, round by round
#                                    (THREADS=2 ROUNDS=20 TYPE=Q4_0)
.PHONY: bench-infer bench-loaded bench-decode-bandwidth
BENCH_OUT := $(BUILD)/bench
# the native peer: built once from the snapshot in $(SHARED)/peers, under build/ (never committed)
LLAMACPP_SRC ?= $(SHARED)/peers/llama.cpp-c392e509.tar.gz
LLAMACPP_DIR ?= $(abspath $(BUILD)/peers/llama.cpp-c392e509)
BENCH_ENV = WISP=$(abspath $(BUILD)/wisp) OUT=$(abspath $(BENCH_OUT)) SHARED=$(SHARED) \
  LLAMACPP_SRC=$(LLAMACPP_SRC) LLAMACPP_DIR=$(LLAMACPP_DIR)

$(BUILD)/bench/pool_overhead: bench/pool_overhead.c $(BUILD)/obj/cli/thread_pool.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli $< $(BUILD)/obj/cli/thread_pool.o $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/bench/copy_loop: bench/copy_loop.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $< $(LDFLAGS) -o $@

DECODE_BW_OBJ := $(addprefix $(BUILD)/obj/cli/,thread_pool.o membw.o huge_alloc.o cache_size.o clock.o median.o)
$(BUILD)/bench/decode_bandwidth: bench/decode_bandwidth.c $(DECODE_BW_OBJ) $(BUILD)/libwisp.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli $< $(DECODE_BW_OBJ) $(BUILD)/libwisp.a $(LDFLAGS) $(LDLIBS) -o $@

bench-decode-bandwidth: $(BUILD)/bench/decode_bandwidth
	@$< $(or $(THREADS),2) $(or $(ROUNDS),20) $(or $(TYPE),Q4_0)

bench-infer: all $(BUILD)/bench/pool_overhead
	@$(BENCH_ENV) POOL=$(abspath $(BUILD)/bench/pool_overhead) bench/run_bench.sh

bench-loaded: all $(BUILD)/bench/copy_loop
	@$(BENCH_ENV) COPY_LOOP=$(abspath $(BUILD)/bench/copy_loop) bench/loaded_bench.sh

bench: bench-infer bench-loaded

# Guided output (issue 17): mask time, schema compile time, constrained decode speed.
.PHONY: bench-grammar
bench-grammar: all tests
	@WISP=$(abspath $(BUILD)/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) SHARED=$(SHARED) OUT=$(abspath $(BUILD)/bench/grammar) \
	  bench/grammar.sh
bench: bench-grammar
