# wisp run --chat and wisp chat with --lora, on stories260K with the ChatML
# template and adapters trained here (LoRA as GGUF and PEFT, DoRA, prompt
# tuning, prefix tuning): the answer is the greedy continuation that `wisp run --lora` gives
# for the template's rendering (the prompt's virtual tokens lead both); in the
# interactive chat, turns that reuse the KV cache, a /reset and a context that
# fills (oldest turns dropped) each answer as a fresh `run --chat` of the same
# messages does; and what cannot be combined is refused by name.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf data/tinyshakespeare.txt
command -v python3 >/dev/null || fail "python3 is needed to read the transcripts"
model=$SHARED/models/stories260K.gguf
D=$WORK/chat_lora
rm -rf "$D" && mkdir -p "$D"
head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt"
train=(-m "$model" --data "$D/train.txt" --ctx 32 --batch 2 --steps 4 --seed 7 -q -t 2)
"$WISP" finetune "${train[@]}" --method prompt --num-virtual-tokens 6 --lr 3e-2 -o "$D/prompt" || fail "finetune prompt"
"$WISP" finetune "${train[@]}" --method prefix --num-virtual-tokens 4 --lr 3e-2 -o "$D/prefix" 2>/dev/null || fail "finetune prefix"
"$WISP" finetune "${train[@]}" --rank 4 --lr 3e-3 -o "$D/lora" 2>/dev/null || fail "finetune lora"
"$WISP" finetune "${train[@]}" --method dora --rank 4 --lr 3e-3 -o "$D/dora" 2>/dev/null || fail "finetune dora"
chat=(-m "$model" --chat-template chatml --temp 0 -q)

# run --chat --lora: the rendering's greedy continuation under the same adapter
printf '[{"role":"system","content":"Tell a story."},{"role":"user","content":"Once upon a time"}]' > "$D/m.json"
"$WISP" template -m "$model" --chat-template chatml --messages "$D/m.json" > "$D/m.txt" || fail "template"
text=$(cat "$D/m.txt"; printf x)   # (the x keeps the final newline)
"$WISP" run --chat "${chat[@]}" --messages "$D/m.json" -n 24 --ctx 128 > "$D/base.out" || fail "run --chat"
for a in prompt/peft prefix/peft lora/adapter.gguf lora/peft dora/peft; do
    "$WISP" run --chat "${chat[@]}" --lora "$D/$a" --messages "$D/m.json" -n 24 --ctx 128 > "$D/chat.out" 2> "$D/chat.err" ||
        fail "run --chat --lora $a: $(cat "$D/chat.err")"
    "$WISP" run -m "$model" --lora "$D/$a" -p "${text%x}" --no-echo -n 24 --temp 0 --ctx 128 -q > "$D/run.out" ||
        fail "run --lora $a"
    cmp -s "$D/chat.out" "$D/run.out" || fail "$a: run --chat [$(cat "$D/chat.out")] != run [$(cat "$D/run.out")]"
    cmp -s "$D/chat.out" "$D/base.out" && fail "$a: the adapter changed nothing in the answer [$(cat "$D/chat.out")]"
    ok
done

# wisp chat with the prompt adapter (and the LoRA beside it): two turns on the kept cache, /reset, one more;
# each answer equals a fresh run --chat of the conversation before it
both=(--lora "$D/prompt/peft" --lora "$D/lora/adapter.gguf")
printf 'Once upon a time\nWhat did the cat do?\n/save %s\n/reset\nTell me about the sea\n/save %s\n' \
    "$D/s2.json" "$D/s3.json" | "$WISP" chat "${chat[@]}" "${both[@]}" -sys "Tell a story." -n 16 --ctx 256 > "$D/i.out" 2>&1 ||
    fail "wisp chat --lora: $(cat "$D/i.out")"
[ -s "$D/s2.json" ] && [ -s "$D/s3.json" ] || fail "no transcripts: $(cat "$D/i.out")"
python3 - "$D" <<'PY' || fail "transcript split"
import json, sys
d = sys.argv[1]
s2, s3 = json.load(open(d + "/s2.json")), json.load(open(d + "/s3.json"))
assert [m["role"] for m in s2] == ["system", "user", "assistant", "user", "assistant"], s2
assert [m["role"] for m in s3] == ["system", "user", "assistant"], s3
cases = [(s2[:2], s2[2]), (s2[:4], s2[4]), (s3[:2], s3[2])]
for i, (before, answer) in enumerate(cases):
    json.dump(before, open("%s/turn%d.json" % (d, i), "w"))
    open("%s/turn%d.answer" % (d, i), "w").write(answer["content"])
PY
for i in 0 1 2; do
    "$WISP" run --chat "${chat[@]}" "${both[@]}" --messages "$D/turn$i.json" -n 16 --ctx 256 > "$D/fresh$i.out" ||
        fail "run --chat turn $i"
    printf '\n' >> "$D/turn$i.answer"
    cmp -s "$D/fresh$i.out" "$D/turn$i.answer" ||
        fail "chat turn $i answered [$(cat "$D/turn$i.answer")], a fresh run --chat [$(cat "$D/fresh$i.out")]"
    ok
done

# the context fills with the prompt adapter leading it: the oldest turns go and the answer is the one a
# fresh run --chat gives for the messages kept
python3 - "$D" <<'PY'
import json, sys
m = [{"role": "system", "content": "Tell a story."}]
for i in range(12): m += [{"role": "user", "content": "Question %d about the cat?" % i},
                          {"role": "assistant", "content": "The cat %d sat on the big red mat." % i}]
m.append({"role": "user", "content": "And the dog?"})
json.dump(m, open(sys.argv[1] + "/long.json", "w"))
PY
"$WISP" run --chat -m "$model" --chat-template chatml --temp 0 --lora "$D/prompt/peft" --messages "$D/long.json" -n 8 \
    --ctx 128 > "$D/long.out" 2> "$D/long.err" || fail "full context: $(cat "$D/long.err")"
n=$(sed -n 's/.*context of 128 tokens is full: dropped the \([0-9]*\) oldest messages; the system prompt stays.*/\1/p' "$D/long.err")
[ -n "$n" ] || fail "no note about dropped turns: $(cat "$D/long.err")"
python3 -c "
import json, sys
m = json.load(open('$D/long.json')); json.dump(m[:1] + m[1 + $n:], open('$D/kept.json', 'w'))"
"$WISP" run --chat "${chat[@]}" --lora "$D/prompt/peft" --messages "$D/kept.json" -n 8 --ctx 512 > "$D/kept.out" ||
    fail "run --chat kept"
cmp -s "$D/long.out" "$D/kept.out" || fail "after dropping $n messages [$(cat "$D/long.out")] != [$(cat "$D/kept.out")]"
ok

# refused by name: two prompts cannot both lead, a prompt has no scale
out=$("$WISP" chat "${chat[@]}" --lora "$D/prompt/peft" --lora "$D/prompt/peft" < /dev/null 2>&1) && fail "two prompts"
case "$out" in *"only one prompt- or prefix-tuning adapter"*) ok ;; *) fail "unclear refusal: $out" ;; esac
out=$("$WISP" run --chat "${chat[@]}" --lora "$D/prompt/peft:0.5" --messages "$D/m.json" 2>&1) && fail "scaled prompt"
case "$out" in *"a prompt- or prefix-tuning adapter has no scale"*) ok ;; *) fail "unclear refusal: $out" ;; esac
expect_fail "$WISP" run --chat "${chat[@]}" --lora "$D/nosuch" --messages "$D/m.json"
done_ok
