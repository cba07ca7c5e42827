/* kernel-check: the Cortex-M DSP kernels (simd/cortexm_dsp.c) against core's
 * scalar reference, run on the emulated core itself. Integer block sums must
 * be exact and matmul outputs bit-identical; the exit status is the number of
 * failed checks (0: all passed), so QEMU's exit code carries the verdict.
 *
 * Inputs come from a fixed-seed generator and cover: raw int8 levels
 * including -128 (which no quantizer writes but a file may hold), nibbles
 * 0..15, weights and activations at every byte misalignment, odd row counts
 * and row ranges (the two-row path and its single-row tail), several tokens
 * per call, and every fp16 block scale. */
#include <string.h>

#include "cortexm_dsp.h"
#include "fw.h"
#include "half.h"
#include "quant.h"
#include "sampler.h"

#if !defined(__ARM_FEATURE_DSP)
#error "kernel-check is built for cores with the DSP extension"
#endif

#define MAX_ROWS 13
#define MAX_COLS 256
#define MAX_TOK 3
#define PAD 4 /* room to misalign buffers by 0..3 bytes */

static uint64_t rng = 0x5eed;
static int failures, checks;

static void check(bool ok, const char *what, int a, int b) {
    checks++;
    if (ok) return;
    if (failures++ < 20) fw_print("MISMATCH %s (case %d, %d)\n", what, a, b);
}

static int32_t random_int(int32_t lo, int32_t hi) {
    return lo + (int32_t)(wisp_rng_next(&rng) % (uint64_t)(hi - lo + 1));
}

static void random_bytes(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)wisp_rng_next(&rng);
}

static int32_t ref_isum_q8_0(const int8_t *w, const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < WISP_QK; j++) s += w[j] * x[j];
    return s;
}

static int32_t ref_isum_q4_0(const uint8_t *w, const int8_t *x) {
    int32_t s = 0;
    for (int j = 0; j < WISP_QK / 2; j++) s += ((w[j] & 15) - 8) * x[j] + ((w[j] >> 4) - 8) * x[j + WISP_QK / 2];
    return s;
}

/* Block sums over random bytes (every int8 value, including -128) at every
 * misalignment of weights and activations, and at the extremes. */
static void check_block_sums(void) {
    static uint8_t wbuf[WISP_QK + PAD], xbuf[WISP_QK + PAD];
    for (int round = 0; round < 2000; round++) {
        int wo = round % PAD, xo = (round / PAD) % PAD;
        random_bytes(wbuf, sizeof wbuf);
        random_bytes(xbuf, sizeof xbuf);
        if (round < 4) { /* extremes: all -128 / all 127 */
            memset(wbuf, round & 1 ? 0x80 : 0x7f, sizeof wbuf);
            memset(xbuf, round & 2 ? 0x80 : 0x7f, sizeof xbuf);
        }
        const int8_t *w = (const int8_t *)wbuf + wo, *x = (const int8_t *)xbuf + xo;
        check(wisp_cortexm_isum_q8_0(w, x) == ref_isum_q8_0(w, x), "isum q8_0", round, wo * PAD + xo);
        check(wisp_cortexm_isum_q4_0(w, x) == ref_isum_q4_0((const uint8_t *)w, x), "isum q4_0", round, wo * PAD + xo);
    }
}

/* The kernels convert block scales with VCVTB; core converts in software.
 * Every fp16 value (NaNs and infinities included) must give the same bits
 * as the reference matmul. */
static void check_f16_scales(void) {
    static uint8_t w[WISP_Q8_0_BYTES], x[WISP_Q8_0_BYTES];
    memset(w, 0, sizeof w);
    memset(x, 0, sizeof x);
    w[2] = 1;
    x[2] = 1; /* isum = 1, so the dot is d_w * d_x */
    wisp_store_u16(x, 0x3c00); /* d_x = 1.0 */
    const wisp_kernels *k = wisp_kernels_cortexm_dsp();
    for (uint32_t h = 0; h < 0x10000; h++) {
        wisp_store_u16(w, (uint16_t)h);
        float y_ref = 0.0f, y_dsp = 0.0f;
        wisp_matmul_args a = {w, sizeof w, WISP_TYPE_Q8_0, WISP_QK, x, sizeof x, 1, &y_ref, 1};
        wisp_matmul_reference(&a, 0, 1);
        a.y = &y_dsp;
        k->matmul[WISP_TYPE_Q8_0](&a, 0, 1);
        check(wisp_f32_bits(y_ref) == wisp_f32_bits(y_dsp), "fp16 scale", (int)h, 0);
    }
}

/* float -> fp16 for the KV cache: a sweep over every exponent with random
 * mantissas (so rounding ties, subnormal results, overflow to infinity, NaN
 * payloads and both signs all occur), and every f16 -> float. */
static void check_f16_conversions(const wisp_kernels *k, const wisp_kernels *ref) {
    static float xs[1024];
    static uint16_t got[1024], want[1024];
    for (int round = 0; round < 512; round++) {
        for (int i = 0; i < 1024; i++) {
            uint32_t bits = (uint32_t)wisp_rng_next(&rng);
            if (i % 4 == 0) bits = (bits & 0x80000000u) | ((uint32_t)(round % 256) << 23) | (bits & 0x7fffffu);
            if (i % 4 == 1) /* exact ties between two halves, normal and subnormal */
                bits = (bits & 0x80000000u) | ((uint32_t)(101 + round % 42) << 23) | (bits & 0x7fe000u) | 0x1000u;
            xs[i] = wisp_bits_f32(bits);
        }
        k->f32_to_f16(xs, got, 1024);
        ref->f32_to_f16(xs, want, 1024);
        check(memcmp(got, want, sizeof got) == 0, "f32_to_f16", round, 0);
    }
    static uint16_t hs[256];
    static float fa[256], fb[256];
    for (uint32_t h0 = 0; h0 < 0x10000; h0 += 256) {
        for (int i = 0; i < 256; i++) hs[i] = (uint16_t)(h0 + (uint32_t)i);
        k->f16_to_f32(hs, fa, 256);
        ref->f16_to_f32(hs, fb, 256);
        check(memcmp(fa, fb, sizeof fa) == 0, "f16_to_f32", (int)h0, 0);
    }
}

/* The attention primitives over an F16 KV cache, and F16 weight matmuls. */
static void check_f16_arithmetic(const wisp_kernels *k, const wisp_kernels *ref) {
    static float xf[MAX_COLS], ya[MAX_COLS], yb[MAX_COLS];
    static uint16_t h[MAX_COLS * MAX_ROWS];
    static float y_ref[MAX_TOK * MAX_ROWS], y_dsp[MAX_TOK * MAX_ROWS], xt[MAX_TOK * MAX_COLS];
    for (int round = 0; round < 300; round++) {
        int n = random_int(1, MAX_COLS);
        for (int i = 0; i < n; i++) xf[i] = (float)random_int(-100000, 100000) / 3000.0f;
        ref->f32_to_f16(xf, h, n);
        for (int i = 0; i < n; i++) xf[i] = (float)random_int(-100000, 100000) / 7000.0f;
        float d1 = k->dot_f16_f32(h, xf, n), d2 = ref->dot_f16_f32(h, xf, n);
        check(wisp_f32_bits(d1) == wisp_f32_bits(d2), "dot_f16_f32", round, n);
        memcpy(ya, xf, (size_t)n * sizeof(float));
        memcpy(yb, xf, (size_t)n * sizeof(float));
        float a = (float)random_int(-1000, 1000) / 333.0f;
        k->axpy_f16(ya, a, h, n);
        ref->axpy_f16(yb, a, h, n);
        check(memcmp(ya, yb, (size_t)n * sizeof(float)) == 0, "axpy_f16", round, n);

        /* attention blocks: rows of hd elements, F16 and F32 caches */
        int hd = random_int(1, 16), rows_kv = random_int(1, MAX_COLS / 16);
        for (int f16 = 0; f16 < 2; f16++) {
            const void *cache = f16 ? (const void *)h : (const void *)xf;
            size_t stride = (size_t)hd * (f16 ? 2 : 4);
            float scale = (float)random_int(1, 100) / 37.0f;
            k->attn_scores(ya, cache, stride, f16, rows_kv, xf, hd, scale);
            ref->attn_scores(yb, cache, stride, f16, rows_kv, xf, hd, scale);
            check(memcmp(ya, yb, (size_t)rows_kv * sizeof(float)) == 0, "attn_scores", round, f16);
            float oa[16], ob[16];
            for (int i = 0; i < hd; i++) oa[i] = ob[i] = xf[i];
            k->attn_values(oa, xf + 16, cache, stride, f16, rows_kv, hd);
            ref->attn_values(ob, xf + 16, cache, stride, f16, rows_kv, hd);
            check(memcmp(oa, ob, (size_t)hd * sizeof(float)) == 0, "attn_values", round, f16);
        }

        int rows = random_int(1, MAX_ROWS), cols = random_int(1, MAX_COLS), n_tok = random_int(1, MAX_TOK);
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < cols; i++) xt[i] = (float)random_int(-100000, 100000) / 50000.0f;
            ref->f32_to_f16(xt, h + r * cols, cols);
        }
        for (int i = 0; i < n_tok * cols; i++) xt[i] = (float)random_int(-100000, 100000) / 20000.0f;
        for (int i = 0; i < MAX_TOK * MAX_ROWS; i++) y_ref[i] = y_dsp[i] = -1.0f;
        int r0 = random_int(0, rows - 1), r1 = random_int(r0 + 1, rows);
        wisp_matmul_args m = {(const uint8_t *)h, (size_t)cols * 2, WISP_TYPE_F16, cols, (const uint8_t *)xt,
                              (size_t)cols * sizeof(float), n_tok, y_ref, MAX_ROWS};
        wisp_matmul_reference(&m, r0, r1);
        m.y = y_dsp;
        k->matmul[WISP_TYPE_F16](&m, r0, r1);
        check(memcmp(y_ref, y_dsp, sizeof y_ref) == 0, "matmul f16", round, rows * 1000 + cols);
    }
}

/* Whole matmuls against wisp_matmul_reference, bit for bit. */
static void check_matmul(int type) {
    static uint8_t wbuf[MAX_ROWS * (MAX_COLS / WISP_QK) * WISP_Q8_0_BYTES + PAD];
    static uint8_t xbuf[MAX_TOK * (MAX_COLS / WISP_QK) * WISP_Q8_0_BYTES + PAD];
    static float xf[MAX_COLS], wf[MAX_COLS];
    static float y_ref[MAX_TOK * MAX_ROWS], y_dsp[MAX_TOK * MAX_ROWS];
    const wisp_kernels *k = wisp_kernels_cortexm_dsp();
    for (int round = 0; round < 300; round++) {
        int rows = random_int(1, MAX_ROWS), cols = WISP_QK * random_int(1, MAX_COLS / WISP_QK);
        int n_tok = random_int(1, MAX_TOK), wo = random_int(0, PAD - 1), xo = random_int(0, PAD - 1);
        size_t w_row = wisp_type_row_bytes(type, cols), x_row = wisp_type_row_bytes(WISP_TYPE_Q8_0, cols);
        uint8_t *w = wbuf + wo, *x = xbuf + xo;
        float scale = (float)random_int(1, 1000) / 64.0f;
        for (int r = 0; r < rows; r++) {
            if (round % 3 == 0) { /* raw bytes: any level; any finite scale (exponent bits not all set) */
                random_bytes(w + r * w_row, w_row);
                for (size_t b = 0; b < w_row; b += (size_t)wisp_type_info_of(type)->block_bytes)
                    wisp_store_u16(w + r * w_row + b, (uint16_t)(wisp_load_u16(w + r * w_row + b) & 0xfbff));
            } else { /* what the quantizers write */
                for (int c = 0; c < cols; c++) wf[c] = scale * ((float)random_int(-100000, 100000) / 100000.0f);
                wisp_type_info_of(type)->quantize(wf, w + r * w_row, cols);
            }
        }
        for (int t = 0; t < n_tok; t++) {
            for (int c = 0; c < cols; c++) xf[c] = (float)random_int(-100000, 100000) / 25000.0f;
            wisp_quantize_q8_0(xf, x + t * x_row, cols);
        }
        int r0 = random_int(0, rows - 1), r1 = random_int(r0 + 1, rows);
        for (int i = 0; i < MAX_TOK * MAX_ROWS; i++) y_ref[i] = y_dsp[i] = -1.0f;
        wisp_matmul_args a = {w, w_row, type, cols, x, x_row, n_tok, y_ref, MAX_ROWS};
        wisp_matmul_reference(&a, r0, r1);
        a.y = y_dsp;
        k->matmul[type](&a, r0, r1);
        check(memcmp(y_ref, y_dsp, sizeof y_ref) == 0, type == WISP_TYPE_Q8_0 ? "matmul q8_0" : "matmul q4_0", round,
              rows * 1000 + cols);
    }
}

int main(void) {
    const wisp_kernels *table = wisp_kernels_cortexm_dsp();
    if (!table) {
        fw_print("kernel-check: this build has no Cortex-M DSP table\n");
        return 1;
    }
    /* compare completed tables, as the engine uses them */
    static wisp_kernels k;
    k = *table;
    wisp_kernels_complete(&k);
    const wisp_kernels *ref = wisp_kernels_reference();
    check_block_sums();
    check_f16_scales();
    check_matmul(WISP_TYPE_Q8_0);
    check_matmul(WISP_TYPE_Q4_0);
    check_f16_conversions(&k, ref);
    check_f16_arithmetic(&k, ref);
    fw_print("kernel-check [%s]: %d checks, %d failed (block sums, fp16 scales, Q8_0/Q4_0/F16 matmuls, fp16 "
             "conversions, dot, axpy and attention blocks vs the scalar reference)\n",
             k.name, checks, failures);
    return failures > 125 ? 125 : failures;
}
