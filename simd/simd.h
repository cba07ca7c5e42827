/* Kernel tables per instruction set, and choosing one at init.
 *
 * Each instruction set lives in its own file (x86_avx2.c, x86_avx512.c,
 * neon.c, wasm_simd128.c, ...) and exports a constructor returning a
 * completed wisp_kernels table; entries it does not speed up fall back to
 * core's scalar reference. Selection happens once, from CPU features the
 * platform reports or cpu_detect.c reads (an instruction on x86, the aux
 * vector the kernel left in memory on aarch64 Linux: no system calls). */
#ifndef WISP_SIMD_H
#define WISP_SIMD_H

#include <stdbool.h>

#include "kernels.h"
#include "status.h"

/* wisp_cpu_features, wisp_cpu_detect and wisp_simd_select are public:
 * wisp.h, which status.h brings in. */

/* What this build can offer on a CPU with these features, best first. */
int wisp_simd_levels(const wisp_cpu_features *cpu, const char **names, int cap);

#endif
