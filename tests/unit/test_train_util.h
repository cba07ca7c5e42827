/* Helpers shared by the training tests: a context planned for training on a
 * model file (with a guard zone after the planned arena that must stay
 * untouched), a serial stand-in for a thread pool that runs the workers of
 * a job in reverse order (so results that depend on the split would show),
 * and random adapters set into the engine and mirrored in doubles. */
#ifndef WISP_TEST_TRAIN_UTIL_H
#define WISP_TEST_TRAIN_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lora.h"
#include "ref_model.h"
#include "wisp.h"

#define GUARD_BYTES 256

typedef struct train_env {
    unsigned char *bytes;
    size_t size;
    wisp_gguf g;
    wisp_memory_plan plan;
    unsigned char *arena;
    wisp_ctx *ctx;
} train_env;

static inline void reverse_pool_run(void *pool, wisp_job_fn fn, void *arg, int nth) {
    (void)pool;
    for (int i = nth - 1; i >= 0; i--) fn(arg, i, nth);
}

/* A training config on top of the defaults: F32 KV cache, small context. */
static inline wisp_config train_config(int32_t seq_len, int32_t rank, int n_threads) {
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = seq_len + 1;
    cfg.kv_type = WISP_TYPE_F32;
    cfg.train.seq_len = seq_len;
    cfg.train.rank = rank;
    cfg.train.seed = 1234;
    if (n_threads > 1) {
        cfg.threads.run = reverse_pool_run;
        cfg.threads.n_threads = n_threads;
    }
    return cfg;
}

static inline bool guard_intact(const train_env *e) {
    for (size_t i = 0; i < GUARD_BYTES; i++)
        if (e->arena[e->plan.total + i] != 0xA5) return false;
    return true;
}

static inline void train_close(train_env *e) {
    free(e->arena);
    free(e->bytes);
    memset(e, 0, sizeof *e);
}

/* Reads the model once per env; false (with a message) on any failure. */
static inline bool train_open(train_env *e, const char *path, const wisp_config *cfg) {
    wisp_error err = {0};
    if (!e->bytes) {
        e->bytes = read_file(path, &e->size);
        if (!e->bytes || wisp_gguf_open(&e->g, e->bytes, e->size, &err)) {
            fprintf(stderr, "%s: %s\n", path, err.message);
            return false;
        }
    }
    free(e->arena);
    e->arena = NULL;
    if (wisp_plan(&e->g, cfg, &e->plan, &err)) {
        fprintf(stderr, "%s: plan: %s\n", path, err.message);
        return false;
    }
    e->arena = aligned_alloc(64, (e->plan.total + GUARD_BYTES + 63) / 64 * 64);
    if (!e->arena) return false;
    memset(e->arena, 0xA5, e->plan.total + GUARD_BYTES);
    if (wisp_init(&e->ctx, &e->g, cfg, e->arena, e->plan.total, &err)) {
        fprintf(stderr, "%s: init: %s\n", path, err.message);
        return false;
    }
    return true;
}

/* Random A and B (uniform +-amp) into every trained pair, mirrored in `ref`
 * (room for n_pairs entries; each ref's a/b are malloc'd). */
static inline bool set_random_lora(wisp_ctx *ctx, uint64_t seed, double amp, ref_lora *ref) {
    const wisp_lora *l = wisp_train_lora(ctx);
    wisp_lora_pair *pairs = calloc((size_t)l->n_pairs, sizeof *pairs);
    uint64_t rng = seed;
    bool ok = pairs != NULL;
    for (int32_t i = 0; i < l->n_pairs && ok; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        size_t na = (size_t)p->rank * p->n_in, nb = (size_t)p->rank * p->n_out, nm = p->magnitude ? (size_t)p->n_out : 0;
        float *v = malloc(sizeof(float) * (na + nb + nm));
        ref[i] = (ref_lora){p->layer, p->proj, p->rank, p->n_in, p->n_out, malloc(sizeof(double) * na),
                            malloc(sizeof(double) * nb), p->scale, nm ? malloc(sizeof(double) * nm) : NULL, NULL};
        ok = v && ref[i].a && ref[i].b && (!nm || ref[i].m);
        for (size_t j = 0; ok && j < na + nb; j++) {
            v[j] = (float)((2 * ref_uniform(&rng) - 1) * amp);
            if (j < na) ref[i].a[j] = v[j];
            else ref[i].b[j - na] = v[j];
        }
        for (size_t j = 0; ok && j < nm; j++) { /* DoRA magnitudes: positive, away from the row norms */
            v[na + nb + j] = (float)(0.5 + ref_uniform(&rng));
            ref[i].m[j] = v[na + nb + j];
        }
        pairs[i] = *p;
        pairs[i].a = v;
        pairs[i].b = v ? v + na : NULL;
        pairs[i].magnitude = v && nm ? v + na + nb : NULL;
    }
    wisp_lora src = {pairs, l->n_pairs, l->max_rank, false};
    wisp_error err = {0};
    if (ok && wisp_train_set_lora(ctx, &src, &err)) {
        fprintf(stderr, "set_lora: %s\n", err.message);
        ok = false;
    }
    for (int32_t i = 0; pairs && i < l->n_pairs; i++) free((void *)(uintptr_t)pairs[i].a);
    free(pairs);
    return ok;
}

static inline void random_tokens(int32_t *t, size_t n, int32_t n_vocab, uint64_t seed) {
    uint64_t rng = seed;
    for (size_t i = 0; i < n; i++) t[i] = 3 + (int32_t)(ref_uniform(&rng) * (n_vocab - 3));
}

#endif
