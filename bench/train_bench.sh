#!/usr/bin/env bash
# LoRA training throughput and peak memory, wisp vs PyTorch (Debian's
# python3-torch), on random-weight Q8_0 models of two shapes: SmolLM2-135M
# and Llama-3.2-1B (SHAPES picks). ctx 256, batch 1, rank 8 on all seven
# projections, AdamW, the same threads.
# wisp runs twice: default (F32 saved activations) and its low-memory mode
# (activation checkpointing + BF16 storage). Tokens/s leave out the first step
# (warm-up); peak memory is the process's maximum RSS (mapped weights included).
# `wisp bench --train` then runs the same shape for its model FLOPs utilization
# against the machine's measured arithmetic peak (README: Speed).
# Usage: train_bench.sh BUILD_DIR
#   (env: THREADS=2 STEPS=4 TORCH_STEPS=2 SHAPES="smollm2-135m llama-3.2-1b")
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
wisp=$build/wisp
threads=${THREADS:-2} steps=${STEPS:-4} torch_steps=${TORCH_STEPS:-2}
shapes=${SHAPES:-smollm2-135m llama-3.2-1b}
shared=${WISP_SHARED:-$here/../../shared}
out=$build/bench-train
mkdir -p "$out" "$build/bench-models"
data=$shared/data/tinyshakespeare.txt
[ -f "$data" ] || { echo "FAIL: missing $data (the training text; ../shared/data)"; exit 1; }

# wisp on $model (set by bench_shape): steady tokens/s from log.csv (its tokens_per_s is
# cumulative since the start)
run_wisp() { # name extra-args...
    local name=$like-$1; shift
    /usr/bin/time -v "$wisp" finetune -m "$model" --data "$data" --ctx 256 --batch 1 --rank 8 --targets all \
        --steps "$steps" --schedule constant -t "$threads" -q --overwrite -o "$out/$name" "$@" 2> "$out/$name.time"
    local tps=$(awk -F, 'NR>1 && $1>0 {n=$1; r[n]=$5} END {t=256; e1=t/r[1]; eN=n*t/r[n]; printf "%.1f", (n-1)*t/(eN-e1)}' \
        "$out/$name/log.csv")
    local rss=$(awk '/Maximum resident/ {printf "%.0f", $NF/1024}' "$out/$name.time")
    local arena=$(grep -o '"arena_bytes": [0-9]*' "$out/$name/config.json" | awk '{printf "%.0f", $2/1048576}')
    echo "$name $tps $rss $arena"
}

bench_shape() { # like
    local like=$1 model=$build/bench-models/$1-q8_0.gguf
    [ -f "$model" ] || "$wisp" make-model --like "$like" --type q8_0 -o "$model" >&2
    echo "wisp: $steps steps of 256 tokens, $threads threads ..." >&2
    w1=$(run_wisp wisp-f32)
    w2=$(run_wisp wisp-ckpt-bf16 --checkpointing --act-dtype bf16)
    echo "wisp bench --train: MFU ..." >&2
    bj=$("$wisp" bench --train -m "$model" -c 256 -b 1 --rank 8 --steps "$steps" -t "$threads" --json)
    jnum() { echo "$bj" | grep -oE "\"$1\":[0-9.e+-]+" | cut -d: -f2; }
    echo "pytorch: $torch_steps steps (the first is warm-up) ..." >&2
    tj=$(/usr/bin/python3 "$here/train_torch.py" "$model" --ctx 256 --batch 1 --rank 8 --steps "$torch_steps" \
         --threads "$threads" 2> "$out/$like-torch.log" | tail -1)
    t_tps=$(echo "$tj" | grep -o '"tokens_per_s": [0-9.e+-]*' | awk '{print $2}')
    t_rss=$(echo "$tj" | grep -o '"peak_rss_bytes": [0-9]*' | awk '{printf "%.0f", $2/1048576}')
    blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
    {
        echo "LoRA training, $like-shaped Q8_0 (random weights), ctx 256, batch 1, rank 8, all 7 projections, $threads threads"
        echo "PyTorch BLAS: $blas"
        case $blas in *openblas*) ;; *) echo "WARNING: not OpenBLAS: PyTorch runs ~100x slower on the reference BLAS, an unfair peer (apt-get install libopenblas0-pthread)";; esac
        printf '%-30s %12s %14s %12s %10s %10s\n' implementation "tokens/s" "peak RSS MiB" "arena MiB" "speed x" "memory x"
        for line in "$w1" "$w2"; do  # names: $like-wisp-f32, $like-wisp-ckpt-bf16
            set -- $line
            printf '%-30s %12s %14s %12s %10.1f %10.2f\n' "$1" "$2" "$3" "$4" "$(awk -v a="$2" -v b="$t_tps" 'BEGIN{print a/b}')" \
                "$(awk -v a="$3" -v b="$t_rss" 'BEGIN{print a/b}')"
        done
        printf '%-30s %12.2f %14s %12s %10s %10s\n' "$like-pytorch" "$t_tps" "$t_rss" "-" "1.0" "1.00"
        awk -v tps="$(jnum train_tok_s)" -v mfu="$(jnum train_mfu)" -v i8="$(jnum int8_peak_ops_s)" -v f="$(jnum f32_peak_flops_s)" \
            -v a="$(jnum train_int8_ops_per_token)" -v b="$(jnum train_f32_flops_per_token)" 'BEGIN {
            printf "wisp bench --train: %.1f tok/s, MFU %.1f%% (%.3g int8 ops + %.3g F32 FLOPs per token; measured peaks: int8 %.0f Gop/s, F32 FMA %.0f GFLOP/s)\n",
                   tps, 100 * mfu, a, b, i8 / 1e9, f / 1e9 }'
        echo "load average during the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows every figure)"
    }
}

for like in $shapes; do bench_shape "$like"; echo; done | tee "$out/results.txt"
