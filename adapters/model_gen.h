/* Random-weight models at the shapes of real checkpoints, written as GGUF
 * files that wisp and llama.cpp both load. Trained checkpoints of these sizes
 * cannot be brought onto every machine, and for speed work only the shapes
 * and tensor types matter, so benchmarks make their own.
 *
 * Weights are drawn from an approximately normal distribution (std 0.02,
 * norms around 1) so activations stay finite through every layer, then
 * quantized with core's reference quantizers. Every row has its own random
 * stream (seeded by the seed, the tensor and the row), so the file is the
 * same whatever the thread count. Memory: the caller provides
 * wisp_model_gen_scratch_bytes() of scratch; nothing else is needed. */
#ifndef WISP_MODEL_GEN_H
#define WISP_MODEL_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "gguf.h"
#include "quantize_model.h"
#include "sink.h"
#include "status.h"

/* The shape of a published model. */
typedef struct wisp_model_shape {
    const char *name;     /* "smollm2-135m" */
    const char *label;    /* "SmolLM2-135M" */
    const char *arch;     /* GGUF general.architecture: a row of core/arch.c */
    int32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, n_vocab, ctx_len;
    float rope_base, rms_eps;
    bool tied_output;     /* the output projection reuses the token embedding */
    bool qkv_bias;        /* q/k/v projections carry biases (qwen2; optional for llama) */
    int32_t head_dim;     /* attention.key_length when not dim / n_heads (0: dim / n_heads) */
    int32_t window;       /* attention.sliding_window (0: none) */
    float rope_base_swa;  /* rope.freq_base_swa of windowed layers (0: not written) */
    float attn_softcap, final_softcap; /* gemma2's soft-caps (0: not written) */
    bool rope_freqs;      /* a rope_freqs.weight tensor (Llama 3.x) */
} wisp_model_shape;

/* The known shapes, NULL-terminated by a zero entry; lookup by name
 * (case-insensitive) returns NULL when unknown. */
const wisp_model_shape *wisp_model_shapes(int *count);
const wisp_model_shape *wisp_model_shape_find(const char *name);

typedef struct wisp_model_gen {
    const wisp_model_shape *shape;
    wisp_qtarget target;  /* a weight type or a mix such as q4_k_m (quantize_model.h); not "keep" */
    uint64_t seed;
    const char *name;     /* general.name */
    /* Vocabulary: the embedding and output get n_vocab rows; write_vocab
     * writes exactly vocab_kv metadata pairs (tokenizer.*). */
    int32_t n_vocab;
    uint64_t vocab_kv;
    wisp_status (*write_vocab)(void *user, wisp_sink *s, wisp_error *err);
    void *vocab_user;
    wisp_threads threads;
    /* Called after each chunk of tensor data with bytes of tensor data
     * written so far and the total; may be NULL. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
} wisp_model_gen;

/* Scratch bytes wisp_model_gen_write needs for this configuration. */
size_t wisp_model_gen_scratch_bytes(const wisp_model_gen *g);

/* Tensors whose type fell back because their row length is not a multiple
 * of the chosen type's block (as llama.cpp's quantizer does), e.g. Q4_K on
 * 576-wide rows becomes Q5_0. */
int32_t wisp_model_gen_fallbacks(const wisp_model_gen *g);

/* The whole GGUF to `sink`. */
wisp_status wisp_model_gen_write(const wisp_model_gen *g, wisp_sink *sink, void *scratch, size_t scratch_bytes,
                                 wisp_error *err);

/* A synthetic SentencePiece-style vocabulary of n tokens (<unk>, <s>, </s>,
 * the 256 byte tokens, then made-up word pieces), for when no real tokenizer
 * is given. Writes wisp_synthetic_vocab_kv pairs. `user` points to an
 * int32_t holding n. */
#define WISP_SYNTHETIC_VOCAB_KV 7
wisp_status wisp_synthetic_vocab_write(void *user, wisp_sink *s, wisp_error *err);

/* The vocabulary of another GGUF (e.g. a llama.cpp vocab-only file): its
 * tokenizer.* pairs, counted and copied. `user` points to the wisp_gguf. */
uint64_t wisp_gguf_vocab_kv_count(const wisp_gguf *g);
wisp_status wisp_gguf_vocab_copy_write(void *user, wisp_sink *s, wisp_error *err);

#endif
