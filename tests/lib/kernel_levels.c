#include "kernel_levels.h"

#include "check.h"
#include "kernel_checks.h"

#include <string.h>

static void print_line(const char *line) { puts(line); }

int kc_check_levels(const wisp_cpu_features *cpu, const char *const *levels, int n_levels) {
    enum { MAX_LEVELS = 8 };
    static wisp_kernels tables[MAX_LEVELS];
    static kc_run runs[MAX_LEVELS];
    uint8_t *scratch = malloc(KC_SCRATCH_BYTES);
    int n_runs = 0;
    if (!scratch) {
        CHECK(scratch != NULL, "no memory for %u bytes of scratch", KC_SCRATCH_BYTES);
        return 0;
    }
    for (int i = 0; i < n_levels && n_runs < MAX_LEVELS; i++) {
        const wisp_kernels *table;
        wisp_error err = {0};
        if (wisp_simd_select(cpu, levels[i], &table, &err) != WISP_OK) {
            printf("%s: not on this CPU or build (%s)\n", levels[i], err.message);
            continue;
        }
        kc_run *run = &runs[n_runs];
        tables[n_runs] = *table;
        wisp_kernels_complete(&tables[n_runs]);
        memset(run, 0, sizeof *run);
        run->k = &tables[n_runs];
        run->say = print_line;
        run->scratch = scratch;
        CHECK(kc_bounds_of(levels[i], &run->bounds), "level %s belongs to no family with stated bounds", levels[i]);
        kc_check_all(run);
        printf("%s: %ld checks, %ld failed\n", levels[i], run->checks, run->failures);
        check_count += (int)run->checks;
        check_failures += (int)run->failures;
        n_runs++;
    }
    free(scratch);
    if (n_runs) {
        puts("");
        kc_table_header(print_line);
        for (int i = 0; i < n_runs; i++) kc_table_row(&runs[i]);
    }
    return n_runs;
}
