/* What a context is planned and carved for when it trains a LoRA adapter:
 * the shapes that size the arena (sequence length, micro-batch, rank,
 * targets, optimizer, saved-activation type, checkpointing) and the
 * hyperparameters the steps read. Part of wisp_config (cfg.train); training
 * is off while seq_len is 0. Zero fields take the defaults noted. */
#ifndef WISP_TRAIN_CONFIG_H
#define WISP_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum wisp_optimizer_kind {
    WISP_OPTIMIZER_ADAMW, /* Adam with decoupled weight decay (PyTorch AdamW) */
    WISP_OPTIMIZER_SGD    /* SGD with momentum (PyTorch SGD, dampening 0, coupled weight decay) */
} wisp_optimizer_kind;

typedef enum wisp_schedule_kind {
    WISP_SCHEDULE_CONSTANT, /* warmup (if any), then constant */
    WISP_SCHEDULE_COSINE,   /* linear warmup, then cosine decay to min_lr_ratio x lr (HF's) */
    WISP_SCHEDULE_LINEAR,   /* linear warmup, then linear decay to min_lr_ratio x lr (HF's) */
    WISP_SCHEDULE_ONECYCLE  /* PyTorch OneCycleLR, cosine: lr/25 up to lr over the warmup, then down to lr/25e4 */
} wisp_schedule_kind;

/* What a micro-step minimises. */
typedef enum wisp_train_objective {
    WISP_OBJECTIVE_CAUSAL_LM, /* mean cross-entropy of the scored next tokens (wisp_train_micro_step) */
    WISP_OBJECTIVE_DPO        /* trl's DPO on (chosen, rejected) pairs (wisp_train_dpo_micro_step, train_dpo.c) */
} wisp_train_objective;

typedef enum wisp_dpo_loss_kind {
    WISP_DPO_SIGMOID, /* -(1-e) log sigmoid(beta d) - e log sigmoid(-beta d), d on summed log-probs */
    WISP_DPO_IPO      /* (d - 1/(2 beta))^2, d on per-token averaged log-probs (trl's "ipo") */
} wisp_dpo_loss_kind;

#define WISP_TARGETS_ALL 0x7fu /* every projection: 1u << WISP_PROJ_Q | ... | 1u << WISP_PROJ_DOWN */

typedef struct wisp_train_config {
    /* ---- shapes: these size the plan ---- */
    int32_t seq_len;      /* positions the model sees per sequence (a window holds seq_len + 1 tokens); 0: off */
    int32_t micro_batch;  /* sequences per micro-step; 0: 1 */
    int32_t rank;         /* LoRA rank; 0: 8 */
    uint32_t targets;     /* bitmask of 1u << wisp_proj; 0: WISP_TARGETS_ALL */
    int32_t optimizer;    /* wisp_optimizer_kind */
    int32_t act_type;     /* saved activations: WISP_TYPE_F32 (0, default), WISP_TYPE_BF16 or WISP_TYPE_F16 */
    bool checkpointing;   /* keep only each layer's input and recompute the rest during the backward pass */
    int32_t loss_chunk;   /* tokens whose logits exist at once; 0: as many as fit 16 MiB of logits */
    int32_t backward_tile;/* floats per worker for weight tiles dequantized in the backward pass; 0: 32768 */

    /* ---- objective ---- */
    int32_t objective;    /* wisp_train_objective; DPO plans per-token weights and needs an even micro_batch */
    float dpo_beta;       /* DPO: 0: 0.1 (trl's default) */
    float dpo_label_smoothing; /* DPO sigmoid: in [0, 0.5) (cDPO); must be 0 for IPO */
    int32_t dpo_loss;     /* wisp_dpo_loss_kind */

    /* ---- prompt tuning (PEFT PROMPT_TUNING) ---- */
    int32_t virtual_tokens; /* > 0: train only this many input embeddings prepended to every sequence
                             * (positions 0..n-1; the text starts at n), no LoRA pairs; 0: off */
    /* ---- prefix tuning (PEFT PREFIX_TUNING, P-tuning v2) ---- */
    bool prefix;            /* with virtual_tokens: the learned rows are every layer's keys and values at
                             * positions 0..n-1 (PEFT's past_key_values, [n][n_layers][2][n_kv_heads][head_dim],
                             * keys used as they are: no RoPE) instead of input embeddings */
    bool prefix_projection; /* prefix: train through PEFT's reparameterization, prefix = W2 tanh(W1 e + b1) + b2
                             * of N learned embeddings e [N][token_dim] (PrefixEncoder, prefix_projection) */
    int32_t encoder_hidden_size; /* its hidden width; 0: token_dim (n_kv_heads x head_dim), PEFT's default */

    /* ---- LoRA ---- */
    float alpha;          /* 0: 2 x rank */
    bool rslora;          /* scale alpha / sqrt(rank) instead of alpha / rank */
    bool dora;            /* weight-decomposed LoRA (PEFT use_dora): a trained magnitude per output row */
    float dropout;        /* probability of zeroing an input of the LoRA path, in [0, 1) */
    uint64_t seed;        /* initialisation of A and dropout masks */

    /* ---- optimizer and schedule ---- */
    float lr;             /* peak learning rate; 0: 1e-3 */
    float beta1, beta2;   /* AdamW; 0: 0.9, 0.999 */
    float eps;            /* AdamW; 0: 1e-8 */
    float weight_decay;   /* 0 by default, as Hugging Face's Trainer */
    float momentum;       /* SGD; 0: 0.9 (negative: none) */
    int32_t schedule;     /* wisp_schedule_kind */
    int32_t warmup_steps; /* 1cycle: 0 means 30% of total_steps */
    int64_t total_steps;  /* optimizer steps planned; needed by every schedule but constant */
    float min_lr_ratio;   /* cosine / linear decay floor, as a fraction of lr */
    float clip_norm;      /* global gradient-norm clipping; 0: off */

    /* ---- F16 storage: dynamic loss scaling ---- */
    float loss_scale;     /* initial scale for act_type F16; 0: 65536 (always 1 otherwise) */
    int32_t loss_scale_window; /* good steps before the scale doubles; 0: 1000 */
    int32_t loss_scale_hysteresis; /* overflows tolerated before the scale halves (DeepSpeed's hysteresis); 0: 2 */
    float min_loss_scale;          /* the scale never halves below this (DeepSpeed's min_loss_scale); 0: 1 */
} wisp_train_config;

/* The dynamic loss scale's state, and its policy (DeepSpeed's
 * DynamicLossScaler with consecutive_hysteresis off, README "Mixed precision"):
 *  - overflow: the step is skipped; if hysteresis_left is 1 the scale halves
 *    (not below min_loss_scale), else hysteresis_left drops by one; the run
 *    of good steps restarts;
 *  - good step: after loss_scale_window good steps in a row the scale
 *    doubles (at most 2^24) and hysteresis_left is restored. */
typedef struct wisp_loss_scaler {
    float scale;
    int32_t good_steps;      /* good steps since the last overflow or doubling */
    int32_t hysteresis_left; /* overflows still tolerated at this scale */
} wisp_loss_scaler;
void wisp_loss_scaler_update(const struct wisp_train_config *c, wisp_loss_scaler *s, bool overflow);

/* Facts of one optimizer step, for logs and progress lines. */
typedef struct wisp_train_step_info {
    int64_t step;         /* optimizer steps done, this one included */
    float lr;             /* learning rate this step used */
    float grad_norm;      /* global L2 norm of the averaged gradient, before clipping */
    float loss_scale;     /* the dynamic loss scale now (1 unless act_type is F16) */
    bool clipped;         /* the gradient was scaled down to clip_norm */
    int64_t skipped_steps;/* steps skipped so far over the run (resumes included) */
    bool skipped;         /* the gradient was not finite (an F16 overflow under loss scaling, or NaN/Inf from
                             the model or data): nothing was updated, the step does not count */
} wisp_train_step_info;

#endif
