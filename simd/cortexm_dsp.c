/* Cortex-M DSP-extension kernels (see cortexm_dsp.h). On any other target
 * this file only defines the accessor, which returns NULL. */
#include "cortexm_dsp.h"

#if defined(__ARM_FEATURE_DSP)

#include <arm_acle.h>
#include <string.h>

#include "quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK WISP_QK

/* Unaligned word load: quant blocks are 34 or 18 bytes, so their level
 * bytes sit at any offset; ARMv7-M LDR handles that in hardware. */
static inline uint32_t load_word(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Two int16 lanes from bytes 0 and 2 of a word, and from bytes 1 and 3.
 * SXTB16 has a rotate field for the second; gcc 12 has no __ror and does not
 * fold a separate rotate into it, so that form is written out. */
static inline int32_t even_lanes(uint32_t w) { return __sxtb16((int32_t)w); }
static inline int32_t odd_lanes(uint32_t w) {
    int32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(w));
    return r;
}

/* fp16 <-> float. Every M-profile FPU (FPv4-SP of the Cortex-M4F, FPv5 of
 * the M7 and M33) has the half-precision conversions, although gcc does not
 * say so in __ARM_FP: one VCVTB converts exactly as core's bit-twiddling
 * does, rounding to nearest even (the FPSCR default; kernel_check.c compares
 * every half and a sweep of floats, NaNs and infinities included). */
#if defined(__ARM_FP) && __ARM_ARCH_PROFILE == 'M'
#define HAVE_VCVT_F16 1
static inline float half_to_float(uint16_t h) {
    float f;
    __asm__("vmov %0, %1\n\tvcvtb.f32.f16 %0, %0" : "=t"(f) : "r"((uint32_t)h));
    return f;
}
static inline uint16_t float_to_half(float f) {
    uint32_t r;
    float t;
    __asm__("vcvtb.f16.f32 %1, %2\n\tvmov %0, %1" : "=r"(r), "=&t"(t) : "t"(f));
    return (uint16_t)r; /* VCVTB writes the low half; the high half is whatever was there */
}
#else
#define HAVE_VCVT_F16 0
static inline float half_to_float(uint16_t h) { return wisp_f16_to_f32(h); }
#endif

/* Block scales are fp16. */
static inline float scale_f16(const uint8_t *p) { return half_to_float(wisp_load_u16(p)); }

/* Four products of int8 words `w` and `x`, added to acc: two SMLADs. The
 * largest block sum, 32 x 128 x 128, is far from int32 overflow. */
static inline int32_t mac4(int32_t acc, uint32_t w, int32_t x_even, int32_t x_odd) {
    acc = __smlad(even_lanes(w), x_even, acc);
    return __smlad(odd_lanes(w), x_odd, acc);
}

/* Q4_0 nibbles of a word as signed bytes (level - 8): low nibbles are
 * elements j..j+3 of the block, high nibbles elements j+16..j+19. SSUB8
 * subtracts per byte, so no borrow crosses into the next element. */
static inline uint32_t q4_low(uint32_t w) { return (uint32_t)__ssub8((int32_t)(w & 0x0f0f0f0fu), 0x08080808); }
static inline uint32_t q4_high(uint32_t w) { return (uint32_t)__ssub8((int32_t)((w >> 4) & 0x0f0f0f0fu), 0x08080808); }

int32_t wisp_cortexm_isum_q8_0(const void *w_qs, const void *x_qs) {
    const uint8_t *w = w_qs, *x = x_qs;
    int32_t acc = 0;
    for (int j = 0; j < QK; j += 4) {
        uint32_t xv = load_word(x + j);
        acc = mac4(acc, load_word(w + j), even_lanes(xv), odd_lanes(xv));
    }
    return acc;
}

int32_t wisp_cortexm_isum_q4_0(const void *w_qs, const void *x_qs) {
    const uint8_t *w = w_qs, *x = x_qs;
    int32_t acc = 0;
    for (int j = 0; j < QK / 2; j += 4) {
        uint32_t wv = load_word(w + j), lo = load_word(x + j), hi = load_word(x + QK / 2 + j);
        acc = mac4(acc, q4_low(wv), even_lanes(lo), odd_lanes(lo));
        acc = mac4(acc, q4_high(wv), even_lanes(hi), odd_lanes(hi));
    }
    return acc;
}

/* Per block, the reference adds (d_w * d_x) * isum to a float total, block
 * after block; doing exactly that (compiled without contraction) keeps every
 * output bit-identical. */
static inline float block_term(const uint8_t *w_block, float d_x, int32_t isum) {
    const float dd = scale_f16(w_block) * d_x;
    return dd * (float)isum;
}

/* Two weight rows share the widened activation words (the CMSIS-NN
 * vec-mat trick): each activation word is loaded and unpacked once. These
 * give the exact integer sums of one block of each row. */
static inline void pair_isum_q8_0(const uint8_t *w0, const uint8_t *w1, const uint8_t *x, int32_t *i0, int32_t *i1) {
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < QK; j += 4) {
        uint32_t xv = load_word(x + j);
        int32_t xe = even_lanes(xv), xo = odd_lanes(xv);
        s0 = mac4(s0, load_word(w0 + j), xe, xo);
        s1 = mac4(s1, load_word(w1 + j), xe, xo);
    }
    *i0 = s0;
    *i1 = s1;
}

static inline void pair_isum_q4_0(const uint8_t *w0, const uint8_t *w1, const uint8_t *x, int32_t *i0, int32_t *i1) {
    int32_t s0 = 0, s1 = 0;
    for (int j = 0; j < QK / 2; j += 4) {
        uint32_t lo = load_word(x + j), hi = load_word(x + QK / 2 + j);
        int32_t lo_even = even_lanes(lo), lo_odd = odd_lanes(lo), hi_even = even_lanes(hi), hi_odd = odd_lanes(hi);
        uint32_t v0 = load_word(w0 + j), v1 = load_word(w1 + j);
        s0 = mac4(mac4(s0, q4_low(v0), lo_even, lo_odd), q4_high(v0), hi_even, hi_odd);
        s1 = mac4(mac4(s1, q4_low(v1), lo_even, lo_odd), q4_high(v1), hi_even, hi_odd);
    }
    *i0 = s0;
    *i1 = s1;
}

typedef void (*pair_isum_fn)(const uint8_t *w0, const uint8_t *w1, const uint8_t *x, int32_t *i0, int32_t *i1);
typedef int32_t (*isum_fn)(const void *w_qs, const void *x_qs);

/* Rows of blocks (`w_bytes` each, levels after a 2-byte scale) against Q8_0
 * activation rows, two rows at a time and the odd row alone. Always inlined
 * into each type's entry, so the block functions are direct calls, inlined. */
static inline __attribute__((always_inline)) void matmul_blocks(const wisp_matmul_args *a, int64_t r0, int64_t r1,
                                                                int w_bytes, pair_isum_fn pair, isum_fn one) {
    const int32_t nb = (int32_t)(a->n_in / QK);
    for (int64_t t = 0; t < a->n_tok; t++) {
        const uint8_t *x_row = a->x + (size_t)t * a->x_row_bytes;
        float *y = a->y + t * a->ldy;
        int64_t r = r0;
        for (; r + 2 <= r1; r += 2) {
            const uint8_t *w0 = a->w + (size_t)r * a->w_row_bytes, *w1 = w0 + a->w_row_bytes, *x = x_row;
            float s0 = 0.0f, s1 = 0.0f;
            for (int32_t b = 0; b < nb; b++, w0 += w_bytes, w1 += w_bytes, x += WISP_Q8_0_BYTES) {
                int32_t i0, i1;
                pair(w0 + 2, w1 + 2, x + 2, &i0, &i1);
                const float dx = scale_f16(x);
                const float t0 = block_term(w0, dx, i0), t1 = block_term(w1, dx, i1);
                s0 += t0;
                s1 += t1;
            }
            y[r] = s0;
            y[r + 1] = s1;
        }
        if (r < r1) {
            const uint8_t *w = a->w + (size_t)r * a->w_row_bytes, *x = x_row;
            float s = 0.0f;
            for (int32_t b = 0; b < nb; b++, w += w_bytes, x += WISP_Q8_0_BYTES) {
                const float t1 = block_term(w, scale_f16(x), one(w + 2, x + 2));
                s += t1;
            }
            y[r] = s;
        }
    }
}

static void matmul_q8_0(const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    matmul_blocks(a, r0, r1, WISP_Q8_0_BYTES, pair_isum_q8_0, wisp_cortexm_isum_q8_0);
}

static void matmul_q4_0(const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    matmul_blocks(a, r0, r1, WISP_Q4_0_BYTES, pair_isum_q4_0, wisp_cortexm_isum_q4_0);
}

#if HAVE_VCVT_F16
/* ---- fp16 with the FPU's converter (the KV cache, F16 weights) ------------- */
/* The same operations in the same order as core/kernels_ref.c and
 * core/types.c, so results are bit-identical; only the conversion is faster. */

static float dot_f16_f32(const uint16_t *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float p = half_to_float(a[i]) * b[i];
        s += p;
    }
    return s;
}

static void axpy_f16(float *y, float a, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float p = a * half_to_float(x[i]);
        y[i] += p;
    }
}

static void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = float_to_half(x[i]);
}

static void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = half_to_float(x[i]);
}

/* Attention over a block of cached rows: each F16 row as dot_f16_f32 /
 * axpy_f16 above; F32 caches need no conversion and take the reference. */
static void attn_scores(float *s, const void *keys, size_t stride, int kv_f16, int64_t n, const float *q, int64_t hd,
                        float scale) {
    if (!kv_f16) {
        wisp_kernels_reference()->attn_scores(s, keys, stride, kv_f16, n, q, hd, scale);
        return;
    }
    const uint8_t *k = keys;
    for (int64_t j = 0; j < n; j++, k += stride) {
        const float d = dot_f16_f32((const uint16_t *)(const void *)k, q, hd);
        s[j] = d * scale;
    }
}

static void attn_values(float *o, const float *w, const void *values, size_t stride, int kv_f16, int64_t n,
                        int64_t hd) {
    if (!kv_f16) {
        wisp_kernels_reference()->attn_values(o, w, values, stride, kv_f16, n, hd);
        return;
    }
    const uint8_t *v = values;
    for (int64_t j = 0; j < n; j++, v += stride) axpy_f16(o, w[j], (const uint16_t *)(const void *)v, hd);
}

/* F16 weights against float activations: products summed 32 at a time into
 * a partial sum that is added to the total, as wisp_dot_f16_f32 defines. */
static float row_f16(const uint8_t *w, const float *x, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i += 32) {
        const int64_t end = n - i < 32 ? n : i + 32;
        float part = 0.0f;
        for (int64_t j = i; j < end; j++) {
            const float p = half_to_float(wisp_load_u16(w + 2 * j)) * x[j];
            part += p;
        }
        sum += part;
    }
    return sum;
}

static void matmul_f16(const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < a->n_tok; t++) {
        const float *x = (const float *)(const void *)(a->x + (size_t)t * a->x_row_bytes);
        float *y = a->y + t * a->ldy;
        for (int64_t r = r0; r < r1; r++) y[r] = row_f16(a->w + (size_t)r * a->w_row_bytes, x, a->n_in);
    }
}
#endif

/* Entries left NULL fall back to the reference when the engine completes
 * the table (wisp_exec_setup). */
static const wisp_kernels table = {
    .name = "cortexm-dsp",
#if HAVE_VCVT_F16
    .matmul = {[WISP_TYPE_Q8_0] = matmul_q8_0, [WISP_TYPE_Q4_0] = matmul_q4_0, [WISP_TYPE_F16] = matmul_f16},
    .dot_f16_f32 = dot_f16_f32,
    .axpy_f16 = axpy_f16,
    .f32_to_f16 = f32_to_f16,
    .f16_to_f32 = f16_to_f32,
    .attn_scores = attn_scores,
    .attn_values = attn_values,
#else
    .matmul = {[WISP_TYPE_Q8_0] = matmul_q8_0, [WISP_TYPE_Q4_0] = matmul_q4_0},
#endif
};

const wisp_kernels *wisp_kernels_cortexm_dsp(void) { return &table; }

#else

const wisp_kernels *wisp_kernels_cortexm_dsp(void) { return 0; }

#endif
