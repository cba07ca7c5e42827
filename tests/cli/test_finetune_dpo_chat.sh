# wisp finetune --method dpo on trl's conversational pairs ({"prompt": [messages],
# "chosen": [messages], "rejected": [messages]}): on stories260K with the ChatML
# template, a synthetic set where every chosen answer ends with the same
# sentence takes held-out rewards/accuracies above 0.9 and grows the margin
# from 0; on a model with SmolLM2's tokenizer and chat template, the scored
# targets of each side are exactly the answers as `wisp template` renders them
# (prompt + answer minus the prompt with its generation prompt) tokenized with
# their special tokens, plus one EOS each; what cannot be rendered is refused
# by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/dpo_pairs.sh"
source "$(dirname "$0")/chat_model.sh"
need models/stories260K.gguf
model="$SHARED/models/stories260K.gguf"
D=$WORK/dpo_chat
rm -rf "$D" && mkdir -p "$D"
make_pairs 1 96 "$D/pairs.jsonl" chat
make_pairs 2 32 "$D/heldout.jsonl" chat

"$WISP" finetune -m "$model" --method dpo --chat-template chatml --data "$D/pairs.jsonl" --val "$D/heldout.jsonl" --ctx 96 \
    --batch 4 --rank 4 --lr 5e-3 --beta 0.1 --steps 8 --eval-every 4 --schedule constant -q -t 2 -o "$D/a" 2> "$D/a.err" ||
    fail "finetune --method dpo on conversational pairs: $(cat "$D/a.err")"
grep -q 'pairs.jsonl (chosen): 96 records kept, 0 cut' "$D/a.err" || fail "records cut or lost: $(cat "$D/a.err")"
acc0=$(col "$D/a" eval_rewards/accuracies 0) acc=$(col "$D/a" eval_rewards/accuracies 8)
m0=$(col "$D/a" eval_rewards/margins 0) m4=$(col "$D/a" eval_rewards/margins 4) m8=$(col "$D/a" eval_rewards/margins 8)
l0=$(col "$D/a" val_loss 0) l8=$(col "$D/a" val_loss 8)
echo "conversational pairs, held-out: rewards/accuracies $acc0 -> $acc, rewards/margins $m0 -> $m4 -> $m8, DPO loss $l0 -> $l8"
awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }' || fail "held-out reward accuracy $acc is not above 0.9"
awk -v a="$m0" -v b="$m4" -v c="$m8" 'BEGIN { exit !(a == 0 && b > a && c > b) }' || fail "the margin did not grow: $m0 -> $m4 -> $m8"
awk -v a="$l0" 'BEGIN { exit !(a > 0.6931 && a < 0.6932) }' || fail "the base model's DPO loss is $l0, not log 2"
ok

# the scored targets are the answers as `wisp template` renders them, with their special tokens, and an EOS
cm="$D/chat.gguf"
chat_model "$cm"
head -3 "$D/pairs.jsonl" > "$D/three.jsonl"
"$WISP" finetune -m "$cm" --method dpo --data "$D/three.jsonl" --ctx 64 --batch 1 --rank 2 --steps 1 -q -t 2 -o "$D/s" \
    2> "$D/s.err" || fail "finetune on the SmolLM2-template model: $(cat "$D/s.err")"
for side in chosen rejected; do
    want=0
    for i in 1 2 3; do
        python3 - "$D/three.jsonl" $i $side "$D/p.json" "$D/pa.json" <<'PY' || fail "split pair $i"
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2]) - 1])
json.dump(r["prompt"], open(sys.argv[4], "w"))
json.dump(r["prompt"] + r[sys.argv[3]], open(sys.argv[5], "w"))
PY
        "$WISP" template -m "$cm" --messages "$D/p.json" > "$D/p.txt" || fail "template prompt"
        "$WISP" template -m "$cm" --messages "$D/pa.json" --no-generation-prompt > "$D/pa.txt" || fail "template prompt+answer"
        answer=$(python3 -c "
import sys
p, pa = open('$D/p.txt').read(), open('$D/pa.txt').read()
assert pa.startswith(p), 'prompt + answer does not start with the prompt'
sys.stdout.write(pa[len(p):] + 'x')") || fail "the renderings do not nest"
        ids=$("$WISP" tokenize -m "$cm" --ids --special "${answer%x}") || fail "tokenize"
        want=$((want + $(echo $ids | wc -w) + 1))
    done
    got=$(sed -n "s/.*three.jsonl ($side): .* \([0-9]*\) scored targets.*/\1/p" "$D/s.err")
    [ "$got" = "$want" ] || fail "$side: $got scored targets, the template's answers tokenize to $want with EOS: $(cat "$D/s.err")"
    ok
done

# refused by name: a prompt ending with the assistant's message, no template, strings mixed with lists
printf '%s\n' '{"prompt": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well"}], "chosen": [{"role": "assistant", "content": "a"}], "rejected": [{"role": "assistant", "content": "b"}]}' > "$D/cont.jsonl"
out=$("$WISP" finetune -m "$model" --method dpo --chat-template chatml --data "$D/cont.jsonl" -o "$D/bad" -q 2>&1) &&
    fail "a prompt ending with the assistant's message was accepted"
case "$out" in *"continuation of a final assistant message is not implemented"*) ok ;; *) fail "unclear: $out" ;; esac
out=$("$WISP" finetune -m "$model" --method dpo --data "$D/pairs.jsonl" -o "$D/bad" -q 2>&1) && fail "no template accepted"
case "$out" in *"needs a chat template"*) ok ;; *) fail "unclear: $out" ;; esac
done_ok
