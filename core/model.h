/* A llama-family model as a view over GGUF bytes: hyperparameters plus
 * pointers to every weight where it lies (mmap, flash, wasm memory). Nothing
 * here copies a weight. */
#ifndef WISP_MODEL_H
#define WISP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "gguf.h"
#include "status.h"

typedef enum wisp_arch { WISP_ARCH_LLAMA, WISP_ARCH_QWEN2 } wisp_arch;

typedef struct wisp_hparams {
    wisp_arch arch;
    int32_t n_vocab;
    int32_t dim;        /* embedding width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads; /* < n_heads: grouped-query attention */
    int32_t head_dim;
    int32_t ffn_dim;
    int32_t rope_dim;   /* leading dims of each head that are rotated */
    int32_t ctx_train;  /* context length the model was trained with */
    float rope_base;
    float rms_eps;
    bool rope_neox;     /* rotate (i, i+d/2) pairs instead of (2i, 2i+1) */
    bool tied_output;   /* the output projection is the token embedding */
} wisp_hparams;

/* A 2-D weight: y[rows] = W x[cols], rows stored `row_bytes` apart. */
typedef struct wisp_weight {
    const uint8_t *data;
    int32_t type;
    int32_t rows;
    int32_t cols;
    size_t row_bytes;
    const uint8_t *packed; /* the kernel level's packed copy (core/packed_weights.h), or NULL */
} wisp_weight;

/* The seven LoRA-capable projections of a layer, in a fixed order used by
 * adapters and training. */
typedef enum wisp_proj {
    WISP_PROJ_Q, WISP_PROJ_K, WISP_PROJ_V, WISP_PROJ_O,
    WISP_PROJ_GATE, WISP_PROJ_UP, WISP_PROJ_DOWN,
    WISP_PROJ_COUNT
} wisp_proj;

/* GGUF short name ("attn_q") and HF module name ("q_proj") of a projection. */
const char *wisp_proj_gguf_name(int proj);
const char *wisp_proj_hf_name(int proj);
/* Accepts either naming; -1 if unknown. */
int wisp_proj_from_name(const char *name, size_t len);

typedef struct wisp_layer {
    const float *attn_norm;       /* [dim] */
    wisp_weight proj[WISP_PROJ_COUNT];
    const float *bias_q, *bias_k, *bias_v; /* qwen2 only: [n_heads*head_dim], [kv_dim], [kv_dim] */
    const float *ffn_norm;        /* [dim] */
} wisp_layer;

typedef struct wisp_model {
    wisp_gguf gguf;
    wisp_hparams hp;
    wisp_weight tok_embd;    /* rows = n_vocab, cols = dim */
    wisp_weight output;      /* rows = n_vocab, cols = dim (the embedding when tied) */
    const float *output_norm;/* [dim] */
    wisp_layer *layers;      /* [n_layers], carved from the arena */
} wisp_model;

/* Read hyperparameters; clear errors for unsupported architectures. */
wisp_status wisp_hparams_read(const wisp_gguf *g, wisp_hparams *hp, wisp_error *err);

/* Bytes wisp_model_init carves (the layer table). */
size_t wisp_model_table_bytes(const wisp_hparams *hp);

/* Resolve and shape-check every tensor. `g` is copied into the model. */
wisp_status wisp_model_init(wisp_model *m, const wisp_gguf *g, wisp_arena *arena, wisp_error *err);

/* Human-readable architecture name. */
const char *wisp_arch_name(wisp_arch a);

#endif
