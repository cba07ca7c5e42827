/* One kernel check for every level: a kernel table (avx2, avx512, neon,
 * neon-dotprod, wasm-simd128, cortexm-dsp, ...) against core's scalar
 * reference, with the same inputs everywhere, run on the target itself
 * (natively, under qemu-user, under node's WASI, on an emulated Cortex-M).
 *
 * The checks (each skipped only where the table's entry IS the reference's,
 * which the table reports as "ref"):
 *   dots        dot_f32, dot_f16_f32 at every length 1..1023, unaligned
 *   axpy/scale  axpy_f32, axpy_f16, scale_f32: bit for bit, same lengths
 *   rmsnorm     relative 2^-22, same lengths
 *   silu_mul    relative 2^-20 (plus the family's absolute floor), same
 *               lengths, with exp over- and underflowing and NaN
 *   convert     f16/bf16 -> f32 on every half, f32 -> f16 on random bits,
 *               ties and the half range's edges: bit for bit
 *   quantize    Q8_0/Q8_1/Q8_K activation rows on awkward data: bit for bit
 *   matmul-q    every quantized weight type: row counts around 4- and
 *               16-row tiles, tokens around 2- and 4-token tiles, lengths
 *               around decode's block passes, quantized and raw-byte
 *               weights, unaligned buffers: bit for bit, also under row
 *               splits and one token at a time
 *   matmul-f    F32/F16/BF16 weights at every length 1..1023: within the
 *               family's float bound; splits and single tokens bit for bit
 *   attention   attn_scores within the dot bound, attn_values bit for bit,
 *               F16 and F32 caches, rows aligned to their element only
 *   heads       attn_scores_heads / attn_values_heads, 1..9 query heads
 *   softmax     max_f32 exactly; softmax_exp within relative 2^-20
 *   dequant-t   the backward pass's transposed tiles of every quantized
 *               type, row ranges on and off the row groups, column
 *               ranges of whole blocks: bit for bit
 *
 * Error bounds are the family's stated contract (simd/x86.h for x86,
 * simd/vec128_kernels.inc for the 128-bit levels, simd/cortexm_dsp.h): a
 * float dot over n terms is within (n/L + n/32 + 40) 2^-24 sum|w_i x_i|
 * of the reference's, L the family's accumulator lanes; a family whose
 * contract is bit-exactness (cortexm-dsp) is held to that everywhere.
 *
 * Freestanding enough for firmware: no allocation (the caller passes
 * KC_SCRATCH_BYTES of scratch), no stdio (lines go to the caller's `say`,
 * formatted by core's wisp_format). */
#ifndef WISP_KERNEL_CHECKS_H
#define WISP_KERNEL_CHECKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

enum {
    KC_DOTS,
    KC_AXPY,
    KC_RMSNORM,
    KC_SILU,
    KC_CONVERT,
    KC_QUANTIZE,
    KC_MATMUL_Q,
    KC_MATMUL_F,
    KC_ATTENTION,
    KC_HEADS,
    KC_SOFTMAX,
    KC_DEQUANT_T,
    KC_FAMILIES
};

/* Scratch a run needs (the largest matmul fixture and its outputs). */
#define KC_SCRATCH_BYTES (176u * 1024u)

/* A family's accuracy contract. */
typedef struct kc_bounds {
    int dot_lanes;        /* L in the float dot bound; 0: float results bit for bit */
    double scores_rel;    /* attention scores: the scale's rounding, relative */
    double silu_abs;      /* silu_mul: absolute floor */
    bool nan_bits;        /* f32 -> f16 keeps NaN payloads bit for bit (else any NaN) */
    bool oracle;          /* the scalar reference: checked against exact arithmetic */
    bool flushes;         /* subnormals flush to zero (armv7's NEON): the exact claims
                             hold for data above 2^-126, silu_mul within 2^-126 |g u| */
} kc_bounds;

typedef struct kc_cell {
    long checks, failures;
    double worst;         /* largest error / bound (bounded checks) */
    bool bounded;         /* some check here was against a bound */
} kc_cell;

typedef struct kc_run {
    const wisp_kernels *k;   /* the table under test, completed (wisp_kernels_complete) */
    kc_bounds bounds;
    void (*say)(const char *line); /* one line of text, no newline */
    uint8_t *scratch;        /* KC_SCRATCH_BYTES, any alignment */
    kc_cell cell[KC_FAMILIES];
    long checks, failures;
    uint64_t rng;
    size_t used;             /* scratch bump pointer */
} kc_run;

/* The stated bounds of the family `level` (a kernel table's name) belongs
 * to; false for a name of no known family. */
bool kc_bounds_of(const char *level, kc_bounds *out);

/* Run every check of `run->k` (run->k, bounds, say and scratch set; the rest
 * zeroed). Returns the number of failed checks. */
long kc_check_all(kc_run *run);

/* The table of levels x checks: the header, then one row per run. A cell is
 * "exact" (bit for bit), the worst error as a fraction of its bound, "ref"
 * (the level uses the reference's kernel) or "FAIL n". */
void kc_table_header(void (*say)(const char *line));
void kc_table_row(const kc_run *run);

#endif
