#include "rope.h"

#include <math.h>
#include <stddef.h>

void wisp_rope_table(float *table, int32_t pos0, int32_t n_pos, int32_t rope_dim, float base) {
    int32_t half = rope_dim / 2;
    for (int32_t i = 0; i < half; i++) {
        /* in double: positions reach the thousands and the angle must stay exact to ~1e-7 */
        double freq = pow((double)base, -2.0 * i / rope_dim);
        for (int32_t t = 0; t < n_pos; t++) {
            double a = (double)(pos0 + t) * freq;
            table[(size_t)t * rope_dim + 2 * i] = (float)cos(a);
            table[(size_t)t * rope_dim + 2 * i + 1] = (float)sin(a);
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
