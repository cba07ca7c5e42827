/* LoRA adapters attached to a context for inference: the tables that say
 * which pairs adapt which (layer, projection), and adding their contribution
 * after a projection. Private to core/; the public calls are in wisp.h.
 *
 * Everything lives in the plan part "adapters": a slot per attachable
 * adapter, per (layer, projection) a short list of the attached pairs in
 * attachment order (so several adapters always add up in the same order),
 * and the [n_batch][max_lora_rank] buffer that holds A x. */
#ifndef WISP_LORA_APPLY_H
#define WISP_LORA_APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "exec.h"
#include "lora.h"
#include "model.h"

typedef struct wisp_adapter_slot {
    const wisp_lora *lora; /* NULL: free */
    float scale;           /* the user's scale, multiplies each pair's own */
    int32_t handle;
} wisp_adapter_slot;

typedef struct wisp_adapter_entry {
    const wisp_lora_pair *pair;
    int32_t slot;
} wisp_adapter_entry;

typedef struct wisp_adapter_set {
    wisp_adapter_slot *slots;    /* [max_adapters] */
    wisp_adapter_entry *entries; /* [n_layers][WISP_PROJ_COUNT][max_adapters] */
    int32_t *counts;             /* [n_layers][WISP_PROJ_COUNT] entries in use */
    float *h;                    /* [n_batch][max_rank] A x of one pair */
    int32_t max_adapters, max_rank, n_batch, n_layers;
    int32_t n_attached;
    int32_t last_handle;
} wisp_adapter_set;

/* The tables' pieces of part WISP_PART_ADAPTERS (none when max_adapters is
 * 0), taken through `lay` (arena.h): measured when lay has no arena, carved
 * into *set when it has one. `set` may be NULL when only measuring. */
void wisp_adapters_layout(wisp_layout *lay, wisp_adapter_set *set, int32_t n_layers, int32_t max_adapters,
                          int32_t max_rank, int32_t n_batch);

/* Check one pair against the model's weight it adapts; `max_rank` caps the
 * rank. Messages name the tensor ("blk.3.attn_q: ..."). */
wisp_status wisp_lora_pair_check(const wisp_model *m, const wisp_lora_pair *p, int32_t max_rank, wisp_error *err);

/* y[t*ldy + o] += sum over attached pairs of (layer, proj) of
 * scale * (B (A x_t))[o], for t < n_tok. Does nothing when none is attached. */
void wisp_adapters_apply(const wisp_adapter_set *set, wisp_exec *e, int32_t layer, int proj, const float *x,
                         int64_t ldx, int32_t n_tok, float *y, int64_t ldy);

/* Dot of a row of an F32/F16/BF16 LoRA matrix with a float vector. */
float wisp_lora_row_dot(const wisp_kernels *k, int32_t type, const void *row, const float *x, int64_t n);

#endif
