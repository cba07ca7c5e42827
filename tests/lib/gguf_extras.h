/* Small models made in memory for tests that need a file carrying some
 * metadata key or tensor: a random-weight model of any shape through the
 * generator of `wisp make-model` (adapters/model_gen.c), and a copy of a GGUF
 * with keys and tensors added. */
#ifndef WISP_TEST_GGUF_EXTRAS_H
#define WISP_TEST_GGUF_EXTRAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_gen.h"

/* One addition: a key (vtype WISP_GGUF_U32, F32, BOOL or STRING), or an F32
 * tensor of `len` floats (`values`, or all ones when NULL). */
typedef struct gguf_extra {
    const char *key;
    uint32_t vtype;
    double number;
    const char *str;
    const char *tensor;
    int64_t len;
    const float *values;
} gguf_extra;

#define EXTRA_U32(k, v) (gguf_extra){.key = (k), .vtype = WISP_GGUF_U32, .number = (v)}
#define EXTRA_F32(k, v) (gguf_extra){.key = (k), .vtype = WISP_GGUF_F32, .number = (v)}
#define EXTRA_BOOL(k, v) (gguf_extra){.key = (k), .vtype = WISP_GGUF_BOOL, .number = (v)}
#define EXTRA_STR(k, v) (gguf_extra){.key = (k), .vtype = WISP_GGUF_STRING, .str = (v)}
#define EXTRA_TENSOR(n, l) (gguf_extra){.tensor = (n), .len = (l)}

/* An F32 model of `shape` (seed 3) with a synthetic vocabulary of
 * shape->n_vocab tokens, in a 64-byte aligned buffer for free(); NULL (and
 * err) on failure. */
unsigned char *gguf_tiny_model(const wisp_model_shape *shape, size_t *size, wisp_error *err);

/* `base` (a GGUF of `n` bytes) with the n_extra additions, in a 64-byte
 * aligned buffer for free(); NULL (and err) on failure. */
unsigned char *gguf_with_extras(const unsigned char *base, size_t n, const gguf_extra *x, int n_extra, size_t *size,
                                wisp_error *err);

/* The YaRN test model: `arch` (llama or qwen2, with q/k/v biases when
 * qkv_bias) of dim 128, 2 layers, 4 heads of 32 (2 KV heads), FFN 256, 264
 * tokens, context_length 4096, optional Llama 3 rope_freqs factors; with
 * rope.scaling.type yarn, factor 4, original_context_length 256 (YaRN's ramp
 * over pairs 0..7 of 16) and, when attn_factor > 0, that attn_factor. */
unsigned char *gguf_yarn_model(const char *arch, bool qkv_bias, bool rope_freqs, float attn_factor, size_t *size,
                               wisp_error *err);
/* The same model without the rope.scaling keys. */
unsigned char *gguf_plain_yarn_model(const char *arch, bool qkv_bias, size_t *size, wisp_error *err);

#endif
