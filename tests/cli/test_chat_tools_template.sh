# Tools in chat templates: `wisp template --tools` renders the real templates
# that use `tools` and assistant `tool_calls` / `tool` messages (Qwen2.5,
# Qwen3, Llama 3.2, Mistral v0.3 from ../shared/golden/chat) byte for byte as
# an independent reference does: Python's jinja2 set up the way Hugging
# Face's apply_chat_template sets it up (trim_blocks, lstrip_blocks, loop
# controls, tojson = json.dumps(ensure_ascii=False), raise_exception). The
# reference raising means wisp must fail too. Then the refusals: keys outside
# OpenAI's message and tool shapes are named, never dropped.
source "$(dirname "$0")/lib.sh"
golden="$SHARED/golden/chat"
[ -e "$golden/templates.json" ] || fail "missing $golden/templates.json (set WISP_SHARED)"
PY=/usr/bin/python3
$PY -c "import jinja2" 2>/dev/null || fail "python3 with jinja2 (Debian: python3-jinja2) is the reference renderer"
dir="$WORK/chat_tools_template"
rm -rf "$dir"; mkdir -p "$dir"
$PY - "$golden/templates.json" "$dir" <<'PY' || fail "making the reference renderings"
import json, os, sys, jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
templates, out = json.load(open(sys.argv[1])), sys.argv[2]
def raise_exception(msg): raise jinja2.exceptions.TemplateError(msg)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: __import__("datetime").datetime(2024, 7, 26).strftime(fmt)
weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, in \u00b0C",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7}, "scale": {"type": "number", "minimum": 0.5}},
                          "required": ["city"], "additionalProperties": False}}}
clock = {"type": "function", "function": {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}}
call = {"type": "function", "id": "abcdefghi", "function": {"name": "get_weather", "arguments": {"city": "Paris \"sud\"", "days": 2}}}
convos = {
    "ask": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}],
    "nosys": [{"role": "user", "content": "Weather in Paris?"}],
    "called": [{"role": "user", "content": "Weather in Paris?"},
               {"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "abcdefghi", "name": "get_weather", "content": "{\"temp\": 21}"},
               {"role": "assistant", "content": "21 \u00b0C."}, {"role": "user", "content": "Thanks!"}],
    "null_content": [{"role": "user", "content": "Weather in Paris?"},
                     {"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": "abcdefghi", "content": "sunny"}],
}
toolsets = {"one": [weather], "two": [weather, clock]}
n = 0
for t in templates:
    if "tools" not in t["template"]: continue
    name = t["model"].split("/")[1]
    tpl = env.from_string(t["template"])
    for cname, msgs in convos.items():
        for tname, tools in toolsets.items():
            d = os.path.join(out, "%s-%s-%s" % (name, cname, tname)); os.makedirs(d)
            open(os.path.join(d, "template.jinja"), "w").write(t["template"])
            json.dump(msgs, open(os.path.join(d, "messages.json"), "w"), ensure_ascii=False)
            json.dump(tools, open(os.path.join(d, "tools.json"), "w"), ensure_ascii=False)
            args = [a for k in ("bos", "eos") if t[k + "_token"] is not None for a in ("--" + k, t[k + "_token"])]
            open(os.path.join(d, "args"), "w").write("\0".join(args))
            try:
                text = tpl.render(messages=msgs, tools=tools, add_generation_prompt=True, bos_token=t["bos_token"],
                                  eos_token=t["eos_token"], documents=None)
                open(os.path.join(d, "expected.txt"), "w", newline="").write(text)
            except Exception as e:
                open(os.path.join(d, "raises"), "w").write(str(e))
            n += 1
print(n)
PY
n_cases=$(ls "$dir" | wc -l)
[ "$n_cases" -ge 32 ] || fail "expected at least 4 templates x 8 cases that render tools, got $n_cases"
rendered=0
for d in "$dir"/*/; do
    mapfile -d '' args < "$d/args"
    out=$("$WISP" template --template "$d/template.jinja" --messages "$d/messages.json" --tools "$d/tools.json" \
          --date 2024-07-26 "${args[@]}" 2>"$d/stderr"; echo "rc=$?")
    if [ -e "$d/raises" ]; then
        [ "${out##*rc=}" = 1 ] || fail "$d: the reference raises ($(cat "$d/raises")), wisp exits ${out##*rc=}"
    else
        [ "${out##*rc=}" = 0 ] || fail "$d: exit ${out##*rc=}: $(cat "$d/stderr")"
        printf '%s' "${out%rc=*}" > "$d/got.txt"
        cmp -s "$d/got.txt" "$d/expected.txt" || fail "$d: rendering differs: $(diff "$d/expected.txt" "$d/got.txt" | head -8)"
        grep -q get_weather "$d/got.txt" || fail "$d: the tool is not in the text"
        rendered=$((rendered+1))
    fi
    ok
done
[ "$rendered" -ge 16 ] || fail "only $rendered cases rendered (the rest raise in the reference too)"

# refusals, by name
q=$(ls -d "$dir"/Qwen2.5-*-ask-one | head -1)
printf '[{"role":"user","content":"x","weight":1}]' > "$dir/bad_key.json"
out=$("$WISP" template --template "$q/template.jinja" --messages "$dir/bad_key.json" 2>&1) && fail "unknown message key accepted"
grep -q '"weight"' <<<"$out" || fail "the unknown message key is not named: $out"; ok
printf '[{"role":"assistant","content":"x","tool_calls":{"a":1}}]' > "$dir/bad_calls.json"
expect_fail "$WISP" template --template "$q/template.jinja" --messages "$dir/bad_calls.json"
printf '[{"role":"assistant","content":null}]' > "$dir/null_content.json"
expect_fail "$WISP" template --template "$q/template.jinja" --messages "$dir/null_content.json"
printf '[{"type":"function","function":{"name":"f","parameters":{}},"strict":true}]' > "$dir/bad_tool_key.json"
out=$("$WISP" template --template "$q/template.jinja" --messages "$q/messages.json" --tools "$dir/bad_tool_key.json" 2>&1) &&
    fail "unknown tool key accepted"
grep -q '"strict"' <<<"$out" || fail "the unknown tool key is not named: $out"; ok
printf '[{"type":"function","function":{"name":"f","parameters":{},"returns":{}}}]' > "$dir/bad_fn_key.json"
out=$("$WISP" template --template "$q/template.jinja" --messages "$q/messages.json" --tools "$dir/bad_fn_key.json" 2>&1) &&
    fail "unknown function key accepted"
grep -q '"returns"' <<<"$out" || fail "the unknown function key is not named: $out"; ok
printf '[{"type":"retrieval","function":{"name":"f"}}]' > "$dir/bad_type.json"
expect_fail "$WISP" template --template "$q/template.jinja" --messages "$q/messages.json" --tools "$dir/bad_type.json"
printf '[{"type":"function","function":{"name":"f"}}' > "$dir/truncated.json"
expect_fail "$WISP" template --template "$q/template.jinja" --messages "$q/messages.json" --tools "$dir/truncated.json"
printf '[]' > "$dir/empty.json"
expect_fail "$WISP" template --template "$q/template.jinja" --messages "$q/messages.json" --tools "$dir/empty.json"
done_ok
