#!/usr/bin/env bash
# The main job: generate text with a real model, chat with it, get JSON that
# follows a schema, fine-tune a LoRA adapter on a text file, and generate again
# with the adapter. Usage:
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

Point the demo at your own GGUF (architecture llama, qwen2, qwen3, gemma2, gemma3
or phi3: e.g. a SmolLM2, Llama 3.2, Qwen2.5/Qwen3, Gemma 2/3 or Phi-3 GGUF from
llama.cpp's ecosystem; an instruct model chats with its own template) and a text
file to fine-tune on:

    make demo MODEL=/path/to/model.gguf DATA=/path/to/text.txt

or run the steps yourself:

    build/wisp run -m /path/to/model.gguf -p "Once upon a time" -n 64
    build/wisp chat -m /path/to/instruct-model.gguf
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
mkdir -p "$here/build"
msgs=$here/build/demo-messages.json
printf '%s\n' '[{"role": "user", "content": "Tell me a short story about a cat."}]' > "$msgs"
# A base model (stories260K) has no chat template: ChatML stands in, so the
# answer is a story rather than a reply. An instruct GGUF uses its own.
chat_template=()
"$wisp" template -m "$model" --messages "$msgs" >/dev/null 2>&1 || chat_template=(--chat-template chatml)
echo "== 2. chat: one answer to $msgs ${chat_template[*]:+(no template in the model: ${chat_template[*]})}"
"$wisp" run -m "$model" --chat "${chat_template[@]}" --messages "$msgs" -n 64 --seed 1
echo "== 3. guided output: JSON that follows a schema, whatever the model would rather write"
"$wisp" run -m "$model" -p "A cat named Tom, as JSON:" -n 64 --seed 1 -q --json-bounded \
    --json-schema '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                    "age": {"type": "integer", "minimum": 1, "maximum": 12}},
                    "required": ["name", "age"], "additionalProperties": false}'
echo
echo "== 4. fine-tune a rank-8 LoRA on $(basename "$data")"
"$wisp" finetune -m "$model" --data "$data" --val-split 0.05 --rank 8 --ctx 128 --batch 8 \
    --steps ${STEPS:-300} --eval-every 100 -o "$out" --overwrite
echo "== 5. the same model, without and with the adapter"
"$wisp" run -m "$model" -p "ROMEO:" -n 64 --seed 1 -q
echo "-- with the adapter:"
"$wisp" run -m "$model" --lora "$out/adapter.gguf" -p "ROMEO:" -n 64 --seed 1 -q
echo "adapter, config, log and loss curve: $out"
