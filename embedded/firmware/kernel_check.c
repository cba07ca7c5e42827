/* kernel-check: the Cortex-M DSP kernels (simd/cortexm_dsp.c) against core's
 * scalar reference, run on the emulated core itself; the exit status is the
 * number of failed checks (0: all passed), so QEMU's exit code carries the
 * verdict.
 *
 * Two checks of this level's own: the exact integer block sums over raw int8
 * levels (including -128, which no quantizer writes but a file may hold) at
 * every byte misalignment, and every fp16 block scale through the VCVTB
 * conversion. Then the kernel checks every level gets (tests/lib/
 * kernel_checks.h: the same inputs as on x86, ARM and wasm, every length
 * 1..1023, unaligned buffers, row splits), held to this level's contract:
 * bit for bit everywhere. It prints the row of the levels x checks table. */
#include <string.h>

#include "cortexm_dsp.h"
#include "fw.h"
#include "half.h"
#include "kernel_checks.h"
#include "quant.h"
#include "sampler.h"

#if !defined(__ARM_FEATURE_DSP)
#error "kernel-check is built for cores with the DSP extension"
#endif

#define PAD 4 /* room to misalign buffers by 0..3 bytes */

static uint64_t rng = 0x5eed;
static int failures, checks;

static void check(bool ok, const char *what, int a, int b) {
    checks++;
    if (ok) return;
    if (failures++ < 20) fw_print("MISMATCH %s (case %d, %d)\n", what, a, b);
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

static void print_line(const char *line) { fw_print("%s\n", line); }

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
    check_block_sums();
    check_f16_scales();
    /* every check every level gets, held to bit-exactness */
    static uint8_t scratch[KC_SCRATCH_BYTES];
    static kc_run run;
    run.k = &k;
    run.say = print_line;
    run.scratch = scratch;
    if (!kc_bounds_of(k.name, &run.bounds)) {
        fw_print("kernel-check: no stated bounds for level %s\n", k.name);
        return 1;
    }
    kc_check_all(&run);
    kc_table_header(print_line);
    kc_table_row(&run);
    checks += (int)run.checks;
    failures += (int)run.failures;
    fw_print("kernel-check [%s]: %d checks, %d failed (block sums, every fp16 scale, and the kernel checks of every "
             "level: Q8_0/Q4_0/F16 matmuls, fp16 conversions, dot, axpy and attention vs the scalar reference)\n",
             k.name, checks, failures);
    return failures > 125 ? 125 : failures;
}
