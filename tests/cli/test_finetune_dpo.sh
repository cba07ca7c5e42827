# wisp finetune --method dpo on stories260K with a synthetic preference set:
# every chosen answer ends with the same fixed sentence, every rejected one
# with another ending. After training, held-out pairs (new name/animal/thing
# combinations) must have rewards/accuracies above 0.9 and a margin that grew
# from 0, while the same pairs with the labels flipped drive them below 0.1; the IPO and label-smoothing variants train; the planned arena is
# exact; a stopped and resumed run ends byte-identical (with the reference
# scored per step, and scored once up front); bad pairs fail by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/dpo_pairs.sh"
need models/stories260K.gguf
model="$SHARED/models/stories260K.gguf"
mkdir -p "$WORK"
make_pairs 1 96 "$WORK/pairs.jsonl"
make_pairs 2 32 "$WORK/heldout.jsonl"


loud=(-m "$model" --method dpo --data "$WORK/pairs.jsonl" --val "$WORK/heldout.jsonl" --ctx 64 --batch 4
      --rank 4 --lr 5e-3 --beta 0.1 --steps 8 --eval-every 4 --schedule constant)
common=("${loud[@]}" -q)
"$WISP" finetune "${common[@]}" -t 2 -o "$WORK/dpo-a" --overwrite || fail "finetune --method dpo"
head -1 "$WORK/dpo-a/log.csv" | grep -q 'rewards/chosen,rewards/rejected,rewards/accuracies,rewards/margins' ||
    fail "log.csv lacks trl's reward columns: $(head -1 "$WORK/dpo-a/log.csv")"
ok
acc0=$(col "$WORK/dpo-a" eval_rewards/accuracies 0) acc=$(col "$WORK/dpo-a" eval_rewards/accuracies 8)
m0=$(col "$WORK/dpo-a" eval_rewards/margins 0) m6=$(col "$WORK/dpo-a" eval_rewards/margins 4)
m12=$(col "$WORK/dpo-a" eval_rewards/margins 8) l0=$(col "$WORK/dpo-a" val_loss 0) l12=$(col "$WORK/dpo-a" val_loss 8)
echo "held-out: rewards/accuracies $acc0 -> $acc, rewards/margins $m0 -> $m6 -> $m12, DPO loss $l0 -> $l12"
awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }' || fail "held-out reward accuracy $acc is not above 0.9"
awk -v a="$m0" -v b="$m6" -v c="$m12" 'BEGIN { exit !(a == 0 && b > a && c > b) }' ||
    fail "the held-out margin did not grow: $m0 -> $m6 -> $m12"
awk -v a="$l0" 'BEGIN { exit !(a > 0.6931 && a < 0.6932) }' || fail "the base model's DPO loss is $l0, not log 2"
awk -v a="$l0" -v b="$l12" 'BEGIN { exit !(b < a / 2) }' || fail "the held-out DPO loss did not fall: $l0 -> $l12"
ok

# the control: the same pairs with chosen and rejected swapped teach the opposite preference
python3 - "$WORK/pairs.jsonl" "$WORK/flipped.jsonl" <<'PY' || fail "making the flipped pairs"
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as g:
    for line in f:
        r = json.loads(line)
        r["chosen"], r["rejected"] = r["rejected"], r["chosen"]
        g.write(json.dumps(r) + "\n")
PY
"$WISP" finetune "${common[@]}" --data "$WORK/flipped.jsonl" -t 2 -o "$WORK/dpo-flip" --overwrite || fail "finetune on flipped pairs"
facc=$(col "$WORK/dpo-flip" eval_rewards/accuracies 8) fm=$(col "$WORK/dpo-flip" eval_rewards/margins 8)
echo "control (labels flipped): held-out rewards/accuracies $facc, rewards/margins $fm"
awk -v a="$facc" -v m="$fm" 'BEGIN { exit !(a < 0.1 && m < 0) }' || fail "flipped labels still gave accuracy $facc, margin $fm"
ok

# stopped after 3 steps and resumed with another thread count: byte-identical, both with the
# reference scored in the step (fewer steps than an epoch) and scored once up front (a whole epoch)
head -12 "$WORK/pairs.jsonl" > "$WORK/pairs12.jsonl"
"$WISP" finetune "${common[@]}" --data "$WORK/pairs12.jsonl" --steps 6 --eval-every 3 -t 2 -o "$WORK/dpo-a12" --overwrite ||
    fail "finetune on 12 pairs"
for data in pairs pairs12; do
    steps=8 every=4 whole="$WORK/dpo-a" # the run above
    [ $data = pairs12 ] && steps=6 every=3 whole="$WORK/dpo-a12"
    "$WISP" finetune "${loud[@]}" --data "$WORK/$data.jsonl" --steps $steps --eval-every $every -t 1 --checkpoint-every 2 \
        --stop-after 3 -o "$WORK/dpo-r" --overwrite 2> "$WORK/stop.txt" || fail "finetune --stop-after on $data"
    if [ $data = pairs12 ]; then
        grep -q "reference log-probs of 12 pairs" "$WORK/stop.txt" || fail "12 pairs over 6 steps: no reference scored up front"
    else
        grep -q "reference log-probs" "$WORK/stop.txt" && fail "96 pairs over 8 steps: the reference was scored up front"
    fi
    "$WISP" finetune --resume "$WORK/dpo-r" -t 3 -q || fail "resume on $data"
    cmp "$whole/adapter.gguf" "$WORK/dpo-r/adapter.gguf" || fail "$data: the resumed DPO adapter differs"
    diff <(cut -d, -f1-4,6-15 "$whole/log.csv") <(cut -d, -f1-4,6-15 "$WORK/dpo-r/log.csv") ||
        fail "$data: the resumed log differs"
    ok
done

# IPO and label smoothing train too (the loss falls from its start)
for variant in "--loss-type ipo" "--label-smoothing 0.1"; do
    # shellcheck disable=SC2086
    "$WISP" finetune "${common[@]}" --steps 3 --eval-every 0 $variant -t 2 -o "$WORK/dpo-v" --overwrite ||
        fail "finetune $variant"
    first=$(col "$WORK/dpo-v" loss 1) last=$(col "$WORK/dpo-v" loss 3)
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "$variant: loss $first -> $last did not fall"
    ok
done

# the plan is exact for DPO: the planned arena trains, one byte less fails naming the shortfall
small=(-m "$model" --method dpo --data "$WORK/pairs.jsonl" --val-split 0.1 --ctx 64 --batch 2 --rank 4 --steps 1 -q -t 2)
bytes=$("$WISP" plan -m "$model" --train --method dpo --ctx 64 --batch 2 --rank 4 -t 2 --json |
        grep -o '"total_bytes": [0-9]*' | grep -o '[0-9]*')
lora=$("$WISP" plan -m "$model" --train --ctx 64 --batch 2 --rank 4 -t 2 --json | grep -o '"total_bytes": [0-9]*' | grep -o '[0-9]*')
[ -n "$bytes" ] && [ "$bytes" -gt "$lora" ] || fail "the DPO plan ($bytes) should exceed LoRA's for 2 sequences ($lora)"
"$WISP" finetune "${small[@]}" --arena "$bytes" -o "$WORK/dpo-c" --overwrite || fail "DPO in the planned arena of $bytes bytes"
out=$("$WISP" finetune "${small[@]}" --arena $((bytes - 1)) -o "$WORK/dpo-d" --overwrite 2>&1) &&
    fail "one byte less than the plan still trained"
case "$out" in *"1 bytes short"*) ok ;; *) fail "unclear error for a short arena: $out" ;; esac
echo "planned arena for DPO (2 pairs of 64 tokens): $bytes bytes (LoRA on 2 sequences: $lora)"

# bad pairs and options fail by name
printf '{"prompt": "a", "chosen": [{"role": "assistant", "content": "b"}], "rejected": "c"}\n' > "$WORK/conv.jsonl"
printf '{"chosen": "a b", "rejected": "a c"}\n' > "$WORK/implicit.jsonl"
printf '{"prompt": "a", "chosen": "b", "rejected": "c", "score": 1}\n' > "$WORK/extra.jsonl"
printf 'plain text\n' > "$WORK/plain.txt"
for f in conv implicit extra; do
    out=$("$WISP" finetune -m "$model" --method dpo --data "$WORK/$f.jsonl" -o "$WORK/dpo-bad" --overwrite -q 2>&1) &&
        fail "$f pairs were accepted"
    case "$f:$out" in
        conv:*"all be strings or all be lists"*|implicit:*'no "prompt"'*|extra:*'key "score"'*) ok ;;
        *) fail "$f pairs: unclear error: $out" ;;
    esac
done
expect_fail "$WISP" finetune -m "$model" --method dpo --data "$WORK/plain.txt" -o "$WORK/dpo-bad" --overwrite -q
expect_fail "$WISP" finetune -m "$model" --method dpo --loss-type ipo --label-smoothing 0.1 --data "$WORK/pairs.jsonl" \
    -o "$WORK/dpo-bad" --overwrite -q
expect_fail "$WISP" finetune -m "$model" --label-smoothing 0.1 --data "$WORK/pairs.jsonl" -o "$WORK/dpo-bad" --overwrite -q
expect_fail "$WISP" finetune -m "$model" --method dpo2 --data "$WORK/pairs.jsonl" -o "$WORK/dpo-bad" --overwrite -q
done_ok
