/* The AVX-512 level (F/BW/VL/DQ + VNNI, with F16C and FMA): every matmul,
 * the activation quantizers and the float primitives. Accuracy against the
 * scalar reference is stated in x86.h.
 *
 * The quantized matmuls are x86_quant.inc over the vocabulary below: 16
 * weight rows per group (one per 32-bit lane of a zmm register), VPDPBUSD
 * for the four-byte dots, and the signed 8-bit types offset by 128.
 * Decode of Q4_0 and Q8_0 is x86_decode.inc, with AVX512_VBMI's byte
 * permutes when the CPU has them; with packed weights (x86_packed.inc)
 * every batch size takes them without permutes. Decode of Q5_K and Q6_K
 * is x86_kdecode.inc (256-bit, with VPDPWSSD). */
#include "x86.h"

#if WISP_HAVE_X86

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "half.h"
#include "quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

/* Small fixed loops over registers must be unrolled, or -O2 keeps the
 * register arrays in memory. */
#define UNROLL _Pragma("GCC unroll 16")

#define ROWS 16         /* weight rows per group: one per lane */
#define TILE 8          /* activation rows per pass over a block of weight rows */
#define ACT_CACHE 4096  /* per-block activation facts kept on the stack (scales, sums) */
#define SIGNED8 0       /* VPDPBUSD takes unsigned weights: Q8_0 and IQ4_NL are offset */

/* ---- the vocabulary of x86_quant.inc -------------------------------------------------- */

typedef __m512i vi;
typedef __m512 vf;

INL vi vi_zero(void) { return _mm512_setzero_si512(); }
INL vi vi_set8(char v) { return _mm512_set1_epi8(v); }
INL vi vi_set32(int32_t v) { return _mm512_set1_epi32(v); }
INL vi vi_bytes16(char b0, char b1, char b2, char b3, char b4, char b5, char b6, char b7, char b8, char b9, char b10,
                  char b11, char b12, char b13, char b14, char b15) {
    return _mm512_broadcast_i32x4(_mm_setr_epi8(b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15));
}
INL vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
INL vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
INL vi vi_xor(vi a, vi b) { return _mm512_xor_si512(a, b); }
INL vi vi_add8(vi a, vi b) { return _mm512_add_epi8(a, b); }
INL vi vi_add32(vi a, vi b) { return _mm512_add_epi32(a, b); }
INL vi vi_sub32(vi a, vi b) { return _mm512_sub_epi32(a, b); }
INL vi vi_mul32(vi a, vi b) { return _mm512_mullo_epi32(a, b); }
INL vi vi_madd16(vi a, vi b) { return _mm512_madd_epi16(a, b); }
INL vi vi_shuffle8(vi table, vi idx) { return _mm512_shuffle_epi8(table, idx); }
#define vi_shr16(v, n) _mm512_srli_epi16(v, n)
#define vi_shl16(v, n) _mm512_slli_epi16(v, n)
#define vi_shr32(v, n) _mm512_srli_epi32(v, n)
#define vi_shl32(v, n) _mm512_slli_epi32(v, n)
#define vi_sar32(v, n) _mm512_srai_epi32(v, n)
INL vf vf_zero(void) { return _mm512_setzero_ps(); }
INL vf vf_set(float v) { return _mm512_set1_ps(v); }
INL vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
INL vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
INL vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
INL vf vf_cvt(vi a) { return _mm512_cvtepi32_ps(a); }
INL vi vi_load(const void *p) { return _mm512_load_si512(p); }
INL vf vf_load(const float *p) { return _mm512_load_ps(p); }
INL vf vf_unpacklo(vf a, vf b) { return _mm512_unpacklo_ps(a, b); }
INL vf vf_unpackhi(vf a, vf b) { return _mm512_unpackhi_ps(a, b); }
INL vf vf_lows(vf a, vf b) { return _mm512_shuffle_ps(a, b, 0x44); }
INL vf vf_highs(vf a, vf b) { return _mm512_shuffle_ps(a, b, 0xee); }
INL vi vi_unpacklo32(vi a, vi b) { return _mm512_unpacklo_epi32(a, b); }
INL vi vi_unpackhi32(vi a, vi b) { return _mm512_unpackhi_epi32(a, b); }
INL vi vi_unpacklo64(vi a, vi b) { return _mm512_unpacklo_epi64(a, b); }
INL vi vi_unpackhi64(vi a, vi b) { return _mm512_unpackhi_epi64(a, b); }

INL vi add_where(vi w, vi v, vi sel, char add) {
    return _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(v, sel), w, _mm512_set1_epi8(add));
}

/* acc + per-lane dots of n dwords (4 or 8) of unsigned weights with the
 * activation levels at q, four bytes at a time broadcast to every lane; two
 * chains when there are eight, so the adds overlap. */
INL vi dot_u(vi acc, const vi *w, const uint8_t *q, int n, int bits) {
    (void)bits; /* VPDPBUSD does not saturate */
    vi acc2 = vi_zero();
    UNROLL
    for (int k = 0; k < 8; k += 2) {
        if (k >= n) break;
        acc = _mm512_dpbusd_epi32(acc, w[k], _mm512_set1_epi32((int32_t)wisp_load_u32(q + 4 * k)));
        acc2 = _mm512_dpbusd_epi32(acc2, w[k + 1], _mm512_set1_epi32((int32_t)wisp_load_u32(q + 4 * k + 4)));
    }
    return _mm512_add_epi32(acc, acc2);
}

/* A group of 16 weight rows; rows past the end repeat the last row. */
typedef struct group {
    const uint8_t *row[ROWS];
    __mmask16 valid; /* lanes whose results are stored */
} group;

INL void group_init(group *g, const wisp_matmul_args *a, int64_t r, int64_t r1) {
    int n = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
    UNROLL
    for (int i = 0; i < ROWS; i++) g->row[i] = a->w + (size_t)(r + (i < n ? i : n - 1)) * a->w_row_bytes;
    g->valid = (__mmask16)((1u << n) - 1u);
}

INL void store_rows(float *y, const group *g, vf v) { _mm512_mask_storeu_ps(y, g->valid, v); }

/* The 32-bit field at byte `at` of every row, one per lane (plain loads
 * through the stack: measured faster than VPGATHERDD on Zen 4). */
INL vi gather32(const group *g, size_t at) {
    int32_t v[ROWS];
    UNROLL
    for (int i = 0; i < ROWS; i++) v[i] = (int32_t)wisp_load_u32(g->row[i] + at);
    return _mm512_loadu_si512(v);
}

/* fp16 in the low (high = 0) or high half of 32-bit lanes, as floats. */
INL vf f16_lanes(vi v, int high) {
    if (high) v = _mm512_srli_epi32(v, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
}

INL vi load128x4(const uint8_t *a, const uint8_t *b, const uint8_t *c, const uint8_t *d) {
    vi v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)d), 3);
}

INL vi load256x2(const uint8_t *a, const uint8_t *b) {
    vi v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)a));
    return _mm512_inserti64x4(v, _mm256_loadu_si256((const __m256i *)(const void *)b), 1);
}

/* q[k], lane i = bytes 4k..4k+3 of the 16 bytes at row i + at. Lane order
 * comes out natural because row i is loaded into 128-bit lane i/4 of z[i%4]. */
INL void transpose_x4(const group *g, size_t at, vi q[4]) {
    const uint8_t *const *r = g->row;
    vi z0 = load128x4(r[0] + at, r[4] + at, r[8] + at, r[12] + at);
    vi z1 = load128x4(r[1] + at, r[5] + at, r[9] + at, r[13] + at);
    vi z2 = load128x4(r[2] + at, r[6] + at, r[10] + at, r[14] + at);
    vi z3 = load128x4(r[3] + at, r[7] + at, r[11] + at, r[15] + at);
    vi t0 = _mm512_unpacklo_epi32(z0, z1), t1 = _mm512_unpackhi_epi32(z0, z1);
    vi t2 = _mm512_unpacklo_epi32(z2, z3), t3 = _mm512_unpackhi_epi32(z2, z3);
    q[0] = _mm512_unpacklo_epi64(t0, t2);
    q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3);
    q[3] = _mm512_unpackhi_epi64(t1, t3);
}

/* The same for 32 bytes per row: q[k], lane i = bytes 4k..4k+3 (k < 8). */
INL void transpose_x8(const group *g, size_t at, vi q[8]) {
    const uint8_t *const *r = g->row;
    vi a[4], b[4];
    UNROLL
    for (int i = 0; i < 4; i++) {
        a[i] = load256x2(r[i] + at, r[4 + i] + at);
        b[i] = load256x2(r[8 + i] + at, r[12 + i] + at);
    }
    vi a0 = _mm512_unpacklo_epi32(a[0], a[1]), a1 = _mm512_unpackhi_epi32(a[0], a[1]);
    vi a2 = _mm512_unpacklo_epi32(a[2], a[3]), a3 = _mm512_unpackhi_epi32(a[2], a[3]);
    vi b0 = _mm512_unpacklo_epi32(b[0], b[1]), b1 = _mm512_unpackhi_epi32(b[0], b[1]);
    vi b2 = _mm512_unpacklo_epi32(b[2], b[3]), b3 = _mm512_unpackhi_epi32(b[2], b[3]);
    vi ak[4] = {_mm512_unpacklo_epi64(a0, a2), _mm512_unpackhi_epi64(a0, a2), _mm512_unpacklo_epi64(a1, a3),
                _mm512_unpackhi_epi64(a1, a3)};
    vi bk[4] = {_mm512_unpacklo_epi64(b0, b2), _mm512_unpackhi_epi64(b0, b2), _mm512_unpacklo_epi64(b1, b3),
                _mm512_unpackhi_epi64(b1, b3)};
    /* ak[k]: 128-bit lanes = (bytes 4k.. of rows 0-3, bytes 16+4k.. of rows 0-3, the same of rows 4-7) */
    UNROLL
    for (int k = 0; k < 4; k++) {
        q[k] = _mm512_shuffle_i64x2(ak[k], bk[k], 0x88);
        q[4 + k] = _mm512_shuffle_i64x2(ak[k], bk[k], 0xdd);
    }
}

#include "x86_quant.inc"
#include "x86_dequant_t.inc"

/* ---- decode (x86_decode.inc) ----------------------------------------------------------- */

/* Byte permutes (VPERMB, VPERMT2B) gather the blocks' bytes; they are
 * AVX512_VBMI, which some AVX-512 CPUs lack (Skylake-X, Cascade Lake), so
 * only the decode functions are compiled for it, and the path is taken
 * only when the CPU has it. */
#define TGT_DEC __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c")))
#define INL_DEC static inline __attribute__((always_inline)) TGT_DEC
#define DEC_UNIT 4 /* blocks per vector: one per 128-bit lane */

static bool dec_available(void) { return __builtin_cpu_supports("avx512vbmi"); }

/* Byte indices for VPERMT2B / VPERMB, built per call (a few dozen stores)
 * rather than kept as globals. A quad starts at byte 0 of the row's
 * chunk; block j of it at byte B j (B = 18 for Q4_0, 34 for Q8_0), its
 * scale first, its weights from byte 2. */
typedef struct dec_tables {
    vi lo; /* 16 weight bytes of every block into 128-bit lane j: Q4_0's packed nibbles, Q8_0's first 16 */
    vi hi; /* Q8_0's last 16 */
    vi d;  /* the 4 scales into fp16 slots 4j + q (the same index for every q; the write mask picks q) */
} dec_tables;

INL_DEC void dec_tables_init(const int type, dec_tables *t) {
    uint8_t lo[64], hi[64], d[64];
    for (int k = 0; k < 64; k++) {
        const int j = k / 16, i = k % 16; /* byte i of block j */
        if (type == WISP_TYPE_Q4_0) {
            /* from the bytes at 0 (indices 0..63) and at 8 (64..127: byte n is index 56 + n) */
            const int at = 18 * j + 2 + i;
            lo[k] = (uint8_t)(at < 64 ? at : 56 + at);
            hi[k] = 0;
            d[k] = (uint8_t)(18 * (k / 8) + k % 2);
        } else {
            /* first halves from the bytes at 0 and 64 (index = byte), last
             * halves from those at 8 and 72 (index = byte - 8) */
            lo[k] = (uint8_t)(34 * j + 2 + i);
            hi[k] = (uint8_t)(34 * j + 18 + i - 8);
            d[k] = (uint8_t)(34 * (k / 8) + k % 2);
        }
    }
    t->lo = _mm512_loadu_si512(lo);
    t->hi = _mm512_loadu_si512(hi);
    t->d = _mm512_loadu_si512(d);
}

/* The dots of the chunk at p0 with its activation levels lv: v[q], 128-bit
 * lane l = 4 partial sums of block 4q + l; returns the chunk's scales as
 * floats in lane order. */
INL_DEC vf dec_units(const int type, const dec_tables *tb, const uint8_t *lv, const uint8_t *p0, vi v[4]) {
    const int64_t bytes = legacy_bytes(type);
    const vi m4 = vi_set8(0x0f), flip = vi_set8((char)0x80);
    vi dh = vi_zero();
    UNROLL
    for (int q = 0; q < 4; q++) {
        const uint8_t *p = p0 + (size_t)(4 * q * bytes);
        const __mmask64 kd = (__mmask64)(0x0303030303030303ull << (2 * q));
        vi lo, hi;
        if (type == WISP_TYPE_Q4_0) {
            vi a0 = _mm512_loadu_si512(p), a8 = _mm512_loadu_si512(p + 8);
            vi qs = _mm512_permutex2var_epi8(a0, tb->lo, a8);
            lo = vi_and(qs, m4);
            hi = vi_and(vi_shr16(qs, 4), m4);
            dh = _mm512_mask_permutexvar_epi8(dh, kd, tb->d, a0);
        } else {
            vi a0 = _mm512_loadu_si512(p), a64 = _mm512_loadu_si512(p + 64);
            vi a8 = _mm512_loadu_si512(p + 8), a72 = _mm512_loadu_si512(p + 72);
            lo = vi_xor(_mm512_permutex2var_epi8(a0, tb->lo, a64), flip);
            hi = vi_xor(_mm512_permutex2var_epi8(a8, tb->hi, a72), flip);
            dh = _mm512_mask_permutexvar_epi8(dh, kd & 0x0000ffff0000ffffull, tb->d, a0);
            dh = _mm512_mask_permutexvar_epi8(dh, kd & 0xffff0000ffff0000ull, tb->d, a64);
        }
        vi s = _mm512_dpbusd_epi32(vi_zero(), lo, _mm512_load_si512(lv + 128 * q));
        v[q] = _mm512_dpbusd_epi32(s, hi, _mm512_load_si512(lv + 128 * q + 64));
    }
    return _mm512_cvtph_ps(_mm512_castsi512_si256(dh));
}

/* The cross-lane step of dec_transpose: w[4g + k], 128-bit lane l = rows
 * 4g..4g+3 at element 4l + k, to u[e] = element e of every row. */
INL_DEC void dec_transpose_lanes(const vf w[16], vf u[16]) {
    UNROLL
    for (int k = 0; k < 4; k++) {
        vf e0 = _mm512_shuffle_f32x4(w[k], w[4 + k], 0x88), o0 = _mm512_shuffle_f32x4(w[k], w[4 + k], 0xdd);
        vf e1 = _mm512_shuffle_f32x4(w[8 + k], w[12 + k], 0x88), o1 = _mm512_shuffle_f32x4(w[8 + k], w[12 + k], 0xdd);
        u[k] = _mm512_shuffle_f32x4(e0, e1, 0x88);
        u[8 + k] = _mm512_shuffle_f32x4(e0, e1, 0xdd);
        u[4 + k] = _mm512_shuffle_f32x4(o0, o1, 0x88);
        u[12 + k] = _mm512_shuffle_f32x4(o0, o1, 0xdd);
    }
}

#include "x86_decode.inc"

/* ---- K-quant decode (x86_kdecode.inc: AVX2 instructions at both levels) ------------------- */

INL __m256i kdec_madd_add(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }

#include "x86_kdecode.inc"

/* ---- packed Q4_0 / Q8_0 (x86_packed.inc) and Q4_K / Q6_K (x86_packed_k.inc), one driver --- */

#include "x86_packed.inc"
#include "x86_packed_k.inc"
#include "x86_packed_drive.inc"

/* ---- float weights (F32, F16, BF16) ----------------------------------------------------- */

/* The first n (or all 16) lanes, for the ragged end of a row. */
INL __mmask16 lanes_of(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u); }

/* 16 weights from element i of a row (`n` left, 1..16), as floats. */
INL __m512 load_w16(const int type, const uint8_t *row, int64_t i, int64_t n) {
    __mmask16 m = lanes_of(n);
    switch (type) {
    case WISP_TYPE_F32: return _mm512_maskz_loadu_ps(m, row + 4 * i);
    case WISP_TYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    default:
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i)), 16));
    }
}

#define FR 4 /* weight rows per tile */
#define FT 4 /* activation rows per tile */

/* Every (row, token) pair has one accumulator fed in element order, so its
 * result is the same in any tile. */
INL void float_tile(const int type, const int ft, const wisp_matmul_args *a, int64_t r, int nr, int64_t t, int nt) {
    const uint8_t *w[FR];
    const float *x[FT];
    UNROLL
    for (int i = 0; i < FR; i++) w[i] = a->w + (size_t)(r + (i < nr ? i : nr - 1)) * a->w_row_bytes;
    UNROLL
    for (int j = 0; j < ft; j++) x[j] = (const float *)(const void *)(a->x + (size_t)(t + (j < nt ? j : nt - 1)) * a->x_row_bytes);
    __m512 acc[FR][FT];
    UNROLL
    for (int i = 0; i < FR; i++)
        UNROLL
        for (int j = 0; j < ft; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t e = 0; e < a->n_in; e += 16) {
        const int64_t left = a->n_in - e;
        __mmask16 m = lanes_of(left);
        __m512 xv[FT];
        UNROLL
        for (int j = 0; j < ft; j++) xv[j] = _mm512_maskz_loadu_ps(m, x[j] + e);
        UNROLL
        for (int i = 0; i < FR; i++) {
            __m512 wv = load_w16(type, w[i], e, left);
            UNROLL
            for (int j = 0; j < ft; j++) acc[i][j] = _mm512_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < nr; i++)
        UNROLL
        for (int j = 0; j < nt; j++) a->y[(t + j) * a->ldy + r + i] = _mm512_reduce_add_ps(acc[i][j]);
}

INL void float_matmul(const int type, const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r += FR) {
        int nr = r1 - r < FR ? (int)(r1 - r) : FR;
        int64_t t = 0;
        for (; t + FT <= a->n_tok; t += FT) float_tile(type, FT, a, r, nr, t, FT);
        for (; t < a->n_tok; t++) float_tile(type, 1, a, r, nr, t, 1);
    }
}

static TGT void mm_f32(const wisp_matmul_args *a, int64_t r0, int64_t r1) { float_matmul(WISP_TYPE_F32, a, r0, r1); }
static TGT void mm_f16(const wisp_matmul_args *a, int64_t r0, int64_t r1) { float_matmul(WISP_TYPE_F16, a, r0, r1); }
static TGT void mm_bf16(const wisp_matmul_args *a, int64_t r0, int64_t r1) { float_matmul(WISP_TYPE_BF16, a, r0, r1); }

/* ---- activation quantization ---------------------------------------------------------------- */

/* round half away from zero (wisp_round_away); NaN -> 0, +-inf stay */
INL __m512 round_away(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(v, t);
    t = _mm512_mask_add_ps(t, _mm512_cmp_ps_mask(r, _mm512_set1_ps(0.5f), _CMP_GE_OQ), t, _mm512_set1_ps(1.0f));
    t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(r, _mm512_set1_ps(-0.5f), _CMP_LE_OQ), t, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), t);
}

/* One Q8_0/Q8_1 block: 32 levels and (if sum is not NULL) their sum;
 * returns the unrounded d. */
INL float q8_block(const float *x, int8_t *qs, int32_t *sum) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, a), _mm512_andnot_ps(sign, b));
    float amax = _mm512_reduce_max_ps(m);
    /* the reference's max skips NaN (a > amax is false); redo it exactly then */
    if (amax != amax) {
        amax = 0.0f;
        for (int j = 0; j < WISP_QK; j++)
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    /* round first: it maps NaN to 0 (the clamps would not) */
    __m512 qa = _mm512_min_ps(_mm512_max_ps(round_away(_mm512_mul_ps(a, vid)), lo), hi);
    __m512 qb = _mm512_min_ps(_mm512_max_ps(round_away(_mm512_mul_ps(b, vid)), lo), hi);
    __m512i ia = _mm512_cvtps_epi32(qa), ib = _mm512_cvtps_epi32(qb);
    _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtepi32_epi8(ia));
    _mm_storeu_si128((__m128i *)(void *)(qs + 16), _mm512_cvtepi32_epi8(ib));
    if (sum) *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(ia, ib));
    return d;
}

static TGT void quantize_q8_0(const float *x, void *y, int64_t n) {
    uint8_t *b = y;
    for (int64_t i = 0; i < n / WISP_QK; i++, b += WISP_Q8_0_BYTES, x += WISP_QK)
        wisp_store_u16(b, wisp_f16_scale(q8_block(x, (int8_t *)(b + 2), NULL)));
}

static TGT void quantize_q8_1(const float *x, void *y, int64_t n) {
    uint8_t *b = y;
    for (int64_t i = 0; i < n / WISP_QK; i++, b += WISP_Q8_1_BYTES, x += WISP_QK) {
        int32_t sum;
        float d = q8_block(x, (int8_t *)(b + 4), &sum);
        wisp_store_u16(b, wisp_f16_scale(d));
        wisp_store_u16(b + 2, wisp_f16_scale((float)sum * d));
    }
}

static TGT void quantize_q8_K(const float *x, void *y, int64_t n) {
    uint8_t *b = y;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / WISP_QK_K; i++, b += WISP_Q8_K_BYTES, x += WISP_QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < WISP_QK_K; j += 16) m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), m);
        float amax = _mm512_reduce_max_ps(m), max = 0.0f;
        /* the reference keeps the first element of largest magnitude */
        for (int j = 0; j < WISP_QK_K; j += 16) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + __builtin_ctz(hit)];
                break;
            }
        }
        int8_t *qs = (int8_t *)(b + Q8K_QS);
        float d = 0.0f;
        if (amax == 0.0f || !(amax <= FLT_MAX)) {
            memset(qs, 0, WISP_QK_K);
        } else {
            const float iscale = -127.0f / max;
            const __m512 vs = _mm512_set1_ps(iscale), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
            for (int j = 0; j < WISP_QK_K; j += 16) {
                __m512 v = _mm512_mul_ps(vs, _mm512_loadu_ps(x + j));
                /* wisp_round_clamp: not above lo (NaN too) -> lo, >= hi -> hi, else nearest even */
                __m512 r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm512_mask_mov_ps(lo, _mm512_cmp_ps_mask(v, lo, _CMP_GT_OQ), r);
                r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, hi, _CMP_GE_OQ), hi);
                _mm_storeu_si128((__m128i *)(void *)(qs + j), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(r)));
            }
            d = 1.0f / iscale;
        }
        wisp_store_f32(b + Q8K_D, d);
        /* sums of 16 levels, as int16 (they fit: 16 * 127) */
        for (int s = 0; s < WISP_QK_K / 16; s++) {
            __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(qs + 16 * s)));
            int16_t sum = (int16_t)_mm512_reduce_add_epi32(v);
            memcpy(b + Q8K_BSUMS + 2 * s, &sum, 2);
        }
    }
}

/* ---- float primitives ------------------------------------------------------------------------ */

INL float dot32(const float *a, const float *b, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

INL float dot16(const uint16_t *a, const float *b, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)), _mm512_maskz_loadu_ps(m, b + i), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static TGT float dot_f32(const float *a, const float *b, int64_t n) { return dot32(a, b, n); }
static TGT float dot_f16_f32(const uint16_t *a, const float *b, int64_t n) { return dot16(a, b, n); }

/* Lane k of the result: the sum of the 16 lanes of p[k]. */
INL __m512 sum_lanes16(const __m512 p[16]) {
    __m512 t[8], u[4];
    UNROLL
    for (int i = 0; i < 8; i++) /* per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] */
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(p[2 * i], p[2 * i + 1]), _mm512_unpackhi_ps(p[2 * i], p[2 * i + 1]));
    UNROLL
    for (int i = 0; i < 4; i++) { /* per block: element e = keys 4i+e, summed over the block */
        __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
        u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
    __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, 0x88), _mm512_shuffle_f32x4(w01, w23, 0xdd));
}

INL __m512 load_kv16(const uint8_t *row, int f16, int64_t i, __mmask16 m) {
    return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)(const void *)row + i))
               : _mm512_maskz_loadu_ps(m, (const float *)(const void *)row + i);
}

/* Sixteen keys at a time: one partial dot per key (lanes over the head),
 * then all sixteen reduced together; the few keys left use the dot. */
static TGT void attn_scores(float *s, const void *keys, size_t stride, int kv_f16, int64_t n, const float *q, int64_t hd,
                            float scale) {
    const uint8_t *k = keys;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16, k += 16 * stride) {
        __m512 p[16];
        UNROLL
        for (int kk = 0; kk < 16; kk++) p[kk] = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            __mmask16 m = lanes_of(hd - i);
            __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
            UNROLL
            for (int kk = 0; kk < 16; kk++) p[kk] = _mm512_fmadd_ps(load_kv16(k + (size_t)kk * stride, kv_f16, i, m), qv, p[kk]);
        }
        _mm512_storeu_ps(s + j, _mm512_mul_ps(sum_lanes16(p), _mm512_set1_ps(scale)));
    }
    for (; j < n; j++, k += stride) {
        float d = kv_f16 ? dot16((const uint16_t *)(const void *)k, q, hd) : dot32((const float *)(const void *)k, q, hd);
        s[j] = d * scale;
    }
}

#define VF_LANES 16
#define HEAD_VECS 4 /* 4 heads x 4 accumulators and 4 values: AVX-512 has 32 registers */
INL vf vf_loadu(const float *p) { return _mm512_loadu_ps(p); }
INL void vf_storeu(float *p, vf a) { _mm512_storeu_ps(p, a); }
INL vf kv_lanes(const uint8_t *row, int kv_f16, int64_t i) { return load_kv16(row, kv_f16, i, 0xffff); }

#include "x86_attn_values.inc"

/* Each output element sees o + w[0] v0, then + w[1] v1, ...: axpy's
 * arithmetic, with the output kept in registers across the keys
 * (attn_values_wide, 64 elements at once); a ragged end goes through
 * masked vectors. */
static TGT void attn_values(float *o, const float *w, const void *values, size_t stride, int kv_f16, int64_t n,
                            int64_t hd) {
    const uint8_t *v = values;
    for (int64_t i = attn_values_wide(o, w, v, stride, kv_f16, n, hd); i < hd; i += 16) {
        __mmask16 m = lanes_of(hd - i);
        __m512 acc = _mm512_maskz_loadu_ps(m, o + i);
        const uint8_t *p = v;
        for (int64_t j = 0; j < n; j++, p += stride)
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(w[j]), load_kv16(p, kv_f16, i, m)));
        _mm512_mask_storeu_ps(o + i, m, acc);
    }
}

/* ---- attention over the query heads of one kv head (F16 cache) ------------------------------ */

/* nq (1..4) heads at a time, keys in tiles of 16 / nq: each 16 halves of a
 * key are converted once and multiplied into every head's partial dot, and
 * the tile's sixteen partial dots (key-major) are reduced together as
 * attn_scores reduces its sixteen keys. The keys left over use the dot. */
INL void scores_heads_tile(float *s, int64_t ld_s, const uint8_t *k, size_t stride, int64_t n, const float *q,
                           int64_t ld_q, const int nq, int64_t hd, float scale) {
    const int kt = 16 / nq;
    __m512i pick[4]; /* lane l <- lane l nq + h: head h's scores, key after key */
    UNROLL
    for (int h = 0; h < nq; h++)
        pick[h] = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                      _mm512_set1_epi32(nq)),
                                   _mm512_set1_epi32(h));
    int64_t j = 0;
    for (; j + kt <= n; j += kt) {
        __m512 p[16];
        UNROLL
        for (int e = 0; e < 16; e++) p[e] = _mm512_setzero_ps();
        for (int64_t i = 0; i < hd; i += 16) {
            const __mmask16 m = lanes_of(hd - i);
            __m512 qv[4];
            UNROLL
            for (int h = 0; h < nq; h++) qv[h] = _mm512_maskz_loadu_ps(m, q + h * ld_q + i);
            UNROLL
            for (int kk = 0; kk < kt; kk++) {
                const __m512 v = load_kv16(k + (size_t)(j + kk) * stride, 1, i, m);
                UNROLL
                for (int h = 0; h < nq; h++) p[kk * nq + h] = _mm512_fmadd_ps(v, qv[h], p[kk * nq + h]);
            }
        }
        const __m512 r = _mm512_mul_ps(sum_lanes16(p), _mm512_set1_ps(scale)); /* lane kk nq + h */
        UNROLL
        for (int h = 0; h < nq; h++) _mm512_mask_storeu_ps(s + h * ld_s + j, lanes_of(kt), _mm512_permutexvar_ps(pick[h], r));
    }
    for (; j < n; j++)
        for (int h = 0; h < nq; h++)
            s[h * ld_s + j] = dot16((const uint16_t *)(const void *)(k + (size_t)j * stride), q + h * ld_q, hd) * scale;
}

/* nq (1..4) heads at a time: the wide part 64 elements of each
 * (HEAD_VECS), the ragged end 16 (or fewer) at a time with the same
 * arithmetic. */
INL void values_heads_tile(float *o, int64_t ld_o, const float *w, int64_t ld_w, const uint8_t *v, size_t stride,
                           int64_t n, const int nq, int64_t hd) {
    for (int64_t i0 = attn_values_heads_wide(o, ld_o, w, ld_w, v, stride, n, nq, hd); i0 < hd; i0 += 16) {
        const __mmask16 m = lanes_of(hd - i0);
        __m512 acc[4];
        UNROLL
        for (int h = 0; h < nq; h++) acc[h] = _mm512_maskz_loadu_ps(m, o + h * ld_o + i0);
        const uint8_t *p = v;
        for (int64_t j = 0; j < n; j++, p += stride) {
            const __m512 x = load_kv16(p, 1, i0, m);
            UNROLL
            for (int h = 0; h < nq; h++) acc[h] = _mm512_add_ps(acc[h], _mm512_mul_ps(_mm512_set1_ps(w[h * ld_w + j]), x));
        }
        UNROLL
        for (int h = 0; h < nq; h++) _mm512_mask_storeu_ps(o + h * ld_o + i0, m, acc[h]);
    }
}

#include "x86_attn_heads.inc"

static TGT void axpy_f32(float *y, float a, const float *x, int64_t n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m512 p = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), p));
    }
}

static TGT void axpy_f16(float *y, float a, const uint16_t *x, int64_t n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m512 p = _mm512_mul_ps(va, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), p));
    }
}

static TGT void scale_f32(float *y, float a, int64_t n) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), va));
    }
}

static TGT void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m512d ss = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1u);
        __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, x + i));
        ss = _mm512_add_pd(ss, _mm512_mul_pd(v, v)); /* products of floats are exact in double */
    }
    const float scale = (float)(1.0 / sqrt(_mm512_reduce_add_pd(ss) / (double)n + (double)eps));
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs), _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

/* e^x for every float: x = k ln2 + r with k integer and |r| <= ln2/2 (ln2
 * split in two so that k ln2 is exact enough), e^r by its Taylor series to
 * r^7 (relative error below 2^-25), scaled by 2^k (saturating to 0, inf). */
INL __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, k);
}

static TGT void silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, g + i);
        __m512 s = _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

INL vf vf_load_part(const float *x, int64_t count, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), lanes_of(count), x);
}
INL void vf_store_part(float *x, vf v, int64_t count) { _mm512_mask_storeu_ps(x, lanes_of(count), v); }
INL vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
INL float vf_max_lanes(vf v) { return _mm512_reduce_max_ps(v); }
INL vf vf_exp_nan(vf x) { return _mm512_mask_mov_ps(exp16(x), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); }
typedef __m512d vd;
INL vd vd_zero(void) { return _mm512_setzero_pd(); }
INL vd vd_add_lanes(vd acc, vf v) {
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return _mm512_add_pd(acc, _mm512_add_pd(lo, hi));
}
INL double vd_sum(vd acc) { return _mm512_reduce_add_pd(acc); }

#include "x86_softmax.inc"

static TGT void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}

static TGT void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
    }
}

static TGT void bf16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = lanes_of(n - i);
        __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i)), 16);
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(v));
    }
}

/* ---- the table ---------------------------------------------------------------------- */

#define X86_LEVEL_NAME "avx512"
#define X86_LEVEL_TABLE wisp_kernels_avx512
#include "x86_table.inc"

#endif
