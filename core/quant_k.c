/* The K-quants (256-element super-blocks): dequantization of Q2_K ... Q6_K,
 * the activation type Q8_K, and the dot products of each K-quant with a Q8_K
 * row. Layouts are in quant.h; the weight quantizers are in
 * quant_k_quantize.c.
 *
 * Element e of a super-block (0..255) lives at:
 *   Q2_K: sub-block e/16; bits 2*((e%128)/32) of qs[32*(e/128) + e%32]
 *   Q3_K: sub-block e/16; low 2 bits as Q2_K; bit 2 = bit e/32 of hmask[e%32]
 *         (clear means subtract 4)
 *   Q4_K: sub-block e/32; nibble (e/32)%2 of qs[32*(e/64) + e%32]
 *   Q5_K: as Q4_K; bit 4 = bit e/32 of qh[e%32]
 *   Q6_K: sub-block e/16; low nibble k/2 of ql[64*(e/128) + 32*(k%2) + e%32]
 *         and bits 2k of qh[32*(e/128) + e%32], k = (e%128)/32
 *
 * Dequantization reproduces ggml's float operations one for one, so results
 * are bit-exact (checked against ../shared/golden/dequant). */
#include "quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K WISP_QK_K

/* ---- scale unpacking ------------------------------------------------------- */

/* Q3_K: sixteen 6-bit scales stored with a +32 offset: the low 4 bits of
 * scale j are nibble j/8 of scales[j%8], the high 2 bits are bits
 * 2*(j/4)..+1 of scales[8 + j%4]. */
static void q3_K_scales(const uint8_t *s, int *out) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (lo | (hi << 4)) - 32;
    }
}

/* Q4_K/Q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes. Sub-blocks
 * 0..3 keep theirs in the low 6 bits of bytes 0..3 (scale) and 4..7 (min);
 * sub-blocks 4..7 keep their low 4 bits in the nibbles of bytes 8..11 and
 * their top 2 bits in the spare top bits of bytes 0..7. */
static inline void q4_K_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* ---- dequantize ------------------------------------------------------------ */

void wisp_dequantize_q2_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q2_K_BYTES, dst += QK_K) {
        const uint8_t *sc = b, *qs = b + 16;
        const float d = wisp_load_f16(b + 80), dmin = wisp_load_f16(b + 82);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)(sc[s] & 0x0f);
            const float ml = dmin * (float)(sc[s] >> 4);
            const uint8_t *q = qs + 32 * (s / 8) + 16 * (s % 2);
            const int shift = 2 * ((s / 2) % 4);
            for (int l = 0; l < 16; l++) {
                const float p = dl * (float)((q[l] >> shift) & 3);
                dst[16 * s + l] = p - ml;
            }
        }
    }
}

void wisp_dequantize_q3_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q3_K_BYTES, dst += QK_K) {
        const uint8_t *hmask = b, *qs = b + 32;
        const float d = wisp_load_f16(b + 108);
        int sc[16];
        q3_K_scales(b + 96, sc);
        for (int e = 0; e < QK_K; e++) {
            const float dl = d * (float)sc[e / 16];
            const int low = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int high = (hmask[e % 32] >> (e / 32)) & 1;
            dst[e] = dl * (float)(low - (high ? 0 : 4));
        }
    }
}

void wisp_dequantize_q4_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q4_K_BYTES, dst += QK_K) {
        const float d = wisp_load_f16(b), dmin = wisp_load_f16(b + 2);
        const uint8_t *scales = b + 4, *qs = b + 16;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            q4_K_scale_min(scales, s, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; l++) {
                const float p = dl * (float)((q[l] >> shift) & 0x0f);
                dst[32 * s + l] = p - ml;
            }
        }
    }
}

void wisp_dequantize_q5_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q5_K_BYTES, dst += QK_K) {
        const float d = wisp_load_f16(b), dmin = wisp_load_f16(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *qs = b + 48;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            q4_K_scale_min(scales, s, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            for (int l = 0; l < 32; l++) {
                const int level = ((q[l] >> shift) & 0x0f) + (((qh[l] >> s) & 1) << 4);
                const float p = dl * (float)level;
                dst[32 * s + l] = p - ml;
            }
        }
    }
}

/* 6-bit level (0..63) of element e of a Q6_K super-block. */
static inline int q6_K_level(const uint8_t *ql, const uint8_t *qh, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0f;
    const int high = (qh[32 * h + l] >> (2 * k)) & 3;
    return low | (high << 4);
}

void wisp_dequantize_q6_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q6_K_BYTES, dst += QK_K) {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        const float d = wisp_load_f16(b + 208);
        for (int e = 0; e < QK_K; e++) {
            const float ds = d * (float)sc[e / 16];
            dst[e] = ds * (float)(q6_K_level(ql, qh, e) - 32);
        }
    }
}

void wisp_dequantize_q8_K(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q8_K_BYTES, dst += QK_K) {
        const float d = wisp_load_f32(b);
        const int8_t *qs = (const int8_t *)(b + 4);
        for (int j = 0; j < QK_K; j++) dst[j] = d * (float)qs[j];
    }
}

/* ---- Q8_K: the activation side of every K-quant dot (llama.cpp's scheme) -- */
/* The value of largest magnitude, max, maps to -127 exactly: iscale =
 * -127/max, q = round-half-even(iscale*x) capped to [-127, 127], d = 1/iscale
 * (stored as float, so d is negative when max is positive). bsums hold the
 * level sums of each 16 elements, which the dots use for the min terms. */
void wisp_quantize_q8_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q8_K_BYTES, src += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            const float a = fabsf(src[j]);
            if (a > amax) {
                amax = a;
                max = src[j];
            }
        }
        int8_t qs[QK_K];
        float d = 0.0f;
        if (amax == 0.0f || !(amax <= FLT_MAX)) {
            memset(qs, 0, sizeof qs);
        } else {
            const float iscale = -127.0f / max;
            for (int j = 0; j < QK_K; j++) qs[j] = (int8_t)wisp_round_clamp(iscale * src[j], -127, 127);
            d = 1.0f / iscale;
        }
        wisp_store_f32(b, d);
        memcpy(b + 4, qs, QK_K);
        for (int g = 0; g < QK_K / 16; g++) {
            int16_t s = 0;
            for (int l = 0; l < 16; l++) s = (int16_t)(s + qs[16 * g + l]);
            memcpy(b + 260 + 2 * g, &s, 2);
        }
    }
}

/* ---- dot products with Q8_K ------------------------------------------------ */
/* Per super-block, all in exact int32: isum = sum over sub-blocks of
 * scale * sum(q_w * q_a), and for the types with mins, msum = sum over
 * sub-blocks of min * (sum of the activation levels under it, from bsums).
 * Then one float term per super-block, (d_w*d_a)*isum - (dmin_w*d_a)*msum,
 * is added to a float accumulator super-block after super-block, in order. */

static inline int16_t load_bsum(const uint8_t *y, int g) {
    int16_t v;
    memcpy(&v, y + 260 + 2 * g, 2);
    return v;
}

float wisp_dot_q2_K_q8_K(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++, x += WISP_Q2_K_BYTES, y += WISP_Q8_K_BYTES) {
        const uint8_t *sc = x, *qs = x + 16;
        const int8_t *q8 = (const int8_t *)(y + 4);
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 16; s++) {
            const uint8_t *q = qs + 32 * (s / 8) + 16 * (s % 2);
            const int shift = 2 * ((s / 2) % 4);
            int32_t sub = 0;
            for (int l = 0; l < 16; l++) sub += ((q[l] >> shift) & 3) * q8[16 * s + l];
            isum += (sc[s] & 0x0f) * sub;
            msum += (sc[s] >> 4) * load_bsum(y, s);
        }
        const float dy = wisp_load_f32(y);
        const float dd = wisp_load_f16(x + 80) * dy, dm = wisp_load_f16(x + 82) * dy;
        const float t1 = dd * (float)isum, t2 = dm * (float)msum;
        const float t = t1 - t2;
        sum += t;
    }
    return sum;
}

float wisp_dot_q3_K_q8_K(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++, x += WISP_Q3_K_BYTES, y += WISP_Q8_K_BYTES) {
        const uint8_t *hmask = x, *qs = x + 32;
        const int8_t *q8 = (const int8_t *)(y + 4);
        int sc[16];
        q3_K_scales(x + 96, sc);
        int32_t isum = 0;
        for (int s = 0; s < 16; s++) {
            int32_t sub = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) {
                const int low = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                const int high = (hmask[e % 32] >> (e / 32)) & 1;
                sub += (low - (high ? 0 : 4)) * q8[e];
            }
            isum += sc[s] * sub;
        }
        const float dd = wisp_load_f16(x + 108) * wisp_load_f32(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}

/* Q4_K and Q5_K differ only in the fifth bit (qh == NULL for Q4_K). */
static float dot_q45_K(const uint8_t *x, const uint8_t *y, int64_t nb, int block_bytes, int qh_off, int qs_off) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++, x += block_bytes, y += WISP_Q8_K_BYTES) {
        const uint8_t *scales = x + 4, *qs = x + qs_off;
        const uint8_t *qh = qh_off ? x + qh_off : NULL;
        const int8_t *q8 = (const int8_t *)(y + 4);
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            q4_K_scale_min(scales, s, &sc, &m);
            const uint8_t *q = qs + 32 * (s / 2);
            const int shift = 4 * (s % 2);
            int32_t sub = 0;
            for (int l = 0; l < 32; l++) {
                int level = (q[l] >> shift) & 0x0f;
                if (qh) level += ((qh[l] >> s) & 1) << 4;
                sub += level * q8[32 * s + l];
            }
            isum += sc * sub;
            msum += m * (load_bsum(y, 2 * s) + load_bsum(y, 2 * s + 1));
        }
        const float dy = wisp_load_f32(y);
        const float dd = wisp_load_f16(x) * dy, dm = wisp_load_f16(x + 2) * dy;
        const float t1 = dd * (float)isum, t2 = dm * (float)msum;
        const float t = t1 - t2;
        sum += t;
    }
    return sum;
}

float wisp_dot_q4_K_q8_K(const void *w, const void *act, int64_t n) {
    return dot_q45_K(w, act, n / QK_K, WISP_Q4_K_BYTES, 0, 16);
}

float wisp_dot_q5_K_q8_K(const void *w, const void *act, int64_t n) {
    return dot_q45_K(w, act, n / QK_K, WISP_Q5_K_BYTES, 16, 48);
}

float wisp_dot_q6_K_q8_K(const void *w, const void *act, int64_t n) {
    const uint8_t *x = w, *y = act;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++, x += WISP_Q6_K_BYTES, y += WISP_Q8_K_BYTES) {
        const uint8_t *ql = x, *qh = x + 128;
        const int8_t *sc = (const int8_t *)(x + 192);
        const int8_t *q8 = (const int8_t *)(y + 4);
        int32_t isum = 0;
        for (int s = 0; s < 16; s++) {
            int32_t sub = 0;
            for (int e = 16 * s; e < 16 * s + 16; e++) sub += (q6_K_level(ql, qh, e) - 32) * q8[e];
            isum += sc[s] * sub;
        }
        const float dd = wisp_load_f16(x + 208) * wisp_load_f32(y);
        const float t = dd * (float)isum;
        sum += t;
    }
    return sum;
}
