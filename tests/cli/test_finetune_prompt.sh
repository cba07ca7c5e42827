# wisp finetune --method prompt (PEFT PROMPT_TUNING) end to end on stories260K
# and a slice of Shakespeare: validation loss falls, peft/ is PEFT's layout
# (PROMPT_TUNING config, one prompt_embeddings [N, dim] tensor) and the only
# adapter, eval --lora gives finetune's validation loss (the virtual tokens
# lead the context as they led training), logits --lora match an independent
# float64 reference of PEFT's prompt tuning (tests/ref/peft_reference.py
# --prompt) to 1e-4, the PEFT round trip is
# byte-identical, GGUF export and merge refuse by name, the TEXT init starts
# from the text's embeddings, a stopped run resumes to the same bytes, the plan
# is exact (one byte less fails), and malformed adapters are refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/virtual_tokens.sh"
need models/stories260K.gguf data/tinyshakespeare.txt
first_run prompt
for kv in '"peft_type": "PROMPT_TUNING"' '"task_type": "CAUSAL_LM"' '"num_virtual_tokens": 10' '"token_dim": 64' \
          '"num_transformer_submodules": 1' '"prompt_tuning_init": "RANDOM"'; do
    grep -q "$kv" "$cfg" || fail "adapter_config.json lacks $kv"
done
peft_keys "$cfg" "auto_mapping base_model_name_or_path inference_mode num_attention_heads num_layers num_transformer_submodules num_virtual_tokens peft_type prompt_tuning_init prompt_tuning_init_text revision task_type token_dim tokenizer_kwargs tokenizer_name_or_path"
# one tensor, prompt_embeddings, F32 [10, 64]: 8-byte length + header + 2560 bytes
one_prompt_tensor "$D/a/peft/adapter_model.safetensors" 10 64
ok

# validation loss falls; eval --lora (virtual tokens first) gives finetune's figure
validation_falls_and_eval_agrees prompt "$D/a" "$model" "$D/val.txt" 1e-5
"$WISP" run -m "$model" --lora "$D/a/peft" -p "ROMEO:" -n 8 --temp 0 -q > "$D/run.txt" || fail "run --lora (prompt)"
"$WISP" run -m "$model" -p "ROMEO:" -n 8 --temp 0 -q > "$D/run0.txt" || fail "run"
"$WISP" logits -m "$model" --lora "$D/a/peft" -p "ROMEO: my lord" -p "Once" --json > "$D/l.json" || fail "logits --lora"
"$WISP" logits -m "$model" -p "ROMEO: my lord" -p "Once" --json > "$D/l0.json" || fail "logits"
[ -x "$TOOLS/compare_logits" ] || fail "missing $TOOLS/compare_logits (make tests)"
"$TOOLS/compare_logits" "$D/l.json" "$D/l0.json" --tol 1e-3 > /dev/null && fail "logits --lora prompt equal the base's"
cmp -s "$D/run.txt" "$D/run0.txt" && fail "run --lora prompt printed the base's greedy text"
expect_fail "$WISP" run -m "$model" --lora "$D/a/peft:0.5" -p "ROMEO:" -n 2
expect_fail "$WISP" run -m "$model" --lora "$D/a/peft" --lora "$D/a/peft" -p "ROMEO:" -n 2
ok

# gemma2 (embedding scale, a sliding window of 16 < 6 + 40 positions that the virtual tokens leave):
# eval --lora still gives finetune's figure
need models/synthetic/syn-gemma2-f32.gguf
gm=$SHARED/models/synthetic/syn-gemma2-f32.gguf
"$WISP" finetune -m "$gm" --data "$D/train.txt" --val "$D/val.txt" --ctx 40 --batch 2 --steps 2 --method prompt \
    --num-virtual-tokens 6 --lr 1e-2 --eval-windows 20 -q -t 2 -o "$D/gemma" || fail "finetune gemma2"
gv=$(awk -F, 'END{print $6}' "$D/gemma/log.csv")
ge=$("$WISP" eval -m "$gm" --lora "$D/gemma/peft" -f "$D/val.txt" --ctx 40 --max-windows 20 --json -t 2 |
     sed 's/.*"loss": \([0-9.e-]*\).*/\1/') || fail "eval gemma2"
awk -v a="$ge" -v b="$gv" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < 1e-4)}' || fail "gemma2: eval $ge, finetune $gv"
ok

# an independent float64 reference of PEFT's prompt tuning (numpy: prompt_embeddings before the
# input embeddings, BOS included, positions after them) gives wisp's logits; without the prompt it does not
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || fail "$PY with numpy is needed (apt-get install python3-numpy)"
REF="$(dirname "$0")/../ref/peft_reference.py"
cases=$SHARED/golden/logits/stories260K.json
[ -f "$cases" ] || fail "missing $cases"
"$PY" "$REF" "$model" "$cases" --prompt "$D/a/peft" > "$D/ref.json" || fail "reference failed"
gp=(); while IFS= read -r q; do gp+=(-p "$q"); done < <("$TOOLS/golden_prompts" "$cases")
[ ${#gp[@]} -gt 0 ] || fail "no golden prompts"
"$WISP" logits -m "$model" --lora "$D/a/peft" "${gp[@]}" --json --kv-type f32 > "$D/lr.json" || fail "logits --lora"
"$TOOLS/compare_logits" "$D/ref.json" "$D/lr.json" --tol 0.0001 --greedy-exact > "$D/cmp.txt" || fail "wisp != PEFT reference: $(cat "$D/cmp.txt")"
"$WISP" logits -m "$model" "${gp[@]}" --json --kv-type f32 > "$D/lb.json" || fail "logits"
"$TOOLS/compare_logits" "$D/ref.json" "$D/lb.json" --tol 0.001 > /dev/null && fail "the reference's prompt changes nothing"
ok

# PEFT round trip byte-identical; GGUF export and merge refuse by name
"$WISP" export "$D/a/peft" --to peft -m "$model" -o "$D/rt" 2>/dev/null || fail "export --to peft"
cmp "$D/a/peft/adapter_model.safetensors" "$D/rt/adapter_model.safetensors" || fail "safetensors round trip differs"
cmp "$D/a/peft/adapter_config.json" "$D/rt/adapter_config.json" || fail "adapter_config.json round trip differs"
out=$("$WISP" export "$D/a/peft" --to gguf -m "$model" -o "$D/x.gguf" 2>&1) && fail "prompt tuning exported to GGUF"
case "$out" in *"llama.cpp cannot load prompt tuning"*) ;; *) fail "unclear GGUF refusal: $out" ;; esac
[ -e "$D/x.gguf" ] && fail "a refused export left a file"
out=$("$WISP" merge -m "$model" --lora "$D/a/peft" -o "$D/m.gguf" 2>&1) && fail "a prompt was merged"
case "$out" in *"a prompt-tuning adapter cannot be merged into the weights"*) ;; *) fail "unclear merge refusal: $out" ;; esac
[ -e "$D/m.gguf" ] && fail "a refused merge left a file"
ok

# malformed adapters are refused by name
cp -r "$D/a/peft" "$D/bad1"
sed -i 's/"num_transformer_submodules": 1/"num_transformer_submodules": 2/' "$D/bad1/adapter_config.json"
out=$("$WISP" eval -m "$model" --lora "$D/bad1" -f "$D/val.txt" --ctx 32 2>&1) && fail "2 submodules accepted"
case "$out" in *"num_transformer_submodules"*) ;; *) fail "unclear refusal: $out" ;; esac
cp -r "$D/a/peft" "$D/bad2"
sed -i 's/"token_dim": 64/"token_dim": 65/' "$D/bad2/adapter_config.json"
out=$("$WISP" eval -m "$model" --lora "$D/bad2" -f "$D/val.txt" --ctx 32 2>&1) && fail "wrong token_dim accepted"
case "$out" in *"token_dim 65"*) ;; *) fail "unclear refusal: $out" ;; esac
cp -r "$D/a/peft" "$D/bad3"
sed -i 's/"revision": null/"revision": null,\n  "prompt_tuning_extra": 1/' "$D/bad3/adapter_config.json"
out=$("$WISP" eval -m "$model" --lora "$D/bad3" -f "$D/val.txt" --ctx 32 2>&1) && fail "unknown key accepted"
case "$out" in *"prompt_tuning_extra"*) ;; *) fail "unclear refusal: $out" ;; esac
cp -r "$D/a/peft" "$D/bad4"
head -c 100 "$D/a/peft/adapter_model.safetensors" > "$D/bad4/adapter_model.safetensors"
expect_fail "$WISP" eval -m "$model" --lora "$D/bad4" -f "$D/val.txt" --ctx 32
ok

# TEXT init: step 0's validation loss is the base's on a context led by the text's tokens
"$WISP" finetune "${common[@]}" --steps 1 --prompt-init-text "ROMEO:" -o "$D/t" || fail "--prompt-init-text"
grep -q '"prompt_tuning_init": "TEXT"' "$D/t/peft/adapter_config.json" || fail "TEXT init not recorded"
grep -q '"prompt_tuning_init_text": "ROMEO:"' "$D/t/peft/adapter_config.json" || fail "init text not recorded"
t0=$(awk -F, 'NR==2{print $6}' "$D/t/log.csv")
[ "$t0" != "$(awk -F, 'NR==2{print $6}' "$D/a/log.csv")" ] || fail "the TEXT init gave the random init's loss"
ok

resumes_and_plans_exactly prompt

# LoRA settings do not apply; the TEXT init is prompt tuning's alone
expect_fail "$WISP" finetune "${small[@]}" --lora-dropout 0.1 -o "$D/g"
expect_fail "$WISP" finetune "${small[@]}" --targets attn_q -o "$D/g"
out=$("$WISP" finetune "${small[@]}" --rank 4 -o "$D/g" 2>&1) && fail "--rank accepted for prompt tuning"
case "$out" in *"LoRA settings"*) ;; *) fail "unclear refusal: $out" ;; esac
expect_fail "$WISP" finetune "${small[@]}" --alpha 4 -o "$D/g"
out=$("$WISP" finetune -m "$model" --data "$D/train.txt" --num-virtual-tokens 4 --steps 1 -o "$D/h" 2>&1) &&
    fail "--num-virtual-tokens accepted for LoRA"
case "$out" in *"belong to --method prompt"*) ;; *) fail "unclear refusal: $out" ;; esac
out=$("$WISP" finetune -m "$model" --data "$D/train.txt" --method prefix --prompt-init-text "ROMEO:" --steps 1 \
      -o "$D/i" 2>&1) && fail "a text init accepted for prefix tuning"
case "$out" in *"prefix tuning has no text init"*) ;; *) fail "unclear refusal: $out" ;; esac
ok
done_ok
