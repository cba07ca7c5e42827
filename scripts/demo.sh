#!/usr/bin/env bash
# The main job: generate text with a real model, fine-tune a LoRA adapter on a
# text file, and generate again with the adapter. Usage:
#   scripts/demo.sh [MODEL.gguf] [TEXT.txt]     (defaults: ../shared's stories260K and tinyshakespeare)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${WISP_SHARED:-$here/../shared}
model=${1:-${MODEL:-$shared/models/stories260K.gguf}}
data=${2:-${DATA:-$shared/data/tinyshakespeare.txt}}
wisp=$here/build/wisp

if [ ! -f "$model" ]; then
    cat >&2 <<MSG
No model found at: $model

Point the demo at your own GGUF (any llama- or qwen2-architecture model, e.g. a
SmolLM2, TinyLlama or Qwen2.5 GGUF from llama.cpp's ecosystem) and a text file to
fine-tune on:

    make demo MODEL=/path/to/model.gguf DATA=/path/to/text.txt

or run the steps yourself:

    build/wisp run -m /path/to/model.gguf -p "Once upon a time" -n 64
MSG
    exit 2
fi
[ -x "$wisp" ] || make -C "$here" -s -j2

echo "== 1. generate with $(basename "$model")"
"$wisp" run -m "$model" -p "Once upon a time" -n 64 --temp 0
if [ ! -f "$data" ]; then
    echo "No training text at $data: pass DATA=/path/to/text.txt" >&2
    exit 2
fi
out=$here/build/demo-adapter
echo "== 2. fine-tune a rank-8 LoRA on $(basename "$data")"
"$wisp" finetune -m "$model" --data "$data" --val-split 0.05 --rank 8 --ctx 128 --batch 8 \
    --steps ${STEPS:-300} --eval-every 100 -o "$out" --overwrite
echo "== 3. the same model, without and with the adapter"
"$wisp" run -m "$model" -p "ROMEO:" -n 64 --seed 1 -q
echo "-- with the adapter:"
"$wisp" run -m "$model" --lora "$out/adapter.gguf" -p "ROMEO:" -n 64 --seed 1 -q
echo "adapter, config, log and loss curve: $out"
