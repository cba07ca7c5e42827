# wisp make-model: random-weight models at real shapes (cut to a few layers
# to stay quick) load in wisp with the expected shapes and types, give finite
# logits, are the same file for the same seed whatever the thread count,
# carry a real tokenizer when given one, and reject bad options clearly. The
# shapes of Llama 3.2, Qwen3, Gemma 3 and Phi-3 come out with their family's
# specifics in wisp info and wisp plan, and their plans are exact.
# When node-llama-cpp is installed (tests/cli/test_llamacpp_interop.sh puts
# it in the build folder), llama.cpp's logits on the made models are checked
# against wisp's too.
source "$(dirname "$0")/lib.sh"
need models/tokenizers/smollm2/tokenizer.json models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf models/stories260K.gguf
D=$WORK/make_model
rm -rf "$D" && mkdir -p "$D"
TOK=$SHARED/models/tokenizers/smollm2/tokenizer.json

"$WISP" make-model --like smollm2-135m --type q8_0 --layers 2 -o "$D/a.gguf" -t 1 2>"$D/log" || fail "make-model: $(cat "$D/log")"
grep -q "wrote $D/a.gguf: SmolLM2-135M-shaped Q8_0" "$D/log" || fail "no summary line: $(cat "$D/log")"; ok
info=$("$WISP" info -m "$D/a.gguf") || fail "info"
for want in "layers             2" "embedding          576" "heads              9 (3 key/value heads" \
            "feed-forward       1536" "vocabulary         49152" "base 100000" "tied to the embedding"; do
    grep -qF "$want" <<<"$info" || fail "info lacks '$want': $info"; ok
done

echo "== same seed, same file, 1 or 2 threads; another seed differs"
"$WISP" make-model --like smollm2-135m --type q8_0 --layers 2 -o "$D/b.gguf" -t 2 2>/dev/null || fail "make-model -t 2"
cmp -s "$D/a.gguf" "$D/b.gguf" || fail "1 and 2 threads wrote different files"; ok
"$WISP" make-model --like smollm2-135m --type q8_0 --layers 2 -o "$D/c.gguf" --seed 2 2>/dev/null || fail "make-model --seed 2"
cmp -s "$D/a.gguf" "$D/c.gguf" && fail "seeds 1 and 2 wrote the same file"; ok

echo "== logits are finite"
"$WISP" logits -m "$D/a.gguf" -p "hello" --json > "$D/a.json" || fail "logits"
grep -qiE "nan|inf|null" "$D/a.json" && fail "non-finite logits"; ok

echo "== the Q4_K_M mix, with llama.cpp's fallbacks for 576-wide rows"
"$WISP" make-model --like smollm2-135m --type q4_k_m --layers 4 -o "$D/km.gguf" 2>"$D/log" || fail "q4_k_m: $(cat "$D/log")"
t=$("$WISP" info -m "$D/km.gguf" --tensors)
check_type() { grep -qE "tensor $1 +$2 " <<<"$t" || fail "$1 should be $2: $(grep "tensor $1 " <<<"$t")"; ok; }
check_type token_embd.weight Q8_0     # Q6_K on rows of 576: Q8_0
check_type blk.0.attn_q.weight Q5_0   # Q4_K on rows of 576: Q5_0
check_type blk.0.ffn_down.weight Q4_K # rows of 1536
check_type blk.2.ffn_down.weight Q6_K # more bits every third layer
check_type blk.3.ffn_down.weight Q6_K # and in the last eighth
check_type blk.3.attn_v.weight Q8_0
check_type blk.0.attn_norm.weight F32

echo "== qwen2 shape: biases, NEOX rope, tied output"
"$WISP" make-model --like qwen2.5-0.5b --type q8_0 --layers 1 -o "$D/qw.gguf" 2>/dev/null || fail "qwen2"
info=$("$WISP" info -m "$D/qw.gguf" --tensors)
for want in "architecture       qwen2" "embedding          896" "vocabulary         151936" "half-split (NEOX)" \
            "blk.0.attn_q.bias"; do
    grep -qF "$want" <<<"$info" || fail "qwen2 info lacks '$want'"; ok
done

echo "== the shapes of the current small families: wisp info names each family's specifics, wisp plan is exact"
# stories260K's 512-token vocabulary keeps the files small (Q8_0: quick to quantize); gemma-3-270m keeps 6
# layers (5 local, 1 global)
family_shape() { # SHAPE LAYERS WANT...: make it, check info (with --tensors) and the plan
    local shape=$1 layers=$2 f="$D/$1.gguf"; shift 2
    "$WISP" make-model --like "$shape" --type q8_0 --layers "$layers" --vocab-from "$SHARED/models/stories260K.gguf" \
        -o "$f" -t 2 2>"$D/log" || fail "make-model --like $shape: $(cat "$D/log")"
    local info want
    info=$("$WISP" info -m "$f" --tensors) || fail "info $shape"
    for want in "vocabulary         512" "$@"; do
        grep -qF -- "$want" <<<"$info" || fail "$shape: info lacks '$want': $info"; ok
    done
    local total
    total=$("$WISP" plan -m "$f" --ctx 256 --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
    [ -n "$total" ] || fail "$shape: no total from wisp plan"
    "$WISP" run -m "$f" -p "Once upon a time" -n 4 --temp 0 --ctx 256 -q --arena "$total" >/dev/null ||
        fail "$shape: the planned arena ($total bytes) failed"; ok
    "$WISP" run -m "$f" -p "Once upon a time" -n 4 --temp 0 --ctx 256 -q --arena $((total - 1)) >/dev/null 2>&1 &&
        fail "$shape: one byte less than the plan still ran"; ok
}
family_shape llama-3.2-1b 1 "architecture       llama" "embedding          2048" "heads              32 (8 key/value heads" \
    "feed-forward       8192" "adjacent pairs, 64 dims, base 500000" "tied to the embedding" \
    "family             llama, SiLU-gated feed-forward" "rope_freqs.weight factors when present" "tensor rope_freqs.weight"
family_shape qwen3-0.6b 1 "architecture       qwen3" "embedding          1024" "heads              16 (8 key/value heads" \
    "head size          128" "feed-forward       3072" "half-split (NEOX) pairs, 128 dims, base 1e+06" \
    "family             qwen3, SiLU-gated feed-forward, per-head q/k RMSNorm" "scores x 0.0883883" "blk.0.attn_q_norm.weight"
family_shape gemma-3-270m 6 "architecture       gemma3" "embedding          640" "heads              4 (1 key/value heads" \
    "head size          256" "feed-forward       2048" \
    "family             gemma3, GELU-tanh-gated feed-forward, per-head q/k RMSNorm, post-attention and post-FFN norms, embedding x 25.2982" \
    "scores x 0.0625; sliding window of 512 on 5 of 6 layers (their RoPE base 10000, unscaled)" "blk.5.post_ffw_norm.weight"
family_shape gemma-3-1b 1 "architecture       gemma3" "embedding          1152" "head size          256" "feed-forward       6912" \
    "post-attention and post-FFN norms, embedding x 33.9411" "sliding window of 512 on 1 of 1 layers"
family_shape phi-3-mini 1 "architecture       phi3" "embedding          3072" "heads              32 (32 key/value heads)" \
    "head size          96" "feed-forward       8192" "output             separate" \
    "family             phi3, SiLU-gated feed-forward, fused q/k/v and gate/up" "sliding window of 2047 on 1 of 1 layers" \
    "blk.0.attn_qkv.weight"
# a windowed layer caches window - 1 + batch positions in blocks of 64; wisp plan says so
plan=$("$WISP" plan -m "$D/gemma-3-270m.gguf" --ctx 4096) || fail "plan gemma-3-270m"
grep -qF "5 of 6 layers attend through a window of 512: each caches a ring of 576 positions" <<<"$plan" ||
    fail "gemma-3-270m: the plan does not describe the ring: $plan"; ok
plan=$("$WISP" plan -m "$D/phi-3-mini.gguf" --ctx 4096) || fail "plan phi-3-mini"
grep -qF "1 of 1 layers attend through a window of 2047: each caches a ring of 2112 positions" <<<"$plan" ||
    fail "phi-3-mini: the plan does not describe the ring: $plan"; ok
grep -qF "family             phi3" <<<"$plan" || fail "wisp plan does not describe the family: $plan"; ok
rm -f "$D"/llama-3.2-1b.gguf "$D"/qwen3-0.6b.gguf "$D"/gemma-3-*.gguf "$D"/phi-3-mini.gguf # 230 MB

echo "== a real tokenizer: tokenizer.json, or a GGUF's vocabulary"
"$WISP" make-model --like smollm2-135m --type q8_0 --layers 1 --tokenizer "$TOK" -o "$D/tok.gguf" 2>/dev/null || fail "--tokenizer"
"$WISP" make-model --like smollm2-135m --type q8_0 --layers 1 \
    --vocab-from "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf" -o "$D/voc.gguf" 2>/dev/null || fail "--vocab-from"
text="Hello world, this is SmolLM2 speaking: 12345!"
a=$("$WISP" tokenize -m "$D/tok.gguf" "$text") && b=$("$WISP" tokenize -m "$D/voc.gguf" "$text") || fail tokenize
[ "$a" = "$b" ] || fail "tokenizer.json and the llama.cpp vocabulary tokenize differently: $a vs $b"; ok
grep -q "'Hello'" <<<"$a" || fail "unexpected tokens: $a"; ok

echo "== bad options"
expect_fail "$WISP" make-model --like gpt-5 --type q8_0 -o "$D/x.gguf"
expect_fail "$WISP" make-model --like smollm2-135m --type q9_9 -o "$D/x.gguf"
expect_fail "$WISP" make-model --like smollm2-135m --type q8_0
expect_fail "$WISP" make-model --like smollm2-135m --type q8_0 -o "$D/x.gguf" --tokenizer "$D/missing.json"
expect_fail "$WISP" make-model --like smollm2-135m --type q8_0 -o "$D/x.gguf" --vocab-from "$D/a.json"
[ ! -e "$D/x.gguf" ] || fail "a failed run left $D/x.gguf behind"; ok

NLC=${WISP_NODE_LLAMA_CPP:-$WORK/../node-llama-cpp}
if command -v node >/dev/null && [ -d "$NLC/node_modules/node-llama-cpp" ]; then
    echo "== llama.cpp loads the made models and agrees with wisp"
    for m in a km qw; do
        "$WISP" logits -m "$D/$m.gguf" -p "Once upon a time" -p "hello there" --json -t 1 > "$D/$m-w.json" || fail "logits $m"
        node "$(dirname "$0")/../ref/llamacpp_logits.mjs" "$NLC" "$D/$m.gguf" "$D/$m-w.json" > "$D/$m-l.json" 2>"$D/node.err" ||
            fail "llama.cpp could not run $m.gguf: $(tail -n 3 "$D/node.err")"
        "$TOOLS/compare_logits" "$D/$m-l.json" "$D/$m-w.json" --tol 0.05 || fail "$m: llama.cpp and wisp disagree"
        ok
    done
else
    echo "note: node-llama-cpp is not installed at $NLC; llama.cpp's side is checked by make bench"
fi
done_ok
