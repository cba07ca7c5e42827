/* Counter-based random numbers for training: a value is a pure function of
 * (seed, counters), so dropout masks can be regenerated during the backward
 * pass (and after a resume) instead of being stored, and no generator state
 * is shared between threads. */
#ifndef WISP_TRAIN_RNG_H
#define WISP_TRAIN_RNG_H

#include <stdint.h>

/* splitmix64's finalizer: a bijective mix with good avalanche. */
static inline uint64_t wisp_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A well-mixed 64-bit value for (key, index). */
static inline uint64_t wisp_hash2(uint64_t key, uint64_t index) {
    return wisp_mix64(key ^ wisp_mix64(index + 0x9e3779b97f4a7c15ull));
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float wisp_unit_float(uint64_t bits) { return (float)(bits >> 40) * (1.0f / 16777216.0f); }

#endif
