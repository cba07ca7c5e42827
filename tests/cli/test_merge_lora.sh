# Adapters at inference against merged weights and across formats:
#   - merged model logits = base + adapter logits (wisp logits --lora), for
#     an F32 base and for quantized bases (within the quantization yardstick);
#   - several adapters with scales (--lora A:0.5 --lora B) = their merge;
#   - an adapter and its PEFT / GGUF round trips give identical logits.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf golden/adapters/stories260K-r4/adapter.gguf golden/adapters/stories260K-r4/peft \
    golden/adapters/stories260K-r4/logits-with-adapter.json models/synthetic/syn-llama-gqa-f32.gguf \
    models/synthetic/syn-llama-gqa-q8_0.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf golden/logits/syn-llama-gqa-f32.json
"$WISP" logits --help 2>&1 | grep -q -- "--lora" ||
    fail "wisp logits has no --lora option in this build"
A=$SHARED/golden/adapters/stories260K-r4
BASE=$SHARED/models/stories260K.gguf
D=$WORK/merge-lora
rm -rf "$D" && mkdir -p "$D"
prompts() { args=(); while IFS= read -r p; do args+=(-p "$p"); done < <("$TOOLS/golden_prompts" "$1"); }
max_rel() { "$TOOLS/compare_logits" "$1" "$2" --tol 1e9 | awk '{ if ($7 > m) m = $7 } END { print m + 0 }'; }

prompts "$A/logits-with-adapter.json"
"$WISP" logits -m "$BASE" --lora "$A/adapter.gguf" "${args[@]}" --json > "$D/gguf.json" || fail "--lora adapter.gguf"
"$WISP" logits -m "$BASE" --lora "$A/peft" "${args[@]}" --json > "$D/peft.json" || fail "--lora peft folder"
"$TOOLS/compare_logits" "$A/logits-with-adapter.json" "$D/gguf.json" --tol 0.002 --greedy-exact || fail "vs llama.cpp"
"$TOOLS/compare_logits" "$D/gguf.json" "$D/peft.json" --tol 0 --greedy-exact || fail "PEFT and GGUF adapters differ"
ok
"$WISP" merge -m "$BASE" --lora "$A/adapter.gguf" -o "$D/m.gguf" 2>/dev/null || fail merge
"$WISP" logits -m "$D/m.gguf" "${args[@]}" --json > "$D/m.json"
"$TOOLS/compare_logits" "$D/gguf.json" "$D/m.json" --tol 0.0005 --greedy-exact || fail "merged != base + adapter"
ok

SYN=$SHARED/models/synthetic/syn-llama-gqa-f32.gguf
prompts "$SHARED/golden/logits/syn-llama-gqa-f32.json"
"$TOOLS/lora_fixture" "$SYN" "$D/a.gguf" --mixed --rslora --type f16 --alpha 0.5 --seed 41 2>/dev/null || fail fixture
"$TOOLS/lora_fixture" "$SYN" "$D/b.gguf" --rank 8 --type bf16 --alpha 2 --seed 42 2>/dev/null || fail fixture
# round trips through PEFT give identical logits
"$WISP" export "$D/a.gguf" --to peft -m "$SYN" -o "$D/a-peft" 2>/dev/null || fail export
"$WISP" export "$D/a-peft" --to gguf -m "$SYN" -o "$D/a2.gguf" 2>/dev/null || fail export
for ad in "$D/a.gguf" "$D/a-peft" "$D/a2.gguf"; do
    "$WISP" logits -m "$SYN" --lora "$ad" "${args[@]}" --json > "$D/rt-$(basename "$ad").json" || fail "--lora $ad"
done
"$TOOLS/compare_logits" "$D/rt-a.gguf.json" "$D/rt-a-peft.json" --tol 0 --greedy-exact || fail "GGUF vs its PEFT export"
"$TOOLS/compare_logits" "$D/rt-a.gguf.json" "$D/rt-a2.gguf.json" --tol 0 --greedy-exact || fail "GGUF vs its round trip"
ok
# two adapters with scales = their merge
"$WISP" logits -m "$SYN" --lora "$D/a.gguf:0.5" --lora "$D/b.gguf" "${args[@]}" --json > "$D/ab.json" || fail "two --lora"
"$WISP" merge -m "$SYN" --lora "$D/a.gguf:0.5" --lora "$D/b.gguf" -o "$D/mab.gguf" 2>/dev/null || fail merge
"$WISP" logits -m "$D/mab.gguf" "${args[@]}" --json > "$D/mab.json"
"$TOOLS/compare_logits" "$D/ab.json" "$D/mab.json" --tol 0.002 || fail "two adapters: runtime vs merged"
ok
# quantized bases: runtime adapter on the quantized weights vs merged and re-quantized weights
GL=$SHARED/golden/logits
for type in q8_0 q4_k_m; do
    q=$SHARED/models/synthetic/syn-llama-gqa-$type.gguf
    "$WISP" logits -m "$q" --lora "$D/a.gguf" "${args[@]}" --json > "$D/q-$type.json" || fail "--lora on $type"
    "$WISP" merge -m "$q" --lora "$D/a.gguf" -o "$D/qm-$type.gguf" 2>/dev/null || fail "merge into $type"
    "$WISP" logits -m "$D/qm-$type.gguf" "${args[@]}" --json > "$D/qm-$type.json"
    tol=$(awk -v t="$(max_rel "$GL/syn-llama-gqa-f32.json" "$GL/syn-llama-gqa-$type.json")" 'BEGIN { print 1.5 * t }')
    "$TOOLS/compare_logits" "$D/q-$type.json" "$D/qm-$type.json" --tol "$tol" || fail "$type: merged vs base + adapter"
    ok
done
done_ok
