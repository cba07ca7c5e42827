/* The backward pass of causal attention, flash-style: no score matrix is
 * stored. Each probability is recomputed from the query, the key and the
 * log-sum-exp the forward pass saved (p = exp(scale q.k - lse)), and
 *
 *   D_t   = dO_t . O_t
 *   dS_tj = p_tj (dO_t . V_j - D_t)
 *   dQ_t  = scale sum_j dS_tj K_j      dK_j = scale sum_t dS_tj Q_t      dV_j = sum_t p_tj dO_t
 *
 * Two passes keep every sum in one worker and in a fixed order, whatever the
 * thread count: one over (query, head) for dQ, one over (key, kv head) for
 * dK and dV, which sum over the query heads sharing that kv head (GQA) and
 * over the later queries. Rows are taken WISP_ATTN_BLOCK at a time through
 * the kernel table's attention loops (attn_scores for the dot products,
 * attn_values for the weighted sums), the forward pass's own kernels, so a
 * recomputed score is bit for bit the one the forward pass normalised.
 * Each probability is computed twice; attention is a small share of a step
 * next to the projections.
 *
 * When q, k, v and O were stored in reduced precision, the saved lse and
 * dO . O no longer match probabilities recomputed from the rounded values,
 * and the rows of dS stop summing to zero (the softmax's invariance), which
 * turns key offsets into large dQ errors. Then lse and D are recomputed from
 * the rounded values themselves, so the gradient is the exact gradient of
 * the rounded inputs. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "layer_ops.h"
#include "train.h"

enum { BLOCK = WISP_ATTN_BLOCK };

typedef struct attn_bwd {
    wisp_train *tr;
    const train_views *v;
    const float *dout;
    float scale;
    float softcap;   /* scores were soft-capped (0: not) */
    int32_t window;  /* query s saw keys s - window < j <= s (0: all) */
    bool consistent; /* recompute lse and D from the (rounded) inputs */
} attn_bwd;

/* The first key query position s sees. */
static int32_t first_key(const attn_bwd *a, int32_t s) { return a->window > 0 && s + 1 > a->window ? s + 1 - a->window : 0; }

/* Scores of nb keys (or queries) as the forward pass saw them: scaled, then soft-capped. */
static void scores(const attn_bwd *a, float *sc, const float *rows, size_t stride, int32_t nb, const float *x) {
    a->tr->exec.k.attn_scores(sc, rows, stride, 0, nb, x, a->tr->hd, a->scale);
    if (a->softcap > 0) wisp_softcap(sc, nb, a->softcap);
}

/* d(raw score) from d(capped score): the soft-cap's derivative at capped score c. */
static float cap_grad(const attn_bwd *a, float c) {
    if (a->softcap <= 0) return 1.0f;
    float t = c / a->softcap;
    return 1.0f - t * t;
}

/* worker scratch: scores, dO.V products, weights, BLOCK floats each */
static float *scratch(const attn_bwd *a, int ith) { return a->tr->scores + (size_t)ith * 3 * BLOCK; }

static size_t head_row(const wisp_train *tr, int32_t b, int32_t g, int32_t j) {
    return (((size_t)b * tr->KVH + g) * tr->S + j) * tr->hd;
}

/* lse_t = log sum_j exp(scale q.k_j) and D_t = sum_j p_tj dO.v_j over the keys of query t */
static void recompute_row(const attn_bwd *a, float *sc, float *dp, int64_t t, int32_t h, float *lse, float *D) {
    const wisp_train *tr = a->tr;
    const wisp_kernels *k = &tr->exec.k;
    int32_t b = (int32_t)(t / tr->S), n = (int32_t)(t % tr->S) + 1, g = h / (tr->H / tr->KVH), hd = tr->hd;
    int32_t j_lo = first_key(a, n - 1);
    const float *q = a->v->q + t * tr->Q + (size_t)h * hd, *dO = a->dout + t * tr->Q + (size_t)h * hd;
    const float *kb = a->v->kh + head_row(tr, b, g, 0), *vb = a->v->vh + head_row(tr, b, g, 0);
    size_t stride = (size_t)hd * sizeof(float);
    float m = -INFINITY;
    for (int32_t j0 = j_lo; j0 < n; j0 += BLOCK) {
        int32_t nb = n - j0 < BLOCK ? n - j0 : BLOCK;
        scores(a, sc, kb + (size_t)j0 * hd, stride, nb, q);
        for (int32_t j = 0; j < nb; j++) m = sc[j] > m ? sc[j] : m;
    }
    double l = 0, d = 0;
    for (int32_t j0 = j_lo; j0 < n; j0 += BLOCK) {
        int32_t nb = n - j0 < BLOCK ? n - j0 : BLOCK;
        scores(a, sc, kb + (size_t)j0 * hd, stride, nb, q);
        for (int32_t j = 0; j < nb; j++) l += exp((double)(sc[j] - m));
    }
    *lse = m + (float)log(l);
    for (int32_t j0 = j_lo; j0 < n; j0 += BLOCK) {
        int32_t nb = n - j0 < BLOCK ? n - j0 : BLOCK;
        scores(a, sc, kb + (size_t)j0 * hd, stride, nb, q);
        k->attn_scores(dp, vb + (size_t)j0 * hd, stride, 0, nb, dO, hd, 1.0f);
        for (int32_t j = 0; j < nb; j++) d += (double)expf(sc[j] - *lse) * dp[j];
    }
    *D = (float)d;
}

static void rowsum_job(void *arg, int ith, int nth) {
    const attn_bwd *a = arg;
    wisp_train *tr = a->tr;
    float *sc = scratch(a, ith), *dp = sc + BLOCK;
    int64_t lo, hi;
    wisp_split((int64_t)tr->T * tr->H, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t t = i / tr->H;
        int32_t h = (int32_t)(i % tr->H);
        size_t off = t * tr->Q + (size_t)h * tr->hd;
        if (a->consistent) recompute_row(a, sc, dp, t, h, &a->v->lse[i], &tr->dsum[i]);
        else tr->dsum[i] = tr->exec.k.dot_f32(a->dout + off, a->v->o + off, tr->hd);
    }
}

/* dQ_t = scale sum_j dS_tj K_j, for each (query, head) */
static void dq_job(void *arg, int ith, int nth) {
    const attn_bwd *a = arg;
    wisp_train *tr = a->tr;
    const wisp_kernels *k = &tr->exec.k;
    int32_t group = tr->H / tr->KVH, hd = tr->hd;
    size_t stride = (size_t)hd * sizeof(float);
    float *sc = scratch(a, ith), *dp = sc + BLOCK, *w = dp + BLOCK;
    int64_t lo, hi;
    wisp_split((int64_t)tr->T * tr->H, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t t = i / tr->H;
        int32_t h = (int32_t)(i % tr->H), b = (int32_t)(t / tr->S), n = (int32_t)(t % tr->S) + 1;
        const float *q = a->v->q + t * tr->Q + (size_t)h * hd, *dO = a->dout + t * tr->Q + (size_t)h * hd;
        const float *kb = a->v->kh + head_row(tr, b, h / group, 0), *vb = a->v->vh + head_row(tr, b, h / group, 0);
        float *dq = tr->dq + t * tr->Q + (size_t)h * hd, lse = a->v->lse[i], D = tr->dsum[i];
        memset(dq, 0, (size_t)hd * sizeof(float));
        for (int32_t j0 = first_key(a, n - 1); j0 < n; j0 += BLOCK) {
            int32_t nb = n - j0 < BLOCK ? n - j0 : BLOCK;
            scores(a, sc, kb + (size_t)j0 * hd, stride, nb, q);
            k->attn_scores(dp, vb + (size_t)j0 * hd, stride, 0, nb, dO, hd, 1.0f);
            for (int32_t j = 0; j < nb; j++) w[j] = a->scale * (expf(sc[j] - lse) * (dp[j] - D)) * cap_grad(a, sc[j]);
            k->attn_values(dq, w, kb + (size_t)j0 * hd, stride, 0, nb, hd);
        }
    }
}

/* dK_j and dV_j, for each (key, kv head): over the group's query heads, then the later queries */
static void dkv_job(void *arg, int ith, int nth) {
    const attn_bwd *a = arg;
    wisp_train *tr = a->tr;
    const wisp_kernels *k = &tr->exec.k;
    int32_t group = tr->H / tr->KVH, hd = tr->hd;
    size_t row_stride = (size_t)tr->Q * sizeof(float); /* queries and dO of one head, token after token */
    float *sc = scratch(a, ith), *dp = sc + BLOCK, *w = dp + BLOCK;
    int64_t lo, hi;
    wisp_split((int64_t)tr->n_seq * tr->KVH * tr->S, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int32_t j = (int32_t)(i % tr->S), g = (int32_t)(i / tr->S % tr->KVH), b = (int32_t)(i / tr->S / tr->KVH);
        size_t row = head_row(tr, b, g, j);
        const float *kj = a->v->kh + row, *vj = a->v->vh + row;
        float *dk = tr->dkh + row, *dv = tr->dvh + row;
        memset(dk, 0, (size_t)hd * sizeof(float));
        memset(dv, 0, (size_t)hd * sizeof(float));
        /* the queries that saw key j: j .. j + window - 1 */
        int32_t s_end = a->window > 0 && tr->S - j > a->window ? j + a->window : tr->S;
        for (int32_t h = g * group; h < (g + 1) * group; h++)
            for (int32_t s0 = j; s0 < s_end; s0 += BLOCK) {
                int32_t nb = s_end - s0 < BLOCK ? s_end - s0 : BLOCK;
                int64_t t0 = (int64_t)b * tr->S + s0;
                const float *qs = a->v->q + t0 * tr->Q + (size_t)h * hd, *dOs = a->dout + t0 * tr->Q + (size_t)h * hd;
                scores(a, sc, qs, row_stride, nb, kj);
                k->attn_scores(dp, dOs, row_stride, 0, nb, vj, hd, 1.0f);
                for (int32_t s = 0; s < nb; s++) {
                    size_t th = (size_t)(t0 + s) * tr->H + (size_t)h;
                    float p = expf(sc[s] - a->v->lse[th]);
                    w[s] = a->scale * (p * (dp[s] - tr->dsum[th])) * cap_grad(a, sc[s]);
                    sc[s] = p;
                }
                k->attn_values(dv, sc, dOs, row_stride, 0, nb, hd);
                k->attn_values(dk, w, qs, row_stride, 0, nb, hd);
            }
    }
}

void wisp_train_attention_backward(wisp_train *tr, const train_views *v, const float *dout, int32_t window) {
    const wisp_hparams *hp = &tr->model->hp;
    attn_bwd a = {tr, v, dout, hp->attn_scale, hp->attn_softcap, window,
                  tr->cfg.act_type != WISP_TYPE_F32 && !tr->cfg.checkpointing};
    wisp_exec_parallel(&tr->exec, rowsum_job, &a);
    wisp_exec_parallel(&tr->exec, dq_job, &a);
    wisp_exec_parallel(&tr->exec, dkv_job, &a);
}
