# Crash safety of `wisp finetune`. Runs are killed with SIGKILL
#   - at seeded random moments (CRASH_KILLS of them, default 6; every other
#     one is killed a second time while it resumes), and
#   - deterministically, just before the N-th fwrite, fsync or rename the
#     process makes (tests/tools/preload/kill_at.c, LD_PRELOADed), N spread
#     over the whole run: a temporary partly written, written but not synced,
#     complete but not yet renamed into place;
# then resumed with --resume (or started again when they died before writing
# their settings). Each must end with an adapter byte-identical to an
# uninterrupted run's, the same PEFT copy and the same log. At every kill
# point, every output file that exists must be complete and valid:
# config.json and checkpoint.bin are read by the resume itself; adapter.gguf
# and a PEFT copy must load; log.csv must have whole rows and loss.svg its
# closing tag. Temporaries a killed writer left are removed when the run
# goes on.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf data/tinyshakespeare.txt
model=$SHARED/models/stories260K.gguf
D=$WORK/crash
rm -rf "$D"
mkdir -p "$D"
head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt"
args=(-m "$model" --data "$D/train.txt" --val-split 0.1 --eval-every 6 --ctx 32 --batch 2 --rank 4 --steps 24
      --checkpoint-every 2 --lora-dropout 0.1 --seed 11 -t 1 -q)
now() { date +%s.%N; }

start=$(now)
"$WISP" finetune "${args[@]}" -o "$D/ref" 2>/dev/null || fail "the uninterrupted run failed"
ref_secs=$(awk -v a="$start" -v b="$(now)" 'BEGIN{print b - a}')
ok

# check_outputs DIR: whatever exists is whole
check_outputs() {
    local dir=$1
    if [ -e "$dir/adapter.gguf" ]; then
        "$WISP" run -m "$model" --lora "$dir/adapter.gguf" -p "ROMEO:" -n 1 --temp 0 -q > /dev/null 2>"$D/check.err" ||
            fail "$dir/adapter.gguf does not load after the kill: $(cat "$D/check.err")"
    fi
    if [ -e "$dir/peft/adapter_config.json" ]; then
        "$WISP" run -m "$model" --lora "$dir/peft" -p "ROMEO:" -n 1 --temp 0 -q > /dev/null 2>"$D/check.err" ||
            fail "$dir/peft does not load after the kill: $(cat "$D/check.err")"
    fi
    if [ -e "$dir/log.csv" ]; then
        awk -F, 'NF != 6 { exit 1 }' "$dir/log.csv" || fail "$dir/log.csv has a partial row"
        [ "$(head -1 "$dir/log.csv")" = "step,loss,lr,grad_norm,tokens_per_s,val_loss" ] || fail "$dir/log.csv header"
    fi
    if [ -e "$dir/loss.svg" ]; then
        tail -c 16 "$dir/loss.svg" | grep -q '</svg>' || fail "$dir/loss.svg is cut short"
    fi
    if [ -e "$dir/checkpoint.bin" ]; then
        "$TOOLS/file_boundaries" checkpoint "$dir/checkpoint.bin" > /dev/null || fail "$dir/checkpoint.bin is damaged"
    fi
    ok
}

# run_killed DIR DELAY [RESUME]: start (or resume) the run, SIGKILL it after DELAY seconds
run_killed() {
    local dir=$1 delay=$2 pid
    if [ "${3:-}" = resume ]; then "$WISP" finetune --resume "$dir" -t 1 -q 2>/dev/null &
    else "$WISP" finetune "${args[@]}" -o "$dir" 2>/dev/null & fi
    pid=$!
    sleep "$delay"
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
}

has_temps() { find "$1" -name '*.tmp-*' | grep -q .; }

# finish DIR WHAT: resume (or restart) the killed run and compare it with the reference
finish() {
    local dir=$1 what=$2
    has_temps "$dir" && left_temps=$((left_temps + 1))
    if [ -e "$dir/config.json" ]; then
        "$WISP" finetune --resume "$dir" -t 1 -q 2>"$D/resume.err" || fail "resume after $what: $(cat "$D/resume.err")"
    else # killed before the run wrote its settings: nothing to resume, so the same command again
        "$WISP" finetune "${args[@]}" -o "$dir" 2>"$D/resume.err" || fail "restart after $what: $(cat "$D/resume.err")"
    fi
    cmp -s "$D/ref/adapter.gguf" "$dir/adapter.gguf" || fail "$what: the adapter differs from the uninterrupted run's"
    cmp -s "$D/ref/peft/adapter_model.safetensors" "$dir/peft/adapter_model.safetensors" || fail "$what: the PEFT copy differs"
    diff -q <(cut -d, -f1-4,6 "$D/ref/log.csv") <(cut -d, -f1-4,6 "$dir/log.csv") > /dev/null ||
        fail "$what: the log differs from the uninterrupted run's"
    ! has_temps "$dir" || fail "$what: temporaries were left behind: $(find "$dir" -name '*.tmp-*')"
    runs=$((runs + 1))
    ok
}
runs=0 left_temps=0

# ---- at seeded random moments -------------------------------------------------------
kills=${CRASH_KILLS:-6}
for seed in $(seq 1 "$kills"); do
    dir=$D/timed-$seed
    # a seeded point of the reference run's duration, spread from 2% to 98% of it
    delay=$(awk -v s="$seed" -v n="$kills" -v t="$ref_secs" 'BEGIN{print t * (0.02 + 0.96 * ((s * 0.618034) % 1))}')
    run_killed "$dir" "$delay"
    check_outputs "$dir"
    again=once
    if [ $((seed % 2)) = 0 ] && [ -e "$dir/config.json" ]; then # killed again while resuming
        run_killed "$dir" "$(awk -v d="$delay" 'BEGIN{print d / 2}')" resume
        check_outputs "$dir"
        again="and again while resuming"
    fi
    finish "$dir" "a kill after ${delay}s"
    printf 'killed after %.2fs (%s): every file whole, the resumed run identical\n' "$delay" "$again"
done

# ---- just before the N-th write, sync or rename ---------------------------------------
if [ -f "$TOOLS/kill_at.so" ] && head -c 4 "$WISP" | grep -q ELF; then
    asan=$(asan_runtime)
    preload="${asan:+$asan }$TOOLS/kill_at.so" # ASan insists on coming first
    rm -rf "$D/count"
    WISP_KILL_COUNT=$D/counts LD_PRELOAD=$preload "$WISP" finetune "${args[@]}" -o "$D/count" 2>/dev/null ||
        fail "the counting run failed"
    read -r _ n_fwrite _ n_fsync _ n_rename < "$D/counts"
    for call in fwrite fsync rename; do
        total=$(eval echo "\$n_$call")
        for k in 1 2 3 4; do
            n=$(( 1 + (total - 1) * (2 * k - 1) / 8 + (k == 1) )) # spread over the run
            dir=$D/at-$call-$n
            { WISP_KILL_AT=$call:$n LD_PRELOAD=$preload "$WISP" finetune "${args[@]}" -o "$dir" 2>/dev/null; } 2>/dev/null
            rc=$? # (the braces keep bash's "Killed" notice out of the log)
            [ $rc -eq 137 ] || fail "the run was not killed before $call $n of $total (exit $rc)"
            check_outputs "$dir"
            finish "$dir" "a kill before $call $n of $total"
            echo "killed just before $call $n of $total: every file whole, the resumed run identical"
        done
    done
else
    echo "note: no native $TOOLS/kill_at.so for this wisp: the kills at exact write points are left out"
fi
echo "$runs killed runs (a ${ref_secs}s run; $left_temps left a temporary behind, removed on resume): every file whole, every resume byte-identical"
done_ok
