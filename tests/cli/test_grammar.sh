# wisp grammar check / match: GBNF and JSON Schema, exit statuses, error positions,
# and every shared grammar's match/nomatch list through the CLI.
source "$(dirname "$0")/lib.sh"
need golden/constrained/grammars.json golden/constrained/schemas.json
G="$WORK/grammar"
mkdir -p "$G"
printf 'root ::= [a-z]+ "!"\n' > "$G/word.gbnf"
"$WISP" grammar check "$G/word.gbnf" | grep -q "^ok: " || fail "check of a good grammar"; ok
"$WISP" grammar match "$G/word.gbnf" 'abc!' >/dev/null || fail "match accepted"; ok
out=$("$WISP" grammar match "$G/word.gbnf" 'abC!'); rc=$?
[ $rc -eq 1 ] || fail "mismatch must exit 1 (got $rc)"; ok
echo "$out" | grep -q "rejected at byte 2" || fail "mismatch offset: $out"; ok
out=$("$WISP" grammar match "$G/word.gbnf" 'abc'); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "rejected at byte 3: the text ends" || fail "incomplete text: $rc $out"; ok
# errors name line and column, or the rule
printf 'root ::= "a"\n  item ::= "b" (\n' > "$G/bad1.gbnf"
out=$("$WISP" grammar check "$G/bad1.gbnf" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "line 2, column 16" || fail "syntax error position: $rc $out"; ok
printf 'root ::= expr\nexpr ::= expr "+" "1" | "1"\n' > "$G/bad2.gbnf"
"$WISP" grammar check "$G/bad2.gbnf" 2>&1 | grep -q "rule 'expr' is left-recursive" || fail "left recursion"; ok
printf 'root ::= missing\n' > "$G/bad3.gbnf"
"$WISP" grammar check "$G/bad3.gbnf" 2>&1 | grep -q "line 1, column 10: rule 'missing' is used but never defined" || fail "undefined rule"; ok
expect_fail "$WISP" grammar check "$G/does-not-exist.gbnf"
expect_fail "$WISP" grammar match "$G/word.gbnf"
expect_fail "$WISP" grammar frobnicate
"$WISP" grammar --help | grep -q "match" || fail "help"; ok
# deep recursion: live stacks are compacted as the node pool fills; past its limit, a clear error
printf 'root ::= "(" root ")" | "x"\n' > "$G/nest.gbnf"
python3 -c "import sys; n=int(sys.argv[1]); open(sys.argv[2],'w').write('('*n+'x'+')'*n)" 15000 "$G/nest15k.txt"
python3 -c "import sys; n=int(sys.argv[1]); open(sys.argv[2],'w').write('('*n+'x'+')'*n)" 40000 "$G/nest40k.txt"
"$WISP" grammar match "$G/nest.gbnf" --text-file "$G/nest15k.txt" >/dev/null || fail "15000-deep nesting"; ok
out=$("$WISP" grammar match "$G/nest.gbnf" --text-file "$G/nest40k.txt" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "limit" || fail "40000-deep nesting must stop at a limit: $rc $out"; ok
# schemas
cat > "$G/person.json" <<'JSON'
{"type": "object", "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
 "required": ["name"], "additionalProperties": false}
JSON
"$WISP" grammar check --schema "$G/person.json" | grep -q "^ok: " || fail "schema check"; ok
"$WISP" grammar match --schema "$G/person.json" '{"age": 36, "name": "Ada"}' >/dev/null || fail "schema match (any order)"; ok
"$WISP" grammar match --schema "$G/person.json" '{"name": "Ada", "age": 151}' >/dev/null && fail "age 151 accepted"; ok
"$WISP" grammar match --schema "$G/person.json" '{"name": ""}' >/dev/null && fail "empty name accepted"; ok
printf '{"type": "array", "uniqueItems": true}' > "$G/unique.json"
out=$("$WISP" grammar check --schema "$G/unique.json" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "'uniqueItems'" || fail "refusal must name uniqueItems: $out"; ok
# every shared grammar through the CLI, with python3 reading the JSON list
command -v python3 >/dev/null || fail "python3 is needed to read grammars.json"
python3 - "$SHARED/golden/constrained/grammars.json" "$G" <<'PY' || fail "cannot split grammars.json"
import json, sys, os
for g in json.load(open(sys.argv[1])):
    d = os.path.join(sys.argv[2], g["id"]); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "g.gbnf"), "w").write(g["grammar"])
    for kind in ("match", "nomatch"):
        for i, s in enumerate(g[kind]):
            open(os.path.join(d, "%s%d.txt" % (kind, i)), "wb").write(s.encode())
PY
n=0
for d in "$G"/g0*; do
    for f in "$d"/match*.txt; do
        "$WISP" grammar match "$d/g.gbnf" --text-file "$f" >/dev/null || fail "$(basename "$d"): $(cat "$f") should match"
        n=$((n + 1))
    done
    for f in "$d"/nomatch*.txt; do
        "$WISP" grammar match "$d/g.gbnf" --text-file "$f" >/dev/null; rc=$?
        [ $rc -eq 1 ] || fail "$(basename "$d"): '$(cat "$f")' should not match (exit $rc)"
        n=$((n + 1))
    done
done
[ $n -eq 60 ] || fail "expected 60 strings, checked $n"; ok
done_ok
