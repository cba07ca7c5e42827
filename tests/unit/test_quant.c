/* The tensor type table and the reference kernels of every type wisp runs:
 *  - the table itself (ids, names, block geometry, lookups, row sizes);
 *  (dequantization against ../shared/golden/dequant is test_quant_golden.c);
 *  - hand-built blocks for the layouts no golden file covers (IQ4_NL) and the
 *    activation schemes (Q8_0, Q8_1, Q8_K as llama.cpp quantizes them);
 *  - quantize -> dequantize error on seeded Gaussian data, per type;
 *  - dot products against float64 dots, at many lengths and alignments;
 *  - awkward inputs (zeros, constants, outliers, huge values, NaN). */
#include "check.h"
#include "gguf.h"
#include "half.h"
#include "quant.h"
#include "types.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static void rng_seed(uint64_t s) { rng_state = s * 0x9e3779b97f4a7c15ull + 1; }

static uint64_t rng_next(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static double rng_uniform(void) { return (double)((rng_next() >> 11) + 1) * 0x1.0p-53; } /* (0, 1] */

static double rng_gauss(void) {
    return sqrt(-2.0 * log(rng_uniform())) * cos(6.283185307179586 * rng_uniform());
}

static void fill_gauss(float *x, int64_t n, double sigma) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sigma * rng_gauss());
}

static const wisp_type_info *info(int type) { return wisp_type_info_of(type); }

static size_t row_bytes(int type, int64_t n) { return wisp_type_row_bytes(type, n); }

/* Every type wisp runs as a weight, and what its quantizer must achieve:
 * relative RMS error of quantize -> dequantize on N(0,1) data (65536 values,
 * seed 1), measured with this implementation (gcc 12 and clang 14, x86-64)
 * and bounded a little above. For scale, the uniform-grid optimum with an
 * unquantized float scale per block, found by the same least-squares search:
 * 0.0048 for 8 bits per 32 and 0.0167 for 6 bits per 16; no Q6_K quantizer
 * can reach the 0.012 once hoped for. Q8_0's quantizer is llama.cpp's
 * activation scheme (amax/127, round half away), as Q8_0 is also an
 * activation type; that costs ~10% over the optimum. */
typedef struct weight_case {
    int type;
    double max_rel_rms;
} weight_case;

static const weight_case weight_cases[] = {
    {WISP_TYPE_F32, 0.0},      /* exact */
    {WISP_TYPE_F16, 0.0003},   /* measured 0.00021 */
    {WISP_TYPE_BF16, 0.002},   /* measured 0.00166 */
    {WISP_TYPE_Q8_0, 0.0055},  /* measured 0.00537 */
    {WISP_TYPE_Q6_K, 0.0175},  /* measured 0.01678 */
    {WISP_TYPE_Q5_1, 0.036},   /* measured 0.03363 */
    {WISP_TYPE_Q5_K, 0.037},   /* measured 0.03484 */
    {WISP_TYPE_Q5_0, 0.042},   /* measured 0.04004 */
    {WISP_TYPE_Q4_1, 0.074},   /* measured 0.06969 */
    {WISP_TYPE_Q4_K, 0.075},   /* measured 0.07034 */
    {WISP_TYPE_IQ4_NL, 0.078}, /* measured 0.07321 */
    {WISP_TYPE_Q4_0, 0.085},   /* measured 0.08106 */
    {WISP_TYPE_Q3_K, 0.152},   /* measured 0.14377 */
    {WISP_TYPE_Q2_K, 0.28},    /* measured 0.26414 */
};
#define N_WEIGHT_CASES (int)(sizeof weight_cases / sizeof weight_cases[0])

/* ---- the table ----------------------------------------------------------------- */

typedef struct expected_row {
    int id;
    const char *name;
    int elems, bytes;
} expected_row;

/* GGML's ids and block geometry (ggml.h / ggml-common.h). */
static const expected_row expected_rows[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},       {3, "Q4_1", 32, 20},
    {4, "Q4_2", 16, 10},       {5, "Q4_3", 16, 12},       {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 36},       {10, "Q2_K", 256, 84},     {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66},  {17, "IQ2_XS", 256, 74},   {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},   {22, "IQ2_S", 256, 82},    {23, "IQ4_XS", 256, 136},
    {24, "I8", 1, 1},          {25, "I16", 1, 2},         {26, "I32", 1, 4},         {27, "I64", 1, 8},
    {28, "F64", 1, 8},         {29, "IQ1_M", 256, 56},    {30, "BF16", 1, 2},        {31, "Q4_0_4_4", 32, 18},
    {32, "Q4_0_4_8", 32, 18},  {33, "Q4_0_8_8", 32, 18},  {34, "TQ1_0", 256, 54},    {35, "TQ2_0", 256, 66},
    {36, "IQ4_NL_4_4", 32, 18}, {37, "IQ4_NL_4_8", 32, 18}, {38, "IQ4_NL_8_8", 32, 18}, {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},     {41, "Q1_0", 128, 18},     {42, "Q2_0", 64, 18},
};

static void test_table(void) {
    const int n_rows = (int)(sizeof expected_rows / sizeof expected_rows[0]);
    for (int i = 0; i < n_rows; i++) {
        const expected_row *e = &expected_rows[i];
        const wisp_type_info *t = info(e->id);
        REQUIRE(t != NULL, "no row for GGML type %d (%s)", e->id, e->name);
        CHECK(strcmp(t->name, e->name) == 0, "type %d is named %s, want %s", e->id, t->name, e->name);
        CHECK(t->block_elems == e->elems && t->block_bytes == e->bytes, "%s: block %d/%d B, want %d/%d B", e->name,
              t->block_elems, t->block_bytes, e->elems, e->bytes);
        CHECK(wisp_type_from_name(e->name) == e->id, "from_name(%s)", e->name);
        char lower[32];
        size_t k = 0;
        for (; e->name[k] && k < sizeof lower - 1; k++)
            lower[k] = (char)(e->name[k] >= 'A' && e->name[k] <= 'Z' ? e->name[k] + 32 : e->name[k]);
        lower[k] = 0;
        CHECK(wisp_type_from_name(lower) == e->id, "from_name(%s) is case-insensitive", lower);
    }
    const int no_rows[] = {-1, 43, 44, 100, 255, 1024, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof no_rows / sizeof no_rows[0]; i++)
        CHECK(info(no_rows[i]) == NULL && !wisp_type_is_weight(no_rows[i]), "type %d should have no row", no_rows[i]);
    for (int id = 0; id < WISP_TYPE_COUNT; id++) CHECK(info(id) != NULL, "id %d below WISP_TYPE_COUNT has no row", id);

    const char *bad_names[] = {"", "Q4", "Q4_K_M", "q4_k ", "F3", "F322", "IQ4"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        CHECK(wisp_type_from_name(bad_names[i]) == -1, "'%s' is not a type name", bad_names[i]);
    CHECK(wisp_type_from_name(NULL) == -1, "NULL name");
    CHECK(wisp_type_from_name("q4_K") == WISP_TYPE_Q4_K, "ggml's own spelling q4_K");

    /* weights: everything present, activation type consistent */
    for (int i = 0; i < N_WEIGHT_CASES; i++) {
        const int type = weight_cases[i].type;
        const wisp_type_info *t = info(type);
        CHECK(wisp_type_is_weight(type), "%s is a weight type", t->name);
        CHECK(t->dequantize && t->quantize && t->dot, "%s has all three kernels", t->name);
        const wisp_type_info *a = info(t->act_type);
        REQUIRE(a != NULL, "%s: act_type %d has no row", t->name, t->act_type);
        CHECK(a->quantize && a->dequantize, "%s: act type %s can be produced", t->name, a->name);
        CHECK(a->block_elems == t->block_elems || a->block_elems == 1, "%s: act blocks line up", t->name);
        const bool is_float = type == WISP_TYPE_F32 || type == WISP_TYPE_F16 || type == WISP_TYPE_BF16;
        CHECK(t->act_type == (is_float ? WISP_TYPE_F32 : t->block_elems == 256 ? WISP_TYPE_Q8_K
                              : (type == WISP_TYPE_Q4_1 || type == WISP_TYPE_Q5_1) ? WISP_TYPE_Q8_1
                                                                                 : WISP_TYPE_Q8_0),
              "%s dots against %s", t->name, a->name);
    }
    const int not_weights[] = {WISP_TYPE_Q8_1, WISP_TYPE_Q8_K, WISP_TYPE_I8, WISP_TYPE_I32, WISP_TYPE_F64, 16, 23, 39};
    for (size_t i = 0; i < sizeof not_weights / sizeof not_weights[0]; i++) {
        CHECK(!wisp_type_is_weight(not_weights[i]), "type %d is not a weight wisp runs", not_weights[i]);
        CHECK(info(not_weights[i])->act_type == -1, "type %d has no act_type", not_weights[i]);
    }
    CHECK(info(WISP_TYPE_Q8_K)->quantize && info(WISP_TYPE_Q8_1)->quantize, "activation quantizers present");

    /* row sizes */
    CHECK(row_bytes(WISP_TYPE_Q4_K, 4096) == 16 * 144, "Q4_K 4096");
    CHECK(row_bytes(WISP_TYPE_Q4_K, 4000) == 0, "Q4_K row not a multiple of 256");
    CHECK(row_bytes(WISP_TYPE_Q4_0, 96) == 3 * 18, "Q4_0 96");
    CHECK(row_bytes(WISP_TYPE_F32, 3) == 12, "F32 3");
    CHECK(row_bytes(WISP_TYPE_BF16, 7) == 14, "BF16 7");
    CHECK(row_bytes(WISP_TYPE_F16, 0) == 0, "empty row");
    CHECK(row_bytes(WISP_TYPE_Q4_0, -32) == 0, "negative length");
    CHECK(row_bytes(43, 32) == 0 && row_bytes(-1, 32) == 0, "unknown type");
    CHECK(row_bytes(39, 64) == 34, "MXFP4 sizes");
    CHECK(row_bytes(WISP_TYPE_F64, INT64_MAX / 2) == 0, "overflowing size gives 0");
    CHECK(row_bytes(WISP_TYPE_I8, INT64_MAX) == (sizeof(size_t) >= 8 ? (size_t)INT64_MAX : 0), "huge I8 row");
}

/* ---- hand-built blocks ------------------------------------------------------------ */

static void test_iq4_nl_layout(void) {
    uint8_t blk[18];
    wisp_store_u16(blk, 0x3800); /* d = 0.5 */
    for (int j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    float out[32];
    info(WISP_TYPE_IQ4_NL)->dequantize(blk, out, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(out[j] == 0.5f * (float)wisp_iq4nl_table[j], "IQ4_NL element %d", j);
        CHECK(out[16 + j] == 0.5f * (float)wisp_iq4nl_table[15 - j], "IQ4_NL element %d", 16 + j);
    }
    const int8_t want[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    CHECK(memcmp(want, wisp_iq4nl_table, 16) == 0, "IQ4_NL table");
    /* nearest-entry search, including midpoints (ties go to the upper entry) */
    for (int k = 0; k < 16; k++) {
        CHECK(wisp_nearest_in_table(wisp_iq4nl_table, (float)want[k]) == k, "exact entry %d", k);
        if (k < 15) {
            float mid = 0.5f * ((float)want[k] + (float)want[k + 1]);
            CHECK(wisp_nearest_in_table(wisp_iq4nl_table, nextafterf(mid, -1e9f)) == k, "below midpoint %d", k);
            CHECK(wisp_nearest_in_table(wisp_iq4nl_table, nextafterf(mid, 1e9f)) == k + 1, "above midpoint %d", k);
        }
    }
    CHECK(wisp_nearest_in_table(wisp_iq4nl_table, -1e30f) == 0 && wisp_nearest_in_table(wisp_iq4nl_table, 1e30f) == 15,
          "out of range clamps");
    CHECK(wisp_nearest_in_table(wisp_iq4nl_table, NAN) == 0, "NaN maps somewhere valid");
}

static void test_activation_schemes(void) {
    /* Q8_0 / Q8_1: d = amax/127, q = roundf(x/d) (ties away from zero) */
    float x[32] = {0};
    x[0] = 127.0f;
    x[1] = 63.5f;
    x[2] = -63.5f;
    x[3] = 0.5f;
    x[4] = -0.5f;
    x[5] = 1.49f;
    x[6] = -127.0f;
    x[7] = 2.5f;
    uint8_t q80[34], q81[36];
    info(WISP_TYPE_Q8_0)->quantize(x, q80, 32);
    info(WISP_TYPE_Q8_1)->quantize(x, q81, 32);
    const int8_t want[8] = {127, 64, -64, 1, -1, 1, -127, 3};
    CHECK(wisp_load_u16(q80) == 0x3c00, "Q8_0 d = 1 (%04x)", wisp_load_u16(q80));
    for (int j = 0; j < 8; j++) {
        CHECK((int8_t)q80[2 + j] == want[j], "Q8_0 q[%d] = %d, want %d", j, (int8_t)q80[2 + j], want[j]);
        CHECK((int8_t)q81[4 + j] == want[j], "Q8_1 q[%d] = %d, want %d", j, (int8_t)q81[4 + j], want[j]);
    }
    int sum = 0;
    for (int j = 0; j < 32; j++) sum += (int8_t)q81[4 + j];
    CHECK(wisp_load_u16(q81) == 0x3c00 && wisp_load_u16(q81 + 2) == wisp_f32_to_f16((float)sum), "Q8_1 d and s");

    /* Q8_1 s on random data: fp16 of d * sum(q) with the unrounded d */
    float y[64];
    rng_seed(7);
    fill_gauss(y, 64, 3.0);
    uint8_t blocks[72];
    info(WISP_TYPE_Q8_1)->quantize(y, blocks, 64);
    for (int b = 0; b < 2; b++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(y[32 * b + j]));
        const float d = amax / 127.0f;
        int s = 0;
        for (int j = 0; j < 32; j++) s += (int8_t)blocks[36 * b + 4 + j];
        CHECK(wisp_load_u16(blocks + 36 * b) == wisp_f32_to_f16(d), "Q8_1 block %d d", b);
        CHECK(wisp_load_u16(blocks + 36 * b + 2) == wisp_f32_to_f16((float)s * d), "Q8_1 block %d s", b);
    }

    /* Q8_K: the value of largest magnitude maps to -127 exactly; d = 1/iscale
     * as a float; bsums per 16; ties round to even */
    float z[256];
    rng_seed(11);
    fill_gauss(z, 256, 1.0);
    z[37] = 5.0f;
    uint8_t q8k[292];
    info(WISP_TYPE_Q8_K)->quantize(z, q8k, 256);
    const float d = wisp_load_f32(q8k);
    CHECK((int8_t)q8k[4 + 37] == -127, "Q8_K extreme level %d", (int8_t)q8k[4 + 37]);
    CHECK(d == 1.0f / (-127.0f / 5.0f), "Q8_K d = %.9g", (double)d);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += (int8_t)q8k[4 + 16 * g + l];
        int16_t bs;
        memcpy(&bs, q8k + 260 + 2 * g, 2);
        CHECK(bs == s, "Q8_K bsums[%d] = %d, want %d", g, bs, s);
    }
    for (int j = 0; j < 256; j++) {
        const float iscale = -127.0f / 5.0f;
        const float v = iscale * z[j];
        const int want_q = (int)nearbyintf(v);
        CHECK((int8_t)q8k[4 + j] == (want_q > 127 ? 127 : want_q), "Q8_K q[%d]", j);
    }
    float back[256];
    info(WISP_TYPE_Q8_K)->dequantize(q8k, back, 256);
    for (int j = 0; j < 256; j++) CHECK(back[j] == d * (float)(int8_t)q8k[4 + j], "Q8_K dequant %d", j);
    /* ties: amax 127 gives iscale -1, so 2.5 -> -2 and 3.5 -> -4 */
    float t[256] = {0};
    t[0] = 127.0f;
    t[1] = 2.5f;
    t[2] = 3.5f;
    t[3] = -0.5f;
    info(WISP_TYPE_Q8_K)->quantize(t, q8k, 256);
    CHECK((int8_t)q8k[5] == -2 && (int8_t)q8k[6] == -4 && (int8_t)q8k[7] == 0, "Q8_K ties to even: %d %d %d",
          (int8_t)q8k[5], (int8_t)q8k[6], (int8_t)q8k[7]);
}

/* ---- quantization error -------------------------------------------------------------- */

static void test_quantization_error(void) {
    const int64_t n = 65536;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc(row_bytes(WISP_TYPE_F32, n)), *q2 = malloc(row_bytes(WISP_TYPE_F32, n));
    printf("quantize -> dequantize relative RMS error (N(0,1) | N(0,0.02^2) | t-dist-like heavy tails):\n");
    for (int i = 0; i < N_WEIGHT_CASES; i++) {
        const weight_case *c = &weight_cases[i];
        const wisp_type_info *t = info(c->type);
        double errs[3];
        for (int dist = 0; dist < 3; dist++) {
            rng_seed(1 + (uint64_t)dist);
            if (dist < 2) fill_gauss(x, n, dist == 0 ? 1.0 : 0.02);
            else
                for (int64_t k = 0; k < n; k++) /* Gaussian scale mixture: occasional large values */
                    x[k] = (float)(rng_gauss() * (rng_uniform() < 0.05 ? 6.0 : 1.0));
            t->quantize(x, q, n);
            t->dequantize(q, y, n);
            errs[dist] = rel_rms(y, x, (size_t)n);
            /* deterministic */
            t->quantize(x, q2, n);
            CHECK(memcmp(q, q2, row_bytes(c->type, n)) == 0, "%s quantizer is not deterministic", t->name);
        }
        printf("  %-7s %.5f | %.5f | %.5f   (bound %.4f)\n", t->name, errs[0], errs[1], errs[2], c->max_rel_rms);
        CHECK(errs[0] <= c->max_rel_rms, "%s: relative RMS %.5f > %.5f", t->name, errs[0], c->max_rel_rms);
        /* realistic weight scale: fp16 scales must not lose precision */
        CHECK(errs[1] <= c->max_rel_rms * 1.05 + 1e-6, "%s at sigma 0.02: relative RMS %.5f", t->name, errs[1]);
        CHECK(errs[2] <= c->max_rel_rms * 2 + 1e-6, "%s with outliers: relative RMS %.5f", t->name, errs[2]);
    }
    free(x);
    free(y);
    free(q);
    free(q2);
}

/* ---- dot products ---------------------------------------------------------------------- */

/* The exact dot the reference must reproduce: dequantized weights times
 * dequantized activations in float64. For Q8_1 activations the block sums are
 * the stored s (fp16) rather than the sum of the dequantized values: that is
 * what the format carries, and it differs by up to 2^-11 relative. */
static double exact_dot(int wtype, const uint8_t *wq, const float *wd, const uint8_t *aq, const float *ad, int64_t n,
                        double *abs_sum) {
    double s = 0, a = 0;
    if (wtype == WISP_TYPE_Q4_1 || wtype == WISP_TYPE_Q5_1) {
        const int wb = info(wtype)->block_bytes;
        for (int64_t b = 0; b < n / 32; b++) {
            const uint8_t *blk = wq + b * wb;
            const double dw = wisp_load_f16(blk), mw = wisp_load_f16(blk + 2);
            const double sa = wisp_load_f16(aq + b * 36 + 2);
            for (int j = 0; j < 32; j++) {
                const int64_t k = 32 * b + j;
                int level;
                if (wtype == WISP_TYPE_Q4_1) level = j < 16 ? (blk[4 + j] & 15) : (blk[4 + j - 16] >> 4);
                else level = (j < 16 ? (blk[8 + j] & 15) : (blk[8 + j - 16] >> 4)) |
                             (int)(((wisp_load_u32(blk + 4) >> j) & 1) << 4);
                const double t = dw * level * (double)ad[k];
                s += t;
                a += fabs(t);
            }
            s += mw * sa;
            a += fabs(mw * sa);
        }
    } else {
        for (int64_t k = 0; k < n; k++) {
            const double t = (double)wd[k] * (double)ad[k];
            s += t;
            a += fabs(t);
        }
    }
    *abs_sum = a;
    return s;
}

static void test_dots(void) {
    /* lengths in blocks; for the float types in elements */
    const int64_t counts[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 255, 1023, 4096};
    const int n_counts = (int)(sizeof counts / sizeof counts[0]);
    const int64_t max_n = 4096 * 32;
    float *w = malloc(max_n * sizeof(float)), *wd = malloc(max_n * sizeof(float));
    float *a = malloc(max_n * sizeof(float)), *ad = malloc(max_n * sizeof(float));
    uint8_t *wq = malloc(max_n * 4 + 64), *aq = malloc(max_n * 4 + 64);
    uint8_t *wq_odd = malloc(max_n * 4 + 64), *aq_odd = malloc(max_n * 4 + 64);
    printf("dot products: max |dot - exact| / sum|w_i a_i|   (vs float activations: / (|w| |a|))\n");
    for (int i = 0; i < N_WEIGHT_CASES; i++) {
        const int wt = weight_cases[i].type;
        const wisp_type_info *t = info(wt), *at = info(t->act_type);
        double worst_tight = 0, worst_loose = 0;
        int lengths = 0;
        for (int c = 0; c < n_counts; c++) {
            const int64_t n = counts[c] * t->block_elems;
            if (n > max_n) continue;
            lengths++;
            rng_seed(100 + (uint64_t)c * 31 + (uint64_t)wt);
            fill_gauss(w, n, 1.0);
            fill_gauss(a, n, 0.5 + (double)(c % 5));
            if (c % 3 == 1) a[n / 2] *= 20.0f; /* an activation outlier now and then */
            t->quantize(w, wq, n);
            t->dequantize(wq, wd, n);
            at->quantize(a, aq, n);
            at->dequantize(aq, ad, n);
            const float got = t->dot(wq, aq, n);

            double abs_sum;
            const double exact = exact_dot(wt, wq, wd, aq, ad, n, &abs_sum);
            const double tight = fabs((double)got - exact) / (abs_sum > 0 ? abs_sum : 1);
            if (tight > worst_tight) worst_tight = tight;
            CHECK(tight <= 1e-5, "%s n=%lld: dot %.9g, exact %.12g (rel %.3g)", t->name, (long long)n, (double)got,
                  exact, tight);

            double loose_ref = 0, nw = 0, na = 0;
            for (int64_t k = 0; k < n; k++) {
                loose_ref += (double)wd[k] * (double)a[k];
                nw += (double)wd[k] * wd[k];
                na += (double)a[k] * a[k];
            }
            const double loose = fabs((double)got - loose_ref) / sqrt(nw * na);
            if (loose > worst_loose) worst_loose = loose;
            CHECK(loose <= 0.01, "%s n=%lld: dot %.9g vs float activations %.9g (rel %.3g)", t->name, (long long)n,
                  (double)got, loose_ref, loose);

            /* blocks need no alignment: same bits from odd addresses */
            const size_t wb = row_bytes(wt, n), ab = row_bytes(t->act_type, n);
            memcpy(wq_odd + 1, wq, wb);
            memcpy(aq_odd + 3, aq, ab);
            const float got_odd = t->dot(wq_odd + 1, aq_odd + 3, n);
            CHECK(memcmp(&got, &got_odd, 4) == 0, "%s n=%lld: unaligned dot differs", t->name, (long long)n);
            t->dequantize(wq_odd + 1, ad, n);
            CHECK(memcmp(ad, wd, (size_t)n * 4) == 0, "%s n=%lld: unaligned dequantize differs", t->name,
                  (long long)n);
        }
        printf("  %-7s x %-4s %2d lengths: %.2e   (%.2e)\n", t->name, at->name, lengths, worst_tight, worst_loose);
    }
    free(w);
    free(wd);
    free(a);
    free(ad);
    free(wq);
    free(aq);
    free(wq_odd);
    free(aq_odd);
}

/* The weight dot is linear in each block: a block of zeros contributes 0
 * and blocks are independent of their neighbours. */
static void test_dot_blockwise(void) {
    for (int i = 0; i < N_WEIGHT_CASES; i++) {
        const int wt = weight_cases[i].type;
        const wisp_type_info *t = info(wt), *at = info(t->act_type);
        const int64_t n = 4 * (t->block_elems == 1 ? 32 : t->block_elems);
        float w[1024], a[1024];
        uint8_t wq[4096], aq[4096];
        rng_seed(500 + (uint64_t)wt);
        fill_gauss(w, n, 1.0);
        fill_gauss(a, n, 1.0);
        t->quantize(w, wq, n);
        at->quantize(a, aq, n);
        const float whole = t->dot(wq, aq, n);
        /* in order, block after block: a prefix dot extended by the rest */
        const int64_t half = n / 2;
        const float first = t->dot(wq, aq, half);
        const float second = t->dot(wq + row_bytes(wt, half), aq + row_bytes(t->act_type, half), n - half);
        CHECK(fabsf(whole - (first + second)) <= 1e-5f * (fabsf(first) + fabsf(second) + 1e-3f),
              "%s: dot is not a sum over blocks", t->name);
        float zeros[1024] = {0};
        t->quantize(zeros, wq, n);
        CHECK(t->dot(wq, aq, n) == 0.0f, "%s: zero weights give a zero dot", t->name);
    }
}

/* ---- awkward inputs ----------------------------------------------------------------------- */

static bool all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

static void test_awkward_inputs(void) {
    const int types[] = {WISP_TYPE_F32, WISP_TYPE_F16, WISP_TYPE_BF16, WISP_TYPE_Q4_0, WISP_TYPE_Q4_1,
                         WISP_TYPE_Q5_0, WISP_TYPE_Q5_1, WISP_TYPE_Q8_0, WISP_TYPE_Q8_1, WISP_TYPE_IQ4_NL,
                         WISP_TYPE_Q2_K, WISP_TYPE_Q3_K, WISP_TYPE_Q4_K, WISP_TYPE_Q5_K, WISP_TYPE_Q6_K,
                         WISP_TYPE_Q8_K};
    const int64_t n = 512;
    float x[512], y[512];
    uint8_t q[4096];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const wisp_type_info *t = info(types[i]);
        /* zeros are exact */
        memset(x, 0, sizeof x);
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        CHECK(memcmp(x, y, sizeof x) == 0 || rel_rms(y, x, n) == 0, "%s: zeros do not survive", t->name);
        /* a constant block is represented closely */
        for (int k = 0; k < n; k++) x[k] = 0.7f;
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        CHECK(rel_rms(y, x, n) < 0.01, "%s: constant 0.7 comes back with error %.4f", t->name, rel_rms(y, x, n));
        for (int k = 0; k < n; k++) x[k] = -3.25f;
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        CHECK(rel_rms(y, x, n) < 0.01, "%s: constant -3.25 comes back with error %.4f", t->name, rel_rms(y, x, n));
        /* one outlier among small values: the outlier survives */
        rng_seed(3);
        fill_gauss(x, n, 0.01);
        x[100] = 4.0f;
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        CHECK(fabsf(y[100] - 4.0f) < 0.2f, "%s: outlier 4.0 comes back as %.4f", t->name, (double)y[100]);
        /* huge values stay finite (fp16 scales saturate) — except F16 itself */
        fill_gauss(x, n, 1e6);
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        if (types[i] != WISP_TYPE_F16) CHECK(all_finite(y, n), "%s: huge inputs give non-finite output", t->name);
        /* tiny values: no NaN, small relative error where representable */
        fill_gauss(x, n, 1e-3);
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        CHECK(all_finite(y, n), "%s: tiny inputs give non-finite output", t->name);
        /* NaN and inf in the input must not crash (results are unspecified) */
        fill_gauss(x, n, 1.0);
        x[5] = NAN;
        x[300] = INFINITY;
        x[301] = -INFINITY;
        t->quantize(x, q, n);
        t->dequantize(q, y, n);
        check_count++;
    }
}

/* ---- pinned answers ---------------------------------------------------------------------- */
/* The reference kernels define the answer on every platform, so their exact
 * output bits are pinned here: for inputs built with integer arithmetic only
 * (no libm), a hash of each quantizer's bytes, of the activation row's bytes,
 * and the bits of the dot. A mismatch means the arithmetic changed (a new
 * summation order, FP contraction, x87 excess precision...) or a quantizer was
 * changed on purpose; then update the table (PRINT_PINS=1 prints it). */

static uint32_t fnv1a(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Values in (-4, 4) with 22 fraction bits, sums of two uniforms (bell-ish). */
static void fill_exact(float *x, int64_t n, uint64_t seed) {
    rng_seed(seed);
    for (int64_t i = 0; i < n; i++) {
        const int64_t a = (int64_t)(rng_next() >> 41) - (1 << 22), b = (int64_t)(rng_next() >> 41) - (1 << 22);
        x[i] = (float)(a + b) * 0x1.0p-22f;
    }
}

typedef struct pin {
    int type;
    uint32_t weight_hash, act_hash, dot_bits;
} pin;

static const pin pins[] = {
#include "test_quant_pins.inc"
};

static void test_pinned(void) {
    const int64_t n = 1024;
    float w[1024], a[1024];
    uint8_t wq[4096], aq[4096];
    const bool print = getenv("PRINT_PINS") != NULL;
    for (int i = 0; i < N_WEIGHT_CASES; i++) {
        const int wt = weight_cases[i].type;
        const wisp_type_info *t = info(wt), *at = info(t->act_type);
        fill_exact(w, n, 1000 + (uint64_t)wt);
        fill_exact(a, n, 2000 + (uint64_t)wt);
        for (int64_t k = 0; k < n; k += 97) a[k] *= 8.0f; /* a few larger activations */
        t->quantize(w, wq, n);
        at->quantize(a, aq, n);
        const float d = t->dot(wq, aq, n);
        const uint32_t wh = fnv1a(wq, row_bytes(wt, n)), ah = fnv1a(aq, row_bytes(t->act_type, n));
        const uint32_t db = wisp_f32_bits(d);
        if (print) printf("    {WISP_TYPE_%s, 0x%08xu, 0x%08xu, 0x%08xu}, /* dot %.9g */\n", t->name, wh, ah, db, (double)d);
        const pin *p = NULL;
        for (size_t k = 0; k < sizeof pins / sizeof pins[0]; k++)
            if (pins[k].type == wt) p = &pins[k];
        CHECK(p != NULL, "%s has no pinned answer", t->name);
        if (!p) continue;
        CHECK(p->weight_hash == wh, "%s quantizer output changed (hash %08x, pinned %08x)", t->name, wh, p->weight_hash);
        CHECK(p->act_hash == ah, "%s activation quantization changed (hash %08x, pinned %08x)", at->name, ah,
              p->act_hash);
        CHECK(p->dot_bits == db, "%s dot changed: %.9g (%08x), pinned %.9g (%08x)", t->name, (double)d, db,
              (double)wisp_bits_f32(p->dot_bits), p->dot_bits);
    }
}

int main(void) {
    test_table();
    test_iq4_nl_layout();
    test_activation_schemes();
    test_quantization_error();
    test_dots();
    test_dot_blockwise();
    test_awkward_inputs();
    test_pinned();
    return check_report("test_quant");
}
