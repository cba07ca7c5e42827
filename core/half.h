/* IEEE half (F16) and bfloat16 (BF16) <-> float conversions, bit-exact:
 * half->float and bf16->float are exact; float->half and float->bf16 round
 * to nearest even, as F16C hardware and ggml's scalar code do. */
#ifndef WISP_HALF_H
#define WISP_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t wisp_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float wisp_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float wisp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf, or nan: payload kept and made quiet, as F16C and NEON do */
        return wisp_bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
    if (exp == 0) {
        if (man == 0) return wisp_bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in float */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return wisp_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t wisp_f32_to_f16(float f) {
    uint32_t u = wisp_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* inf or nan (keep nan quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u | ((absu >> 13) & 0x3ffu) : 0));
    if (absu >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (absu < 0x38800000u) { /* result is subnormal or zero */
        if (absu < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t exp = absu >> 23;
        uint32_t man = (absu & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14..24 */
        uint32_t q = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = absu - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

static inline float wisp_bf16_to_f32(uint16_t h) { return wisp_bits_f32((uint32_t)h << 16); }

static inline uint16_t wisp_f32_to_bf16(float f) {
    uint32_t u = wisp_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u); /* quiet nan */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/* Unaligned little-endian loads: GGUF metadata and quant blocks carry no
 * alignment promise for multi-byte fields. */
static inline uint16_t wisp_load_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t wisp_load_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t wisp_load_u64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline float wisp_load_f32(const void *p) { float v; memcpy(&v, p, 4); return v; }
static inline void wisp_store_u16(void *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void wisp_store_u32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void wisp_store_f32(void *p, float v) { memcpy(p, &v, 4); }

#endif
