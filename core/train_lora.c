/* The trainable LoRA path of one projection, forward and backward, in PEFT's
 * orientation (A [rank][n_in], B [n_out][rank], scale s):
 *
 *   forward:   xd = dropout(x),  h = A xd,  y += s B h
 *   backward:  dB += s dy h^T,   dh = s B^T dy,  dA += dh xd^T,  dx += dropout'(A^T dh)
 *
 * Dropout keeps input i of token row t with probability 1 - p and scales it
 * by 1 / (1 - p); whether it is kept is a hash of (seed, micro-step, layer,
 * projection, t, i), so the backward pass regenerates the same mask. Each
 * product is split so that every output element is summed by one worker in
 * a fixed order. The forward arithmetic is the inference path's
 * (lora_apply.c), so an attached trained adapter predicts what training saw. */
#include <string.h>

#include "train.h"
#include "train_rng.h"

static uint64_t mask_key(const wisp_train *tr, int64_t micro, int32_t layer, int32_t proj) {
    return wisp_hash2(wisp_hash2(tr->cfg.seed ^ 0xd50f, (uint64_t)micro), (uint64_t)layer * WISP_PROJ_COUNT + (uint64_t)proj);
}

bool wisp_train_keep(const wisp_train *tr, int64_t micro, int32_t layer, int32_t proj, int64_t t, int64_t i) {
    int32_t n_in = tr->pairs[tr->pair_of[layer * WISP_PROJ_COUNT + proj]].n_in;
    return wisp_unit_float(wisp_hash2(mask_key(tr, micro, layer, proj), (uint64_t)(t * n_in + i))) >= tr->cfg.dropout;
}

typedef struct lora_job {
    const wisp_train *tr;
    const wisp_lora_pair *p, *g; /* the pair and its gradient */
    const float *x;              /* [T][n_in] (dropped out when dropout is on) */
    float *h;                    /* [T][rank] */
    const float *dy;
    float *y, *dx;
    float *tmp;                  /* [T][n_in] A^T dh before the dropout mask */
    uint64_t key;
    float keep_scale;
} lora_job;

static void dropout_rows(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    int32_t n = j->p->n_in;
    for (int64_t t = lo; t < hi; t++)
        for (int32_t i = 0; i < n; i++) {
            bool keep = wisp_unit_float(wisp_hash2(j->key, (uint64_t)(t * n + i))) >= j->tr->cfg.dropout;
            j->tr->drop[t * n + i] = keep ? j->x[t * n + i] * j->keep_scale : 0.0f;
        }
}

/* h[t][r] = A_r . xd_t, one (t, r) item at a time */
static void down_items(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    const float *a = p->a;
    for (int64_t i = lo; i < hi; i++) {
        int64_t t = i / p->rank, r = i % p->rank;
        j->h[i] = j->tr->exec.k.dot_f32(a + r * p->n_in, j->x + t * p->n_in, p->n_in);
    }
}

void wisp_train_lora_up_rows(const wisp_train *tr, const wisp_lora_pair *p, const float *h, float *y, int64_t lo,
                             int64_t hi) {
    const float *b = p->b;
    for (int64_t t = lo; t < hi; t++)
        for (int32_t o = 0; o < p->n_out; o++)
            y[t * p->n_out + o] += p->scale * tr->exec.k.dot_f32(b + (size_t)o * p->rank, h + t * p->rank, p->rank);
}

static void up_rows(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    wisp_train_lora_up_rows(j->tr, j->p, j->h, j->y, lo, hi);
}

/* prepares x (dropped out into tr->drop when dropout is on) */
static void job_input(wisp_train *tr, lora_job *j, int32_t layer, const float *x) {
    j->x = x;
    if (!tr->dropout_on) return;
    j->key = mask_key(tr, tr->micro_total, layer, j->p->proj);
    j->keep_scale = 1.0f / (1.0f - tr->cfg.dropout);
    wisp_train_parallel(tr, tr->T, dropout_rows, j);
    j->x = tr->drop;
}

void wisp_train_lora_forward(wisp_train *tr, int32_t pair, int32_t layer, const float *x, float *h, float *y) {
    lora_job j;
    memset(&j, 0, sizeof j);
    j.tr = tr, j.p = &tr->pairs[pair], j.h = h, j.y = y;
    job_input(tr, &j, layer, x);
    wisp_train_parallel(tr, (int64_t)tr->T * j.p->rank, down_items, &j);
    if (y) wisp_train_parallel(tr, tr->T, up_rows, &j);
}

/* B's rows are rank floats long, usually 4..64: too short for a kernel
 * call each. The backward pass works on B transposed (tr->lora_bt, rank
 * rows of n_out), where every product runs along n_out with the level's
 * axpy and dot kernels: at rank 8 the loops along rank took 12% of a
 * SmolLM2-135M training step. */

/* dB[o][r] += sum_t (s h[t][r]) dy[t][o], split over rows o: per r, one
 * axpy along the worker's outputs for each t in order, into B^T's rows
 * (zeroed first), then added to dB. Each element sums t in order. */
static void grad_b_cols(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    float *db = (float *)(uintptr_t)j->g->b, *bt = j->tr->lora_bt;
    const int32_t rank = p->rank, n_out = p->n_out;
    for (int32_t r = 0; r < rank; r++) {
        float *row = bt + (size_t)r * n_out + lo;
        memset(row, 0, (size_t)(hi - lo) * sizeof(float));
        for (int32_t t = 0; t < j->tr->T; t++)
            j->tr->exec.k.axpy_f32(row, p->scale * j->h[(size_t)t * rank + r], j->dy + (size_t)t * n_out + lo, hi - lo);
    }
    for (int64_t o = lo; o < hi; o++)
        for (int32_t r = 0; r < rank; r++) db[o * rank + r] += bt[(size_t)r * n_out + o];
}

/* B^T's rows o in [lo, hi) */
static void transpose_b(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    const float *b = p->b; /* training's pairs are F32 */
    for (int64_t o = lo; o < hi; o++)
        for (int32_t r = 0; r < p->rank; r++) j->tr->lora_bt[(size_t)r * p->n_out + o] = b[o * p->rank + r];
}

/* dh[t][r] = s (B^T_r . dy[t]), split over tokens */
static void grad_h_rows(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    for (int64_t t = lo; t < hi; t++)
        for (int32_t r = 0; r < p->rank; r++)
            j->tr->dh[t * p->rank + r] =
                p->scale * j->tr->exec.k.dot_f32(j->tr->lora_bt + (size_t)r * p->n_out, j->dy + t * p->n_out, p->n_out);
}

/* dA[r][i] += sum_t dh[t][r] xd[t][i], split over columns i in 16s */
static void grad_a_cols(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    float *da = (float *)(uintptr_t)j->g->a;
    int64_t c0 = lo * 16, c1 = hi * 16 < p->n_in ? hi * 16 : p->n_in;
    for (int32_t r = 0; r < p->rank; r++)
        for (int32_t t = 0; t < j->tr->T; t++)
            j->tr->exec.k.axpy_f32(da + (size_t)r * p->n_in + c0, j->tr->dh[(size_t)t * p->rank + r],
                                   j->x + (size_t)t * p->n_in + c0, c1 - c0);
}

/* dx[t] += A^T dh[t] (through the dropout mask when on), split over tokens */
static void grad_x_rows(void *arg, int64_t lo, int64_t hi) {
    const lora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    const float *a = p->a;
    for (int64_t t = lo; t < hi; t++) {
        float *out = j->tmp ? j->tmp + t * p->n_in : j->dx + t * p->n_in;
        if (j->tmp) memset(out, 0, (size_t)p->n_in * sizeof(float));
        for (int32_t r = 0; r < p->rank; r++)
            j->tr->exec.k.axpy_f32(out, j->tr->dh[t * p->rank + r], a + (size_t)r * p->n_in, p->n_in);
        if (!j->tmp) continue;
        for (int32_t i = 0; i < p->n_in; i++) {
            bool keep = wisp_unit_float(wisp_hash2(j->key, (uint64_t)(t * p->n_in + i))) >= j->tr->cfg.dropout;
            if (keep) j->dx[t * p->n_in + i] += out[i] * j->keep_scale;
        }
    }
}

void wisp_train_lora_backward(wisp_train *tr, int32_t pair, int32_t layer, const float *x, const float *h,
                              const float *dy, float *dx) {
    lora_job j;
    memset(&j, 0, sizeof j);
    j.tr = tr, j.p = &tr->pairs[pair], j.g = &tr->grad_pairs[pair], j.h = (float *)(uintptr_t)h, j.dy = dy, j.dx = dx;
    job_input(tr, &j, layer, x);
    wisp_train_parallel(tr, j.p->n_out, grad_b_cols, &j); /* tr->lora_bt holds dB^T's rows */
    wisp_train_parallel(tr, j.p->n_out, transpose_b, &j); /* then B^T */
    wisp_train_parallel(tr, tr->T, grad_h_rows, &j);
    wisp_train_parallel(tr, (j.p->n_in + 15) / 16, grad_a_cols, &j);
    if (!dx) return;
    if (tr->dropout_on) j.tmp = tr->drop; /* xd is no longer needed: reuse its rows */
    wisp_train_parallel(tr, tr->T, grad_x_rows, &j);
}
