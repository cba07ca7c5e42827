/* Row operations of the training passes, each threaded over token rows (or
 * columns) so that every output element is computed by one worker with the
 * same arithmetic whatever the thread count. */
#include <math.h>
#include <string.h>

#include "half.h"
#include "matmul_t.h"
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

/* y = x r w with r = (mean x^2 + eps)^-1/2, so
 * dx_i = r w_i dy_i - x_i r^3 / n * sum_j dy_j w_j x_j. */
static void norm_backward_rows(void *p, int64_t lo, int64_t hi) {
    const norm_job *j = p;
    int32_t n = j->n;
    for (int64_t t = lo; t < hi; t++) {
        const float *x = j->x + t * n, *dy = j->dy + t * n;
        float *dx = j->dx + t * n;
        double ss = 0, dot = 0;
        for (int32_t i = 0; i < n; i++) {
            ss += (double)x[i] * x[i];
            dot += (double)dy[i] * j->w[i] * x[i];
        }
        double r = 1.0 / sqrt(ss / n + (double)j->eps);
        float rf = (float)r, c = (float)(r * r * r / n * dot);
        for (int32_t i = 0; i < n; i++) {
            float g = rf * (j->w[i] * dy[i]) - c * x[i];
            dx[i] = j->accumulate ? dx[i] + g : g;
        }
    }
}

void wisp_train_rmsnorm_backward(wisp_train *tr, float *dx, const float *x, const float *w, const float *dy,
                                 int32_t n_rows, bool accumulate) {
    norm_job j = {&tr->exec.k, NULL, dx, x, w, dy, tr->D, tr->model->hp.rms_eps, accumulate};
    wisp_train_parallel(tr, n_rows, norm_backward_rows, &j);
}

/* ---- SwiGLU ---- */

typedef struct swiglu_job {
    const wisp_kernels *k;
    float *act, *dact;
    const float *g, *u;
    int64_t n;
} swiglu_job;

static void silu_rows(void *p, int64_t lo, int64_t hi) {
    const swiglu_job *j = p;
    for (int64_t t = lo; t < hi; t++) {
        memcpy(j->act + t * j->n, j->g + t * j->n, (size_t)j->n * sizeof(float));
        j->k->silu_mul(j->act + t * j->n, j->u + t * j->n, j->n);
    }
}

void wisp_train_silu_mul_rows(wisp_train *tr, float *act, const float *g, const float *u) {
    swiglu_job j = {&tr->exec.k, act, NULL, g, u, tr->F};
    wisp_train_parallel(tr, tr->T, silu_rows, &j);
}

/* act = silu(g) u:  d u = d act * silu(g),  d g = d act * u * s (1 + g (1 - s)), s = sigmoid(g) */
static void swiglu_backward_rows(void *p, int64_t lo, int64_t hi) {
    const swiglu_job *j = p;
    for (int64_t i = lo * j->n; i < hi * j->n; i++) {
        float g = j->g[i], s = 1.0f / (1.0f + expf(-g)), d = j->dact[i];
        j->act[i] = d * (g * s);
        j->dact[i] = d * j->u[i] * (s * (1.0f + g * (1.0f - s)));
    }
}

void wisp_train_swiglu_backward(wisp_train *tr, float *dact, float *act, const float *g, const float *u) {
    swiglu_job j = {&tr->exec.k, act, dact, g, u, tr->F};
    wisp_train_parallel(tr, tr->T, swiglu_backward_rows, &j);
}

/* ---- projections ---- */

void wisp_train_project(wisp_train *tr, int32_t layer, int proj, const float *x, float *y, float *h,
                        const float *bias) {
    const wisp_weight *w = &tr->model->layers[layer].proj[proj];
    wisp_exec_matmul(&tr->exec, w, x, w->cols, tr->T, y, w->rows);
    int32_t pair = tr->pair_of[layer * WISP_PROJ_COUNT + proj];
    if (pair >= 0) wisp_train_lora_forward(tr, pair, layer, x, h, y);
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
