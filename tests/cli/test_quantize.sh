# wisp quantize: every target type, the q4_k_m recipe choosing exactly the
# tensor types llama.cpp chose for the shared synthetic q4_k_m models,
# logits as close to the F32 model's as llama.cpp's own quantizations are
# (within 25%), identical bytes for
# any thread count, row-length fallbacks with a note, clean errors.
source "$(dirname "$0")/lib.sh"
need models/synthetic/syn-llama-gqa-f32.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf \
    models/synthetic/syn-qwen2-f32.gguf models/synthetic/syn-qwen2-q4_k_m.gguf golden/logits/syn-llama-gqa-f32.json \
    models/stories260K.gguf
D=$WORK/quantize
rm -rf "$D" && mkdir -p "$D"
SYN=$SHARED/models/synthetic/syn-llama-gqa-f32.gguf
G=$SHARED/golden/logits/syn-llama-gqa-f32.json
args=(); while IFS= read -r p; do args+=(-p "$p"); done < <("$TOOLS/golden_prompts" "$G")
# tensor name -> type, one per line, from wisp info --tensors
types() { "$WISP" info -m "$1" --tensors 2>/dev/null | awk '$1 == "tensor" {print $2, $3}' | sort; }

for arch in llama-gqa qwen2; do
    "$WISP" quantize "$SHARED/models/synthetic/syn-$arch-f32.gguf" "$D/$arch-q4_k_m.gguf" q4_k_m 2>/dev/null ||
        fail "quantize $arch q4_k_m"
    types "$D/$arch-q4_k_m.gguf" > "$D/mine.txt"
    types "$SHARED/models/synthetic/syn-$arch-q4_k_m.gguf" > "$D/llamacpp.txt"
    [ -s "$D/mine.txt" ] || fail "no tensor list from wisp info --tensors"
    diff "$D/mine.txt" "$D/llamacpp.txt" > "$D/diff.txt" || fail "$arch q4_k_m types differ from llama.cpp's: $(cat "$D/diff.txt")"
    ok
done

# the largest relative RMS error over the cases of two logits files
max_rel() { "$TOOLS/compare_logits" "$1" "$2" --tol 1e9 | awk '{ if ($7 > m) m = $7 } END { print m + 0 }'; }
GL=$SHARED/golden/logits
for type in f16 bf16 q8_0 q6_k q5_k q5_1 q5_0 q4_k q4_1 q4_0 iq4_nl q3_k q2_k q4_k_m q5_k_m; do
    "$WISP" quantize "$SYN" "$D/$type.gguf" $type -t 2 2>"$D/log" || fail "quantize $type: $(cat "$D/log")"
    "$WISP" logits -m "$D/$type.gguf" "${args[@]}" --json > "$D/$type.json" || fail "$type: logits"
    # the yardstick: how far llama.cpp's own quantization of this model lands from its F32 logits
    # (the same bits per weight where llama.cpp's file of that exact type is not in ../shared)
    case $type in iq4_nl) peer=q4_0 ;; q5_k_m) peer=q5_k ;; *) peer=$type ;; esac
    theirs=$(max_rel "$G" "$GL/syn-llama-gqa-$peer.json")
    mine=$(max_rel "$G" "$D/$type.json")
    awk -v a="$mine" -v b="$theirs" 'BEGIN { exit !(a <= 1.25 * b + 0.002) }' ||
        fail "$type: relative RMS $mine from the F32 logits; llama.cpp's $peer file gives $theirs"
    printf '%-7s relative RMS vs F32 logits: wisp %.4f, llama.cpp %.4f\n' "$type" "$mine" "$theirs"
    ok
done
# norms stay F32; thread count does not change a byte
types "$D/q4_0.gguf" | grep norm | grep -qv " F32" && fail "a norm was quantized"
"$WISP" quantize "$SYN" "$D/q4_k_m-t1.gguf" q4_k_m -t 1 2>/dev/null
"$WISP" quantize "$SYN" "$D/q4_k_m-t3.gguf" q4_k_m -t 3 2>/dev/null
cmp -s "$D/q4_k_m-t1.gguf" "$D/q4_k_m-t3.gguf" && cmp -s "$D/q4_k_m.gguf" "$D/q4_k_m-t1.gguf" ||
    fail "thread count changed the output"
ok
# stories260K: rows of 64 and 172 elements fall back, with notes
"$WISP" quantize "$SHARED/models/stories260K.gguf" "$D/s.gguf" q4_k_m 2>"$D/log" || fail "stories q4_k_m: $(cat "$D/log")"
grep -q "do not split into Q4_K blocks; stored as Q5_0" "$D/log" || fail "no fallback note: $(cat "$D/log")"
types "$D/s.gguf" | grep -q "blk.0.ffn_down.weight F16" || fail "172-element rows should end as F16"
"$WISP" run -m "$D/s.gguf" -p "Once upon a time" -n 8 -q > /dev/null 2>&1 || fail "the fallback model does not run"
ok

W=${WISP_ASAN:-$WISP}
export ASAN_OPTIONS=abort_on_error=0:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
expect_fail "$W" quantize "$SYN" "$D/x.gguf" q9_9
expect_fail "$W" quantize "$SYN" "$SYN" q8_0
head -c 100000 "$SYN" > "$D/cut.gguf"
expect_fail "$W" quantize "$D/cut.gguf" "$D/x.gguf" q8_0
"$TOOLS/gguf_mutate" "$SYN" "$D/iq.gguf" type blk.0.attn_q.weight 16   # IQ2_XXS: sized, not convertible
expect_fail "$W" quantize "$D/iq.gguf" "$D/x.gguf" q8_0
[ ! -e "$D/x.gguf" ] || fail "a failed quantize left output"
done_ok
