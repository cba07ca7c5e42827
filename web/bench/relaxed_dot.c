/* Would relaxed SIMD's 8-bit dot product speed up wasm decode? Two copies of
 * one Q4_0-shaped decode loop, differing only in how a block's 32 levels
 * meet the activation's 32 bytes:
 *   - dot_i16: the engine's way in SIMD128 (simd/vec128_wasm.h): nibbles cut
 *     out in 16-bit lanes, activations widened to 16 bits once per product,
 *     four i32x4.dot_i16x8_s per block;
 *   - dot_relaxed: nibbles as bytes (0..15, so the 7-bit operand's result is
 *     the same on every engine) and two i32x4.relaxed_dot_i8x16_i7x16_add_s.
 * Both keep block_decode's memory order (simd/vec128_kernels.inc): a tile's
 * four rows read front to back keeping per-block integer partials, then
 * reduced across the rows and scaled per block. Block scales are floats
 * here, not f16, in both. Built by `make bench-relaxed-dot` with clang-19
 * (Debian's Emscripten cannot emit the standard relaxed opcodes), run by
 * relaxed_dot.mjs. */
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

#define MAX_BLOCKS 512 /* 16384 inputs */
#define CHUNK 64       /* blocks per pass, as DECODE_CHUNK */

static int16_t act_i16[MAX_BLOCKS * 32] __attribute__((aligned(16)));
static int8_t act_i8[MAX_BLOCKS * 32] __attribute__((aligned(16)));
static float act_scale[MAX_BLOCKS];

/* No libc: the partials' arrays may be copied or cleared by the compiler. */
void *memcpy(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--) *d++ = *s++;
    return dst;
}
void *memset(void *dst, int c, size_t n) {
    unsigned char *d = dst;
    while (n--) *d++ = (unsigned char)c;
    return dst;
}

/* The activation, prepared once for both kernels: as bytes, and as 16-bit
 * lanes in the order the 16-bit nibble fields come out (even bytes of a
 * 16-byte half, then odd ones). Returns 0 when it is too long. */
__attribute__((export_name("prepare"))) int prepare(const int8_t *x, const float *scales, int blocks) {
    if (blocks < 1 || blocks > MAX_BLOCKS) return 0;
    for (int b = 0; b < blocks; b++) {
        act_scale[b] = scales[b];
        for (int i = 0; i < 32; i++) act_i8[32 * b + i] = x[32 * b + i];
        for (int half = 0; half < 2; half++)
            for (int k = 0; k < 8; k++) {
                act_i16[32 * b + 16 * half + k] = x[32 * b + 16 * half + 2 * k];
                act_i16[32 * b + 16 * half + 8 + k] = x[32 * b + 16 * half + 2 * k + 1];
            }
    }
    return 1;
}

static inline v128_t sum_across(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* Block b's 16 nibble bytes q against the activation, four partial lanes. */
static inline v128_t block_dot_i16(v128_t q, int b) {
    const v128_t m = wasm_i16x8_splat(15);
    const v128_t *a = (const v128_t *)(act_i16 + 32 * b);
    v128_t s = wasm_i32x4_dot_i16x8(wasm_v128_and(q, m), a[0]);
    s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(q, 8), m), a[1]));
    s = wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(q, 4), m), a[2]));
    return wasm_i32x4_add(s, wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(q, 12), m), a[3]));
}

static inline v128_t block_dot_relaxed(v128_t q, int b) {
    const v128_t *a = (const v128_t *)(act_i8 + 32 * b);
    v128_t s = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a[0], wasm_v128_and(q, wasm_i8x16_splat(15)), wasm_i32x4_splat(0));
    return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a[1], wasm_u8x16_shr(q, 4), s);
}

/* out[r] = sum over blocks of scale[r][b] * act_scale[b] * dot(row r, block b)
 * for rows (a multiple of 4) rows of `blocks` blocks of 16 nibble bytes;
 * scale holds a tile's four rows' scales side by side per block. */
#define DECODE_LOOP(name, block_dot)                                                                        \
    __attribute__((export_name(#name))) void name(const uint8_t *q, const float *scale, int rows, int blocks, \
                                                  float *out) {                                               \
        for (int r0 = 0; r0 < rows; r0 += 4) {                                                                \
            v128_t acc = wasm_f32x4_splat(0), part[CHUNK][4];                                                 \
            for (int c = 0; c < blocks; c += CHUNK) {                                                         \
                const int n = blocks - c < CHUNK ? blocks - c : CHUNK;                                        \
                for (int r = 0; r < 4; r++) {                                                                 \
                    const uint8_t *w = q + ((size_t)(r0 + r) * blocks + c) * 16;                              \
                    for (int i = 0; i < n; i++, w += 16) part[i][r] = block_dot(wasm_v128_load(w), c + i);    \
                }                                                                                             \
                for (int i = 0; i < n; i++) {                                                                 \
                    const v128_t isum = sum_across(part[i][0], part[i][1], part[i][2], part[i][3]);           \
                    const v128_t dw = wasm_v128_load(scale + ((size_t)r0 * blocks + 4 * (c + i)));            \
                    const v128_t d = wasm_f32x4_mul(dw, wasm_f32x4_splat(act_scale[c + i]));                  \
                    acc = wasm_f32x4_add(acc, wasm_f32x4_mul(d, wasm_f32x4_convert_i32x4(isum)));             \
                }                                                                                             \
            }                                                                                                 \
            wasm_v128_store(out + r0, acc);                                                                   \
        }                                                                                                     \
    }

DECODE_LOOP(dot_i16, block_dot_i16)
DECODE_LOOP(dot_relaxed, block_dot_relaxed)
