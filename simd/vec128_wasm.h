/* The 128-bit vector vocabulary (see vec128_kernels.inc) for WebAssembly
 * SIMD128, chosen at compile time (-msimd128 defines __wasm_simd128__).
 *
 * SIMD128 has no int8 x int8 dot product: bytes are widened to int16 once
 * (pv_prep, shared by every row or token that reuses them) and multiplied
 * with i32x4.dot_i16x8_s. Relaxed SIMD's 8-bit dot product would not be
 * faster in V8 (make bench-relaxed-dot: 0.95-1.01x in Chromium 156 and
 * Node 24), and Debian's Emscripten emits its pre-standard opcodes; its
 * fused multiply-add is not used either. Floats follow IEEE exactly,
 * subnormals included. */
#ifndef WISP_VEC128_WASM_H
#define WISP_VEC128_WASM_H

#include <stdint.h>
#include <string.h>
#include <wasm_simd128.h>

#define VEC128_ALWAYS inline __attribute__((always_inline))
#define VEC128_TOKENS 2 /* engines map v128 onto 16 SSE/NEON registers */
#define VEC128_HW_F16 0

/* Integer constants for splats, made at run time. V8 as in Chromium 156
 * and Node 24 does not keep a v128 constant in a register through a loop:
 * it builds it again at every use, three instructions (movq, vmovq,
 * punpcklqdq), inside the hottest loops (Node 20's V8 still hoisted them).
 * A constant plus wisp_wasm_zero, a 0 defined in another file
 * (simd/dispatch.c) so that neither clang nor V8 can fold it, is made once
 * and kept in a register. Only constants: a splat of a run-time value stays
 * as it is (an add in front of it would cost V8's broadcast from memory).
 * Byte splats stay constants too: kept, they ran out of registers in the
 * unrolled Q6_K decode (7.9 -> 6.6 Gweights/s). Chromium 156, one thread,
 * Gweights/s, 2048 x 2048 decode: Q4_0 12.5 -> 14.9, Q8_0 12.1 -> 14.6,
 * Q4_K 10.8 -> 11.7, Q5_K 6.4 -> 6.8, Q3_K 3.9 -> 4.3, Q2_K 7.8 -> 8.3,
 * Q6_K 7.9 -> 7.8; 32-token prefill: Q4_0 10.6 -> 13.0, Q8_0 10.4 -> 11.0,
 * Q4_K 13.5 -> 14.1. */
extern const int32_t wisp_wasm_zero;
static VEC128_ALWAYS int32_t vec128_runtime(int32_t x) { return __builtin_constant_p(x) ? x + wisp_wasm_zero : x; }

typedef v128_t v8;
typedef v128_t v16;
typedef v128_t v32;
typedef v128_t vf;
typedef struct pv {
    v128_t lo, hi; /* bytes 0..7 and 8..15 widened to int16 */
} pv;

/* ---- bytes ---------------------------------------------------------------- */

static VEC128_ALWAYS v8 v8_load(const void *p) { return wasm_v128_load(p); }
static VEC128_ALWAYS void v8_store(void *p, v8 a) { wasm_v128_store(p, a); }
static VEC128_ALWAYS v8 v8_splat(int x) { return wasm_i8x16_splat((int8_t)x); }
static VEC128_ALWAYS v8 v8_and(v8 a, v8 b) { return wasm_v128_and(a, b); }
static VEC128_ALWAYS v8 v8_or(v8 a, v8 b) { return wasm_v128_or(a, b); }
static VEC128_ALWAYS v8 v8_add(v8 a, v8 b) { return wasm_i8x16_add(a, b); }
static VEC128_ALWAYS v8 v8_sub(v8 a, v8 b) { return wasm_i8x16_sub(a, b); }
static VEC128_ALWAYS v8 v8_shr(v8 a, int n) { return wasm_u8x16_shr(a, (uint32_t)n); }
static VEC128_ALWAYS v8 v8_shl(v8 a, int n) { return wasm_i8x16_shl(a, (uint32_t)n); }
static VEC128_ALWAYS v8 v8_lookup(v8 table, v8 idx) { return wasm_i8x16_swizzle(table, idx); }
static VEC128_ALWAYS v8 v8_test(v8 a, v8 mask) {
    return wasm_i8x16_ne(wasm_v128_and(a, mask), wasm_i8x16_splat(0));
}
static VEC128_ALWAYS v8 v8_bits16(uint32_t bits) {
    const v128_t bit_of_lane = wasm_u8x16_make(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    v128_t h = wasm_i16x8_splat((int16_t)bits); /* bytes: lo hi lo hi ... */
    v128_t b = wasm_i8x16_shuffle(h, h, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return v8_test(b, bit_of_lane);
}

static VEC128_ALWAYS int32_t v32_hsum(v32 a);
static VEC128_ALWAYS int32_t v8_hsum(v8 a) {
    return v32_hsum(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(a)));
}

/* ---- int8 dot products ---------------------------------------------------- */
/* pv_dot(acc, a, b) adds the 16 products a[i]*b[i] into acc (only the sum of
 * the lanes is defined); exact for any bytes. */

static VEC128_ALWAYS pv pv_prep(v8 a) {
    pv p = {wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_high_i8x16(a)};
    return p;
}

/* Bit fields of packed weight bytes, prepared: (byte >> shift) & mask for
 * each of the 16 bytes, even bytes in .lo and odd ones in .hi, cut straight
 * out of 16-bit lanes (two shifts and ands, where widening bytes and then
 * taking fields costs twice as much). pv_prep_pairs prepares activations in
 * that order; pv_or and pv_shl combine fields (values < 128), pv_sub_splat
 * takes a type's offset off its levels. */
static VEC128_ALWAYS pv pv_fields(v8 q, int shift, int mask) {
    const v128_t m = wasm_i16x8_splat((int16_t)vec128_runtime(mask));
    pv p = {wasm_v128_and(wasm_u16x8_shr(q, (uint32_t)shift), m), wasm_v128_and(wasm_u16x8_shr(q, (uint32_t)shift + 8), m)};
    return p;
}
static VEC128_ALWAYS pv pv_prep_pairs(v8 a) {
    pv p = {wasm_i16x8_shr(wasm_i16x8_shl(a, 8), 8), wasm_i16x8_shr(a, 8)};
    return p;
}
static VEC128_ALWAYS pv pv_or(pv a, pv b) {
    pv p = {wasm_v128_or(a.lo, b.lo), wasm_v128_or(a.hi, b.hi)};
    return p;
}
static VEC128_ALWAYS pv pv_shl(pv a, int n) {
    pv p = {wasm_i16x8_shl(a.lo, (uint32_t)n), wasm_i16x8_shl(a.hi, (uint32_t)n)};
    return p;
}
static VEC128_ALWAYS pv pv_sub_splat(pv a, int n) {
    const v128_t s = wasm_i16x8_splat((int16_t)vec128_runtime(n));
    pv p = {wasm_i16x8_sub(a.lo, s), wasm_i16x8_sub(a.hi, s)};
    return p;
}

/* Q4_K's nibbles, with fewer shifts than pv_fields takes: pv_nibbles(q, 0)
 * is pv_fields(q, 0, 15), and pv_nibbles(q, 1) is pv_fields(q, 4, 15) times
 * 2^PV_NIBBLES_LOG2 (16), the high nibbles masked where they stand. One
 * shift by 8 serves both halves, where pv_fields(q, 4, 15) shifts by 4 and
 * by 12. Levels up to 240 still fit the 16-bit lanes. */
#define PV_NIBBLES_LOG2 4
static VEC128_ALWAYS pv pv_nibbles(v8 q, int high) {
    const v128_t m = wasm_i16x8_splat((int16_t)vec128_runtime(0x0f << 4 * high));
    pv p = {wasm_v128_and(q, m), wasm_v128_and(wasm_u16x8_shr(q, 8), m)};
    return p;
}

static VEC128_ALWAYS v32 pv_dot(v32 acc, pv a, pv b) {
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a.lo, b.lo));
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a.hi, b.hi));
}

/* ---- int16 / int32 -------------------------------------------------------- */

static VEC128_ALWAYS v16 v16_load(const void *p) { return wasm_v128_load(p); }
static VEC128_ALWAYS v32 v16_dot(v32 acc, v16 a, v16 b) { return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a, b)); }
static VEC128_ALWAYS v16 v16_splat(int16_t x) { return wasm_i16x8_splat((int16_t)vec128_runtime(x)); }
static VEC128_ALWAYS v16 v16_and(v16 a, v16 b) { return wasm_v128_and(a, b); }
static VEC128_ALWAYS v16 v16_or(v16 a, v16 b) { return wasm_v128_or(a, b); }
static VEC128_ALWAYS v16 v16_eq(v16 a, v16 b) { return wasm_i16x8_eq(a, b); }
static VEC128_ALWAYS v32 v16_bits32(v16 a) { return a; }
/* lanes 0..3 or 4..7, sign-extended */
static VEC128_ALWAYS v32 v32_from_v16_lo(v16 a) { return wasm_i32x4_extend_low_i16x8(a); }
static VEC128_ALWAYS v32 v32_from_v16_hi(v16 a) { return wasm_i32x4_extend_high_i16x8(a); }

static VEC128_ALWAYS v32 v32_zero(void) { return wasm_i32x4_splat(0); }
static VEC128_ALWAYS v32 v32_splat(int32_t x) { return wasm_i32x4_splat(vec128_runtime(x)); }
static VEC128_ALWAYS v32 v32_load(const int32_t *p) { return wasm_v128_load(p); }
static VEC128_ALWAYS void v32_store(int32_t *p, v32 a) { wasm_v128_store(p, a); }
static VEC128_ALWAYS v32 v32_add(v32 a, v32 b) { return wasm_i32x4_add(a, b); }
static VEC128_ALWAYS v32 v32_sub(v32 a, v32 b) { return wasm_i32x4_sub(a, b); }
static VEC128_ALWAYS v32 v32_mla(v32 acc, v32 a, v32 b) { return wasm_i32x4_add(acc, wasm_i32x4_mul(a, b)); }
static VEC128_ALWAYS v32 v32_min(v32 a, v32 b) { return wasm_i32x4_min(a, b); }
static VEC128_ALWAYS v32 v32_max(v32 a, v32 b) { return wasm_i32x4_max(a, b); }
static VEC128_ALWAYS v32 v32_and(v32 a, v32 b) { return wasm_v128_and(a, b); }
static VEC128_ALWAYS v32 v32_or(v32 a, v32 b) { return wasm_v128_or(a, b); }
static VEC128_ALWAYS v32 v32_eq(v32 a, v32 b) { return wasm_i32x4_eq(a, b); }
static VEC128_ALWAYS v32 v32_gt(v32 a, v32 b) { return wasm_i32x4_gt(a, b); }
static VEC128_ALWAYS v32 v32_select(v32 m, v32 a, v32 b) { return wasm_v128_bitselect(a, b, m); }
static VEC128_ALWAYS v32 v32_shl(v32 a, int n) { return wasm_i32x4_shl(a, (uint32_t)n); }
static VEC128_ALWAYS v32 v32_shr(v32 a, int n) { return wasm_u32x4_shr(a, (uint32_t)n); }
static VEC128_ALWAYS v32 v32_sar(v32 a, int n) { return wasm_i32x4_shr(a, (uint32_t)n); }
static VEC128_ALWAYS int v32_any(v32 m) { return wasm_v128_any_true(m); }

static VEC128_ALWAYS int32_t v32_hsum(v32 a) {
    v128_t s = wasm_i32x4_add(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));
    s = wasm_i32x4_add(s, wasm_i32x4_shuffle(s, s, 1, 0, 3, 2));
    return wasm_i32x4_extract_lane(s, 0);
}

/* [sum a, sum b, sum c, sum d]: a 4x4 transpose folded into the adds */
static VEC128_ALWAYS v32 v32_reduce4(v32 a, v32 b, v32 c, v32 d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

static VEC128_ALWAYS v8 v32_narrow8(v32 a, v32 b, v32 c, v32 d) {
    return wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(a, b), wasm_i16x8_narrow_i32x4(c, d));
}

static VEC128_ALWAYS v32 v32_load_u16x4(const void *p) { return wasm_u32x4_load16x4(p); }
static VEC128_ALWAYS void v32_store_u16x4(void *p, v32 a) {
    /* lanes hold values below 2^16, so the saturating narrow keeps them */
    wasm_v128_store64_lane(p, wasm_u16x8_narrow_i32x4(a, a), 0);
}

/* ---- floats --------------------------------------------------------------- */

static VEC128_ALWAYS vf vf_zero(void) { return wasm_f32x4_splat(0.0f); }
static VEC128_ALWAYS vf vf_splat(float x) { return wasm_f32x4_splat(x); }
static VEC128_ALWAYS vf vf_load(const void *p) { return wasm_v128_load(p); }
static VEC128_ALWAYS void vf_store(void *p, vf a) { wasm_v128_store(p, a); }
static VEC128_ALWAYS vf vf_add(vf a, vf b) { return wasm_f32x4_add(a, b); }
static VEC128_ALWAYS vf vf_sub(vf a, vf b) { return wasm_f32x4_sub(a, b); }
static VEC128_ALWAYS vf vf_mul(vf a, vf b) { return wasm_f32x4_mul(a, b); }
static VEC128_ALWAYS vf vf_fma(vf acc, vf a, vf b) { return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b)); }
static VEC128_ALWAYS vf vf_abs(vf a) { return wasm_f32x4_abs(a); }
static VEC128_ALWAYS vf vf_min(vf a, vf b) { return wasm_f32x4_min(a, b); }
static VEC128_ALWAYS vf vf_max(vf a, vf b) { return wasm_f32x4_max(a, b); }
static VEC128_ALWAYS vf vf_div(vf a, vf b) { return wasm_f32x4_div(a, b); }
static VEC128_ALWAYS v32 vf_gt(vf a, vf b) { return wasm_f32x4_gt(a, b); }
static VEC128_ALWAYS v32 vf_ge(vf a, vf b) { return wasm_f32x4_ge(a, b); }
static VEC128_ALWAYS v32 vf_eq(vf a, vf b) { return wasm_f32x4_eq(a, b); }
static VEC128_ALWAYS vf vf_select(v32 m, vf a, vf b) { return wasm_v128_bitselect(a, b, m); }
static VEC128_ALWAYS vf vf_from_v32(v32 a) { return wasm_f32x4_convert_i32x4(a); }
static VEC128_ALWAYS v32 vf_trunc_i32(vf a) { return wasm_i32x4_trunc_sat_f32x4(a); }
static VEC128_ALWAYS vf vf_from_bits(v32 a) { return a; }
static VEC128_ALWAYS v32 vf_bits(vf a) { return a; }
static VEC128_ALWAYS float vf_lane0(vf a) { return wasm_f32x4_extract_lane(a, 0); }

static VEC128_ALWAYS v32 vf_round_away(vf a) {
    /* clamp so the +-1 adjustment cannot overflow; NaN stays NaN and the
     * saturating conversion turns it into 0 */
    a = wasm_f32x4_min(wasm_f32x4_max(a, wasm_f32x4_splat(-1073741824.0f)), wasm_f32x4_splat(1073741824.0f));
    v128_t t = wasm_i32x4_trunc_sat_f32x4(a);
    v128_t r = wasm_f32x4_sub(a, wasm_f32x4_convert_i32x4(t));
    t = wasm_i32x4_sub(t, wasm_f32x4_ge(r, wasm_f32x4_splat(0.5f)));
    return wasm_i32x4_add(t, wasm_f32x4_le(r, wasm_f32x4_splat(-0.5f)));
}

static VEC128_ALWAYS vf vf_round_even(vf a) { return wasm_f32x4_nearest(a); }

static VEC128_ALWAYS vf vf_reduce4(vf a, vf b, vf c, vf d) {
    v128_t ab = wasm_f32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_f32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_f32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

static VEC128_ALWAYS float vf_hsum(vf a) {
    v128_t s = wasm_f32x4_add(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));
    s = wasm_f32x4_add(s, wasm_i32x4_shuffle(s, s, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(s, 0);
}

static VEC128_ALWAYS float vf_hmax(vf a) {
    v128_t m = wasm_f32x4_max(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));
    m = wasm_f32x4_max(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(m, 0);
}

static inline double vec128_sum_squares(const float *x, int64_t n) {
    v128_t a0 = wasm_f64x2_splat(0.0), a1 = wasm_f64x2_splat(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t v = wasm_v128_load(x + i);
        v128_t lo = wasm_f64x2_promote_low_f32x4(v);
        v128_t hi = wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
        /* a float times a float is exact in double */
        a0 = wasm_f64x2_add(a0, wasm_f64x2_mul(lo, lo));
        a1 = wasm_f64x2_add(a1, wasm_f64x2_mul(hi, hi));
    }
    v128_t s2 = wasm_f64x2_add(a0, a1);
    double s = wasm_f64x2_extract_lane(s2, 0) + wasm_f64x2_extract_lane(s2, 1);
    for (; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

#endif
