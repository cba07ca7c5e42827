#!/usr/bin/env bash
# run.sh FUZZ_DIR SECONDS NAME...: seed each harness's corpus from ../shared
# (at run time: nothing is committed) plus hand-made cases, run it for
# SECONDS, and print executions and findings. Exits 1 if any harness crashed.
set -u
dir=$1; secs=$2; shift 2
S=${WISP_SHARED:-../shared}
status=0; total=0
seed() { # seed NAME FILE...: link existing reference files into the corpus
    local c="$dir/corpus/$1"; shift
    for f in "$@"; do [ -f "$f" ] && ln -sf "$(realpath "$f")" "$c/seed-$(basename "$f")"; done
}
for name in "$@"; do
    c="$dir/corpus/$name"
    mkdir -p "$c" "$dir/crashes/$name"
    opts=()
    case $name in
        fuzz_gguf)
            seed "$name" "$S/models/stories260K.gguf" "$S"/models/tokenizers/llamacpp-vocab/ggml-vocab-{llama-spm,bert-bge}.gguf
            printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$c/min-empty"
            opts+=(-max_len=1300000 -rss_limit_mb=4096) ;;
        fuzz_json)
            seed "$name" "$S/golden/adapters/stories260K-r4/peft/adapter_config.json" "$S/models/tokenizers/smollm2/config.json"
            printf '{"a":[1,2.5e-3,true,null,"x\\u00e9"],"b":{}}' > "$c/min-doc"
            opts+=(-max_len=65536 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_tokenizer)
            export WISP_FUZZ_VOCABS="$S/models/stories260K.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-bert-bge.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-deepseek-coder.gguf"
            for v in "$S"/models/tokenizers/llamacpp-vocab/*.inp; do [ -f "$v" ] && seed "$name" "$v"; done
            opts+=(-max_len=4096) ;;
        fuzz_llama2c)
            if [ -f "$S/models/stories260K.bin" ]; then
                size=$(stat -c %s "$S/models/stories260K.bin")
                { printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((size & 255)) $(((size >> 8) & 255)) $(((size >> 16) & 255)) $(((size >> 24) & 255)))"
                  cat "$S/models/stories260K.bin" "$S/models/tok512.bin"; } > "$c/seed-stories260K"
            fi
            opts+=(-max_len=1100000) ;;
    esac
    [ -n "$(ls -A "$c")" ] || echo "note: $name has no reference seeds (../shared missing?); starting from hand-made cases only"
    log="$dir/$name.log"
    (cd "$dir/crashes/$name" && "$OLDPWD/$dir/$name" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 \
        -timeout=20 "$OLDPWD/$c" ) > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    total=$((total + ${execs:-0}))
    if [ $rc -ne 0 ]; then
        status=1
        echo "FAIL  $name: exit $rc after ${execs:-?} executions; reproducer in $dir/crashes/$name"
        grep -m5 -E "ERROR|SUMMARY|runtime error" "$log" | sed 's/^/      | /'
    else
        echo "PASS  $name: ${execs:-?} executions in ${secs}s, no crash, corpus $(ls "$c" | wc -l) inputs"
    fi
done
echo "fuzz: $total executions in total"
exit $status
