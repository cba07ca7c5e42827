/* libFuzzer harness: arbitrary bytes as a GGUF model. Parse, walk every
 * pair and tensor, read hyperparameters, plan, and when the plan is small,
 * initialise a context (tokenizer tables included) and run a few tokens,
 * with the scalar reference kernels or (inputs of odd length) the best SIMD
 * level this CPU has, so hostile shapes reach the fast paths too. An input
 * holding a second "GGUF" magic is also read as a split model: the bytes
 * before it and from it on as shards 1 and 2 (wisp_gguf_link_shards), so the
 * split checks and the walks across shards see hostile sets too. */
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "simd.h"
#include "tokenizer.h"
#include "wisp.h"

static const wisp_kernels *best_kernels(void) {
    static const wisp_kernels *best;
    static bool done;
    if (!done) {
        wisp_cpu_features cpu = {0};
#if defined(__x86_64__)
        cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni");
        cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
        wisp_error err;
        if (wisp_simd_select(&cpu, NULL, &best, &err)) best = NULL;
        done = true;
    }
    return best;
}

#define MAX_ARENA (8u << 20)

static volatile uint8_t touched; /* reads of tensor bytes that must not be optimised away */

/* Walk, plan, and when small, run the model g stands for. */
static void exercise(const wisp_gguf *model, size_t size) {
    const wisp_gguf g = *model;
    wisp_error err;
    {
        size_t cur = 0;
        wisp_gguf_kv kv;
        while (wisp_gguf_next_kv(&g, &cur, &kv)) {
            double d;
            int64_t i;
            (void)wisp_gguf_kv_number(&kv, 0, &d);
            (void)wisp_gguf_kv_int(&kv, kv.count ? kv.count - 1 : 0, &i);
        }
        cur = 0;
        wisp_gguf_tensor t;
        while (wisp_gguf_next_tensor(&g, &cur, &t))
            if (t.nbytes) touched ^= ((const uint8_t *)t.data)[t.nbytes - 1]; /* extents must be readable */
        wisp_config cfg = wisp_config_default();
        cfg.n_ctx = 8;
        cfg.n_batch = 4;
        cfg.max_text_bytes = 64;
        cfg.kernels = size & 1 ? best_kernels() : NULL;
        wisp_memory_plan plan;
        if (wisp_plan(&g, &cfg, &plan, &err) == WISP_OK && plan.total <= MAX_ARENA) {
            void *arena = aligned_alloc(64, (plan.total + 64) & ~(size_t)63);
            wisp_ctx *ctx;
            if (arena && wisp_init(&ctx, &g, &cfg, arena, plan.total, &err) == WISP_OK) {
                int32_t ids[16];
                size_t n = 0;
                if (wisp_tokenize_text(ctx, "Hi there, fuzz!", 15, WISP_TOKENIZE_ADD_BOS, ids, 16, &n, &err) ==
                        WISP_OK && n > 0) {
                    if (n > 4) n = 4;
                    if (wisp_eval(ctx, ids, (int32_t)n, &err) == WISP_OK) {
                        char piece[64];
                        wisp_sampler s;
                        wisp_sampler_params p = wisp_sampler_defaults();
                        wisp_sampler_init(&s, &p);
                        int32_t next = wisp_sample(ctx, &s, ids, n);
                        if (next >= 0) wisp_token_piece(wisp_ctx_tokenizer(ctx), next, piece, sizeof piece);
                    }
                }
            }
            free(arena);
        }
    }
}

/* A private, 64-byte aligned copy so F32 tensors are aligned as in mmap. */
static uint8_t *aligned_copy(const uint8_t *data, size_t size) {
    uint8_t *bytes = aligned_alloc(64, (size + 64) & ~(size_t)63);
    if (bytes) memcpy(bytes, data, size);
    return bytes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *bytes = aligned_copy(data, size);
    if (!bytes) return 0;
    wisp_gguf g;
    wisp_error err;
    if (wisp_gguf_open(&g, bytes, size, &err) == WISP_OK) exercise(&g, size);
    free(bytes);
    /* two shards, split at the second magic */
    const uint8_t *second = NULL;
    for (size_t i = 4; !second && i + 4 <= size; i++)
        if (memcmp(data + i, "GGUF", 4) == 0) second = data + i;
    if (!second) return 0;
    size_t n0 = (size_t)(second - data), n1 = size - n0;
    uint8_t *b0 = aligned_copy(data, n0), *b1 = aligned_copy(second, n1);
    wisp_gguf shards[2];
    uint32_t bad;
    if (b0 && b1 && wisp_gguf_open(&shards[0], b0, n0, &err) == WISP_OK &&
        wisp_gguf_open(&shards[1], b1, n1, &err) == WISP_OK && wisp_gguf_link_shards(shards, 2, &bad, &err) == WISP_OK)
        exercise(&shards[0], size);
    free(b0);
    free(b1);
    return 0;
}
