# wisp finetune --method prefix (PEFT PREFIX_TUNING, P-tuning v2) end to end on
# stories260K (grouped-query attention, arch llama) and a slice of Shakespeare:
# validation loss falls, peft/ is PEFT's layout (PREFIX_TUNING config with the
# kv heads as num_attention_heads, one prompt_embeddings [N, layers x 2 x
# token_dim] tensor) and the only adapter, eval --lora gives finetune's
# validation loss (the prefix sits in the KV cache as it sat in training),
# logits --lora match an independent float64 reference of PEFT's prefix
# tuning (tests/ref/peft_reference.py --prefix: past_key_values, keys
# unrotated, in Hugging Face order) to 1e-4 on stories260K and qwen2, the
# PEFT round trip is byte-identical, GGUF export and merge refuse by name, a
# stopped run resumes to the same bytes, the plan is exact (one byte less
# fails), all of it also with PEFT's reparameterization MLP
# (--prefix-projection, exported as its output), and malformed adapters and
# what is not implemented are refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/virtual_tokens.sh"
need models/stories260K.gguf data/tinyshakespeare.txt models/synthetic/syn-qwen2-f32.gguf \
     models/synthetic/syn-gemma2-f32.gguf golden/logits/stories260K.json golden/logits/syn-qwen2-f32.json
first_run prefix
# stories260K: 5 layers, 8 heads of 8, 4 kv heads: PEFT's GQA prefix is 4 heads, token_dim 32
for kv in '"peft_type": "PREFIX_TUNING"' '"task_type": "CAUSAL_LM"' '"num_virtual_tokens": 10' '"token_dim": 32' \
          '"num_attention_heads": 4' '"num_layers": 5' '"num_transformer_submodules": 1' \
          '"prefix_projection": false' '"encoder_hidden_size": 32'; do
    grep -q "$kv" "$cfg" || fail "adapter_config.json lacks $kv"
done
peft_keys "$cfg" "auto_mapping base_model_name_or_path encoder_hidden_size inference_mode num_attention_heads num_layers num_transformer_submodules num_virtual_tokens peft_type prefix_projection revision task_type token_dim"
# one tensor, prompt_embeddings, F32 [10, 5 x 2 x 32]
one_prompt_tensor "$D/a/peft/adapter_model.safetensors" 10 320
ok

# validation loss falls; eval --lora (the prefix in the cache) gives finetune's figure
validation_falls_and_eval_agrees prefix "$D/a" "$model" "$D/val.txt" 1e-4
"$WISP" run -m "$model" --lora "$D/a/peft" -p "ROMEO:" -n 8 --temp 0 -q > "$D/run.txt" || fail "run --lora (prefix)"
"$WISP" run -m "$model" -p "ROMEO:" -n 8 --temp 0 -q > "$D/run0.txt" || fail "run"
cmp -s "$D/run.txt" "$D/run0.txt" && fail "run --lora prefix printed the base's greedy text"
expect_fail "$WISP" run -m "$model" --lora "$D/a/peft:0.5" -p "ROMEO:" -n 2
expect_fail "$WISP" run -m "$model" --lora "$D/a/peft" --lora "$D/a/peft" -p "ROMEO:" -n 2
ok

# an independent float64 reference of PEFT's prefix tuning gives wisp's logits; without the prefix it does not
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || fail "$PY with numpy is needed (apt-get install python3-numpy)"
REF="$(dirname "$0")/../ref/peft_reference.py"
[ -x "$TOOLS/compare_logits" ] || fail "missing $TOOLS/compare_logits (make tests)"
ref_check() { # MODEL CASES PEFT_DIR
    local gp=() q
    while IFS= read -r q; do gp+=(-p "$q"); done < <("$TOOLS/golden_prompts" "$2")
    [ ${#gp[@]} -gt 0 ] || fail "no golden prompts in $2"
    "$PY" "$REF" "$1" "$2" --prefix "$3" > "$D/ref.json" || fail "reference failed on $1"
    "$WISP" logits -m "$1" --lora "$3" "${gp[@]}" --json --kv-type f32 > "$D/lr.json" || fail "logits --lora $3"
    "$TOOLS/compare_logits" "$D/ref.json" "$D/lr.json" --tol 0.0001 --greedy-exact > "$D/cmp.txt" ||
        fail "wisp != PEFT reference on $1: $(cat "$D/cmp.txt")"
    "$WISP" logits -m "$1" "${gp[@]}" --json --kv-type f32 > "$D/lb.json" || fail "logits"
    "$TOOLS/compare_logits" "$D/ref.json" "$D/lb.json" --tol 0.001 > /dev/null && fail "the reference's prefix changes nothing"
    ok
}
ref_check "$model" "$SHARED/golden/logits/stories260K.json" "$D/a/peft"
qm=$SHARED/models/synthetic/syn-qwen2-f32.gguf # HF key order kept, q/k/v biases
"$WISP" finetune -m "$qm" --data "$D/train.txt" --ctx 24 --batch 2 --steps 2 --lr 1e-2 -t 2 --method prefix \
    --num-virtual-tokens 3 -q -o "$D/qwen" || fail "finetune qwen2"
ref_check "$qm" "$SHARED/golden/logits/syn-qwen2-f32.json" "$D/qwen/peft"

# PEFT round trip byte-identical; GGUF export and merge refuse by name
"$WISP" export "$D/a/peft" --to peft -m "$model" -o "$D/rt" 2>/dev/null || fail "export --to peft"
cmp "$D/a/peft/adapter_model.safetensors" "$D/rt/adapter_model.safetensors" || fail "safetensors round trip differs"
cmp "$D/a/peft/adapter_config.json" "$D/rt/adapter_config.json" || fail "adapter_config.json round trip differs"
out=$("$WISP" export "$D/a/peft" --to gguf -m "$model" -o "$D/x.gguf" 2>&1) && fail "prefix tuning exported to GGUF"
case "$out" in *"llama.cpp cannot load prefix tuning"*) ;; *) fail "unclear GGUF refusal: $out" ;; esac
[ -e "$D/x.gguf" ] && fail "a refused export left a file"
out=$("$WISP" merge -m "$model" --lora "$D/a/peft" -o "$D/m.gguf" 2>&1) && fail "a prefix was merged"
case "$out" in *"a prefix-tuning adapter cannot be merged into the weights"*) ;; *) fail "unclear merge refusal: $out" ;; esac
[ -e "$D/m.gguf" ] && fail "a refused merge left a file"
ok

# malformed adapters are refused by name
bad() { # NAME SED-EXPR WANTED-TEXT
    cp -r "$D/a/peft" "$D/$1"
    sed -i "$2" "$D/$1/adapter_config.json"
    local out
    out=$("$WISP" eval -m "$model" --lora "$D/$1" -f "$D/val.txt" --ctx 32 2>&1) && fail "$1 accepted"
    case "$out" in *"$3"*) ;; *) fail "unclear refusal of $1: $out" ;; esac
    ok
}
bad heads 's/"num_attention_heads": 4/"num_attention_heads": 8/' "num_attention_heads 8"
bad layers 's/"num_layers": 5/"num_layers": 4/' "num_layers 4"
bad subs 's/"num_transformer_submodules": 1/"num_transformer_submodules": 2/' "num_transformer_submodules"
bad extra 's/"revision": null/"revision": null,\n  "prefix_extra": 1/' "prefix_extra"
bad init 's/"revision": null/"revision": null,\n  "prompt_tuning_init": "TEXT"/' "prompt_tuning_init"
cp -r "$D/a/peft" "$D/short"
head -c 100 "$D/a/peft/adapter_model.safetensors" > "$D/short/adapter_model.safetensors"
expect_fail "$WISP" eval -m "$model" --lora "$D/short" -f "$D/val.txt" --ctx 32
# a prefix of another model (qwen2's) does not fit stories260K
out=$("$WISP" eval -m "$model" --lora "$D/qwen/peft" -f "$D/val.txt" --ctx 32 2>&1) && fail "a foreign prefix accepted"
case "$out" in *"num_layers"*|*"num_attention_heads"*) ;; *) fail "unclear refusal: $out" ;; esac
# sliding-window layers would drop the prefix: refused by name in training and at inference
gm=$SHARED/models/synthetic/syn-gemma2-f32.gguf
out=$("$WISP" finetune -m "$gm" --data "$D/train.txt" --ctx 24 --batch 1 --steps 1 --method prefix -q -o "$D/g" 2>&1) &&
    fail "prefix tuning of gemma2 accepted"
case "$out" in *"sliding-window"*) ;; *) fail "unclear refusal: $out" ;; esac
ok

# PEFT's reparameterization (--prefix-projection): trained through its MLP, exported as the MLP's output
# (prefix_projection true, as PEFT saves it), read back by eval (finetune's figure) and by the float64
# reference, round trip byte-identical, and a stopped run resumes to the same bytes
proj=(-m "$model" --data "$D/train.txt" --val "$D/val.txt" --ctx 32 --batch 2 --steps 4 --eval-every 4 --lr 3e-2
      --seed 3 -q -t 2 --method prefix --num-virtual-tokens 4 --prefix-projection --encoder-hidden-size 16)
"$WISP" finetune "${proj[@]}" -o "$D/p" || fail "finetune --prefix-projection"
for kv in '"prefix_projection": true' '"encoder_hidden_size": 16' '"num_virtual_tokens": 4'; do
    grep -q "$kv" "$D/p/peft/adapter_config.json" || fail "projection adapter_config.json lacks $kv"
done
head -c 300 "$D/p/peft/adapter_model.safetensors" | grep -aq '"prompt_embeddings":{"dtype":"F32","shape":\[4,320\]' ||
    fail "the projection's export is not the final prefix [4, 320]"
pv=$(awk -F, 'END{print $6}' "$D/p/log.csv")
pe=$("$WISP" eval -m "$model" --lora "$D/p/peft" -f "$D/val.txt" --ctx 32 --json -t 2 | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
awk -v a="$pe" -v b="$pv" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < 1e-4)}' || fail "projection: eval $pe, finetune $pv"
ref_check "$model" "$SHARED/golden/logits/stories260K.json" "$D/p/peft"
"$WISP" export "$D/p/peft" --to peft -m "$model" -o "$D/prt" 2>/dev/null || fail "export --to peft (projection)"
cmp "$D/p/peft/adapter_model.safetensors" "$D/prt/adapter_model.safetensors" || fail "projection round trip differs"
cmp "$D/p/peft/adapter_config.json" "$D/prt/adapter_config.json" || fail "projection config round trip differs"
"$WISP" finetune "${proj[@]}" --checkpoint-every 2 --stop-after 2 -o "$D/pr" || fail "--stop-after (projection)"
"$WISP" finetune --resume "$D/pr" -t 3 -q || fail "resume (projection)"
cmp "$D/p/peft/adapter_model.safetensors" "$D/pr/peft/adapter_model.safetensors" || fail "resumed projection differs"
pb=$("$WISP" plan -m "$model" --train --method prefix --num-virtual-tokens 4 --prefix-projection --encoder-hidden-size 16 \
     --ctx 32 --batch 2 -t 2 --json | grep -o '"total_bytes": [0-9]*' | grep -o '[0-9]*')
psmall=(-m "$model" --data "$D/train.txt" --val-split 0.1 --ctx 32 --batch 2 --steps 1 -q -t 2 --method prefix
        --num-virtual-tokens 4 --prefix-projection --encoder-hidden-size 16)
"$WISP" finetune "${psmall[@]}" --arena "$pb" -o "$D/pc" || fail "projection in its planned arena ($pb)"
out=$("$WISP" finetune "${psmall[@]}" --arena $((pb - 1)) -o "$D/pe" 2>&1) && fail "one byte less trained (projection)"
case "$out" in *"1 bytes short"*) ;; *) fail "unclear error for a short arena: $out" ;; esac
echo "prefix projection validation loss $(awk -F, 'NR==2{print $6}' "$D/p/log.csv") -> $pv; planned arena $pb bytes"
ok

resumes_and_plans_exactly prefix

# LoRA settings do not apply, nor the projection's to other methods
out=$("$WISP" finetune "${small[@]}" --rank 4 -o "$D/g" 2>&1) && fail "--rank accepted for prefix tuning"
case "$out" in *"LoRA settings"*) ;; *) fail "unclear refusal: $out" ;; esac
expect_fail "$WISP" finetune "${small[@]}" --lora-dropout 0.1 -o "$D/g"
out=$("$WISP" finetune -m "$model" --data "$D/train.txt" --method prompt --prefix-projection --steps 1 -o "$D/g" 2>&1) &&
    fail "--prefix-projection accepted for prompt tuning"
case "$out" in *"belong to --method prefix"*) ;; *) fail "unclear refusal: $out" ;; esac
expect_fail "$WISP" finetune "${small[@]}" --encoder-hidden-size 8 -o "$D/g" 
out=$("$WISP" plan -m "$model" --train --method prefix --c-header 2>&1) && fail "a C header for prefix tuning"
case "$out" in *"prefix-tuning"*) ;; *) fail "unclear refusal: $out" ;; esac
ok

# a firmware's header for inference with the adapter: the blocks that read it
# (the firmware itself is checked by make test-embedded)
h=$("$WISP" plan -m "$model" --ctx 64 -t 1 --c-header --lora "$D/a/peft") || fail "plan --c-header --lora (prefix)"
for def in 'WISP_PLAN_ADAPTER_PREFIX 1' 'WISP_PLAN_ADAPTER_VIRTUAL_TOKENS 10' 'WISP_PLAN_ADAPTER_ROWS_BYTES 12800u' \
           'WISP_PLAN_ADAPTER_INDEX_BYTES [0-9]*u' 'WISP_ARENA_BYTES [0-9]*u'; do
    echo "$h" | grep -q "#define $def" || fail "the header lacks $def"
done
out=$("$WISP" plan -m "$model" --lora "$D/a/peft" 2>&1) && fail "plan --lora without --c-header"
case "$out" in *"goes with --c-header"*) ;; *) fail "unclear refusal: $out" ;; esac
"$WISP" finetune -m "$model" --data "$D/train.txt" --steps 1 --ctx 16 --batch 1 -q -o "$D/lora" 2>/dev/null || fail "finetune lora"
out=$("$WISP" plan -m "$model" --c-header --lora "$D/lora/peft" 2>&1) && fail "a LoRA folder planned for the firmware"
case "$out" in *"does not apply LoRA"*) ;; *) fail "unclear refusal: $out" ;; esac
ok
done_ok
