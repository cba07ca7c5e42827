/* One optimizer step over the flat adapter: average the accumulated
 * gradients (and undo the loss scale), measure their global norm, skip the
 * step on overflow (moving the F16 loss scale as DeepSpeed does, with
 * hysteresis and a floor: wisp_loss_scaler_update), clip, and update with AdamW or
 * SGD with momentum exactly as PyTorch writes them:
 *
 *   AdamW: p *= 1 - lr wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   SGD:   g += wd p;  buf = mu buf + g;  p -= lr buf
 *
 * The norm is summed in double, pair by pair in a fixed order, so it does
 * not depend on threads; the element-wise update has no order at all. */
#include <math.h>
#include <string.h>

#include "train.h"
#include "train_config.h"

typedef struct opt_job {
    wisp_train *tr;
    float lr, mul; /* mul: gradient factor applied before the update (averaging x clipping) */
    float b1, b2, eps, wd, mu;
    double bc1, bc2_sqrt;
} opt_job;

static void adamw_range(void *arg, int64_t lo, int64_t hi) {
    const opt_job *j = arg;
    float *p = j->tr->params, *g = j->tr->grad, *m = j->tr->m1, *v = j->tr->m2;
    float step_size = (float)(j->lr / j->bc1), bc2s = (float)j->bc2_sqrt, decay = 1.0f - j->lr * j->wd;
    for (int64_t i = lo; i < hi; i++) {
        float gi = g[i] * j->mul;
        p[i] *= decay;
        m[i] = j->b1 * m[i] + (1.0f - j->b1) * gi;
        v[i] = j->b2 * v[i] + (1.0f - j->b2) * gi * gi;
        p[i] -= step_size * m[i] / (sqrtf(v[i]) / bc2s + j->eps);
        g[i] = 0;
    }
}

static void sgd_range(void *arg, int64_t lo, int64_t hi) {
    const opt_job *j = arg;
    float *p = j->tr->params, *g = j->tr->grad, *buf = j->tr->m1;
    for (int64_t i = lo; i < hi; i++) {
        float gi = g[i] * j->mul + j->wd * p[i];
        if (buf) gi = buf[i] = j->mu * buf[i] + gi;
        p[i] -= j->lr * gi;
        g[i] = 0;
    }
}

static double squared_norm(const wisp_train *tr, float factor) {
    double total = 0;
    for (int32_t k = 0; k < tr->n_pairs; k++) {
        const wisp_lora_pair *p = &tr->grad_pairs[k];
        size_t na = (size_t)p->rank * (size_t)p->n_in, nb = (size_t)p->rank * (size_t)p->n_out;
        const float *a = p->a, *b = p->b;
        double s = 0;
        for (size_t i = 0; i < na; i++) s += (double)(a[i] * factor) * (a[i] * factor);
        for (size_t i = 0; i < nb; i++) s += (double)(b[i] * factor) * (b[i] * factor);
        if (p->magnitude) /* DoRA's magnitudes are trained too, so they count toward clipping (as in PEFT) */
            for (int32_t i = 0; i < p->n_out; i++) s += (double)(p->magnitude[i] * factor) * (p->magnitude[i] * factor);
        total += s;
    }
    if (tr->n_virtual > 0) { /* prompt or prefix tuning: what is trained behind the rows, in order */
        double s = 0;
        for (size_t i = 0; i < tr->n_virtual_params; i++)
            s += (double)(tr->virtual_grad[i] * factor) * (tr->virtual_grad[i] * factor);
        total += s;
    }
    return total;
}

void wisp_loss_scaler_update(const wisp_train_config *c, wisp_loss_scaler *s, bool overflow) {
    if (overflow) {
        if (s->hysteresis_left <= 1) {
            float half = s->scale / 2;
            s->scale = half > c->min_loss_scale ? half : c->min_loss_scale;
        } else {
            s->hysteresis_left--; /* tolerated: the scale stays, and is not restored until it grows */
        }
        s->good_steps = 0;
        return;
    }
    if (++s->good_steps >= c->loss_scale_window) {
        if (s->scale < 16777216.0f) s->scale *= 2;
        s->good_steps = 0;
        s->hysteresis_left = c->loss_scale_hysteresis;
    }
}

/* The engine's scaler through the update above (F16 storage only). */
static void update_scale(wisp_train *tr, bool overflow) {
    if (tr->cfg.act_type != WISP_TYPE_F16) return;
    wisp_loss_scaler s = {tr->loss_scale, tr->good_steps, tr->hysteresis_left};
    wisp_loss_scaler_update(&tr->cfg, &s, overflow);
    tr->loss_scale = s.scale, tr->good_steps = s.good_steps, tr->hysteresis_left = s.hysteresis_left;
}

wisp_status wisp_train_apply_optimizer(wisp_train *tr, wisp_train_step_info *info, wisp_error *err) {
    const wisp_train_config *c = &tr->cfg;
    memset(info, 0, sizeof *info);
    if (tr->micro_in_accum == 0)
        return wisp_fail(err, WISP_ERR_ARG, "no micro-step has accumulated gradients since the last optimizer step");
    bool scaling = c->act_type == WISP_TYPE_F16;
    float unscale = (float)(1.0 / ((double)tr->micro_in_accum * tr->loss_scale));
    double norm = sqrt(squared_norm(tr, unscale));
    info->grad_norm = (float)norm;
    info->lr = wisp_train_lr_at(c, tr->step);
    tr->micro_in_accum = 0;
    if (!isfinite(norm)) {
        /* Skip: the adapter and moments stay as they were, so a NaN or Inf from
         * the model, the data or an F16 overflow never reaches them. Under loss
         * scaling the retry uses a smaller scale; the caller decides how many
         * skips in a row mean the run cannot go on. */
        memset(tr->grad, 0, tr->n_params * sizeof(float));
        update_scale(tr, true);
        if (!scaling) tr->good_steps = 0;
        tr->skipped_steps++;
        info->skipped = true;
        info->skipped_steps = tr->skipped_steps;
        info->step = tr->step;
        info->loss_scale = tr->loss_scale;
        return WISP_OK;
    }
    opt_job j = {tr, info->lr, unscale, c->beta1, c->beta2, c->eps, c->weight_decay, c->momentum > 0 ? c->momentum : 0,
                 0, 0};
    if (c->clip_norm > 0 && norm > c->clip_norm) {
        j.mul = (float)(unscale * (c->clip_norm / (norm + 1e-6)));
        info->clipped = true;
    }
    int64_t t = tr->step + 1;
    j.bc1 = 1.0 - pow(c->beta1, (double)t);
    j.bc2_sqrt = sqrt(1.0 - pow(c->beta2, (double)t));
    if (c->optimizer == WISP_OPTIMIZER_ADAMW) wisp_train_parallel(tr, (int64_t)tr->n_params, adamw_range, &j);
    else wisp_train_parallel(tr, (int64_t)tr->n_params, sgd_range, &j);
    tr->step = t;
    update_scale(tr, false);
    info->skipped_steps = tr->skipped_steps;
    info->step = tr->step;
    info->loss_scale = tr->loss_scale;
    return WISP_OK;
}
