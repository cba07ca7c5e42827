/* Choosing the kernel table. Instruction-set files register here. */
#include <string.h>

#include "simd.h"
#include "vec128.h"
#include "x86.h"

#if WISP_HAVE_WASM_SIMD128
/* vec128_wasm.h's run-time zero: here, out of the kernels' sight */
const int32_t wisp_wasm_zero = 0;
#endif

typedef struct level {
    const char *name;
    bool (*usable)(const wisp_cpu_features *cpu);
    const wisp_kernels *(*table)(void);
} level;

static bool always(const wisp_cpu_features *cpu) {
    (void)cpu;
    return true;
}

static const wisp_kernels *scalar_table(void) { return wisp_kernels_reference(); }

#if WISP_HAVE_X86
static bool has_avx512(const wisp_cpu_features *cpu) { return cpu->avx512 && cpu->avx2_fma; }
static bool has_avx2(const wisp_cpu_features *cpu) { return cpu->avx2_fma; }
#endif
#if WISP_HAVE_NEON
static bool has_neon(const wisp_cpu_features *cpu) { return cpu->neon; }
#endif
#if WISP_HAVE_NEON_DOTPROD
static bool has_neon_dotprod(const wisp_cpu_features *cpu) { return cpu->neon && cpu->dotprod; }
#endif
#if WISP_HAVE_WASM_SIMD128
static bool has_wasm_simd128(const wisp_cpu_features *cpu) { return cpu->wasm_simd128; }
#endif

/* Best first; the scalar reference is always last. */
static const level levels[] = {
#if WISP_HAVE_X86
    {"avx512", has_avx512, wisp_kernels_avx512},
    {"avx2", has_avx2, wisp_kernels_avx2},
#endif
#if WISP_HAVE_NEON_DOTPROD
    {"neon-dotprod", has_neon_dotprod, wisp_kernels_neon_dotprod},
#endif
#if WISP_HAVE_NEON
    {"neon", has_neon, wisp_kernels_neon},
#endif
#if WISP_HAVE_WASM_SIMD128
    {"wasm-simd128", has_wasm_simd128, wisp_kernels_wasm_simd128},
#endif
    {"scalar", always, scalar_table},
};

#define N_LEVELS ((int)(sizeof levels / sizeof levels[0]))

int wisp_simd_levels(const wisp_cpu_features *cpu, const char **names, int cap) {
    int n = 0;
    for (int i = 0; i < N_LEVELS; i++)
        if (levels[i].usable(cpu) && n < cap) names[n++] = levels[i].name;
    return n;
}

wisp_status wisp_simd_select(const wisp_cpu_features *cpu, const char *name, const wisp_kernels **out,
                             wisp_error *err) {
    bool automatic = !name || !*name || strcmp(name, "auto") == 0;
    for (int i = 0; i < N_LEVELS; i++) {
        if (!automatic && strcmp(levels[i].name, name) != 0) continue;
        if (!levels[i].usable(cpu)) {
            if (automatic) continue; /* the best level this CPU has is further down */
            break;
        }
        *out = levels[i].table();
        return WISP_OK;
    }
    char list[160];
    size_t n = 0;
    list[0] = 0;
    for (int i = 0; i < N_LEVELS; i++)
        if (levels[i].usable(cpu)) n += wisp_format(list + n, sizeof list - n, "%s%s", n ? ", " : "", levels[i].name);
    return wisp_fail(err, WISP_ERR_UNSUPPORTED, "kernel level '%s' is not available here (available: %s)", automatic ? "auto" : name, list);
}
