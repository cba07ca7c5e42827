/* Multi-turn chats without re-reading the conversation: the tokens whose keys
 * and values are in the context's cache are remembered, and each new prompt
 * (the whole conversation, rendered and tokenized again) reuses the longest
 * prefix it shares with them, evaluating only the rest. A turn therefore
 * costs its own new tokens, and an earlier turn that renders differently
 * (a template that rewrites old answers) costs only from where it differs. */
#ifndef WISP_CHAT_CACHE_H
#define WISP_CHAT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "wisp.h"

typedef struct wisp_chat_cache {
    int32_t *tokens;   /* caller memory: n_ctx entries */
    int32_t cap;
    int32_t n;         /* tokens in the KV cache, in order, after the lead */
    const float *lead; /* rows at the context's first n_lead positions, or NULL */
    int32_t n_lead;
    bool lead_is_kv;   /* the rows are a prefix-tuning adapter's keys and values, not embeddings */
} wisp_chat_cache;

/* Start empty (and clear the context's cache). */
void wisp_chat_cache_init(wisp_chat_cache *c, wisp_ctx *ctx, int32_t *tokens, int32_t cap);

/* Lead every prompt with `n` virtual positions (caller memory that outlives
 * the cache): embedding rows of a prompt-tuning adapter, or with `kv` the
 * per-layer keys and values of a prefix-tuning adapter (wisp_eval_kv_prefix's
 * rows). They take the
 * context's first n positions, before the conversation's first token, stay
 * there across turns and resets, and are evaluated again whenever a sliding
 * window's ring has overwritten them. Token positions then start at n, so
 * `cap` must leave room for them. Clears the cache. */
void wisp_chat_cache_lead(wisp_chat_cache *c, wisp_ctx *ctx, const float *rows, int32_t n, bool kv);

/* Make the cache hold exactly prompt[0..n) (after the lead) with the logits
 * of its last token ready: rewinds to the common prefix and evaluates the
 * rest (at least the last token, so there are logits). *n_evaluated gets how
 * many tokens were run (the lead's rows are not counted). */
wisp_status wisp_chat_cache_prefill(wisp_chat_cache *c, wisp_ctx *ctx, const int32_t *prompt, int32_t n,
                                    int32_t *n_evaluated, wisp_error *err);

/* Evaluate one generated token after the cached ones. */
wisp_status wisp_chat_cache_push(wisp_chat_cache *c, wisp_ctx *ctx, int32_t token, wisp_error *err);

#endif
