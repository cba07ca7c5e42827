#!/usr/bin/env bash
# `make bench`: wisp against llama.cpp on the same files, threads and token
# ids, on this machine, in one run. Two peers:
#   - native: llama.cpp built here from ../shared/peers' source snapshot
#     (Release, GGML_NATIVE; bench/build_llamacpp.sh, once, under build/),
#     measured with its llama-bench: the fair peer (issue 21);
#   - node: node-llama-cpp's prebuilt llama.cpp (npm, installed once into
#     $OUT/node-llama-cpp), newer than the snapshot, so it also knows the
#     families the snapshot lacks (qwen3, gemma3).
# Steps: makes the models with `wisp make-model` into $OUT/models, once;
# drops each model file from the page cache (so that it comes back in 2 MiB
# pages), then runs `wisp bench` and each peer, alternately, with each
# thread count, a 128-token prompt and GEN decoded tokens, REPS repetitions
# each (medians are reported); prints the table (bench/report.mjs) with the
# ratios, the read-only roofline and the targets, and the thread pool's
# per-job cost (pool_overhead).
# Environment: WISP (binary), POOL (pool_overhead binary), OUT (work folder),
# SHARED (reference folder: tokenizers, the peer snapshot), LLAMACPP_SRC
# (the snapshot; default $SHARED/peers/llama.cpp-c392e509.tar.gz),
# LLAMACPP_DIR (where to build it; default $OUT/llama.cpp), REPS (default 5), GEN (default 64),
# THREADS (default "1 2"), PEERS (default "native node"), PEER_TIMEOUT
# (seconds a peer may take per row; default 0, no limit), RESULTS (default
# $OUT/results.jsonl), MODELS: model
# names (SHAPE-TYPE) or the sets small (SmolLM2-135M Q8_0/Q4_0/Q4_K_M),
# 1b (TinyLlama-1.1B Q4_0 and the Llama-3.2-1B and Qwen3-0.6B shapes at
# Q4_0/Q8_0/Q4_K_M) and all (the default: both).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/bench_models.sh"
: "${WISP:?}" "${OUT:?}"
REPS=${REPS:-5}
GEN=${GEN:-64}
THREADS=${THREADS:-"1 2"}
SHARED=${SHARED:-}
mkdir -p "$OUT/models"
command -v node >/dev/null && command -v npm >/dev/null || { echo "make bench needs node and npm (apt-get install nodejs npm)"; exit 1; }

PEERS=${PEERS:-"native node"}
NATIVE=
if [[ " $PEERS " == *" native "* ]]; then
    src=${LLAMACPP_SRC:-$SHARED/peers/llama.cpp-c392e509.tar.gz}
    NATIVE=$(TARBALL=$src DEST=${LLAMACPP_DIR:-$OUT/llama.cpp} "$here/build_llamacpp.sh")
    case $? in
        0) echo "peer: llama.cpp from $(basename "$src") built natively, $NATIVE" ;;
        2) NATIVE= ; [[ " $PEERS " == *" node "* ]] || PEERS="$PEERS node" ;; # the script said why
        *) exit 1 ;;
    esac
fi
PEER=
if [[ " $PEERS " == *" node "* ]]; then
    PEER=$OUT/node-llama-cpp
    if [ ! -d "$PEER/node_modules/node-llama-cpp" ] || [ ! -d "$PEER/node_modules/@node-llama-cpp/linux-x64" ]; then
        echo "installing node-llama-cpp (llama.cpp's prebuilt CPU binaries) into $PEER"
        mkdir -p "$PEER"
        npm install --prefix "$PEER" --no-audit --no-fund --omit=optional --loglevel=error \
            node-llama-cpp @node-llama-cpp/linux-x64 > "$PEER/install.log" 2>&1 ||
            { echo "npm install failed:"; tail -n 20 "$PEER/install.log"; exit 1; }
    fi
    echo "peer: node-llama-cpp $(node -p "require('$PEER/node_modules/node-llama-cpp/package.json').version")," \
         "llama.cpp $(node -p "require('$PEER/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/_nlcBuildMetadata.json').buildOptions.llamaCpp.release" 2>/dev/null || echo '?')"
fi

SMALL="smollm2-135m-q8_0 smollm2-135m-q4_0 smollm2-135m-q4_k_m"
ONE_B="tinyllama-1.1b-q4_0 llama-3.2-1b-q4_0 llama-3.2-1b-q8_0 llama-3.2-1b-q4_k_m qwen3-0.6b-q4_0 qwen3-0.6b-q8_0 qwen3-0.6b-q4_k_m"
expanded=
for m in ${MODELS:-all}; do
    case $m in
        all) expanded+=" $SMALL $ONE_B" ;;
        small) expanded+=" $SMALL" ;;
        1b) expanded+=" $ONE_B" ;;
        *) expanded+=" $m" ;;
    esac
done
MODELS=$expanded
for m in $MODELS; do make_model "$m"; done

load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
echo "machine: $(nproc) CPUs, load average $load before measuring$(awk -v l="${load%% *}" 'BEGIN { if (l + 0 > 0.5) print " (other work is running: figures will be noisy)" }')"
# peer_run NAME SCRIPT ARGS...: the peer's JSON, or {"error": why} when it
# failed (the snapshot does not know the family) or ran past PEER_TIMEOUT
# seconds (0: no limit; on a loaded machine a peer's threads can wait on
# each other for many minutes)
PEER_TIMEOUT=${PEER_TIMEOUT:-0}
peer_run() {
    local name=$1 out rc why
    shift
    out=$(timeout "$PEER_TIMEOUT" node "$@" 2>"$OUT/$name.err"); rc=$?
    if [ $rc -eq 0 ]; then echo "$out"; return; fi
    if [ $rc -eq 124 ]; then why="timed out after $PEER_TIMEOUT s"
    else why=$(tail -n 1 "$OUT/$name.err"); fi  # the peer scripts end with one line saying why
    echo "$name peer failed on $f ($t threads): $why" >&2
    node -p 'JSON.stringify({ error: process.argv[1] || "failed" })' "$why"
}
RESULTS=${RESULTS:-$OUT/results.jsonl}
: > "$RESULTS"
for m in $MODELS; do
    f=$OUT/models/$m.gguf
    drop_cached "$f"  # the same page cache for every engine
    for t in $THREADS; do
        echo "measuring $m with $t thread(s)"
        w=$("$WISP" bench -m "$f" -t "$t" -p 128 -n "$GEN" -r "$REPS" --json 2>"$OUT/wisp.err") ||
            { echo "wisp bench failed: $(cat "$OUT/wisp.err")"; exit 1; }
        n=null l=null
        if [ -n "$NATIVE" ]; then
            # the snapshot predates some families: their rows have no native figure, and say why
            n=$(peer_run native "$here/llamacpp_native_bench.mjs" --bin "$NATIVE" -m "$f" -t "$t" -p 128 -n "$GEN" -r "$REPS")
        fi
        if [ -n "$PEER" ]; then
            l=$(peer_run node "$here/llamacpp_bench.mjs" --peer "$PEER" -m "$f" -t "$t" -p 128 -n "$GEN" -r "$REPS")
        fi
        echo "{\"name\":\"$m\",\"threads\":$t,\"load\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"wisp\":$w,\"native\":$n,\"node\":$l}" >> "$RESULTS"
    done
done
echo "load average after measuring: $(cut -d' ' -f1-3 /proc/loadavg)"
node "$here/report.mjs" "$RESULTS" | tee "$OUT/table.txt"
if [ -n "${POOL:-}" ]; then
    echo
    echo "thread pool: cost of one job (bench/pool_overhead.c)"
    "$POOL" 2 20000
fi
echo "(results: $RESULTS, table: $OUT/table.txt)"
