# A llama2.c checkpoint converted with wisp gives exactly the logits of the
# reference GGUF of the same model.
source "$(dirname "$0")/lib.sh"
need models/stories260K.bin models/tok512.bin models/stories260K.gguf
out="$WORK/converted.gguf"
rm -f "$out"
"$WISP" convert-llama2c "$SHARED/models/stories260K.bin" "$SHARED/models/tok512.bin" -o "$out" || fail "conversion failed"
ok
p1="Once upon a time"; p2="The little dog ran to the park and saw a big red ball."
"$WISP" logits -m "$SHARED/models/stories260K.gguf" -p "$p1" -p "$p2" --json > "$WORK/l2c-ref.json" || fail "reference logits"
"$WISP" logits -m "$out" -p "$p1" -p "$p2" --json > "$WORK/l2c-conv.json" || fail "converted logits"
"$TOOLS/compare_logits" "$WORK/l2c-ref.json" "$WORK/l2c-conv.json" --tol 0 --greedy-exact || fail "logits differ"
ok
# identical tokenization of a harder string
a=$("$WISP" tokenize -m "$SHARED/models/stories260K.gguf" --ids "Héllo,  wörld! 123 \$x")
b=$("$WISP" tokenize -m "$out" --ids "Héllo,  wörld! 123 \$x")
[ "$a" = "$b" ] || fail "tokenizers differ: $a vs $b"; ok
# a truncated checkpoint or a mismatched tokenizer is a clear error and leaves no output behind
head -c 100000 "$SHARED/models/stories260K.bin" > "$WORK/trunc.bin"
rm -f "$WORK/bad.gguf"
expect_fail "$WISP" convert-llama2c "$WORK/trunc.bin" "$SHARED/models/tok512.bin" -o "$WORK/bad.gguf"
[ ! -e "$WORK/bad.gguf" ] || fail "a failed conversion left an output file"; ok
head -c 3000 "$SHARED/models/tok512.bin" > "$WORK/trunc-tok.bin"
expect_fail "$WISP" convert-llama2c "$SHARED/models/stories260K.bin" "$WORK/trunc-tok.bin" -o "$WORK/bad.gguf"
# an existing good file survives a failed conversion
cp "$out" "$WORK/keep.gguf"
expect_fail "$WISP" convert-llama2c "$WORK/trunc.bin" "$SHARED/models/tok512.bin" -o "$WORK/keep.gguf"
cmp -s "$out" "$WORK/keep.gguf" || fail "a failed conversion damaged the existing output"; ok
done_ok
