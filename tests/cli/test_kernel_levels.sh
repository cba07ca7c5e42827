# Every kernel level this machine offers (WISP_KERNELS=scalar|avx2|avx512|
# neon|...) keeps the golden logits (test_golden_logits.sh runs once per
# level), and the logits do not depend on the thread count (1, 2, 3), on
# how the prompt is cut into batches, or on whether the level's packed
# weights are used (--in-place-weights): the bytes are identical; for the
# sliding-window families also not on the size of the KV ring. Under
# valgrind, which cannot run AVX-512 and hides it from CPUID, the automatic
# choice falls back to a level valgrind runs, and the text is unchanged.
source "$(dirname "$0")/lib.sh"
need golden/logits models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf models/synthetic/syn-qwen2-q8_0.gguf \
    models/synthetic/syn-llama-gqa-f16.gguf
here=$(cd "$(dirname "$0")" && pwd)
D=$WORK/kernel_levels
rm -rf "$D" && mkdir -p "$D"
levels=()
for level in scalar avx2 avx512 neon neon-dotprod wasm-simd128; do
    if WISP_KERNELS=$level "$WISP" info -m "$SHARED/models/stories260K.gguf" >/dev/null 2>"$D/err"; then
        levels+=("$level")
    else
        echo "level $level: not on this machine ($(cat "$D/err"))"
    fi
done
[ ${#levels[@]} -ge 1 ] || fail "not even the scalar level could run"
echo "levels: ${levels[*]}"

for level in "${levels[@]}"; do
    echo "== $level: golden logits"
    mkdir -p "$D/$level"
    WISP_KERNELS=$level WORK=$D/$level bash "$here/test_golden_logits.sh" > "$D/$level.log" 2>&1 ||
        fail "golden logits with WISP_KERNELS=$level: $(tail -n 20 "$D/$level.log")"
    ok
    echo "== $level: 1, 2 and 3 threads, batch sizes 1, 7 and 64, packed or in-place weights give the same bytes"
    for m in models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_k_m.gguf models/synthetic/syn-qwen2-q8_0.gguf \
             models/synthetic/syn-llama-gqa-f16.gguf; do
        name=$(basename "$m" .gguf)
        args=(-m "$SHARED/$m" -p "Once upon a time there was a" -p "The quick brown fox jumps over" --json)
        WISP_KERNELS=$level "$WISP" logits "${args[@]}" -t 1 > "$D/$level-$name-t1.json" || fail "$level $name -t 1"
        for variant in "-t 2" "-t 3" "-t 3 -b 1" "-t 2 -b 7" "-t 2 --in-place-weights" "-t 1 -b 1 --in-place-weights"; do
            # shellcheck disable=SC2086
            WISP_KERNELS=$level "$WISP" logits "${args[@]}" $variant > "$D/out.json" || fail "$level $name $variant"
            cmp -s "$D/$level-$name-t1.json" "$D/out.json" || fail "$level $name: '$variant' changed the logits"
            ok
        done
    done
    # sliding-window layers (window 16) over 60 positions: their ring of cached keys wraps
    long="Lily and Tom went to the big park to play with a red ball. Lily and Tom went to the big park to play."
    for m in models/synthetic/syn-gemma2-f32.gguf models/synthetic/syn-gemma3-f16.gguf; do
        name=$(basename "$m" .gguf)
        args=(-m "$SHARED/$m" -p "$long" -p "Once upon a time" --json)
        WISP_KERNELS=$level "$WISP" logits "${args[@]}" -t 1 > "$D/$level-$name-t1.json" || fail "$level $name -t 1"
        for variant in "-t 3" "-t 3 -b 1" "-t 2 -b 7" "-t 2 -b 64 --ctx 128"; do
            # shellcheck disable=SC2086
            WISP_KERNELS=$level "$WISP" logits "${args[@]}" $variant > "$D/out.json" || fail "$level $name $variant"
            cmp -s "$D/$level-$name-t1.json" "$D/out.json" || fail "$level $name: '$variant' changed the logits"
            ok
        done
    done
done

if [ -n "$(asan_runtime)" ]; then
    echo "note: this wisp is built with ASan, which valgrind cannot run; make test-valgrind checks this"
elif command -v valgrind >/dev/null; then
    echo "== under valgrind"
    args=(run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 24 --temp 0 -q -t 2)
    native=$("$WISP" "${args[@]}") || fail "native run"
    under=$(valgrind -q --error-exitcode=9 "$WISP" "${args[@]}" 2>"$D/vg.err") || fail "valgrind run: $(tail -n 20 "$D/vg.err")"
    [ "$native" = "$under" ] || fail "valgrind changed the text: '$under' vs '$native'"
    ok
    level=$(valgrind -q "$WISP" info -m "$SHARED/models/stories260K.gguf" 2>/dev/null | awk '/^  kernels/ {print $2}')
    [ -n "$level" ] && [ "$level" != avx512 ] || fail "under valgrind the level was '$level'"
    echo "valgrind chose $level"; ok
else
    echo "note: valgrind is not installed; the fallback under valgrind is not checked here"
fi
done_ok
