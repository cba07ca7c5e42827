/* One row per GGML type id: name, block geometry, activation type and the
 * reference kernels. Ids GGML has retired keep their row (old files can
 * still be sized and named); ids GGML never used have none.
 *
 * Dot products define the answer every SIMD kernel is checked against:
 *  - F32/F16/BF16 weights dot an F32 activation row: products are summed in
 *    float, in order, 32 at a time, and each group of 32 is added to the
 *    running float total (a fixed, simple order; a fast path may reassociate
 *    and must agree within a tolerance).
 *  - Quantized weights dot an activation row quantized to their act_type
 *    (Q8_0, Q8_1 or Q8_K): an exact int32 sum per block, then one float term
 *    per block added in order; see quant_legacy.c and quant_k.c. */
#include "quant.h"
#include "types.h"

#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ---- F32 / F16 / BF16 --------------------------------------------------------- */

void wisp_dequantize_f32(const void *src, float *dst, int64_t n) {
    memmove(dst, src, (size_t)n * sizeof(float));
}

void wisp_quantize_f32(const float *src, void *dst, int64_t n) {
    memmove(dst, src, (size_t)n * sizeof(float));
}

void wisp_dequantize_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = wisp_f16_to_f32(wisp_load_u16(p + 2 * i));
}

void wisp_quantize_f16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) wisp_store_u16(p + 2 * i, wisp_f32_to_f16(src[i]));
}

void wisp_dequantize_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = wisp_bf16_to_f32(wisp_load_u16(p + 2 * i));
}

void wisp_quantize_bf16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) wisp_store_u16(p + 2 * i, wisp_f32_to_bf16(src[i]));
}

#define DOT_GROUP 32

float wisp_dot_f32_f32(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i += DOT_GROUP) {
        const int64_t end = n - i < DOT_GROUP ? n : i + DOT_GROUP;
        float part = 0.0f;
        for (int64_t j = i; j < end; j++) {
            const float p = wisp_load_f32(x + 4 * j) * wisp_load_f32(y + 4 * j);
            part += p;
        }
        sum += part;
    }
    return sum;
}

float wisp_dot_f16_f32(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i += DOT_GROUP) {
        const int64_t end = n - i < DOT_GROUP ? n : i + DOT_GROUP;
        float part = 0.0f;
        for (int64_t j = i; j < end; j++) {
            const float p = wisp_f16_to_f32(wisp_load_u16(x + 2 * j)) * wisp_load_f32(y + 4 * j);
            part += p;
        }
        sum += part;
    }
    return sum;
}

float wisp_dot_bf16_f32(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i += DOT_GROUP) {
        const int64_t end = n - i < DOT_GROUP ? n : i + DOT_GROUP;
        float part = 0.0f;
        for (int64_t j = i; j < end; j++) {
            const float p = wisp_bf16_to_f32(wisp_load_u16(x + 2 * j)) * wisp_load_f32(y + 4 * j);
            part += p;
        }
        sum += part;
    }
    return sum;
}

/* ---- the table -------------------------------------------------------------- */

#define NO_ACT (-1)
#define ROW(id, nm, elems, bytes) [id] = {nm, elems, bytes, NO_ACT, NULL, NULL, NULL}
#define ACT_ROW(id, nm, elems, bytes, t) \
    [id] = {nm, elems, bytes, NO_ACT, wisp_dequantize_##t, wisp_quantize_##t, NULL}
#define WEIGHT_ROW(id, nm, elems, bytes, t, act, dotfn) \
    [id] = {nm, elems, bytes, act, wisp_dequantize_##t, wisp_quantize_##t, dotfn}

/* GGML ids past WISP_TYPE_COUNT (added upstream after types.h was written). */
#define ID_NVFP4 40
#define ID_Q1_0 41
#define ID_Q2_0 42
#define TABLE_SIZE 43

static const wisp_type_info type_table[TABLE_SIZE] = {
    WEIGHT_ROW(WISP_TYPE_F32, "F32", 1, 4, f32, WISP_TYPE_F32, wisp_dot_f32_f32),
    WEIGHT_ROW(WISP_TYPE_F16, "F16", 1, 2, f16, WISP_TYPE_F32, wisp_dot_f16_f32),
    WEIGHT_ROW(WISP_TYPE_Q4_0, "Q4_0", 32, 18, q4_0, WISP_TYPE_Q8_0, wisp_dot_q4_0_q8_0),
    WEIGHT_ROW(WISP_TYPE_Q4_1, "Q4_1", 32, 20, q4_1, WISP_TYPE_Q8_1, wisp_dot_q4_1_q8_1),
    ROW(4, "Q4_2", 16, 10), /* retired before GGUF existed */
    ROW(5, "Q4_3", 16, 12), /* retired before GGUF existed */
    WEIGHT_ROW(WISP_TYPE_Q5_0, "Q5_0", 32, 22, q5_0, WISP_TYPE_Q8_0, wisp_dot_q5_0_q8_0),
    WEIGHT_ROW(WISP_TYPE_Q5_1, "Q5_1", 32, 24, q5_1, WISP_TYPE_Q8_1, wisp_dot_q5_1_q8_1),
    WEIGHT_ROW(WISP_TYPE_Q8_0, "Q8_0", 32, 34, q8_0, WISP_TYPE_Q8_0, wisp_dot_q8_0_q8_0),
    ACT_ROW(WISP_TYPE_Q8_1, "Q8_1", 32, 36, q8_1),
    WEIGHT_ROW(WISP_TYPE_Q2_K, "Q2_K", 256, 84, q2_K, WISP_TYPE_Q8_K, wisp_dot_q2_K_q8_K),
    WEIGHT_ROW(WISP_TYPE_Q3_K, "Q3_K", 256, 110, q3_K, WISP_TYPE_Q8_K, wisp_dot_q3_K_q8_K),
    WEIGHT_ROW(WISP_TYPE_Q4_K, "Q4_K", 256, 144, q4_K, WISP_TYPE_Q8_K, wisp_dot_q4_K_q8_K),
    WEIGHT_ROW(WISP_TYPE_Q5_K, "Q5_K", 256, 176, q5_K, WISP_TYPE_Q8_K, wisp_dot_q5_K_q8_K),
    WEIGHT_ROW(WISP_TYPE_Q6_K, "Q6_K", 256, 210, q6_K, WISP_TYPE_Q8_K, wisp_dot_q6_K_q8_K),
    ACT_ROW(WISP_TYPE_Q8_K, "Q8_K", 256, 292, q8_K),
    ROW(16, "IQ2_XXS", 256, 66),
    ROW(17, "IQ2_XS", 256, 74),
    ROW(18, "IQ3_XXS", 256, 98),
    ROW(19, "IQ1_S", 256, 50),
    WEIGHT_ROW(WISP_TYPE_IQ4_NL, "IQ4_NL", 32, 18, iq4_nl, WISP_TYPE_Q8_0, wisp_dot_iq4_nl_q8_0),
    ROW(21, "IQ3_S", 256, 110),
    ROW(22, "IQ2_S", 256, 82),
    ROW(23, "IQ4_XS", 256, 136),
    ROW(WISP_TYPE_I8, "I8", 1, 1),
    ROW(WISP_TYPE_I16, "I16", 1, 2),
    ROW(WISP_TYPE_I32, "I32", 1, 4),
    ROW(WISP_TYPE_I64, "I64", 1, 8),
    ROW(WISP_TYPE_F64, "F64", 1, 8),
    ROW(29, "IQ1_M", 256, 56),
    WEIGHT_ROW(WISP_TYPE_BF16, "BF16", 1, 2, bf16, WISP_TYPE_F32, wisp_dot_bf16_f32),
    /* 31..33 and 36..38: row-interleaved repacks of Q4_0 / IQ4_NL, briefly
     * written to GGUF files; same bytes per 32 elements as the originals */
    ROW(31, "Q4_0_4_4", 32, 18),
    ROW(32, "Q4_0_4_8", 32, 18),
    ROW(33, "Q4_0_8_8", 32, 18),
    ROW(34, "TQ1_0", 256, 54),
    ROW(35, "TQ2_0", 256, 66),
    ROW(36, "IQ4_NL_4_4", 32, 18),
    ROW(37, "IQ4_NL_4_8", 32, 18),
    ROW(38, "IQ4_NL_8_8", 32, 18),
    ROW(39, "MXFP4", 32, 17),
    ROW(ID_NVFP4, "NVFP4", 64, 36),
    ROW(ID_Q1_0, "Q1_0", 128, 18),
    ROW(ID_Q2_0, "Q2_0", 64, 18),
};

_Static_assert(TABLE_SIZE >= WISP_TYPE_COUNT, "every wisp_type id needs a row");

const wisp_type_info *wisp_type_info_of(int type) {
    if (type < 0 || type >= TABLE_SIZE) return NULL;
    const wisp_type_info *t = &type_table[type];
    return t->name ? t : NULL;
}

bool wisp_type_is_weight(int type) {
    const wisp_type_info *t = wisp_type_info_of(type);
    return t && t->dequantize && t->dot;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

int wisp_type_from_name(const char *name) {
    if (!name) return -1;
    for (int id = 0; id < TABLE_SIZE; id++) {
        const char *a = type_table[id].name, *b = name;
        if (!a) continue;
        while (*a && lower((unsigned char)*a) == lower((unsigned char)*b)) a++, b++;
        if (!*a && !*b) return id;
    }
    return -1;
}

/* 0 also for an unknown type, a negative n, or a size that would not fit a
 * size_t (32-bit targets). */
size_t wisp_type_row_bytes(int type, int64_t n) {
    const wisp_type_info *t = wisp_type_info_of(type);
    if (!t || n < 0 || n % t->block_elems != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / t->block_elems);
    if (blocks > (uint64_t)SIZE_MAX / (uint64_t)t->block_bytes) return 0;
    return (size_t)(blocks * (uint64_t)t->block_bytes);
}
