/* wisp — run and fine-tune llama-family models inside one planned arena.
 *
 * The flow, on any target, with nothing but this header (a whole program:
 * tests/cli/public_generate.c):
 *
 *     wisp_gguf *g = malloc(wisp_gguf_size());  // or any 16-byte aligned block
 *     wisp_gguf_open(g, bytes, size, &err);      // parsed in place: the bytes stay where they lie
 *     wisp_config cfg = wisp_config_default();
 *     cfg.n_ctx = 512;
 *     wisp_cpu_features cpu;                     // the best kernel level of this CPU
 *     wisp_cpu_detect(&cpu);
 *     wisp_simd_select(&cpu, NULL, &cfg.kernels, &err);
 *     wisp_memory_plan plan;                     // exact bytes, per part, before anything starts
 *     wisp_plan(g, &cfg, &plan, &err);
 *     void *arena = <plan.total bytes, 16-byte aligned>;
 *     wisp_ctx *ctx;                             // carved from the arena; nothing allocates afterwards
 *     wisp_init(&ctx, g, &cfg, arena, plan.total, &err);
 *     wisp_tokenize_text(ctx, "Once upon a time", 16, WISP_TOKENIZE_ADD_BOS, ids, 64, &n, &err);
 *     wisp_eval(ctx, ids, n, &err);              // prefill; then one token at a time:
 *     wisp_sampler_params sp = wisp_sampler_defaults();
 *     sp.temperature = 0;                        // greedy; or keep 0.8 and set sp.seed
 *     wisp_sampler sampler;
 *     wisp_sampler_init(&sampler, &sp);
 *     int32_t next = wisp_sample(ctx, &sampler, ids, n);
 *     wisp_token_piece(wisp_ctx_tokenizer(ctx), next, buf, sizeof buf);  // its text
 *     wisp_eval(ctx, &next, 1, &err);            // ... until wisp_tokenizer_is_eog(tok, next)
 *
 * Fine-tuning a LoRA adapter is the same flow with cfg.train filled in; the
 * plan then also covers the adapter, its gradients, the optimizer moments,
 * saved activations and backward scratch, and training never allocates:
 *
 *     cfg.train.seq_len = 128;           // windows of 129 token ids
 *     cfg.train.rank = 8;                // all seven projections by default
 *     ... wisp_plan, arena, wisp_init as above ...
 *     wisp_train_micro_step(ctx, windows, mask, n_seq, &loss, &n_scored, &err);
 *     wisp_train_optimizer_step(ctx, &info, &err);
 *     wisp_adapter_attach(ctx, wisp_train_lora(ctx), 1.0f, &handle, &err); // generate with it
 *
 * Every fallible call returns a wisp_status and fills the optional
 * wisp_error with a message. */
#ifndef WISP_H
#define WISP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WISP_VERSION "0.1.0"

/* Errors are values: every fallible call returns a wisp_status and, when the
 * caller passes a wisp_error, a one-line message saying what was wrong. */
typedef enum wisp_status {
    WISP_OK = 0,
    WISP_ERR_ARG,         /* caller passed something invalid */
    WISP_ERR_FORMAT,      /* input bytes are malformed or truncated */
    WISP_ERR_UNSUPPORTED, /* well-formed, but not something wisp runs */
    WISP_ERR_SHAPE,       /* tensors or hyperparameters disagree */
    WISP_ERR_NOT_FOUND,   /* a named tensor or key is missing */
    WISP_ERR_ARENA,       /* the arena is smaller than the plan */
    WISP_ERR_CAPACITY,    /* a caller buffer is too small (size reported) */
    WISP_ERR_NUMERIC,     /* NaN/Inf where a finite value is required */
    WISP_ERR_IO,          /* a platform sink or source failed */
    WISP_ERR_ABORTED,     /* the caller asked to stop */
    WISP_ERR_INTERNAL     /* an invariant broke: a bug in wisp */
} wisp_status;

#define WISP_ERROR_MESSAGE_MAX 320

typedef struct wisp_error {
    wisp_status status;
    char message[WISP_ERROR_MESSAGE_MAX];
} wisp_error;

/* Short stable name of a status ("malformed input", "arena too small", ...). */
const char *wisp_status_name(wisp_status s);

/* Tensor element types, numbered as GGML numbers them (types.h has a row of
 * facts and reference code per type). */
typedef enum wisp_type {
    WISP_TYPE_F32 = 0,
    WISP_TYPE_F16 = 1,
    WISP_TYPE_Q4_0 = 2,
    WISP_TYPE_Q4_1 = 3,
    WISP_TYPE_Q5_0 = 6,
    WISP_TYPE_Q5_1 = 7,
    WISP_TYPE_Q8_0 = 8,
    WISP_TYPE_Q8_1 = 9,
    WISP_TYPE_Q2_K = 10,
    WISP_TYPE_Q3_K = 11,
    WISP_TYPE_Q4_K = 12,
    WISP_TYPE_Q5_K = 13,
    WISP_TYPE_Q6_K = 14,
    WISP_TYPE_Q8_K = 15,
    WISP_TYPE_IQ4_NL = 20,
    WISP_TYPE_I8 = 24,
    WISP_TYPE_I16 = 25,
    WISP_TYPE_I32 = 26,
    WISP_TYPE_I64 = 27,
    WISP_TYPE_F64 = 28,
    WISP_TYPE_BF16 = 30,
    WISP_TYPE_COUNT = 43 /* ids 0..42 as GGML numbers them today */
} wisp_type;

/* The parts a plan is made of, in the order init carves them. */
typedef enum wisp_part {
    WISP_PART_CONTEXT,     /* the context struct and per-layer tensor tables */
    WISP_PART_TOKENIZER,   /* token index, lookup hash tables, merge ranks */
    WISP_PART_KV_CACHE,    /* keys and values for ctx positions, every layer */
    WISP_PART_SCRATCH,     /* activations of one forward batch */
    WISP_PART_LOGITS,      /* output logits (one row, or one per batch position) */
    WISP_PART_SAMPLER,     /* candidate list for top-k/top-p/min-p */
    WISP_PART_TEXT,        /* tokenizer working memory for prompts */
    WISP_PART_ADAPTERS,    /* tables of attached LoRA adapters */
    WISP_PART_LORA,        /* trainable LoRA weights */
    WISP_PART_GRADIENTS,   /* their gradients */
    WISP_PART_OPTIMIZER,   /* optimizer moments */
    WISP_PART_ACTIVATIONS, /* activations saved for the backward pass */
    WISP_PART_TRAIN_SCRATCH, /* backward-pass working memory */
    WISP_PART_PACKED_WEIGHTS, /* weights in the kernel level's own layout (kernels.h wisp_packing), and
                               * the norm and bias vectors beside them */
    WISP_PART_TOKEN_TRIE,  /* the vocabulary as a byte trie, for grammar-constrained sampling */
    WISP_PART_GRAMMAR,     /* a compiled grammar and its matcher's state */
    WISP_PART_COUNT
} wisp_part;

/* A part's name as plans print it ("kv_cache"); "?" out of range. */
const char *wisp_part_name(int part);

/* Rows of the architecture table (arch.c), in its order. */
typedef enum wisp_arch {
    WISP_ARCH_LLAMA, WISP_ARCH_QWEN2, WISP_ARCH_QWEN3, WISP_ARCH_GEMMA2, WISP_ARCH_GEMMA3, WISP_ARCH_PHI3
} wisp_arch;

typedef struct wisp_hparams {
    wisp_arch arch;
    int32_t n_vocab;
    int32_t dim;        /* embedding width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads; /* < n_heads: grouped-query attention */
    int32_t head_dim;
    int32_t ffn_dim;
    int32_t rope_dim;   /* leading dims of each head that are rotated */
    int32_t ctx_train;  /* context length the model was trained with */
    float rope_base;
    float rms_eps;
    bool rope_neox;     /* rotate (i, i+d/2) pairs instead of (2i, 2i+1) */
    bool tied_output;   /* the output projection is the token embedding */
    /* RoPE scaling: theta_i = pos * freq_scale * base^(-2i/rope_dim) / factor_i, and
     * cos, sin multiplied by attn_factor (factors: rope_freqs / rope_factors_*);
     * YaRN mixes that with the unscaled angle per pair (core/rope.h) */
    float rope_freq_scale;  /* linear scaling (1: none) */
    float rope_attn_factor; /* magnitude scale, rope.scaling.attn_factor (1: none) */
    float rope_ext_factor;  /* YaRN's extrapolation mix (rope.scaling.type yarn: 1; else 0) */
    int32_t rope_orig_ctx;  /* rope.scaling.original_context_length (default context_length): LongRoPE's
                             * long factors apply iff n_ctx exceeds it; YaRN's ramp is placed by it */
    float rope_base_swa;    /* base of windowed layers (rope_base unless the row has its own) */
    int32_t window;         /* sliding window of the windowed layers (0: none) */
    int32_t window_pattern; /* WISP_WINDOW_PATTERN: layer l windowed iff l % pattern < pattern - 1 */
    float attn_softcap;     /* scores s -> c tanh(s / c) before the mask (0: none) */
    float final_softcap;    /* logits likewise (0: none) */
    float attn_scale;       /* scores are q.k * attn_scale */
    float embed_scale;      /* the embedding row is multiplied by it (1 or sqrt(dim)) */
} wisp_hparams;

/* The seven LoRA-capable projections of a layer, in a fixed order used by
 * adapters and training. */
typedef enum wisp_proj {
    WISP_PROJ_Q, WISP_PROJ_K, WISP_PROJ_V, WISP_PROJ_O,
    WISP_PROJ_GATE, WISP_PROJ_UP, WISP_PROJ_DOWN,
    WISP_PROJ_COUNT
} wisp_proj;

/* ---- what a context trains (cfg.train) ----------------------------------
 * The shapes that size the arena (sequence length, micro-batch, rank, targets,
 * optimizer, saved-activation type, checkpointing) and the hyperparameters the
 * steps read. Training is off while seq_len is 0. Zero fields take the
 * defaults noted. */
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

/* Held by pointer here; their fields are core's: a GGUF parsed in place
 * (gguf.h) and the model viewed over it (model.h). */
typedef struct wisp_gguf wisp_gguf;
typedef struct wisp_model wisp_model;

/* ---- opening a model ------------------------------------------------------
 * A GGUF is parsed where its bytes lie (a mapping, flash, a buffer read from
 * a file): nothing is copied, so `bytes` must outlive the handle and every
 * context made from it. The handle itself is a small struct whose fields stay
 * core's; since the caller cannot name its size, it asks for it and provides
 * that many bytes (malloc's memory, or any 16-byte aligned block: core never
 * allocates):
 *
 *     wisp_gguf *g = malloc(wisp_gguf_size());
 *     wisp_gguf_open(g, bytes, size, &err);
 *
 * (core's own callers, which see gguf.h, simply declare a wisp_gguf.) */
size_t wisp_gguf_size(void);

/* Validate and index a GGUF held in `bytes` (which must outlive `g`): every
 * length, count, offset and tensor extent is checked against `size` once.
 * Fails with WISP_ERR_FORMAT naming the first problem found. A shard of a
 * split model is refused by plan and init (gguf.h links shards). */
wisp_status wisp_gguf_open(wisp_gguf *g, const void *bytes, size_t size, wisp_error *err);

/* ---- compute kernels -------------------------------------------------------
 * A table of kernels per instruction set (the scalar reference, AVX2,
 * AVX-512, NEON, NEON dot-product, wasm SIMD128); cfg.kernels points at one
 * (NULL: the scalar reference, on every target). Every level gives the same
 * tokens up to the floating-point rounding its products state. To run the
 * best this processor offers:
 *
 *     wisp_cpu_features cpu;
 *     wisp_cpu_detect(&cpu);
 *     wisp_simd_select(&cpu, NULL, &cfg.kernels, &err);  // or a name: "avx2" */
typedef struct wisp_kernels wisp_kernels;

typedef struct wisp_cpu_features {
    bool avx2_fma;     /* x86: AVX2 + FMA + F16C */
    bool avx512;       /* x86: AVX-512 F/BW/VL/DQ + VNNI */
    bool avx512_bf16;  /* x86: AVX512_BF16 */
    bool neon;         /* ARM: Advanced SIMD */
    bool dotprod;      /* aarch64: SDOT/UDOT (HWCAP_ASIMDDP) */
    bool wasm_simd128; /* WebAssembly SIMD (compile-time) */
} wisp_cpu_features;

/* What the processor running this offers (CPUID on x86, the aux vector on
 * aarch64 Linux, the build's flags on 32-bit ARM and wasm); all false where
 * nothing can be read. A platform that knows better fills the struct itself. */
void wisp_cpu_detect(wisp_cpu_features *cpu);

/* The table for `name` ("scalar", "avx2", "avx512", "neon", "neon-dotprod",
 * "wasm-simd128"), or the best one this build offers on `cpu` when name is
 * NULL or "auto". Fails with WISP_ERR_UNSUPPORTED listing what is available
 * when the name is unknown or the CPU lacks it. */
wisp_status wisp_simd_select(const wisp_cpu_features *cpu, const char *name, const wisp_kernels **out,
                             wisp_error *err);

/* A model's vocabulary and its encoder, read from the GGUF at init. */
typedef struct wisp_tokenizer wisp_tokenizer;

/* ---- sampling ---------------------------------------------------------------
 * Choosing the next token from the logits (wisp_sample): the repetition
 * penalty, top-k, top-p, min-p, then the temperature, driven by a seeded
 * generator so the same seed gives the same tokens on every target. */
typedef struct wisp_sampler_params {
    float temperature;    /* <= 0: greedy (argmax) */
    int32_t top_k;        /* keep the k most likely; 0: off */
    float top_p;          /* keep the smallest set with this much probability; 1: off */
    float min_p;          /* drop tokens below min_p x the best probability; 0: off */
    float repeat_penalty; /* divide positive / multiply negative logits of recent tokens; 1: off */
    int32_t repeat_last_n;/* how many recent tokens the penalty looks at */
    uint64_t seed;
} wisp_sampler_params;

/* The caller holds a sampler by value and starts it with wisp_sampler_init. */
typedef struct wisp_sampler {
    wisp_sampler_params p;
    uint64_t rng; /* the whole generator state: saving it resumes the sequence */
    /* optional stage: only tokens this grammar guide allows (NULL: off; guide.h
     * is internal for now). The sampler advances the guide past every token it
     * returns; -1 when no token may follow (the reason is in guide->error). */
    struct wisp_guide *guide;
} wisp_sampler;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no
 * penalty, seed 0. Set temperature to 0 for greedy decoding. */
wisp_sampler_params wisp_sampler_defaults(void);
/* Start `s` with settings `p` (copied) and its generator seeded from p->seed. */
void wisp_sampler_init(wisp_sampler *s, const wisp_sampler_params *p);

/* Passed by pointer only; a platform fills them through their own headers:
 * an adapter's pairs (lora.h), where saved bytes go (sink.h). */
typedef struct wisp_lora wisp_lora;
typedef struct wisp_sink wisp_sink;

/* Run fn(arg, i, n) for every piece i = 0..n-1, each exactly once, possibly
 * in parallel and in any order, and return when all have finished. n may
 * exceed n_threads: idle threads then claim the remaining pieces. A job that
 * indexes per-worker scratch by i asks for at most n_threads pieces. A
 * platform's thread pool implements this; core never starts threads. */
typedef void (*wisp_job_fn)(void *arg, int ith, int nth);
typedef struct wisp_threads {
    void (*run)(void *pool, wisp_job_fn fn, void *arg, int nth); /* NULL: run serially */
    void *pool;
    int n_threads; /* workers the pool will use (>= 1) */
} wisp_threads;

typedef struct wisp_config {
    int32_t n_ctx;           /* KV cache positions; 0: the model's context length, at most 4096 */
    int32_t n_batch;         /* most tokens per forward step; 0: min(n_ctx, 64) */
    int32_t kv_type;         /* WISP_TYPE_F16 (default, as llama.cpp) or WISP_TYPE_F32 */
    bool logits_all;         /* keep logits of every position of a step, not just the last */
    bool hidden_states;      /* embeddings: keep every position's final hidden state (after the
                              * output norm) for wisp_hidden and skip the output projection, so
                              * wisp_logits is NULL. Needs no arena: the rows stay in step scratch. */
    uint32_t max_text_bytes; /* longest text wisp_tokenize_text accepts; 0: 4096 */
    const wisp_kernels *kernels; /* NULL: the scalar reference */
    bool in_place_weights;   /* never pack weights for the kernels (no part "packed_weights"): the
                              * product reads them where they lie, at the kernels' in-place speed */
    /* Called at init once per weight whose packed copy was made, with the original's bytes,
     * which products no longer read (embedding rows, the backward pass and merging still may):
     * a platform can let them go from memory, as the CLI returns a mapping's pages to the page
     * cache. NULL: nothing is called. */
    void (*weight_packed)(void *user, const void *data, size_t bytes);
    void *weight_packed_user;
    wisp_threads threads;    /* n_threads sizes per-thread scratch */
    int32_t max_adapters;    /* LoRA adapters attachable at once (plan part "adapters"); 0: none */
    int32_t max_lora_rank;   /* largest rank an attached adapter may have; 0 with adapters: 64 */
    wisp_train_config train; /* LoRA fine-tuning; off while train.seq_len is 0 (wisp_train_config above) */
} wisp_config;

typedef struct wisp_memory_plan {
    size_t total;
    size_t part[WISP_PART_COUNT]; /* bytes per wisp_part; they add up to total */
    wisp_hparams hp;
    wisp_config cfg;              /* with defaults resolved */
    size_t weight_bytes;          /* bytes of the model's tensors, used where they lie (not in the arena);
                                   * part "packed_weights" holds the kernels' copies of some */
} wisp_memory_plan;

typedef struct wisp_ctx wisp_ctx;

wisp_config wisp_config_default(void);

/* Exact arena bytes for this model and configuration. */
wisp_status wisp_plan(const wisp_gguf *g, const wisp_config *cfg, wisp_memory_plan *plan, wisp_error *err);

/* Carve everything from `arena` (`size` bytes, 16-byte aligned). Fails with
 * WISP_ERR_ARENA naming the shortfall if size < plan.total. `g` (and the
 * bytes it views) must outlive the context. */
wisp_status wisp_init(wisp_ctx **ctx, const wisp_gguf *g, const wisp_config *cfg, void *arena, size_t size,
                      wisp_error *err);

const wisp_hparams *wisp_ctx_hparams(const wisp_ctx *ctx);
const wisp_model *wisp_ctx_model(const wisp_ctx *ctx);
const wisp_tokenizer *wisp_ctx_tokenizer(const wisp_ctx *ctx);
const wisp_config *wisp_ctx_config(const wisp_ctx *ctx);
const char *wisp_ctx_kernels_name(const wisp_ctx *ctx);

/* Flags of wisp_tokenize_text: add the model's BOS / EOS, and read the texts
 * of control tokens ("<|im_start|>") in the input as those tokens. */
enum { WISP_TOKENIZE_ADD_BOS = 1, WISP_TOKENIZE_ADD_EOS = 2, WISP_TOKENIZE_PARSE_SPECIAL = 4 };

/* Tokenize with the context's text scratch (max_text_bytes). */
wisp_status wisp_tokenize_text(wisp_ctx *ctx, const char *text, size_t len, unsigned flags, int32_t *ids, size_t cap,
                               size_t *n_ids, wisp_error *err);

/* Append `n` tokens after the cached ones and run the model over them in
 * steps of at most n_batch. Afterwards wisp_logits() holds the last step's
 * logits. Fails (changing nothing) if the context would overflow. */
wisp_status wisp_eval(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_error *err);

/* As wisp_eval, with `n` input embedding rows [n][dim] (F32, the embedding
 * table's unscaled space: the family's embedding scale is applied as for a
 * token) in place of tokens: a prompt-tuning adapter's virtual tokens. */
wisp_status wisp_eval_embeddings(wisp_ctx *ctx, const float *rows, int32_t n, wisp_error *err);

/* A prefix-tuning adapter (PEFT PREFIX_TUNING): put its `n` positions
 * straight into the KV cache at n_past.. — rows [n][n_layers][2][n_kv_heads]
 * [head_dim] F32, each layer's key (used as stored: no RoPE) then value, as
 * PEFT's past_key_values — so the tokens evaluated next start at position
 * n_past + n and attend to them. No logits. Refused for models with
 * sliding-window layers (their rings would drop the prefix). */
wisp_status wisp_eval_kv_prefix(wisp_ctx *ctx, const float *rows, int32_t n, wisp_error *err);

/* Logits after the i-th token of the last step (i = -1: its last token).
 * Other positions are only kept with logits_all. NULL if unavailable. */
const float *wisp_logits(const wisp_ctx *ctx, int32_t i);

/* With cfg.hidden_states: the final hidden state (dim floats, after output_norm, before the
 * output projection) of position i of the last forward step (i < 0: its last), valid until the
 * next step. A wisp_eval longer than n_batch keeps only its last step's rows, so callers wanting
 * every position evaluate at most n_batch tokens per call. NULL if unavailable. */
const float *wisp_hidden(const wisp_ctx *ctx, int32_t i);

/* How an embedding pools a text's final hidden states. */
typedef enum { WISP_POOL_MEAN = 0, WISP_POOL_LAST = 1 } wisp_pooling;

/* The embedding of tokens[0..n) (dim floats into out, dim = wisp_ctx_hparams(ctx)->dim): the mean
 * of every position's final hidden state, or the last position's; L2-normalized if asked. Works on
 * any context: it starts from an empty cache (rewinds to 0) and, unless cfg.hidden_states is set,
 * leaves it empty (n_past 0, no logits); with it, the text stays cached and wisp_hidden valid. */
wisp_status wisp_embed_tokens(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_pooling pooling, bool normalize,
                              float *out, wisp_error *err);
int32_t wisp_last_step_tokens(const wisp_ctx *ctx);

int32_t wisp_n_past(const wisp_ctx *ctx);
/* Forget cached positions >= n (0 clears the cache). A model with sliding-
 * window layers keeps only a ring of recent positions there; when that ring
 * no longer holds the window before n, the whole cache is forgotten, so
 * read wisp_n_past afterwards. */
void wisp_rewind(wisp_ctx *ctx, int32_t n);

/* Pick the next token from the last logits. `history` (may be NULL) feeds
 * the repetition penalty. Uses the context's candidate scratch. */
int32_t wisp_sample(wisp_ctx *ctx, wisp_sampler *s, const int32_t *history, size_t n_history);

/* ---- turning tokens back into text ----------------------------------------- */
/* The bytes of token `id` (tok = wisp_ctx_tokenizer(ctx)): its full length is
 * returned, min(length, cap) bytes are copied (no NUL). SPM's "▁" becomes a
 * space and <0xXX> the byte; byte-level BPE's characters become their bytes.
 * Control and unknown tokens give nothing. A multi-byte character may span
 * several tokens: write the pieces out as bytes, in order. */
size_t wisp_token_piece(const wisp_tokenizer *tok, int32_t id, char *buf, size_t cap);
/* True for the tokens that end a generation (EOS, EOT, <|im_end|>-like). */
bool wisp_tokenizer_is_eog(const wisp_tokenizer *tok, int32_t id);

/* ---- LoRA adapters at inference ------------------------------------------
 * An attached adapter adds user_scale * pair.scale * B (A x) after each
 * projection it adapts; several attached adapters add up, and attaching,
 * rescaling or detaching never touches the base weights. The adapter is used
 * in place: `lora`, its pairs and their A/B tensors must stay valid until it
 * is detached. Attaching checks every pair against the model (layer and
 * projection in range, n_in/n_out equal to the weight's columns/rows, rank at
 * most cfg.max_lora_rank, element type F32/F16/BF16) and fails without
 * changing anything. Handles are positive and never reused within a context. */
wisp_status wisp_adapter_attach(wisp_ctx *ctx, const wisp_lora *lora, float scale, int32_t *handle, wisp_error *err);
wisp_status wisp_adapter_set_scale(wisp_ctx *ctx, int32_t handle, float scale, wisp_error *err);
wisp_status wisp_adapter_detach(wisp_ctx *ctx, int32_t handle, wisp_error *err);
/* Adapters attached now. */
int32_t wisp_adapter_count(const wisp_ctx *ctx);

/* ---- LoRA fine-tuning (cfg.train.seq_len > 0) ------------------------------
 * The context owns one trainable F32 adapter on the chosen projections (A
 * seeded uniform in +-1/sqrt(n_in), B zero: PEFT's initialisation), its
 * gradients, optimizer moments, saved activations and scratch, all planned.
 * A training context also plans one adapter slot (and max_lora_rank >= rank)
 * so wisp_train_lora() can be attached for generation in the same context.
 *
 * Batches: `tokens` holds n_seq (1..micro_batch) windows of seq_len + 1 ids,
 * back to back. The model reads ids 0..seq_len-1 of each window and is scored
 * on predicting ids 1..seq_len; `loss_mask` (same layout, NULL: all scored)
 * says which of those targets count (mask[0] of a window is ignored). The
 * loss is the mean cross-entropy over scored targets.
 *
 *   for each step: grad_accum x wisp_train_micro_step(); wisp_train_optimizer_step();
 *
 * A micro-step adds the gradient of its mean loss to the accumulated
 * gradients; the optimizer step averages them over the micro-steps since the
 * last one (as Hugging Face's Trainer does), clips, updates and clears them. */
wisp_status wisp_train_micro_step(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                                  double *loss, int32_t *n_scored, wisp_error *err);
wisp_status wisp_train_optimizer_step(wisp_ctx *ctx, wisp_train_step_info *info, wisp_error *err);
/* The same loss without dropout, gradients or any change to the state. */
wisp_status wisp_train_eval(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                            double *loss, int32_t *n_scored, wisp_error *err);

/* ---- preference tuning: DPO (cfg.train.objective = WISP_OBJECTIVE_DPO) ----
 * trl's DPOTrainer loss on pairs of answers to one prompt. `tokens` holds
 * n_pairs chosen windows, then n_pairs rejected windows (2 x n_pairs <=
 * micro_batch), laid out and masked as for wisp_train_micro_step: the mask
 * marks the completion's targets. Per sequence, logp = the sum of its scored
 * targets' log-probs (their mean for IPO), under the policy (base + adapter)
 * and the reference (the same base with the adapter left out):
 *   d = (logp_c - ref_c) - (logp_r - ref_r)
 *   sigmoid: -(1 - e) log sigmoid(beta d) - e log sigmoid(-beta d)
 *   ipo:     (d - 1 / (2 beta))^2
 * averaged over the pairs. `ref_logps` ([2 x n_pairs] summed log-probs in the
 * same order, from wisp_train_sequence_logps with the adapter off) may be
 * NULL: the reference is then computed in the call, one more forward pass. */
typedef struct wisp_dpo_result {
    int32_t n_pairs;
    double loss;                 /* mean over the pairs */
    double rewards_chosen;       /* mean of beta (logp_c - ref_c) (trl: rewards/chosen) */
    double rewards_rejected;     /* mean of beta (logp_r - ref_r) (rewards/rejected) */
    double rewards_accuracies;   /* fraction of pairs whose chosen reward exceeds the rejected one */
    double rewards_margins;      /* mean of the chosen minus the rejected reward */
    double logps_chosen, logps_rejected; /* means of the policy's logp (trl: logps/chosen, logps/rejected) */
} wisp_dpo_result;
wisp_status wisp_train_dpo_micro_step(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_pairs,
                                      const double *ref_logps, wisp_dpo_result *out, wisp_error *err);
/* The same without dropout, gradients or any change to the state. */
wisp_status wisp_train_dpo_eval(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_pairs,
                                const double *ref_logps, wisp_dpo_result *out, wisp_error *err);
/* Summed log-probs of each sequence's scored targets (n_seq <= micro_batch),
 * with the trained adapter or without it (the reference); n_scored may be NULL. */
wisp_status wisp_train_sequence_logps(wisp_ctx *ctx, const int32_t *tokens, const uint8_t *loss_mask, int32_t n_seq,
                                      bool with_adapter, double *logps, int32_t *n_scored, wisp_error *err);

/* The trainable adapter as a wisp_lora (F32, PEFT orientation, in the arena;
 * valid for the context's life), and its accumulated gradients in the same
 * form (dA in `a`, dB in `b`; multiplied by the loss scale when act_type is
 * F16). NULL when the context does not train. */
const wisp_lora *wisp_train_lora(const wisp_ctx *ctx);
const wisp_lora *wisp_train_gradients(const wisp_ctx *ctx);
/* Copy A and B from `src` (F32/F16/BF16) into the trainable adapter: each
 * src pair must match a trained (layer, projection) with the same rank;
 * trained pairs that src lacks keep their values. */
wisp_status wisp_train_set_lora(wisp_ctx *ctx, const wisp_lora *src, wisp_error *err);
/* Prompt tuning (cfg.train.virtual_tokens > 0): the learned prompt
 * [n_virtual][dim] F32 (the unscaled embedding space, as PEFT's
 * prompt_embeddings), and its accumulated gradient (times the loss scale
 * with F16 storage). NULL when the context does not prompt-tune.
 * Prefix tuning (also cfg.train.prefix): the rows are PEFT's prefix
 * [n_virtual][n_layers][2][n_kv_heads][head_dim], every layer's key then
 * value at the virtual positions (see wisp_eval_kv_prefix). With PEFT's
 * reparameterization (cfg.train.prefix_projection) the rows are its MLP's
 * output for the current parameters, and the gradient the one reaching them
 * in the last micro-step (the MLP's own is in the optimizer's care). */
const float *wisp_train_prompt(const wisp_ctx *ctx, int32_t *n_virtual);
const float *wisp_train_prompt_gradient(const wisp_ctx *ctx);
/* Set the prompt: `rows` [n_virtual][dim] F32 (a saved adapter); or, with
 * rows NULL, PEFT's TEXT init: the embedding rows of `ids` [n_ids], repeated
 * and truncated to n_virtual (prompt tuning only). */
wisp_status wisp_train_set_prompt(wisp_ctx *ctx, const float *rows, const int32_t *ids, int32_t n_ids,
                                  wisp_error *err);
/* The factor wisp_train_gradients() carries: the dynamic loss scale with
 * F16 storage, 1 otherwise. */
float wisp_train_loss_scale(const wisp_ctx *ctx);
/* Optimizer steps done. */
int64_t wisp_train_steps(const wisp_ctx *ctx);
/* The learning rate of optimizer step `step` (0-based) under config `c`. */
float wisp_train_lr_at(const wisp_train_config *c, int64_t step);

/* Training state (adapter, optimizer moments, step counters, loss scale;
 * the dropout stream follows from the seed and counters) as bytes, between
 * optimizer steps. Loading it into a context planned with the same shapes
 * continues bit-identically. The caller adds its own data cursor. */
size_t wisp_train_state_bytes(const wisp_ctx *ctx);
wisp_status wisp_train_state_save(const wisp_ctx *ctx, wisp_sink *sink, wisp_error *err);
/* Reads one state from `bytes` and reports the bytes it used. */
wisp_status wisp_train_state_load(wisp_ctx *ctx, const void *bytes, size_t n, size_t *used, wisp_error *err);

#endif
