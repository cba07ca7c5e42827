/* See chat_cache.h. */
#include "chat_cache.h"

#include "status.h"

void wisp_chat_cache_init(wisp_chat_cache *c, wisp_ctx *ctx, int32_t *tokens, int32_t cap) {
    c->tokens = tokens;
    c->cap = cap;
    c->n = 0;
    c->lead = NULL;
    c->n_lead = 0;
    c->lead_is_kv = false;
    wisp_rewind(ctx, 0);
}

void wisp_chat_cache_lead(wisp_chat_cache *c, wisp_ctx *ctx, const float *rows, int32_t n, bool kv) {
    c->lead = n > 0 ? rows : NULL;
    c->n_lead = n > 0 ? n : 0;
    c->lead_is_kv = kv;
    c->n = 0;
    wisp_rewind(ctx, 0);
}

/* Rewind to the lead plus `keep` tokens; returns how many tokens stayed
 * (fewer when a sliding window's ring forgot them: then the lead is evaluated
 * again first and none stayed), or -1 with *s set if that evaluation failed. */
static int32_t rewind_after_lead(wisp_chat_cache *c, wisp_ctx *ctx, int32_t keep, wisp_status *s, wisp_error *err) {
    wisp_rewind(ctx, c->n_lead + keep);
    int32_t past = wisp_n_past(ctx);
    if (past >= c->n_lead) return past - c->n_lead;
    wisp_rewind(ctx, 0);
    *s = c->lead_is_kv ? wisp_eval_kv_prefix(ctx, c->lead, c->n_lead, err)
                       : wisp_eval_embeddings(ctx, c->lead, c->n_lead, err);
    return *s ? -1 : 0;
}

wisp_status wisp_chat_cache_prefill(wisp_chat_cache *c, wisp_ctx *ctx, const int32_t *prompt, int32_t n,
                                    int32_t *n_evaluated, wisp_error *err) {
    if (n_evaluated) *n_evaluated = 0;
    if (n <= 0 || !prompt) return wisp_fail(err, WISP_ERR_ARG, "chat: the prompt has no tokens");
    if (n > c->cap) return wisp_fail(err, WISP_ERR_CAPACITY, "chat: the prompt is %d tokens but the cache holds %d", n, c->cap);
    int32_t keep = 0;
    while (keep < c->n && keep < n && c->tokens[keep] == prompt[keep]) keep++;
    if (keep == n) keep--; /* the last token runs again: its logits start the answer */
    /* a sliding-window model's ring may no longer hold the window before
     * `keep`: then the rewind forgot everything and the prompt runs whole */
    wisp_status s = WISP_OK;
    keep = rewind_after_lead(c, ctx, keep, &s, err);
    if (keep < 0) {
        c->n = 0;
        return s;
    }
    c->n = keep;
    s = wisp_eval(ctx, prompt + keep, n - keep, err);
    if (s) { /* wisp_eval changed nothing: the cache holds the kept prefix */
        return s;
    }
    for (int32_t i = keep; i < n; i++) c->tokens[i] = prompt[i];
    c->n = n;
    if (n_evaluated) *n_evaluated = n - keep;
    return WISP_OK;
}

wisp_status wisp_chat_cache_push(wisp_chat_cache *c, wisp_ctx *ctx, int32_t token, wisp_error *err) {
    if (c->n >= c->cap) return wisp_fail(err, WISP_ERR_CAPACITY, "chat: the context of %d tokens is full", c->cap);
    wisp_status s = wisp_eval(ctx, &token, 1, err);
    if (s) return s;
    c->tokens[c->n++] = token;
    return WISP_OK;
}
