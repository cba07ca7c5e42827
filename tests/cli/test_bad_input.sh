# Truncated, bit-flipped and shape-inconsistent GGUF files give one clear
# error line and a non-zero exit, never a crash, under ASan+UBSan.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/synthetic/syn-qwen2-q4_k_m.gguf
W=${WISP_ASAN:-$WISP}
export ASAN_OPTIONS=abort_on_error=0:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
# expect_clean_error FILE: wisp must fail with exit 1 and a message naming the file
expect_clean_error() {
    local out rc
    out=$(timeout 60 "$W" run -m "$1" -p "Once upon a time" -n 4 -q 2>&1 >/dev/null); rc=$?
    [ $rc -eq 1 ] || fail "$1: exit $rc (want 1): $out"
    case "$out" in *"$1"*) ;; *) fail "$1: the message does not name the file: $out" ;; esac
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$1: more than one line of error: $out"
    ok
}
# runs_or_fails_cleanly FILE: a damaged file may still run (a flipped weight
# bit is valid data) but must never crash or hang
runs_or_fails_cleanly() {
    local rc
    timeout 60 "$W" run -m "$1" -p "Once upon a time" -n 4 -q >/dev/null 2>"$WORK/bad.err"; rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "$1: exit $rc: $(cat "$WORK/bad.err")"
    ok
}
for model in models/stories260K.gguf models/synthetic/syn-qwen2-q4_k_m.gguf; do
    src="$SHARED/$model"
    size=$(stat -c %s "$src")
    base=$(basename "$model" .gguf)
    for cut in 0 3 4 7 8 15 16 23 24 25 100 1000 5000 20000 $((size / 2)) $((size - 1)); do
        f="$WORK/$base-trunc-$cut.gguf"
        "$TOOLS/gguf_mutate" "$src" "$f" truncate $cut
        expect_clean_error "$f"
    done
    for seed in 1 2 3 4 5 6 7 8 9 10 11 12; do
        f="$WORK/$base-flip-$seed.gguf"
        "$TOOLS/gguf_mutate" "$src" "$f" flip-header $seed 3
        runs_or_fails_cleanly "$f"
        "$TOOLS/gguf_mutate" "$src" "$f" flip $seed 50
        runs_or_fails_cleanly "$f"
    done
    f="$WORK/$base-shape.gguf"
    "$TOOLS/gguf_mutate" "$src" "$f" shape blk.0.attn_k.weight
    expect_clean_error "$f"
    "$TOOLS/gguf_mutate" "$src" "$f" shape blk.1.ffn_norm.weight
    expect_clean_error "$f"
    "$TOOLS/gguf_mutate" "$src" "$f" type blk.0.attn_q.weight 99
    expect_clean_error "$f"
    "$TOOLS/gguf_mutate" "$src" "$f" type blk.0.attn_q.weight 16   # IQ2_XXS: known, not runnable
    expect_clean_error "$f"
done
arch=llama
f="$WORK/heads.gguf"
"$TOOLS/gguf_mutate" "$SHARED/models/stories260K.gguf" "$f" u32 llama.attention.head_count_kv 3
expect_clean_error "$f"
"$TOOLS/gguf_mutate" "$SHARED/models/stories260K.gguf" "$f" u32 llama.attention.head_count 0
expect_clean_error "$f"
"$TOOLS/gguf_mutate" "$SHARED/models/stories260K.gguf" "$f" u32 llama.block_count 6
expect_clean_error "$f"
"$TOOLS/gguf_mutate" "$SHARED/models/stories260K.gguf" "$f" u32 llama.embedding_length 4000000000
expect_clean_error "$f"
# not a GGUF at all, and a missing file
expect_clean_error "$SHARED/models/tok512.bin"
out=$("$W" run -m "$WORK/does-not-exist.gguf" -p x 2>&1); [ $? -eq 1 ] || fail "missing file"; ok
done_ok
