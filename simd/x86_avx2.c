/* The AVX2 level (AVX2 with FMA and F16C): every matmul, the activation
 * quantizers and the float primitives. Accuracy against the scalar
 * reference is stated in x86.h.
 *
 * The quantized matmuls are x86_quant.inc over the vocabulary below: 8
 * weight rows per group (one per 32-bit lane of a ymm register). Without
 * VNNI the four-byte products come from VPMADDUBSW (unsigned x signed
 * bytes to int16 pairs) and VPMADDWD (pairs to int32). VPMADDUBSW
 * saturates, so weights are kept small: unsigned levels below 64 are
 * multiplied as they are (int16 pairs summed over as many dwords as cannot
 * overflow before widening), and the two 8-bit types (Q8_0, IQ4_NL) stay
 * signed and use the sign trick, |w| times a * sign(w), whose pair sums
 * stay within int16 for activations in [-127, 127]. Decode of Q4_0 and
 * Q8_0 is x86_decode.inc, of Q5_K and Q6_K x86_kdecode.inc. */
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

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT
/* Small fixed loops over registers must be unrolled, or -O2 keeps the
 * register arrays in memory. */
#define UNROLL _Pragma("GCC unroll 16")

#define ROWS 8          /* weight rows per group: one per lane */
#define TILE 4          /* activation rows per pass over a block of weight rows */
#define ACT_CACHE 4096  /* per-block activation facts kept on the stack */
#define SIGNED8 1       /* Q8_0 and IQ4_NL stay signed (the sign trick) */

/* ---- the vocabulary of x86_quant.inc -------------------------------------------------- */

typedef __m256i vi;
typedef __m256 vf;

INL vi vi_zero(void) { return _mm256_setzero_si256(); }
INL vi vi_set8(char v) { return _mm256_set1_epi8(v); }
INL vi vi_set32(int32_t v) { return _mm256_set1_epi32(v); }
INL vi vi_bytes16(char b0, char b1, char b2, char b3, char b4, char b5, char b6, char b7, char b8, char b9, char b10,
                  char b11, char b12, char b13, char b14, char b15) {
    return _mm256_broadcastsi128_si256(_mm_setr_epi8(b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15));
}
INL vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
INL vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
INL vi vi_xor(vi a, vi b) { return _mm256_xor_si256(a, b); }
INL vi vi_add8(vi a, vi b) { return _mm256_add_epi8(a, b); }
INL vi vi_add32(vi a, vi b) { return _mm256_add_epi32(a, b); }
INL vi vi_sub32(vi a, vi b) { return _mm256_sub_epi32(a, b); }
INL vi vi_mul32(vi a, vi b) { return _mm256_mullo_epi32(a, b); }
INL vi vi_madd16(vi a, vi b) { return _mm256_madd_epi16(a, b); }
INL vi vi_shuffle8(vi table, vi idx) { return _mm256_shuffle_epi8(table, idx); }
INL vi vi_abs8(vi a) { return _mm256_abs_epi8(a); }
#define vi_shr16(v, n) _mm256_srli_epi16(v, n)
#define vi_shl16(v, n) _mm256_slli_epi16(v, n)
#define vi_shr32(v, n) _mm256_srli_epi32(v, n)
#define vi_shl32(v, n) _mm256_slli_epi32(v, n)
#define vi_sar32(v, n) _mm256_srai_epi32(v, n)
INL vf vf_zero(void) { return _mm256_setzero_ps(); }
INL vf vf_set(float v) { return _mm256_set1_ps(v); }
INL vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
INL vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
INL vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
INL vf vf_cvt(vi a) { return _mm256_cvtepi32_ps(a); }
INL vi vi_load(const void *p) { return _mm256_load_si256((const __m256i *)p); }
INL vf vf_load(const float *p) { return _mm256_load_ps(p); }
INL vf vf_unpacklo(vf a, vf b) { return _mm256_unpacklo_ps(a, b); }
INL vf vf_unpackhi(vf a, vf b) { return _mm256_unpackhi_ps(a, b); }
INL vf vf_lows(vf a, vf b) { return _mm256_shuffle_ps(a, b, 0x44); }
INL vf vf_highs(vf a, vf b) { return _mm256_shuffle_ps(a, b, 0xee); }
INL vi vi_unpacklo32(vi a, vi b) { return _mm256_unpacklo_epi32(a, b); }
INL vi vi_unpackhi32(vi a, vi b) { return _mm256_unpackhi_epi32(a, b); }
INL vi vi_unpacklo64(vi a, vi b) { return _mm256_unpacklo_epi64(a, b); }
INL vi vi_unpackhi64(vi a, vi b) { return _mm256_unpackhi_epi64(a, b); }

INL vi add_where(vi w, vi v, vi sel, char add) {
    vi set = _mm256_cmpeq_epi8(_mm256_and_si256(v, sel), _mm256_setzero_si256());
    return _mm256_add_epi8(w, _mm256_andnot_si256(set, _mm256_set1_epi8(add)));
}

INL vi bcast_act(const uint8_t *p) { return _mm256_set1_epi32((int32_t)wisp_load_u32(p)); }

/* acc + per-lane dots of n dwords of unsigned weights below 2^bits with the
 * activation levels at q, summing int16 pairs as long as they cannot
 * overflow before widening: depth * 2 * (2^bits - 1) * 127 < 2^15. */
INL vi dot_u(vi acc, const vi *w, const uint8_t *q, int n, int bits) {
    const int depth = bits <= 4 ? 8 : bits == 5 ? 4 : 2;
    const vi ones = _mm256_set1_epi16(1);
    UNROLL
    for (int k0 = 0; k0 < n; k0 += depth) {
        vi s = _mm256_maddubs_epi16(w[k0], bcast_act(q + 4 * k0));
        UNROLL
        for (int k = 1; k < 8; k++)
            if (k < depth && k0 + k < n) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[k0 + k], bcast_act(q + 4 * (k0 + k))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, ones));
    }
    return acc;
}

/* The same for signed 8-bit weights given as |w| and w. */
INL vi dot_s8(vi acc, const vi *wabs, const vi *w, const uint8_t *q) {
    const vi ones = _mm256_set1_epi16(1);
    UNROLL
    for (int k = 0; k < 8; k++) {
        vi p = _mm256_maddubs_epi16(wabs[k], _mm256_sign_epi8(bcast_act(q + 4 * k), w[k]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    return acc;
}

/* A group of 8 weight rows; rows past the end repeat the last row. */
typedef struct group {
    const uint8_t *row[ROWS];
    int n;  /* rows whose results are stored */
} group;

INL void group_init(group *g, const wisp_matmul_args *a, int64_t r, int64_t r1) {
    int n = r1 - r < ROWS ? (int)(r1 - r) : ROWS;
    UNROLL
    for (int i = 0; i < ROWS; i++) g->row[i] = a->w + (size_t)(r + (i < n ? i : n - 1)) * a->w_row_bytes;
    g->n = n;
}

/* The first n lanes of v to x (all 8 when n >= 8). */
INL void store_x8(float *x, __m256 v, int64_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(x, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(x, tmp, sizeof(float) * (size_t)n);
}

INL void store_rows(float *y, const group *g, vf v) { store_x8(y, v, g->n); }

/* The 32-bit field at byte `at` of every row, one per lane (plain loads
 * through the stack: measured faster than VPGATHERDD on Zen 4). */
INL vi gather32(const group *g, size_t at) {
    int32_t v[ROWS];
    UNROLL
    for (int i = 0; i < ROWS; i++) v[i] = (int32_t)wisp_load_u32(g->row[i] + at);
    return _mm256_loadu_si256((const __m256i *)(const void *)v);
}

/* fp16 in the low (high = 0) or high half of 32-bit lanes, as floats. */
INL vf f16_lanes(vi v, int high) {
    v = high ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
    __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm256_cvtph_ps(h);
}

INL vi load128x2(const uint8_t *a, const uint8_t *b) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)),
                                   _mm_loadu_si128((const __m128i *)(const void *)b), 1);
}

/* q[k], lane i = bytes 4k..4k+3 of the 16 bytes at row i + at. */
INL void transpose_x4(const group *g, size_t at, vi q[4]) {
    const uint8_t *const *r = g->row;
    vi z0 = load128x2(r[0] + at, r[4] + at), z1 = load128x2(r[1] + at, r[5] + at);
    vi z2 = load128x2(r[2] + at, r[6] + at), z3 = load128x2(r[3] + at, r[7] + at);
    vi t0 = _mm256_unpacklo_epi32(z0, z1), t1 = _mm256_unpackhi_epi32(z0, z1);
    vi t2 = _mm256_unpacklo_epi32(z2, z3), t3 = _mm256_unpackhi_epi32(z2, z3);
    q[0] = _mm256_unpacklo_epi64(t0, t2);
    q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3);
    q[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* The same for 32 bytes per row (k < 8). */
INL void transpose_x8(const group *g, size_t at, vi q[8]) {
    transpose_x4(g, at, q);
    transpose_x4(g, at + 16, q + 4);
}

#include "x86_quant.inc"
#include "x86_dequant_t.inc"

/* ---- decode (x86_decode.inc) ----------------------------------------------------------- */

#define TGT_DEC TGT
#define INL_DEC INL
#define DEC_UNIT 2 /* blocks per vector: one per 128-bit lane */

INL bool dec_available(void) { return true; }

/* Nothing to set up: the blocks' bytes are placed by the loads. */
typedef int dec_tables;
INL void dec_tables_init(const int type, dec_tables *t) {
    (void)type;
    *t = 0;
}

/* The dots of the chunk at p0 with its activation levels lv: v[q], 128-bit
 * lane l = 4 partial sums of block 2q + l; returns the chunk's scales as
 * floats in lane order. Q8_0 stays signed (the sign trick, each half
 * widened to 32 bits before they are added, as |w| = 128 would overflow 16
 * bits); Q4_0's two 16-bit halves fit (2 * 2 * 15 * 127). */
INL vf dec_units(const int type, const dec_tables *tb, const uint8_t *lv, const uint8_t *p0, vi v[4]) {
    (void)tb;
    const size_t bytes = (size_t)legacy_bytes(type);
    const vi m4 = vi_set8(0x0f), ones = _mm256_set1_epi16(1);
    uint16_t dh[8];
    UNROLL
    for (int q = 0; q < 4; q++) { /* blocks 2q (lane 0) and 2q + 1 (lane 1) */
        const uint8_t *b0 = p0 + 2 * (size_t)q * bytes, *b1 = b0 + bytes;
        const vi al = _mm256_load_si256((const __m256i *)(const void *)(lv + 64 * q));
        const vi ah = _mm256_load_si256((const __m256i *)(const void *)(lv + 64 * q + 32));
        dh[q] = wisp_load_u16(b0);
        dh[4 + q] = wisp_load_u16(b1);
        if (type == WISP_TYPE_Q4_0) {
            vi x = load128x2(b0 + 2, b1 + 2);
            vi lo = vi_and(x, m4), hi = vi_and(vi_shr16(x, 4), m4);
            v[q] = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, al), _mm256_maddubs_epi16(hi, ah)), ones);
        } else {
            vi lo = load128x2(b0 + 2, b1 + 2), hi = load128x2(b0 + 18, b1 + 18);
            vi pl = _mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(al, lo));
            vi ph = _mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(ah, hi));
            v[q] = vi_add32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones));
        }
    }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh));
}

/* The cross-lane step of dec_transpose: w[4g + k], 128-bit lane l = rows
 * 4g..4g+3 at element 4l + k, to u[e] = element e of every row. */
INL void dec_transpose_lanes(const vf w[8], vf u[8]) {
    UNROLL
    for (int k = 0; k < 4; k++) {
        u[k] = _mm256_permute2f128_ps(w[k], w[4 + k], 0x20);
        u[4 + k] = _mm256_permute2f128_ps(w[k], w[4 + k], 0x31);
    }
}

#include "x86_decode.inc"

/* ---- K-quant decode (x86_kdecode.inc: AVX2 instructions at both levels) ------------------- */

INL __m256i kdec_madd_add(__m256i acc, __m256i a, __m256i b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }

#include "x86_kdecode.inc"

/* ---- shared by the float kernels below ------------------------------------------------- */

INL float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INL int32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---- float weights (F32, F16, BF16) --------------------------------------------------- */

/* 8 weights from element i of a row as floats; `n` (1..8) left are read
 * through a zero-padded copy so nothing past the row is touched. */
INL __m256 load_w8(const int type, const uint8_t *row, int64_t i, int64_t n) {
    const size_t elem = type == WISP_TYPE_F32 ? 4 : 2;
    uint8_t tmp[32];
    const uint8_t *p = row + (size_t)i * elem;
    if (n < 8) {
        memset(tmp, 0, sizeof tmp);
        memcpy(tmp, p, (size_t)n * elem);
        p = tmp;
    }
    switch (type) {
    case WISP_TYPE_F32: return _mm256_loadu_ps((const float *)(const void *)p);
    case WISP_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    default:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
    }
}

INL __m256 load_x8(const float *x, int64_t n) {
    if (n >= 8) return _mm256_loadu_ps(x);
    float tmp[8] = {0};
    memcpy(tmp, x, sizeof(float) * (size_t)n);
    return _mm256_loadu_ps(tmp);
}

#define FR 4
#define FT 3

INL void float_tile(const int type, const int ft, const wisp_matmul_args *a, int64_t r, int nr, int64_t t, int nt) {
    const uint8_t *w[FR];
    const float *x[FT];
    UNROLL
    for (int i = 0; i < FR; i++) w[i] = a->w + (size_t)(r + (i < nr ? i : nr - 1)) * a->w_row_bytes;
    UNROLL
    for (int j = 0; j < FT; j++)
        x[j] = (const float *)(const void *)(a->x + (size_t)(t + (j < nt ? j : nt - 1)) * a->x_row_bytes);
    __m256 acc[FR][FT];
    UNROLL
    for (int i = 0; i < FR; i++) {
        UNROLL
        for (int j = 0; j < ft; j++) acc[i][j] = _mm256_setzero_ps();
    }
    for (int64_t e = 0; e < a->n_in; e += 8) {
        const int64_t left = a->n_in - e;
        __m256 xv[FT];
        UNROLL
        for (int j = 0; j < ft; j++) xv[j] = load_x8(x[j] + e, left);
        UNROLL
        for (int i = 0; i < FR; i++) {
            __m256 wv = load_w8(type, w[i], e, left);
            UNROLL
            for (int j = 0; j < ft; j++) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < nt; j++) a->y[(t + j) * a->ldy + r + i] = hsum8(acc[i][j]);
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

/* ---- activation quantization ----------------------------------------------------------- */

/* round half away from zero (wisp_round_away); NaN -> 0, +-inf stay */
INL __m256 round_away(__m256 v) {
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_sub_ps(v, t);
    const __m256 one = _mm256_set1_ps(1.0f);
    t = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(r, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one));
    t = _mm256_sub_ps(t, _mm256_and_ps(_mm256_cmp_ps(r, _mm256_set1_ps(-0.5f), _CMP_LE_OQ), one));
    return _mm256_and_ps(t, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
}

/* 8 int32 lanes -> 8 int8 at out (values in [-127, 127]). */
INL void store_i8x8(int8_t *out, __m256i v) {
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)(void *)out, _mm_packs_epi16(w, w));
}

INL float q8_block(const float *x, int8_t *qs, int32_t *sum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], m = _mm256_setzero_ps();
    UNROLL
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(_mm256_and_ps(v[i], abs_mask), m); /* NaN lanes keep m */
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    __m256i total = _mm256_setzero_si256();
    UNROLL
    for (int i = 0; i < 4; i++) {
        __m256 q = _mm256_min_ps(_mm256_max_ps(round_away(_mm256_mul_ps(v[i], vid)), lo), hi);
        __m256i iq = _mm256_cvtps_epi32(q);
        store_i8x8(qs + 8 * i, iq);
        total = _mm256_add_epi32(total, iq);
    }
    if (sum) *sum = hsum8_epi32(total);
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
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / WISP_QK_K; i++, b += WISP_Q8_K_BYTES, x += WISP_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < WISP_QK_K; j += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), m);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        const float amax = _mm_cvtss_f32(h);
        float max = 0.0f;
        for (int j = 0; j < WISP_QK_K; j += 8) { /* the reference keeps the first of largest magnitude */
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        int8_t *qs = (int8_t *)(b + Q8K_QS);
        float d = 0.0f;
        if (amax == 0.0f || !(amax <= FLT_MAX)) {
            memset(qs, 0, WISP_QK_K);
        } else {
            const float iscale = -127.0f / max;
            const __m256 vs = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
            for (int j = 0; j < WISP_QK_K; j += 8) {
                __m256 v = _mm256_mul_ps(vs, _mm256_loadu_ps(x + j));
                __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm256_blendv_ps(lo, r, _mm256_cmp_ps(v, lo, _CMP_GT_OQ)); /* not above lo (NaN too): lo */
                r = _mm256_blendv_ps(r, hi, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
                store_i8x8(qs + j, _mm256_cvtps_epi32(r));
            }
            d = 1.0f / iscale;
        }
        wisp_store_f32(b + Q8K_D, d);
        for (int s = 0; s < WISP_QK_K / 16; s++) {
            __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(qs + 16 * s)));
            int16_t sum = (int16_t)hsum8_epi32(_mm256_madd_epi16(v, _mm256_set1_epi16(1)));
            memcpy(b + Q8K_BSUMS + 2 * s, &sum, 2);
        }
    }
}

/* ---- float primitives --------------------------------------------------------------------- */

INL float dot32(const float *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(load_x8(a + i, n - i), load_x8(b + i, n - i), acc);
    return hsum8(acc);
}

INL float dot16(const uint16_t *a, const float *b, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8)
        acc = _mm256_fmadd_ps(load_w8(WISP_TYPE_F16, (const uint8_t *)(const void *)a, i, n - i), load_x8(b + i, n - i), acc);
    return hsum8(acc);
}

static TGT float dot_f32(const float *a, const float *b, int64_t n) { return dot32(a, b, n); }
static TGT float dot_f16_f32(const uint16_t *a, const float *b, int64_t n) { return dot16(a, b, n); }

/* Lane k of the result: the sum of the 8 lanes of p[k]. */
INL __m256 sum_lanes8(const __m256 p[8]) {
    __m256 t[4], u[2];
    UNROLL
    for (int i = 0; i < 4; i++)
        t[i] = _mm256_add_ps(_mm256_unpacklo_ps(p[2 * i], p[2 * i + 1]), _mm256_unpackhi_ps(p[2 * i], p[2 * i + 1]));
    UNROLL
    for (int i = 0; i < 2; i++) {
        __m256d a = _mm256_castps_pd(t[2 * i]), b = _mm256_castps_pd(t[2 * i + 1]);
        u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20), _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

/* Eight keys at a time, reduced together; the few keys left use the dot. */
static TGT void attn_scores(float *s, const void *keys, size_t stride, int kv_f16, int64_t n, const float *q, int64_t hd,
                            float scale) {
    const uint8_t *k = keys;
    const int type = kv_f16 ? WISP_TYPE_F16 : WISP_TYPE_F32;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8, k += 8 * stride) {
        __m256 p[8];
        UNROLL
        for (int kk = 0; kk < 8; kk++) p[kk] = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd; i += 8) {
            __m256 qv = load_x8(q + i, hd - i);
            UNROLL
            for (int kk = 0; kk < 8; kk++) p[kk] = _mm256_fmadd_ps(load_w8(type, k + (size_t)kk * stride, i, hd - i), qv, p[kk]);
        }
        _mm256_storeu_ps(s + j, _mm256_mul_ps(sum_lanes8(p), _mm256_set1_ps(scale)));
    }
    for (; j < n; j++, k += stride) {
        float d = kv_f16 ? dot16((const uint16_t *)(const void *)k, q, hd) : dot32((const float *)(const void *)k, q, hd);
        s[j] = d * scale;
    }
}

#define VF_LANES 8
#define HEAD_VECS 2 /* 4 heads x 2 accumulators, 2 values and a weight: AVX2 has 16 registers */
INL vf vf_loadu(const float *p) { return _mm256_loadu_ps(p); }
INL void vf_storeu(float *p, vf a) { _mm256_storeu_ps(p, a); }
INL vf kv_lanes(const uint8_t *row, int kv_f16, int64_t i) {
    return load_w8(kv_f16 ? WISP_TYPE_F16 : WISP_TYPE_F32, row, i, 8);
}

#include "x86_attn_values.inc"

/* axpy's arithmetic per element, the output held in registers across keys
 * (attn_values_wide, 32 elements at once); a ragged end of the row goes
 * through padded copies. */
static TGT void attn_values(float *o, const float *w, const void *values, size_t stride, int kv_f16, int64_t n,
                            int64_t hd) {
    const uint8_t *v = values;
    const int type = kv_f16 ? WISP_TYPE_F16 : WISP_TYPE_F32;
    for (int64_t i = attn_values_wide(o, w, v, stride, kv_f16, n, hd); i < hd; i += 8) {
        const int64_t left = hd - i;
        __m256 acc = load_x8(o + i, left);
        const uint8_t *p = v;
        for (int64_t j = 0; j < n; j++, p += stride)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(w[j]), load_w8(type, p, i, left)));
        store_x8(o + i, acc, left);
    }
}

static TGT void axpy_f32(float *y, float a, const float *x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) {
        float p = a * x[i];
        y[i] = y[i] + p;
    }
}

static TGT void axpy_f16(float *y, float a, const uint16_t *x, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, xv)));
    }
    for (; i < n; i++) {
        float p = a * wisp_f16_to_f32(x[i]);
        y[i] = y[i] + p;
    }
}

static TGT void scale_f32(float *y, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
    for (; i < n; i++) y[i] *= a;
}

static TGT void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256d ss = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        ss = _mm256_add_pd(ss, _mm256_mul_pd(v, v));
    }
    __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(ss), _mm256_extractf128_pd(ss, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    for (; i < n; i++) sum += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(sum / (double)n + (double)eps));
    const __m256 vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) {
        float p = x[i] * scale;
        y[i] = p * w[i];
    }
}

/* e^x as in x86_avx512.c; 2^k is applied in two halves so that both are
 * normal floats for every k the clamp allows. */
INL __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i ki = _mm256_cvtps_epi32(k), k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static TGT void silu_mul(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    if (i < n) { /* the tail through padded copies, with the same arithmetic */
        __m256 v = load_x8(g + i, n - i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
        store_x8(g + i, _mm256_mul_ps(s, load_x8(u + i, n - i)), n - i);
    }
}

INL vf vf_load_part(const float *x, int64_t count, float fill) {
    float t[8];
    for (int l = 0; l < 8; l++) t[l] = l < count ? x[l] : fill;
    return _mm256_loadu_ps(t);
}
INL void vf_store_part(float *x, vf v, int64_t count) { store_x8(x, v, count); }
INL vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
INL float vf_max_lanes(vf v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
INL vf vf_exp_nan(vf x) { return _mm256_blendv_ps(exp8(x), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
typedef __m256d vd;
INL vd vd_zero(void) { return _mm256_setzero_pd(); }
INL vd vd_add_lanes(vd acc, vf v) {
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    return _mm256_add_pd(acc, _mm256_add_pd(lo, hi));
}
INL double vd_sum(vd acc) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "x86_softmax.inc"

static TGT void f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) y[i] = wisp_f32_to_f16(x[i]);
}

static TGT void f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++) y[i] = wisp_f16_to_f32(x[i]);
}

static TGT void bf16_to_f32(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(x + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) y[i] = wisp_bf16_to_f32(x[i]);
}

/* ---- attention over a kv head's query heads (F16 cache) ------------------------------- */

/* nq (1..4) heads at a time, kt = 8 / nq keys: each key's 8 elements are
 * converted once and multiplied into every head's accumulator, lane
 * kk nq + h of the reduction holding key kk's score for head h; each score
 * sees attn_scores' arithmetic (FMAs along the row, then the same 8-lane
 * reduction), and the few keys left use the dot. */
INL void scores_heads_tile(float *s, int64_t ld_s, const uint8_t *k, size_t stride, int64_t n, const float *q,
                           int64_t ld_q, const int nq, int64_t hd, float scale) {
    const int kt = 8 / nq;
    __m256i pick[4]; /* lane kk <- lane kk nq + h: head h's scores, key after key (lanes past kt unused) */
    UNROLL
    for (int h = 0; h < nq; h++)
        pick[h] = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32(nq)),
                                   _mm256_set1_epi32(h));
    int64_t j = 0;
    for (; j + kt <= n; j += kt) {
        __m256 p[8];
        UNROLL
        for (int e = 0; e < 8; e++) p[e] = _mm256_setzero_ps();
        for (int64_t i = 0; i < hd; i += 8) {
            __m256 qv[4];
            UNROLL
            for (int h = 0; h < nq; h++) qv[h] = load_x8(q + h * ld_q + i, hd - i);
            UNROLL
            for (int kk = 0; kk < kt; kk++) {
                const __m256 v = load_w8(WISP_TYPE_F16, k + (size_t)(j + kk) * stride, i, hd - i);
                UNROLL
                for (int h = 0; h < nq; h++) p[kk * nq + h] = _mm256_fmadd_ps(v, qv[h], p[kk * nq + h]);
            }
        }
        const __m256 r = _mm256_mul_ps(sum_lanes8(p), _mm256_set1_ps(scale));
        UNROLL
        for (int h = 0; h < nq; h++)
            store_x8(s + h * ld_s + j, _mm256_permutevar8x32_ps(r, pick[h]), kt);
    }
    for (; j < n; j++)
        for (int h = 0; h < nq; h++)
            s[h * ld_s + j] = dot16((const uint16_t *)(const void *)(k + (size_t)j * stride), q + h * ld_q, hd) * scale;
}

/* nq (1..4) heads at a time: the wide part 16 elements of each
 * (HEAD_VECS), the ragged end 8 (or fewer) at a time with the same
 * arithmetic. */
INL void values_heads_tile(float *o, int64_t ld_o, const float *w, int64_t ld_w, const uint8_t *v, size_t stride,
                           int64_t n, const int nq, int64_t hd) {
    for (int64_t i0 = attn_values_heads_wide(o, ld_o, w, ld_w, v, stride, n, nq, hd); i0 < hd; i0 += 8) {
        const int64_t left = hd - i0;
        __m256 acc[4];
        UNROLL
        for (int h = 0; h < nq; h++) acc[h] = load_x8(o + h * ld_o + i0, left);
        const uint8_t *p = v;
        for (int64_t j = 0; j < n; j++, p += stride) {
            const __m256 x = load_w8(WISP_TYPE_F16, p, i0, left);
            UNROLL
            for (int h = 0; h < nq; h++) acc[h] = _mm256_add_ps(acc[h], _mm256_mul_ps(_mm256_set1_ps(w[h * ld_w + j]), x));
        }
        UNROLL
        for (int h = 0; h < nq; h++) store_x8(o + h * ld_o + i0, acc[h], left);
    }
}

#include "x86_attn_heads.inc"

/* ---- the table ---------------------------------------------------------------------- */

#define X86_LEVEL_NAME "avx2"
#define X86_LEVEL_TABLE wisp_kernels_avx2
#include "x86_table.inc"

#endif
