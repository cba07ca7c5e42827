# Numerical faults end to end (the engine-level checks are in
# tests/unit/test_numeric.c). What a user meets:
#   - a model with a NaN or Inf weight: run, logits and perplexity stop with
#     one line naming the model file and where the non-finite value appeared;
#     nothing is generated from NaN logits;
#   - fine-tuning on it: each step whose gradient is not finite is skipped and
#     reported; when every step is (the weight sits on every path), the run
#     stops after a bounded number of tries and writes no adapter;
#   - a NaN that only some batches meet (one token's embedding): those steps are
#     skipped, the run finishes, and the adapter it writes is finite (it loads:
#     the readers refuse NaN) and works;
#   - a checkpoint holding a NaN is refused on --resume.
# Runs under the ASan+UBSan CLI when it is built.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf data/tinyshakespeare.txt
W=${WISP_ASAN:-$WISP}
export ASAN_OPTIONS=abort_on_error=0:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
model=$SHARED/models/stories260K.gguf
D=$WORK/numeric
rm -rf "$D"
mkdir -p "$D"

# one_line_error OUT NEEDLE...: exactly one line on stderr, containing each NEEDLE
one_line_error() {
    local out=$1; shift
    [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ] || fail "want one line of error, got: $out"
    for n in "$@"; do case $out in *"$n"*) ;; *) fail "the error should mention '$n': $out" ;; esac; done
    ok
}

# ---- inference -----------------------------------------------------------------
"$TOOLS/gguf_mutate" "$model" "$D/nan-q.gguf" nan blk.1.attn_q.weight 100
"$TOOLS/gguf_mutate" "$SHARED/models/synthetic/syn-llama-gqa-q4_k_m.gguf" "$D/inf-k.gguf" inf blk.1.ffn_down.weight 7
for f in "$D/nan-q.gguf" "$D/inf-k.gguf"; do
    out=$(timeout 60 "$W" run -m "$f" -p "Once upon a time" -n 8 --temp 0 -q 2>&1 >"$D/run.out"); rc=$?
    [ $rc -eq 1 ] || fail "$f: run exited $rc: $out"
    one_line_error "$out" "$f" "activation reached"
    [ "$(cat "$D/run.out")" = "Once upon a time" ] || fail "$f: text was generated from non-finite logits: $(cat "$D/run.out")"
    out=$(timeout 60 "$W" logits -m "$f" -p "Hello" --json 2>&1 >/dev/null); rc=$?
    [ $rc -eq 1 ] || fail "$f: logits exited $rc: $out"
    one_line_error "$out" "$f" "NaN"
done
head -c 3000 "$SHARED/data/tinyshakespeare.txt" > "$D/text.txt"
out=$(timeout 60 "$W" perplexity -m "$D/nan-q.gguf" -f "$D/text.txt" --ctx 64 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "perplexity exited $rc: $out"
case $out in *NaN*) ;; *) fail "perplexity should report the NaN: $out" ;; esac
ok

# ---- fine-tuning on a model that is NaN everywhere -------------------------------
common=(--ctx 16 --batch 1 --rank 2 --steps 40 --seed 1 -t 1)
out=$(timeout 300 "$W" finetune -m "$D/nan-q.gguf" --data "$D/text.txt" "${common[@]}" -o "$D/ft-nan" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "finetune on a NaN model exited $rc: $out"
case $out in *"steps in a row had a NaN or infinite gradient"*"$D/nan-q.gguf"*) ;; *) fail "no clear stop: $out" ;; esac
[ "$(printf '%s\n' "$out" | grep -c '^step .* skipped: the gradient is not finite')" -ge 20 ] || fail "skipped steps not reported: $out"
[ ! -e "$D/ft-nan/adapter.gguf" ] || fail "an adapter was written from a NaN run"
ok
# the same with F16 activations (loss scaling): no endless halving, the same clean stop
out=$(timeout 300 "$W" finetune -m "$D/nan-q.gguf" --data "$D/text.txt" "${common[@]}" --act-dtype f16 -q -o "$D/ft-nan16" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "finetune --act-dtype f16 on a NaN model exited $rc: $out"
case $out in *"steps in a row had a NaN or infinite gradient"*) ;; *) fail "no clear stop with f16: $out" ;; esac
[ ! -e "$D/ft-nan16/adapter.gguf" ] || fail "an adapter was written from a NaN run (f16)"
ok

# ---- a NaN only some batches meet ------------------------------------------------
# One JSONL record holds "X"; its token's embedding row is made NaN. Every step
# that draws that record is skipped; the others train.
x=$("$WISP" tokenize -m "$model" --ids "X" | awk '{print $NF}')
printf '%s\n' '{"prompt": "The cat sat on the mat.", "completion": " The dog ran."}' \
    '{"prompt": "Tom had a red ball.", "completion": " He was happy."}' \
    '{"prompt": "The sun was hot.", "completion": " Lily went to the park."}' \
    '{"prompt": "Mom made a cake.", "completion": " It was big and sweet."}' \
    '{"prompt": "X marks the spot.", "completion": " X is here."}' > "$D/records.jsonl"
for rec in 1 2 3 4; do
    ids=$("$WISP" tokenize -m "$model" --bos --ids "$(sed -n "${rec}p" "$D/records.jsonl")")
    case " $ids " in *" $x "*) fail "token $x of 'X' also occurs in record $rec" ;; esac
done
dim=$("$WISP" info -m "$model" | awk '$1=="embedding"{print $2}')
"$TOOLS/gguf_mutate" "$model" "$D/nan-x.gguf" nan token_embd.weight $((x * dim + 5))
out=$(timeout 300 "$W" finetune -m "$D/nan-x.gguf" --data "$D/records.jsonl" --ctx 24 --batch 1 --rank 2 --steps 8 \
      --val-split 0 --seed 2 -t 1 -q -o "$D/ft-x" 2>&1); rc=$?
[ $rc -eq 0 ] || fail "finetune with one poisoned record exited $rc: $out"
n_skipped=$(printf '%s\n' "$out" | grep -c 'skipped: the gradient is not finite')
[ "$n_skipped" -ge 1 ] || fail "the poisoned record's steps were not reported: $out"
[ "$(tail -n +2 "$D/ft-x/log.csv" | grep -c '^[1-9]')" -eq 8 ] || fail "8 counted steps expected in log.csv"
"$W" run -m "$model" --lora "$D/ft-x/adapter.gguf" -p "The cat" -n 4 --temp 0 -q > /dev/null ||
    fail "the adapter of a run with skipped steps does not load (not finite?)"
"$W" run -m "$model" --lora "$D/ft-x/peft" -p "The cat" -n 4 --temp 0 -q > /dev/null || fail "its PEFT copy does not load"
echo "one poisoned record of five: $n_skipped steps skipped, 8 counted, the adapter is finite and loads"
ok

# ---- a checkpoint holding a NaN ------------------------------------------------------
"$WISP" finetune -m "$model" --data "$D/text.txt" --ctx 16 --batch 1 --rank 2 --steps 3 --checkpoint-every 1 \
    --stop-after 1 --seed 4 -q -t 1 -o "$D/ft-ck" 2>/dev/null || fail "finetune --stop-after"
# the first float of the adapter: 36 bytes of run header, then the engine's 104-byte state header (version 2)
printf '\x00\x00\xc0\x7f' | dd of="$D/ft-ck/checkpoint.bin" bs=1 seek=$((36 + 104)) conv=notrunc status=none
out=$(timeout 60 "$W" finetune --resume "$D/ft-ck" -q -t 1 2>&1); rc=$?
[ $rc -eq 1 ] || fail "resume from a NaN checkpoint exited $rc: $out"
one_line_error "$out" "$D/ft-ck/checkpoint.bin" "NaN"
done_ok
