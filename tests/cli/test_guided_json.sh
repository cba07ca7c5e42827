# Constrained generation: for every shared JSON Schema wisp compiles, 20 seeded generations
# with `wisp run` end to end on a random-weight model (tests/tools/tiny_model: width 64, one
# layer, SmolLM2's real 49k vocabulary, so its unconstrained output is garbage and a run
# takes a fraction of a second) and 2 with stories260K (a 512-token vocabulary) must all parse
# and validate under an independent validator (Debian's python3-jsonschema, Draft 2020-12
# with format checks). Schemas wisp refuses must be refused naming a keyword. Also: the same
# seed gives the same output, and every sampler setting stays inside the grammar.
source "$(dirname "$0")/lib.sh"
need golden/constrained/schemas.json models/stories260K.gguf \
    models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf
[ -x "$TOOLS/tiny_model" ] || fail "missing $TOOLS/tiny_model (make tests)"
PY=/usr/bin/python3
$PY -c "import jsonschema" 2>/dev/null || fail "Debian's python3-jsonschema is needed (apt-get install python3-jsonschema)"
D="$WORK/guided"
rm -rf "$D"; mkdir -p "$D/schemas" "$D/out"
$PY - "$SHARED/golden/constrained/schemas.json" "$D/schemas" <<'PY' || fail "cannot split schemas.json"
import json, sys, os
for s in json.load(open(sys.argv[1], encoding="utf-8")):
    json.dump(s["schema"], open(os.path.join(sys.argv[2], s["id"] + ".json"), "w", encoding="utf-8"))
PY
"$TOOLS/tiny_model" "$D/tiny.gguf" llama q8_0 64 1 "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf" ||
    fail "tiny_model with SmolLM2's vocabulary"
# the random model's own continuation is not JSON (so the constraint is what makes it valid)
"$WISP" run -m "$D/tiny.gguf" --no-bos -p "{" -n 40 --seed 1 --no-echo -q > "$D/free.txt" 2>/dev/null || fail "unconstrained run"
$PY -c "import json,sys; json.loads('{' + open(sys.argv[1]).read())" "$D/free.txt" 2>/dev/null && fail "unconstrained output parsed as JSON"; ok
compiled=0
for f in "$D"/schemas/*.json; do
    id=$(basename "$f" .json)
    if ! msg=$("$WISP" grammar check --schema "$f" 2>&1); then
        echo "$msg" | grep -Eq "keyword '[A-Za-z]+'" || fail "$id refused without naming a keyword: $msg"
        ok; continue
    fi
    compiled=$((compiled + 1))
    for seed in $(seq 1 20); do
        "$WISP" run -m "$D/tiny.gguf" --no-bos -p "JSON:" -n 3000 --ctx 2048 --seed $seed -t 1 \
            --json-schema "$f" --json-bounded --no-echo -q > "$D/out/$id.tiny.$seed.json" 2>"$D/err" ||
            fail "$id seed $seed: $(cat "$D/err")"
    done
    for seed in 1 2; do
        "$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 3000 --seed $seed -t 1 \
            --json-schema "$f" --json-bounded --no-echo -q > "$D/out/$id.stories.$seed.json" 2>"$D/err" ||
            fail "$id stories seed $seed: $(cat "$D/err")"
    done
done
[ $compiled -ge 18 ] || fail "only $compiled schemas compiled"; ok
$PY - "$D/schemas" "$D/out" <<'PY' || fail "generated JSON does not validate"
import json, sys, os, jsonschema
from decimal import Decimal
# numbers as decimals on both sides, so multipleOf 0.01 is decimal arithmetic, not a float remainder
bad = 0; n = 0
for name in sorted(os.listdir(sys.argv[2])):
    sid = name.split(".")[0]
    schema = json.load(open(os.path.join(sys.argv[1], sid + ".json")), parse_float=Decimal)
    text = open(os.path.join(sys.argv[2], name), encoding="utf-8").read()
    n += 1
    try:
        v = json.loads(text, parse_float=Decimal)
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(v)
    except Exception as e:
        bad += 1
        print("INVALID %s: %s\n  %r" % (name, str(e).splitlines()[0], text[:300]))
print("validated %d generations, %d invalid" % (n, bad))
sys.exit(1 if bad or n < 21 * 22 else 0)  # 21 schemas compile: 20 tiny-model + 2 stories260K runs each
PY
ok
# the same seed gives the same text
f="$D/schemas/s24_payment_oneof.json"
a=$("$WISP" run -m "$D/tiny.gguf" --no-bos -p "JSON:" -n 300 --ctx 512 --seed 11 --json-schema "$f" --json-bounded --no-echo -q)
b=$("$WISP" run -m "$D/tiny.gguf" --no-bos -p "JSON:" -n 300 --ctx 512 --seed 11 --json-schema "$f" --json-bounded --no-echo -q)
[ "$a" = "$b" ] || fail "same seed, different output"; ok
# greedy, top-k, min-p and a repetition penalty all stay inside the grammar
for opts in "--temp 0" "--top-k 5" "--min-p 0.2 --temp 1.5" "--repeat-penalty 1.3 --top-p 0.5"; do
    "$WISP" run -m "$D/tiny.gguf" --no-bos -p "JSON:" -n 300 --ctx 512 --seed 5 $opts --json-schema "$f" --json-bounded --no-echo -q > "$D/opt.json" ||
        fail "sampler options $opts"
    $PY -c "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))" "$D/opt.json" "$f" ||
        fail "with $opts: $(cat "$D/opt.json")"
    ok
done
# a GBNF grammar on run, and bad options
"$WISP" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 50 --seed 2 --no-echo -q \
    --grammar 'root ::= " upon a time, " ("a cat" | "a dog") " sat."' > "$D/g.txt" || fail "run --grammar"
grep -Eqx ' upon a time, (a cat|a dog) sat\.' "$D/g.txt" || fail "run --grammar output: $(cat "$D/g.txt")"; ok
expect_fail "$WISP" run -m "$SHARED/models/stories260K.gguf" -p "x" --grammar 'root ::= undefined_rule'
expect_fail "$WISP" run -m "$SHARED/models/stories260K.gguf" -p "x" --grammar 'root ::= "a"' --json
expect_fail "$WISP" run -m "$SHARED/models/stories260K.gguf" -p "x" --json-schema '{"type": "array", "uniqueItems": true}'
done_ok
