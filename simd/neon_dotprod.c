/* The NEON level with the dotprod extension (SDOT: four int8 products summed
 * into each int32 lane in one instruction). Only this file is compiled for
 * Armv8.2-A+dotprod, so the rest of the binary still runs on cores without
 * it (Cortex-A53/A72: Raspberry Pi 3 and 4); dispatch.c picks this table only
 * when the CPU reports the extension. */
#if defined(__aarch64__)
#if defined(__clang__)
/* clang's target attribute applies per function; its intrinsic header then
 * lacks vdotq_s32, and vec128_neon.h calls the builtin behind it */
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
#define VEC128_DOTPROD 1
#endif

#include "vec128.h"

#if WISP_HAVE_NEON_DOTPROD
#include "vec128_neon.h"

#define VEC128_NAME "neon-dotprod"
#include "vec128_kernels.inc"

const wisp_kernels *wisp_kernels_neon_dotprod(void) { return &vec128_table; }
#endif

#if defined(__aarch64__) && defined(__clang__)
#pragma clang attribute pop
#endif
