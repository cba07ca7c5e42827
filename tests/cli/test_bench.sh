# wisp bench: prints the figures it promises (as JSON and as a table), with
# positive speeds, the model's weight bytes, a measured memory bandwidth and
# the kernel level in use; options are checked.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
M=$SHARED/models/stories260K.gguf
D=$WORK/bench
mkdir -p "$D"
"$WISP" bench -m "$M" -t 2 -p 16 -n 8 -r 2 --mem-test 32M --json > "$D/b.json" 2>"$D/err" || fail "bench --json: $(cat "$D/err")"
for key in prefill_tok_s decode_tok_s peak_rss_bytes weight_bytes mem_bandwidth_bytes_s decode_bandwidth_bytes_s; do
    v=$(grep -oE "\"$key\":[0-9.e+]+" "$D/b.json" | cut -d: -f2)
    [ -n "$v" ] || fail "no $key in $(cat "$D/b.json")"
    awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "$key is $v"
    ok
done
grep -qE '"kernels":"[a-z0-9-]+"' "$D/b.json" || fail "no kernel level"; ok
grep -qE '"cpu_share":[0-9.]+' "$D/b.json" || fail "no cpu_share"; ok
WISP_KERNELS=scalar "$WISP" bench -m "$M" -p 8 -n 4 -r 1 --mem-test 0 > "$D/b.txt" 2>/dev/null || fail "bench (table)"
grep -q "kernels    scalar, " "$D/b.txt" || fail "table: $(cat "$D/b.txt")"; ok
grep -qE "^prefill +[0-9.]+ tok/s" "$D/b.txt" && grep -qE "^decode +[0-9.]+ tok/s" "$D/b.txt" || fail "table: $(cat "$D/b.txt")"; ok
expect_fail "$WISP" bench -m "$M" -p 0 -n 0
expect_fail "$WISP" bench -m "$M" -r 0
expect_fail "$WISP" bench -m "$M" -p 100 -n 100 --ctx 64
expect_fail "$WISP" bench -m "$D/missing.gguf"
done_ok
