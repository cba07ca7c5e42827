#!/usr/bin/env bash
# run.sh FUZZ_DIR SECONDS NAME...: seed each harness's corpus from ../shared
# (at run time: nothing is committed) plus small cases made here (tiny
# models and adapters written by the project's own tools, hand-written JSON),
# run it for SECONDS, and print executions and findings. Exits 1 if any
# harness crashed; a reproducer is then left in FUZZ_DIR/crashes/NAME.
# Environment: WISP_SHARED (reference folder), TOOLS (built test tools),
# WISP (the CLI, for PEFT exports of the tiny adapters).
set -u
. "$(dirname "$0")/../results.sh"
mkdir -p "$1"
dir=$(realpath "$1"); secs=$2; shift 2
names=("$@")
# absolute paths: each harness runs inside its crashes folder
S=$(realpath -m "${WISP_SHARED:-../shared}")
T=$(realpath "${TOOLS:?set TOOLS to the built test tools}")
W=$(realpath "${WISP:?set WISP to the wisp binary}")
seeds="$dir/seeds"
status=0; total=0; passed=0; failed=0
results_open "fuzz"
# the seeds come from ../shared: without them the harnesses would start blind
if [ ! -f "$S/models/stories260K.gguf" ]; then
    echo "FAIL  fuzz: missing $S/models/stories260K.gguf (set WISP_SHARED to the shared reference folder)"
    results_add fail fuzz "missing $S/models/stories260K.gguf"; results_add suite fuzz 0 1 0; exit 1
fi
mkdir -p "$seeds"

seed() { # seed NAME FILE...: link existing files into the corpus
    local c="$dir/corpus/$1"; shift
    for f in "$@"; do [ -f "$f" ] && ln -sf "$(realpath "$f")" "$c/seed-$(basename "$f")"; done
}
le32() { # le32 N: N as 4 little-endian bytes
    printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"
}
lenprefixed() { # lenprefixed A B > OUT: 4-byte length of A, A, then B (the PEFT harness's layout)
    le32 "$(stat -c %s "$1")"; cat "$1" "$2"
}

# ---- small valid inputs, made fresh each run -------------------------------
# Tiny models: kilobytes instead of megabytes, so the GGUF harness runs the
# whole path (parse, plan, init, a token) thousands of times a second.
for spec in "llama f32" "llama q8_0" "llama q4_0" "llama q4_k_m" "qwen2 f16" "qwen2 bf16" "qwen3 f16" "gemma2 f32" \
            "gemma3 q8_0" "phi3 q4_0"; do
    set -- $spec
    "$T/tiny_model" "$seeds/tiny-$1-$2.gguf" $1 $2 || { echo "FAIL  cannot make tiny model $spec"; exit 1; }
done
base_tiny="$seeds/tiny-llama-f32.gguf" base_qwen="$seeds/tiny-qwen2-f16.gguf"
# Tiny adapters for those bases, as GGUF LoRA and as PEFT folders
"$T/lora_fixture" "$base_tiny" "$seeds/lora-tiny-r2.gguf" --rank 2 2>/dev/null
"$T/lora_fixture" "$base_tiny" "$seeds/lora-tiny-mixed-f16.gguf" --mixed --type f16 --rslora 2>/dev/null
"$T/lora_fixture" "$base_qwen" "$seeds/lora-qwen-bf16.gguf" --rank 3 --type bf16 --targets 5 2>/dev/null
# phi3: PEFT's fused qkv_proj/gate_up_proj (q, v, gate, down adapted: zero blocks for k and up)
base_phi3="$seeds/tiny-phi3-q4_0.gguf"
"$T/lora_fixture" "$base_phi3" "$seeds/lora-phi3-f16.gguf" --rank 2 --type f16 --targets 0x55 2>/dev/null
rm -rf "$seeds/peft-tiny" "$seeds/peft-qwen" "$seeds/peft-phi3"
"$W" export "$seeds/lora-tiny-mixed-f16.gguf" --to peft -m "$base_tiny" -o "$seeds/peft-tiny" 2>/dev/null
"$W" export "$seeds/lora-qwen-bf16.gguf" --to peft -m "$base_qwen" -o "$seeds/peft-qwen" 2>/dev/null
"$W" export "$seeds/lora-phi3-f16.gguf" --to peft -m "$base_phi3" -o "$seeds/peft-phi3" 2>/dev/null
for p in peft-tiny peft-qwen peft-phi3; do
    [ -f "$seeds/$p/adapter_model.safetensors" ] &&
        lenprefixed "$seeds/$p/adapter_config.json" "$seeds/$p/adapter_model.safetensors" > "$seeds/$p.peft"
done
golden=$S/golden/adapters/stories260K-r4
[ -f "$golden/peft/adapter_config.json" ] &&
    lenprefixed "$golden/peft/adapter_config.json" "$golden/peft/adapter_model.safetensors" > "$seeds/golden.peft"
# A DoRA adapter (use_dora, lora_magnitude_vector, q/k rows permuted) for stories260K: one step on q/k
if [ -f "$S/models/stories260K.gguf" ] && [ -f "$S/data/tinyshakespeare.txt" ]; then
    head -c 4000 "$S/data/tinyshakespeare.txt" > "$seeds/dora.txt"
    "$W" finetune -m "$S/models/stories260K.gguf" --data "$seeds/dora.txt" --ctx 16 --batch 1 --rank 1 --steps 1 \
        --targets attn_q,attn_k --method dora -q -t 1 --overwrite -o "$seeds/dora-run" 2>/dev/null &&
        lenprefixed "$seeds/dora-run/peft/adapter_config.json" "$seeds/dora-run/peft/adapter_model.safetensors" \
            > "$seeds/dora.peft"
fi
# A prompt-tuning adapter (PEFT PROMPT_TUNING, prompt_embeddings) for stories260K: one step, TEXT init
if [ -f "$S/models/stories260K.gguf" ] && [ -f "$S/data/tinyshakespeare.txt" ]; then
    head -c 4000 "$S/data/tinyshakespeare.txt" > "$seeds/prompt.txt"
    "$W" finetune -m "$S/models/stories260K.gguf" --data "$seeds/prompt.txt" --ctx 16 --batch 1 --steps 1 \
        --method prompt --num-virtual-tokens 3 --prompt-init-text "ROMEO:" -q -t 1 --overwrite -o "$seeds/prompt-run" 2>/dev/null &&
        lenprefixed "$seeds/prompt-run/peft/adapter_config.json" "$seeds/prompt-run/peft/adapter_model.safetensors" \
            > "$seeds/prompt.peftprompt"
    # and a prefix-tuning adapter (PEFT PREFIX_TUNING, per-layer keys and values), read by the same harness
    "$W" finetune -m "$S/models/stories260K.gguf" --data "$seeds/prompt.txt" --ctx 16 --batch 1 --steps 1 \
        --method prefix --num-virtual-tokens 2 -q -t 1 --overwrite -o "$seeds/prefix-run" 2>/dev/null &&
        lenprefixed "$seeds/prefix-run/peft/adapter_config.json" "$seeds/prefix-run/peft/adapter_model.safetensors" \
            > "$seeds/prefix.peftprompt"
fi
# A minimal safetensors file: header, one F16 tensor, metadata
h='{"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}'
{ le32 ${#h}; le32 0; printf '%s' "$h"; printf '\x00\x3c\x00\x40\x00\x42\x00\x44'; } > "$seeds/min.safetensors"
# A minimal llama2.c checkpoint (dim 8, 1 layer, 2 heads, vocab 4, seq 4: zeros) and its tokenizer,
# in the llama2c harness's layout: 4-byte split, checkpoint, tokenizer
{ for v in 8 16 1 2 2 4 4; do le32 $v; done; head -c $((712 * 4)) /dev/zero; } > "$seeds/min-llama2c.bin"
{ le32 3; for t in '<unk>' '<s>' '</s>' 'a'; do le32 0; le32 ${#t}; printf '%s' "$t"; done; } > "$seeds/min-tok.bin"
{ le32 "$(stat -c %s "$seeds/min-llama2c.bin")"; cat "$seeds/min-llama2c.bin" "$seeds/min-tok.bin"; } > "$seeds/min.llama2c"
# tokenizer.json: a byte-level BPE and a SentencePiece-style BPE (byte fallback, "▁" prefix),
# the second with a tokenizer_config.json after a NUL byte
cat > "$seeds/bpe.tokenizer.json" <<'EOF'
{"added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": true}],
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
   {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]},
 "post_processor": null, "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "unk_token": null, "byte_fallback": false,
   "vocab": {"<|endoftext|>": 0, "H": 1, "e": 2, "l": 3, "o": 4, "\u0120": 5, "w": 6, "r": 7, "d": 8, "1": 9,
             "He": 10, "ll": 11, "Hell": 12, "Hello": 13, "\u0120w": 14},
   "merges": ["H e", "l l", "He ll", "Hell o", ["\u0120", "w"]]}}
EOF
{ cat <<'EOF'
{"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": null, "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
 "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
 "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
   "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0x41>": 4, "\u2581": 5, "a": 6, "b": 7, "\u2581a": 8, "ab": 9},
   "merges": ["\u2581 a", "a b"]}}
EOF
  printf '\0{"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": true, "chat_template": "{{ x }}"}'
} > "$seeds/spm.tokenizer.json"
# A reduced copy of SmolLM2's real tokenizer.json (its first 400 ids and the merges among them),
# when Debian's python3 is there to cut it
if [ -f "$S/models/tokenizers/smollm2/tokenizer.json" ] && [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 - "$S/models/tokenizers/smollm2/tokenizer.json" "$seeds/smollm2-400.tokenizer.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1], encoding="utf-8"))
vocab = {k: v for k, v in t["model"]["vocab"].items() if v < 400}
def parts(m): return m.split(" ") if isinstance(m, str) else m
t["model"]["vocab"] = vocab
t["model"]["merges"] = [m for m in t["model"]["merges"] if all(p in vocab for p in parts(m)) and "".join(parts(m)) in vocab]
t["added_tokens"] = [a for a in t["added_tokens"] if a["id"] < 400]
json.dump(t, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
EOF
fi
# Training data: option byte, then the file (0x00: plain text, one document, 1-token windows ...)
if [ -f "$S/data/tinyshakespeare.txt" ]; then
    { printf '\x20'; head -c 1500 "$S/data/tinyshakespeare.txt"; } > "$seeds/shakespeare.text"
    { printf '\x4a'; head -c 1500 "$S/data/tinyshakespeare.txt"; } > "$seeds/shakespeare-blank.text"
fi
{ printf '\x2d'; printf '%s\n' '{"prompt": "Q: Who?\nA:", "completion": " Romeo."}' '' \
    '{"instruction": "Name a king.", "input": "", "output": "Lear"}' \
    '{"instruction": "Reply.", "input": "Good \"morrow\"\u00e9", "output": "Good morrow."}'; } > "$seeds/records.jsonl"
{ printf '\x2d'; printf '%s\n' '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <|im_end|>"}, {"role": "assistant", "content": "Hello."}]}' \
    '{"messages": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}'; } > "$seeds/chats.jsonl"
# Grammars and schemas: the shared GBNF grammars (each with a string to match after a NUL) and JSON Schemas
if [ -x /usr/bin/python3 ] && [ -f "$S/golden/constrained/grammars.json" ]; then
    mkdir -p "$seeds/gbnf" "$seeds/schemas"
    /usr/bin/python3 - "$S/golden/constrained" "$seeds" <<'EOF'
import json, sys, os
d, out = sys.argv[1], sys.argv[2]
for g in json.load(open(os.path.join(d, "grammars.json"), encoding="utf-8")):
    open(os.path.join(out, "gbnf", g["id"]), "wb").write(g["grammar"].encode() + b"\0" + g["match"][-1].encode())
for s in json.load(open(os.path.join(d, "schemas.json"), encoding="utf-8")):
    open(os.path.join(out, "schemas", s["id"]), "w", encoding="utf-8").write(json.dumps(s["schema"]))
EOF
fi
printf '\xff\xff\xff\xff' > "$seeds/state-whole"
printf '\x5c\x00\x00\x00' > "$seeds/state-header"
printf '\xff\xff\xff\xff\x10\x00\x02\x50\x00\xff' > "$seeds/state-edit"

# ---- the harnesses ----------------------------------------------------------
for name in "${names[@]}"; do
    c="$dir/corpus/$name"
    mkdir -p "$c" "$dir/crashes/$name"
    opts=()
    case $name in
        fuzz_gguf)
            seed "$name" "$seeds"/tiny-*.gguf "$S/models/stories260K.gguf" "$S/models/llama-2-tiny-random.gguf"
            printf 'GGUF\003\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$c/min-empty"
            # a split model: two gguf-split shards laid end to end (the harness
            # splits at the second magic)
            python3 "$(dirname "$0")/../tools/gguf_split.py" "$seeds/tiny-llama-q4_0.gguf" "$seeds/split" 2 > /dev/null ||
                { echo "FAIL  cannot split a tiny model"; exit 1; }
            cat "$seeds/split-00001-of-00002.gguf" "$seeds/split-00002-of-00002.gguf" > "$c/split-tiny-llama-q4_0"
            # a 128 KiB cap: every tiny model fits whole; larger seeds still feed the header paths
            opts+=(-max_len=131072 -rss_limit_mb=4096) ;;
        fuzz_json)
            seed "$name" "$S/golden/adapters/stories260K-r4/peft/adapter_config.json" "$S/models/tokenizers/smollm2/config.json"
            printf '{"a":[1,2.5e-3,true,null,"x\\u00e9"],"b":{}}' > "$c/min-doc"
            opts+=(-max_len=65536 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_tokenizer)
            export WISP_FUZZ_VOCABS="$S/models/stories260K.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-smollm2.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-bert-bge.gguf:$S/models/tokenizers/llamacpp-vocab/ggml-vocab-deepseek-coder.gguf"
            for v in "$S"/models/tokenizers/llamacpp-vocab/*.inp; do [ -f "$v" ] && seed "$name" "$v"; done
            opts+=(-max_len=4096) ;;
        fuzz_llama2c)
            if [ -f "$S/models/stories260K.bin" ]; then
                { le32 "$(stat -c %s "$S/models/stories260K.bin")"; cat "$S/models/stories260K.bin" "$S/models/tok512.bin"; } > "$c/seed-stories260K"
            fi
            seed "$name" "$seeds/min.llama2c"
            opts+=(-max_len=1100000) ;;
        fuzz_safetensors)
            seed "$name" "$seeds/min.safetensors" "$seeds"/peft-*/adapter_model.safetensors
            [ -f "$golden/peft/adapter_model.safetensors" ] && ln -sf "$(realpath "$golden/peft/adapter_model.safetensors")" "$c/seed-golden.safetensors"
            opts+=(-max_len=131072 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_peft)
            export WISP_FUZZ_BASES="$base_tiny:$base_qwen:$base_phi3"
            [ -f "$S/models/stories260K.gguf" ] && WISP_FUZZ_BASES+=":$S/models/stories260K.gguf"
            seed "$name" "$seeds"/*.peft
            opts+=(-max_len=131072 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_peft_prompt)
            export WISP_FUZZ_BASES="$base_tiny:$base_qwen"
            [ -f "$S/models/stories260K.gguf" ] && WISP_FUZZ_BASES+=":$S/models/stories260K.gguf"
            seed "$name" "$seeds"/*.peftprompt "$seeds"/*.peft
            opts+=(-max_len=131072 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_lora_gguf)
            export WISP_FUZZ_BASES="$base_tiny:$base_qwen"
            [ -f "$S/models/stories260K.gguf" ] && WISP_FUZZ_BASES+=":$S/models/stories260K.gguf"
            seed "$name" "$seeds"/lora-*.gguf "$golden/adapter.gguf"
            opts+=(-max_len=131072) ;;
        fuzz_hf_tokenizer)
            seed "$name" "$seeds"/*.tokenizer.json
            opts+=(-max_len=131072 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_train_data)
            export WISP_FUZZ_VOCAB="$S/models/stories260K.gguf"
            [ -f "$WISP_FUZZ_VOCAB" ] || export WISP_FUZZ_VOCAB="$base_tiny"
            seed "$name" "$seeds"/*.text "$seeds/records.jsonl" "$seeds/chats.jsonl"
            printf '%s\n' '{"prompt": [{"role": "user", "content": "Q?"}], "completion": [{"role": "assistant", "content": "A."}], "paired_completion": [{"role": "assistant", "content": "B"}]}' > "$c/min-conversational-completion"
            opts+=(-max_len=8192 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_template)
            # the real templates of ../shared/golden/chat, each after an option byte
            if [ -f "$S/golden/chat/templates.json" ] && [ -x /usr/bin/python3 ]; then
                /usr/bin/python3 - "$S/golden/chat/templates.json" "$c" <<'EOF'
import json, sys
for i, t in enumerate(json.load(open(sys.argv[1], encoding="utf-8"))):
    open("%s/seed-template-%d" % (sys.argv[2], i), "wb").write(bytes([0x7c]) + t["template"].encode())
EOF
            fi
            printf '\x1f{%% for m in messages %%}{{ loop.index }}{{ m.content|trim|tojson }}{%% endfor %%}' > "$c/min-loop"
            opts+=(-max_len=8192 -dict="$PWD/tests/fuzz/template.dict") ;;
        fuzz_template_json)
            # option byte 3: the text is both the tools list and the tool calls
            printf '\x03[{"type": "function", "function": {"name": "f\\u00e9\\ud83d\\ude00", "parameters": {"type": "object", "properties": {"x": {"type": "number", "minimum": -1.5e3}}, "required": ["x"]}}}, null, true, 12]' > "$c/min-tools"
            opts+=(-max_len=4096 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_gbnf)
            seed "$name" "$seeds"/gbnf/*
            printf 'root ::= ( [a-z]{1,3} | "(" root ")" )+ [^\\x00-\\x7f]? "."\0(ab)(c)\xc3\xa9.' > "$c/min-grammar"
            opts+=(-max_len=8192) ;;
        fuzz_json_schema)
            seed "$name" "$seeds"/schemas/*
            opts+=(-max_len=16384 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_preference_pairs)
            printf '%s\n' '{"prompt": "Q: Who?\nA:", "chosen": " Romeo \"the\" \u00e9", "rejected": " Juliet."}' '' \
                '{"prompt": "", "chosen": "a", "rejected": "b"}' > "$c/min-pairs"
            printf '%s\n' '{"prompt": "x", "chosen": [{"role": "assistant", "content": "y"}], "rejected": "z"}' > "$c/min-conversational"
            printf '%s\n' '{"prompt": [{"role": "user", "content": "x"}], "chosen": [{"role": "assistant", "content": "y"}], "rejected": [{"role": "assistant", "content": "z\\n"}]}' > "$c/min-conversational-pair"
            opts+=(-max_len=8192 -dict="$PWD/tests/fuzz/json.dict") ;;
        fuzz_train_state)
            export WISP_FUZZ_BASES="$base_tiny"
            seed "$name" "$seeds"/state-*
            opts+=(-max_len=4096) ;;
    esac
    [ -n "$(ls -A "$c")" ] || echo "note: $name has no seeds (../shared missing?); starting from an empty corpus"
    log="$dir/$name.log"
    (cd "$dir/crashes/$name" && "$dir/$name" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 \
        -timeout=20 "$c" ) > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    total=$((total + ${execs:-0}))
    if [ $rc -ne 0 ]; then
        status=1; failed=$((failed+1))
        echo "FAIL  $name: exit $rc after ${execs:-?} executions; reproducer in $dir/crashes/$name"
        results_add fail "fuzz: $name" "exit $rc after ${execs:-?} executions; reproducer in $dir/crashes/$name"
        grep -m5 -E "ERROR|SUMMARY|runtime error" "$log" | sed 's/^/      | /'
    elif [ "${execs:-0}" -eq 0 ]; then # a harness that ran nothing proved nothing
        status=1; failed=$((failed+1))
        echo "FAIL  $name: no input was executed"; tail -n 5 "$log" | sed 's/^/      | /'
        results_add fail "fuzz: $name" "no input was executed"
    else
        passed=$((passed+1))
        printf 'PASS  %-18s %9s executions in %ss (%s/s), corpus %s inputs\n' "$name" "${execs:-?}" "$secs" \
            "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "$(ls "$c" | wc -l)"
    fi
done
echo "fuzz: $total executions in total"
[ ${#names[@]} -gt 0 ] || { status=1; failed=1; echo "FAIL  no fuzz harness to run"; results_add fail fuzz "no harness to run"; }
results_add suite "fuzz (${secs} s each)" "$passed" "$failed" 0
echo "fuzz: $passed passed, $failed failed, 0 skipped"
exit $status
