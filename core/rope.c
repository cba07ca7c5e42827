#include "rope.h"

#include <math.h>
#include <stddef.h>

wisp_rope_spec wisp_rope_spec_of(const wisp_model *m, int32_t n_ctx, bool windowed) {
    const wisp_hparams *hp = &m->hp;
    /* gemma3's local layers keep their own base and no linear scaling (the
     * 4B-27B checkpoints scale only the global layers, as llama.cpp does) */
    bool local = windowed && wisp_hparams_row(hp)->rope_base_swa;
    wisp_rope_spec r = {hp->rope_dim, local ? hp->rope_base_swa : hp->rope_base, local ? 1.0f : hp->rope_freq_scale,
                        hp->rope_attn_factor, wisp_model_rope_factors(m, n_ctx), local ? 0.0f : hp->rope_ext_factor,
                        hp->rope_orig_ctx};
    return r;
}

/* YaRN's beta_fast and beta_slow: llama.cpp's defaults, which no GGUF key of
 * the families wisp runs changes */
#define YARN_BETA_FAST 32.0
#define YARN_BETA_SLOW 1.0

static double yarn_corr_dim(const wisp_rope_spec *r, double rotations) {
    const double two_pi = 6.283185307179586;
    return r->dim * log((double)r->orig_ctx / (rotations * two_pi)) / (2.0 * log((double)r->base));
}

void wisp_rope_yarn_dims(const wisp_rope_spec *r, double *lo, double *hi) {
    *lo = floor(yarn_corr_dim(r, YARN_BETA_FAST));
    *hi = ceil(yarn_corr_dim(r, YARN_BETA_SLOW));
    if (*lo < 0) *lo = 0;
    if (*hi > r->dim - 1) *hi = r->dim - 1;
}

void wisp_rope_table(float *table, int32_t pos0, int32_t n_pos, const wisp_rope_spec *r) {
    int32_t half = r->dim / 2;
    double mag = r->attn_factor, lo = 0, hi = 0;
    if (r->ext_factor != 0.0f) {
        wisp_rope_yarn_dims(r, &lo, &hi);
        mag *= 1.0 + 0.1 * log(1.0 / (double)r->freq_scale);
    }
    for (int32_t i = 0; i < half; i++) {
        /* in double: positions reach the thousands and the angle must stay exact to ~1e-7 */
        double unscaled = pow((double)r->base, -2.0 * i / r->dim);
        double freq = unscaled * (double)r->freq_scale;
        if (r->factors) {
            freq /= (double)r->factors[i];
            unscaled /= (double)r->factors[i];
        }
        if (r->ext_factor != 0.0f) {
            double ramp = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
            double mix = (1.0 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp)) * (double)r->ext_factor;
            freq = freq * (1.0 - mix) + unscaled * mix;
        }
        for (int32_t t = 0; t < n_pos; t++) {
            double a = (double)(pos0 + t) * freq;
            table[(size_t)t * r->dim + 2 * i] = (float)(cos(a) * mag);
            table[(size_t)t * r->dim + 2 * i + 1] = (float)(sin(a) * mag);
        }
    }
}

void wisp_rope_apply(float *x, int32_t n_heads, int32_t head_dim, int32_t rope_dim, const float *cs, bool neox,
                     bool inverse) {
    int32_t half = rope_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            float c = cs[2 * i], s = inverse ? -cs[2 * i + 1] : cs[2 * i + 1];
            int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}
