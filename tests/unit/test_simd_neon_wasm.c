/* The 128-bit SIMD levels (neon, neon-dotprod, wasm-simd128) against the
 * scalar reference, on the target that runs them (qemu-aarch64 with and
 * without dotprod, qemu-arm, node): every weight type's matmul over odd row,
 * token and length counts, unaligned buffers and several row splits; the
 * activation quantizers on awkward data; every float primitive. Accuracy
 * claims checked here are the ones vec128_kernels.inc states:
 *  - bit for bit: quantized matmuls, Q8_0/Q8_1/Q8_K quantization, axpy,
 *    scale, attention's value sums, the F16/BF16 conversions, and any row
 *    split or tile shape;
 *  - |fast - ref| <= (n/4 + n/32 + 40) 2^-24 sum|w_i x_i|: F32/F16/BF16
 *    matmuls, dot products and attention scores (plus the scale's rounding);
 *  - relative 2^-22: rmsnorm; relative 2^-20 (or absolute 2^-120, where
 *    armv7 flushes a tiny intermediate) for silu_mul.
 * Levels this build or CPU lacks are skipped with a line saying so; if none
 * is available the test skips (exit 77). */
#include "check.h"
#include "cpu_features.h"
#include "half.h"
#include "kernels.h"
#include "quant.h"
#include "ref_model.h"
#include "simd.h"
#include "types.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const my_levels[] = {"neon-dotprod", "neon", "wasm-simd128"};

/* ---- random data -------------------------------------------------------------- */

static uint64_t rng_state; /* ref_uniform's (tests/lib/ref_model.h) */

static void rng_seed(uint64_t s) { rng_state = s; }

static float rng_gauss(void) {
    const double u = 1.0 - ref_uniform(&rng_state), v = ref_uniform(&rng_state); /* u in (0, 1] */
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static uint32_t rng_bits32(void) { return (uint32_t)(ref_uniform(&rng_state) * 4294967296.0); }

static void fill_gauss(float *x, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i++) x[i] = sigma * rng_gauss();
}

static void fill_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rng_bits32() >> 24);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ---- weight types ---------------------------------------------------------------- */

typedef struct weight_type {
    int type;
    int f16_fields[2]; /* offsets of the fp16 scale fields in a block (-1: none) */
} weight_type;

static const weight_type weight_types[] = {
    {WISP_TYPE_F32, {-1, -1}},   {WISP_TYPE_F16, {-1, -1}},   {WISP_TYPE_BF16, {-1, -1}},
    {WISP_TYPE_Q4_0, {0, -1}},   {WISP_TYPE_Q4_1, {0, 2}},    {WISP_TYPE_Q5_0, {0, -1}},
    {WISP_TYPE_Q5_1, {0, 2}},    {WISP_TYPE_Q8_0, {0, -1}},   {WISP_TYPE_IQ4_NL, {0, -1}},
    {WISP_TYPE_Q2_K, {80, 82}},  {WISP_TYPE_Q3_K, {108, -1}}, {WISP_TYPE_Q4_K, {0, 2}},
    {WISP_TYPE_Q5_K, {0, 2}},    {WISP_TYPE_Q6_K, {208, -1}},
};
#define N_WEIGHT_TYPES (int)(sizeof weight_types / sizeof weight_types[0])

static bool is_float_type(int type) {
    return type == WISP_TYPE_F32 || type == WISP_TYPE_F16 || type == WISP_TYPE_BF16;
}

/* Rows of weights: quantized Gaussian data (what models hold), or random
 * bytes with sane scales (every level pattern, e.g. Q8_0's -128 or Q6_K's
 * negative scales, which quantizers rarely write). */
static void make_weights(const weight_type *wt, uint8_t *w, int64_t rows, int64_t n, bool raw) {
    const wisp_type_info *ti = wisp_type_info_of(wt->type);
    const size_t rb = wisp_type_row_bytes(wt->type, n);
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + (size_t)r * rb;
        fill_gauss(f, n, 0.5f);
        ti->quantize(f, row, n);
        if (!raw || is_float_type(wt->type)) continue;
        fill_bytes(row, rb);
        for (int64_t b = 0; b < n / ti->block_elems; b++)
            for (int k = 0; k < 2; k++)
                if (wt->f16_fields[k] >= 0)
                    wisp_store_u16(row + (size_t)b * ti->block_bytes + wt->f16_fields[k],
                                   wisp_f32_to_f16(0.02f * rng_gauss()));
    }
    free(f);
}

/* The bound on a float dot product computed in another order. */
static double float_dot_tolerance(const uint8_t *wrow, int type, const float *x, int64_t n) {
    float *w = malloc((size_t)n * sizeof *w);
    wisp_type_info_of(type)->dequantize(wrow, w, n);
    double mag = 0;
    for (int64_t i = 0; i < n; i++) mag += fabs((double)w[i] * x[i]);
    free(w);
    return ((double)n / 4 + (double)n / 32 + 40) * 0x1.0p-24 * mag;
}

typedef struct stats {
    long exact_cases, tol_cases;
    double worst_ratio; /* largest |fast - ref| / tolerance seen */
} stats;

/* One matmul case: `rows` x `n` weights against `n_tok` activation rows.
 * `shift` offsets every buffer by that many bytes (alignment). */
static void check_matmul(const wisp_kernels *k, const weight_type *wt, int64_t rows, int64_t n, int64_t n_tok,
                         bool raw, int shift, stats *st) {
    const int type = wt->type;
    const wisp_type_info *ti = wisp_type_info_of(type);
    const int act = ti->act_type;
    const size_t rb = wisp_type_row_bytes(type, n);
    const size_t xb = act == WISP_TYPE_F32 ? (size_t)n * 4 : wisp_type_row_bytes(act, n);
    uint8_t *wbuf = malloc(rb * (size_t)rows + 16), *xbuf = malloc(xb * (size_t)n_tok + 16);
    float *xf = malloc((size_t)(n * n_tok) * sizeof *xf);
    float *y_ref = malloc((size_t)(rows * n_tok) * sizeof *y_ref), *y = malloc((size_t)(rows * n_tok) * sizeof *y);
    uint8_t *w = wbuf + shift, *x = xbuf + shift;
    make_weights(wt, w, rows, n, raw);
    fill_gauss(xf, n * n_tok, 1.0f);
    for (int64_t t = 0; t < n_tok; t++) {
        if (act == WISP_TYPE_F32) memcpy(x + (size_t)t * xb, xf + t * n, xb);
        else wisp_type_info_of(act)->quantize(xf + t * n, x + (size_t)t * xb, n);
    }
    wisp_matmul_args a = {w, rb, type, n, x, xb, n_tok, y_ref, rows};
    wisp_matmul_reference(&a, 0, rows);

    /* the whole range against the reference */
    a.y = y;
    k->matmul[type](&a, 0, rows);
    bool ok = true;
    for (int64_t t = 0; t < n_tok && ok; t++)
        for (int64_t r = 0; r < rows && ok; r++) {
            const float got = y[t * rows + r], want = y_ref[t * rows + r];
            if (!is_float_type(type)) {
                CHECK(ok = same_bits(got, want), "%s %s rows=%lld n=%lld tok=%lld raw=%d shift=%d: row %lld token %lld: %.9g, reference %.9g",
                      k->name, ti->name, (long long)rows, (long long)n, (long long)n_tok, raw, shift, (long long)r,
                      (long long)t, (double)got, (double)want);
                continue;
            }
            const double tol = float_dot_tolerance(w + (size_t)r * rb, type, xf + t * n, n);
            const double err = fabs((double)got - (double)want);
            if (tol > 0 && err / tol > st->worst_ratio) st->worst_ratio = err / tol;
            CHECK(ok = err <= tol, "%s %s rows=%lld n=%lld tok=%lld: row %lld token %lld: %.9g vs %.9g (tolerance %.3g)",
                  k->name, ti->name, (long long)rows, (long long)n, (long long)n_tok, (long long)r, (long long)t,
                  (double)got, (double)want, tol);
        }
    if (is_float_type(type)) st->tol_cases++;
    else st->exact_cases++;

    /* uneven row splits, and one token at a time: the same bits as the whole */
    float *y_split = malloc((size_t)(rows * n_tok) * sizeof *y_split);
    const int64_t mid = rows / 2, cuts[4] = {0, rows > 1 ? 1 : rows, mid + 3 < rows ? mid + 3 : rows, rows};
    a.y = y_split;
    for (int p = 0; p < 3; p++)
        if (cuts[p] < cuts[p + 1]) k->matmul[type](&a, cuts[p], cuts[p + 1]);
    CHECK(memcmp(y, y_split, (size_t)(rows * n_tok) * sizeof *y) == 0, "%s %s rows=%lld n=%lld tok=%lld: a row split changed results",
          k->name, ti->name, (long long)rows, (long long)n, (long long)n_tok);
    for (int64_t t = 0; t < n_tok; t++) {
        wisp_matmul_args one = a;
        one.x = x + (size_t)t * xb;
        one.n_tok = 1;
        one.y = y_split + t * rows;
        k->matmul[type](&one, 0, rows);
    }
    CHECK(memcmp(y, y_split, (size_t)(rows * n_tok) * sizeof *y) == 0, "%s %s rows=%lld n=%lld tok=%lld: one token at a time changed results",
          k->name, ti->name, (long long)rows, (long long)n, (long long)n_tok);
    free(y_split);
    free(wbuf);
    free(xbuf);
    free(xf);
    free(y_ref);
    free(y);
}

/* Rows around the 4-row tiles, tokens around the 2- and 4-token tiles (and
 * their remainders), one block to 133; float types at every length up to
 * 40 (all remainders of the 4-wide loop) and a few long ones. */
static void check_matmuls(const wisp_kernels *k) {
    static const int64_t row_counts[] = {1, 3, 4, 5, 13, 17};
    static const int64_t token_counts[] = {1, 2, 3, 5, 9};
    enum { N_ROWS = sizeof row_counts / sizeof row_counts[0], N_TOKS = sizeof token_counts / sizeof token_counts[0] };
    stats st = {0, 0, 0.0};
    for (int i = 0; i < N_WEIGHT_TYPES; i++) {
        const weight_type *wt = &weight_types[i];
        const int blk = wisp_type_info_of(wt->type)->block_elems;
        rng_seed((uint64_t)wt->type + 1);
        int shift = 0;
        if (blk == 1) {
            for (int64_t n = 1; n <= 40; n++) {
                check_matmul(k, wt, 5, n, 3, false, shift, &st);
                shift = (shift + 1) % 4;
            }
            static const int64_t long_lengths[] = {100, 203, 576, 1023};
            for (int li = 0; li < 4; li++)
                for (int ti = 0; ti < N_TOKS; ti++) check_matmul(k, wt, 13, long_lengths[li], token_counts[ti], false, li % 4, &st);
            continue;
        }
        /* 133 blocks: decode reads rows in passes of 64 blocks (two full, one short) */
        const int64_t lengths[4] = {blk, 3 * blk, blk == 256 ? 1024 : 288, 133 * 32};
        const int n_lengths = blk == 256 ? 3 : 4;
        for (int li = 0; li < n_lengths; li++)
            for (int ri = 0; ri < N_ROWS; ri++)
                for (int ti = 0; ti < N_TOKS; ti++) {
                    check_matmul(k, wt, row_counts[ri], lengths[li], token_counts[ti], (ri + ti) % 2 == 1, shift, &st);
                    shift = (shift + 1) % 4;
                }
    }
    printf("  %s matmul: %ld cases bit-exact (quantized types), %ld within the float bound (worst error %.3f of the bound)\n",
           k->name, st.exact_cases, st.tol_cases, st.worst_ratio);
}

/* ---- activation quantizers ------------------------------------------------------ */

static void check_quantizer(const wisp_kernels *k, int type) {
    const int64_t n = 1024;
    const size_t bytes = wisp_type_row_bytes(type, n);
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *want = malloc(bytes + 1), *got_buf = malloc(bytes + 1), *got = got_buf + 1;
    for (int pattern = 0; pattern < 12; pattern++) {
        fill_gauss(x, n, pattern < 4 ? 1.0f : 1e-3f * (float)pattern);
        switch (pattern) {
        case 1: for (int64_t i = 0; i < n / 2; i++) x[i] = 0.0f; break;            /* zero blocks */
        case 2: for (int64_t i = 0; i < n; i++) x[i] = (float)(int)(x[i] * 4) * 0.5f; break; /* ties */
        case 3: x[5] = INFINITY; x[300] = -INFINITY; x[700] = NAN; break;
        case 4: x[10] = 3.0f; x[20] = -3.0f; x[300] = -3.0f; x[301] = 3.0f; break; /* equal magnitudes */
        case 5: for (int64_t i = 0; i < n; i++) x[i] *= 1e30f; break;
        case 6: for (int64_t i = 0; i < n; i++) x[i] = 1.0f; break;
        case 7: for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 255) - 127.0f; break;
        default: break;
        }
        wisp_type_info_of(type)->quantize(x, want, n);
        k->quantize_row[type](x, got, n);
        CHECK(memcmp(want, got, bytes) == 0, "%s quantize to %s, pattern %d: bytes differ from the reference", k->name,
              wisp_type_info_of(type)->name, pattern);
    }
    free(x);
    free(want);
    free(got_buf);
}

/* ---- float primitives ----------------------------------------------------------- */

static double sum_abs_products(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}

static void check_primitives(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    enum { N = 1031 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *y0 = malloc(N * sizeof *y0),
          *y1 = malloc(N * sizeof *y1), *w = malloc(N * sizeof *w), *ah = malloc(N * sizeof *ah);
    uint16_t *h_buf = malloc((N + 1) * sizeof *h_buf), *h1 = malloc(N * sizeof *h1);
    uint16_t *h = h_buf + 1;
    static const int64_t lengths[] = {1, 3, 4, 7, 16, 17, 64, 100, 1031};
    double worst_dot = 0, worst_norm = 0, worst_silu = 0; /* error / tolerance */
    for (int li = 0; li < 9; li++) {
        const int64_t n = lengths[li];
        fill_gauss(a, n, 1.0f);
        fill_gauss(b, n, 1.0f);
        fill_gauss(w, n, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            h[i] = wisp_f32_to_f16(a[i]);
            ah[i] = wisp_f16_to_f32(h[i]);
        }
        const double tol = ((double)n / 4 + (double)n / 32 + 40) * 0x1.0p-24;
        double bound = tol * sum_abs_products(a, b, n);
        double err = fabs((double)k->dot_f32(a, b, n) - ref->dot_f32(a, b, n));
        CHECK(err <= bound, "%s dot_f32 n=%lld: error %.3g", k->name, (long long)n, err);
        worst_dot = fmax(worst_dot, err / bound);
        bound = tol * sum_abs_products(ah, b, n);
        err = fabs((double)k->dot_f16_f32(h, b, n) - ref->dot_f16_f32(h, b, n));
        CHECK(err <= bound, "%s dot_f16_f32 n=%lld: error %.3g", k->name, (long long)n, err);
        worst_dot = fmax(worst_dot, err / bound);

        memcpy(y0, b, (size_t)n * sizeof *y0);
        memcpy(y1, b, (size_t)n * sizeof *y1);
        ref->axpy_f32(y0, 0.37f, a, n);
        k->axpy_f32(y1, 0.37f, a, n);
        CHECK(memcmp(y0, y1, (size_t)n * sizeof *y0) == 0, "%s axpy_f32 n=%lld differs", k->name, (long long)n);
        ref->axpy_f16(y0, -1.9f, h, n);
        k->axpy_f16(y1, -1.9f, h, n);
        CHECK(memcmp(y0, y1, (size_t)n * sizeof *y0) == 0, "%s axpy_f16 n=%lld differs", k->name, (long long)n);
        ref->scale_f32(y0, 0.11f, n);
        k->scale_f32(y1, 0.11f, n);
        CHECK(memcmp(y0, y1, (size_t)n * sizeof *y0) == 0, "%s scale_f32 n=%lld differs", k->name, (long long)n);

        ref->rmsnorm(y0, a, w, n, 1e-5f);
        k->rmsnorm(y1, a, w, n, 1e-5f);
        bool ok = true;
        for (int64_t i = 0; i < n && ok; i++) {
            bound = 0x1.0p-22 * fabs((double)y0[i]);
            err = fabs((double)y1[i] - y0[i]);
            CHECK(ok = err <= bound, "%s rmsnorm n=%lld [%lld]: %.9g vs %.9g", k->name, (long long)n, (long long)i,
                  (double)y1[i], (double)y0[i]);
            if (bound > 0) worst_norm = fmax(worst_norm, err / bound);
        }

        /* silu over a wide range, including where exp over- and underflows */
        for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = (i % 7 == 3) ? 60.0f * a[i] : 4.0f * a[i];
        if (n > 10) {
            y0[1] = y1[1] = 95.0f;
            y0[2] = y1[2] = -95.0f;
            y0[9] = y1[9] = -88.5f;
        }
        ref->silu_mul(y0, b, n);
        k->silu_mul(y1, b, n);
        ok = true;
        for (int64_t i = 0; i < n && ok; i++) {
            bound = 0x1.0p-20 * fabs((double)y0[i]) + 0x1.0p-120;
            err = fabs((double)y1[i] - y0[i]);
            CHECK(ok = err <= bound, "%s silu_mul n=%lld [%lld]: %.9g vs %.9g", k->name, (long long)n, (long long)i,
                  (double)y1[i], (double)y0[i]);
            worst_silu = fmax(worst_silu, err / bound);
        }
    }
    printf("  %s float primitives: worst error / bound: dot %.3f, rmsnorm %.3f, silu_mul %.3f; axpy, scale exact\n", k->name,
           worst_dot, worst_norm, worst_silu);

    /* conversions: every half; floats from random bit patterns and rounding edges */
    float *f = malloc(65536 * sizeof *f), *g = malloc(65536 * sizeof *g);
    uint16_t *all = malloc(65536 * sizeof *all), *ha = malloc(65536 * sizeof *ha), *hb = malloc(65536 * sizeof *hb);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    ref->f16_to_f32(all, f, 65536);
    k->f16_to_f32(all, g, 65536);
    CHECK(memcmp(f, g, 65536 * sizeof *f) == 0, "%s f16_to_f32 differs on some half", k->name);
    ref->bf16_to_f32(all, f, 65536);
    k->bf16_to_f32(all, g, 65536);
    CHECK(memcmp(f, g, 65536 * sizeof *f) == 0, "%s bf16_to_f32 differs on some bfloat16", k->name);
    for (int i = 0; i < 65536; i++) {
        uint32_t bits = rng_bits32();
        if (i % 4 == 1) bits = (bits & 0x80001fffu) | (0x33000000u + ((uint32_t)(i % 32) << 23)); /* around the half range's ends */
        if (i % 4 == 2) bits = (bits & 0xffffe000u) | 0x1000u;                                    /* exact ties */
        memcpy(&f[i], &bits, 4);
    }
    ref->f32_to_f16(f, ha, 65536);
    k->f32_to_f16(f, hb, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        const bool nan = f[i] != f[i];
        if (nan ? !((hb[i] & 0x7c00) == 0x7c00 && (hb[i] & 0x3ff)) : ha[i] != hb[i]) bad++;
    }
    CHECK(bad == 0, "%s f32_to_f16 differs from the reference on %d of 65536 values", k->name, bad);
    free(f);
    free(g);
    free(all);
    free(ha);
    free(hb);
    free(a);
    free(b);
    free(y0);
    free(y1);
    free(w);
    free(ah);
    free(h_buf);
    free(h1);
}

/* Attention's loops over a block of cached keys/values, F16 and F32, rows
 * spaced wider than they are long (aligned to their element: the
 * reference reads them through float and uint16_t pointers, which armv7
 * requires aligned). */
static void check_attention(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    static const int64_t key_counts[] = {1, 3, 4, 5, 17}, head_dims[] = {7, 23, 64}; /* 23: 16 + 4 + 3 */
    for (int kv_f16 = 0; kv_f16 < 2; kv_f16++)
        for (int hi = 0; hi < 3; hi++)
            for (int ni = 0; ni < 5; ni++) {
                const int64_t hd = head_dims[hi], n = key_counts[ni];
                const size_t elem = kv_f16 ? 2 : 4, stride = (size_t)hd * elem + 8;
                uint8_t *buf = malloc(stride * (size_t)n + 8), *rows = buf + (kv_f16 ? 2 : 4);
                float *q = malloc((size_t)hd * sizeof *q), *w = malloc((size_t)n * sizeof *w);
                float *s0 = malloc((size_t)n * sizeof *s0), *s1 = malloc((size_t)n * sizeof *s1);
                float *o0 = malloc((size_t)hd * sizeof *o0), *o1 = malloc((size_t)hd * sizeof *o1);
                float *row_f = malloc((size_t)hd * sizeof *row_f);
                fill_gauss(q, hd, 1.0f);
                fill_gauss(w, n, 1.0f);
                fill_gauss(o0, hd, 1.0f);
                memcpy(o1, o0, (size_t)hd * sizeof *o0);
                fill_bytes(buf, stride * (size_t)n + 8);
                for (int64_t j = 0; j < n; j++) {
                    fill_gauss(row_f, hd, 1.0f);
                    uint8_t *r = rows + (size_t)j * stride;
                    for (int64_t i = 0; i < hd; i++) {
                        if (kv_f16) wisp_store_u16(r + 2 * i, wisp_f32_to_f16(row_f[i]));
                        else wisp_store_f32(r + 4 * i, row_f[i]);
                    }
                }
                const float scale = 0.125f;
                ref->attn_scores(s0, rows, stride, kv_f16, n, q, hd, scale);
                k->attn_scores(s1, rows, stride, kv_f16, n, q, hd, scale);
                for (int64_t j = 0; j < n; j++) {
                    const uint8_t *r = rows + (size_t)j * stride;
                    double mag = 0;
                    for (int64_t i = 0; i < hd; i++)
                        mag += fabs((kv_f16 ? (double)wisp_f16_to_f32(wisp_load_u16(r + 2 * i)) : (double)wisp_load_f32(r + 4 * i)) * q[i]);
                    const double bound = ((double)hd / 4 + (double)hd / 32 + 40) * 0x1.0p-24 * mag * scale + 0x1.0p-23 * fabs((double)s0[j]);
                    CHECK(fabs((double)s1[j] - s0[j]) <= bound, "%s attn_scores %s hd=%lld n=%lld key %lld: %.9g vs %.9g", k->name,
                          kv_f16 ? "f16" : "f32", (long long)hd, (long long)n, (long long)j, (double)s1[j], (double)s0[j]);
                }
                ref->attn_values(o0, w, rows, stride, kv_f16, n, hd);
                k->attn_values(o1, w, rows, stride, kv_f16, n, hd);
                CHECK(memcmp(o0, o1, (size_t)hd * sizeof *o0) == 0, "%s attn_values %s hd=%lld n=%lld differs", k->name,
                      kv_f16 ? "f16" : "f32", (long long)hd, (long long)n);
                free(buf), free(q), free(w), free(s0), free(s1), free(o0), free(o1), free(row_f);
            }
}

int main(void) {
    wisp_cpu_features cpu;
    cli_cpu_features(&cpu);
    int tested = 0;
    for (size_t i = 0; i < sizeof my_levels / sizeof my_levels[0]; i++) {
        const wisp_kernels *table;
        wisp_error err = {0};
        if (wisp_simd_select(&cpu, my_levels[i], &table, &err) != WISP_OK) {
            printf("  %s: not tested here (%s)\n", my_levels[i], err.message);
            continue;
        }
        wisp_kernels k = *table;
        wisp_kernels_complete(&k);
        printf("  %s: testing\n", k.name);
        rng_seed(42);
        check_matmuls(&k);
        check_quantizer(&k, WISP_TYPE_Q8_0);
        check_quantizer(&k, WISP_TYPE_Q8_1);
        check_quantizer(&k, WISP_TYPE_Q8_K);
        check_primitives(&k);
        check_attention(&k);
        tested++;
    }
    if (!tested) check_skip_platform("test_simd_neon_wasm", "no NEON or WASM SIMD level in this build or CPU (make test-arm / test-wasm run it)");
    return check_report("test_simd_neon_wasm");
}
