/* The 128-bit SIMD levels (neon-dotprod, neon, wasm-simd128) against the
 * scalar reference, on the target that runs them (qemu-aarch64 with and
 * without dotprod, qemu-arm, node's WASI), through the kernel-check library
 * every level shares: the same checks as the x86 levels get, every length
 * 1..1023 on unaligned data (tests/lib/kernel_checks.h), with the bounds
 * vec128_kernels.inc states (float dots within (n/4 + n/32 + 40) 2^-24
 * sum|w_i x_i|; armv7's flushed silu intermediates within 2^-120). Levels
 * this build or CPU lacks are named; with none, the test is a platform skip.
 * Prints the table of levels x checks. */
#include "check.h"
#include "simd.h"
#include "kernel_levels.h"

int main(void) {
    static const char *const levels[] = {"neon-dotprod", "neon", "wasm-simd128"};
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    if (!kc_check_levels(&cpu, levels, 3))
        check_skip_platform("test_simd_neon_wasm",
                            "no NEON or WASM SIMD level in this build or CPU (make test-arm / test-wasm run it)");
    return check_report("test_simd_neon_wasm");
}
