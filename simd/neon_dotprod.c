/* The NEON level with the dotprod extension (SDOT: four int8 products summed
 * into each int32 lane in one instruction), compiled for it
 * (dotprod_target_begin.h); dispatch.c picks this table only when the CPU
 * reports the extension. */
#include "dotprod_target_begin.h"

#include "vec128.h"

#if WISP_HAVE_NEON_DOTPROD
#include "vec128_neon.h"

#define VEC128_NAME "neon-dotprod"
#include "vec128_kernels.inc"

const wisp_kernels *wisp_kernels_neon_dotprod(void) { return &vec128_table; }
#endif

#include "dotprod_target_end.h"
