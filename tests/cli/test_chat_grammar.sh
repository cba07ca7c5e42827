# Constrained chat answers: `run --chat` and `chat` take --grammar, --grammar-file, --json-schema
# and --json (issue 17) on a random-weight SmolLM2-shaped chat model (its free answers are
# garbage): each answer is a sentence of the grammar, a schema's answers validate under an
# independent validator (Debian's python3-jsonschema), and a grammar together with --tools is
# refused (both would constrain the same answer).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chat_model.sh"
need golden/constrained/schemas.json
PY=/usr/bin/python3
$PY -c "import jsonschema" 2>/dev/null || fail "Debian's python3-jsonschema is needed (apt-get install python3-jsonschema)"
D="$WORK/chat_grammar"
rm -rf "$D"; mkdir -p "$D"
chat_model "$D/chat.gguf"
echo '[{"role": "user", "content": "Give me a contact."}]' > "$D/messages.json"
$PY - "$SHARED/golden/constrained/schemas.json" "$D/contact.json" <<'PY' || fail "cannot pick a schema"
import json, sys
s = [s for s in json.load(open(sys.argv[1], encoding="utf-8")) if s["id"] == "s02_contact_basic"][0]
json.dump(s["schema"], open(sys.argv[2], "w"))
PY
for seed in 1 2 3; do
    "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --json-schema "$D/contact.json" --json-bounded \
        --json-output --seed $seed -n 400 --ctx 1024 -q > "$D/a$seed.json" 2>"$D/err" || fail "run --chat --json-schema seed $seed: $(cat "$D/err")"
    $PY - "$D/a$seed.json" "$D/contact.json" <<'PY' || fail "seed $seed: the answer does not validate: $(cat "$D/a$seed.json")"
import json, sys, jsonschema
answer = json.load(open(sys.argv[1]))
text = answer["content"] if isinstance(answer, dict) else answer
jsonschema.validate(json.loads(text), json.load(open(sys.argv[2])))
PY
    ok
done
# two turns of `wisp chat`, each answer from the grammar
printf 'Is it raining?\nAnd tomorrow?\n' | "$WISP" chat -m "$D/chat.gguf" --grammar 'root ::= ("yes" | "no") "."' \
    --seed 4 -n 20 --ctx 1024 -q > "$D/turns.txt" 2>"$D/err" || fail "chat --grammar: $(cat "$D/err")"
n=$(grep -Ec '(yes|no)\.' "$D/turns.txt")
[ "$n" -eq 2 ] || fail "chat --grammar: expected 2 answers of the grammar: $(cat "$D/turns.txt")"; ok
echo '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]' > "$D/tools.json"
expect_fail "$WISP" run -m "$D/chat.gguf" --chat --messages "$D/messages.json" --json --tools "$D/tools.json"
expect_fail "$WISP" chat -m "$D/chat.gguf" --grammar 'root ::= undefined_rule'
done_ok
