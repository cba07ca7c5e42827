/* Seeded random LoRA adapters for the interop tests (until a trained one
 * exists they stand in for what the training engine produces), and a helper
 * that reads a model's hyperparameters. Test-only: allocates with malloc. */
#ifndef WISP_TEST_LORA_FIXTURE_H
#define WISP_TEST_LORA_FIXTURE_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "half.h"
#include "lora.h"
#include "lora_layout.h"
#include "model.h"
#include "types.h"

typedef struct fixture_lora {
    wisp_lora lora;
    wisp_lora_pair *pairs;
    unsigned char *data; /* every A and B, back to back */
} fixture_lora;

static inline uint64_t fixture_rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Uniform in [-amp, amp), stored as `type`. */
static inline void fixture_fill(unsigned char *dst, int type, size_t n, float amp, uint64_t *seed) {
    for (size_t i = 0; i < n; i++) {
        float v = amp * (2.0f * (float)(fixture_rng(seed) & 0xffffff) / 16777216.0f - 1.0f);
        if (type == WISP_TYPE_F32) wisp_store_f32(dst + 4 * i, v);
        else if (type == WISP_TYPE_F16) wisp_store_u16(dst + 2 * i, wisp_f32_to_f16(v));
        else wisp_store_u16(dst + 2 * i, wisp_f32_to_bf16(v));
    }
}

/* An adapter on every projection of every layer (projections whose bit is
 * clear in `proj_mask` are skipped). rank_of(layer, proj) chooses ranks. */
static inline fixture_lora fixture_make(const wisp_hparams *hp, int type, unsigned proj_mask, int32_t (*rank_of)(int, int),
                                 float alpha, bool rslora, uint64_t seed) {
    fixture_lora f;
    memset(&f, 0, sizeof f);
    size_t n_pairs = 0, bytes = 0, eb = wisp_lora_elem_bytes(type);
    for (int l = 0; l < hp->n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) {
            if (!(proj_mask >> p & 1)) continue;
            int32_t n_in, n_out;
            wisp_lora_proj_shape(hp, p, &n_in, &n_out);
            n_pairs++;
            bytes += (size_t)rank_of(l, p) * (size_t)(n_in + n_out) * eb;
        }
    f.pairs = calloc(n_pairs ? n_pairs : 1, sizeof *f.pairs);
    f.data = malloc(bytes ? bytes : 1);
    size_t k = 0, off = 0;
    int32_t max_rank = 0;
    for (int l = 0; l < hp->n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) {
            if (!(proj_mask >> p & 1)) continue;
            wisp_lora_pair *q = &f.pairs[k++];
            wisp_lora_proj_shape(hp, p, &q->n_in, &q->n_out);
            q->layer = l;
            q->proj = p;
            q->rank = rank_of(l, p);
            q->type = type;
            q->a = f.data + off;
            fixture_fill(f.data + off, type, (size_t)q->rank * (size_t)q->n_in, 0.5f, &seed);
            off += (size_t)q->rank * (size_t)q->n_in * eb;
            q->b = f.data + off;
            fixture_fill(f.data + off, type, (size_t)q->rank * (size_t)q->n_out, 0.2f, &seed);
            off += (size_t)q->rank * (size_t)q->n_out * eb;
            q->alpha = alpha;
            q->scale = wisp_lora_scale_of(alpha, q->rank, rslora);
            if (q->rank > max_rank) max_rank = q->rank;
        }
    f.lora.pairs = f.pairs;
    f.lora.n_pairs = (int32_t)n_pairs;
    f.lora.max_rank = max_rank;
    f.lora.rslora = rslora;
    return f;
}

static inline void fixture_free(fixture_lora *f) {
    free(f->pairs);
    free(f->data);
    memset(f, 0, sizeof *f);
}

/* Hyperparameters of a model file (the bytes are freed; hp holds no pointers). */
static inline bool fixture_hparams(const char *path, wisp_hparams *hp) {
    size_t n;
    unsigned char *b = read_file(path, &n);
    if (!b) return false;
    wisp_gguf g;
    wisp_error err = {0};
    bool ok = wisp_gguf_open(&g, b, n, &err) == WISP_OK && wisp_hparams_read(&g, hp, &err) == WISP_OK;
    if (!ok) fprintf(stderr, "%s: %s\n", path, err.message);
    free(b);
    return ok;
}

/* Bytes of a pair's A and B. */
static inline size_t fixture_a_bytes(const wisp_lora_pair *p) {
    return (size_t)p->rank * (size_t)p->n_in * wisp_lora_elem_bytes(p->type);
}
static inline size_t fixture_b_bytes(const wisp_lora_pair *p) {
    return (size_t)p->rank * (size_t)p->n_out * wisp_lora_elem_bytes(p->type);
}

/* Element i of an F32/F16/BF16 array as float. */
static inline float fixture_get(const void *data, int type, size_t i) {
    const unsigned char *b = data;
    if (type == WISP_TYPE_F32) return wisp_load_f32(b + 4 * i);
    if (type == WISP_TYPE_F16) return wisp_f16_to_f32(wisp_load_u16(b + 2 * i));
    return wisp_bf16_to_f32(wisp_load_u16(b + 2 * i));
}

#endif
