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

# the families of the architecture table (no float64 goldens here: test_train_fd checks their gradients
# against finite differences of a float64 reference): a rank-2 adapter on every projection of layer 0,
# 24 tokens (past the gemma windows of 16); thread counts and checkpointing give byte-identical output
init_for() { # model -> JSON init on stdout, shapes from `wisp info`
    "$WISP" info -m "$1" | awk '
        /^  embedding / {d=$2} /^  heads / {h=$2; kv=$3; sub(/\(/, "", kv)} /^  head size / {hd=$3} /^  feed-forward / {f=$2}
        END {
            q=h*hd; k=kv*hd; split("attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down", name, " ")
            split(d" "d" "d" "q" "d" "d" "f, nin, " "); split(q" "k" "k" "d" "f" "f" "d, nout, " ")
            srand(11); printf "{\"tokens\": [1"; for (i = 1; i < 24; i++) printf ", %d", 3 + int(rand() * 500)
            printf "], \"rank\": 2, \"alpha\": 2, \"scale\": 1, \"lora\": {"
            for (p = 1; p <= 7; p++) {
                printf "%s\"blk.0.%s\": {\"A\": [", (p > 1 ? ", " : ""), name[p]
                for (r = 0; r < 2; r++) { printf "%s[", (r ? ", " : ""); for (i = 0; i < nin[p]; i++) printf "%s%.4f", (i ? ", " : ""), rand() * 0.2 - 0.1; printf "]" }
                printf "], \"B\": ["
                for (o = 0; o < nout[p]; o++) printf "%s[%.4f, %.4f]", (o ? ", " : ""), rand() * 0.2 - 0.1, rand() * 0.2 - 0.1
                printf "]}"
            }
            print "}}"
        }'
}
for m in syn-llama3-rope-f32 syn-qwen3-f16 syn-gemma2-f32 syn-gemma3-f16 syn-phi3-longrope-f32; do
    need models/synthetic/$m.gguf
    model=$SHARED/models/synthetic/$m.gguf
    init_for "$model" > "$WORK/init-$m.json"
    "$WISP" lora-grad -m "$model" --init "$WORK/init-$m.json" --json -t 1 > "$WORK/grad-$m-t1.json" || fail "$m: lora-grad failed"
    grep -q '"dB": \[\[' "$WORK/grad-$m-t1.json" || fail "$m: no gradients in the output"
    grep -qi 'nan\|inf' "$WORK/grad-$m-t1.json" && fail "$m: non-finite gradients"
    for opt in "-t 3" "-t 2 --checkpointing"; do
        "$WISP" lora-grad -m "$model" --init "$WORK/init-$m.json" --json $opt > "$WORK/grad-$m.json" || fail "$m $opt failed"
        cmp -s "$WORK/grad-$m.json" "$WORK/grad-$m-t1.json" || fail "$m: $opt changes the gradients"
        ok
    done
    echo "== $m: lora-grad identical over thread counts and checkpointing"
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
