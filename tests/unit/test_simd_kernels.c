/* The x86 kernel levels (avx512, avx2) against the scalar reference, on the
 * CPU running the test, through the kernel-check library every level shares
 * (tests/lib/kernel_checks.h lists the checks; simd/x86.h states the bounds:
 * quantized products, quantizers, axpy, scale, conversions and attention's
 * value sums bit for bit; float dots within (n/8 + n/32 + 40) 2^-24
 * sum|w_i x_i|); levels the CPU lacks are named (the 128-bit levels are
 * test_simd_neon_wasm.c's). Then the scalar reference itself, which every
 * level answers to, against exact arithmetic with textbook bounds (on every
 * target: the reference's arithmetic is the platform's). Prints the table of
 * levels x checks. */
#include "check.h"
#include "simd.h"
#include "kernel_levels.h"

int main(void) {
    static const char *const levels[] = {"avx512", "avx2", "scalar"};
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    kc_check_levels(&cpu, levels, 3); /* scalar runs everywhere */
    return check_report("test_simd_kernels");
}
