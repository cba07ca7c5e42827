#!/usr/bin/env bash
# The fine-tuning demonstration: stories260K (a children's-story model) learns
# Shakespeare. Rank 8 on all seven projections, ctx 128, the last 10% of
# tinyshakespeare held out. Prints the base model's held-out loss, the final
# one and the drop, tokens/s, peak memory, and greedy and sampled text before
# and after. Usage: train_shakespeare.sh BUILD_DIR  (env: STEPS=600 THREADS=2)
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
wisp=$build/wisp
shared=${WISP_SHARED:-$here/../../shared}
model=$shared/models/stories260K.gguf data=$shared/data/tinyshakespeare.txt
for f in "$model" "$data"; do [ -f "$f" ] || { echo "SKIP: missing $f"; exit 0; }; done
out=$build/demo-finetune
mkdir -p "$out"
steps=${STEPS:-600} threads=${THREADS:-2}
/usr/bin/time -v "$wisp" finetune -m "$model" --data "$data" --val-split 0.1 --ctx 128 --batch 8 --rank 8 \
    --targets all --steps "$steps" --lr 2e-3 --warmup 20 --eval-every 100 --checkpoint-every 100 -t "$threads" \
    --overwrite -o "$out/run" 2> >(tee "$out/finetune.log" >&2)
base=$(awk -F, 'NR==2 {print $6}' "$out/run/log.csv")
final=$(awk -F, 'END {print $6}' "$out/run/log.csv")
tps=$(awk -F, 'END {print $5}' "$out/run/log.csv")
rss=$(awk '/Maximum resident/ {printf "%.1f", $NF/1024}' "$out/finetune.log")
sample() { # label args...
    local label=$1; shift
    for p in "ROMEO:" "Once upon a time"; do
        echo "--- $label, \"$p\", greedy"
        "$wisp" run -m "$model" "$@" -p "$p" -n 100 --temp 0 -q -t "$threads"
        echo "--- $label, \"$p\", temperature 0.8, seed 1"
        "$wisp" run -m "$model" "$@" -p "$p" -n 100 --temp 0.8 --seed 1 -q -t "$threads"
    done
}
{
    echo "stories260K + LoRA r8 (all 7 projections) on tinyshakespeare, ctx 128, batch 8, $steps steps"
    echo "held-out loss: base $base -> fine-tuned $final ($(awk -v a="$base" -v b="$final" 'BEGIN{printf "%.1f", 100*(a-b)/a}')% lower)"
    echo "training speed: $tps tokens/s ($threads threads); peak RSS $rss MiB; arena $(grep -o '"arena_bytes": [0-9]*' "$out/run/config.json" | awk '{printf "%.1f MiB", $2/1048576}')"
    sample "base model"
    sample "with the adapter" --lora "$out/run/adapter.gguf"
} | tee "$out/results.txt"
