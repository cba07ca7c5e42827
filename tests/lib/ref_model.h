/* A float64 reference of the whole forward pass of every family of the
 * architecture table (llama with RoPE factors, qwen2/3, gemma2/3, phi3) with LoRA, for
 * tests: weights are dequantized once into doubles (so quantized bases are
 * evaluated exactly, without the 8-bit activations of the fast path), and
 * every operation is the textbook formula. Tests compare the engine's logits
 * against it and take finite differences of its loss to check gradients. */
#ifndef WISP_TEST_REF_MODEL_H
#define WISP_TEST_REF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* One LoRA pair in doubles: y += scale * B (A x), A [rank][n_in], B [n_out][rank].
 * DoRA (m not NULL): the projection's output before its bias becomes
 * (m / n) (W x + scale B A x), n[o] = ||W_o + scale B_o A||; with `norm`
 * set, n is taken from it (held constant, as PEFT's detached norm), else
 * computed from the current A and B. ref_lora_free frees m; norm is not owned. */
typedef struct ref_lora {
    int32_t layer, proj, rank, n_in, n_out;
    double *a, *b;
    double scale;
    double *m;
    const double *norm;
} ref_lora;

typedef struct ref_model {
    wisp_hparams hp;
    double *embd;                         /* [n_vocab][dim] */
    double *out;                          /* [n_vocab][dim] */
    double *out_norm;                     /* [dim] */
    double *attn_norm, *ffn_norm;         /* [n_layers][dim] */
    double *w[WISP_PROJ_COUNT];           /* [n_layers][rows][cols] */
    double *bq, *bk, *bv;                 /* [n_layers][..] or NULL */
    const wisp_model *model;              /* the family's vectors (q/k and post norms, RoPE factors) are read here */
    int32_t n_ctx;                        /* the context the engine planned (LongRoPE picks its factors by it) */
    ref_lora *lora;                       /* adapters in use (not owned) */
    int32_t n_lora;
    /* LoRA dropout: input i of token t of (layer, proj) enters A scaled by
     * keep_scale when keep() says so, else as 0 (keep NULL: no dropout) */
    bool (*keep)(void *user, int32_t layer, int32_t proj, int32_t t, int32_t i);
    void *keep_user;
    double keep_scale;
    /* prompt tuning: n_prompt rows [n_prompt][dim] (the embedding's unscaled
     * space) before every input, at positions 0..n_prompt-1; outputs are
     * only the tokens' (0: none) */
    const double *prompt;
    int32_t n_prompt;
    /* prefix tuning: n_prefix positions [n_prefix][n_layers][2][n_kv_heads][head_dim]
     * (PEFT's past_key_values) of keys and values every layer attends to
     * first; the tokens sit at positions n_prefix.. (0: none) */
    const double *prefix;
    int32_t n_prefix;
} ref_model;

/* Dequantize every weight of `m` (malloc'd; false if out of memory). */
bool ref_model_load(ref_model *r, const wisp_model *m);
void ref_model_free(ref_model *r);

/* Logits [n][n_vocab] for tokens[0..n) (malloc'd by the caller). */
void ref_forward(const ref_model *r, const int32_t *tokens, int32_t n, double *logits);

/* Final hidden states [n][dim] (after the output norm, before the output projection). */
void ref_hidden(const ref_model *r, const int32_t *tokens, int32_t n, double *hidden);

/* Mean cross-entropy of tokens[1..n) given the ones before; positions j with
 * mask[j] == 0 are not scored (mask may be NULL). Returns NaN if none is. */
double ref_loss(const ref_model *r, const int32_t *tokens, int32_t n, const uint8_t *mask);
/* The engine's batch loss: the mean over every scored target of n_seq
 * sequences of seq + 1 tokens each (mask: n_seq rows of seq + 1, or NULL). */
double ref_batch_loss(const ref_model *r, const int32_t *tok, const uint8_t *mask, int32_t n_seq, int32_t seq);

/* A random LoRA pair (uniform in [-amp, amp]) for (layer, proj) of `hp`. */
ref_lora ref_lora_random(const wisp_hparams *hp, int32_t layer, int32_t proj, int32_t rank, double scale, double amp,
                         uint64_t *rng);
void ref_lora_free(ref_lora *l);

/* norm[o] = ||W_o + scale B_o A|| of pair l on r's dequantized base weights. */
void ref_dora_norms(const ref_model *r, const ref_lora *l, double *norm);

/* n_in / n_out of projection `proj` of a model with these hyperparameters. */
void ref_proj_shape(const wisp_hparams *hp, int32_t proj, int32_t *n_in, int32_t *n_out);

/* Deterministic uniform in [0, 1) (xorshift-style) for test data. */
double ref_uniform(uint64_t *state);

#endif
