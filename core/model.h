/* A llama-family model as a view over GGUF bytes: hyperparameters plus
 * pointers to every weight where it lies (mmap, flash, wasm memory). Nothing
 * here copies a weight. */
#ifndef WISP_MODEL_H
#define WISP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "arena.h"
#include "gguf.h"
#include "status.h"
#include "wisp.h" /* wisp_arch, wisp_hparams, wisp_proj */

/* The architecture row of hp (never NULL for hparams that were read). */
const wisp_arch_row *wisp_hparams_row(const wisp_hparams *hp);
/* Whether layer l attends through the sliding window. */
bool wisp_layer_windowed(const wisp_hparams *hp, int32_t l);
/* Positions of layer l's KV cache for a context of n_ctx: the whole context,
 * or for a windowed layer a ring of window - 1 + n_batch positions, rounded
 * up to a multiple of WISP_KV_RING_ALIGN (attention's key block, so that no
 * block of keys straddles the ring's wrap). */
#define WISP_KV_RING_ALIGN 64
int32_t wisp_layer_kv_positions(const wisp_hparams *hp, int32_t l, int32_t n_ctx, int32_t n_batch);

/* A 2-D weight: y[rows] = W x[cols], rows stored `row_bytes` apart. */
typedef struct wisp_weight {
    const uint8_t *data;
    int32_t type;
    int32_t rows;
    int32_t cols;
    size_t row_bytes;
    const uint8_t *packed; /* the kernel level's packed copy (core/packed_weights.h), or NULL */
} wisp_weight;

/* GGUF short name ("attn_q") and HF module name ("q_proj") of a projection. */
const char *wisp_proj_gguf_name(int proj);
const char *wisp_proj_hf_name(int proj);
/* Accepts either naming; -1 if unknown. */
int wisp_proj_from_name(const char *name, size_t len);

/* The vectors of a layer (norms, biases); NULL where the architecture has none. */
enum {
    WISP_VEC_ATTN_NORM, WISP_VEC_FFN_NORM, WISP_VEC_BIAS_Q, WISP_VEC_BIAS_K, WISP_VEC_BIAS_V,
    WISP_VEC_Q_NORM, WISP_VEC_K_NORM, WISP_VEC_POST_ATTN_NORM, WISP_VEC_POST_FFN_NORM, WISP_VEC_COUNT
};

/* Length of layer vector v for hp. */
int64_t wisp_layer_vec_len(const wisp_hparams *hp, int v);

typedef struct wisp_layer {
    wisp_weight proj[WISP_PROJ_COUNT]; /* fused tensors (phi3) are split into row ranges */
    union {
        struct {
            const float *attn_norm, *ffn_norm; /* [dim] */
            const float *bias_q, *bias_k, *bias_v; /* [n_heads*head_dim], [kv_dim], [kv_dim] */
            const float *q_norm, *k_norm;      /* [head_dim], applied to each head before RoPE */
            const float *post_attn_norm, *post_ffn_norm; /* [dim], on a block's output before the residual add */
        };
        const float *vec[WISP_VEC_COUNT];
    };
} wisp_layer;

typedef struct wisp_model {
    wisp_gguf gguf;
    wisp_hparams hp;
    wisp_weight tok_embd;    /* rows = n_vocab, cols = dim */
    wisp_weight output;      /* rows = n_vocab, cols = dim (the embedding when tied) */
    const float *output_norm;/* [dim] */
    const float *rope_freqs; /* [rope_dim/2] Llama 3.x frequency factors, or NULL */
    const float *rope_long, *rope_short; /* [rope_dim/2] LongRoPE factors, or NULL */
    wisp_layer *layers;      /* [n_layers], carved from the arena */
} wisp_model;

/* Read hyperparameters; clear errors for unsupported architectures. */
wisp_status wisp_hparams_read(const wisp_gguf *g, wisp_hparams *hp, wisp_error *err);

/* The model's part of a layout (core/arena.h): carving (lay->arena set)
 * resolves and shape-checks every tensor and carves the layer table;
 * measuring takes only the table's size and reads what it can of the tensors
 * outside the layers, leaving `layers` NULL (wisp_model_read_layer reads one
 * when wanted). `g` is copied into the model. */
wisp_status wisp_model_layout(wisp_model *m, const wisp_gguf *g, wisp_layout *lay, wisp_error *err);

/* wisp_model_layout carving from `arena`. */
wisp_status wisp_model_init(wisp_model *m, const wisp_gguf *g, wisp_arena *arena, wisp_error *err);

/* Resolve and shape-check layer l's tensors into *L. */
wisp_status wisp_model_read_layer(const wisp_gguf *g, const wisp_hparams *hp, int l, wisp_layer *L, wisp_error *err);

/* Human-readable architecture name. */
const char *wisp_arch_name(wisp_arch a);

/* The RoPE frequency factors a context of n_ctx positions uses (NULL: none). */
const float *wisp_model_rope_factors(const wisp_model *m, int32_t n_ctx);

/* Where projection `proj` of a layer lies: its tensor's name suffix and first
 * row there (fused tensors hold several), and its shape. */
void wisp_proj_source(const wisp_hparams *hp, int proj, const char **suffix, int64_t *row0, int64_t *rows,
                      int64_t *cols);

#endif
