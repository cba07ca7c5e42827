# PEFT adapters of phi3, whose Hugging Face modules are fused: self_attn.qkv_proj
# (rows q, k, v) and mlp.gate_up_proj (rows gate, up). wisp holds a pair per
# projection; a PEFT module holds one pair, so export stacks the pairs' A and
# places their B block-diagonally (rank = the sum of theirs) and import gives
# every projection the shared A and its rows of B. Both are exact, shown by:
#   - a short fine-tune's PEFT copy has the module names and shapes PEFT
#     gives Phi-3 (derived here from the model's own dimensions);
#   - re-imported, it gives the very logits of the GGUF adapter, and exported
#     again, the very same files;
#   - an independent float64 reference (tests/ref/peft_reference.py: HF view,
#     PEFT's W + s B A on the fused weight, rotate-half LongRoPE) first
#     reproduces the golden base logits, then matches wisp with the adapter;
#     the same folder with the k and v blocks of qkv_proj's B swapped does not;
#   - `wisp merge` puts every projection's update at its rows of the fused
#     tensors (within 1e-5 of the reference's W + s B A);
#   - a seeded adapter on q, v, gate and down only (zero blocks for k and up);
#   - DoRA (the magnitude of a fused module is its projections', in row order)
#     against the reference, and a grouped-query tiny phi3 (narrower k, v);
#   - refusals: q_proj names on phi3, pairs of different scale in one module.
source "$(dirname "$0")/lib.sh"
need models/synthetic/syn-phi3-longrope-f32.gguf golden/logits/syn-phi3-longrope-f32.json data/tinyshakespeare.txt
PY=/usr/bin/python3
"$PY" -c "import numpy" 2>/dev/null || fail "$PY with numpy is needed (apt-get install python3-numpy)"
REF="$(dirname "$0")/../ref/peft_reference.py"
M=$SHARED/models/synthetic/syn-phi3-longrope-f32.gguf
G=$SHARED/golden/logits/syn-phi3-longrope-f32.json
D=$WORK/peft-phi3
rm -rf "$D" && mkdir -p "$D"
args=(); while IFS= read -r p; do args+=(-p "$p"); done < <("$TOOLS/golden_prompts" "$G")
RANK=4

echo "== a short fine-tune writes a PEFT copy with Phi-3's fused module names and shapes"
head -c 20000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt"
"$WISP" finetune -m "$M" --data "$D/train.txt" --ctx 40 --batch 2 --rank $RANK --steps 4 --lr 3e-3 --seed 5 -q -t 2 \
    -o "$D/ft" 2>/dev/null || fail "finetune"
[ -f "$D/ft/peft/adapter_model.safetensors" ] || fail "no PEFT copy"
"$PY" - "$M" "$D/ft/peft" $RANK "$(dirname "$REF")" <<'EOF' || fail "names/shapes differ from PEFT's for Phi-3"
import json, os, struct, sys
model, folder, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = open(os.path.join(folder, "adapter_model.safetensors"), "rb").read()
(n,) = struct.unpack_from("<Q", buf, 0)
got = {k: v["shape"] for k, v in json.loads(buf[8:8 + n]).items() if k != "__metadata__"}
# the model's dimensions, from its GGUF metadata
sys.path.insert(0, sys.argv[4])
from gguf_reader import Reader
g = Reader(model)
L, d, ffn = g.meta["phi3.block_count"], g.meta["phi3.embedding_length"], g.meta["phi3.feed_forward_length"]
H, KV = g.meta["phi3.attention.head_count"], g.meta["phi3.attention.head_count_kv"]
hd = d // H
q, kv = H * hd, KV * hd
want = {}
for i in range(L):
    for mod, rank, n_in, n_out in (("self_attn.qkv_proj", 3 * r, d, q + 2 * kv), ("self_attn.o_proj", r, q, d),
                                   ("mlp.gate_up_proj", 2 * r, d, 2 * ffn), ("mlp.down_proj", r, ffn, d)):
        want[f"base_model.model.model.layers.{i}.{mod}.lora_A.weight"] = [rank, n_in]
        want[f"base_model.model.model.layers.{i}.{mod}.lora_B.weight"] = [n_out, rank]
if got != want:
    for k in sorted(set(got) | set(want)):
        if got.get(k) != want.get(k):
            print(f"{k}: got {got.get(k)}, PEFT has {want.get(k)}")
    sys.exit(1)
cfg = json.load(open(os.path.join(folder, "adapter_config.json")))
assert sorted(cfg["target_modules"]) == ["down_proj", "gate_up_proj", "o_proj", "qkv_proj"], cfg["target_modules"]
print(f"{len(got)} tensors as PEFT names and shapes them for Phi-3 (qkv_proj rank {3 * r}, gate_up_proj rank {2 * r})")
EOF
ok

echo "== re-imported: the GGUF adapter's logits exactly; exported again: the same files"
"$WISP" logits -m "$M" --lora "$D/ft/adapter.gguf" "${args[@]}" --json --kv-type f32 > "$D/gguf.json" || fail "logits gguf"
"$WISP" logits -m "$M" --lora "$D/ft/peft" "${args[@]}" --json --kv-type f32 > "$D/peft.json" || fail "logits peft"
cmp -s "$D/gguf.json" "$D/peft.json" || fail "the PEFT copy does not give the GGUF adapter's logits"
ok
"$WISP" export "$D/ft/peft" --to peft -m "$M" -o "$D/again" 2>/dev/null || fail "export peft -> peft"
cmp "$D/ft/peft/adapter_model.safetensors" "$D/again/adapter_model.safetensors" || fail "re-export changed the tensors"
cmp "$D/ft/peft/adapter_config.json" "$D/again/adapter_config.json" || fail "re-export changed the config"
ok

echo "== the float64 reference: base vs the golden, then with the adapter vs wisp"
"$PY" "$REF" "$M" "$G" > "$D/ref-base.json" || fail "reference (base)"
"$TOOLS/compare_logits" "$G" "$D/ref-base.json" --tol 0.0001 || fail "the reference does not reproduce the golden base"
ok
"$PY" "$REF" "$M" "$G" --lora "$D/ft/peft" > "$D/ref.json" || fail "reference (adapter)"
"$TOOLS/compare_logits" "$D/ref-base.json" "$D/ref.json" --tol 0.05 >/dev/null && fail "the adapter hardly changes the logits"
"$TOOLS/compare_logits" "$D/ref.json" "$D/peft.json" --tol 0.0001 --greedy-exact || fail "wisp differs from the reference"
ok
echo "== negative control: qkv_proj's B with its k and v blocks swapped"
"$PY" - "$M" "$D/ft/peft" "$D/swapped" <<'EOF' || fail "making the swapped copy"
import json, os, shutil, struct, sys
model, src, dst = sys.argv[1:4]
os.makedirs(dst, exist_ok=True)
shutil.copy(os.path.join(src, "adapter_config.json"), dst)
buf = bytearray(open(os.path.join(src, "adapter_model.safetensors"), "rb").read())
(n,) = struct.unpack_from("<Q", buf, 0)
head = json.loads(buf[8:8 + n])
for name, t in head.items():
    if name.endswith("qkv_proj.lora_B.weight"):
        rows, r = t["shape"]
        row = r * 4 * (rows // 3) # MHA model: q, k, v blocks of the same size (F32)
        b, _ = t["data_offsets"]
        at = 8 + n + b
        k, v = bytes(buf[at + row:at + 2 * row]), bytes(buf[at + 2 * row:at + 3 * row])
        buf[at + row:at + 2 * row], buf[at + 2 * row:at + 3 * row] = v, k
open(os.path.join(dst, "adapter_model.safetensors"), "wb").write(buf)
EOF
"$WISP" logits -m "$M" --lora "$D/swapped" "${args[@]}" --json --kv-type f32 > "$D/swapped.json" || fail "logits swapped"
"$TOOLS/compare_logits" "$D/ref.json" "$D/swapped.json" --tol 0.001 >/dev/null && fail "the k/v row blocks do not matter?"
ok

echo "== wisp merge: every projection's update at its rows of the fused tensors"
"$WISP" merge -m "$M" --lora "$D/ft/peft" -o "$D/merged.gguf" 2>/dev/null || fail "merge"
"$PY" "$REF" "$M" --check-merged "$D/merged.gguf" --lora "$D/ft/peft" || fail "merged weights"
ok

echo "== a seeded adapter on q, v, gate and down only: zero blocks for k and up"
"$TOOLS/lora_fixture" "$M" "$D/part.gguf" --targets 0x55 --seed 9 --alpha 2 2>/dev/null || fail fixture
"$WISP" export "$D/part.gguf" --to peft -m "$M" -o "$D/part" 2>/dev/null || fail "export part"
grep -q '"k_proj"\|"q_proj"\|"gate_proj"' "$D/part/adapter_config.json" && fail "unfused names in a phi3 config"
"$PY" "$REF" "$M" "$G" --lora "$D/part" > "$D/part-ref.json" || fail "reference (part)"
"$WISP" logits -m "$M" --lora "$D/part" "${args[@]}" --json --kv-type f32 > "$D/part-peft.json" || fail "logits part"
"$TOOLS/compare_logits" "$D/part-ref.json" "$D/part-peft.json" --tol 0.0001 --greedy-exact || fail "part: wisp vs reference"
"$WISP" logits -m "$M" --lora "$D/part.gguf" "${args[@]}" --json --kv-type f32 > "$D/part-gguf.json" || fail "logits part.gguf"
cmp -s "$D/part-gguf.json" "$D/part-peft.json" || fail "part: PEFT and GGUF adapters differ"
ok

echo "== DoRA: the fused module's magnitude is its projections' rows, in order"
"$WISP" finetune -m "$M" --data "$D/train.txt" --ctx 40 --batch 2 --rank $RANK --steps 4 --lr 3e-3 --seed 5 -q -t 2 \
    --method dora -o "$D/dora" 2>/dev/null || fail "finetune dora"
"$PY" "$REF" "$M" "$G" --lora "$D/dora/peft" > "$D/dora-ref.json" || fail "reference (dora)"
"$WISP" logits -m "$M" --lora "$D/dora/peft" "${args[@]}" --json --kv-type f32 > "$D/dora.json" || fail "logits dora"
"$TOOLS/compare_logits" "$D/dora-ref.json" "$D/dora.json" --tol 0.0001 --greedy-exact || fail "dora: wisp vs reference"
"$TOOLS/compare_logits" "$D/ref-base.json" "$D/dora-ref.json" --tol 0.01 >/dev/null && fail "dora hardly changes the logits"
"$WISP" export "$D/dora/peft" --to peft -m "$M" -o "$D/dora-again" 2>/dev/null || fail "export dora"
cmp "$D/dora/peft/adapter_model.safetensors" "$D/dora-again/adapter_model.safetensors" || fail "dora re-export differs"
"$WISP" merge -m "$M" --lora "$D/dora/peft" -o "$D/dora-merged.gguf" 2>/dev/null || fail "merge dora"
"$PY" "$REF" "$M" --check-merged "$D/dora-merged.gguf" --lora "$D/dora/peft" || fail "dora merged weights"
ok

echo "== grouped-query phi3 (tiny, 4 heads, 2 kv heads): k and v blocks narrower than q"
"$TOOLS/tiny_model" "$D/gqa.gguf" phi3 f32 || fail "tiny phi3"
"$TOOLS/lora_fixture" "$D/gqa.gguf" "$D/gqa-lora.gguf" --rank 3 --seed 4 --rslora 2>/dev/null || fail fixture
"$WISP" export "$D/gqa-lora.gguf" --to peft -m "$D/gqa.gguf" -o "$D/gqa-peft" 2>/dev/null || fail "export gqa"
"$WISP" merge -m "$D/gqa.gguf" --lora "$D/gqa-peft" -o "$D/gqa-merged.gguf" 2>/dev/null || fail "merge gqa"
"$PY" "$REF" "$D/gqa.gguf" --check-merged "$D/gqa-merged.gguf" --lora "$D/gqa-peft" || fail "gqa merged weights"
"$WISP" logits -m "$D/gqa.gguf" --lora "$D/gqa-lora.gguf" -p "hello" --json > "$D/gqa-gguf.json" || fail "logits gqa gguf"
"$WISP" logits -m "$D/gqa.gguf" --lora "$D/gqa-peft" -p "hello" --json > "$D/gqa-peft.json" || fail "logits gqa peft"
cmp -s "$D/gqa-gguf.json" "$D/gqa-peft.json" || fail "gqa: PEFT and GGUF adapters differ"
ok

echo "== refusals"
# PEFT never saves q_proj for Phi-3: such a folder is someone's mistake, not a Phi-3 adapter
mkdir -p "$D/unfused"
cp "$D/part/adapter_config.json" "$D/unfused/"
"$PY" - "$D/part/adapter_model.safetensors" "$D/unfused/adapter_model.safetensors" <<'EOF' || fail "renaming"
import struct, sys
buf = open(sys.argv[1], "rb").read()
(n,) = struct.unpack_from("<Q", buf, 0)
head = buf[8:8 + n].decode().replace("qkv_proj", "q_proj")
open(sys.argv[2], "wb").write(buf[:8] + head.ljust(n).encode() + buf[8 + n:])  # same length: spaces pad
EOF
out=$("$WISP" logits -m "$M" --lora "$D/unfused" -p "a" --json 2>&1) && fail "q_proj on phi3 accepted"
echo "$out" | grep -q "q_proj" || fail "the refusal does not name the module: $out"
ok
# one PEFT module has one scale: q, k, v pairs of different ranks (alpha / rank) cannot be fused exactly
"$TOOLS/lora_fixture" "$M" "$D/mixed.gguf" --mixed --seed 3 2>/dev/null || fail fixture
out=$("$WISP" export "$D/mixed.gguf" --to peft -m "$M" -o "$D/mixed" 2>&1) && fail "pairs of different scale fused"
echo "$out" | grep -q "scale" || fail "the refusal does not say why: $out"
[ ! -e "$D/mixed" ] || fail "a refused export left a folder"
ok
done_ok
