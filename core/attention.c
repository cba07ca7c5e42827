#include "attention.h"

#include <math.h>
#include <string.h>

void wisp_attention_job(void *args, int ith, int nth) {
    const wisp_attention_args *a = args;
    const wisp_kernels *k = a->k;
    int32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    size_t row = (size_t)a->n_heads * hd, elem = a->kv_f16 ? 2 : 4;
    float *sc = a->scores + (size_t)ith * a->block;
    int64_t lo, hi;
    wisp_split((int64_t)a->n_tok * a->n_heads, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        int32_t t = (int32_t)(item / a->n_heads), h = (int32_t)(item % a->n_heads);
        int32_t n_keys = a->pos0 + t + 1;
        const float *q = a->q + t * row + (size_t)h * hd;
        float *o = a->out + t * row + (size_t)h * hd;
        size_t head_off = (size_t)(h / group) * a->kv_stride * hd * elem;
        const uint8_t *kb = (const uint8_t *)a->k_cache + head_off, *vb = (const uint8_t *)a->v_cache + head_off;
        memset(o, 0, (size_t)hd * sizeof(float));
        float m = -INFINITY;
        double l = 0.0;
        for (int32_t j0 = 0; j0 < n_keys; j0 += a->block) {
            int32_t nb = n_keys - j0 < a->block ? n_keys - j0 : a->block;
            const size_t at = (size_t)j0 * hd * elem, stride = (size_t)hd * elem;
            k->attn_scores(sc, kb + at, stride, a->kv_f16, nb, q, hd, a->scale);
            float bm = -INFINITY;
            for (int32_t j = 0; j < nb; j++)
                if (sc[j] > bm) bm = sc[j];
            if (bm > m) { /* a new maximum: rescale what was accumulated so far */
                if (m != -INFINITY) {
                    float r = expf(m - bm);
                    k->scale_f32(o, r, hd);
                    l *= r;
                }
                m = bm;
            }
            for (int32_t j = 0; j < nb; j++) { /* the scores become the weights */
                sc[j] = expf(sc[j] - m);
                l += sc[j];
            }
            k->attn_values(o, sc, vb + at, stride, a->kv_f16, nb, hd);
        }
        k->scale_f32(o, (float)(1.0 / l), hd);
        if (a->lse) a->lse[(size_t)t * a->n_heads + h] = m + (float)log(l);
    }
}
