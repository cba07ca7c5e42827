/* Least-squares fitting of one small group of weights to a quantization grid,
 * shared by every weight quantizer. Each fit scans a grid of candidate scales
 * (the group's extreme value landing near the outermost level, give or take
 * one level, so that clipping one outlier can buy finer steps for the rest),
 * keeps the candidate with the smallest squared error once the scale is re-fit
 * by least squares for its rounding, then alternates "round for this scale" /
 * "least-squares scale for these levels" until the error stops falling (each
 * step can only lower it). Groups are at most 256 values. */
#include "quant.h"

#include <float.h>
#include <math.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define FIT_MAX 256
#define GRID_STEPS 10  /* candidates at -GRID_STEPS..GRID_STEPS */
#define REFINE_ROUNDS 8

int wisp_nearest_in_table(const int8_t table[16], float v) {
    int lo = 0, hi = 15; /* find the first entry >= v */
    if (!(v > (float)table[0])) return 0;
    if (v >= (float)table[15]) return 15;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((float)table[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    /* table[lo-1] < v <= table[lo] */
    return (v - (float)table[lo - 1] < (float)table[lo] - v) ? lo - 1 : lo;
}

/* Value of largest magnitude (0 if all are 0 or x holds no finite value). */
static float extreme(const float *x, int n) {
    float amax = 0.0f, ext = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax && a <= FLT_MAX) {
            amax = a;
            ext = x[i];
        }
    }
    return ext;
}

/* ---- symmetric: x ~ s*q ------------------------------------------------- */

/* Levels for inverse scale `is`; returns sum(x*q) and sum(q*q). */
static void round_symmetric(const float *x, int n, float is, int qmin, int qmax, int8_t *q,
                            float *sxq, float *sqq) {
    float a = 0.0f, b = 0.0f;
    for (int i = 0; i < n; i++) {
        int v = wisp_round_clamp(x[i] * is, qmin, qmax);
        q[i] = (int8_t)v;
        a += x[i] * (float)v;
        b += (float)(v * v);
    }
    *sxq = a;
    *sqq = b;
}

/* Is (a_xq, a_qq) a better fit than (b_xq, b_qq)? The error of a fit is
 * sum(x^2) - sxq^2/sqq, so compare sxq^2/sqq. */
static bool better_ratio(float a_xq, float a_qq, float b_xq, float b_qq) {
    if (!(a_qq > 0.0f)) return false;
    if (!(b_qq > 0.0f)) return true;
    return a_xq * a_xq * b_qq > b_xq * b_xq * a_qq;
}

float wisp_fit_symmetric(const float *x, int n, int qmin, int qmax, int8_t *q) {
    int8_t tmp[FIT_MAX];
    float ext = extreme(x, n);
    if (ext == 0.0f || n > FIT_MAX) {
        for (int i = 0; i < n; i++) q[i] = 0;
        return 0.0f;
    }
    float best_xq = 0.0f, best_qq = 0.0f;
    const int sides[2] = {qmin, qmax};
    for (int sd = 0; sd < 2; sd++) {
        for (int k = -GRID_STEPS; k <= GRID_STEPS; k++) {
            float level = (float)sides[sd] + 0.1f * (float)k;
            if (level == 0.0f) continue;
            float sxq, sqq;
            round_symmetric(x, n, level / ext, qmin, qmax, tmp, &sxq, &sqq);
            if (better_ratio(sxq, sqq, best_xq, best_qq)) {
                best_xq = sxq;
                best_qq = sqq;
                for (int i = 0; i < n; i++) q[i] = tmp[i];
            }
        }
    }
    if (!(best_qq > 0.0f)) {
        for (int i = 0; i < n; i++) q[i] = 0;
        return 0.0f;
    }
    float s = best_xq / best_qq;
    for (int r = 0; r < REFINE_ROUNDS && s != 0.0f; r++) {
        float sxq, sqq;
        round_symmetric(x, n, 1.0f / s, qmin, qmax, tmp, &sxq, &sqq);
        if (!better_ratio(sxq, sqq, best_xq, best_qq)) break;
        best_xq = sxq;
        best_qq = sqq;
        for (int i = 0; i < n; i++) q[i] = tmp[i];
        s = best_xq / best_qq;
    }
    return s;
}

/* ---- affine: x ~ s*q + b ------------------------------------------------ */

float wisp_affine_error(const float *x, int n, const uint8_t *q, float s, float b) {
    float e = 0.0f;
    for (int i = 0; i < n; i++) {
        float p = s * (float)q[i];
        float d = p + b - x[i];
        e += d * d;
    }
    return e;
}

/* Least-squares (s, b) for fixed levels q, with s >= 0 and optionally b <= 0. */
void wisp_solve_affine(const float *x, int n, const uint8_t *q, bool b_nonpositive, float *s_out,
                         float *b_out) {
    int32_t sq = 0, sqq = 0;
    float sx = 0.0f, sxq = 0.0f;
    for (int i = 0; i < n; i++) {
        sq += q[i];
        sqq += (int32_t)q[i] * q[i];
        sx += x[i];
        sxq += x[i] * (float)q[i];
    }
    float fn = (float)n, fsq = (float)sq, fsqq = (float)sqq;
    float det = fn * fsqq - fsq * fsq; /* exact: small integers */
    float s, b;
    if (det > 0.0f) {
        s = (fn * sxq - fsq * sx) / det;
        b = (fsqq * sx - fsq * sxq) / det;
    } else { /* all levels equal: the offset alone carries the mean */
        s = 0.0f;
        b = sx / fn;
    }
    if (b_nonpositive && b > 0.0f) {
        b = 0.0f;
        s = sqq > 0 ? sxq / fsqq : 0.0f;
    }
    if (!(s >= 0.0f)) { /* cannot happen with monotone rounding; stay sane */
        s = 0.0f;
        b = sx / fn;
        if (b_nonpositive && b > 0.0f) b = 0.0f;
    }
    *s_out = s;
    *b_out = b;
}

static void round_affine(const float *x, int n, float is, float b, int qmax, uint8_t *q) {
    for (int i = 0; i < n; i++) q[i] = (uint8_t)wisp_round_clamp((x[i] - b) * is, 0, qmax);
}

float wisp_fit_affine(const float *x, int n, int qmax, bool b_nonpositive, uint8_t *q, float *b_out) {
    uint8_t tmp[FIT_MAX];
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int i = 0; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (b_nonpositive && lo > 0.0f) lo = 0.0f;
    if (!(hi > lo) || !(hi - lo <= FLT_MAX) || n > FIT_MAX) { /* constant, empty or not finite */
        for (int i = 0; i < n; i++) q[i] = 0;
        *b_out = (lo <= FLT_MAX && lo >= -FLT_MAX) ? lo : 0.0f;
        return 0.0f;
    }
    float best_err = FLT_MAX, best_s = 0.0f, best_b = lo;
    for (int k = -GRID_STEPS; k <= GRID_STEPS; k++) {
        float is = ((float)qmax + 0.1f * (float)k) / (hi - lo);
        float s, b;
        round_affine(x, n, is, lo, qmax, tmp);
        wisp_solve_affine(x, n, tmp, b_nonpositive, &s, &b);
        float err = wisp_affine_error(x, n, tmp, s, b);
        if (err < best_err) {
            best_err = err;
            best_s = s;
            best_b = b;
            for (int i = 0; i < n; i++) q[i] = tmp[i];
        }
    }
    for (int r = 0; r < REFINE_ROUNDS && best_s > 0.0f; r++) {
        float s, b;
        round_affine(x, n, 1.0f / best_s, best_b, qmax, tmp);
        wisp_solve_affine(x, n, tmp, b_nonpositive, &s, &b);
        float err = wisp_affine_error(x, n, tmp, s, b);
        if (!(err < best_err)) break;
        best_err = err;
        best_s = s;
        best_b = b;
        for (int i = 0; i < n; i++) q[i] = tmp[i];
    }
    *b_out = best_b;
    return best_s;
}

/* ---- non-uniform table: x ~ s*table[q] ---------------------------------- */

static void round_table(const float *x, int n, float is, const int8_t table[16], uint8_t *q,
                        float *sxt, float *stt) {
    float a = 0.0f, b = 0.0f;
    for (int i = 0; i < n; i++) {
        int k = wisp_nearest_in_table(table, x[i] * is);
        float t = (float)table[k];
        q[i] = (uint8_t)k;
        a += x[i] * t;
        b += t * t;
    }
    *sxt = a;
    *stt = b;
}

float wisp_fit_table(const float *x, int n, const int8_t table[16], uint8_t *q) {
    uint8_t tmp[FIT_MAX];
    float ext = extreme(x, n);
    if (ext == 0.0f || n > FIT_MAX) {
        for (int i = 0; i < n; i++) q[i] = (uint8_t)wisp_nearest_in_table(table, 0.0f);
        return 0.0f;
    }
    float best_xt = 0.0f, best_tt = 0.0f;
    const int sides[2] = {table[0], table[15]};
    for (int sd = 0; sd < 2; sd++) {
        for (int k = -5; k <= 5; k++) {
            /* the table's outer steps are ~20 units wide: scan +-1 step (a
             * finer grid measured no better) */
            float level = (float)sides[sd] + 4.0f * (float)k;
            float sxt, stt;
            round_table(x, n, level / ext, table, tmp, &sxt, &stt);
            if (better_ratio(sxt, stt, best_xt, best_tt)) {
                best_xt = sxt;
                best_tt = stt;
                for (int i = 0; i < n; i++) q[i] = tmp[i];
            }
        }
    }
    if (!(best_tt > 0.0f)) return 0.0f;
    float s = best_xt / best_tt;
    for (int r = 0; r < REFINE_ROUNDS && s != 0.0f; r++) {
        float sxt, stt;
        round_table(x, n, 1.0f / s, table, tmp, &sxt, &stt);
        if (!better_ratio(sxt, stt, best_xt, best_tt)) break;
        best_xt = sxt;
        best_tt = stt;
        for (int i = 0; i < n; i++) q[i] = tmp[i];
        s = best_xt / best_tt;
    }
    return s;
}
