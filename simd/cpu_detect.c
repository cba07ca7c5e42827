/* What the processor running us can do, for choosing a kernel level
 * (wisp_simd_select). Read once by the platform at start; no system calls. */
#include "simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* F16C (CPUID.1:ECX bit 29); clang 14's __builtin_cpu_supports cannot name it. */
static bool has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

void wisp_cpu_detect(wisp_cpu_features *f) {
    *f = (wisp_cpu_features){0};
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* These read CPUID and the OS's XCR0 register state, so under valgrind
     * (which hides AVX-512 from CPUID) the AVX2 level is chosen, never a
     * level valgrind cannot run. */
    f->avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    f->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vnni");
    f->avx512_bf16 = f->avx512 && __builtin_cpu_supports("avx512bf16");
#elif defined(__aarch64__)
    f->neon = true;
#if defined(__linux__)
    f->dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#endif
#elif defined(__ARM_NEON)
    f->neon = true;
#elif defined(__wasm_simd128__)
    f->wasm_simd128 = true;
#endif
}
