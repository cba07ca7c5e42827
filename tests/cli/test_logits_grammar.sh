# wisp logits with a grammar (--grammar, --grammar-file, --json-schema, --json-mode): the tokens
# it reports as allowed after the prompt are exactly those whose text `wisp grammar match` finds
# to be a sentence or a prefix of one (every token of stories260K's 512, brute force), the masked
# logits are the model's logits on those tokens and null elsewhere, the prompt's own logits are
# the unconstrained ones, and the greedy continuation is the best allowed token at each step and
# a sentence of the grammar once complete.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
command -v python3 >/dev/null || fail "python3 is needed to read the JSON output"
M="$SHARED/models/stories260K.gguf"
D="$WORK/logits_grammar"
rm -rf "$D"; mkdir -p "$D/tok"
P="Once upon a time"
# the grammar: a word continuation, digits, or nothing (so end-of-text is allowed at once too)
printf 'root ::= " there" [a-z ]* "." | [0-9]+ | ""\n' > "$D/g.gbnf"
"$WISP" logits -m "$M" -p "$P" --json > "$D/free.json" || fail "logits without a grammar"
"$WISP" logits -m "$M" -p "$P" --json --grammar-file "$D/g.gbnf" -n 40 > "$D/g.json" || fail "logits --grammar-file"
"$WISP" logits -m "$M" -p "$P" --json --grammar "$(cat "$D/g.gbnf")" -n 40 > "$D/g2.json" || fail "logits --grammar"
cmp -s "$D/g.json" "$D/g2.json" || fail "--grammar and --grammar-file of the same grammar differ"; ok
# every token's bytes, from the GGUF's vocabulary (SentencePiece: U+2581 is a space, <0xNN> a byte;
# control tokens have no text), one file per token
python3 - "$M" "$D/tok" <<'PY' || fail "cannot read the vocabulary"
import struct, sys, os
data = open(sys.argv[1], "rb").read()
pos = 0
def take(n):
    global pos
    pos += n
    return data[pos - n:pos]
def u32(): return struct.unpack("<I", take(4))[0]
def u64(): return struct.unpack("<Q", take(8))[0]
def string(): return take(u64())
SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def value(t):
    if t == 8: return string()
    if t == 9:
        et, n = u32(), u64()
        return [value(et) for _ in range(n)]
    raw = take(SIZE[t])
    return int.from_bytes(raw, "little", signed=t in (1, 3, 5, 11)) if t not in (6, 12) else raw
assert take(4) == b"GGUF"
u32(); u64(); n_kv = u64()
kv = {}
for _ in range(n_kv):
    k = string().decode(); kv[k] = value(u32())
tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
for i, (t, ty) in enumerate(zip(tokens, types)):
    if ty == 3: text = None  # control: no text
    elif ty == 6: text = bytes([int(t[3:5], 16)])  # <0xNN>
    else: text = t.decode().replace("\u2581", " ").encode()
    if text is not None: open(os.path.join(sys.argv[2], str(i)), "wb").write(text)
open(os.path.join(sys.argv[2], "eos"), "w").write(str(kv["tokenizer.ggml.eos_token_id"]))
PY
# brute force: a token may come first when `grammar match` accepts its text whole or runs out of
# text (a prefix); end-of-text when the grammar accepts the empty string
: > "$D/expected"
for f in "$D"/tok/[0-9]*; do
    out=$("$WISP" grammar match "$D/g.gbnf" --text-file "$f" 2>&1); rc=$?
    len=$(stat -c %s "$f")
    if [ $rc -eq 0 ] || grep -q "rejected at byte $len: the text ends" <<<"$out"; then basename "$f" >> "$D/expected"; fi
done
"$WISP" grammar match "$D/g.gbnf" "" >/dev/null && cat "$D/tok/eos" >> "$D/expected" && echo >> "$D/expected"
[ "$(wc -l < "$D/expected")" -gt 10 ] || fail "the brute force found almost nothing: $(cat "$D/expected")"; ok
python3 - "$D" <<'PY' || fail "logits with a grammar disagree with the brute force"
import json, sys, os
d = sys.argv[1]
free = json.load(open(os.path.join(d, "free.json")))["cases"][0]
case = json.load(open(os.path.join(d, "g.json")))["cases"][0]
expected = sorted(int(x) for x in open(os.path.join(d, "expected")).read().split())
def check(what, ok):
    if not ok: sys.exit("FAIL: " + what)
check("the prompt's logits are the unconstrained ones", case["logits"] == free["logits"] and case["tokens"] == free["tokens"])
check("allowed = the brute force (%d vs %d tokens; only in logits: %s, only brute: %s)" % (
    len(case["allowed"]), len(expected), sorted(set(case["allowed"]) - set(expected))[:10],
    sorted(set(expected) - set(case["allowed"]))[:10]), case["allowed"] == expected)
last, masked = free["logits"][-1], case["masked_logits"]
check("masked logits: the model's where allowed, null elsewhere",
      len(masked) == len(last) and all((masked[i] == last[i]) if i in set(expected) else masked[i] is None for i in range(len(last))))
best = max(expected, key=lambda i: (last[i], -i))
check("greedy starts with the best allowed token (%d, not %d)" % (best, case["greedy"][0]), case["greedy"][0] == best)
check("greedy differs from the unconstrained one", case["greedy"] != free["greedy"][:len(case["greedy"])])
eos = int(open(os.path.join(d, "tok", "eos")).read())
check("a complete continuation ends with end-of-text", case["complete"] == (case["greedy"][-1] == eos))
text = b"".join(open(os.path.join(d, "tok", str(t)), "rb").read() for t in case["greedy"] if t != eos)
open(os.path.join(d, "greedy.txt"), "wb").write(text)
open(os.path.join(d, "complete"), "w").write("1" if case["complete"] else "0")
PY
ok
# the greedy continuation is a sentence of the grammar (a prefix of one if -n ran out)
out=$("$WISP" grammar match "$D/g.gbnf" --text-file "$D/greedy.txt" 2>&1); rc=$?
if [ "$(cat "$D/complete")" = 1 ]; then [ $rc -eq 0 ] || fail "complete greedy text rejected: $out"
else grep -q "the text ends" <<<"$out" || fail "greedy text is not a prefix: $out"; fi; ok
# a JSON Schema (inline) and the any-JSON mode: greedy until the grammar ends, then the text parses
S='{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":99}},"required":["name","age"],"additionalProperties":false}'
printf '%s' "$S" > "$D/schema.json"
"$WISP" logits -m "$M" -p "$P" --json --json-schema "$S" -n 200 > "$D/s.json" || fail "logits --json-schema"
"$WISP" logits -m "$M" -p "$P" --json --json-mode --json-bounded -n 300 > "$D/j.json" || fail "logits --json-mode"
python3 - "$D" <<'PY' || fail "JSON-constrained logits"
import json, sys, os
d = sys.argv[1]
eos = int(open(os.path.join(d, "tok", "eos")).read())
def text(ids): return b"".join(open(os.path.join(d, "tok", str(t)), "rb").read() for t in ids if t != eos)
for name, kind in (("s.json", "schema"), ("j.json", "json")):
    case = json.load(open(os.path.join(d, name)))["cases"][0]
    if not case["complete"] or case["greedy"][-1] != eos: sys.exit("FAIL: %s: the greedy continuation did not finish" % name)
    value = json.loads(text(case["greedy"]))
    if kind == "schema":
        ok = set(value) == {"name", "age"} and isinstance(value["name"], str) and len(value["name"]) <= 8 \
            and type(value["age"]) is int and 0 <= value["age"] <= 99
    else:
        ok = isinstance(value, dict)
    if not ok: sys.exit("FAIL: %s: %r does not fit" % (name, value))
    for t in case["allowed"]:  # whatever may come first starts a JSON object
        if t != eos and not text([t]).lstrip().startswith(b"{") and text([t]).strip(): sys.exit("FAIL: %s: token %d allowed first" % (name, t))
    open(os.path.join(d, name + ".txt"), "wb").write(text(case["greedy"]))
PY
ok
"$WISP" grammar match --schema "$D/schema.json" --text-file "$D/s.json.txt" >/dev/null || fail "schema greedy text rejected by grammar match"; ok
# usage: one grammar at a time; --json stays the output format; --json-bounded needs a JSON mode
expect_fail "$WISP" logits -m "$M" -p "$P" --json --json-mode --grammar 'root ::= "a"'
expect_fail "$WISP" logits -m "$M" -p "$P" --json --json-bounded
expect_fail "$WISP" logits -m "$M" -p "$P" --json-mode
expect_fail "$WISP" run -m "$M" -p "$P" -n 4 --json-bounded   # never ignored silently
"$WISP" logits --help | grep -q -- "--json-mode" || fail "help names --json-mode"; ok
done_ok
