/* The x86 kernel levels (avx512, avx2) against the scalar reference, on the
 * CPU running the test, through the kernel-check library every level shares
 * (tests/lib/kernel_checks.h lists the checks; simd/x86.h states the bounds:
 * quantized products, quantizers, axpy, scale, conversions and attention's
 * value sums bit for bit; float dots within (n/8 + n/32 + 40) 2^-24
 * sum|w_i x_i|); levels the CPU lacks are named (the 128-bit levels are
 * test_simd_neon_wasm.c's). Then the scalar reference itself, which every
 * level answers to, against exact arithmetic with textbook bounds (on every
 * target: the reference's arithmetic is the platform's). Prints the table of
 * levels x checks.
 *
 * Then one activation row (decode) of Q4_K, Q5_K and Q6_K at every row
 * length of x86's K-quant decode path (simd/x86_kdecode.inc: Q5_K, Q6_K;
 * Q4_K takes the group kernels), which the shared library (sized for a
 * Cortex-M's RAM) cannot reach: see check_k_decode. */
#include "check.h"
#include "simd.h"
#include "kernel_levels.h"
#include "quant.h"
#include "test_rng.h"

#include <string.h>

/* Q5_K/Q6_K rows of 1..64 super-blocks with one activation row take the
 * decode path, 65 and longer (and Q4_K) the group kernels: every length up
 * to 65, bit for bit against the reference dot (quant_k.c, whose float
 * order is the contract), for 1, 7, 8 and 19 rows (partial and whole 8-row groups), on
 * rows split at 3 and 11, with weights and activations 0..3 bytes off
 * alignment. Weight patterns: quantized Gaussian rows, random bytes (every
 * scale, min and level pattern), all 0xff (the largest levels, scales and
 * mins; Q6_K's scales -1) and all 0x80 (Q6_K's scales -128), each with sane
 * fp16 scales; activations quantized from Gaussians, or every level +127 /
 * -127 (VPMADDUBSW's largest pair sums). */
#define KD_LONGEST 65
#define KD_ROWS 19

typedef float (*ref_dot)(const void *w, const void *act, int64_t n);

static void sane_k_scales(int type, uint8_t *block) {
    const int at[2] = {type == WISP_TYPE_Q6_K ? 208 : 0, type == WISP_TYPE_Q6_K ? -1 : 2};
    for (int j = 0; j < 2; j++)
        if (at[j] >= 0) wisp_store_u16(block + at[j], wisp_f32_to_f16(0.01f * rng_normal()));
}

/* One Q8_K activation row of nb super-blocks: Gaussian, or every level `level`. */
static void make_act(uint8_t *x, int64_t nb, int level, float *scratch) {
    const int64_t n = nb * WISP_QK_K;
    for (int64_t j = 0; j < n; j++) scratch[j] = rng_normal();
    wisp_quantize_q8_K(scratch, x, n);
    if (!level) return;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *y = x + b * WISP_Q8_K_BYTES;
        memset(y + 4, (uint8_t)(int8_t)level, WISP_QK_K);
        for (int s = 0; s < 16; s++) wisp_store_u16(y + 260 + 2 * s, (uint16_t)(int16_t)(16 * level));
    }
}

/* KD_ROWS rows of KD_LONGEST super-blocks in weight pattern `pattern`;
 * shorter rows are their first super-blocks (blocks are independent). */
static void make_weights(uint8_t *src, int type, size_t bb, int pattern, float *scratch) {
    const int64_t n = (int64_t)KD_LONGEST * WISP_QK_K;
    for (int i = 0; i < KD_ROWS; i++) {
        uint8_t *row = src + (size_t)i * KD_LONGEST * bb;
        if (pattern == 0) {
            for (int64_t j = 0; j < n; j++) scratch[j] = 0.05f * rng_normal();
            wisp_type_info_of(type)->quantize(scratch, row, n);
            continue;
        }
        for (size_t j = 0; j < KD_LONGEST * bb; j++) row[j] = pattern == 1 ? (uint8_t)(rng_next() >> 56) : pattern == 2 ? 0xff : 0x80;
        for (int64_t b = 0; b < KD_LONGEST; b++) sane_k_scales(type, row + (size_t)b * bb);
    }
}

static void check_k_decode_type(const wisp_kernels *k, const char *level, int type, ref_dot dot, size_t bb) {
    const size_t max_row = (size_t)KD_LONGEST * bb;
    uint8_t *src = malloc(max_row * KD_ROWS), *wbuf = malloc(max_row * KD_ROWS + 4);
    uint8_t *act = malloc((size_t)KD_LONGEST * WISP_Q8_K_BYTES), *xbuf = malloc((size_t)KD_LONGEST * WISP_Q8_K_BYTES + 4);
    float *scratch = malloc(sizeof(float) * KD_LONGEST * WISP_QK_K);
    float want[KD_ROWS], got[KD_ROWS];
    REQUIRE(src && wbuf && act && xbuf && scratch, "no memory");
    const char *tn = wisp_type_info_of(type)->name;
    int bad = 0;
    for (int pattern = 0; pattern < 4; pattern++) {
        make_weights(src, type, bb, pattern, scratch);
        for (int64_t nb = 1; nb <= KD_LONGEST; nb++) {
            const int64_t n = nb * WISP_QK_K;
            const size_t wb = (size_t)nb * bb;
            uint8_t *w = wbuf + (nb + pattern) % 4, *x = xbuf + (nb + 2 * pattern) % 4;
            for (int i = 0; i < KD_ROWS; i++) memcpy(w + (size_t)i * wb, src + (size_t)i * max_row, wb);
            if (nb == 1 || pattern >= 2) make_act(act, KD_LONGEST, pattern < 2 ? 0 : nb % 2 ? 127 : -127, scratch);
            memcpy(x, act, (size_t)nb * WISP_Q8_K_BYTES);
            for (int i = 0; i < KD_ROWS; i++) want[i] = dot(w + (size_t)i * wb, x, n);
            static const int row_counts[] = {1, 7, 8, KD_ROWS};
            for (int c = 0; c < 5; c++) {
                const int rows = c < 4 ? row_counts[c] : KD_ROWS;
                wisp_matmul_args a = {w, wb, type, n, x, (size_t)nb * WISP_Q8_K_BYTES, 1, got, rows};
                memset(got, 0xff, sizeof got);
                if (c < 4) k->matmul[type](&a, 0, rows);
                else { /* split off the 8-row groups */
                    k->matmul[type](&a, 0, 3);
                    k->matmul[type](&a, 3, 11);
                    k->matmul[type](&a, 11, rows);
                }
                const bool same = memcmp(got, want, sizeof(float) * (size_t)rows) == 0;
                if (!same && bad++ < 5)
                    for (int i = 0; i < rows; i++)
                        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
                            fprintf(stderr, "%s %s decode: %lld super-blocks, pattern %d, %d rows%s: row %d %.9g, reference %.9g\n",
                                    level, tn, (long long)nb, pattern, rows, c < 4 ? "" : " (split)", i, (double)got[i],
                                    (double)want[i]);
                            break;
                        }
                CHECK(same, "%s %s decode, %lld super-blocks, pattern %d, %d rows: bits differ from the reference dot", level, tn,
                      (long long)nb, pattern, rows);
            }
        }
    }
    free(src);
    free(wbuf);
    free(act);
    free(xbuf);
    free(scratch);
}

static void check_k_decode(const wisp_cpu_features *cpu, const char *level) {
    const wisp_kernels *k;
    wisp_error err = {0};
    if (wisp_simd_select(cpu, level, &k, &err) != WISP_OK) return; /* named by kc_check_levels */
    const int before = check_count, failed = check_failures;
    check_k_decode_type(k, level, WISP_TYPE_Q4_K, wisp_dot_q4_K_q8_K, WISP_Q4_K_BYTES);
    check_k_decode_type(k, level, WISP_TYPE_Q5_K, wisp_dot_q5_K_q8_K, WISP_Q5_K_BYTES);
    check_k_decode_type(k, level, WISP_TYPE_Q6_K, wisp_dot_q6_K_q8_K, WISP_Q6_K_BYTES);
    printf("%s Q4_K/Q5_K/Q6_K decode, 1..%d super-blocks: %d checks, %d failed\n", level, KD_LONGEST, check_count - before,
           check_failures - failed);
}

int main(void) {
    static const char *const levels[] = {"avx512", "avx2", "scalar"};
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    kc_check_levels(&cpu, levels, 3); /* scalar runs everywhere (this test also runs on WASI and ARM) */
    check_k_decode(&cpu, "avx512");
    check_k_decode(&cpu, "avx2");
    return check_report("test_simd_kernels");
}
