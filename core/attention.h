/* Causal attention computed flash-style: for each query, keys are scored a
 * block at a time and an online softmax rescales the running output, so no
 * n x n score matrix ever exists. Works on KV caches in F32 or F16. */
#ifndef WISP_ATTENTION_H
#define WISP_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "exec.h"

typedef struct wisp_attention_args {
    const wisp_kernels *k;
    const float *q;      /* [n_tok][n_heads*head_dim] */
    float *out;          /* [n_tok][n_heads*head_dim] */
    const void *k_cache; /* [n_kv_heads][kv_stride positions][head_dim] of this layer */
    const void *v_cache;
    int32_t kv_stride;   /* positions per kv head in the cache */
    int32_t kv_ring;     /* 0: key j sits at row j; else the cache is a ring of kv_ring rows and key j at j % kv_ring */
    int32_t kv_f16;      /* cache holds F16 instead of F32 */
    int32_t n_tok, pos0; /* query t sits at position pos0 + t and sees keys 0..pos0+t */
    int32_t n_heads, n_kv_heads, head_dim;
    float scale;         /* 1/sqrt(head_dim), or the architecture's (hparams.attn_scale) */
    float softcap;       /* scores s -> softcap tanh(s / softcap) before the mask (0: none) */
    int32_t window;      /* query at position p sees keys p - window < j <= p (0: all earlier keys) */
    float *scores;       /* [nth][max(scores_rows, 1)][block] worker scratch */
    int32_t block;
    int32_t scores_rows; /* 0 or 1; wisp_attention_score_rows (the group size) lets the fused path
                          * score a kv head's query heads together where the kernels offer it */
    float *kv_f32;       /* [nth][2][block][head_dim] worker scratch for F16 caches whose kv heads serve
                          * several query heads (see wisp_attention_grouped); NULL: convert per head */
    float *lse;          /* optional [n_tok][n_heads]: log-sum-exp per query, for training */
} wisp_attention_args;

#define WISP_ATTN_MAX_GROUP 64 /* query heads per kv head that the grouped path takes */

/* Whether attention converts each block of an F16 cache once for all the
 * query heads of a kv head (kernels k asking for it), which needs the
 * kv_f32 scratch. */
bool wisp_attention_grouped(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads);

/* Whether attention scores the query heads of a kv head together (the
 * kernels' *_heads entries, an F16 cache), which needs n_heads / n_kv_heads
 * rows of scores per worker. */
bool wisp_attention_fused(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads);

/* The rows of scores each worker's scratch holds for those kernels: the
 * group size where the fused path is taken, else 1 (scores_rows). */
int32_t wisp_attention_score_rows(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads);

/* Worker ith of nth computes its share of the (token, head) pairs. */
void wisp_attention_job(void *args, int ith, int nth);

#endif
