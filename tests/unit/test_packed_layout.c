/* The packed-weights part (core/packed_weights.c) on every CPU. Its one
 * layout function both measures the part for wisp_plan and carves it in
 * wisp_init, but only kernel levels that pack (AVX-512 VNNI) reach it, which
 * many machines lack. A stand-in level here "packs" F16, Q8_0 and Q4_K: its
 * packed form is the rows copied in order, padded to whole 16-row groups
 * (plus a few bytes, so that rounding to the arena's alignment matters).
 * For models of several families and weight types:
 *   - init with exactly the plan works, one byte less fails with WISP_ERR_ARENA;
 *   - the part equals what the loaded model's weights and vectors need,
 *     summed here independently;
 *   - every weight of a packed type points at a copy inside the arena that
 *     holds its rows, every other weight has none, and the platform was told
 *     each original's bytes (wisp_config.weight_packed);
 *   - every vector (output norm, RoPE factors, layer norms and biases) was
 *     copied into the arena with the file's values, or stays in the file when
 *     nothing is packed;
 *   - with in_place_weights the part is 0 and nothing is copied. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "context.h"
#include "kernels.h"
#include "types.h"

#define PACKED_TYPES 3
static const int packed_types[PACKED_TYPES] = {WISP_TYPE_F16, WISP_TYPE_Q8_0, WISP_TYPE_Q4_K};

static bool packs(int type) {
    for (int i = 0; i < PACKED_TYPES; i++)
        if (packed_types[i] == type) return true;
    return false;
}

static size_t groups_of(int64_t rows) { return (size_t)((rows + WISP_PACK_GROUP - 1) / WISP_PACK_GROUP); }

static size_t bytes_of(int type, int64_t rows, int64_t cols) {
    return groups_of(rows) * WISP_PACK_GROUP * wisp_type_row_bytes(type, cols) + 3;
}
static size_t bytes_f16(int64_t rows, int64_t cols) { return bytes_of(WISP_TYPE_F16, rows, cols); }
static size_t bytes_q8_0(int64_t rows, int64_t cols) { return bytes_of(WISP_TYPE_Q8_0, rows, cols); }
static size_t bytes_q4_k(int64_t rows, int64_t cols) { return bytes_of(WISP_TYPE_Q4_K, rows, cols); }

/* Rows of groups [g0, g1), copied in place. */
static void copy_rows(uint8_t *dst, const uint8_t *src, size_t row_bytes, int64_t rows, int64_t cols, int64_t g0,
                      int64_t g1) {
    (void)cols;
    int64_t r0 = g0 * WISP_PACK_GROUP, r1 = g1 * WISP_PACK_GROUP < rows ? g1 * WISP_PACK_GROUP : rows;
    if (r1 > r0) memcpy(dst + (size_t)r0 * row_bytes, src + (size_t)r0 * row_bytes, (size_t)(r1 - r0) * row_bytes);
}

static wisp_kernels standin_level(void) {
    wisp_kernels k = *wisp_kernels_reference();
    k.name = "packing stand-in";
    size_t (*const bytes[PACKED_TYPES])(int64_t, int64_t) = {bytes_f16, bytes_q8_0, bytes_q4_k};
    for (int i = 0; i < PACKED_TYPES; i++) {
        k.packing[packed_types[i]].bytes = bytes[i];
        k.packing[packed_types[i]].pack = copy_rows;
    }
    return k;
}

typedef struct told {
    size_t bytes;
    int count;
} told;

static void on_packed(void *user, const void *data, size_t bytes) {
    told *t = user;
    t->bytes += bytes * (data != NULL);
    t->count++;
}

typedef struct arena_block {
    uint8_t *mem;
    size_t size;
} arena_block;

static bool inside(const arena_block *a, const void *p) {
    return (const uint8_t *)p >= a->mem && (const uint8_t *)p < a->mem + a->size;
}

/* The part as summed from the loaded (in place) model; *packed_originals
 * gets the original bytes of the weights that pack. */
static size_t expected_part(const wisp_model *m, size_t *packed_originals, int *n_packed) {
    const wisp_hparams *hp = &m->hp;
    size_t weights = 0;
    *packed_originals = 0;
    *n_packed = 0;
    for (int i = 0; i < 1 + hp->n_layers * WISP_PROJ_COUNT; i++) {
        int l = (i - 1) / WISP_PROJ_COUNT, p = (i - 1) % WISP_PROJ_COUNT;
        const wisp_weight *w = i == 0 ? &m->output : &m->layers[l].proj[p];
        if (!packs(w->type)) continue;
        weights += wisp_arena_round(bytes_of(w->type, w->rows, w->cols));
        *packed_originals += (size_t)w->rows * w->row_bytes;
        (*n_packed)++;
    }
    if (!weights) return 0;
    size_t vectors = 0, half_rope = (size_t)hp->rope_dim / 2;
    const float *globals[4] = {m->output_norm, m->rope_freqs, m->rope_long, m->rope_short};
    for (int v = 0; v < 4; v++)
        if (globals[v]) vectors += wisp_arena_round((v ? half_rope : (size_t)hp->dim) * sizeof(float));
    for (int l = 0; l < hp->n_layers; l++)
        for (int v = 0; v < WISP_VEC_COUNT; v++)
            if (m->layers[l].vec[v]) vectors += wisp_arena_round((size_t)wisp_layer_vec_len(hp, v) * sizeof(float));
    return weights + vectors;
}

static void check_vector(const arena_block *a, const float *got, const float *file, int64_t n, bool copied,
                         const char *rel, const char *what) {
    CHECK(!got == !file, "%s: %s present in one context only", rel, what);
    if (!got || !file) return;
    CHECK(inside(a, got) == copied, "%s: %s should %s", rel, what,
          copied ? "be copied into the arena" : "stay in the file");
    CHECK(memcmp(got, file, (size_t)n * sizeof(float)) == 0, "%s: %s differs from the file's", rel, what);
}

static void check_model(const char *rel, const wisp_kernels *level) {
    const char *path = shared_path_or_skip("test_packed_layout", rel);
    size_t size;
    unsigned char *bytes = read_file(path, &size);
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(bytes && wisp_gguf_open(&g, bytes, size, &err) == WISP_OK, "%s: %s", rel, err.message);

    /* the model in place, as the reference for sizes and values */
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 32;
    cfg.kernels = level;
    cfg.in_place_weights = true;
    wisp_memory_plan in_place;
    REQUIRE(wisp_plan(&g, &cfg, &in_place, &err) == WISP_OK, "%s: plan in place: %s", rel, err.message);
    CHECK(in_place.part[WISP_PART_PACKED_WEIGHTS] == 0, "%s: in place, the part is %zu bytes", rel,
          in_place.part[WISP_PART_PACKED_WEIGHTS]);
    arena_block file_ctx = {aligned_alloc(64, (in_place.total + 63) / 64 * 64), in_place.total};
    wisp_ctx *ref = NULL;
    REQUIRE(wisp_init(&ref, &g, &cfg, file_ctx.mem, file_ctx.size, &err) == WISP_OK, "%s: init in place: %s", rel,
            err.message);
    const wisp_model *rm = wisp_ctx_model(ref);
    size_t originals;
    int n_packed;
    size_t want = expected_part(rm, &originals, &n_packed);

    cfg.in_place_weights = false;
    told t = {0, 0};
    cfg.weight_packed = on_packed;
    cfg.weight_packed_user = &t;
    wisp_memory_plan plan;
    REQUIRE(wisp_plan(&g, &cfg, &plan, &err) == WISP_OK, "%s: plan: %s", rel, err.message);
    CHECK(plan.part[WISP_PART_PACKED_WEIGHTS] == want, "%s: planned %zu packed bytes, the model needs %zu", rel,
          plan.part[WISP_PART_PACKED_WEIGHTS], want);
    CHECK(plan.total == in_place.total + want, "%s: the plan's total grew by %zu, not %zu", rel,
          plan.total - in_place.total, want);
    arena_block a = {aligned_alloc(64, (plan.total + 63) / 64 * 64), plan.total};
    wisp_ctx *ctx = NULL;
    CHECK(wisp_init(&ctx, &g, &cfg, a.mem, plan.total - 1, &err) == WISP_ERR_ARENA && !ctx,
          "%s: one byte less than the plan must fail", rel);
    t = (told){0, 0};
    wisp_status st = wisp_init(&ctx, &g, &cfg, a.mem, plan.total, &err);
    CHECK(st == WISP_OK, "%s: init with the planned %zu bytes: %s", rel, plan.total, err.message);
    if (st == WISP_OK) {
        const wisp_model *m = wisp_ctx_model(ctx);
        const wisp_hparams *hp = &m->hp;
        CHECK(t.count == n_packed && t.bytes == originals, "%s: told of %d weights (%zu bytes), want %d (%zu)", rel,
              t.count, t.bytes, n_packed, originals);
        for (int i = 0; i < 1 + hp->n_layers * WISP_PROJ_COUNT; i++) {
            int l = (i - 1) / WISP_PROJ_COUNT, p = (i - 1) % WISP_PROJ_COUNT;
            const wisp_weight *w = i == 0 ? &m->output : &m->layers[l].proj[p];
            if (!packs(w->type)) {
                CHECK(w->packed == NULL, "%s: weight %d (type %d) has a packed copy", rel, i, w->type);
                continue;
            }
            CHECK(w->packed && inside(&a, w->packed), "%s: weight %d has no packed copy in the arena", rel, i);
            if (w->packed)
                CHECK(memcmp(w->packed, w->data, (size_t)w->rows * w->row_bytes) == 0,
                      "%s: weight %d's copy differs from its rows", rel, i);
        }
        bool copied = want > 0;
        int64_t half_rope = hp->rope_dim / 2;
        check_vector(&a, m->output_norm, rm->output_norm, hp->dim, copied, rel, "output_norm");
        check_vector(&a, m->rope_freqs, rm->rope_freqs, half_rope, copied, rel, "rope_freqs");
        check_vector(&a, m->rope_long, rm->rope_long, half_rope, copied, rel, "rope_factors_long");
        check_vector(&a, m->rope_short, rm->rope_short, half_rope, copied, rel, "rope_factors_short");
        for (int l = 0; l < hp->n_layers; l++)
            for (int v = 0; v < WISP_VEC_COUNT; v++)
                check_vector(&a, m->layers[l].vec[v], rm->layers[l].vec[v], wisp_layer_vec_len(hp, v), copied, rel,
                             "a layer vector");
    }
    printf("%-44s packed part %8zu bytes: %d weights packed (%zu bytes of originals), plan exact\n", rel, want,
           n_packed, originals);
    free(a.mem);
    free(file_ctx.mem);
    free(bytes);
}

int main(void) {
    static const char *const models[] = {
        "models/stories260K.gguf",                        /* F32: nothing packs, everything stays in place */
        "models/synthetic/syn-llama-gqa-q8_0.gguf",       /* every projection packs */
        "models/synthetic/syn-llama-gqa-f16.gguf",
        "models/synthetic/syn-qwen2-q4_k_m.gguf",         /* mixed types, q/k/v biases */
        "models/synthetic/syn-llama3-rope-q4_k_m.gguf",   /* rope_freqs */
        "models/synthetic/syn-phi3-longrope-q4_k_m.gguf", /* fused q/k/v and gate/up rows, LongRoPE factors */
        "models/synthetic/syn-gemma3-f16.gguf",           /* q/k norms, post-attention and post-FFN norms */
    };
    wisp_kernels level = standin_level();
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i], &level);
    return check_report("test_packed_layout");
}
