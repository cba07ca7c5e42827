/* The x86 kernel levels (avx512, avx2) against the scalar reference, on the
 * CPU running the test; levels the CPU lacks are skipped with a line saying
 * so (the 128-bit levels are test_simd_neon_wasm.c's). Claims, as x86.h
 * states them:
 *  - bit for bit: every quantized matmul (random rows 1..40 around the
 *    16-row groups, activation rows 1..33 around the 4-row tiles, 1..18
 *    blocks and 50 (decode's 16-block chunks), realistic and raw-byte
 *    weights, unaligned buffers), whatever the row split and one token at
 *    a time; the Q8_0/Q8_1/Q8_K quantizers on awkward data; axpy, scale;
 *    F16/BF16 conversions of every half and of random and tie floats;
 *  - |fast - ref| <= (n/8 + n/32 + 40) 2^-24 sum|w_i x_i|: F32/F16/BF16
 *    matmuls at every length 1..1023, and dot_f32/dot_f16_f32;
 *  - attention's inner loops: attn_values bit for bit, attn_scores within
 *    the dot bound (times the scale), for F16 and F32 caches;
 *  - the same for the *_heads kernels (1..9 query heads of a kv head);
 *  - attention's softmax steps: max_f32 exactly; softmax_exp's weights
 *    within relative 2^-20 (absolute 2^-100) of expf's, their sum within
 *    relative 2^-20, NaN where the reference has NaN;
 *  - relative 2^-22: rmsnorm; relative 2^-20 (absolute 2^-100): silu_mul. */
#include "check.h"
#include "cpu_features.h"
#include "half.h"
#include "kernels.h"
#include "quant.h"
#include "simd.h"
#include "test_rng.h"
#include "types.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const x86_levels[] = {"avx512", "avx2"};

/* ---- data ---------------------------------------------------------------------------- */


static void normals(float *x, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i++) x[i] = sigma * rng_normal();
}

static bool bits_equal(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* fp16 scale fields of each block type: random bytes elsewhere are any
 * level pattern, but random scales would be NaN or huge. */
static void sane_scales(int type, uint8_t *block) {
    static const struct { int type; int at[2]; } fields[] = {
        {WISP_TYPE_Q4_0, {0, -1}},  {WISP_TYPE_Q4_1, {0, 2}},    {WISP_TYPE_Q5_0, {0, -1}}, {WISP_TYPE_Q5_1, {0, 2}},
        {WISP_TYPE_Q8_0, {0, -1}},  {WISP_TYPE_IQ4_NL, {0, -1}}, {WISP_TYPE_Q2_K, {80, 82}}, {WISP_TYPE_Q3_K, {108, -1}},
        {WISP_TYPE_Q4_K, {0, 2}},   {WISP_TYPE_Q5_K, {0, 2}},    {WISP_TYPE_Q6_K, {208, -1}},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].type == type)
            for (int k = 0; k < 2; k++)
                if (fields[i].at[k] >= 0) wisp_store_u16(block + fields[i].at[k], wisp_f32_to_f16(0.01f * rng_normal()));
}

static bool is_float_type(int type) { return type == WISP_TYPE_F32 || type == WISP_TYPE_F16 || type == WISP_TYPE_BF16; }

static double float_bound(int64_t n) { return ((double)n / 8 + (double)n / 32 + 40) * 0x1.0p-24; }

/* ---- quantized matmuls ------------------------------------------------------------------ */

#define MAX_ROWS 40
#define MAX_TOK 33

typedef struct fixture {
    int type, act;
    int64_t n;
    size_t wb, xb;        /* row bytes of weights and activations */
    uint8_t *w, *x;       /* MAX_ROWS weight rows, MAX_TOK activation rows, both `shift` bytes off alignment */
    uint8_t *w_mem, *x_mem;
    float *xf;            /* the activations as floats */
} fixture;

static void fixture_make(fixture *f, int type, int64_t n, bool raw, int shift) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    f->type = type;
    f->act = ti->act_type;
    f->n = n;
    f->wb = wisp_type_row_bytes(type, n);
    f->xb = f->act == WISP_TYPE_F32 ? (size_t)n * sizeof(float) : wisp_type_row_bytes(f->act, n);
    f->w_mem = malloc(f->wb * MAX_ROWS + 64);
    f->x_mem = malloc(f->xb * MAX_TOK + 64);
    f->xf = malloc(sizeof(float) * (size_t)n * MAX_TOK);
    f->w = f->w_mem + shift;
    f->x = f->x_mem + shift;
    float *row = malloc(sizeof(float) * (size_t)n);
    for (int r = 0; r < MAX_ROWS; r++) {
        uint8_t *wr = f->w + (size_t)r * f->wb;
        if (raw && !is_float_type(type)) {
            for (size_t i = 0; i < f->wb; i++) wr[i] = (uint8_t)(rng_next() >> 40);
            for (int64_t b = 0; b < n / ti->block_elems; b++) sane_scales(type, wr + (size_t)b * ti->block_bytes);
        } else {
            normals(row, n, 0.05f);
            ti->quantize(row, wr, n);
        }
    }
    free(row);
    normals(f->xf, n * MAX_TOK, 1.0f);
    for (int t = 0; t < MAX_TOK; t++) {
        uint8_t *xr = f->x + (size_t)t * f->xb;
        if (f->act == WISP_TYPE_F32) memcpy(xr, f->xf + t * n, f->xb);
        else wisp_type_info_of(f->act)->quantize(f->xf + t * n, xr, n);
    }
}

static void fixture_free(fixture *f) {
    free(f->w_mem);
    free(f->x_mem);
    free(f->xf);
}

static wisp_matmul_args args_of(const fixture *f, int64_t rows, int64_t n_tok, float *y) {
    wisp_matmul_args a = {f->w, f->wb, f->type, f->n, f->x, f->xb, n_tok, y, rows};
    return a;
}

/* sum |w_i x_i| of one row and token (for the float-type bound) */
static double magnitude(const fixture *f, int64_t r, int64_t t) {
    float *w = malloc(sizeof(float) * (size_t)f->n);
    wisp_type_info_of(f->type)->dequantize(f->w + (size_t)r * f->wb, w, f->n);
    double s = 0;
    for (int64_t i = 0; i < f->n; i++) s += fabs((double)w[i] * f->xf[t * f->n + i]);
    free(w);
    return s;
}

typedef struct tally {
    long cases;
    double worst; /* float types: largest error / bound */
} tally;

/* rows x n_tok against the reference, then the same via a ragged row split
 * and one token at a time, which must repeat the bits. */
static bool check_case(const wisp_kernels *k, const fixture *f, int64_t rows, int64_t n_tok, tally *tl) {
    const size_t ny = (size_t)(rows * n_tok);
    float *want = malloc(sizeof(float) * ny), *got = malloc(sizeof(float) * ny), *again = malloc(sizeof(float) * ny);
    wisp_matmul_args a = args_of(f, rows, n_tok, want);
    wisp_matmul_reference(&a, 0, rows);
    a.y = got;
    k->matmul[f->type](&a, 0, rows);
    bool ok = true;
    const char *tn = wisp_type_info_of(f->type)->name;
    for (int64_t t = 0; t < n_tok && ok; t++)
        for (int64_t r = 0; r < rows && ok; r++) {
            float g = got[t * rows + r], w = want[t * rows + r];
            if (is_float_type(f->type)) {
                double bound = float_bound(f->n) * magnitude(f, r, t), err = fabs((double)g - w);
                if (bound > 0 && err / bound > tl->worst) tl->worst = err / bound;
                CHECK(ok = err <= bound, "%s %s n=%lld rows=%lld tokens=%lld: [%lld][%lld] %.9g, reference %.9g", k->name, tn,
                      (long long)f->n, (long long)rows, (long long)n_tok, (long long)t, (long long)r, (double)g, (double)w);
            } else {
                CHECK(ok = bits_equal(&g, &w, sizeof g), "%s %s n=%lld rows=%lld tokens=%lld: [%lld][%lld] %.9g, reference %.9g",
                      k->name, tn, (long long)f->n, (long long)rows, (long long)n_tok, (long long)t, (long long)r, (double)g,
                      (double)w);
            }
        }
    /* ragged split: cuts that are and are not on 16-row groups */
    a.y = again;
    const int64_t cuts[] = {0, rows / 3, rows / 3 + 16 < rows ? rows / 3 + 16 : rows, rows - 1 > 0 ? rows - 1 : rows, rows};
    for (int c = 0; c < 4; c++)
        if (cuts[c] < cuts[c + 1]) k->matmul[f->type](&a, cuts[c], cuts[c + 1]);
    CHECK(bits_equal(got, again, sizeof(float) * ny), "%s %s n=%lld rows=%lld tokens=%lld: a row split changed the bits",
          k->name, tn, (long long)f->n, (long long)rows, (long long)n_tok);
    for (int64_t t = 0; t < n_tok; t++) {
        wisp_matmul_args one = args_of(f, rows, 1, again + t * rows);
        one.x = f->x + (size_t)t * f->xb;
        k->matmul[f->type](&one, 0, rows);
    }
    CHECK(bits_equal(got, again, sizeof(float) * ny), "%s %s n=%lld rows=%lld tokens=%lld: one token at a time changed the bits",
          k->name, tn, (long long)f->n, (long long)rows, (long long)n_tok);
    tl->cases++;
    free(want);
    free(got);
    free(again);
    return ok;
}

static const int weight_types[] = {WISP_TYPE_Q4_0, WISP_TYPE_Q4_1, WISP_TYPE_Q5_0, WISP_TYPE_Q5_1, WISP_TYPE_Q8_0,
                                   WISP_TYPE_IQ4_NL, WISP_TYPE_Q2_K, WISP_TYPE_Q3_K, WISP_TYPE_Q4_K, WISP_TYPE_Q5_K,
                                   WISP_TYPE_Q6_K, WISP_TYPE_F32, WISP_TYPE_F16, WISP_TYPE_BF16};

static void check_matmuls(const wisp_kernels *k) {
    static const int64_t rows[] = {1, 7, 15, 16, 17, 33, 40};
    static const int64_t toks[] = {1, 2, 3, 4, 5, 8, 9, 33};
    /* 50: three whole 16-block chunks of the decode path and a remainder */
    static const int64_t blocks[] = {1, 2, 7, 18, 50};
    tally quant = {0, 0}, flt = {0, 0};
    int shift = 0;
    for (size_t ti = 0; ti < sizeof weight_types / sizeof weight_types[0]; ti++) {
        const int type = weight_types[ti];
        const int64_t blk = wisp_type_info_of(type)->block_elems;
        rng_seed((uint64_t)type * 31 + 1);
        if (is_float_type(type)) {
            /* every length 1..1023 on a small tile, then tile shapes at a few lengths */
            for (int64_t n = 1; n <= 1023; n++) {
                fixture f;
                fixture_make(&f, type, n, false, shift = (shift + 1) % 4);
                check_case(k, &f, n % 5 + 1, n % 3 + 1, &flt);
                if (n == 1 || n == 17 || n == 300 || n == 1023)
                    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r += 2)
                        for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t += 3) check_case(k, &f, rows[r], toks[t], &flt);
                fixture_free(&f);
            }
            continue;
        }
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            if (blk == WISP_QK_K && blocks[bi] > 7) continue;
            for (int raw = 0; raw < 2; raw++) {
                fixture f;
                fixture_make(&f, type, blk * blocks[bi], raw, shift = (shift + 1) % 4);
                for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
                    for (size_t t = 0; t < sizeof toks / sizeof toks[0]; t++)
                        if (blocks[bi] > 18 ? toks[t] == 1 || toks[t] == 5
                                            : (r + t + (size_t)raw) % 2 == 0 || rows[r] == 17 || toks[t] == 5)
                            check_case(k, &f, rows[r], toks[t], &quant);
                fixture_free(&f);
            }
        }
    }
    printf("  %s matmul: %ld quantized cases bit-exact; %ld float cases, worst error %.3f of the bound\n", k->name,
           quant.cases, flt.cases, flt.worst);
}

/* ---- activation quantizers ---------------------------------------------------------------- */

static void check_quantizer(const wisp_kernels *k, int type) {
    const int64_t n = 2048;
    const size_t bytes = wisp_type_row_bytes(type, n);
    float *x_mem = malloc(sizeof(float) * (size_t)n + 16), *x = x_mem + 1;
    uint8_t *want = malloc(bytes), *got_mem = malloc(bytes + 3), *got = got_mem + 3;
    for (int pattern = 0; pattern < 10; pattern++) {
        normals(x, n, pattern == 5 ? 1e30f : pattern == 6 ? 1e-40f : 1.0f);
        switch (pattern) {
        case 1: memset(x, 0, sizeof(float) * 300); break;                                    /* zero blocks */
        case 2: for (int64_t i = 0; i < n; i++) x[i] = 0.5f * (float)(int)(x[i] * 8); break; /* ties */
        case 3: x[3] = INFINITY; x[40] = -INFINITY; x[777] = NAN; x[1500] = NAN; x[1501] = 1e38f; break;
        case 4: x[10] = 5.0f; x[20] = -5.0f; x[700] = -5.0f; x[701] = 5.0f; break;           /* equal magnitudes */
        case 7: for (int64_t i = 0; i < n; i++) x[i] = 2.0f; break;
        case 8: for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 255) - 127.0f; break;
        case 9: for (int64_t i = 0; i < n; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * 0x1.0p-140f; break; /* subnormal scale */
        default: break;
        }
        wisp_type_info_of(type)->quantize(x, want, n);
        k->quantize_row[type](x, got, n);
        CHECK(bits_equal(want, got, bytes), "%s quantize to %s, pattern %d: bytes differ from the reference", k->name,
              wisp_type_info_of(type)->name, pattern);
    }
    free(x_mem);
    free(want);
    free(got_mem);
}

/* ---- float primitives ---------------------------------------------------------------------- */

static double abs_dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}

static void check_primitives(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    enum { N = 1023 };
    float *a = malloc(sizeof(float) * (N + 1)) , *b = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * N);
    float *y0 = malloc(sizeof(float) * N), *y1 = malloc(sizeof(float) * N), *ah = malloc(sizeof(float) * N);
    uint16_t *h_mem = malloc(sizeof(uint16_t) * (N + 1)), *h = h_mem + 1;
    float *ua = a + 1; /* unaligned */
    double worst_dot = 0, worst_norm = 0, worst_silu = 0;
    for (int64_t n = 1; n <= N; n++) {
        normals(ua, n, 1.0f);
        normals(b, n, 1.0f);
        normals(w, n, 1.0f);
        for (int64_t i = 0; i < n; i++) ah[i] = wisp_f16_to_f32(h[i] = wisp_f32_to_f16(ua[i]));
        double bound = float_bound(n) * abs_dot(ua, b, n), err = fabs((double)k->dot_f32(ua, b, n) - ref->dot_f32(ua, b, n));
        CHECK(err <= bound, "%s dot_f32 n=%lld: error %.3g over %.3g", k->name, (long long)n, err, bound);
        if (bound > 0) worst_dot = fmax(worst_dot, err / bound);
        bound = float_bound(n) * abs_dot(ah, b, n);
        err = fabs((double)k->dot_f16_f32(h, b, n) - ref->dot_f16_f32(h, b, n));
        CHECK(err <= bound, "%s dot_f16_f32 n=%lld: error %.3g over %.3g", k->name, (long long)n, err, bound);
        if (bound > 0) worst_dot = fmax(worst_dot, err / bound);

        memcpy(y0, b, sizeof(float) * (size_t)n);
        memcpy(y1, b, sizeof(float) * (size_t)n);
        ref->axpy_f32(y0, 0.3f, ua, n);
        k->axpy_f32(y1, 0.3f, ua, n);
        ref->axpy_f16(y0, -1.7f, h, n);
        k->axpy_f16(y1, -1.7f, h, n);
        ref->scale_f32(y0, 0.9f, n);
        k->scale_f32(y1, 0.9f, n);
        CHECK(bits_equal(y0, y1, sizeof(float) * (size_t)n), "%s axpy_f32/axpy_f16/scale_f32 n=%lld differ", k->name, (long long)n);

        ref->rmsnorm(y0, ua, w, n, 1e-5f);
        k->rmsnorm(y1, ua, w, n, 1e-5f);
        for (int64_t i = 0; i < n; i++) {
            bound = 0x1.0p-22 * fabs((double)y0[i]);
            err = fabs((double)y1[i] - y0[i]);
            if (bound > 0) worst_norm = fmax(worst_norm, err / bound);
            if (err > bound) {
                CHECK(err <= bound, "%s rmsnorm n=%lld [%lld]: %.9g, reference %.9g", k->name, (long long)n, (long long)i,
                      (double)y1[i], (double)y0[i]);
                break;
            }
        }
        for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = (i % 5 == 2 ? 40.0f : 6.0f) * ua[i];
        if (n > 4) {
            y0[0] = y1[0] = 100.0f;  /* exp underflows */
            y0[1] = y1[1] = -100.0f; /* exp overflows */
            y0[2] = y1[2] = -87.9f;
            y0[3] = y1[3] = NAN;
        }
        ref->silu_mul(y0, b, n);
        k->silu_mul(y1, b, n);
        for (int64_t i = 0; i < n; i++) {
            if (y0[i] != y0[i]) {
                CHECK(y1[i] != y1[i], "%s silu_mul n=%lld [%lld]: NaN expected", k->name, (long long)n, (long long)i);
                continue;
            }
            bound = 0x1.0p-20 * fabs((double)y0[i]) + 0x1.0p-100;
            err = fabs((double)y1[i] - y0[i]);
            worst_silu = fmax(worst_silu, err / bound);
            if (err > bound) {
                CHECK(err <= bound, "%s silu_mul n=%lld [%lld]: %.9g, reference %.9g", k->name, (long long)n, (long long)i,
                      (double)y1[i], (double)y0[i]);
                break;
            }
        }
    }
    printf("  %s primitives: worst error / bound: dots %.3f, rmsnorm %.3f, silu_mul %.3f; axpy, scale bit-exact\n", k->name,
           worst_dot, worst_norm, worst_silu);

    /* conversions: every half and bfloat16; random floats, ties, the half range's edges */
    enum { M = 65536 };
    uint16_t *all = malloc(sizeof(uint16_t) * (M + 1)), *ha = malloc(sizeof(uint16_t) * M), *hb = malloc(sizeof(uint16_t) * (M + 1));
    float *fa = malloc(sizeof(float) * M), *fb = malloc(sizeof(float) * (M + 1));
    for (int i = 0; i < M; i++) all[i + 1] = (uint16_t)i;
    ref->f16_to_f32(all + 1, fa, M);
    k->f16_to_f32(all + 1, fb + 1, M);
    CHECK(bits_equal(fa, fb + 1, sizeof(float) * M), "%s f16_to_f32 differs on some half", k->name);
    ref->bf16_to_f32(all + 1, fa, M);
    k->bf16_to_f32(all + 1, fb + 1, M);
    CHECK(bits_equal(fa, fb + 1, sizeof(float) * M), "%s bf16_to_f32 differs on some bfloat16", k->name);
    for (int i = 0; i < M; i++) {
        uint32_t u = (uint32_t)(rng_next() >> 32);
        if (i % 4 == 1) u = (u & 0x80001fffu) | ((0x66u + (uint32_t)(i % 40)) << 23); /* exponents around the half range */
        if (i % 4 == 2) u = (u & 0xffffe000u) | 0x1000u;                              /* exact ties */
        memcpy(&fb[i + 1], &u, 4);
    }
    ref->f32_to_f16(fb + 1, ha, M);
    k->f32_to_f16(fb + 1, hb + 1, M);
    CHECK(bits_equal(ha, hb + 1, sizeof(uint16_t) * M), "%s f32_to_f16 differs from the reference", k->name);
    free(all);
    free(ha);
    free(hb);
    free(fa);
    free(fb);
    free(a);
    free(b);
    free(w);
    free(y0);
    free(y1);
    free(ah);
    free(h_mem);
}

/* ---- attention inner loops ---------------------------------------------------------------- */

static void check_attention(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    static const int64_t dims[] = {1, 7, 16, 64, 80, 128};
    double worst = 0;
    enum { MAXN = 67, PAD = 5 };
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int64_t n = 1; n <= MAXN; n += 11) {
                const int64_t hd = dims[di], row = hd + PAD; /* rows padded, as a wider cache would be */
                const size_t elem = f16 ? 2 : 4, stride = (size_t)row * elem;
                uint8_t *cache = malloc(stride * (size_t)n + 8);
                /* rows aligned to their element (as in the KV cache, and as C requires of a
                 * float load) but not to a vector: the kernels must not assume more */
                uint8_t *rows = cache + elem;
                float *q = malloc(sizeof(float) * (size_t)hd), *kf = malloc(sizeof(float) * (size_t)hd);
                float s0[MAXN], s1[MAXN], w[MAXN];
                float *o0 = malloc(sizeof(float) * (size_t)hd), *o1 = malloc(sizeof(float) * (size_t)hd);
                normals(q, hd, 1.0f);
                for (int64_t j = 0; j < n; j++) {
                    normals(kf, hd, 1.0f);
                    uint8_t *r = rows + (size_t)j * stride;
                    for (int64_t i = 0; i < hd; i++) {
                        if (f16) wisp_store_u16(r + 2 * i, wisp_f32_to_f16(kf[i]));
                        else wisp_store_f32(r + 4 * i, kf[i]);
                    }
                }
                ref->attn_scores(s0, rows, stride, f16, n, q, hd, 0.125f);
                k->attn_scores(s1, rows, stride, f16, n, q, hd, 0.125f);
                for (int64_t j = 0; j < n; j++) {
                    const uint8_t *r = rows + (size_t)j * stride;
                    double mag = 0;
                    for (int64_t i = 0; i < hd; i++)
                        mag += fabs((double)q[i] * (f16 ? wisp_f16_to_f32(wisp_load_u16(r + 2 * i)) : wisp_load_f32(r + 4 * i)));
                    double bound = 0.125 * float_bound(hd) * mag + 0x1.0p-24 * fabs((double)s0[j]), err = fabs((double)s1[j] - s0[j]);
                    if (bound > 0) worst = fmax(worst, err / bound);
                    CHECK(err <= bound, "%s attn_scores hd=%lld n=%lld f16=%d [%lld]: %.9g, reference %.9g", k->name,
                          (long long)hd, (long long)n, f16, (long long)j, (double)s1[j], (double)s0[j]);
                    w[j] = (float)exp(-0.1 * (double)j);
                }
                normals(o0, hd, 1.0f);
                memcpy(o1, o0, sizeof(float) * (size_t)hd);
                ref->attn_values(o0, w, rows, stride, f16, n, hd);
                k->attn_values(o1, w, rows, stride, f16, n, hd);
                CHECK(bits_equal(o0, o1, sizeof(float) * (size_t)hd), "%s attn_values hd=%lld n=%lld f16=%d differs", k->name,
                      (long long)hd, (long long)n, f16);
                free(cache);
                free(q);
                free(kf);
                free(o0);
                free(o1);
            }
    printf("  %s attention: values bit-exact; scores within %.3f of the dot bound\n", k->name, worst);
}

/* The *_heads kernels (a kv head's query heads at once, F16 cache) against
 * the reference's per-head loops: scores within the dot bound, values bit
 * for bit, for 1..9 heads and head sizes with ragged ends. */
static void check_attention_heads(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    static const int64_t dims[] = {7, 16, 64, 100};
    enum { MAXN = 70, MAXQ = 9 };
    double worst = 0;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int64_t nq = 1; nq <= MAXQ; nq++)
            for (int64_t n = 1; n <= MAXN; n += 23) {
                const int64_t hd = dims[di], ld = hd + 3;
                const size_t stride = (size_t)(hd + 5) * 2;
                uint16_t *rows = malloc(stride * (size_t)n);
                float *q = malloc(sizeof(float) * (size_t)(ld * nq)), *o0 = malloc(sizeof(float) * (size_t)(ld * nq)),
                      *o1 = malloc(sizeof(float) * (size_t)(ld * nq)), *s0 = malloc(sizeof(float) * (size_t)(MAXN * nq)),
                      *s1 = malloc(sizeof(float) * (size_t)(MAXN * nq)), kf[100];
                normals(q, ld * nq, 1.0f);
                for (int64_t j = 0; j < n; j++) {
                    normals(kf, hd, 1.0f);
                    for (int64_t i = 0; i < hd; i++) rows[(size_t)j * stride / 2 + (size_t)i] = wisp_f32_to_f16(kf[i]);
                }
                for (int64_t h = 0; h < nq; h++)
                    ref->attn_scores(s0 + h * MAXN, rows, stride, 1, n, q + h * ld, hd, 0.125f);
                k->attn_scores_heads(s1, MAXN, rows, stride, n, q, ld, nq, hd, 0.125f);
                for (int64_t h = 0; h < nq; h++)
                    for (int64_t j = 0; j < n; j++) {
                        double mag = 0;
                        for (int64_t i = 0; i < hd; i++)
                            mag += fabs((double)q[h * ld + i] * wisp_f16_to_f32(rows[(size_t)j * stride / 2 + (size_t)i]));
                        const double a = s0[h * MAXN + j], b = s1[h * MAXN + j];
                        const double bound = 0.125 * float_bound(hd) * mag + 0x1.0p-24 * fabs(a), err = fabs(b - a);
                        if (bound > 0) worst = fmax(worst, err / bound);
                        CHECK(err <= bound, "%s attn_scores_heads hd=%lld heads=%lld n=%lld [%lld][%lld]: %.9g, reference %.9g",
                              k->name, (long long)hd, (long long)nq, (long long)n, (long long)h, (long long)j, b, a);
                    }
                for (int64_t h = 0; h < nq; h++)
                    for (int64_t j = 0; j < n; j++) s0[h * MAXN + j] = (float)exp(-0.1 * (double)(j + h));
                normals(o0, ld * nq, 1.0f);
                memcpy(o1, o0, sizeof(float) * (size_t)(ld * nq));
                for (int64_t h = 0; h < nq; h++) ref->attn_values(o0 + h * ld, s0 + h * MAXN, rows, stride, 1, n, hd);
                k->attn_values_heads(o1, ld, s0, MAXN, rows, stride, n, nq, hd);
                CHECK(bits_equal(o0, o1, sizeof(float) * (size_t)(ld * nq)), "%s attn_values_heads hd=%lld heads=%lld n=%lld differ",
                      k->name, (long long)hd, (long long)nq, (long long)n);
                free(rows);
                free(q);
                free(o0);
                free(o1);
                free(s0);
                free(s1);
            }
    printf("  %s attention over a kv head's query heads: values bit-exact; scores within %.3f of the dot bound\n",
           k->name, worst);
}

/* ---- the online softmax's block steps --------------------------------------------------- */

/* Scores spread wide (e^x from 1 down to underflow), with -inf, NaN and a
 * deep negative in some blocks, and blocks that are all NaN. */
static void check_softmax(const wisp_kernels *k) {
    const wisp_kernels *ref = wisp_kernels_reference();
    enum { MAXN = 131 };
    double worst = 0;
    for (int64_t n = 0; n <= MAXN; n += n < 40 ? 1 : 13)
        for (int variant = 0; variant < 3; variant++) {
            float s0[MAXN], s1[MAXN];
            normals(s0, n, 8.0f);
            if (variant == 1 && n > 3) {
                s0[n / 3] = -INFINITY;
                s0[n / 2] = NAN;
                s0[n - 1] = -200.0f;
            }
            if (variant == 2)
                for (int64_t j = 0; j < n; j++) s0[j] = NAN;
            memcpy(s1, s0, sizeof(float) * (size_t)n);
            const float m0 = ref->max_f32(s0, n), m1 = k->max_f32(s1, n);
            CHECK(m0 == m1, "%s max_f32 n=%lld variant %d: %.9g, reference %.9g", k->name, (long long)n, variant, (double)m1,
                  (double)m0);
            if (m0 == -INFINITY) continue; /* attention never takes e^(s - max) then */
            double l0 = 0.75, l1 = 0.75;  /* a running sum from earlier blocks */
            ref->softmax_exp(s0, n, m0, &l0);
            k->softmax_exp(s1, n, m0, &l1);
            for (int64_t j = 0; j < n; j++) {
                if (s0[j] != s0[j]) {
                    CHECK(s1[j] != s1[j], "%s softmax_exp n=%lld [%lld]: NaN expected", k->name, (long long)n, (long long)j);
                    continue;
                }
                const double bound = 0x1.0p-20 * fabs((double)s0[j]) + 0x1.0p-100, err = fabs((double)s1[j] - s0[j]);
                worst = fmax(worst, err / bound);
                CHECK(err <= bound, "%s softmax_exp n=%lld [%lld]: %.9g, reference %.9g", k->name, (long long)n, (long long)j,
                      (double)s1[j], (double)s0[j]);
            }
            if (l0 != l0)
                CHECK(l1 != l1, "%s softmax_exp n=%lld: NaN sum expected", k->name, (long long)n);
            else
                CHECK(fabs(l1 - l0) <= 0x1.0p-20 * l0, "%s softmax_exp n=%lld: sum %.17g, reference %.17g", k->name,
                      (long long)n, l1, l0);
        }
    printf("  %s softmax: max exact; weights within %.3f of the bound, sums within 2^-20\n", k->name, worst);
}

int main(void) {
    wisp_cpu_features cpu;
    cli_cpu_features(&cpu);
    int tested = 0;
    for (size_t i = 0; i < sizeof x86_levels / sizeof x86_levels[0]; i++) {
        const wisp_kernels *table;
        wisp_error err = {0};
        if (wisp_simd_select(&cpu, x86_levels[i], &table, &err) != WISP_OK) {
            printf("  skipped %s: %s\n", x86_levels[i], err.message);
            continue;
        }
        wisp_kernels k = *table;
        wisp_kernels_complete(&k);
        printf("  %s:\n", k.name);
        check_matmuls(&k);
        rng_seed(99);
        check_quantizer(&k, WISP_TYPE_Q8_0);
        check_quantizer(&k, WISP_TYPE_Q8_1);
        check_quantizer(&k, WISP_TYPE_Q8_K);
        check_primitives(&k);
        check_attention(&k);
        check_attention_heads(&k);
        check_softmax(&k);
        tested++;
    }
    if (!tested) check_skip_platform("test_simd_kernels", "this build or CPU has no x86 kernel level (AVX2 or AVX-512)");
    return check_report("test_simd_kernels");
}
