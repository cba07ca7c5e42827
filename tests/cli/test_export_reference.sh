# The q/k permutation proof for arch llama, against an independent float64
# reference (tests/ref/peft_reference.py: numpy, Hugging Face order, PEFT's
# formula, rotate-half RoPE on un-permuted q/k):
#   - the reference with the golden PEFT folder reproduces llama.cpp's
#     logits-with-adapter (so the two golden files are equivalent), and a
#     converter that forgot the permutation would miss them by far;
#   - wisp, holding the adapter in GGUF order (merged, F32 KV cache), matches
#     the reference to float precision, for the golden adapter and for seeded
#     adapters on a GQA llama (k rows use the kv head count) and on qwen2
#     (no permutation, NEOX RoPE, q/k/v biases) after export to PEFT.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf golden/adapters/stories260K-r4/peft golden/adapters/stories260K-r4/adapter.gguf \
    golden/adapters/stories260K-r4/logits-with-adapter.json golden/logits/stories260K.json \
    models/synthetic/syn-llama-gqa-f32.gguf models/synthetic/syn-qwen2-f32.gguf golden/logits/syn-qwen2-f32.json
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIP: $PY with numpy is not installed (apt-get install python3-numpy)"; exit 77; }
REF="$(dirname "$0")/../ref/peft_reference.py"
A=$SHARED/golden/adapters/stories260K-r4
D=$WORK/export-ref
rm -rf "$D" && mkdir -p "$D"
prompts() { args=(); while IFS= read -r p; do args+=(-p "$p"); done < <("$TOOLS/golden_prompts" "$1"); }

"$PY" "$REF" "$SHARED/models/stories260K.gguf" "$A/logits-with-adapter.json" --lora "$A/peft" > "$D/ref.json" ||
    fail "reference failed"
echo "== float64 HF-order reference (golden PEFT) vs llama.cpp with the golden GGUF adapter"
"$TOOLS/compare_logits" "$A/logits-with-adapter.json" "$D/ref.json" --tol 0.001 --greedy-exact ||
    fail "the reference does not reproduce llama.cpp's logits with the adapter"
ok
echo "== negative control: q/k lora_B rows left in HF order"
"$PY" "$REF" "$SHARED/models/stories260K.gguf" "$A/logits-with-adapter.json" --lora "$A/peft" --naive > "$D/naive.json"
"$TOOLS/compare_logits" "$A/logits-with-adapter.json" "$D/naive.json" --tol 0.01 && fail "the row order does not matter?"
ok
echo "== wisp (GGUF order, merged, F32 KV) vs the reference"
prompts "$A/logits-with-adapter.json"
for adapter in "$A/adapter.gguf" "$A/peft"; do
    "$WISP" merge -m "$SHARED/models/stories260K.gguf" --lora "$adapter" -o "$D/m.gguf" 2>/dev/null || fail "merge $adapter"
    "$WISP" logits -m "$D/m.gguf" "${args[@]}" --json --kv-type f32 > "$D/m.json"
    "$TOOLS/compare_logits" "$D/ref.json" "$D/m.json" --tol 0.0001 --greedy-exact || fail "$adapter: wisp differs from the reference"
    ok
done

if "$WISP" logits --help 2>&1 | grep -q -- "--lora"; then
    echo "== wisp logits --lora (the adapter applied at run time, GGUF order, F32 KV) vs the reference"
    for adapter in "$A/adapter.gguf" "$A/peft"; do
        "$WISP" logits -m "$SHARED/models/stories260K.gguf" --lora "$adapter" "${args[@]}" --json --kv-type f32 > "$D/l.json" ||
            fail "logits --lora $adapter"
        "$TOOLS/compare_logits" "$D/ref.json" "$D/l.json" --tol 0.0001 --greedy-exact || fail "$adapter at run time"
        ok
    done
fi

echo "== seeded adapters exported to PEFT: GQA llama and qwen2"
for arch in llama-gqa qwen2; do
    base=$SHARED/models/synthetic/syn-$arch-f32.gguf
    cases=$SHARED/golden/logits/syn-$arch-f32.json
    [ -f "$cases" ] || cases=$SHARED/golden/logits/syn-llama-gqa-f32.json
    prompts "$cases"
    "$TOOLS/lora_fixture" "$base" "$D/$arch.gguf" --mixed --rslora --type f16 --alpha 0.5 --seed 21 2>/dev/null || fail fixture
    rm -rf "$D/$arch-peft"
    "$WISP" export "$D/$arch.gguf" --to peft -m "$base" -o "$D/$arch-peft" 2>/dev/null || fail "$arch export"
    "$PY" "$REF" "$base" "$cases" --lora "$D/$arch-peft" > "$D/$arch-ref.json" || fail "$arch reference"
    "$PY" "$REF" "$base" "$cases" > "$D/$arch-base.json"
    "$TOOLS/compare_logits" "$D/$arch-base.json" "$D/$arch-ref.json" --tol 0.05 >/dev/null &&
        fail "$arch: the seeded adapter hardly changes the logits"
    "$WISP" merge -m "$base" --lora "$D/$arch.gguf" -o "$D/$arch-m.gguf" 2>/dev/null || fail "$arch merge"
    "$WISP" logits -m "$D/$arch-m.gguf" "${args[@]}" --json --kv-type f32 > "$D/$arch-m.json"
    "$TOOLS/compare_logits" "$D/$arch-ref.json" "$D/$arch-m.json" --tol 0.0001 --greedy-exact ||
        fail "$arch: wisp differs from the PEFT reference"
    ok
done
done_ok
