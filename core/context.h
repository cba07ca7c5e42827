/* The inside of a wisp_ctx: what init carved and what the forward pass uses.
 * Private to core/. */
#ifndef WISP_CONTEXT_H
#define WISP_CONTEXT_H

#include "lora_apply.h"
#include "sampler.h"
#include "tokenizer.h"
#include "wisp.h"

/* Activations of one forward step of up to n_batch tokens. */
typedef struct wisp_scratch {
    float *x;      /* [n_batch][dim] residual stream */
    float *xb;     /* [n_batch][max(dim, q_dim)] normed input / attention output */
    float *q;      /* [n_batch][q_dim] */
    float *k;      /* [n_batch][kv_dim] */
    float *v;      /* [n_batch][kv_dim] */
    float *proj;   /* [n_batch][dim] output of attn_output / ffn_down before the residual add */
    float *gate;   /* [n_batch][ffn_dim] */
    float *up;     /* [n_batch][ffn_dim] */
    float *rope;   /* [n_batch][rope_dim] cos,sin pairs for each position */
    float *rope_swa; /* the same for windowed layers with their own base (gemma3), else NULL */
    float *attn;   /* [n_threads][1 or the heads per kv head (wisp_attention_fused)][WISP_ATTN_BLOCK] attention
                    * scores per worker */
    float *attn_kv; /* [n_threads][2][WISP_ATTN_BLOCK][head_dim] an F16 cache's block in F32 (grouped attention) */
} wisp_scratch;

#define WISP_ATTN_BLOCK 64 /* keys scored at a time by the online softmax */
_Static_assert(WISP_KV_RING_ALIGN % WISP_ATTN_BLOCK == 0, "a KV ring must hold whole blocks of keys");

struct wisp_ctx {
    wisp_model model;
    wisp_config cfg;
    wisp_exec exec;
    wisp_tokenizer tok;
    wisp_scratch s;
    int32_t q_dim, kv_dim;
    /* KV cache, [layer][kv_head][position][head_dim] in cfg.kv_type; a
     * windowed layer holds a ring of wisp_layer_kv_positions rows per head */
    void *k_cache, *v_cache;
    size_t kv_elem_bytes;
    int32_t n_past;
    float *logits;        /* [logits_all ? n_batch : 1][n_vocab] */
    int32_t last_step;    /* tokens in the last step */
    wisp_candidate *candidates;
    void *text_scratch;
    size_t text_scratch_bytes;
    wisp_adapter_set adapters; /* LoRA adapters attached for inference */
    struct wisp_train *train;  /* LoRA training state (train.h); NULL when not training */
};

/* Row `id` of the token embedding as floats (any weight type). */
void wisp_embed_row(const wisp_exec *e, const wisp_weight *w, int32_t id, float *out);

/* Byte offset of layer l's keys (and values) in k_cache (v_cache). */
size_t wisp_ctx_kv_layer_offset(const wisp_ctx *ctx, int32_t l);

/* One forward step over n <= n_batch tokens at positions n_past.. . */
wisp_status wisp_forward_step(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_error *err);
/* The same over n input embedding rows [n][dim] instead of tokens. */
wisp_status wisp_forward_embeddings(wisp_ctx *ctx, const float *rows, int32_t n, wisp_error *err);

#endif
