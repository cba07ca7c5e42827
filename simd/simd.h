/* Kernel tables per instruction set, and choosing one at init.
 *
 * Each instruction set lives in its own file (x86_avx2.c, x86_avx512.c,
 * neon.c, wasm_simd128.c, ...) and exports a constructor returning a
 * completed wisp_kernels table; entries it does not speed up fall back to
 * core's scalar reference. Selection happens once, from CPU features the
 * platform reports (core and simd make no system calls). */
#ifndef WISP_SIMD_H
#define WISP_SIMD_H

#include <stdbool.h>

#include "kernels.h"
#include "status.h"

typedef struct wisp_cpu_features {
    bool avx2_fma;     /* x86: AVX2 + FMA + F16C */
    bool avx512;       /* x86: AVX-512 F/BW/VL/DQ + VNNI */
    bool avx512_bf16;  /* x86: AVX512_BF16 */
    bool neon;         /* ARM: Advanced SIMD */
    bool dotprod;      /* aarch64: SDOT/UDOT (HWCAP_ASIMDDP) */
    bool wasm_simd128; /* WebAssembly SIMD (compile-time) */
} wisp_cpu_features;

/* What this build can offer on a CPU with these features, best first. */
int wisp_simd_levels(const wisp_cpu_features *cpu, const char **names, int cap);

/* The table for `name` ("scalar", "avx2", "avx512", "neon", "neon-dotprod",
 * "wasm-simd128"), or the best available when name is NULL or "auto".
 * Fails with a message listing what is available when the name is unknown
 * or the CPU lacks it. */
wisp_status wisp_simd_select(const wisp_cpu_features *cpu, const char *name, const wisp_kernels **out,
                             wisp_error *err);

#endif
