# wisp template: every golden chat-template case through the command line
# (template file, messages file, --bos/--eos, --no-generation-prompt, --date),
# raising templates exit 1 with their message, and a made model carries its
# own template and BOS/EOS texts.
source "$(dirname "$0")/lib.sh"
golden="$SHARED/golden/chat"
for f in templates.json cases.json; do [ -e "$golden/$f" ] || fail "missing $golden/$f (set WISP_SHARED)"; done
command -v python3 >/dev/null || fail "python3 is needed to unpack the golden JSON"
dir="$WORK/template"
rm -rf "$dir"; mkdir -p "$dir"
# one folder per case: the template, the messages, the flags and what must come out
python3 - "$golden" "$dir" <<'PY' || fail "unpacking the golden cases"
import json, os, sys
golden, out = sys.argv[1], sys.argv[2]
templates = {t["model"]: t for t in json.load(open(os.path.join(golden, "templates.json")))}
for i, c in enumerate(json.load(open(os.path.join(golden, "cases.json")))):
    d = os.path.join(out, "%03d" % i); os.makedirs(d)
    t = templates[c["model"]]
    open(os.path.join(d, "template.jinja"), "w").write(t["template"])
    json.dump(c["messages"], open(os.path.join(d, "messages.json"), "w"), ensure_ascii=False)
    args = []
    if not c["add_generation_prompt"]: args.append("--no-generation-prompt")
    for k in ("bos", "eos"):
        if t[k + "_token"] is not None: args += ["--" + k, t[k + "_token"]]
    open(os.path.join(d, "args"), "w").write("\0".join(args))
    if c.get("error"): open(os.path.join(d, "error.txt"), "w").write(c["error_message"])
    else: open(os.path.join(d, "expected.txt"), "w", newline="").write(c["expected"])
PY
n=0
for d in "$dir"/*/; do
    mapfile -d '' args < "$d/args"
    out=$("$WISP" template --template "$d/template.jinja" --messages "$d/messages.json" --date 2024-07-26 "${args[@]}" 2>"$d/stderr"; echo "rc=$?")
    if [ -e "$d/error.txt" ]; then
        [ "${out##*rc=}" = 1 ] || fail "$d: the template should raise (exit 1), got ${out##*rc=}"
        grep -qF "$(cat "$d/error.txt")" "$d/stderr" || fail "$d: message '$(cat "$d/error.txt")' not in: $(cat "$d/stderr")"
    else
        [ "${out##*rc=}" = 0 ] || fail "$d: exit ${out##*rc=}: $(cat "$d/stderr")"
        printf '%s' "${out%rc=*}" > "$d/got.txt"
        cmp -s "$d/got.txt" "$d/expected.txt" || fail "$d: rendering differs: $(diff "$d/expected.txt" "$d/got.txt" | head -5)"
    fi
    n=$((n+1)); ok
done
[ "$n" = 160 ] || fail "expected 160 cases, ran $n"; ok
# messages from stdin, a built-in format, and the list of formats
printf '[{"role":"user","content":"Hi"}]' | "$WISP" template --chat-template chatml --messages - > "$WORK/t.txt" || fail "stdin"
[ "$(cat "$WORK/t.txt")" = "$(printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant')" ] || fail "chatml from stdin: $(cat "$WORK/t.txt")"; ok
"$WISP" template --list | grep -q '^mistral ' || fail "--list"; ok
# bad input: every failure names its cause, nothing crashes
printf '[{"role":"user","content":"Hi","audio":[]}]' > "$WORK/tool.json"
out=$("$WISP" template --chat-template chatml --messages "$WORK/tool.json" 2>&1) && fail "an unknown message key (audio) accepted"
case "$out" in *'"audio" is not supported'*) ok ;; *) fail "unknown key message: $out" ;; esac
printf '{%% include "x" %%}' > "$WORK/bad.jinja"
printf '[]' > "$WORK/empty.json"
out=$("$WISP" template --template "$WORK/bad.jinja" --messages "$WORK/empty.json" 2>&1) && fail "include accepted"
case "$out" in *"statement 'include' is not supported"*) ok ;; *) fail "include message: $out" ;; esac
expect_fail "$WISP" template --chat-template nosuch --messages "$WORK/empty.json"
expect_fail "$WISP" template --chat-template chatml --messages "$WORK/missing.json"
expect_fail "$WISP" template --chat-template chatml --messages "$WORK/bad.jinja"
expect_fail "$WISP" template --messages "$WORK/empty.json"
# a model made with SmolLM2's tokenizer and its tokenizer_config (template, BOS/EOS) renders its own template
source "$(dirname "$0")/chat_model.sh"
chat_model "$WORK/smolchat.gguf"
printf '[{"role":"user","content":"Hello!"}]' > "$WORK/hello.json"
"$WISP" template -m "$WORK/smolchat.gguf" --messages "$WORK/hello.json" --no-generation-prompt > "$WORK/own.txt" || fail "model template"
[ "$(cat "$WORK/own.txt")" = "$(printf '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHello!<|im_end|>')" ] || fail "model's own template: $(cat "$WORK/own.txt")"; ok
done_ok
