/* Choosing the kernel table. Instruction-set files register here. */
#include <string.h>

#include "simd.h"

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

/* Best first; the scalar reference is always last. */
static const level levels[] = {
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
        if (!levels[i].usable(cpu)) break;
        *out = levels[i].table();
        return WISP_OK;
    }
    char list[160];
    size_t n = 0;
    list[0] = 0;
    for (int i = 0; i < N_LEVELS; i++)
        if (levels[i].usable(cpu)) n += wisp_format(list + n, sizeof list - n, "%s%s", n ? ", " : "", levels[i].name);
    return wisp_fail(err, WISP_ERR_UNSUPPORTED, "kernel level '%s' is not available here (available: %s)", name, list);
}
