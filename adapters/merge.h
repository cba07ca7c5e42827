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
#include "model.h"

/* One adapter pair and the factor it is merged with (the attach-time user
 * scale times the pair's own scale). The pair adapts rows row0 ..
 * row0 + n_out - 1 of the tensor: 0 unless the tensor is fused (phi3's
 * attn_qkv holds q, k and v; its ffn_up holds gate and up). */
typedef struct wisp_merge_term {
    const wisp_lora_pair *pair;
    float scale;
    int64_t row0;
} wisp_merge_term;

#define WISP_MERGE_MAX_TERMS 16 /* adapters merged into one tensor at once */

/* The terms that adapt projection `proj` of layer `layer`, one per adapter
 * that has such a pair, in adapter order. Returns how many (at most cap). */
int wisp_merge_terms_for(const wisp_lora *const *adapters, const float *user_scales, int n_adapters, int32_t layer,
                         int proj, wisp_merge_term *terms, int cap);

/* The terms that adapt GGUF tensor `name` of a model of `hp`'s architecture
 * ("blk.3.attn_qkv.weight" of phi3: its q, k and v pairs, each with its
 * row0), found through the architecture table (wisp_proj_source), one per
 * adapter and projection. Returns how many (at most cap). */
int wisp_merge_terms_for_tensor(const wisp_lora *const *adapters, const float *user_scales, int n_adapters,
                                const wisp_hparams *hp, const char *name, size_t name_len, wisp_merge_term *terms,
                                int cap);

/* w[c] += sum over terms of scale * sum_k B[row][k] * A[k][c], for the
 * pair's n_in columns (terms whose rows do not include `row` are skipped). Terms add in order,
 * k ascending, in float: deterministic on every platform. */
void wisp_merge_add_row(const wisp_merge_term *terms, int n_terms, int64_t row, float *w);

#endif
