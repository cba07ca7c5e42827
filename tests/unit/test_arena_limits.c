/* Arena limits, for inference and training plans on several models (with and
 * without attached adapters; training with and without activation
 * checkpointing, F32 and BF16 saved activations, AdamW and SGD):
 *   - wisp_init with every size from 0 to plan-1 in coarse steps (plan/16),
 *     with plan-1, plan-64 and plan-65 exactly, fails with WISP_ERR_ARENA, a
 *     NULL context and a message naming the shortfall in bytes, and writes
 *     nothing at or past the size it was given (the whole block is filled
 *     with a pattern first; under ASan the tail is also poisoned, so even a
 *     read there is reported);
 *   - a misaligned arena fails with WISP_ERR_ARG and writes nothing;
 *   - the planned size works: a 16-token generation (with the adapters
 *     attached) or three optimizer steps, with the bytes after the planned
 *     arena untouched (and poisoned under ASan) throughout. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sampler.h"
#include "test_lora_gguf_fixture.h"
#include "wisp.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GUARD 4096
#define PATTERN 0xA5

static int n_configs, n_inits;

/* Bytes of [from, to) that no longer hold the pattern. */
static size_t damaged(const unsigned char *mem, size_t from, size_t to) {
    size_t d = 0;
    for (size_t i = from; i < to; i++) d += mem[i] != PATTERN;
    return d;
}

static int32_t rank4(int layer, int proj) {
    (void)layer;
    (void)proj;
    return 4;
}

typedef struct model_file {
    const char *rel;
    unsigned char *bytes;
    wisp_gguf g;
} model_file;

/* Every too-small size fails cleanly and leaves the rest of the block alone. */
static size_t too_small(const model_file *m, const wisp_config *cfg, const char *label, size_t total,
                        unsigned char *mem) {
    size_t sizes[24], n = 0;
    for (int k = 0; k < 16; k++) sizes[n++] = total / 16 * (size_t)k;
    sizes[n++] = total - 1;
    if (total > 65) sizes[n++] = total - 64, sizes[n++] = total - 65;
    for (size_t i = 0; i < n; i++) {
        size_t size = sizes[i];
        memset(mem, PATTERN, total + GUARD);
        POISON(mem + size, total + GUARD - size);
        wisp_ctx *ctx = (wisp_ctx *)mem; /* must become NULL */
        wisp_error err = {0};
        wisp_status st = wisp_init(&ctx, &m->g, cfg, mem, size, &err);
        UNPOISON(mem + size, total + GUARD - size);
        n_inits++;
        char want[64];
        snprintf(want, sizeof want, "%zu bytes short", total - size);
        CHECK(st == WISP_ERR_ARENA && ctx == NULL, "%s %s: %zu of %zu bytes gave status %d", m->rel, label, size,
              total, st);
        CHECK(strstr(err.message, want) != NULL, "%s %s: the message should say '%s': %s", m->rel, label, want,
              err.message);
        size_t bad = damaged(mem, size, total + GUARD);
        CHECK(bad == 0, "%s %s: init with %zu bytes wrote %zu bytes past them", m->rel, label, size, bad);
    }
    /* a block that is not 16-byte aligned is refused before anything is written */
    memset(mem, PATTERN, total + GUARD);
    wisp_ctx *ctx = NULL;
    wisp_error err = {0};
    CHECK(wisp_init(&ctx, &m->g, cfg, mem + 8, total, &err) == WISP_ERR_ARG && ctx == NULL,
          "%s %s: a misaligned arena must be refused", m->rel, label);
    CHECK(damaged(mem, 0, total + GUARD) == 0, "%s %s: a refused misaligned arena was written", m->rel, label);
    n_inits++;
    return n;
}

static void generate(wisp_ctx *ctx, const wisp_hparams *hp, bool adapters, const char *label, const char *rel) {
    wisp_error err = {0};
    fixture_lora a = {0}, b = {0};
    int32_t h1 = 0, h2 = 0;
    if (adapters) {
        a = fixture_make(hp, WISP_TYPE_F16, 0x7f, rank4, 8.0f, false, 1);
        b = fixture_make(hp, WISP_TYPE_F32, 0x05, rank4, 4.0f, true, 2);
        CHECK(wisp_adapter_attach(ctx, &a.lora, 0.5f, &h1, &err) == WISP_OK, "%s %s: attach: %s", rel, label, err.message);
        CHECK(wisp_adapter_attach(ctx, &b.lora, 1.0f, &h2, &err) == WISP_OK, "%s %s: attach: %s", rel, label, err.message);
    }
    int32_t ids[64];
    size_t n = 0;
    wisp_status st = wisp_tokenize_text(ctx, "Once upon a time", 16, WISP_TOKENIZE_ADD_BOS, ids, 64, &n, &err);
    if (!st) st = wisp_eval(ctx, ids, (int32_t)n, &err);
    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.seed = 3;
    wisp_sampler s;
    wisp_sampler_init(&s, &sp);
    for (int i = 0; i < 16 && !st; i++) {
        ids[n] = wisp_sample(ctx, &s, ids, n);
        st = wisp_eval(ctx, &ids[n], 1, &err);
        n++;
    }
    CHECK(st == WISP_OK, "%s %s: generation in the planned arena: %s", rel, label, err.message);
    if (adapters) {
        CHECK(wisp_adapter_detach(ctx, h1, &err) == WISP_OK && wisp_adapter_detach(ctx, h2, &err) == WISP_OK,
              "%s %s: detach: %s", rel, label, err.message);
        fixture_free(&a);
        fixture_free(&b);
    }
}

static void train(wisp_ctx *ctx, const wisp_hparams *hp, const wisp_config *cfg, const char *label, const char *rel) {
    int32_t width = cfg->train.seq_len + 1, B = cfg->train.micro_batch;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(width * B));
    for (int32_t i = 0; i < width * B; i++) tok[i] = 3 + (i * 131) % (hp->n_vocab - 3);
    wisp_error err = {0};
    wisp_status st = WISP_OK;
    for (int step = 0; step < 3 && !st; step++) {
        wisp_train_step_info info;
        double loss;
        int32_t scored;
        st = wisp_train_micro_step(ctx, tok, NULL, B, &loss, &scored, &err);
        if (!st) st = wisp_train_optimizer_step(ctx, &info, &err);
        if (!st && !(loss > 0)) st = WISP_ERR_NUMERIC;
    }
    CHECK(st == WISP_OK, "%s %s: three training steps in the planned arena: %s", rel, label, err.message);
    free(tok);
}

static void check_config(const model_file *m, const wisp_config *cfg, const char *label) {
    wisp_memory_plan plan;
    wisp_error err = {0};
    REQUIRE(wisp_plan(&m->g, cfg, &plan, &err) == WISP_OK, "%s %s: plan: %s", m->rel, label, err.message);
    unsigned char *mem = aligned_alloc(64, (plan.total + GUARD + 63) / 64 * 64);
    REQUIRE(mem, "allocate %zu bytes", plan.total + GUARD);
    size_t refused = too_small(m, cfg, label, plan.total, mem);

    memset(mem, PATTERN, plan.total + GUARD);
    POISON(mem + plan.total, GUARD);
    wisp_ctx *ctx = NULL;
    wisp_status st = wisp_init(&ctx, &m->g, cfg, mem, plan.total, &err);
    n_inits++;
    CHECK(st == WISP_OK, "%s %s: init with the planned %zu bytes: %s", m->rel, label, plan.total, err.message);
    if (st == WISP_OK) {
        const wisp_hparams *hp = wisp_ctx_hparams(ctx);
        if (cfg->train.seq_len) train(ctx, hp, cfg, label, m->rel);
        else generate(ctx, hp, cfg->max_adapters > 0, label, m->rel);
    }
    UNPOISON(mem + plan.total, GUARD);
    CHECK(damaged(mem, plan.total, plan.total + GUARD) == 0, "%s %s: bytes after the planned arena were written",
          m->rel, label);
    printf("%-40s %-26s plan %9zu bytes: %zu smaller sizes refused cleanly, the plan runs, guard intact\n", m->rel,
           label, plan.total, refused);
    n_configs++;
    free(mem);
}

int main(void) {
    static const char *const models[] = {"models/stories260K.gguf", "models/synthetic/syn-qwen2-q4_k_m.gguf",
                                         "models/synthetic/syn-llama-gqa-q8_0.gguf"};
    shared_path_or_skip("test_arena_limits", models[0]);
#ifdef HAVE_ASAN
    printf("built with ASan: the bytes past each arena are poisoned as well as patterned\n");
#endif
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        model_file m = {models[i], NULL, {0}};
        const char *path = shared_path(m.rel);
        if (!path) {
            printf("note: %s absent\n", m.rel);
            continue;
        }
        size_t size;
        m.bytes = read_file(path, &size);
        wisp_error err = {0};
        if (!m.bytes || wisp_gguf_open(&m.g, m.bytes, size, &err)) {
            CHECK(0, "%s: %s", path, err.message);
            free(m.bytes);
            continue;
        }
        wisp_config cfg = wisp_config_default();
        cfg.n_ctx = 48;
        check_config(&m, &cfg, "inference");
        cfg.max_adapters = 2;
        cfg.max_lora_rank = 8;
        check_config(&m, &cfg, "inference + 2 adapters");

        wisp_config t = wisp_config_default();
        t.n_ctx = 17;
        t.train.seq_len = 16;
        t.train.micro_batch = 2;
        t.train.rank = 4;
        t.train.seed = 9;
        check_config(&m, &t, "training");
        t.train.checkpointing = true;
        t.train.act_type = WISP_TYPE_BF16;
        check_config(&m, &t, "training, checkpointing");
        t.train.checkpointing = false;
        t.train.act_type = WISP_TYPE_F32;
        t.train.optimizer = WISP_OPTIMIZER_SGD;
        t.train.targets = 1u << WISP_PROJ_Q | 1u << WISP_PROJ_V;
        check_config(&m, &t, "training, SGD, q+v only");
        free(m.bytes);
    }
    printf("arena limits: %d configurations, %d initialisations\n", n_configs, n_inits);
    return check_report("test_arena_limits");
}
