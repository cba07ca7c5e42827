# LoRA fine-tuning on every family of the architecture table (the synthetic
# models of ../shared/models/synthetic, whose vocabulary is stories260K's):
# a few steps on a slice of Shakespeare with sequences longer than the
# gemma windows lower the held-out loss; `wisp eval` with the adapter gives
# exactly the validation loss finetune measured (inference and training
# compute the same layers); for the windowed, soft-capped gemma2 model a run
# stopped and resumed with another thread count ends byte-identical.
source "$(dirname "$0")/lib.sh"
models="syn-llama3-rope-f32 syn-qwen3-f16 syn-gemma2-f32 syn-gemma3-f16 syn-phi3-longrope-f32"
for m in $models; do need models/synthetic/$m.gguf; done
need data/tinyshakespeare.txt
head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$WORK/arch-train.txt"
tail -c 4000 "$SHARED/data/tinyshakespeare.txt" > "$WORK/arch-val.txt"
for m in $models; do
    model=$SHARED/models/synthetic/$m.gguf
    common=(-m "$model" --data "$WORK/arch-train.txt" --val "$WORK/arch-val.txt" --ctx 40 --batch 2 --rank 4 --steps 8
            --lr 3e-3 --eval-every 8 --seed 5 -q)
    rm -rf "$WORK/ft-$m" "$WORK/ft-$m-b"
    "$WISP" finetune "${common[@]}" -t 2 --checkpoint-every 4 -o "$WORK/ft-$m" || fail "$m: finetune failed"
    v0=$(awk -F, 'NR==2{print $6}' "$WORK/ft-$m/log.csv"); v8=$(awk -F, 'END{print $6}' "$WORK/ft-$m/log.csv")
    awk -v a="$v0" -v b="$v8" 'BEGIN{exit !(b < a)}' || fail "$m: validation loss did not fall ($v0 -> $v8)"
    ok
    e=$("$WISP" eval -m "$model" --lora "$WORK/ft-$m/adapter.gguf" -f "$WORK/arch-val.txt" --ctx 40 --json -t 2) ||
        fail "$m: eval --lora"
    le=$(echo "$e" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$le" -v b="$v8" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < 1e-4)}' || fail "$m: eval loss $le differs from finetune's $v8"
    ok
    echo "$m: validation loss $v0 -> $v8 (eval with the adapter: $le)"
    if [ $m = syn-gemma2-f32 ]; then
        "$WISP" finetune "${common[@]}" -t 1 --checkpoint-every 4 --stop-after 3 -o "$WORK/ft-$m-b" || fail "$m: --stop-after"
        "$WISP" finetune --resume "$WORK/ft-$m-b" -t 3 -q || fail "$m: resume"
        cmp "$WORK/ft-$m/adapter.gguf" "$WORK/ft-$m-b/adapter.gguf" || fail "$m: resumed adapter differs"
        ok
        echo "$m: stopped at 3 and resumed with 3 threads: byte-identical adapter"
    fi
done
# phi3's PEFT copy names Hugging Face's fused modules (qkv_proj, gate_up_proj); test_peft_phi3.sh checks it exactly
grep -q '"qkv_proj"' "$WORK/ft-syn-phi3-longrope-f32/peft/adapter_config.json" || fail "phi3's PEFT copy lacks qkv_proj"
ok
done_ok
