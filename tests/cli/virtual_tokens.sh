# Sourced by the prompt and prefix tuning tests: the checks a finished virtual-token run (PEFT
# PROMPT_TUNING or PREFIX_TUNING) shares whatever its kind.

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
