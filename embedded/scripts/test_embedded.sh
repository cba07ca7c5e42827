#!/usr/bin/env bash
# make test-embedded: build the firmware, run it under QEMU and check it
# against the native engine, then print the budget table.
#
# Checks, per board (a missing toolchain or emulator is a failure, named):
#   infer-*        greedy text byte-identical to `wisp run --temp 0` on the same
#                  GGUF (scalar kernels); exit 0; stack within its reserve; plan within the arena;
#                  the instruction count is the same on a second run (M4)
#   train-m7       LoRA steps on the M7 within 512 KB: the loss falls (mean of
#                  the last epoch of windows vs the first); per-step losses and
#                  the adapter are bit-identical to `wisp finetune` run natively
#                  with the scalar kernels (see embedded/README.md for why
#                  scalar); `wisp eval --lora` loads the adapter and its loss on
#                  the training text is below the base model's; `wisp run --lora`
#                  generates with it
#   classify-m4    a grammar-constrained label (trie, grammar and guide in
#                  static blocks planned by `wisp plan --c-header --grammar`):
#                  one of the grammar's labels, byte-identical to `wisp run
#                  --grammar --temp 0`; each block equals this target's own plan
#   infer-prefix-m4, infer-prompt-m4
#                  a prefix- and a prompt-tuning adapter (made by `wisp finetune
#                  --method prefix|prompt`) in flash, read into the two static
#                  blocks `wisp plan --c-header --lora DIR` planned: greedy text
#                  byte-identical to `wisp run --lora DIR --temp 0`, not the
#                  base model's; each block equals this target's own plan, and
#                  the parse block one byte smaller fails, naming the shortfall
#   infer-qwen3-m7 a second family of the architecture table (qwen3: per-head
#                  q/k norms, NEOX RoPE, head size 64 != dim/heads), Q4_0, ctx 64:
#                  greedy text byte-identical to the native engine's
#   args / exit    `-n 3` matches the native 3-token text; a bad argument exits 2
#   kernel-check-* the DSP kernels against the scalar reference on M4, M7, M33
#   fault-probe    a trap prints the fault registers and exits 99
#   heap-probe     a firmware calling malloc must fail to link
#   budget         a context too large for 256 KB of SRAM must fail to link
# Environment (from embedded/embedded.mk): EMB, WISP, WISP_SHARED, EMB_MODEL,
# EMB_CTX, EMB_N_PREDICT, MAKE_CMD, and the training settings EMB_TRAIN_TEXT,
# EMB_TRAIN_SEQ, EMB_TRAIN_RANK, EMB_TRAIN_TARGETS, EMB_TRAIN_STEPS,
# EMB_TRAIN_LR, EMB_TRAIN_SEED.
set -u
: "${EMB:?}" "${WISP:?}" "${WISP_SHARED:?}" "${EMB_MODEL:?}" "${EMB_CTX:?}" "${EMB_N_PREDICT:?}" "${MAKE_CMD:?}"
: "${EMB_TRAIN_TEXT:?}" "${EMB_TRAIN_SEQ:?}" "${EMB_TRAIN_RANK:?}" "${EMB_TRAIN_TARGETS:?}" "${EMB_TRAIN_STEPS:?}"
: "${EMB_TRAIN_LR:?}" "${EMB_TRAIN_SEED:?}"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../tests/results.sh"
run=$here/run.sh
work=$EMB/test
mkdir -p "$work"
pass=0; fail=0; skip=0; failed=()
results_open "embedded tests"

# ok|bad NAME MESSAGE...: one result line (the message words are joined)
ok()      { pass=$((pass+1)); printf 'PASS  %-26s %s\n' "$1" "${*:2}"; }
bad()     { fail=$((fail+1)); failed+=("$1"); printf 'FAIL  %-26s %s\n' "$1" "${*:2}"; results_add fail "embedded: $1" "${*:2}"; }
# finish: the summary line (also for make test's closing summary) and the verdict
finish() {
    results_add suite "embedded tests" "$pass" "$fail" "$skip"
    echo "embedded tests: $pass passed, $fail failed, $skip skipped"
    [ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
    exit 0
}
show() { sed 's/^/      | /' "$1" | tail -n "${2:-20}"; }

# Anything missing fails: a skipped board would let the suite pass unseen.
for f in models/stories260K.gguf data/tinyshakespeare.txt; do
    [ -f "$WISP_SHARED/$f" ] || bad "shared" "missing $WISP_SHARED/$f (set SHARED to the shared reference folder)"
done
[ $fail -eq 0 ] || finish

# Which boards can be built and run here.
have() { command -v "$1" >/dev/null 2>&1; }
boards=()
if have arm-none-eabi-gcc && have qemu-system-arm; then boards+=(m4 m7); arm=1; else arm=0; fi
if have riscv64-unknown-elf-gcc && have qemu-system-riscv64; then boards+=(rv64); rv=1; else rv=0; fi
[ $arm = 1 ] || bad "cortex-m" "arm-none-eabi-gcc or qemu-system-arm not installed (scripts/install-deps.sh)"
[ $rv = 1 ] || bad "risc-v" "riscv64-unknown-elf-gcc or qemu-system-riscv64 not installed (scripts/install-deps.sh)"
[ ${#boards[@]} -gt 0 ] || finish

targets=("$EMB/tools/libinsn.so")
for b in "${boards[@]}"; do targets+=("$EMB/infer-$b.elf"); done
[ $arm = 1 ] && targets+=("$EMB/train-m7.elf" "$EMB/classify-m4.elf" "$EMB/tools/lora_diff" \
                          "$EMB/kernel-check-m4.elf" "$EMB/kernel-check-m7.elf" "$EMB/kernel-check-m33.elf")
if ! $MAKE_CMD "${targets[@]}" >"$work/build.log" 2>&1; then
    bad build "make ${targets[*]##*/}"; show "$work/build.log" 40
    finish
fi

# native N: the reference text for N tokens. The scalar kernels, because the
# firmware's are proven bit-identical to them (kernel-check); the host's SIMD
# kernels sum in other orders and could flip a near-tie some day.
native() {
    WISP_KERNELS=scalar "$WISP" run -m "$EMB_MODEL" -p "Once upon a time" --temp 0 -n "$1" --ctx "$EMB_CTX" -t 1 -q
}
native "$EMB_N_PREDICT" >"$work/native.txt" 2>"$work/native.err" || { bad native "wisp run failed"; show "$work/native.err"; }

# stat FIELD FILE: a number from the firmware's closing "[infer-...]" line
stat() { sed -n "s/.*$1 \([0-9][0-9]*\).*/\1/p" "$2" | tail -n1; }
# stack_ok NAME ERR-FILE: the deepest stack use stays below its reserve
stack_ok() {
    stack_used=$(stat stack "$2")
    stack_reserved=$(sed -n 's/.*stack [0-9]* of \([0-9]*\) bytes.*/\1/p' "$2")
    [ -n "$stack_used" ] && [ "$stack_used" -lt "${stack_reserved:-0}" ] && return 0
    bad "$1" "stack use ${stack_used:-?} not below its reserve ${stack_reserved:-?}"
    return 1
}

declare -A prefill per_token
for b in "${boards[@]}"; do
    name=infer-$b
    out=$work/$name.out err=$work/$name.err ins=$work/$name.insns
    start=$EPOCHREALTIME
    "$run" --insns "$ins" "$EMB/$name.elf" >"$out" 2>"$err"; rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc -ne 0 ]; then bad "$name" "exit status $rc"; show "$err"; continue; fi
    if ! cmp -s "$out" "$work/native.txt"; then
        bad "$name" "text differs from the native engine"; diff "$work/native.txt" "$out" | head -n 8; continue
    fi
    stack_ok "$name" "$err" || continue
    arena=$(stat arena "$err"); target_plan=$(sed -n "s/.*this target's plan: \([0-9]*\).*/\1/p" "$err")
    if [ -z "$target_plan" ] || [ "$target_plan" -gt "$arena" ]; then
        bad "$name" "target plan ${target_plan:-?} exceeds the arena $arena"; continue
    fi
    # marks: 0 start of prefill, 1 end of prefill, then one per evaluated token
    read -r pf pt nt < <(awk '$1=="mark" { m[$2]=$3; n=$2 }
        END { if (n >= 2) printf "%d %d %d\n", m[1]-m[0], (m[n]-m[1])/(n-1), n-1; else print "0 0 0" }' "$ins")
    prefill[$b]=$pf; per_token[$b]=$pt
    ok "$name" "$(wc -c <"$out") bytes match the native engine, ${secs}s, stack $stack_used/$stack_reserved B," \
        "$pt insns/token over $nt tokens"
done

# ---- a grammar-constrained label on the Cortex-M4 ----------------------------
classify_check() {
    local name=classify-m4 out=$work/classify-m4.out err=$work/classify-m4.err prompt="The movie was great. Sentiment:"
    : "${EMB_CLASSIFY_CTX:?}" "${EMB_CLASSIFY_GRAMMAR:?}"
    WISP_KERNELS=scalar "$WISP" run -m "$EMB_MODEL" -p "$prompt" --grammar "$EMB_CLASSIFY_GRAMMAR" --temp 0 -n 16 \
        --ctx "$EMB_CLASSIFY_CTX" -t 1 -q >"$work/classify-native.txt" 2>"$work/classify-native.err" ||
        { bad "$name" "native wisp run --grammar failed"; show "$work/classify-native.err"; return; }
    "$run" "$EMB/$name.elf" >"$out" 2>"$err" || { bad "$name" "exit status $?"; show "$err"; return; }
    if ! cmp -s "$out" "$work/classify-native.txt"; then
        bad "$name" "label differs from the native engine"; diff "$work/classify-native.txt" "$out" | head -n 8; return
    fi
    # the label is one the grammar allows (checked by the grammar matcher, not by us)
    local label
    label=$(head -n1 "$out"); label=${label#"$prompt"}
    local gfile=$work/classify.gbnf
    printf '%s\n' "$EMB_CLASSIFY_GRAMMAR" >"$gfile"
    if ! "$WISP" grammar match "$gfile" "$label" >"$work/classify-match.txt" 2>&1; then
        bad "$name" "label '$label' is not accepted by the grammar"; show "$work/classify-match.txt"; return
    fi
    # each static block is exactly what this target plans (host plan == target plan)
    local part size plan
    for part in trie grammar guide; do
        size=$(sed -n "s/.* $part \([0-9]*\) (plan \([0-9]*\)).*/\1/p" "$err")
        plan=$(sed -n "s/.* $part \([0-9]*\) (plan \([0-9]*\)).*/\2/p" "$err")
        if [ -z "$size" ] || [ "$size" != "$plan" ]; then
            bad "$name" "$part block ${size:-?} bytes, the target plans ${plan:-?}"; return
        fi
        eval "classify_$part=$size"
    done
    stack_ok "$name" "$err" || return
    ok "$name" "label '$label' matches the native engine and the grammar; trie $classify_trie B," \
        "grammar $classify_grammar B, guide $classify_guide B, ctx $EMB_CLASSIFY_CTX, stack $stack_used/$stack_reserved B"
}
[ $arm = 1 ] && classify_check

# ---- prompt- and prefix-tuning adapters on the Cortex-M4 ---------------------
# (a prompt that leaves stories260K's well-worn "Once upon a time" path, so
# that a few steps of tuning on Shakespeare show in the greedy text)
adapter_n=32 adapter_prompt="First Citizen:"
adapter_build() { # adapter_build METHOD SHRINK ELF: the M4 firmware with METHOD's adapter
    $MAKE_CMD EMB_ADAPTER="$work/$1/peft" EMB_ADAPTER_SHRINK="$2" EMB_ADAPTER_PROMPT="$adapter_prompt" \
        "$EMB/m4/infer-adapter.elf" >"$work/$1-build.log" 2>&1 &&
        cp "$EMB/m4/infer-adapter.elf" "$3"
}
adapter_check() {
    local method=$1 name=infer-$1-m4 elf=$EMB/infer-$1-m4.elf
    rm -rf "$work/$method"
    if ! WISP_KERNELS=scalar "$WISP" finetune -m "$EMB_MODEL" --data "$EMB_TRAIN_TEXT" -o "$work/$method" --method "$method" \
        --num-virtual-tokens 4 --ctx 16 --batch 1 --steps 8 --lr 1e-2 --schedule constant --warmup 0 -t 1 -q \
        >"$work/$method-finetune.log" 2>&1; then
        bad "$name" "wisp finetune --method $method failed"; show "$work/$method-finetune.log"; return
    fi
    adapter_build "$method" 0 "$elf" || { bad "$name" "build failed"; show "$work/$method-build.log"; return; }
    local with
    for with in lora base; do
        local lora=(); [ $with = lora ] && lora=(--lora "$work/$method/peft")
        WISP_KERNELS=scalar "$WISP" run -m "$EMB_MODEL" "${lora[@]}" -p "$adapter_prompt" --temp 0 -n $adapter_n \
            --ctx "$EMB_CTX" -t 1 -q >"$work/$name-native-$with.txt" 2>"$work/$name-native.err" ||
            { bad "$name" "native wisp run (${with}) failed"; show "$work/$name-native.err"; return; }
    done
    "$run" "$elf" -n $adapter_n >"$work/$name.out" 2>"$work/$name.err" || { bad "$name" "exit status $?"; show "$work/$name.err"; return; }
    if ! cmp -s "$work/$name.out" "$work/$name-native-lora.txt"; then
        bad "$name" "text differs from wisp run --lora"; diff "$work/$name-native-lora.txt" "$work/$name.out" | head -n 8; return
    fi
    if cmp -s "$work/$name.out" "$work/$name-native-base.txt"; then bad "$name" "the adapter does not change the text"; return; fi
    local size plan rows
    size=$(sed -n 's/.* index \([0-9]*\) (plan \([0-9]*\)).*/\1/p' "$work/$name.err")
    plan=$(sed -n 's/.* index \([0-9]*\) (plan \([0-9]*\)).*/\2/p' "$work/$name.err")
    rows=$(sed -n 's/.* rows \([0-9]*\) bytes.*/\1/p' "$work/$name.err")
    if [ -z "$size" ] || [ "$size" != "$plan" ]; then bad "$name" "index block ${size:-?} bytes, the target plans ${plan:-?}"; return; fi
    stack_ok "$name" "$work/$name.err" || return
    eval "adapter_${method}_blocks='index $size B, rows $rows B'"
    ok "$name" "$(wc -c <"$work/$name.out") bytes equal wisp run --lora (4 virtual positions, $adapter_n tokens);" \
        "index $size B = this target's plan, rows $rows B, stack $stack_used/$stack_reserved B"
    [ "$method" = prefix ] || return
    # one byte less than planned fails, naming the shortfall
    local small=$EMB/infer-$method-small-m4.elf
    adapter_build "$method" 1 "$small" || { bad "$name-exact" "build failed"; show "$work/$method-build.log"; return; }
    "$run" "$small" -n 2 >"$work/$name-small.out" 2>"$work/$name-small.err"; local rc=$?
    if [ $rc -eq 1 ] && grep -q "$plan" "$work/$name-small.err"; then
        ok "$name-exact" "an index block one byte smaller fails: $(grep -m1 adapter "$work/$name-small.err")"
    else bad "$name-exact" "one byte less: exit $rc"; show "$work/$name-small.err"; fi
}
if [ $arm = 1 ]; then adapter_check prefix; adapter_check prompt; fi

# ---- another family on the Cortex-M7: qwen3 ----------------------------------
qwen3_check() {
    local name=infer-qwen3-m7 fam=$EMB/qwen3 src=$WISP_SHARED/models/synthetic/syn-qwen3-f16.gguf
    if [ ! -f "$src" ]; then bad "$name" "missing $src"; return; fi
    if ! $MAKE_CMD EMB="$fam" EMB_MODEL_SRC="$src" EMB_MODEL_TYPE=q4_0 EMB_CTX=64 EMB_N_PREDICT=32 \
        "$fam/m7/infer-ctx64.elf" >"$work/qwen3-build.log" 2>&1; then
        bad "$name" "build failed"; show "$work/qwen3-build.log"; return
    fi
    cp "$fam/m7/infer-ctx64.elf" "$fam/$name.elf"
    WISP_KERNELS=scalar "$WISP" run -m "$fam/model/syn-qwen3-f16-q4_0.gguf" -p "Once upon a time" --temp 0 -n 32 --ctx 64 \
        -t 1 -q >"$work/qwen3-native.txt" 2>"$work/qwen3-native.err" || { bad "$name" "native wisp run failed"; return; }
    "$run" "$fam/$name.elf" >"$work/$name.out" 2>"$work/$name.err" || { bad "$name" "exit status $?"; show "$work/$name.err"; return; }
    if ! cmp -s "$work/$name.out" "$work/qwen3-native.txt"; then
        bad "$name" "text differs from the native engine"; diff "$work/qwen3-native.txt" "$work/$name.out" | head -n 8; return
    fi
    stack_ok "$name" "$work/$name.err" || return
    ok "$name" "$(wc -c <"$work/$name.out") bytes match the native engine (qwen3, Q4_0, ctx 64)"
}
[ $arm = 1 ] && qwen3_check

# ---- LoRA training on the Cortex-M7 -----------------------------------------
train_step_insns=
train_check() {
    local name=train-m7 out=$work/train-m7.out err=$work/train-m7.err adapter=$work/train-m7-adapter.gguf
    local native=$work/finetune start secs rc
    rm -f "$adapter"
    start=$EPOCHREALTIME
    "$run" --insns "$work/$name.insns" "$EMB/$name.elf" -o "$adapter" >"$out" 2>"$err"; rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    [ $rc -eq 0 ] || { bad "$name" "exit status $rc"; show "$err"; return; }
    local steps windows
    steps=$(grep -c '^step ' "$out")
    windows=$(sed -n 's/.* -> \([0-9]*\) windows.*/\1/p' "$err")
    [ "$steps" -eq "$EMB_TRAIN_STEPS" ] || { bad "$name" "printed $steps steps, expected $EMB_TRAIN_STEPS"; show "$out"; return; }
    [ -f "$adapter" ] || { bad "$name" "no adapter written through semihosting"; show "$err"; return; }
    # The windows come in a new shuffled order each epoch: compare whole epochs.
    local fall first last
    fall=$(awk -v w="${windows:-0}" -v n="$steps" '$1=="step" { l[$2]=$4 }
        END { if (w < 1 || n < 2*w) { print "none"; exit }
              for (i=1; i<=w; i++) { a+=l[i]; b+=l[n-w+i] }
              printf "%.4f %.4f", a/w, b/w }' "$out")
    read -r first last <<<"$fall"
    if [ "$first" = none ] || ! awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < 0.9*a)}'; then
        bad "$name-loss" "mean loss over an epoch of ${windows:-?} windows: first ${first:-?}, last ${last:-?} (needs a 10% fall)"
    else ok "$name-loss" "mean loss over an epoch of $windows windows falls from $first to $last"; fi
    # the native engine, same settings, the scalar kernels the M7's are bit-identical to
    rm -rf "$native"
    if ! WISP_KERNELS=scalar "$WISP" finetune -m "$EMB_MODEL" --data "$EMB_TRAIN_TEXT" -o "$native" --ctx "$EMB_TRAIN_SEQ" \
        --batch 1 --rank "$EMB_TRAIN_RANK" --targets "$EMB_TRAIN_TARGETS" --steps "$EMB_TRAIN_STEPS" --lr "$EMB_TRAIN_LR" \
        --schedule constant --warmup 0 --checkpointing --seed "$EMB_TRAIN_SEED" -t 1 -q >"$work/finetune.log" 2>&1; then
        bad "$name-native" "wisp finetune failed"; show "$work/finetune.log"; return
    fi
    if cmp -s <(awk '$1=="step"{print $2, $4}' "$out") <(awk -F, 'NR>1 && $1>0 {print $1, $2}' "$native/log.csv"); then
        ok "$name-losses" "all $steps step losses equal wisp finetune's"
    else bad "$name-losses" "step losses differ from wisp finetune's"; paste <(grep '^step' "$out") <(tail -n +2 "$native/log.csv") | head; fi
    if "$EMB/tools/lora_diff" "$adapter" "$native/adapter.gguf" >"$work/lora_diff.txt" 2>&1; then
        ok "$name-adapter" "$(tail -n1 "$work/lora_diff.txt" | cut -d: -f1-2) with wisp finetune's"
    else bad "$name-adapter" "differs from wisp finetune's"; show "$work/lora_diff.txt"; fi
    local base with
    base=$("$WISP" eval -m "$EMB_MODEL" -f "$EMB_TRAIN_TEXT" --ctx "$EMB_TRAIN_SEQ" -t 1 2>&1 | sed -n 's/^mean loss \([0-9.]*\).*/\1/p')
    with=$("$WISP" eval -m "$EMB_MODEL" --lora "$adapter" -f "$EMB_TRAIN_TEXT" --ctx "$EMB_TRAIN_SEQ" -t 1 2>&1 | sed -n 's/^mean loss \([0-9.]*\).*/\1/p')
    if [ -n "$base" ] && [ -n "$with" ] && awk -v a="$base" -v b="$with" 'BEGIN{exit !(b < a)}'; then
        ok "$name-load" "wisp eval --lora loads it: loss on the text $base -> $with"
    else bad "$name-load" "wisp eval with the adapter: base '${base:-?}', adapted '${with:-?}'"; fi
    local adapted plain
    adapted=$("$WISP" run -m "$EMB_MODEL" --lora "$adapter" -p "First Citizen" --temp 0 -n 24 -t 1 -q 2>&1) &&
        plain=$("$WISP" run -m "$EMB_MODEL" -p "First Citizen" --temp 0 -n 24 -t 1 -q 2>&1)
    if [ $? -eq 0 ] && [ "$adapted" != "$plain" ]; then ok "$name-run-lora" "wisp run --lora generates with it: ${adapted//$'\n'/ }"
    else bad "$name-run-lora" "wisp run --lora: '${adapted:-}' vs base '${plain:-}'"; fi
    train_step_insns=$(awk '$1=="mark"{m[$2]=$3; n=$2} END{ if (n >= 1) printf "%d", (m[n]-m[0])/n }' "$work/$name.insns")
    stack_ok "$name" "$err" || return
    ok "$name" "$steps steps in ${secs}s, stack $stack_used/$stack_reserved B, $train_step_insns insns/step"
}

if [ $arm = 1 ]; then
    train_check

    # deterministic instruction counts: a second run counts exactly the same
    "$run" --insns "$work/again.insns" "$EMB/infer-m4.elf" >/dev/null 2>&1
    if cmp -s <(grep total "$work/infer-m4.insns") <(grep total "$work/again.insns"); then
        ok "insns-deterministic" "$(grep total "$work/again.insns") instructions on both runs"
    else bad "insns-deterministic" "$(grep total "$work/infer-m4.insns") vs $(grep total "$work/again.insns")"; fi

    # the command line reaches the firmware, and its exit status reaches us
    "$run" "$EMB/infer-m4.elf" -n 3 >"$work/n3.out" 2>"$work/n3.err"; rc=$?
    if [ $rc -eq 0 ] && cmp -s "$work/n3.out" <(native 3); then ok "args" "-n 3 gives the native 3-token text"
    else bad "args" "exit $rc, text: $(head -c 200 "$work/n3.out")"; fi
    "$run" "$EMB/infer-m4.elf" -n many >"$work/bad.out" 2>"$work/bad.err"; rc=$?
    if [ $rc -eq 2 ] && grep -q -- "bad argument" "$work/bad.err"; then ok "exit-status" "a bad argument exits 2 through semihosting"
    else bad "exit-status" "expected exit 2 and a message, got $rc: $(cat "$work/bad.err")"; fi

    for b in m4 m7 m33; do
        name=kernel-check-$b
        "$run" "$EMB/$name.elf" >"$work/$name.out" 2>&1; rc=$?
        if [ $rc -eq 0 ] && grep -q ' 0 failed' "$work/$name.out"; then ok "$name" "$(sed -n 's/.*\]: \([0-9]* checks, 0 failed\).*/\1/p' "$work/$name.out") vs the scalar reference"
        else bad "$name" "exit $rc"; show "$work/$name.out"; fi
    done
fi

# A fault reports itself and ends the run with 99 (no hung emulator).
for b in "${boards[@]}"; do
    [ "$b" = m7 ] && continue # same startup code as m4
    if ! $MAKE_CMD "$EMB/fault-probe-$b.elf" >"$work/fault-$b.log" 2>&1; then bad "fault-probe-$b" "build failed"; show "$work/fault-$b.log"; continue; fi
    "$run" "$EMB/fault-probe-$b.elf" >"$work/fault-$b.out" 2>&1; rc=$?
    if [ $rc -eq 99 ] && grep -q "^FAULT: " "$work/fault-$b.out"; then ok "fault-probe-$b" "$(grep -m1 '^FAULT' "$work/fault-$b.out"), exit 99"
    else bad "fault-probe-$b" "expected a FAULT line and exit 99, got $rc"; show "$work/fault-$b.out"; fi
done

# The link itself enforces "no heap" and "fits the budget": both must fail.
for b in "${boards[@]}"; do
    [ "$b" = m7 ] && continue # same toolchain, script and libraries as m4
    if $MAKE_CMD "$EMB/$b/heap-probe.elf" >"$work/heap-$b.log" 2>&1; then
        bad "heap-probe-$b" "a firmware calling malloc linked"
    elif grep -Eq "undefined reference to .(_sbrk|__heap_start|__heap_end)|links a heap allocator" "$work/heap-$b.log"; then
        ok "heap-probe-$b" "malloc cannot link: $(grep -Eo "undefined reference to .(_sbrk|__heap_start|__heap_end).|links a heap allocator" "$work/heap-$b.log" | head -n1)"
    else bad "heap-probe-$b" "the link failed for another reason"; show "$work/heap-$b.log"; fi
    big=$((EMB_CTX * 4))
    if $MAKE_CMD EMB_CTX=$big "$EMB/$b/infer-ctx$big.elf" >"$work/budget-$b.log" 2>&1; then
        bad "budget-$b" "ctx $big linked into 256 KB of SRAM"
    elif grep -Eq "overflowed|exceed the SRAM budget" "$work/budget-$b.log"; then
        ok "budget-$b" "ctx $big fails to link: $(grep -Eo "region .RAM. overflowed by [0-9]+ bytes|exceed the SRAM budget" "$work/budget-$b.log" | head -n1)"
    else bad "budget-$b" "the link failed for another reason"; show "$work/budget-$b.log"; fi
done

# ---- the budget table ------------------------------------------------------
size_of() { # size_of TOOL ELF -> "flash ram" from Berkeley size (text+data, data+bss)
    "$1" "$2" | awk 'NR==2 { print $1 + $2, $2 + $3 }'
}
row() { # row FIRMWARE BOARD SIZE-TOOL SRAM-BUDGET-KIB ERR-FILE PREFILL PER-UNIT
    local flash ram
    read -r flash ram < <(size_of "$3" "$EMB/$1")
    printf '%-20s %-11s %9d %5.1f%% %9d %5.1f%% of %3d KiB %9s %14s %16s\n' "$1" "$2" "$flash" \
        "$(awk -v a="$flash" 'BEGIN{print 100*a/2097152}')" "$ram" "$(awk -v a="$ram" -v b="$4" 'BEGIN{print 100*a/(b*1024)}')" \
        "$4" "$(stat arena "$5")" "$6" "$7"
}
{
    echo
    echo "budget table ($(basename "$EMB_MODEL"); flash = text+data of 2048 KiB; SRAM = data+bss incl. stack and arena)"
    printf '%-20s %-11s %16s %25s %9s %14s %16s\n' firmware board "flash used" "SRAM used" arena "prefill insns" "instructions"
    for b in "${boards[@]}"; do
        case $b in m4) board=mps2-an386; tool=arm-none-eabi-size ;; m7) board=mps2-an500; tool=arm-none-eabi-size ;;
                    rv64) board=virt-rv64; tool=riscv64-unknown-elf-size ;; esac
        row "infer-$b.elf" $board $tool 256 "$work/infer-$b.err" "${prefill[$b]:-?}" "${per_token[$b]:-?}/token"
    done
    [ $arm = 1 ] && row classify-m4.elf mps2-an386 arm-none-eabi-size 256 "$work/classify-m4.err" "-" "-"
    for m in prefix prompt; do
        [ $arm = 1 ] && [ -f "$EMB/infer-$m-m4.elf" ] && row "infer-$m-m4.elf" mps2-an386 arm-none-eabi-size 256 "$work/infer-$m-m4.err" "-" "-"
    done
    [ $arm = 1 ] && row train-m7.elf mps2-an500 arm-none-eabi-size 512 "$work/train-m7.err" "-" "${train_step_insns:-?}/step"
    [ $arm = 1 ] && echo "(classify-m4: ctx ${EMB_CLASSIFY_CTX:-?}; its SRAM holds the arena plus trie ${classify_trie:-?} B, grammar ${classify_grammar:-?} B, guide ${classify_guide:-?} B)"
    [ $arm = 1 ] && echo "(infer-prefix-m4, infer-prompt-m4: 4 virtual positions; SRAM also holds the adapter's blocks: prefix ${adapter_prefix_blocks:-?}, prompt ${adapter_prompt_blocks:-?})"
    echo "(inference: ctx $EMB_CTX, $EMB_N_PREDICT tokens; training: $EMB_TRAIN_STEPS steps of $EMB_TRAIN_SEQ tokens, rank $EMB_TRAIN_RANK on $EMB_TRAIN_TARGETS)"
} | tee "$EMB/budget.txt"

finish
