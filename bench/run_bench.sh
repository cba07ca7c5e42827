#!/usr/bin/env bash
# `make bench`: wisp against llama.cpp on the same files, threads and token
# ids, on this machine, in one run.
#   1. installs the peer (npm: node-llama-cpp with its prebuilt
#      @node-llama-cpp/linux-x64 llama.cpp) into $OUT/node-llama-cpp, once;
#   2. makes the models with `wisp make-model` into $OUT/models, once:
#      SmolLM2-135M-shaped Q8_0, Q4_0, Q4_K_M and TinyLlama-1.1B-shaped Q4_0;
#   3. drops each model file from the page cache (so that it comes back in
#      2 MiB pages), then runs `wisp bench` and bench/llamacpp_bench.mjs,
#      alternately, with 1 and 2 threads, a 128-token prompt and GEN
#      decoded tokens, REPS repetitions each (medians are reported);
#   4. prints the table (bench/report.mjs) with the ratios and the targets,
#      and the thread pool's per-job cost (pool_overhead).
# Environment: WISP (binary), POOL (pool_overhead binary), OUT (work folder),
# SHARED (reference folder, for real tokenizers; optional), REPS (default 5),
# GEN (default 64), THREADS (default "1 2"), MODELS (default: all four).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${WISP:?}" "${OUT:?}"
REPS=${REPS:-5}
GEN=${GEN:-64}
THREADS=${THREADS:-"1 2"}
SHARED=${SHARED:-}
mkdir -p "$OUT/models"
command -v node >/dev/null && command -v npm >/dev/null || { echo "make bench needs node and npm (apt-get install nodejs npm)"; exit 1; }

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

# name shape type vocabulary-source
MODELS=${MODELS:-"smollm2-135m-q8_0 smollm2-135m-q4_0 smollm2-135m-q4_k_m tinyllama-1.1b-q4_0"}
make_model() {
    local name=$1 file=$OUT/models/$1.gguf shape type vocab=()
    shape=${name%-*}   # the type is the last dash-separated part (q4_k_m has no dash)
    type=${name##*-}
    [ -f "$file" ] && return 0
    case $shape in
        smollm2-135m) [ -f "$SHARED/models/tokenizers/smollm2/tokenizer.json" ] &&
                          vocab=(--tokenizer "$SHARED/models/tokenizers/smollm2/tokenizer.json") ;;
        tinyllama-1.1b) [ -f "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf" ] &&
                          vocab=(--vocab-from "$SHARED/models/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf") ;;
    esac
    echo "making $file"
    "$WISP" make-model --like "$shape" --type "$type" "${vocab[@]}" -o "$file" || exit 1
}
for m in $MODELS; do make_model "$m"; done

load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
echo "machine: $(nproc) CPUs, load average $load before measuring$(awk -v l="$load" 'BEGIN { if (l + 0 > 0.5) print " (other work is running: figures will be noisy)" }')"
RESULTS=$OUT/results.jsonl
: > "$RESULTS"
for m in $MODELS; do
    f=$OUT/models/$m.gguf
    # The same page cache for every run: drop the file's cached pages, so
    # that the first reader (wisp, which maps with MADV_HUGEPAGE) brings it
    # back in 2 MiB folios where the filesystem can; both sides then read
    # those same pages. Left as it was, a file cached piecemeal by earlier
    # reads keeps those parts in 4 KiB pages: with a fifth of each model so,
    # decode measured 3-7% slower on this VM (wisp bench reports how much
    # of the file is in 2 MiB pages).
    sync "$f" 2>/dev/null
    dd if="$f" iflag=nocache count=0 status=none 2>/dev/null ||
        echo "note: could not drop $f from the page cache; it is measured as cached"
    for t in $THREADS; do
        echo "measuring $m with $t thread(s)"
        w=$("$WISP" bench -m "$f" -t "$t" -p 128 -n "$GEN" -r "$REPS" --json 2>"$OUT/wisp.err") ||
            { echo "wisp bench failed: $(cat "$OUT/wisp.err")"; exit 1; }
        l=$(node "$here/llamacpp_bench.mjs" --peer "$PEER" -m "$f" -t "$t" -p 128 -n "$GEN" -r "$REPS" 2>"$OUT/peer.err") ||
            { echo "llama.cpp bench failed: $(tail -n 5 "$OUT/peer.err")"; exit 1; }
        echo "{\"name\":\"$m\",\"threads\":$t,\"wisp\":$w,\"llamacpp\":$l}" >> "$RESULTS"
    done
done
node "$here/report.mjs" "$RESULTS" | tee "$OUT/table.txt"
if [ -n "${POOL:-}" ]; then
    echo
    echo "thread pool: cost of one job (bench/pool_overhead.c)"
    "$POOL" 2 20000
fi
echo "(results: $RESULTS, table: $OUT/table.txt)"
