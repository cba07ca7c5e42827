/* The x86-64 levels: AVX2 (+FMA, F16C) and AVX-512 (F/BW/VL/DQ + VNNI).
 * Both are compiled into every x86-64 build with per-function target
 * attributes (never -march flags), so one binary runs anywhere and picks the
 * best level the CPU reports. Call a constructor only when the CPU has the
 * features (wisp_cpu_features.avx2_fma / .avx512).
 *
 * What matches the scalar reference, and how closely (tests/unit/
 * test_simd_kernels.c checks each claim):
 *  - quantized matmuls (every legacy and K-quant type): bit for bit. Each
 *    block's integer sum is exact, and the float steps that follow are the
 *    reference's own operations in its order, one row per vector lane, never
 *    fused (the decode path for Q4_0/Q8_0, x86_decode.inc, forms the
 *    per-block terms a chunk of one row at a time, then adds them to one row
 *    per lane, still in order; the decode path for Q5_K/Q6_K,
 *    x86_kdecode.inc, sums each row's super-block in exact integers,
 *    reduces 8 rows' sums to one row per lane, then takes the float steps
 *    super-block after super-block; AVX-512's packed Q4_0/Q8_0,
 *    x86_packed.inc, and packed Q4_K/Q6_K, x86_packed_k.inc, have one row
 *    per lane from the start, in any order of groups: x86_packed_drive.inc's
 *    tiles). So any row split,
 *    tile shape, batch size or weight layout gives the same bits;
 *  - activation quantization (Q8_0, Q8_1, Q8_K), axpy, scale, the
 *    F16/BF16 conversions and the backward pass's transposed tiles
 *    (x86_dequant_t.inc): bit for bit;
 *  - F32/F16/BF16 matmuls and the dot products sum in another order (one
 *    accumulator per lane, fused multiply-adds): |fast - ref| <=
 *    (n/8 + n/32 + 40) * 2^-24 * sum|w_i x_i| (both orders' worst-case
 *    rounding bounds added);
 *  - rmsnorm: the double sum of squares is taken in another order, so the
 *    scale can differ in its last bit: relative 2^-22;
 *  - silu_mul: a polynomial exp: relative 2^-20 (absolute 2^-100 near 0);
 *  - attention's inner loops: attn_values bit for bit, attn_scores within
 *    the dot bound; max_f32 exactly; softmax_exp with the polynomial exp
 *    (relative 2^-20, absolute 2^-100), its sum in another order.
 * Activation bytes must be in [-127, 127], as every Q8 quantizer writes them.
 * AVX512_BF16 is not used: its dot products round the float activations to
 * bfloat16, which BF16 weights against F32 activations (the reference) do
 * not allow within the bound above; BF16 rows widen exactly by shifting. */
#ifndef WISP_SIMD_X86_H
#define WISP_SIMD_X86_H

#include "kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WISP_HAVE_X86 1
const wisp_kernels *wisp_kernels_avx2(void);
const wisp_kernels *wisp_kernels_avx512(void);
#endif

#endif
