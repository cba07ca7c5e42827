/* Merging LoRA adapters into base weights: W' = W + sum_i s_i B_i A_i (for a
 * DoRA adapter, merged alone: W' = m (W + s B A) / ||W + s B A||_row), one
 * output row at a time so a model of any size merges in bounded memory (the
 * platform streams rows through adapters/quantize_model.h's rewrite). */
#ifndef WISP_MERGE_H
#define WISP_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "lora.h"

/* One adapter pair and the factor it is merged with (the attach-time user
 * scale times the pair's own scale). */
typedef struct wisp_merge_term {
    const wisp_lora_pair *pair;
    float scale;
} wisp_merge_term;

#define WISP_MERGE_MAX_TERMS 16 /* adapters merged into one tensor at once */

/* The terms that adapt projection `proj` of layer `layer`, one per adapter
 * that has such a pair, in adapter order. Returns how many (at most cap). */
int wisp_merge_terms_for(const wisp_lora *const *adapters, const float *user_scales, int n_adapters, int32_t layer,
                         int proj, wisp_merge_term *terms, int cap);

/* w[c] += sum over terms of scale * sum_k B[row][k] * A[k][c], for the
 * pair's n_in columns (terms must all have n_out > row). Terms add in order,
 * k ascending, in float: deterministic on every platform. */
void wisp_merge_add_row(const wisp_merge_term *terms, int n_terms, int64_t row, float *w);

#endif
