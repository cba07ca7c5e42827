# `wisp plan --c-header` is what firmware sizes its static arena from: a C
# program that takes every setting from the header (through the firmware's
# embedded/common/planned_config.h) must initialise with exactly
# WISP_ARENA_BYTES and fail with one byte less, for inference and for
# training plans; the per-part macros must add up to the total.
source "$(dirname "$0")/lib.sh"
need models/stories260K.gguf
repo=$(cd "$(dirname "$0")/../.." && pwd)
lib=$(dirname "$WISP")/libwisp.a
# The probe links the native library beside the CLI; cross runs (qemu-user)
# wrap the CLI elsewhere and have no host library to link.
[ -f "$lib" ] || skip_platform "no host libwisp.a next to $WISP (a cross-target run)"
cc=${CC:-cc}
san=() # a sanitized library (make test-sanitize) links only with its runtimes
[ -n "$(asan_runtime)" ] && san=(-fsanitize=address,undefined)
# ... and one instrumented for coverage (make coverage) with gcov's
nm "$lib" 2>/dev/null | grep -q ' U __gcov_init' && san+=(--coverage)
model=$SHARED/models/stories260K.gguf

cat >"$WORK/plan_header_probe.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "gguf.h"
#include "wisp_plan_under_test.h"
#include "planned_config.h"

int main(int argc, char **argv) {
    if (argc != 3) return 9;
    FILE *f = fopen(argv[1], "rb");
    if (!f || fseek(f, 0, SEEK_END)) return 10;
    long n = ftell(f);
    void *bytes = malloc((size_t)n);
    rewind(f);
    if (!bytes || fread(bytes, 1, (size_t)n, f) != (size_t)n) return 11;
    fclose(f);
    size_t parts = WISP_PLAN_PART_CONTEXT_BYTES + WISP_PLAN_PART_TOKENIZER_BYTES + WISP_PLAN_PART_KV_CACHE_BYTES +
                   WISP_PLAN_PART_SCRATCH_BYTES + WISP_PLAN_PART_LOGITS_BYTES + WISP_PLAN_PART_SAMPLER_BYTES +
                   WISP_PLAN_PART_TEXT_BYTES + WISP_PLAN_PART_ADAPTERS_BYTES + WISP_PLAN_PART_LORA_BYTES +
                   WISP_PLAN_PART_GRADIENTS_BYTES + WISP_PLAN_PART_OPTIMIZER_BYTES + WISP_PLAN_PART_ACTIVATIONS_BYTES +
                   WISP_PLAN_PART_TRAIN_SCRATCH_BYTES;
    if (parts != WISP_ARENA_BYTES) {
        printf("parts add up to %zu, not %zu\n", parts, (size_t)WISP_ARENA_BYTES);
        return 12;
    }
    wisp_gguf g;
    wisp_error err = {0};
    if (wisp_gguf_open(&g, bytes, (size_t)n, &err)) return 13;
    wisp_config cfg = fw_planned_config();
    cfg.train.total_steps = 1;
    size_t size = (size_t)WISP_ARENA_BYTES - (size_t)atoi(argv[2]);
    void *arena = aligned_alloc(64, (size + 63) / 64 * 64);
    wisp_ctx *ctx;
    wisp_status st = wisp_init(&ctx, &g, &cfg, arena, size, &err);
    printf("%zu bytes: %s\n", size, st ? err.message : "ok");
    free(arena);
    free(bytes);
    return st ? 1 : 0;
}
EOF

probe() { # probe NAME PLAN-ARGS...: build the probe against that header, run with the plan and one byte less
    local name=$1
    shift
    "$WISP" plan -m "$model" -t 1 --c-header "$@" >"$WORK/wisp_plan_under_test.h" || fail "$name: wisp plan failed"
    grep -q '^#define WISP_ARENA_BYTES [0-9]*u$' "$WORK/wisp_plan_under_test.h" || fail "$name: no WISP_ARENA_BYTES"
    "$cc" -std=c11 -Wall -Wextra -Werror -I"$WORK" -I"$repo/core" -I"$repo/simd" -I"$repo/adapters" \
        -I"$repo/embedded/common" "$WORK/plan_header_probe.c" "$lib" "${san[@]}" -lm -lpthread -o "$WORK/plan_header_probe" ||
        fail "$name: the header does not compile"
    "$WORK/plan_header_probe" "$model" 0 >"$WORK/probe.out" || fail "$name: the planned arena failed: $(cat "$WORK/probe.out")"
    ok
    "$WORK/plan_header_probe" "$model" 1 >"$WORK/probe.out" && fail "$name: one byte less still initialised"
    grep -q "1 bytes short" "$WORK/probe.out" || fail "$name: unclear error for a short arena: $(cat "$WORK/probe.out")"
    ok
    echo "$name: $(head -c 200 "$WORK/probe.out")"
}

probe inference --ctx 96 --batch 8 --text-bytes 64
probe inference-f32-kv --ctx 40 --batch 4 --kv-type f32
probe training --train --ctx 16 --batch 1 --rank 4 --targets attn_q,attn_v --checkpointing --loss-chunk 4 --text-bytes 16
# With --grammar the header also sizes the trie, grammar and guide blocks a
# guided firmware declares statically (embedded/firmware/classify.c): each
# initialises with exactly its planned bytes and fails with one byte less.
cat >"$WORK/grammar_header_probe.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "wisp_plan_under_test.h"
#include "planned_config.h"
#include "guide.h"

int main(int argc, char **argv) {
    if (argc != 4) return 9;
    FILE *f = fopen(argv[1], "rb");
    if (!f || fseek(f, 0, SEEK_END)) return 10;
    long n = ftell(f);
    void *bytes = malloc((size_t)n);
    rewind(f);
    if (!bytes || fread(bytes, 1, (size_t)n, f) != (size_t)n) return 11;
    fclose(f);
    int short_block = atoi(argv[3]); /* 0 none, 1 trie, 2 grammar, 3 guide */
    wisp_gguf g;
    wisp_error err = {0};
    if (wisp_gguf_open(&g, bytes, (size_t)n, &err)) return 13;
    wisp_config cfg = fw_planned_config();
    void *arena = aligned_alloc(64, (WISP_ARENA_BYTES + 63) / 64 * 64);
    wisp_ctx *ctx;
    if (wisp_init(&ctx, &g, &cfg, arena, WISP_ARENA_BYTES, &err)) return 14;
    size_t sizes[3] = {WISP_PLAN_TOKEN_TRIE_BYTES, WISP_PLAN_GRAMMAR_BYTES, WISP_PLAN_GUIDE_BYTES};
    if (short_block) sizes[short_block - 1]--;
    void *mem[3];
    for (int i = 0; i < 3; i++) mem[i] = aligned_alloc(64, (sizes[i] + 64) / 64 * 64);
    static wisp_token_trie trie;
    static wisp_guide guide;
    const wisp_grammar *gr = NULL;
    const wisp_matcher_limits lim = WISP_PLAN_GRAMMAR_LIMITS;
    wisp_arena a;
    wisp_arena_init(&a, mem[0], sizes[0]);
    wisp_status st = wisp_token_trie_init(&trie, wisp_ctx_tokenizer(ctx), &a, &err);
    if (!st) {
        wisp_arena_init(&a, mem[1], sizes[1]);
        st = wisp_grammar_compile(argv[2], strlen(argv[2]), &a, &gr, &err);
    }
    if (!st) {
        wisp_arena_init(&a, mem[2], sizes[2]);
        st = wisp_guide_init(&guide, &trie, gr, &lim, &a, &err);
    }
    printf("block %d short: %s\n", short_block, st ? err.message : "ok");
    for (int i = 0; i < 3; i++) free(mem[i]);
    free(arena);
    free(bytes);
    return st ? 1 : 0;
}
EOF
gbnf='root ::= " positive" | " negative" | " neutral"'
"$WISP" plan -m "$model" -t 1 --ctx 64 --batch 8 --text-bytes 64 --c-header --grammar "$gbnf" \
    --grammar-limits 64,512,512,256,2048 >"$WORK/wisp_plan_under_test.h" || fail "grammar: wisp plan failed"
grep -q '^#define WISP_PLAN_GUIDE_BYTES [0-9]*u' "$WORK/wisp_plan_under_test.h" || fail "grammar: no WISP_PLAN_GUIDE_BYTES"
"$cc" -std=c11 -Wall -Wextra -Werror -I"$WORK" -I"$repo/core" -I"$repo/simd" -I"$repo/adapters" \
    -I"$repo/embedded/common" "$WORK/grammar_header_probe.c" "$lib" "${san[@]}" -lm -lpthread -o "$WORK/grammar_header_probe" ||
    fail "grammar: the header does not compile"
"$WORK/grammar_header_probe" "$model" "$gbnf" 0 >"$WORK/probe.out" || fail "grammar: the planned blocks failed: $(cat "$WORK/probe.out")"
ok
for b in 1 2 3; do
    "$WORK/grammar_header_probe" "$model" "$gbnf" $b >"$WORK/probe.out" && fail "grammar: block $b one byte short still initialised"
    grep -q "short" "$WORK/probe.out" || fail "grammar: unclear error for block $b: $(cat "$WORK/probe.out")"
    ok
    echo "grammar: $(cat "$WORK/probe.out")"
done
"$WISP" plan -m "$model" --grammar "$gbnf" >/dev/null 2>&1 && fail "plan --grammar without --c-header was accepted"
ok
done_ok
