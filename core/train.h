/* The inside of LoRA training: what the planner carves and the passes use.
 * Private to core/ (the public calls are in wisp.h).
 *
 * Shapes: S = seq_len positions per sequence, B = micro_batch sequences,
 * T = B x S token rows per micro-step; D = dim, Q = n_heads x head_dim,
 * KV = n_kv_heads x head_dim, F = ffn_dim, H = n_heads, V = n_vocab.
 *
 * Saved activations (part ACTIVATIONS) of layer l, in cfg.act_type:
 *   x_in [T][D]            the layer's input (always saved)
 *   q    [T][Q]            queries after RoPE
 *   kh, vh [B][KVH][S][hd] keys after RoPE and values, per kv head
 *   o    [T][Q]            attention output (input of attn_output)
 *   x_mid [T][D]           residual stream after attention
 *   g, u [T][F]            ffn_gate and ffn_up outputs
 *   lse  [T][H]  (F32)     log-sum-exp of each query's attention scores
 *   h[p] [T][rank] (F32)   A x of each adapted projection p
 * With checkpointing only x_in is saved per layer; the rest lives once in
 * the scratch and is recomputed from x_in during the backward pass.
 *
 * Views: the passes always work on F32 pointers (train_views). With F32
 * storage and no checkpointing they point straight at the saved arrays;
 * otherwise at scratch arrays that are converted to/from the saved ones
 * (reduced precision) or simply recomputed (checkpointing). */
#ifndef WISP_TRAIN_H
#define WISP_TRAIN_H

#include "context.h"

typedef struct train_saved {
    void *x_in, *q, *kh, *vh, *o, *x_mid, *g, *u;
    float *lse;
    float *h[WISP_PROJ_COUNT];
} train_saved;

typedef struct train_views {
    float *xin;  /* layer input */
    float *xout; /* layer output (NULL: recomputing, the ffn_down output is not needed) */
    float *q, *kh, *vh, *o, *lse, *xmid, *g, *u;
    float *h[WISP_PROJ_COUNT];
} train_views;

typedef struct wisp_train {
    wisp_train_config cfg; /* resolved: no zero defaults left */
    wisp_exec exec;        /* the context's kernels and threads, with an activation buffer for T rows */
    const wisp_model *model;
    int32_t S, B, D, Q, KV, F, H, KVH, hd, V, L;
    int32_t stride;        /* tokens of one sequence's window in a batch: seq_len + 1 */
    /* prompt tuning: the first n_virtual of the S positions of every sequence
     * are the learned embeddings `prompt` [n_virtual][D] (the whole of
     * params; prompt_grad the whole of grad), the tokens fill the rest */
    int32_t n_virtual;
    float *prompt, *prompt_grad;
    /* prefix tuning (cfg.prefix): `prompt` is [n_virtual][L][2][KVH][hd] instead,
     * every layer's keys (after RoPE: used as they are) and values at the
     * virtual positions, which replace what the layer computes there */
    bool prefix;
    int32_t prompt_width;  /* floats per virtual token: D, or 2 x L x KV with prefix */
    /* the trained values behind the prompt, in params (and grad): the prompt
     * itself, or with PEFT's reparameterization (cfg.prefix_projection) the
     * embeddings e [n_virtual][KV], W1 [hidden][KV], b1 [hidden],
     * W2 [prompt_width][hidden], b2 [prompt_width]; `prompt` is then the MLP's
     * output, recomputed whenever they change (wisp_train_prefix_project),
     * `prompt_grad` the gradient reaching it in the current micro-step, and
     * proj_h [n_virtual][hidden] the tanh outputs, proj_dh their gradient */
    float *virtual_params, *virtual_grad;
    size_t n_virtual_params;
    int32_t proj_hidden;   /* 0: no reparameterization */
    float *proj_h, *proj_dh;
    int32_t loss_chunk;
    float scale;           /* alpha / rank (or alpha / sqrt(rank)) */
    size_t act_elem;       /* bytes of a saved activation element */

    /* the trainable adapter: one flat array, pair by pair A then B */
    int32_t n_pairs;
    wisp_lora_pair *pairs, *grad_pairs;
    wisp_lora lora, grads;
    int32_t *pair_of;      /* [L][WISP_PROJ_COUNT]: pair index or -1 */
    int32_t lowest_layer;  /* below it no gradient is needed */
    size_t n_params;
    float *params, *grad, *m1, *m2; /* m2 only for AdamW; m1 NULL for SGD without momentum */
    /* DoRA: each pair's magnitude m [n_out] follows its B in params (and
     * grad); the row norms of W + s B A, [sum of n_out], are refreshed at
     * the start of every forward pass (train_dora.c) */
    float *dora_norm;

    train_saved *saved;    /* [L] */

    /* scratch, all F32: the views used when storage is reduced or checkpointed ... */
    float *w_xmid, *w_q, *w_kh, *w_vh, *w_o, *w_lse, *w_g, *w_u, *w_h[WISP_PROJ_COUNT];
    /* ... and what every pass needs */
    float *x;        /* [T][D] residual stream / last layer output */
    float *xn;       /* [T][max(D,Q)] normalized input of a projection group */
    float *k, *v;    /* [T][KV] token-major keys and values (and their gradients) */
    float *act;      /* [T][F] silu(g) * u, then d u */
    float *dact;     /* [T][F] gradient of act, then d g */
    float *dx;       /* [T][D] gradient of the residual stream */
    float *dxn;      /* [T][max(D,Q)] gradient of a normalized input */
    float *dout;     /* [T][Q] gradient of the attention output */
    float *dq;       /* [T][Q] */
    float *dkh, *dvh;/* [B][KVH][S][hd] */
    float *dsum;     /* [T][H] rowsum(dO * O) per query */
    float *dh;       /* [T][rank] gradient of A x */
    float *lora_bt;  /* [rank][max n_out] a pair's B transposed, or its gradient's, in the backward pass */
    float *drop;     /* [T][max n_in] dropped-out LoRA input (dropout > 0 only) */
    float *dora_z;   /* DoRA: [T][max n_out] W x + s B A x of a projection, then its gradient */
    float *dora_row; /* DoRA: [n_threads][max n_in] dequantized rows for the norms */
    float *logits;   /* [loss_chunk][V] */
    double *tok_loss;/* [T] cross-entropy per target */
    float *rope;     /* [S][rope_dim] */
    /* DPO only (else NULL): the gradient factor of each token row's
     * cross-entropy, and per sequence its log-prob under the policy and the
     * reference and its scored targets */
    float *tok_weight;      /* [T] */
    double *seq_logp, *seq_ref; /* [B] */
    int32_t *seq_scored;    /* [B] */
    float *rope_swa; /* [S][rope_dim] of windowed layers with their own base (gemma3), else NULL */
    float *qraw, *kraw; /* [T][Q], [T][KV] q and k before their head norms (qwen3, gemma3), else NULL */
    float *po, *dpo; /* [T][D] a block's output before its post-norm and its gradient (gemma), else NULL */
    float *scores;   /* [n_threads][3 * WISP_ATTN_BLOCK] attention scores, dO.V products, weights */
    float *tile;     /* [n_threads][backward_tile] dequantized weight tiles (matmul_t.h) */
    float *tile_out; /* [n_threads][tile_out_floats] their products */
    size_t tile_out_floats;

    /* progress */
    int64_t step;          /* optimizer steps done */
    int64_t micro_total;   /* micro-steps ever run: keys the dropout masks */
    int32_t micro_in_accum;/* micro-steps since the last optimizer step */
    int32_t good_steps;    /* finite steps since the loss scale last changed */
    float loss_scale;
    int32_t hysteresis_left; /* overflows the loss scale still tolerates before it halves */
    int64_t skipped_steps;   /* optimizer steps skipped for a non-finite gradient, over the run */

    /* the micro-step being run */
    const int32_t *tokens; /* [n_seq][S + 1] */
    int32_t n_seq, T;
    bool dropout_on;
    bool adapter_off;      /* the base alone: DPO's reference model, without a second copy of the weights */
} wisp_train;

/* ---- train_plan.c ---- */
/* Check and fill defaults of cfg->train (shapes against the model). */
wisp_status wisp_train_resolve(const wisp_hparams *hp, wisp_config *cfg, wisp_error *err);
/* Lay out everything training needs (nothing when training is off), from
 * the one function for both: with lay->arena NULL only measured (ctx unused),
 * else carved for ctx, whose model, config (hp and cfg are its own) and exec
 * are set, and the adapter initialised. */
wisp_status wisp_train_layout(wisp_layout *lay, wisp_ctx *ctx, const wisp_gguf *g, const wisp_hparams *hp,
                              const wisp_config *cfg, size_t act_row_bytes, wisp_error *err);

typedef enum train_pass { TRAIN_PASS_SAVE, TRAIN_PASS_EVAL, TRAIN_PASS_RECOMPUTE } train_pass;

/* ---- train_step.c ---- */
/* Check a batch and make it the current one (dropout on if asked and
 * configured); *n_scored receives its scored targets. */
wisp_status wisp_train_start(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *mask, int32_t n_seq, bool dropout,
                             int32_t *n_scored, wisp_error *err);
/* Every layer forward over the current batch, into tr->x. */
void wisp_train_forward(wisp_train *tr, train_pass pass);
/* Every layer backward from tr->dx, accumulating the adapter's gradients. */
void wisp_train_backward(wisp_train *tr);

/* ---- train_forward.c ---- */
void wisp_train_views_of(wisp_train *tr, int32_t layer, train_views *v);
/* Embeddings of the micro-step's tokens into layer 0's input view (scaled
 * as the family says). */
void wisp_train_embed(wisp_train *tr);
/* Whether layer l attends through the sliding window, and its RoPE table. */
bool wisp_train_layer_windowed(const wisp_train *tr, int32_t l);
const float *wisp_train_rope_of(const wisp_train *tr, int32_t l);
/* One layer forward on views v; TRAIN_PASS_SAVE also stores what the
 * backward pass needs when the views are not the saved arrays themselves. */
void wisp_train_forward_layer(wisp_train *tr, int32_t layer, const train_views *v, train_pass pass);
/* Make a layer's views hold its forward activations again before its
 * backward pass: convert them from reduced precision, or recompute them
 * from the saved input (checkpointing), or nothing (F32 storage). */
void wisp_train_load_layer(wisp_train *tr, int32_t layer, const train_views *v);

/* ---- train_backward.c ---- */
void wisp_train_backward_layer(wisp_train *tr, int32_t layer, const train_views *v);

/* ---- train_loss.c ---- */
/* Cross-entropy of the final layer output tr->x, per target in tr->tok_loss;
 * with `backward`, also writes into tr->dx the gradient w.r.t. tr->x of
 * sum_t weight[t] x loss_t, weight NULL meaning loss_scale / n_scored for
 * every target (loss_scale x the mean loss). Returns the mean loss over
 * n_scored targets (0 when none). */
double wisp_train_loss_head(wisp_train *tr, const uint8_t *mask, int32_t n_scored, bool backward,
                            const float *weight);

/* ---- train_lora.c ---- */
/* y += scale * B (A drop(x)), keeping h = A drop(x) in `h` (y NULL: only h). */
void wisp_train_lora_forward(wisp_train *tr, int32_t pair, int32_t layer, const float *x, float *h, float *y);
/* y[t][o] += s B_o . h_t for token rows t in [lo, hi) of pair p: the forward's
 * up-projection, also DoRA's recomputed z. h [T][rank] is read and y
 * [T][n_out] written, so the two must not overlap. */
void wisp_train_lora_up_rows(const wisp_train *tr, const wisp_lora_pair *p, const float *h, float *y, int64_t lo,
                             int64_t hi);
/* Gradients of one adapted projection given dy: dB, dA accumulate; when dx
 * is not NULL, dx += drop'(A^T dh). */
void wisp_train_lora_backward(wisp_train *tr, int32_t pair, int32_t layer, const float *x, const float *h,
                              const float *dy, float *dx);

/* ---- train_dora.c ---- */
/* Refresh every DoRA pair's row norms from the current A and B. */
void wisp_train_dora_norms(wisp_train *tr);
/* Backward of y = (m / n) z for one DoRA pair given dy (n constant): dm +=
 * sum_t dy z / n with z = W x + s B h recomputed, and returns dz = (m / n) dy,
 * written into `out` (which may be dy itself, or NULL for tr->dora_z).
 * Returns dy untouched when the pair is plain LoRA. */
const float *wisp_train_dora_backward(wisp_train *tr, int32_t layer, int proj, const float *x, const float *h,
                                      const float *dy, float *out);

/* ---- train_prefix.c: prefix tuning ---- */
/* Put the prefix's keys and values of layer l into tr->k and tr->v (token
 * major, after RoPE) at every sequence's virtual positions. */
void wisp_train_prefix_forward(wisp_train *tr, int32_t l);
/* Add the gradient of those keys and values (tr->k, tr->v hold dK, dV) to
 * the prefix's, and zero it there: it reaches nothing below. */
void wisp_train_prefix_backward(wisp_train *tr, int32_t l);
/* With PEFT's reparameterization (proj_hidden > 0): recompute the prefix
 * from its MLP (after any change of the parameters), and turn the gradient
 * reaching the prefix in a micro-step into the MLP's (added to virtual_grad).
 * Both do nothing without it. */
void wisp_train_prefix_project(wisp_train *tr);
void wisp_train_prefix_project_backward(wisp_train *tr);

/* ---- attention_backward.c ---- */
/* dq (token-major) and dkh/dvh (per kv head) of causal attention for the
 * micro-step's sequences, recomputing probabilities from the saved lse. */
void wisp_train_attention_backward(wisp_train *tr, const train_views *v, const float *dout, int32_t window);

/* ---- train_ops.c: small row operations, threaded over tokens ---- */
/* fn(arg, lo, hi) over [0, n) split between the workers. */
void wisp_train_parallel(wisp_train *tr, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg);
void wisp_train_rmsnorm_rows(wisp_train *tr, float *y, const float *x, const float *w, int32_t n_rows);
/* dx += RMSNorm'(x, w)^T dy (dx may be NULL: then dx = ... is written into `out`) */
void wisp_train_rmsnorm_backward(wisp_train *tr, float *dx, const float *x, const float *w, const float *dy,
                                 int32_t n_rows, bool accumulate);
/* act = act_fn(g) * u with the family's activation (SiLU or GELU-tanh) */
void wisp_train_act_mul_rows(wisp_train *tr, float *act, const float *g, const float *u);
/* d act -> (d g into dact, d u into act) */
void wisp_train_act_mul_backward(wisp_train *tr, float *dact, float *act, const float *g, const float *u);
/* Queries [T][Q] and keys [T][KV] of a layer through its q/k norms and RoPE, in place (wisp_layer_qk_rope). */
void wisp_train_qk_rope_rows(wisp_train *tr, int32_t layer, float *q, float *k);
/* Its backward, in place on dq and dk; q_in, k_in its inputs (NULL without q/k norms). */
void wisp_train_qk_rope_backward(wisp_train *tr, int32_t layer, float *dq, float *dk, const float *q_in,
                                 const float *k_in);
/* y = W x (+ adapter) (+ bias) for one projection of `layer`; h receives A x when adapted. */
void wisp_train_project(wisp_train *tr, int32_t layer, int proj, const float *x, float *y, float *h,
                        const float *bias);
/* dx (+)= W^T dy, threads splitting columns. */
void wisp_train_matmul_t(wisp_train *tr, const wisp_weight *w, const float *dy, int32_t n_tok, float *dx,
                         bool accumulate);
/* Token-major [T][KV] <-> per-kv-head [B][KVH][S][hd]. */
void wisp_train_to_heads(const wisp_train *tr, const float *tok, float *heads);
void wisp_train_from_heads(const wisp_train *tr, const float *heads, float *tok);
/* Element conversions between F32 and the saved type. */
void wisp_train_save_rows(const wisp_train *tr, void *dst, const float *src, size_t n);
void wisp_train_load_rows(const wisp_train *tr, float *dst, const void *src, size_t n);

/* ---- train_dpo.c ---- */
/* One pair's DPO loss and its derivatives w.r.t. the policy's log-probs
 * (already averaged per token for IPO). */
typedef struct wisp_dpo_pair_terms {
    double loss, d_chosen, d_rejected, reward_chosen, reward_rejected;
} wisp_dpo_pair_terms;
wisp_dpo_pair_terms wisp_dpo_pair(const wisp_train_config *c, double pi_chosen, double pi_rejected, double ref_chosen,
                                  double ref_rejected);

/* ---- optimizer.c ---- */
wisp_status wisp_train_apply_optimizer(wisp_train *tr, wisp_train_step_info *info, wisp_error *err);

/* ---- dropout (train_lora.c) ---- */
/* Whether input i of token row t of (layer, proj) was kept in micro-step
 * number `micro` (0-based, counted over the context's life). */
bool wisp_train_keep(const wisp_train *tr, int64_t micro, int32_t layer, int32_t proj, int64_t t, int64_t i);

#endif
