/* The causal-LM loss head: final RMSNorm, output projection, softmax
 * cross-entropy against the next token, and (for training) its gradient back
 * to the last layer's output. Logits exist for loss_chunk token rows at a
 * time, never for the whole micro-step, so a 50k-token vocabulary costs
 * chunk x V floats, not T x V.
 *
 * Per target: loss = lse(z) - z[target], d z = (softmax(z) - onehot) g with
 * g = loss_scale / n_scored (the gradient of the mean over scored targets),
 * or a weight per target given by the caller (DPO: the derivative of its
 * loss w.r.t. the sequence's log-prob, which is minus the cross-entropy).
 * The log-sum-exp is taken in double, as `wisp perplexity` does, so both
 * report the same loss for the same logits. */
#include <math.h>
#include <string.h>

#include "layer_ops.h"
#include "train.h"

typedef struct head_job {
    wisp_train *tr;
    const uint8_t *mask;
    const float *weight; /* per token row, or NULL: g for all */
    int32_t c0;
    float g;
    bool backward;
} head_job;

/* Row t's next token in the batch; the virtual positions of prompt tuning
 * (the first n_virtual of each sequence) have none. */
static size_t target_index(const wisp_train *tr, int32_t t) {
    return (size_t)(t / tr->S) * (size_t)tr->stride + (size_t)(t % tr->S - tr->n_virtual) + 1;
}

static bool scored(const wisp_train *tr, const uint8_t *mask, int32_t t) {
    return t % tr->S >= tr->n_virtual && (!mask || mask[target_index(tr, t)]);
}

static void ce_rows(void *arg, int64_t lo, int64_t hi) {
    const head_job *j = arg;
    wisp_train *tr = j->tr;
    for (int64_t i = lo; i < hi; i++) {
        int32_t t = j->c0 + (int32_t)i;
        float *z = tr->logits + i * tr->V;
        if (!scored(tr, j->mask, t)) {
            tr->tok_loss[t] = 0;
            if (j->backward) memset(z, 0, (size_t)tr->V * sizeof(float));
            continue;
        }
        int32_t target = tr->tokens[target_index(tr, t)];
        float m = z[0];
        for (int32_t k = 1; k < tr->V; k++)
            if (z[k] > m) m = z[k];
        double sum = 0;
        for (int32_t k = 0; k < tr->V; k++) sum += exp((double)z[k] - m);
        double lse = log(sum) + m;
        tr->tok_loss[t] = lse - z[target];
        if (!j->backward) continue;
        float g = j->weight ? j->weight[t] : j->g;
        float cap = tr->model->hp.final_softcap;
        if (cap > 0) { /* z = cap tanh(raw / cap): d raw = d z (1 - (z / cap)^2) */
            for (int32_t k = 0; k < tr->V; k++) {
                float c = z[k] / cap, dz = g * (float)exp((double)z[k] - lse) - (k == target ? g : 0.0f);
                z[k] = dz * (1.0f - c * c);
            }
            continue;
        }
        for (int32_t k = 0; k < tr->V; k++) z[k] = g * (float)exp((double)z[k] - lse);
        z[target] -= g;
    }
}

double wisp_train_loss_head(wisp_train *tr, const uint8_t *mask, int32_t n_scored, bool backward,
                            const float *weight) {
    const wisp_model *m = tr->model;
    int32_t D = tr->D;
    head_job j = {tr, mask, weight, 0, n_scored ? tr->loss_scale / (float)n_scored : 0.0f, backward};
    for (int32_t c0 = 0; c0 < tr->T; c0 += tr->loss_chunk) {
        int32_t n = tr->T - c0 < tr->loss_chunk ? tr->T - c0 : tr->loss_chunk, any = 0;
        for (int32_t t = c0; t < c0 + n; t++) any |= scored(tr, mask, t);
        if (!any) { /* nothing to score here: no logits needed, and no gradient */
            for (int32_t t = c0; t < c0 + n; t++) tr->tok_loss[t] = 0;
            if (backward) memset(tr->dx + (size_t)c0 * D, 0, (size_t)n * D * sizeof(float));
            continue;
        }
        const float *x = tr->x + (size_t)c0 * D;
        wisp_train_rmsnorm_rows(tr, tr->xn, x, m->output_norm, n);
        wisp_exec_matmul(&tr->exec, &m->output, tr->xn, D, n, tr->logits, tr->V);
        if (m->hp.final_softcap > 0) wisp_softcap(tr->logits, (int64_t)n * tr->V, m->hp.final_softcap);
        j.c0 = c0;
        wisp_train_parallel(tr, n, ce_rows, &j);
        if (!backward) continue;
        wisp_train_matmul_t(tr, &m->output, tr->logits, n, tr->dxn, false);
        wisp_train_rmsnorm_backward(tr, tr->dx + (size_t)c0 * D, x, m->output_norm, tr->dxn, n, false);
    }
    double total = 0;
    for (int32_t t = 0; t < tr->T; t++) total += tr->tok_loss[t];
    return n_scored ? total / n_scored : 0.0;
}
