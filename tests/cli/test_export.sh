# wisp export converts adapters both ways exactly: llama.cpp's golden GGUF
# LoRA and the golden PEFT folder turn into each other byte for byte, and
# seeded adapters (mixed ranks, rsLoRA, F16/BF16, partial targets, llama and
# qwen2) and an adapter trained by wisp finetune survive GGUF -> PEFT -> GGUF
# unchanged. Hostile adapters give one
# clear error under ASan, never a crash, and leave no output behind.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf golden/adapters/stories260K-r4/adapter.gguf golden/adapters/stories260K-r4/peft \
    models/synthetic/syn-llama-gqa-f32.gguf models/synthetic/syn-qwen2-f32.gguf data/tinyshakespeare.txt
A=$SHARED/golden/adapters/stories260K-r4
BASE=$SHARED/models/stories260K.gguf
D=$WORK/export
rm -rf "$D" && mkdir -p "$D"

# golden GGUF -> PEFT -> GGUF, and golden PEFT -> GGUF: llama.cpp's file again, byte for byte
"$WISP" export "$A/adapter.gguf" --to peft -m "$BASE" -o "$D/peft" --base-model test/stories 2>"$D/log" || fail "export to peft: $(cat "$D/log")"
grep -q '"base_model_name_or_path": "test/stories"' "$D/peft/adapter_config.json" || fail "base model name not written"
"$WISP" export "$D/peft" --to gguf -m "$BASE" -o "$D/back.gguf" 2>"$D/log" || fail "export to gguf: $(cat "$D/log")"
cmp -s "$D/back.gguf" "$A/adapter.gguf" || fail "GGUF -> PEFT -> GGUF is not byte-identical to the golden adapter"
ok
"$WISP" export "$A/peft" --to gguf -m "$BASE" -o "$D/from-peft.gguf" 2>"$D/log" || fail "golden peft: $(cat "$D/log")"
cmp -s "$D/from-peft.gguf" "$A/adapter.gguf" || fail "golden PEFT (HF order) -> GGUF differs from llama.cpp's GGUF adapter"
ok
# the exported PEFT tensors are the golden PEFT tensors (the folder's two files differ only in JSON layout)
"$WISP" export "$D/peft" --to peft -m "$BASE" -o "$D/peft2" 2>/dev/null || fail "peft -> peft"
cmp -s "$D/peft/adapter_model.safetensors" "$D/peft2/adapter_model.safetensors" || fail "PEFT -> PEFT not stable"
ok

# seeded adapters through both formats
for spec in "llama --rank 4" "llama --mixed --type f16" "llama --mixed --rslora --type f16" \
            "llama --rank 8 --rslora --type bf16" "llama --mixed --type bf16 --targets 0x0b" \
            "qwen2 --mixed --rslora" "qwen2 --rank 2 --targets 0x60"; do
    set -- $spec
    arch=$1; shift
    base=$SHARED/models/synthetic/syn-$arch-gqa-f32.gguf
    [ "$arch" = qwen2 ] && base=$SHARED/models/synthetic/syn-qwen2-f32.gguf
    rm -rf "$D/rt-peft"
    "$TOOLS/lora_fixture" "$base" "$D/rt.gguf" --seed 7 "$@" 2>/dev/null || fail "fixture $spec"
    "$WISP" export "$D/rt.gguf" --to peft -m "$base" -o "$D/rt-peft" 2>/dev/null || fail "$spec: to peft"
    "$WISP" export "$D/rt-peft" --to gguf -m "$base" -o "$D/rt2.gguf" 2>/dev/null || fail "$spec: to gguf"
    cmp -s "$D/rt.gguf" "$D/rt2.gguf" || fail "$spec: GGUF -> PEFT -> GGUF is not byte-identical"
    ok
done

# an adapter trained by wisp finetune: its GGUF and PEFT outputs are the same adapter, and both round-trip
if "$WISP" finetune --help >/dev/null 2>&1; then
    head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt"
    rm -rf "$D/ft"
    "$WISP" finetune -m "$BASE" --data "$D/train.txt" -o "$D/ft" --rank 4 --alpha 6 --rslora --steps 3 --ctx 64 \
        --batch 2 -t 1 > "$D/ft.log" 2>&1 || fail "finetune: $(tail -n 3 "$D/ft.log")"
    rm -rf "$D/ft-peft"
    "$WISP" export "$D/ft/adapter.gguf" --to peft -m "$BASE" -o "$D/ft-peft" 2>/dev/null || fail "trained: to peft"
    cmp -s "$D/ft-peft/adapter_model.safetensors" "$D/ft/peft/adapter_model.safetensors" ||
        fail "the trained adapter's GGUF and PEFT outputs hold different tensors"
    "$WISP" export "$D/ft/peft" --to gguf -m "$BASE" -o "$D/ft.gguf" 2>/dev/null || fail "trained: to gguf"
    rm -rf "$D/ft-peft2"
    "$WISP" export "$D/ft.gguf" --to peft -m "$BASE" -o "$D/ft-peft2" 2>/dev/null || fail "trained: to peft again"
    cmp -s "$D/ft-peft2/adapter_model.safetensors" "$D/ft/peft/adapter_model.safetensors" ||
        fail "trained adapter: PEFT -> GGUF -> PEFT changed the tensors"
    ok
else
    echo "note: no wisp finetune in this build; the trained-adapter round trip is not run"
fi

# hostile adapters: clean errors (ASan build when available), no output left behind
W=${WISP_ASAN:-$WISP}
export ASAN_OPTIONS=abort_on_error=0:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=98
# expect_error NEEDLE CMD...: exit 1, one message mentioning NEEDLE
expect_error() {
    local needle=$1 out rc; shift
    out=$(timeout 60 "$@" 2>&1); rc=$?
    [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "exit $rc (want 1 or 2): $* :: $out"
    case "$out" in *"$needle"*) ;; *) fail "message lacks '$needle': $* :: $out" ;; esac
    ok
}
SYN=$SHARED/models/synthetic/syn-llama-gqa-f32.gguf
expect_error "wrong base model" "$W" export "$A/adapter.gguf" --to peft -m "$SYN" -o "$D/x"
[ ! -e "$D/x/adapter_model.safetensors" ] || fail "a failed export left a file behind"
expect_error "wrong base model" "$W" export "$A/peft" --to gguf -m "$SYN" -o "$D/x.gguf"
[ ! -e "$D/x.gguf" ] || fail "a failed export left a file behind"
expect_error "--to must be" "$W" export "$A/adapter.gguf" --to onnx -m "$BASE" -o "$D/x"
expect_error "-m BASE.gguf" "$W" export "$A/adapter.gguf" --to peft -o "$D/x"
expect_error "not a GGUF LoRA" "$W" export "$BASE" --to peft -m "$BASE" -o "$D/x"
# truncated and damaged adapter files
size=$(stat -c %s "$A/adapter.gguf")
for cut in 0 8 24 100 1000 $((size / 2)) $((size - 1)); do
    head -c $cut "$A/adapter.gguf" > "$D/cut.gguf"
    expect_error "cut.gguf" "$W" export "$D/cut.gguf" --to peft -m "$BASE" -o "$D/x"
done
"$TOOLS/gguf_mutate" "$A/adapter.gguf" "$D/shape.gguf" shape blk.0.attn_k.weight.lora_b
expect_error "shape.gguf" "$W" export "$D/shape.gguf" --to peft -m "$BASE" -o "$D/x"
mkdir -p "$D/bad"
cp "$A/peft/adapter_config.json" "$D/bad/"
expect_error "adapter_model.safetensors" "$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf"
ssize=$(stat -c %s "$A/peft/adapter_model.safetensors")
for cut in 0 7 8 100 5000 $((ssize / 2)) $((ssize - 1)); do
    head -c $cut "$A/peft/adapter_model.safetensors" > "$D/bad/adapter_model.safetensors"
    expect_error "adapter_model.safetensors" "$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf"
done
cp "$A/peft/adapter_model.safetensors" "$D/bad/"
# a DoRA config whose tensors lack the magnitudes (DoRA's own export refusal: test_finetune_dora)
printf '{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_dora": true}' > "$D/bad/adapter_config.json"
expect_error "use_dora but the module has no lora_magnitude_vector" "$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf"
printf '{"peft_type": "LORA", "r": 4, "lora_alpha": 8,' > "$D/bad/adapter_config.json"
expect_error "adapter_config.json: JSON" "$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf"
printf '{"peft_type": "LORA", "r": 8, "lora_alpha": 8}' > "$D/bad/adapter_config.json"
expect_error "rank 4" "$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf"
[ ! -e "$D/x.gguf" ] || fail "a failed export left a file behind"
# unknown config fields are reported, and the conversion still succeeds
printf '{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "shiny_new_option": true}' > "$D/bad/adapter_config.json"
out=$("$W" export "$D/bad" --to gguf -m "$BASE" -o "$D/x.gguf" 2>&1) || fail "unknown field should not fail: $out"
case "$out" in *"warning"*"shiny_new_option"*) ok ;; *) fail "unknown field not reported: $out" ;; esac
cmp -s "$D/x.gguf" "$A/adapter.gguf" || fail "unknown field changed the result"
ok
done_ok
