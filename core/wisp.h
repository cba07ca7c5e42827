/* wisp — run and fine-tune llama-family models inside one planned arena.
 *
 * The flow, on any target:
 *
 *     wisp_gguf g;                       // parse a GGUF in place (mmap, flash, ArrayBuffer)
 *     wisp_gguf_open(&g, bytes, size, &err);
 *     wisp_config cfg = wisp_config_default();
 *     cfg.n_ctx = 512;
 *     wisp_memory_plan plan;             // exact bytes, per part, before anything starts
 *     wisp_plan(&g, &cfg, &plan, &err);
 *     void *arena = <plan.total bytes, 16-byte aligned>;
 *     wisp_ctx *ctx;                     // carved from the arena; nothing allocates afterwards
 *     wisp_init(&ctx, &g, &cfg, arena, plan.total, &err);
 *     wisp_tokenize_text(ctx, "Once upon a time", 16, WISP_TOKENIZE_ADD_BOS, ids, 64, &n, &err);
 *     wisp_eval(ctx, ids, n, &err);      // prefill; then one token at a time
 *     int32_t next = wisp_sample(ctx, &sampler, history, n_history);
 *
 * Every fallible call returns a wisp_status and fills the optional
 * wisp_error with a message. */
#ifndef WISP_H
#define WISP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "exec.h"
#include "gguf.h"
#include "kernels.h"
#include "model.h"
#include "sampler.h"
#include "status.h"
#include "tokenizer.h"
#include "types.h"

#define WISP_VERSION "0.1.0"

typedef struct wisp_config {
    int32_t n_ctx;           /* KV cache positions; 0: the model's context length, at most 4096 */
    int32_t n_batch;         /* most tokens per forward step; 0: min(n_ctx, 64) */
    int32_t kv_type;         /* WISP_TYPE_F16 (default, as llama.cpp) or WISP_TYPE_F32 */
    bool logits_all;         /* keep logits of every position of a step, not just the last */
    uint32_t max_text_bytes; /* longest text wisp_tokenize_text accepts; 0: 4096 */
    const wisp_kernels *kernels; /* NULL: the scalar reference */
    wisp_threads threads;    /* n_threads sizes per-thread scratch */
} wisp_config;

typedef struct wisp_memory_plan {
    size_t total;
    size_t part[WISP_PART_COUNT]; /* bytes per wisp_part; they add up to total */
    wisp_hparams hp;
    wisp_config cfg;              /* with defaults resolved */
    size_t weight_bytes;          /* bytes of weights used in place (not in the arena) */
} wisp_memory_plan;

typedef struct wisp_ctx wisp_ctx;

wisp_config wisp_config_default(void);

/* Exact arena bytes for this model and configuration. */
wisp_status wisp_plan(const wisp_gguf *g, const wisp_config *cfg, wisp_memory_plan *plan, wisp_error *err);

/* Carve everything from `arena` (`size` bytes, 16-byte aligned). Fails with
 * WISP_ERR_ARENA naming the shortfall if size < plan.total. `g` (and the
 * bytes it views) must outlive the context. */
wisp_status wisp_init(wisp_ctx **ctx, const wisp_gguf *g, const wisp_config *cfg, void *arena, size_t size,
                      wisp_error *err);

const wisp_hparams *wisp_ctx_hparams(const wisp_ctx *ctx);
const wisp_model *wisp_ctx_model(const wisp_ctx *ctx);
const wisp_tokenizer *wisp_ctx_tokenizer(const wisp_ctx *ctx);
const wisp_config *wisp_ctx_config(const wisp_ctx *ctx);
const char *wisp_ctx_kernels_name(const wisp_ctx *ctx);

/* Tokenize with the context's text scratch (max_text_bytes). */
wisp_status wisp_tokenize_text(wisp_ctx *ctx, const char *text, size_t len, unsigned flags, int32_t *ids, size_t cap,
                               size_t *n_ids, wisp_error *err);

/* Append `n` tokens after the cached ones and run the model over them in
 * steps of at most n_batch. Afterwards wisp_logits() holds the last step's
 * logits. Fails (changing nothing) if the context would overflow. */
wisp_status wisp_eval(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_error *err);

/* Logits after the i-th token of the last step (i = -1: its last token).
 * Other positions are only kept with logits_all. NULL if unavailable. */
const float *wisp_logits(const wisp_ctx *ctx, int32_t i);
int32_t wisp_last_step_tokens(const wisp_ctx *ctx);

int32_t wisp_n_past(const wisp_ctx *ctx);
/* Forget cached positions >= n (0 clears the cache). */
void wisp_rewind(wisp_ctx *ctx, int32_t n);

/* Pick the next token from the last logits. `history` (may be NULL) feeds
 * the repetition penalty. Uses the context's candidate scratch. */
int32_t wisp_sample(wisp_ctx *ctx, wisp_sampler *s, const int32_t *history, size_t n_history);

#endif
