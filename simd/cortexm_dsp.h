/* Cortex-M kernels using the DSP extension (ARMv7E-M: Cortex-M4, M7; and
 * ARMv8-M mainline with DSP: Cortex-M33), in the style of CMSIS-NN: SXTB16
 * widens int8 pairs to int16 lanes and SMLAD multiplies two lane pairs and
 * accumulates, so one instruction does two multiply-adds.
 *
 * Integer block sums are exact and the per-block float arithmetic repeats
 * core's reference in the same order, so every result is bit-identical to
 * the scalar reference (embedded/firmware/kernel_check.c proves it on QEMU). */
#ifndef WISP_SIMD_CORTEXM_DSP_H
#define WISP_SIMD_CORTEXM_DSP_H

#include <stdint.h>

#include "kernels.h"

/* The table, or NULL when this build's target has no DSP extension: Q8_0
 * and Q4_0 weights with Q8_0 activations (DSP), and, with an FPU, fp16 work
 * through its VCVTB converter (F16 weights, the F16 KV cache's dot, axpy,
 * attention blocks and conversions). NULL entries mean the reference, as wisp_exec_setup
 * completes tables. */
const wisp_kernels *wisp_kernels_cortexm_dsp(void);

#if defined(__ARM_FEATURE_DSP)
/* Exact integer sum of one 32-element block: Q8_0 levels (32 int8) or Q4_0
 * levels (16 bytes of nibbles, offset by 8) against 32 int8 activations.
 * Pointers need no alignment. Exposed for the on-target test. */
int32_t wisp_cortexm_isum_q8_0(const void *w_qs, const void *x_qs);
int32_t wisp_cortexm_isum_q4_0(const void *w_qs, const void *x_qs);
#endif

#endif
