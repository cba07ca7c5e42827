/* The NEON level (aarch64 and armv7 with NEON): vec128_kernels.inc over
 * vec128_neon.h. */
#include "vec128.h"

#if WISP_HAVE_NEON
#include "vec128_neon.h"

#define VEC128_NAME "neon"
#include "vec128_kernels.inc"

const wisp_kernels *wisp_kernels_neon(void) { return &vec128_table; }
#endif
