# The plan is exact: an arena of the planned size runs a full 64-token
# generation; one byte less fails cleanly, naming the shortfall.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf models/synthetic/syn-qwen2-q8_0.gguf
for model in models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf models/synthetic/syn-qwen2-q8_0.gguf; do
    for ctx in 96 512; do
        for t in 1 2; do
            total=$("$WISP" plan -m "$SHARED/$model" --ctx $ctx -t $t --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
            [ -n "$total" ] || fail "no total from wisp plan for $model"
            "$WISP" run -m "$SHARED/$model" -p "Once upon a time" -n 64 --temp 0 --ctx $ctx -t $t -q \
                --arena "$total" > "$WORK/plan-out.txt" || fail "$model ctx $ctx: the planned arena ($total) failed"
            ok
            out=$("$WISP" run -m "$SHARED/$model" -p "Once upon a time" -n 64 --temp 0 --ctx $ctx -t $t -q \
                --arena $((total - 1)) 2>&1) && fail "$model ctx $ctx: one byte less ($((total - 1))) still ran"
            case "$out" in
                *"1 bytes short"*) ok ;;
                *) fail "$model ctx $ctx: unclear error for a short arena: $out" ;;
            esac
        done
    done
    echo "$model: plan exact at ctx 96 and 512, 1 and 2 threads"
done
done_ok
