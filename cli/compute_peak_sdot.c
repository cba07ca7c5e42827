/* The int8 peak loop of the neon-dotprod level: simd/vec128_neon.h's own
 * pv_dot (SDOT: four int8 products summed into each int32 lane), compiled
 * for Armv8.2-A+dotprod as simd/neon_dotprod.c is, in a file of its own so
 * the rest of the CLI still runs on cores without it. compute_peak.c calls
 * it only for that level, which dispatch.c picks only when the CPU has it. */
#include "dotprod_target_begin.h"

#include "compute_peak.h"
#include "vec128.h"

#if WISP_HAVE_NEON_DOTPROD
#include "vec128_neon.h"

double cli_peak_int8_sdot(uint64_t n, const void *seed, uint32_t *sink) {
    const pv a = pv_prep(v8_load(seed)), b = pv_prep(v8_load((const int8_t *)seed + 16));
    /* the accumulator is an input of each SDOT: twelve chains, none foldable */
#define REP12(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11)
#define INIT(i) v32 acc##i = vdupq_n_s32(i);
    REP12(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc##i = pv_dot(acc##i, a, b);
        REP12(STEP)
#undef STEP
    }
    v32 f = vdupq_n_s32(0);
#define FOLD(i) f = veorq_s32(f, acc##i);
    REP12(FOLD)
#undef FOLD
    *sink = (uint32_t)vgetq_lane_s32(f, 0) ^ (uint32_t)vgetq_lane_s32(f, 3);
    return 12.0 * 16.0 * (double)n;
}
#endif

#include "dotprod_target_end.h"
