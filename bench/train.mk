# LoRA fine-tuning: the Shakespeare demonstration and the training benchmark
# (included by the Makefile). Both take minutes, so neither is part of `make test`.
.PHONY: demo-finetune bench-train

demo-finetune: all
	@bench/train_shakespeare.sh $(BUILD)

bench-train: all
	@WISP_SHARED=$(SHARED) bench/train_bench.sh $(BUILD)

# `make bench` runs this next to the inference benchmarks
bench: bench-train
