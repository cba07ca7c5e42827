#!/usr/bin/env bash
# Guided output figures (issue 17), not part of `make test`. For every vocabulary below, over
# the shared schemas (tests/tools/guided_sample: seeded generations from random logits through
# the sampler's grammar stage, no model), in this thread's CPU time:
#  - the guide's cost per generated token, as sampling pays it: mean and p99 over ALL tokens
#    (forced tokens and drawn tokens the grammar accepts at once included, and the full mask
#    when the drawn token is refused);
#  - a full mask computed at every step: mean and p99;
#  - compile: schema JSON -> GBNF -> compiled grammar -> guide ready to mask (the exact
#    schema), cold (fresh memory, as a command line run pays it) and warm (the same memory again);
# then decode tok/s (per CPU second: wall clock on this shared machine measures the others) of
# random-weight SmolLM2-135M-shaped models with and without a schema, over several schemas: one
# of 1 layer (the harshest case: the forward pass is shortest, and a random model's first draw is
# nearly always refused, so most tokens pay a full mask and a second draw) and the whole model.
# Vocabularies: SmolLM2 (49,152, real), DeepSeek LLM (102,400, real byte-level BPE), and
# synthetic SentencePiece-style ones of Llama 3's 128,256 and Qwen2.5's 151,936 tokens made by
# make-model (no real 128k vocabulary is in ../shared; the synthetic ones have few tokens with
# quotes or multi-byte characters, so their masks are easier than a real vocabulary's).
# Generation uses the schemas' bounded form (--json-bounded: random logits never close an
# unbounded string).
# Usage: WISP=build/wisp TOOLS=build/tests/tools SHARED=../shared bench/grammar.sh [SEEDS]
# Goals (issue 17): per token mean <= 50 us and p99 <= 500 us at 128k, compile <= 2 ms,
# constrained decode >= 95% of unconstrained.
set -eu
W=${WISP:?}; T=${TOOLS:?}; S=${SHARED:?}; seeds=${1:-3}
out=${OUT:-build/bench/grammar}; mkdir -p "$out/schemas" "$out/samples"
/usr/bin/python3 - "$S/golden/constrained/schemas.json" "$out/schemas" <<'PY'
import json, sys, os
for s in json.load(open(sys.argv[1], encoding="utf-8")):
    json.dump(s["schema"], open(os.path.join(sys.argv[2], s["id"] + ".json"), "w"))
PY
[ -f "$out/vocab128k.gguf" ] || "$W" make-model --like llama-3.2-1b --type q4_0 --layers 1 -o "$out/vocab128k.gguf" >/dev/null
[ -f "$out/vocab152k.gguf" ] || "$W" make-model --like qwen2.5-0.5b --type q4_0 --layers 1 -o "$out/vocab152k.gguf" >/dev/null
[ -f "$out/smol.gguf" ] || "$W" make-model --like smollm2-135m --type q8_0 --layers 1 \
    --tokenizer "$S/models/tokenizers/smollm2/tokenizer.json" -o "$out/smol.gguf" >/dev/null
schemas=()
for f in "$out"/schemas/*.json; do "$W" grammar check --schema "$f" >/dev/null 2>&1 && schemas+=("$f"); done
# mean and p99 of a file of numbers (one a line)
stats() { sort -g "$1" | awk '{v[NR]=$1; s+=$1} END {j=int(NR*0.99+0.999999); if(j<1)j=1; printf "mean %.1f us, p99 %.1f us (%d)", s/NR, v[j], NR}'; }
V="$S/models/tokenizers/llamacpp-vocab"
for vocab in "$V/ggml-vocab-smollm2.gguf" "$V/ggml-vocab-deepseek-llm.gguf" "$out/vocab128k.gguf" "$out/vocab152k.gguf"; do
    name=$(basename "$vocab" .gguf)
    rm -f "$out/$name".tokens "$out/$name".masks "$out/$name".compile "$out/$name".log
    for f in "${schemas[@]}"; do
        "$T/guided_sample" "$vocab" "$f" "$seeds" "$out/samples/x" --times "$out/$name" >>"$out/$name.log" 2>&1 ||
            echo "  $(basename "$f"): $(tail -1 "$out/$name.log")"
        "$T/guided_sample" "$vocab" "$f" 0 "$out/samples/x" --exact |
            sed -n 's/.*compile \([0-9.]*\) ms cold, \([0-9.]*\) ms warm.*/\1 \2/p' >>"$out/$name.compile"
    done
    n_vocab=$(sed -n 's/.*, vocab \([0-9]*\),.*/\1/p' "$out/$name.log" | head -1)
    echo "== $name ($n_vocab tokens), ${#schemas[@]} schemas x $seeds seeds, CPU time"
    echo "  per token (all tokens):  $(stats "$out/$name.tokens")"
    echo "  full mask (every step):  $(stats "$out/$name.masks")"
    awk '{c+=$1; w+=$2; if($1>mc)mc=$1; if($2>mw)mw=$2; n++}
         END {printf "  compile (exact schema):  cold mean %.3f ms, max %.3f ms; warm mean %.3f ms, max %.3f ms\n", c/n, mc, w/n, mw}' \
        "$out/$name.compile"
done
[ -f "$out/smol30.gguf" ] || "$W" make-model --like smollm2-135m --type q8_0 \
    --tokenizer "$S/models/tokenizers/smollm2/tokenizer.json" -o "$out/smol30.gguf" >/dev/null
best() { # generated tokens (after the first) per CPU second of decoding, the best of three runs
    local model=$1; shift
    for _ in 1 2 3; do
        "$W" run -m "$model" --no-bos -p "JSON:" -n 200 --seed 1 -t 1 --no-echo "$@" 2>&1 >/dev/null |
            sed -n 's/.*generated \([0-9]*\) tokens in [0-9.]* s ([0-9.]* tok\/s; CPU \([0-9.]*\) s).*/\1 \2/p'
    done | awk '{r = ($1 - 1) / $2; if (r > b) b = r} END {print b}'
}
for model in smol smol30; do
    echo "== decode tok/s of CPU time, random-weight SmolLM2-135M shape ($([ $model = smol ] && echo "1 layer: the guide's share is largest" || echo "all 30 layers")), up to 200 tokens, 1 thread, best of 3"
    rm -f "$out/decode.txt"
    for id in s02_contact_basic s10_keywords s18_address_nested s20_event_list s28_order_with_items; do
        free=$(best "$out/$model.gguf"); guided=$(best "$out/$model.gguf" --json-schema "$out/schemas/$id.json" --json-bounded)
        awk -v id="$id" -v f="$free" -v g="$guided" 'BEGIN {r = 100*g/f; print r >> "'"$out/decode.txt"'"
            printf "  %-24s unconstrained %7.1f tok/s, constrained %7.1f tok/s: %5.1f%% (goal >= 95%%)\n", id, f, g, r}'
    done
    awk '{s+=$1; if(NR==1||$1<m)m=$1} END {printf "  ratio over %d schemas: mean %.1f%%, lowest %.1f%%\n", NR, s/NR, m}' "$out/decode.txt"
done
