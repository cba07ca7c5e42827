/* The 128-bit SIMD levels: NEON (aarch64 and armv7), NEON with the dotprod
 * extension (aarch64), and WebAssembly SIMD128. Each constructor exists only
 * in builds for its architecture (see the guards); the tables are constant
 * and every weight type, activation quantizer and float primitive is filled.
 * Accuracy against the scalar reference is stated in vec128_kernels.inc. */
#ifndef WISP_SIMD_VEC128_H
#define WISP_SIMD_VEC128_H

#include "kernels.h"

#if defined(__ARM_NEON) || defined(__aarch64__)
#define WISP_HAVE_NEON 1
const wisp_kernels *wisp_kernels_neon(void);
#endif

#if defined(__aarch64__)
#define WISP_HAVE_NEON_DOTPROD 1
/* Uses SDOT: call only when the CPU reports it (HWCAP_ASIMDDP on Linux). */
const wisp_kernels *wisp_kernels_neon_dotprod(void);
#endif

#if defined(__wasm_simd128__)
#define WISP_HAVE_WASM_SIMD128 1
const wisp_kernels *wisp_kernels_wasm_simd128(void);
#endif

#endif
