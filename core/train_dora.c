/* The DoRA part of a trained projection (lora.h): with z = W x + s B A x and
 * the row norms n of W + s B A held constant (PEFT detaches them),
 *
 *   forward:   y = (m / n) z                       (bias added after)
 *   backward:  dm += sum_t dy z / n,   dz = (m / n) dy
 *
 * and dz then flows through W and the LoRA path exactly as dy does for plain
 * LoRA. z is not saved: the backward pass recomputes it into one scratch
 * array (a forward product per DoRA projection, traded for T x n_out floats
 * per projection and layer). The norms are refreshed before every forward
 * pass, from dequantized rows of W, so they always match the current A, B. */
#include <string.h>

#include "dora.h"
#include "train.h"

void wisp_train_dora_norms(wisp_train *tr) {
    if (!tr->cfg.dora) return;
    for (int32_t i = 0; i < tr->n_pairs; i++) {
        const wisp_lora_pair *p = &tr->pairs[i];
        const wisp_weight *w = &tr->model->layers[p->layer].proj[p->proj];
        wisp_dora_norms(&tr->exec, w, p, p->scale, tr->dora_row, p->norm);
    }
}

typedef struct dora_job {
    const wisp_train *tr;
    const wisp_lora_pair *p;
    float *dm;
    const float *h, *dy;
    float *z, *out;
} dora_job;

/* z[t][o] += s B_o . h_t with the forward's own arithmetic (z, not out: out
 * may be dy itself, which grad_m_rows still reads) */
static void add_lora_rows(void *arg, int64_t lo, int64_t hi) {
    const dora_job *j = arg;
    wisp_train_lora_up_rows(j->tr, j->p, j->h, j->z, lo, hi);
}

/* dm[o] += sum_t dy[t][o] z[t][o] / n[o], each o summed over t in order */
static void grad_m_rows(void *arg, int64_t lo, int64_t hi) {
    const dora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    for (int64_t o = lo; o < hi; o++) {
        float acc = 0;
        for (int32_t t = 0; t < j->tr->T; t++) acc += j->dy[(size_t)t * p->n_out + o] * j->z[(size_t)t * p->n_out + o];
        j->dm[o] += acc / p->norm[o];
    }
}

static void scale_rows(void *arg, int64_t lo, int64_t hi) {
    const dora_job *j = arg;
    const wisp_lora_pair *p = j->p;
    for (int64_t t = lo; t < hi; t++)
        for (int32_t o = 0; o < p->n_out; o++)
            j->out[t * p->n_out + o] = p->magnitude[o] / p->norm[o] * j->dy[t * p->n_out + o];
}

const float *wisp_train_dora_backward(wisp_train *tr, int32_t layer, int proj, const float *x, const float *h,
                                      const float *dy, float *out) {
    int32_t k = tr->pair_of[layer * WISP_PROJ_COUNT + proj];
    if (k < 0 || !tr->pairs[k].magnitude) return dy;
    const wisp_weight *w = &tr->model->layers[layer].proj[proj];
    dora_job j = {tr, &tr->pairs[k], (float *)(uintptr_t)tr->grad_pairs[k].magnitude, h, dy, tr->dora_z,
                  out ? out : tr->dora_z};
    wisp_exec_matmul(&tr->exec, w, x, w->cols, tr->T, j.z, w->rows);
    wisp_train_parallel(tr, tr->T, add_lora_rows, &j);
    wisp_train_parallel(tr, j.p->n_out, grad_m_rows, &j);
    wisp_train_parallel(tr, tr->T, scale_rows, &j);
    return j.out;
}
