# The plan is exact for every family of the architecture table: an arena of
# the planned size runs a 64-token generation, one byte less fails naming the
# shortfall. The windowed gemma3 model's KV cache is planned smaller than a
# full one (its local layers keep a ring of window - 1 + batch positions, in
# whole blocks of 64),
# and the generation runs past the window, so the ring wraps.
source "$(dirname "$0")/lib.sh"
models="syn-llama3-rope-f32 syn-qwen3-f16 syn-gemma2-f32 syn-gemma3-f16 syn-phi3-longrope-f32 syn-phi3-q4_k_m"
for m in $models; do need models/synthetic/$m.gguf; done
for m in $models; do
    model="$SHARED/models/synthetic/$m.gguf"
    for ctx in 96 512; do
        for t in 1 2; do
            total=$("$WISP" plan -m "$model" --ctx $ctx -t $t --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
            [ -n "$total" ] || fail "no total from wisp plan for $m"
            "$WISP" run -m "$model" -p "Once upon a time" -n 64 --temp 0 --ctx $ctx -t $t -q --arena "$total" \
                > "$WORK/plan-arch-out.txt" || fail "$m ctx $ctx: the planned arena ($total) failed"
            ok
            out=$("$WISP" run -m "$model" -p "Once upon a time" -n 64 --temp 0 --ctx $ctx -t $t -q \
                --arena $((total - 1)) 2>&1) && fail "$m ctx $ctx: one byte less ($((total - 1))) still ran"
            case "$out" in
                *"1 bytes short"*) ok ;;
                *) fail "$m ctx $ctx: unclear error for a short arena: $out" ;;
            esac
        done
    done
    echo "$m: plan exact at ctx 96 and 512, 1 and 2 threads"
done
# syn-gemma3-f16: 6 layers, 1 kv head of 128, window 16, layers 0-4 local (docs/architectures.md)
json=$("$WISP" plan -m "$SHARED/models/synthetic/syn-gemma3-f16.gguf" --ctx 512 -b 8 --json)
kv=$(echo "$json" | sed -n 's/.*"kv_cache": \([0-9]*\).*/\1/p')
ring=$(echo "$json" | sed -n 's/.*"kv_ring_positions": \([0-9]*\).*/\1/p')
windowed=$(echo "$json" | sed -n 's/.*"windowed_layers": \([0-9]*\).*/\1/p')
full=$((6 * 512 * 128 * 2 * 2))
[ "$windowed" = 5 ] || fail "gemma3: $windowed windowed layers planned, expected 5 of 6"
[ "$ring" = 64 ] || fail "gemma3: a ring of $ring positions, expected window 16 - 1 + batch 8 in a block of 64"
[ -n "$kv" ] && [ "$kv" -lt "$full" ] || fail "gemma3: KV cache of $kv bytes is not smaller than a full one ($full)"
[ "$kv" = $(((512 + 5 * ring) * 128 * 2 * 2)) ] || fail "gemma3: KV cache of $kv bytes is not 1 full layer + 5 rings"
"$WISP" plan -m "$SHARED/models/synthetic/syn-gemma3-f16.gguf" --ctx 512 -b 8 | grep -q "caches a ring of 64 positions" \
    || fail "wisp plan does not say that the windowed layers cache a ring"
ok
echo "gemma3: KV cache $kv bytes against $full for full layers"
done_ok
