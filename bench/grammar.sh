#!/usr/bin/env bash
# Guided output figures (issue 17), not part of `make test`: per-token full-mask time
# (mean, p99) over the shared schemas at SmolLM2's 49k vocabulary and at a 152k synthetic
# vocabulary (Qwen2.5's size, made by make-model), schema compile time, and decode speed
# with and without a schema on a random-weight SmolLM2-shaped model.
# Usage: WISP=build/wisp TOOLS=build/tests/tools SHARED=../shared bench/grammar.sh [SEEDS]
# Figures are wall-clock on whatever else the machine is doing: on a shared machine they are noisy.
set -eu
W=${WISP:?}; T=${TOOLS:?}; S=${SHARED:?}; seeds=${1:-3}
out=${OUT:-build/bench/grammar}; mkdir -p "$out/schemas" "$out/samples"
/usr/bin/python3 - "$S/golden/constrained/schemas.json" "$out/schemas" <<'PY'
import json, sys, os
for s in json.load(open(sys.argv[1], encoding="utf-8")):
    json.dump(s["schema"], open(os.path.join(sys.argv[2], s["id"] + ".json"), "w"))
PY
[ -f "$out/vocab152k.gguf" ] || "$W" make-model --like qwen2.5-0.5b --type q4_0 --layers 1 -o "$out/vocab152k.gguf" >/dev/null
[ -f "$out/smol.gguf" ] || "$W" make-model --like smollm2-135m --type q8_0 --layers 1 \
    --tokenizer "$S/models/tokenizers/smollm2/tokenizer.json" -o "$out/smol.gguf" >/dev/null
echo "== schema compile (schema -> grammar -> compiled + matcher), ms"
for f in "$out"/schemas/*.json; do
    "$W" grammar check --schema "$f" 2>/dev/null | sed -n 's/.*compiled in \([0-9.]*\) ms/\1/p'
done | awk '{s+=$1; if($1>m)m=$1; n++} END {printf "  %d schemas: mean %.3f ms, worst %.3f ms\n", n, s/n, m}'
for vocab in "$S/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf" "$out/vocab152k.gguf"; do
    echo "== full mask per token, $(basename "$vocab"), random logits, $seeds seeds per schema"
    for f in "$out"/schemas/*.json; do
        "$W" grammar check --schema "$f" >/dev/null 2>&1 || continue
        "$T/guided_sample" "$vocab" "$f" "$seeds" "$out/samples/x" 2>/dev/null | sed 's/^.*schemas\///' || true
    done | tee "$out/masks.txt" | awk -F'[ ,]+' '{for(i=1;i<=NF;i++){if($i=="mean")m+=$(i+1); if($i=="p99")p=($(i+1)>p?$(i+1):p)}; n++}
        END {printf "  over %d schemas: mean of means %.1f us, worst p99 %.1f us\n", n, m/n, p}'
done
echo "== decode tok/s, random-weight SmolLM2 shape (1 layer), 200 tokens, 1 thread"
for mode in none schema; do
    extra=(); [ $mode = schema ] && extra=(--json-schema "$out/schemas/s20_event_list.json" --json-bounded)
    "$W" run -m "$out/smol.gguf" --no-bos -p "JSON:" -n 200 --seed 1 -t 1 --no-echo "${extra[@]}" 2>&1 >/dev/null |
        sed -n "s/.*generated \([0-9]*\) tokens in \([0-9.]*\) s (\([0-9.]*\) tok\/s).*/  $mode: \1 tokens, \3 tok\/s/p"
done
