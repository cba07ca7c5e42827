/* A small deterministic random source for kernel tests: xorshift64 and
 * Box-Muller normals. Each test file gets its own state. */
#ifndef WISP_TEST_RNG_H
#define WISP_TEST_RNG_H

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 12345;

static inline void rng_seed(uint64_t s) { rng_state = s * 0x9e3779b97f4a7c15ull + 7; }

static inline uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static inline float rng_normal(void) {
    double u = ((double)(rng_next() >> 11) + 0.5) * 0x1.0p-53, v = (double)(rng_next() >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

#endif
