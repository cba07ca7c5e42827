/* Helpers the libFuzzer harnesses share: exact-size copies of the input (so
 * ASan sees one byte past the end as an overflow, which libFuzzer's own
 * buffer also guarantees, but with the alignment a mapped file has), reading
 * reference files named by environment variables once per process, and
 * plain allocation that never hands out more than asked for. */
#ifndef WISP_FUZZ_UTIL_H
#define WISP_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "lora.h"
#include "model.h"
#include "wisp.h"

/* A 64-byte aligned copy of n bytes (mmap gives page alignment; tensors are
 * aligned within the file). The allocation is rounded up, so ASan cannot see
 * reads just past n: parsers are checked against n by the length they are
 * given, which is what the fuzzer varies. */
static inline unsigned char *fuzz_aligned_copy(const void *data, size_t n) {
    unsigned char *b = aligned_alloc(64, (n + 64) & ~(size_t)63);
    if (b && n) memcpy(b, data, n);
    return b;
}

/* malloc(n), never NULL for n == 0 (so "no memory needed" is not an error) and
 * exact otherwise, so a parser writing past its planned memory is caught. */
static inline void *fuzz_exact(size_t n) { return malloc(n ? n : 1); }

static inline unsigned char *fuzz_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = len >= 0 ? aligned_alloc(64, ((size_t)len + 64) & ~(size_t)63) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* A base model for adapter parsers: its hyperparameters (to check shapes
 * against) and a small inference context with one adapter slot, so a parsed
 * adapter can be attached and run for a token. */
typedef struct fuzz_base {
    unsigned char *bytes;
    wisp_gguf g;
    wisp_hparams hp;
    wisp_ctx *ctx;
} fuzz_base;

/* Load each base listed in environment variable `var` (colon-separated GGUF
 * paths). Aborts (a harness set-up error, not a finding) when a listed file
 * cannot be used. Returns how many were loaded (up to cap). */
static inline int fuzz_load_bases(const char *var, fuzz_base *bases, int cap) {
    const char *list = getenv(var);
    if (!list) {
        fprintf(stderr, "fuzz: set %s=base.gguf[:other.gguf]\n", var);
        abort();
    }
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", list);
    int n = 0;
    for (char *p = strtok(copy, ":"); p && n < cap; p = strtok(NULL, ":")) {
        fuzz_base *b = &bases[n];
        size_t size;
        wisp_error err = {0};
        wisp_config cfg = wisp_config_default();
        cfg.n_ctx = 4;
        cfg.max_adapters = 1;
        cfg.max_lora_rank = 64;
        wisp_memory_plan plan;
        void *arena = NULL;
        if (!(b->bytes = fuzz_slurp(p, &size)) || wisp_gguf_open(&b->g, b->bytes, size, &err) ||
            wisp_hparams_read(&b->g, &b->hp, &err) || wisp_plan(&b->g, &cfg, &plan, &err) ||
            !(arena = aligned_alloc(64, (plan.total + 63) & ~(size_t)63)) ||
            wisp_init(&b->ctx, &b->g, &cfg, arena, plan.total, &err)) {
            fprintf(stderr, "fuzz: cannot load base %s: %s\n", p, err.message);
            abort();
        }
        n++;
    }
    return n;
}

static volatile float fuzz_sink_value;

/* Read every element of an adapter (its extents must be readable), then
 * attach it to the base, run one token and detach. Attaching may refuse it
 * (rank above the slot's, shapes); that is an answer, not a finding. */
static inline void fuzz_exercise_adapter(fuzz_base *b, const wisp_lora *l) {
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        size_t elem = p->type == WISP_TYPE_F32 ? 4 : 2;
        size_t na = (size_t)p->rank * (size_t)p->n_in * elem, nb = (size_t)p->rank * (size_t)p->n_out * elem;
        if (na) fuzz_sink_value += ((const uint8_t *)p->a)[0] + ((const uint8_t *)p->a)[na - 1];
        if (nb) fuzz_sink_value += ((const uint8_t *)p->b)[0] + ((const uint8_t *)p->b)[nb - 1];
    }
    int32_t handle;
    wisp_error err;
    if (wisp_adapter_attach(b->ctx, l, 1.0f, &handle, &err) == WISP_OK) {
        int32_t tok = 1;
        if (wisp_eval(b->ctx, &tok, 1, &err) == WISP_OK) fuzz_sink_value += wisp_logits(b->ctx, -1)[0];
        wisp_rewind(b->ctx, 0);
        if (wisp_adapter_detach(b->ctx, handle, &err)) abort(); /* a handle just given must detach */
    }
}

#endif
