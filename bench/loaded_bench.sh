#!/usr/bin/env bash
# `make bench-loaded` (issue 21, point 6): decode speed while the machine
# does other work, as users' machines always do. Two background loads, each
# at the lowest priority (nice 19): two busy loops (CPU), then a loop
# copying 512 MiB (memory bandwidth). Under each, 1- and 2-thread decode of
# the TinyLlama-1.1B-shaped Q4_0 model by wisp and by the natively built
# llama.cpp (llama-bench), alternately; the target: 2 threads decode at
# least as fast as 1 on every row.
# Environment: WISP, COPY_LOOP (bench/copy_loop.c's binary), OUT, SHARED,
# LLAMACPP_SRC, LLAMACPP_DIR (as run_bench.sh), REPS (default 5), GEN
# (default 64), MODEL (default tinyllama-1.1b-q4_0).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/bench_models.sh"
: "${WISP:?}" "${OUT:?}" "${COPY_LOOP:?}"
REPS=${REPS:-5}
GEN=${GEN:-64}
SHARED=${SHARED:-}
MODEL=${MODEL:-tinyllama-1.1b-q4_0}
command -v node >/dev/null || { echo "make bench-loaded needs node"; exit 1; }
NATIVE=$(TARBALL=${LLAMACPP_SRC:-$SHARED/peers/llama.cpp-c392e509.tar.gz} DEST=${LLAMACPP_DIR:-$OUT/llama.cpp} \
    "$here/build_llamacpp.sh")
case $? in
    0) ;;
    2) NATIVE= ;; # the script said why; wisp alone is measured
    *) exit 1 ;;
esac
make_model "$MODEL"
f=$OUT/models/$MODEL.gguf
drop_cached "$f"

load_pids=()
stop_load() {
    for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${load_pids[@]}"; do wait "$p" 2>/dev/null; done
    load_pids=()
}
trap stop_load EXIT

# decode tok/s of ENGINE (wisp|native) with T threads
decode() {
    local engine=$1 t=$2
    if [ "$engine" = wisp ]; then
        "$WISP" bench -m "$f" -t "$t" -p 0 -n "$GEN" -r "$REPS" --mem-test 0 --json 2>"$OUT/wisp.err" |
            node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).decode_tok_s.toFixed(1))'
    else
        node "$here/llamacpp_native_bench.mjs" --bin "$NATIVE" -m "$f" -t "$t" -p 0 -n "$GEN" -r "$REPS" 2>"$OUT/native.err" |
            node -e 'console.log(JSON.parse(require("fs").readFileSync(0, "utf8")).decode_tok_s.toFixed(1))'
    fi
}

engines="wisp${NATIVE:+ native}"
missed=()
printf '%-28s %-7s %8s %8s %s\n' "background load" engine "1 thr" "2 thr" "2 >= 1"
for phase in busy copy; do
    if [ "$phase" = busy ]; then
        for _ in 1 2; do nice -n 19 bash -c 'while :; do :; done' & load_pids+=($!); done
        label="two busy loops"
    else
        nice -n 19 "$COPY_LOOP" $((512 << 20)) & load_pids+=($!)
        label="copying 512 MiB"
    fi
    sleep 1
    for e in $engines; do
        one=$(decode "$e" 1) && two=$(decode "$e" 2) || { echo "$e failed: $(cat "$OUT/$e.err")"; exit 1; }
        ok=$(awk -v a="$one" -v b="$two" 'BEGIN { print (b >= a) ? "yes" : "NO" }')
        [ "$ok" = yes ] || missed+=("$e under $label: 2 threads $two tok/s < 1 thread $one tok/s")
        printf '%-28s %-7s %8s %8s %s\n' "$label (load $(cut -d' ' -f1 /proc/loadavg))" "$e" "$one" "$two" "$ok"
    done
    stop_load
done
echo "decode tok/s of $MODEL ($GEN tokens, median of $REPS); native: llama.cpp built here (llama-bench)"
[ -n "$NATIVE" ] || echo "native llama.cpp: not measured (see above)"
if [ ${#missed[@]} -gt 0 ]; then printf 'target missed: %s\n' "${missed[@]}"; else echo "target met: 2-thread decode >= 1-thread decode on every row"; fi
