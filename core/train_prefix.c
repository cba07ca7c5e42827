/* Prefix tuning (PEFT PREFIX_TUNING): every layer attends first to learned
 * keys and values. A micro-step lays them out as the first n_virtual
 * positions of every sequence, as prompt tuning lays out its embeddings:
 * the layer computes keys and values there like anywhere (from a zero
 * input), and they are replaced by the prefix before attention. So the text
 * sits at positions n_virtual.. (RoPE included), exactly as in HF, where the
 * prefix is a cache of n_virtual past positions whose keys are used as they
 * are stored (never rotated). In the backward pass the gradient reaching the
 * replaced keys and values is the prefix's; it stops there (nothing below
 * produced them). */
#include <string.h>

#include "train.h"

/* Key (kv 0) or value (kv 1) of layer l at virtual position i: PEFT's
 * past_key_values row order [n_layers][2][n_kv_heads][head_dim]. */
static size_t prefix_offset(const wisp_train *tr, int32_t i, int32_t l, int kv) {
    return (size_t)i * (size_t)tr->prompt_width + ((size_t)l * 2 + (size_t)kv) * (size_t)tr->KV;
}

void wisp_train_prefix_forward(wisp_train *tr, int32_t l) {
    size_t bytes = (size_t)tr->KV * sizeof(float);
    for (int32_t b = 0; b < tr->n_seq; b++)
        for (int32_t i = 0; i < tr->n_virtual; i++) {
            size_t row = ((size_t)b * (size_t)tr->S + (size_t)i) * (size_t)tr->KV;
            memcpy(tr->k + row, tr->prompt + prefix_offset(tr, i, l, 0), bytes);
            memcpy(tr->v + row, tr->prompt + prefix_offset(tr, i, l, 1), bytes);
        }
}

void wisp_train_prefix_backward(wisp_train *tr, int32_t l) {
    for (int32_t b = 0; b < tr->n_seq; b++)
        for (int32_t i = 0; i < tr->n_virtual; i++) {
            size_t row = ((size_t)b * (size_t)tr->S + (size_t)i) * (size_t)tr->KV;
            float *dk = tr->k + row, *dv = tr->v + row;
            float *gk = tr->prompt_grad + prefix_offset(tr, i, l, 0), *gv = tr->prompt_grad + prefix_offset(tr, i, l, 1);
            for (int32_t k = 0; k < tr->KV; k++) gk[k] += dk[k], gv[k] += dv[k];
            memset(dk, 0, (size_t)tr->KV * sizeof(float));
            memset(dv, 0, (size_t)tr->KV * sizeof(float));
        }
}
