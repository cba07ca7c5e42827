#include "attention.h"

#include <math.h>
#include <string.h>

#include "layer_ops.h"

/* The online softmax state of one query: running maximum and denominator. */
typedef struct softmax_state {
    float m;
    double l;
} softmax_state;

/* A block's nb scores for one query: rescale what was accumulated in o if
 * the maximum grew, then turn the scores into the weights. */
static void softmax_block(const wisp_kernels *k, float *sc, int32_t nb, float *o, int32_t hd, softmax_state *st) {
    const float bm = k->max_f32(sc, nb);
    if (bm > st->m) { /* a new maximum: rescale what was accumulated so far */
        if (st->m != -INFINITY) {
            float r = expf(st->m - bm);
            k->scale_f32(o, r, hd);
            st->l *= r;
        }
        st->m = bm;
    }
    k->softmax_exp(sc, nb, st->m, &st->l);
}

/* The first key a query at `pos` sees. */
static int32_t first_key(const wisp_attention_args *a, int32_t pos) {
    return a->window > 0 && pos + 1 > a->window ? pos + 1 - a->window : 0;
}

/* Keys from j0 on that one block takes: blocks lie at multiples of the
 * block size whatever the first key (a window's start), so the partition,
 * and with it every rounding, depends on positions only, never on how the
 * prompt was cut into steps; a ring's size is a multiple of the block size
 * (WISP_KV_RING_ALIGN), so no block straddles its wrap. */
static int32_t block_keys(const wisp_attention_args *a, int32_t j0, int32_t n_keys) {
    int32_t nb = a->block - j0 % a->block;
    return n_keys - j0 < nb ? n_keys - j0 : nb;
}

/* The cache row of key j0, shortening *nb to the keys that follow it
 * contiguously (a windowed layer's ring wraps around). */
static int32_t key_row(const wisp_attention_args *a, int32_t j0, int32_t *nb) {
    if (!a->kv_ring) return j0;
    int32_t r = j0 % a->kv_ring;
    if (*nb > a->kv_ring - r) *nb = a->kv_ring - r;
    return r;
}

/* Keys [j0, j0+nb) for one query: score them, rescale what was accumulated
 * if the maximum grew, and add the weighted values into o. */
static void attend_block(const wisp_attention_args *a, float *sc, const void *keys, const void *values, size_t stride,
                         int kv_f16, int32_t nb, const float *q, float *o, softmax_state *st) {
    const wisp_kernels *k = a->k;
    const int32_t hd = a->head_dim;
    k->attn_scores(sc, keys, stride, kv_f16, nb, q, hd, a->scale);
    if (a->softcap > 0) wisp_softcap(sc, nb, a->softcap);
    softmax_block(k, sc, nb, o, hd, st);
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
        int32_t n_keys = a->pos0 + t + 1, j_lo = first_key(a, a->pos0 + t);
        const float *q = a->q + t * row + (size_t)h * hd;
        float *o = a->out + t * row + (size_t)h * hd;
        size_t head_off = (size_t)(h / group) * a->kv_stride * stride;
        const uint8_t *kb = (const uint8_t *)a->k_cache + head_off, *vb = (const uint8_t *)a->v_cache + head_off;
        memset(o, 0, (size_t)hd * sizeof(float));
        softmax_state st = {-INFINITY, 0.0};
        for (int32_t j0 = j_lo, nb; j0 < n_keys; j0 += nb) {
            nb = block_keys(a, j0, n_keys);
            size_t at = (size_t)key_row(a, j0, &nb) * stride;
            attend_block(a, sc, kb + at, vb + at, stride, a->kv_f16, nb, q, o, &st);
        }
        finish_query(a, o, &st, t, h);
    }
}

/* A (token, kv head) work item over an F16 cache: where its keys and
 * values start, and its query heads' outputs (zeroed) and softmax states
 * (reset), the group's heads one after the other. */
typedef struct kv_head_item {
    int32_t t, g, j_lo, n_keys; /* keys [j_lo, n_keys) */
    const uint8_t *kb, *vb;
    float *o0;
} kv_head_item;

static kv_head_item kv_head_start(const wisp_attention_args *a, int64_t item, softmax_state *st) {
    const int32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    kv_head_item it;
    it.t = (int32_t)(item / a->n_kv_heads);
    it.g = (int32_t)(item % a->n_kv_heads);
    it.n_keys = a->pos0 + it.t + 1;
    it.j_lo = first_key(a, a->pos0 + it.t);
    const size_t head_off = (size_t)it.g * a->kv_stride * (size_t)hd * 2;
    it.kb = (const uint8_t *)a->k_cache + head_off;
    it.vb = (const uint8_t *)a->v_cache + head_off;
    it.o0 = a->out + (size_t)it.t * a->n_heads * hd + (size_t)it.g * group * hd;
    memset(it.o0, 0, (size_t)group * hd * sizeof(float));
    for (int32_t i = 0; i < group; i++) st[i] = (softmax_state){-INFINITY, 0.0};
    return it;
}

static void kv_head_finish(const wisp_attention_args *a, const kv_head_item *it, const softmax_state *st) {
    const int32_t group = a->n_heads / a->n_kv_heads;
    for (int32_t i = 0; i < group; i++) finish_query(a, it->o0 + (size_t)i * a->head_dim, &st[i], it->t, it->g * group + i);
}

/* One (token, kv head) pair per work item: each block of F16 keys and
 * values is converted to F32 once and used by every query head of the
 * group. Where halves have no hardware conversion (WebAssembly) the
 * conversions, once per query head, were most of attention's time; with
 * hardware conversion the extra pass cost more than it saved (SmolLM2
 * decode 2% slower with AVX-512), so those levels keep the per-head path,
 * or the fused one below where the level has its kernels.
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
        const kv_head_item it = kv_head_start(a, item, st);
        for (int32_t j0 = it.j_lo, nb; j0 < it.n_keys; j0 += nb) {
            nb = block_keys(a, j0, it.n_keys);
            size_t at = (size_t)key_row(a, j0, &nb) * stride16;
            a->k->f16_to_f32((const uint16_t *)(const void *)(it.kb + at), kf, (int64_t)nb * hd);
            a->k->f16_to_f32((const uint16_t *)(const void *)(it.vb + at), vf, (int64_t)nb * hd);
            for (int32_t i = 0; i < group; i++) {
                const float *q = a->q + it.t * row + (size_t)(it.g * group + i) * hd;
                attend_block(a, sc, kf, vf, stride32, 0, nb, q, it.o0 + (size_t)i * hd, &st[i]);
            }
        }
        kv_head_finish(a, &it, st);
    }
}

/* One (token, kv head) pair per work item, its query heads scored and
 * summed together by the level's *_heads kernels, which convert each F16
 * key and value once for all of them, in registers. Once per query head,
 * the conversions were about a third of attention on Zen 4 with AVX-512;
 * fused, SmolLM2's attention over 160 keys took 232 us a token instead of
 * 300, and its decode ran 4% faster. The worker's score rows, one per
 * query head, are a->block floats apart. */
static void attention_fused(const wisp_attention_args *a, int ith, int nth) {
    const wisp_kernels *k = a->k;
    int32_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    size_t row = (size_t)a->n_heads * hd, stride = (size_t)hd * 2;
    float *sc = a->scores + (size_t)ith * a->scores_rows * a->block;
    softmax_state st[WISP_ATTN_MAX_GROUP];
    int64_t lo, hi;
    wisp_split((int64_t)a->n_tok * a->n_kv_heads, ith, nth, &lo, &hi);
    for (int64_t item = lo; item < hi; item++) {
        const kv_head_item it = kv_head_start(a, item, st);
        const float *q0 = a->q + it.t * row + (size_t)it.g * group * hd;
        for (int32_t j0 = it.j_lo, nb; j0 < it.n_keys; j0 += nb) {
            nb = block_keys(a, j0, it.n_keys);
            size_t at = (size_t)key_row(a, j0, &nb) * stride;
            k->attn_scores_heads(sc, a->block, (const uint16_t *)(const void *)(it.kb + at), stride, nb, q0, hd, group, hd,
                                 a->scale);
            for (int32_t i = 0; i < group; i++) {
                if (a->softcap > 0) wisp_softcap(sc + (size_t)i * a->block, nb, a->softcap);
                softmax_block(k, sc + (size_t)i * a->block, nb, it.o0 + (size_t)i * hd, hd, &st[i]);
            }
            k->attn_values_heads(it.o0, hd, sc, a->block, (const uint16_t *)(const void *)(it.vb + at), stride, nb, group,
                                 hd);
        }
        kv_head_finish(a, &it, st);
    }
}

/* Whether an F16 cache's kv heads serve several query heads, few enough
 * for the per-kv-head paths' softmax states. */
static bool kv_heads_shared(int kv_f16, int32_t n_heads, int32_t n_kv_heads) {
    int32_t group = n_heads / n_kv_heads;
    return kv_f16 && group > 1 && group <= WISP_ATTN_MAX_GROUP;
}

bool wisp_attention_fused(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads) {
    return k && k->attn_heads_fused && kv_heads_shared(kv_f16, n_heads, n_kv_heads);
}

int32_t wisp_attention_score_rows(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads) {
    return wisp_attention_fused(k, kv_f16, n_heads, n_kv_heads) ? n_heads / n_kv_heads : 1;
}

bool wisp_attention_grouped(const wisp_kernels *k, int kv_f16, int32_t n_heads, int32_t n_kv_heads) {
    return k && k->convert_kv_once && kv_heads_shared(kv_f16, n_heads, n_kv_heads);
}

void wisp_attention_job(void *args, int ith, int nth) {
    const wisp_attention_args *a = args;
    if (a->kv_f32 && wisp_attention_grouped(a->k, a->kv_f16, a->n_heads, a->n_kv_heads))
        attention_grouped(a, ith, nth);
    else if (a->scores_rows >= a->n_heads / a->n_kv_heads &&
             wisp_attention_fused(a->k, a->kv_f16, a->n_heads, a->n_kv_heads))
        attention_fused(a, ith, nth);
    else
        attention_per_head(a, ith, nth);
}
