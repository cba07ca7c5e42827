/* The kernel checks of every level (kernel_checks.h says what and why). */
#include "kernel_checks.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "half.h"
#include "quant.h"
#include "sampler.h"
#include "status.h"
#include "types.h"

static const char *const family_names[KC_FAMILIES] = {
    "dots", "axpy", "rmsnorm", "silu", "convert", "quantize", "matmul-q", "matmul-f", "attention", "heads", "softmax", "dequant-t",
};

/* ---- families and their contracts ------------------------------------------------ */

bool kc_bounds_of(const char *level, kc_bounds *out) {
    static const struct {
        const char *level;
        kc_bounds b;
    } families[] = {
        /* simd/x86.h: 8 accumulator lanes' worth of reordering */
        {"avx2", {8, 0x1.0p-24, 0x1.0p-100, true, false, false}},
        {"avx512", {8, 0x1.0p-24, 0x1.0p-100, true, false, false}},
        /* simd/vec128_kernels.inc: 4 lanes; armv7 flushes tiny silu intermediates;
         * NaN payloads of f32 -> f16 may differ */
        {"neon", {4, 0x1.0p-23, 0x1.0p-120, false, false, false}},
        {"neon-dotprod", {4, 0x1.0p-23, 0x1.0p-120, false, false, false}},
        {"wasm-simd128", {4, 0x1.0p-23, 0x1.0p-120, false, false, false}},
        /* simd/cortexm_dsp.h: every result bit-identical to the reference */
        {"cortexm-dsp", {0, 0, 0, true, false, false}},
        /* the reference itself: against exact arithmetic, textbook bounds */
        {"scalar", {0, 0, 0, true, true, false}},
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].level, level) == 0) {
            *out = families[i].b;
#if defined(__arm__) && !defined(__aarch64__)
            /* 32-bit ARM's NEON unit always flushes subnormals (vec128_kernels.inc) */
            out->flushes = strncmp(level, "neon", 4) == 0;
#endif
            return true;
        }
    return false;
}

/* ---- verdicts ----------------------------------------------------------------- */

#define MAX_REPORTED 20 /* failure lines per run; the counts go on */

/* Count one check of family `fam`; report it when it failed. */
static bool verdict(kc_run *r, int fam, bool ok, const char *fmt, ...) {
    r->checks++;
    r->cell[fam].checks++;
    if (ok) return true;
    r->cell[fam].failures++;
    if (r->failures++ < MAX_REPORTED) {
        char line[320];
        size_t n = wisp_format(line, sizeof line, "FAIL %s %s: ", r->k->name, family_names[fam]);
        va_list ap;
        va_start(ap, fmt);
        wisp_vformat(line + n, sizeof line - n, fmt, ap);
        va_end(ap);
        r->say(line);
    }
    return false;
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* got against want within `bound` (NaN only for NaN), or bit for bit where
 * the family promises it; the worst error / bound is kept for the table. */
static bool close_enough(kc_run *r, int fam, float got, float want, double bound) {
    if (r->bounds.dot_lanes == 0) return same_bits(got, want);
    if (want != want) return got != got;
    const double err = fabs((double)got - (double)want);
    r->cell[fam].bounded = true;
    if (bound > 0 && err / bound > r->cell[fam].worst) r->cell[fam].worst = err / bound;
    return err <= bound;
}

/* (n/L + n/32 + 40) 2^-24: a float dot's reordering, per unit of sum|w x| */
static double dot_bound(const kc_run *r, int64_t n) {
    return ((double)n / r->bounds.dot_lanes + (double)n / 32 + 40) * 0x1.0p-24;
}

/* ---- data and scratch ----------------------------------------------------------- */

static float uniform(kc_run *r) { return (float)(wisp_rng_next(&r->rng) >> 40) * 0x1.0p-24f; }

/* Roughly normal (a sum of four uniforms), cheap on an FPU-less-double core. */
static float gauss(kc_run *r) { return (uniform(r) + uniform(r) + uniform(r) + uniform(r) - 2.0f) * 1.7320508f; }

static void fill_gauss(kc_run *r, float *x, int64_t n, float sigma) {
    for (int64_t i = 0; i < n; i++) x[i] = sigma * gauss(r);
}

static void fill_bytes(kc_run *r, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(wisp_rng_next(&r->rng) >> 56);
}

/* `bytes` of scratch, 16-aligned, or NULL (counted as a failure: the shape
 * lists are sized to fit KC_SCRATCH_BYTES, so this is a bug here). */
static void *take(kc_run *r, size_t bytes) {
    const size_t at = (r->used + 15) & ~(size_t)15;
    if (at + bytes > KC_SCRATCH_BYTES) {
        verdict(r, KC_MATMUL_Q, false, "scratch: %zu bytes needed beyond KC_SCRATCH_BYTES", at + bytes);
        return NULL;
    }
    r->used = at + bytes;
    return r->scratch + at;
}

static double sum_abs_products(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += fabs((double)a[i] * b[i]);
    return s;
}

/* ---- float vector primitives, every length 1..1023 ----------------------------- */

#define N_VEC 1023

static void check_vectors(kc_run *r) {
    const wisp_kernels *k = r->k, *ref = wisp_kernels_reference();
    r->used = 0;
    float *a_mem = take(r, sizeof(float) * (N_VEC + 1)), *b = take(r, sizeof(float) * N_VEC),
          *w = take(r, sizeof(float) * N_VEC), *y0 = take(r, sizeof(float) * N_VEC), *y1 = take(r, sizeof(float) * N_VEC),
          *ah = take(r, sizeof(float) * N_VEC);
    uint16_t *h_mem = take(r, sizeof(uint16_t) * (N_VEC + 1));
    if (!a_mem || !b || !w || !y0 || !y1 || !ah || !h_mem) return;
    float *a = a_mem + 1;    /* off any vector alignment */
    uint16_t *h = h_mem + 1;
    for (int64_t n = 1; n <= N_VEC; n++) {
        fill_gauss(r, a, n, 1.0f);
        fill_gauss(r, b, n, 1.0f);
        fill_gauss(r, w, n, 1.0f);
        for (int64_t i = 0; i < n; i++) ah[i] = wisp_f16_to_f32(h[i] = wisp_f32_to_f16(a[i]));
        if (k->dot_f32 != ref->dot_f32) {
            const float got = k->dot_f32(a, b, n), want = ref->dot_f32(a, b, n);
            verdict(r, KC_DOTS, close_enough(r, KC_DOTS, got, want, dot_bound(r, n) * sum_abs_products(a, b, n)),
                    "dot_f32 n=%lld: %.9g, reference %.9g", (long long)n, (double)got, (double)want);
        }
        if (k->dot_f16_f32 != ref->dot_f16_f32) {
            const float got = k->dot_f16_f32(h, b, n), want = ref->dot_f16_f32(h, b, n);
            verdict(r, KC_DOTS, close_enough(r, KC_DOTS, got, want, dot_bound(r, n) * sum_abs_products(ah, b, n)),
                    "dot_f16_f32 n=%lld: %.9g, reference %.9g", (long long)n, (double)got, (double)want);
        }
        /* y += a x and y *= a: bit for bit at every level */
        if (k->axpy_f32 != ref->axpy_f32) {
            memcpy(y0, b, sizeof(float) * (size_t)n);
            memcpy(y1, b, sizeof(float) * (size_t)n);
            ref->axpy_f32(y0, 0.37f, a, n);
            k->axpy_f32(y1, 0.37f, a, n);
            verdict(r, KC_AXPY, memcmp(y0, y1, sizeof(float) * (size_t)n) == 0, "axpy_f32 n=%lld differs", (long long)n);
        }
        if (k->axpy_f16 != ref->axpy_f16) {
            memcpy(y0, b, sizeof(float) * (size_t)n);
            memcpy(y1, b, sizeof(float) * (size_t)n);
            ref->axpy_f16(y0, -1.9f, h, n);
            k->axpy_f16(y1, -1.9f, h, n);
            verdict(r, KC_AXPY, memcmp(y0, y1, sizeof(float) * (size_t)n) == 0, "axpy_f16 n=%lld differs", (long long)n);
        }
        if (k->scale_f32 != ref->scale_f32) {
            memcpy(y0, a, sizeof(float) * (size_t)n);
            memcpy(y1, a, sizeof(float) * (size_t)n);
            ref->scale_f32(y0, 0.11f, n);
            k->scale_f32(y1, 0.11f, n);
            verdict(r, KC_AXPY, memcmp(y0, y1, sizeof(float) * (size_t)n) == 0, "scale_f32 n=%lld differs", (long long)n);
        }
        if (k->rmsnorm != ref->rmsnorm) {
            ref->rmsnorm(y0, a, w, n, 1e-5f);
            k->rmsnorm(y1, a, w, n, 1e-5f);
            int64_t bad = -1;
            for (int64_t i = 0; i < n; i++)
                if (!close_enough(r, KC_RMSNORM, y1[i], y0[i], 0x1.0p-22 * fabs((double)y0[i]))) { bad = i; break; }
            verdict(r, KC_RMSNORM, bad < 0, "rmsnorm n=%lld [%lld]: %.9g, reference %.9g", (long long)n, (long long)bad,
                    bad < 0 ? 0.0 : (double)y1[bad], bad < 0 ? 0.0 : (double)y0[bad]);
        }
        if (k->silu_mul != ref->silu_mul) {
            /* a wide range, with exp under- and overflowing, and a NaN */
            for (int64_t i = 0; i < n; i++) y0[i] = y1[i] = (i % 5 == 2 ? 40.0f : i % 7 == 3 ? 60.0f : 6.0f) * a[i];
            static const float edges[] = {100.0f, -100.0f, -87.9f, NAN, 95.0f, -95.0f, -88.5f};
            for (int64_t i = 0; i < 7 && i < n - 4; i++) y0[i] = y1[i] = edges[i];
            memcpy(ah, y0, sizeof(float) * (size_t)n); /* the gates, for a flushing unit's bound */
            ref->silu_mul(y0, b, n);
            k->silu_mul(y1, b, n);
            int64_t bad = -1;
            for (int64_t i = 0; i < n; i++)
                if (!close_enough(r, KC_SILU, y1[i], y0[i],
                                  0x1.0p-20 * fabs((double)y0[i]) + r->bounds.silu_abs +
                                      (r->bounds.flushes ? 0x1.0p-126 * fabs((double)ah[i] * b[i]) : 0))) {
                    bad = i;
                    break;
                }
            verdict(r, KC_SILU, bad < 0, "silu_mul n=%lld [%lld]: %.9g, reference %.9g", (long long)n, (long long)bad,
                    bad < 0 ? 0.0 : (double)y1[bad], bad < 0 ? 0.0 : (double)y0[bad]);
        }
    }
}

/* ---- conversions: every half and bfloat16, floats around the half range ---------- */

#define CHUNK 1024

static void check_conversions(kc_run *r) {
    const wisp_kernels *k = r->k, *ref = wisp_kernels_reference();
    r->used = 0;
    uint16_t *in16 = take(r, sizeof(uint16_t) * (CHUNK + 1)), *h0 = take(r, sizeof(uint16_t) * CHUNK),
             *h1 = take(r, sizeof(uint16_t) * (CHUNK + 1));
    float *f0 = take(r, sizeof(float) * CHUNK), *f1 = take(r, sizeof(float) * (CHUNK + 1));
    if (!in16 || !h0 || !h1 || !f0 || !f1) return;
    for (int bf = 0; bf < 2; bf++) {
        void (*fast)(const uint16_t *, float *, int64_t) = bf ? k->bf16_to_f32 : k->f16_to_f32;
        void (*slow)(const uint16_t *, float *, int64_t) = bf ? ref->bf16_to_f32 : ref->f16_to_f32;
        if (fast == slow) continue;
        for (uint32_t base = 0; base < 0x10000; base += CHUNK) {
            for (uint32_t i = 0; i < CHUNK; i++) in16[i + 1] = (uint16_t)(base + i);
            slow(in16 + 1, f0, CHUNK);
            fast(in16 + 1, f1 + 1, CHUNK); /* unaligned both ways */
            verdict(r, KC_CONVERT, memcmp(f0, f1 + 1, sizeof(float) * CHUNK) == 0, "%s_to_f32 differs on halves %u..%u",
                    bf ? "bf16" : "f16", base, base + CHUNK - 1);
        }
    }
    if (k->f32_to_f16 == ref->f32_to_f16) return;
    for (int round = 0; round < 64; round++) {
        for (int i = 0; i < CHUNK; i++) {
            uint32_t u = (uint32_t)(wisp_rng_next(&r->rng) >> 32);
            switch (i % 4) {
            case 1: u = (u & 0x80001fffu) | ((0x66u + (uint32_t)((i / 4 + round) % 40)) << 23); break; /* the half range's edges */
            case 2: u = (u & 0xffffe000u) | 0x1000u; break;                                           /* exact ties */
            case 3: u = (u & 0x807fffffu) | ((uint32_t)((i / 4 + round * 7) % 256) << 23); break;     /* every exponent */
            default: break;
            }
            memcpy(&f1[i + 1], &u, sizeof u);
        }
        ref->f32_to_f16(f1 + 1, h0, CHUNK);
        k->f32_to_f16(f1 + 1, h1 + 1, CHUNK);
        int bad = 0;
        for (int i = 0; i < CHUNK; i++) {
            const bool nan = f1[i + 1] != f1[i + 1];
            if (nan && !r->bounds.nan_bits) bad += !((h1[i + 1] & 0x7c00) == 0x7c00 && (h1[i + 1] & 0x3ff));
            else bad += h0[i] != h1[i + 1];
        }
        verdict(r, KC_CONVERT, bad == 0, "f32_to_f16 differs on %d of %d values (round %d)", bad, CHUNK, round);
    }
}

/* ---- activation quantizers ----------------------------------------------------- */

static void check_quantizer(kc_run *r, int type) {
    const wisp_kernels *k = r->k;
    const wisp_type_info *ti = wisp_type_info_of(type);
    if (!k->quantize_row[type] || k->quantize_row[type] == wisp_kernels_reference()->quantize_row[type]) return;
    enum { N = 2048 };
    const size_t bytes = wisp_type_row_bytes(type, N);
    r->used = 0;
    float *x_mem = take(r, sizeof(float) * (N + 1));
    uint8_t *want = take(r, bytes), *got_mem = take(r, bytes + 3);
    if (!x_mem || !want || !got_mem) return;
    float *x = x_mem + 1;
    uint8_t *got = got_mem + 3;
    for (int pattern = 0; pattern < 12; pattern++) {
        if (r->bounds.flushes && (pattern == 6 || pattern == 9)) continue; /* subnormal data: outside the claim */
        fill_gauss(r, x, N, pattern == 5 ? 1e30f : pattern == 6 ? 1e-40f : pattern >= 10 ? 1e-3f * (float)pattern : 1.0f);
        switch (pattern) {
        case 1: memset(x, 0, sizeof(float) * 300); break;                                        /* zero blocks */
        case 2: for (int i = 0; i < N; i++) x[i] = 0.5f * (float)(int)(x[i] * 8); break;          /* ties */
        case 3: x[3] = INFINITY; x[40] = -INFINITY; x[777] = NAN; x[1500] = NAN; x[1501] = 1e38f; break;
        case 4: x[10] = 5.0f; x[20] = -5.0f; x[700] = -5.0f; x[701] = 5.0f; break;               /* equal magnitudes */
        case 7: for (int i = 0; i < N; i++) x[i] = 2.0f; break;
        case 8: for (int i = 0; i < N; i++) x[i] = (float)(i % 255) - 127.0f; break;
        case 9: for (int i = 0; i < N; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * 0x1.0p-140f; break;    /* subnormal scale */
        default: break;
        }
        ti->quantize(x, want, N);
        k->quantize_row[type](x, got, N);
        verdict(r, KC_QUANTIZE, memcmp(want, got, bytes) == 0, "to %s, pattern %d: bytes differ from the reference", ti->name,
                pattern);
    }
}

/* ---- matmuls --------------------------------------------------------------------- */

/* fp16 scale fields of each block type: random bytes elsewhere are any level
 * pattern (Q8_0's -128, Q6_K's negative scales), but random scales would be
 * NaN or huge. */
static void sane_scales(kc_run *r, int type, uint8_t *block) {
    static const struct {
        int type;
        int at[2];
    } fields[] = {
        {WISP_TYPE_Q4_0, {0, -1}}, {WISP_TYPE_Q4_1, {0, 2}},    {WISP_TYPE_Q5_0, {0, -1}},  {WISP_TYPE_Q5_1, {0, 2}},
        {WISP_TYPE_Q8_0, {0, -1}}, {WISP_TYPE_IQ4_NL, {0, -1}}, {WISP_TYPE_Q2_K, {80, 82}}, {WISP_TYPE_Q3_K, {108, -1}},
        {WISP_TYPE_Q4_K, {0, 2}},  {WISP_TYPE_Q5_K, {0, 2}},    {WISP_TYPE_Q6_K, {208, -1}},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].type == type)
            for (int j = 0; j < 2; j++)
                if (fields[i].at[j] >= 0) wisp_store_u16(block + fields[i].at[j], wisp_f32_to_f16(0.01f * gauss(r)));
}

static bool is_float_type(int type) { return type == WISP_TYPE_F32 || type == WISP_TYPE_F16 || type == WISP_TYPE_BF16; }

/* Weights and activations of one type and length, at most max_rows x
 * max_tok, every buffer `shift` elements off alignment (elements of floats
 * and halves, which C and a Cortex-M's float loads need aligned; bytes of
 * quantized blocks, which have no alignment); the reference's
 * products of all of them, computed once (an output does not depend on how
 * many rows or tokens a call covers). */
typedef struct fixture {
    int type, act, max_rows, max_tok;
    int64_t n;
    size_t wb, xb;
    uint8_t *w, *x;
    float *row;   /* n floats: generation, dequantized rows */
    float *y_ref; /* max_tok x max_rows */
    float *y, *y2;
} fixture;

static bool fixture_make(kc_run *r, fixture *f, int type, int64_t n, int max_rows, int max_tok, bool raw, int shift) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    f->type = type;
    f->act = ti->act_type;
    f->n = n;
    f->max_rows = max_rows;
    f->max_tok = max_tok;
    f->wb = wisp_type_row_bytes(type, n);
    f->xb = f->act == WISP_TYPE_F32 ? (size_t)n * sizeof(float) : wisp_type_row_bytes(f->act, n);
    r->used = 0;
    uint8_t *w = take(r, f->wb * (size_t)max_rows + 16), *x = take(r, f->xb * (size_t)max_tok + 16);
    f->row = take(r, sizeof(float) * (size_t)n);
    const size_t ny = sizeof(float) * (size_t)(max_rows * max_tok);
    f->y_ref = take(r, ny);
    f->y = take(r, ny);
    f->y2 = take(r, ny);
    if (!w || !x || !f->row || !f->y_ref || !f->y || !f->y2) return false;
    f->w = w + shift * (type == WISP_TYPE_F32 ? 4 : is_float_type(type) ? 2 : 1);
    f->x = x + shift * (f->act == WISP_TYPE_F32 ? 4 : 1);
    for (int i = 0; i < max_rows; i++) {
        uint8_t *wr = f->w + (size_t)i * f->wb;
        fill_gauss(r, f->row, n, 0.05f);
        ti->quantize(f->row, wr, n);
        if (raw && !is_float_type(type)) {
            fill_bytes(r, wr, f->wb);
            for (int64_t b = 0; b < n / ti->block_elems; b++) sane_scales(r, type, wr + (size_t)b * ti->block_bytes);
        }
    }
    for (int t = 0; t < max_tok; t++) {
        uint8_t *xr = f->x + (size_t)t * f->xb;
        if (f->act == WISP_TYPE_F32) {
            fill_gauss(r, f->row, n, 1.0f);
            memcpy(xr, f->row, f->xb);
        } else {
            fill_gauss(r, f->row, n, 1.0f);
            wisp_type_info_of(f->act)->quantize(f->row, xr, n);
        }
    }
    wisp_matmul_args a = {f->w, f->wb, type, n, f->x, f->xb, max_tok, f->y_ref, max_rows};
    wisp_matmul_reference(&a, 0, max_rows);
    return true;
}

/* sum |w_i x_i| of weight row i and token t (the float types' bound) */
static double magnitude(const fixture *f, int64_t i, int64_t t) {
    wisp_type_info_of(f->type)->dequantize(f->w + (size_t)i * f->wb, f->row, f->n);
    double s = 0;
    for (int64_t j = 0; j < f->n; j++) s += fabs((double)f->row[j] * wisp_load_f32(f->x + (size_t)t * f->xb + 4 * (size_t)j));
    return s;
}

/* rows x n_tok against the reference; then a ragged row split (cuts on and
 * off 4- and 16-row groups) and one token at a time must repeat the bits. */
static void check_case(kc_run *r, const fixture *f, int64_t rows, int64_t n_tok) {
    const wisp_kernels *k = r->k;
    const int fam = is_float_type(f->type) ? KC_MATMUL_F : KC_MATMUL_Q;
    const char *tn = wisp_type_info_of(f->type)->name;
    wisp_matmul_args a = {f->w, f->wb, f->type, f->n, f->x, f->xb, n_tok, f->y, rows};
    k->matmul[f->type](&a, 0, rows);
    int64_t bad_r = -1, bad_t = -1;
    for (int64_t t = 0; t < n_tok && bad_r < 0; t++)
        for (int64_t i = 0; i < rows; i++) {
            const float got = f->y[t * rows + i], want = f->y_ref[t * f->max_rows + i];
            const bool ok = fam == KC_MATMUL_Q
                                ? same_bits(got, want)
                                : close_enough(r, fam, got, want, r->bounds.dot_lanes ? dot_bound(r, f->n) * magnitude(f, i, t) : 0);
            if (!ok) { bad_r = i; bad_t = t; break; }
        }
    verdict(r, fam, bad_r < 0, "%s n=%lld rows=%lld tokens=%lld: row %lld token %lld %.9g, reference %.9g", tn, (long long)f->n,
            (long long)rows, (long long)n_tok, (long long)bad_r, (long long)bad_t,
            bad_r < 0 ? 0.0 : (double)f->y[bad_t * rows + bad_r], bad_r < 0 ? 0.0 : (double)f->y_ref[bad_t * f->max_rows + bad_r]);
    const size_t ny = sizeof(float) * (size_t)(rows * n_tok);
    a.y = f->y2;
    const int64_t cuts[] = {0, rows > 1 ? 1 : rows, rows / 3 + 3 < rows ? rows / 3 + 3 : rows,
                            rows / 3 + 16 < rows ? rows / 3 + 16 : rows, rows};
    for (int c = 0; c < 4; c++)
        if (cuts[c] < cuts[c + 1]) k->matmul[f->type](&a, cuts[c], cuts[c + 1]);
    verdict(r, fam, memcmp(f->y, f->y2, ny) == 0, "%s n=%lld rows=%lld tokens=%lld: a row split changed the bits", tn,
            (long long)f->n, (long long)rows, (long long)n_tok);
    for (int64_t t = 0; t < n_tok; t++) {
        wisp_matmul_args one = a;
        one.x = f->x + (size_t)t * f->xb;
        one.n_tok = 1;
        one.y = f->y2 + t * rows;
        k->matmul[f->type](&one, 0, rows);
    }
    verdict(r, fam, memcmp(f->y, f->y2, ny) == 0, "%s n=%lld rows=%lld tokens=%lld: one token at a time changed the bits", tn,
            (long long)f->n, (long long)rows, (long long)n_tok);
}

/* Rows around the 4-row tiles (128-bit levels) and 16-row groups (x86),
 * tokens around the 2- and 4-token tiles. */
static const int row_counts[] = {1, 3, 4, 5, 7, 13, 15, 16, 17, 33, 40};
static const int token_counts[] = {1, 2, 3, 4, 5, 8, 9, 33};
#define N_ROW_COUNTS (int)(sizeof row_counts / sizeof row_counts[0])
#define N_TOKEN_COUNTS (int)(sizeof token_counts / sizeof token_counts[0])

static void check_matmul_quantized(kc_run *r, int type, int *shift) {
    const int blk = wisp_type_info_of(type)->block_elems;
    /* blocks per row: 1..18 around the tiles; 50: x86 decode's 16-block
     * chunks and a remainder; 133: the 128-bit decode's 64-block passes
     * (two full, one short). Super-blocks of 256: up to 7, and 33 for the
     * 128-bit K-quant decode's 16-super-block passes, on at most 9 rows (more
     * would not fit KC_SCRATCH_BYTES, which the firmware holds statically). */
    static const int blocks32[] = {1, 2, 3, 7, 9, 18, 50, 133}, blocks256[] = {1, 2, 3, 4, 7, 33};
    const int *blocks = blk == WISP_QK_K ? blocks256 : blocks32;
    const int n_blocks = blk == WISP_QK_K ? 6 : 8;
    for (int bi = 0; bi < n_blocks; bi++)
        for (int raw = 0; raw < 2; raw++) {
            const int nb = blocks[bi], long_row = nb > 18;
            const int max_rows = long_row && blk == WISP_QK_K ? 9 : nb > 50 ? 17 : 40, max_tok = long_row ? 5 : 33;
            fixture f;
            *shift = (*shift + 1) % 4;
            if (!fixture_make(r, &f, type, (int64_t)blk * nb, max_rows, max_tok, raw, *shift)) return;
            for (int ri = 0; ri < N_ROW_COUNTS; ri++)
                for (int ti = 0; ti < N_TOKEN_COUNTS; ti++) {
                    const int rows = row_counts[ri], toks = token_counts[ti];
                    if (rows > max_rows || toks > max_tok) continue;
                    const bool pick = long_row ? toks == 1 || toks == 5 : (ri + ti + raw) % 2 == 0 || rows == 17 || toks == 5;
                    if (pick) check_case(r, &f, rows, toks);
                }
        }
}

static void check_matmul_float(kc_run *r, int type, int *shift) {
    /* every length on a small tile; the tile shapes at lengths around the
     * vector widths and long rows */
    for (int64_t n = 1; n <= N_VEC; n++) {
        const bool tiles = n == 1 || n == 17 || n == 100 || n == 203 || n == 300 || n == 576 || n == 1023;
        const int max_rows = !tiles ? 5 : n <= 300 ? 40 : 17, max_tok = tiles ? 9 : 3;
        fixture f;
        *shift = (*shift + 1) % 4;
        if (!fixture_make(r, &f, type, n, max_rows, max_tok, false, *shift)) return;
        check_case(r, &f, n % 5 + 1, n % 3 + 1);
        if (!tiles) continue;
        for (int ri = 0; ri < N_ROW_COUNTS; ri++)
            for (int ti = 0; ti < N_TOKEN_COUNTS; ti++) {
                const int rows = row_counts[ri], toks = token_counts[ti];
                if (rows <= max_rows && toks <= max_tok && (ri + ti) % 2 == 0) check_case(r, &f, rows, toks);
            }
    }
}

/* Every weight type a level can multiply: the quantized ones, then the float ones. */
static const int weight_types[] = {WISP_TYPE_Q4_0, WISP_TYPE_Q4_1, WISP_TYPE_Q5_0, WISP_TYPE_Q5_1, WISP_TYPE_Q8_0,
                                   WISP_TYPE_IQ4_NL, WISP_TYPE_Q2_K, WISP_TYPE_Q3_K, WISP_TYPE_Q4_K, WISP_TYPE_Q5_K,
                                   WISP_TYPE_Q6_K, WISP_TYPE_F32, WISP_TYPE_F16, WISP_TYPE_BF16};
#define N_WEIGHT_TYPES (sizeof weight_types / sizeof weight_types[0])

static void check_matmuls(kc_run *r) {
    int shift = 0;
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const int type = weight_types[i];
        if (r->k->matmul[type] == wisp_matmul_reference) continue;
        if (is_float_type(type)) check_matmul_float(r, type, &shift);
        else check_matmul_quantized(r, type, &shift);
    }
}

/* ---- the backward pass's transposed tiles ------------------------------------------ */

/* dequant_t against the reference, bit for bit: row ranges on and off the
 * levels' row groups, column ranges of whole blocks (the contract: kernels.h),
 * quantized and raw-byte weights, a tile wider than its rows (ld >
 * rows) whose extra lane must stay untouched. */
static void check_dequant_t(kc_run *r) {
    enum { ROWS_ALL = 33, COLS_MAX = 256 };
    static const int row_ranges[][2] = {{0, 33}, {3, 20}, {16, 17}, {5, 21}, {31, 33}};
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++) {
        const int type = weight_types[i];
        if (is_float_type(type) || r->k->dequant_t[type] == wisp_dequant_t_reference) continue;
        const wisp_type_info *ti = wisp_type_info_of(type);
        const int64_t be = ti->block_elems, n = be == WISP_QK_K ? 3 * be : 18 * be;
        const int64_t col_ranges[][2] = {{0, be}, {be, 2 * be}, {n - be, n}, {0, COLS_MAX / be * be}, {2 * be, 3 * be}};
        for (int raw = 0; raw < 2; raw++) {
            r->used = 0;
            const size_t wb = wisp_type_row_bytes(type, n), tile = (size_t)COLS_MAX * (ROWS_ALL + 1);
            uint8_t *w = take(r, wb * ROWS_ALL);
            float *row = take(r, sizeof(float) * (size_t)n), *got = take(r, sizeof(float) * tile),
                  *want = take(r, sizeof(float) * tile);
            if (!w || !row || !got || !want) return;
            for (int k = 0; k < ROWS_ALL; k++) {
                uint8_t *wr = w + (size_t)k * wb;
                fill_gauss(r, row, n, 0.05f);
                ti->quantize(row, wr, n);
                if (!raw) continue;
                fill_bytes(r, wr, wb);
                for (int64_t b = 0; b < n / be; b++) sane_scales(r, type, wr + (size_t)b * ti->block_bytes);
            }
            for (size_t a = 0; a < sizeof row_ranges / sizeof row_ranges[0]; a++)
                for (size_t c = 0; c < sizeof col_ranges / sizeof col_ranges[0]; c++) {
                    const int64_t r0 = row_ranges[a][0], r1 = row_ranges[a][1], c0 = col_ranges[c][0],
                                  c1 = col_ranges[c][1], ld = r1 - r0 + 1;
                    for (size_t e = 0; e < tile; e++) got[e] = want[e] = -7.0f;
                    wisp_dequant_t_reference(w, wb, type, r0, r1, c0, c1, want, ld);
                    r->k->dequant_t[type](w, wb, type, r0, r1, c0, c1, got, ld);
                    const bool same = memcmp(got, want, sizeof(float) * (size_t)((c1 - c0) * ld)) == 0;
                    verdict(r, KC_DEQUANT_T, same, "%s %s rows [%lld, %lld) columns [%lld, %lld): the tile differs",
                            ti->name, raw ? "raw" : "quantized", (long long)r0, (long long)r1, (long long)c0,
                            (long long)c1);
                }
        }
    }
}

/* ---- attention's inner loops ----------------------------------------------------- */

/* Key/value rows of hd elements `stride` bytes apart, aligned to their
 * element (as in the KV cache, and as a float load requires) but not to a
 * vector: the kernels must not assume more. */
static void fill_cache(kc_run *r, uint8_t *rows, size_t stride, int f16, int64_t n, int64_t hd) {
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < hd; i++) {
            uint8_t *p = rows + (size_t)j * stride;
            if (f16) wisp_store_u16(p + 2 * i, wisp_f32_to_f16(gauss(r)));
            else wisp_store_f32(p + 4 * i, gauss(r));
        }
}

static double cache_magnitude(const uint8_t *row, int f16, const float *q, int64_t hd) {
    double s = 0;
    for (int64_t i = 0; i < hd; i++)
        s += fabs((double)q[i] * (f16 ? wisp_f16_to_f32(wisp_load_u16(row + 2 * i)) : wisp_load_f32(row + 4 * i)));
    return s;
}

static void check_attention(kc_run *r) {
    const wisp_kernels *k = r->k, *ref = wisp_kernels_reference();
    if (k->attn_scores == ref->attn_scores && k->attn_values == ref->attn_values) return;
    static const int64_t dims[] = {1, 7, 16, 23, 64, 80, 128}, counts[] = {1, 3, 4, 5, 12, 17, 23, 34, 45, 56, 67};
    enum { MAXN = 67, MAXD = 128, PAD = 5 };
    const float scale = 0.125f;
    r->used = 0;
    uint8_t *cache = take(r, (size_t)(MAXD + PAD) * 4 * MAXN + 8);
    float *q = take(r, sizeof(float) * MAXD), *w = take(r, sizeof(float) * MAXN), *s0 = take(r, sizeof(float) * MAXN),
          *s1 = take(r, sizeof(float) * MAXN), *o0 = take(r, sizeof(float) * MAXD), *o1 = take(r, sizeof(float) * MAXD);
    if (!cache || !q || !w || !s0 || !s1 || !o0 || !o1) return;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int f16 = 0; f16 < 2; f16++)
            for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
                const int64_t hd = dims[di], n = counts[ni];
                const size_t elem = f16 ? 2 : 4, stride = (size_t)(hd + PAD) * elem;
                uint8_t *rows = cache + elem;
                fill_cache(r, rows, stride, f16, n, hd);
                fill_gauss(r, q, hd, 1.0f);
                if (k->attn_scores != ref->attn_scores) {
                    ref->attn_scores(s0, rows, stride, f16, n, q, hd, scale);
                    k->attn_scores(s1, rows, stride, f16, n, q, hd, scale);
                    int64_t bad = -1;
                    for (int64_t j = 0; j < n && bad < 0; j++) {
                        const double bound = r->bounds.dot_lanes ? scale * dot_bound(r, hd) *
                                                                           cache_magnitude(rows + (size_t)j * stride, f16, q, hd) +
                                                                       r->bounds.scores_rel * fabs((double)s0[j])
                                                                 : 0;
                        if (!close_enough(r, KC_ATTENTION, s1[j], s0[j], bound)) bad = j;
                    }
                    verdict(r, KC_ATTENTION, bad < 0, "attn_scores hd=%lld n=%lld f16=%d key %lld: %.9g, reference %.9g",
                            (long long)hd, (long long)n, f16, (long long)bad, bad < 0 ? 0.0 : (double)s1[bad],
                            bad < 0 ? 0.0 : (double)s0[bad]);
                }
                if (k->attn_values != ref->attn_values) {
                    for (int64_t j = 0; j < n; j++) w[j] = (float)exp(-0.1 * (double)j) * (j % 3 ? 1.0f : -0.5f);
                    fill_gauss(r, o0, hd, 1.0f);
                    memcpy(o1, o0, sizeof(float) * (size_t)hd);
                    ref->attn_values(o0, w, rows, stride, f16, n, hd);
                    k->attn_values(o1, w, rows, stride, f16, n, hd);
                    verdict(r, KC_ATTENTION, memcmp(o0, o1, sizeof(float) * (size_t)hd) == 0, "attn_values hd=%lld n=%lld f16=%d differs",
                            (long long)hd, (long long)n, f16);
                }
            }
}

/* The *_heads kernels (a kv head's query heads at once, F16 cache) against
 * the reference's per-head loops, 1..9 heads, head sizes with ragged ends. */
static void check_attention_heads(kc_run *r) {
    const wisp_kernels *k = r->k, *ref = wisp_kernels_reference();
    if (k->attn_scores_heads == ref->attn_scores_heads && k->attn_values_heads == ref->attn_values_heads) return;
    static const int64_t dims[] = {7, 16, 64, 100};
    enum { MAXN = 70, MAXQ = 9, MAXD = 100 };
    const float scale = 0.125f;
    r->used = 0;
    uint16_t *rows = take(r, (size_t)(MAXD + 5) * 2 * MAXN);
    float *q = take(r, sizeof(float) * (MAXD + 3) * MAXQ), *o0 = take(r, sizeof(float) * (MAXD + 3) * MAXQ),
          *o1 = take(r, sizeof(float) * (MAXD + 3) * MAXQ), *s0 = take(r, sizeof(float) * MAXN * MAXQ),
          *s1 = take(r, sizeof(float) * MAXN * MAXQ);
    if (!rows || !q || !o0 || !o1 || !s0 || !s1) return;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int64_t nq = 1; nq <= MAXQ; nq++)
            for (int64_t n = 1; n <= MAXN; n += 23) {
                const int64_t hd = dims[di], ld = hd + 3;
                const size_t stride = (size_t)(hd + 5) * 2;
                fill_cache(r, (uint8_t *)rows, stride, 1, n, hd);
                fill_gauss(r, q, ld * nq, 1.0f);
                if (k->attn_scores_heads != ref->attn_scores_heads) {
                    for (int64_t h = 0; h < nq; h++) ref->attn_scores(s0 + h * MAXN, rows, stride, 1, n, q + h * ld, hd, scale);
                    k->attn_scores_heads(s1, MAXN, rows, stride, n, q, ld, nq, hd, scale);
                    int64_t bad = -1;
                    for (int64_t e = 0; e < nq * MAXN && bad < 0; e++) {
                        const int64_t h = e / MAXN, j = e % MAXN;
                        if (j >= n) continue;
                        const double bound =
                            r->bounds.dot_lanes ? scale * dot_bound(r, hd) * cache_magnitude((const uint8_t *)rows + (size_t)j * stride, 1, q + h * ld, hd) +
                                                      r->bounds.scores_rel * fabs((double)s0[e])
                                                : 0;
                        if (!close_enough(r, KC_HEADS, s1[e], s0[e], bound)) bad = e;
                    }
                    verdict(r, KC_HEADS, bad < 0, "attn_scores_heads hd=%lld heads=%lld n=%lld [%lld]: %.9g, reference %.9g",
                            (long long)hd, (long long)nq, (long long)n, (long long)bad, bad < 0 ? 0.0 : (double)s1[bad],
                            bad < 0 ? 0.0 : (double)s0[bad]);
                }
                if (k->attn_values_heads != ref->attn_values_heads) {
                    for (int64_t h = 0; h < nq; h++)
                        for (int64_t j = 0; j < n; j++) s0[h * MAXN + j] = (float)exp(-0.1 * (double)(j + h));
                    fill_gauss(r, o0, ld * nq, 1.0f);
                    memcpy(o1, o0, sizeof(float) * (size_t)(ld * nq));
                    for (int64_t h = 0; h < nq; h++) ref->attn_values(o0 + h * ld, s0 + h * MAXN, rows, stride, 1, n, hd);
                    k->attn_values_heads(o1, ld, s0, MAXN, rows, stride, n, nq, hd);
                    verdict(r, KC_HEADS, memcmp(o0, o1, sizeof(float) * (size_t)(ld * nq)) == 0,
                            "attn_values_heads hd=%lld heads=%lld n=%lld differ", (long long)hd, (long long)nq, (long long)n);
                }
            }
}

/* ---- the online softmax's block steps ---------------------------------------------- */

/* Scores spread wide (e^x from 1 down to underflow), with -inf, NaN and a
 * deep negative in some blocks, and blocks that are all NaN. */
static void check_softmax(kc_run *r) {
    const wisp_kernels *k = r->k, *ref = wisp_kernels_reference();
    if (k->max_f32 == ref->max_f32 && k->softmax_exp == ref->softmax_exp) return;
    enum { MAXN = 131 };
    float s0[MAXN], s1[MAXN];
    for (int64_t n = 0; n <= MAXN; n += n < 40 ? 1 : 13)
        for (int variant = 0; variant < 3; variant++) {
            fill_gauss(r, s0, n, 8.0f);
            if (variant == 1 && n > 3) {
                s0[n / 3] = -INFINITY;
                s0[n / 2] = NAN;
                s0[n - 1] = -200.0f;
            }
            if (variant == 2)
                for (int64_t j = 0; j < n; j++) s0[j] = NAN;
            memcpy(s1, s0, sizeof(float) * (size_t)n);
            const float m0 = ref->max_f32(s0, n), m1 = k->max_f32(s1, n);
            verdict(r, KC_SOFTMAX, same_bits(m0, m1), "max_f32 n=%lld variant %d: %.9g, reference %.9g", (long long)n, variant,
                    (double)m1, (double)m0);
            if (m0 == -INFINITY || k->softmax_exp == ref->softmax_exp) continue; /* attention never takes e^(s - max) then */
            double l0 = 0.75, l1 = 0.75;                                        /* a running sum from earlier blocks */
            ref->softmax_exp(s0, n, m0, &l0);
            k->softmax_exp(s1, n, m0, &l1);
            int64_t bad = -1;
            for (int64_t j = 0; j < n && bad < 0; j++)
                if (!close_enough(r, KC_SOFTMAX, s1[j], s0[j], 0x1.0p-20 * fabs((double)s0[j]) + 0x1.0p-100)) bad = j;
            verdict(r, KC_SOFTMAX, bad < 0, "softmax_exp n=%lld [%lld]: %.9g, reference %.9g", (long long)n, (long long)bad,
                    bad < 0 ? 0.0 : (double)s1[bad], bad < 0 ? 0.0 : (double)s0[bad]);
            const bool sum_ok = r->bounds.dot_lanes == 0 ? memcmp(&l0, &l1, sizeof l0) == 0
                                : l0 != l0                 ? l1 != l1
                                                           : fabs(l1 - l0) <= 0x1.0p-20 * l0;
            verdict(r, KC_SOFTMAX, sum_ok, "softmax_exp n=%lld: sum %.17g, reference %.17g", (long long)n, l1, l0);
        }
}

/* ---- the scalar reference against exact arithmetic ------------------------------ */

/* The reference defines every other level's answers; these check it against
 * double-precision arithmetic (exact for a product of two floats) with the
 * textbook bounds of its loops: a float sum of n products is within
 * (n + 2) 2^-24 sum|a_i b_i| of the exact dot; a few roundings after a
 * double-precision step (rmsnorm) stay within 4 2^-24 relative; expf-based
 * steps (silu_mul, softmax_exp) within 2^-21 relative; conversions exact,
 * f32 -> f16 rounding to nearest, ties to even. */

static bool within(kc_run *r, int fam, double got, double exact, double bound) {
    if (exact != exact) return got != got;
    const double err = fabs(got - exact);
    r->cell[fam].bounded = true;
    if (bound > 0 && err / bound > r->cell[fam].worst) r->cell[fam].worst = err / bound;
    return err <= bound;
}

static double exact_dot(const float *a, const float *b, int64_t n, double *mag) {
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)a[i] * b[i];
        m += fabs((double)a[i] * b[i]);
    }
    *mag = m;
    return s;
}

static double textbook_dot_bound(int64_t n, double mag) { return ((double)n + 2) * 0x1.0p-24 * mag; }

static void oracle_vectors(kc_run *r) {
    const wisp_kernels *ref = wisp_kernels_reference();
    r->used = 0;
    float *a_mem = take(r, sizeof(float) * (N_VEC + 1)), *b = take(r, sizeof(float) * N_VEC), *w = take(r, sizeof(float) * N_VEC),
          *y = take(r, sizeof(float) * N_VEC), *ah = take(r, sizeof(float) * N_VEC);
    uint16_t *h = take(r, sizeof(uint16_t) * N_VEC);
    if (!a_mem || !b || !w || !y || !ah || !h) return;
    float *a = a_mem + 1;
    for (int64_t n = 1; n <= N_VEC; n++) {
        fill_gauss(r, a, n, 1.0f);
        fill_gauss(r, b, n, 1.0f);
        fill_gauss(r, w, n, 1.0f);
        for (int64_t i = 0; i < n; i++) ah[i] = wisp_f16_to_f32(h[i] = wisp_f32_to_f16(a[i]));
        double mag, exact = exact_dot(a, b, n, &mag);
        float got = ref->dot_f32(a, b, n);
        verdict(r, KC_DOTS, within(r, KC_DOTS, got, exact, textbook_dot_bound(n, mag)), "reference dot_f32 n=%lld: %.9g, exact %.17g",
                (long long)n, (double)got, exact);
        exact = exact_dot(ah, b, n, &mag);
        got = ref->dot_f16_f32(h, b, n);
        verdict(r, KC_DOTS, within(r, KC_DOTS, got, exact, textbook_dot_bound(n, mag)),
                "reference dot_f16_f32 n=%lld: %.9g, exact %.17g", (long long)n, (double)got, exact);

        ref->rmsnorm(y, a, w, n, 1e-5f);
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)a[i] * a[i];
        const double inv = 1.0 / sqrt(ss / (double)n + (double)1e-5f);
        int64_t bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            const double e = (double)a[i] * w[i] * inv;
            if (!within(r, KC_RMSNORM, y[i], e, 4 * 0x1.0p-24 * fabs(e))) bad = i;
        }
        verdict(r, KC_RMSNORM, bad < 0, "reference rmsnorm n=%lld [%lld] off its exact value", (long long)n, (long long)bad);

        for (int64_t i = 0; i < n; i++) y[i] = (i % 5 == 2 ? 40.0f : 6.0f) * a[i];
        static const float edges[] = {100.0f, -100.0f, -87.9f, 95.0f, -95.0f, -88.5f};
        for (int64_t i = 0; i < 6 && i < n - 4; i++) y[i] = edges[i];
        for (int64_t i = 0; i < n; i++) ah[i] = y[i]; /* the inputs, kept */
        ref->silu_mul(y, b, n);
        bad = -1;
        for (int64_t i = 0; i < n && bad < 0; i++) {
            const double g = ah[i], e = g / (1.0 + exp(-g)) * b[i];
            if (!within(r, KC_SILU, y[i], e, 0x1.0p-21 * fabs(e) + 0x1.0p-100)) bad = i;
        }
        verdict(r, KC_SILU, bad < 0, "reference silu_mul n=%lld [%lld]: %.9g off its exact value", (long long)n, (long long)bad,
                bad < 0 ? 0.0 : (double)y[bad]);
    }
}

/* f32 -> f16, rounding to nearest with ties to even, from the value itself */
static uint16_t exact_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (x != x) return (uint16_t)(sign | 0x7e00u);
    double v = fabs((double)x);
    if (v >= 65520.0) return (uint16_t)(sign | 0x7c00u); /* rounds past the largest half */
    int e;
    frexp(v, &e); /* v = f 2^e, f in [0.5, 1) */
    e -= 1;       /* v in [2^e, 2^(e+1)) */
    if (e < -14) return (uint16_t)(sign | (uint16_t)rint(v * 0x1.0p24)); /* subnormal (1024: the smallest normal) */
    double m = rint(ldexp(v, 10 - e));                                     /* 1024..2048 */
    if (m == 2048.0) { m = 1024.0; e++; }
    if (e > 15) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)(m - 1024.0));
}

/* f16 -> its value, from the bits */
static float exact_half_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (float)(h & 0x8000u ? -v : v);
}

static void oracle_conversions(kc_run *r) {
    const wisp_kernels *ref = wisp_kernels_reference();
    r->used = 0;
    uint16_t *in16 = take(r, sizeof(uint16_t) * CHUNK), *h = take(r, sizeof(uint16_t) * CHUNK);
    float *f = take(r, sizeof(float) * CHUNK);
    if (!in16 || !h || !f) return;
    for (uint32_t base = 0; base < 0x10000; base += CHUNK) {
        for (uint32_t i = 0; i < CHUNK; i++) in16[i] = (uint16_t)(base + i);
        ref->f16_to_f32(in16, f, CHUNK);
        int bad = 0;
        for (int i = 0; i < CHUNK; i++) {
            const float e = exact_half_value(in16[i]);
            bad += e != e ? f[i] == f[i] : !same_bits(f[i], e);
        }
        ref->bf16_to_f32(in16, f, CHUNK);
        for (int i = 0; i < CHUNK; i++) {
            uint32_t u;
            memcpy(&u, &f[i], sizeof u);
            bad += u != (uint32_t)in16[i] << 16;
        }
        verdict(r, KC_CONVERT, bad == 0, "reference f16/bf16_to_f32: %d of halves %u.. not their exact value", bad, base);
    }
    for (int round = 0; round < 64; round++) {
        for (int i = 0; i < CHUNK; i++) {
            uint32_t u = (uint32_t)(wisp_rng_next(&r->rng) >> 32);
            if (i % 4 == 1) u = (u & 0x80001fffu) | ((0x66u + (uint32_t)((i / 4 + round) % 40)) << 23);
            if (i % 4 == 2) u = (u & 0xffffe000u) | 0x1000u;
            memcpy(&f[i], &u, sizeof u);
        }
        ref->f32_to_f16(f, h, CHUNK);
        int bad = 0;
        for (int i = 0; i < CHUNK; i++) {
            const uint16_t e = exact_f16(f[i]);
            bad += f[i] != f[i] ? (h[i] & 0x7c00) != 0x7c00 || !(h[i] & 0x3ff) : h[i] != e;
        }
        verdict(r, KC_CONVERT, bad == 0, "reference f32_to_f16: %d of %d values not rounded to nearest even (round %d)", bad,
                CHUNK, round);
    }
}

static void oracle_matmul_float(kc_run *r) {
    static const int types[] = {WISP_TYPE_F32, WISP_TYPE_F16, WISP_TYPE_BF16};
    for (int ti = 0; ti < 3; ti++)
        for (int64_t n = 1; n <= N_VEC; n++) {
            fixture f;
            if (!fixture_make(r, &f, types[ti], n, 3, 2, false, (int)(n % 4))) return;
            int64_t bad = -1;
            for (int64_t e = 0; e < 6 && bad < 0; e++) {
                const int64_t i = e % 3, t = e / 3;
                wisp_type_info_of(f.type)->dequantize(f.w + (size_t)i * f.wb, f.row, n);
                double exact = 0, mag = 0;
                for (int64_t j = 0; j < n; j++) {
                    const double p = (double)f.row[j] * wisp_load_f32(f.x + (size_t)t * f.xb + 4 * (size_t)j);
                    exact += p;
                    mag += fabs(p);
                }
                if (!within(r, KC_MATMUL_F, f.y_ref[t * 3 + i], exact, textbook_dot_bound(n, mag))) bad = e;
            }
            verdict(r, KC_MATMUL_F, bad < 0, "reference %s matmul n=%lld: output %lld off its exact value",
                    wisp_type_info_of(types[ti])->name, (long long)n, (long long)bad);
        }
}

static void oracle_attention_softmax(kc_run *r) {
    const wisp_kernels *ref = wisp_kernels_reference();
    static const int64_t dims[] = {1, 7, 16, 23, 64, 80, 128};
    enum { MAXN = 67, MAXD = 128 };
    const float scale = 0.125f;
    r->used = 0;
    uint8_t *cache = take(r, (size_t)MAXD * 4 * MAXN);
    float *q = take(r, sizeof(float) * MAXD), *s = take(r, sizeof(float) * MAXN), *kf = take(r, sizeof(float) * MAXD);
    if (!cache || !q || !s || !kf) return;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (int f16 = 0; f16 < 2; f16++) {
            const int64_t hd = dims[di], n = MAXN;
            const size_t stride = (size_t)hd * (f16 ? 2 : 4);
            fill_cache(r, cache, stride, f16, n, hd);
            fill_gauss(r, q, hd, 1.0f);
            ref->attn_scores(s, cache, stride, f16, n, q, hd, scale);
            int64_t bad = -1;
            for (int64_t j = 0; j < n && bad < 0; j++) {
                for (int64_t i = 0; i < hd; i++)
                    kf[i] = f16 ? wisp_f16_to_f32(wisp_load_u16(cache + j * stride + 2 * (size_t)i))
                                : wisp_load_f32(cache + j * stride + 4 * (size_t)i);
                double mag, exact = scale * exact_dot(kf, q, hd, &mag);
                if (!within(r, KC_ATTENTION, s[j], exact, textbook_dot_bound(hd + 1, scale * mag))) bad = j;
            }
            verdict(r, KC_ATTENTION, bad < 0, "reference attn_scores hd=%lld f16=%d: key %lld off its exact value", (long long)hd,
                    f16, (long long)bad);
        }
    for (int64_t n = 1; n <= 131; n += n < 40 ? 1 : 13) {
        float x[131];
        fill_gauss(r, x, n, 8.0f);
        float m = ref->max_f32(x, n);
        double sum = 0.75, want_sum = 0.75;
        float e[131];
        memcpy(e, x, sizeof(float) * (size_t)n);
        ref->softmax_exp(e, n, m, &sum);
        int64_t bad = -1;
        for (int64_t j = 0; j < n; j++) {
            const double w = exp((double)x[j] - m);
            want_sum += w;
            /* s - m is taken in float: its rounding moves the exponent by up to |s - m| 2^-24 */
            const double bound = (0x1.0p-21 + fabs((double)x[j] - m) * 0x1.0p-24) * w + 0x1.0p-126;
            if (bad < 0 && !within(r, KC_SOFTMAX, e[j], w, bound)) bad = j;
        }
        float want_max = x[0];
        for (int64_t j = 1; j < n; j++) want_max = x[j] > want_max ? x[j] : want_max;
        verdict(r, KC_SOFTMAX, same_bits(m, want_max), "reference max_f32 n=%lld: %.9g, exactly %.9g", (long long)n, (double)m,
                (double)want_max);
        verdict(r, KC_SOFTMAX, bad < 0, "reference softmax_exp n=%lld [%lld]: %.9g off its exact value", (long long)n,
                (long long)bad, bad < 0 ? 0.0 : (double)e[bad]);
        verdict(r, KC_SOFTMAX, within(r, KC_SOFTMAX, sum, want_sum, 0x1.0p-20 * want_sum), "reference softmax_exp n=%lld: sum %.17g, exactly %.17g",
                (long long)n, sum, want_sum);
    }
}

static void oracle_all(kc_run *r) {
    oracle_vectors(r);
    oracle_conversions(r);
    oracle_matmul_float(r);
    oracle_attention_softmax(r);
}

/* ---- the run and the table ------------------------------------------------------- */

long kc_check_all(kc_run *run) {
    if (!run->rng) run->rng = 0x5eedull;
    check_vectors(run);
    check_conversions(run);
    check_quantizer(run, WISP_TYPE_Q8_0);
    check_quantizer(run, WISP_TYPE_Q8_1);
    check_quantizer(run, WISP_TYPE_Q8_K);
    check_matmuls(run);
    check_dequant_t(run);
    check_attention(run);
    check_attention_heads(run);
    check_softmax(run);
    if (run->bounds.oracle) oracle_all(run);
    return run->failures;
}

#define LEVEL_W 14
#define CELL_W 10

/* append `s` to line at *n, padded with spaces to `width` */
static void put_cell(char *line, size_t cap, size_t *n, const char *s, size_t width) {
    size_t len = strlen(s);
    for (size_t i = 0; i < len && *n + 1 < cap; i++) line[(*n)++] = s[i];
    for (size_t i = len; i < width && *n + 1 < cap; i++) line[(*n)++] = ' ';
    line[*n] = 0;
}

void kc_table_header(void (*say_line)(const char *line)) {
    char line[256];
    size_t n = 0;
    put_cell(line, sizeof line, &n, "level", LEVEL_W);
    for (int f = 0; f < KC_FAMILIES; f++) put_cell(line, sizeof line, &n, family_names[f], CELL_W);
    say_line(line);
}

void kc_table_row(const kc_run *run) {
    char line[256], cell[32];
    size_t n = 0;
    put_cell(line, sizeof line, &n, run->k->name, LEVEL_W);
    for (int f = 0; f < KC_FAMILIES; f++) {
        const kc_cell *c = &run->cell[f];
        if (c->failures) wisp_format(cell, sizeof cell, "FAIL %ld", c->failures);
        else if (!c->checks) wisp_format(cell, sizeof cell, "ref");
        else if (c->bounded) wisp_format(cell, sizeof cell, "%.3f", c->worst);
        else wisp_format(cell, sizeof cell, "exact");
        put_cell(line, sizeof line, &n, cell, CELL_W);
    }
    run->say(line);
}
