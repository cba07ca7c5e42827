# The truncation/corruption matrix: every model, vocabulary and adapter file
# in ../shared, and every kind of file wisp writes (a converted, a quantized
# and a merged GGUF, and finetune's adapter.gguf, PEFT folder, checkpoint.bin
# and config.json), cut short at the boundaries of its structure (header
# fields, each metadata pair, each tensor info, each tensor's data, each
# JSON token: found by tests/tools/file_boundaries, cut at, one before and
# one after each), cut at seeded random lengths, and with seeded random bits
# flipped (in the header, and anywhere). Each case runs the ASan+UBSan CLI on
# the damaged file as a user would meet it (run, tokenize, --lora,
# convert-llama2c, finetune --resume) and must end cleanly:
#   - a cut before the file's last meaningful byte: exit 1 with ONE line on
#     stderr that names the file;
#   - a flip, or a cut that only drops trailing padding: exit 0, or exit 1
#     with one such line (a flipped weight bit is valid data);
#   - never a crash, a sanitizer report or a hang (60 s timeout).
# The default run samples (about 30 cuts and 6 flips per file); MATRIX_FULL=1
# (make test-matrix-full) runs every boundary cut and more random cases;
# MATRIX_CASES=FILE runs only the case lines FILE lists (a failure's file in
# matrix/fail/ is named IDX-MUTATION-ARG after its line "IDX EXPECT MUTATION ARG").
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/stories260K.bin models/tok512.bin golden/adapters/stories260K-r4/adapter.gguf \
    data/tinyshakespeare.txt
W=${WISP_ASAN:-$WISP}
FULL=${MATRIX_FULL:-0}
JOBS=${MATRIX_JOBS:-2}
if [ "$FULL" = 1 ]; then SAMPLE=0 RANDOM_CUTS=16 FLIPS=24; else SAMPLE=${MATRIX_SAMPLE:-30} RANDOM_CUTS=2 FLIPS=6; fi
base=$SHARED/models/stories260K.gguf
M=$WORK/matrix
rm -rf "$M"
mkdir -p "$M/files" "$M/cases" "$M/fail"

# ---- the files wisp writes (made with the plain build: faster, same bytes) ----
made=$M/files
"$WISP" convert-llama2c "$SHARED/models/stories260K.bin" "$SHARED/models/tok512.bin" -o "$made/converted.gguf" 2>/dev/null ||
    fail "convert-llama2c"
"$WISP" quantize "$base" "$made/quantized-q8_0.gguf" q8_0 2>/dev/null || fail "quantize"
"$WISP" merge -m "$base" --lora "$SHARED/golden/adapters/stories260K-r4/adapter.gguf" -o "$made/merged.gguf" 2>/dev/null ||
    fail "merge"
head -c 3000 "$SHARED/data/tinyshakespeare.txt" > "$made/train.txt"
# a finetune stopped at step 2 of 3 with a checkpoint: --resume finishes it
"$WISP" finetune -m "$base" --data "$made/train.txt" --ctx 16 --batch 2 --rank 2 --steps 3 --checkpoint-every 1 \
    --stop-after 2 --seed 3 -q -t 1 -o "$made/ft" 2>/dev/null || fail "finetune"
cp -r "$made/ft" "$made/ft-done" # finished: its PEFT copy is written at the end
"$WISP" finetune --resume "$made/ft-done" -q -t 1 2>/dev/null || fail "finetune --resume"
for f in ft/adapter.gguf ft/checkpoint.bin ft/config.json ft-done/peft/adapter_config.json \
         ft-done/peft/adapter_model.safetensors; do
    [ -s "$made/$f" ] || fail "finetune wrote no $f"
done
ok

# ---- the file list: KIND FILE RUNNER [ARG] ------------------------------------
# RUNNER says how the damaged copy is used; see run_case below.
list=$M/files.txt
: > "$list"
add() { [ -f "$2" ] && echo "$1 $2 $3 ${4:-}" >> "$list"; }
for f in "$SHARED"/models/*.gguf "$SHARED"/models/synthetic/*.gguf "$made"/converted.gguf "$made"/quantized-q8_0.gguf \
         "$made"/merged.gguf; do
    add gguf "$f" model
done
for f in "$SHARED"/models/tokenizers/llamacpp-vocab/*.gguf; do add gguf "$f" vocab; done
add llama2c "$SHARED/models/stories260K.bin" l2c-model "$SHARED/models/tok512.bin"
add llama2c-tok "$SHARED/models/tok512.bin" l2c-tok "$SHARED/models/stories260K.bin"
golden=$SHARED/golden/adapters/stories260K-r4
add gguf "$golden/adapter.gguf" lora
add gguf "$made/ft/adapter.gguf" lora
for peft in "$golden/peft" "$made/ft-done/peft"; do
    add json "$peft/adapter_config.json" peft "$peft"
    add safetensors "$peft/adapter_model.safetensors" peft "$peft"
done
add checkpoint "$made/ft/checkpoint.bin" resume "$made/ft"
add json "$made/ft/config.json" resume "$made/ft"

# ---- the cases: FILE_INDEX EXPECT(fail|any) MUTATION ARG ------------------------
cases=$M/cases.txt
: > "$cases"
n_files=0
while read -r kind file runner arg; do
    info=$M/files/boundaries-$n_files.txt
    "$TOOLS/file_boundaries" "$kind" "$file" > "$info" || fail "file_boundaries $kind $file"
    size=$(awk '$1=="size"{print $2}' "$info")
    valid=$(awk '$1=="valid_from"{print $2}' "$info")
    # every cut at, before and after a boundary, below the full size
    awk -v size="$size" '$1 ~ /^[0-9]+$/ { for (d = -1; d <= 1; d++) if ($1 + d >= 0 && $1 + d < size) print $1 + d }' "$info" |
        sort -n -u > "$M/cuts"
    total=$(wc -l < "$M/cuts")
    if [ "$SAMPLE" -gt 0 ] && [ "$total" -gt "$SAMPLE" ]; then # evenly spread, plus the first and last
        awk -v n="$total" -v k="$SAMPLE" 'NR == 1 || NR == n || int((NR - 1) * k / n) != int((NR - 2) * k / n)' "$M/cuts" > "$M/cuts.s"
        mv "$M/cuts.s" "$M/cuts"
    fi
    for r in $(seq 1 "$RANDOM_CUTS"); do echo $(( (r * 2654435761 + n_files * 40503) % size )); done >> "$M/cuts"
    sort -n -u "$M/cuts" | while read -r cut; do
        if [ "$cut" -lt "$valid" ]; then echo "$n_files fail truncate $cut"; else echo "$n_files any truncate $cut"; fi
    done >> "$cases"
    for s in $(seq 1 "$FLIPS"); do
        if [ $((s % 2)) = 1 ]; then echo "$n_files any flip-header $((s * 7919 + n_files))"; else echo "$n_files any flip $((s * 7919 + n_files))"; fi
    done >> "$cases"
    n_files=$((n_files + 1))
done < "$list"
# MATRIX_CASES=FILE: only these lines of the case list (e.g. an earlier run's failures)
if [ -n "${MATRIX_CASES:-}" ]; then grep -x -F -f "$MATRIX_CASES" "$cases" > "$cases.only"; mv "$cases.only" "$cases"; fi
n_cases=$(wc -l < "$cases")

# ---- running one case ---------------------------------------------------------
run_case() { # FILE_INDEX EXPECT MUTATION ARG (environment: M W WORK TOOLS SHARED base)
    local idx=$1 expect=$2 mut=$3 arg=$4
    local kind file runner extra
    read -r kind file runner extra < <(sed -n "$((idx + 1))p" "$M/files.txt")
    local dir=$M/cases/$idx-$mut-$arg
    mkdir -p "$dir"
    local damaged=$dir/$(basename "$file") named cmd
    case $runner in
        peft|resume) # the damaged file inside a copy of its folder; the user names the folder
            cp -r "$extra/." "$dir/"
            chmod -R u+w "$dir"
            damaged=$dir/${file#"$extra"/}
            named=$dir ;;
        *) named=$damaged ;;
    esac
    case $mut in
        truncate) head -c "$arg" "$file" > "$damaged.new" ;;
        flip) "$TOOLS/gguf_mutate" "$file" "$damaged.new" flip "$arg" 3 ;;
        flip-header) # bits in the header only (for a GGUF: before the data section)
            if [ "$kind" = gguf ]; then "$TOOLS/gguf_mutate" "$file" "$damaged.new" flip-header "$arg" 2
            else
                local he
                he=$(awk '$1=="header_end"{print $2}' "$M/files/boundaries-$idx.txt")
                head -c "$he" "$file" > "$dir/head"
                "$TOOLS/gguf_mutate" "$dir/head" "$dir/head.new" flip "$arg" 2
                { cat "$dir/head.new"; tail -c +$((he + 1)) "$file"; } > "$damaged.new"
            fi ;;
    esac
    mv "$damaged.new" "$damaged"
    local p=(-p "Once upon a time" -c 16 -n 2 --temp 0 -q -t 1)
    case $runner in
        model) cmd=("$W" run -m "$damaged" "${p[@]}") ;;
        vocab) cmd=("$W" tokenize -m "$damaged" "Hello world, 123!") ;;
        lora) cmd=("$W" run -m "$base" --lora "$damaged" "${p[@]}") ;;
        peft) cmd=("$W" run -m "$base" --lora "$dir" "${p[@]}") ;;
        l2c-model) cmd=("$W" convert-llama2c "$damaged" "$extra" -o "$dir/out.gguf") ;;
        l2c-tok) cmd=("$W" convert-llama2c "$extra" "$damaged" -o "$dir/out.gguf") ;;
        resume) cmd=("$W" finetune --resume "$dir" -q -t 1) ;;
    esac
    local out rc verdict=""
    out=$(ASAN_OPTIONS=abort_on_error=0:exitcode=99:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:exitcode=98 \
          timeout 60 "${cmd[@]}" 2>&1 >/dev/null); rc=$?
    local lines
    lines=$(printf '%s\n' "$out" | grep -c .)
    if [ $rc -eq 124 ]; then verdict="hang (60 s)"
    elif printf '%s' "$out" | grep -q -E "Sanitizer|runtime error"; then verdict="sanitizer report (exit $rc)"
    elif [ $rc -eq 0 ]; then [ "$expect" = any ] || verdict="accepted a damaged file"
    elif [ $rc -ne 1 ]; then verdict="exit $rc"
    elif [ "$lines" -ne 1 ]; then verdict="$lines lines of error"
    else case $out in *"$named"*) ;; *) verdict="the message does not name $named" ;; esac
    fi
    if [ -n "$verdict" ]; then
        printf '%s %s %s %s: %s :: %s\n    reproduce: %s\n' "$(basename "$file")" "$runner" "$mut" "$arg" "$verdict" \
            "$(printf '%s' "$out" | head -c 600)" "${cmd[*]}" > "$M/fail/$idx-$mut-$arg"
    else
        rm -rf "$dir" # keep only what failed
    fi
}
export -f run_case
export M W WORK TOOLS SHARED base

start=$EPOCHREALTIME
xargs -P "$JOBS" -L 1 bash -c 'run_case "$@"' _ < "$cases"
secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
n_fail=$(ls "$M/fail" | wc -l)
if [ "$n_fail" -gt 0 ]; then
    cat "$M"/fail/* | head -n 60
    fail "$n_fail of $n_cases matrix cases failed (files $n_files)"
fi
checks=$((checks + n_cases))
echo "matrix: $n_files files x $n_cases cases ($(grep -c truncate "$cases") cuts, $(grep -c flip "$cases") flips) in ${secs}s, all clean"
done_ok
