/* Attention over an F16 cache, grouped (each block of keys and values
 * converted once for all the query heads of a kv head, core/attention.c)
 * against per head, on every kernel level this build and CPU offer:
 *  - levels that ask for the grouped path (convert_kv_once: the 128-bit
 *    levels without hardware halves, run by make test-wasm / test-arm) must
 *    give the per-head results bit for bit;
 *  - the others, forced onto it, agree within 1e-5 of the output's scale
 *    (their F16 and F32 score loops may sum in another order);
 *  - the fused path (a kv head's query heads scored and summed together by
 *    the *_heads kernels: AVX-512's own, the reference's loops elsewhere,
 *    forced) agrees within 1e-5 too (its key tiles end elsewhere);
 *  - any split of the work over threads gives the same bits, on each path.
 * Shapes cover several group sizes, head sizes with remainders, prompts
 * crossing key blocks and a single decoded token. */
#include "attention.h"
#include "check.h"
#include "half.h"
#include "ref_model.h"
#include "simd.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { BLOCK = 16 }; /* keys per online-softmax block: smaller than the forward pass's, for more block edges */

typedef struct shape {
    int32_t n_heads, n_kv_heads, head_dim, n_tok, pos0;
} shape;

static uint64_t rng_state;

static float rng_sym(void) { return (float)(2.0 * ref_uniform(&rng_state) - 1.0); }

/* out = attention over the caches with kernels k, grouped when kv_f32 is
 * given, fused when rows (of scores per worker) is the group size, the
 * work split over nth workers. */
static void run(const wisp_kernels *k, const shape *s, const float *q, const uint16_t *kc, const uint16_t *vc,
                int32_t kv_stride, float *kv_f32, int32_t rows, int nth, float *out) {
    float *scores = calloc((size_t)nth * BLOCK * (size_t)(rows > 1 ? rows : 1), sizeof(float));
    wisp_attention_args a = {
        .k = k,
        .q = q,
        .out = out,
        .k_cache = kc,
        .v_cache = vc,
        .kv_stride = kv_stride,
        .kv_f16 = 1,
        .n_tok = s->n_tok,
        .pos0 = s->pos0,
        .n_heads = s->n_heads,
        .n_kv_heads = s->n_kv_heads,
        .head_dim = s->head_dim,
        .scale = 1.0f / sqrtf((float)s->head_dim),
        .scores = scores,
        .block = BLOCK,
        .scores_rows = rows,
        .kv_f32 = kv_f32,
    };
    for (int ith = 0; ith < nth; ith++) wisp_attention_job(&a, ith, nth);
    free(scores);
}

static void check_shape(const wisp_kernels *level, const shape *s) {
    wisp_kernels k = *level;
    const bool asks = k.convert_kv_once;
    k.convert_kv_once = true; /* force the grouped path where the level would not take it */
    const int32_t hd = s->head_dim, kv_stride = s->pos0 + s->n_tok + 3;
    const size_t q_n = (size_t)s->n_tok * s->n_heads * hd, kv_n = (size_t)s->n_kv_heads * kv_stride * hd;
    float *q = malloc(q_n * sizeof *q), *per_head = malloc(q_n * sizeof(float)), *grouped = malloc(q_n * sizeof(float)),
          *split = malloc(q_n * sizeof(float));
    uint16_t *kc = malloc(kv_n * sizeof *kc), *vc = malloc(kv_n * sizeof *vc);
    for (size_t i = 0; i < q_n; i++) q[i] = 2.0f * rng_sym();
    for (size_t i = 0; i < kv_n; i++) {
        kc[i] = wisp_f32_to_f16(rng_sym());
        vc[i] = wisp_f32_to_f16(i % 97 == 0 ? 3e-6f * rng_sym() : rng_sym()); /* some subnormal halves */
    }
    const int max_threads = 3;
    float *kv_f32 = malloc((size_t)max_threads * 2 * BLOCK * hd * sizeof(float));
    CHECK(wisp_attention_grouped(&k, 1, s->n_heads, s->n_kv_heads), "%s: %d/%d heads should take the grouped path",
          k.name, s->n_heads, s->n_kv_heads);

    run(&k, s, q, kc, vc, kv_stride, NULL, 1, 1, per_head);
    run(&k, s, q, kc, vc, kv_stride, kv_f32, 1, 1, grouped);
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < q_n; i++) {
        worst = fmax(worst, fabs((double)grouped[i] - per_head[i]));
        scale = fmax(scale, fabs((double)per_head[i]));
    }
    if (asks)
        CHECK(memcmp(grouped, per_head, q_n * sizeof(float)) == 0,
              "%s heads %d/%d hd %d tokens %d at %d: grouped differs from per head (worst %.3g)", k.name, s->n_heads,
              s->n_kv_heads, hd, s->n_tok, s->pos0, worst);
    else
        CHECK(worst <= 1e-5 * scale, "%s heads %d/%d hd %d tokens %d at %d: grouped differs by %.3g (scale %.3g)",
              k.name, s->n_heads, s->n_kv_heads, hd, s->n_tok, s->pos0, worst, scale);
    for (int nth = 2; nth <= max_threads; nth++) {
        run(&k, s, q, kc, vc, kv_stride, kv_f32, 1, nth, split);
        CHECK(memcmp(grouped, split, q_n * sizeof(float)) == 0, "%s heads %d/%d hd %d: %d workers changed the result",
              k.name, s->n_heads, s->n_kv_heads, hd, nth);
    }

    const int32_t group = s->n_heads / s->n_kv_heads;
    k.attn_heads_fused = true; /* force the fused path where the level would not take it */
    CHECK(wisp_attention_fused(&k, 1, s->n_heads, s->n_kv_heads), "%s: %d/%d heads should take the fused path", k.name,
          s->n_heads, s->n_kv_heads);
    float *fused = grouped; /* reused */
    run(&k, s, q, kc, vc, kv_stride, NULL, group, 1, fused);
    worst = 0.0;
    for (size_t i = 0; i < q_n; i++) worst = fmax(worst, fabs((double)fused[i] - per_head[i]));
    CHECK(worst <= 1e-5 * scale, "%s heads %d/%d hd %d tokens %d at %d: fused differs by %.3g (scale %.3g)", k.name,
          s->n_heads, s->n_kv_heads, hd, s->n_tok, s->pos0, worst, scale);
    for (int nth = 2; nth <= max_threads; nth++) {
        run(&k, s, q, kc, vc, kv_stride, NULL, group, nth, split);
        CHECK(memcmp(fused, split, q_n * sizeof(float)) == 0, "%s heads %d/%d hd %d: %d workers changed the fused result",
              k.name, s->n_heads, s->n_kv_heads, hd, nth);
    }
    free(q);
    free(per_head);
    free(grouped);
    free(split);
    free(kc);
    free(vc);
    free(kv_f32);
}

int main(void) {
    static const shape shapes[] = {
        {8, 4, 8, 70, 0},    /* stories260K's heads, a prompt over several key blocks */
        {9, 3, 64, 5, 62},   /* SmolLM2's */
        {6, 2, 20, 3, 130},  /* head size with remainders for every vector width */
        {4, 1, 64, 1, 200},  /* one decoded token, all heads on one kv head */
        {32, 4, 64, 2, 90},  /* TinyLlama's: 8 heads per kv head, two tiles of the fused kernels */
        {14, 2, 100, 1, 40}, /* Qwen2.5-0.5B's group of 7; a head wider than 64 with a ragged end */
    };
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    const char *names[8];
    int n_levels = wisp_simd_levels(&cpu, names, 8);
    int grouped_levels = 0;
    for (int i = 0; i < n_levels; i++) {
        const wisp_kernels *table;
        wisp_error err = {0};
        if (wisp_simd_select(&cpu, names[i], &table, &err) != WISP_OK) continue;
        wisp_kernels k = *table;
        wisp_kernels_complete(&k);
        grouped_levels += k.convert_kv_once;
        printf("  %s: %s; %s\n", k.name, k.convert_kv_once ? "takes the grouped path: bit for bit" : "forced onto it: within 1e-5",
               k.attn_heads_fused ? "takes the fused path: within 1e-5" : "forced onto the fused path: within 1e-5");
        rng_state = 7;
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) check_shape(&k, &shapes[j]);
    }
    if (!grouped_levels) printf("  (no level here takes the grouped path itself: make test-wasm / test-arm run those)\n");
    return check_report("test_attention_grouped");
}
