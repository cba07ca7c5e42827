/* libFuzzer harness: arbitrary bytes as a GGUF model. Parse, walk every
 * pair and tensor, read hyperparameters, plan, and when the plan is small,
 * initialise a context (tokenizer tables included) and run a few tokens,
 * with the scalar reference kernels or (inputs of odd length) the best SIMD
 * level this CPU has, so hostile shapes reach the fast paths too. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private, 64-byte aligned copy so F32 tensors are aligned as in mmap */
    uint8_t *bytes = aligned_alloc(64, (size + 64) & ~(size_t)63);
    if (!bytes) return 0;
    memcpy(bytes, data, size);
    wisp_gguf g;
    wisp_error err;
    if (wisp_gguf_open(&g, bytes, size, &err) == WISP_OK) {
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
    free(bytes);
    return 0;
}
