/* See chat_cache.h. */
#include "chat_cache.h"

void wisp_chat_cache_init(wisp_chat_cache *c, wisp_ctx *ctx, int32_t *tokens, int32_t cap) {
    c->tokens = tokens;
    c->cap = cap;
    c->n = 0;
    wisp_rewind(ctx, 0);
}

wisp_status wisp_chat_cache_prefill(wisp_chat_cache *c, wisp_ctx *ctx, const int32_t *prompt, int32_t n,
                                    int32_t *n_evaluated, wisp_error *err) {
    if (n_evaluated) *n_evaluated = 0;
    if (n <= 0 || !prompt) return wisp_fail(err, WISP_ERR_ARG, "chat: the prompt has no tokens");
    if (n > c->cap) return wisp_fail(err, WISP_ERR_CAPACITY, "chat: the prompt is %d tokens but the cache holds %d", n, c->cap);
    int32_t keep = 0;
    while (keep < c->n && keep < n && c->tokens[keep] == prompt[keep]) keep++;
    if (keep == n) keep--; /* the last token runs again: its logits start the answer */
    wisp_rewind(ctx, keep);
    /* a sliding-window model's ring may no longer hold the window before
     * `keep`: then the rewind forgot everything and the prompt runs whole */
    keep = wisp_n_past(ctx);
    c->n = keep;
    wisp_status s = wisp_eval(ctx, prompt + keep, n - keep, err);
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
