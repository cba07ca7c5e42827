# wisp merge folds adapters into the base weights: merging the golden
# adapter into stories260K reproduces llama.cpp's logits-with-adapter; a
# GGUF LoRA and its PEFT twin merge to byte-identical files; two half-scaled
# copies equal one full copy; re-quantized merges (q8_0, q4_k_m) stay as close
# to the float merge as llama.cpp's own quantization stays to the F32 model; thread count never changes the
# bytes; hostile inputs fail cleanly and leave no output.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf golden/adapters/stories260K-r4/adapter.gguf golden/adapters/stories260K-r4/peft \
    golden/adapters/stories260K-r4/logits-with-adapter.json models/synthetic/syn-llama-gqa-f32.gguf \
    golden/logits/syn-llama-gqa-f32.json
A=$SHARED/golden/adapters/stories260K-r4
BASE=$SHARED/models/stories260K.gguf
D=$WORK/merge
rm -rf "$D" && mkdir -p "$D"
prompts() { args=(); while IFS= read -r p; do args+=(-p "$p"); done < <("$TOOLS/golden_prompts" "$1"); }

prompts "$A/logits-with-adapter.json"
"$WISP" merge -m "$BASE" --lora "$A/adapter.gguf" -o "$D/m.gguf" -t 2 2>"$D/log" || fail "merge: $(cat "$D/log")"
grep -q "35 adapter pairs merged" "$D/log" || fail "summary: $(cat "$D/log")"
"$WISP" logits -m "$D/m.gguf" "${args[@]}" --json > "$D/m.json" || fail "logits of the merged model"
"$TOOLS/compare_logits" "$A/logits-with-adapter.json" "$D/m.json" --tol 0.002 --greedy-exact ||
    fail "merged model disagrees with llama.cpp's logits with the adapter"
ok
"$WISP" merge -m "$BASE" --lora "$A/peft" -o "$D/m-peft.gguf" -t 1 2>/dev/null || fail "merge peft"
cmp -s "$D/m.gguf" "$D/m-peft.gguf" || fail "PEFT and GGUF adapters (or 1 vs 2 threads) merge differently"
ok
"$WISP" merge -m "$BASE" --lora "$A/adapter.gguf:0.5" --lora "$A/peft:0.5" -o "$D/halves.gguf" 2>/dev/null || fail "two halves"
"$WISP" logits -m "$D/halves.gguf" "${args[@]}" --json > "$D/halves.json"
"$TOOLS/compare_logits" "$D/m.json" "$D/halves.json" --tol 0.0005 --greedy-exact || fail "0.5 + 0.5 differs from 1.0"
ok
"$WISP" merge -m "$BASE" --lora "$A/adapter.gguf:0" -o "$D/zero.gguf" 2>/dev/null || fail "scale 0"
"$WISP" logits -m "$D/zero.gguf" "${args[@]}" --json > "$D/zero.json"
"$TOOLS/compare_logits" "$SHARED/golden/logits/stories260K.json" "$D/zero.json" --tol 0.002 --greedy-exact ||
    fail "an adapter at scale 0 changed the model"
ok

# a quantized merge: re-quantizing the merged weights stays within the quantized tolerance of the float merge
SYN=$SHARED/models/synthetic/syn-llama-gqa-f32.gguf
prompts "$SHARED/golden/logits/syn-llama-gqa-f32.json"
"$TOOLS/lora_fixture" "$SYN" "$D/fx.gguf" --mixed --rslora --type f16 --alpha 0.5 --seed 11 2>/dev/null || fail "fixture"
"$WISP" merge -m "$SYN" --lora "$D/fx.gguf" -o "$D/syn-f32.gguf" 2>/dev/null || fail "syn merge"
"$WISP" logits -m "$D/syn-f32.gguf" "${args[@]}" --json > "$D/syn-f32.json"
"$TOOLS/compare_logits" "$SHARED/golden/logits/syn-llama-gqa-f32.json" "$D/syn-f32.json" --tol 10 > "$D/effect.txt"
grep -q "rel RMS 0.0" "$D/effect.txt" && fail "the fixture adapter barely changes the model: $(cat "$D/effect.txt")"
# tolerance: 1.5 x how far llama.cpp's own quantization of the base lands from its F32 logits
max_rel() { "$TOOLS/compare_logits" "$1" "$2" --tol 1e9 | awk '{ if ($7 > m) m = $7 } END { print m + 0 }'; }
GL=$SHARED/golden/logits
for type in q8_0 q4_k_m; do
    "$WISP" merge -m "$SYN" --lora "$D/fx.gguf" --type $type -o "$D/syn-$type.gguf" -t 2 2>/dev/null || fail "merge --type $type"
    "$WISP" merge -m "$SYN" --lora "$D/fx.gguf" --type $type -o "$D/syn-$type-t1.gguf" -t 1 2>/dev/null
    cmp -s "$D/syn-$type.gguf" "$D/syn-$type-t1.gguf" || fail "$type: thread count changed the merged bytes"
    "$WISP" logits -m "$D/syn-$type.gguf" "${args[@]}" --json > "$D/syn-$type.json"
    tol=$(awk -v t="$(max_rel "$GL/syn-llama-gqa-f32.json" "$GL/syn-llama-gqa-$type.json")" 'BEGIN { print 1.5 * t }')
    "$TOOLS/compare_logits" "$D/syn-f32.json" "$D/syn-$type.json" --tol "$tol" || fail "$type merge too far from the F32 merge"
    ok
done
# merging into an already quantized base (dequantize -> merge -> re-quantize)
"$WISP" quantize "$SYN" "$D/base-q8.gguf" q8_0 2>/dev/null || fail "quantize"
"$WISP" merge -m "$D/base-q8.gguf" --lora "$D/fx.gguf" -o "$D/q8-merged.gguf" 2>/dev/null || fail "merge into q8_0"
"$WISP" logits -m "$D/q8-merged.gguf" "${args[@]}" --json > "$D/q8-merged.json"
tol=$(awk -v t="$(max_rel "$GL/syn-llama-gqa-f32.json" "$GL/syn-llama-gqa-q8_0.json")" 'BEGIN { print 2 * t }')
"$TOOLS/compare_logits" "$D/syn-f32.json" "$D/q8-merged.json" --tol "$tol" || fail "merge into a Q8_0 base"
ok

# hostile inputs: clean errors, nothing written
W=${WISP_ASAN:-$WISP}
export ASAN_OPTIONS=abort_on_error=0:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
expect_msg() {
    local needle=$1 out rc; shift
    out=$(timeout 120 "$@" 2>&1); rc=$?
    [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "exit $rc: $* :: $out"
    case "$out" in *"$needle"*) ;; *) fail "message lacks '$needle': $out" ;; esac
    ok
}
expect_msg "wrong base model" "$W" merge -m "$SYN" --lora "$A/adapter.gguf" -o "$D/bad.gguf"
[ ! -e "$D/bad.gguf" ] || fail "failed merge left output"
expect_msg "unknown --type" "$W" merge -m "$BASE" --lora "$A/adapter.gguf" --type q9_9 -o "$D/bad.gguf"
expect_msg "needs -m" "$W" merge -m "$BASE" -o "$D/bad.gguf"
expect_msg "same file" "$W" merge -m "$BASE" --lora "$A/adapter.gguf" -o "$BASE"
expect_msg "nope" "$W" merge -m "$BASE" --lora "$D/nope.gguf" -o "$D/bad.gguf"
head -c 5000 "$A/adapter.gguf" > "$D/cut.gguf"
expect_msg "cut.gguf" "$W" merge -m "$BASE" --lora "$D/cut.gguf" -o "$D/bad.gguf"
"$TOOLS/gguf_mutate" "$SYN" "$D/iq.gguf" type blk.0.attn_q.weight 16   # IQ2_XXS: wisp has no quantizer for it
expect_msg "cannot rewrite IQ2_XXS" "$W" merge -m "$D/iq.gguf" --lora "$D/fx.gguf" -o "$D/bad.gguf"
[ ! -e "$D/bad.gguf" ] || fail "failed merge left output"
done_ok
