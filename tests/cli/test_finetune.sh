# wisp finetune end to end on stories260K and a slice of Shakespeare (a few
# steps, seconds): the output folder is complete and consistent, validation
# loss falls, the adapter applies in run/logits/eval and gives eval the same
# loss finetune measured, a run stopped and resumed ends byte-identical to an
# uninterrupted one, thread counts do not change the adapter, JSONL records
# train, the planned arena trains (and one byte less fails), bad input fails.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf data/tinyshakespeare.txt
model=$SHARED/models/stories260K.gguf
head -c 40000 "$SHARED/data/tinyshakespeare.txt" > "$WORK/train.txt"
tail -c 6000 "$SHARED/data/tinyshakespeare.txt" > "$WORK/val.txt"
common=(-m "$model" --data "$WORK/train.txt" --val "$WORK/val.txt" --ctx 64 --batch 2 --rank 4 --steps 8
        --eval-every 4 --lora-dropout 0.05 --seed 7 -q)
rm -rf "$WORK"/ft-*

"$WISP" finetune "${common[@]}" -t 2 --checkpoint-every 4 -o "$WORK/ft-a" || fail "finetune failed"
for f in adapter.gguf peft/adapter_config.json peft/adapter_model.safetensors config.json log.csv loss.svg checkpoint.bin; do
    [ -s "$WORK/ft-a/$f" ] || fail "missing $f"
done
ok
grep -q '"rank": 4' "$WORK/ft-a/config.json" && grep -q '"lr": ' "$WORK/ft-a/config.json" &&
    grep -q '"schedule": "cosine"' "$WORK/ft-a/config.json" || fail "config.json lacks settings"
[ "$(head -1 "$WORK/ft-a/log.csv")" = "step,loss,lr,grad_norm,tokens_per_s,val_loss" ] || fail "log.csv header"
[ "$(wc -l < "$WORK/ft-a/log.csv")" -eq 10 ] || fail "log.csv should have a header, step 0 and 8 steps"
head -c 4 "$WORK/ft-a/loss.svg" | grep -q '<svg' || fail "loss.svg is not an SVG"
ok
v0=$(awk -F, 'NR==2{print $6}' "$WORK/ft-a/log.csv"); v8=$(awk -F, 'END{print $6}' "$WORK/ft-a/log.csv")
awk -v a="$v0" -v b="$v8" 'BEGIN{exit !(b < a)}' || fail "validation loss did not fall ($v0 -> $v8)"
echo "validation loss $v0 -> $v8"
ok

# the adapter at inference: eval gives finetune's last validation loss, run/logits accept it
e=$("$WISP" eval -m "$model" --lora "$WORK/ft-a/adapter.gguf" -f "$WORK/val.txt" --ctx 64 --json -t 2) || fail "eval --lora"
le=$(echo "$e" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
awk -v a="$le" -v b="$v8" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < 1e-5)}' || fail "eval loss $le differs from finetune's $v8"
echo "eval with the adapter: $le (finetune: $v8)"
b=$("$WISP" eval -m "$model" -f "$WORK/val.txt" --ctx 64 --json -t 2 | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
awk -v a="$b" -v b="$v0" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < 1e-5)}' || fail "base eval $b differs from step 0's $v0"
ok
"$WISP" run -m "$model" --lora "$WORK/ft-a/adapter.gguf" -p "ROMEO:" -n 16 --temp 0 -q > "$WORK/run-lora.txt" || fail "run --lora"
"$WISP" run -m "$model" --lora "$WORK/ft-a/adapter.gguf:0" -p "ROMEO:" -n 16 --temp 0 -q > "$WORK/run-zero.txt" || fail "run --lora :0"
"$WISP" run -m "$model" -p "ROMEO:" -n 16 --temp 0 -q > "$WORK/run-base.txt" || fail "run"
cmp -s "$WORK/run-zero.txt" "$WORK/run-base.txt" || fail "an adapter at scale 0 changes the text"
"$WISP" logits -m "$model" --lora "$WORK/ft-a/peft" --lora "$WORK/ft-a/adapter.gguf" --lora-scale 0.5 -p "Hi" --json > /dev/null ||
    fail "logits with two adapters (PEFT + GGUF)"
ok

# stopped after 3 steps and resumed (with another thread count): byte-identical to the uninterrupted run
"$WISP" finetune "${common[@]}" -t 1 --checkpoint-every 4 --stop-after 3 -o "$WORK/ft-b" || fail "finetune --stop-after"
[ -s "$WORK/ft-b/checkpoint.bin" ] || fail "no checkpoint after --stop-after"
expect_fail "$WISP" finetune --resume "$WORK/ft-b" --lr 0.1
"$WISP" finetune --resume "$WORK/ft-b" -t 3 -q || fail "resume"
cmp "$WORK/ft-a/adapter.gguf" "$WORK/ft-b/adapter.gguf" || fail "resumed adapter differs from the uninterrupted one"
cmp "$WORK/ft-a/peft/adapter_model.safetensors" "$WORK/ft-b/peft/adapter_model.safetensors" || fail "PEFT copies differ"
diff <(cut -d, -f1-4,6 "$WORK/ft-a/log.csv") <(cut -d, -f1-4,6 "$WORK/ft-b/log.csv") || fail "resumed log differs"
ok

# thread counts: the same adapter
"$WISP" finetune "${common[@]}" -t 3 -o "$WORK/ft-c" || fail "finetune -t 3"
cmp "$WORK/ft-a/adapter.gguf" "$WORK/ft-c/adapter.gguf" || fail "-t 3 gives another adapter than -t 2"
ok

# memory: checkpointing + bf16 activations train in a smaller planned arena; that exact arena works, one byte less fails
small=(-m "$model" --data "$WORK/train.txt" --val-split 0.1 --ctx 64 --batch 2 --rank 4 --steps 2 --checkpointing
       --act-dtype bf16 -q -t 2)
total_bytes() { "$WISP" plan -m "$model" --train --ctx 64 --batch 2 --rank 4 -t 2 --json "$@" |
                grep -o '"total_bytes": [0-9]*' | grep -o '[0-9]*'; }
full=$(total_bytes) bytes=$(total_bytes --checkpointing --act-dtype bf16)
[ "$bytes" -lt "$full" ] || fail "checkpointing + bf16 should plan less ($bytes vs $full)"
"$WISP" finetune "${small[@]}" --arena "$bytes" -o "$WORK/ft-d" || fail "finetune in the planned arena of $bytes bytes"
expect_fail "$WISP" finetune "${small[@]}" --arena $((bytes - 1)) -o "$WORK/ft-e"
echo "planned arena: $full bytes, $bytes with checkpointing + bf16"
ok

# JSONL records
printf '%s\n' '{"prompt": "Q: Who loves Juliet?\nA:", "completion": " Romeo."}' \
    '{"instruction": "Name a king.", "input": "", "output": "Lear"}' \
    '{"instruction": "Reply.", "input": "Good morrow", "output": "Good morrow to you."}' > "$WORK/qa.jsonl"
"$WISP" finetune -m "$model" --data "$WORK/qa.jsonl" --ctx 96 --batch 3 --rank 2 --steps 3 -q -t 2 -o "$WORK/ft-j" ||
    fail "finetune on JSONL"
"$WISP" eval -m "$model" --lora "$WORK/ft-j/adapter.gguf" -f "$WORK/qa.jsonl" --ctx 96 > /dev/null || fail "eval on JSONL"
ok

# bad input: clear errors, nothing crashes
expect_fail "$WISP" finetune -m "$model" -o "$WORK/ft-x"
expect_fail "$WISP" finetune "${common[@]}" --targets attn_z -o "$WORK/ft-x"
expect_fail "$WISP" finetune "${common[@]}" --schedule wavy -o "$WORK/ft-x"
expect_fail "$WISP" finetune "${common[@]}" -o "$WORK/ft-a"            # a run is already there
printf '{"prompt": "a"}\n' > "$WORK/bad.jsonl"
expect_fail "$WISP" finetune -m "$model" --data "$WORK/bad.jsonl" --ctx 32 -o "$WORK/ft-x"
expect_fail "$WISP" finetune --resume "$WORK/nothing-here"
expect_fail "$WISP" eval -m "$model" -f "$WORK/val.txt" --lora "$WORK/missing.gguf"
done_ok
