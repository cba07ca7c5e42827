# Split GGUFs (llama.cpp's gguf-split layout, made by tests/tools/gguf_split.py):
# a model in 2 and 3 shards gives the single file's greedy tokens and logits
# bit for bit through every command that opens a model, and broken sets are
# refused with errors that name the shard and the key.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf models/synthetic/syn-llama-gqa-q4_0.gguf data/tinyshakespeare.txt
command -v python3 >/dev/null || fail "python3 is needed to split the models"
split_tool="$(dirname "$0")/../tools/gguf_split.py"
mkdir -p "$WORK/split"
D=$WORK/split
rm -f "$D"/*.gguf

for model in stories260K synthetic/syn-llama-gqa-q4_0; do
    src="$SHARED/models/$model.gguf"
    name=$(basename "$model")
    for n in 2 3; do
        python3 "$split_tool" "$src" "$D/$name" $n > "$D/list" || fail "$name: splitting into $n failed"
        [ "$(wc -l < "$D/list")" = $n ] || fail "$name: the splitter wrote $(wc -l < "$D/list") files, not $n"; ok
        first="$D/$name-00001-of-0000$n.gguf"
        last="$D/$name-0000$n-of-0000$n.gguf"
        # info: one model, N shards, every tensor
        whole=$("$WISP" info -m "$src" | head -1)
        info=$("$WISP" info -m "$first") || fail "$name/$n: info failed"
        case $info in *" in $n shards"*) ok ;; *) fail "$name/$n: info does not say $n shards: $(echo "$info" | head -1)" ;; esac
        tw=$(echo "$whole" | sed 's/.*v[0-9], \([0-9]*\) tensors.*/\1/')
        ts=$(echo "$info" | head -1 | sed 's/.*v[0-9], \([0-9]*\) tensors.*/\1/')
        [ "$tw" = "$ts" ] || fail "$name/$n: $ts tensors split, $tw whole"; ok
        # greedy tokens, from the first and from the last shard's name
        a=$("$WISP" run -m "$src" -p "Once upon a time" -n 24 --temp 0 -q -t 2) || fail "$name: run failed"
        for m in "$first" "$last"; do
            b=$("$WISP" run -m "$m" -p "Once upon a time" -n 24 --temp 0 -q -t 2) || fail "$name/$n: run on $m failed"
            [ "$a" = "$b" ] || fail "$name/$n: the split model generated different text"; ok
        done
        # logits: bit for bit (the JSON prints every float exactly)
        "$WISP" logits -m "$src" -p "Once upon a time there" --json -t 2 > "$D/whole.json" || fail "$name: logits"
        "$WISP" logits -m "$first" -p "Once upon a time there" --json -t 2 > "$D/split.json" || fail "$name/$n: logits"
        # (all but the first line, which names the file)
        [ "$(wc -l < "$D/whole.json")" -gt 2 ] || fail "$name: logits printed almost nothing"
        cmp -s <(tail -n +2 "$D/whole.json") <(tail -n +2 "$D/split.json") || fail "$name/$n: the split model's logits differ"; ok
        # the plan does not depend on the split, and is exact for it: the
        # planned arena runs, one byte less fails naming the shortfall
        pw=$("$WISP" plan -m "$src" --ctx 96 -t 2 --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
        ps=$("$WISP" plan -m "$first" --ctx 96 -t 2 --json | sed -n 's/.*"total_bytes": \([0-9]*\).*/\1/p')
        [ -n "$pw" ] && [ "$pw" = "$ps" ] || fail "$name/$n: the plans differ: '$pw' whole, '$ps' split"; ok
        "$WISP" run -m "$first" -p "Once upon a time" -n 32 --temp 0 --ctx 96 -t 2 -q --arena "$ps" > /dev/null ||
            fail "$name/$n: the planned arena ($ps) failed"
        out=$("$WISP" run -m "$first" -p "Once upon a time" -n 32 --temp 0 --ctx 96 -t 2 -q --arena $((ps - 1)) 2>&1) &&
            fail "$name/$n: one byte less still ran"
        case $out in *"1 bytes short"*) ok ;; *) fail "$name/$n: unclear error for a short arena: $out" ;; esac
    done
done

# shard 1 with metadata only (gguf-split --no-tensor-first-split)
src=$SHARED/models/stories260K.gguf
python3 "$split_tool" "$src" "$D/meta" 3 --no-tensors-first > /dev/null || fail "splitting with an empty first shard"
"$WISP" info -m "$D/meta-00001-of-00003.gguf" --tensors | grep -q "token_embd.weight" || fail "no tensors listed"; ok
a=$("$WISP" run -m "$src" -p "Once upon a time" -n 24 --temp 0 -q -t 2)
b=$("$WISP" run -m "$D/meta-00002-of-00003.gguf" -p "Once upon a time" -n 24 --temp 0 -q -t 2) ||
    fail "run with an empty first shard failed"
[ "$a" = "$b" ] || fail "an empty first shard changed the text"; ok

# the other commands that take -m open shards the same way
src=$SHARED/models/stories260K.gguf
first=$D/stories260K-00001-of-00003.gguf
t1=$("$WISP" tokenize -m "$src" "Once upon a time") || fail "tokenize whole"
t2=$("$WISP" tokenize -m "$first" "Once upon a time") || fail "tokenize split"
[ "$t1" = "$t2" ] || fail "tokenize differs on the split model"; ok
# fine-tuning on a split base: the same losses, and its adapter runs on either
head -c 8000 "$SHARED/data/tinyshakespeare.txt" > "$D/train.txt" || fail "no training text"
rm -rf "$D"/ft-*
for m in "$src" "$first"; do
    "$WISP" finetune -m "$m" --data "$D/train.txt" --ctx 32 --batch 2 --rank 2 --steps 3 --seed 7 -q -t 2 \
        -o "$D/ft-$(basename "$m" .gguf)" 2>/dev/null || fail "finetune on $m failed"
done
[ "$(wc -l < "$D/ft-stories260K/log.csv")" -ge 4 ] || fail "finetune logged no steps"
# step, loss, lr, grad norm (the columns after are timings)
cmp -s <(cut -d, -f1-4 "$D/ft-stories260K/log.csv") <(cut -d, -f1-4 "$D/ft-stories260K-00001-of-00003/log.csv") ||
    fail "fine-tuning on the split model logged other losses"; ok
a=$("$WISP" run -m "$src" --lora "$D/ft-stories260K/adapter.gguf" -p "Once" -n 16 --temp 0 -q) || fail "run with adapter"
b=$("$WISP" run -m "$first" --lora "$D/ft-stories260K-00001-of-00003/adapter.gguf" -p "Once" -n 16 --temp 0 -q) ||
    fail "run on the split model with its adapter"
[ "$a" = "$b" ] || fail "the adapter trained on the split model generates differently"; ok
e1=$("$WISP" embed -m "$src" -p "The dog ran to the park.") || fail "embed whole"
e2=$("$WISP" embed -m "$first" -p "The dog ran to the park.") || fail "embed split"
[ -n "$e1" ] && [ "$e1" = "$e2" ] || fail "embed differs on the split model"; ok
p1=$("$WISP" perplexity -m "$src" -f "$D/train.txt" --ctx 64 2>&1 | tail -1) || fail "perplexity whole"
p2=$("$WISP" perplexity -m "$first" -f "$D/train.txt" --ctx 64 2>&1 | tail -1) || fail "perplexity split"
[ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "perplexity differs on the split model: '$p1' vs '$p2'"; ok
# quantize reads a split model and writes one file, without the split.* keys
"$WISP" quantize "$first" "$D/merged.gguf" f32 -t 1 2>/dev/null || fail "quantize from a split model failed"
"$WISP" info -m "$D/merged.gguf" | head -1 | grep -q " in .* shards" && fail "the merged file says it has shards"
a=$("$WISP" run -m "$src" -p "Once upon a time" -n 24 --temp 0 -q)
b=$("$WISP" run -m "$D/merged.gguf" -p "Once upon a time" -n 24 --temp 0 -q) || fail "run on the merged file"
[ "$a" = "$b" ] || fail "the merged file generates different text"; ok

# hostile sets: each refused, naming the problem
refused() { # refused WHAT PATTERN MODEL: wisp run must fail with PATTERN in its message
    local out rc
    out=$("$WISP" run -m "$3" -p "Once" -n 2 -q 2>&1); rc=$?
    [ $rc -ne 0 ] || fail "$1: accepted"
    [ $rc -lt 128 ] || fail "$1: crashed ($rc)"
    case $out in *$2*) ok ;; *) fail "$1: expected '$2' in: $out" ;; esac
}
fresh() { rm -f "$D"/h-*.gguf; python3 "$split_tool" "$src" "$D/h" 3 "$@" > /dev/null || fail "splitter $*"; }
H1=$D/h-00001-of-00003.gguf; H2=$D/h-00002-of-00003.gguf; H3=$D/h-00003-of-00003.gguf
fresh; rm "$H2"
refused "missing shard" "h-00002-of-00003.gguf: shard 2 of 3 of the split model is missing" "$H1"
fresh; cp "$H2" "$H3"
refused "duplicated shard" "h-00003-of-00003.gguf: shard 3 of 3 has 'split.no' = 1" "$H1"
fresh --hostile count
refused "wrong split.count" "h-00002-of-00003.gguf: shard 2 of 3 says 'split.count' = 4" "$H1"
fresh --hostile dup-tensor
refused "tensor in two shards" "h-00002-of-00003.gguf: tensor '" "$H1"
refused "tensor in two shards" "is in shard 1 and in shard 2" "$H1"
fresh --hostile total
refused "wrong split.tensors.count" "'split.tensors.count' = " "$H1"
fresh --hostile metadata
refused "metadata in a later shard" "shard 2 of 3 has metadata 'general.name'" "$H1"
fresh; head -c $(( $(stat -c %s "$H2") - 100 )) "$H2" > "$D/t" && mv "$D/t" "$H2"
refused "truncated shard" "h-00002-of-00003.gguf: truncated" "$H1"
# a shard opened under another name (not NAME-0000k-of-0000N) is one file: refused
fresh; cp "$H1" "$D/renamed.gguf"
refused "a lone shard" "shard 1 of 3 of a split model ('split.count' = 3)" "$D/renamed.gguf"
done_ok
