/* What the processor running the CLI can do (for choosing kernels). */
#ifndef WISP_CLI_CPU_FEATURES_H
#define WISP_CLI_CPU_FEATURES_H

#include "simd.h"

void cli_cpu_features(wisp_cpu_features *f);

#endif
