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
done_ok
