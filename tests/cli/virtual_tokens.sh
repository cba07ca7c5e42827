# Sourced by the prompt and prefix tuning tests: the checks a finished virtual-token run (PEFT
# PROMPT_TUNING or PREFIX_TUNING) shares whatever its kind.

# first_run KIND: a short run of --method KIND on stories260K (10 virtual tokens, Shakespeare) into
# $D/a, its files there (and no adapter.gguf: llama.cpp cannot load virtual tokens), its method and
# size in config.json. Sets D, model, common (the run's options) and cfg (its adapter_config.json).
first_run() {
    local kind=$1
    model=$SHARED/models/stories260K.gguf
    D=$WORK/$kind
    rm -rf "$D" && mkdir -p "$D"
    head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt"
    tail -c 4000 "$SHARED/data/tinyshakespeare.txt" > "$D/val.txt"
    common=(-m "$model" --data "$D/train.txt" --val "$D/val.txt" --ctx 32 --batch 2 --steps 6 --eval-every 3
            --lr 3e-2 --seed 7 -q -t 2 --method "$kind" --num-virtual-tokens 10)
    "$WISP" finetune "${common[@]}" --checkpoint-every 3 -o "$D/a" || fail "finetune --method $kind failed"
    peft_run_files "$D/a" "$kind" "llama.cpp cannot load $kind tuning"
    grep -q '"num_virtual_tokens": 10' "$D/a/config.json" || fail "config.json does not record num_virtual_tokens"
    cfg=$D/a/peft/adapter_config.json
}

# peft_keys CONFIG "KEY KEY ...": exactly PEFT's keys for this kind, in the sorted order PEFT writes them
peft_keys() {
    local keys
    keys=$(python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))))' "$1") || fail "cannot read $1"
    [ "$keys" = "$2" ] || fail "$(basename "$1") keys: $keys (expected: $2)"
}

# one_prompt_tensor SAFETENSORS ROWS WIDTH: one tensor, prompt_embeddings, F32 [ROWS, WIDTH]
one_prompt_tensor() {
    head -c 300 "$1" | grep -aq "\"prompt_embeddings\":{\"dtype\":\"F32\",\"shape\":\\[$2,$3\\]" ||
        fail "no prompt_embeddings F32 [$2, $3]: $(head -c 200 "$1" | tr -d '\0')"
}

# validation_falls_and_eval_agrees KIND RUN_DIR MODEL VAL TOL: the run's validation loss fell,
# `eval --lora` on its adapter gives the run's last figure within TOL, and differs from the base's
validation_falls_and_eval_agrees() {
    local kind=$1 dir=$2 model=$3 val=$4 tol=$5 v0 v1 e le b
    v0=$(awk -F, 'NR==2{print $6}' "$dir/log.csv"); v1=$(awk -F, 'END{print $6}' "$dir/log.csv")
    awk -v a="$v0" -v b="$v1" 'BEGIN{exit !(b < a)}' || fail "validation loss did not fall ($v0 -> $v1)"
    e=$("$WISP" eval -m "$model" --lora "$dir/peft" -f "$val" --ctx 32 --json -t 2) || fail "eval --lora peft"
    le=$(echo "$e" | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$le" -v b="$v1" -v t="$tol" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d < t)}' ||
        fail "eval loss $le differs from finetune's $v1"
    b=$("$WISP" eval -m "$model" -f "$val" --ctx 32 --json -t 2 | sed 's/.*"loss": \([0-9.e-]*\).*/\1/')
    awk -v a="$le" -v b="$b" 'BEGIN{d=a-b; if (d<0) d=-d; exit !(d > 1e-3)}' || fail "the $kind changes nothing ($le vs $b)"
    echo "$kind tuning validation loss $v0 -> $v1; eval --lora $le (base $b)"
}

# resumes_and_plans_exactly KIND: a run stopped after 2 steps and resumed with another thread count
# ends with the same bytes as $D/a; then the plan of --method KIND is exact (the planned arena
# trains, one byte less is refused with the shortfall). Sets small: a one-step run's options.
resumes_and_plans_exactly() {
    local kind=$1 bytes out
    "$WISP" finetune "${common[@]}" --checkpoint-every 3 --stop-after 2 -o "$D/b" || fail "--stop-after"
    "$WISP" finetune --resume "$D/b" -t 3 -q || fail "resume"
    cmp "$D/a/peft/adapter_model.safetensors" "$D/b/peft/adapter_model.safetensors" || fail "resumed $kind differs"
    ok
    small=(-m "$model" --data "$D/train.txt" --val-split 0.1 --ctx 32 --batch 2 --steps 1 -q -t 2 --method "$kind"
           --num-virtual-tokens 10)
    bytes=$("$WISP" plan -m "$model" --train --method "$kind" --num-virtual-tokens 10 --ctx 32 --batch 2 -t 2 --json |
            grep -o '"total_bytes": [0-9]*' | grep -o '[0-9]*')
    [ -n "$bytes" ] || fail "plan --train --method $kind"
    "$WISP" finetune "${small[@]}" --arena "$bytes" -o "$D/c" || fail "$kind tuning in its planned arena ($bytes)"
    out=$("$WISP" finetune "${small[@]}" --arena $((bytes - 1)) -o "$D/e" 2>&1) && fail "one byte less trained"
    case "$out" in *"1 bytes short"*) ;; *) fail "unclear error for a short arena: $out" ;; esac
    echo "planned arena: $kind tuning $bytes bytes"
    ok
}
