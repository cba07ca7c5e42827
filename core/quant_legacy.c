/* The 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the activation
 * type Q8_1, and IQ4_NL. Layouts are in quant.h.
 *
 * Dequantization reproduces ggml's float operations one for one (value =
 * float(q) * d, then + m as a separate rounding), so results are bit-exact.
 * Dot products: see the note in types.c. */
#include "quant.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK WISP_QK

const int8_t wisp_iq4nl_table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

/* ---- dequantize ----------------------------------------------------------- */

void wisp_dequantize_q4_0(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q4_0_BYTES, dst += QK) {
        const float d = wisp_load_f16(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)((qs[j] & 0x0f) - 8) * d;
            dst[j + QK / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

void wisp_dequantize_q4_1(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q4_1_BYTES, dst += QK) {
        const float d = wisp_load_f16(b), m = wisp_load_f16(b + 2);
        const uint8_t *qs = b + 4;
        for (int j = 0; j < QK / 2; j++) {
            float lo = (float)(qs[j] & 0x0f) * d;
            float hi = (float)(qs[j] >> 4) * d;
            dst[j] = lo + m;
            dst[j + QK / 2] = hi + m;
        }
    }
}

/* 5-bit value of element j of a Q5 block: low nibble from qs, bit 4 from qh. */
static inline int q5_level(const uint8_t *qs, uint32_t qh, int j) {
    int nib = j < QK / 2 ? (qs[j] & 0x0f) : (qs[j - QK / 2] >> 4);
    return nib | (int)(((qh >> j) & 1u) << 4);
}

void wisp_dequantize_q5_0(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q5_0_BYTES, dst += QK) {
        const float d = wisp_load_f16(b);
        const uint32_t qh = wisp_load_u32(b + 2);
        for (int j = 0; j < QK; j++) dst[j] = (float)(q5_level(b + 6, qh, j) - 16) * d;
    }
}

void wisp_dequantize_q5_1(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q5_1_BYTES, dst += QK) {
        const float d = wisp_load_f16(b), m = wisp_load_f16(b + 2);
        const uint32_t qh = wisp_load_u32(b + 4);
        for (int j = 0; j < QK; j++) {
            float p = (float)q5_level(b + 8, qh, j) * d;
            dst[j] = p + m;
        }
    }
}

void wisp_dequantize_q8_0(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q8_0_BYTES, dst += QK) {
        const float d = wisp_load_f16(b);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < QK; j++) dst[j] = (float)qs[j] * d;
    }
}

/* The activation values d*q; s only carries their sum (see the dot note). */
void wisp_dequantize_q8_1(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q8_1_BYTES, dst += QK) {
        const float d = wisp_load_f16(b);
        const int8_t *qs = (const int8_t *)(b + 4);
        for (int j = 0; j < QK; j++) dst[j] = (float)qs[j] * d;
    }
}

void wisp_dequantize_iq4_nl(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_IQ4_NL_BYTES, dst += QK) {
        const float d = wisp_load_f16(b);
        const uint8_t *qs = b + 2;
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = d * (float)wisp_iq4nl_table[qs[j] & 0x0f];
            dst[j + QK / 2] = d * (float)wisp_iq4nl_table[qs[j] >> 4];
        }
    }
}

/* ---- quantize: weights --------------------------------------------------- */
/* Each block is fitted by least squares (quant_fit.c); the scale is then
 * rounded to fp16 and the levels re-rounded against the scale actually
 * stored. Measured quantize->dequantize relative RMS error on Gaussian data
 * is in tests/unit/test_quant.c. */

static void pack_nibbles(uint8_t *qs, const int *level) {
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)(level[j] | (level[j + QK / 2] << 4));
}

/* Levels of x for a stored symmetric scale d, offset to be unsigned. */
static void levels_symmetric(const float *x, float d, int qmin, int qmax, int *level) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++) level[j] = wisp_round_clamp(x[j] * id, qmin, qmax) - qmin;
}

static void levels_affine(const float *x, float d, float m, int qmax, int *level) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++) level[j] = wisp_round_clamp((x[j] - m) * id, 0, qmax);
}

void wisp_quantize_q4_0(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q4_0_BYTES, src += QK) {
        int8_t q[QK];
        int level[QK];
        const uint16_t dh = wisp_f16_scale(wisp_fit_symmetric(src, QK, -8, 7, q));
        levels_symmetric(src, wisp_f16_to_f32(dh), -8, 7, level);
        wisp_store_u16(b, dh);
        pack_nibbles(b + 2, level);
    }
}

void wisp_quantize_q4_1(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q4_1_BYTES, src += QK) {
        uint8_t q[QK];
        int level[QK];
        float off;
        const uint16_t dh = wisp_f16_scale(wisp_fit_affine(src, QK, 15, false, q, &off));
        const uint16_t mh = wisp_f16_scale(off);
        levels_affine(src, wisp_f16_to_f32(dh), wisp_f16_to_f32(mh), 15, level);
        wisp_store_u16(b, dh);
        wisp_store_u16(b + 2, mh);
        pack_nibbles(b + 4, level);
    }
}

static uint32_t high_bits(const int *level) {
    uint32_t qh = 0;
    for (int j = 0; j < QK; j++) qh |= (uint32_t)((level[j] >> 4) & 1) << j;
    return qh;
}

static void pack_low_nibbles(uint8_t *qs, const int *level) {
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)((level[j] & 0x0f) | ((level[j + QK / 2] & 0x0f) << 4));
}

void wisp_quantize_q5_0(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q5_0_BYTES, src += QK) {
        int8_t q[QK];
        int level[QK];
        const uint16_t dh = wisp_f16_scale(wisp_fit_symmetric(src, QK, -16, 15, q));
        levels_symmetric(src, wisp_f16_to_f32(dh), -16, 15, level);
        wisp_store_u16(b, dh);
        wisp_store_u32(b + 2, high_bits(level));
        pack_low_nibbles(b + 6, level);
    }
}

void wisp_quantize_q5_1(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q5_1_BYTES, src += QK) {
        uint8_t q[QK];
        int level[QK];
        float off;
        const uint16_t dh = wisp_f16_scale(wisp_fit_affine(src, QK, 31, false, q, &off));
        const uint16_t mh = wisp_f16_scale(off);
        levels_affine(src, wisp_f16_to_f32(dh), wisp_f16_to_f32(mh), 31, level);
        wisp_store_u16(b, dh);
        wisp_store_u16(b + 2, mh);
        wisp_store_u32(b + 4, high_bits(level));
        pack_low_nibbles(b + 8, level);
    }
}

void wisp_quantize_iq4_nl(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_IQ4_NL_BYTES, src += QK) {
        uint8_t q[QK];
        int level[QK];
        const uint16_t dh = wisp_f16_scale(wisp_fit_table(src, QK, wisp_iq4nl_table, q));
        const float d = wisp_f16_to_f32(dh);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK; j++) level[j] = wisp_nearest_in_table(wisp_iq4nl_table, src[j] * id);
        wisp_store_u16(b, dh);
        pack_nibbles(b + 2, level);
    }
}

/* ---- quantize: activations (llama.cpp's scheme) -------------------------- */
/* d = amax/127, q = round(x/d) half away from zero (roundf), d stored as
 * fp16. Used on activation rows before every dot with Q4_0/Q5_0/Q8_0/IQ4_NL
 * (Q8_0) or Q4_1/Q5_1 (Q8_1) weights, and as the Q8_0 weight quantizer, so
 * that wisp's Q8_0 files match llama.cpp's. */

/* Quantize one block to int8; returns the unrounded scale and the level sum. */
static float quantize_block_q8(const float *x, int8_t *qs, int32_t *sum) {
    float amax = 0.0f;
    for (int j = 0; j < QK; j++) {
        float a = fabsf(x[j]);
        if (a > amax) amax = a;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t s = 0;
    for (int j = 0; j < QK; j++) {
        int v = wisp_round_away(x[j] * id);
        if (v > 127) v = 127;
        if (v < -127) v = -127;
        qs[j] = (int8_t)v;
        s += v;
    }
    *sum = s;
    return d;
}

void wisp_quantize_q8_0(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q8_0_BYTES, src += QK) {
        int8_t qs[QK];
        int32_t sum;
        const float d = quantize_block_q8(src, qs, &sum);
        wisp_store_u16(b, wisp_f16_scale(d));
        memcpy(b + 2, qs, QK);
    }
}

void wisp_quantize_q8_1(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK; i++, b += WISP_Q8_1_BYTES, src += QK) {
        int8_t qs[QK];
        int32_t sum;
        const float d = quantize_block_q8(src, qs, &sum);
        wisp_store_u16(b, wisp_f16_scale(d));
        wisp_store_u16(b + 2, wisp_f16_scale((float)sum * d));
        memcpy(b + 4, qs, QK);
    }
}

/* ---- dot products ---------------------------------------------------------- */
/* Per block: an exact int32 sum of level products; then one float term,
 * (d_w * d_a) * isum (the fp16 product is exact in float), added to a float
 * accumulator block after block, in order. */

float wisp_dot_q4_0_q8_0(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_Q4_0_BYTES, y += WISP_Q8_0_BYTES) {
        const uint8_t *qs = x + 2;
        const int8_t *q8 = (const int8_t *)(y + 2);
        int32_t isum = 0;
        for (int j = 0; j < QK / 2; j++)
            isum += ((qs[j] & 0x0f) - 8) * q8[j] + ((qs[j] >> 4) - 8) * q8[j + QK / 2];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}

/* Q4_1/Q5_1: sum_j (d q_j + m) a_j = d*da*sum(q_j qa_j) + m * sum(a_j), where
 * sum(a_j) is the activation block's s field (llama.cpp's scheme). */
float wisp_dot_q4_1_q8_1(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_Q4_1_BYTES, y += WISP_Q8_1_BYTES) {
        const uint8_t *qs = x + 4;
        const int8_t *q8 = (const int8_t *)(y + 4);
        int32_t isum = 0;
        for (int j = 0; j < QK / 2; j++) isum += (qs[j] & 0x0f) * q8[j] + (qs[j] >> 4) * q8[j + QK / 2];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float ms = wisp_load_f16(x + 2) * wisp_load_f16(y + 2);
        const float t1 = dd * (float)isum;
        const float t = t1 + ms;
        sum += t;
    }
    return sum;
}

float wisp_dot_q5_0_q8_0(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_Q5_0_BYTES, y += WISP_Q8_0_BYTES) {
        const uint32_t qh = wisp_load_u32(x + 2);
        const int8_t *q8 = (const int8_t *)(y + 2);
        int32_t isum = 0;
        for (int j = 0; j < QK; j++) isum += (q5_level(x + 6, qh, j) - 16) * q8[j];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}

float wisp_dot_q5_1_q8_1(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_Q5_1_BYTES, y += WISP_Q8_1_BYTES) {
        const uint32_t qh = wisp_load_u32(x + 4);
        const int8_t *q8 = (const int8_t *)(y + 4);
        int32_t isum = 0;
        for (int j = 0; j < QK; j++) isum += q5_level(x + 8, qh, j) * q8[j];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float ms = wisp_load_f16(x + 2) * wisp_load_f16(y + 2);
        const float t1 = dd * (float)isum;
        const float t = t1 + ms;
        sum += t;
    }
    return sum;
}

float wisp_dot_q8_0_q8_0(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_Q8_0_BYTES, y += WISP_Q8_0_BYTES) {
        const int8_t *qx = (const int8_t *)(x + 2), *q8 = (const int8_t *)(y + 2);
        int32_t isum = 0;
        for (int j = 0; j < QK; j++) isum += qx[j] * q8[j];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}

float wisp_dot_iq4_nl_q8_0(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK; i++, x += WISP_IQ4_NL_BYTES, y += WISP_Q8_0_BYTES) {
        const uint8_t *qs = x + 2;
        const int8_t *q8 = (const int8_t *)(y + 2);
        int32_t isum = 0;
        for (int j = 0; j < QK / 2; j++)
            isum += wisp_iq4nl_table[qs[j] & 0x0f] * q8[j] + wisp_iq4nl_table[qs[j] >> 4] * q8[j + QK / 2];
        const float dd = wisp_load_f16(x) * wisp_load_f16(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}
