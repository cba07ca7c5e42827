/* Text embeddings: one vector per token sequence from the final hidden states
 * (after output_norm, before the output projection), pooled over its positions.
 * The sequence is evaluated in steps of at most n_batch so that every position's
 * row is still in the step scratch when it is pooled: no arena of its own, and
 * any context can embed (it switches to hidden states for the call). */
#include <math.h>
#include <string.h>

#include "context.h"

/* Sum (mean) or take (last) the rows of tokens[0..n) into out. */
static wisp_status pool(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_pooling pooling, float *out,
                        wisp_error *err) {
    const int32_t dim = ctx->model.hp.dim;
    memset(out, 0, sizeof(float) * (size_t)dim);
    for (int32_t done = 0; done < n;) {
        int32_t step = n - done < ctx->cfg.n_batch ? n - done : ctx->cfg.n_batch;
        wisp_status st = wisp_eval(ctx, tokens + done, step, err); /* refuses ids outside the vocabulary */
        if (st) return st;
        const bool final_step = done + step == n;
        /* mean: every row of every step; last: only the final step's last row */
        for (int32_t t = pooling == WISP_POOL_MEAN ? 0 : final_step ? step - 1 : step; t < step; t++) {
            const float *h = wisp_hidden(ctx, t);
            for (int32_t i = 0; i < dim; i++) out[i] += h[i];
        }
        done += step;
    }
    if (pooling == WISP_POOL_MEAN)
        for (int32_t i = 0; i < dim; i++) out[i] /= (float)n;
    return WISP_OK;
}

wisp_status wisp_embed_tokens(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_pooling pooling, bool normalize,
                              float *out, wisp_error *err) {
    if (pooling != WISP_POOL_MEAN && pooling != WISP_POOL_LAST)
        return wisp_fail(err, WISP_ERR_ARG, "unknown pooling %d", (int)pooling);
    if (n <= 0) return wisp_fail(err, WISP_ERR_ARG, "no tokens to embed");
    if (n > ctx->cfg.n_ctx)
        return wisp_fail(err, WISP_ERR_CAPACITY, "a text of %d tokens exceeds n_ctx %d", n, ctx->cfg.n_ctx);
    const bool kept = ctx->cfg.hidden_states;
    wisp_rewind(ctx, 0); /* every text stands alone */
    ctx->cfg.hidden_states = true;
    wisp_status st = pool(ctx, tokens, n, pooling, out, err);
    ctx->cfg.hidden_states = kept;
    /* a context that computes logits must not offer this text's missing ones */
    if (!kept || st) wisp_rewind(ctx, 0);
    if (st) return st;
    if (normalize) {
        const int32_t dim = ctx->model.hp.dim;
        double ss = 0;
        for (int32_t i = 0; i < dim; i++) ss += (double)out[i] * out[i];
        /* a zero vector has no direction: left as it is rather than divided into NaNs */
        if (ss > 0)
            for (int32_t i = 0; i < dim; i++) out[i] = (float)(out[i] / sqrt(ss));
    }
    return WISP_OK;
}
