#include "attention.h"

#include <math.h>
#include <string.h>

/* The online softmax state of one query: running maximum and denominator. */
typedef struct softmax_state {
    float m;
    double l;
} softmax_state;

/* Keys [j0, j0+nb) for one query: score them, rescale what was accumulated
 * if the maximum grew, and add the weighted values into o. */
static void attend_block(const wisp_attention_args *a, float *sc, const void *keys, const void *values, size_t stride,
                         int kv_f16, int32_t nb, const float *q, float *o, softmax_state *st) {
    const wisp_kernels *k = a->k;
    const int32_t hd = a->head_dim;
    k->attn_scores(sc, keys, stride, kv_f16, nb, q, hd, a->scale);
    const float bm = k->max_f32(sc, nb);
    if (bm > st->m) { /* a new maximum: rescale what was accumulated so far */
        if (st->m != -INFINITY) {
            float r = expf(st->m - bm);
            k->scale_f32(o, r, hd);
            st->l *= r;
        }
        st->m = bm;
    }
    k->softmax_exp(sc, nb, st->m, &st->l); /* the scores become the weights */
    k->attn_values(o, sc, values, stride, kv_f16, nb, hd);
}

static void finish_query(const wisp_attention_args *a, float *o, const softmax_state *st, int32_t t, int32_t h) {
    a->k->scale_f32(o, (float)(1.0 / st->l), a->head_dim);
    if (a->lse) a->lse[(size_t)t * a->n_heads + h] = st->m + (float)log(st->l);
}

/* One (token, head) pair per work item, reading the cache as it is. */
static void attention_per_head(const wisp_attention_args *a, int ith, int nth) {
    int32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    size_t row = (size_t)a->n_heads * hd, elem = a->kv_f16 ? 2 : 4, stride = (size_t)hd * elem;
    float *sc = a->scores + (size_t)ith * a->block;
    int64_t lo, hi;
    wisp_split((int64_t)a->n_tok * a->n_heads, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        int32_t t = (int32_t)(item / a->n_heads), h = (int32_t)(item % a->n_heads);
        int32_t n_keys = a->pos0 + t + 1;
        const float *q = a->q + t * row + (size_t)h * hd;
        float *o = a->out + t * row + (size_t)h * hd;
        size_t head_off = (size_t)(h / group) * a->kv_stride * stride;
        const uint8_t *kb = (const uint8_t *)a->k_cache + head_off, *vb = (const uint8_t *)a->v_cache + head_off;
        memset(o, 0, (size_t)hd * sizeof(float));
        softmax_state st = {-INFINITY, 0.0};
        for (int32_t j0 = 0; j0 < n_keys; j0 += a->block) {
            int32_t nb = n_keys - j0 < a->block ? n_keys - j0 : a->block;
            size_t at = (size_t)j0 * stride;
            attend_block(a, sc, kb + at, vb + at, stride, a->kv_f16, nb, q, o, &st);
        }
        finish_query(a, o, &st, t, h);
    }
}

/* One (token, kv head) pair per work item: each block of F16 keys and
 * values is converted to F32 once and used by every query head of the
 * group. Where halves have no hardware conversion (WebAssembly) the
 * conversions, once per query head, were most of attention's time; with
 * hardware conversion the extra pass cost more than it saved (SmolLM2
 * decode 2% slower with AVX-512), so those levels keep the per-head path.
 * The conversion is exact and the kernels that ask for this path
 * (the 128-bit ones) do the same arithmetic on F32 rows as on F16 rows, so
 * the results are the per-head path's, bit for bit. */
static void attention_grouped(const wisp_attention_args *a, int ith, int nth) {
    int32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    size_t row = (size_t)a->n_heads * hd, stride16 = (size_t)hd * 2, stride32 = (size_t)hd * sizeof(float);
    float *sc = a->scores + (size_t)ith * a->block;
    float *kf = a->kv_f32 + (size_t)ith * 2 * a->block * hd, *vf = kf + (size_t)a->block * hd;
    softmax_state st[WISP_ATTN_MAX_GROUP];
    int64_t lo, hi;
    wisp_split((int64_t)a->n_tok * a->n_kv_heads, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        int32_t t = (int32_t)(item / a->n_kv_heads), g = (int32_t)(item % a->n_kv_heads);
        int32_t n_keys = a->pos0 + t + 1;
        size_t head_off = (size_t)g * a->kv_stride * stride16;
        const uint8_t *kb = (const uint8_t *)a->k_cache + head_off, *vb = (const uint8_t *)a->v_cache + head_off;
        float *o0 = a->out + t * row + (size_t)g * group * hd;
        memset(o0, 0, (size_t)group * hd * sizeof(float));
        for (int32_t i = 0; i < group; i++) st[i] = (softmax_state){-INFINITY, 0.0};
        for (int32_t j0 = 0; j0 < n_keys; j0 += a->block) {
            int32_t nb = n_keys - j0 < a->block ? n_keys - j0 : a->block;
            size_t at = (size_t)j0 * stride16;
            a->k->f16_to_f32((const uint16_t *)(const void *)(kb + at), kf, (int64_t)nb * hd);
            a->k->f16_to_f32((const uint16_t *)(const void *)(vb + at), vf, (int64_t)nb * hd);
            for (int32_t i = 0; i < group; i++) {
                const float *q = a->q + t * row + (size_t)(g * group + i) * hd;
                attend_block(a, sc, kf, vf, stride32, 0, nb, q, o0 + (size_t)i * hd, &st[i]);
            }
        }
        for (int32_t i = 0; i < group; i++) finish_query(a, o0 + (size_t)i * hd, &st[i], t, g * group + i);
    }
}

bool wisp_attention_grouped(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads) {
    int32_t group = n_heads / n_kv_heads;
    return k && k->convert_kv_once && kv_f16 && group > 1 && group <= WISP_ATTN_MAX_GROUP;
}

void wisp_attention_job(void *args, int ith, int nth) {
    const wisp_attention_args *a = args;
    if (a->kv_f32 && wisp_attention_grouped(a->k, a->kv_f16, a->n_heads, a->n_kv_heads))
        attention_grouped(a, ith, nth);
    else
        attention_per_head(a, ith, nth);
}
