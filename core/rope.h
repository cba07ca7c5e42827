/* Rotary position embeddings. llama rotates adjacent pairs (2i, 2i+1);
 * the NEOX style (qwen2/3, gemma, phi3) rotates (i, i + rope_dim/2).
 * Dimensions past rope_dim are left alone. */
#ifndef WISP_ROPE_H
#define WISP_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* The angle of pair i at position p is p * freq_i, with
 *   e_i = base^(-2i/dim) / factors[i]          (factors NULL: 1)
 *   freq_i = freq_scale * e_i                   (ext_factor 0: linear scaling)
 * and cos, sin are multiplied by attn_factor. YaRN (ext_factor > 0, as
 * llama.cpp's ggml defines it) keeps the fast pairs at their unscaled e_i and
 * interpolates only the slow ones: with mix_i = ramp_i * ext_factor,
 *   freq_i = freq_scale * e_i * (1 - mix_i) + e_i * mix_i,
 *   ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1),
 * lo, hi = wisp_rope_yarn_dims, and the magnitude becomes
 * attn_factor * (1 + 0.1 ln(1 / freq_scale)). */
typedef struct wisp_rope_spec {
    int32_t dim;
    float base, freq_scale, attn_factor;
    const float *factors; /* [dim/2] or NULL */
    float ext_factor;     /* YaRN's mix (0: none) */
    int32_t orig_ctx;     /* the context the model was trained with before scaling (YaRN) */
} wisp_rope_spec;

/* YaRN's correction range: the pair whose wavelength fits the original
 * context b times is dim * ln(orig_ctx / (2 pi b)) / (2 ln base); lo is
 * that for b = 32 (beta_fast) rounded down and at least 0, hi for b = 1
 * (beta_slow) rounded up and at most dim - 1. Pairs below lo rotate
 * unscaled, pairs above hi fully interpolated. */
void wisp_rope_yarn_dims(const wisp_rope_spec *r, double *lo, double *hi);

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
