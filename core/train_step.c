/* The public training calls: a micro-step (forward, loss, backward into the
 * accumulated gradients), an evaluation, and access to the adapter. */
#include <math.h>
#include <string.h>

#include "half.h"
#include "train.h"

static wisp_status need_train(const wisp_ctx *ctx, wisp_error *err) {
    if (!ctx->train)
        return wisp_fail(err, WISP_ERR_ARG, "this context was not planned for training (set cfg.train.seq_len)");
    return WISP_OK;
}

/* Validate a batch and make it the current one; returns the scored targets. */
static wisp_status begin_batch(wisp_train *tr, const int32_t *tokens, const uint8_t *mask, int32_t n_seq,
                               int32_t *n_scored, wisp_error *err) {
    if (!tokens) return wisp_fail(err, WISP_ERR_ARG, "no tokens given");
    if (n_seq < 1 || n_seq > tr->B)
        return wisp_fail(err, WISP_ERR_ARG, "%d sequences given; this context takes 1..%d per micro-step", n_seq, tr->B);
    size_t n = (size_t)n_seq * (size_t)tr->stride;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= tr->V)
            return wisp_fail(err, WISP_ERR_ARG, "token id %d (sequence %zu, position %zu) is outside the vocabulary (0..%d)",
                             tokens[i], i / (size_t)tr->stride, i % (size_t)tr->stride, tr->V - 1);
    int32_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (i % (size_t)tr->stride != 0 && (!mask || mask[i])) count++;
    tr->tokens = tokens;
    tr->n_seq = n_seq;
    tr->T = n_seq * tr->S;
    *n_scored = count;
    return WISP_OK;
}

void wisp_train_forward(wisp_train *tr, train_pass pass) {
    wisp_train_dora_norms(tr); /* A and B may have changed since the last pass */
    wisp_train_prefix_project(tr); /* and the reparameterized prefix's parameters */
    wisp_train_embed(tr);
    for (int32_t l = 0; l < tr->L; l++) {
        train_views v;
        wisp_train_views_of(tr, l, &v);
        wisp_train_forward_layer(tr, l, &v, pass);
    }
}

wisp_status wisp_train_start(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *mask, int32_t n_seq, bool dropout,
                         int32_t *n_scored, wisp_error *err) {
    wisp_status s = need_train(ctx, err);
    if (s) return s;
    if ((s = begin_batch(ctx->train, tokens, mask, n_seq, n_scored, err))) return s;
    ctx->train->dropout_on = dropout && ctx->train->cfg.dropout > 0;
    return WISP_OK;
}

void wisp_train_backward(wisp_train *tr) {
    /* reparameterized: the prefix's gradient is this micro-step's, then goes through the MLP */
    if (tr->proj_hidden) memset(tr->prompt_grad, 0, (size_t)tr->n_virtual * (size_t)tr->prompt_width * sizeof(float));
    for (int32_t l = tr->L - 1; l >= tr->lowest_layer; l--) {
        train_views v;
        wisp_train_views_of(tr, l, &v);
        wisp_train_load_layer(tr, l, &v);
        wisp_train_backward_layer(tr, l, &v);
    }
    wisp_train_prefix_project_backward(tr);
    if (tr->n_virtual == 0 || tr->prefix) return; /* prefix tuning took its gradient layer by layer */
    /* tr->dx is now the gradient of layer 0's input; a virtual token's input
     * is embed_scale x its prompt row in every sequence: sum over them */
    float scale = tr->model->hp.embed_scale;
    for (int32_t b = 0; b < tr->n_seq; b++)
        for (int32_t i = 0; i < tr->n_virtual; i++) {
            const float *d = tr->dx + ((size_t)b * tr->S + (size_t)i) * tr->D;
            float *g = tr->prompt_grad + (size_t)i * tr->D;
            for (int32_t k = 0; k < tr->D; k++) g[k] += scale * d[k];
        }
}

/* A micro-step and an evaluation are one pass over a batch: training adds
 * dropout, saves activations, runs the backward pass into the accumulated
 * gradients and counts the micro-step; evaluation changes no state. */
static wisp_status loss_pass(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                             bool training, double *loss, int32_t *n_scored, wisp_error *err) {
    int32_t n = 0;
    wisp_status s = wisp_train_start(ctx, tokens, loss_mask, n_seq, training, &n, err);
    if (s) return s;
    wisp_train *tr = ctx->train;
    wisp_train_forward(tr, training ? TRAIN_PASS_SAVE : TRAIN_PASS_EVAL);
    double mean = wisp_train_loss_head(tr, loss_mask, n, training && n > 0, NULL);
    if (training) {
        if (n > 0) wisp_train_backward(tr);
        tr->micro_total++;
        tr->micro_in_accum++;
    }
    if (loss) *loss = mean;
    if (n_scored) *n_scored = n;
    return WISP_OK;
}

wisp_status wisp_train_micro_step(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                                  double *loss, int32_t *n_scored, wisp_error *err) {
    return loss_pass(ctx, tokens, loss_mask, n_seq, true, loss, n_scored, err);
}

wisp_status wisp_train_eval(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                            double *loss, int32_t *n_scored, wisp_error *err) {
    return loss_pass(ctx, tokens, loss_mask, n_seq, false, loss, n_scored, err);
}

wisp_status wisp_train_optimizer_step(wisp_ctx *ctx, wisp_train_step_info *info, wisp_error *err) {
    wisp_status s = need_train(ctx, err);
    if (s) return s;
    wisp_train_step_info local;
    s = wisp_train_apply_optimizer(ctx->train, info ? info : &local, err);
    wisp_train_dora_norms(ctx->train); /* the adapter as wisp_train_lora() hands it out matches A and B */
    wisp_train_prefix_project(ctx->train); /* and wisp_train_prompt()'s prefix its MLP */
    return s;
}

const wisp_lora *wisp_train_lora(const wisp_ctx *ctx) { return ctx->train ? &ctx->train->lora : NULL; }
const wisp_lora *wisp_train_gradients(const wisp_ctx *ctx) { return ctx->train ? &ctx->train->grads : NULL; }
int64_t wisp_train_steps(const wisp_ctx *ctx) { return ctx->train ? ctx->train->step : 0; }
float wisp_train_loss_scale(const wisp_ctx *ctx) { return ctx->train ? ctx->train->loss_scale : 1.0f; }

static void copy_matrix(float *dst, const void *src, int32_t type, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const uint16_t *h = src;
        dst[i] = type == WISP_TYPE_F32 ? ((const float *)src)[i]
                 : type == WISP_TYPE_F16 ? wisp_f16_to_f32(h[i])
                                         : wisp_bf16_to_f32(h[i]);
    }
}

wisp_status wisp_train_set_lora(wisp_ctx *ctx, const wisp_lora *src, wisp_error *err) {
    wisp_status s = need_train(ctx, err);
    if (s) return s;
    wisp_train *tr = ctx->train;
    if (!src || (src->n_pairs > 0 && !src->pairs) || src->n_pairs < 0) return wisp_fail(err, WISP_ERR_ARG, "no adapter given");
    for (int pass = 0; pass < 2; pass++) /* check everything, then copy */
        for (int32_t i = 0; i < src->n_pairs; i++) {
            const wisp_lora_pair *p = &src->pairs[i];
            bool in_range = p->layer >= 0 && p->layer < tr->L && p->proj >= 0 && p->proj < WISP_PROJ_COUNT;
            int32_t k = in_range ? tr->pair_of[p->layer * WISP_PROJ_COUNT + p->proj] : -1;
            if (k < 0)
                return wisp_fail(err, WISP_ERR_SHAPE, "blk.%d.%s is not among the trained projections", p->layer,
                                 wisp_proj_gguf_name(p->proj));
            const wisp_lora_pair *d = &tr->pairs[k];
            if (p->rank != d->rank || p->n_in != d->n_in || p->n_out != d->n_out)
                return wisp_fail(err, WISP_ERR_SHAPE, "blk.%d.%s: rank %d, %d x %d given; the trained pair is rank %d, %d x %d",
                                 p->layer, wisp_proj_gguf_name(p->proj), p->rank, p->n_in, p->n_out, d->rank, d->n_in,
                                 d->n_out);
            if (p->type != WISP_TYPE_F32 && p->type != WISP_TYPE_F16 && p->type != WISP_TYPE_BF16)
                return wisp_fail(err, WISP_ERR_UNSUPPORTED, "blk.%d.%s: tensors must be F32, F16 or BF16", p->layer,
                                 wisp_proj_gguf_name(p->proj));
            if (!p->a || !p->b) return wisp_fail(err, WISP_ERR_ARG, "blk.%d.%s: missing A or B", p->layer, wisp_proj_gguf_name(p->proj));
            if (!p->magnitude != !d->magnitude)
                return wisp_fail(err, WISP_ERR_ARG, "blk.%d.%s: %s adapter given to a context that trains %s", p->layer,
                                 wisp_proj_gguf_name(p->proj), p->magnitude ? "a DoRA" : "a plain LoRA",
                                 d->magnitude ? "DoRA" : "plain LoRA");
            if (pass == 0) continue;
            if (d->magnitude) memcpy((float *)(uintptr_t)d->magnitude, p->magnitude, (size_t)d->n_out * sizeof(float));
            copy_matrix((float *)(uintptr_t)d->a, p->a, p->type, (size_t)d->rank * (size_t)d->n_in);
            copy_matrix((float *)(uintptr_t)d->b, p->b, p->type, (size_t)d->rank * (size_t)d->n_out);
        }
    return WISP_OK;
}

const float *wisp_train_prompt(const wisp_ctx *ctx, int32_t *n_virtual) {
    const wisp_train *tr = ctx->train;
    if (n_virtual) *n_virtual = tr ? tr->n_virtual : 0;
    return tr && tr->n_virtual > 0 ? tr->prompt : NULL;
}

const float *wisp_train_prompt_gradient(const wisp_ctx *ctx) {
    return ctx->train && ctx->train->n_virtual > 0 ? ctx->train->prompt_grad : NULL;
}

wisp_status wisp_train_set_prompt(wisp_ctx *ctx, const float *rows, const int32_t *ids, int32_t n_ids,
                                  wisp_error *err) {
    wisp_status s = need_train(ctx, err);
    if (s) return s;
    wisp_train *tr = ctx->train;
    if (tr->n_virtual == 0) return wisp_fail(err, WISP_ERR_ARG, "this context does not prompt-tune (virtual_tokens is 0)");
    if (tr->proj_hidden)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "a reparameterized prefix is its MLP's output and cannot be set");
    size_t D = (size_t)tr->D, W = (size_t)tr->prompt_width;
    if (rows) {
        for (size_t i = 0; i < (size_t)tr->n_virtual * W; i++)
            if (!isfinite(rows[i]))
                return wisp_fail(err, WISP_ERR_NUMERIC, "%s %zu, element %zu is not finite",
                                 tr->prefix ? "prefix row" : "prompt embedding", i / W, i % W);
        memcpy(tr->prompt, rows, (size_t)tr->n_virtual * W * sizeof(float));
        return WISP_OK;
    }
    if (tr->prefix) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "prefix tuning has no text init (PEFT's has none either)");
    if (!ids || n_ids < 1) return wisp_fail(err, WISP_ERR_ARG, "the prompt init text has no tokens");
    for (int32_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= tr->V)
            return wisp_fail(err, WISP_ERR_ARG, "token id %d is outside the vocabulary (0..%d)", ids[i], tr->V - 1);
    /* PEFT: truncated to n_virtual, or repeated ceil(n_virtual / n_ids) times and truncated */
    for (int32_t i = 0; i < tr->n_virtual; i++)
        wisp_embed_row(&tr->exec, &tr->model->tok_embd, ids[i % n_ids], tr->prompt + (size_t)i * D);
    return WISP_OK;
}
