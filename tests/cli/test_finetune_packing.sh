# wisp finetune --packing and --chat-template on conversations ({"messages"}
# JSONL). Packing: the windows and scored targets wisp reports equal an
# independent count (each record rendered by `wisp template`, tokenized by
# `wisp tokenize`, EOS after each record that does not end with it, the stream
# cut into windows of --ctx targets; the scored targets are the assistant turns
# tokenized on their own), nothing is cut, and training lowers the held-out
# assistant loss. --chat-template: a model whose GGUF has no template trains on
# conversations with a built-in format or a Jinja file, scoring exactly the
# assistant tokens; unusable choices are refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chat_model.sh"
model="$WORK/ftpack.gguf"
chat_model "$model"
dir="$WORK/ftpack"; rm -rf "$dir"; mkdir -p "$dir"
python3 - "$dir" <<'PY' || fail "making the data"
import json, sys
cols = ["red", "blue", "green", "black", "white", "pink", "grey", "gold"]
things = ["apple", "sky", "grass", "night", "snow", "rose", "stone", "coin", "car", "house", "tree", "cat"]
def rec(i, t):
    m = [{"role": "user", "content": "Colour of the %s?" % t}, {"role": "assistant", "content": "The %s is %s." % (t, cols[i % 8])}]
    if i % 3 == 0: # some records have two exchanges
        m += [{"role": "user", "content": "Sure?"}, {"role": "assistant", "content": "Yes."}]
    return {"messages": m}
train = [rec(i, t) for i, t in enumerate(things)] * 2
val = [rec(i, t) for i, t in enumerate(things[:6])]
for name, rows in (("train", train), ("val", val)):
    open("%s/%s.jsonl" % (sys.argv[1], name), "w").write("".join(json.dumps(r) + "\n" for r in rows))
for i, r in enumerate(train):
    json.dump(r["messages"], open("%s/rec%02d.json" % (sys.argv[1], i), "w"))
PY
# the independent count: records rendered and tokenized one by one, then packed as documented
count() { # count MODEL_ARGS... -> "records windows scored" for --ctx $S
    python3 - "$WISP" "$dir" "$S" "$@" <<'PY'
import glob, subprocess, sys
wisp, d, S, margs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def ids(text):
    return subprocess.run([wisp, "tokenize", "-m", margs[1], "--ids", "--special", text], check=True,
                          capture_output=True, text=True).stdout.split()
eos = ids("<|im_end|>")
assert len(eos) == 1, eos
import json
n = scored = records = 0
for f in sorted(glob.glob(d + "/rec*.json")):
    text = subprocess.run([wisp, "template", *margs, "--messages", f, "--no-generation-prompt"], check=True,
                          capture_output=True, text=True).stdout
    t = ids(text)
    n += len(t) + (t[-1] != eos[0]) # EOS after a record that does not end with it
    records += 1
    for m in json.load(open(f)):
        if m["role"] == "assistant": # the turn as the template writes it: content, end marker, newline
            scored += len(ids(m["content"] + "<|im_end|>\n"))
print(records, (n - 1 + S - 1) // S, scored)
PY
}
S=40
set -- $(count -m "$model") || fail "independent count"
[ $# -eq 3 ] || fail "independent count: $*"
want_records=$1 want_windows=$2 want_scored=$3
"$WISP" finetune -m "$model" --data "$dir/train.jsonl" --val "$dir/val.jsonl" --packing -o "$dir/out" --ctx $S -b 2 \
    --steps 8 --lr 0.01 -t 2 > "$dir/log.txt" 2>&1 || fail "finetune --packing: $(tail -5 "$dir/log.txt")"
grep -q "train.jsonl: $want_records records kept, packed into $want_windows windows of $((S + 1)) tokens, 0 left with nothing to score; $want_scored scored targets" "$dir/log.txt" ||
    fail "packing report (want $want_records records, $want_windows windows, $want_scored scored): $(grep records "$dir/log.txt")"; ok
grep -q "finetune: $want_windows training windows of $S tokens" "$dir/log.txt" || fail "window count: $(grep 'training windows' "$dir/log.txt")"; ok
grep -q '"packing": true' "$dir/out/config.json" || fail "config.json does not record packing"; ok
line=$(grep -o 'validation loss [0-9.]* -> [0-9.]*' "$dir/log.txt") || fail "no validation loss: $(tail -3 "$dir/log.txt")"
set -- $line
awk -v a="$3" -v b="$5" 'BEGIN{exit !(b < a)}' || fail "held-out assistant loss did not go down with packing: $line"; ok
# unpacked, the same records are one window each and score the same targets
"$WISP" finetune -m "$model" --data "$dir/train.jsonl" -o "$dir/out1" --ctx 64 -b 2 --steps 1 -t 2 > "$dir/log1.txt" 2>&1 ||
    fail "finetune unpacked: $(tail -3 "$dir/log1.txt")"
grep -q "$want_records records kept, 0 cut to 65 tokens, 0 left with nothing to score; $want_scored scored targets" "$dir/log1.txt" ||
    fail "unpacked report: $(grep records "$dir/log1.txt")"; ok
expect_fail "$WISP" finetune -m "$model" --data "$dir/train.jsonl" --format text --packing -o "$dir/out2" --steps 1

# --chat-template: the same tokenizer in a GGUF without a template
bare="$WORK/ftpack-bare.gguf" tokdir="$WORK/ftpack-baretok"
mkdir -p "$tokdir"; ln -sf "$SHARED/models/tokenizers/smollm2/tokenizer.json" "$tokdir/tokenizer.json"
# the same BOS/EOS as chat_model's, only no chat_template
printf '%s' '{"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": false}' > "$tokdir/tokenizer_config.json"
"$WISP" make-model --like smollm2-135m --type q8_0 --layers 1 -o "$bare" --tokenizer "$tokdir/tokenizer.json" >/dev/null 2>&1 ||
    fail "make-model without a template"
"$WISP" info -m "$bare" 2>&1 | grep -q "tokenizer.chat_template" && fail "the bare model has a chat template"
out=$("$WISP" finetune -m "$bare" --data "$dir/train.jsonl" -o "$dir/out3" --ctx 64 --steps 1 2>&1) && fail "conversations without a template accepted"
case "$out" in *"needs a chat template"*) ok ;; *) fail "no-template message: $out" ;; esac
set -- $(count -m "$bare" --chat-template chatml) || fail "independent count (chatml)"
[ $# -eq 3 ] || fail "independent count (chatml): $*"
"$WISP" finetune -m "$bare" --chat-template chatml --data "$dir/train.jsonl" -o "$dir/out4" --ctx 64 -b 2 --steps 2 -t 2 \
    > "$dir/log4.txt" 2>&1 || fail "finetune --chat-template chatml: $(tail -3 "$dir/log4.txt")"
grep -q "$1 records kept, 0 cut to 65 tokens, 0 left with nothing to score; $3 scored targets" "$dir/log4.txt" ||
    fail "chatml report (want $1 records, $3 scored): $(grep records "$dir/log4.txt")"; ok
grep -q '"chat_template": "chatml"' "$dir/out4/config.json" || fail "config.json does not record the template"; ok
# a Jinja file: the same ChatML written out, packed this time
printf '%s' "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" > "$dir/chatml.jinja"
set -- $(count -m "$bare" --chat-template "$dir/chatml.jinja") || fail "independent count (jinja)"
"$WISP" finetune -m "$bare" --chat-template "$dir/chatml.jinja" --packing --data "$dir/train.jsonl" -o "$dir/out5" --ctx $S \
    -b 2 --steps 1 -t 2 > "$dir/log5.txt" 2>&1 || fail "finetune --chat-template FILE: $(tail -3 "$dir/log5.txt")"
grep -q "$1 records kept, packed into $2 windows of $((S + 1)) tokens, 0 left with nothing to score; $3 scored targets" "$dir/log5.txt" ||
    fail "jinja file report (want $*): $(grep records "$dir/log5.txt")"; ok
# unusable choices, refused by name
out=$("$WISP" finetune -m "$bare" --chat-template nosuch --data "$dir/train.jsonl" -o "$dir/out6" --steps 1 2>&1) && fail "unknown template accepted"
case "$out" in *nosuch*) ok ;; *) fail "unknown template message: $out" ;; esac
printf '%s' "{% include 'x' %}" > "$dir/bad.jinja"
out=$("$WISP" finetune -m "$bare" --chat-template "$dir/bad.jinja" --data "$dir/train.jsonl" -o "$dir/out7" --steps 1 2>&1) &&
    fail "unsupported template accepted"
case "$out" in *include*) ok ;; *) fail "unsupported template message: $out" ;; esac
printf '%s' "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ 'A: ' }}{% endif %}{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}{{ 'assistant says' }}{% endif %}" > "$dir/flat.jinja"
out=$("$WISP" finetune -m "$bare" --chat-template "$dir/flat.jinja" --data "$dir/train.jsonl" -o "$dir/out8" --steps 1 2>&1) &&
    fail "a template that does not render turn by turn accepted"
case "$out" in *"assistant-only loss needs that"*) ok ;; *) fail "turn-by-turn message: $out" ;; esac
expect_fail "$WISP" finetune -m "$bare" --chat-template chatml --data "$dir/train.jsonl" --format text -o "$dir/out9" --steps 1
done_ok
