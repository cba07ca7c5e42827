# Sourced by the chat tests: chat_model OUT.gguf makes a 1-layer random-weight
# model with SmolLM2's tokenizer and its chat template (taken from
# ../shared/golden/chat at test time), with <|im_start|>/<|im_end|> as BOS/EOS.
chat_model() {
    local out=$1 tok="$SHARED/models/tokenizers/smollm2/tokenizer.json" dir="$WORK/smoltok-$(basename "$1" .gguf)" # one per test: they may run in parallel
    [ -e "$tok" ] || fail "missing $tok"
    [ -e "$SHARED/golden/chat/templates.json" ] || fail "missing $SHARED/golden/chat/templates.json"
    command -v python3 >/dev/null || fail "python3 is needed to read the golden JSON"
    mkdir -p "$dir"; ln -sf "$tok" "$dir/tokenizer.json"
    python3 - "$SHARED/golden/chat/templates.json" "$dir/tokenizer_config.json" <<'PY' || fail "tokenizer_config"
import json, sys
t = [t for t in json.load(open(sys.argv[1])) if "SmolLM2" in t["model"]][0]
json.dump({"chat_template": t["template"], "bos_token": t["bos_token"], "eos_token": t["eos_token"], "add_bos_token": False},
          open(sys.argv[2], "w"))
PY
    "$WISP" make-model --like smollm2-135m --type q8_0 --layers 1 -o "$out" --tokenizer "$dir/tokenizer.json" >/dev/null 2>&1 ||
        fail "make-model $out"
}
