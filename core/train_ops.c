/* Row operations of the training passes, each threaded over token rows (or
 * columns) so that every output element is computed by one worker with the
 * same arithmetic whatever the thread count. */
#include <math.h>
#include <string.h>

#include "half.h"
#include "layer_ops.h"
#include "matmul_t.h"
#include "dora.h"
#include "train.h"

typedef struct range_job {
    void (*fn)(void *arg, int64_t lo, int64_t hi);
    void *arg;
    int64_t n;
} range_job;

static void range_worker(void *p, int ith, int nth) {
    const range_job *j = p;
    int64_t lo, hi;
    wisp_split(j->n, ith, nth, &lo, &hi);
    if (lo < hi) j->fn(j->arg, lo, hi);
}

void wisp_train_parallel(wisp_train *tr, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg) {
    range_job j = {fn, arg, n};
    wisp_exec_parallel(&tr->exec, range_worker, &j);
}

/* ---- RMSNorm ---- */

typedef struct norm_job {
    const wisp_kernels *k;
    float *y, *dx;
    const float *x, *w, *dy;
    int32_t n;
    float eps;
    bool accumulate;
} norm_job;

static void norm_rows(void *p, int64_t lo, int64_t hi) {
    const norm_job *j = p;
    for (int64_t t = lo; t < hi; t++) j->k->rmsnorm(j->y + t * j->n, j->x + t * j->n, j->w, j->n, j->eps);
}

void wisp_train_rmsnorm_rows(wisp_train *tr, float *y, const float *x, const float *w, int32_t n_rows) {
    norm_job j = {&tr->exec.k, y, NULL, x, w, NULL, tr->D, tr->model->hp.rms_eps, false};
    wisp_train_parallel(tr, n_rows, norm_rows, &j);
}

static void norm_backward_rows(void *p, int64_t lo, int64_t hi) {
    const norm_job *j = p;
    for (int64_t t = lo; t < hi; t++)
        wisp_rmsnorm_backward_row(j->dx + t * j->n, j->x + t * j->n, j->w, j->dy + t * j->n, j->n, j->eps, j->accumulate);
}

void wisp_train_rmsnorm_backward(wisp_train *tr, float *dx, const float *x, const float *w, const float *dy,
                                 int32_t n_rows, bool accumulate) {
    norm_job j = {&tr->exec.k, NULL, dx, x, w, dy, tr->D, tr->model->hp.rms_eps, accumulate};
    wisp_train_parallel(tr, n_rows, norm_backward_rows, &j);
}

/* ---- gated activations (layer_ops.c) ---- */

typedef struct act_job {
    const wisp_kernels *k;
    wisp_activation fn;
    float *act, *dact;
    const float *g, *u;
    int64_t n;
} act_job;

static void act_rows(void *p, int64_t lo, int64_t hi) {
    const act_job *j = p;
    for (int64_t t = lo; t < hi; t++) {
        memcpy(j->act + t * j->n, j->g + t * j->n, (size_t)j->n * sizeof(float));
        wisp_act_mul(j->k, j->fn, j->act + t * j->n, j->u + t * j->n, j->n);
    }
}

void wisp_train_act_mul_rows(wisp_train *tr, float *act, const float *g, const float *u) {
    act_job j = {&tr->exec.k, wisp_hparams_row(&tr->model->hp)->act, act, NULL, g, u, tr->F};
    wisp_train_parallel(tr, tr->T, act_rows, &j);
}

static void act_backward_rows(void *p, int64_t lo, int64_t hi) {
    const act_job *j = p;
    size_t at = (size_t)(lo * j->n);
    wisp_act_mul_backward(j->fn, j->dact + at, j->act + at, j->g + at, j->u + at, (hi - lo) * j->n);
}

void wisp_train_act_mul_backward(wisp_train *tr, float *dact, float *act, const float *g, const float *u) {
    act_job j = {&tr->exec.k, wisp_hparams_row(&tr->model->hp)->act, act, dact, g, u, tr->F};
    wisp_train_parallel(tr, tr->T, act_backward_rows, &j);
}

/* ---- queries and keys: q/k norms and RoPE (layer_ops.c) ---- */

typedef struct qk_job {
    wisp_train *tr;
    const wisp_layer *L;
    const float *table;
    float *q, *k;
    const float *q_in, *k_in;
} qk_job;

static void qk_rows(void *p, int64_t lo, int64_t hi) {
    const qk_job *j = p;
    const wisp_train *tr = j->tr;
    const wisp_hparams *hp = &tr->model->hp;
    for (int64_t t = lo; t < hi; t++)
        wisp_layer_qk_rope(&tr->exec.k, hp, j->L, j->q + (size_t)t * tr->Q, j->k + (size_t)t * tr->KV,
                           j->table + (size_t)(t % tr->S) * hp->rope_dim);
}

void wisp_train_qk_rope_rows(wisp_train *tr, int32_t layer, float *q, float *k) {
    qk_job j = {tr, &tr->model->layers[layer], wisp_train_rope_of(tr, layer), q, k, NULL, NULL};
    wisp_train_parallel(tr, tr->T, qk_rows, &j);
}

static void qk_backward_rows(void *p, int64_t lo, int64_t hi) {
    const qk_job *j = p;
    const wisp_train *tr = j->tr;
    const wisp_hparams *hp = &tr->model->hp;
    for (int64_t t = lo; t < hi; t++)
        wisp_layer_qk_rope_backward(hp, j->L, j->q + (size_t)t * tr->Q, j->k + (size_t)t * tr->KV,
                                    j->q_in ? j->q_in + (size_t)t * tr->Q : NULL,
                                    j->k_in ? j->k_in + (size_t)t * tr->KV : NULL,
                                    j->table + (size_t)(t % tr->S) * hp->rope_dim);
}

void wisp_train_qk_rope_backward(wisp_train *tr, int32_t layer, float *dq, float *dk, const float *q_in,
                                 const float *k_in) {
    qk_job j = {tr, &tr->model->layers[layer], wisp_train_rope_of(tr, layer), dq, dk, q_in, k_in};
    wisp_train_parallel(tr, tr->T, qk_backward_rows, &j);
}

/* ---- projections ---- */

void wisp_train_project(wisp_train *tr, int32_t layer, int proj, const float *x, float *y, float *h,
                        const float *bias) {
    const wisp_weight *w = &tr->model->layers[layer].proj[proj];
    wisp_exec_matmul(&tr->exec, w, x, w->cols, tr->T, y, w->rows);
    int32_t pair = tr->pair_of[layer * WISP_PROJ_COUNT + proj];
    if (pair >= 0 && !tr->adapter_off) { /* adapter_off: the base alone (DPO's reference model) */
        wisp_train_lora_forward(tr, pair, layer, x, h, y);
        if (tr->pairs[pair].magnitude) wisp_dora_scale_rows(&tr->pairs[pair], y, w->rows, tr->T);
    }
    if (bias)
        for (int32_t t = 0; t < tr->T; t++)
            for (int32_t i = 0; i < w->rows; i++) y[(size_t)t * w->rows + i] += bias[i];
}

typedef struct matmul_t_job {
    wisp_train *tr;
    const wisp_weight *w;
    const float *dy;
    int32_t n_tok;
    float *dx;
} matmul_t_job;

/* whole tiles of columns per worker, each with its own scratch */
static void matmul_t_columns(void *p, int ith, int nth) {
    const matmul_t_job *j = p;
    const wisp_train *tr = j->tr;
    int64_t cb = wisp_matmul_t_cols(j->w->type), units = (j->w->cols + cb - 1) / cb, lo, hi;
    wisp_split(units, ith, nth, &lo, &hi);
    lo *= cb;
    hi = hi * cb < j->w->cols ? hi * cb : j->w->cols;
    if (lo < hi)
        wisp_matmul_t_range(&tr->exec.k, j->w, j->dy, j->w->rows, j->n_tok, j->dx, j->w->cols, lo, hi,
                            tr->tile + (size_t)ith * (size_t)tr->cfg.backward_tile, tr->cfg.backward_tile,
                            tr->tile_out + (size_t)ith * tr->tile_out_floats);
}

void wisp_train_matmul_t(wisp_train *tr, const wisp_weight *w, const float *dy, int32_t n_tok, float *dx,
                         bool accumulate) {
    if (!accumulate) memset(dx, 0, (size_t)n_tok * (size_t)w->cols * sizeof(float));
    matmul_t_job j = {tr, w, dy, n_tok, dx};
    wisp_exec_parallel(&tr->exec, matmul_t_columns, &j);
}

/* ---- layouts and storage ---- */

void wisp_train_to_heads(const wisp_train *tr, const float *tok, float *heads) {
    for (int32_t t = 0; t < tr->T; t++) {
        int32_t b = t / tr->S, s = t % tr->S;
        for (int32_t g = 0; g < tr->KVH; g++)
            memcpy(heads + (((size_t)b * tr->KVH + g) * tr->S + s) * tr->hd, tok + (size_t)t * tr->KV + (size_t)g * tr->hd,
                   (size_t)tr->hd * sizeof(float));
    }
}

void wisp_train_from_heads(const wisp_train *tr, const float *heads, float *tok) {
    for (int32_t t = 0; t < tr->T; t++) {
        int32_t b = t / tr->S, s = t % tr->S;
        for (int32_t g = 0; g < tr->KVH; g++)
            memcpy(tok + (size_t)t * tr->KV + (size_t)g * tr->hd, heads + (((size_t)b * tr->KVH + g) * tr->S + s) * tr->hd,
                   (size_t)tr->hd * sizeof(float));
    }
}

void wisp_train_save_rows(const wisp_train *tr, void *dst, const float *src, size_t n) {
    if (tr->cfg.act_type == WISP_TYPE_F32) memcpy(dst, src, n * sizeof(float));
    else if (tr->cfg.act_type == WISP_TYPE_F16) tr->exec.k.f32_to_f16(src, dst, (int64_t)n);
    else
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = wisp_f32_to_bf16(src[i]);
}

void wisp_train_load_rows(const wisp_train *tr, float *dst, const void *src, size_t n) {
    if (tr->cfg.act_type == WISP_TYPE_F32) memcpy(dst, src, n * sizeof(float));
    else if (tr->cfg.act_type == WISP_TYPE_F16) tr->exec.k.f16_to_f32(src, dst, (int64_t)n);
    else tr->exec.k.bf16_to_f32(src, dst, (int64_t)n);
}
