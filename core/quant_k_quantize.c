/* Weight quantizers of the K-quants (Q2_K ... Q6_K). These are wisp's own:
 * they produce valid GGML blocks but not llama.cpp's exact bytes.
 *
 * A super-block is quantized in three steps:
 *  1. each sub-block gets a least-squares fit of its own (quant_fit.c):
 *     scale and min for Q2_K/Q4_K/Q5_K (x ~ s*q - m), a signed scale for
 *     Q3_K/Q6_K (x ~ s*q);
 *  2. those per-sub-block scales (and mins) are themselves quantized to the
 *     small integers the format stores, against one fp16 super-block scale;
 *  3. each sub-block is refined with its scale now on the integer grid: the
 *     levels are re-rounded, the least-squares scale (and min) for those levels
 *     is re-snapped to the neighbouring grid points, and the best pair kept,
 *     until the error stops falling.
 * Measured errors are in tests/unit/test_quant.c. */
#include "quant.h"

#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define QK_K WISP_QK_K
#define REFINE_ROUNDS 4

/* Largest value of v[0..n-1] (0 if none is positive). */
static float max_of(const float *v, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* ---- affine super-blocks (Q2_K, Q4_K, Q5_K): x ~ (D*sc)*q - (DM*mn) -------- */

typedef struct affine_sb {
    uint16_t d, dmin;   /* fp16 super-block scales */
    uint8_t sc[16];     /* per sub-block integer scale, 0..scale_max */
    uint8_t mn[16];     /* per sub-block integer min, 0..scale_max */
    uint8_t q[QK_K];    /* levels 0..qmax */
} affine_sb;

/* Levels of x for integer scale/min (sc, mn) and the error they leave. */
static float affine_levels(const float *x, int n, int qmax, float D, float DM, int sc, int mn, uint8_t *q) {
    const float s = D * (float)sc, m = DM * (float)mn;
    const float is = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < n; i++) q[i] = (uint8_t)wisp_round_clamp((x[i] + m) * is, 0, qmax);
    return wisp_affine_error(x, n, q, s, -m);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Floor of v as an int in [lo, hi] (NaN gives lo). */
static int floor_clamp(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    int t = (int)v; /* truncates toward zero */
    if ((float)t > v) t--;
    return t;
}

static void refine_affine(const float *x, int n, int qmax, int scale_max, float D, float DM, uint8_t *sc,
                          uint8_t *mn, uint8_t *q) {
    uint8_t tmp[32];
    float err = affine_levels(x, n, qmax, D, DM, *sc, *mn, q);
    for (int r = 0; r < REFINE_ROUNDS; r++) {
        float s, b;
        wisp_solve_affine(x, n, q, true, &s, &b);
        const int c0 = D > 0.0f ? floor_clamp(s / D, 0, scale_max) : 0;
        const int m0 = DM > 0.0f ? floor_clamp(-b / DM, 0, scale_max) : 0;
        int best_c = *sc, best_m = *mn;
        float best = err;
        for (int dc = 0; dc <= 1; dc++) {
            for (int dm = 0; dm <= 1; dm++) {
                const int c = clampi(c0 + dc, 0, scale_max), m = clampi(m0 + dm, 0, scale_max);
                const float e = affine_levels(x, n, qmax, D, DM, c, m, tmp);
                if (e < best) {
                    best = e;
                    best_c = c;
                    best_m = m;
                }
            }
        }
        if (!(best < err)) break;
        err = affine_levels(x, n, qmax, D, DM, best_c, best_m, q);
        *sc = (uint8_t)best_c;
        *mn = (uint8_t)best_m;
    }
}

static void quantize_affine_sb(const float *x, int sub_len, int qmax, int scale_max, affine_sb *out) {
    const int n_sub = QK_K / sub_len;
    float s[16], m[16];
    for (int j = 0; j < n_sub; j++) {
        float b;
        s[j] = wisp_fit_affine(x + j * sub_len, sub_len, qmax, true, out->q + j * sub_len, &b);
        m[j] = -b;
    }
    out->d = wisp_f16_scale(max_of(s, n_sub) / (float)scale_max);
    out->dmin = wisp_f16_scale(max_of(m, n_sub) / (float)scale_max);
    const float D = wisp_f16_to_f32(out->d), DM = wisp_f16_to_f32(out->dmin);
    for (int j = 0; j < n_sub; j++) {
        out->sc[j] = (uint8_t)(D > 0.0f ? wisp_round_clamp(s[j] / D, 0, scale_max) : 0);
        out->mn[j] = (uint8_t)(DM > 0.0f ? wisp_round_clamp(m[j] / DM, 0, scale_max) : 0);
        refine_affine(x + j * sub_len, sub_len, qmax, scale_max, D, DM, &out->sc[j], &out->mn[j],
                      out->q + j * sub_len);
    }
}

/* ---- symmetric super-blocks (Q3_K, Q6_K): x ~ (D*sc)*q ------------------------ */

typedef struct symmetric_sb {
    uint16_t d;
    int8_t sc[16]; /* per sub-block integer scale, smin..smax */
    int8_t q[QK_K];
} symmetric_sb;

static float symmetric_levels(const float *x, int n, int qmin, int qmax, float D, int sc, int8_t *q) {
    const float s = D * (float)sc;
    const float is = s != 0.0f ? 1.0f / s : 0.0f;
    float e = 0.0f;
    for (int i = 0; i < n; i++) {
        const int v = wisp_round_clamp(x[i] * is, qmin, qmax);
        q[i] = (int8_t)v;
        const float d = s * (float)v - x[i];
        e += d * d;
    }
    return e;
}

static void refine_symmetric(const float *x, int n, int qmin, int qmax, int smin, int smax, float D, int8_t *sc,
                             int8_t *q) {
    int8_t tmp[16];
    float err = symmetric_levels(x, n, qmin, qmax, D, *sc, q);
    for (int r = 0; r < REFINE_ROUNDS && D != 0.0f; r++) {
        float sxq = 0.0f, sqq = 0.0f;
        for (int i = 0; i < n; i++) {
            sxq += x[i] * (float)q[i];
            sqq += (float)(q[i] * q[i]);
        }
        if (!(sqq > 0.0f)) break;
        const int c0 = floor_clamp(sxq / sqq / D, smin, smax);
        int best_c = *sc;
        float best = err;
        for (int dc = 0; dc <= 1; dc++) {
            const int c = clampi(c0 + dc, smin, smax);
            const float e = symmetric_levels(x, n, qmin, qmax, D, c, tmp);
            if (e < best) {
                best = e;
                best_c = c;
            }
        }
        if (!(best < err)) break;
        err = symmetric_levels(x, n, qmin, qmax, D, best_c, q);
        *sc = (int8_t)best_c;
    }
}

/* Sub-blocks of 16; levels qmin..qmax; integer scales smin..smax. */
static void quantize_symmetric_sb(const float *x, int qmin, int qmax, int smin, int smax, symmetric_sb *out) {
    float s[16];
    int8_t isc[16];
    for (int j = 0; j < 16; j++) s[j] = wisp_fit_symmetric(x + 16 * j, 16, qmin, qmax, out->q + 16 * j);
    /* the scales are a 16-vector quantized the same way */
    out->d = wisp_f16_scale(wisp_fit_symmetric(s, 16, smin, smax, isc));
    const float D = wisp_f16_to_f32(out->d);
    for (int j = 0; j < 16; j++) {
        out->sc[j] = (int8_t)(D != 0.0f ? wisp_round_clamp(s[j] / D, smin, smax) : 0);
        refine_symmetric(x + 16 * j, 16, qmin, qmax, smin, smax, D, &out->sc[j], out->q + 16 * j);
    }
}

/* ---- packing ------------------------------------------------------------------ */

void wisp_quantize_q2_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    affine_sb sb;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q2_K_BYTES, src += QK_K) {
        quantize_affine_sb(src, 16, 3, 15, &sb);
        for (int j = 0; j < 16; j++) b[j] = (uint8_t)(sb.sc[j] | (sb.mn[j] << 4));
        uint8_t *qs = b + 16;
        memset(qs, 0, 64);
        for (int e = 0; e < QK_K; e++)
            qs[32 * (e / 128) + e % 32] |= (uint8_t)(sb.q[e] << (2 * ((e % 128) / 32)));
        wisp_store_u16(b + 80, sb.d);
        wisp_store_u16(b + 82, sb.dmin);
    }
}

void wisp_quantize_q3_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    symmetric_sb sb;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q3_K_BYTES, src += QK_K) {
        quantize_symmetric_sb(src, -4, 3, -32, 31, &sb);
        uint8_t *hmask = b, *qs = b + 32, *scales = b + 96;
        memset(b, 0, 108);
        for (int e = 0; e < QK_K; e++) {
            const int u = sb.q[e] + 4; /* 0..7 */
            qs[32 * (e / 128) + e % 32] |= (uint8_t)((u & 3) << (2 * ((e % 128) / 32)));
            hmask[e % 32] |= (uint8_t)((u >> 2) << (e / 32));
        }
        for (int j = 0; j < 16; j++) {
            const int v = sb.sc[j] + 32; /* 0..63 */
            if (j < 8) scales[j] |= (uint8_t)(v & 0x0f);
            else scales[j - 8] |= (uint8_t)((v & 0x0f) << 4);
            scales[8 + j % 4] |= (uint8_t)((v >> 4) << (2 * (j / 4)));
        }
        wisp_store_u16(b + 108, sb.d);
    }
}

/* Q4_K/Q5_K scale+min packing (inverse of q4_K_scale_min in quant_k.c). */
static void pack_q4_K_scales(uint8_t *s, const uint8_t *sc, const uint8_t *mn) {
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
    }
}

void wisp_quantize_q4_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    affine_sb sb;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q4_K_BYTES, src += QK_K) {
        quantize_affine_sb(src, 32, 15, 63, &sb);
        wisp_store_u16(b, sb.d);
        wisp_store_u16(b + 2, sb.dmin);
        pack_q4_K_scales(b + 4, sb.sc, sb.mn);
        uint8_t *qs = b + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) qs[32 * c + l] = (uint8_t)(sb.q[64 * c + l] | (sb.q[64 * c + 32 + l] << 4));
    }
}

void wisp_quantize_q5_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    affine_sb sb;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q5_K_BYTES, src += QK_K) {
        quantize_affine_sb(src, 32, 31, 63, &sb);
        wisp_store_u16(b, sb.d);
        wisp_store_u16(b + 2, sb.dmin);
        pack_q4_K_scales(b + 4, sb.sc, sb.mn);
        uint8_t *qh = b + 16, *qs = b + 48;
        memset(qh, 0, 32);
        for (int e = 0; e < QK_K; e++) qh[e % 32] |= (uint8_t)((sb.q[e] >> 4) << (e / 32));
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                qs[32 * c + l] = (uint8_t)((sb.q[64 * c + l] & 0x0f) | ((sb.q[64 * c + 32 + l] & 0x0f) << 4));
    }
}

void wisp_quantize_q6_K(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    symmetric_sb sb;
    for (int64_t i = 0; i < n / QK_K; i++, b += WISP_Q6_K_BYTES, src += QK_K) {
        quantize_symmetric_sb(src, -32, 31, -128, 127, &sb);
        uint8_t *ql = b, *qh = b + 128;
        memset(b, 0, 192);
        for (int e = 0; e < QK_K; e++) {
            const int u = sb.q[e] + 32; /* 0..63 */
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            ql[64 * h + 32 * (k % 2) + l] |= (uint8_t)((u & 0x0f) << (4 * (k / 2)));
            qh[32 * h + l] |= (uint8_t)((u >> 4) << (2 * k));
        }
        memcpy(b + 192, sb.sc, 16);
        wisp_store_u16(b + 208, sb.d);
    }
}
