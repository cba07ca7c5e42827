/* Rotary position embeddings. llama rotates adjacent pairs (2i, 2i+1);
 * the NEOX style (qwen2/3, gemma, phi3) rotates (i, i + rope_dim/2).
 * Dimensions past rope_dim are left alone. */
#ifndef WISP_ROPE_H
#define WISP_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* The angle of pair i at position p is
 *   p * freq_scale * base^(-2i/dim) / factors[i]     (factors NULL: 1)
 * and cos, sin are multiplied by attn_factor (LongRoPE's magnitude scale). */
typedef struct wisp_rope_spec {
    int32_t dim;
    float base, freq_scale, attn_factor;
    const float *factors; /* [dim/2] or NULL */
} wisp_rope_spec;

/* The rotation of a model's global layers (windowed: its windowed layers,
 * which have their own base in some families), for a context of n_ctx. */
wisp_rope_spec wisp_rope_spec_of(const wisp_model *m, int32_t n_ctx, bool windowed);

/* table[t*dim + 2i], [.. + 2i+1] = cos, sin of pair i at position pos0 + t */
void wisp_rope_table(float *table, int32_t pos0, int32_t n_pos, const wisp_rope_spec *r);

/* Rotate n_heads vectors of head_dim floats (consecutive) by one position's
 * table row; `inverse` applies the transpose (for gradients; with an
 * attn_factor a, the table's rotation is a R and its transpose a R^T). */
void wisp_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, const float *cs, bool neox,
                     bool inverse);

#endif
