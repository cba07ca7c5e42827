# Tool calls end to end: a random-weight SmolLM2-shaped model (its unconstrained
# output is garbage) answers with --tools; with --tool-choice required every
# seeded answer must be a call of a listed tool whose arguments validate under
# that tool's schema (checked by an independent validator, Debian's
# python3-jsonschema), in the chatml family's <tool_call> wrapper and in Llama
# 3's JSON; with auto, an answer is either text (never starting like a call) or
# such a call. Then the refusals: an unknown tool-call family, a bad
# --tool-choice, unknown keys in messages and tools.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chat_model.sh"
need models/tokenizers/smollm2/tokenizer.json golden/chat/templates.json
PY=/usr/bin/python3
$PY -c "import jsonschema" 2>/dev/null || fail "Debian's python3-jsonschema is needed (apt-get install python3-jsonschema)"
D="$WORK/chat_tools"
rm -rf "$D"; mkdir -p "$D"
chat_model "$D/chat.gguf"
cat > "$D/tools.json" <<'JSON'
[{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string", "minLength": 2},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"], "additionalProperties": false}}},
 {"type": "function", "function": {"name": "set_alarm", "description": "An alarm",
  "parameters": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
    "label": {"type": "string", "maxLength": 10}, "repeat": {"type": "boolean"}},
    "required": ["hour", "repeat"]}}}]
JSON
echo '[{"role": "system", "content": "You call tools."}, {"role": "user", "content": "Weather in Paris?"}]' > "$D/messages.json"

# check_answers FILE...: each holds one --json-output answer; prints "calls texts"
check_answers() {
    $PY - "$D/tools.json" "$@" <<'PY'
import json, sys, jsonschema
tools = {t["function"]["name"]: t["function"]["parameters"] for t in json.load(open(sys.argv[1]))}
calls = texts = 0
for path in sys.argv[2:]:
    a = json.loads(open(path, encoding="utf-8").read())
    assert set(a) == {"content", "tool_calls"}, (path, a)
    if a["tool_calls"]:
        assert a["content"] is None and len(a["tool_calls"]) == 1, (path, a)
        c = a["tool_calls"][0]
        assert c["type"] == "function" and set(c["function"]) == {"name", "arguments"}, (path, c)
        name = c["function"]["name"]
        assert name in tools, (path, name)
        jsonschema.validate(c["function"]["arguments"], tools[name], cls=jsonschema.Draft202012Validator)
        calls += 1
    else:
        assert isinstance(a["content"], str) and a["content"][:1] not in ("<", "{"), (path, a)
        texts += 1
print(calls, texts)
PY
}

for fmt in model llama3; do
    args=(); [ $fmt = llama3 ] && args=(--chat-template llama3)
    files=()
    for seed in 1 2 3 4 5 6 7 8; do
        f="$D/$fmt-required-$seed.json"
        "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/tools.json" --tool-choice required \
            --tools-bounded --json-output --seed $seed -n 400 -q "${args[@]}" > "$f" 2>"$f.err" ||
            fail "$fmt seed $seed: $(cat "$f.err")"
        files+=("$f")
    done
    counts=$(check_answers "${files[@]}") || fail "$fmt: an answer is not a valid call: $counts"
    [ "$counts" = "8 0" ] || fail "$fmt --tool-choice required: expected 8 calls, got (calls texts) $counts"; ok
    # the same seed gives the same call
    "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/tools.json" --tool-choice required \
        --tools-bounded --json-output --seed 3 -n 400 -q "${args[@]}" > "$D/again.json" 2>/dev/null || fail "$fmt: seed 3 again"
    cmp -s "$D/again.json" "$D/$fmt-required-3.json" || fail "$fmt: seed 3 gave a different answer"; ok
    files=()
    for seed in 11 12 13 14 15 16; do
        f="$D/$fmt-auto-$seed.json"
        "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/tools.json" \
            --tools-bounded --json-output --seed $seed -n 60 -q "${args[@]}" > "$f" 2>"$f.err" ||
            fail "$fmt auto seed $seed: $(cat "$f.err")"
        files+=("$f")
    done
    counts=$(check_answers "${files[@]}") || fail "$fmt auto: an answer is neither text nor a valid call: $counts"
    ok
done
# the raw answer (no --json-output) is the wrapper the template family writes
"$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/tools.json" --tool-choice required \
    --tools-bounded --seed 1 -n 400 -q > "$D/raw.txt" 2>/dev/null || fail "raw answer"
head -1 "$D/raw.txt" | grep -qx '<tool_call>' || fail "the chatml family's call is not in <tool_call>: $(head -c 200 "$D/raw.txt")"; ok

# refusals
out=$("$WISP" run -m "$D/chat.gguf" --chat --chat-template gemma --messages "$D/messages.json" --tools "$D/tools.json" -q 2>&1) &&
    fail "a template family without a known tool-call format was accepted"
grep -q "tool-call format" <<<"$out" || fail "the unknown family is not explained: $out"; ok
"$WISP" run -m "$D/chat.gguf" --chat --chat-template gemma --messages "$D/messages.json" --tools "$D/tools.json" \
    --tool-choice none -n 4 -q --seed 1 > /dev/null 2>&1 || fail "--tool-choice none should only show the tools"; ok
expect_fail "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/tools.json" --tool-choice sometimes
expect_fail "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tool-choice required
echo '[{"role": "user", "content": "x", "audio": null}]' > "$D/bad_messages.json"
out=$("$WISP" run -m "$D/chat.gguf" --chat --messages "$D/bad_messages.json" -q 2>&1) && fail "unknown message key accepted"
grep -q '"audio"' <<<"$out" || fail "the unknown message key is not named: $out"; ok
echo '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "propertyNames": {"pattern": "^a"}}}}]' \
    > "$D/bad_schema.json"
out=$("$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --tools "$D/bad_schema.json" -q 2>&1) &&
    fail "a schema keyword wisp does not implement was accepted"
grep -q 'propertyNames' <<<"$out" || fail "the unsupported schema keyword is not named: $out"; ok
done_ok
