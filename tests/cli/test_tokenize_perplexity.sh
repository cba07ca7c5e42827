# wisp tokenize (ids and pieces, vocabulary-only GGUFs) and wisp perplexity.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf data/tinyshakespeare.txt
ids=$("$WISP" tokenize -m "$SHARED/models/stories260K.gguf" --ids "Once upon a time")
[ "$ids" = "403 407 261 378" ] || fail "stories260K ids: $ids"; ok
ids=$("$WISP" tokenize -m "$SHARED/models/stories260K.gguf" --ids --bos "Once upon a time")
[ "$ids" = "1 403 407 261 378" ] || fail "with --bos: $ids"; ok
"$WISP" tokenize -m "$SHARED/models/stories260K.gguf" "Once upon" | grep -q "407  ' upon'" || fail "piece listing"; ok
# a vocabulary-only GGUF (no tensors) tokenizes too
ids=$("$WISP" tokenize -m "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf" --ids "Hello world")
[ "$ids" = "19556 905" ] || fail "smollm2 ids: $ids"; ok
# perplexity of the base model on a slice of Shakespeare: finite, plausible, stable across threads
head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$WORK/shakes.txt"
a=$("$WISP" perplexity -m "$SHARED/models/stories260K.gguf" -f "$WORK/shakes.txt" --ctx 128 -t 1 2>/dev/null) || fail "perplexity"
b=$("$WISP" perplexity -m "$SHARED/models/stories260K.gguf" -f "$WORK/shakes.txt" --ctx 128 -t 2 2>/dev/null) || fail "perplexity -t 2"
[ "$a" = "$b" ] || fail "perplexity differs with thread count: $a / $b"; ok
ppl=$(printf '%s' "$a" | sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p')
awk -v p="$ppl" 'BEGIN{exit !(p > 2 && p < 512)}' || fail "implausible perplexity: $a"; ok
# in-domain text scores far better than Shakespeare
"$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 200 --temp 0 -q > "$WORK/story.txt"
s=$("$WISP" perplexity -m "$SHARED/models/stories260K.gguf" -f "$WORK/story.txt" --ctx 128 2>/dev/null | sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p')
awk -v s="$s" -v p="$ppl" 'BEGIN{exit !(s < p / 4)}' || fail "own story ppl $s not far below shakespeare $ppl"; ok
# logits and perplexity honour --arena too, and the F32 KV cache gives the same greedy text
# (perplexity tokenizes the whole file at once: its text budget is the file size + 16)
total=$("$WISP" plan -m "$SHARED/models/stories260K.gguf" --ctx 128 -t 1 --logits-all --text-bytes 20016 --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
"$WISP" perplexity -m "$SHARED/models/stories260K.gguf" -f "$WORK/shakes.txt" --ctx 128 -t 1 --arena "$total" >/dev/null 2>&1 || fail "perplexity in the planned arena ($total)"; ok
expect_fail "$WISP" perplexity -m "$SHARED/models/stories260K.gguf" -f "$WORK/shakes.txt" --ctx 128 -t 1 --arena $((total - 1))
f16=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 48 --temp 0 -q --kv-type f16)
f32=$("$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 48 --temp 0 -q --kv-type f32)
[ "$f16" = "$f32" ] || fail "F16 and F32 KV caches disagree on greedy text"; ok
done_ok
