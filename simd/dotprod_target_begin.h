/* Included first by a file whose functions are compiled for Armv8.2-A+dotprod
 * (SDOT) while the rest of the binary still runs on cores without it
 * (Cortex-A53/A72: Raspberry Pi 3 and 4); such a file ends by including
 * dotprod_target_end.h. Its callers reach it only when the CPU reports the
 * extension. clang's target attribute applies per function; its intrinsic
 * header then lacks vdotq_s32, and vec128_neon.h calls the builtin behind it.
 * No include guard: each such file opens (and closes) the target itself. */
#if defined(__aarch64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
#define VEC128_DOTPROD 1
#endif
