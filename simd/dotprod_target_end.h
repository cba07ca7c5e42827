/* Closes dotprod_target_begin.h (gcc's target pragma holds to the end of the
 * file by itself). */
#if defined(__aarch64__) && defined(__clang__)
#pragma clang attribute pop
#endif
