# wisp lora-grad matches the float64 PyTorch references of ../shared/golden/grad:
# loss to 1e-5 relative, every dA/dB to 1e-4 of its tensor's max |value|.
# Thread counts and checkpointing give byte-identical output; reduced-precision
# storage stays close; bad input fails cleanly.
source "$(dirname "$0")/lib.sh"
need golden/grad/stories260K-lora-r4.json golden/grad/syn-llama-gqa-lora-r8.json models/stories260K.gguf \
    models/synthetic/syn-llama-gqa-f32.gguf
check() { # golden model extra-args... ; compare with tolerances from $tol
    local golden=$1 model=$2
    shift 2
    "$WISP" lora-grad -m "$model" --init "$golden" --json "$@" > "$WORK/grad.json" || fail "lora-grad $* failed"
    "$TOOLS/compare_grad" "$golden" "$WORK/grad.json" $tol || fail "$(basename "$golden") $*: gradients disagree"
    ok
}
for pair in "stories260K-lora-r4 models/stories260K.gguf" "syn-llama-gqa-lora-r8 models/synthetic/syn-llama-gqa-f32.gguf"; do
    set -- $pair
    golden=$SHARED/golden/grad/$1.json model=$SHARED/$2
    echo "== $1"
    tol=""
    check "$golden" "$model" -t 1
    cp "$WORK/grad.json" "$WORK/grad-t1.json"
    for t in 2 3; do
        check "$golden" "$model" -t $t
        cmp -s "$WORK/grad.json" "$WORK/grad-t1.json" || fail "$1: -t $t output differs from -t 1"
    done
    check "$golden" "$model" -t 2 --checkpointing
    cmp -s "$WORK/grad.json" "$WORK/grad-t1.json" || fail "$1: checkpointing changes the gradients"
    # saved activations in 16 bits: the gradient of slightly rounded activations
    tol="--loss-tol 2e-3 --grad-tol 0.05"
    for dt in bf16 f16; do check "$golden" "$model" -t 2 --act-dtype $dt; check "$golden" "$model" -t 2 --act-dtype $dt --checkpointing; done
done

# hostile input: clear errors, no crash
golden=$SHARED/golden/grad/stories260K-lora-r4.json model=$SHARED/models/stories260K.gguf
printf '{"tokens": [1, 2], "rank": 4, "scale": 2, "lora": {"blk.9.attn_q": {"A": [], "B": []}}}' > "$WORK/bad1.json"
expect_fail "$WISP" lora-grad -m "$model" --init "$WORK/bad1.json" --json
printf '{"tokens": [1, 2], "rank": 4, "scale": 2, "lora": {"blk.0.attn_q": {"A": [[1]], "B": []}}}' > "$WORK/bad2.json"
expect_fail "$WISP" lora-grad -m "$model" --init "$WORK/bad2.json" --json
printf '{"tokens": [1, 99999], "rank": 4, "scale": 2, "lora": {}}' > "$WORK/bad3.json"
expect_fail "$WISP" lora-grad -m "$model" --init "$WORK/bad3.json" --json
head -c 1000 "$golden" > "$WORK/truncated.json"
expect_fail "$WISP" lora-grad -m "$model" --init "$WORK/truncated.json" --json
expect_fail "$WISP" lora-grad -m "$model" --init "$golden"
done_ok
