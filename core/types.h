/* Tensor element types (wisp_type, numbered as GGML numbers them, is in
 * wisp.h: callers pick kv_type with it) and one row of facts and reference
 * (scalar) code per type. Adding a type means adding a row.
 *
 * The reference functions define the answer: every SIMD kernel in simd/ is
 * tested against them. Dot products follow llama.cpp's scheme: weights stay in
 * their own type and the activation row is first converted to `act_type`
 * (Q8_0, Q8_1 or Q8_K for quantized weights, F32 otherwise), so the inner loop
 * is an integer dot product per block. */
#ifndef WISP_TYPES_H
#define WISP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wisp.h" /* wisp_type */

#define WISP_QK 32   /* block length of the "legacy" quants (Q4_0 ... Q8_1, IQ4_NL) */
#define WISP_QK_K 256 /* super-block length of the K-quants */

typedef void (*wisp_dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*wisp_quantize_fn)(const float *src, void *dst, int64_t n);
typedef float (*wisp_dot_fn)(const void *w, const void *act, int64_t n);

typedef struct wisp_type_info {
    const char *name;      /* "Q4_K", as llama.cpp prints it */
    int32_t block_elems;   /* elements per block (1 for plain types) */
    int32_t block_bytes;   /* bytes per block */
    int32_t act_type;      /* type activations take in `dot` (-1: not a weight type) */
    wisp_dequantize_fn dequantize; /* n multiple of block_elems; NULL if unsupported */
    wisp_quantize_fn quantize;     /* reference quantizer, NULL if none */
    wisp_dot_fn dot;               /* sum over n elements of w[i]*act[i]; NULL if not a weight type */
} wisp_type_info;

/* Facts for any type GGML defines (so unknown-to-wisp types can still be sized
 * and named); NULL only for ids GGML never used. */
const wisp_type_info *wisp_type_info_of(int type);

/* True when wisp can use `type` as a weight (dequantize + dot present). */
bool wisp_type_is_weight(int type);

/* "Q4_K" -> WISP_TYPE_Q4_K, case-insensitive; -1 if unknown. */
int wisp_type_from_name(const char *name);

/* Bytes of a row of n elements, 0 if n is not a multiple of the block. */
size_t wisp_type_row_bytes(int type, int64_t n);

#endif
