/* Preference tuning with trl's DPO loss, on top of the causal-LM passes.
 *
 * A pair is a chosen and a rejected completion of one prompt. Its policy
 * log-prob pi is the sum of log p(target) over the completion's scored
 * targets (the mean of them for IPO, as trl divides by the completion length
 * for "ipo"); the reference log-prob rho is the same under the base model
 * alone: the very same weights with the adapter left out of every projection
 * (tr->adapter_off), so no second copy of the model exists anywhere.
 *
 *   d = (pi_c - rho_c) - (pi_r - rho_r)
 *   sigmoid: L = -(1-e) log sig(beta d) - e log sig(-beta d),
 *            dL/dd = beta (-(1-e) sig(-beta d) + e sig(beta d))
 *   ipo:     L = (d - 1/(2 beta))^2,  dL/dd = 2 (d - 1/(2 beta))
 *
 * dL/dpi_c = dL/dd and dL/dpi_r = -dL/dd. Since each target's log-prob is
 * minus its cross-entropy, the gradient reaches the model through the
 * causal-LM loss head with a weight per target: -dL/dpi of its sequence
 * (divided by the completion length for IPO, and by the pairs for the mean),
 * times the loss scale. The head runs twice: once to get every target's
 * log-prob (the weights need the whole sequence), once more for the gradient,
 * recomputing the logits chunk by chunk rather than keeping T x V of them. */
#include <math.h>
#include <string.h>

#include "train.h"

/* log sigmoid(x) without overflow either way */
static double log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

wisp_dpo_pair_terms wisp_dpo_pair(const wisp_train_config *c, double pi_chosen, double pi_rejected, double ref_chosen,
                                  double ref_rejected) {
    wisp_dpo_pair_terms t;
    double beta = c->dpo_beta, d = (pi_chosen - ref_chosen) - (pi_rejected - ref_rejected), dd;
    if (c->dpo_loss == WISP_DPO_IPO) {
        double h = d - 1.0 / (2.0 * beta);
        t.loss = h * h;
        dd = 2.0 * h;
    } else {
        double e = c->dpo_label_smoothing, z = beta * d;
        t.loss = -(1.0 - e) * log_sigmoid(z) - e * log_sigmoid(-z);
        dd = beta * (-(1.0 - e) * sigmoid(-z) + e * sigmoid(z));
    }
    t.d_chosen = dd;
    t.d_rejected = -dd;
    t.reward_chosen = beta * (pi_chosen - ref_chosen);
    t.reward_rejected = beta * (pi_rejected - ref_rejected);
    return t;
}

static wisp_status need_dpo(const wisp_ctx *ctx, int32_t n_pairs, wisp_error *err) {
    if (!ctx->train || ctx->train->cfg.objective != WISP_OBJECTIVE_DPO)
        return wisp_fail(err, WISP_ERR_ARG, "this context was not planned for DPO (set cfg.train.objective)");
    if (n_pairs < 1 || 2 * n_pairs > ctx->train->B)
        return wisp_fail(err, WISP_ERR_ARG, "%d pairs given; this context takes 1..%d per micro-step", n_pairs,
                         ctx->train->B / 2);
    return WISP_OK;
}

/* Per sequence of the current batch: summed log-probs of its scored targets
 * (tr->tok_loss holds their cross-entropies) and how many there are. */
static void sequence_sums(const wisp_train *tr, const uint8_t *mask, double *logp, int32_t *scored) {
    for (int32_t b = 0; b < tr->n_seq; b++) {
        double sum = 0;
        int32_t n = 0;
        for (int32_t j = 0; j < tr->S; j++) {
            size_t target = (size_t)b * (size_t)tr->stride + (size_t)j + 1;
            if (mask && !mask[target]) continue;
            sum -= tr->tok_loss[b * tr->S + j];
            n++;
        }
        logp[b] = sum;
        if (scored) scored[b] = n;
    }
}

/* Forward the current batch (adapter on or off) and sum per sequence. */
static void forward_logps(wisp_train *tr, const uint8_t *mask, int32_t n_scored, bool adapter, train_pass pass,
                          double *logp, int32_t *scored) {
    tr->adapter_off = !adapter;
    wisp_train_forward(tr, pass);
    wisp_train_loss_head(tr, mask, n_scored, false, NULL);
    tr->adapter_off = false;
    sequence_sums(tr, mask, logp, scored);
}

wisp_status wisp_train_sequence_logps(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                                      bool with_adapter, double *logps, int32_t *n_scored, wisp_error *err) {
    int32_t n = 0;
    wisp_status s = wisp_train_start(ctx, tokens, loss_mask, n_seq, false, &n, err);
    if (s) return s;
    if (!logps) return wisp_fail(err, WISP_ERR_ARG, "no array for the log-probs");
    forward_logps(ctx->train, loss_mask, n, with_adapter, TRAIN_PASS_EVAL, logps, n_scored);
    return WISP_OK;
}

/* The normalised log-prob trl's loss sees: the sum, or the mean for IPO. */
static double normalised(const wisp_train *tr, double sum, int32_t n) {
    return tr->cfg.dpo_loss == WISP_DPO_IPO ? (n ? sum / n : 0.0) : sum;
}

/* Losses and metrics of the current batch from seq_logp / seq_ref; with
 * `weights`, also each target's gradient factor into tr->tok_weight. */
static void pair_terms(wisp_train *tr, const uint8_t *mask, int32_t n_pairs, bool weights, wisp_dpo_result *out) {
    memset(out, 0, sizeof *out);
    out->n_pairs = n_pairs;
    if (weights) memset(tr->tok_weight, 0, (size_t)tr->T * sizeof(float));
    for (int32_t i = 0; i < n_pairs; i++) {
        int32_t c = i, r = n_pairs + i, nc = tr->seq_scored[c], nr = tr->seq_scored[r];
        double pc = normalised(tr, tr->seq_logp[c], nc), pr = normalised(tr, tr->seq_logp[r], nr);
        wisp_dpo_pair_terms t = wisp_dpo_pair(&tr->cfg, pc, pr, normalised(tr, tr->seq_ref[c], nc),
                                              normalised(tr, tr->seq_ref[r], nr));
        out->loss += t.loss;
        out->rewards_chosen += t.reward_chosen;
        out->rewards_rejected += t.reward_rejected;
        out->rewards_accuracies += t.reward_chosen > t.reward_rejected;
        out->rewards_margins += t.reward_chosen - t.reward_rejected;
        out->logps_chosen += pc;
        out->logps_rejected += pr;
        if (!weights) continue;
        /* d loss / d logp(target) = dL/dpi (/ n for IPO) / n_pairs; the head wants minus that */
        bool ipo = tr->cfg.dpo_loss == WISP_DPO_IPO;
        const int32_t seqs[2] = {c, r};
        const double grads[2] = {t.d_chosen / (ipo && nc ? nc : 1), t.d_rejected / (ipo && nr ? nr : 1)};
        for (int k = 0; k < 2; k++) {
            float w = (float)(-grads[k] / n_pairs * tr->loss_scale);
            for (int32_t j = 0; j < tr->S; j++)
                if (!mask || mask[(size_t)seqs[k] * (size_t)tr->stride + (size_t)j + 1])
                    tr->tok_weight[seqs[k] * tr->S + j] = w;
        }
    }
    double inv = 1.0 / n_pairs;
    out->loss *= inv, out->rewards_chosen *= inv, out->rewards_rejected *= inv, out->rewards_accuracies *= inv;
    out->rewards_margins *= inv, out->logps_chosen *= inv, out->logps_rejected *= inv;
}

/* The reference log-probs: given, or the base alone now. */
static void reference(wisp_train *tr, const uint8_t *mask, int32_t n_scored, const double *ref_logps) {
    if (ref_logps) memcpy(tr->seq_ref, ref_logps, (size_t)tr->n_seq * sizeof(double));
    else forward_logps(tr, mask, n_scored, false, TRAIN_PASS_EVAL, tr->seq_ref, NULL);
}

static wisp_status run(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *mask, int32_t n_pairs,
                       const double *ref_logps, bool train, wisp_dpo_result *out, wisp_error *err) {
    wisp_status s = need_dpo(ctx, n_pairs, err);
    if (s) return s;
    int32_t n = 0;
    if ((s = wisp_train_start(ctx, tokens, mask, 2 * n_pairs, train, &n, err))) return s;
    if (ref_logps)
        for (int32_t i = 0; i < 2 * n_pairs; i++)
            if (!isfinite(ref_logps[i]) || ref_logps[i] > 0)
                return wisp_fail(err, WISP_ERR_NUMERIC, "reference log-prob %d is %g: not a log-probability", i, ref_logps[i]);
    wisp_train *tr = ctx->train;
    reference(tr, mask, n, ref_logps);
    forward_logps(tr, mask, n, true, train ? TRAIN_PASS_SAVE : TRAIN_PASS_EVAL, tr->seq_logp, tr->seq_scored);
    wisp_dpo_result local;
    pair_terms(tr, mask, n_pairs, train, out ? out : &local);
    if (!train) return WISP_OK;
    if (n > 0) {
        wisp_train_loss_head(tr, mask, n, true, tr->tok_weight);
        wisp_train_backward(tr);
    }
    tr->micro_total++;
    tr->micro_in_accum++;
    return WISP_OK;
}

wisp_status wisp_train_dpo_micro_step(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_pairs,
                                      const double *ref_logps, wisp_dpo_result *out, wisp_error *err) {
    return run(ctx, tokens, loss_mask, n_pairs, ref_logps, true, out, err);
}

wisp_status wisp_train_dpo_eval(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_pairs,
                                const double *ref_logps, wisp_dpo_result *out, wisp_error *err) {
    return run(ctx, tokens, loss_mask, n_pairs, ref_logps, false, out, err);
}
