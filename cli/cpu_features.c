#include "cpu_features.h"

#include <string.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

void cli_cpu_features(wisp_cpu_features *f) {
    memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f->avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    f->avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
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
