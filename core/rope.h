/* Rotary position embeddings. llama rotates adjacent pairs (2i, 2i+1);
 * qwen2 (NEOX style) rotates (i, i + rope_dim/2). Dimensions past rope_dim
 * are left alone. */
#ifndef WISP_ROPE_H
#define WISP_ROPE_H

#include <stdbool.h>
#include <stdint.h>

/* table[t*rope_dim + 2i], [.. + 2i+1] = cos, sin of (pos0 + t) * base^(-2i/rope_dim) */
void wisp_rope_table(float *table, int32_t pos0, int32_t n_pos, int32_t rope_dim, float base);

/* Rotate n_heads vectors of head_dim floats (consecutive) by one position's
 * table row; `inverse` rotates backwards (the transpose, for gradients). */
void wisp_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, const float *cs, bool neox,
                     bool inverse);

#endif
