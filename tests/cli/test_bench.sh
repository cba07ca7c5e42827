# wisp bench: prints the figures it promises (as JSON and as a table), with
# positive speeds, the model's weight bytes, measured read-only and copy
# memory bandwidths, the roofline fraction against the read-only one, the
# last-level cache and whether the weights fit in it, the kernel level in
# use, the measured int8 and F32 arithmetic peaks and prefill's fraction of
# them; `bench --train` runs LoRA steps and reports tokens/s, memory and MFU;
# options are checked; `make bench`'s report (bench/report.mjs) turns a row
# into ratios against both llama.cpp peers.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
M=$SHARED/models/stories260K.gguf
D=$WORK/bench
mkdir -p "$D"
"$WISP" bench -m "$M" -t 2 -p 16 -n 8 -r 2 --mem-test 32M --peak-time 0.02 --json > "$D/b.json" 2>"$D/err" || fail "bench --json: $(cat "$D/err")"
num() { grep -oE "\"$1\":[0-9.e+]+" "$D/b.json" | cut -d: -f2; }
for key in prefill_tok_s decode_tok_s peak_rss_bytes weight_bytes mem_bandwidth_bytes_s read_bandwidth_bytes_s \
           decode_bandwidth_bytes_s roofline_fraction int8_peak_ops_s f32_peak_flops_s prefill_f32_flops_per_token \
           prefill_peak_fraction; do
    v=$(num $key)
    [ -n "$v" ] || fail "no $key in $(cat "$D/b.json")"
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 1e300) }' || fail "$key is $v"
    ok
done
# prefill's fraction is its speed times the time its operations take at the
# peaks: stories260K is all F32, so no int8 work and the F32 peak alone
[ "$(num prefill_int8_ops_per_token)" = 0 ] || fail "int8 work in an F32 model: $(cat "$D/b.json")"; ok
awk -v p="$(num prefill_tok_s)" -v o="$(num prefill_f32_flops_per_token)" -v k="$(num f32_peak_flops_s)" \
    -v f="$(num prefill_peak_fraction)" 'BEGIN { e = p * o / k; exit !(f > 0.999 * e - 0.0001 && f < 1.001 * e + 0.0001) }' ||
    fail "prefill_peak_fraction: $(cat "$D/b.json")"; ok
# a Q8_0 model's projections run on the int8 path: stories260K requantized
"$WISP" quantize "$M" "$D/q8.gguf" q8_0 > /dev/null 2>&1 || fail "quantize to q8_0"
"$WISP" bench -m "$D/q8.gguf" -t 1 -p 16 -n 1 -r 1 --mem-test 0 --peak-time 0.02 --json > "$D/q.json" 2>"$D/err" ||
    fail "bench q8_0: $(cat "$D/err")"
grep -qE '"prefill_int8_ops_per_token":[1-9][0-9.e+]*,' "$D/q.json" && grep -qE '"prefill_peak_fraction":0\.[0-9]*[1-9]' "$D/q.json" ||
    fail "q8_0 prefill: $(cat "$D/q.json")"; ok

# training: a few LoRA steps, with their throughput, memory and MFU
"$WISP" bench --train -m "$M" -t 2 -c 16 --steps 1 --rank 4 --peak-time 0.02 --json > "$D/t.json" 2>"$D/err" ||
    fail "bench --train --json: $(cat "$D/err")"
tnum() { grep -oE "\"$1\":[0-9.e+]+" "$D/t.json" | cut -d: -f2; }
for key in train_tok_s train_loss peak_rss_bytes arena_bytes train_f32_flops_per_token int8_peak_ops_s f32_peak_flops_s \
           train_mfu; do
    v=$(tnum $key)
    [ -n "$v" ] || fail "no $key in $(cat "$D/t.json")"
    awk -v v="$v" 'BEGIN { exit !(v > 0 && v < 1e300) }' || fail "$key is $v"
    ok
done
grep -q '"train_seq_len":16,"train_batch":1,"train_rank":4,"train_steps":1,' "$D/t.json" || fail "train settings: $(cat "$D/t.json")"; ok
awk -v p="$(tnum train_tok_s)" -v o="$(tnum train_f32_flops_per_token)" -v k="$(tnum f32_peak_flops_s)" \
    -v f="$(tnum train_mfu)" 'BEGIN { e = p * o / k; exit !(f > 0.999 * e - 0.0001 && f < 1.001 * e + 0.0001) }' ||
    fail "train_mfu: $(cat "$D/t.json")"; ok
"$WISP" bench --train -m "$M" -t 1 -c 16 --steps 1 --peak-time 0.02 > "$D/t.txt" 2>/dev/null || fail "bench --train (table)"
grep -qE "^train +[0-9.]+ tok/s" "$D/t.txt" && grep -qE "^mfu +[0-9.]+% of the peak" "$D/t.txt" &&
    grep -qE "^peak +int8 [0-9.]+ Gop/s .*F32 FMA [0-9.]+ GFLOP/s" "$D/t.txt" || fail "train table: $(cat "$D/t.txt")"; ok
# the roofline is decode's weight bandwidth over the read-only test's
awk -v a="$(num decode_bandwidth_bytes_s)" -v r="$(num read_bandwidth_bytes_s)" -v f="$(num roofline_fraction)" \
    'BEGIN { exit !(f > 0.999 * a / r - 0.0001 && f < 1.001 * a / r + 0.0001) }' || fail "roofline_fraction: $(cat "$D/b.json")"; ok
# the read test covers at least 4x the last-level cache; this 1 MiB model fits in any such cache
llc=$(num llc_bytes)
[ -n "$llc" ] || fail "no llc_bytes"; ok
if [ "$llc" -gt 0 ]; then
    [ "$(num read_test_bytes)" -ge $((4 * llc)) ] || fail "read test smaller than 4x the LLC: $(cat "$D/b.json")"; ok
    grep -q '"weights_fit_llc":true' "$D/b.json" || fail "stories260K not marked as fitting the LLC"; ok
else
    grep -q '"weights_fit_llc":false' "$D/b.json" || fail "weights_fit_llc without a known LLC"; ok
fi
grep -qE '"kernels":"[a-z0-9-]+"' "$D/b.json" || fail "no kernel level"; ok
grep -qE '"cpu_share":[0-9.]+' "$D/b.json" || fail "no cpu_share"; ok
WISP_KERNELS=scalar "$WISP" bench -m "$M" -p 8 -n 4 -r 1 --mem-test 0 --peak-time 0.02 > "$D/b.txt" 2>/dev/null ||
    fail "bench (table)"
grep -q "kernels    scalar, " "$D/b.txt" || fail "table: $(cat "$D/b.txt")"; ok
# the scalar level's own peaks, and prefill against them
grep -qE "^peak +int8 [0-9.]+ Gop/s .*F32 FMA [0-9.]+ GFLOP/s" "$D/b.txt" &&
    grep -qE "^arithmetic prefill does .*: [0-9.]+% of the peak" "$D/b.txt" || fail "table: $(cat "$D/b.txt")"; ok
grep -qE "^prefill +[0-9.]+ tok/s" "$D/b.txt" && grep -qE "^decode +[0-9.]+ tok/s" "$D/b.txt" || fail "table: $(cat "$D/b.txt")"; ok
"$WISP" bench -m "$M" -t 1 -p 8 -n 4 -r 1 --mem-test 16M > "$D/c.txt" 2>/dev/null || fail "bench (table, memory tests)"
grep -qE "memory read [0-9.]+ GB/s: [0-9]+% of the roofline.*; copy [0-9.]+ GB/s" "$D/c.txt" || fail "table: $(cat "$D/c.txt")"; ok
[ "$llc" -eq 0 ] || grep -q "the weights stay in" "$D/c.txt" || fail "table: no last-level cache note: $(cat "$D/c.txt")"; ok

# the report: this row against made-up peer figures half as fast (native),
# a native failure on a second row (as the old snapshot's on qwen3), and a
# third row whose decode read faster than the read test (the bandwidth
# changed state between them: its fraction is void, not a target met)
command -v node >/dev/null || fail "node is needed for bench/report.mjs"
w=$(cat "$D/b.json")
half() { node -e "const w = $w; console.log(JSON.stringify({prefill_tok_s: w.prefill_tok_s / 2, decode_tok_s: w.decode_tok_s / 2}))"; }
{
    echo "{\"name\":\"stories-q8_0\",\"threads\":2,\"load\":\"1.00 1.00 1.00\",\"wisp\":$w,\"native\":$(half),\"node\":null}"
    echo "{\"name\":\"qwen3-x-q8_0\",\"threads\":2,\"load\":\"1.00 1.00 1.00\",\"wisp\":$w,\"native\":{\"error\":\"unknown model architecture: 'qwen3'\"},\"node\":$(half)}"
    past=$(node -e "const w = $w; console.log(JSON.stringify({...w, weights_fit_llc: false, decode_bandwidth_bytes_s: 1.5 * w.read_bandwidth_bytes_s}))")
    echo "{\"name\":\"past-read-q8_0\",\"threads\":2,\"load\":\"1.00 1.00 1.00\",\"wisp\":$past,\"native\":$(half),\"node\":null}"
} > "$D/results.jsonl"
node "$(dirname "$0")/../../bench/report.mjs" "$D/results.jsonl" > "$D/table.txt" || fail "report: $(cat "$D/table.txt")"
grep -qE "^stories-q8_0 +2 \| +[0-9.]+ +[0-9.]+  2\.00 +- +- \| +[0-9.]+ +[0-9.]+  2\.00 +- +-" "$D/table.txt" ||
    fail "report row: $(cat "$D/table.txt")"; ok
grep -qE "^qwen3-x-q8_0 +2 \| +[0-9.]+ +- +- +[0-9.]+  2\.00" "$D/table.txt" || fail "report fallback row: $(cat "$D/table.txt")"; ok
grep -q "native llama.cpp on qwen3-x-q8_0, 2 threads: unknown model architecture: 'qwen3'" "$D/table.txt" || fail "report: no reason"; ok
grep -q "memory read bandwidth, 2 threads" "$D/table.txt" || fail "report: no read bandwidth"; ok
grep -qE "^stories-q8_0 .*%\*? \| +[0-9]+% \|" "$D/table.txt" || fail "report: no prefill peak column: $(cat "$D/table.txt")"; ok
grep -qE "^past-read-q8_0 .* 150%! \|" "$D/table.txt" || fail "report: a fraction past the read test is not marked: $(cat "$D/table.txt")"; ok
grep -q "past-read-q8_0 t2: decode read 150% of the read test, so the memory bandwidth changed state" "$D/table.txt" ||
    fail "report: a fraction past the read test counts: $(cat "$D/table.txt")"; ok
grep -qE "^arithmetic peak, 2 threads \([a-z0-9-]+\): int8 [0-9]+ Gop/s, F32 FMA [0-9]+ GFLOP/s" "$D/table.txt" ||
    fail "report: no arithmetic peak: $(cat "$D/table.txt")"; ok
expect_fail "$WISP" bench -m "$M" -p 0 -n 0
expect_fail "$WISP" bench -m "$M" -r 0
expect_fail "$WISP" bench -m "$M" --peak-time -1
expect_fail "$WISP" bench --train -m "$M" --steps 0
expect_fail "$WISP" bench --train -m "$M" -p 16
expect_fail "$WISP" bench -m "$M" --rank 4
expect_fail "$WISP" bench -m "$M" -p 100 -n 100 --ctx 64
expect_fail "$WISP" bench -m "$D/missing.gguf"
done_ok
