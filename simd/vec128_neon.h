/* The 128-bit vector vocabulary (see vec128_kernels.inc) for ARM NEON:
 * aarch64 (optionally with the dotprod extension) and 32-bit armv7.
 *
 * Define VEC128_DOTPROD before including to build the SDOT flavour; the
 * including file must then compile for a CPU that has it (neon_dotprod.c
 * does, and is only called when the CPU reports HWCAP_ASIMDDP).
 *
 * armv7 differences handled here: no across-lane adds, no 128-bit pairwise
 * adds, no 16-byte table lookup, no rounding conversions, no vector divide;
 * and its NEON unit always flushes subnormal floats to zero, so float
 * results on armv7 can differ from the reference when an intermediate is
 * below 2^-126. Half-precision conversion instructions are not used on
 * armv7 (gcc only offers them with -mfp16-format=ieee); the integer
 * conversions in vec128_kernels.inc are exact there. */
#ifndef WISP_VEC128_NEON_H
#define WISP_VEC128_NEON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#define VEC128_ALWAYS inline __attribute__((always_inline))

#if defined(__aarch64__)
#define VEC128_TOKENS 4 /* 32 vector registers: 4 rows x 4 tokens fit */
#define VEC128_HW_F16 1 /* FCVTL/FCVTN convert halves exactly */
#else
#define VEC128_TOKENS 2 /* 16 registers on armv7 */
#define VEC128_HW_F16 0
#endif

typedef int8x16_t v8;    /* 16 x int8 */
typedef int16x8_t v16;   /* 8 x int16 */
typedef int32x4_t v32;   /* 4 x int32 */
typedef float32x4_t vf;  /* 4 x float */
typedef int8x16_t pv;    /* bytes prepared for pv_dot (NEON needs no preparation) */

/* ---- bytes ---------------------------------------------------------------- */

static VEC128_ALWAYS v8 v8_load(const void *p) { return vld1q_s8((const int8_t *)p); }
static VEC128_ALWAYS void v8_store(void *p, v8 a) { vst1q_s8((int8_t *)p, a); }
static VEC128_ALWAYS v8 v8_splat(int x) { return vdupq_n_s8((int8_t)x); }
static VEC128_ALWAYS v8 v8_and(v8 a, v8 b) { return vandq_s8(a, b); }
static VEC128_ALWAYS v8 v8_or(v8 a, v8 b) { return vorrq_s8(a, b); }
static VEC128_ALWAYS v8 v8_add(v8 a, v8 b) { return vaddq_s8(a, b); }
static VEC128_ALWAYS v8 v8_sub(v8 a, v8 b) { return vsubq_s8(a, b); }

/* Logical shifts of each byte by a run-time count (0..7). */
static VEC128_ALWAYS v8 v8_shr(v8 a, int n) {
    return vreinterpretq_s8_u8(vshlq_u8(vreinterpretq_u8_s8(a), vdupq_n_s8((int8_t)-n)));
}
static VEC128_ALWAYS v8 v8_shl(v8 a, int n) { return vshlq_s8(a, vdupq_n_s8((int8_t)n)); }

/* table[idx[i]] for indices 0..15. */
static VEC128_ALWAYS v8 v8_lookup(v8 table, v8 idx) {
#if defined(__aarch64__)
    return vqtbl1q_s8(table, vreinterpretq_u8_s8(idx));
#else
    int8x8x2_t t = {{vget_low_s8(table), vget_high_s8(table)}};
    return vcombine_s8(vtbl2_s8(t, vget_low_s8(idx)), vtbl2_s8(t, vget_high_s8(idx)));
#endif
}

/* 0xff where (a & mask) != 0, else 0. */
static VEC128_ALWAYS v8 v8_test(v8 a, v8 mask) { return vreinterpretq_s8_u8(vtstq_s8(a, mask)); }

/* Byte j is 0xff when bit j of the low 16 bits of `bits` is set. */
static VEC128_ALWAYS v8 v8_bits16(uint32_t bits) {
    static const uint8_t bit_of_lane[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)bits), vdup_n_u8((uint8_t)(bits >> 8)));
    return vreinterpretq_s8_u8(vtstq_u8(b, vld1q_u8(bit_of_lane)));
}

/* Sum of the 16 signed bytes. */
static VEC128_ALWAYS int32_t v8_hsum(v8 a) {
#if defined(__aarch64__)
    return vaddlvq_s8(a);
#else
    int64x2_t s = vpaddlq_s32(vpaddlq_s16(vpaddlq_s8(a)));
    return (int32_t)(vgetq_lane_s64(s, 0) + vgetq_lane_s64(s, 1));
#endif
}

/* ---- int8 dot products ---------------------------------------------------- */
/* pv_dot(acc, a, b) adds the 16 products a[i]*b[i] into acc; which lane gets
 * which product differs between flavours, only the sum of the lanes is
 * defined. Exact when one side's bytes are in [-127, 127] (every Q8
 * activation quantizer guarantees it): the non-dotprod path adds two
 * products in int16, and 2 * 128 * 127 still fits. */

static VEC128_ALWAYS pv pv_prep(v8 a) { return a; }

/* Bit fields of packed weight bytes, prepared: (byte >> shift) & mask for
 * each of the 16 bytes, in the lane order pv_prep_pairs gives activations
 * (here the natural one); pv_or and pv_shl combine fields (values < 128),
 * pv_sub_splat takes a type's offset off its levels. */
static VEC128_ALWAYS pv pv_fields(v8 q, int shift, int mask) { return v8_and(v8_shr(q, shift), v8_splat(mask)); }
static VEC128_ALWAYS pv pv_prep_pairs(v8 a) { return a; }
static VEC128_ALWAYS pv pv_or(pv a, pv b) { return v8_or(a, b); }
static VEC128_ALWAYS pv pv_shl(pv a, int n) { return v8_shl(a, n); }
static VEC128_ALWAYS pv pv_sub_splat(pv a, int n) { return v8_sub(a, v8_splat(n)); }
/* Q4_K's nibbles (see vec128_wasm.h): plain fields here, as levels above
 * 127 would not fit the signed bytes the dot products take. */
#define PV_NIBBLES_LOG2 0
static VEC128_ALWAYS pv pv_nibbles(v8 q, int high) { return pv_fields(q, 4 * high, 15); }

static VEC128_ALWAYS v32 pv_dot(v32 acc, pv a, pv b) {
#if defined(VEC128_DOTPROD)
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
    /* clang 14 declares vdotq_s32 only when the whole file targets dotprod;
     * its builtin works inside target("dotprod") code (34: int32x4). */
    return (int32x4_t)__builtin_neon_vdotq_v((int8x16_t)acc, a, b, 34);
#else
    return vdotq_s32(acc, a, b);
#endif
#elif defined(__aarch64__)
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
#else
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_s8(p, vget_high_s8(a), vget_high_s8(b));
    return vpadalq_s16(acc, p);
#endif
}

/* ---- int16 / int32 -------------------------------------------------------- */

static VEC128_ALWAYS v16 v16_load(const void *p) { return vreinterpretq_s16_u8(vld1q_u8((const uint8_t *)p)); }

static VEC128_ALWAYS v16 v16_splat(int16_t x) { return vdupq_n_s16(x); }
static VEC128_ALWAYS v16 v16_and(v16 a, v16 b) { return vandq_s16(a, b); }
static VEC128_ALWAYS v16 v16_or(v16 a, v16 b) { return vorrq_s16(a, b); }
static VEC128_ALWAYS v16 v16_eq(v16 a, v16 b) { return vreinterpretq_s16_u16(vceqq_s16(a, b)); }
static VEC128_ALWAYS v32 v16_bits32(v16 a) { return vreinterpretq_s32_s16(a); }
/* lanes 0..3 or 4..7, sign-extended */
static VEC128_ALWAYS v32 v32_from_v16_lo(v16 a) { return vmovl_s16(vget_low_s16(a)); }
static VEC128_ALWAYS v32 v32_from_v16_hi(v16 a) { return vmovl_s16(vget_high_s16(a)); }

/* acc + the 8 products a[i]*b[i] (exact in int32). */
static VEC128_ALWAYS v32 v16_dot(v32 acc, v16 a, v16 b) {
    acc = vmlal_s16(acc, vget_low_s16(a), vget_low_s16(b));
    return vmlal_s16(acc, vget_high_s16(a), vget_high_s16(b));
}

static VEC128_ALWAYS v32 v32_zero(void) { return vdupq_n_s32(0); }
static VEC128_ALWAYS v32 v32_splat(int32_t x) { return vdupq_n_s32(x); }
static VEC128_ALWAYS v32 v32_load(const int32_t *p) { return vld1q_s32(p); }
static VEC128_ALWAYS void v32_store(int32_t *p, v32 a) { vst1q_s32(p, a); }
static VEC128_ALWAYS v32 v32_add(v32 a, v32 b) { return vaddq_s32(a, b); }
static VEC128_ALWAYS v32 v32_sub(v32 a, v32 b) { return vsubq_s32(a, b); }
static VEC128_ALWAYS v32 v32_mla(v32 acc, v32 a, v32 b) { return vmlaq_s32(acc, a, b); }
static VEC128_ALWAYS v32 v32_min(v32 a, v32 b) { return vminq_s32(a, b); }
static VEC128_ALWAYS v32 v32_max(v32 a, v32 b) { return vmaxq_s32(a, b); }
static VEC128_ALWAYS v32 v32_and(v32 a, v32 b) { return vandq_s32(a, b); }
static VEC128_ALWAYS v32 v32_or(v32 a, v32 b) { return vorrq_s32(a, b); }
static VEC128_ALWAYS v32 v32_eq(v32 a, v32 b) { return vreinterpretq_s32_u32(vceqq_s32(a, b)); }
static VEC128_ALWAYS v32 v32_gt(v32 a, v32 b) { return vreinterpretq_s32_u32(vcgtq_s32(a, b)); }
/* m ? a : b, lane by lane (m lanes all ones or all zeros) */
static VEC128_ALWAYS v32 v32_select(v32 m, v32 a, v32 b) { return vbslq_s32(vreinterpretq_u32_s32(m), a, b); }
static VEC128_ALWAYS v32 v32_shl(v32 a, int n) { return vshlq_s32(a, vdupq_n_s32(n)); }
/* logical shift right */
static VEC128_ALWAYS v32 v32_shr(v32 a, int n) {
    return vreinterpretq_s32_u32(vshlq_u32(vreinterpretq_u32_s32(a), vdupq_n_s32(-n)));
}
static VEC128_ALWAYS v32 v32_sar(v32 a, int n) { return vshlq_s32(a, vdupq_n_s32(-n)); }
static VEC128_ALWAYS int v32_any(v32 m) {
#if defined(__aarch64__)
    return vmaxvq_u32(vreinterpretq_u32_s32(m)) != 0;
#else
    uint32x2_t o = vorr_u32(vget_low_u32(vreinterpretq_u32_s32(m)), vget_high_u32(vreinterpretq_u32_s32(m)));
    return (vget_lane_u32(o, 0) | vget_lane_u32(o, 1)) != 0;
#endif
}

/* [sum a, sum b, sum c, sum d] */
static VEC128_ALWAYS v32 v32_reduce4(v32 a, v32 b, v32 c, v32 d) {
#if defined(__aarch64__)
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
#else
    int32x2_t ab = vpadd_s32(vpadd_s32(vget_low_s32(a), vget_high_s32(a)), vpadd_s32(vget_low_s32(b), vget_high_s32(b)));
    int32x2_t cd = vpadd_s32(vpadd_s32(vget_low_s32(c), vget_high_s32(c)), vpadd_s32(vget_low_s32(d), vget_high_s32(d)));
    return vcombine_s32(ab, cd);
#endif
}

/* Four int32 vectors whose lanes are in [-127, 127] as 16 bytes, in order. */
static VEC128_ALWAYS v8 v32_narrow8(v32 a, v32 b, v32 c, v32 d) {
    int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

/* Four unsigned 16-bit values at p (any alignment) widened to int32 lanes. */
static VEC128_ALWAYS v32 v32_load_u16x4(const void *p) {
    return vreinterpretq_s32_u32(vmovl_u16(vreinterpret_u16_u8(vld1_u8((const uint8_t *)p))));
}

/* The low 16 bits of each lane, stored as four u16 at p (any alignment). */
static VEC128_ALWAYS void v32_store_u16x4(void *p, v32 a) {
    vst1_u8((uint8_t *)p, vreinterpret_u8_u16(vmovn_u32(vreinterpretq_u32_s32(a))));
}

static VEC128_ALWAYS int32_t v32_hsum(v32 a) {
#if defined(__aarch64__)
    return vaddvq_s32(a);
#else
    int32x2_t s = vadd_s32(vget_low_s32(a), vget_high_s32(a));
    return vget_lane_s32(vpadd_s32(s, s), 0);
#endif
}

/* ---- floats --------------------------------------------------------------- */

static VEC128_ALWAYS vf vf_zero(void) { return vdupq_n_f32(0.0f); }
static VEC128_ALWAYS vf vf_splat(float x) { return vdupq_n_f32(x); }
static VEC128_ALWAYS vf vf_load(const void *p) { return vreinterpretq_f32_u8(vld1q_u8((const uint8_t *)p)); }
static VEC128_ALWAYS void vf_store(void *p, vf a) { vst1q_u8((uint8_t *)p, vreinterpretq_u8_f32(a)); }
static VEC128_ALWAYS vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
static VEC128_ALWAYS vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
static VEC128_ALWAYS vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
/* acc + a*b, fused where the hardware can (used only where a tolerance applies) */
static VEC128_ALWAYS vf vf_fma(vf acc, vf a, vf b) {
#if defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
    return vfmaq_f32(acc, a, b);
#else
    return vmlaq_f32(acc, a, b);
#endif
}
static VEC128_ALWAYS vf vf_abs(vf a) { return vabsq_f32(a); }
/* NaN in either operand gives NaN */
static VEC128_ALWAYS vf vf_min(vf a, vf b) { return vminq_f32(a, b); }
static VEC128_ALWAYS vf vf_max(vf a, vf b) { return vmaxq_f32(a, b); }
static VEC128_ALWAYS vf vf_div(vf a, vf b) {
#if defined(__aarch64__)
    return vdivq_f32(a, b);
#else
    /* reciprocal estimate, two Newton steps, then one correction of the
     * quotient by its residual a - q*b: within about an ulp. An infinite b
     * makes the residual NaN (0 * inf): keep the plain quotient there. */
    float32x4_t r = vrecpeq_f32(b);
    r = vmulq_f32(r, vrecpsq_f32(b, r));
    r = vmulq_f32(r, vrecpsq_f32(b, r));
    float32x4_t q = vmulq_f32(a, r);
#if defined(__ARM_FEATURE_FMA)
    float32x4_t c = vfmaq_f32(q, vfmsq_f32(a, q, b), r);
#else
    float32x4_t c = vmlaq_f32(q, vmlsq_f32(a, q, b), r);
#endif
    return vbslq_f32(vceqq_f32(c, c), c, q);
#endif
}
static VEC128_ALWAYS v32 vf_gt(vf a, vf b) { return vreinterpretq_s32_u32(vcgtq_f32(a, b)); }
static VEC128_ALWAYS v32 vf_ge(vf a, vf b) { return vreinterpretq_s32_u32(vcgeq_f32(a, b)); }
static VEC128_ALWAYS v32 vf_eq(vf a, vf b) { return vreinterpretq_s32_u32(vceqq_f32(a, b)); }
static VEC128_ALWAYS vf vf_select(v32 m, vf a, vf b) { return vbslq_f32(vreinterpretq_u32_s32(m), a, b); }
static VEC128_ALWAYS vf vf_from_v32(v32 a) { return vcvtq_f32_s32(a); }
/* toward zero, saturating, NaN -> 0 */
static VEC128_ALWAYS v32 vf_trunc_i32(vf a) { return vcvtq_s32_f32(a); }
static VEC128_ALWAYS vf vf_from_bits(v32 a) { return vreinterpretq_f32_s32(a); }
static VEC128_ALWAYS v32 vf_bits(vf a) { return vreinterpretq_s32_f32(a); }
static VEC128_ALWAYS float vf_lane0(vf a) { return vgetq_lane_f32(a, 0); }

/* Round half away from zero to int32, saturating, NaN -> 0 (like roundf,
 * then a saturating conversion; wisp_round_away for the range it covers). */
static VEC128_ALWAYS v32 vf_round_away(vf a) {
#if defined(__aarch64__)
    return vcvtaq_s32_f32(a);
#else
    /* clamp first so the +-1 adjustment cannot overflow; NaN stays NaN and
     * converts to 0 */
    a = vminq_f32(vmaxq_f32(a, vdupq_n_f32(-1073741824.0f)), vdupq_n_f32(1073741824.0f));
    int32x4_t t = vcvtq_s32_f32(a); /* toward zero */
    float32x4_t r = vsubq_f32(a, vcvtq_f32_s32(t));
    t = vsubq_s32(t, vreinterpretq_s32_u32(vcgeq_f32(r, vdupq_n_f32(0.5f))));
    return vaddq_s32(t, vreinterpretq_s32_u32(vcleq_f32(r, vdupq_n_f32(-0.5f))));
#endif
}

/* Round half to even, as a float; valid for |a| < 2^22. */
static VEC128_ALWAYS vf vf_round_even(vf a) {
#if defined(__aarch64__)
    return vrndnq_f32(a);
#else
    /* adding 1.5 * 2^23 leaves no fraction bits; NEON always rounds to nearest even */
    const float32x4_t magic = vdupq_n_f32(12582912.0f);
    return vsubq_f32(vaddq_f32(a, magic), magic);
#endif
}

/* [sum a, sum b, sum c, sum d] */
static VEC128_ALWAYS vf vf_reduce4(vf a, vf b, vf c, vf d) {
#if defined(__aarch64__)
    return vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
#else
    float32x2_t ab = vpadd_f32(vpadd_f32(vget_low_f32(a), vget_high_f32(a)), vpadd_f32(vget_low_f32(b), vget_high_f32(b)));
    float32x2_t cd = vpadd_f32(vpadd_f32(vget_low_f32(c), vget_high_f32(c)), vpadd_f32(vget_low_f32(d), vget_high_f32(d)));
    return vcombine_f32(ab, cd);
#endif
}

static VEC128_ALWAYS float vf_hsum(vf a) {
#if defined(__aarch64__)
    return vaddvq_f32(a);
#else
    float32x2_t s = vadd_f32(vget_low_f32(a), vget_high_f32(a));
    return vget_lane_f32(vpadd_f32(s, s), 0);
#endif
}

/* Largest lane, NaN lanes ignored (the caller keeps NaN out, see
 * vec128_kernels.inc's abs_max). */
static VEC128_ALWAYS float vf_hmax(vf a) {
#if defined(__aarch64__)
    return vmaxvq_f32(a);
#else
    float32x2_t m = vmax_f32(vget_low_f32(a), vget_high_f32(a));
    return vget_lane_f32(vpmax_f32(m, m), 0);
#endif
}

#if VEC128_HW_F16
/* Four halves at p (any alignment) to floats, exactly. */
static VEC128_ALWAYS vf vf_load_f16_hw(const void *p) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8((const uint8_t *)p)));
}
/* The half h, as a float, in every lane. */
static VEC128_ALWAYS vf vf_splat_f16_hw(uint16_t h) { return vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))); }
/* Four floats to halves (round to nearest even), stored at p. */
static VEC128_ALWAYS void vf_store_f16_hw(void *p, vf a) { vst1_u8((uint8_t *)p, vreinterpret_u8_f16(vcvt_f16_f32(a))); }
#endif

/* Sum of x[i]^2 in double: the reference's rmsnorm accumulates in double. */
static inline double vec128_sum_squares(const float *x, int64_t n) {
#if defined(__aarch64__)
    float64x2_t a0 = vdupq_n_f64(0.0), a1 = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t lo = vcvt_f64_f32(vget_low_f32(v)), hi = vcvt_high_f64_f32(v);
        /* a float times a float is exact in double, so fusing loses nothing */
        a0 = vfmaq_f64(a0, lo, lo);
        a1 = vfmaq_f64(a1, hi, hi);
    }
    double s = vaddvq_f64(vaddq_f64(a0, a1));
    for (; i < n; i++) s += (double)x[i] * x[i];
    return s;
#else
    /* no double vectors: the reference's own loop, so the result is exact */
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
#endif
}

#endif
