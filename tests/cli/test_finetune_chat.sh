# wisp finetune on conversations ({"messages"} JSONL) with a made instruct
# model carrying SmolLM2's chat template: only assistant tokens are scored
# (the count equals the assistant turns' own tokens), truncation is reported
# exactly, and a few steps lower the held-out assistant loss.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chat_model.sh"
model="$WORK/ftchat.gguf"
chat_model "$model"
dir="$WORK/ftchat"; rm -rf "$dir"; mkdir -p "$dir"
python3 - "$dir" <<'PY' || fail "making the data"
import json, sys
cols = ["red", "blue", "green", "black", "white", "pink", "grey", "gold"]
things = ["apple", "sky", "grass", "night", "snow", "rose", "stone", "coin", "car", "house", "tree", "cat"]
def rec(t, c): return {"messages": [{"role": "user", "content": "Colour of the %s?" % t}, {"role": "assistant", "content": "The %s is %s." % (t, c)}]}
train = [rec(t, cols[i % 8]) for i, t in enumerate(things)] * 3
val = [rec(t, cols[i % 8]) for i, t in enumerate(things[:6])]
for name, rows in (("train", train), ("val", val)):
    open("%s/%s.jsonl" % (sys.argv[1], name), "w").write("".join(json.dumps(r) + "\n" for r in rows))
# each assistant turn as the template writes it, for counting its tokens independently
open("%s/turns.txt" % sys.argv[1], "w").write("".join(r["messages"][1]["content"] + "<|im_end|>\n\0" for r in train))
PY
# the assistant tokens, counted by tokenizing each turn's text on its own
want=0
while IFS= read -r -d '' turn; do
    n=$("$WISP" tokenize -m "$model" --ids --special "$turn" | wc -w) || fail "tokenize"
    want=$((want + n))
done < "$dir/turns.txt"
"$WISP" finetune -m "$model" --data "$dir/train.jsonl" --val "$dir/val.jsonl" -o "$dir/out" --ctx 48 -b 2 --steps 6 \
    --lr 0.01 -t 2 > "$dir/log.txt" 2>&1 || fail "finetune: $(tail -5 "$dir/log.txt")"
grep -q "train.jsonl: 36 records kept, 0 cut to 49 tokens, 0 left with nothing to score; $want scored targets" "$dir/log.txt" ||
    fail "data report (want $want scored targets): $(grep records "$dir/log.txt")"; ok
line=$(grep -o 'validation loss [0-9.]* -> [0-9.]*' "$dir/log.txt") || fail "no validation loss: $(tail -3 "$dir/log.txt")"
set -- $line
awk -v a="$3" -v b="$5" 'BEGIN{exit !(b < a)}' || fail "held-out assistant loss did not go down: $line"; ok
# a window too short for every answer: all records cut, each counted
"$WISP" finetune -m "$model" --data "$dir/train.jsonl" -o "$dir/out2" --ctx 36 -b 2 --steps 1 -t 2 > "$dir/log2.txt" 2>&1 ||
    fail "finetune --ctx 36: $(tail -3 "$dir/log2.txt")"
grep -q "36 records kept, 36 cut to 37 tokens, 0 left with nothing to score" "$dir/log2.txt" || fail "cut report: $(grep records "$dir/log2.txt")"; ok
out=$("$WISP" finetune -m "$model" --data "$dir/train.jsonl" -o "$dir/out3" --ctx 12 -b 2 --steps 1 2>&1) && fail "nothing to score accepted"
case "$out" in *"all 36 records were cut to 13 tokens before anything to score"*) ok ;; *) fail "message: $out" ;; esac
done_ok
