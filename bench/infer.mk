# Inference speed against llama.cpp (issue 3), included by the Makefile.
# Minutes long and needs npm (it installs the peer), so not part of `make test`.
#   make bench-infer                 the full table (REPS=5, GEN=64, THREADS="1 2")
#   make bench-infer MODELS=smollm2-135m-q4_0 THREADS=1 REPS=3   one row
.PHONY: bench-infer
BENCH_OUT := $(BUILD)/bench

$(BUILD)/bench/pool_overhead: bench/pool_overhead.c $(BUILD)/obj/cli/thread_pool.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Icli $< $(BUILD)/obj/cli/thread_pool.o $(LDFLAGS) $(LDLIBS) -o $@

bench-infer: all $(BUILD)/bench/pool_overhead
	@WISP=$(abspath $(BUILD)/wisp) POOL=$(abspath $(BUILD)/bench/pool_overhead) OUT=$(abspath $(BENCH_OUT)) \
	  SHARED=$(SHARED) bench/run_bench.sh

bench: bench-infer

# Guided output (issue 17): mask time, schema compile time, constrained decode speed.
.PHONY: bench-grammar
bench-grammar: all tests
	@WISP=$(abspath $(BUILD)/wisp) TOOLS=$(abspath $(BUILD)/tests/tools) SHARED=$(SHARED) OUT=$(abspath $(BUILD)/bench/grammar) \
	  bench/grammar.sh
bench: bench-grammar
