# The guide's full mask is exact: for every shared JSON Schema wisp compiles and every shared
# GBNF grammar, a seeded constrained generation over SmolLM2's real 49k vocabulary
# (tests/tools/guided_sample --brute-force) compares the mask at every step with checking each
# token of the vocabulary byte by byte from the committed state. The mask's shortcuts (trie
# subtrees allowed whole, steps remembered per byte class, the mask cache) must change nothing.
source "$(dirname "$0")/lib.sh"
need golden/constrained/schemas.json golden/constrained/grammars.json \
    models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf
[ -x "$TOOLS/guided_sample" ] || fail "missing $TOOLS/guided_sample (make tests)"
V="$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf"
D="$WORK/guided_mask_exact"
rm -rf "$D"; mkdir -p "$D/in" "$D/out"
python3 - "$SHARED/golden/constrained" "$D/in" <<'PY' || fail "cannot split the shared schemas and grammars"
import json, sys, os
src, dst = sys.argv[1], sys.argv[2]
for s in json.load(open(os.path.join(src, "schemas.json"), encoding="utf-8")):
    json.dump(s["schema"], open(os.path.join(dst, s["id"] + ".json"), "w", encoding="utf-8"))
for g in json.load(open(os.path.join(src, "grammars.json"), encoding="utf-8")):
    open(os.path.join(dst, g["id"] + ".gbnf"), "w", encoding="utf-8").write(g["grammar"])
PY
checked=0 masks=0
for f in "$D"/in/*.json "$D"/in/*.gbnf; do
    id=$(basename "$f")
    case "$f" in *.json) "$WISP" grammar check --schema "$f" >/dev/null 2>&1 || continue ;; esac
    out=$("$TOOLS/guided_sample" "$V" "$f" 1 "$D/out/$id" --brute-force 2>"$D/err") || fail "$id: $(cat "$D/err") $out"
    n=$(sed -n 's/.*, \([0-9]*\) masks compared with the brute-force mask, 0 differed$/\1/p' <<<"$out")
    [ -n "$n" ] && [ "$n" -gt 0 ] || fail "$id: no mask was compared: $out"
    checked=$((checked + 1)) masks=$((masks + n))
done
[ $checked -ge 27 ] || fail "only $checked schemas and grammars were checked"; ok
echo "$checked schemas and grammars, $masks masks equal to the brute-force masks"
done_ok
