/* The hot kernels, behind one table of function pointers. core/ ships the
 * scalar reference table (kernels_ref.c), which defines every answer;
 * simd/ builds faster tables for each instruction set and is tested against
 * it. A platform picks a table once at init and passes it in the config.
 *
 * Work splitting: the forward pass cuts work into (ith, nth) ranges and hands
 * them to the caller's thread pool; kernels themselves never start threads.
 * Every output element is produced by exactly one call with the same
 * arithmetic whatever the split, so results do not depend on thread count. */
#ifndef WISP_KERNELS_H
#define WISP_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* A matrix product over a batch of activation rows:
 *   y[t * ldy + r] = dot(W row r, X row t)   for r in [r0, r1), t in [0, n_tok)
 * W rows are `w_row_bytes` apart in type `w_type`; X rows are already in the
 * weight type's activation type (types.h) and `x_row_bytes` apart. */
typedef struct wisp_matmul_args {
    const uint8_t *w;
    size_t w_row_bytes;
    int32_t w_type;
    int64_t n_in;
    const uint8_t *x;
    size_t x_row_bytes;
    int64_t n_tok;
    float *y;
    int64_t ldy;
} wisp_matmul_args;

typedef void (*wisp_matmul_fn)(const wisp_matmul_args *a, int64_t r0, int64_t r1);

/* A tile of a frozen weight dequantized transposed, for the backward pass's
 * dX = W^T dY (core/matmul_t.c multiplies such tiles with the F32 matmul,
 * so a weight is never dequantized whole):
 *   out[(c - c0) * ld + (r - r0)] = W[r][c]   for r in [r0, r1), c in [c0, c1)
 * with W rows `row_bytes` apart in type `type`; c0 is a multiple of the
 * type's block length and c1 one too or the row length. */
typedef void (*wisp_dequant_t_fn)(const uint8_t *w, size_t row_bytes, int32_t type, int64_t r0, int64_t r1, int64_t c0,
                                  int64_t c1, float *out, int64_t ld);

/* A weight type that a level multiplies faster from its own layout, made
 * once at init into planned arena memory (core/packed_weights.c): the
 * weights of a row group side by side, as the level's vectors take them.
 * The original stays where it lies and serves everything else (the
 * backward pass, merging, levels without packing), except the rows of a
 * token embedding the output is tied to (unpack_block below). */
typedef struct wisp_packing {
    /* Bytes of the packed form of a rows x cols weight; 0 leaves that shape in place. */
    size_t (*bytes)(int64_t rows, int64_t cols);
    /* Pack row groups [g0, g1) (group g: rows 16g..16g+15) of `src`, rows `row_bytes` apart. */
    void (*pack)(uint8_t *dst, const uint8_t *src, size_t row_bytes, int64_t rows, int64_t cols, int64_t g0,
                 int64_t g1);
    /* The product with a->w the packed form (a->w_row_bytes unused): the
     * same bits as the reference over the original, for any [r0, r1). */
    wisp_matmul_fn matmul;
    /* Row r's block b (the type's block length of columns) of the packed
     * form, back in the original's bytes: the token embedding, when the
     * output is tied to it, reads its rows here, and the file's pages of the
     * matrix stay released. */
    void (*unpack_block)(const uint8_t *packed, int64_t cols, int64_t r, int64_t b, uint8_t *out);
} wisp_packing;

#define WISP_PACK_GROUP 16 /* rows per packed group */

typedef struct wisp_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "neon", "neon-dotprod", "wasm-simd128", ... */

    /* Per weight type; NULL means "use the reference". */
    wisp_matmul_fn matmul[WISP_TYPE_COUNT];
    /* Per weight type, a packed layout; .bytes NULL means none (the reference has none). */
    wisp_packing packing[WISP_TYPE_COUNT];
    /* Per weight type, transposed tile dequantization (backward pass); NULL means reference. */
    wisp_dequant_t_fn dequant_t[WISP_TYPE_COUNT];
    /* float row -> activation type (Q8_0, Q8_1, Q8_K); NULL means reference. */
    void (*quantize_row[WISP_TYPE_COUNT])(const float *x, void *y, int64_t n);

    /* Float vector primitives (attention, norms, LoRA, training). */
    float (*dot_f32)(const float *a, const float *b, int64_t n);
    float (*dot_f16_f32)(const uint16_t *a, const float *b, int64_t n);
    void (*axpy_f32)(float *y, float a, const float *x, int64_t n);   /* y += a x */
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n); /* y += a x */
    void (*scale_f32)(float *y, float a, int64_t n);                   /* y *= a */
    /* y = x / rms(x) * w, with rms over n and eps inside the root */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* g = silu(g) * u */
    void (*silu_mul)(float *g, const float *u, int64_t n);
    void (*f32_to_f16)(const float *x, uint16_t *y, int64_t n);
    void (*f16_to_f32)(const uint16_t *x, float *y, int64_t n);
    void (*bf16_to_f32)(const uint16_t *x, float *y, int64_t n);

    /* Attention's inner loops over a block of n cached rows (keys or
     * values) of hd elements, `stride` bytes apart, F16 when kv_f16 else
     * F32 (core/attention.c):
     *   attn_scores: s[j] = dot(key j, q) * scale, each dot within the
     *                tolerance of dot_f16_f32 / dot_f32;
     *   attn_values: o += w[j] * (value j) for j = 0..n-1 in that order,
     *                each step as axpy_f16 / axpy_f32 computes it. */
    void (*attn_scores)(float *s, const void *keys, size_t stride, int kv_f16, int64_t n, const float *q, int64_t hd,
                        float scale);
    void (*attn_values)(float *o, const float *w, const void *values, size_t stride, int kv_f16, int64_t n,
                        int64_t hd);
    /* Attention's online softmax over a block of n scores:
     *   max_f32:     the largest of x[0..n-1], NaNs skipped; -inf when none;
     *   softmax_exp: s[j] = e^(s[j] - m), each added to *sum (in double). */
    float (*max_f32)(const float *x, int64_t n);
    void (*softmax_exp)(float *s, int64_t n, float m, double *sum);
    /* attn_scores and attn_values for the n_q query heads of one kv head at
     * once, over an F16 cache, so each key and value is converted once:
     *   attn_scores_heads: s[h ld_s + j] as attn_scores gives for query
     *                      q + h ld_q, within the same bound;
     *   attn_values_heads: o + h ld_o as attn_values leaves it with weights
     *                      w + h ld_w, bit for bit. */
    void (*attn_scores_heads)(float *s, int64_t ld_s, const uint16_t *keys, size_t stride, int64_t n, const float *q,
                              int64_t ld_q, int64_t n_q, int64_t hd, float scale);
    void (*attn_values_heads)(float *o, int64_t ld_o, const float *w, int64_t ld_w, const uint16_t *values, size_t stride,
                              int64_t n, int64_t n_q, int64_t hd);

    /* Halves have no hardware conversion here (WebAssembly, armv7), so
     * attention converts each block of an F16 cache once for all the query
     * heads of a kv head, into planned scratch (core/attention.h). */
    bool convert_kv_once;
    /* The two *_heads kernels are this level's own (not the reference's
     * loops), so attention scores a kv head's query heads together. */
    bool attn_heads_fused;
} wisp_kernels;

/* The scalar reference table (all entries filled). */
const wisp_kernels *wisp_kernels_reference(void);

/* Fill NULL entries of `k` from the reference so callers never test for NULL. */
void wisp_kernels_complete(wisp_kernels *k);

/* Reference matmul used for any type (loops over the type's `dot`). */
void wisp_matmul_reference(const wisp_matmul_args *a, int64_t r0, int64_t r1);
/* Reference transposed tile dequantization for any type (core/dequant_t_ref.c). */
void wisp_dequant_t_reference(const uint8_t *w, size_t row_bytes, int32_t type, int64_t r0, int64_t r1, int64_t c0,
                              int64_t c1, float *out, int64_t ld);

#endif
