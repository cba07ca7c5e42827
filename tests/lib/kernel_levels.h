/* The unit tests' side of the kernel checks (kernel_checks.h): run them on
 * each of a list of levels this build and CPU offer, count every check into
 * check.h's tally, and print the table of levels x checks. */
#ifndef WISP_KERNEL_LEVELS_H
#define WISP_KERNEL_LEVELS_H

#include "simd.h"

/* Returns how many of `levels` ran here (0: none is available, which the
 * caller reports as a platform skip). */
int kc_check_levels(const wisp_cpu_features *cpu, const char *const *levels, int n_levels);

#endif
